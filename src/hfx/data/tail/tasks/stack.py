"""Stacks: bracket matching and postfix evaluation."""

from __future__ import annotations

from ..registry import Task, register, seq


_PAIRS = {"(": ")", "<": ">"}


def _balanced(rng, pairs: int) -> str:
    """A uniformly shaped random balanced string of ``pairs`` bracket pairs over ``()`` and ``<>``."""
    out, stack, opened = [], [], 0
    while len(out) < 2 * pairs:
        can_open, can_close = opened < pairs, bool(stack)
        if can_open and (not can_close or rng.random() < 0.5):
            ch = rng.choice("(<")
            stack.append(ch)
            out.append(ch)
            opened += 1
        else:
            out.append(_PAIRS[stack.pop()])
    return "".join(out)


@register
class Parens(Task):
    name = "parens"
    algorithm_class = "stack"
    description = "are the brackets ( ) < > balanced? a stack of open brackets; answer yes / no"
    length_unit = "bracket pairs (string length / 2)"
    train_lengths = (1, 5)
    ood_lengths = (6, 10)
    answer_kind = "symbol"
    answer_pattern = r"(?i)\b(?:yes|no)\b"

    def sample(self, rng, length):
        s = list(_balanced(rng, length))
        if rng.random() < 0.5:  # corrupt: change one character to another bracket
            i = rng.randrange(len(s))
            s[i] = rng.choice([ch for ch in "()<>" if ch != s[i]])
        return {"s": "".join(s)}

    def solve(self, inp):  # a counter per bracket type is not enough ("(<)>"), so: repeated pair removal
        s = inp["s"]
        while "()" in s or "<>" in s:
            s = s.replace("()", "").replace("<>", "")
        return "yes" if not s else "no"

    def memory(self, inp):
        return {f"s[{i}]": ch for i, ch in enumerate(inp["s"])}

    def program(self, t, inp):
        t.set("sp", 0)
        t.next()
        for i, ch in enumerate(inp["s"]):
            if t.op("isopen", [f"s[{i}]"], ["f"]):
                t.op("copy", [f"s[{i}]"], [f"st[{t['sp']}]"])
                t.op("inc", ["sp"], ["sp"])
                t.note(f"{ch}: push, the stack has {t['sp']}.")
            else:
                if t.op("isz", ["sp"], ["f"]):
                    t.set("r", "no")
                    t.note(f"{ch} with an empty stack: not balanced.")
                    return
                sp = t.op("dec", ["sp"], ["sp"])
                top = t[f"st[{sp}]"]
                if not t.op("match", [f"st[{sp}]", f"s[{i}]"], ["f"]):
                    t.set("r", "no")
                    t.note(f"{ch} does not close {top}: not balanced.")
                    return
                t.note(f"{ch} closes {top}: pop, the stack has {sp}.")
            t.next()
        empty = t.op("isz", ["sp"], ["f"])
        t.set("r", "yes" if empty else "no")
        t.note("The stack is empty at the end: balanced." if empty else "Brackets left open: not balanced.")

    def read_answer(self, memory, inp):
        return str(memory["r"])

    def question(self, inp, hint=False):
        s = seq(inp["s"], hint) if hint else inp["s"]
        return f"Are the brackets in {s} balanced? Answer yes or no."


@register
class Postfix(Task):
    name = "postfix"
    algorithm_class = "stack"
    description = "evaluate a postfix expression of digits with + - * modulo 10, with a stack"
    length_unit = "operands"
    train_lengths = (2, 6)
    ood_lengths = (7, 12)

    def sample(self, rng, length):
        def tree(k):  # a random binary expression tree with k leaves
            if k == 1:
                return rng.randrange(10)
            left = rng.randint(1, k - 1)
            return (rng.choice("+-*"), tree(left), tree(k - left))

        return {"tree": tree(length)}

    @staticmethod
    def _tokens(node) -> list:
        if isinstance(node, int):
            return [node]
        op, a, b = node
        return [*Postfix._tokens(a), *Postfix._tokens(b), op]

    def solve(self, inp):  # recursion over the tree: independent of the traced stack machine
        def ev(node):
            if isinstance(node, int):
                return node
            op, a, b = node
            x, y = ev(a), ev(b)
            return {"+": x + y, "-": x - y, "*": x * y}[op] % 10

        return str(ev(inp["tree"]))

    def memory(self, inp):
        return {f"x[{i}]": tok for i, tok in enumerate(self._tokens(inp["tree"]))}

    def program(self, t, inp):
        t.set("sp", 0)
        t.next()
        for i, tok in enumerate(self._tokens(inp["tree"])):
            if not t.op("isop", [f"x[{i}]"], ["f"]):
                t.op("copy", [f"x[{i}]"], [f"st[{t['sp']}]"])
                t.op("inc", ["sp"], ["sp"])
                t.note(f"Push {tok}.")
            else:
                t.op("dec", ["sp"], ["sp"])
                sp = t["sp"]
                a, b = t[f"st[{sp - 1}]"], t[f"st[{sp}]"]
                r = t.op("apply", [f"st[{sp - 1}]", f"x[{i}]", f"st[{sp}]"], [f"st[{sp - 1}]"])
                t.note(f"{a} {tok} {b} = {r} (mod 10).")
            t.next()

    def read_answer(self, memory, inp):
        return str(memory["st[0]"])

    def question(self, inp, hint=False):
        return f"Evaluate the postfix expression {seq(self._tokens(inp['tree']), hint, sep=' ')} modulo 10."
