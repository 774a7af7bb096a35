"""Metrics of CRD: concept recovery against a generator's ground truth, and context-blind answer scorers.

:func:`concept_recovery` is the one definition of the concept-recovery metric (the benchmark and tests use it; other
wrappers, e.g. an ``evaluate`` module, should call it rather than re-implement it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np


def concept_recovery(predicted: Sequence[Iterable[str]], reference: Sequence[Iterable[str]]) -> dict[str, Any]:
    """Precision, recall and F1 of selected concept sets against the ground-truth rule-governed concepts.

    Per item, ``tp = |P & R|``, ``fp = |P - R|``, ``fn = |R - P|`` (``P`` the selected, ``R`` the governed concepts;
    a governed concept the proposer missed counts as a false negative). The totals are micro-averaged:
    ``precision = sum tp / sum (tp + fp)``, ``recall = sum tp / sum (tp + fn)``, F1 their harmonic mean; the
    per-item values are given too (``None`` where undefined, e.g. precision of an empty selection).

    Args:
        predicted (`Sequence[Iterable[str]]`): the selected concepts of each item.
        reference (`Sequence[Iterable[str]]`): the governed concepts of each item (same length).

    Returns:
        `dict`: ``precision``, ``recall``, ``f1`` (``None`` when their denominator is 0 over all items),
        ``true_positives``, ``false_positives``, ``false_negatives``, ``num_items``, ``exact_match`` (share of items
        with ``P == R``), ``per_item`` (list of dicts with ``precision``, ``recall``, ``tp``, ``fp``, ``fn``).

    Raises:
        ValueError: if the lengths differ or there are no items.
        TypeError: if an entry is a string (a single name must be wrapped in a list).
    """
    predicted, reference = list(predicted), list(reference)
    if len(predicted) != len(reference):
        raise ValueError(f"`predicted` and `reference` have to be paired, but hold {len(predicted)} and "
                         f"{len(reference)} items")
    if not predicted:
        raise ValueError("`predicted` is empty: concept recovery over 0 items is undefined")
    tp = fp = fn = exact = 0
    per_item = []
    for i, (p, r) in enumerate(zip(predicted, reference)):
        for name, value in (("predicted", p), ("reference", r)):
            if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
                raise TypeError(f"`{name}[{i}]` has to be a collection of concept names, but is {value!r}")
        p, r = set(p), set(r)
        t, f_p, f_n = len(p & r), len(p - r), len(r - p)
        tp, fp, fn, exact = tp + t, fp + f_p, fn + f_n, exact + (p == r)
        per_item.append({"precision": t / (t + f_p) if p else None, "recall": t / (t + f_n) if r else None,
                         "tp": t, "fp": f_p, "fn": f_n})
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / (tp + fn) if tp + fn else None
    f1 = (2 * precision * recall / (precision + recall)
          if precision is not None and recall is not None and precision + recall > 0 else None)
    return {"precision": precision, "recall": recall, "f1": f1, "true_positives": tp, "false_positives": fp,
            "false_negatives": fn, "num_items": len(predicted), "exact_match": exact / len(predicted),
            "per_item": per_item}


def frequency_scores(candidates: Sequence[Sequence[Hashable]]) -> list[float]:
    """The context-blind shortcut of RAVEN's answer sets: a candidate's score is the number of (attribute, value)
    pairs it shares with the other candidates, summed over attributes (the answer is the mode of RAVEN's
    distractors; I-RAVEN's balanced tree gives every candidate the same score).

    Args:
        candidates (`Sequence[Sequence[Hashable]]`): per candidate, its value of each attribute (same order).

    Returns:
        `list[float]`: one score per candidate.

    Raises:
        ValueError: if there are no candidates or they have different numbers of attributes.
    """
    candidates = [tuple(c) for c in candidates]
    if not candidates:
        raise ValueError("`candidates` is empty")
    if len({len(c) for c in candidates}) != 1:
        raise ValueError("every candidate needs the same attributes")
    counts = [Counter(c[a] for c in candidates) for a in range(len(candidates[0]))]
    return [float(sum(counts[a][c[a]] - 1 for a in range(len(c)))) for c in candidates]


def candidate_tuples(item: dict, attributes: Sequence[str] | None = None) -> list[tuple]:
    """Per candidate of a dataset row (or generated matrix), the tuple of its attribute values (the only input of a
    context-blind scorer).

    Returns:
        `list[tuple]`.
    """
    from .data import NUM_CONTEXT, parse_item

    parsed = parse_item(item)
    names = list(attributes) if attributes is not None else sorted(parsed["concepts"])
    return [tuple(panel.get(n) for n in names) for panel in parsed["attributes"][NUM_CONTEXT:]]


def argmax_random_ties(scores: Sequence[float], rng: np.random.Generator) -> int:
    """The index of the best score, ties broken uniformly at random.

    Returns:
        `int`.
    """
    scores = np.asarray(scores, dtype=float)
    best = np.flatnonzero(scores >= scores.max() - 1e-12)
    return int(best[rng.integers(len(best))])


__all__ = ["argmax_random_ties", "candidate_tuples", "concept_recovery", "frequency_scores"]
