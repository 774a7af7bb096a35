"""argparse ``type=`` helpers shared by the sub-commands: a bad value becomes argparse's one-line usage error naming
the flag (``argument --top-p: ...``) before anything is loaded."""

from __future__ import annotations

import argparse
import math


def _number(text: str, kind):
    try:
        value = kind(text)
    except (TypeError, ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"invalid {kind.__name__} value: {text!r}") from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def int_range(low: int | None = None, high: int | None = None):
    """An ``int`` in ``[low, high]`` (either bound optional)."""

    def parse(text: str) -> int:
        value = _number(text, int)
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = f">= {low}" if high is None else f"in [{low}, {high}]" if low is not None else f"<= {high}"
            raise argparse.ArgumentTypeError(f"must be an integer {bounds}, got {text!r}")
        return value

    parse.__name__ = "int"
    return parse


def float_range(low: float, high: float | None = None, *, low_open: bool = False):
    """A finite ``float`` in ``[low, high]`` (``(low, high]`` with ``low_open``)."""

    def parse(text: str) -> float:
        value = _number(text, float)
        if (value <= low if low_open else value < low) or (high is not None and value > high):
            left = "(" if low_open else "["
            bounds = f"in {left}{low}, {high}]" if high is not None else f"{'>' if low_open else '>='} {low}"
            raise argparse.ArgumentTypeError(f"must be a number {bounds}, got {text!r}")
        return value

    parse.__name__ = "float"
    return parse


positive_int = int_range(1)
non_negative_int = int_range(0)
# torch.manual_seed takes any 64-bit value; numpy / random need < 2**32
seed = int_range(0, 2**32 - 1)
probability = float_range(0.0, 1.0, low_open=True)
positive_float = float_range(0.0, low_open=True)
non_negative_float = float_range(0.0)
