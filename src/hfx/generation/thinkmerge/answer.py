"""GSM8K-style numeric answer extraction (for majority voting and accuracy).

Priority of the patterns, first match wins (all are searched in the answer text):

1. ``\\boxed{...}`` (Qwen3 / DeepSeek-R1 style), the last one;
2. ``#### N`` (GSM8K reference format), the last one;
3. ``Final answer: N`` / ``The answer is N`` (case-insensitive), the last one;
4. otherwise the last number in the text.

Numbers are normalised: thousands separators, ``$``, ``%`` and a trailing period are removed, and values that are
integral are written without a decimal part (``"18.00"`` -> ``"18"``, ``"1,234"`` -> ``"1234"``).
"""

from __future__ import annotations

import re


_NUMBER = r"-?\$?\s?\d[\d,]*(?:\.\d+)?"
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_HASHES = re.compile(r"####\s*(" + _NUMBER + ")")
_FINAL = re.compile(r"(?:final answer|the answer is)\s*(?:is)?\s*[:=]?\s*\**\s*(" + _NUMBER + ")", re.IGNORECASE)
_ANY = re.compile(_NUMBER)


def normalize_number(text: str | None) -> str | None:
    """Canonical string of the first number in ``text`` (``None`` when there is none).

    Examples: ``"$1,234.50"`` -> ``"1234.5"``, ``"18.00"`` -> ``"18"``, ``"-3"`` -> ``"-3"``.
    """
    if text is None:
        return None
    match = _ANY.search(text)
    if match is None:
        return None
    raw = match.group(0).replace("$", "").replace(",", "").replace(" ", "")
    try:
        value = float(raw)
    except ValueError:
        return None
    if value == int(value):
        return str(int(value))
    return repr(value)


def extract_numeric_answer(text: str | None) -> str | None:
    """The normalised numeric answer of a model output, or ``None`` when it holds no number (see module docstring)."""
    if not text:
        return None
    for pattern in (_BOXED, _HASHES, _FINAL):
        found = pattern.findall(text)
        for candidate in reversed(found):
            number = normalize_number(candidate)
            if number is not None:
                return number
    numbers = _ANY.findall(text)
    return normalize_number(numbers[-1]) if numbers else None


def gsm8k_reference(answer: str) -> str:
    """The normalised reference answer of a GSM8K ``answer`` field (the number after ``####``).

    Raises:
        ValueError: if ``answer`` has no ``#### N`` line.
    """
    match = _HASHES.search(answer)
    if match is None:
        raise ValueError(f"`answer` has no '#### N' reference line: {answer[-80:]!r}")
    return normalize_number(match.group(1))


def is_correct(prediction: str | None, reference: str) -> bool:
    """Whether a normalised prediction equals the reference numerically (1e-6 tolerance)."""
    if prediction is None:
        return False
    try:
        return abs(float(prediction) - float(reference)) < 1e-6
    except ValueError:
        return prediction == reference


__all__ = ["extract_numeric_answer", "gsm8k_reference", "is_correct", "normalize_number"]
