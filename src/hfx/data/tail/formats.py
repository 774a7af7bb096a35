"""Output formats: the TAIL-style trace and the baselines (plain answer, human-style CoT, Index-Hint, Reversed-Format),
plus answer extraction and normalisation shared by the verifier and the reward function.

* ``tail`` -- the TAIL-style trace of :mod:`hfx.data.tail.trace` (toggles ``fetch`` / ``atomic`` / ``linear``).
* ``plain`` -- the answer only: ``ANSWER <answer>``.
* ``cot`` -- a human-style chain of thought: the program's sentences (oversized steps, natural language, no explicit
  memory fetch), then ``ANSWER <answer>``. The paper's "traditional CoT" baseline [reconstruction].
* ``index_hint`` -- every input sequence in the question and every answer element carries an index hint
  (``#0:3 #1:5``), after Zhou et al. (2023), "What algorithms can transformers learn?" [reconstruction].
* ``reversed`` -- the answer written in reverse element order (``REVERSED 173`` for 371), after Lee et al. (2023),
  "Teaching arithmetic to small transformers" [reconstruction].
"""

from __future__ import annotations

import re


FORMATS = ("tail", "plain", "cot", "index_hint", "reversed")

INSTRUCTIONS = {
    "tail": "Solve it step by step as a TAIL-style trace (a TASK ... INPUT line, then one FETCH / OP / STATE step "
    "per line) and end with the line ANSWER <answer>.",
    "plain": "Reply with only the line ANSWER <answer>.",
    "cot": "Think step by step, then end with the line ANSWER <answer>.",
    "index_hint": "Reply with only the line ANSWER <answer>, writing every answer element with its index hint #i:.",
    "reversed": "Reply with only the line REVERSED <answer>, writing the answer's elements in reverse order.",
}
_KIND_NOTE = {"list": " Separate list elements with commas.", "digits": "", "symbol": ""}

_MARKER = re.compile(r"^[ \t>*_`#]*(ANSWER|REVERSED)\b[ \t]*:?[ \t]*(.*)$", re.MULTILINE | re.IGNORECASE)
_HINT = re.compile(r"#\d+:")
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def instruction(fmt: str, answer_kind: str) -> str:
    """The instruction appended to the question in the chat prompt of format ``fmt``."""
    if fmt not in INSTRUCTIONS:
        raise ValueError(f"`format` must be one of {FORMATS}, got {fmt!r}")
    return INSTRUCTIONS[fmt] + _KIND_NOTE[answer_kind]


def answer_elements(answer: str, kind: str) -> list[str]:
    """Split a canonical answer into the elements Index-Hint and Reversed-Format act on."""
    if kind == "list":
        return answer.split(",")
    if kind == "symbol":
        return [answer]
    return list(answer)


def join_elements(elements: list[str], kind: str) -> str:
    return ("," if kind == "list" else "").join(elements)


def hint_answer(answer: str, kind: str, from_right: bool = False) -> str:
    """``371`` -> ``#0:3 #1:7 #2:1`` (``from_right``: place values ``#2:3 #1:7 #0:1``); ``1,2,3`` -> ``#0:1,#1:2,#2:3``."""
    sep = "," if kind == "list" else " "
    elements = answer_elements(answer, kind)
    n = len(elements)
    return sep.join(f"#{n - 1 - i if from_right else i}:{e}" for i, e in enumerate(elements))


def reverse_answer(answer: str, kind: str) -> str:
    return join_elements(answer_elements(answer, kind)[::-1], kind)


def normalize_answer(text: str) -> str:
    """Canonical comparison form: index hints and all whitespace removed, surrounding quotes / backticks /
    asterisks and a trailing full stop stripped, lower case (canonical answers contain no spaces)."""
    text = "".join(text.split())  # first: a tokenizer's decode may space out a hint ("# 0 : 3")
    text = _HINT.sub("", text)
    text = text.strip("`*\"'")
    text = text.removesuffix(".")
    return text.strip("`*\"'").lower()


def extract_answer(completion: str, kind: str = "digits", lenient_pattern: str | None = None) -> str | None:
    """The normalised final answer of a completion.

    The last ``ANSWER <x>`` (or ``ANSWER: <x>``) line wins; a last ``REVERSED <x>`` line is un-reversed; a
    ``\\boxed{x}`` counts when there is no marker; otherwise, with ``lenient_pattern`` (a regular expression), its
    last match in the completion is the answer (like "the last number" for GSM8K); otherwise the whole completion is
    taken as a bare answer. Index hints (``#3:``) are stripped. Returns `None` for an empty completion.
    """
    matches = list(_MARKER.finditer(completion))
    if matches:
        marker, value = matches[-1].group(1).upper(), matches[-1].group(2)
        value = normalize_answer(value)
        return reverse_answer(value, kind) if marker == "REVERSED" else value
    boxed = _BOXED.findall(completion)
    if boxed:
        return normalize_answer(boxed[-1])
    if lenient_pattern is not None:
        found = re.findall(lenient_pattern, completion)
        return normalize_answer(found[-1]) if found else None
    value = normalize_answer(completion)
    return value or None
