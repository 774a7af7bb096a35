"""Automata: a Turing machine (binary increment), a finite automaton (mod 3) and parity."""

from __future__ import annotations

from ..registry import Task, register, seq


# binary increment: (state, symbol) -> (next state, write, move). R scans right to the blank, C carries leftwards.
_TM = {
    ("R", 0): ("R", 0, "R"),
    ("R", 1): ("R", 1, "R"),
    ("R", "_"): ("C", "_", "L"),
    ("C", 1): ("C", 0, "L"),
    ("C", 0): ("H", 1, "N"),
    ("C", "_"): ("H", 1, "N"),
}


def _bits_text(bits: str, hint: bool) -> str:
    return seq(bits, hint) if hint else bits


@register
class TMIncrement(Task):
    name = "tm_increment"
    algorithm_class = "automata"
    description = "simulate a Turing machine that adds 1 to a binary number (read, write, move, change state)"
    length_unit = "bits on the tape"
    train_lengths = (1, 8)
    ood_lengths = (9, 16)
    temps = ("t", "f", "s")  # the symbol register: hidden when atomic=False fuses a machine step
    answer_pattern = r"[01]+"

    def sample(self, rng, length):
        return {"bits": "".join(rng.choice("01") for _ in range(length))}

    def solve(self, inp):
        n = len(inp["bits"])
        return format(int(inp["bits"], 2) + 1, "b").zfill(n)

    def memory(self, inp):
        n = len(inp["bits"])
        mem = {
            "t[-1]": "_",
            **{f"t[{i}]": int(b) for i, b in enumerate(inp["bits"])},
            f"t[{n}]": "_",
            "h": 0,
            "q": "R",
        }
        for (q, s), (nq, w, mv) in _TM.items():
            mem[f"ns[{q},{s}]"], mem[f"wr[{q},{s}]"], mem[f"mv[{q},{s}]"] = nq, w, mv
        return mem

    def program(self, t, inp):
        while t["q"] != "H":
            q, h = t["q"], t["h"]
            s = t.op("copy", [f"t[{h}]"], ["s"])
            t.op("copy", [f"wr[{q},{s}]"], [f"t[{h}]"])
            t.op("move", ["h", f"mv[{q},{s}]"], ["h"])
            t.op("copy", [f"ns[{q},{s}]"], ["q"])
            t.next()
            t.note(f"State {q} reads {s} at {h}: write {t[f't[{h}]']}, move {_TM[(q, s)][2]}, go to {t['q']}.")

    def read_answer(self, memory, inp):
        cells = range(-1, len(inp["bits"]) + 1)
        return "".join(str(memory[f"t[{i}]"]) for i in cells if memory[f"t[{i}]"] != "_")

    def question(self, inp, hint=False):
        return (
            f"Run the binary-increment Turing machine on the tape {_bits_text(inp['bits'], hint)} "
            "(head on the first bit). What does the tape hold when it halts?"
        )


@register
class DFAMod3(Task):
    name = "dfa_mod3"
    algorithm_class = "automata"
    description = "run the 3-state automaton that reads a binary number from the left and ends in (number mod 3)"
    length_unit = "bits"
    train_lengths = (2, 10)
    ood_lengths = (11, 20)
    temps = ("t", "f", "b")  # the bit register: hidden when atomic=False fuses a step

    def sample(self, rng, length):
        return {"bits": "".join(rng.choice("01") for _ in range(length))}

    def solve(self, inp):
        return str(int(inp["bits"], 2) % 3)

    def memory(self, inp):
        mem = {f"x[{i}]": int(b) for i, b in enumerate(inp["bits"])}
        for q in range(3):
            for b in (0, 1):
                mem[f"d[{q},{b}]"] = (2 * q + b) % 3
        return mem

    def program(self, t, inp):
        t.set("q", 0)
        t.next()
        for i in range(len(inp["bits"])):
            q = t["q"]
            b = t.op("copy", [f"x[{i}]"], ["b"])
            t.op("copy", [f"d[{q},{b}]"], ["q"])
            t.note(f"Bit {b}: state {q} -> {t['q']}.")
            t.next()

    def read_answer(self, memory, inp):
        return str(memory["q"])

    def question(self, inp, hint=False):
        return f"What is the binary number {_bits_text(inp['bits'], hint)} modulo 3? Run the mod-3 automaton."


@register
class Parity(Task):
    name = "parity"
    algorithm_class = "automata"
    description = "parity of the number of 1s in a bit string (a two-state automaton: running xor)"
    length_unit = "bits"
    train_lengths = (2, 10)
    ood_lengths = (11, 20)

    def sample(self, rng, length):
        return {"bits": "".join(rng.choice("01") for _ in range(length))}

    def solve(self, inp):
        return str(inp["bits"].count("1") % 2)

    def memory(self, inp):
        return {f"x[{i}]": int(b) for i, b in enumerate(inp["bits"])}

    def program(self, t, inp):
        t.set("p", 0)
        t.next()
        for i in range(len(inp["bits"])):
            t.op("xor", ["p", f"x[{i}]"], ["p"])
            t.next()
        t.note(f"There are {inp['bits'].count('1')} ones.")

    def read_answer(self, memory, inp):
        return str(memory["p"])

    def question(self, inp, hint=False):
        return f"What is the parity (0 even, 1 odd) of the number of 1s in {_bits_text(inp['bits'], hint)}?"
