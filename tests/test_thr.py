"""THR (Token Hidden Reward, arXiv 2510.03669) on TRL's GRPOTrainer: the spec's conformance cases 1-8, parity with
`trl.GRPOTrainer`, short training runs (every mode, LoRA, beta > 0, every loss type, GSPO) and config validation.

The pure math is tested against hand-computed values and brute-force sums; the trainer tests use the tiny random
Llama of `hfx.testing` with a deterministic Python reward that makes one mixed and one degenerate group.
"""

import copy
import itertools
import json
import math

import pytest
import torch

from hfx.trainers.thr import token_rewards as tr


# --------------------------------------------------------------------------------------------------------- helpers
def _random_group(G=4, T=5, V=7, d=6, seed=0, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(G, T, d, generator=gen, dtype=dtype)
    probs = torch.softmax(torch.randn(G, T, V, generator=gen, dtype=dtype), dim=-1)
    ids = torch.randint(0, V, (G, T), generator=gen)
    mask = torch.ones(G, T, dtype=torch.long)
    mask[1, 3:] = 0
    mask[3, 4:] = 0
    errors = tr.prediction_errors(probs, ids)
    return hidden, probs, ids, mask, errors


# ------------------------------------------------------------------------------------ conformance 2: closed form
def test_advantage_closed_form_g4_one_correct():
    adv = tr.grpo_group_advantages(torch.tensor([1.0, 0.0, 0.0, 0.0]), num_generations=4)
    assert adv[0].item() == pytest.approx(math.sqrt(3), abs=1e-6)
    assert adv[0].item() == pytest.approx(1.7321, abs=1e-4)
    for a in adv[1:]:
        assert a.item() == pytest.approx(-math.sqrt(1 / 3), abs=1e-6)
        assert a.item() == pytest.approx(-0.5774, abs=1e-4)
    # unbiased std (TRL's choice): every advantage scaled by sqrt((G-1)/G), signs unchanged
    unbiased = tr.grpo_group_advantages(torch.tensor([1.0, 0.0, 0.0, 0.0]), num_generations=4, unbiased=True)
    torch.testing.assert_close(unbiased, adv * math.sqrt(3 / 4))
    # degenerate group -> zeros
    assert torch.equal(tr.grpo_group_advantages(torch.ones(4), 4), torch.zeros(4))


# ------------------------------------------------------------------------ conformance 3: efficient == explicit
def test_efficient_form_equals_explicit_double_sum_float64():
    hidden, _, _, mask, errors = _random_group()
    positive = torch.tensor([True, False, True, False])
    fast = tr.hidden_reward_scores(hidden, errors, mask, positive)
    slow = tr.hidden_reward_scores_explicit(hidden, errors, mask, positive)
    rel = ((fast - slow).abs().max() / slow.abs().max()).item()
    assert rel < 1e-10


def test_efficient_form_equals_python_loops_on_hand_built_batch():
    # 2 responses x 2 tokens, V = 3, d = 2; response 0 is correct (A = +1), response 1 incorrect (A = -1)
    h = torch.tensor([[[1.0, 0.0], [0.5, 2.0]], [[-1.0, 1.0], [0.0, 3.0]]], dtype=torch.float64)
    p = torch.tensor([[[0.5, 0.3, 0.2], [0.1, 0.6, 0.3]], [[0.2, 0.2, 0.6], [0.3, 0.3, 0.4]]], dtype=torch.float64)
    y = torch.tensor([[0, 1], [2, 0]])
    mask = torch.ones(2, 2)
    g = tr.prediction_errors(p, y)
    # g by hand: e_y - p
    torch.testing.assert_close(g[0, 0], torch.tensor([0.5, -0.3, -0.2], dtype=torch.float64))
    torch.testing.assert_close(g[1, 0], torch.tensor([-0.2, -0.2, 0.4], dtype=torch.float64))
    positive = torch.tensor([True, False])
    s = tr.hidden_reward_scores(h, g, mask, positive)
    for j, t in itertools.product(range(2), range(2)):
        expected = sum(float(g[0, k] @ g[j, t]) * float(h[0, k] @ h[j, t]) for k in range(2))
        assert s[j, t].item() == pytest.approx(expected, rel=1e-12, abs=1e-12)
    # one value fully by hand: s[1,0] = <g00,g10><h00,h10> + <g01,g10><h01,h10>
    g00, g01, g10 = [0.5, -0.3, -0.2], [-0.1, 0.4, -0.3], [-0.2, -0.2, 0.4]
    dot = lambda a, b: sum(x * z for x, z in zip(a, b))  # noqa: E731
    by_hand = dot(g00, g10) * (1 * -1 + 0 * 1) + dot(g01, g10) * (0.5 * -1 + 2 * 1)
    assert s[1, 0].item() == pytest.approx(by_hand, abs=1e-12)
    # THR = A_j * s
    thr = tr.token_hidden_reward(s, torch.tensor([1.0, -1.0], dtype=torch.float64), mask, positive)
    torch.testing.assert_close(thr, torch.stack([s[0], -s[1]]))


def test_exclude_self_removes_exactly_the_own_response_terms():
    hidden, _, _, mask, errors = _random_group()
    positive = torch.tensor([True, False, True, False])
    with_self = tr.hidden_reward_scores(hidden, errors, mask, positive, include_self=True)
    without = tr.hidden_reward_scores(hidden, errors, mask, positive, include_self=False)
    # for a correct response j, the excluded terms are the i = j ones: recompute with P \ {j}
    for j in (0, 2):
        others = positive.clone()
        others[j] = False
        ref = tr.hidden_reward_scores_explicit(hidden, errors, mask, others)
        torch.testing.assert_close(without[j], ref[j], rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(without[[1, 3]], with_self[[1, 3]])


def test_full_vocab_subset_equals_unsliced_exactly():
    # completions use every vocabulary id -> V* = V, so the sliced computation must agree exactly
    torch.manual_seed(0)
    V, d = 6, 4
    ids = torch.tensor([[0, 1, 2], [3, 4, 5]])
    mask = torch.ones(2, 3, dtype=torch.long)
    hidden = torch.randn(2, 3, d, dtype=torch.float64)
    weight = torch.randn(V, d, dtype=torch.float64)
    adv = torch.tensor([1.0, -1.0])
    assert torch.equal(tr.group_vocab_subset(ids, mask), torch.arange(V))
    kw = dict(mode="reweight", p=0.5, tau_beta=0.5)
    sliced = tr.group_token_hidden_reward(hidden, ids, mask, adv, weight, vocab_subset="group", **kw)
    full = tr.group_token_hidden_reward(hidden, ids, mask, adv, weight, vocab_subset="full", **kw)
    assert torch.equal(sliced.scores, full.scores)
    assert torch.equal(sliced.thr, full.thr)
    assert torch.equal(sliced.token_advantages, full.token_advantages)


def test_sliced_probs_are_not_renormalised():
    torch.manual_seed(0)
    hidden, weight = torch.randn(1, 2, 4), torch.randn(10, 4)
    subset = torch.tensor([1, 4, 7])
    full = tr.sliced_token_probs(hidden, weight, None, temperature=0.7)
    sliced = tr.sliced_token_probs(hidden, weight, subset, temperature=0.7)
    torch.testing.assert_close(sliced, full[..., subset])
    torch.testing.assert_close(full.sum(-1), torch.ones(1, 2))
    assert (sliced.sum(-1) < 1).all()
    torch.testing.assert_close(full, torch.softmax((hidden @ weight.T) / 0.7, dim=-1))


# ------------------------------------------------------------------------------ conformance 1: degenerate groups
def test_degenerate_groups_skipped_without_computation():
    G, T, d, V = 2, 3, 4, 9
    torch.manual_seed(0)
    adv = torch.tensor([0.0, 0.0, 1.0, -1.0, 0.0, 0.0])  # groups: all-correct/all-wrong, mixed, degenerate
    ids = torch.randint(0, V, (6, T))
    mask = torch.ones(6, T)
    hidden = torch.randn(6, T, d)
    hidden[:2] = float("nan")  # never read: would poison THR if used
    hidden[4:] = float("nan")
    calls = []

    def provider(rows):
        calls.append((rows.start, rows.stop))
        return hidden[rows]

    out = tr.batch_token_hidden_reward(provider, ids, mask, adv, G, torch.randn(V, d), mode="thr_only")
    assert calls == [(2, 4)]
    assert out.skipped.tolist() == [True, False, True]
    assert torch.equal(out.thr[:2], torch.zeros(2, T)) and torch.equal(out.thr[4:], torch.zeros(2, T))
    assert torch.equal(out.token_advantages[:2], torch.zeros(2, T))
    assert not out.dominant[:2].any() and not out.dominant[4:].any()
    assert torch.isfinite(out.thr).all()
    # skipped groups keep their plain advantages even when nonzero (normalize_then_sum can make all-positive groups)
    adv2 = torch.tensor([0.3, 0.5, 1.0, -1.0])
    out2 = tr.batch_token_hidden_reward(
        torch.randn(4, T, d), ids[:4], mask[:4], adv2, G, torch.randn(V, d), mode="thr_only"
    )
    assert out2.skipped.tolist() == [True, False]
    torch.testing.assert_close(out2.token_advantages[:2], adv2[:2, None].expand(2, T))


# ------------------------------------------------------------------------------- conformance 5: reweighting sign
def test_reweighting_direction_and_thr_only():
    adv = torch.tensor([2.0, -1.0])
    thr = torch.tensor([[3.0, -3.0, 0.5, 2.0], [-4.0, 4.0, 0.1, -0.2]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
    a, dom = tr.thr_token_advantages(adv, thr, mask, tau=1.0, mode="reweight", p=0.5)
    expected = torch.tensor([[2.0 * 1.5, 2.0 * 0.5, 2.0, 2.0], [-1.0 * 0.5, -1.0 * 1.5, -1.0, -1.0]])
    torch.testing.assert_close(a, expected)
    assert dom.tolist() == [[True, True, False, False], [True, True, False, False]]  # masked pos. never dominant
    a_neg, _ = tr.thr_token_advantages(adv, thr, mask, tau=1.0, mode="reweight", p=-0.5)
    expected_neg = torch.tensor([[2.0 * 0.5, 2.0 * 1.5, 2.0, 2.0], [-1.0 * 1.5, -1.0 * 0.5, -1.0, -1.0]])
    torch.testing.assert_close(a_neg, expected_neg)
    a_only, _ = tr.thr_token_advantages(adv, thr, mask, tau=1.0, mode="thr_only")
    torch.testing.assert_close(a_only, torch.tensor([[2.0, 2.0, 0.0, 0.0], [-1.0, -1.0, 0.0, 0.0]]))
    # p = 0 and tau below every |THR| recover GRPO exactly
    assert torch.equal(tr.thr_token_advantages(adv, thr, mask, 1.0, "reweight", 0.0)[0], adv[:, None].expand(2, 4))
    only_all, _ = tr.thr_token_advantages(adv, thr, torch.ones(2, 4), -1.0, "thr_only")
    assert torch.equal(only_all, adv[:, None].expand(2, 4))


def test_anchor_threshold_by_hand():
    thr = torch.tensor([[2.0, -4.0, 9.0], [1.0, 1.0, 1.0], [-3.0, 0.0, 5.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 1, 1]])
    positive = torch.tensor([True, False, True])
    # mean |THR| over valid tokens: row0 (2+4)/2 = 3, row2 (3+0+5)/3 = 8/3 -> min = 8/3
    tau = tr.anchor_threshold(thr, mask, positive, beta=1.5)
    assert tau.item() == pytest.approx(1.5 * 8 / 3)
    signed = tr.anchor_threshold(thr, mask, positive, beta=1.0, absolute=False)  # (2-4)/2=-1, 2/3 -> -1
    assert signed.item() == pytest.approx(-1.0)
    assert math.isinf(tr.anchor_threshold(thr, mask, torch.zeros(3, dtype=torch.bool)).item())


def test_normalisations():
    s = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    adv = torch.tensor([2.0, -1.0])
    positive = torch.tensor([True, False])
    none = tr.token_hidden_reward(s, adv, mask, positive, "none")
    torch.testing.assert_close(none, torch.tensor([[2.0, 4.0, 0.0], [-4.0, -5.0, -6.0]]))
    torch.testing.assert_close(tr.token_hidden_reward(s, adv, mask, positive, "positive_length"), none / 2)
    per = tr.token_hidden_reward(s, adv, mask, positive, "response_length")
    torch.testing.assert_close(per, none / torch.tensor([[2.0], [3.0]]))
    with pytest.raises(ValueError, match="normalization"):
        tr.token_hidden_reward(s, adv, mask, positive, "sqrt")


# ------------------------------------------------------------------------------------- conformance 7: masking
def test_masked_positions_never_enter_m_plus_and_carry_zero_thr():
    hidden, _, _, mask, errors = _random_group()
    positive = torch.tensor([True, True, False, False])
    s = tr.hidden_reward_scores(hidden, errors, mask, positive)
    hidden2, errors2 = hidden.clone(), errors.clone()
    hidden2[mask == 0] = 1e6  # garbage at padding positions
    errors2[mask == 0] = -1e6
    s2 = tr.hidden_reward_scores(hidden2, errors2, mask, positive)
    assert torch.equal(s, s2)
    assert torch.equal(s[mask == 0], torch.zeros(int((mask == 0).sum()), dtype=s.dtype))
    thr = tr.token_hidden_reward(s, torch.tensor([1.0, 1.0, -1.0, -1.0]), mask, positive)
    assert (thr[mask == 0] == 0).all()


# -------------------------------------------------------------------------------------- conformance 8: NTHR
def test_nthr_special_case():
    assert tr.nthr_eta(0.5) == 0.0
    assert tr.nthr_eta(0.25) == pytest.approx(0.5) and tr.nthr_eta(0.75) == pytest.approx(0.5)
    # p = 0.5: two correct, two incorrect; flagged negative tokens get zero advantage
    adv = tr.grpo_group_advantages(torch.tensor([1.0, 1.0, 0.0, 0.0]), 4)
    scores = torch.tensor([[1.0, 1.0], [1.0, 3.0], [5.0, 0.0], [2.0, -1.0]])
    mask = torch.ones(4, 2)
    a, flagged = tr.nthr_token_advantages(adv, scores, mask, adv > 0, beta=1.0)  # tau = min(1, 2) = 1
    assert flagged.tolist() == [[False, False], [False, False], [True, False], [True, False]]
    assert a[2, 0].item() == 0.0 and a[3, 0].item() == 0.0
    assert a[2, 1].item() == pytest.approx(adv[2].item()) and a[0, 0].item() == pytest.approx(adv[0].item())
    # p = 0.25: eta = 0.5
    adv = tr.grpo_group_advantages(torch.tensor([1.0, 0.0, 0.0, 0.0]), 4)
    a, flagged = tr.nthr_token_advantages(adv, scores, mask, adv > 0, beta=1.0)  # tau = mean(1,1) = 1
    assert flagged[2, 0] and flagged[1, 1]
    assert a[2, 0].item() == pytest.approx(0.5 * adv[2].item())
    assert a[1, 1].item() == pytest.approx(0.5 * adv[1].item())


# ------------------------------------------------------------------------------------------- config validation
@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"thr_p": 1.0}, "thr_p"),
        ({"thr_p": -1.0}, "thr_p"),
        ({"thr_p": 1.5}, "thr_p"),
        ({"thr_mode": "exploit"}, "thr_mode"),
        ({"thr_tau_beta": -0.5}, "thr_tau_beta"),
        ({"thr_normalization": "l2"}, "thr_normalization"),
        ({"thr_vocab_subset": "prompt"}, "thr_vocab_subset"),
        ({"thr_top_k": 0}, "thr_top_k"),
        ({"thr_hidden_states": "cache"}, "thr_hidden_states"),
    ],
)
def test_config_rejects_bad_values(kwargs, field, tmp_path):
    from hfx.trainers.thr import THRGRPOConfig

    with pytest.raises(ValueError, match=f"`{field}`"):
        THRGRPOConfig(output_dir=str(tmp_path), **kwargs)


def test_token_advantages_reject_bad_p_and_mode():
    with pytest.raises(ValueError, match="`p`"):
        tr.thr_token_advantages(torch.ones(1), torch.ones(1, 1), torch.ones(1, 1), 0.0, "reweight", p=1.0)
    with pytest.raises(ValueError, match="`mode`"):
        tr.thr_token_advantages(torch.ones(1), torch.ones(1, 1), torch.ones(1, 1), 0.0, "explore")


# ================================================================================================ trainer tests
PROMPTS = ["hello world", "two plus two ?"]


def _reward(prompts, completions, completion_ids, **kwargs):
    """`hello world` group: alternating 1, 0 (mixed); `two plus two ?` group: all 1 (degenerate, skipped)."""
    out, seen = [], {}
    for prompt in prompts:
        k = seen.get(prompt, 0)
        seen[prompt] = k + 1
        out.append(float(k % 2 == 0) if prompt == PROMPTS[0] else 1.0)
    return out


def _dataset():
    from datasets import Dataset

    return Dataset.from_dict({"prompt": PROMPTS * 4})


def _args(tmp_path, cls=None, **overrides):
    from hfx.trainers.thr import THRGRPOConfig

    kwargs = dict(
        output_dir=str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=8,
        learning_rate=1e-3,
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        report_to="none",
        logging_steps=1,
        disable_tqdm=True,
    )
    kwargs.update(overrides)
    return (cls or THRGRPOConfig)(**kwargs)


def _batch():
    return [{"prompt": PROMPTS[0]}] * 4 + [{"prompt": PROMPTS[1]}] * 4


def _trainer(tmp_path, cls_name="thr", model=None, peft_config=None, **overrides):
    from trl import GRPOConfig, GRPOTrainer

    from hfx.testing import tiny_llama
    from hfx.trainers.thr import THRGRPOTrainer

    if model is None:
        model, tok = tiny_llama()
    else:
        from hfx.testing import tiny_tokenizer

        tok = tiny_tokenizer()
    if cls_name == "grpo":
        overrides = {k: v for k, v in overrides.items() if not k.startswith("thr_")}
        args, cls = _args(tmp_path, GRPOConfig, **overrides), GRPOTrainer
    else:
        args, cls = _args(tmp_path, **overrides), THRGRPOTrainer
    trainer = cls(
        model=model,
        reward_funcs=_reward,
        args=args,
        train_dataset=_dataset(),
        processing_class=tok,
        peft_config=peft_config,
    )
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    return trainer


def _loss_and_grads(trainer, inputs):
    trainer.model.zero_grad(set_to_none=True)
    loss = trainer.compute_loss(trainer.model, inputs)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in trainer.model.named_parameters() if p.grad is not None}
    return loss.detach(), grads


def _generate(trainer, seed=0):
    torch.manual_seed(seed)
    return trainer._generate_and_score_completions(_batch())


def _assert_same(out_a, out_b, loss_grads_a, loss_grads_b, exact=True):
    for key in ("prompt_ids", "completion_ids", "completion_mask"):
        assert torch.equal(out_a[key], out_b[key])
    adv_a, adv_b = out_a["advantages"], out_b["advantages"]
    T = out_a["completion_ids"].size(1)
    adv_a = adv_a[:, None].expand(-1, T) if adv_a.dim() == 1 else adv_a
    adv_b = adv_b[:, None].expand(-1, T) if adv_b.dim() == 1 else adv_b
    assert torch.equal(adv_a, adv_b)
    (la, ga), (lb, gb) = loss_grads_a, loss_grads_b
    assert ga.keys() == gb.keys() and len(ga) > 0
    if exact:
        assert torch.equal(la, lb)
        for name in ga:
            assert torch.equal(ga[name], gb[name]), name
    else:
        torch.testing.assert_close(la, lb, rtol=1e-6, atol=1e-7)
        for name in ga:
            torch.testing.assert_close(ga[name], gb[name], rtol=1e-5, atol=1e-7, msg=name)
    assert any(g.abs().sum() > 0 for g in ga.values())


@pytest.fixture(scope="module")
def grpo_pair(tmp_path_factory):
    """A `trl.GRPOTrainer` and a `THRGRPOTrainer` on identical tiny Llamas (same seed)."""
    tmp = tmp_path_factory.mktemp("thr_pair")
    return _trainer(tmp / "a", "grpo"), _trainer(tmp / "b", "thr", thr_mode="off")


@pytest.mark.parametrize("loss_type", ["grpo", "dapo", "bnpo"])
def test_parity_off_equals_trl_grpo(grpo_pair, loss_type):
    grpo, thr = grpo_pair
    grpo.loss_type = thr.loss_type = loss_type
    thr.args.thr_mode = "off"
    out_a, out_b = _generate(grpo), _generate(thr)
    assert out_b["advantages"].dim() == 1
    _assert_same(out_a, out_b, _loss_and_grads(grpo, out_a), _loss_and_grads(thr, out_b))


@pytest.mark.parametrize("mode, extra", [("thr_only", {"thr_tau": -1.0}), ("reweight", {"thr_p": 0.0})])
def test_grpo_recovery(grpo_pair, mode, extra):
    """Conformance 4: THR-only with tau below every |THR| and reweighting with p = 0 are exactly GRPO."""
    grpo, thr = grpo_pair
    grpo.loss_type = thr.loss_type = "dapo"
    thr.args.thr_mode, thr.args.thr_tau, thr.args.thr_p = mode, extra.get("thr_tau"), extra.get("thr_p", 0.3)
    try:
        out_a, out_b = _generate(grpo), _generate(thr)
        assert out_b["advantages"].shape == out_b["completion_ids"].shape  # (B, T)
        assert not thr.last_thr["skipped"][0] and thr.last_thr["skipped"][1]
        _assert_same(out_a, out_b, _loss_and_grads(grpo, out_a), _loss_and_grads(thr, out_b), exact=False)
    finally:
        thr.args.thr_mode, thr.args.thr_tau, thr.args.thr_p = "off", None, 0.1


@pytest.mark.parametrize("p", [0.5, -0.5])
def test_trainer_sign_threshold_and_skip(grpo_pair, p):
    """Dominant tokens get exactly (1 + p sign THR); others and skipped groups keep A_j; thr_only zeroes the rest."""
    _, thr = grpo_pair
    thr.args.thr_mode = "off"
    base = _generate(thr)  # (B,) advantages
    try:
        thr.args.thr_mode, thr.args.thr_p, thr.args.thr_tau_beta = "reweight", p, 0.5
        res = thr.compute_token_hidden_reward(base)
        mask = base["completion_mask"].bool()
        a = base["advantages"][:, None].expand_as(res.thr)
        assert res.skipped.tolist() == [False, True]
        factor = torch.where(res.dominant, 1 + p * torch.sign(res.thr), torch.ones_like(res.thr))
        torch.testing.assert_close(res.token_advantages, a * factor)
        assert res.dominant[mask[:, :]].any() and not res.dominant[~mask].any()
        assert torch.equal(res.token_advantages[4:], a[4:]) and (res.thr[4:] == 0).all()
        assert (res.thr[~mask] == 0).all()
        # THR tensors carry no autograd graph (conformance 6)
        assert not res.thr.requires_grad and not res.token_advantages.requires_grad
        # tau is the anchor: beta * min over correct responses of mean |THR|
        pos = base["advantages"][:4] > 0
        means = (res.thr[:4].abs() * mask[:4]).sum(-1) / mask[:4].sum(-1)
        assert res.tau[0].item() == pytest.approx(0.5 * means[pos].min().item(), rel=1e-5)
        thr.args.thr_mode = "thr_only"
        only = thr.compute_token_hidden_reward(base)
        torch.testing.assert_close(only.token_advantages[:4], a[:4] * res.dominant[:4])
        assert torch.equal(only.token_advantages[4:], a[4:])
    finally:
        thr.args.thr_mode, thr.args.thr_p, thr.args.thr_tau_beta = "off", 0.1, 1.0


def test_thr_matches_pure_math_from_an_explicit_forward(grpo_pair):
    """The trainer's THR equals the pure function applied to hidden states from a plain model forward."""
    _, thr = grpo_pair
    thr.args.thr_mode = "off"
    base = _generate(thr)
    try:
        thr.args.thr_mode, thr.args.thr_p = "reweight", 0.5
        res = thr.compute_token_hidden_reward(base)
        model = thr.model
        ids = torch.cat([base["prompt_ids"], base["completion_ids"]], 1)
        att = torch.cat([base["prompt_mask"], base["completion_mask"]], 1)
        T = base["completion_ids"].size(1)
        with torch.no_grad():
            hidden = model(input_ids=ids, attention_mask=att, output_hidden_states=True).hidden_states[-1]
        ref = tr.batch_token_hidden_reward(
            hidden[:, -T - 1 : -1],
            base["completion_ids"],
            base["completion_mask"],
            base["advantages"],
            4,
            model.lm_head.weight,
            mode="reweight",
            p=0.5,
            temperature=thr.temperature,
        )
        torch.testing.assert_close(res.thr, ref.thr, rtol=1e-4, atol=1e-5)
        assert torch.equal(res.dominant, ref.dominant)
    finally:
        thr.args.thr_mode, thr.args.thr_p = "off", 0.1


def test_hidden_states_captured_during_generation_match_a_forward_pass(grpo_pair, monkeypatch):
    """thr_hidden_states="generation": no extra forward runs, and THR equals the forward-pass THR."""
    _, thr = grpo_pair
    thr.args.thr_mode = "off"
    base = _generate(thr)
    try:
        thr.args.thr_mode, thr.args.thr_p, thr.args.thr_hidden_states = "reweight", 0.5, "generation"
        with monkeypatch.context() as m:
            m.setattr(thr, "_thr_hidden_states", lambda *a, **k: pytest.fail("extra forward pass ran"))
            out = _generate(thr)
        head = thr.model.get_output_embeddings()
        assert not head._forward_pre_hooks  # the capture hook is removed after generation
        assert torch.equal(out["completion_ids"], base["completion_ids"])
        ref = thr.compute_token_hidden_reward(base)  # forward-pass hidden states
        torch.testing.assert_close(thr.last_thr["thr"], ref.thr, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(out["advantages"], ref.token_advantages.to(out["advantages"].dtype))
        thr.args.thr_hidden_states = "forward"
        calls = []
        original = thr._thr_hidden_states
        with monkeypatch.context() as m:
            m.setattr(thr, "_thr_hidden_states", lambda *a, **k: calls.append(1) or original(*a, **k))
            _generate(thr)
        assert calls  # the forward path ran
    finally:
        thr.args.thr_mode, thr.args.thr_p, thr.args.thr_hidden_states = "off", 0.1, "generation"


def test_gradient_given_token_advantages_equals_grpo(grpo_pair):
    """Conformance 6: the surrogate's gradient equals GRPO's given the same per-token advantages."""
    grpo, thr = grpo_pair
    grpo.loss_type = thr.loss_type = "grpo"
    thr.args.thr_mode, thr.args.thr_p = "reweight", 0.5
    try:
        out = _generate(thr)
        assert out["advantages"].dim() == 2 and not out["advantages"].requires_grad
        grpo.model.load_state_dict(thr.model.state_dict())
        _assert_same(out, out, _loss_and_grads(grpo, copy.copy(out)), _loss_and_grads(thr, out))
    finally:
        thr.args.thr_mode, thr.args.thr_p = "off", 0.1


@pytest.mark.parametrize("level", ["token", "sequence"])
def test_every_loss_type_accepts_token_advantages(grpo_pair, level):
    from trl import GRPOConfig

    _, thr = grpo_pair
    loss_types = GRPOConfig.__dataclass_fields__["loss_type"].metadata.get("help", "")
    thr.args.thr_mode, thr.args.thr_p, thr.args.thr_tau_beta = "reweight", 0.5, 0.2
    try:
        out = _generate(thr)
        thr.importance_sampling_level = level
        for loss_type in ["grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "vespo", "luspo"]:
            assert loss_type in loss_types
            thr.loss_type = loss_type
            loss, grads = _loss_and_grads(thr, out)
            assert torch.isfinite(loss), loss_type
            assert all(torch.isfinite(g).all() for g in grads.values()), loss_type
            assert any(g.abs().sum() > 0 for g in grads.values()), loss_type
    finally:
        thr.importance_sampling_level, thr.loss_type = "token", "dapo"
        thr.args.thr_mode, thr.args.thr_p, thr.args.thr_tau_beta = "off", 0.1, 1.0


# ----------------------------------------------------------------------------------------------- training runs
@pytest.mark.parametrize("mode", ["reweight", "thr_only", "nthr", "off"])
def test_short_training_run_every_mode(tmp_path, mode):
    trainer = _trainer(tmp_path, thr_mode=mode, thr_p=-0.3, thr_tau_beta=0.5)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    assert trainer.state.global_step == 1
    assert any(not torch.equal(before[n], p) for n, p in trainer.model.named_parameters())
    logs = trainer.state.log_history[0]
    if mode == "off":
        assert "thr/dominant_frac" not in logs
    else:
        assert logs["thr/skipped_group_frac"] == 0.5
        for key in ("thr/dominant_frac", "thr/abs_mean", "thr/positive_frac", "thr/top_abs_mean"):
            assert math.isfinite(logs[key])
        assert logs["thr/positive_frac"] + logs["thr/negative_frac"] <= 1.0 + 1e-6


def test_short_training_run_lora_with_beta(tmp_path):
    from peft import LoraConfig

    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    trainer = _trainer(tmp_path, peft_config=lora, thr_mode="reweight", thr_p=0.5, beta=0.1)
    assert trainer.ref_model is None  # PEFT: the reference is the adapter-disabled model
    trainer.train()
    logs = trainer.state.log_history[0]
    assert "kl" in logs and math.isfinite(logs["kl"]) and math.isfinite(logs["thr/abs_mean"])
    assert trainer.last_thr["thr"].abs().sum() > 0


def test_short_training_run_beta_from_saved_checkpoint_and_save(tmp_path):
    """beta > 0 without PEFT reloads the reference from `config._name_or_path`: pass a saved folder as `model=`."""
    from hfx.testing import tiny_llama

    model, tok = tiny_llama()
    model.save_pretrained(tmp_path / "policy")
    tok.save_pretrained(tmp_path / "policy")
    trainer = _trainer(tmp_path / "run", model=str(tmp_path / "policy"), thr_mode="thr_only", beta=0.05)
    assert trainer.ref_model is not None
    trainer.train()
    assert math.isfinite(trainer.state.log_history[0]["kl"])
    trainer.save_model(str(tmp_path / "saved"))
    saved = json.loads((tmp_path / "saved" / "thr_config.json").read_text())
    assert saved["thr_mode"] == "thr_only" and saved["thr_p"] == 0.1
    (tmp_path / "saved" / "optimizer.pt").write_bytes(b"training state")  # must not be published
    from transformers import AutoModelForCausalLM

    from hfx.hub import add_to_hf_cache, publish

    out = publish("thr-grpo", tmp_path / "pub", source=tmp_path / "saved", repo_id="hfx-test/thr-policy")
    assert not (out / "optimizer.pt").exists() and (out / "thr_config.json").is_file()
    card = (out / "README.md").read_text()
    assert card.startswith("---\n") and "arxiv:2510.03669" in card and "| `thr_mode` | `thr_only` |" in card
    assert "untrained demo" not in card and "hfx-test/thr-policy" in card
    add_to_hf_cache(out, "hfx-test/thr-policy", cache_dir=tmp_path / "cache")
    reloaded = AutoModelForCausalLM.from_pretrained("hfx-test/thr-policy", cache_dir=tmp_path / "cache")
    for (n, p), (_, q) in zip(trainer.model.named_parameters(), reloaded.named_parameters()):
        assert torch.equal(p.detach(), q), n


def test_publish_demo_and_bad_source(tmp_path):
    from hfx.hub import publish

    out = publish("thr-grpo", tmp_path / "demo")
    card = (out / "README.md").read_text()
    assert "untrained demo" in card and "- demo" in card
    assert json.loads((out / "thr_config.json").read_text())["thr_mode"] == "reweight"
    with pytest.raises(ValueError, match="`source`"):
        publish("thr-grpo", tmp_path / "bad", source=tmp_path)


# ------------------------------------------------------------------------------------------------------ plotting
def test_token_thr_html_colours_and_frames():
    from hfx.trainers.thr import token_thr_html

    doc = token_thr_html(
        ["a", "<b>", "c", "pad"], [2.0, -1.0, 0.0, 5.0], dominant=[True, False, False, True], mask=[1, 1, 1, 0]
    )
    spans = doc.split("<span")[1:]
    assert len(spans) == 3  # the masked position is dropped
    assert "rgba(220,40,40,1.000)" in spans[0] and "border:1px solid #000" in spans[0]
    assert "rgba(40,90,220,0.500)" in spans[1] and "&lt;b&gt;" in spans[1]
    assert "rgba(40,90,220,0.000)" in spans[2] or "rgba(220,40,40,0.000)" in spans[2]
    with pytest.raises(ValueError, match="`thr`"):
        token_thr_html(["a", "b"], [1.0])


def test_plot_token_thr_from_ids(tmp_path):
    from hfx.testing import tiny_tokenizer
    from hfx.trainers.thr import plot_token_thr

    tok = tiny_tokenizer()
    ids = torch.tensor(tok("what is two plus two ? the answer is four")["input_ids"])
    thr = torch.linspace(-1, 1, ids.numel())
    fig = plot_token_thr(ids, thr, tokenizer=tok, dominant=thr.abs() > 0.5, title="t", output_path=tmp_path / "t.png")
    assert (tmp_path / "t.png").stat().st_size > 1000
    texts = fig.axes[0].texts
    assert len(texts) == ids.numel()
    red, blue = texts[-1].get_bbox_patch().get_facecolor(), texts[0].get_bbox_patch().get_facecolor()
    assert red[0] > red[2] and blue[2] > blue[0]
    plot_token_thr(ids, thr, tokenizer=tok, output_path=tmp_path / "t.html")
    assert "THR=" in (tmp_path / "t.html").read_text()
    with pytest.raises(ValueError, match="`tokenizer`"):
        plot_token_thr(ids, thr)


def test_plain_grpo_config_is_rejected(tmp_path):
    from trl import GRPOConfig

    from hfx.testing import tiny_llama
    from hfx.trainers.thr import THRGRPOTrainer

    model, tok = tiny_llama()
    with pytest.raises(TypeError, match="THRGRPOConfig"):
        THRGRPOTrainer(model=model, reward_funcs=_reward, args=_args(tmp_path, GRPOConfig), processing_class=tok)
