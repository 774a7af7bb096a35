r"""RMOD on vLLM: blockwise robust multi-objective decoding driven from outside the engine.

Paper: Son, Bankes et al., "Robust Multi-Objective Controlled Decoding of Large Language Models", arXiv 2503.08796
(https://huggingface.co/papers/2503.08796), Sec. 3-4. Same arguments and :class:`~hfx.generation.rmod.RMODOutput`
as the HF path (:func:`hfx.generation.rmod.rmod`).

Every block, for each unfinished prompt, one vLLM request ``SamplingParams(n=K, max_tokens=B)`` on the current
prefix (token ids; with prefix caching only the new block's tokens are computed) draws the K candidate blocks from
the reference model; EOS ends a candidate early. The candidates are laid out exactly as the HF path lays them out
(left-padded prompts, chosen blocks, candidates padded with ``pad_token_id`` after EOS, value mask 1 on real tokens),
scored by the same value function, weighed by the same solver (:func:`~hfx.generation.rmod.robust_weights`, or the
fixed weights of the CD baseline), and the winning block is appended. Given the same candidates, the two paths
choose the same blocks (tested).
"""

from __future__ import annotations

import torch
from vllm import SamplingParams

from hfx.integrations.vllm import eos_token_ids, generate_token_ids, require_vllm

from .generate import RMODOutput, _call_value_function, _objective_names, _parameters, _solver_settings, _validate
from .weights import DEFAULT_TOL, fixed_weights, robust_weights, tilted_probs


def _sample_block(llm, prefixes: list[list[int]], num_branches: int, max_tokens: int, sampling: dict, seeds):
    """K candidate blocks for each prefix: ``list`` (per prefix) of ``list`` (per branch) of token-id lists.

    A candidate that emits EOS ends with it. Split out so that tests can inject candidates.
    """
    params = [
        SamplingParams(n=num_branches, max_tokens=max_tokens, seed=s, detokenize=False, **sampling) for s in seeds
    ]
    outs = generate_token_ids(llm, prefixes, params)
    return [[list(c.token_ids) for c in sorted(o.outputs, key=lambda c: c.index)] for o in outs]


def _prompt_tensors(prompts, attention_mask, tokenizer, pad_token_id):
    if isinstance(prompts, torch.Tensor):
        if prompts.dim() != 2:
            raise ValueError(
                f"`prompts` as a tensor must have shape (batch_size, prompt_length), got {tuple(prompts.shape)}"
            )
        mask = attention_mask if attention_mask is not None else torch.ones_like(prompts)
        return prompts.cpu().long(), mask.cpu().long()
    if isinstance(prompts, str) or not isinstance(prompts, (list, tuple)) or not prompts:
        raise TypeError("`prompts` must be a non-empty list of strings or of token-id lists, or a (B, P) tensor")
    lists = [
        tokenizer.encode(p, add_special_tokens=False) if isinstance(p, str) else [int(t) for t in p] for p in prompts
    ]
    if any(len(p) == 0 for p in lists):
        raise ValueError("`prompts` contains an empty prompt")
    length = max(len(p) for p in lists)
    ids = torch.full((len(lists), length), pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(lists), length), dtype=torch.long)
    for b, p in enumerate(lists):
        ids[b, length - len(p) :] = torch.tensor(p)
        mask[b, length - len(p) :] = 1
    return ids, mask


@torch.no_grad()
def rmod_vllm(
    llm,
    prompts,
    attention_mask: torch.Tensor | None = None,
    value_function=None,
    max_new_tokens: int = 128,
    do_sample: bool = True,
    temperature: float | None = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    num_branches: int = 16,
    block_size: int = 16,
    rmod_lambda: float = 1.0,
    weights="robust",
    weight_iterations: int | None = None,
    weight_step_size: float | None = None,
    weight_grad_clip: float | None = None,
    weight_objective: str = "mean_exp",
    block_selection: str = "argmax",
    seed: int | list[int] | None = None,
    value_batch_size: int | None = None,
    weight_solver: str = "exact",
    weight_tol: float = DEFAULT_TOL,
    pad_token_id: int | None = None,
    tokenizer=None,
    return_dict_in_generate: bool = False,
    use_tqdm: bool = False,
):
    r"""Robust multi-objective controlled decoding (RMOD) with a vLLM engine as the reference policy ``pi_ref``.

    The RMOD arguments (``value_function``, ``num_branches``, ``block_size``, ``rmod_lambda``, ``weights``,
    ``weight_*``, ``block_selection``, ``seed``, ``value_batch_size``) mean what they mean for
    :func:`hfx.generation.rmod.rmod`; the generation-config settings are passed directly.

    Args:
        llm (`vllm.LLM`): the reference model (prefix caching on: :func:`hfx.integrations.vllm.load_vllm`).
        prompts (`list[str]`, `list[list[int]]` or `torch.LongTensor` of shape `(batch_size, prompt_length)`): the
            prompts (a tensor is left-padded, with ``attention_mask``; strings are tokenised without special tokens).
        attention_mask (`torch.LongTensor` of shape `(batch_size, prompt_length)`, *optional*): for a tensor.
        value_function (`Callable`): ``vf(input_ids (N, L), attention_mask (N, L)[, prompt_length]) -> (N, G)``,
            evaluated in this process (e.g. :class:`~hfx.generation.rmod.MultiObjectiveValueModel`).
        max_new_tokens (`int`, *optional*, defaults to 128): tokens generated per prompt at most.
        do_sample (`bool`, *optional*, defaults to `True`): required for ``num_branches > 1``.
        temperature, top_k, top_p: vLLM sampling settings of the candidate blocks (``top_k`` 0/None: off).
        seed (`int` or `list[int]`, *optional*): per-prompt base seeds (block j uses ``seed_b + j``); ``None`` draws
            one from torch's global RNG, so ``torch.manual_seed`` makes a call reproducible.
        pad_token_id (`int`, *optional*): defaults to the tokenizer's pad token, else EOS.
        tokenizer (*optional*): defaults to ``llm.get_tokenizer()`` (string prompts).
        return_dict_in_generate (`bool`, *optional*, defaults to `False`): return :class:`RMODOutput`.
        use_tqdm (`bool`, *optional*): a progress bar over blocks.

    Returns:
        `torch.LongTensor` of shape `(batch_size, sequence_length)` (prompts as given + generated tokens, padding
        after EOS), or :class:`~hfx.generation.rmod.RMODOutput`.

    Raises:
        TypeError / ValueError: as the HF path (bad value function, ``num_branches``, ``block_size``, weights, ...;
            ``num_branches > 1`` without ``do_sample``; ``max_new_tokens < 1``).
    """
    require_vllm("rmod_vllm")
    _validate(value_function, num_branches, block_size, rmod_lambda, weights, block_selection, seed)
    solver_settings = _solver_settings(
        weights,
        rmod_lambda,
        weight_iterations,
        weight_step_size,
        weight_grad_clip,
        weight_objective,
        weight_solver,
        weight_tol,
    )
    if num_branches > 1 and not do_sample:
        raise ValueError(
            f"`num_branches`={num_branches} candidates must be sampled: pass `do_sample=True` (RMOD draws K "
            "continuations from the reference model with your temperature / top_k / top_p)"
        )
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"`max_new_tokens` must be an integer >= 1, but is {max_new_tokens!r}")
    from tqdm.auto import tqdm

    tokenizer = tokenizer or llm.get_tokenizer()
    eos_ids = eos_token_ids(llm)
    if pad_token_id is None:
        pad_token_id = getattr(tokenizer, "pad_token_id", None)
        if pad_token_id is None:
            pad_token_id = eos_ids[0] if eos_ids else 0
    pad = int(pad_token_id)
    input_ids, value_mask = _prompt_tensors(prompts, attention_mask, tokenizer, pad)
    K = num_branches
    batch_size, prompt_length = input_ids.shape
    max_length = prompt_length + max_new_tokens
    if isinstance(seed, (list, tuple)):
        if len(seed) != batch_size:
            raise ValueError(f"`seed` must have one entry per prompt ({batch_size}), got {len(seed)}")
        seeds = [int(s) for s in seed]
    else:
        base = int(seed) if seed is not None else int(torch.randint(0, 2**31 - 1, (1,)).item())
        seeds = [base] * batch_size if seed is not None else [base + 7919 * b for b in range(batch_size)]
    sampling = {"stop_token_ids": eos_ids}
    if do_sample:
        sampling.update(
            temperature=float(temperature if temperature is not None else 1.0),
            top_k=int(top_k) if top_k else -1,
            top_p=float(top_p if top_p is not None else 1.0),
        )
    else:
        sampling.update(temperature=0.0)
    pass_prompt = "prompt_length" in _parameters(value_function)
    return_dict = bool(return_dict_in_generate)
    unfinished = torch.ones(batch_size, dtype=torch.bool)
    block_weights, block_values, chosen = [], [], []
    num_objectives = None
    generator = torch.Generator().manual_seed(seeds[0]) if block_selection == "sample" else None
    bar = tqdm(total=max_new_tokens, desc="rmod blocks", unit="tok", disable=not use_tqdm, leave=False)
    block_index = 0
    while input_ids.shape[1] < max_length and unfinished.any():
        length = input_ids.shape[1]
        max_tokens = min(block_size, max_length - length)
        active = unfinished.nonzero().flatten().tolist()
        prefixes = [input_ids[b][value_mask[b].bool()].tolist() for b in active]
        sampled = _sample_block(llm, prefixes, K, max_tokens, sampling, [seeds[b] + block_index for b in active])
        candidates = [[[] for _ in range(K)] for _ in range(batch_size)]
        for b, per_prompt in zip(active, sampled):
            if len(per_prompt) != K:
                raise RuntimeError(f"vLLM returned {len(per_prompt)} candidates for a prompt, expected {K}")
            candidates[b] = per_prompt
        columns = max(len(c) for per_prompt in candidates for c in per_prompt)
        block = torch.full((batch_size, K, columns), pad, dtype=torch.long)
        block_mask = torch.zeros((batch_size, K, columns), dtype=torch.long)
        ended = torch.zeros((batch_size, K), dtype=torch.bool)
        for b in active:
            for k, c in enumerate(candidates[b]):
                block[b, k, : len(c)] = torch.tensor(c, dtype=torch.long)
                block_mask[b, k, : len(c)] = 1
                ended[b, k] = len(c) > 0 and c[-1] in eos_ids
        ids = torch.cat([input_ids.repeat_interleave(K, dim=0), block.view(batch_size * K, columns)], dim=-1)
        vmask = torch.cat([value_mask.repeat_interleave(K, dim=0), block_mask.view(batch_size * K, columns)], dim=-1)
        unf = unfinished.repeat_interleave(K) & ~ended.view(-1)
        if ids.shape[1] >= max_length:
            unf[:] = False

        if K > 1 or return_dict:
            values = _call_value_function(value_function, ids, vmask, prompt_length, value_batch_size, pass_prompt)
            values = values.cpu().view(batch_size, K, -1)
            if num_objectives is None:
                num_objectives = values.shape[-1]
                if not isinstance(weights, str) and torch.as_tensor(weights).shape[-1] != num_objectives:
                    raise ValueError(
                        f"`weights` has {torch.as_tensor(weights).shape[-1]} entries but `value_function` returned "
                        f"{num_objectives} objectives; pass one weight per objective"
                    )
            if weights == "robust":
                w = robust_weights(values, **solver_settings)
            else:
                w = fixed_weights(weights, values.shape[-1], batch_size, dtype=values.dtype)
            if K == 1:
                k_star = torch.zeros(batch_size, dtype=torch.long)
            elif block_selection == "argmax":
                k_star = (values @ w.unsqueeze(-1)).squeeze(-1).argmax(dim=-1)
            else:
                k_star = torch.multinomial(tilted_probs(values, w, float(rmod_lambda)), 1, generator=generator)[:, 0]
            block_weights.append(w)
            block_values.append(values)
            chosen.append(k_star)
        else:
            k_star = torch.zeros(batch_size, dtype=torch.long)

        rows = torch.arange(batch_size) * K + k_star
        input_ids, value_mask, unfinished = ids[rows], vmask[rows], unf[rows]
        bar.update(columns)
        block_index += 1
    bar.close()

    if not unfinished.any() and input_ids.shape[1] > prompt_length:
        real = value_mask[:, prompt_length:].any(dim=0).nonzero()
        last = int(real.max()) + 1 if real.numel() else 0
        input_ids = input_ids[:, : prompt_length + last]

    if return_dict:
        return RMODOutput(
            sequences=input_ids,
            block_weights=tuple(block_weights),
            block_values=tuple(block_values),
            chosen_branches=tuple(chosen),
            objective_names=_objective_names(value_function),
        )
    return input_ids


__all__ = ["rmod_vllm"]
