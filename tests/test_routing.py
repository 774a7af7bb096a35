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


@pytest.mark.parametrize("sample_dtype", [None, torch.float32])
def test_concentrated_prior_routes_greedily(sample_dtype):
    # conformance 6: lambda0 = 1e8, no updates -> argmax_n <h, E_bt[n]/||E_bt[n]||> for every pair
    g = torch.Generator().manual_seed(3)
    e_bt = torch.randn(5, 16, generator=g) * torch.tensor([1.0, 5.0, 0.2, 2.0, 1.0])[:, None]
    h = unit(torch.randn(300, 16, generator=g))
    router = ThompsonRouter(e_bt, prior_precision=1e8, sample_dtype=sample_dtype)
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


# ------------------------------------------------------------------------------------------------ offline router
RM_NAMES = ["long", "short"]


def long_rm(prompts, completions, **kwargs):
    return [float(len(c)) for c in completions]


def short_rm(prompts, completions, **kwargs):
    return [-float(len(c)) for c in completions]


@pytest.fixture(scope="module")
def offline_router():
    from hfx.routing import OfflineRouter
    from hfx.testing import tiny_llama

    encoder, tok = tiny_llama(seed=2)
    return OfflineRouter.from_encoder(encoder, tok, RM_NAMES, max_length=64)


def test_pair_context_is_symmetric_and_unit_norm(offline_router):
    # conformance 1
    prompts = ["what is two plus two ?", [{"role": "user", "content": "hello"}], "describe the cat"]
    a = ["the answer is four", "hi, how are you today?", "a photo of a cat on a mat"]
    b = ["four", "hello world", "The quick brown fox"]
    h_ab = offline_router.embed_pairs(prompts, a, b)
    h_ba = offline_router.embed_pairs(prompts, b, a)
    assert h_ab.shape == (3, offline_router.hidden_size)
    assert torch.allclose(h_ab, h_ba, atol=1e-6)
    assert torch.allclose(h_ab.norm(dim=-1), torch.ones(3), atol=1e-5)
    assert not torch.allclose(h_ab[0], h_ab[2])


def test_encoder_text_format_and_last_token_embedding(offline_router):
    from hfx.routing import format_pair_text

    assert format_pair_text("hi", "yo") == "<|user|>: hi\n<|assistant|>: yo"
    chat = [{"role": "system", "content": "be nice"}, {"role": "user", "content": "hi"}]
    assert format_pair_text(chat, "yo") == "<|system|>: be nice\n<|user|>: hi\n<|assistant|>: yo"
    enc = offline_router.tokenize(["hi", "a much longer prompt here"], ["yo", "yo"])
    assert (enc["attention_mask"][:, 0] == 1).all()  # right padding
    emb = offline_router.encode(enc["input_ids"], enc["attention_mask"])
    single = offline_router.tokenize(["hi"], ["yo"])
    alone = offline_router.encode(single["input_ids"], single["attention_mask"])
    assert torch.allclose(emb[0], alone[0], atol=1e-5)  # padding does not change the last-token state


def test_bt_loss_values():
    # conformance 8
    from hfx.routing import bt_loss

    equal = torch.tensor([[0.3, 0.3]])
    assert bt_loss(equal, torch.tensor([[1, 0]])).item() == pytest.approx(math.log(2))
    s = torch.tensor([[1.0, -0.5, 0.2], [0.1, 0.2, 0.3], [0.5, 0.4, 0.0]])
    delta = torch.tensor([[1, 0, 0], [1, 1, 1], [0, 0, 0]])  # only sample 0 has triples (0,1), (0,2)
    expected = (math.log1p(math.exp(-1.5)) + math.log1p(math.exp(-0.8))) / 2
    assert bt_loss(s, delta).item() == pytest.approx(expected, rel=1e-6)
    assert bt_loss(s[1:], delta[1:]).item() == 0.0  # all agree / all disagree -> no triple
    two = bt_loss(s[:1].expand(2, -1), torch.tensor([[1, 0, 0], [0, 1, 0]]))
    second = (math.log1p(math.exp(1.5)) + math.log1p(math.exp(-(-0.5 - 0.2)))) / 2
    assert two.item() == pytest.approx((expected + second) / 2, rel=1e-6)


def test_forward_loss_is_weighted_bt_plus_cls(offline_router):
    import copy

    from hfx.routing import bt_loss

    router = copy.deepcopy(offline_router)
    router.lambda_bt, router.lambda_cls = 0.7, 0.3
    enc_a = router.tokenize(["p1", "p2"], ["one two", "three"])
    enc_b = router.tokenize(["p1", "p2"], ["four", "five six"])
    agreement = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    out = router(enc_a["input_ids"], enc_a["attention_mask"], enc_b["input_ids"], enc_b["attention_mask"], agreement)
    expected = 0.7 * bt_loss(out.bt_scores, agreement) + 0.3 * F.binary_cross_entropy_with_logits(
        out.cls_logits, agreement
    )
    assert torch.allclose(out.loss, expected)
    assert torch.allclose(out.bt_scores, out.pair_embeddings @ router.prior_means().T, atol=1e-6)
    with pytest.raises(ValueError, match="`agreement` must have shape"):
        router(
            enc_a["input_ids"], enc_a["attention_mask"], enc_b["input_ids"], enc_b["attention_mask"], agreement[:, :1]
        )


def _toy_pairs(n):
    # letters: the longer response is preferred (RM "long" agrees); digits: the shorter one is preferred ("short")
    rows = {"prompt": [], "response_a": [], "response_b": [], "label": []}
    for i in range(n):
        if i % 2 == 0:
            rows["prompt"].append("describe the image")
            rows["response_a"].append("a photo of a cat on a mat" if i % 4 == 0 else "a cat")
            rows["response_b"].append("a cat" if i % 4 == 0 else "a photo of a cat on a mat")
            rows["label"].append(0 if i % 4 == 0 else 1)
        else:
            rows["prompt"].append("0 1 2 3 + 4 =")
            rows["response_a"].append("7" if i % 4 == 1 else "7 8 9 10 11 12")
            rows["response_b"].append("7 8 9 10 11 12" if i % 4 == 1 else "7")
            rows["label"].append(0 if i % 4 == 1 else 1)
    return rows


def test_label_with_reward_models_one_call_per_pair_and_agreement():
    from datasets import Dataset

    from hfx.routing import PairScorer, as_pair_scorer, label_with_reward_models
    from hfx.testing import tiny_reward_model

    rows = _toy_pairs(8)
    scorers = {"long": as_pair_scorer(long_rm), "short": as_pair_scorer(short_rm)}
    labelled = label_with_reward_models(Dataset.from_dict(rows), scorers, batch_size=3, show_progress=False)
    assert {s.num_pair_calls for s in scorers.values()} == {8}  # each RM scores each pair exactly once
    assert list(labelled["agree_long"]) == [1, 0] * 4 and list(labelled["agree_short"]) == [0, 1] * 4
    assert labelled["score_a_long"][0] == float(len(rows["response_a"][0]))
    # an HF sequence-classification RM as a (model, tokenizer) tuple
    rm, tok = tiny_reward_model()
    out = label_with_reward_models(rows, {"tiny": (rm, tok)}, show_progress=False)
    enc = tok(
        rows["prompt"][0]
        and tok.apply_chat_template(
            [{"role": "user", "content": rows["prompt"][0]}, {"role": "assistant", "content": rows["response_a"][0]}],
            tokenize=False,
        ),
        return_tensors="pt",
        add_special_tokens=False,
    )
    with torch.no_grad():
        assert out["score_a_tiny"][0] == pytest.approx(rm(**enc).logits[0, 0].item(), abs=1e-4)
    assert isinstance(as_pair_scorer(scorers["long"]), PairScorer)
    with pytest.raises(ValueError, match="must not be empty"):
        label_with_reward_models(rows, {})
    with pytest.raises(ValueError, match="missing column"):
        label_with_reward_models({"prompt": ["x"]}, scorers)
    with pytest.raises(TypeError, match="tuple"):
        as_pair_scorer(rm)


def test_offline_trainer_learns_to_route_by_region(tmp_path):
    from datasets import Dataset
    from transformers import TrainingArguments

    from hfx.routing import OfflineRouter, OfflineRouterTrainer, label_with_reward_models, router_accuracy
    from hfx.testing import tiny_llama

    encoder, tok = tiny_llama(seed=3)
    router = OfflineRouter.from_encoder(encoder, tok, RM_NAMES, max_length=32)
    ds = label_with_reward_models(
        Dataset.from_dict(_toy_pairs(16)), {"long": long_rm, "short": short_rm}, show_progress=False
    )
    args = TrainingArguments(
        output_dir=str(tmp_path),
        learning_rate=5e-3,
        per_device_train_batch_size=8,
        num_train_epochs=6,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
    )
    trainer = OfflineRouterTrainer(router, args=args, train_dataset=ds, eval_dataset=ds)
    before = trainer.evaluate()
    trainer.train()
    after = trainer.evaluate()
    assert after["eval_loss"] < before["eval_loss"]
    assert after["eval_router_accuracy"] == 1.0 and after["eval_best_single_rm_accuracy"] == 0.5
    assert router_accuracy(router, ds) == 1.0
    trainer.save_model(str(tmp_path / "ckpt"))
    loaded = OfflineRouter.from_pretrained(str(tmp_path / "ckpt"))
    assert router_accuracy(loaded, ds) == 1.0
    with pytest.raises(ValueError, match=r"missing column\(s\) \['agree_short'\]"):
        OfflineRouterTrainer(router, args=args, train_dataset=ds.remove_columns("agree_short"))


def test_save_load_round_trip_and_hub_pull_offline(offline_router, tmp_path):
    from hfx.hub import add_to_hf_cache
    from hfx.routing import OfflineRouter

    offline_router.save_pretrained(tmp_path / "router")
    cache = tmp_path / "cache"
    add_to_hf_cache(tmp_path / "router", "org/router", cache_dir=cache)
    for source in (str(tmp_path / "router"), "org/router"):
        loaded = OfflineRouter.from_pretrained(source, cache_dir=cache)
        assert loaded.rm_names == RM_NAMES and loaded.max_length == 64
        sd, ref = loaded.state_dict(), offline_router.state_dict()
        assert sd.keys() == ref.keys() and all(torch.equal(sd[k], ref[k]) for k in sd)
        args = (["p"], ["one two"], ["three"])
        assert torch.equal(loaded.embed_pairs(*args), offline_router.embed_pairs(*args))
    # prior injection from the pulled router (conformance 2, end to end)
    online = ThompsonRouter.from_offline_router(loaded, prior_precision=3.0)
    assert online.arm_names == RM_NAMES
    assert torch.allclose(online.mean, F.normalize(offline_router.bt_embeddings.detach().double(), dim=-1))
    with pytest.raises(Exception, match="(?i)cannot find|not found|offline|local"):
        OfflineRouter.from_pretrained("org/missing", cache_dir=cache)


def test_publish_writes_a_hub_ready_folder(tmp_path):
    from huggingface_hub import ModelCard

    from hfx.hub import publish
    from hfx.routing import OfflineRouter

    out = publish("bayesian-router", tmp_path / "pub")
    card = ModelCard.load(out / "README.md")
    assert "arxiv:2510.02850" in card.data.tags and card.data.library_name == "hfx"
    assert "Untrained demo" in card.text and "{{" not in card.text
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in out.iterdir()}
    assert OfflineRouter.from_pretrained(str(out)).num_rms == 4


# ------------------------------------------------------------------------------------------------ TRL adapter
class CountingRM:
    """A reward function that records which prompts it scored (to count RM calls per pair)."""

    def __init__(self, sign):
        self.sign, self.seen = sign, []

    def __call__(self, prompts, completions, **kwargs):
        self.seen += prompts[: len(prompts) // 2]
        return [self.sign * float(len(c)) for c in completions]


def _routed(offline_router, seed=0, router=None, **kwargs):
    from hfx.routing import RoutedRewardModel

    rms = {"long": CountingRM(1.0), "short": CountingRM(-1.0)}
    router = router or ThompsonRouter.from_offline_router(offline_router)
    return RoutedRewardModel(router, rms, encoder=offline_router, seed=seed, **kwargs), rms


def test_exactly_one_rm_call_per_pair(offline_router):
    # conformance 5: P pairs -> P calls in total, each by the routed RM; the ensemble / majority baseline makes K*P
    from hfx.routing import label_with_reward_models

    routed, rms = _routed(offline_router)
    rows = _toy_pairs(12)
    prompts = [f"{p} #{i}" for i, p in enumerate(rows["prompt"])]
    verdicts = routed.judge(prompts, [[a, b] for a, b in zip(rows["response_a"], rows["response_b"])])
    arms = [p["arm"] for p in routed.pending]
    assert sum(routed.num_rm_calls.values()) == 12
    for arm, name in enumerate(RM_NAMES):
        assert sorted(rms[name].seen) == sorted(p for p, a in zip(prompts, arms) if a == arm)
    for v, a, ra, rb in zip(verdicts, arms, rows["response_a"], rows["response_b"]):
        score_a, score_b = (len(ra), len(rb)) if a == 0 else (-len(ra), -len(rb))  # "long" / "short" RM
        assert v == (0 if score_a >= score_b else 1)
    scorers = {n: CountingRM(1.0) for n in RM_NAMES}
    label_with_reward_models(dict(rows, label=rows["label"]), scorers, show_progress=False)
    assert sum(len(s.seen) for s in scorers.values()) == len(RM_NAMES) * 12


def test_grpo_reward_function_pairs_completions_within_groups(offline_router):
    # the rule before issue 11, kept as `pairing="consecutive"`
    routed, _ = _routed(offline_router, pairing="consecutive")
    prompts = ["p"] * 3 + ["q"] * 2
    completions = ["aaaa", "a", "aa", "bb", "bbbbb"]
    rewards = routed(prompts=prompts, completions=completions)
    # pairs: (0,1), (2,0) [odd group: last with first], (3,4) -> 3 RM calls
    assert sum(routed.num_rm_calls.values()) == 3 and len(routed.pending) == 3
    pairs = [(0, 1), (2, 0), (3, 4)]
    for (i, j), pending in zip(pairs, routed.pending):
        longer_wins = pending["arm"] == 0  # RM "long" prefers the longer completion, RM "short" the shorter
        winner = max((i, j), key=lambda k: len(completions[k]) * (1 if longer_wins else -1))
        assert pending["chosen"] == completions[winner]
        if (i, j) != (2, 0):
            assert rewards[winner] == 1.0 and rewards[i + j - winner] == 0.0
    assert rewards[2] == float(routed.pending[1]["chosen"] == "aa")  # completion 2 is rewarded by its own pair


def test_feedback_updates_only_routed_arms_with_normalised_rewards(offline_router):
    routed, _ = _routed(
        offline_router, router=ThompsonRouter.from_offline_router(offline_router), pairing="consecutive"
    )
    routed.normalizer.min_history = 1
    routed(prompts=["p"] * 4, completions=["a", "bb", "ccc", "dddd"])
    arms = torch.tensor([p["arm"] for p in routed.pending])
    before = routed.router.state_dict()
    with pytest.raises(ValueError, match="one per pending pair"):
        routed.feedback(torch.tensor([0.1]))
    rewards = routed.feedback(torch.tensor([0.2, 0.9]))
    assert routed.pending == [] and ((rewards >= 0) & (rewards <= 1)).all()
    assert rewards[0] > rewards[1]  # lower DPO loss -> higher router reward
    after = routed.router.state_dict()
    for n in range(2):
        assert torch.equal(after["precision"][n], before["precision"][n]) == (n not in arms.tolist())


def test_dpo_pair_losses_closed_form():
    from hfx.routing import dpo_pair_losses
    from hfx.testing import tiny_llama

    model, tok = tiny_llama(seed=4)
    prompts, chosen, rejected = ["hello world"] * 2, ["how are you", "the answer is four"], ["fine", "hmm"]
    same = dpo_pair_losses(model, tok, prompts, chosen, rejected, ref_model=model)
    assert torch.allclose(same, torch.full((2,), math.log(2), dtype=same.dtype))  # reference == policy -> ln 2
    m_loss = dpo_pair_losses(model, tok, prompts, chosen, rejected)
    swapped = dpo_pair_losses(model, tok, prompts, rejected, chosen)
    # softplus(-m) - softplus(m) = -m, with m = logp(chosen) - logp(rejected) computed by hand below
    with torch.no_grad():

        def logp(p, c):
            ids_p = tok(p, add_special_tokens=False)["input_ids"]
            ids = torch.tensor([ids_p + tok(c, add_special_tokens=False)["input_ids"]])
            lp = model(ids).logits[0, :-1].log_softmax(-1).gather(1, ids[0, 1:, None])[:, 0]
            return lp[len(ids_p) - 1 :].sum()

        m = torch.stack([logp(p, c) - logp(p, r) for p, c, r in zip(prompts, chosen, rejected)])
    assert torch.allclose(m_loss - swapped, -m, atol=1e-4)


def test_routed_reward_model_bad_inputs(offline_router):
    from hfx.routing import RoutedRewardModel

    router = ThompsonRouter.from_offline_router(offline_router)
    with pytest.raises(ValueError, match="must not be empty"):
        RoutedRewardModel(router, {}, encoder=offline_router)
    with pytest.raises(ValueError, match=r"Unknown reward model name\(s\) \['code'\]"):
        RoutedRewardModel(router, {"long": long_rm, "code": short_rm}, encoder=offline_router)
    with pytest.raises(ValueError, match="lacks the router arm"):
        RoutedRewardModel(router, {"long": long_rm}, encoder=offline_router)
    with pytest.raises(ValueError, match="holds 3 RMs"):
        RoutedRewardModel(router, [long_rm] * 3, encoder=offline_router)
    with pytest.raises(ValueError, match="`reward_mode`"):
        RoutedRewardModel(router, [long_rm, short_rm], encoder=offline_router, reward_mode="sum")
    wrong_dim = ThompsonRouter(torch.randn(2, 7), arm_names=RM_NAMES)
    routed = RoutedRewardModel(wrong_dim, [long_rm, short_rm], encoder=offline_router)
    with pytest.raises(ValueError, match="embedding dim 32"):
        routed(prompts=["p", "p"], completions=["a", "b"])


class VerifierRM:
    """A verifier-style TRL reward function that needs the dataset column ``answer`` (issue 11, item 8)."""

    def __init__(self, sign, answers):
        self.sign, self.answers, self.seen = sign, answers, []

    def __call__(self, prompts, completions, answer, completion_ids, trainer_state, **kwargs):
        assert [self.answers[p] for p in prompts] == list(answer)  # columns sliced to the rows this RM scores
        assert len(completion_ids) == len(completions) and trainer_state is not None
        self.seen += prompts[: len(prompts) // 2]
        return [self.sign * float(len(c)) + 10.0 * (a in c) for c, a in zip(completions, answer)]


def test_tiny_grpo_step_routes_one_rm_per_pair_and_updates_the_router(offline_router, tmp_path):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from hfx.routing import RoutedRewardModel, RouterUpdateCallback
    from hfx.testing import tiny_llama

    policy, tok = tiny_llama(seed=1)
    answers = {"hello world": "hi", "two plus two ?": "4"}
    rms = {"long": VerifierRM(1.0, answers), "short": VerifierRM(-1.0, answers)}
    routed = RoutedRewardModel(ThompsonRouter.from_offline_router(offline_router), rms, offline_router, seed=0)
    callback = RouterUpdateCallback(routed)
    args = GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=4,
        learning_rate=1e-3,
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
    )
    ds = Dataset.from_dict({"prompt": list(answers) * 2, "answer": list(answers.values()) * 2})
    trainer = GRPOTrainer(
        model=policy, reward_funcs=routed, args=args, train_dataset=ds, processing_class=tok, callbacks=[callback]
    )
    trainer.train()
    # 1 prompt x 4 generations -> all 6 i<j pairs routed, exactly one RM call each (default pairing, the authors')
    assert sum(routed.num_rm_calls.values()) == 6 and routed.last_metrics["pairs"] == 6
    recorded = min(4, 6 - routed.last_metrics["tie_pairs"] - routed.last_metrics["unscored_pairs"])
    assert routed.last_metrics["recorded_pairs"] == recorded
    # the callback fed the recorded (non-tied, <= pairs_per_query) pairs back
    assert callback.num_updates == (1 if recorded else 0) and routed.pending == []
    assert int(routed.router.counts.sum()) == recorded
    assert callback.ref_model is not policy and "forward" not in callback.ref_model.__dict__
    logged = trainer.state.log_history[-1]
    assert logged["routed_reward/pairs"] == 6 and "routed_reward/tie_pairs" in logged


def test_cached_frozen_encoder_embeddings_match(offline_router):
    from hfx.routing import OfflineRouter

    cached = OfflineRouter.from_encoder(
        offline_router.encoder, offline_router.tokenizer, RM_NAMES, freeze_encoder=True, cache_embeddings=True
    )
    cached.load_state_dict(offline_router.state_dict())
    args = (["p", "q"], ["one two", "three"], ["four", "five six seven"])
    first = cached.embed_pairs(*args)
    assert len(cached._embedding_cache) == 4
    assert torch.allclose(first, offline_router.embed_pairs(*args), atol=1e-6)
    assert torch.equal(cached.embed_pairs(*args), first)
    with pytest.raises(ValueError, match="requires `freeze_encoder=True`"):
        OfflineRouter.from_encoder(offline_router.encoder, offline_router.tokenizer, RM_NAMES, cache_embeddings=True)


def test_balance_bt_triples_evens_out_wins_and_losses():
    from hfx.routing import balance_bt_triples, bt_loss

    # RM 0 always right, RM 1 always wrong on 6 samples -> 6 triples (0 beats 1): RM 0 has 6 wins / 0 losses
    agreement = torch.tensor([[1, 0, 1]] * 6 + [[0, 1, 1]] * 2 + [[1, 1, 1]])
    mask = balance_bt_triples(agreement, seed=0)
    default = (agreement[:, :, None] * (1 - agreement[:, None, :])).float()
    assert ((mask == 0) | (default == 1)).all()  # only deletes triples
    wins, losses = mask.sum((0, 2)), mask.sum((0, 1))
    before = (default.sum((0, 2)) - default.sum((0, 1))).abs().sum()
    assert (wins - losses).abs().sum() < before
    # a sample whose triples were all deleted drops out of the loss average
    s = torch.zeros(9, 3)
    assert bt_loss(s, agreement, mask).item() == pytest.approx(math.log(2))


def test_online_dpo_layout_pairs_halves(offline_router):
    routed, _ = _routed(offline_router)
    prompts = ["p", "q", "r"] * 2  # OnlineDPOTrainer: prompts = 2 * prompts, completion i pairs with i + 3
    completions = ["aaaa", "b", "cc", "a", "bbbb", "c"]
    rewards = routed(prompts=prompts, completions=completions)
    assert sum(routed.num_rm_calls.values()) == 3
    assert [(p["prompt"], sorted([p["chosen"], p["rejected"]])) for p in routed.pending] == [
        ("p", ["a", "aaaa"]),
        ("q", ["b", "bbbb"]),
        ("r", ["c", "cc"]),
    ]
    assert all(rewards[i] + rewards[i + 3] == 1.0 for i in range(3))
    with pytest.raises(ValueError, match="two identical halves"):
        from hfx.routing import RoutedRewardModel

        RoutedRewardModel(routed.router, routed.scorers, encoder=offline_router, pairing="halves")(
            prompts=["p", "q"], completions=["a", "b"]
        )


def test_single_pair_draw_uses_the_same_factor_as_the_batched_path():
    router = ThompsonRouter(torch.randn(3, 6), prior_precision=2.0)
    router.update(unit(torch.randn(4, 6)), torch.tensor([0, 1, 2, 0]), torch.rand(4))
    w = router.sample_weights(1, generator=torch.Generator().manual_seed(7))[0]  # (R, d)
    z = torch.randn(3, 6, 1, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    cov_roots = torch.stack([torch.linalg.cholesky(router.precision[n]).inverse().T for n in range(3)])  # L^{-T}
    assert torch.allclose(w, router.mean + torch.bmm(cov_roots, z)[..., 0], atol=1e-8)


def test_trainer_accepts_label_with_reward_models_dict_output(tmp_path):
    """`label_with_reward_models` returns the type it was given: a dict of columns must train like a Dataset."""
    from transformers import TrainingArguments

    from hfx.routing import OfflineRouter, OfflineRouterTrainer, label_with_reward_models
    from hfx.testing import tiny_llama

    encoder, tok = tiny_llama(seed=3)
    router = OfflineRouter.from_encoder(encoder, tok, RM_NAMES, max_length=32)
    columns = label_with_reward_models(_toy_pairs(8), {"long": long_rm, "short": short_rm}, show_progress=False)
    assert isinstance(columns, dict)
    args = TrainingArguments(output_dir=str(tmp_path), report_to="none", save_strategy="no", use_cpu=True, max_steps=1)
    trainer = OfflineRouterTrainer(router, args=args, train_dataset=columns)
    assert trainer.train_dataset.num_rows == 8
    with pytest.raises(ValueError, match="missing column"):
        OfflineRouterTrainer(
            router, args=args, train_dataset={"prompt": ["p"], "response_a": ["a"], "response_b": ["b"]}
        )


# ------------------------------------------------------------------------------------------------ issue 11 (items 7-9)
def _fixed_h(d=32):
    """A callable encoder: a fixed unit context per pair, symmetric in the two responses by construction."""

    def encode(prompts, a, b):
        return torch.stack([unit(torch.randn(d, generator=torch.Generator().manual_seed(len(p)))) for p in prompts])

    return encode


def test_rm_returning_none_is_skipped_and_counted_nan_raises(offline_router):
    from hfx.routing import RoutedRewardModel

    def picky(prompts, completions, **kwargs):  # declines completions of prompt "q" (TRL allows None)
        return [None if p == "q" else float(len(c)) for p, c in zip(prompts, completions)]

    def broken(prompts, completions, **kwargs):
        return [float("nan")] * len(completions)

    router = ThompsonRouter(torch.randn(2, 32), arm_names=RM_NAMES)
    routed = RoutedRewardModel(router, {"long": picky, "short": picky}, encoder=_fixed_h(), seed=0)
    logged = {}
    rewards = routed(
        prompts=["p", "p", "q", "q"], completions=["a", "bbbb", "a", "bbbb"], log_metric=logged.__setitem__
    )
    assert rewards[:2] == [0.0, 1.0] and rewards[2:] == [None, None]  # not 0.0 / 0.0: unscored, not a loss
    assert routed.last_metrics["unscored_pairs"] == 1 and routed.num_unscored_pairs == 1
    assert logged["routed_reward/unscored_pairs"] == 1.0 and logged["routed_reward/recorded_pairs"] == 1.0
    assert [(p["prompt"], p["chosen"]) for p in routed.pending] == [("p", "bbbb")]  # the declined pair never pends
    routed.pending = []
    assert routed.judge(["q"], [["a", "bbbb"]]) == [-1] and routed.pending == []
    assert routed.judge(["q"], [["a", "bbbb"]], return_scores=True) == [None]
    nan_routed = RoutedRewardModel(router, {"long": broken, "short": broken}, encoder=_fixed_h())
    with pytest.raises(ValueError, match=r"reward model '(long|short)' returned non-finite score"):
        nan_routed(prompts=["p", "p"], completions=["a", "b"])
    assert nan_routed.pending == []
    with pytest.raises(ValueError, match="returned None for row"):  # offline labels need every score
        from hfx.routing import label_with_reward_models

        label_with_reward_models(
            {"prompt": ["p", "q"], "response_a": ["a", "a"], "response_b": ["bb", "bb"], "label": [1, 1]},
            {"long": picky},
            show_progress=False,
        )


def test_nan_loss_and_nan_embedding_never_reach_the_posterior(offline_router):
    from hfx.routing import RoutedRewardModel

    router = ThompsonRouter(torch.randn(2, 32), arm_names=RM_NAMES)
    routed = RoutedRewardModel(router, {"long": long_rm, "short": short_rm}, encoder=_fixed_h(), seed=0)
    routed.normalizer.min_history = 2
    routed(prompts=["p", "p", "q", "q"], completions=["a", "bbbb", "a", "bbbb"])
    before, pending = router.state_dict(), list(routed.pending)
    with pytest.raises(ValueError, match="DPO loss of pending pair"):
        routed.feedback(torch.tensor([0.3, float("nan")]))
    assert routed.normalizer.history == [] and routed.pending == pending  # nothing recorded, pairs kept
    assert all(torch.equal(before[k], v) for k, v in router.state_dict().items())
    rewards = routed.feedback(torch.tensor([0.3, 0.7]))  # the retry learns normally
    assert torch.isfinite(rewards).all() and len(routed.normalizer.history) == 2
    with pytest.raises(ValueError, match="`raw` must be finite"):
        routed.normalizer(torch.tensor([float("inf")]))
    assert len(routed.normalizer.history) == 2
    with pytest.raises(ValueError, match="`losses` must be finite"):
        EMARewardNormalizer(2)(torch.tensor([float("nan")]), [0])
    bad_h = unit(torch.randn(3, 32))
    bad_h[1, 4] = float("nan")
    for r in (router, LinUCBRouter(2, 32), LinUCBRouter(2, 32, granularity="pair")):
        state = r.state_dict()
        with pytest.raises(ValueError, match=r"`h` must be finite, but row\(s\) \[1\]"):
            r.select(bad_h)
        with pytest.raises(ValueError, match="`h` must be finite"):
            r.update(bad_h, torch.tensor([0, 1, 0]), torch.rand(3))
        assert all(torch.equal(state[k], v) for k, v in r.state_dict().items())
    nan_encoder = RoutedRewardModel(router, [long_rm, short_rm], encoder=lambda p, a, b: bad_h[: len(p)])
    with pytest.raises(ValueError, match="`h` must be finite"):
        nan_encoder.judge(["x", "y"], [["a", "b"], ["c", "d"]])


def test_dataset_columns_reach_the_wrapped_reward_functions():
    from hfx.routing import RoutedRewardModel

    def verifier(prompts, completions, answer, **kwargs):  # a TRL verifier reward: needs the `answer` column
        return [float(a in c) for c, a in zip(completions, answer)]

    seen = {}

    def inspector(prompts, completions, completion_ids, trainer_state, log_extra, **kwargs):
        seen.update(ids=list(completion_ids), state=trainer_state, completions=list(completions))
        with pytest.raises(NotImplementedError, match="log_extra"):
            log_extra("col", [1] * len(completions))
        return [0.0] * len(completions)

    prompts = ["2+2?"] * 3 + ["3 + 3 ?"] * 3
    prior = _fixed_h()(["2+2?", "3 + 3 ?"], None, None)  # greedy (lambda0 = 1e8): group 0 -> verifier, 1 -> inspector
    router = ThompsonRouter(prior, prior_precision=1e8, arm_names=["verifier", "inspector"])
    routed = RoutedRewardModel(
        router, {"verifier": verifier, "inspector": inspector}, encoder=_fixed_h(), tie_eps=0.0, seed=0
    )
    completions = ["4", "5", "four is 4", "6", "9", "it is 6"]
    answers = ["4"] * 3 + ["6"] * 3
    ids = [[i] for i in range(6)]
    state = object()
    rewards = routed(
        prompts=prompts,
        completions=completions,
        answer=answers,
        completion_ids=ids,
        trainer_state=state,
        log_extra=lambda *a: None,
    )
    # group 0 -> verifier: "4" and "four is 4" tie (both right), each beats "5" -> mean of (1, 0.5) = 0.75
    assert rewards[:3] == [0.75, 0.0, 0.75]
    # group 1 -> inspector (all 0 -> ties): it saw the pair rows a, a, a, b, b, b of pairs (3,4), (3,5), (4,5)
    assert rewards[3:] == [0.5, 0.5, 0.5] and seen["state"] is state
    assert seen["ids"] == [[3], [3], [4], [4], [5], [5]]
    assert seen["completions"] == ["6", "6", "9", "9", "it is 6", "it is 6"]


def test_ties_are_filtered_and_pairs_follow_the_authors_rule(offline_router):
    from hfx.routing import RoutedRewardModel

    def score(prompts, completions, **kwargs):  # "a" vs "a!" differ by 0.05 <= tie_eps: a tie
        return [{"a": 1.0, "a!": 1.05, "bbb": 3.0, "cc": 2.0, "d": 0.0}[c] for c in completions]

    router = ThompsonRouter(torch.randn(2, 32), arm_names=RM_NAMES)
    routed = RoutedRewardModel(router, [score, score], encoder=_fixed_h(), seed=0)
    assert routed.tie_eps == 0.1 and routed.pairs_per_query == 4 and routed.pairing == "auto"
    completions = ["a", "a!", "bbb", "cc", "d"]
    rewards = routed(prompts=["p"] * 5, completions=completions)
    # all 10 i<j pairs scored once each; 1 tie; 4 of the 9 others recorded; reward = mean of 1 / 0 / 0.5
    assert sum(routed.num_rm_calls.values()) == 10 and routed.last_metrics["tie_pairs"] == 1
    assert routed.num_tie_pairs == 1 and len(routed.pending) == 4
    wins = {"a": 1.5, "a!": 1.5, "bbb": 4, "cc": 3, "d": 0}  # the tie counts 0.5 for both
    assert rewards == [wins[c] / 4 for c in completions]
    for p in routed.pending:
        assert {p["chosen"], p["rejected"]} != {"a", "a!"} and score([], [p["chosen"]]) > score([], [p["rejected"]])
    # with tie_eps = 0 only exact ties are ties; pairs_per_query=None records every non-tied pair
    exact = RoutedRewardModel(router, [score, score], encoder=_fixed_h(), tie_eps=0.0, pairs_per_query=None)
    exact(prompts=["p"] * 5 + ["q"] * 2, completions=completions + ["d", "d"])
    assert exact.last_metrics == {"pairs": 11, "tie_pairs": 1, "unscored_pairs": 0, "recorded_pairs": 10}
    # judge: a tie is "no verdict" and is not recorded (it was completion 0 and a chosen pair before)
    routed.pending = []
    assert routed.judge(["p", "p"], [["a", "a!"], ["d", "cc"]]) == [-1, 1]
    assert [(p["chosen"], p["rejected"]) for p in routed.pending] == [("cc", "d")]
    with pytest.raises(ValueError, match="`tie_eps`"):
        RoutedRewardModel(router, [score, score], encoder=_fixed_h(), tie_eps=-1.0)
    with pytest.raises(ValueError, match="`pairs_per_query`"):
        RoutedRewardModel(router, [score, score], encoder=_fixed_h(), pairs_per_query=0)
    with pytest.raises(ValueError, match="only one of its prompt"):
        routed(prompts=["p", "p", "q"], completions=["a", "d", "cc"])


def test_judge_verdict_is_mirrored_when_the_completions_are_swapped(offline_router):
    from hfx.routing import RoutedRewardModel

    def score(prompts, completions, **kwargs):
        return [round(len(c) / 4) for c in completions]  # many ties at tie_eps = 0.1

    prompts = ["describe the cat", "what is 2 + 2 ?", "hello", "name a colour", "count to three"]
    first = ["a cat", "four", "hi there", "red", "one two three"]
    second = ["a cat on a mat", "4", "hello to you", "blue", "1 2 3"]

    def verdicts(swap):
        router = ThompsonRouter.from_offline_router(offline_router)
        routed = RoutedRewardModel(
            router,
            [score, lambda prompts, completions, **k: [-x for x in score(prompts, completions)]],
            offline_router,
            seed=3,
        )
        pairs = [[b, a] if swap else [a, b] for a, b in zip(first, second)]
        return routed.judge(prompts, pairs), routed.judge(prompts, pairs, return_scores=True), routed.pending

    (v, probs, pending), (v_swap, probs_swap, pending_swap) = verdicts(False), verdicts(True)
    assert -1 in v and {0, 1} & set(v)  # both ties and real verdicts occur
    assert v_swap == [-1 if x == -1 else 1 - x for x in v]
    assert probs_swap == pytest.approx([1 - p for p in probs])
    assert [(p["chosen"], p["rejected"], p["arm"]) for p in pending] == [
        (p["chosen"], p["rejected"], p["arm"]) for p in pending_swap
    ]
