"""Baselines in the ThinkMerge API, and the strategy runner behind ``hfx generate`` / ``hfx eval gsm8k``.

Every strategy is a call of :func:`~hfx.generation.thinkmerge.thinkmerge` through ``model.generate``:

* ``greedy`` -- one trace, greedy (``num_traces=1, do_sample=False``): ordinary greedy decoding with the same thinking
  budget and answer budget (conformance case 1: K = 1 is ordinary decoding);
* ``sample`` -- one sampled trace and answer (single-sample pass@1);
* ``majority`` -- K sampled traces, one independent answer per trace (``answer_mode="independent"``), then a majority
  vote over the K extracted numeric answers (ties: the answer that appears first in trace order);
* ``thinkmerge`` -- the same K traces (``traces=`` reuses them, so the comparison is on the same samples), one answer
  decoded from their averaged logits.

:func:`build_prompt` writes the chat prompt: for models with a ``</think>`` token (Qwen3, DeepSeek-R1 distills) the
question with a ``\\boxed{}`` instruction and ``think_end="</think>"``; otherwise (e.g. SmolLM2) an instruction to
reason and end with ``Final answer: <number>``, and ``think_end="Final answer:"`` matched on decoded text.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

import torch

from .answer import extract_numeric_answer
from .generate import thinkmerge


STRATEGIES = ("greedy", "sample", "majority", "thinkmerge")
FINAL_ANSWER = "Final answer:"
THINK_TAG = "</think>"


def majority_vote(answers: list[str | None]) -> tuple[str | None, Counter]:
    """Most frequent non-``None`` answer (ties: first in order) and the counts; ``(None, Counter())`` if none."""
    counts = Counter(a for a in answers if a is not None)
    if not counts:
        return None, counts
    best = max(counts.values())
    return next(a for a in answers if a is not None and counts[a] == best), counts


def has_think_tags(tokenizer) -> bool:
    """Whether ``</think>`` is a single token of ``tokenizer`` (Qwen3-style thinking models)."""
    ids = tokenizer.encode(THINK_TAG, add_special_tokens=False)
    return len(ids) == 1


def build_prompt(tokenizer, question: str) -> tuple[str, str]:
    """The generation prompt for ``question`` and the matching ``think_end`` delimiter.

    Returns:
        `(prompt, think_end)`: the chat-templated prompt (with the generation prompt) and ``"</think>"`` or
        ``"Final answer:"``.
    """
    if has_think_tags(tokenizer):
        content = f"{question}\nPlease reason step by step, and put your final answer within \\boxed{{}}."
        think_end = THINK_TAG
    else:
        content = f"{question}\nThink step by step, then write the result on a last line as '{FINAL_ANSWER} <number>'."
        think_end = FINAL_ANSWER
    messages = [{"role": "user", "content": content}]
    if getattr(tokenizer, "chat_template", None):
        prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    else:
        prompt = f"Question: {content}\nAnswer: "
    return prompt, think_end


@dataclass
class StrategyResult:
    """One strategy's result for one prompt.

    Args:
        text (`str`): the answer text after the delimiter (for ``majority``: the answer of the winning trace).
        prediction (`str`, *optional*): the extracted numeric answer.
        generated_tokens (`int`): tokens sampled for this prompt: thinking tokens of all traces (delimiters
            excluded) plus answer tokens (all K answers for ``majority``).
        traces (`list[str]`): decoded traces (with their delimiter).
        answers (`list[str]`): ``majority`` only: the K independent answers.
    """

    text: str
    prediction: str | None
    generated_tokens: int
    traces: list[str] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)


def _answer_length(ids: list[int], stop_ids: set[int]) -> int:
    for i, token in enumerate(ids):
        if token in stop_ids:
            return i + 1
    return len(ids)


def run_strategies(
    model,
    tokenizer,
    questions: list[str],
    strategies: tuple[str, ...] | list[str] = ("greedy", "majority", "thinkmerge"),
    num_traces: int = 4,
    max_thinking_tokens: int = 256,
    max_new_tokens: int = 64,
    temperature: float = 0.7,
    top_p: float = 0.95,
    answer_do_sample: bool | None = None,
    seed: int = 0,
    on_strategy_done=None,
    logits_processor=None,
    **thinkmerge_kwargs,
) -> tuple[dict[str, list[StrategyResult]], dict[str, float]]:
    """Run the strategies on a batch of questions; ``majority`` and ``thinkmerge`` share the same K traces.

    Args:
        model, tokenizer: a causal LM and its tokenizer (left padding).
        questions (`list[str]`): the batch.
        strategies: a subset of :data:`STRATEGIES`.
        num_traces (`int`, *optional*, defaults to 4): K.
        max_thinking_tokens, max_new_tokens (`int`): thinking budget per trace and answer budget.
        temperature, top_p (`float`): thinking sampling settings (greedy ignores them).
        answer_do_sample (`bool`, *optional*): answer-stage sampling (defaults to the thinking setting).
        seed (`int`): ``torch.manual_seed`` before each strategy.
        logits_processor (`LogitsProcessorList`, *optional*): passed to every ``generate`` call (e.g. the CLI's
            per-token progress bar).
        on_strategy_done (`Callable[[str], None]`, *optional*): called with a strategy's name when it finishes (for
            progress bars).
        **thinkmerge_kwargs: more :func:`thinkmerge` arguments (``merge``, ``num_candidates``, ``trim_repetitions``).

    Returns:
        `(results, seconds)`: per strategy the list of :class:`StrategyResult` and the wall seconds for the batch
        (for ``majority`` and ``thinkmerge``: the shared thinking stage plus the strategy's own answer stage).

    Raises:
        ValueError: for an unknown strategy.
    """
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown:
        raise ValueError(f"`strategies` must be among {STRATEGIES}, got {unknown}")
    prompts, think_ends = zip(*(build_prompt(tokenizer, q) for q in questions), strict=True)
    think_end = think_ends[0]
    enc = tokenizer(list(prompts), return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
    prompt_length = enc["input_ids"].shape[1]
    stop_ids = {int(i) for i in _ids(model.generation_config.eos_token_id)}
    common = dict(
        custom_generate=thinkmerge,
        think_end=think_end,
        think_end_tokenizer=tokenizer,
        max_thinking_tokens=max_thinking_tokens,
        max_new_tokens=max_new_tokens,
        return_dict_in_generate=True,
        pad_token_id=tokenizer.pad_token_id,
    )
    if logits_processor is not None:
        common["logits_processor"] = logits_processor
    sampling = dict(do_sample=True, temperature=temperature, top_p=top_p, top_k=0)
    results: dict[str, list[StrategyResult]] = {}
    seconds: dict[str, float] = {}

    def decode(ids) -> str:
        return tokenizer.decode(ids, skip_special_tokens=True)

    def single(out) -> list[StrategyResult]:
        rows = []
        for b in range(len(questions)):
            answer = out.sequences[b, prompt_length:].tolist()
            n_answer = _answer_length(answer, stop_ids)
            text = decode(answer[:n_answer])
            thinking = int(out.candidate_lengths[b].sum())
            prediction = extract_numeric_answer(text)
            rows.append(StrategyResult(text, prediction, thinking + n_answer, [decode(out.traces[b][0])]))
        return rows

    for name, settings in (("greedy", dict(do_sample=False)), ("sample", sampling)):
        if name in strategies:
            torch.manual_seed(seed)
            start = time.perf_counter()
            out = model.generate(**enc, num_traces=1, answer_do_sample=answer_do_sample, **settings, **common)
            seconds[name] = time.perf_counter() - start
            results[name] = single(out)
            _notify(on_strategy_done, name)

    if "majority" in strategies or "thinkmerge" in strategies:
        torch.manual_seed(seed)
        start = time.perf_counter()
        stage1 = model.generate(
            **enc, num_traces=num_traces, answer_mode="none", **sampling, **common, **thinkmerge_kwargs
        )
        thinking_seconds = time.perf_counter() - start
        traces = stage1.traces
        # thinking tokens sampled in stage I (delimiters excluded), all N candidates under early_ready / shortest_k
        thinking_tokens = [int(n) for n in stage1.candidate_lengths.sum(dim=1)]
        extra = {k: v for k, v in thinkmerge_kwargs.items() if k not in ("merge", "num_candidates")}
        if "thinkmerge" in strategies:
            torch.manual_seed(seed + 1)
            start = time.perf_counter()
            out = model.generate(
                **enc,
                num_traces=num_traces,
                traces=traces,
                answer_do_sample=answer_do_sample,
                **sampling,
                **common,
                **extra,
            )
            seconds["thinkmerge"] = thinking_seconds + time.perf_counter() - start
            rows = []
            for b in range(len(questions)):
                answer = out.sequences[b, prompt_length:].tolist()
                n_answer = _answer_length(answer, stop_ids)
                text = decode(answer[:n_answer])
                rows.append(
                    StrategyResult(
                        text,
                        extract_numeric_answer(text),
                        thinking_tokens[b] + n_answer,
                        [decode(t) for t in traces[b]],
                    )
                )
            results["thinkmerge"] = rows
            _notify(on_strategy_done, "thinkmerge")
        if "majority" in strategies:
            torch.manual_seed(seed + 1)
            start = time.perf_counter()
            out = model.generate(
                **enc,
                num_traces=num_traces,
                traces=traces,
                answer_mode="independent",
                answer_do_sample=answer_do_sample,
                **sampling,
                **common,
                **extra,
            )
            seconds["majority"] = thinking_seconds + time.perf_counter() - start
            rows = []
            for b in range(len(questions)):
                texts, n_tokens = [], thinking_tokens[b]
                for k in range(num_traces):
                    answer = out.sequences[b * num_traces + k, prompt_length:].tolist()
                    n_answer = _answer_length(answer, stop_ids)
                    texts.append(decode(answer[:n_answer]))
                    n_tokens += n_answer
                predictions = [extract_numeric_answer(t) for t in texts]
                winner, _ = majority_vote(predictions)
                text = texts[predictions.index(winner)] if winner is not None else texts[0]
                rows.append(StrategyResult(text, winner, n_tokens, [decode(t) for t in traces[b]], texts))
            results["majority"] = rows
            _notify(on_strategy_done, "majority")
    return results, seconds


def _notify(callback, name: str) -> None:
    if callback is not None:
        callback(name)


def _ids(value) -> list[int]:
    if value is None:
        return []
    if isinstance(value, torch.Tensor):
        return value.flatten().tolist()
    if isinstance(value, int):
        return [value]
    return list(value)


__all__ = ["STRATEGIES", "StrategyResult", "build_prompt", "has_think_tags", "majority_vote", "run_strategies"]
