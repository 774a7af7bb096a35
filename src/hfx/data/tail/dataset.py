"""TAIL-style data as Hugging Face ``datasets``: deterministic generators, length splits, declared features.

Splits. Every task has a train length range and a longer, disjoint out-of-distribution range
(:attr:`Task.train_lengths` / :attr:`Task.ood_lengths`). Inside a range, an input belongs to exactly one split by a
hash of its question (``blake2b`` mod 100), so splits never share an example whatever their sizes and seeds:

============== =============== ==================
split          lengths         hash bucket
============== =============== ==================
train          train range     20-99
validation     train range     10-19 (dev: choose hyper-parameters here)
test           train range     0-9 (in-distribution test; alias ``id``)
ood_validation ood range       50-99
ood_test       ood range       0-49 (alias ``ood``)
============== =============== ==================

Example ``i`` of a split is drawn from its own ``random.Random`` seeded by ``(task, split, seed, i)``: generation is
deterministic by seed, prefix-stable (a larger ``size`` keeps the first rows) and streamable. Lengths cycle through
the split's range (balanced), so ``metadata["length"]`` gives an accuracy-vs-length curve directly.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from .formats import FORMATS, hint_answer, instruction, reverse_answer
from .registry import Task, get_task, list_tasks
from .trace import render_tail


SPLITS = ("train", "validation", "test", "ood_validation", "ood_test")
SPLIT_ALIASES = {"id": "test", "ood": "ood_test", "dev": "validation"}
_BUCKETS = {
    "train": (20, 100),
    "validation": (10, 20),
    "test": (0, 10),
    "ood_validation": (50, 100),
    "ood_test": (0, 50),
}
_MAX_TRIES = 64


def features():
    """The declared :class:`datasets.Features` of every TAIL-style dataset."""
    from datasets import Features, List, Value

    message = {"role": Value("string"), "content": Value("string")}
    return Features(
        {
            "question": Value("string"),
            "answer": Value("string"),
            "trace": Value("string"),
            "messages": List(message),
            "prompt": List(message),
            "task": Value("string"),
            "metadata": {
                "task": Value("string"),
                "algorithm_class": Value("string"),
                "length": Value("int32"),
                "split": Value("string"),
                "format": Value("string"),
                "fetch": Value("bool"),
                "atomic": Value("bool"),
                "linear": Value("bool"),
                "seed": Value("int64"),
                "index": Value("int64"),
                "num_steps": Value("int32"),
                "input": Value("string"),
            },
        }
    )


def resolve_split(split: str) -> str:
    split = SPLIT_ALIASES.get(split, split)
    if split not in SPLITS:
        raise ValueError(f"`split` must be one of {SPLITS} (or {sorted(SPLIT_ALIASES)}), got {split!r}")
    return split


def bucket(task: str, question: str) -> int:
    """The hash bucket (0-99) of an input, from its canonical question."""
    digest = hashlib.blake2b(f"{task}|{question}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % 100


def _check_lengths(task: Task, split: str, lengths) -> tuple[int, ...]:
    if lengths is None:
        return tuple(task.lengths(split))
    if isinstance(lengths, int):
        lengths = [lengths]
    lengths = tuple(int(x) for x in lengths)
    if not lengths or min(lengths) < 1:
        raise ValueError(f"`lengths` must be positive integers, got {lengths}")
    train = set(task.lengths("train"))
    if split.startswith("ood") and train & set(lengths):
        raise ValueError(
            f"`lengths` {sorted(train & set(lengths))} of the {split!r} split overlap the train lengths "
            f"{task.train_lengths} of {task.name!r}; out-of-distribution lengths must be longer"
        )
    return lengths


def _render_trace(task: Task, inp, execution, answer: str, fmt: str, toggles: dict, rng) -> str:
    if fmt == "tail":
        return render_tail(task.name, execution, answer, rng=rng, **toggles)
    if fmt == "plain":
        return f"ANSWER {answer}"
    if fmt == "cot":
        return "\n".join([*execution.notes, f"ANSWER {answer}"])
    if fmt == "index_hint":
        return f"ANSWER {hint_answer(answer, task.answer_kind, task.hint_from_right)}"
    return f"REVERSED {reverse_answer(answer, task.answer_kind)}"


def generate_example(
    task: str | Task,
    split: str = "train",
    index: int = 0,
    seed: int = 0,
    *,
    format: str = "tail",
    fetch: bool = True,
    atomic: bool = True,
    linear: bool = True,
    lengths: Sequence[int] | int | None = None,
    skip_prob: float = 0.5,
    system_prompt: str | None = None,
) -> dict[str, Any]:
    """Row ``index`` of a split (see :func:`load_dataset` for the arguments); a plain dict with the dataset's columns."""
    task = get_task(task) if isinstance(task, str) else task
    split = resolve_split(split)
    _check_format(format, fetch, atomic, linear)
    lengths = _check_lengths(task, split, lengths)
    rng = random.Random(f"tail|{task.name}|{split}|{seed}|{index}")
    inp = length = None
    for offset in range(len(lengths)):  # a length too short to have inputs in this split falls through to the next
        length = lengths[(index + offset) % len(lengths)]
        for _ in range(_MAX_TRIES):
            candidate = task.sample(rng, length)
            if _in_bucket(task, candidate, split):
                inp = candidate
                break
        if inp is not None:
            break
    if inp is None:
        raise ValueError(f"no input of lengths {lengths} of task {task.name!r} falls in split {split!r}")
    inp = json.loads(json.dumps(inp))  # the form stored in metadata["input"] (tuples become lists)
    execution = task.execute(inp)
    answer = task.solve(inp)
    from_program = task.read_answer(execution.memory, inp)
    if from_program != answer:  # the traced program and the reference solver must agree
        raise RuntimeError(f"{task.name}: program gives {from_program!r}, reference {answer!r} for input {inp}")
    toggles = {"fetch": fetch, "atomic": atomic, "linear": linear, "skip_prob": skip_prob}
    trace = _render_trace(task, inp, execution, answer, format, toggles, rng)
    question = task.question(inp, hint=format == "index_hint")
    user = f"{question}\n{instruction(format, task.answer_kind)}"
    prompt = ([{"role": "system", "content": system_prompt}] if system_prompt else []) + [
        {"role": "user", "content": user}
    ]
    return {
        "question": question,
        "answer": answer,
        "trace": trace,
        "messages": [*prompt, {"role": "assistant", "content": trace}],
        "prompt": prompt,
        "task": task.name,
        "metadata": {
            "task": task.name,
            "algorithm_class": task.algorithm_class,
            "length": length,
            "split": split,
            "format": format,
            "fetch": fetch,
            "atomic": atomic,
            "linear": linear,
            "seed": seed,
            "index": index,
            "num_steps": len(trace.splitlines()) - 2 if format == "tail" else execution.num_atomic_steps,
            "input": json.dumps(inp),
        },
    }


def _in_bucket(task: Task, inp: dict, split: str) -> bool:
    lo, hi = _BUCKETS[split]
    return lo <= bucket(task.name, task.question(inp)) < hi


def _check_format(fmt: str, fetch: bool, atomic: bool, linear: bool) -> None:
    if fmt not in FORMATS:
        raise ValueError(f"`format` must be one of {FORMATS}, got {fmt!r}")
    for name, value in (("fetch", fetch), ("atomic", atomic), ("linear", linear)):
        if not isinstance(value, bool):
            raise TypeError(f"`{name}` must be a bool, got {type(value).__name__}")
    if fmt != "tail" and not (fetch and atomic and linear):
        raise ValueError(
            f"the ablation toggles (fetch / atomic / linear) apply to format='tail' only, not to format={fmt!r}"
        )


def _generate(tasks: tuple[str, ...], split: str, size: int, seed: int, kwargs_json: str, code: str) -> Iterator:
    kwargs = json.loads(kwargs_json)
    for i in range(size):
        yield generate_example(tasks[i % len(tasks)], split, i // len(tasks), seed, **kwargs)


@lru_cache(maxsize=1)
def _code_fingerprint() -> str:
    """Hash of this package's sources: part of the ``datasets`` cache key, so a code change never serves stale rows."""
    h = hashlib.blake2b(digest_size=8)
    for path in sorted(Path(__file__).resolve().parent.rglob("*.py")):
        h.update(path.read_bytes())
    return h.hexdigest()


def load_dataset(
    task: str | Sequence[str],
    split: str = "train",
    size: int = 1000,
    seed: int = 0,
    *,
    format: str = "tail",
    fetch: bool = True,
    atomic: bool = True,
    linear: bool = True,
    lengths: Sequence[int] | int | None = None,
    skip_prob: float = 0.5,
    system_prompt: str | None = None,
    streaming: bool = False,
    cache_dir: str | None = None,
):
    """A TAIL-style dataset (TAIL: arXiv 2507.13332) as a :class:`datasets.Dataset` built by a generator.

    Args:
        task (`str` or `Sequence[str]`): a task of :func:`list_tasks`, several (interleaved round-robin), or
            ``"all"``.
        split (`str`, defaults to ``"train"``): ``train``, ``validation``, ``test`` (in-distribution),
            ``ood_validation`` or ``ood_test`` (longer inputs); aliases ``id``, ``ood``, ``dev``. See the module
            docstring: splits never share an input.
        size (`int`, defaults to 1000): number of rows.
        seed (`int`, defaults to 0): generation seed (same seed, same rows).
        format (`str`, defaults to ``"tail"``): ``tail``, ``plain``, ``cot`` (human-style), ``index_hint``,
            ``reversed`` (see :mod:`hfx.data.tail.formats`).
        fetch / atomic / linear (`bool`, default `True`): the three TAIL principles; ``False`` gives the paper's
            ablation (Memory Fetcher / Atomic State / Linear Transition removed). ``format="tail"`` only.
        lengths (`int` or `Sequence[int]`, *optional*): the difficulty knob: only these lengths (cycled); defaults
            to the split's range. For ``ood_*`` splits they must not overlap the task's train lengths.
        skip_prob (`float`, defaults to 0.5): probability of skipping an iteration when ``linear=False``.
        system_prompt (`str`, *optional*): a system message put first in ``prompt`` and ``messages``.
        streaming (`bool`, defaults to `False`): return a :class:`datasets.IterableDataset` instead.
        cache_dir (`str`, *optional*): the ``datasets`` cache folder.

    Returns:
        `datasets.Dataset` (or `IterableDataset`) with columns ``question``, ``answer``, ``trace`` (the target
        text of ``format``), ``messages`` (user + assistant, for ``SFTTrainer``), ``prompt`` (the chat prompt, for
        ``GRPOTrainer`` with :func:`~hfx.data.tail.reward_function`), ``task`` and ``metadata`` (length, split,
        format, toggles, seed, index, number of steps, the input as JSON).

    Raises:
        ValueError: unknown task / split / format, ablation toggles with a baseline format, bad lengths, ``size``
            below 1.
    """
    import datasets

    names = list_tasks() if task == "all" else ([task] if isinstance(task, str) else list(task))
    if not names:
        raise ValueError("`task` must name at least one task")
    for name in names:
        get_task(name)
    split = resolve_split(split)
    _check_format(format, fetch, atomic, linear)
    if not isinstance(size, int) or size < 1:
        raise ValueError(f"`size` must be a positive int, got {size!r}")
    for name in names:
        _check_lengths(get_task(name), split, lengths)
    kwargs = {
        "format": format,
        "fetch": fetch,
        "atomic": atomic,
        "linear": linear,
        "lengths": [lengths] if isinstance(lengths, int) else (list(lengths) if lengths is not None else None),
        "skip_prob": skip_prob,
        "system_prompt": system_prompt,
    }
    gen_kwargs = {
        "tasks": tuple(names),
        "split": split,
        "size": size,
        "seed": seed,
        "kwargs_json": json.dumps(kwargs, sort_keys=True),
        "code": _code_fingerprint(),
    }
    if streaming:
        return datasets.IterableDataset.from_generator(_generate, features=features(), gen_kwargs=gen_kwargs)
    return datasets.Dataset.from_generator(_generate, features=features(), gen_kwargs=gen_kwargs, cache_dir=cache_dir)


class ProceduralDataset(Sequence):
    """reasoning-gym's interface (``create_dataset(name, size, seed)``): rows generated on access, with
    ``score_answer(answer, entry)``. :meth:`to_hf` gives the same rows as a :class:`datasets.Dataset`."""

    def __init__(self, task: str, size: int = 500, seed: int | None = None, split: str = "train", **kwargs):
        self.task = get_task(task)
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"`size` must be a positive int, got {size!r}")
        self.size, self.seed, self.split = size, 0 if seed is None else seed, resolve_split(split)
        _check_format(kwargs.get("format", "tail"), *(kwargs.get(k, True) for k in ("fetch", "atomic", "linear")))
        self.kwargs = kwargs

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> dict:
        if not -self.size <= index < self.size:
            raise IndexError(f"index {index} out of range for a dataset of {self.size}")
        return generate_example(self.task, self.split, index % self.size, self.seed, **self.kwargs)

    def score_answer(self, answer: str | None, entry: dict) -> float:
        from .verify import score_answer

        return score_answer(self.task.name, answer or "", entry)

    def to_hf(self):
        return load_dataset(self.task.name, self.split, self.size, self.seed, **self.kwargs)


def create_dataset(name: str, size: int = 500, seed: int | None = None, **kwargs) -> ProceduralDataset:
    """reasoning-gym-style alias: ``create_dataset("add", size=10, seed=42)`` (keyword arguments as in
    :func:`load_dataset`)."""
    return ProceduralDataset(name, size=size, seed=seed, **kwargs)
