"""Statistics for evidence scripts and benchmarks, written once (checked against scipy / statsmodels in the tests).

Every evidence run in hfx reports a paired comparison over the same items: the mean difference with a bootstrap
interval (plain, or resampling whole clusters when several rows share a question), and one primary test fixed before
the run (exact McNemar for 0/1 outcomes, Wilcoxon signed-rank or a sign-flip permutation test for continuous ones).

Functions:

* :func:`bootstrap_ci` -- percentile interval of a mean (optionally clustered).
* :func:`paired_difference` -- ``mean(a - b)`` with its interval and a named primary test.
* :func:`mcnemar_exact` -- exact two-sided McNemar test from paired 0/1 outcomes.
* :func:`wilcoxon_signed_rank` -- scipy's two-sided Wilcoxon signed-rank test (zero differences dropped).
* :func:`sign_flip_test` -- two-sided permutation test of a mean difference by random sign flips.
* :func:`wilson_interval` -- Wilson score interval of a proportion.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .validation import check_choice, check_float, check_int


__all__ = [
    "bootstrap_ci",
    "mcnemar_exact",
    "paired_difference",
    "sign_flip_test",
    "wilcoxon_signed_rank",
    "wilson_interval",
]

PRIMARY_TESTS = ("mcnemar", "wilcoxon", "sign_flip", "bootstrap")


def _as_vector(name: str, values) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1:
        raise ValueError(f"`{name}` has to be a 1-D sequence of numbers, but has shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"`{name}` has to hold at least one value, but is empty")
    if not np.isfinite(array).all():
        raise ValueError(f"`{name}` has to hold finite values, but holds {int((~np.isfinite(array)).sum())} NaN/inf")
    return array


def _as_pair(a, b) -> tuple[np.ndarray, np.ndarray]:
    a, b = _as_vector("a", a), _as_vector("b", b)
    if a.shape != b.shape:
        raise ValueError(f"`a` and `b` have to be paired (the same length), but have {a.size} and {b.size} values")
    return a, b


def bootstrap_ci(
    values: Sequence[float],
    *,
    clusters: Sequence | None = None,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values``.

    Args:
        values (`Sequence[float]` of length `n`): per-item values (e.g. paired differences).
        clusters (`Sequence`, *optional*): a cluster label per item; when given, whole clusters are resampled and the
            statistic is the pooled mean ``sum(values) / count`` of the drawn clusters (for repeated rows of one
            question, seeds of one prompt, ...).
        confidence (`float`, *optional*, defaults to 0.95): the interval's coverage, in (0, 1).
        n_resamples (`int`, *optional*, defaults to 10,000), seed (`int`, *optional*, defaults to 0).

    Returns:
        `tuple[float, float]`: ``(low, high)``.

    Raises:
        ValueError: on empty / non-finite values, a clusters list of another length, or a bad ``confidence``.
    """
    v = _as_vector("values", values)
    confidence = check_float("confidence", confidence, minimum=0, maximum=1, strict_minimum=True, strict_maximum=True)
    n_resamples = check_int("n_resamples", n_resamples, minimum=1)
    rng = np.random.default_rng(check_int("seed", seed, minimum=0))
    tail = 100 * (1 - confidence) / 2
    if clusters is None:
        means = v[rng.integers(0, v.size, size=(n_resamples, v.size))].mean(1)
    else:
        labels = np.asarray(clusters)
        if labels.shape != v.shape:
            raise ValueError(f"`clusters` has to give one label per value ({v.size}), but has shape {labels.shape}")
        _, inverse = np.unique(labels, return_inverse=True)
        sums = np.bincount(inverse, weights=v)
        counts = np.bincount(inverse).astype(float)
        idx = rng.integers(0, sums.size, size=(n_resamples, sums.size))
        means = sums[idx].sum(1) / counts[idx].sum(1)
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def mcnemar_exact(a_correct: Sequence, b_correct: Sequence) -> dict:
    """Exact two-sided McNemar test of paired 0/1 outcomes (a binomial test on the discordant pairs).

    Args:
        a_correct, b_correct (`Sequence` of 0/1 or bool, the same length `n`): each arm's outcome per item.

    Returns:
        `dict`: ``a_only`` (items only ``a`` got right), ``b_only``, ``p_value`` (1.0 when there is no discordant pair).

    Raises:
        ValueError: on unpaired lengths, empty input, or values other than 0/1.
    """
    a, b = _as_pair(a_correct, b_correct)
    for name, x in (("a_correct", a), ("b_correct", b)):
        if not np.isin(x, (0.0, 1.0)).all():
            raise ValueError(f"`{name}` has to hold 0/1 outcomes, but holds {sorted(set(x.tolist()) - {0.0, 1.0})[:5]}")
    a_only = int(((a == 1) & (b == 0)).sum())
    b_only = int(((a == 0) & (b == 1)).sum())
    n = a_only + b_only
    if n == 0:
        p = 1.0
    else:
        k = min(a_only, b_only)
        p = min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n)
    return {"a_only": a_only, "b_only": b_only, "p_value": float(p)}


def wilcoxon_signed_rank(a: Sequence[float], b: Sequence[float]) -> dict:
    """Two-sided Wilcoxon signed-rank test of ``a - b`` (scipy's default ``zero_method="wilcox"``).

    Returns:
        `dict`: ``statistic``, ``p_value`` (1.0 when every difference is 0), ``n_nonzero``.
    """
    from scipy.stats import wilcoxon

    a, b = _as_pair(a, b)
    d = a - b
    nonzero = int((d != 0).sum())
    if nonzero == 0:
        return {"statistic": 0.0, "p_value": 1.0, "n_nonzero": 0}
    result = wilcoxon(d)
    return {"statistic": float(result.statistic), "p_value": float(result.pvalue), "n_nonzero": nonzero}


def sign_flip_test(diffs: Sequence[float], *, n_resamples: int = 10_000, seed: int = 0) -> float:
    """Two-sided permutation p-value of ``mean(diffs) != 0`` by random sign flips (exact enumeration when
    ``2**n <= n_resamples``).

    Returns:
        `float`: the p-value, counting the observed assignment (so never 0).
    """
    d = _as_vector("diffs", diffs)
    n_resamples = check_int("n_resamples", n_resamples, minimum=1)
    observed = abs(d.mean())
    if 2 ** d.size <= n_resamples:
        signs = ((np.arange(2 ** d.size)[:, None] >> np.arange(d.size)) & 1) * 2 - 1
        stats = np.abs((signs * d).mean(1))
        return float((stats >= observed - 1e-12).mean())
    rng = np.random.default_rng(check_int("seed", seed, minimum=0))
    signs = rng.choice((-1.0, 1.0), size=(n_resamples, d.size))
    stats = np.abs((signs * d).mean(1))
    return float(((stats >= observed - 1e-12).sum() + 1) / (n_resamples + 1))


def wilson_interval(successes: int, n: int, *, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion ``successes / n``.

    Raises:
        ValueError: if ``n < 1`` or ``successes`` is outside ``[0, n]``.
    """
    from scipy.stats import norm

    n = check_int("n", n, minimum=1)
    successes = check_int("successes", successes, minimum=0, maximum=n)
    confidence = check_float("confidence", confidence, minimum=0, maximum=1, strict_minimum=True, strict_maximum=True)
    z = float(norm.ppf(1 - (1 - confidence) / 2))
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def paired_difference(
    a: Sequence[float],
    b: Sequence[float],
    *,
    test: str = "bootstrap",
    clusters: Sequence | None = None,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> dict:
    """``mean(a - b)`` over paired items, its bootstrap interval, and one primary test named before the run.

    Args:
        a, b (`Sequence[float]` of the same length): per-item scores of the two arms.
        test (`str`, *optional*, defaults to `"bootstrap"`): the primary test, one of ``"mcnemar"`` (0/1 outcomes),
            ``"wilcoxon"``, ``"sign_flip"``, ``"bootstrap"`` (the p-value is then the doubled share of resampled
            means on the other side of 0).
        clusters (`Sequence`, *optional*): cluster labels for the interval (see :func:`bootstrap_ci`).

    Returns:
        `dict`: ``diff``, ``ci_low``, ``ci_high``, ``confidence``, ``n``, ``test``, ``p_value`` (+ the test's counts).
    """
    a, b = _as_pair(a, b)
    test = check_choice("test", test, PRIMARY_TESTS)
    d = a - b
    low, high = bootstrap_ci(d, clusters=clusters, confidence=confidence, n_resamples=n_resamples, seed=seed)
    out = {"diff": float(d.mean()), "ci_low": low, "ci_high": high, "confidence": confidence, "n": int(d.size),
           "test": test}
    if test == "mcnemar":
        out.update(mcnemar_exact(a, b))
    elif test == "wilcoxon":
        out.update(wilcoxon_signed_rank(a, b))
    elif test == "sign_flip":
        out["p_value"] = sign_flip_test(d, n_resamples=n_resamples, seed=seed)
    else:
        rng = np.random.default_rng(seed)
        means = d[rng.integers(0, d.size, size=(n_resamples, d.size))].mean(1)
        side = (means <= 0).mean() if d.mean() >= 0 else (means >= 0).mean()
        out["p_value"] = float(min(1.0, 2 * side))
    return out
