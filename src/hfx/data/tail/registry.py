"""The task registry: every TAIL-style task is a :class:`Task` subclass registered under its name.

A task knows how to sample an input of a given length, how to solve it independently (a reference solver that does
not use the traced program), how to run its algorithm on a :class:`~hfx.data.tail.trace.Tracer` (the trace
program), how to read the answer back from the final memory, and how to state the question in words.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from .trace import Execution, Tracer


ALGORITHM_CLASSES = (
    "arithmetic",
    "sorting",
    "searching",
    "dynamic_programming",
    "graph",
    "stack",
    "string",
    "automata",
)
ANSWER_KINDS = ("digits", "list", "symbol")

_REGISTRY: dict[str, Task] = {}


class Task:
    """Base class of a TAIL-style task.

    Class attributes:
        name (`str`): registry name (``"add"``).
        algorithm_class (`str`): one of :data:`ALGORITHM_CLASSES`.
        description (`str`): one line for :func:`hfx.data.tail.list_tasks` and the dataset card.
        length_unit (`str`): what the length counts (``"digits per operand"``).
        train_lengths (`tuple[int, int]`): inclusive range of the ``train`` / ``validation`` / ``test`` splits.
        ood_lengths (`tuple[int, int]`): inclusive range of the out-of-distribution splits (disjoint, longer).
        answer_kind (`str`): ``"digits"`` (a number or a string: one element per character), ``"list"``
            (comma-separated elements) or ``"symbol"`` (one element): how the Index-Hint / Reversed formats split it.
        hint_from_right (`bool`): Index-Hint numbers digits by place value (arithmetic) instead of left to right.
        answer_pattern (`str`): a regular expression for an answer of this task; lenient scoring (no ``ANSWER``
            marker) takes its last match in the completion.
    """

    name: ClassVar[str]
    algorithm_class: ClassVar[str]
    description: ClassVar[str]
    length_unit: ClassVar[str]
    train_lengths: ClassVar[tuple[int, int]]
    ood_lengths: ClassVar[tuple[int, int]]
    answer_kind: ClassVar[str] = "digits"
    hint_from_right: ClassVar[bool] = False
    answer_pattern: ClassVar[str] = r"-?\d+"
    temps: ClassVar[tuple[str, ...]] = ("t", "f")

    # -- to implement ------------------------------------------------------------------------------------------
    def sample(self, rng: random.Random, length: int) -> dict[str, Any]:
        """A random input of ``length`` (JSON-serialisable dict)."""
        raise NotImplementedError

    def solve(self, inp: dict[str, Any]) -> str:
        """The canonical answer, computed independently of the traced program (the reference solver)."""
        raise NotImplementedError

    def memory(self, inp: dict[str, Any]) -> dict[str, Any]:
        """The input tape: cell -> value, in the order the question states them."""
        raise NotImplementedError

    def program(self, t: Tracer, inp: dict[str, Any]) -> None:
        """Run the algorithm on ``t``: one ``t.op`` per atomic step, ``t.next()`` between loop iterations."""
        raise NotImplementedError

    def read_answer(self, memory: dict[str, Any], inp: dict[str, Any]) -> str:
        """The answer as it stands in the final memory of the program."""
        raise NotImplementedError

    def question(self, inp: dict[str, Any], hint: bool = False) -> str:
        """The problem in words; ``hint=True`` writes every input sequence with index hints (``#0:3 #1:5``)."""
        raise NotImplementedError

    # -- provided ------------------------------------------------------------------------------------------------
    def execute(self, inp: dict[str, Any]) -> Execution:
        """Run :meth:`program` on a fresh tracer over :meth:`memory` and return the recording."""
        t = Tracer(self.memory(inp), temps=self.temps)
        self.program(t, inp)
        return t.finish()

    def lengths(self, split: str) -> list[int]:
        lo, hi = self.ood_lengths if split.startswith("ood") else self.train_lengths
        return list(range(lo, hi + 1))

    def __repr__(self) -> str:
        return f"<TAIL task {self.name!r} ({self.algorithm_class}; length = {self.length_unit})>"


def register(cls: type[Task]) -> type[Task]:
    """Class decorator adding a task to the registry (checks its declared attributes)."""
    if cls.algorithm_class not in ALGORITHM_CLASSES:
        raise ValueError(f"{cls.__name__}.algorithm_class must be one of {ALGORITHM_CLASSES}")
    if cls.answer_kind not in ANSWER_KINDS:
        raise ValueError(f"{cls.__name__}.answer_kind must be one of {ANSWER_KINDS}")
    (a, b), (c, d) = cls.train_lengths, cls.ood_lengths
    if not (1 <= a <= b < c <= d):
        raise ValueError(f"{cls.__name__}: train lengths {cls.train_lengths} must lie below ood {cls.ood_lengths}")
    if cls.name in _REGISTRY:
        raise ValueError(f"task {cls.name!r} is already registered")
    _REGISTRY[cls.name] = cls()
    return cls


def _load_tasks() -> None:
    from . import tasks  # noqa: F401 -- registers every built-in task


def list_tasks(algorithm_class: str | None = None) -> list[str]:
    """Names of the registered tasks (sorted), optionally only those of one algorithm class.

    Raises:
        ValueError: for an unknown ``algorithm_class``.
    """
    _load_tasks()
    if algorithm_class is not None and algorithm_class not in ALGORITHM_CLASSES:
        raise ValueError(f"`algorithm_class` must be one of {ALGORITHM_CLASSES}, got {algorithm_class!r}")
    return sorted(n for n, t in _REGISTRY.items() if algorithm_class in (None, t.algorithm_class))


def get_task(name: str) -> Task:
    """The registered task ``name``.

    Raises:
        ValueError: for an unknown name (the message lists the registered ones).
    """
    _load_tasks()
    if name not in _REGISTRY:
        raise ValueError(f"`task` must be one of {sorted(_REGISTRY)}, got {name!r}")
    return _REGISTRY[name]


# ---------------------------------------------------------------------------------------------------------- helpers
def seq(items, hint: bool = False, sep: str = ",", from_right: bool = False) -> str:
    """Write a sequence for a question: ``3,5,9`` (``sep``), or with index hints ``#0:3 #1:5 #2:9`` (``from_right``:
    place values, ``#2:3 #1:5 #0:9``)."""
    items = [str(x) for x in items]
    if hint:
        n = len(items)
        return " ".join(f"#{n - 1 - i if from_right else i}:{x}" for i, x in enumerate(items))
    return sep.join(items)


def random_digits(rng: random.Random, n: int, leading_zero: bool = False) -> list[int]:
    """``n`` random decimal digits; the first is non-zero when ``n > 1`` unless ``leading_zero``."""
    first = 0 if (leading_zero or n == 1) else 1
    return [rng.randrange(first, 10)] + [rng.randrange(10) for _ in range(n - 1)]
