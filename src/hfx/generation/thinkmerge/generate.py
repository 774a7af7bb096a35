"""ThinkMerge: think in parallel, answer as one (logit averaging) as a transformers ``custom_generate`` method.

Paper: "Think in Parallel, Answer as One: Logit Averaging for Open-Ended Reasoning", Wang, Du, Kawaguchi, Pang,
arXiv 2512.02874 (https://huggingface.co/papers/2512.02874). No reference code was released.

This file is **self-contained** (it imports only torch, transformers and the standard library) so that it can be
copied verbatim to a Hub folder as ``custom_generate/generate.py``; ``hfx publish thinkmerge`` does exactly that.
Inside hfx it is :mod:`hfx.generation.thinkmerge.generate`. The HF-integration helpers the published folder needs
live here too and are reused by RMOD and the name hook: :func:`apply_logits_processors` (processors built for B
prompts applied to N rows per prompt), :func:`route_tokenizer` (``tokenizer=`` and stop strings for a callable),
:func:`generate_call_argument` (the running ``generate``'s ``streamer``), :func:`check_processor_support`.

Three ways to call it (all run the same :func:`thinkmerge` loop):

* ``model.generate(**inputs, custom_generate=hfx.thinkmerge, num_traces=4, ...)`` (a Callable: transformers
  prepares the inputs, generation config, logits processors and stopping criteria, then calls :func:`thinkmerge`);
* ``model.generate(**inputs, custom_generate="thinkmerge", ...)`` after ``import hfx`` (name hook in
  :mod:`hfx.generation.registry`);
* ``model.generate(**inputs, custom_generate="path/to/folder", trust_remote_code=True, ...)`` with the published
  folder (this file's top-level :func:`generate`).

Algorithm (two-stage map-reduce, paper Sec. 3):

* Stage I (map): every prompt is expanded to N rows (N = K for direct merge) and the rows are sampled with the
  thinking settings (the generation config's ``do_sample``/``temperature``/``top_k``/``top_p`` and the user's
  logits processors) until each row emits the delimiter ``think_end`` (token ids, or a phrase matched on decoded
  text) or the thinking budget ``max_thinking_tokens`` is spent, after which the delimiter is force-appended.
  One KV cache: the prompts are prefilled once and the cache is repeated N times; finished rows leave the batch.
* Stage II (reduce): the K chosen contexts ``prompt + trace_k + delimiter`` are left-padded and re-prefilled into an
  aligned KV cache (attention mask + position ids follow the left padding). Each step takes the mean of the K
  next-token logits of a prompt's group (z̄ = (1/K) Σ_k z^(k)), applies the logits processors and the answer-stage
  warpers (temperature/top-k/top-p) **after** averaging, picks one token and appends it to all K contexts. It stops
  per prompt on the generation config's stopping criteria (EOS, ``max_new_tokens``).
"""

from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass

import torch
from transformers import DynamicCache, GenerationMixin, StaticCache
from transformers.generation import logits_process as _lp
from transformers.generation.logits_process import (
    LogitNormalization,
    LogitsProcessorList,
    RepetitionPenaltyLogitsProcessor,
)
from transformers.generation.stopping_criteria import StoppingCriteriaList, StopStringCriteria
from transformers.utils import ModelOutput


MERGE_MODES = ("direct", "early_ready", "shortest_k")
ANSWER_MODES = ("merge", "independent", "none")
DEFAULT_MAX_THINKING_TOKENS = 1024
"""Thinking budget used when ``max_thinking_tokens`` is not given."""

# Sampling warpers (HF applies them only when do_sample=True); the answer stage rebuilds these from answer_* settings.
_WARPER_TYPES = tuple(
    getattr(_lp, name) for name in dir(_lp) if name.endswith("LogitsWarper") and isinstance(getattr(_lp, name), type)
)
_MODEL_KWARGS_USED = {"attention_mask", "position_ids", "cache", "past_key_values", "use_cache", "logits_to_keep"}
# Processors that treat every row on its own and keep no per-row state: one call serves any number of rows.
_ROW_LOCAL_PROCESSORS = tuple(
    getattr(_lp, name)
    for name in (
        "EpsilonLogitsWarper",
        "EtaLogitsWarper",
        "ExponentialDecayLengthPenalty",
        "ForcedBOSTokenLogitsProcessor",
        "ForcedEOSTokenLogitsProcessor",
        "InfNanRemoveLogitsProcessor",
        "LogitNormalization",
        "MinLengthLogitsProcessor",
        "MinNewTokensLengthLogitsProcessor",
        "MinPLogitsWarper",
        "NoBadWordsLogitsProcessor",
        "NoRepeatNGramLogitsProcessor",
        "SequenceBiasLogitsProcessor",
        "SuppressTokensAtBeginLogitsProcessor",
        "SuppressTokensLogitsProcessor",
        "TemperatureLogitsWarper",
        "TopHLogitsWarper",
        "TopKLogitsWarper",
        "TopPLogitsWarper",
        "TypicalLogitsWarper",
        "WatermarkLogitsProcessor",
    )
    if hasattr(_lp, name)
)


@dataclass
class ThinkMergeOutput(ModelOutput):
    """Output of :func:`thinkmerge` when ``return_dict_in_generate=True``.

    Args:
        sequences (`torch.LongTensor` of shape `(batch_size, prompt_length + answer_length)`):
            the prompts (as given, left-padded) followed by the merged answer; one row per prompt. Rows that stopped
            early are padded with ``pad_token_id``. With ``answer_mode="independent"`` there are K rows per prompt
            (row ``b * K + k`` answers from trace k); with ``answer_mode="none"`` only the prompts.
        traces (`list[list[torch.LongTensor]]`):
            for each prompt, the K merged traces as 1-D token-id tensors, each ending with the delimiter tokens the
            answer stage was conditioned on (matched or force-appended; after repetition trimming when enabled).
        candidate_traces (`list[list[torch.LongTensor]]`, *optional*):
            ``merge="early_ready"|"shortest_k"`` only: all N traces per prompt as sampled (ready ones end with the
            delimiter; forced ones carry the force-appended delimiter; discarded unfinished ones end where they stopped).
        candidate_lengths (`torch.LongTensor` of shape `(batch_size, num_candidates)`):
            thinking tokens of every sampled trace (the delimiter excluded).
        merged_indices (`torch.LongTensor` of shape `(batch_size, num_traces)`):
            which of the N sampled traces were merged, in merge order.
        ready_steps (`torch.LongTensor` of shape `(batch_size, num_candidates)`):
            the stage-I step (0-based) at which each trace became ready (emitted the delimiter, EOS, or hit the
            budget); ``-1`` for traces discarded unfinished under K Early-Ready.
        contexts (`torch.LongTensor` of shape `(batch_size, num_traces, context_length)`, *optional*):
            the final answer-stage contexts (left-padded with ``pad_token_id``): prompt + trace_k + answer.
        scores (`tuple(torch.FloatTensor)` of shape `(batch_size, vocab_size)`, *optional*):
            processed answer-stage scores (after averaging, processors and warpers), one per answer step, when
            ``output_scores=True``.
        logits (`tuple(torch.FloatTensor)` of shape `(batch_size, vocab_size)`, *optional*):
            the averaged raw logits z̄ per answer step, when ``output_logits=True``.
    """

    sequences: torch.LongTensor | None = None
    traces: list | None = None
    candidate_traces: list | None = None
    candidate_lengths: torch.LongTensor | None = None
    merged_indices: torch.LongTensor | None = None
    ready_steps: torch.LongTensor | None = None
    contexts: torch.LongTensor | None = None
    scores: tuple | None = None
    logits: tuple | None = None


# ----------------------------------------------------------------------------------------------------------------
# building blocks (public: tests and the benchmark use them)
# ----------------------------------------------------------------------------------------------------------------


def merge_logits(logits: torch.Tensor, num_traces: int) -> torch.Tensor:
    """Average next-token logits over each prompt's group of K contexts: z̄ = (1/K) Σ_k z^(k) (paper Eq. 2).

    softmax(z̄) is the renormalised geometric mean (Π_k p_k)^{1/K} of the K distributions (a product of experts).

    Args:
        logits (`torch.FloatTensor` of shape `(batch_size * num_traces, vocab_size)`): rows ``b*K .. b*K+K-1``
            belong to prompt ``b``.
        num_traces (`int`): K.

    Returns:
        `torch.FloatTensor` of shape `(batch_size, vocab_size)`.
    """
    if logits.shape[0] % num_traces:
        raise ValueError(f"`logits` has {logits.shape[0]} rows, not a multiple of `num_traces`={num_traces}")
    return logits.view(-1, num_traces, logits.shape[-1]).mean(dim=1)


def left_pad(sequences: list[torch.Tensor], pad_token_id: int):
    """Left-pad 1-D token-id tensors to one batch with matching attention mask and position ids.

    Args:
        sequences (`list[torch.LongTensor]`): 1-D tensors, possibly of different lengths (all non-empty).
        pad_token_id (`int`): the id written into padding positions.

    Returns:
        `(input_ids, attention_mask, position_ids)`, each of shape `(len(sequences), max_length)`; position ids count
        real tokens from 0 (padding positions hold 1, as in transformers' generation utilities).
    """
    length = max(len(s) for s in sequences)
    device = sequences[0].device
    input_ids = torch.full((len(sequences), length), pad_token_id, dtype=torch.long, device=device)
    attention_mask = torch.zeros((len(sequences), length), dtype=torch.long, device=device)
    for row, seq in enumerate(sequences):
        if len(seq):
            input_ids[row, length - len(seq) :] = seq
            attention_mask[row, length - len(seq) :] = 1
    return input_ids, attention_mask, _position_ids(attention_mask)


def trim_repetitive_suffix(token_ids: list[int], min_repeats: int = 3, max_period: int = 64) -> list[int]:
    """Remove the longest repetitive suffix of a trace, keeping one copy of the repeated block (variant C).

    [reconstruction] The paper trims "Wait / Hmm / Alternatively" loops with an unpublished regex; hfx works on token
    ids instead: for every period ``p <= max_period`` it counts how often the last ``p`` tokens repeat back to back at
    the end of the trace; among blocks repeated at least ``min_repeats`` times it removes the most tokens.

    Args:
        token_ids (`list[int]`): the trace without its delimiter.
        min_repeats (`int`, *optional*, defaults to 3): a block must occur this many times in a row.
        max_period (`int`, *optional*, defaults to 64): the longest block length considered, in tokens.

    Returns:
        `list[int]`: the trimmed trace (unchanged when no block repeats ``min_repeats`` times).
    """
    n = len(token_ids)
    cut = n
    for period in range(1, min(max_period, n // min_repeats) + 1):
        block = token_ids[n - period :]
        count = 1
        while (count + 1) * period <= n and token_ids[n - (count + 1) * period : n - count * period] == block:
            count += 1
        if count >= min_repeats:
            cut = min(cut, n - (count - 1) * period)
    return token_ids[:cut]


class Delimiter:
    """The end-of-thought delimiter: token ids (matched as a suffix) or a phrase (matched on decoded text).

    Args:
        think_end (`str` or `list[int]`): ``"</think>"``-like strings that encode to a single token are matched by
            token id; longer phrases (``"Final answer:"``) are matched on the decoded text of the trace, because BPE
            may spell them with different tokens in context. A list of token ids is matched as an exact suffix.
        tokenizer (*optional*): needed when ``think_end`` is a string.

    Attributes:
        ids (`list[int]`): the delimiter's token ids.
        text (`str` or `None`): the phrase matched on decoded text (``None`` for id matching).
        forced_ids (`list[int]`): the ids force-appended at the thinking budget (a phrase is preceded by a newline).

    Raises:
        ValueError: if ``think_end`` is empty or tokenizes to nothing, or is a string without a tokenizer.
        TypeError: if ``think_end`` is neither a string nor a sequence of ints.
    """

    def __init__(self, think_end, tokenizer=None):
        self.text = None
        self.tokenizer = tokenizer
        if isinstance(think_end, str):
            if tokenizer is None:
                raise ValueError(
                    f"`think_end`={think_end!r} is a string, so ThinkMerge needs a tokenizer: pass `tokenizer=tok` with "
                    '`custom_generate="thinkmerge"` (or the published folder). The callable form '
                    "(`custom_generate=hfx.thinkmerge`) cannot receive `tokenizer=`: transformers drops it before "
                    "calling a callable; there pass `think_end_tokenizer=tok`, or `think_end` as a list of token ids."
                )
            ids = tokenizer.encode(think_end, add_special_tokens=False) if think_end.strip() else []
            if not ids:
                raise ValueError(f"`think_end`={think_end!r} tokenizes to nothing; pass a non-empty delimiter.")
            if len(ids) > 1:
                self.text = think_end
                # [reconstruction] a forced phrase starts on a new line, so it does not glue onto the last word
                forced = tokenizer.encode("\n" + think_end.lstrip(), add_special_tokens=False)
                self.forced_ids = forced if think_end in tokenizer.decode(forced) else ids
        elif isinstance(think_end, torch.Tensor) or (
            isinstance(think_end, (list, tuple)) and all(isinstance(i, int) for i in think_end)
        ):
            ids = [int(i) for i in (think_end.tolist() if isinstance(think_end, torch.Tensor) else think_end)]
            if not ids:
                raise ValueError("`think_end` is an empty list of token ids; pass at least one id.")
        else:
            raise TypeError(f"`think_end` must be a string or a list of token ids, but is {think_end!r}")
        self.ids = ids
        if self.text is None:
            self.forced_ids = ids

    def match(self, generated: torch.Tensor, rows: torch.Tensor, num_generated: int) -> torch.Tensor:
        """Delimiter length (in tokens, > 0) for rows whose generated text now ends the thought, else 0.

        Args:
            generated (`torch.LongTensor` of shape `(num_rows, num_generated)`): the stage-I tokens so far.
            rows (`torch.LongTensor` of shape `(num_active,)`): the rows to check (the still-running ones).
            num_generated (`int`): how many tokens each row has generated.
        """
        found = torch.zeros(len(rows), dtype=torch.long, device=generated.device)
        if self.text is None:
            width = len(self.ids)
            if num_generated >= width:
                target = torch.tensor(self.ids, device=generated.device)
                hit = (generated[rows, num_generated - width : num_generated] == target).all(dim=-1)
                found[hit] = width
            return found
        # text match: a phrase of c characters spans at most c + 1 tokens at the end of the trace
        width = min(num_generated, len(self.text) + 1)
        tails = generated[rows, num_generated - width : num_generated].tolist()
        texts = self.tokenizer.batch_decode(tails, skip_special_tokens=False)
        for i, text in enumerate(texts):
            if self.text in text:
                m = 1
                while self.text not in self.tokenizer.decode(tails[i][width - m :], skip_special_tokens=False):
                    m += 1
                found[i] = m
        return found


def apply_logits_processors(
    logits_processor: LogitsProcessorList,
    input_ids: torch.LongTensor,
    scores: torch.FloatTensor,
    prompt_index: torch.LongTensor,
    batch_size: int,
) -> torch.FloatTensor:
    """Apply processors that ``generate`` built for ``batch_size`` rows (row b = prompt b) to rows of another layout.

    ThinkMerge (N traces per prompt, fewer as traces finish) and RMOD (K branches per prompt) decode more rows than
    ``generate`` prepared its processors for, and some processors hold one entry per prompt
    (``RepetitionPenaltyLogitsProcessor.prompt_ignore_length``, the left padding of each prompt;
    ``PrefixConstrainedLogitsProcessor``'s ``batch_id``; a user's processor with per-row state). Each processor sees
    rows in the layout it was built for:

    * processors that treat rows independently and keep no state (warpers, no-repeat n-gram, bad words, suppressed
      tokens, sequence bias, min length, ...) are called once on all rows;
    * ``RepetitionPenaltyLogitsProcessor`` with a per-prompt ``prompt_ignore_length`` is called once with that
      tensor gathered for the rows (``prompt_ignore_length[prompt_index]``);
    * every other processor is called once per replica with exactly ``batch_size`` rows in prompt order (replica r
      holds the r-th row of each prompt; a prompt with fewer rows is filled with a copy of another row, whose
      output is discarded).

    Args:
        logits_processor (`LogitsProcessorList`): as prepared by ``generate``.
        input_ids (`torch.LongTensor` of shape `(num_rows, sequence_length)`).
        scores (`torch.FloatTensor` of shape `(num_rows, vocab_size)`).
        prompt_index (`torch.LongTensor` of shape `(num_rows,)`): the prompt (0 .. batch_size-1) of every row.
        batch_size (`int`): the number of prompts ``generate`` prepared the processors for.

    Returns:
        `torch.FloatTensor` of shape `(num_rows, vocab_size)`.
    """
    num_rows = input_ids.shape[0]
    if num_rows == batch_size and torch.equal(prompt_index, torch.arange(batch_size, device=prompt_index.device)):
        return logits_processor(input_ids, scores)
    replicas = None
    for processor in logits_processor:
        one = LogitsProcessorList([processor])  # keeps LogitsProcessorList's argument checks
        if type(processor) in _ROW_LOCAL_PROCESSORS or (
            type(processor) is RepetitionPenaltyLogitsProcessor
            and not isinstance(processor.prompt_ignore_length, torch.Tensor)
        ):
            scores = one(input_ids, scores)
        elif type(processor) is RepetitionPenaltyLogitsProcessor:
            gathered = copy.copy(processor)
            gathered.prompt_ignore_length = processor.prompt_ignore_length.to(prompt_index.device)[prompt_index]
            scores = LogitsProcessorList([gathered])(input_ids, scores)
        else:
            if replicas is None:  # replica r = the r-th row of each prompt
                one_hot = torch.nn.functional.one_hot(prompt_index, batch_size)
                slot = (one_hot.cumsum(0) * one_hot).sum(-1) - 1
                replicas = [(slot == r).nonzero().squeeze(1) for r in range(int(slot.max()) + 1)]
            out = torch.empty_like(scores)
            for rows in replicas:
                prompts = prompt_index[rows]
                ids = input_ids[rows[:1]].expand(batch_size, -1).clone()
                ids[prompts] = input_ids[rows]
                rep_scores = scores[rows[:1]].expand(batch_size, -1).clone()
                rep_scores[prompts] = scores[rows]
                out[rows] = one(ids, rep_scores)[prompts].to(out.dtype)
            scores = out
    return scores


def check_processor_support(generation_config, method: str) -> None:
    """Reject generation options whose processors keep state that cannot follow N rows per prompt.

    Raises:
        NotImplementedError: for ``guidance_scale != 1`` (classifier-free guidance runs its own batch of B
            unconditional rows) and SynthID watermarking (per-row state across calls).
    """
    if generation_config.guidance_scale is not None and generation_config.guidance_scale != 1:
        raise NotImplementedError(
            f"`guidance_scale`={generation_config.guidance_scale} is not supported by {method}: classifier-free "
            "guidance keeps its own cache of one unconditional row per prompt; remove `guidance_scale`."
        )
    watermark = getattr(generation_config, "watermarking_config", None)
    if watermark is not None and type(watermark).__name__.startswith("SynthID"):
        raise NotImplementedError(
            f"SynthID `watermarking_config` is not supported by {method}: its processor keeps per-row state across "
            "steps; remove `watermarking_config` (the stateless green-list `WatermarkingConfig` works)."
        )


def generate_call_argument(name: str):
    """The value of argument ``name`` (e.g. ``"streamer"``) in the ``GenerationMixin.generate`` call that is running.

    ``generate()`` does not forward ``streamer`` (a ``_sample`` argument) to a ``custom_generate`` callable; this
    looks it up, read-only, in the calling ``generate`` frame a few frames up. ``None`` outside ``generate``.
    """
    generate_code = inspect.unwrap(GenerationMixin.generate).__code__
    frame = inspect.currentframe()
    try:
        for _ in range(10):
            frame = frame.f_back if frame is not None else None
            if frame is None:
                return None
            if frame.f_code is generate_code:
                return frame.f_locals.get(name)
        return None
    finally:
        del frame


def route_tokenizer(model, kwargs: dict, tokenizer_argument: str | None = None) -> dict:
    """Make ``generate(..., tokenizer=tok)`` work for a ``custom_generate`` callable (transformers 5.x drops it).

    transformers pops ``tokenizer`` before calling a ``custom_generate`` callable and then cannot build the stop-string
    criterion ("could not locate a tokenizer"). The name hook (``custom_generate="thinkmerge"`` / ``"rmod"``) and the
    published folder's :func:`generate` see the tokenizer first and call this before re-entering ``generate``:

    * stop strings (``stop_strings=`` or the generation config's) become a ``StopStringCriteria`` built with the
      tokenizer, appended to ``stopping_criteria``; ``stop_strings=None`` is passed on;
    * the tokenizer is passed to the callable as ``tokenizer_argument`` (ThinkMerge: ``think_end_tokenizer``).

    Args:
        model (`PreTrainedModel`): the model whose ``generation_config`` supplies default stop strings.
        kwargs (`dict`): the ``generate`` arguments (modified in place and returned).
        tokenizer_argument (`str`, *optional*): the callable's parameter that receives the tokenizer.

    Raises:
        ValueError: if ``tokenizer`` and ``tokenizer_argument`` name two different tokenizers.
        NotImplementedError: for ``token_healing=True`` (heal the prompt first with ``model.heal_tokens``).
    """
    tokenizer = kwargs.pop("tokenizer", None)
    if tokenizer_argument is not None:
        alias = kwargs.get(tokenizer_argument)
        if tokenizer is not None and alias is not None and alias is not tokenizer:
            raise ValueError(f"`tokenizer` and `{tokenizer_argument}` are two different tokenizers; pass one of them.")
        tokenizer = tokenizer if tokenizer is not None else alias
        if tokenizer is not None:
            kwargs[tokenizer_argument] = tokenizer
    config = kwargs.get("generation_config")

    def setting(key):
        if key in kwargs:
            return kwargs[key]
        if config is not None and getattr(config, key, None) is not None:
            return getattr(config, key)
        return getattr(model.generation_config, key, None)

    if setting("token_healing"):
        raise NotImplementedError(
            "`token_healing=True` is not supported with a `custom_generate` method (transformers does not pass the "
            "tokenizer on); heal the prompt first with `model.heal_tokens(input_ids, tokenizer)`."
        )
    stop_strings = setting("stop_strings")
    if stop_strings and tokenizer is not None:
        criteria = StoppingCriteriaList(list(kwargs.get("stopping_criteria") or []))
        criteria.append(StopStringCriteria(tokenizer=tokenizer, stop_strings=stop_strings))
        kwargs["stopping_criteria"] = criteria
        kwargs["stop_strings"] = None
    return kwargs


# ----------------------------------------------------------------------------------------------------------------
# internals
# ----------------------------------------------------------------------------------------------------------------


def _position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    position_ids = attention_mask.long().cumsum(-1) - 1
    return position_ids.masked_fill(attention_mask == 0, 1)


def _cache_argument(model) -> str:
    """The name the model's ``forward`` takes the KV cache by: ``cache`` (recent transformers 5.x) or
    ``past_key_values`` (earlier releases, e.g. 5.17, which silently ignore an unknown ``cache=`` keyword)."""
    parameters = inspect.signature(model.forward).parameters
    return "cache" if "cache" in parameters or "past_key_values" not in parameters else "past_key_values"


def _next_token_logits(model, input_ids, attention_mask, position_ids, cache) -> torch.Tensor:
    """Last-position logits; with ``cache=None`` the whole sequence is run without a cache (``use_cache=False``)."""
    out = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids,
        use_cache=cache is not None,
        logits_to_keep=1,
        **{_cache_argument(model): cache},
    )
    return out.logits[:, -1, :].to(dtype=torch.float32, copy=True)


def _choose(scores: torch.Tensor, do_sample: bool) -> torch.Tensor:
    if do_sample:
        probs = torch.nn.functional.softmax(scores, dim=-1)
        return torch.multinomial(probs, num_samples=1).squeeze(1)
    return torch.argmax(scores, dim=-1)


def _token_list(value) -> list[int]:
    if value is None:
        return []
    if isinstance(value, torch.Tensor):
        return [int(v) for v in value.flatten().tolist()]
    if isinstance(value, int):
        return [value]
    return [int(v) for v in value]


def _answer_processors(model, logits_processor, generation_config, answer_cfg: dict, prompt_length, input_ids):
    """The answer-stage processor list: the received non-warper processors, then warpers for the answer settings."""
    do_sample = answer_cfg["do_sample"]
    overrides = {k: v for k, v in answer_cfg.items() if k != "do_sample" and v is not None}
    if do_sample == generation_config.do_sample and not overrides:
        return logits_processor  # answer settings default to the thinking settings
    processors = [p for p in logits_processor if not isinstance(p, (*_WARPER_TYPES, LogitNormalization))]
    tail = [p for p in logits_processor if isinstance(p, LogitNormalization)]
    if do_sample:
        config = copy.deepcopy(generation_config)
        config.do_sample = True
        for key, value in overrides.items():
            setattr(config, key, value)
        built = model._get_logits_processor(
            generation_config=config,
            input_ids_seq_length=prompt_length,
            encoder_input_ids=input_ids,
            logits_processor=LogitsProcessorList(),
            device=input_ids.device,
            model_kwargs={},
        )
        processors += [p for p in built if isinstance(p, _WARPER_TYPES)]
    return LogitsProcessorList(processors + tail)


def _check_streamer():
    if generate_call_argument("streamer") is not None:
        raise NotImplementedError(
            "`streamer` is not supported by ThinkMerge (the answer is decoded only after all traces end); remove "
            "`streamer=` from the `generate` call."
        )


def _validate(
    model,
    generation_config,
    num_traces,
    merge,
    num_candidates,
    max_thinking_tokens,
    trim_repetitions,
    answer_mode,
    answer_temperature,
    answer_top_k,
    answer_top_p,
    model_kwargs,
):
    if isinstance(num_traces, bool) or not isinstance(num_traces, int) or num_traces < 1:
        raise ValueError(f"`num_traces` must be an integer >= 1, but is {num_traces!r}")
    if merge not in MERGE_MODES:
        raise ValueError(f"`merge` must be one of {MERGE_MODES}, but is {merge!r}")
    if answer_mode not in ANSWER_MODES:
        raise ValueError(f"`answer_mode` must be one of {ANSWER_MODES}, but is {answer_mode!r}")
    if num_candidates is not None:
        if isinstance(num_candidates, bool) or not isinstance(num_candidates, int):
            raise ValueError(f"`num_candidates` must be an integer, but is {num_candidates!r}")
        if num_candidates < num_traces:
            raise ValueError(
                f"`num_candidates` (N={num_candidates}) must be >= `num_traces` (K={num_traces}): ThinkMerge merges "
                "K of the N sampled traces."
            )
        if merge == "direct" and num_candidates != num_traces:
            raise ValueError(
                f"`num_candidates`={num_candidates} needs `merge`='early_ready' or 'shortest_k'; direct merge samples "
                f"exactly `num_traces`={num_traces} traces."
            )
    if max_thinking_tokens is not None and (
        isinstance(max_thinking_tokens, bool) or not isinstance(max_thinking_tokens, int) or max_thinking_tokens < 1
    ):
        raise ValueError(f"`max_thinking_tokens` must be an integer >= 1, but is {max_thinking_tokens!r}")
    if not isinstance(trim_repetitions, bool) and not (isinstance(trim_repetitions, int) and trim_repetitions >= 2):
        raise ValueError(
            f"`trim_repetitions` must be a bool or an integer >= 2 (min repeats), got {trim_repetitions!r}"
        )
    if answer_temperature is not None and not answer_temperature > 0:
        raise ValueError(f"`answer_temperature` must be > 0, but is {answer_temperature!r}")
    if answer_top_k is not None and (not isinstance(answer_top_k, int) or answer_top_k < 0):
        raise ValueError(f"`answer_top_k` must be an integer >= 0, but is {answer_top_k!r}")
    if answer_top_p is not None and not 0 < answer_top_p <= 1:
        raise ValueError(f"`answer_top_p` must be in (0, 1], but is {answer_top_p!r}")
    if generation_config.num_beams is not None and generation_config.num_beams > 1:
        raise ValueError(
            f"`num_beams`={generation_config.num_beams} is not supported by ThinkMerge; use `num_beams=1` (ThinkMerge "
            "samples `num_traces` traces and decodes one merged answer)."
        )
    if getattr(model.config, "is_encoder_decoder", False):
        raise NotImplementedError("ThinkMerge supports decoder-only models; `model` is an encoder-decoder model.")
    unsupported = sorted(k for k, v in model_kwargs.items() if k not in _MODEL_KWARGS_USED and v is not None)
    if unsupported:
        raise NotImplementedError(f"ThinkMerge supports text-only inputs; unsupported model inputs: {unsupported}")
    cache = model_kwargs.get("cache", model_kwargs.get("past_key_values"))
    if cache is not None and hasattr(cache, "get_seq_length") and cache.get_seq_length() > 0:
        raise NotImplementedError("ThinkMerge re-prefills its own caches; a pre-filled `cache` is not supported.")
    implementation = generation_config.cache_implementation
    if implementation not in (None, "dynamic") or isinstance(cache, StaticCache):
        raise NotImplementedError(
            f"`cache_implementation`={implementation!r} (cache {type(cache).__name__}) is not supported by "
            "ThinkMerge: it builds its own DynamicCache for the N traces and the K answer contexts (whose number of "
            "rows changes as traces finish). Remove `cache_implementation` / `cache`; `use_cache=False` is honoured."
        )
    check_processor_support(generation_config, "ThinkMerge")


def _sample_traces(
    model,
    input_ids,
    attention_mask,
    logits_processor,
    do_sample,
    num_rows,
    delimiter,
    budget,
    ready_target,
    eos_ids,
    pad_token_id,
    use_cache=True,
):
    """Stage I. Returns per-row generated tokens (R, T), body lengths, delimiter lengths, ready steps (-1: dropped)."""
    batch_size = input_ids.shape[0]
    device = input_ids.device
    rows = batch_size * num_rows
    cache = DynamicCache(config=model.config) if use_cache else None
    position_ids = _position_ids(attention_mask)
    logits = _next_token_logits(model, input_ids, attention_mask, position_ids, cache)
    if cache is not None:
        cache.batch_repeat_interleave(num_rows)  # prefill each prompt once, then share it with its N rows
    logits = logits.repeat_interleave(num_rows, dim=0)
    prompt_ids = input_ids.repeat_interleave(num_rows, dim=0)
    mask = attention_mask.repeat_interleave(num_rows, dim=0)
    next_position = position_ids[:, -1:].repeat_interleave(num_rows, dim=0) + 1

    generated = torch.full((rows, budget), pad_token_id, dtype=torch.long, device=device)
    body_length = torch.zeros(rows, dtype=torch.long, device=device)
    delimiter_length = torch.zeros(rows, dtype=torch.long, device=device)
    ready_step = torch.full((rows,), -1, dtype=torch.long, device=device)
    active = torch.arange(rows, device=device)  # rows still thinking, in the order of `cache` / `logits`
    eos = torch.tensor(eos_ids, dtype=torch.long, device=device)

    for step in range(budget):
        current = torch.cat([prompt_ids[active], generated[active, :step]], dim=-1)
        # processors were built for B rows (row b = prompt b): apply them in that layout
        scores = apply_logits_processors(logits_processor, current, logits, active // num_rows, batch_size)
        tokens = _choose(scores, do_sample)
        generated[active, step] = tokens
        matched = delimiter.match(generated, active, step + 1)
        hit_eos = torch.isin(tokens, eos) & (matched == 0) if len(eos_ids) else torch.zeros_like(matched, dtype=bool)
        done = (matched > 0) | hit_eos
        # a delimiter ends the trace with it; EOS before the delimiter is dropped and the delimiter force-appended
        body_length[active] = torch.where(matched > 0, step + 1 - matched, torch.full_like(matched, step + 1))
        body_length[active[hit_eos]] = step
        delimiter_length[active] = matched
        ready_step[active[done]] = step
        if ready_target is not None:  # K Early-Ready: stop a prompt's rows once K of its traces are ready
            ready_count = (ready_step.view(batch_size, num_rows) >= 0).sum(dim=1)
            prompt_full = (ready_count >= ready_target).repeat_interleave(num_rows)
            done = done | prompt_full[active]
        keep = ~done
        if not keep.any() or step + 1 == budget:
            break
        active, tokens = active[keep], tokens[keep]
        if not keep.all():
            if cache is not None:
                cache.batch_select_indices(keep.nonzero().squeeze(1))
            mask, next_position = mask[keep], next_position[keep]
        mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=-1)
        if cache is not None:
            logits = _next_token_logits(model, tokens[:, None], mask, next_position, cache)
        else:  # use_cache=False: run the whole sequence again
            full = torch.cat([prompt_ids[active], generated[active, : step + 1]], dim=-1)
            logits = _next_token_logits(model, full, mask, _position_ids(mask), None)
        next_position = next_position + 1

    # traces still running at the budget: force-append the delimiter (they are ready at the budget)
    unready = ready_step < 0
    if ready_target is not None:  # under Early-Ready only prompts that have fewer than K ready traces force them
        ready_count = (ready_step.view(batch_size, num_rows) >= 0).sum(dim=1)
        unready &= (ready_count < ready_target).repeat_interleave(num_rows)
    ready_step[unready] = budget
    return generated, body_length, delimiter_length, ready_step


def _select(merge, body_length, ready_step, batch_size, num_rows, num_traces):
    """Indices (B, K) of the merged traces among each prompt's N rows."""
    order = torch.arange(num_rows, device=body_length.device).expand(batch_size, num_rows)
    if merge == "direct":
        return order[:, :num_traces].clone()
    if merge == "shortest_k":
        key = body_length.view(batch_size, num_rows)
    else:  # early_ready: first K to become ready; discarded (-1) last
        key = ready_step.view(batch_size, num_rows).clone()
        key[key < 0] = torch.iinfo(torch.long).max // 2
    # stable sort: ties broken by sampling order (row index)
    return torch.sort(key, dim=1, stable=True).indices[:, :num_traces]


def _answer_stage(
    model,
    prompts,
    contexts,
    num_traces,
    average,
    logits_processor,
    stopping_criteria,
    do_sample,
    pad_token_id,
    output_scores,
    output_logits,
    use_cache=True,
):
    """Stage II: aligned re-prefill of the K contexts per prompt, then merged (or independent) decoding."""
    context_ids, context_mask, position_ids = left_pad(contexts, pad_token_id)
    cache = DynamicCache(config=model.config) if use_cache else None
    logits = _next_token_logits(model, context_ids, context_mask, position_ids, cache)
    next_position = position_ids[:, -1:] + 1
    batch_size = prompts.shape[0]
    sequences = prompts if average else prompts.repeat_interleave(num_traces, dim=0)
    # the processors' layout: row b = prompt b (independent answers have K rows per prompt)
    prompt_index = torch.arange(batch_size, device=prompts.device)
    if not average:
        prompt_index = prompt_index.repeat_interleave(num_traces)
    unfinished = torch.ones(sequences.shape[0], dtype=torch.bool, device=sequences.device)
    all_scores, all_logits, answer = [], [], []
    while True:
        merged = merge_logits(logits, num_traces) if average else logits
        scores = apply_logits_processors(logits_processor, sequences, merged, prompt_index, batch_size)
        if output_scores:
            all_scores.append(scores)
        if output_logits:
            all_logits.append(merged)
        tokens = _choose(scores, do_sample)
        tokens = torch.where(unfinished, tokens, torch.full_like(tokens, pad_token_id))
        sequences = torch.cat([sequences, tokens[:, None]], dim=-1)
        answer.append(tokens)
        unfinished &= ~stopping_criteria(sequences, scores)
        if not unfinished.any():
            break
        # the same token is appended to all K contexts of the prompt
        feed = tokens.repeat_interleave(num_traces) if average else tokens
        context_mask = torch.cat([context_mask, context_mask.new_ones((len(feed), 1))], dim=-1)
        if cache is not None:
            logits = _next_token_logits(model, feed[:, None], context_mask, next_position, cache)
        else:  # use_cache=False: run every context + answer so far again
            fed = torch.stack(answer, dim=1)
            fed = fed.repeat_interleave(num_traces, dim=0) if average else fed
            full = torch.cat([context_ids, fed], dim=-1)
            logits = _next_token_logits(model, full, context_mask, _position_ids(context_mask), None)
        next_position = next_position + 1
    answer_ids = torch.stack(answer, dim=1)
    feed_all = answer_ids.repeat_interleave(num_traces, dim=0) if average else answer_ids
    final_contexts = torch.cat([context_ids, feed_all], dim=-1)
    return sequences, final_contexts, tuple(all_scores) or None, tuple(all_logits) or None


# ----------------------------------------------------------------------------------------------------------------
# the custom_generate callable
# ----------------------------------------------------------------------------------------------------------------


def _check_token_ids(ids: list[int], vocab_size: int | None, name: str) -> None:
    """Raise a `ValueError` naming ``name`` when a token id is outside ``[0, vocab_size)`` (instead of an
    ``IndexError`` deep in the embedding); ``vocab_size=None`` (unknown) checks nothing."""
    if vocab_size is None:
        return
    bad = [i for i in ids if not 0 <= int(i) < vocab_size]
    if bad:
        raise ValueError(f"`{name}` holds token ids outside the vocabulary [0, {vocab_size}): {bad}")


def _model_vocab_size(model) -> int | None:
    """Rows of the model's input embedding (``None`` when the model exposes none)."""
    embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    return getattr(embeddings, "num_embeddings", None)


def thinkmerge(
    model,
    input_ids: torch.LongTensor,
    logits_processor: LogitsProcessorList | None = None,
    stopping_criteria=None,
    generation_config=None,
    num_traces: int = 4,
    think_end: str | list[int] = "</think>",
    max_thinking_tokens: int | None = None,
    merge: str = "direct",
    num_candidates: int | None = None,
    trim_repetitions: bool | int = False,
    answer_do_sample: bool | None = None,
    answer_temperature: float | None = None,
    answer_top_k: int | None = None,
    answer_top_p: float | None = None,
    think_end_tokenizer=None,
    traces: list | None = None,
    answer_mode: str = "merge",
    **model_kwargs,
):
    r"""ThinkMerge decoding (arXiv 2512.02874): K parallel traces, one answer from their averaged logits.

    Pass it to ``model.generate(..., custom_generate=thinkmerge, num_traces=4, ...)``: transformers prepares the
    generation config (``max_new_tokens`` bounds the answer, ``do_sample``/``temperature``/``top_k``/``top_p`` are the
    thinking settings), logits processors and stopping criteria, then calls this loop. Calling it directly requires
    those prepared objects.

    **The tokenizer.** A string ``think_end`` and ``stop_strings`` need the tokenizer. The HF form is
    ``generate(..., tokenizer=tok)``: it works with ``custom_generate="thinkmerge"`` (after ``import hfx``) and with
    the published folder, which pass ``tok`` on as ``think_end_tokenizer`` and turn stop strings into a
    ``StopStringCriteria``. transformers 5.x drops ``tokenizer=`` before calling a *callable* ``custom_generate``, so
    with ``custom_generate=hfx.thinkmerge`` pass ``think_end_tokenizer=tok`` (an alias kept for this form) and, for
    stop strings, ``stopping_criteria=StoppingCriteriaList([StopStringCriteria(tok, [...])])``.

    **Processors and batching.** The processors ``generate`` builds (``repetition_penalty``, ``no_repeat_ngram_size``,
    ``bad_words_ids``, ``min_new_tokens``, ``suppress_tokens``, ``sequence_bias``, ``prefix_allowed_tokens_fn``, yours)
    always see rows in the layout they were built for, one row per prompt (:func:`apply_logits_processors`), though
    stage I runs N rows per prompt. ``use_cache=False`` is honoured (every step re-runs the whole sequences).

    Args:
        model (`PreTrainedModel`): a decoder-only causal LM (``GenerationMixin``).
        input_ids (`torch.LongTensor` of shape `(batch_size, prompt_length)`): left-padded prompts.
        logits_processor (`LogitsProcessorList`): prepared by ``generate``; applied to every thinking step, and to the
            averaged logits z̄ at every answer step (so repetition penalty, temperature, top-k, top-p act **after**
            averaging, paper Sec. 3.2).
        stopping_criteria (`StoppingCriteriaList`): prepared by ``generate``; evaluated on ``prompt + answer`` per
            prompt (EOS, ``max_new_tokens``/``max_length`` of the answer).
        generation_config (`GenerationConfig`): prepared by ``generate``.
        num_traces (`int`, *optional*, defaults to 4): K, the traces merged per prompt (>= 1).
        think_end (`str` or `list[int]`, *optional*, defaults to `"</think>"`): the end-of-thought delimiter. A string
            that is one token (``"</think>"``) is matched by id, a longer phrase (``"Final answer:"`` for models without
            think tags) on decoded text (needs ``think_end_tokenizer``); a list of ids is matched as a suffix.
        max_thinking_tokens (`int`, *optional*, defaults to 1024): thinking budget per trace; a trace that has not
            emitted the delimiter by then gets it force-appended [reconstruction: the paper does not say].
        merge (`str`, *optional*, defaults to `"direct"`): ``"direct"`` (variant A: wait for all K traces),
            ``"early_ready"`` (variant B: sample N, merge the first K ready; the others are discarded
            [reconstruction]), ``"shortest_k"`` (variant D: sample N, merge the K with the fewest thinking tokens,
            ties by sampling order).
        num_candidates (`int`, *optional*): N for ``early_ready``/``shortest_k`` (defaults to 2K; must be >= K).
        trim_repetitions (`bool` or `int`, *optional*, defaults to `False`): variant C, remove the longest repetitive
            suffix of each merged trace (see :func:`trim_repetitive_suffix`; an int sets ``min_repeats``, True = 3).
        answer_do_sample (`bool`, *optional*): sample the answer (defaults to the generation config's ``do_sample``).
        answer_temperature (`float`, *optional*): answer temperature T (defaults to the thinking temperature).
        answer_top_k (`int`, *optional*): answer top-k (defaults to the thinking top-k).
        answer_top_p (`float`, *optional*): answer top-p (defaults to the thinking top-p).
        think_end_tokenizer (*optional*): alias of ``generate``'s ``tokenizer=`` for the callable form, which
            transformers does not pass ``tokenizer=`` to (see above).
        traces (`list[list[torch.LongTensor]]`, *optional*): skip stage I and answer from these traces (for each
            prompt K 1-D tensors ending with the delimiter, e.g. a previous output's ``traces``); this is how the
            baselines are compared on the same sampled traces.
        answer_mode (`str`, *optional*, defaults to `"merge"`): ``"merge"`` (ThinkMerge), ``"independent"`` (one
            answer per trace, no averaging: the majority-vote baseline) or ``"none"`` (stage I only).
        **model_kwargs: ``attention_mask`` (and the cache/position ids ``generate`` prepares; ThinkMerge builds its
            own caches).

    Returns:
        [`ThinkMergeOutput`] when ``return_dict_in_generate=True``, else ``sequences`` (`torch.LongTensor` of shape
        `(batch_size, prompt_length + answer_length)`).

    Raises:
        ValueError: ``num_traces < 1``, ``num_candidates < num_traces``, an unknown ``merge``, a ``think_end`` that is
            empty or tokenizes to nothing, a string ``think_end`` without a tokenizer, ``num_beams > 1``, bad
            ``answer_*`` values.
        NotImplementedError: ``streamer``, encoder-decoder models, non-text model inputs, a pre-filled cache,
            ``cache_implementation`` other than ``"dynamic"`` (e.g. ``"static"``), ``guidance_scale != 1``, SynthID
            watermarking.
    """
    _check_streamer()
    if generation_config is None:
        generation_config = model.generation_config
    if logits_processor is None:
        logits_processor = LogitsProcessorList()
    _validate(
        model,
        generation_config,
        num_traces,
        merge,
        num_candidates,
        max_thinking_tokens,
        trim_repetitions,
        answer_mode,
        answer_temperature,
        answer_top_k,
        answer_top_p,
        model_kwargs,
    )
    if stopping_criteria is None and answer_mode != "none":
        raise ValueError(
            "`stopping_criteria` is required; call ThinkMerge through `model.generate(custom_generate=...)`"
        )
    if merge != "direct" and num_candidates is None:
        num_candidates = 2 * num_traces
    num_rows = num_candidates or num_traces
    budget = max_thinking_tokens or DEFAULT_MAX_THINKING_TOKENS
    eos_ids = _token_list(generation_config.eos_token_id)
    pad_token_id = generation_config.pad_token_id
    if pad_token_id is None:
        pad_token_id = eos_ids[0] if eos_ids else 0
    pad_token_id = int(pad_token_id.item() if isinstance(pad_token_id, torch.Tensor) else _token_list(pad_token_id)[0])
    batch_size, prompt_length = input_ids.shape
    if batch_size == 0 or prompt_length == 0:
        raise ValueError(
            f"`input_ids` is empty (shape {tuple(input_ids.shape)}); ThinkMerge needs at least one prompt token per row"
        )
    use_cache = model_kwargs.get("use_cache", generation_config.use_cache) is not False
    attention_mask = model_kwargs.get("attention_mask")
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    prompts = [input_ids[b][attention_mask[b].bool()] for b in range(batch_size)]

    candidate_traces = candidate_lengths = merged_indices = ready_steps = None
    if traces is None:
        delimiter = Delimiter(think_end, think_end_tokenizer)
        _check_token_ids(delimiter.ids + delimiter.forced_ids, _model_vocab_size(model), "think_end")
        generated, body_length, delimiter_length, ready_step = _sample_traces(
            model,
            input_ids,
            attention_mask,
            logits_processor,
            generation_config.do_sample,
            num_rows,
            delimiter,
            budget,
            num_traces if merge == "early_ready" else None,
            eos_ids,
            pad_token_id,
            use_cache=use_cache,
        )
        forced_ids = torch.tensor(delimiter.forced_ids, dtype=torch.long, device=input_ids.device)
        min_repeats = 3 if trim_repetitions is True else int(trim_repetitions)
        merged_indices = _select(merge, body_length, ready_step, batch_size, num_rows, num_traces)
        candidates, traces = [], []
        for b in range(batch_size):
            per_prompt = []
            for n in range(num_rows):
                r = b * num_rows + n
                body = generated[r, : body_length[r]]
                if delimiter_length[r] > 0:
                    tail = generated[r, body_length[r] : body_length[r] + delimiter_length[r]]
                elif ready_step[r] >= 0:
                    tail = forced_ids
                else:  # discarded under Early-Ready: kept as sampled, without a delimiter
                    tail = generated[r, body_length[r] : body_length[r]]
                per_prompt.append((body, tail))
            candidates.append([torch.cat(pair) for pair in per_prompt])
            chosen = []
            for n in merged_indices[b].tolist():
                body, tail = per_prompt[n]
                if trim_repetitions:
                    body = body.new_tensor(trim_repetitive_suffix(body.tolist(), min_repeats=min_repeats))
                chosen.append(torch.cat([body, tail]))
            traces.append(chosen)
        candidate_lengths = body_length.view(batch_size, num_rows)
        ready_steps = ready_step.view(batch_size, num_rows)
        if merge != "direct":  # with N = K the candidates are the merged traces themselves
            candidate_traces = candidates
    else:
        if len(traces) != batch_size or any(len(t) != num_traces for t in traces):
            raise ValueError(
                f"`traces` must hold `num_traces`={num_traces} tensors for each of the {batch_size} prompts, got "
                f"{[len(t) for t in traces]}"
            )
        traces = [[t.to(input_ids.device) for t in per_prompt] for per_prompt in traces]

    if answer_mode == "none":
        sequences, contexts, scores, logits = input_ids, None, None, None
    else:
        contexts_list = [torch.cat([prompts[b], t]) for b in range(batch_size) for t in traces[b]]
        answer_processors = _answer_processors(
            model,
            logits_processor,
            generation_config,
            {
                "do_sample": answer_do_sample if answer_do_sample is not None else generation_config.do_sample,
                "temperature": answer_temperature,
                "top_k": answer_top_k,
                "top_p": answer_top_p,
            },
            prompt_length,
            input_ids,
        )
        do_sample = answer_do_sample if answer_do_sample is not None else bool(generation_config.do_sample)
        sequences, contexts, scores, logits = _answer_stage(
            model,
            input_ids,
            contexts_list,
            num_traces,
            answer_mode == "merge",
            answer_processors,
            stopping_criteria,
            do_sample,
            pad_token_id,
            bool(generation_config.output_scores),
            bool(generation_config.output_logits),
            use_cache=use_cache,
        )
        contexts = contexts.view(batch_size, num_traces, -1)

    if not generation_config.return_dict_in_generate:
        return sequences
    return ThinkMergeOutput(
        sequences=sequences,
        traces=traces,
        candidate_traces=candidate_traces,
        candidate_lengths=candidate_lengths,
        merged_indices=merged_indices,
        ready_steps=ready_steps,
        contexts=contexts,
        scores=scores,
        logits=logits,
    )


def generate(*args, model=None, **kwargs):
    """Entry point of the folder form (``custom_generate/generate.py``): ``generate`` with :func:`thinkmerge`.

    transformers calls it as ``generate(model=model, inputs=..., generation_config=..., **user_kwargs)`` for
    ``model.generate(custom_generate="<folder or repo>", trust_remote_code=True, ...)``, and as
    ``generate(*user_args, model=model, **user_kwargs)`` after ``from_pretrained(repo, trust_remote_code=True)`` made
    it the model's ``generate``. It re-enters the class's ``generate`` with the :func:`thinkmerge` callable, so inputs,
    processors and stopping criteria are prepared as usual. ``tokenizer=`` is used for a string ``think_end`` and for
    ``stop_strings`` (:func:`route_tokenizer`). A ``custom_generate=`` argument runs that method instead.
    """
    if model is None:
        if not args:
            raise TypeError("generate() needs the model (`model=` or the first positional argument)")
        model, args = args[0], args[1:]
    custom_generate = kwargs.pop("custom_generate", None)
    if custom_generate is not None:  # the user asked for another method on a model whose `generate` is this one
        return type(model).generate(model, *args, custom_generate=custom_generate, **kwargs)
    kwargs = route_tokenizer(model, kwargs, "think_end_tokenizer")
    return type(model).generate(model, *args, custom_generate=thinkmerge, **kwargs)


__all__ = [
    "ANSWER_MODES",
    "MERGE_MODES",
    "Delimiter",
    "ThinkMergeOutput",
    "apply_logits_processors",
    "check_processor_support",
    "generate",
    "generate_call_argument",
    "left_pad",
    "merge_logits",
    "route_tokenizer",
    "thinkmerge",
    "trim_repetitive_suffix",
]
