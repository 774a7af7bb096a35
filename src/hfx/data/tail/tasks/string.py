"""Strings: copy and reverse."""

from __future__ import annotations

from ..registry import Task, register, seq


class _StringTask(Task):
    algorithm_class = "string"
    length_unit = "characters"
    answer_pattern = r"\b[a-h]+\b"
    train_lengths = (1, 6)
    ood_lengths = (7, 12)

    def sample(self, rng, length):
        return {"s": "".join(rng.choice("abcdefgh") for _ in range(length))}

    def memory(self, inp):
        return {f"x[{i}]": ch for i, ch in enumerate(inp["s"])}

    def read_answer(self, memory, inp):
        return "".join(memory[f"y[{i}]"] for i in range(len(inp["s"])))

    @staticmethod
    def _word(inp, hint):
        return seq(inp["s"], hint) if hint else inp["s"]


@register
class Copy(_StringTask):
    name = "copy"
    description = "copy a string of letters, one character at a time"

    def solve(self, inp):
        return inp["s"]

    def program(self, t, inp):
        for i in range(len(inp["s"])):
            t.op("copy", [f"x[{i}]"], [f"y[{i}]"])
            t.next()
        t.note(f"Letter by letter from the start: {', '.join(inp['s'])}.")

    def question(self, inp, hint=False):
        return f"Copy the string {self._word(inp, hint)}."


@register
class Reverse(_StringTask):
    name = "reverse"
    description = "reverse a string of letters, one character at a time"

    def solve(self, inp):
        return inp["s"][::-1]

    def program(self, t, inp):
        n = len(inp["s"])
        for i in range(n):
            t.op("copy", [f"x[{n - 1 - i}]"], [f"y[{i}]"])
            t.next()
        t.note(f"Letter by letter from the end: {', '.join(inp['s'][::-1])}.")

    def question(self, inp, hint=False):
        return f"Reverse the string {self._word(inp, hint)}."
