"""CRD (hfx.vision.crd): rule GPs and the categorical likelihood, MH selection, the RAVEN-style generator and loaders,
the proposers (symbolic with noise; a VLM over a tiny random LLaVA), the pipeline's save / load and plot, the CLI.

Expected values come from independent computations (scipy's multivariate normal, brute-force sums over subsets and
category assignments, exact posteriors over all subsets), not from the code under test.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
import torch
from scipy.stats import multivariate_normal

from hfx.vision.crd import (
    AttributeProposer,
    Concept,
    ConceptProposal,
    CRDConfig,
    CRDPipeline,
    concept_recovery,
    data,
    load_dataset,
    load_raven,
)
from hfx.vision.crd.evidence import EvidenceModel
from hfx.vision.crd.metrics import argmax_random_ties, candidate_tuples, frequency_scores
from hfx.vision.crd.rules import CategoricalRuleBank, OrdinalRuleBank, diagonal_index
from hfx.vision.crd.selection import exhaustive_best, log_prior, metropolis_hastings, subset_score


LOG6 = math.log(6)
RANGE = torch.tensor([[1.0, 6.0]], dtype=torch.float64)  # sizes 1..6: a misread value has density 1/6


def _mvn(component, center, y):
    mean = (center * component["mean_shape"]).numpy()
    cov = (component["latent"] + component["noise_var"] * torch.eye(9, dtype=torch.float64)).numpy()
    return multivariate_normal(mean=mean, cov=cov)


# ------------------------------------------------------------------------------------------------- rule GPs
def test_ordinal_evidence_equals_scipy_gaussian_with_and_without_a_missing_panel():
    bank = OrdinalRuleBank(CRDConfig(max_outliers=0))
    y = torch.tensor([[2.0, 3, 4, 1, 2, 3, 4, 5, 6]], dtype=torch.float64)
    ll = bank.component_log_ml(y, torch.tensor([3.5]), RANGE)[0]
    y8 = y.clone()
    y8[0, 8] = math.nan
    ll8 = bank.component_log_ml(y8, torch.tensor([3.5]), RANGE)[0]
    for c, comp in enumerate(bank.components):
        full = _mvn(comp, 3.5, y)
        assert ll[c].item() == pytest.approx(full.logpdf(y[0].numpy()), rel=1e-6, abs=1e-6)
        mean, cov = full.mean[:8], full.cov[:8, :8]
        assert ll8[c].item() == pytest.approx(multivariate_normal(mean, cov).logpdf(y[0, :8].numpy()), rel=1e-6,
                                              abs=1e-6)


def test_outlier_evidence_is_the_exact_sum_over_misread_subsets():
    cfg = CRDConfig(max_outliers=1, outlier_prob=0.1)
    bank = OrdinalRuleBank(cfg)
    y = torch.tensor([[1.0, 2, 3, 2, 3, 4, 6, 4, math.nan]], dtype=torch.float64)  # panel 6 misread
    ll = bank.component_log_ml(y, torch.tensor([3.5]), RANGE)[0]
    eps, obs = 0.1, list(range(8))
    # the joint model over 9 panels: at most one misread panel (prior renormalised); panel 8 is unobserved
    z = (1 - eps) ** 9 + 9 * eps * (1 - eps) ** 8
    for c in (0, 7, 15):
        full = _mvn(bank.components[c], 3.5, y)
        terms = []
        for misread in [None, *range(9)]:
            prior = (eps if misread is not None else 1) * (1 - eps) ** (9 - (misread is not None)) / z
            keep = [i for i in obs if i != misread]
            log_dens = multivariate_normal(full.mean[keep], full.cov[np.ix_(keep, keep)]).logpdf(y[0, keep].numpy())
            terms.append(math.log(prior) + log_dens - (LOG6 if misread in obs else 0.0))  # misread panel 8: 1
        assert ll[c].item() == pytest.approx(float(np.logaddexp.reduce(terms)), rel=1e-6)
    # a misread value outside the range has no outlier density
    far = y.clone()
    far[0, 6] = 40.0
    assert bank.component_log_ml(far, torch.tensor([3.5]), RANGE)[0, 7] < ll[7] - 30


def _rule_values(rule, seed, ordinal=True):
    rng = np.random.default_rng(seed)
    domain = list(data.SIZES) if ordinal else list(data.SHAPES)
    for _ in range(50):
        try:
            return data._rule_rows(rng, rule, domain, ordinal)[0]
        except data.GenerationError:
            continue
    raise AssertionError


@pytest.mark.parametrize("rule", ["constant", "progression", "arithmetic", "distribute_three"])
def test_generating_rule_has_higher_marginal_likelihood_than_shuffled_values(rule):
    bank = OrdinalRuleBank(CRDConfig(max_outliers=0))
    col = bank.rule_names.index(rule)
    rng = np.random.default_rng(1)
    real, shuffled = [], []
    for seed in range(60):
        values = _rule_values(rule, seed)
        real.append(values)
        shuffled.append([values[i] for i in rng.permutation(9)])
    y = torch.tensor(real + shuffled, dtype=torch.float64)
    ev = bank.rule_log_ml(bank.component_log_ml(y, torch.full((120,), 3.5), RANGE.expand(120, 2)))[:, col]
    diff = ev[:60] - ev[60:]
    assert (diff > 0).float().mean() >= 0.85, diff
    assert diff.mean() > 3.0


@pytest.mark.parametrize("rule", ["constant", "distribute_three"])
def test_categorical_generating_rule_beats_shuffled_values(rule):
    bank = CategoricalRuleBank(CRDConfig())
    col = bank.rule_names.index(rule)
    rng = np.random.default_rng(2)
    real, shuffled = [], []
    for seed in range(60):
        values = [data.SHAPES.index(v) for v in _rule_values(rule, seed, ordinal=False)]
        real.append(values)
        shuffled.append([values[i] for i in rng.permutation(9)])
    ev = bank.rule_log_ml(bank.component_log_ml(torch.tensor(real + shuffled), torch.full((120,), 5)))[:, col]
    diff = ev[:60] - ev[60:]
    assert (diff >= 0).float().mean() >= 0.9 and diff.mean() > 2.0


def test_categorical_partition_likelihood_is_a_distribution_over_labels():
    bank = CategoricalRuleBank(CRDConfig(categorical_noise=(0.05, 0.3), dirichlet_alpha=0.7))
    k = 3
    full = torch.tensor(list(itertools.product(range(k), repeat=9)))
    ll = bank.component_log_ml(full, torch.full((full.shape[0],), k), chunk_elements=20_000)
    assert torch.allclose(torch.logsumexp(ll, 0).exp(), torch.ones(ll.shape[1], dtype=torch.float64), atol=1e-9)
    part = torch.cat([torch.tensor(list(itertools.product(range(k), repeat=8))), -torch.ones(k**8, 1).long()], 1)
    ll8 = bank.component_log_ml(part, torch.full((k**8,), k))
    assert torch.allclose(torch.logsumexp(ll8, 0).exp(), torch.ones(ll.shape[1], dtype=torch.float64), atol=1e-9)


def test_distinct_triple_sum_equals_brute_force_enumeration():
    cfg = CRDConfig(categorical_rules=("distribute_three",), categorical_noise=(0.2,))
    bank = CategoricalRuleBank(cfg)
    v = torch.tensor([[0, 1, 2, 1, 3, 0, 2, 0, -1]])
    k, eps = 4, 0.2
    ll = bank.component_log_ml(v, torch.tensor([k]))[0]
    for variant, direction in enumerate((1, -1)):
        diag = diagonal_index(direction)
        total = 0.0
        for z in itertools.permutations(range(k), 3):
            p = 1.0
            for i in range(8):
                p *= (1 - eps) * (v[0, i].item() == z[diag[i]]) + eps / k
            total += p
        assert ll[variant].item() == pytest.approx(math.log(total / (k * (k - 1) * (k - 2))), rel=1e-9)


def test_predictives_are_normalised():
    cfg = CRDConfig()
    model = EvidenceModel(cfg)
    labels = ["a", "b", "c", "d"]
    ctx = ["a", "b", "c", "b", "c", "a", "c", "a"]
    proposal = ConceptProposal([Concept("shape", "categorical", ctx, labels, 1.0, labels)])
    ev = model([proposal])[0][0]
    assert sum(math.exp(x) for x in ev.answer_log_prob) == pytest.approx(1.0, abs=1e-9)
    assert sum(math.exp(x) for x in ev.null_answer_log_prob) == pytest.approx(1.0, abs=1e-9)
    one_hot = EvidenceModel(cfg.replace(categorical_likelihood="one_hot_gp"))([proposal])[0][0]
    assert sum(math.exp(x) for x in one_hot.answer_log_prob) == pytest.approx(1.0, abs=1e-9)
    # rows are cyclic shifts (a b c / b c a / c a ?): both likelihoods predict "b"
    assert int(np.argmax(ev.answer_log_prob)) == 1 and int(np.argmax(one_hot.answer_log_prob)) == 1
    # ordinal: the predictive density of the missing panel integrates to 1 over a fine grid
    grid = np.linspace(-30, 40, 14001)
    ordinal = ConceptProposal([Concept("size", "ordinal", [1, 2, 3, 2, 3, 4, 3, 4], list(grid), 1.0, [1, 6])])
    dens = np.exp(model([ordinal])[0][0].answer_log_prob)
    assert np.trapezoid(dens, grid) == pytest.approx(1.0, abs=1e-3)
    assert grid[int(np.argmax(dens))] == pytest.approx(5.0, abs=0.05)  # the progression's next value


def test_fitted_values_follow_the_rule_to_the_missing_panel():
    bank = OrdinalRuleBank(CRDConfig())
    y = torch.tensor([2.0, 3, 4, 1, 2, 3, 3, 4, math.nan], dtype=torch.float64)
    fit = bank.fitted_values(y, 3.5, (1.0, 6.0), "progression")
    assert torch.allclose(fit, torch.tensor([2.0, 3, 4, 1, 2, 3, 3, 4, 5], dtype=torch.float64), atol=0.1)
    cat = CategoricalRuleBank(CRDConfig()).fitted_categories(torch.tensor([0, 1, 2, 1, 2, 0, 2, 0, -1]), 5,
                                                             "distribute_three")
    assert cat.tolist() == [0, 1, 2, 1, 2, 0, 2, 0, 1]


# ------------------------------------------------------------------------------------------------------ MH
def test_flat_score_with_a_symmetric_proposal_accepts_every_move():
    cfg = CRDConfig(proposal="toggle", prior="uniform", num_steps=300, burn_in=10, num_chains=3)
    n = 6
    res = metropolis_hastings(torch.zeros(4, n), torch.rand(4, n), torch.ones(4, n, dtype=torch.bool), cfg)
    assert bool(res.accepted.all()) and torch.all(res.acceptance_rate == 1.0)
    # control: the guided add / remove / swap proposal is asymmetric, so the Hastings term rejects some moves
    guided = metropolis_hastings(torch.zeros(4, n), torch.rand(4, n) * 0.9, torch.ones(4, n, dtype=torch.bool),
                                 cfg.replace(proposal="guided"))
    assert 0.2 < float(guided.acceptance_rate.mean()) < 0.95


@pytest.mark.parametrize("proposal,prior", [("guided", "geometric"), ("guided", "size_uniform"),
                                            ("toggle", "geometric")])
def test_mh_samples_the_exact_subset_posterior(proposal, prior):
    n = 4
    u = torch.tensor([[1.5, -0.5, 0.3, 2.0]])
    conf = torch.tensor([[0.95, 0.1, 0.5, 0.7]])
    val = torch.ones(1, n, dtype=torch.bool)
    cfg = CRDConfig(proposal=proposal, prior=prior, parsimony=0.7, guidance=2.0, num_steps=700, burn_in=50,
                    num_chains=256, seed=3)
    res = metropolis_hastings(u, conf, val, cfg)
    kept = res.states[0, :, 50:].reshape(-1, n)
    emp = torch.bincount((kept.long() * 2 ** torch.arange(n)).sum(-1), minlength=2**n).double()
    emp /= emp.sum()
    bits = ((torch.arange(2**n)[:, None] >> torch.arange(n)) & 1).bool()
    exact = torch.softmax(subset_score(bits, u.expand(2**n, -1), val.expand(2**n, -1), cfg), 0)
    assert 0.5 * (emp - exact).abs().sum() < 0.03
    incl = (bits.double() * exact[:, None]).sum(0)
    assert torch.allclose(res.inclusion[0], incl, atol=0.03)


def test_size_uniform_prior_is_normalised_over_subsets():
    n = 5
    bits = ((torch.arange(2**n)[:, None] >> torch.arange(n)) & 1).bool()
    lp = log_prior(bits.sum(-1), torch.full((2**n,), n), CRDConfig(prior="size_uniform"))
    assert torch.logsumexp(lp, 0).exp().item() == pytest.approx(1.0)


def test_exhaustive_best_matches_brute_force_and_padding():
    u = torch.tensor([[1.0, -2.0, 0.4, 3.0], [0.2, 5.0, -1.0, 0.0]])
    valid = torch.tensor([[True, True, True, True], [True, True, False, False]])
    cfg = CRDConfig(parsimony=0.5)
    subset, score = exhaustive_best(u, valid, cfg)
    assert subset.tolist() == [[True, False, False, True], [False, True, False, False]]
    assert score.tolist() == pytest.approx([1.0 + 3.0 - 1.0, 5.0 - 0.5])


def test_mh_concentrates_on_size_when_only_size_follows_a_progression():
    ms = [data.generate_matrix(np.random.default_rng(s), "center_single",
                               rules={"size": "progression", "type": "free", "color": "free"}) for s in range(12)]
    default = CRDPipeline(AttributeProposer(0.0), num_steps=300, burn_in=50, seed=1)(ms)  # no extra parsimony
    assert sum(o.selected_concepts == ["size"] for o in default) >= 10
    pipe = CRDPipeline(AttributeProposer(0.0), num_steps=300, burn_in=50, seed=1, parsimony=1.0)
    outs = pipe(ms)
    chosen = [o.selected_concepts for o in outs]
    assert sum(c == ["size"] for c in chosen) >= 10, chosen
    incl = np.array([[o.rules[c].inclusion_probability for c in ("type", "size", "color", "angle")] for o in outs])
    assert np.median(incl[:, 1]) > 0.95 and np.median(incl[:, [0, 2, 3]]) < 0.05
    assert all(o.rules["size"].rule == "progression" for o in outs if o.selected_concepts == ["size"])
    assert all(0.0 <= o.acceptance_rate <= 1.0 for o in outs) and outs[0].trace.states.shape == (4, 300, 4)


# --------------------------------------------------------------------------------------------------- data
def _check_rule(values, rule):
    rows = [values[3 * r : 3 * r + 3] for r in range(3)]
    if rule == "constant":
        return all(len(set(row)) == 1 for row in rows)
    if rule == "progression":
        steps = {row[1] - row[0] for row in rows} | {row[2] - row[1] for row in rows}
        return len(steps) == 1 and 0 not in steps
    if rule == "arithmetic":
        return all(row[2] == row[0] + row[1] for row in rows) or all(row[2] == row[0] - row[1] for row in rows)
    if rule == "distribute_three":
        return (len(set(rows[0])) == 3 and all(sorted(map(str, r)) == sorted(map(str, rows[0])) for r in rows)
                and (rows[1] == rows[0][1:] + rows[0][:1] or rows[1] == rows[0][2:] + rows[0][:2]))
    return True


def test_generated_matrices_follow_their_rules_and_the_answer_is_a_candidate():
    ms = data.generate_matrices("train", 150, 3, configuration=["center_single", "distribute_four",
                                                               "distribute_nine"])
    seen_rules = set()
    for m in ms:
        for name, spec in m["rules"].items():
            values = [p[name] for p in m["panels"]]
            assert _check_rule(values, spec["rule"]), (m["id"], name, spec, values)
            seen_rules.add((name, spec["rule"]))
        assert m["candidates"][m["target"]] == m["panels"][8]
        keys = [json.dumps(c, sort_keys=True) for c in m["candidates"]]
        assert len(set(keys)) == 8
        for p in [*m["panels"], *m["candidates"]]:
            assert p["number"] == p["position"].count("1")
    assert {("size", r) for r in ("constant", "progression", "arithmetic", "distribute_three")} <= seen_rules
    assert ("position", "free") in seen_rules and ("position", "distribute_three") in seen_rules


@pytest.mark.slow
def test_iraven_answer_sets_leave_a_context_blind_scorer_at_chance_on_1000_items():
    from hfx.utils.stats import wilson_interval

    configs = ["center_single", "distribute_four", "distribute_nine"]
    rng = np.random.default_rng(0)
    ms = data.generate_matrices("test", 1002, 0, configuration=configs)
    hits = sum(argmax_random_ties(frequency_scores(candidate_tuples(m)), rng) == m["target"] for m in ms)
    low, high = wilson_interval(hits, len(ms))
    assert low <= 0.125 <= high < 0.16
    for m in ms[:200]:  # every candidate ties under the shortcut
        assert len(set(frequency_scores(candidate_tuples(m)))) == 1
    # control: RAVEN's answer sets (one attribute changed per distractor) give the shortcut away
    raven = data.generate_matrices("test", 300, 0, configuration=configs, answer_set="raven")
    hits = sum(argmax_random_ties(frequency_scores(candidate_tuples(m)), rng) == m["target"] for m in raven)
    assert hits / len(raven) > 0.9


@pytest.mark.slow
def test_a_learned_context_blind_scorer_stays_at_chance():
    from sklearn.linear_model import LogisticRegression

    from hfx.utils.stats import wilson_interval

    names = ("number", "position", "type", "size", "color")

    def features(ms):
        x = []
        for m in ms:
            cands = candidate_tuples(m, names)
            freq = frequency_scores(cands)
            for j, c in enumerate(cands):
                x.append([c[0] == v for v in range(1, 10)] + [c[2] == v for v in data.SHAPES]
                         + [c[3] == v for v in data.SIZES] + [c[4] == v for v in data.COLORS] + [freq[j]])
        return np.asarray(x, float)

    configs = ["center_single", "distribute_four"]
    train = data.generate_matrices("train", 1500, 0, configuration=configs)
    test = data.generate_matrices("test", 1000, 0, configuration=configs)
    y = np.asarray([j == m["target"] for m in train for j in range(8)])
    clf = LogisticRegression(max_iter=2000).fit(features(train), y)
    pred = clf.predict_proba(features(test))[:, 1].reshape(-1, 8).argmax(1)
    hits = int(sum(p == m["target"] for p, m in zip(pred, test)))
    low, high = wilson_interval(hits, len(test))
    assert low <= 0.125 + 0.01 and high < 0.17


def test_load_dataset_schema_images_and_split_streams():
    ds = load_dataset("validation", 3, 5, configuration="distribute_four", image_size=64)
    assert len(ds) == 3 and {"image", "panels", "target", "attributes", "concepts", "rules"} <= set(ds.column_names)
    row = ds[1]
    assert len(row["panels"]) == 16 and row["panels"][0].size == (64, 64)
    context, candidates = data.split_puzzle_image(row["image"])
    assert np.array_equal(np.asarray(context[4]), np.asarray(row["panels"][4]))
    assert np.array_equal(np.asarray(candidates[7]), np.asarray(row["panels"][15]))
    bigger = data.generate_matrices("validation", 5, 5, configuration="distribute_four")
    assert json.loads(row["attributes"])[:8] == bigger[1]["panels"][:8]  # item i does not depend on `size`
    other = data.generate_matrices("test", 3, 5, configuration="distribute_four")
    assert all(a["panels"] != b["panels"] for a, b in zip(bigger, other))
    assert load_dataset("test", 2, 0, render=False)[0]["image"] is None


def test_generator_refuses_bad_arguments():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="configuration"):
        data.generate_matrix(rng, "left_right")
    with pytest.raises(ValueError, match="rules"):
        data.generate_matrix(rng, "center_single", rules={"number_position": "constant"})
    with pytest.raises(ValueError, match="rules\\['type'\\]"):
        data.generate_matrix(rng, "center_single", rules={"type": "progression"})
    with pytest.raises(ValueError, match="split"):
        load_dataset("dev", 3)
    with pytest.raises(ValueError, match="size"):
        load_dataset("test", 0)
    with pytest.raises(TypeError, match="size"):
        load_dataset("test", 2.5)


# ------------------------------------------------------------------------------------------ RAVEN files
SLOTS4 = [[0.25, 0.25, 0.5, 0.5], [0.25, 0.75, 0.5, 0.5], [0.75, 0.25, 0.5, 0.5], [0.75, 0.75, 0.5, 0.5]]


def _raven_panel(layout, slots, occupied, type_, size, color, angle=3):
    import xml.etree.ElementTree as ET

    panel = ET.Element("Panel")
    struct = ET.SubElement(panel, "Struct", name="Singleton")
    comp = ET.SubElement(struct, "Component", id="0", name="Grid")
    lay = ET.SubElement(comp, "Layout", name=layout, Number=str(len(occupied) - 1), Position=json.dumps(slots),
                        Uniformity="0")
    for k in occupied:
        ET.SubElement(lay, "Entity", bbox=json.dumps(slots[k]), real_bbox="[]", mask="", Type=str(type_),
                      Size=str(size), Color=str(color), Angle=str(angle))
    return panel


def write_raven_problem(folder, index, split, panels, rules, target, layout="Center_Single", slots=None,
                        modified=None):
    """One problem in RAVEN's file format: ``RAVEN_<i>_<split>.npz`` + ``.xml`` (panels: 16 tuples
    (occupied slots, type level, size level, color level))."""
    import xml.etree.ElementTree as ET

    slots = slots or [[0.5, 0.5, 1, 1]]
    root = ET.Element("Data")
    el = ET.SubElement(root, "Panels")
    for occupied, t, s, c in panels:
        el.append(_raven_panel(layout, slots, occupied, t, s, c))
    rules_el = ET.SubElement(root, "Rules")
    group = ET.SubElement(rules_el, "Rule_Group", id="0")
    for name, attr in rules:
        ET.SubElement(group, "Rule", name=name, attr=attr)
    if modified is not None:
        mod = ET.SubElement(root, "Modified_attributes")
        for i, attrs in enumerate(modified):
            cand = ET.SubElement(mod, "Candidate", id=str(i))
            for a in attrs:
                ET.SubElement(cand, "Attribute", component_id="0", name=a)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"RAVEN_{index}_{split}.xml").write_bytes(ET.tostring(root))
    images = np.full((16, 160, 160), 255, dtype=np.uint8)
    for i in range(16):
        images[i, 40 + i : 60 + i, 40:60] = 0
    np.savez(folder / f"RAVEN_{index}_{split}.npz", image=images, target=target, predict=target,
             meta_matrix=np.zeros((8, 9), np.uint8), meta_target=np.zeros(9, np.uint8), structure=np.array(["x"]),
             meta_structure=np.zeros(21, np.uint8))


def _center_single_problem(target):
    # size progression +1 (levels 0-based), type constant per row, colour constant 3
    context = [((0,), 2 + r % 2, r + c, 3) for r in range(3) for c in range(3)][:8]
    answer = ((0,), 2, 4, 3)
    wrong = [((0,), t, s, 3) for t, s in ((2, 3), (2, 5), (3, 4), (3, 3), (3, 5), (2, 1), (4, 4))]
    candidates = wrong[:target] + [answer] + wrong[target:]
    return context + candidates


def test_load_raven_reads_the_authors_format_and_crd_solves_it(tmp_path):
    rules = [("Constant", "Number/Position"), ("Constant", "Type"), ("Progression", "Size"), ("Constant", "Color")]
    for k, target in enumerate((3, 6)):
        write_raven_problem(tmp_path / "center_single", k, "test", _center_single_problem(target), rules, target)
    write_raven_problem(tmp_path / "center_single", 9, "train", _center_single_problem(0), rules, 0)
    panels4 = [((0, 1), 2, 3, 5) if i % 3 == 0 else ((0, 1, 2), 2, 3, 5) if i % 3 == 1 else ((0, 1, 2, 3), 2, 3, 5)
               for i in range(8)] + [((0, 1, 2, 3), 2, 3, 5)] + [((0, 1, 2), 2, 3, 5)] * 7
    write_raven_problem(tmp_path / "distribute_four", 0, "test", panels4,
                        [("Progression", "Number"), ("Constant", "Type"), ("Constant", "Size"), ("Constant", "Color")],
                        0, layout="Distribute_Four", slots=SLOTS4, modified=[[]] + [["number"]] * 7)
    ds = load_raven(tmp_path, "test")
    assert len(ds) == 3 and ds[0]["target"] == 3 and ds[0]["answer_set"] == "raven"
    attrs = json.loads(ds[0]["attributes"])
    assert attrs[1] == {"type": 2, "size": 2, "color": 3, "angle": 4}  # size level 1 -> value 2
    rules0 = {r["concept"]: r["rule"] for r in ds[0]["rules"]}
    assert rules0 == {"type": "constant", "size": "progression", "color": "constant", "angle": "free"}
    four = ds[2]
    assert four["answer_set"] == "iraven" and four["modified"][1] == ["number"]
    assert json.loads(four["attributes"])[0]["number"] == 2 and json.loads(four["attributes"])[0]["position"] == "1100"
    assert {r["concept"]: r["rule"] for r in four["rules"]}["position"] == "free"
    assert len(four["panels"]) == 16
    outs = CRDPipeline(AttributeProposer(0.0), parsimony=0.5)(ds)
    assert [o.answer for o in outs[:2]] == [3, 6] and outs[2].answer == 0
    assert "size" in outs[0].selected_concepts and outs[0].rules["size"].rule == "progression"
    assert len(load_raven(tmp_path, "train")) == 1
    assert len(load_raven(tmp_path, "test", configurations=["distribute_four"], with_images=False)) == 1


def test_load_raven_refuses_bad_folders_and_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a folder"):
        load_raven(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="no RAVEN_"):
        load_raven(tmp_path)
    write_raven_problem(tmp_path, 0, "test", _center_single_problem(0), [("Constant", "Size")], 0)
    (tmp_path / "RAVEN_0_test.xml").write_text("<Data><Panels>")
    with pytest.raises(ValueError, match="RAVEN_0_test.xml"):
        load_raven(tmp_path)
    (tmp_path / "RAVEN_0_test.xml").unlink()
    with pytest.raises(FileNotFoundError, match="annotation"):
        load_raven(tmp_path)


# ------------------------------------------------------------------------------------------- proposers
def test_attribute_proposer_reads_values_and_corrupts_at_the_requested_rates():
    ms = data.generate_matrices("test", 200, 1, configuration="distribute_four")
    clean = AttributeProposer(0.0).propose(ms)
    assert clean[0].names == ["number", "position", "type", "size", "color", "angle"]
    assert clean[0].concepts[3].context_values == [float(p["size"]) for p in ms[0]["panels"][:8]]
    assert all(c.confidence == 1.0 for c in clean[0].concepts)
    noisy = AttributeProposer(0.0, value_noise=0.3, seed=4).propose(ms)
    changed = [a != b for p, q in zip(clean, noisy) for c, d in zip(p.concepts, q.concepts)
               for a, b in zip(c.context_values + c.candidate_values, d.context_values + d.candidate_values)]
    assert np.mean(changed) == pytest.approx(0.3, abs=0.02)
    drop = AttributeProposer(0.0, drop_rate=0.5, seed=4).propose(ms)
    assert np.mean([len(p.concepts) for p in drop]) == pytest.approx(3.0, abs=0.3)
    extra = AttributeProposer(0.0, distractor_rate=0.5, seed=4).propose(ms)
    assert np.mean([len(p.concepts) - 6 for p in extra]) == pytest.approx(2.0, abs=0.3)
    again = AttributeProposer(0.3, seed=4).propose(ms[::-1])[::-1]  # a function of (seed, id), not of the order
    assert [p.names for p in again] == [p.names for p in AttributeProposer(0.3, seed=4).propose(ms)]


def test_concept_and_proposal_validation():
    with pytest.raises(ValueError, match="8 values"):
        Concept("size", "ordinal", [1, 2], [1])
    with pytest.raises(TypeError, match="numbers"):
        Concept("size", "ordinal", ["big"] * 8, [1])
    with pytest.raises(ValueError, match="kind"):
        Concept("size", "nominal", [1] * 8, [1])
    with pytest.raises(ValueError, match="confidence"):
        Concept("size", "ordinal", [1] * 8, [1], confidence=0.0)
    with pytest.raises(ValueError, match="finite"):
        Concept("size", "ordinal", [float("inf")] * 8, [1])
    c = Concept("size", "ordinal", [1] * 8, [1, 2])
    with pytest.raises(ValueError, match="unique"):
        ConceptProposal([c, c])
    with pytest.raises(ValueError, match="at least one concept"):
        ConceptProposal([])
    with pytest.raises(ValueError, match="same number"):
        ConceptProposal([c, Concept("color", "categorical", ["a"] * 8, ["a"])])
    with pytest.raises(ValueError, match="noise"):
        AttributeProposer(1.0)
    with pytest.raises(ValueError, match="symbolic"):
        AttributeProposer().propose([{"id": "x", "image": None}])
    with pytest.raises(ValueError, match="not valid JSON"):
        AttributeProposer().propose([{"id": "x", "attributes": "{oops", "concepts": "{}"}])


# -------------------------------------------------------------------------------------------- the VLM path
def test_parse_panel_answer_is_robust():
    from hfx.vision.crd.vlm import parse_panel_answer

    assert parse_panel_answer('{"Number": 2, "Shape": "Triangle", "size": "3", "colour": "RED"}') == {
        "number": 2.0, "type": "triangle", "size": 3.0, "color": "red"}
    assert parse_panel_answer("Sure: {'shape': 'square', 'size': 4,} done") == {"type": "square", "size": 4.0}
    assert parse_panel_answer("{number: 3, color: light green}") == {"number": 3.0, "color": "light green"}
    assert parse_panel_answer("shape: circle\nsize = 2; color: purple") == {"type": "circle", "size": 2.0,
                                                                           "color": "purple"}
    assert parse_panel_answer('```json\n{"count": 4, "size": null}\n```') == {"number": 4.0, "size": None}
    assert parse_panel_answer('{"a": "x\\"}y", "b": 1}') == {"a": 'x"}y', "b": 1.0}
    assert parse_panel_answer('{"size": 3, "filled": true,}') == {"size": 3.0, "filled": "true"}
    assert parse_panel_answer("\x13\x14 in garbage") == {}
    assert parse_panel_answer(None) == {}


class _ForceText:
    """A logits processor that makes any model emit ``ids`` then stop (a scripted tiny VLM)."""

    def __init__(self, ids):
        self.ids, self.start = list(ids), None

    def __call__(self, input_ids, scores):
        if self.start is None or input_ids.shape[1] <= self.start:
            self.start = input_ids.shape[1]
        step = min(input_ids.shape[1] - self.start, len(self.ids) - 1)
        out = torch.full_like(scores, -math.inf)
        out[:, self.ids[step]] = 0.0
        return out


@pytest.fixture(scope="module")
def tiny_vlm():
    from hfx.testing import tiny_llava

    return tiny_llava(image_size=64, patch_size=16)


@pytest.mark.slow
def test_vlm_proposer_on_a_tiny_random_llava_names_the_unparseable_panel(tiny_vlm):
    from hfx.vision.crd import VLMConceptProposer

    model, processor = tiny_vlm
    item = load_dataset("test", 1, 0, image_size=32)[0]
    proposer = VLMConceptProposer(model, processor, max_new_tokens=6, batch_size=16)
    with pytest.raises(ValueError, match=r"context panel 1 \(row 1, column 1\) of matrix 'test-center_single-0-0'"):
        proposer.propose([item])
    skip = VLMConceptProposer(model, processor, max_new_tokens=6, on_parse_error="skip")
    with pytest.raises(ValueError, match="no concept"):
        skip.propose([item])
    with pytest.raises(ValueError, match="no images"):
        proposer.propose([{"id": "empty"}])


@pytest.mark.slow
def test_vlm_proposer_parses_a_scripted_answer_end_to_end(tiny_vlm):
    from transformers import LogitsProcessorList

    from hfx.vision.crd import VLMConceptProposer

    model, processor = tiny_vlm
    tok = processor.tokenizer
    ids = tok('{"size": 3, "shape": "circle"}', add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    force = LogitsProcessorList([_ForceText(ids)])
    ds = load_dataset("test", 2, 0, image_size=32)
    proposer = VLMConceptProposer(model, processor, max_new_tokens=len(ids) + 2, batch_size=7,
                                  generation_kwargs={"logits_processor": force})
    proposals = proposer.propose([ds[0], {"id": "from-image", "image": ds[1]["image"]}])
    assert [c.name for c in proposals[0].concepts] == ["size", "type"]
    assert proposals[0].concepts[0].kind == "ordinal" and proposals[0].concepts[1].kind == "categorical"
    assert proposals[0].concepts[0].context_values == [3.0] * 8 and proposals[0].concepts[1].confidence == 1.0
    assert len(proposals[1].raw["answers"]) == 16
    out = CRDPipeline(proposer)(ds[0])
    assert out.answer in range(8) and set(out.rules) == {"size", "type"}
    # the processor's own chat template is used when it has one
    processor.chat_template = ("{% for m in messages %}{% for c in m['content'] %}{% if c['type'] == 'image' %}"
                               "<image>{% else %}{{ c['text'] }}{% endif %}{% endfor %}{% endfor %} ASSISTANT:")
    try:
        text = proposer._chat()
        assert text.startswith("<image>This image") and text.endswith("ASSISTANT:")
        assert proposer.propose([ds[0]])[0].names == ["size", "type"]
    finally:
        processor.chat_template = None


# -------------------------------------------------------------------------------------------- pipeline
def test_pipeline_outputs_save_load_round_trip_and_refusals(tmp_path):
    ds = load_dataset("test", 3, 0, configuration="distribute_four", image_size=48)
    cfg = CRDConfig(parsimony=0.25, noise_std=(0.05, 0.4), num_steps=120, burn_in=20, seed=7)
    pipe = CRDPipeline(AttributeProposer(0.1, seed=3), config=cfg)
    outs = pipe(ds)
    assert len(outs) == 3 and all(o.target == ds[i]["target"] for i, o in enumerate(outs))
    o = outs[0]
    assert sum(o.answer_probabilities) == pytest.approx(1.0) and len(o.answer_scores) == 8
    assert set(o.selected_concepts) == {k for k, r in o.rules.items() if r.selected}
    assert all(r.fitted_values is not None and len(r.fitted_values) == 9 for r in o.rules.values() if r.selected)
    json.dumps(o.to_dict())
    assert pipe(ds)[0].to_dict() == o.to_dict()  # seeded
    pipe.save_pretrained(tmp_path / "crd")
    loaded = CRDPipeline.from_pretrained(tmp_path / "crd")
    assert loaded.config == cfg and loaded.proposer.to_dict() == pipe.proposer.to_dict()
    assert [x.to_dict() for x in loaded(ds)] == [x.to_dict() for x in outs]
    assert json.loads((tmp_path / "crd" / "config.json").read_text())["model_type"] == "hfx_crd"
    assert "CRD" in (tmp_path / "crd" / "README.md").read_text()
    assert CRDPipeline.from_pretrained(tmp_path / "crd", selection="all").config.selection == "all"
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 8}))
    with pytest.raises(ValueError, match="not a CRDPipeline folder"):
        CRDPipeline.from_pretrained(other)
    with pytest.raises(ValueError, match="model_type"):
        CRDConfig.from_dict({"model_type": "hfx_memgas"})
    with pytest.raises(ValueError, match="unknown CRDConfig keys"):
        CRDConfig.from_dict({"parsimonyy": 1})
    with pytest.raises(FileNotFoundError):
        CRDPipeline.from_pretrained(tmp_path / "nope")


def test_pipeline_and_config_refuse_hostile_inputs():
    pipe = CRDPipeline()
    with pytest.raises(TypeError, match="inputs"):
        pipe(42)
    with pytest.raises(ValueError, match="empty"):
        pipe([])
    with pytest.raises(TypeError, match=r"inputs\[1\]"):
        pipe([{"attributes": "[]"}, 3])
    with pytest.raises(TypeError, match="proposer"):
        CRDPipeline(proposer=object())
    for bad, err in [({"parsimony": float("nan")}, ValueError), ({"num_steps": 0}, ValueError),
                     ({"burn_in": 500}, ValueError), ({"selection": "greedy"}, ValueError),
                     ({"noise_std": ()}, ValueError), ({"noise_std": (0.1, -1.0)}, ValueError),
                     ({"move_probs": (0.0, 1.0, 0.0)}, ValueError), ({"num_chains": True}, TypeError),
                     ({"ordinal_rules": ("constant", "constant")}, ValueError), ({"max_outliers": 9}, ValueError),
                     ({"outlier_prob": 1.0}, ValueError), ({"categorical_noise": (2.0,)}, ValueError)]:
        with pytest.raises(err):
            CRDConfig(**bad)
    with pytest.raises(ValueError, match="max_concepts"):
        CRDPipeline(max_concepts=3)(data.generate_matrices("test", 1, 0, configuration="distribute_four"))


def test_baseline_selections_and_oracle_subsets():
    ms = data.generate_matrices("test", 16, 2, configuration="center_single")
    proposals = AttributeProposer(0.0).propose(ms)
    ev = EvidenceModel(CRDConfig())(proposals)
    all_out = CRDPipeline(selection="all").solve_proposals(proposals, ms, evidence=ev)
    assert all(o.selected_concepts == p.names for o, p in zip(all_out, proposals))
    ex = CRDPipeline(selection="exhaustive", parsimony=0.0).solve_proposals(proposals, ms, evidence=ev)
    for o, e in zip(ex, ev):
        assert o.selected_concepts == [c.name for c in e if c.log_bayes_factor > 0]
    mh = CRDPipeline(parsimony=0.0, num_steps=300).solve_proposals(proposals, ms, evidence=ev)
    assert np.mean([a.selected_concepts == b.selected_concepts for a, b in zip(mh, ex)]) >= 0.9
    oracle = CRDPipeline().solve_proposals(proposals, ms, evidence=ev,
                                           subsets=[data.governed_concepts(m) for m in ms])
    assert all(sorted(o.selected_concepts) == data.governed_concepts(m) for o, m in zip(oracle, ms))
    assert np.mean([o.correct for o in oracle]) >= 0.9


def test_answer_scores_sum_the_selected_concepts_only():
    ctx_size = [1, 2, 3, 2, 3, 4, 3, 4]
    proposal = ConceptProposal([Concept("size", "ordinal", ctx_size, [5, 4, 6], 1.0, [1, 6]),
                                Concept("angle", "ordinal", [3, 7, 1, 8, 2, 5, 4, 6], [2, 8, 5], 1.0, [1, 8])])
    ev = EvidenceModel(CRDConfig())([proposal])[0]
    pipe = CRDPipeline()
    only_size = pipe.answer_scores(ev, [True, False])
    t = lambda x: torch.tensor(x, dtype=torch.float64)  # noqa: E731
    assert torch.allclose(only_size, t(ev[0].answer_log_prob))
    both = pipe.answer_scores(ev, [True, True])
    assert torch.allclose(both, t(ev[0].answer_log_prob) + t(ev[1].answer_log_prob))
    joint = CRDPipeline(answer_score="joint").answer_scores(ev, [True, False])
    assert torch.allclose(joint, t(ev[0].answer_log_prob) + t(ev[1].null_answer_log_prob))
    assert torch.all(pipe.answer_scores(ev, [False, False]) == 0)
    out = pipe.solve_proposals([proposal], subsets=[["size"]])[0]
    assert out.answer == 0 and out.selected_concepts == ["size"]


def test_concept_recovery_metric():
    rec = concept_recovery([["size", "color"], [], ["type"]], [["size", "type"], ["size"], ["type"]])
    assert rec["true_positives"] == 2 and rec["false_positives"] == 1 and rec["false_negatives"] == 2
    assert rec["precision"] == pytest.approx(2 / 3) and rec["recall"] == pytest.approx(0.5)
    assert rec["f1"] == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5)) and rec["exact_match"] == pytest.approx(1 / 3)
    assert rec["per_item"][1]["precision"] is None and rec["per_item"][1]["recall"] == 0.0
    assert concept_recovery([[]], [[]])["precision"] is None
    with pytest.raises(ValueError, match="0 items"):
        concept_recovery([], [])
    with pytest.raises(ValueError, match="paired"):
        concept_recovery([["a"]], [])
    with pytest.raises(TypeError, match="collection"):
        concept_recovery(["size"], [["size"]])
    with pytest.raises(TypeError, match="collection"):
        concept_recovery([None], [["size"]])


def test_plot_decomposition_draws_the_selected_concepts():
    import matplotlib

    matplotlib.use("Agg")
    ds = load_dataset("test", 1, 0, image_size=32)
    pipe = CRDPipeline(parsimony=0.0)
    out = pipe(ds[0])
    fig = pipe.plot(out, ds[0])
    assert len(fig.axes) == len(out.selected_concepts) + 2
    assert any(out.rules[out.selected_concepts[0]].rule in ax.get_title() for ax in fig.axes)
    with pytest.raises(ValueError, match="not in this output"):
        pipe.plot(out, concepts=["texture"])


# ----------------------------------------------------------------------------------------------------- CLI
@pytest.mark.slow
def test_cli_generate_and_solve_with_output_guards(tmp_path, capsys):
    from hfx.cli import main

    puzzles, out = tmp_path / "puzzles", tmp_path / "out"
    assert main(["crd", "generate", "--out", str(puzzles), "--size", "2", "--configuration", "distribute_four",
                 "--image-size", "48"]) == 0
    assert sorted(p.name for p in puzzles.iterdir()) == ["puzzle_0000.json", "puzzle_0000.png", "puzzle_0001.json",
                                                         "puzzle_0001.png"]
    assert main(["crd", "solve", str(puzzles), "--out", str(out), "--plot"]) == 0
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["target"] is not None
    assert (out / "pipeline" / "config.json").is_file() and len(list(out.glob("*.png"))) == 2
    assert json.loads((out / "summary.json").read_text())["puzzles"] == 2
    capsys.readouterr()
    before = (out / "results.jsonl").read_text()
    assert main(["crd", "solve", str(puzzles), "--out", str(out)]) == 2
    assert "--overwrite" in capsys.readouterr().err and (out / "results.jsonl").read_text() == before
    cases = [
        (["crd", "solve", str(tmp_path / "none"), "--out", str(tmp_path / "o1")], "does not exist"),
        (["crd", "solve", str(puzzles / "puzzle_0000.json"), "--out", str(tmp_path / "o2")], "has to be an image"),
        (["crd", "solve", str(puzzles), "--out", str(tmp_path / "o3"), "--proposer", "vlm"], "needs `--model`"),
        (["crd", "solve", str(puzzles), "--out", str(tmp_path / "o4"), "--pipeline", str(puzzles)], "--pipeline"),
        (["crd", "solve", str(tmp_path), "--out", str(tmp_path / "o5")], "holds no puzzle image"),
        (["crd", "solve", str(puzzles), "--out", str(puzzles / "puzzle_0000.png")], "existing file"),
    ]
    (puzzles / "plain.png").write_bytes((puzzles / "puzzle_0000.png").read_bytes())
    cases.append((["crd", "solve", str(puzzles / "plain.png"), "--out", str(tmp_path / "o6")], "sidecar"))
    for argv, expected in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert expected in err and err.count("\n") == 1 and "Traceback" not in err, (argv, err)
    assert not any((tmp_path / f"o{i}").exists() for i in range(1, 7))


def test_publish_and_pull_from_the_hub_cache_offline(tmp_path):
    from huggingface_hub import constants

    from hfx.hub import add_to_hf_cache, publish

    folder = publish("crd", tmp_path / "pub", repo_id="someone/crd", parsimony=0.75)
    assert (folder / "README.md").read_text().count("someone/crd") >= 1
    add_to_hf_cache(folder, "someone/crd", cache_dir=tmp_path / "cache")
    old, constants.HF_HUB_CACHE = constants.HF_HUB_CACHE, str(tmp_path / "cache")
    try:
        pulled = CRDPipeline.from_pretrained("someone/crd")
    finally:
        constants.HF_HUB_CACHE = old
    assert pulled.config == CRDConfig(parsimony=0.75) and isinstance(pulled.proposer, AttributeProposer)
    with pytest.raises(ValueError, match="source"):
        publish("crd", tmp_path / "pub2", source=str(tmp_path / "pub" / "README.md"))
