"""Dynamic programming: 0/1 knapsack (the paper's Figure 2 example) and longest common subsequence."""

from __future__ import annotations

from functools import cache
from itertools import combinations

from ..registry import Task, register


@register
class Knapsack(Task):
    name = "knapsack"
    algorithm_class = "dynamic_programming"
    description = "0/1 knapsack: best total value within the capacity (one-row DP over capacities, high to low)"
    length_unit = "items (capacity = items + 2)"
    train_lengths = (1, 4)
    ood_lengths = (5, 8)

    def sample(self, rng, length):
        return {
            "cap": length + 2,
            "w": [rng.randint(1, 4) for _ in range(length)],
            "v": [rng.randint(1, 9) for _ in range(length)],
        }

    def solve(self, inp):  # brute force over all subsets: independent of the DP
        items = range(len(inp["w"]))
        best = 0
        for r in range(len(inp["w"]) + 1):
            for subset in combinations(items, r):
                if sum(inp["w"][i] for i in subset) <= inp["cap"]:
                    best = max(best, sum(inp["v"][i] for i in subset))
        return str(best)

    def memory(self, inp):
        mem = {"cap": inp["cap"]}
        for i, (w, v) in enumerate(zip(inp["w"], inp["v"])):
            mem[f"w[{i}]"], mem[f"v[{i}]"] = w, v
        return mem

    def program(self, t, inp):
        cap = inp["cap"]
        for c in range(cap + 1):
            t.set(f"dp[{c}]", 0)
        t.next()
        for i, w in enumerate(inp["w"]):
            for c in range(cap, w - 1, -1):
                t.op("add", [f"dp[{c - w}]", f"v[{i}]"], ["t"])
                t.op("max", [f"dp[{c}]", "t"], [f"dp[{c}]"])
                t.next()
            row = ",".join(str(t[f"dp[{c}]"]) for c in range(cap + 1))
            t.note(f"With item {i} (weight {w}, value {inp['v'][i]}) the best values by capacity are {row}.")

    def read_answer(self, memory, inp):
        return str(memory[f"dp[{inp['cap']}]"])

    def question(self, inp, hint=False):
        items = [f"{w}/{v}" for w, v in zip(inp["w"], inp["v"])]
        listed = " ".join(f"#{i}:{x}" for i, x in enumerate(items)) if hint else " ".join(items)
        return (
            f"0/1 knapsack with capacity {inp['cap']} and items (weight/value) {listed}. "
            "What is the largest total value?"
        )


@register
class LCS(Task):
    name = "lcs"
    algorithm_class = "dynamic_programming"
    description = "length of the longest common subsequence of two strings over {a, b, c} (full DP table)"
    length_unit = "length of each string"
    train_lengths = (1, 5)
    ood_lengths = (6, 9)

    def sample(self, rng, length):
        return {
            "x": "".join(rng.choice("abc") for _ in range(length)),
            "y": "".join(rng.choice("abc") for _ in range(length)),
        }

    def solve(self, inp):  # top-down recursion: a different formulation from the traced bottom-up table
        x, y = inp["x"], inp["y"]

        @cache
        def rec(i, j):
            if i == len(x) or j == len(y):
                return 0
            return 1 + rec(i + 1, j + 1) if x[i] == y[j] else max(rec(i + 1, j), rec(i, j + 1))

        return str(rec(0, 0))

    def memory(self, inp):
        return {**{f"x[{i}]": ch for i, ch in enumerate(inp["x"])}, **{f"y[{j}]": ch for j, ch in enumerate(inp["y"])}}

    def program(self, t, inp):
        n, m = len(inp["x"]), len(inp["y"])
        for j in range(m + 1):
            t.set(f"dp[0][{j}]", 0)
        for i in range(1, n + 1):
            t.set(f"dp[{i}][0]", 0)
        t.next()
        for i in range(1, n + 1):
            for j in range(1, m + 1):
                if t.op("eq", [f"x[{i - 1}]", f"y[{j - 1}]"], ["f"]):
                    t.op("inc", [f"dp[{i - 1}][{j - 1}]"], [f"dp[{i}][{j}]"])
                else:
                    t.op("max", [f"dp[{i - 1}][{j}]", f"dp[{i}][{j - 1}]"], [f"dp[{i}][{j}]"])
                t.next()
            row = ",".join(str(t[f"dp[{i}][{j}]"]) for j in range(m + 1))
            t.note(f"Row {i} (letter {inp['x'][i - 1]}): {row}.")

    def read_answer(self, memory, inp):
        return str(memory[f"dp[{len(inp['x'])}][{len(inp['y'])}]"])

    def question(self, inp, hint=False):
        def word(s):
            return " ".join(f"#{i}:{ch}" for i, ch in enumerate(s)) if hint else s

        return f"What is the length of the longest common subsequence of {word(inp['x'])} and {word(inp['y'])}?"
