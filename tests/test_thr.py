"""THR (Token Hidden Reward, arXiv 2510.03669) on TRL's GRPOTrainer: the spec's conformance cases 1-8, parity with
`trl.GRPOTrainer`, short training runs (every mode, LoRA, beta > 0, every loss type, GSPO) and config validation.

The pure math is tested against hand-computed values and brute-force sums; the trainer tests use the tiny random
Llama of `hfx.testing` with a deterministic Python reward that makes one mixed and one degenerate group.
"""

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
    # completions use every vocabulary id (in scrambled order) -> V* = V: sliced and unsliced agree exactly
    torch.manual_seed(0)
    V, d = 6, 4
    ids = torch.tensor([[4, 1, 5], [0, 3, 2]])
    mask = torch.ones(2, 3, dtype=torch.long)
    hidden = torch.randn(2, 3, d, dtype=torch.float64)
    weight = torch.randn(V, d, dtype=torch.float64)
    adv = torch.tensor([1.0, -1.0])
    assert torch.equal(tr.group_vocab_subset(ids, mask), torch.arange(V))
    kw = dict(mode="reweight", p=0.5, tau_beta=0.5, temperature=0.7)
    sliced = tr.group_token_hidden_reward(hidden, ids, mask, adv, weight, vocab_subset="group", **kw)
    full = tr.group_token_hidden_reward(hidden, ids, mask, adv, weight, vocab_subset="full", **kw)
    assert torch.equal(sliced.scores, full.scores)
    assert torch.equal(sliced.thr, full.thr)
    assert torch.equal(sliced.token_advantages, full.token_advantages)


def test_sliced_scores_equal_the_explicit_sum_over_the_vocab_subset():
    """V* a strict subset of V: the efficient sliced form equals the explicit double sum whose <g, g'> runs over the
    V* columns of the FULL-vocabulary softmax (not renormalised), for hand-built probabilities at T = 0.7."""
    torch.manual_seed(1)
    V, d, T = 12, 5, 4
    ids = torch.tensor([[3, 7, 7, 10], [1, 3, 10, 0], [7, 1, 3, 3]])  # V* = {1, 3, 7, 10}: the 0 is masked
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 0, 0]])
    hidden = torch.randn(3, T, d, dtype=torch.float64)
    weight = torch.randn(V, d, dtype=torch.float64)
    adv = torch.tensor([1.0, -0.5, -0.5], dtype=torch.float64)
    subset = torch.tensor([1, 3, 7, 10])
    assert torch.equal(tr.group_vocab_subset(ids, mask), subset)
    probs = torch.softmax(hidden @ weight.T / 0.7, dim=-1)[..., subset]  # full softmax, then slice
    one_hot = (ids.unsqueeze(-1) == subset).to(torch.float64)
    expected = tr.hidden_reward_scores_explicit(hidden, one_hot - probs, mask, adv > 0)
    out = tr.group_token_hidden_reward(hidden, ids, mask, adv, weight, mode="reweight", p=0.5, temperature=0.7)
    torch.testing.assert_close(out.scores, expected, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(out.thr, adv[:, None] * expected, rtol=1e-10, atol=1e-12)
    # and slicing is a real approximation here: the full-vocabulary scores differ
    full = tr.group_token_hidden_reward(hidden, ids, mask, adv, weight, vocab_subset="full", temperature=0.7)
    assert not torch.allclose(full.scores, out.scores)


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


def _group_with_fully_masked_correct_response(seed=0):
    gen = torch.Generator().manual_seed(seed)
    G, T, d, V = 4, 6, 5, 9
    hidden = torch.randn(G, T, d, generator=gen, dtype=torch.float64)
    weight = torch.randn(V, d, generator=gen, dtype=torch.float64)
    ids = torch.randint(0, V, (G, T), generator=gen)
    mask = torch.ones(G, T, dtype=torch.long)
    mask[0] = 0  # correct but truncated: mask_truncated_completions=True keeps A > 0 and zeroes the mask
    mask[2, 4:] = 0
    adv = torch.tensor([1.0, 1.0, -1.0, -1.0], dtype=torch.float64)
    return hidden, ids, mask, adv, weight


def test_fully_masked_correct_response_is_out_of_p_and_tau():
    """Issue 12 item 2: a correct response with an all-zero mask must not put a 0 into tau's min (before the fix
    tau = 0 and every valid token was dominant)."""
    hidden, ids, mask, adv, weight = _group_with_fully_masked_correct_response()
    assert tr.valid_positive(adv, mask).tolist() == [False, True, False, False]
    out = tr.group_token_hidden_reward(hidden, ids, mask, adv, weight, mode="thr_only", tau_beta=1.0)
    valid = mask.bool()
    expected_tau = (out.thr[1].abs() * mask[1]).sum() / mask[1].sum()  # the only valid correct response
    assert out.tau.item() == pytest.approx(expected_tau.item(), rel=1e-12)
    assert out.tau.item() > 0
    assert 0 < out.dominant[valid].sum() < valid.sum()
    # the masked row changes nothing: THR equals that of the group without it (scores are per-row)
    rest = tr.group_token_hidden_reward(hidden[1:], ids[1:], mask[1:], adv[1:], weight, mode="thr_only")
    torch.testing.assert_close(out.thr[1:], rest.thr, rtol=1e-12, atol=1e-12)
    assert torch.equal(out.dominant[1:], rest.dominant)
    # NTHR rule: same exclusion for its signed anchor
    nthr = tr.group_token_hidden_reward(hidden, ids, mask, adv, weight, mode="nthr")
    own = (nthr.scores[1] * mask[1]).sum() / mask[1].sum()
    assert nthr.tau.item() == pytest.approx(own.item(), rel=1e-12)


def test_group_whose_only_correct_response_is_masked_is_skipped():
    hidden, ids, mask, adv, weight = _group_with_fully_masked_correct_response()
    adv = torch.tensor([1.0, -1.0, -1.0, 1.0], dtype=torch.float64)
    mask[3] = 0  # both correct responses are fully masked
    assert tr.skipped_groups(adv, 4, mask).tolist() == [True]
    assert tr.skipped_groups(adv, 4).tolist() == [False]  # without masks: a mixed group
    out = tr.batch_token_hidden_reward(hidden, ids, mask, adv, 4, weight, mode="thr_only", tau_beta=1.0)
    assert out.skipped.tolist() == [True] and not out.dominant.any() and (out.thr == 0).all()
    torch.testing.assert_close(out.token_advantages, adv[:, None].expand(4, 6))


def test_nthr_rejects_thr_normalization(tmp_path):
    """Issue 12 item 3: thr_normalization was silently ignored with thr_mode='nthr'."""
    from hfx.trainers.thr import THRGRPOConfig

    with pytest.raises(ValueError, match="thr_normalization"):
        THRGRPOConfig(output_dir=str(tmp_path), thr_mode="nthr", thr_normalization="positive_length")
    cpu = dict(use_cpu=True, bf16=False)
    THRGRPOConfig(output_dir=str(tmp_path), thr_mode="nthr", thr_normalization="none", **cpu)
    THRGRPOConfig(output_dir=str(tmp_path), thr_mode="reweight", thr_normalization="positive_length", **cpu)
    hidden, ids, mask, adv, weight = _group_with_fully_masked_correct_response()
    for fn in (tr.group_token_hidden_reward, lambda *a, **k: tr.batch_token_hidden_reward(*a[:4], 4, *a[4:], **k)):
        with pytest.raises(ValueError, match="thr_normalization"):
            fn(hidden, ids, mask, adv, weight, mode="nthr", normalization="response_length")


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
        temperature=0.7,  # != 1 so that a dropped temperature is caught
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


def _reference_thr(model, base, temperature, num_generations=4, mask=None, **kwargs):
    """THR from scratch: pi_old = softmax(model(...).logits / T) of a plain forward, h = the backbone's output,
    then the explicit double sum per group (independent of the trainer's head and efficient form)."""
    ids = torch.cat([base["prompt_ids"], base["completion_ids"]], 1)
    att = torch.cat([base["prompt_mask"], base["completion_mask"]], 1)
    completion_ids = base["completion_ids"]
    mask = base["completion_mask"] if mask is None else mask
    T = completion_ids.size(1)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=att).logits[:, -T - 1 : -1].double()
        hidden = model.base_model(input_ids=ids, attention_mask=att).last_hidden_state[:, -T - 1 : -1].double()
    probs = torch.softmax(logits / temperature, dim=-1)
    adv = base["advantages"].double()
    thr = torch.zeros_like(probs[..., 0])
    for start in range(0, ids.size(0), num_generations):
        rows = slice(start, start + num_generations)
        if tr.skipped_groups(adv[rows], num_generations, mask[rows]).item():
            continue
        subset = tr.group_vocab_subset(completion_ids[rows], mask[rows])
        one_hot = (completion_ids[rows].unsqueeze(-1) == subset).double()
        errors = one_hot - probs[rows][..., subset]
        positive = tr.valid_positive(adv[rows], mask[rows])
        scores = tr.hidden_reward_scores_explicit(hidden[rows], errors, mask[rows], positive)
        thr[rows] = adv[rows, None] * scores
    return thr


def test_thr_matches_pure_math_from_an_explicit_forward(grpo_pair):
    """The trainer's THR equals THR computed from scratch from a plain model forward (logits / T, explicit sum)."""
    _, thr = grpo_pair
    thr.args.thr_mode = "off"
    base = _generate(thr)
    try:
        thr.args.thr_mode, thr.args.thr_p, thr.args.thr_hidden_states = "reweight", 0.5, "forward"
        assert thr.temperature == 0.7
        res = thr.compute_token_hidden_reward(base)
        ref = _reference_thr(thr.model, base, thr.temperature)
        assert ref.abs().sum() > 0
        torch.testing.assert_close(res.thr.double(), ref, rtol=1e-4, atol=1e-5)
    finally:
        thr.args.thr_mode, thr.args.thr_p, thr.args.thr_hidden_states = "off", 0.1, "generation"


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
        assert not thr.model.base_model._forward_hooks  # the capture hook is removed after generation
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


@pytest.mark.parametrize("loss_type", ["dapo", "grpo"])
def test_gradient_given_token_advantages_equals_hand_written_surrogate(grpo_pair, loss_type):
    """Conformance 6: the trainer's gradient is that of the on-policy surrogate -sum_t A'_t log pi_t (ratio 1,
    normalised as the loss type says), written here by hand from a plain forward, with THR's (B, T) advantages as
    constants: THR reaches the loss unchanged and carries no gradient."""
    _, thr = grpo_pair
    thr.loss_type = loss_type
    thr.args.thr_mode, thr.args.thr_p, thr.args.thr_tau_beta = "reweight", 0.5, 0.5
    try:
        out = _generate(thr)
        adv = out["advantages"]
        assert adv.dim() == 2 and not adv.requires_grad
        assert thr.last_thr["dominant"].any(), "THR changed no token's advantage"
        loss, grads = _loss_and_grads(thr, out)
        ids = torch.cat([out["prompt_ids"], out["completion_ids"]], 1)
        att = torch.cat([out["prompt_mask"], out["completion_mask"]], 1)
        mask = out["completion_mask"].float()
        T = mask.size(1)
        model = thr.model
        model.zero_grad(set_to_none=True)
        logits = model(input_ids=ids, attention_mask=att).logits[:, -T - 1 : -1] / thr.temperature
        logp = torch.log_softmax(logits.float(), -1).gather(-1, out["completion_ids"].unsqueeze(-1)).squeeze(-1)
        per_token = -adv.detach() * torch.exp(logp - logp.detach())
        if loss_type == "dapo":
            ref = (per_token * mask).sum() / mask.sum()
        else:  # grpo: mean over each sequence's tokens, then over sequences
            ref = ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1)).mean()
        ref.backward()
        torch.testing.assert_close(loss, ref.detach(), rtol=1e-5, atol=1e-7)
        for name, param in model.named_parameters():
            torch.testing.assert_close(grads[name], param.grad, rtol=1e-4, atol=1e-7, msg=name)
        model.zero_grad(set_to_none=True)
    finally:
        thr.loss_type = "dapo"
        thr.args.thr_mode, thr.args.thr_p, thr.args.thr_tau_beta = "off", 0.1, 1.0


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


# ================================================================ pi_old from the model's own forward (issue 12.1)
_TINY = dict(
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    vocab_size=96,
    max_position_embeddings=64,
)
_MOE = dict(num_experts=4, num_local_experts=4, num_experts_per_tok=2, moe_intermediate_size=16)
# every decoder family of the installed transformers whose ForCausalLM.forward changes the logits after the backbone
# (found by `_logit_changing_families` below), with a tiny config and a rescaling far from the identity
LOGIT_FAMILIES = {
    "beam": dict(final_logit_softcapping=0.3, **_MOE, n_group=1, topk_group=1),
    "cohere": dict(logit_scale=4.0),
    "cohere2": dict(logit_scale=4.0),
    "cohere2_moe": dict(logit_scale=4.0, **_MOE),
    "cohere_compass_text": dict(
        logit_scale=4.0, rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 10000.0}}
    ),
    "electra": dict(embedding_size=16, is_decoder=True),
    "falcon_h1": dict(
        lm_head_multiplier=8.0, mamba_d_ssm=32, mamba_n_heads=4, mamba_d_head=8, mamba_d_state=8, mamba_chunk_size=8
    ),
    "gemma2": dict(final_logit_softcapping=0.3),
    "gemma3_text": dict(final_logit_softcapping=0.3),
    "gemma3n_text": dict(
        final_logit_softcapping=0.3,
        intermediate_size=[64, 64],
        hidden_size_per_layer_input=8,
        vocab_size_per_layer_input=96,
        num_kv_shared_layers=0,
        laurel_rank=4,
        altup_num_inputs=2,
        activation_sparsity_pattern=[0.0, 0.0],
        layer_types=["sliding_attention", "full_attention"],
    ),
    "gemma4_text": dict(
        final_logit_softcapping=0.3,
        hidden_size_per_layer_input=8,
        vocab_size_per_layer_input=96,
        layer_types=["sliding_attention", "full_attention"],
        per_layer_config=None,
        global_head_dim=8,
    ),
    "gemma4_unified_text": dict(
        final_logit_softcapping=0.3,
        hidden_size_per_layer_input=8,
        vocab_size_per_layer_input=96,
        layer_types=["sliding_attention", "full_attention"],
        per_layer_config=None,
        global_head_dim=8,
    ),
    "granite": dict(logits_scaling=8.0),
    "granite_swa": dict(logits_scaling=8.0),
    "granitemoe": dict(logits_scaling=8.0, **_MOE),
    "granitemoe_swa": dict(logits_scaling=8.0, **_MOE),
    "granitemoehybrid": dict(
        logits_scaling=8.0,
        **_MOE,
        shared_intermediate_size=16,
        layer_types=["mamba", "attention"],
        mamba_n_heads=4,
        mamba_d_head=16,
        mamba_d_state=8,
        mamba_chunk_size=8,
    ),
    "granitemoeshared": dict(logits_scaling=8.0, **_MOE, shared_intermediate_size=16),
    "hyperclovax": dict(logits_scaling=8.0),
    "inkling2_loop_text": dict(final_logit_softcapping=0.3, unpadded_vocab_size=90),
    "inkling2_text": dict(final_logit_softcapping=0.3, unpadded_vocab_size=90),
    "inkling_text": dict(
        logits_mup_width_multiplier=0.125,
        unpadded_vocab_size=90,
        n_routed_experts=4,
        num_experts_per_tok=2,
        n_shared_experts=1,
        moe_intermediate_size=16,
        layer_types=["hybrid_sliding", "hybrid"],
        mlp_layer_types=["dense", "sparse"],
        swa_num_attention_heads=4,
        swa_num_key_value_heads=2,
        swa_head_dim=8,
    ),
    "minicpm3": dict(
        dim_model_base=4, num_key_value_heads=4, q_lora_rank=16, kv_lora_rank=8, qk_nope_head_dim=8, qk_rope_head_dim=8
    ),
    "modernbert-decoder": dict(pad_token_id=0, cls_token_id=1, sep_token_id=2, bos_token_id=1, eos_token_id=2),
    "nanochat": dict(final_logit_softcapping=0.3),
    "recurrent_gemma": dict(logits_soft_cap=0.3, block_types=["recurrent", "attention"], lru_width=32),
    "vaultgemma": dict(final_logit_softcapping=0.3),
    "xlstm": dict(output_logit_soft_cap=0.3, embedding_dim=32, num_heads=2, chunk_size=8),
}
# drafter heads that need the target model's key/value states: not a GRPO policy on their own
LOGIT_FAMILIES_EXCLUDED = {"gemma4_assistant", "gemma4_unified_assistant"}

_STANDARD_LINES = [
    r"hidden_states = (outputs|\w+_outputs)(\.last_hidden_state|\[0\])",
    r"hidden_states = slice_logits_to_keep\((hidden_states|outputs\.last_hidden_state), logits_to_keep\)",
    (
        r"logits = self\.lm_head\(hidden_states(\[:, slice_indices, :\])?(\.to\([^()]*(\([^()]*\))?[^()]*\))?\)"
        r"(\.float\(\)|\.contiguous\(\))?"
    ),
]


def _logit_changing_families() -> dict:
    """model_type -> the lines of its ForCausalLM.forward that assign logits / hidden states in a non-standard way
    between the backbone call and the loss (scaling, softcapping, vocabulary slicing, extra head layers).

    Reads the modeling files as text (importing ~200 modeling modules would take ~20 s)."""
    import re
    from pathlib import Path

    import transformers
    from transformers.models.auto.configuration_auto import model_type_to_module_name
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    root = Path(transformers.__file__).parent / "models"
    assign = re.compile(r"^\s*(logits|hidden_states)\b[^=]*?(?<![=!<>])=(?!=)")
    found = {}
    for model_type, class_name in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items():
        if not class_name.endswith("ForCausalLM"):
            continue
        folder = root / model_type_to_module_name(model_type)
        src = None
        for path in sorted(folder.glob("modeling_*.py")):
            text = path.read_text(encoding="utf-8")
            head = re.search(rf"\nclass {class_name}\(", text)
            if head is not None:
                end = re.search(r"\n(class |def |@)\S", text[head.end() :])
                body = text[head.end() : head.end() + (end.start() if end else len(text))]
                forward = body.find("    def forward(")
                src = body[forward:] if forward >= 0 else None
                break
        if src is None:
            continue
        start = re.search(r"outputs\s*(:\s*\w+)?\s*=\s*self\.\w+\(", src)
        if "lm_head(" not in src or start is None:
            continue
        stop = re.search(r"\n\s*(loss = None|return )", src[start.end() :])
        segment = src[start.end() : start.end() + (stop.start() if stop else len(src))]
        odd = [
            line.strip()
            for line in segment.splitlines()
            if assign.match(line) and not any(re.fullmatch(p, line.split("  #")[0].strip()) for p in _STANDARD_LINES)
        ]
        if odd:
            found[model_type] = odd
    return found


def test_every_logit_changing_decoder_family_is_tested():
    found = _logit_changing_families()
    assert {"granite", "minicpm3", "falcon_h1", "cohere", "gemma2", "gemma3_text"} <= set(found)  # the scan works
    missing = set(found) - set(LOGIT_FAMILIES) - LOGIT_FAMILIES_EXCLUDED
    assert not missing, {k: found[k] for k in missing}


def _tiny_family_model(model_type):
    import transformers
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    config = AutoConfig.for_model(model_type, **{**_TINY, **LOGIT_FAMILIES[model_type]})
    torch.manual_seed(0)
    return getattr(transformers, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type])(config).eval()


@pytest.mark.parametrize("model_type", sorted(LOGIT_FAMILIES))
def test_old_policy_probs_equal_softmax_of_the_model_logits(model_type):
    """THR's pi_old = softmax(model(...).logits / T), for every family that rescales / softcaps / slices logits."""
    from hfx.trainers.thr.policy import backbone_of, old_policy_probs

    model = _tiny_family_model(model_type)
    ids = torch.randint(3, 90, (2, 7), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref = torch.softmax(model(input_ids=ids, use_cache=False).logits.float() / 0.7, dim=-1)
        hidden = backbone_of(model)(input_ids=ids, use_cache=False).last_hidden_state
        try:  # the plain head on the backbone output (what THR used before), where that is even defined
            naive = torch.softmax(model.get_output_embeddings()(hidden).float()[..., : ref.size(-1)] / 0.7, dim=-1)
        except RuntimeError:  # e.g. Electra projects the hidden states before its head
            naive = None
    torch.testing.assert_close(old_policy_probs(model, hidden, None, temperature=0.7), ref, rtol=1e-5, atol=1e-6)
    subset = torch.tensor([3, 17, 40, 89])
    sliced = old_policy_probs(model, hidden, subset, temperature=0.7)
    torch.testing.assert_close(sliced, ref[..., subset], rtol=1e-5, atol=1e-6)
    assert naive is None or (naive - ref).abs().max() > 1e-3  # the family really changes its logits after the head


def test_trainer_thr_on_granite_uses_the_scaled_logits(tmp_path):
    """Issue 12 item 1: Granite divides its logits by `logits_scaling`; THR's pi_old must too (the old code used
    lm_head(h) and got probabilities off by up to 0.97). Checked against THR from scratch at T = 0.7."""
    from transformers import GraniteConfig, GraniteForCausalLM

    from hfx.testing import tiny_tokenizer

    tok = tiny_tokenizer()
    config = GraniteConfig(
        **{**_TINY, "vocab_size": len(tok)},
        logits_scaling=8.0,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    torch.manual_seed(0)
    model = GraniteForCausalLM(config)
    trainer = _trainer(tmp_path, model=model, thr_mode="off")
    base = _generate(trainer)
    trainer.args.thr_mode, trainer.args.thr_p, trainer.args.thr_hidden_states = "reweight", 0.5, "forward"
    res = trainer.compute_token_hidden_reward(base)
    ref = _reference_thr(trainer.model, base, 0.7)
    assert ref.abs().sum() > 0
    torch.testing.assert_close(res.thr.double(), ref, rtol=1e-4, atol=1e-6)


# ====================================================================== tool masks, refusals, rollouts (12.4, 12.5)
def test_tool_output_tokens_are_masked_out_of_thr(grpo_pair):
    """Tokens with tool_mask = 0 (tool outputs) never enter M+, carry THR 0, are never dominant, and change the
    other tokens' THR exactly as masking them would."""
    _, thr = grpo_pair
    thr.args.thr_mode = "off"
    base = _generate(thr)
    tool_mask = torch.ones_like(base["completion_mask"])
    tool_mask[0, 2:5] = 0  # a correct response's tool output
    tool_mask[1, 1:3] = 0  # an incorrect one's
    try:
        thr.args.thr_mode, thr.args.thr_p, thr.args.thr_tau_beta = "reweight", 0.5, 0.5
        plain = thr.compute_token_hidden_reward(base)
        res = thr.compute_token_hidden_reward({**base, "tool_mask": tool_mask})
        masked = base["completion_mask"] * tool_mask
        assert (res.thr[tool_mask == 0] == 0).all() and not res.dominant[tool_mask == 0].any()
        ref = _reference_thr(thr.model, base, thr.temperature, mask=masked)
        torch.testing.assert_close(res.thr.double(), ref * masked, rtol=1e-4, atol=1e-6)
        assert not torch.allclose(res.thr[:4], plain.thr[:4])  # the tool tokens mattered
    finally:
        thr.args.thr_mode, thr.args.thr_p, thr.args.thr_tau_beta = "off", 0.1, 1.0


def test_multimodal_batches_and_datasets_are_refused(grpo_pair, tmp_path):
    from datasets import Dataset

    from hfx.trainers.thr import THRGRPOTrainer

    _, thr = grpo_pair
    thr.args.thr_mode = "off"
    base = _generate(thr)
    try:
        thr.args.thr_mode = "reweight"
        with pytest.raises(ValueError, match="pixel_values"):
            thr.compute_token_hidden_reward({**base, "pixel_values": torch.zeros(8, 3, 4, 4)})
    finally:
        thr.args.thr_mode = "off"
    images = Dataset.from_dict({"prompt": ["describe"], "image": [None]})
    missing = str(tmp_path / "no-such-model")  # refused before the parent would try to load it
    with pytest.raises(ValueError, match="image"):
        THRGRPOTrainer(model=missing, reward_funcs=_reward, args=_args(tmp_path), train_dataset=images)
    with pytest.raises(OSError):  # with THR off the parent goes on and fails to load the model
        THRGRPOTrainer(model=missing, reward_funcs=_reward, args=_args(tmp_path, thr_mode="off"), train_dataset=images)


def test_rollout_func_is_not_captured_and_uses_the_forward_pass(tmp_path, monkeypatch):
    """A rollout_func (like vLLM and tools) is not one `generate` call: no capture hook during the rollout, and THR
    comes from the extra forward pass, equal to THR from scratch."""
    from hfx.testing import tiny_llama

    model, tok = tiny_llama()
    backbone = model.base_model
    completions = {PROMPTS[0]: [[50, 60, 70, 2], [60, 61, 2], [50, 80, 90, 91], [70, 2]], PROMPTS[1]: [[9, 2]] * 4}
    hooks_seen = []

    def rollout(prompts, trainer):
        hooks_seen.append(len(backbone._forward_hooks))
        seen = {}
        out = {"prompt_ids": [], "completion_ids": [], "logprobs": []}
        for prompt in prompts:
            k = seen.get(prompt, 0)
            seen[prompt] = k + 1
            out["prompt_ids"].append(tok(prompt)["input_ids"])
            out["completion_ids"].append(completions[prompt][k])
            out["logprobs"].append([0.0] * len(completions[prompt][k]))
        return out

    from hfx.trainers.thr import THRGRPOTrainer

    trainer = THRGRPOTrainer(
        model=model,
        reward_funcs=_reward,
        args=_args(tmp_path, thr_mode="reweight", thr_p=0.5),
        train_dataset=_dataset(),
        processing_class=tok,
        rollout_func=rollout,
    )
    trainer.model.train()
    assert not trainer._thr_capture_supported()
    calls = []
    original = trainer._thr_hidden_states
    monkeypatch.setattr(trainer, "_thr_hidden_states", lambda *a, **k: calls.append(1) or original(*a, **k))
    out = trainer._generate_and_score_completions(_batch())
    assert hooks_seen == [0] and calls
    assert out["completion_ids"][0, :4].tolist() == [50, 60, 70, 2]
    base = {**out, "advantages": trainer.last_thr["advantages"][:, 0] * 0}  # placeholder, replaced below
    base["advantages"] = torch.tensor(_reward(PROMPTS[:1] * 4 + PROMPTS[1:] * 4, None, None))
    base["advantages"] = tr.grpo_group_advantages(base["advantages"], 4, unbiased=True, eps=1e-4)
    ref = _reference_thr(trainer.model, base, trainer.temperature)
    torch.testing.assert_close(trainer.last_thr["thr"].double(), ref, rtol=1e-4, atol=1e-6)
    for attr, value in (("use_vllm", True), ("tools", [len]), ("use_transformers_continuous_batching", True)):
        monkeypatch.setattr(trainer, attr, value)
        assert not trainer._thr_capture_supported(), attr
        monkeypatch.undo()
        monkeypatch.setattr(trainer, "_thr_hidden_states", lambda *a, **k: original(*a, **k))


def test_args_without_thr_fields_fall_back_to_the_parent():
    """Issue 12 item 4: TRL's own tests build trainers with `object.__new__` and plain args; `_generate` must then
    behave as GRPOTrainer's (it read `self.args.thr_mode` and raised AttributeError)."""
    from types import SimpleNamespace
    from unittest.mock import MagicMock

    from hfx.trainers.thr import THRGRPOTrainer

    trainer = object.__new__(THRGRPOTrainer)
    trainer.accelerator = SimpleNamespace(device=torch.device("cpu"), is_main_process=True, gather=lambda t: t)
    trainer.args = SimpleNamespace(report_to=[])
    trainer.model = SimpleNamespace(training=True)
    trainer.state = SimpleNamespace(global_step=2, num_input_tokens_seen=0)
    trainer._last_loaded_step = 1
    trainer.use_vllm = False
    trainer.use_transformers_continuous_batching = False
    trainer.processing_class = SimpleNamespace(batch_decode=MagicMock(return_value=["decoded"]))
    trainer._tokenizer = SimpleNamespace(eos_token_id=2, pad_token_id=0)
    trainer.eos_token_ids = [2]
    trainer.tools = None
    names = ["num_tokens", "completions/mean_length", "completions/min_length", "completions/max_length"]
    names += ["completions/clipped_ratio", "completions/mean_terminated_length", "completions/min_terminated_length"]
    names += ["completions/max_terminated_length"]
    trainer._metrics = {"train": {k: [] for k in names}}
    trainer.rollout_func = MagicMock(
        return_value={"prompt_ids": [[1]], "completion_ids": [[2]], "logprobs": [[-0.1]], "env_mask": [[1]]}
    )
    result = trainer._generate(["prompt"])
    assert result[0] == [[1]] and result[1] == [[2]] and result[2] == [[1]]
    assert trainer._thr_mode == "off"


def test_trainer_advantages_follow_the_closed_form(tmp_path):
    """Spec case 2 on what the trainer computes: G = 4 with one correct response gives +sqrt(3) / -sqrt(1/3) up to
    TRL's unbiased std (x sqrt(3/4)) and its eps = 1e-4; THR keeps them on non-dominant tokens."""

    def one_correct(prompts, completions, completion_ids, **kwargs):
        seen, out = {}, []
        for prompt in prompts:
            out.append(float(seen.get(prompt, 0) == 0))
            seen[prompt] = seen.get(prompt, 0) + 1
        return out

    trainer = _trainer(tmp_path, thr_mode="reweight", thr_p=0.5, thr_tau_beta=2.0)
    trainer.reward_funcs, trainer.reward_func_names = [one_correct], ["one_correct"]
    out = _generate(trainer)
    base = tr.grpo_group_advantages(torch.tensor([1.0, 0, 0, 0] * 2), 4, unbiased=True, eps=1e-4)
    closed = torch.tensor([math.sqrt(3), -math.sqrt(1 / 3), -math.sqrt(1 / 3), -math.sqrt(1 / 3)] * 2)
    torch.testing.assert_close(base, closed * math.sqrt(3 / 4), rtol=1e-3, atol=0)
    dominant = trainer.last_thr["dominant"]
    adv = out["advantages"].double()
    expected = base.double()[:, None].expand_as(adv)
    torch.testing.assert_close(adv[~dominant], expected[~dominant], rtol=1e-6, atol=1e-7)
    assert (~dominant & out["completion_mask"].bool()).any()


def _fixed_rollout_trainer(tmp_path, **overrides):
    """A trainer whose rollout is a `rollout_func` returning fixed completions (like vLLM: no `generate` call)."""
    from hfx.testing import tiny_llama
    from hfx.trainers.thr import THRGRPOTrainer

    model, tok = tiny_llama()
    completions = {PROMPTS[0]: [[50, 60, 70, 2], [60, 61, 2], [50, 80, 90, 91], [70, 2]], PROMPTS[1]: [[9, 2]] * 4}

    def rollout(prompts, trainer):
        seen, out = {}, {"prompt_ids": [], "completion_ids": [], "logprobs": []}
        for prompt in prompts:
            k = seen.get(prompt, 0)
            seen[prompt] = k + 1
            out["prompt_ids"].append(tok(prompt)["input_ids"])
            out["completion_ids"].append(completions[prompt][k])
            out["logprobs"].append([0.0] * len(completions[prompt][k]))
        return out

    args = _args(tmp_path, thr_mode="reweight", thr_p=0.5, **overrides)
    trainer = THRGRPOTrainer(
        model=model,
        reward_funcs=_reward,
        args=args,
        train_dataset=_dataset(),
        processing_class=tok,
        rollout_func=rollout,
    )
    trainer.model.train()
    return trainer


def _response_advantages(trainer):
    rewards = torch.tensor(_reward(PROMPTS[:1] * 4 + PROMPTS[1:] * 4, None, None))
    return tr.grpo_group_advantages(rewards, 4, unbiased=True, eps=1e-4)


@pytest.mark.parametrize("hidden_states", ["generation", "forward"])
def test_hidden_states_come_from_trl_old_logprob_forward_when_it_runs(tmp_path, monkeypatch, hidden_states):
    """Issue 14 item 4: when TRL runs its no-grad old-log-prob forward (here `num_iterations=2`; with vLLM rollouts
    it always does, for the importance-sampling correction), THR takes its hidden states from that forward: no extra
    forward pass, the capture hook is gone afterwards, and THR equals THR from scratch (plain forward, explicit sum)."""
    trainer = _fixed_rollout_trainer(tmp_path, num_iterations=2, thr_hidden_states=hidden_states)
    monkeypatch.setattr(trainer, "_thr_hidden_states", lambda *a, **k: pytest.fail("extra forward pass ran"))
    out = trainer._generate_and_score_completions(_batch())
    assert out.get("old_per_token_logps") is not None  # TRL ran its forward
    assert trainer.last_thr_hidden_source == "old_logps_forward"
    assert not trainer.model.base_model._forward_hooks
    assert trainer._thr_old_forward is None and not trainer._thr_old_forward_armed
    base = {**out, "advantages": _response_advantages(trainer)}
    ref = _reference_thr(trainer.model, base, trainer.temperature)
    assert ref.abs().sum() > 0
    torch.testing.assert_close(trainer.last_thr["thr"].double(), ref, rtol=1e-4, atol=1e-6)


def test_forward_fallback_is_logged_once_not_per_batch(tmp_path, caplog):
    """Issue 14 item 4: without a TRL old-log-prob forward (`num_iterations=1`) a rollout that is not one `generate`
    call takes the extra forward pass, and says so once, not at every generation batch."""
    import logging

    trainer = _fixed_rollout_trainer(tmp_path)
    with caplog.at_level(logging.INFO, logger="hfx.trainers.thr.trainer"):
        for _ in range(3):
            out = trainer._generate_and_score_completions(_batch())
            assert trainer.last_thr_hidden_source == "forward"
    assert out.get("old_per_token_logps") is None
    notes = [r for r in caplog.records if "extra no-grad forward" in r.getMessage()]
    assert len(notes) == 1, [r.getMessage() for r in caplog.records]
    assert "not one transformers `generate` call" in notes[0].getMessage()
