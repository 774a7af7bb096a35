"""Tests for hfx.routing (BayesianRouter, arXiv 2510.02850): spec conformance cases 1-8 and the issue's list."""

import math

import pytest
import torch
import torch.nn.functional as F

from hfx.routing import (
    EMARewardNormalizer,
    LinUCBRouter,
    QuantileRewardNormalizer,
    RandomRouter,
    ThompsonRouter,
    advantage,
)


def unit(x):
    return F.normalize(torch.as_tensor(x, dtype=torch.float64), dim=-1)


# ------------------------------------------------------------------------------------------------ Thompson: closed form
def test_posterior_update_matches_hand_computed_closed_form():
    # d = 2, lambda0 = 1, sigma2 = 1, prior mean (1, 0); one pair h = (0.6, 0.8) with reward 1.
    # Lambda = I + h h^T = [[1.36, .48], [.48, 1.64]] (det 2), b = (1, 0) + h = (1.6, 0.8)
    # mu = Lambda^{-1} b = [[1.64, -.48], [-.48, 1.36]] / 2 @ (1.6, 0.8) = (1.12, 0.16)
    router = ThompsonRouter(torch.tensor([[3.0, 0.0], [0.0, 1.0]]), prior_precision=1.0, noise_variance=1.0)
    router.update(torch.tensor([[0.6, 0.8]]), torch.tensor([0]), torch.tensor([1.0]))
    assert torch.allclose(router.posterior_mean(0), torch.tensor([1.12, 0.16], dtype=torch.float64), atol=1e-12)
    assert torch.allclose(router.precision[0], torch.tensor([[1.36, 0.48], [0.48, 1.64]], dtype=torch.float64))
    expected_cov = torch.tensor([[1.64, -0.48], [-0.48, 1.36]], dtype=torch.float64) / 2
    assert torch.allclose(router.posterior_covariance(0), expected_cov, atol=1e-12)


def test_posterior_update_with_noise_variance_and_prior_precision():
    # lambda0 = 2, sigma2 = 0.5, mu0 = (1, 0); pairs e1 (r=1) and e2 (r=0.5):
    # Lambda = 2I + (e1e1^T + e2e2^T)/0.5 = 4I ; b = 2*(1,0) + (1*(1,0) + 0.5*(0,1))/0.5 = (4, 1) ; mu = (1, 0.25)
    router = ThompsonRouter(torch.tensor([[1.0, 0.0]]), prior_precision=2.0, noise_variance=0.5)
    router.update(torch.eye(2), torch.tensor([0, 0]), torch.tensor([1.0, 0.5]))
    assert torch.allclose(router.posterior_mean(0), torch.tensor([1.0, 0.25], dtype=torch.float64))
    assert torch.allclose(router.precision[0], 4 * torch.eye(2, dtype=torch.float64))
    assert router.counts.tolist() == [2]


def test_sequential_updates_equal_batch_formula_in_any_order():
    # conformance 3: per-pair updates in any order == batch formula (relative error < 1e-8 in float64)
    g = torch.Generator().manual_seed(0)
    d, R, P = 6, 3, 40
    prior = torch.randn(R, d, generator=g, dtype=torch.float64)
    h = unit(torch.randn(P, d, generator=g, dtype=torch.float64))
    arms = torch.randint(R, (P,), generator=g)
    r = torch.rand(P, generator=g, dtype=torch.float64)
    lam0, s2 = 1.5, 0.7
    seq = ThompsonRouter(prior, prior_precision=lam0, noise_variance=s2)
    for i in torch.randperm(P, generator=g).tolist():
        seq.update(h[i : i + 1], arms[i : i + 1], r[i : i + 1])
    batch = ThompsonRouter(prior, prior_precision=lam0, noise_variance=s2)
    batch.update(h, arms, r)
    mu0 = unit(prior)
    for n in range(R):
        sel = arms == n
        prec = lam0 * torch.eye(d, dtype=torch.float64) + h[sel].T @ h[sel] / s2
        mu = torch.linalg.solve(prec, lam0 * mu0[n] + (r[sel, None] * h[sel]).sum(0) / s2)
        for router in (seq, batch):
            assert ((router.precision[n] - prec).norm() / prec.norm()).item() < 1e-8
            assert ((router.posterior_mean(n) - mu).norm() / mu.norm()).item() < 1e-8


def test_only_the_routed_arm_learns_bitwise():
    # conformance 4
    router = ThompsonRouter(torch.randn(4, 5), prior_precision=3.0)
    h = unit(torch.randn(1, 5))
    router.select(h)  # fills the factor caches
    before = {k: v.clone() for k, v in router.state_dict().items()}
    factors_before = list(router._factors)
    router.update(h, torch.tensor([2]), torch.tensor([0.9]))
    after = router.state_dict()
    for m in (0, 1, 3):
        assert torch.equal(after["precision"][m], before["precision"][m])
        assert torch.equal(after["b"][m], before["b"][m])
        assert torch.equal(after["mean"][m], before["mean"][m])
        assert router._factors[m] is factors_before[m]  # cache kept
    assert not torch.equal(after["precision"][2], before["precision"][2])
    assert router._factors[2] is None  # cache invalidated for the updated arm only


def test_prior_injection_and_ablation_switch():
    # conformance 2
    e_bt = torch.tensor([[3.0, 4.0, 0.0], [0.0, 0.0, -2.0]])
    router = ThompsonRouter(e_bt, prior_precision=7.0)
    assert torch.allclose(router.posterior_mean(0), torch.tensor([0.6, 0.8, 0.0], dtype=torch.float64))
    assert torch.allclose(router.posterior_mean(1), torch.tensor([0.0, 0.0, -1.0], dtype=torch.float64))
    assert torch.equal(router.precision, 7.0 * torch.eye(3, dtype=torch.float64).expand(2, 3, 3))
    assert torch.allclose(router.b, 7.0 * router.mean)
    off = ThompsonRouter(e_bt, prior_precision=7.0, use_prior=False)
    assert torch.equal(off.mean, torch.zeros(2, 3, dtype=torch.float64))


def test_without_data_the_router_samples_from_the_prior():
    lam0 = 4.0
    prior = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    router = ThompsonRouter(prior, prior_precision=lam0)
    w = router.sample_weights(40000, generator=torch.Generator().manual_seed(1))  # (N, R, d)
    assert torch.allclose(w.mean(0), unit(prior), atol=0.01)
    for n in range(2):
        cov = torch.cov(w[:, n].T)
        assert torch.allclose(cov, torch.eye(3, dtype=torch.float64) / lam0, atol=0.01)
    # selection frequency: h.w_n ~ N(h.mu_n, 1/lam0) independently -> P(arm 0) = Phi(h.(mu0 - mu1) / sqrt(2/lam0))
    h = unit([[0.8, 0.6, 0.0]])
    arms = router.select(h.expand(40000, -1), generator=torch.Generator().manual_seed(2))
    p0 = 0.5 * (1 + math.erf((0.8 - 0.6) / math.sqrt(2 / lam0) / math.sqrt(2)))
    assert abs((arms == 0).double().mean().item() - p0) < 0.01


def test_concentrated_prior_routes_greedily():
    # conformance 6: lambda0 = 1e8, no updates -> argmax_n <h, E_bt[n]/||E_bt[n]||> for every pair
    g = torch.Generator().manual_seed(3)
    e_bt = torch.randn(5, 16, generator=g) * torch.tensor([1.0, 5.0, 0.2, 2.0, 1.0])[:, None]
    h = unit(torch.randn(300, 16, generator=g))
    router = ThompsonRouter(e_bt, prior_precision=1e8)
    expected = (h @ unit(e_bt).T).argmax(-1)
    assert torch.equal(router.select(h, generator=g), expected)
    assert torch.equal(router.select(h, generator=g), expected)  # deterministic


def test_prior_favouring_one_rm_is_chosen_on_its_region():
    # RM 0 is strong on region A (around e0), RM 1 on region B (around e1): the prior says so; lambda0 = 50.
    g = torch.Generator().manual_seed(4)
    d = 8
    prior = torch.zeros(2, d)
    prior[0, 0], prior[1, 1] = 1.0, 1.0
    router = ThompsonRouter(prior, prior_precision=50.0)
    region_a = unit(torch.eye(d)[0] + 0.1 * torch.randn(500, d, generator=g))
    region_b = unit(torch.eye(d)[1] + 0.1 * torch.randn(500, d, generator=g))
    assert (router.select(region_a, generator=g) == 0).double().mean() > 0.95
    assert (router.select(region_b, generator=g) == 1).double().mean() > 0.95
    # without the prior the choice is a coin flip
    flat = ThompsonRouter(prior, prior_precision=50.0, use_prior=False)
    assert 0.4 < (flat.select(region_a, generator=g) == 0).double().mean() < 0.6


def _bandit_contexts(g, n, d, n_regions):
    regions = torch.randint(n_regions, (n,), generator=g)
    h = unit(F.one_hot(regions, d).double() + 0.15 * torch.randn(n, d, generator=g, dtype=torch.float64))
    return h, regions


@pytest.mark.parametrize("name", ["thompson", "linucb"])
def test_bandits_learn_the_best_arm_per_region(name):
    # synthetic contextual bandit: RM n's accuracy on region k is ACC[n, k]; best arm per region is (2, 0, 1)
    acc = torch.tensor([[0.55, 0.90, 0.60], [0.60, 0.55, 0.92], [0.93, 0.60, 0.55]], dtype=torch.float64)
    g = torch.Generator().manual_seed(5)
    d = 4
    if name == "thompson":
        router = ThompsonRouter(torch.zeros(3, d), use_prior=False, prior_precision=1.0, noise_variance=0.25)
    else:
        router = LinUCBRouter(3, d, alpha=0.5, granularity="pair")
    late_hits = []
    for step in range(60):
        h, regions = _bandit_contexts(g, 16, d, 3)
        arms = router.select(h, generator=g)
        rewards = torch.bernoulli(acc[arms, regions], generator=g)
        router.update(h, arms, rewards)
        if step >= 40:
            late_hits.append((arms == acc.argmax(0)[regions]).double())
    assert torch.cat(late_hits).mean() > 0.8
    h, regions = _bandit_contexts(g, 300, d, 3)
    scores = router.expected_scores(h) if name == "thompson" else h @ router.theta.T
    assert (scores.argmax(-1) == acc.argmax(0)[regions]).double().mean() > 0.9


def test_linucb_closed_form_and_batch_granularity():
    router = LinUCBRouter(2, 2, alpha=2.0, ridge=1.0)
    h = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    # first choice: all theta = 0, bonus = alpha * sqrt(c^T c) equal for both arms -> lowest index, same for the batch
    assert router.select(h).tolist() == [0, 0]
    # batch update of arm 0 with mean context c = (0.5, 0.5), mean reward 1: A = I + c c^T, b = c
    router.update(h, torch.tensor([0, 0]), torch.tensor([1.0, 1.0]))
    c = torch.tensor([0.5, 0.5], dtype=torch.float64)
    a = torch.eye(2, dtype=torch.float64) + torch.outer(c, c)
    assert torch.allclose(router.A[0], a) and torch.allclose(router.theta[0], torch.linalg.solve(a, c))
    # UCB of arm 0 at c: c.theta + 2 sqrt(c A^-1 c) = 1/3 + 2 sqrt(1/3); arm 1: 0 + 2 sqrt(0.5)
    ucb = router.ucb_scores(c[None])[0]
    assert torch.allclose(ucb, torch.tensor([1 / 3 + 2 * math.sqrt(1 / 3), 2 * math.sqrt(0.5)], dtype=torch.float64))
    assert router.select(h).tolist() == [0, 0]


def test_cholesky_failure_falls_back_to_eigendecomposition():
    router = ThompsonRouter(torch.eye(2, 3), jitter=0.0)
    router.precision[1] = torch.diag(torch.tensor([1.0, 0.0, -1e-9], dtype=torch.float64))  # not PD
    w = router.sample_weights(2000, generator=torch.Generator().manual_seed(0))
    assert torch.isfinite(w).all()
    # eigenvalues clamped at 1e-10 * max -> the variance along e1 is 1 (the only non-degenerate direction)
    assert abs(w[:, 1, 0].var().item() - 1.0) < 0.1


@pytest.mark.parametrize("kind", ["thompson", "linucb", "random"])
def test_save_load_restores_selections_under_seed(tmp_path, kind):
    from hfx.routing import BaseRouter

    g = torch.Generator().manual_seed(0)
    h = unit(torch.randn(20, 6, generator=g))
    if kind == "thompson":
        router = ThompsonRouter(torch.randn(3, 6, generator=g), prior_precision=2.0, arm_names=["a", "b", "c"])
    elif kind == "linucb":
        router = LinUCBRouter(3, 6, granularity="pair", arm_names=["a", "b", "c"])
    else:
        router = RandomRouter(3, 6, arm_names=["a", "b", "c"])
    arms = router.select(h, generator=g)
    router.update(h, arms, torch.rand(20, generator=g))
    router.save(tmp_path / "router")
    loaded = BaseRouter.load(tmp_path / "router")
    assert type(loaded) is type(router) and loaded.arm_names == ["a", "b", "c"]
    for k, v in router.state_dict().items():
        assert torch.equal(loaded.state_dict()[k], v), k
    h2 = unit(torch.randn(50, 6, generator=g))
    a1 = router.select(h2, generator=torch.Generator().manual_seed(9))
    a2 = loaded.select(h2, generator=torch.Generator().manual_seed(9))
    assert torch.equal(a1, a2)
    with pytest.raises(ValueError, match="not a"):
        (LinUCBRouter if kind != "linucb" else ThompsonRouter).load(tmp_path / "router")


def test_quantile_normalizer():
    # conformance 7
    norm = QuantileRewardNormalizer()
    for i in range(19):
        assert norm(torch.tensor([float(i)])).item() == 0.5  # fewer than 20 seen
    out = norm(torch.tensor([19.0]))  # history 0..19: q20 = 3.8, q80 = 15.2
    assert out.item() == pytest.approx(1.0)
    assert norm.transform(torch.tensor([3.8 + 0.5 * 11.4])).item() == pytest.approx(0.5)
    raw = torch.linspace(-50, 70, 500, dtype=torch.float64)
    vals = norm.transform(raw)
    assert vals.min() >= 0 and vals.max() <= 1 and (vals.diff() >= 0).all()
    const = QuantileRewardNormalizer(min_history=3)
    const(torch.zeros(3))
    assert const.transform(torch.tensor([-1.0, 0.0, 1.0])).tolist() == [0.0, 0.0, 1.0]  # q_hi <= q_lo -> 1[r > q_lo]
    assert torch.allclose(
        advantage(torch.tensor([1.0, 2.0, 3.0])), torch.tensor([1.0, 0.0, -1.0], dtype=torch.float64)
    )


def test_ema_normalizer_warmup_and_value():
    norm = EMARewardNormalizer(num_arms=2, alpha=0.5, min_count=2)
    assert torch.isnan(norm(torch.tensor([1.0]), [0])).all()  # first observation initialises
    assert torch.isnan(norm(torch.tensor([3.0]), [0])).all()  # count 1 < 2: baseline only (mean 2, var 1)
    # now r = clip((2 - 0) / sqrt(1 + 1e-6), -2, 2) ~= 2
    assert norm(torch.tensor([0.0]), [0]).item() == pytest.approx(2.0 / math.sqrt(1 + 1e-6))


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="must not be empty"):
        ThompsonRouter(torch.zeros(0, 4))
    with pytest.raises(ValueError, match="must not be empty"):
        LinUCBRouter(0, 4)
    with pytest.raises(ValueError, match="must not be empty"):
        RandomRouter(0)
    router = ThompsonRouter(torch.randn(2, 4), arm_names=["math", "chat"])
    with pytest.raises(ValueError, match="embedding dim 5"):
        router.select(torch.randn(3, 5))
    with pytest.raises(ValueError, match="embedding dim 5"):
        LinUCBRouter(2, 4).update(torch.randn(3, 5), [0, 0, 1], [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="positive definite"):
        ThompsonRouter(torch.randn(2, 3), prior_covariance=torch.diag(torch.tensor([1.0, -1.0, 1.0])))
    with pytest.raises(ValueError, match="symmetric"):
        ThompsonRouter(torch.randn(2, 3), prior_covariance=torch.tensor([[1.0, 0.5, 0], [0, 1, 0], [0, 0, 1]]))
    with pytest.raises(ValueError, match="Unknown reward model name 'code'"):
        router.posterior_mean("code")
    with pytest.raises(ValueError, match="`arms` must lie"):
        router.update(unit(torch.randn(2, 4)), torch.tensor([0, 2]), torch.ones(2))
    with pytest.raises(ValueError, match="same number of pairs"):
        router.update(unit(torch.randn(2, 4)), torch.tensor([0]), torch.ones(2))
    with pytest.raises(ValueError, match="`prior_precision`"):
        ThompsonRouter(torch.randn(2, 4), prior_precision=0.0)
    with pytest.raises(ValueError, match="`granularity`"):
        LinUCBRouter(2, 4, granularity="query")


def test_prior_covariance_is_used():
    cov = torch.diag(torch.tensor([0.5, 2.0], dtype=torch.float64))
    router = ThompsonRouter(torch.eye(2), prior_covariance=cov)
    assert torch.allclose(router.posterior_covariance(0), cov)
    assert torch.allclose(router.b[1], torch.linalg.solve(cov, torch.tensor([0.0, 1.0], dtype=torch.float64)))
