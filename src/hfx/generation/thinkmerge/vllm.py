r"""ThinkMerge on vLLM: stage I as native vLLM sampling, stage II through a vLLM v1 logits processor.

Paper: "Think in Parallel, Answer as One: Logit Averaging for Open-Ended Reasoning", arXiv 2512.02874
(https://huggingface.co/papers/2512.02874), Sec. 3. The semantics, arguments and output are those of the HF path
(:func:`hfx.generation.thinkmerge.thinkmerge`); :func:`thinkmerge_vllm` returns the same
:class:`~hfx.generation.thinkmerge.ThinkMergeOutput`.

**Stage I (map)** is plain vLLM sampling: N requests per prompt (N = K for direct merge), each stopping on the
delimiter (``stop_token_ids`` for a one-token delimiter such as ``</think>``, a stop string for a phrase), on EOS, or
at the thinking budget (``max_tokens``), with the thinking temperature / top-k / top-p and one seed per request.
Delimiters are force-appended, traces trimmed and chosen (direct / K early-ready / shortest-K) exactly as in the HF
path. K Early-Ready drives the engine step by step and aborts a prompt's remaining requests as soon as K of them
are ready.

**Stage II (reduce)** needs, at every answer step, one token taken from the mean of the K contexts' logits and
appended to all K. Two designs were built and measured (``benchmarks/vllm_backend.py``):

(a) *merge processor* (shipped): the K contexts ``prompt + trace_k`` of a prompt run as K ordinary vLLM requests that
    carry a group id in ``SamplingParams.extra_args``. :class:`ThinkMergeLogitsProcessor`, a vLLM v1 custom logits
    processor registered when the engine is built (:func:`hfx.integrations.vllm.load_vllm` does it), sees the raw
    fp32 logits of the whole batch each step. For every group it averages the K rows, z̄ = (1/K) Σ_k z^(k), applies
    the answer settings to z̄ (temperature T, top-k, top-p, HF's semantics; then argmax or a draw from a per-group
    seeded generator), and overwrites all K rows with a one-hot mask (0 at the chosen token, -inf elsewhere), so
    every request samples that token whatever the engine's own sampler does (the requests themselves are greedy).
    It is exact: z̄ is formed from the same raw logits the HF path averages, and all processing happens after
    averaging. It is as fast as plain decoding (one forward pass per step for all rows, KV caches kept).

    The processor checks, every step, that each group it averages is complete and in step: all K members present in
    the batch with identical output tokens. A group whose rows are not scheduled in the same step (chunked prefill of
    one member, preemption, a member still waiting) is forced to stop and reported; :func:`thinkmerge_vllm` then
    raises ``RuntimeError`` rather than return an answer merged from the wrong rows. To make that rare, the answer
    stage submits groups in waves that fit the scheduler (``max_num_seqs`` rows, ``max_num_batched_tokens``) and,
    when a wave's contexts do not fit one step's token budget, first pre-fills them into the prefix cache. Async
    scheduling and speculative decoding are refused (the processor needs each step's tokens before the next).

(b) *outer loop*: per answer token, re-submit the K contexts (+ the answer so far) as one-token requests with
    prefix caching and full-vocabulary log-probs (``logprobs=-1``, ``max_logprobs=-1``), average outside the engine,
    append, repeat. What is exact here: vLLM returns log-softmax values ℓ^(k) = z^(k) − log Σ_v exp z^(k)_v (the
    default ``logprobs_mode="raw_logprobs"``). Their mean is

        (1/K) Σ_k ℓ^(k) = z̄ − (1/K) Σ_k log Z^(k),

    i.e. z̄ shifted by one constant per step. Softmax, argmax, temperature (softmax(ℓ̄/T) = softmax(z̄/T)), top-k,
    top-p, min-p and additive penalties are shift-invariant, so averaging log-softmax is **exactly** ThinkMerge for
    them; it is not for anything that depends on the absolute logit value, such as HF's multiplicative repetition
    penalty (it divides positive and multiplies negative logits). With ``logprobs_mode="raw_logits"`` the returned
    values are z^(k) themselves and the mean is z̄ exactly. (Averaging *probabilities* would be a different method:
    the arithmetic instead of the geometric mean.) Design (b) works with any engine and any server that returns
    full log-probs, but each token costs a new request round and a vocabulary-sized transfer per context: measured
    here 8× slower than (a) for the same tokens (13× with 128-token KV blocks), so it is not shipped
    (``benchmarks/vllm_backend.py --design-b`` keeps it for the comparison).
"""

from __future__ import annotations

import os
import tempfile
import uuid
from contextlib import nullcontext

import torch
from vllm import SamplingParams
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

from hfx.integrations.vllm import (
    eos_token_ids,
    has_logits_processor,
    require_vllm,
    scheduler_paused,
    tokens_prompt,
)

from .generate import (
    ANSWER_MODES,
    DEFAULT_MAX_THINKING_TOKENS,
    MERGE_MODES,
    Delimiter,
    ThinkMergeOutput,
    _check_token_ids,
    trim_repetitive_suffix,
)


EXTRA_ARGS_KEY = "hfx_thinkmerge"
"""The ``SamplingParams.extra_args`` key that marks a request as a member of a ThinkMerge answer group."""


# ----------------------------------------------------------------------------------------------------------------
# the merge processor (runs inside the engine core process)
# ----------------------------------------------------------------------------------------------------------------


def warp_and_choose(z_bar: torch.Tensor, do_sample: bool, temperature, top_k, top_p, generator=None) -> torch.Tensor:
    """Pick one token from averaged logits with HF's warper semantics (temperature, then top-k, then top-p).

    Args:
        z_bar (`torch.FloatTensor` of shape `(vocab_size,)`): the averaged logits of one group.
        do_sample (`bool`): sample (else argmax; the warpers do not change the argmax).
        temperature (`float`): T > 0 (``None`` or 1: no scaling).
        top_k (`int`): keep the k largest (``None``/0: off).
        top_p (`float`): keep the smallest set whose probability reaches p (``None``/1: off), at least one token.
        generator (`torch.Generator`, *optional*): the random source of the draw.

    Returns:
        `torch.LongTensor` of shape `()`: the chosen token id.
    """
    if not do_sample:
        return z_bar.argmax()
    scores = z_bar.float()
    if temperature is not None and temperature != 1.0:
        scores = scores / temperature
    if top_k:
        k = min(int(top_k), scores.shape[-1])
        kth = torch.topk(scores, k).values[-1]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_scores, order = torch.sort(scores, descending=False)
        cumulative = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
        remove = cumulative <= (1 - top_p)
        remove[-1] = False  # keep at least one token
        scores = scores.masked_fill(remove.scatter(0, order, remove), float("-inf"))
    probs = scores.softmax(dim=-1)
    return torch.multinomial(probs, 1, generator=generator)[0]


class ThinkMergeLogitsProcessor(LogitsProcessor):
    """vLLM v1 logits processor that merges each ThinkMerge group's K rows into one token (design (a) above).

    Requests join a group through ``SamplingParams.extra_args["hfx_thinkmerge"] = {"group": str, "member": int,
    "size": K, "do_sample": bool, "temperature": float, "top_k": int, "top_p": float, "seed": int, "stop_id": int,
    "log": path}``; requests without that key pass through untouched. Register the class when building the engine:
    ``LLM(..., logits_processors=[ThinkMergeLogitsProcessor])`` (:func:`hfx.integrations.vllm.load_vllm` does).

    Each step, for every group: if its K members are all in the batch with identical output tokens, their rows are
    averaged (z̄ = mean of the raw logits), one token is chosen with :func:`warp_and_choose` (a per-group
    ``torch.Generator`` seeded with ``seed``), and all K rows become one-hot on it. Otherwise the group is out of
    sync (chunked prefill, preemption, members scheduled in different steps): its rows are forced to ``stop_id`` and
    the group id is appended to the ``log`` file, which :func:`thinkmerge_vllm` reads to refuse the result.

    Raises:
        ValueError: at engine start with async scheduling or speculative decoding enabled (both break the
            one-step-per-token view the processor needs).
    """

    def __init__(self, vllm_config, device: torch.device, is_pin_memory: bool):
        scheduler = getattr(vllm_config, "scheduler_config", None)
        if scheduler is not None and getattr(scheduler, "async_scheduling", False):
            raise ValueError(
                "ThinkMergeLogitsProcessor needs `async_scheduling=False` (each answer step must see the previous "
                "step's tokens); build the engine with hfx.integrations.vllm.load_vllm or pass async_scheduling=False"
            )
        if getattr(vllm_config, "speculative_config", None) is not None:
            raise ValueError("ThinkMergeLogitsProcessor does not support speculative decoding")
        self.rows: dict[int, tuple[str, int, dict, list[int]]] = {}  # batch index -> (group, member, cfg, outputs)
        self.generators: dict[str, torch.Generator] = {}
        self.failed: set[str] = set()

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams):
        cfg = (sampling_params.extra_args or {}).get(EXTRA_ARGS_KEY)
        if cfg is None:
            return
        missing = {"group", "member", "size", "do_sample", "stop_id"} - set(cfg)
        if missing:
            raise ValueError(f"`extra_args[{EXTRA_ARGS_KEY!r}]` misses {sorted(missing)}")

    def is_argmax_invariant(self) -> bool:
        return False

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        for index in batch_update.removed:
            self.rows.pop(index, None)
        for index, params, _prompt, output_ids in batch_update.added:
            cfg = (params.extra_args or {}).get(EXTRA_ARGS_KEY) if params is not None else None
            if cfg is None:
                self.rows.pop(index, None)
            else:
                self.rows[index] = (str(cfg["group"]), int(cfg["member"]), cfg, output_ids)
        for a, b, direction in batch_update.moved:
            if direction == MoveDirectionality.SWAP:
                ra, rb = self.rows.pop(a, None), self.rows.pop(b, None)
                if ra is not None:
                    self.rows[b] = ra
                if rb is not None:
                    self.rows[a] = rb
            else:
                row = self.rows.pop(a, None)
                self.rows.pop(b, None)
                if row is not None:
                    self.rows[b] = row
        if not self.rows:  # no ThinkMerge request left: forget finished groups' state
            self.generators.clear()
            self.failed.clear()

    def _fail(self, group: str, cfg: dict, members) -> None:
        if group in self.failed:
            return
        self.failed.add(group)
        path = cfg.get("log")
        if path:
            state = ", ".join(f"member {m[1]} at batch row {m[0]} with {len(m[3])} tokens" for m in members)
            _mark(path, group, f"{len(members)} of {cfg['size']} rows in the step ({state})")

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self.rows:
            return logits
        groups: dict[str, list[tuple[int, int, dict, list[int]]]] = {}
        for index, (group, member, cfg, outputs) in self.rows.items():
            if index < logits.shape[0]:
                groups.setdefault(group, []).append((index, member, cfg, outputs))
        for group, members in groups.items():
            cfg = members[0][2]
            indices = torch.tensor([m[0] for m in members], device=logits.device)
            in_sync = (
                group not in self.failed
                and len(members) == int(cfg["size"])
                and sorted(m[1] for m in members) == list(range(int(cfg["size"])))
                and len({len(m[3]) for m in members}) == 1
                and len({tuple(m[3][-1:]) for m in members}) == 1
            )
            if in_sync:
                z_bar = logits[indices].float().mean(dim=0)
                generator = None
                if cfg["do_sample"]:
                    generator = self.generators.get(group)
                    if generator is None:
                        generator = torch.Generator(device=logits.device)
                        generator.manual_seed(int(cfg.get("seed") or 0))
                        self.generators[group] = generator
                token = warp_and_choose(
                    z_bar,
                    bool(cfg["do_sample"]),
                    cfg.get("temperature"),
                    cfg.get("top_k"),
                    cfg.get("top_p"),
                    generator,
                )
            else:
                self._fail(group, cfg, members)
                token = torch.tensor(int(cfg["stop_id"]), device=logits.device)
            logits[indices] = float("-inf")
            logits[indices, token] = 0.0
        return logits


# ----------------------------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------------------------


def _run_requests(llm, prompts, params, groups=None, target=None, desc=None, use_tqdm=False, together=False):
    """Run token-id requests through the engine step by step; returns the last ``RequestOutput`` of each request.

    With ``groups`` (a group id per request) and ``target``, a group's unfinished requests are aborted once
    ``target`` of them finished (K Early-Ready); aborted requests keep their last partial output and are reported
    in the second return value. ``together=True`` adds all requests while the scheduler is paused, so they start in
    the same step (:func:`~hfx.integrations.vllm.scheduler_paused`).
    """
    from tqdm.auto import tqdm

    engine = llm.llm_engine
    tag = uuid.uuid4().hex[:8]
    ids = [f"hfx-{tag}-{i}" for i in range(len(prompts))]
    position = {rid: i for i, rid in enumerate(ids)}
    with scheduler_paused(llm) if together else nullcontext():
        for rid, prompt, p in zip(ids, prompts, params if isinstance(params, list) else [params] * len(prompts)):
            engine.add_request(rid, tokens_prompt(prompt), p)
    last = [None] * len(prompts)
    finished = [False] * len(prompts)
    aborted = [False] * len(prompts)
    done_per_group: dict = {}
    bar = tqdm(total=len(prompts), desc=desc, unit="seq", disable=not use_tqdm, leave=False)
    try:
        while engine.has_unfinished_requests():
            full = set()
            for out in engine.step():
                i = position.get(out.request_id)
                if i is None:
                    continue
                last[i] = out
                if out.finished and not finished[i]:
                    finished[i] = True
                    bar.update(1)
                    if groups is not None and target is not None:
                        g = groups[i]
                        done_per_group[g] = done_per_group.get(g, 0) + 1
                        if done_per_group[g] >= target:
                            full.add(g)
            # K Early-Ready: once K of a group are ready (this step included), its unfinished requests are dropped
            to_abort = [
                j for j in range(len(prompts)) if full and groups[j] in full and not finished[j] and not aborted[j]
            ]
            if to_abort:
                for j in to_abort:
                    aborted[j] = True
                engine.abort_request([ids[j] for j in to_abort])
    finally:
        bar.close()
        pending = [ids[i] for i in range(len(prompts)) if not finished[i] and not aborted[i]]
        if pending:
            engine.abort_request(pending)
    return last, aborted


def _normalise_prompts(prompts, attention_mask, tokenizer, pad_token_id):
    """Token-id lists and the (B, P) left-padded ``input_ids`` of the prompts (as given when a tensor)."""
    if isinstance(prompts, torch.Tensor):
        if prompts.dim() != 2:
            raise ValueError(
                f"`prompts` as a tensor must have shape (batch_size, prompt_length), got {tuple(prompts.shape)}"
            )
        mask = attention_mask if attention_mask is not None else torch.ones_like(prompts)
        lists = [prompts[b][mask[b].bool()].tolist() for b in range(prompts.shape[0])]
        return lists, prompts.cpu()
    if isinstance(prompts, str) or not isinstance(prompts, (list, tuple)) or not prompts:
        raise TypeError("`prompts` must be a non-empty list of strings or of token-id lists, or a (B, P) tensor")
    lists = []
    for p in prompts:
        if isinstance(p, str):
            lists.append(tokenizer.encode(p, add_special_tokens=False))
        elif isinstance(p, (list, tuple)) and all(isinstance(t, int) for t in p):
            lists.append([int(t) for t in p])
        else:
            raise TypeError(f"every prompt must be a string or a list of token ids, got {type(p)}")
    if any(len(p) == 0 for p in lists):
        raise ValueError("`prompts` contains an empty prompt")
    length = max(len(p) for p in lists)
    input_ids = torch.full((len(lists), length), pad_token_id, dtype=torch.long)
    for b, p in enumerate(lists):
        input_ids[b, length - len(p) :] = torch.tensor(p)
    return lists, input_ids


def _draw_seed(seed) -> int:
    if seed is not None:
        return int(seed)
    return int(torch.randint(0, 2**31 - 1, (1,)).item())  # follows torch.manual_seed


def _left_pad_rows(rows: list[list[int]], pad_token_id: int) -> torch.Tensor:
    length = max(len(r) for r in rows)
    out = torch.full((len(rows), length), pad_token_id, dtype=torch.long)
    for i, r in enumerate(rows):
        if r:
            out[i, length - len(r) :] = torch.tensor(r)
    return out


def _right_pad_rows(rows: list[list[int]], pad_token_id: int) -> torch.Tensor:
    length = max([len(r) for r in rows] + [0])
    out = torch.full((len(rows), length), pad_token_id, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return out


def _validate(num_traces, merge, num_candidates, max_thinking_tokens, max_new_tokens, answer_mode, trim_repetitions,
              temperature, answer_temperature, answer_top_k, answer_top_p):  # fmt: skip
    if isinstance(num_traces, bool) or not isinstance(num_traces, int) or num_traces < 1:
        raise ValueError(f"`num_traces` must be an integer >= 1, but is {num_traces!r}")
    if merge not in MERGE_MODES:
        raise ValueError(f"`merge` must be one of {MERGE_MODES}, but is {merge!r}")
    if answer_mode not in ANSWER_MODES:
        raise ValueError(f"`answer_mode` must be one of {ANSWER_MODES}, but is {answer_mode!r}")
    if num_candidates is not None:
        if isinstance(num_candidates, bool) or not isinstance(num_candidates, int) or num_candidates < num_traces:
            raise ValueError(
                f"`num_candidates` (N={num_candidates!r}) must be an integer >= `num_traces` (K={num_traces})"
            )
        if merge == "direct" and num_candidates != num_traces:
            raise ValueError(f"`num_candidates`={num_candidates} needs `merge`='early_ready' or 'shortest_k'")
    for name, value in (("max_thinking_tokens", max_thinking_tokens), ("max_new_tokens", max_new_tokens)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"`{name}` must be an integer >= 1, but is {value!r}")
    if not isinstance(trim_repetitions, bool) and not (isinstance(trim_repetitions, int) and trim_repetitions >= 2):
        raise ValueError(f"`trim_repetitions` must be a bool or an integer >= 2, got {trim_repetitions!r}")
    for name, value in (("temperature", temperature), ("answer_temperature", answer_temperature)):
        if value is not None and not value > 0:
            raise ValueError(f"`{name}` must be > 0, but is {value!r}")
    if answer_top_k is not None and (not isinstance(answer_top_k, int) or answer_top_k < 0):
        raise ValueError(f"`answer_top_k` must be an integer >= 0, but is {answer_top_k!r}")
    if answer_top_p is not None and not 0 < answer_top_p <= 1:
        raise ValueError(f"`answer_top_p` must be in (0, 1], but is {answer_top_p!r}")


def _sampling(do_sample, temperature, top_k, top_p, **kwargs) -> SamplingParams:
    if do_sample:
        return SamplingParams(
            temperature=float(temperature if temperature is not None else 1.0),
            top_k=int(top_k) if top_k else -1,
            top_p=float(top_p if top_p is not None else 1.0),
            **kwargs,
        )
    return SamplingParams(temperature=0.0, **kwargs)


# ----------------------------------------------------------------------------------------------------------------
# the vLLM ThinkMerge call
# ----------------------------------------------------------------------------------------------------------------


def thinkmerge_vllm(
    llm,
    prompts,
    attention_mask: torch.Tensor | None = None,
    num_traces: int = 4,
    think_end: str | list[int] = "</think>",
    max_thinking_tokens: int | None = None,
    max_new_tokens: int = 256,
    do_sample: bool = True,
    temperature: float | None = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    merge: str = "direct",
    num_candidates: int | None = None,
    trim_repetitions: bool | int = False,
    answer_do_sample: bool | None = None,
    answer_temperature: float | None = None,
    answer_top_k: int | None = None,
    answer_top_p: float | None = None,
    traces: list | None = None,
    answer_mode: str = "merge",
    seed: int | None = None,
    pad_token_id: int | None = None,
    tokenizer=None,
    return_dict_in_generate: bool = True,
    use_tqdm: bool = False,
):
    r"""ThinkMerge decoding (arXiv 2512.02874) on a vLLM engine: K parallel traces, one answer from averaged logits.

    The arguments mean what they mean for the HF path (:func:`hfx.generation.thinkmerge.thinkmerge`), with the
    generation-config settings passed directly: ``do_sample`` / ``temperature`` / ``top_k`` / ``top_p`` are the
    thinking settings, ``max_new_tokens`` the answer budget, EOS the model's generation-config ``eos_token_id``.

    Args:
        llm (`vllm.LLM`): built with :class:`ThinkMergeLogitsProcessor` (:func:`hfx.integrations.vllm.load_vllm`).
        prompts (`list[str]`, `list[list[int]]` or `torch.LongTensor` of shape `(batch_size, prompt_length)`): the
            prompts (strings are tokenised without special tokens; a tensor is left-padded, with ``attention_mask``).
        attention_mask (`torch.LongTensor` of shape `(batch_size, prompt_length)`, *optional*): for a tensor.
        num_traces (`int`, *optional*, defaults to 4): K.
        think_end (`str` or `list[int]`, *optional*, defaults to `"</think>"`): the delimiter (a one-token string or a
            single id is matched by id; a phrase on text). Multi-id lists are not supported on vLLM (pass the text).
        max_thinking_tokens (`int`, *optional*, defaults to 1024): thinking budget; the delimiter is force-appended.
        max_new_tokens (`int`, *optional*, defaults to 256): answer budget.
        do_sample, temperature, top_k, top_p: thinking settings (``top_k`` 0/None and ``top_p`` None/1: off).
        merge, num_candidates, trim_repetitions: the trace-handling variants (``"direct"``, ``"early_ready"``,
            ``"shortest_k"``; N; variant C), as in the HF path.
        answer_do_sample, answer_temperature, answer_top_k, answer_top_p: answer settings, applied to the averaged
            logits; each defaults to its thinking setting.
        traces (`list[list[torch.LongTensor]]`, *optional*): skip stage I and answer from these K traces per prompt.
        answer_mode (`str`, *optional*, defaults to `"merge"`): ``"merge"``, ``"independent"`` (K answers, no
            averaging) or ``"none"`` (stage I only).
        seed (`int`, *optional*): base seed of all requests; ``None`` draws one from torch's global RNG (so
            ``torch.manual_seed`` makes a call reproducible).
        pad_token_id (`int`, *optional*): pads ``sequences``/``contexts``; defaults to the tokenizer's, else EOS.
        tokenizer (*optional*): defaults to ``llm.get_tokenizer()`` (for string prompts and phrase delimiters).
        return_dict_in_generate (`bool`, *optional*, defaults to `True`): return a :class:`ThinkMergeOutput`, else
            its ``sequences``.
        use_tqdm (`bool`, *optional*): progress bars.

    Returns:
        :class:`~hfx.generation.thinkmerge.ThinkMergeOutput` (``scores``/``logits`` are not available: ``None``),
        or its ``sequences`` (`torch.LongTensor` of shape `(batch_size, prompt_length + answer_length)`).

    Raises:
        ValueError: bad arguments (as the HF path), an engine built without :class:`ThinkMergeLogitsProcessor`.
        RuntimeError: when the answer stage lost step synchronisation of a group (see the module docstring).
    """
    require_vllm("thinkmerge_vllm")
    _validate(num_traces, merge, num_candidates, max_thinking_tokens, max_new_tokens, answer_mode, trim_repetitions,
              temperature, answer_temperature, answer_top_k, answer_top_p)  # fmt: skip
    if answer_mode == "merge" and not has_logits_processor(llm, ThinkMergeLogitsProcessor):
        raise ValueError(
            "this vLLM engine was built without hfx's ThinkMergeLogitsProcessor, which the merged answer stage needs: "
            "build it with `hfx.integrations.vllm.load_vllm(...)` or `LLM(..., logits_processors=["
            "hfx.generation.thinkmerge.vllm.ThinkMergeLogitsProcessor])`"
        )
    tokenizer = tokenizer or llm.get_tokenizer()
    eos_ids = eos_token_ids(llm)
    if pad_token_id is None:
        pad_token_id = getattr(tokenizer, "pad_token_id", None)
        if pad_token_id is None:
            pad_token_id = eos_ids[0] if eos_ids else 0
    prompt_lists, input_ids = _normalise_prompts(prompts, attention_mask, tokenizer, int(pad_token_id))
    batch_size = len(prompt_lists)
    if merge != "direct" and num_candidates is None:
        num_candidates = 2 * num_traces
    num_rows = num_candidates or num_traces
    budget = max_thinking_tokens or DEFAULT_MAX_THINKING_TOKENS
    base_seed = _draw_seed(seed)

    candidate_traces = candidate_lengths = merged_indices = ready_steps = None
    if traces is None:
        delimiter = Delimiter(think_end, tokenizer)
        _check_token_ids(delimiter.ids + delimiter.forced_ids, len(tokenizer), "think_end")
        if delimiter.text is None and len(delimiter.ids) > 1:
            raise ValueError(
                f"`think_end`={think_end!r}: vLLM stops on single token ids or on text; pass the delimiter as a string"
            )
        stop_kwargs = (
            {"stop_token_ids": delimiter.ids + eos_ids}
            if delimiter.text is None
            else {"stop": [delimiter.text], "include_stop_str_in_output": True, "stop_token_ids": eos_ids}
        )
        params = [
            _sampling(do_sample, temperature, top_k, top_p, max_tokens=budget, seed=base_seed + r, **stop_kwargs)
            for r in range(batch_size * num_rows)
        ]
        requests = [prompt_lists[r // num_rows] for r in range(batch_size * num_rows)]
        groups = [r // num_rows for r in range(batch_size * num_rows)]
        outs, aborted = _run_requests(
            llm, requests, params, groups, num_traces if merge == "early_ready" else None, "thinking", use_tqdm
        )
        bodies, tails, body_length, ready_step = [], [], [], []
        forced = list(delimiter.forced_ids)
        for r, out in enumerate(outs):
            tokens = list(out.outputs[0].token_ids) if out is not None and out.outputs else []
            completion = out.outputs[0] if out is not None and out.outputs else None
            if aborted[r]:  # discarded under Early-Ready: kept as sampled, without a delimiter
                bodies.append(tokens), tails.append([]), body_length.append(len(tokens)), ready_step.append(-1)
                continue
            matched = 0
            if tokens:
                matched = int(delimiter.match(torch.tensor([tokens]), torch.tensor([0]), len(tokens))[0])
            hit_eos = matched == 0 and bool(tokens) and tokens[-1] in eos_ids and completion.finish_reason == "stop"
            if matched > 0:
                body, tail = tokens[:-matched], tokens[-matched:]
            elif hit_eos:  # EOS before the delimiter: dropped, delimiter force-appended
                body, tail = tokens[:-1], forced
            else:  # thinking budget spent: delimiter force-appended
                body, tail = tokens, forced
            bodies.append(body), tails.append(tail), body_length.append(len(body))
            # the stage-I step at which the trace became ready; traces cut at the budget are ready at the budget
            ready_step.append(len(tokens) - 1 if (matched > 0 or hit_eos) else budget)
        # traces that reached the budget are ready at the budget (as in the HF path)
        body_length_t = torch.tensor(body_length, dtype=torch.long)
        ready_t = torch.tensor(ready_step, dtype=torch.long)
        merged_indices = _select(merge, body_length_t, ready_t, batch_size, num_rows, num_traces)
        min_repeats = 3 if trim_repetitions is True else int(trim_repetitions)
        traces, candidates = [], []
        for b in range(batch_size):
            rows = range(b * num_rows, (b + 1) * num_rows)
            candidates.append([torch.tensor(bodies[r] + tails[r], dtype=torch.long) for r in rows])
            chosen = []
            for n in merged_indices[b].tolist():
                body = bodies[b * num_rows + n]
                if trim_repetitions:
                    body = trim_repetitive_suffix(body, min_repeats=min_repeats)
                chosen.append(torch.tensor(body + tails[b * num_rows + n], dtype=torch.long))
            traces.append(chosen)
        candidate_lengths = body_length_t.view(batch_size, num_rows)
        ready_steps = ready_t.view(batch_size, num_rows)
        if merge != "direct":
            candidate_traces = candidates
    else:
        if len(traces) != batch_size or any(len(t) != num_traces for t in traces):
            raise ValueError(
                f"`traces` must hold `num_traces`={num_traces} tensors for each of the {batch_size} prompts, got "
                f"{[len(t) for t in traces]}"
            )
        traces = [[torch.as_tensor(t, dtype=torch.long).cpu() for t in per_prompt] for per_prompt in traces]

    if answer_mode == "none":
        sequences, contexts = input_ids, None
    else:
        contexts_list = [prompt_lists[b] + traces[b][k].tolist() for b in range(batch_size) for k in range(num_traces)]
        a_sample = do_sample if answer_do_sample is None else bool(answer_do_sample)
        a_temperature = answer_temperature if answer_temperature is not None else temperature
        a_top_k = answer_top_k if answer_top_k is not None else top_k
        a_top_p = answer_top_p if answer_top_p is not None else top_p
        answer_seed = base_seed + batch_size * num_rows
        if answer_mode == "merge":
            answers = _merged_answers(
                llm, contexts_list, num_traces, max_new_tokens, eos_ids, a_sample, a_temperature, a_top_k, a_top_p,
                answer_seed, use_tqdm,
            )  # fmt: skip
            feed = [answers[i // num_traces] for i in range(len(contexts_list))]
        else:
            params = [
                _sampling(
                    a_sample,
                    a_temperature,
                    a_top_k,
                    a_top_p,
                    max_tokens=max_new_tokens,
                    seed=answer_seed + i,
                    stop_token_ids=eos_ids,
                    detokenize=False,
                )
                for i in range(len(contexts_list))
            ]
            outs, _ = _run_requests(llm, contexts_list, params, desc="answers", use_tqdm=use_tqdm)
            answers = [list(o.outputs[0].token_ids) for o in outs]
            feed = answers
        prefix = input_ids if answer_mode == "merge" else input_ids.repeat_interleave(num_traces, dim=0)
        sequences = torch.cat([prefix, _right_pad_rows(answers, int(pad_token_id))], dim=-1)
        contexts = _left_pad_rows([c + a for c, a in zip(contexts_list, feed)], int(pad_token_id))
        contexts = contexts.view(batch_size, num_traces, -1)

    if not return_dict_in_generate:
        return sequences
    return ThinkMergeOutput(
        sequences=sequences,
        traces=traces,
        candidate_traces=candidate_traces,
        candidate_lengths=candidate_lengths,
        merged_indices=merged_indices,
        ready_steps=ready_steps,
        contexts=contexts,
    )


def _select(merge, body_length, ready_step, batch_size, num_rows, num_traces):
    """Indices (B, K) of the merged traces among each prompt's N rows (as the HF path's ``_select``)."""
    order = torch.arange(num_rows).expand(batch_size, num_rows)
    if merge == "direct":
        return order[:, :num_traces].clone()
    if merge == "shortest_k":
        key = body_length.view(batch_size, num_rows)
    else:
        key = ready_step.view(batch_size, num_rows).clone()
        key[key < 0] = torch.iinfo(torch.long).max // 2
    return torch.sort(key, dim=1, stable=True).indices[:, :num_traces]


def _merged_answers(llm, contexts, num_traces, max_new_tokens, eos_ids, do_sample, temperature, top_k, top_p, seed,
                    use_tqdm):  # fmt: skip
    """Stage II with :class:`ThinkMergeLogitsProcessor`: one answer (token list) per group of K contexts."""
    config = llm.llm_engine.vllm_config.scheduler_config
    max_rows = max(num_traces, int(getattr(config, "max_num_seqs", 256) or 256))
    token_budget = int(getattr(config, "max_num_batched_tokens", 2048) or 2048)
    num_groups = len(contexts) // num_traces
    groups_per_wave = max(1, max_rows // num_traces)
    stop_id = eos_ids[0] if eos_ids else 0
    fd, log_path = tempfile.mkstemp(prefix="hfx-thinkmerge-", suffix=".log")
    os.close(fd)
    tag = uuid.uuid4().hex[:8]
    answers: list[list[int]] = []
    try:
        for first in range(0, num_groups, groups_per_wave):
            wave = range(first, min(num_groups, first + groups_per_wave))
            rows = [contexts[g * num_traces + k] for g in wave for k in range(num_traces)]
            if sum(len(r) for r in rows) > token_budget:
                # pre-fill the prefix cache, so that the merged requests need (almost) no prefill and are all
                # scheduled in their first step
                _run_requests(llm, rows, SamplingParams(max_tokens=1, temperature=0.0, detokenize=False))
            params = []
            for g in wave:
                for k in range(num_traces):
                    cfg = {
                        "group": f"{tag}-{g}",
                        "member": k,
                        "size": num_traces,
                        "do_sample": bool(do_sample),
                        "temperature": float(temperature) if temperature is not None else 1.0,
                        "top_k": int(top_k or 0),
                        "top_p": float(top_p) if top_p is not None else 1.0,
                        "seed": int(seed + g),
                        "stop_id": int(stop_id),
                        "log": log_path,
                    }
                    params.append(
                        SamplingParams(
                            temperature=0.0,
                            max_tokens=max_new_tokens,
                            stop_token_ids=eos_ids,
                            detokenize=False,
                            extra_args={EXTRA_ARGS_KEY: cfg},
                        )
                    )
            outs, _ = _run_requests(llm, rows, params, desc="merged answers", use_tqdm=use_tqdm, together=True)
            for i, g in enumerate(wave):
                group_outs = [list(o.outputs[0].token_ids) for o in outs[i * num_traces : (i + 1) * num_traces]]
                if any(out != group_outs[0] for out in group_outs):
                    _mark(log_path, f"{tag}-{g}", f"answers differ: {[len(o) for o in group_outs]} tokens")
                answers.append(group_outs[0])
        with open(log_path) as f:
            failed = [line.rstrip("\n").split("\t", 1) for line in f if line.strip()]
    finally:
        os.unlink(log_path)
    if failed:
        raise RuntimeError(
            f"ThinkMerge's vLLM answer stage lost step synchronisation for {len({g for g, _ in failed})} prompt(s) "
            f"({'; '.join(reason for _, reason in failed[:3])}): a group's K "
            "requests were not scheduled in the same step (chunked prefill, preemption for lack of KV-cache space, "
            "or more rows than `max_num_seqs`). Pass fewer prompts per call, or give the engine more KV-cache space "
            "(VLLM_CPU_KVCACHE_SPACE / gpu_memory_utilization) and a larger `max_num_batched_tokens`."
        )
    return answers


def _mark(path: str, group: str, reason: str) -> None:
    with open(path, "a") as f:
        f.write(f"{group}\t{reason}\n")


__all__ = ["EXTRA_ARGS_KEY", "ThinkMergeLogitsProcessor", "thinkmerge_vllm", "warp_and_choose"]
