"""Budget forcing (the s1 strategy) as a transformers ``custom_generate`` method, for plain causal LMs.

s1 ("s1: Simple test-time scaling", Muennighoff et al., arXiv 2501.19393, Sec. 3.1) controls how long a model thinks:
when the model tries to end its thinking (emits the end-of-thinking delimiter), the delimiter is suppressed and a
continuation such as "Wait" is appended instead, up to N times; a thinking budget caps the thought by force-appending
the delimiter. arXiv 2510.06135 (Heavy TTS, Sec. 4) applies the same idea to search agents
(:func:`hfx.agents.heavy.solve_budget_forcing`). Here it is one decoding loop over a left-padded batch:

* each row decodes as in HF's sampling loop (same ``_prefill``, ``prepare_inputs_for_generation``, KV cache, logits
  processors, stopping criteria), so with ``num_extra_rounds=0`` and no cap the output equals plain ``generate``
  token for token (tested, greedy);
* when a thinking row's generated text ends with ``think_end`` (token ids, one-token strings by id, longer phrases on
  decoded text; :class:`hfx.generation.thinkmerge.Delimiter`) and it has forcing rounds left, the delimiter is
  suppressed: its last token is replaced by the first continuation token and the rest of the continuation is forced
  in the next steps. The earlier tokens of a multi-token delimiter are already in the KV cache: they are masked out
  (attention mask 0, position ids shifted back) and shown as ``pad_token_id`` in ``sequences``, so the model continues
  as if it had written ``thought + continuation``;
* a row that has thought ``max_thinking_tokens`` tokens (continuations included, delimiters excluded) gets the
  delimiter force-appended, then answers. ``max_new_tokens`` bounds thinking + answer, as in ``generate``.

EOS during thinking ends the row (as in ``generate``); only the delimiter is suppressed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import StaticCache
from transformers.generation.logits_process import LogitsProcessorList
from transformers.utils import ModelOutput

from ..thinkmerge.generate import Delimiter, check_processor_support, generate_call_argument


THINKING, FORCING_END, ANSWERING = 0, 1, 2


@dataclass
class BudgetForcingOutput(ModelOutput):
    """Output of :func:`budget_forcing` with ``return_dict_in_generate=True``.

    Args:
        sequences (`torch.LongTensor` of shape `(batch_size, sequence_length)`): prompts + generated tokens; suppressed
            tokens of a multi-token delimiter and positions after a row finished hold ``pad_token_id``.
        num_rounds (`torch.LongTensor` of shape `(batch_size,)`): continuations injected per row (<= ``num_extra_rounds``).
        num_thinking_tokens (`torch.LongTensor` of shape `(batch_size,)`): thinking tokens per row (continuations
            included, delimiters excluded).
        forced_think_end (`torch.BoolTensor` of shape `(batch_size,)`): rows whose delimiter was force-appended at
            ``max_thinking_tokens``.
        think_end_positions (`torch.LongTensor` of shape `(batch_size,)`): generated tokens up to and including the
            final delimiter (``-1`` while the row never ended its thinking).
        traces (`list[torch.LongTensor]`): per row, the visible thinking tokens + final delimiter (1-D; ends where
            the row stopped if it never ended thinking). Pass them to ThinkMerge's ``traces=`` (see the docs).
        scores / logits (`tuple(torch.FloatTensor)` of shape `(batch_size, vocab_size)`, *optional*): per step, as
            in ``generate`` (forced steps hold the model's scores, not the forced token's).
    """

    sequences: torch.LongTensor | None = None
    num_rounds: torch.LongTensor | None = None
    num_thinking_tokens: torch.LongTensor | None = None
    forced_think_end: torch.BoolTensor | None = None
    think_end_positions: torch.LongTensor | None = None
    traces: list | None = None
    scores: tuple | None = None
    logits: tuple | None = None


@torch.no_grad()
def budget_forcing(
    model,
    input_ids: torch.LongTensor,
    logits_processor: LogitsProcessorList | None = None,
    stopping_criteria=None,
    generation_config=None,
    think_end: str | list[int] = "</think>",
    num_extra_rounds: int = 1,
    continuation: str | list[int] = "Wait",
    max_thinking_tokens: int | None = None,
    stop_at_think_end: bool = False,
    think_end_tokenizer=None,
    **model_kwargs,
):
    r"""Budget forcing decoding: suppress the end of thinking and append ``continuation`` up to N times; cap thinking.

    Use ``model.generate(**inputs, custom_generate="budget_forcing", think_end="</think>", num_extra_rounds=2,
    tokenizer=tok)`` after ``import hfx`` (or ``custom_generate=hfx.budget_forcing`` with
    ``think_end_tokenizer=tok``, since transformers drops ``tokenizer=`` before calling a callable).

    Args:
        model (`PreTrainedModel`): a decoder-only causal LM.
        input_ids (`torch.LongTensor` of shape `(batch_size, prompt_length)`): left-padded prompts.
        logits_processor, stopping_criteria, generation_config: prepared by ``generate``.
        think_end (`str` or `list[int]`, *optional*, defaults to `"</think>"`): the end-of-thinking delimiter (a
            string needs the tokenizer; a one-token string is matched by id, a phrase on decoded text).
        num_extra_rounds (`int`, *optional*, defaults to 1): N, how many times the delimiter is suppressed (>= 0).
        continuation (`str` or `list[int]`, *optional*, defaults to `"Wait"`): appended instead of the delimiter
            (tokenised without special tokens; a string needs the tokenizer).
        max_thinking_tokens (`int`, *optional*): thinking budget per row; the delimiter is force-appended when it is
            reached (``None``: no cap).
        stop_at_think_end (`bool`, *optional*, defaults to `False`): end each row with its final delimiter (no
            answer); for sampling traces to merge with ThinkMerge.
        think_end_tokenizer (*optional*): the tokenizer for string ``think_end`` / ``continuation`` (filled from
            ``generate(..., tokenizer=tok)`` by the ``"budget_forcing"`` name).
        **model_kwargs: as prepared by ``generate`` (``attention_mask``, ``position_ids``, cache, ``use_cache``).

    Returns:
        :class:`BudgetForcingOutput` when ``return_dict_in_generate=True``, else ``sequences``.

    Raises:
        ValueError: for ``num_extra_rounds`` < 0, ``max_thinking_tokens`` < 1, an empty ``continuation``, a string
            ``think_end`` / ``continuation`` without a tokenizer, ``num_beams > 1``.
        NotImplementedError: encoder-decoder models, a static cache, ``guidance_scale != 1``, SynthID watermarking,
            or a ``streamer`` with more than one row.
    """
    if generation_config is None:
        generation_config = model.generation_config
    if logits_processor is None:
        logits_processor = LogitsProcessorList()
    if stopping_criteria is None:
        raise ValueError(
            "`stopping_criteria` is required; call budget forcing through `model.generate(custom_generate=...)`"
        )
    _validate(model, generation_config, num_extra_rounds, max_thinking_tokens, model_kwargs)
    delimiter = Delimiter(think_end, think_end_tokenizer)
    cont_ids = _continuation_ids(continuation, think_end_tokenizer) if num_extra_rounds > 0 else None
    batch_size, prompt_length = input_ids.shape
    device = input_ids.device
    streamer = generate_call_argument("streamer")
    if streamer is not None and batch_size > 1:
        raise NotImplementedError("a `streamer` needs a single row (as in `generate`); remove `streamer=` or batch 1")
    pad = generation_config._pad_token_tensor
    pad_token_id = int(pad.item()) if pad is not None else 0
    has_eos = any(hasattr(c, "eos_token_id") for c in stopping_criteria)
    do_sample = bool(generation_config.do_sample)
    output_scores, output_logits = bool(generation_config.output_scores), bool(generation_config.output_logits)
    next_len = 1 if model_kwargs.get("use_cache", True) else None

    state = torch.full((batch_size,), THINKING, dtype=torch.long)
    rounds = torch.zeros(batch_size, dtype=torch.long)
    thinking_tokens = torch.zeros(batch_size, dtype=torch.long)
    forced = torch.zeros(batch_size, dtype=torch.bool)
    end_position = torch.full((batch_size,), -1, dtype=torch.long)
    queues: list[list[int]] = [[] for _ in range(batch_size)]
    hidden = torch.zeros_like(input_ids, dtype=torch.bool)
    unfinished = torch.ones(batch_size, dtype=torch.long, device=device)
    all_scores, all_logits = [], []

    outputs = model._prefill(input_ids, generation_config, model_kwargs)
    model_kwargs = model._update_model_kwargs_for_generation(outputs, model_kwargs)
    next_logits = outputs.logits[:, -1].to(copy=True, dtype=torch.float32, device=device)
    del outputs
    while True:
        scores = logits_processor(input_ids, next_logits)
        if output_scores:
            all_scores.append(scores)
        if output_logits:
            all_logits.append(next_logits)
        if do_sample:
            tokens = torch.multinomial(torch.nn.functional.softmax(scores, dim=-1), num_samples=1).squeeze(1)
        else:
            tokens = torch.argmax(scores, dim=-1)
        # forced tokens: the rest of a continuation, or the delimiter at the thinking budget
        for row, queue in enumerate(queues):
            if queue:
                tokens[row] = queue.pop(0)
        if has_eos:
            tokens = tokens * unfinished + pad_token_id * (1 - unfinished)
        input_ids = torch.cat([input_ids, tokens[:, None]], dim=-1)
        hidden = torch.cat([hidden, hidden.new_zeros((batch_size, 1))], dim=-1)
        generated = input_ids.shape[1] - prompt_length
        live = unfinished.bool().cpu()
        _advance(
            input_ids[:, prompt_length:], generated, live, state, rounds, thinking_tokens, forced, end_position,
            queues, hidden, delimiter, cont_ids, num_extra_rounds, max_thinking_tokens, model_kwargs, prompt_length,
        )  # fmt: skip
        if streamer is not None:
            streamer.put(input_ids[:, -1].cpu())
        unfinished = unfinished & ~stopping_criteria(input_ids, scores)
        if stop_at_think_end:
            unfinished = unfinished & (state != ANSWERING).to(device=device, dtype=unfinished.dtype)
        if not unfinished.any():
            break
        model_inputs = model.prepare_inputs_for_generation(input_ids, next_sequence_length=next_len, **model_kwargs)
        out = model(**model_inputs, return_dict=True)
        model_kwargs = model._update_model_kwargs_for_generation(out, model_kwargs)
        next_logits = out.logits[:, -1].to(copy=True, dtype=torch.float32, device=device)
        del out
    if streamer is not None:
        streamer.end()

    sequences = input_ids.masked_fill(hidden.to(device), pad_token_id)
    if not generation_config.return_dict_in_generate:
        return sequences
    traces = []
    for row in range(batch_size):
        visible = input_ids[row, prompt_length:][~hidden[row, prompt_length:].to(device)]
        stop = int(end_position[row]) - int(hidden[row, prompt_length:].sum()) if end_position[row] >= 0 else None
        traces.append(visible[:stop] if stop is not None else visible)
    return BudgetForcingOutput(
        sequences=sequences,
        num_rounds=rounds,
        num_thinking_tokens=thinking_tokens,
        forced_think_end=forced,
        think_end_positions=end_position,
        traces=traces,
        scores=tuple(all_scores) if output_scores else None,
        logits=tuple(all_logits) if output_logits else None,
    )


def _advance(generated_ids, generated, live, state, rounds, thinking_tokens, forced, end_position, queues, hidden,
             delimiter, cont_ids, num_extra_rounds, max_thinking_tokens, model_kwargs, prompt_length):  # fmt: skip
    """Per-row bookkeeping after a token was appended (``generated`` tokens so far)."""
    for row in range(len(state)):
        if not live[row]:
            continue
        if state[row] == FORCING_END and not queues[row]:  # the forced delimiter is complete
            state[row], end_position[row] = ANSWERING, generated
        elif state[row] == THINKING:  # sampled or forced continuation token
            thinking_tokens[row] += 1
    thinking_rows = torch.nonzero((state == THINKING) & live).flatten()
    if len(thinking_rows):
        matched = delimiter.match(generated_ids, thinking_rows.to(generated_ids.device), generated).cpu()
        for i, row in enumerate(thinking_rows.tolist()):
            m = int(matched[i])
            if m == 0 or queues[row]:
                continue
            thinking_tokens[row] -= m
            if rounds[row] < num_extra_rounds:  # suppress the delimiter, inject the continuation
                generated_ids[row, -1] = cont_ids[0]
                queues[row] = list(cont_ids[1:])
                thinking_tokens[row] += 1
                rounds[row] += 1
                if m > 1:
                    _hide(row, m - 1, hidden, model_kwargs, generated_ids.shape[1] + prompt_length)
            else:
                state[row], end_position[row] = ANSWERING, generated
    if max_thinking_tokens is not None:
        for row in (
            torch.nonzero((state == THINKING) & live & (thinking_tokens >= max_thinking_tokens)).flatten().tolist()
        ):
            queues[row] = list(delimiter.forced_ids)
            state[row], forced[row] = FORCING_END, True


def _hide(row, count, hidden, model_kwargs, length):
    """Mask the ``count`` tokens before the last one of ``row`` (already in the KV cache) and shift its positions."""
    mask = model_kwargs.get("attention_mask")
    if mask is None:
        mask = torch.ones((hidden.shape[0], length), dtype=torch.long, device=hidden.device)
    mask = mask.clone()
    mask[row, length - 1 - count : length - 1] = 0
    model_kwargs["attention_mask"] = mask
    hidden[row, length - 1 - count : length - 1] = True
    position_ids = model_kwargs.get("position_ids")
    if position_ids is not None:
        position_ids = position_ids.clone()
        position_ids[..., row, -1] -= count
        model_kwargs["position_ids"] = position_ids


def _continuation_ids(continuation, tokenizer) -> list[int]:
    if isinstance(continuation, str):
        if tokenizer is None:
            raise ValueError(
                f"`continuation`={continuation!r} is a string, so budget forcing needs a tokenizer: pass `tokenizer=tok` "
                '(with `custom_generate="budget_forcing"`) or `think_end_tokenizer=tok`, or token ids.'
            )
        ids = tokenizer.encode(continuation, add_special_tokens=False)
    elif isinstance(continuation, torch.Tensor) or (
        isinstance(continuation, (list, tuple)) and all(isinstance(i, int) for i in continuation)
    ):
        ids = [int(i) for i in (continuation.tolist() if isinstance(continuation, torch.Tensor) else continuation)]
    else:
        raise TypeError(f"`continuation` must be a string or a list of token ids, but is {continuation!r}")
    if not ids:
        raise ValueError(f"`continuation`={continuation!r} is empty; pass at least one token (e.g. 'Wait').")
    return ids


def _validate(model, generation_config, num_extra_rounds, max_thinking_tokens, model_kwargs):
    if isinstance(num_extra_rounds, bool) or not isinstance(num_extra_rounds, int) or num_extra_rounds < 0:
        raise ValueError(f"`num_extra_rounds` must be an integer >= 0, but is {num_extra_rounds!r}")
    if max_thinking_tokens is not None and (
        isinstance(max_thinking_tokens, bool) or not isinstance(max_thinking_tokens, int) or max_thinking_tokens < 1
    ):
        raise ValueError(f"`max_thinking_tokens` must be None or an integer >= 1, but is {max_thinking_tokens!r}")
    if generation_config.num_beams is not None and generation_config.num_beams > 1:
        raise ValueError(f"`num_beams`={generation_config.num_beams} is not supported by budget forcing; use 1.")
    if getattr(model.config, "is_encoder_decoder", False):
        raise NotImplementedError("budget forcing supports decoder-only models; `model` is an encoder-decoder model.")
    if isinstance(model_kwargs.get("cache"), StaticCache) or generation_config.cache_implementation == "static":
        raise NotImplementedError(
            "budget forcing needs a dynamic cache (it masks suppressed tokens); remove the static cache."
        )
    check_processor_support(generation_config, "budget forcing")
