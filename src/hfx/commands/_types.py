"""argparse ``type=`` helpers shared by the sub-commands: a bad value becomes argparse's one-line usage error naming
the flag (``argument --top-p: has to be a finite float > 0 and <= 1, but is 2.0``) before anything is loaded.

The bounds are checked by :mod:`hfx.utils.validation` (transformers' message template)."""

from __future__ import annotations

import argparse

from hfx.utils.validation import check_float, check_int


def _number(text: str, kind):
    try:
        return kind(text)
    except (TypeError, ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"invalid {kind.__name__} value: {text!r}") from None


def _checked(check, value, **bounds):
    """``check`` of :mod:`hfx.utils.validation` on a parsed value, its message without the argument's name (argparse
    prefixes ``argument --flag:``)."""
    try:
        return check("_", value, **bounds)
    except (TypeError, ValueError) as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("`_` ")) from None


def int_range(low: int | None = None, high: int | None = None):
    """An ``int`` in ``[low, high]`` (either bound optional)."""

    def parse(text: str) -> int:
        return _checked(check_int, _number(text, int), minimum=low, maximum=high)

    parse.__name__ = "int"
    return parse


def float_range(low: float, high: float | None = None, *, low_open: bool = False):
    """A finite ``float`` in ``[low, high]`` (``(low, high]`` with ``low_open``)."""

    def parse(text: str) -> float:
        value = _number(text, float)
        return _checked(check_float, value, minimum=low, maximum=high, strict_minimum=low_open)

    parse.__name__ = "float"
    return parse


positive_int = int_range(1)
non_negative_int = int_range(0)
# torch.manual_seed takes any 64-bit value; numpy / random need < 2**32
seed = int_range(0, 2**32 - 1)
probability = float_range(0.0, 1.0, low_open=True)
positive_float = float_range(0.0, low_open=True)
non_negative_float = float_range(0.0)
