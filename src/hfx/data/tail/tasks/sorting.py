"""Sorting: bubble sort and selection sort of a list of digits."""

from __future__ import annotations

from ..registry import Task, register, seq


class _SortTask(Task):
    algorithm_class = "sorting"
    length_unit = "list length"
    train_lengths = (2, 6)
    ood_lengths = (7, 10)
    answer_kind = "list"
    answer_pattern = r"\d(?:\s*,\s*\d)*"

    def sample(self, rng, length):
        return {"x": [rng.randrange(10) for _ in range(length)]}

    def solve(self, inp):
        return ",".join(map(str, sorted(inp["x"])))

    def memory(self, inp):
        return {f"x[{i}]": v for i, v in enumerate(inp["x"])}

    def read_answer(self, memory, inp):
        return ",".join(str(memory[f"x[{i}]"]) for i in range(len(inp["x"])))

    @staticmethod
    def _current(t, n):
        return ",".join(str(t[f"x[{i}]"]) for i in range(n))


@register
class BubbleSort(_SortTask):
    name = "bubble_sort"
    description = "bubble sort of a list of digits (compare neighbours, swap when out of order)"

    def program(self, t, inp):
        n = len(inp["x"])
        for p in range(n - 1):
            swaps = 0
            for j in range(n - 1 - p):
                if t.op("gt", [f"x[{j}]", f"x[{j + 1}]"], ["f"]):
                    t.op("swap", [f"x[{j}]", f"x[{j + 1}]"], [f"x[{j}]", f"x[{j + 1}]"])
                    swaps += 1
                t.next()
            t.note(f"Pass {p + 1} ({swaps} swaps): {self._current(t, n)}.")

    def question(self, inp, hint=False):
        return f"Sort {seq(inp['x'], hint)} in ascending order with bubble sort."


@register
class SelectionSort(_SortTask):
    name = "selection_sort"
    description = "selection sort of a list of digits (find the minimum of the rest, swap it forward)"

    def program(self, t, inp):
        n = len(inp["x"])
        for i in range(n - 1):
            t.set("m", i)
            for j in range(i + 1, n):
                if t.op("lt", [f"x[{j}]", f"x[{t['m']}]"], ["f"]):
                    t.set("m", j)
                t.next()
            m = t["m"]
            if m != i:
                t.op("swap", [f"x[{i}]", f"x[{m}]"], [f"x[{i}]", f"x[{m}]"])
                t.next()
            t.note(f"The smallest from position {i} is {t[f'x[{i}]']} (position {m}); now {self._current(t, n)}.")

    def question(self, inp, hint=False):
        return f"Sort {seq(inp['x'], hint)} in ascending order with selection sort."
