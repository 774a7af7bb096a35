"""The TAIL-style trace machine: atomic operations on named memory cells, the recorder programs use, the renderer
(with the three ablation toggles) and the replayer that re-executes a trace.

TAIL (Hua et al., "The Imitation Game: Turing Machine Imitator is Length Generalizable Reasoner", ICLR 2026,
arXiv 2507.13332) synthesises chain-of-thought traces that imitate a Turing machine under three principles
(Sec. 3 of the paper): **Linear Transition** (steps strictly sequential, loops fully unrolled, never skipped),
**Atomic State** (each step a minimal read / write / compare operation) and **Memory Fetcher** (before each operation
the operands it needs are re-emitted from earlier context). The paper's trace format is not public: the grammar below
is our own and is called *TAIL-style* everywhere [reconstruction]::

    TASK <name> INPUT <cell>=<value> <cell>=<value> ...          the tape: every input cell, with its address
    FETCH <cell>=<value> ... OP <op> STATE <cell>=<value> ...    one atomic step per line
    ...
    ANSWER <answer>

A cell is a name with optional indices (``c``, ``a[3]``, ``dp[2][5]``, ``ns[A,1]``); a value is an integer or a
short symbol without spaces. ``FETCH`` copies an operand's current value next to the operation (the Memory Fetcher),
``OP`` names one operation of :data:`OPS`, ``STATE`` writes its results.

Ablation toggles of :func:`render_tail` (the paper's ablations, each a switch) [reconstruction]:

* ``fetch=False`` -- no ``FETCH``: the ``OP`` line names the operand addresses only (``OP add a[3] b[3] c``); the
  values must be looked up in the earlier context by the model.
* ``atomic=False`` -- each loop iteration's atomic steps are fused into one line: the iteration's external reads,
  the joined operation names (``OP add+split``, ``set*4``) and its net writes; temporary cells (``t``, ``f``, ...) vanish.
* ``linear=False`` -- the loop is not fully unrolled: iterations after the first are skipped at random
  (``skip_prob``, seeded), their writes applied silently, so later lines jump over unseen states.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


Value = int | str

# --------------------------------------------------------------------------------------------------------- operations
_OPEN, _CLOSE = "([{<", ")]}>"


def _split(t):
    if t < 0:
        raise ValueError(f"`split` needs a non-negative column sum, got {t}")
    return t % 10, t // 10


def _move(h, d):
    if d not in ("L", "R", "N"):
        raise ValueError(f"`move` needs a direction L, R or N, got {d!r}")
    return h + {"L": -1, "R": 1, "N": 0}[d]


def _cmp(x, y):
    return "LT" if x < y else ("EQ" if x == y else "GT")


# name -> (function of the operand values returning a tuple of results, description). ``set`` is special: it takes
# no operand and writes a literal (loop initialisation, index assignment).
OPS: dict[str, tuple[Callable[..., tuple], str]] = {
    "copy": (lambda x: (x,), "copy a value"),
    "add": (lambda *xs: (sum(xs),), "sum of the operands (a column sum with its carry)"),
    "sub": (lambda x, y, b=0: (x - y - b,), "x - y - borrow"),
    "mul": (lambda x, y: (x * y,), "product"),
    "split": (lambda t: _split(t), "t -> (t mod 10, t div 10): digit and carry"),
    "borrow": (lambda t: (t % 10, int(t < 0)), "t -> (t mod 10, 1 if t < 0): digit and borrow"),
    "inc": (lambda x: (x + 1,), "x + 1"),
    "dec": (lambda x: (x - 1,), "x - 1"),
    "gt": (lambda x, y: (int(x > y),), "1 if x > y else 0"),
    "neg": (lambda x: (int(x < 0),), "1 if x < 0 (an unset -1 cell) else 0"),
    "isz": (lambda x: (int(x == 0),), "1 if x == 0 else 0"),
    "lt": (lambda x, y: (int(x < y),), "1 if x < y else 0"),
    "eq": (lambda x, y: (int(x == y),), "1 if x == y else 0"),
    "cmp": (lambda x, y: (_cmp(x, y),), "LT / EQ / GT"),
    "max": (lambda x, y: (max(x, y),), "maximum"),
    "min": (lambda x, y: (min(x, y),), "minimum"),
    "swap": (lambda x, y: (y, x), "exchange two cells"),
    "mid": (lambda lo, hi: ((lo + hi) // 2,), "(lo + hi) div 2"),
    "xor": (lambda x, y: (x ^ y,), "x xor y"),
    "addmod": (lambda x, y: ((x + y) % 10,), "(x + y) mod 10"),
    "submod": (lambda x, y: ((x - y) % 10,), "(x - y) mod 10"),
    "mulmod": (lambda x, y: ((x * y) % 10,), "(x * y) mod 10"),
    "isopen": (lambda ch: (int(ch in _OPEN),), "1 if an opening bracket"),
    "match": (lambda o, c: (int(o in _OPEN and _OPEN.index(o) == _CLOSE.find(c)),), "1 if brackets pair up"),
    "isop": (lambda ch: (int(ch in ("+", "-", "*")),), "1 if an operator token"),
    "apply": (
        lambda x, o, y: ({"+": (x + y) % 10, "-": (x - y) % 10, "*": (x * y) % 10}[o],),
        "x <o> y mod 10",
    ),
    "move": (lambda h, d: (_move(h, d),), "head position after moving L / R / N"),
}
SET_OP = "set"


@dataclass
class Step:
    """One atomic operation: ``op`` applied to the values of ``reads`` (in operand order) produced ``writes``."""

    op: str
    reads: list[tuple[str, Value]]
    writes: list[tuple[str, Value]]


@dataclass
class Execution:
    """What a program recorded: its input tape, the iterations (lists of atomic steps) and human-style notes."""

    input: dict[str, Value]
    iterations: list[list[Step]]
    notes: list[str]
    temps: frozenset[str]
    memory: dict[str, Value] = field(default_factory=dict)  # the final memory

    @property
    def num_atomic_steps(self) -> int:
        return sum(len(it) for it in self.iterations)


class Tracer:
    """Memory plus a recorder: programs call :meth:`op` for every atomic operation, :meth:`next` between loop
    iterations and :meth:`note` for the human-style chain-of-thought sentence of what just happened.

    Args:
        memory (`dict`): the input tape, cell name -> value (ints or short symbols without spaces or ``=``).
        temps (`Sequence[str]`, *optional*): temporary cells (dropped from fused lines when ``atomic=False``).
    """

    def __init__(self, memory: dict[str, Value], temps: Sequence[str] = ("t", "f")):
        for cell, value in memory.items():
            _check_cell(cell)
            _check_value(value)
        self.input = dict(memory)
        self.memory = dict(memory)
        self.temps = frozenset(temps)
        self._iterations: list[list[Step]] = [[]]
        self._notes: list[str] = []

    def __getitem__(self, cell: str) -> Value:
        return self.memory[cell]

    def op(self, name: str, reads: Sequence[str], writes: Sequence[str]):
        """Apply operation ``name`` of :data:`OPS` to the current values of ``reads`` and store the results in
        ``writes``; returns the single result (or the tuple of results)."""
        if name not in OPS:
            raise ValueError(f"`name` must be one of {sorted(OPS)}, got {name!r}")
        values = [self.memory[c] for c in reads]
        results = OPS[name][0](*values)
        if len(results) != len(writes):
            raise ValueError(f"op {name!r} returns {len(results)} values but {len(writes)} cells were given")
        for cell, value in zip(writes, results):
            _check_cell(cell)
            _check_value(value)
            self.memory[cell] = value
        self._iterations[-1].append(Step(name, list(zip(reads, values)), list(zip(writes, results))))
        return results[0] if len(results) == 1 else results

    def set(self, cell: str, value: Value) -> Value:
        """Write a literal (initialisation, index assignment): ``OP set STATE cell=value``."""
        _check_cell(cell)
        _check_value(value)
        self.memory[cell] = value
        self._iterations[-1].append(Step(SET_OP, [], [(cell, value)]))
        return value

    def next(self) -> None:
        """Close the current loop iteration (a no-op when it is empty)."""
        if self._iterations[-1]:
            self._iterations.append([])

    def note(self, text: str) -> None:
        """Add one sentence of the human-style chain of thought (the ``cot`` baseline format)."""
        self._notes.append(text)

    def finish(self) -> Execution:
        iterations = [it for it in self._iterations if it]
        return Execution(dict(self.input), iterations, list(self._notes), self.temps, dict(self.memory))


_CELL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\[\]=\s]+\])*$")


def _check_cell(cell: str) -> None:
    if not isinstance(cell, str) or not _CELL.match(cell):
        raise ValueError(f"invalid cell name {cell!r}: expected `name` or `name[i]...` without spaces or `=`")


def _check_value(value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"cell values must be int or str, got {type(value).__name__}")
    if isinstance(value, str) and (not value or re.search(r"[\s=]", value)):
        raise ValueError(f"invalid symbol {value!r}: symbols are non-empty, without spaces or `=`")
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value):
        raise TypeError(f"numeric symbol {value!r}: store numbers as int (the trace cannot tell '1' from 1)")


def format_value(value: Value) -> str:
    return str(value)


def parse_value(text: str) -> Value:
    return int(text) if re.fullmatch(r"-?\d+", text) else text


# ------------------------------------------------------------------------------------------------------------ render
def fuse(steps: Sequence[Step], temps: frozenset[str]) -> Step:
    """Fuse consecutive atomic steps into one oversized step (``atomic=False``): the external reads (cells read
    before any write in the group, first occurrence), the joined operation names and the net non-temporary writes.
    A single step is returned unchanged (it is atomic already)."""
    if len(steps) == 1:
        return steps[0]
    written: dict[str, Value] = {}
    reads: dict[str, Value] = {}
    for st in steps:
        for cell, value in st.reads:
            if cell not in written and cell not in reads and cell not in temps:
                reads[cell] = value
        for cell, value in st.writes:
            written[cell] = value
    runs: list[list] = []  # consecutive repeats compressed: set*4+inc
    for st in steps:
        if runs and runs[-1][0] == st.op:
            runs[-1][1] += 1
        else:
            runs.append([st.op, 1])
    ops = "+".join(op if k == 1 else f"{op}*{k}" for op, k in runs)
    return Step(ops, list(reads.items()), [(c, v) for c, v in written.items() if c not in temps])


def is_fused(op: str) -> bool:
    """Whether an ``OP`` name is a fused (``atomic=False``) group such as ``add+split`` or ``set*4``."""
    return "+" in op or "*" in op


def render_step(step: Step, fetch: bool = True) -> str:
    """One trace line. With ``fetch``: ``FETCH c=v ... OP op STATE c=v ...``; without: ``OP op c ... STATE c=v ...``."""
    parts = []
    if fetch:
        parts += [f"FETCH {c}={format_value(v)}" for c, v in step.reads]
        parts.append(f"OP {step.op}")
    else:
        parts.append(" ".join(["OP", step.op, *(c for c, _ in step.reads)]))
    parts += [f"STATE {c}={format_value(v)}" for c, v in step.writes]
    return " ".join(parts)


def render_input(task: str, memory: dict[str, Value]) -> str:
    return f"TASK {task} INPUT " + " ".join(f"{c}={format_value(v)}" for c, v in memory.items())


def skipped_iterations(num_iterations: int, rng: random.Random, skip_prob: float = 0.5) -> set[int]:
    """Which iterations ``linear=False`` drops: each after the first with probability ``skip_prob``, and at least
    one when there are two or more (so the ablation always removes something it can)."""
    if not 0.0 < skip_prob < 1.0:
        raise ValueError(f"`skip_prob` must be in (0, 1), got {skip_prob}")
    skipped = {i for i in range(1, num_iterations) if rng.random() < skip_prob}
    if num_iterations >= 2 and not skipped:
        skipped = {rng.randrange(1, num_iterations)}
    return skipped


def render_tail(
    task: str,
    execution: Execution,
    answer: str,
    *,
    fetch: bool = True,
    atomic: bool = True,
    linear: bool = True,
    rng: random.Random | None = None,
    skip_prob: float = 0.5,
) -> str:
    """Render an :class:`Execution` as a TAIL-style trace (see the module docstring for the grammar and toggles).

    Args:
        task (`str`): the task name written after ``TASK``.
        execution (`Execution`): what the program recorded.
        answer (`str`): the canonical answer written after ``ANSWER``.
        fetch / atomic / linear (`bool`, defaults to `True`): the three TAIL principles; `False` gives the ablation.
        rng (`random.Random`, *optional*): draws the skipped iterations when ``linear=False`` (required then).
        skip_prob (`float`, defaults to 0.5): probability of skipping an iteration when ``linear=False``.

    Returns:
        `str`: newline-separated lines, the first ``TASK ... INPUT ...``, the last ``ANSWER ...``.
    """
    lines = [render_input(task, execution.input)]
    skipped: set[int] = set()
    if not linear:
        if rng is None:
            raise ValueError("`rng` is required when `linear=False` (it draws the skipped iterations)")
        skipped = skipped_iterations(len(execution.iterations), rng, skip_prob)
    for i, iteration in enumerate(execution.iterations):
        if i in skipped:
            continue
        units = iteration if atomic else [fuse(iteration, execution.temps)]
        lines += [render_step(st, fetch) for st in units]
    lines.append(f"ANSWER {answer}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------------------ replay
@dataclass
class ParsedStep:
    fetches: list[tuple[str, Value]]
    op: str
    addresses: list[str]
    writes: list[tuple[str, Value]]
    line: int


@dataclass
class ParsedTrace:
    task: str | None
    input: dict[str, Value] | None
    steps: list[ParsedStep]
    answer: str | None
    errors: list[str]


def _pair(token: str, line_no: int, errors: list[str]):
    if "=" not in token:
        errors.append(f"line {line_no}: expected `cell=value`, got {token!r}")
        return None
    cell, _, value = token.partition("=")
    if not _CELL.match(cell) or not value:
        errors.append(f"line {line_no}: malformed `cell=value` {token!r}")
        return None
    return cell, parse_value(value)


def parse_trace(text: str) -> ParsedTrace:
    """Parse a TAIL-style trace (any toggles) into its input tape, steps and answer; syntax errors are collected in
    ``errors`` (never raised). Text before the ``TASK`` line (e.g. a chat preamble) is ignored."""
    errors: list[str] = []
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    start = next((i for i, ln in enumerate(lines) if ln.startswith("TASK ")), None)
    if start is None:
        return ParsedTrace(None, None, [], None, ["no `TASK ... INPUT ...` line"])
    head = lines[start].split()
    task, memory = None, {}
    if len(head) < 3 or head[2] != "INPUT":
        errors.append("line 1: expected `TASK <name> INPUT ...`")
    else:
        task = head[1]
        for tok in head[3:]:
            pair = _pair(tok, 1, errors)
            if pair:
                memory[pair[0]] = pair[1]
    steps: list[ParsedStep] = []
    answer = None
    for n, ln in enumerate(lines[start + 1 :], start=2):
        if ln.startswith("ANSWER"):
            answer = ln[len("ANSWER") :].strip()
            if n != len(lines) - start:
                errors.append(f"line {n}: `ANSWER` must be the last line")
            break
        toks = ln.split()
        fetches, writes, addresses, op, i = [], [], [], None, 0
        while i < len(toks):
            kw = toks[i]
            if kw in ("FETCH", "STATE") and i + 1 < len(toks):
                pair = _pair(toks[i + 1], n, errors)
                if pair:
                    (fetches if kw == "FETCH" else writes).append(pair)
                i += 2
            elif kw == "OP" and i + 1 < len(toks) and op is None:
                op = toks[i + 1]
                i += 2
                while i < len(toks) and toks[i] not in ("FETCH", "STATE", "OP"):
                    addresses.append(toks[i])
                    i += 1
            else:
                errors.append(f"line {n}: unexpected token {kw!r}")
                i += 1
        if op is None:
            errors.append(f"line {n}: no `OP`")
            continue
        steps.append(ParsedStep(fetches, op, addresses, writes, n))
    if answer is None:
        errors.append("no `ANSWER` line")
    return ParsedTrace(task, memory, steps, answer, errors)


@dataclass
class ReplayResult:
    """Result of :func:`replay`: the final memory, errors found, how many steps were checked against :data:`OPS`."""

    parsed: ParsedTrace
    memory: dict[str, Value]
    errors: list[str]
    checked_ops: int

    @property
    def ok(self) -> bool:
        return not self.errors


def replay(parsed: ParsedTrace, strict: bool = True) -> ReplayResult:
    """Re-execute a parsed trace on the memory of its ``INPUT`` line.

    Every ``FETCH c=v`` must equal the current value of ``c``; every atomic ``OP`` (a name in :data:`OPS`) must
    produce the ``STATE`` values from its operands (the fetched values, or the values at the ``OP`` line's addresses
    when there is no ``FETCH``); ``set`` writes a literal; fused ops (``add+split``, ``atomic=False``) are checked by
    their fetches only. With ``strict=False`` (a ``linear=False`` trace, whose skipped steps wrote unseen values) a
    fetch that disagrees with memory is adopted instead of reported, and operation checks are skipped.
    """
    errors = list(parsed.errors)
    memory = dict(parsed.input or {})
    checked = 0
    for st in parsed.steps:
        for cell, value in st.fetches:
            if cell not in memory:
                if strict:
                    errors.append(f"line {st.line}: FETCH of unknown cell {cell}")
                memory[cell] = value
            elif memory[cell] != value:
                if strict:
                    errors.append(f"line {st.line}: FETCH {cell}={value} but memory holds {memory[cell]}")
                memory[cell] = value
        if st.fetches:
            operands = [v for _, v in st.fetches]
        else:
            missing = [c for c in st.addresses if c not in memory]
            if missing and strict:
                errors.append(f"line {st.line}: OP reads unknown cell(s) {missing}")
            operands = [memory.get(c) for c in st.addresses]
        if strict and not is_fused(st.op):
            if st.op == SET_OP:
                if len(st.writes) != 1 or operands:
                    errors.append(f"line {st.line}: `set` takes no operand and writes one cell")
                else:
                    checked += 1
            elif st.op not in OPS:
                errors.append(f"line {st.line}: unknown op {st.op!r}")
            else:
                try:
                    results = OPS[st.op][0](*operands)
                except Exception as err:  # noqa: BLE001 -- a malformed model trace must not crash the verifier
                    errors.append(f"line {st.line}: OP {st.op} cannot apply to {operands}: {err}")
                else:
                    got = [v for _, v in st.writes]
                    if list(results) != got:
                        errors.append(f"line {st.line}: OP {st.op} of {operands} gives {list(results)}, trace {got}")
                    else:
                        checked += 1
        for cell, value in st.writes:
            memory[cell] = value
    return ReplayResult(parsed, memory, errors, checked)
