"""Retrieval and QA metrics for long-term memory benchmarks, with confidence intervals.

``recall_any@k`` / ``recall_all@k`` / ``ndcg_any@k`` follow LongMemEval's session-level definitions (the ones the
MemGAS code reports): any / all evidence sessions among the top k, and NDCG with binary relevance.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np


def retrieval_metrics(ranking: Sequence[int], evidence: Sequence[int], k: int) -> dict[str, float]:
    """Session-level retrieval metrics of one query.

    Args:
        ranking: session indices, best first.
        evidence: indices of the sessions holding the answer (non-empty).
        k (`int`): cut-off (>= 1).

    Returns:
        `dict` with ``recall_any``, ``recall_all`` (1.0 / 0.0) and ``ndcg_any`` (in [0, 1]).

    Raises:
        ValueError: for empty ``evidence`` or ``k < 1``.
    """
    if not evidence:
        raise ValueError("`evidence` must name at least one session")
    if k < 1:
        raise ValueError(f"`k` must be >= 1, got {k}")
    top = list(ranking)[:k]
    gold = set(evidence)
    hits = [1.0 if i in gold else 0.0 for i in top]
    dcg = sum(h / math.log2(r + 2) for r, h in enumerate(hits))
    ideal = sum(1.0 / math.log2(r + 2) for r in range(min(len(gold), k)))
    return {
        "recall_any": float(any(hits)),
        "recall_all": float(gold <= set(top)),
        "ndcg_any": dcg / ideal if ideal else 0.0,
    }


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation and articles, squeeze spaces (SQuAD-style)."""
    text = re.sub(r"[^a-z0-9 ]", " ", text.lower())
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def answer_matches(prediction: str, answers: Sequence[str]) -> bool:
    """Whether every gold answer string occurs (as whole words, normalised) in the prediction."""
    pred = f" {normalize_answer(prediction)} "
    return all(f" {normalize_answer(a)} " in pred for a in answers)


def wilson_interval(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95 % by default)."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def paired_bootstrap(a: Sequence[float], b: Sequence[float], n_resamples: int = 10000, seed: int = 0) -> dict:
    """Mean difference ``mean(a) - mean(b)`` over paired items with a 95 % percentile bootstrap interval.

    Returns:
        `dict` with ``diff``, ``low``, ``high`` and ``p_value`` (two-sided, the share of resampled differences on
        the other side of 0, doubled, capped at 1).
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.size == 0:
        raise ValueError("`a` and `b` must be non-empty and paired (same length)")
    d = a - b
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.size, size=(n_resamples, d.size))].mean(1)
    low, high = np.percentile(means, [2.5, 97.5])
    if d.mean() >= 0:
        p = 2 * float((means <= 0).mean())
    else:
        p = 2 * float((means >= 0).mean())
    return {"diff": float(d.mean()), "low": float(low), "high": float(high), "p_value": min(1.0, p)}


def bootstrap_interval(values: Sequence[float], n_resamples: int = 10000, seed: int = 0) -> tuple[float, float]:
    """95 % percentile bootstrap interval of a mean."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, v.size, size=(n_resamples, v.size))].mean(1)
    low, high = np.percentile(means, [2.5, 97.5])
    return (float(low), float(high))
