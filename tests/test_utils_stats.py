"""hfx.utils.stats against scipy / statsmodels and hand-computed values."""

import math

import numpy as np
import pytest
from scipy.stats import binomtest, wilcoxon

from hfx.utils.stats import (
    bootstrap_ci,
    mcnemar_exact,
    paired_difference,
    sign_flip_test,
    wilcoxon_signed_rank,
    wilson_interval,
)


def test_mcnemar_exact_matches_scipy_binomtest_and_hand_value():
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 2, 60), rng.integers(0, 2, 60)
    out = mcnemar_exact(a, b)
    n10, n01 = int(((a == 1) & (b == 0)).sum()), int(((a == 0) & (b == 1)).sum())
    assert (out["a_only"], out["b_only"]) == (n10, n01)
    assert out["p_value"] == pytest.approx(binomtest(n10, n10 + n01, 0.5).pvalue, abs=1e-12)
    # hand value: 5 discordant pairs all one way -> 2 / 2**5 = 0.0625 (the ThinkMerge K=8 case)
    assert mcnemar_exact([1] * 5 + [0] * 3, [0] * 5 + [0] * 3)["p_value"] == pytest.approx(0.0625)
    assert mcnemar_exact([1, 0], [1, 0])["p_value"] == 1.0
    with pytest.raises(ValueError, match="0/1"):
        mcnemar_exact([2, 0], [1, 0])
    with pytest.raises(ValueError, match="paired"):
        mcnemar_exact([1, 0, 1], [1, 0])


def test_mcnemar_matches_statsmodels_when_installed():
    sm = pytest.importorskip("statsmodels.stats.contingency_tables")
    a = np.array([1, 1, 1, 0, 0, 1, 0, 1, 1, 0, 1, 1])
    b = np.array([0, 1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0])
    table = [[((a == 1) & (b == 1)).sum(), ((a == 1) & (b == 0)).sum()],
             [((a == 0) & (b == 1)).sum(), ((a == 0) & (b == 0)).sum()]]
    assert mcnemar_exact(a, b)["p_value"] == pytest.approx(sm.mcnemar(table, exact=True).pvalue, abs=1e-12)


def test_wilcoxon_matches_scipy():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=40), rng.normal(0.3, size=40)
    out = wilcoxon_signed_rank(a, b)
    ref = wilcoxon(a - b)
    assert out["p_value"] == pytest.approx(ref.pvalue) and out["statistic"] == pytest.approx(ref.statistic)
    assert wilcoxon_signed_rank([1, 2], [1, 2])["p_value"] == 1.0


def test_bootstrap_interval_covers_mean_and_clusters_widen_it():
    rng = np.random.default_rng(2)
    v = rng.normal(1.0, 1.0, size=400)
    low, high = bootstrap_ci(v)
    se = v.std(ddof=1) / math.sqrt(v.size)
    assert low < v.mean() < high
    assert high - low == pytest.approx(2 * 1.96 * se, rel=0.1)
    # 40 clusters of 10 identical values: the clustered interval is ~sqrt(10) times wider
    cl = np.repeat(np.arange(40), 10)
    vc = np.repeat(rng.normal(1.0, 1.0, size=40), 10)
    plain, clustered = bootstrap_ci(vc), bootstrap_ci(vc, clusters=cl)
    assert (clustered[1] - clustered[0]) / (plain[1] - plain[0]) == pytest.approx(math.sqrt(10), rel=0.25)
    with pytest.raises(ValueError, match="empty"):
        bootstrap_ci([])
    with pytest.raises(ValueError, match="finite"):
        bootstrap_ci([1.0, float("nan")])
    with pytest.raises(ValueError, match="`clusters`"):
        bootstrap_ci([1.0, 2.0], clusters=[0])


def test_sign_flip_exact_enumeration_hand_value():
    # diffs (1, 1, 1): 2 of the 8 sign patterns reach |mean| >= 1 -> p = 0.25
    assert sign_flip_test([1.0, 1.0, 1.0]) == pytest.approx(0.25)
    assert sign_flip_test([0.0, 0.0]) == 1.0
    rng = np.random.default_rng(3)
    assert sign_flip_test(rng.normal(2, 1, 50)) < 0.01


def test_wilson_matches_statsmodels_formula():
    low, high = wilson_interval(7, 20)
    # hand: p = .35, z = 1.959964
    z = 1.959963984540054
    p = 0.35
    centre = (p + z * z / 40) / (1 + z * z / 20)
    half = z * math.sqrt(p * (1 - p) / 20 + z * z / 1600) / (1 + z * z / 20)
    assert (low, high) == pytest.approx((centre - half, centre + half))
    with pytest.raises(ValueError, match="`successes`"):
        wilson_interval(21, 20)


def test_paired_difference_reports_named_test():
    a, b = [1, 1, 1, 1, 0, 1], [0, 0, 1, 0, 0, 0]
    out = paired_difference(a, b, test="mcnemar")
    assert out["diff"] == pytest.approx(4 / 6) and out["test"] == "mcnemar"
    assert out["p_value"] == pytest.approx(0.125)
    assert out["ci_low"] <= out["diff"] <= out["ci_high"]
    with pytest.raises(ValueError, match="`test`"):
        paired_difference(a, b, test="t")
