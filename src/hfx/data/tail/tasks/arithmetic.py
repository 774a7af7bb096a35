"""Arithmetic: column addition with carries, subtraction with borrows, multiplication by a digit."""

from __future__ import annotations

from ..registry import Task, random_digits, register, seq


def _number(digits, hint: bool) -> str:
    return seq(digits, hint, from_right=True) if hint else "".join(map(str, digits))


def _digits_of(memory, name: str, n: int) -> str:
    return "".join(str(memory[f"{name}[{i}]"]) for i in range(n))


@register
class Add(Task):
    name = "add"
    algorithm_class = "arithmetic"
    description = "multi-digit addition a + b, column by column from the right with carries"
    length_unit = "digits per operand"
    train_lengths = (1, 6)
    ood_lengths = (7, 12)
    hint_from_right = True

    def sample(self, rng, length):
        return {"a": random_digits(rng, length), "b": random_digits(rng, length)}

    def solve(self, inp):
        return str(int("".join(map(str, inp["a"]))) + int("".join(map(str, inp["b"]))))

    def memory(self, inp):
        n = len(inp["a"])
        return {**{f"a[{i}]": inp["a"][i] for i in range(n)}, **{f"b[{i}]": inp["b"][i] for i in range(n)}}

    def program(self, t, inp):
        t.set("c", 0)
        t.next()
        for i in reversed(range(len(inp["a"]))):
            cin = t["c"]
            total = t.op("add", [f"a[{i}]", f"b[{i}]", "c"], ["t"])
            d, c = t.op("split", ["t"], [f"s[{i}]", "c"])
            t.note(f"{inp['a'][i]} + {inp['b'][i]} + carry {cin} = {total}: write {d}, carry {c}.")
            t.next()

    def read_answer(self, memory, inp):
        n = len(inp["a"])
        return str(int(str(memory["c"]) + _digits_of(memory, "s", n)))

    def question(self, inp, hint=False):
        return f"What is {_number(inp['a'], hint)} + {_number(inp['b'], hint)}?"


@register
class Sub(Task):
    name = "sub"
    algorithm_class = "arithmetic"
    description = "multi-digit subtraction a - b (a >= b, b zero-padded), from the right with borrows"
    length_unit = "digits per operand"
    train_lengths = (1, 6)
    ood_lengths = (7, 12)
    hint_from_right = True

    def sample(self, rng, length):
        a = random_digits(rng, length)
        b_value = rng.randint(0, int("".join(map(str, a))))
        return {"a": a, "b": [int(ch) for ch in str(b_value).zfill(length)]}

    def solve(self, inp):
        return str(int("".join(map(str, inp["a"]))) - int("".join(map(str, inp["b"]))))

    def memory(self, inp):
        n = len(inp["a"])
        return {**{f"a[{i}]": inp["a"][i] for i in range(n)}, **{f"b[{i}]": inp["b"][i] for i in range(n)}}

    def program(self, t, inp):
        t.set("r", 0)
        t.next()
        for i in reversed(range(len(inp["a"]))):
            rin = t["r"]
            diff = t.op("sub", [f"a[{i}]", f"b[{i}]", "r"], ["t"])
            d, r = t.op("borrow", ["t"], [f"d[{i}]", "r"])
            t.note(f"{inp['a'][i]} - {inp['b'][i]} - borrow {rin} = {diff}: write {d}, borrow {r}.")
            t.next()

    def read_answer(self, memory, inp):
        return str(int(_digits_of(memory, "d", len(inp["a"]))))

    def question(self, inp, hint=False):
        return f"What is {_number(inp['a'], hint)} - {_number(inp['b'], hint)}?"


@register
class Mul(Task):
    name = "mul"
    algorithm_class = "arithmetic"
    description = "multiplication of an n-digit number by a digit, from the right with carries"
    length_unit = "digits of the multi-digit factor"
    train_lengths = (1, 6)
    ood_lengths = (7, 12)
    hint_from_right = True

    def sample(self, rng, length):
        return {"a": random_digits(rng, length), "k": rng.randrange(2, 10)}

    def solve(self, inp):
        return str(int("".join(map(str, inp["a"]))) * inp["k"])

    def memory(self, inp):
        return {**{f"a[{i}]": x for i, x in enumerate(inp["a"])}, "k": inp["k"]}

    def program(self, t, inp):
        t.set("c", 0)
        t.next()
        for i in reversed(range(len(inp["a"]))):
            cin = t["c"]
            prod = t.op("mul", [f"a[{i}]", "k"], ["t"])
            total = t.op("add", ["t", "c"], ["t"])
            d, c = t.op("split", ["t"], [f"p[{i}]", "c"])
            t.note(f"{inp['a'][i]} x {inp['k']} = {prod}, plus carry {cin} is {total}: write {d}, carry {c}.")
            t.next()

    def read_answer(self, memory, inp):
        return str(int(str(memory["c"]) + _digits_of(memory, "p", len(inp["a"]))))

    def question(self, inp, hint=False):
        return f"What is {_number(inp['a'], hint)} * {inp['k']}?"
