"""RMOD's blockwise decoding loop as a transformers ``custom_generate`` callable.

``model.generate(**inputs, custom_generate="rmod", value_function=vf, do_sample=True, num_branches=16,
block_size=16, rmod_lambda=1.0, weights="robust")``: transformers prepares the generation config, logits processors
(temperature / top-k / top-p ...), stopping criteria (max length, EOS, stop strings with ``tokenizer=``) and model
kwargs, then calls :func:`rmod` instead of its sampling loop.
"""

from __future__ import annotations

import inspect
import logging
import math
from dataclasses import dataclass

import torch
from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList
from transformers.cache_utils import Cache, StaticCache
from transformers.utils import ModelOutput

from ..thinkmerge.generate import apply_logits_processors, check_processor_support, generate_call_argument
from .weights import DEFAULT_TOL, fixed_weights, robust_weights, tilted_probs


logger = logging.getLogger(__name__)

BLOCK_SELECTIONS = ("argmax", "sample")


@dataclass
class RMODOutput(ModelOutput):
    """Output of :func:`rmod` when ``return_dict_in_generate=True``.

    Args:
        sequences (`torch.LongTensor` of shape `(batch_size, sequence_length)`):
            prompts + generated tokens (padding after EOS).
        block_weights (`tuple(torch.FloatTensor)`, one `(batch_size, num_objectives)` tensor per decoded block):
            the objective weights used to choose each block (worst-case weights for ``weights="robust"``).
        block_values (`tuple(torch.FloatTensor)`, one `(batch_size, num_branches, num_objectives)` tensor per block):
            the value of every candidate block for every objective.
        chosen_branches (`tuple(torch.LongTensor)`, one `(batch_size,)` tensor per block): the index ``k*`` kept.
        objective_names (`list[str]`, *optional*): the value function's objective names, when it has them.
        scores (`tuple(torch.FloatTensor)`, one `(batch_size, vocab_size)` tensor per generated token, *optional*):
            with ``output_scores=True``: the processed scores (after the logits processors) of the kept branch,
            as in ``GenerateDecoderOnlyOutput.scores``.
        logits (`tuple(torch.FloatTensor)`, one `(batch_size, vocab_size)` tensor per generated token, *optional*):
            with ``output_logits=True``: the raw logits of the kept branch.
    """

    sequences: torch.LongTensor | None = None
    block_weights: tuple[torch.FloatTensor, ...] | None = None
    block_values: tuple[torch.FloatTensor, ...] | None = None
    chosen_branches: tuple[torch.LongTensor, ...] | None = None
    objective_names: list[str] | None = None
    scores: tuple[torch.FloatTensor, ...] | None = None
    logits: tuple[torch.FloatTensor, ...] | None = None


def _validate(value_function, num_branches, block_size, rmod_lambda, weights, block_selection, seed) -> None:
    if value_function is None or not callable(value_function):
        raise TypeError(
            "`value_function` must be a callable `values = vf(input_ids, attention_mask)` returning (N, G) values "
            f"(e.g. hfx.MultiObjectiveValueModel or hfx.RewardFunctionValues), got {type(value_function)}"
        )
    if isinstance(num_branches, bool) or not isinstance(num_branches, int) or num_branches < 1:
        raise ValueError(f"`num_branches` (K) must be an integer >= 1, but is {num_branches!r}")
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"`block_size` (B) must be an integer >= 1, but is {block_size!r}")
    if not isinstance(rmod_lambda, (int, float)) or not math.isfinite(rmod_lambda) or rmod_lambda < 0:
        raise ValueError(f"`rmod_lambda` must be a finite number >= 0, but is {rmod_lambda!r}")
    if isinstance(weights, str) and weights not in ("robust", "uniform"):
        raise ValueError(f"`weights` must be 'robust', 'uniform' or a sequence of G floats, but is {weights!r}")
    if block_selection not in BLOCK_SELECTIONS:
        raise ValueError(f"`block_selection` must be one of {BLOCK_SELECTIONS}, but is {block_selection!r}")
    if seed is not None and not isinstance(seed, (int, list, tuple)):
        raise TypeError(f"`seed` must be an int, a list of ints (one per prompt) or None, got {type(seed)}")
    num_objectives = getattr(value_function, "num_objectives", None)
    if isinstance(num_objectives, int) and not isinstance(weights, str):
        n = torch.as_tensor(weights).shape[-1] if torch.as_tensor(weights).dim() else 1
        if n != num_objectives:
            raise ValueError(
                f"`weights` has {n} entries but `value_function` has {num_objectives} objectives; pass one weight "
                "per objective"
            )


def _solver_settings(
    weights,
    rmod_lambda,
    weight_iterations,
    weight_step_size,
    weight_grad_clip,
    weight_objective,
    weight_solver,
    weight_tol,
) -> dict:
    """The :func:`robust_weights` keyword arguments of an RMOD call, validated before any decoding (shared by the HF
    and vLLM paths)."""
    solver_settings = dict(
        rmod_lambda=float(rmod_lambda),
        num_iterations=weight_iterations,
        step_size=weight_step_size,
        grad_clip=weight_grad_clip,
        objective=weight_objective,
        solver=weight_solver,
        tol=weight_tol,
    )
    if weight_solver == "exact":
        for name, given in (("weight_step_size", weight_step_size), ("weight_grad_clip", weight_grad_clip)):
            if given is not None:
                raise ValueError(
                    f"`{name}` is a setting of `weight_solver`='authors_loop' (the reference code's gradient loop); "
                    f"the default exact solver has none. Pass `weight_solver`='authors_loop' or drop `{name}`."
                )
    if weights == "robust":  # validate the solver settings before decoding (one objective returns at once)
        robust_weights(torch.zeros(1, 1), **solver_settings)
    return solver_settings


def _make_generators(seed, batch_size: int, device) -> list[torch.Generator] | None:
    if seed is None:
        return None
    seeds = [seed] * batch_size if isinstance(seed, int) else list(seed)
    if len(seeds) != batch_size:
        raise ValueError(f"`seed` must have one entry per prompt ({batch_size}), got {len(seeds)}")
    gens = []
    for s in seeds:
        g = torch.Generator(device=device)
        g.manual_seed(int(s))
        gens.append(g)
    return gens


def _sample_tokens(scores: torch.Tensor, do_sample: bool, generators, num_branches: int) -> torch.Tensor:
    """One token per row of ``scores`` (B*K, V); per-prompt generators when given, else the global RNG."""
    if not do_sample:
        return torch.argmax(scores, dim=-1)
    probs = torch.softmax(scores, dim=-1)
    if generators is None:
        return torch.multinomial(probs, num_samples=1).squeeze(1)  # same draw as GenerationMixin._sample
    out = [
        torch.multinomial(probs[i * num_branches : (i + 1) * num_branches], 1, generator=g).squeeze(1)
        for i, g in enumerate(generators)
    ]
    return torch.cat(out)


def _map_model_kwargs(model_kwargs: dict, fn_tensor, fn_cache) -> dict:
    out = {}
    for key, value in model_kwargs.items():
        if isinstance(value, Cache):
            fn_cache(value)
            out[key] = value
        elif isinstance(value, torch.Tensor) and value.dim() > 0 and key != "logits_to_keep":
            out[key] = fn_tensor(key, value)
        else:
            out[key] = value
    return out


def _call_value_function(value_function, input_ids, attention_mask, prompt_length, value_batch_size, pass_prompt):
    chunks = []
    step = value_batch_size or input_ids.shape[0]
    for start in range(0, input_ids.shape[0], step):
        ids, mask = input_ids[start : start + step], attention_mask[start : start + step]
        kwargs = {"prompt_length": prompt_length} if pass_prompt else {}
        out = value_function(ids, mask, **kwargs)
        if isinstance(out, (ModelOutput, dict)):
            if out.get("last_values") is None:
                raise TypeError("`value_function` returned a ModelOutput without `last_values`")
            out = out["last_values"]
        if not isinstance(out, torch.Tensor):
            out = torch.as_tensor(out)
        if out.dim() == 1:
            out = out.unsqueeze(-1)
        if out.dim() != 2 or out.shape[0] != ids.shape[0]:
            raise ValueError(
                f"`value_function` must return values of shape (N, G) = ({ids.shape[0]}, G), got {tuple(out.shape)}"
            )
        if out.is_floating_point() and not torch.isfinite(out).all():
            raise ValueError(
                "`value_function` returned NaN or infinite values; RMOD cannot weigh objectives on them (check the "
                "value model / objective for overflow)"
            )
        chunks.append(out.float())
    return torch.cat(chunks, dim=0)


@torch.no_grad()
def rmod(
    model,
    input_ids: torch.LongTensor,
    logits_processor: LogitsProcessorList,
    stopping_criteria: StoppingCriteriaList,
    generation_config: GenerationConfig,
    value_function=None,
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
    **model_kwargs,
):
    r"""Robust multi-objective controlled decoding (RMOD), blockwise, as a ``custom_generate`` callable.

    For every block: draw ``K = num_branches`` continuations of ``B = block_size`` tokens from the reference model
    (``model``, with the user's sampling settings: temperature, top-k, top-p, ... through ``logits_processor``),
    score each prefix+block with ``value_function`` -> ``V`` `(batch, K, G)`, compute the worst-case weights
    ``w* = argmin_{w in simplex} log mean_k exp(lambda * V[k] @ w)`` (:func:`robust_weights`: solved to a stated
    tolerance by default, or the reference code's truncated loop with ``weight_solver="authors_loop"``), keep the block
    ``k* = argmax_k V[k] @ w*`` (or sample ``k*`` from the tilted policy ``softmax(lambda * V @ w*)`` with
    ``block_selection="sample"``). Sequences that emit EOS are padded; the KV cache of the chosen prefix is reused
    (expanded K times per block, then narrowed to the chosen branch).

    HF integration: the processors ``generate`` builds for B prompts (``repetition_penalty``, ``no_repeat_ngram_size``,
    ``bad_words_ids``, ``min_new_tokens``, ``suppress_tokens``, ``sequence_bias``, ``prefix_allowed_tokens_fn``, yours)
    see their rows in that layout although RMOD samples ``B * K`` rows
    (:func:`hfx.generation.thinkmerge.generate.apply_logits_processors`). A ``streamer`` receives each chosen block
    once it is chosen. ``output_scores`` / ``output_logits`` return the kept branch's per-token scores / logits
    (holding ``block_size`` steps of all ``B * K`` rows until the block is chosen). Stop strings need the tokenizer:
    ``generate(..., custom_generate="rmod", tokenizer=tok, stop_strings=[...])``; transformers 5.x drops
    ``tokenizer=`` before calling a *callable*, so with ``custom_generate=hfx.rmod`` pass
    ``stopping_criteria=StoppingCriteriaList([StopStringCriteria(tok, [...])])`` instead.

    Source: Son, Bankes et al., "Robust Multi-Objective Controlled Decoding of Large Language Models",
    arXiv 2503.08796 (https://huggingface.co/papers/2503.08796), Sec. 3-4 and the reference code's
    ``blockwise_robust_decoder.py``. ``weights="uniform"`` or a list of G weights gives the fixed-weight
    controlled-decoding (CD) baseline with the very same candidate blocks (same seed).

    Args:
        model (`PreTrainedModel`): the reference policy ``pi_ref`` (a decoder-only LM).
        input_ids (`torch.LongTensor` of shape `(batch_size, prompt_length)`): left-padded prompts.
        logits_processor, stopping_criteria, generation_config: prepared by ``generate``.
        value_function (`Callable`): ``vf(input_ids (N, L), attention_mask (N, L)) -> (N, G)``; see
            :mod:`hfx.generation.rmod.value_functions` for the protocol.
        num_branches (`int`, *optional*, defaults to `16`): ``K`` candidates per block (>= 1). ``K = 1`` is plain
            ancestral sampling from ``pi_ref``.
        block_size (`int`, *optional*, defaults to `16`): ``B`` tokens per block (>= 1).
        rmod_lambda (`float`, *optional*, defaults to `1.0`): ``lambda >= 0`` (0 gives uniform weights).
        weights (`str` or sequence of `float`, *optional*, defaults to `"robust"`): ``"robust"`` (RMOD),
            ``"uniform"`` (CD-Uniform) or G fixed non-negative weights (normalised; a one-hot = single-objective CD).
        weight_iterations (`int`, *optional*): ``"exact"``: iteration cap (default 100); ``"authors_loop"``: the
            number of gradient steps ``I`` (default 10).
        weight_step_size (`float`, *optional*): ``"authors_loop"`` only: ``eta0`` (default 1.0); the step at
            iteration t is ``eta0 / sqrt(t + 1)``.
        weight_grad_clip (`float`, *optional*): ``"authors_loop"`` only: gradient clipping (default 10.0).
        weight_objective (`str`, *optional*, defaults to `"mean_exp"`): the authors' loop's objective form (the
            code's); ``"log_mean_exp"`` was removed (it stalled at wrong vertices; see :func:`robust_weights`).
        block_selection (`str`, *optional*, defaults to `"argmax"`): ``"argmax"`` (code, Best-of-K style) or
            ``"sample"`` (the theoretical tilted policy) [reconstruction].
        seed (`int` or `list[int]`, *optional*): when given, every prompt samples from its own
            ``torch.Generator`` seeded with ``seed`` (or ``seed[i]``), so a prompt's output does not depend on the
            other prompts in the batch. When ``None`` the global RNG is used exactly as ``GenerationMixin._sample``
            does (so ``K = 1`` reproduces ``generate(do_sample=True)`` under the same ``torch.manual_seed``).
        value_batch_size (`int`, *optional*): score at most this many sequences per value-function call.
        weight_solver (`str`, *optional*, defaults to `"exact"`): ``"exact"`` (the convex problem solved until the
            Frank-Wolfe gap is below ``weight_tol``) or ``"authors_loop"`` (the reference code's 10 clipped steps,
            reproducing the released code; not the minimiser).
        weight_tol (`float`, *optional*, defaults to `1e-9`): tolerance of the exact solver (see
            :func:`robust_weights`).

    Returns:
        `torch.LongTensor` of shape `(batch_size, sequence_length)`, or :class:`RMODOutput` when
        ``return_dict_in_generate=True``.

    Raises:
        TypeError: if ``value_function`` is not callable.
        ValueError: for ``num_branches < 1``, ``block_size < 1``, a negative ``rmod_lambda``, weights whose length
            differs from the value function's number of objectives, ``num_branches > 1`` without ``do_sample=True``,
            an encoder-decoder model, or weight-solver settings :func:`robust_weights` rejects (e.g.
            ``weight_step_size`` with ``weight_solver="exact"``).
        TypeError: for a static cache (RMOD resizes the batch every block).
        NotImplementedError: for ``guidance_scale != 1`` or SynthID watermarking (processors with per-row state).
    """
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
    check_processor_support(generation_config, "RMOD")
    if model.config.is_encoder_decoder:
        raise ValueError("RMOD supports decoder-only models; got an encoder-decoder model")
    do_sample = bool(generation_config.do_sample)
    if num_branches > 1 and not do_sample:
        raise ValueError(
            f"`num_branches`={num_branches} candidates must be sampled: pass `do_sample=True` to `generate` "
            "(RMOD draws K continuations from the reference model with your temperature / top_k / top_p)"
        )
    if isinstance(model_kwargs.get("cache"), StaticCache):
        raise TypeError("RMOD needs a dynamic cache (it resizes the batch per block); do not use a static cache")

    K = num_branches
    batch_size, prompt_length = input_ids.shape
    if batch_size == 0 or prompt_length == 0:
        raise ValueError(
            f"`input_ids` is empty (shape {tuple(input_ids.shape)}); RMOD needs at least one prompt token per row"
        )
    device = input_ids.device
    pad_token_id = generation_config._pad_token_tensor
    if pad_token_id is None:
        pad_token_id = torch.tensor(0, device=device)
    pad_token_id = pad_token_id.to(device)
    has_eos_stopping_criteria = any(hasattr(c, "eos_token_id") for c in stopping_criteria)
    max_length = generation_config.max_length
    return_dict = generation_config.return_dict_in_generate
    generators = _make_generators(seed, batch_size, device)
    pass_prompt = "prompt_length" in _parameters(value_function)
    next_len = 1 if model_kwargs.get("use_cache", True) else None
    streamer = generate_call_argument("streamer")  # generate() does not pass it to a callable
    output_scores, output_logits = bool(generation_config.output_scores), bool(generation_config.output_logits)
    all_scores, all_logits = [], []
    # the processors' layout: row b = prompt b; the K branches of prompt b are rows b*K .. b*K+K-1
    prompt_index = torch.arange(batch_size, device=device).repeat_interleave(K)

    attention_mask = model_kwargs.get("attention_mask")
    value_mask = attention_mask.clone() if attention_mask is not None else torch.ones_like(input_ids, dtype=torch.long)
    unfinished = torch.ones(batch_size, dtype=torch.long, device=device)

    outputs = model._prefill(input_ids, generation_config, model_kwargs)
    model_kwargs = model._update_model_kwargs_for_generation(outputs, model_kwargs)
    next_logits = outputs.logits[:, -1].to(copy=True, dtype=torch.float32, device=device)  # (batch, V)
    del outputs

    block_weights, block_values, chosen = [], [], []
    num_objectives = None
    while input_ids.shape[1] < max_length and unfinished.any():
        # ---- branch: K copies of every prompt's state ---------------------------------------------------------
        if K > 1:
            ids = input_ids.repeat_interleave(K, dim=0)
            kw = _map_model_kwargs(
                model_kwargs,
                lambda key, t: t.repeat_interleave(K, dim=1 if (key == "position_ids" and t.dim() == 3) else 0),
                lambda c: c.batch_repeat_interleave(K),
            )
            logits = next_logits.repeat_interleave(K, dim=0)
            unf = unfinished.repeat_interleave(K, dim=0)
            vmask = value_mask.repeat_interleave(K, dim=0)
        else:
            ids, kw, logits, unf, vmask = input_ids, model_kwargs, next_logits, unfinished, value_mask

        # ---- sample B tokens for all B*K rows -------------------------------------------------------------------
        block_start = ids.shape[1]
        block_scores, block_logits = [], []
        for step in range(block_size):
            if step > 0:
                model_inputs = model.prepare_inputs_for_generation(ids, next_sequence_length=next_len, **kw)
                out = model(**model_inputs, return_dict=True)
                kw = model._update_model_kwargs_for_generation(out, kw)
                logits = out.logits[:, -1].to(copy=True, dtype=torch.float32, device=device)
                del out
            scores = apply_logits_processors(logits_processor, ids, logits, prompt_index, batch_size)
            if output_scores:
                block_scores.append(scores)
            if output_logits:
                block_logits.append(logits)
            next_tokens = _sample_tokens(scores, do_sample, generators, K)
            if has_eos_stopping_criteria:
                next_tokens = next_tokens * unf + pad_token_id * (1 - unf)
            vmask = torch.cat([vmask, unf[:, None]], dim=-1)
            ids = torch.cat([ids, next_tokens[:, None]], dim=-1)
            unf = unf & ~stopping_criteria(ids, None)
            if ids.shape[1] >= max_length or not unf.any():
                break

        # ---- score, weigh, choose -------------------------------------------------------------------------------
        if K > 1 or return_dict:
            values = _call_value_function(value_function, ids, vmask, prompt_length, value_batch_size, pass_prompt)
            values = values.to(device).view(batch_size, K, -1)  # (batch, K, G)
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
                w = fixed_weights(weights, values.shape[-1], batch_size, device=device, dtype=values.dtype)
            if K == 1:
                k_star = torch.zeros(batch_size, dtype=torch.long, device=device)
            elif block_selection == "argmax":
                k_star = (values @ w.unsqueeze(-1)).squeeze(-1).argmax(dim=-1)
            else:
                probs = tilted_probs(values, w, float(rmod_lambda))
                if generators is None:
                    k_star = torch.multinomial(probs, 1).squeeze(1)
                else:
                    k_star = torch.cat(
                        [torch.multinomial(probs[i : i + 1], 1, generator=g)[0] for i, g in enumerate(generators)]
                    )
            block_weights.append(w)
            block_values.append(values)
            chosen.append(k_star)
        else:
            k_star = torch.zeros(batch_size, dtype=torch.long, device=device)

        # ---- keep the chosen branch (its KV cache included) --------------------------------------------------
        if K > 1:
            rows = torch.arange(batch_size, device=device) * K + k_star
            input_ids, unfinished, value_mask = ids[rows], unf[rows], vmask[rows]
            model_kwargs = _map_model_kwargs(
                kw,
                lambda key, t, rows=rows: t[:, rows] if (key == "position_ids" and t.dim() == 3) else t[rows],
                lambda c, rows=rows: c.batch_select_indices(rows),
            )
        else:
            input_ids, unfinished, value_mask, model_kwargs = ids, unf, vmask, kw
        kept = torch.arange(batch_size, device=device) * K + k_star
        all_scores += [s[kept] for s in block_scores]
        all_logits += [z[kept] for z in block_logits]
        if streamer is not None:  # the chosen block, up to its EOS
            real = value_mask[:, block_start:].any(dim=0)
            streamer.put(input_ids[:, block_start:][:, real].cpu())

        if input_ids.shape[1] >= max_length or not unfinished.any():
            break
        # feed the block's last token once, for the chosen prefixes only
        model_inputs = model.prepare_inputs_for_generation(input_ids, next_sequence_length=next_len, **model_kwargs)
        out = model(**model_inputs, return_dict=True)
        model_kwargs = model._update_model_kwargs_for_generation(out, model_kwargs)
        next_logits = out.logits[:, -1].to(copy=True, dtype=torch.float32, device=device)
        del out

    if not unfinished.any() and input_ids.shape[1] > prompt_length:
        # all chosen sequences ended: drop trailing columns that are padding in every row
        generated = value_mask[:, prompt_length:]
        real = generated.any(dim=0).nonzero()
        last = int(real.max()) + 1 if real.numel() else 0
        input_ids = input_ids[:, : prompt_length + last]
    num_generated = input_ids.shape[1] - prompt_length
    if streamer is not None:
        streamer.end()

    if return_dict:
        return RMODOutput(
            sequences=input_ids,
            block_weights=tuple(block_weights),
            block_values=tuple(block_values),
            chosen_branches=tuple(chosen),
            objective_names=_objective_names(value_function),
            scores=tuple(all_scores[:num_generated]) if output_scores else None,
            logits=tuple(all_logits[:num_generated]) if output_logits else None,
        )
    return input_ids


def _parameters(fn) -> set[str]:
    try:
        target = fn.forward if isinstance(fn, torch.nn.Module) else fn
        return set(inspect.signature(target).parameters)
    except (TypeError, ValueError):
        return set()


def _objective_names(value_function) -> list[str] | None:
    names = getattr(value_function, "objective_names", None)
    if names is None and hasattr(value_function, "config"):
        names = getattr(value_function.config, "objective_names", None)
    return list(names) if names is not None else None


__all__ = ["BLOCK_SELECTIONS", "RMODOutput", "rmod"]
