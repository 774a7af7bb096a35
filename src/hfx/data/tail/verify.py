"""Verifiers: replay a TAIL-style trace, score an answer (reasoning-gym style), and a TRL reward function."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .formats import extract_answer, normalize_answer
from .registry import get_task
from .trace import parse_trace, replay


@dataclass
class TraceReport:
    """What :func:`verify_trace` found.

    Attributes:
        valid (`bool`): the trace parses, its ``INPUT`` tape is the example's, every fetch and atomic operation
            replays, and the answer read from the replayed memory equals the ``ANSWER`` line (strict mode).
        answer_correct (`bool`): the ``ANSWER`` line equals the gold answer.
        answer (`str` or `None`): the normalised ``ANSWER``.
        num_steps (`int`): step lines; checked_ops (`int`): those re-executed against :data:`~.trace.OPS`.
        errors (`list[str]`): every problem found, with its line number.
    """

    valid: bool
    answer_correct: bool
    answer: str | None
    num_steps: int
    checked_ops: int
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.valid and self.answer_correct


def _example_input(example: dict | None) -> dict | None:
    if not example:
        return None
    meta = example.get("metadata")
    if isinstance(meta, dict) and meta.get("input"):
        raw = meta["input"]
        return json.loads(raw) if isinstance(raw, str) else raw
    return None


def verify_trace(
    task: str, trace: str, example: dict | None = None, *, inp: dict | None = None, strict: bool | None = None
) -> TraceReport:
    """Replay a TAIL-style trace and check its answer.

    Args:
        task (`str`): the task name (see :func:`~hfx.data.tail.list_tasks`).
        trace (`str`): the trace text (a model completion or the ``trace`` column).
        example (`dict`, *optional*): a dataset row; its ``metadata["input"]`` gives the input and ``answer`` the
            gold answer; ``metadata["linear"] == False`` selects non-strict replay.
        inp (`dict`, *optional*): the task input, instead of ``example``.
        strict (`bool`, *optional*): step-by-step replay (default, unless the example says ``linear=False``). A
            ``linear=False`` trace skips steps, so only its fetch syntax and answer can be checked.

    Returns:
        :class:`TraceReport`.
    """
    spec = get_task(task)
    inp = inp if inp is not None else _example_input(example)
    if strict is None:
        meta = (example or {}).get("metadata") or {}
        strict = bool(meta.get("linear", True)) if isinstance(meta, dict) else True
    parsed = parse_trace(trace)
    rr = replay(parsed, strict=strict)
    errors = list(rr.errors)
    if parsed.task is not None and parsed.task != spec.name:
        errors.append(f"TASK is {parsed.task!r}, expected {spec.name!r}")
    answer = normalize_answer(parsed.answer) if parsed.answer is not None else None
    gold = None
    if example is not None and "answer" in example:
        gold = normalize_answer(str(example["answer"]))
    elif inp is not None:
        gold = normalize_answer(spec.solve(inp))
    if inp is not None and parsed.input is not None:
        expected = spec.memory(inp)
        if parsed.input != expected:
            diff = sorted(set(expected.items()) ^ set(parsed.input.items()), key=str)[:4]
            errors.append(f"INPUT tape differs from the example's input (e.g. {diff})")
        elif strict and not errors:
            try:
                from_memory = normalize_answer(spec.read_answer(rr.memory, inp))
            except (KeyError, ValueError, TypeError) as err:
                errors.append(f"the replayed memory holds no answer ({err!r})")
            else:
                if from_memory != answer:
                    errors.append(f"ANSWER {answer} but the replayed memory gives {from_memory}")
    return TraceReport(
        valid=not errors,
        answer_correct=answer is not None and answer == gold,
        answer=answer,
        num_steps=len(parsed.steps),
        checked_ops=rr.checked_ops,
        errors=errors,
    )


def score_answer(
    task: str, completion: str, example: dict[str, Any], *, check_trace: bool = False, lenient: bool = False
) -> float:
    """Score a completion against a dataset row, reasoning-gym style: 1.0 for the right final answer, else 0.0.

    The final answer is the last ``ANSWER`` line (a ``REVERSED`` line is un-reversed, index hints are ignored), or
    the bare completion when it has no marker, so both the gold ``trace`` and the bare gold ``answer`` score 1.

    Args:
        task (`str`): the task name.
        completion (`str`): the model's text.
        example (`dict`): a row with at least ``answer`` (``metadata`` is needed when ``check_trace``).
        check_trace (`bool`, defaults to `False`): also require the completion's TAIL-style trace to replay
            (:func:`verify_trace`); a completion without a trace then scores 0.
        lenient (`bool`, defaults to `False`): without an ``ANSWER`` / ``REVERSED`` marker or ``\\boxed{}``, take
            the last match of the task's ``answer_pattern`` (e.g. the last number) instead of the whole completion --
            for instruct models that ignore the requested format (as GSM8K rewards take the last number).

    Raises:
        ValueError: for an unknown task or an example without ``answer``.
    """
    spec = get_task(task)
    if not isinstance(example, dict) or "answer" not in example:
        raise ValueError("`example` must be a dataset row (dict) with an `answer` field")
    if not isinstance(completion, str):
        raise TypeError(f"`completion` must be a str, got {type(completion).__name__}")
    got = extract_answer(completion, spec.answer_kind, spec.answer_pattern if lenient else None)
    correct = got is not None and got == normalize_answer(str(example["answer"]))
    if not correct:
        return 0.0
    if check_trace:
        if "TASK" not in completion:
            return 0.0
        return 1.0 if verify_trace(task, completion, example).valid else 0.0
    return 1.0


def _completion_text(completion) -> str:
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):  # conversational: [{"role": "assistant", "content": ...}, ...]
        return "".join(m.get("content", "") if isinstance(m, dict) else str(m) for m in completion)
    if isinstance(completion, dict):
        return str(completion.get("content", ""))
    raise TypeError(f"a completion must be a str or a list of messages, got {type(completion).__name__}")


def reward_function(
    *, check_trace: bool = False, lenient: bool = False, name: str = "tail_answer"
) -> Callable[..., list[float]]:
    """A TRL reward function (``GRPOTrainer(reward_funcs=...)``) scoring completions with :func:`score_answer`.

    The returned callable has TRL's signature ``reward(prompts, completions, **columns) -> list[float]`` and reads
    the dataset's ``task`` and ``answer`` columns (and ``metadata`` when ``check_trace``), one entry per completion.
    Completions may be strings or conversational message lists.

    Args:
        check_trace (`bool`, defaults to `False`): reward 1 only when the TAIL-style trace also replays.
        lenient (`bool`, defaults to `False`): see :func:`score_answer` (the last answer-like match counts when the
            completion has no ``ANSWER`` line; useful for small instruct models).
        name (`str`): the callable's ``__name__`` (TRL logs rewards under it).

    Example::

        from trl import GRPOConfig, GRPOTrainer
        from hfx.data.tail import load_dataset, reward_function
        ds = load_dataset("add", "train", size=256, format="plain", lengths=[2])
        GRPOTrainer(model, reward_funcs=reward_function(), train_dataset=ds, args=GRPOConfig(...))
    """

    def reward(prompts=None, completions=None, task=None, answer=None, metadata=None, **kwargs) -> list[float]:
        if completions is None or task is None or answer is None:
            raise ValueError(
                "the TAIL reward needs `completions` and the dataset columns `task` and `answer` "
                "(build the dataset with hfx.data.tail.load_dataset)"
            )
        if len(task) != len(completions) or len(answer) != len(completions):
            raise ValueError(
                f"got {len(completions)} completions but {len(task)} `task` and {len(answer)} `answer` values"
            )
        scores = []
        for i, completion in enumerate(completions):
            example = {"answer": answer[i]}
            if metadata is not None:
                example["metadata"] = metadata[i]
            text = _completion_text(completion)
            scores.append(score_answer(task[i], text, example, check_trace=check_trace, lenient=lenient))
        return scores

    reward.__name__ = name
    reward.__qualname__ = name
    return reward
