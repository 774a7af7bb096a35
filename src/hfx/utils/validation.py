"""Argument checks shared by every hfx module, in transformers' message template.

Every check names the argument in backticks, states the constraint, then the received value, e.g.
"`top_p` has to be a float > 0 and <= 1, but is 2.0" (the template of ``transformers.generation.logits_process``).
Each returns the normalised value (a Python ``int`` / ``float`` / ``bool`` / ``str``), so a caller writes
``top_p = check_float("top_p", top_p, minimum=0, maximum=1, strict_minimum=True)`` and uses the result.

Rules, the same everywhere:

* ``bool`` is never accepted where a number is meant (``size=True`` is refused), and a fractional float never where
  an integer is meant (``walk_length=2.5``); integer-like objects (``numpy.int64``, 0-d integer tensors) are accepted.
* A wrong *type* raises ``TypeError``; a value of the right type out of range (NaN and inf included) raises
  ``ValueError``. Both name the argument.
* Nothing heavy is imported at module level: torch / numpy are looked up only when a tensor or array is passed.
"""

from __future__ import annotations

import math
import numbers
import operator
import sys
from collections.abc import Iterable, Sequence
from typing import Any


__all__ = [
    "check_bool",
    "check_choice",
    "check_finite_tensor",
    "check_float",
    "check_int",
    "check_optional",
    "check_sequence",
    "check_size_fits",
    "check_str",
    "check_token_ids",
    "describe",
]


def describe(value: Any) -> str:
    """A short ``repr`` of ``value`` for an error message (long values are cut; tensors show shape and dtype)."""
    if hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, (int, float)):
        shape = tuple(value.shape)
        if len(shape) > 0:
            return f"{type(value).__name__} of shape {shape} and dtype {value.dtype}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return True
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.bool_):
        return True
    torch = sys.modules.get("torch")
    return torch is not None and torch.is_tensor(value) and value.dtype == torch.bool


def _range_text(kind: str, minimum, maximum, strict_minimum: bool, strict_maximum: bool) -> str:
    parts = []
    if minimum is not None:
        parts.append(f"{'>' if strict_minimum else '>='} {minimum}")
    if maximum is not None:
        parts.append(f"{'<' if strict_maximum else '<='} {maximum}")
    return f"{kind} {' and '.join(parts)}" if parts else kind


def check_int(
    name: str,
    value: Any,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int:
    """``value`` as a Python ``int`` in ``[minimum, maximum]`` (either bound may be ``None``).

    Accepts ``int`` and integer-like objects (``numpy.int64``, a 0-d integer tensor: anything with ``__index__``), and
    a float with an integral value only if it is not ``bool``. Refuses ``bool``.

    Raises:
        TypeError: if ``value`` is not integer-like (a string, ``None``, ``2.5``, ``True``).
        ValueError: if it is out of range.
    """
    constraint = _range_text("an integer", minimum, maximum, False, False)
    if _is_bool(value):
        raise TypeError(f"`{name}` has to be {constraint}, but is {value!r} (a bool)")
    try:
        number = operator.index(value)
    except TypeError:
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            number = int(value)
        else:
            raise TypeError(f"`{name}` has to be {constraint}, but is {describe(value)}") from None
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        raise ValueError(f"`{name}` has to be {constraint}, but is {number!r}")
    return int(number)


def check_float(
    name: str,
    value: Any,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    strict_minimum: bool = False,
    strict_maximum: bool = False,
    finite: bool = True,
) -> float:
    """``value`` as a Python ``float`` within the bounds (``strict_*`` makes a bound exclusive).

    Accepts any real number (``int``, ``float``, ``numpy.float32``, a 0-d tensor), not ``bool``. NaN is always
    refused; ``inf`` is refused unless ``finite=False`` (and then still subject to the bounds).

    Raises:
        TypeError: if ``value`` is not a real number.
        ValueError: if it is NaN, infinite (with ``finite``), or out of range.
    """
    kind = "a finite float" if finite else "a float"
    constraint = _range_text(kind, minimum, maximum, strict_minimum, strict_maximum)
    if _is_bool(value):
        raise TypeError(f"`{name}` has to be {constraint}, but is {value!r} (a bool)")
    if not isinstance(value, numbers.Real):
        if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
            value = value.item()
        if _is_bool(value) or not isinstance(value, numbers.Real):
            raise TypeError(f"`{name}` has to be {constraint}, but is {describe(value)}")
    number = float(value)
    bad = math.isnan(number) or (finite and math.isinf(number))
    if minimum is not None:
        bad = bad or number < minimum or (strict_minimum and number == minimum)
    if maximum is not None:
        bad = bad or number > maximum or (strict_maximum and number == maximum)
    if bad:
        raise ValueError(f"`{name}` has to be {constraint}, but is {value!r}")
    return number


def check_bool(name: str, value: Any) -> bool:
    """``value`` as a ``bool``: ``True`` / ``False`` (and ``numpy.bool_``) only; ``0`` / ``1`` / strings are refused.

    Raises:
        TypeError: otherwise.
    """
    if not _is_bool(value) or hasattr(value, "shape") and tuple(value.shape):
        raise TypeError(f"`{name}` has to be a bool, but is {describe(value)}")
    return bool(value)


def check_str(name: str, value: Any, *, allow_empty: bool = False) -> str:
    """``value`` as a ``str`` (non-empty unless ``allow_empty``; a string of only whitespace counts as empty).

    Raises:
        TypeError: if ``value`` is not a ``str``.
        ValueError: if it is empty.
    """
    if not isinstance(value, str):
        raise TypeError(f"`{name}` has to be a string, but is {describe(value)}")
    if not allow_empty and not value.strip():
        raise ValueError(f"`{name}` has to be a non-empty string, but is {value!r}")
    return value


def check_choice(name: str, value: Any, allowed: Iterable[Any]) -> Any:
    """``value`` if it is one of ``allowed`` (compared with ``==``; ``True`` is not taken for ``1``).

    Raises:
        ValueError: naming the allowed values otherwise.
    """
    allowed = list(allowed)
    for option in allowed:
        if _is_bool(option) != _is_bool(value):
            continue
        try:
            if bool(value == option):
                return value
        except Exception:  # noqa: BLE001, S112 - an object whose == raises (or is ambiguous) is no match
            continue
    raise ValueError(f"`{name}` has to be one of {allowed}, but is {describe(value)}")


def check_optional(check, name: str, value: Any, **kwargs) -> Any:
    """``None`` if ``value`` is ``None``, else ``check(name, value, **kwargs)``."""
    return None if value is None else check(name, value, **kwargs)


def check_sequence(
    name: str,
    value: Any,
    *,
    item_check=None,
    min_length: int = 0,
    allow_str: bool = False,
    **item_kwargs,
) -> list:
    """``value`` as a ``list`` of at least ``min_length`` items, each passed through ``item_check`` (if given) as
    ``item_check(f"{name}[{i}]", item, **item_kwargs)``. A ``str`` is not a sequence here unless ``allow_str``.

    Raises:
        TypeError: if ``value`` is not a list / tuple / other non-string sequence, or an item fails its type check.
        ValueError: if it is too short, or an item fails its value check.
    """
    if (isinstance(value, (str, bytes)) and not allow_str) or not isinstance(value, (Sequence, range)):
        if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
            value = value.tolist()
        if not isinstance(value, (list, tuple, range)) or isinstance(value, (str, bytes)):
            raise TypeError(f"`{name}` has to be a list, but is {describe(value)}")
    items = list(value)
    if len(items) < min_length:
        raise ValueError(f"`{name}` has to hold at least {min_length} item(s), but holds {len(items)}")
    if item_check is not None:
        items = [item_check(f"{name}[{i}]", item, **item_kwargs) for i, item in enumerate(items)]
    return items


def check_token_ids(name: str, ids: Any, vocab_size: int | None) -> list[int]:
    """``ids`` (an int, a list of ints, or an integer tensor) as a list of token ids in ``[0, vocab_size)``.

    ``vocab_size=None`` (unknown) checks only the types and non-negativity.

    Raises:
        TypeError: if an id is not an integer.
        ValueError: if the list is empty or an id is outside the vocabulary (the message lists the bad ids).
    """
    if hasattr(ids, "tolist"):
        ids = ids.tolist()
    if isinstance(ids, (list, tuple)):
        flat = list(ids)
    else:
        flat = [ids]
    if not flat:
        raise ValueError(f"`{name}` has to hold at least one token id, but is empty")
    flat = [check_int(f"{name}[{i}]", token) for i, token in enumerate(flat)]
    bad = [t for t in flat if t < 0 or (vocab_size is not None and t >= vocab_size)]
    if bad:
        where = f"[0, {vocab_size})" if vocab_size is not None else "ids >= 0"
        raise ValueError(f"`{name}` holds token ids outside the vocabulary {where}: {bad[:10]}")
    return flat


def check_finite_tensor(name: str, tensor: Any) -> Any:
    """``tensor`` unchanged if every element is finite (floating tensors / arrays only; integer ones pass).

    Raises:
        ValueError: naming ``name`` and the count of NaN / inf elements otherwise.
    """
    torch = sys.modules.get("torch")
    if torch is not None and torch.is_tensor(tensor):
        if tensor.is_floating_point() or tensor.is_complex():
            finite = torch.isfinite(tensor)
            if not bool(finite.all()):
                bad = int((~finite).sum())
                raise ValueError(
                    f"`{name}` has to hold finite values, but {bad} of {tensor.numel()} elements are NaN or inf"
                )
        return tensor
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(tensor, numpy.ndarray) and numpy.issubdtype(tensor.dtype, numpy.inexact):
        finite = numpy.isfinite(tensor)
        if not finite.all():
            raise ValueError(
                f"`{name}` has to hold finite values, but {int((~finite).sum())} of {tensor.size} elements are NaN "
                "or inf"
            )
    return tensor


def check_size_fits(name: str, num_elements: int, *, bytes_per_element: int = 4, limit_bytes: int | None = None,
                    what: str = "tensor") -> int:
    """Refuse an allocation of ``num_elements`` before it is made when it would exceed ``limit_bytes`` (default: the
    machine's physical memory where it can be read, else 1 TiB).

    Raises:
        ValueError: naming ``name``, the size asked for and the limit.
    """
    num_elements = check_int(name, num_elements, minimum=0)
    if limit_bytes is None:
        limit_bytes = _physical_memory_bytes()
    needed = num_elements * bytes_per_element
    if needed > limit_bytes:
        raise ValueError(
            f"`{name}` asks for a {what} of {num_elements:,} elements ({needed / 2**30:.1f} GiB), more than the "
            f"{limit_bytes / 2**30:.1f} GiB this machine has; use a smaller value"
        )
    return num_elements


def _physical_memory_bytes() -> int:
    try:
        import os

        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 2**40
