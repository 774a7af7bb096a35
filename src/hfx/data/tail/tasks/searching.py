"""Searching: binary search in a sorted list, linear search in an unsorted one."""

from __future__ import annotations

from ..registry import Task, register, seq


@register
class BinarySearch(Task):
    name = "binary_search"
    algorithm_class = "searching"
    description = "binary search for a value present in a sorted list of distinct numbers (0-based position)"
    length_unit = "list length"
    train_lengths = (2, 16)
    ood_lengths = (17, 64)

    def sample(self, rng, length):
        a = sorted(rng.sample(range(100), length))
        return {"a": a, "x": rng.choice(a)}

    def solve(self, inp):
        return str(inp["a"].index(inp["x"]))

    def memory(self, inp):
        return {**{f"a[{i}]": v for i, v in enumerate(inp["a"])}, "x": inp["x"]}

    def program(self, t, inp):
        t.set("lo", 0)
        t.set("hi", len(inp["a"]) - 1)
        t.next()
        while True:
            m = t.op("mid", ["lo", "hi"], ["m"])
            r = t.op("cmp", [f"a[{m}]", "x"], ["f"])
            if r == "EQ":
                t.op("copy", ["m"], ["r"])
                t.note(f"Position {m} holds {inp['x']}: found.")
                break
            if r == "LT":
                t.op("inc", ["m"], ["lo"])
                t.note(f"Position {m} holds {inp['a'][m]} < {inp['x']}: search positions {m + 1}..{t['hi']}.")
            else:
                t.op("dec", ["m"], ["hi"])
                t.note(f"Position {m} holds {inp['a'][m]} > {inp['x']}: search positions {t['lo']}..{m - 1}.")
            t.next()

    def read_answer(self, memory, inp):
        return str(memory["r"])

    def question(self, inp, hint=False):
        return f"Find the 0-based position of {inp['x']} in the sorted list {seq(inp['a'], hint)} by binary search."


@register
class LinearSearch(Task):
    name = "linear_search"
    algorithm_class = "searching"
    description = "first 0-based position of a digit in an unsorted list of digits, or -1"
    length_unit = "list length"
    train_lengths = (1, 6)
    ood_lengths = (7, 12)

    def sample(self, rng, length):
        return {"a": [rng.randrange(10) for _ in range(length)], "x": rng.randrange(10)}

    def solve(self, inp):
        return str(inp["a"].index(inp["x"]) if inp["x"] in inp["a"] else -1)

    def memory(self, inp):
        return {**{f"a[{i}]": v for i, v in enumerate(inp["a"])}, "x": inp["x"]}

    def program(self, t, inp):
        for i in range(len(inp["a"])):
            if t.op("eq", [f"a[{i}]", "x"], ["f"]):
                t.set("r", i)
                t.note(f"Position {i} holds {inp['x']}: found.")
                return
            t.next()
        t.set("r", -1)
        t.note(f"{inp['x']} does not occur: -1.")

    def read_answer(self, memory, inp):
        return str(memory["r"])

    def question(self, inp, hint=False):
        return f"Find the first 0-based position of {inp['x']} in {seq(inp['a'], hint)} (-1 if it does not occur)."
