"""Per-concept evidence: rule marginal likelihoods, the no-rule model, Bayes factors and candidate predictives.

:func:`compute_evidence` turns :class:`~hfx.vision.crd.ConceptProposal` objects into :class:`ConceptEvidence`, batching
every concept of every matrix into one evaluation per rule bank (:mod:`hfx.vision.crd.rules`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from .config import CRDConfig
from .proposers import ConceptProposal
from .rules import NONE_RULE, NUM_PANELS, CategoricalRuleBank, OrdinalRuleBank


@dataclass
class ConceptEvidence:
    """How well one concept of one matrix follows a rule.

    Attributes:
        name (`str`), kind (`str`), confidence (`float`): from the proposal.
        rule_names (`tuple[str]`): the rules considered (without the no-rule model).
        rule_log_evidence (`list[float]`): ``log ML_r`` of the 8 context panels per rule (nats).
        null_log_evidence (`float`): ``log ML`` of the no-rule model.
        log_evidence (`float`): ``log sum_r ML_r / R`` (the rule-averaged evidence).
        log_bayes_factor (`float`): ``log_evidence - null_log_evidence``.
        rule_posterior (`dict[str, float]`): ``p(rule | context)`` (uniform prior over rules).
        best_rule (`str`): the rule with the largest evidence.
        answer_log_prob (`list[float]`): ``log p(value of candidate j | context)`` under the rules (NaN where the
            candidate has no value).
        null_answer_log_prob (`list[float]`): the same under the no-rule model.
    """

    name: str
    kind: str
    confidence: float
    rule_names: tuple[str, ...]
    rule_log_evidence: list[float]
    null_log_evidence: float
    log_evidence: float
    log_bayes_factor: float
    rule_posterior: dict[str, float]
    best_rule: str
    answer_log_prob: list[float]
    null_answer_log_prob: list[float] = field(default_factory=list)


class EvidenceModel:
    """The rule banks of a config, built once (kernel factorisations are cached inside).

    Args:
        config (:class:`~hfx.vision.crd.CRDConfig`).
    """

    def __init__(self, config: CRDConfig):
        self.config = config
        self.ordinal = OrdinalRuleBank(config)
        self.categorical = CategoricalRuleBank(config)
        self.one_hot = OrdinalRuleBank(config, rules=config.categorical_rules, max_outliers=0)

    # --------------------------------------------------------------------------------------------------------
    def __call__(self, proposals: Sequence[ConceptProposal]) -> list[list[ConceptEvidence]]:
        """Evidence of every concept of every proposal.

        Returns:
            `list[list[ConceptEvidence]]`: per proposal, per concept (in the proposal's order).
        """
        results: list[list[ConceptEvidence | None]] = [[None] * len(p.concepts) for p in proposals]
        ordinal, categorical = [], []
        for i, p in enumerate(proposals):
            for j, c in enumerate(p.concepts):
                (ordinal if c.kind == "ordinal" else categorical).append((i, j, c))
        if ordinal:
            self._ordinal(ordinal, results)
        if categorical:
            if self.config.categorical_likelihood == "partition":
                self._categorical(categorical, results)
            else:
                self._one_hot(categorical, results)
        return results

    def _finish(self, results, entries, rule_names, ctx_rules, cand_rules):
        """ctx_rules: (n, R+1) context log ML per rule (last = none); cand_rules: (n, J, R+1), NaN for candidates
        without a value. Vectorised over the n entries."""
        n_rules = len(rule_names) - 1
        log_prior = -math.log(n_rules)
        rules_ctx = ctx_rules[:, :n_rules]
        evidence = torch.logsumexp(rules_ctx, 1) + log_prior  # (n,)
        posterior = torch.softmax(rules_ctx, 1)
        best = torch.argmax(rules_ctx, 1)
        if self.config.rule_averaging == "bma":
            pred = torch.logsumexp(cand_rules[:, :, :n_rules], 2) + log_prior - evidence[:, None]
        else:
            pick = best[:, None, None].expand(-1, cand_rules.shape[1], 1)
            pred = cand_rules.gather(2, pick)[..., 0] - rules_ctx.gather(1, best[:, None])
        null_pred = cand_rules[:, :, n_rules] - ctx_rules[:, n_rules, None]
        bf = evidence - ctx_rules[:, n_rules]
        lists = [t.tolist() for t in (rules_ctx, ctx_rules[:, n_rules], evidence, bf, posterior, best, pred, null_pred)]
        names = tuple(rule_names[:n_rules])
        for row, (i, j, concept) in enumerate(entries):
            r_ctx, null, ev, b, post, bst, pr, npr = (x[row] for x in lists)
            results[i][j] = ConceptEvidence(
                name=concept.name,
                kind=concept.kind,
                confidence=concept.confidence,
                rule_names=names,
                rule_log_evidence=r_ctx,
                null_log_evidence=null,
                log_evidence=ev,
                log_bayes_factor=b,
                rule_posterior=dict(zip(names, post)),
                best_rule=names[bst],
                answer_log_prob=pr,
                null_answer_log_prob=npr,
            )

    # --------------------------------------------------------------------------------------------------------
    def _ordinal(self, entries, results):
        rows, centers, lpo, n_cand = [], [], [], []
        for _, _, c in entries:
            low, high = c.value_range()
            ctx = [math.nan if v is None else v for v in c.context_values]
            rows.append([*ctx, math.nan])
            for v in c.candidate_values:
                rows.append([*ctx, math.nan if v is None else v])
            centers += [(low + high) / 2] * (1 + len(c.candidate_values))
            lpo += [(low, high)] * (1 + len(c.candidate_values))
            n_cand.append(len(c.candidate_values))
        values = torch.tensor(rows, dtype=torch.float64)
        comp = self.ordinal.component_log_ml(values, torch.tensor(centers), torch.tensor(lpo, dtype=torch.float64))
        rule = self.ordinal.rule_log_ml(comp)
        self._split_and_finish(results, entries, self.ordinal.rule_names, rule, values, n_cand)

    def _split_and_finish(self, results, entries, rule_names, rule, values, n_cand, missing=None):
        groups: dict[int, tuple[list, list, list]] = {}
        start = 0
        for k, n in enumerate(n_cand):
            cand = rule[start + 1 : start + 1 + n].clone()
            miss = torch.isnan(values[start + 1 : start + 1 + n, NUM_PANELS - 1]) if missing is None else missing[k]
            cand[miss] = math.nan
            group = groups.setdefault(n, ([], [], []))
            group[0].append(entries[k])
            group[1].append(rule[start])
            group[2].append(cand)
            start += 1 + n
        for group_entries, ctx, cand in groups.values():  # equal candidate counts are evaluated together
            self._finish(results, group_entries, rule_names, torch.stack(ctx), torch.stack(cand))

    def _categorical(self, entries, results):
        rows, ks, n_cand, missing = [], [], [], []
        for _, _, c in entries:
            labels = c.categories()
            index = {label: i for i, label in enumerate(labels)}
            ctx = [-1 if v is None else index[v] for v in c.context_values]
            rows.append([*ctx, -1])
            for v in c.candidate_values:
                rows.append([*ctx, -1 if v is None else index[v]])
            ks += [max(len(labels), 1)] * (1 + len(c.candidate_values))
            n_cand.append(len(c.candidate_values))
            missing.append(torch.tensor([v is None for v in c.candidate_values]))
        values = torch.tensor(rows, dtype=torch.long)
        comp = self.categorical.component_log_ml(values, torch.tensor(ks))
        rule = self.categorical.rule_log_ml(comp)
        self._split_and_finish(results, entries, self.categorical.rule_names, rule, values.to(torch.float64), n_cand,
                               missing)

    def _one_hot(self, entries, results):
        """GP regression on one-hot codes; the candidate predictive is renormalised over the K categories."""
        bank = self.one_hot
        for i, j, c in entries:
            labels = c.categories()
            k_total = max(len(labels), 1)
            seen = sorted({v for v in [*c.context_values, *c.candidate_values] if v is not None}, key=labels.index)
            channels = list(seen) + ([None] if k_total > len(seen) else [])  # None: a category never seen
            multiplicity = torch.tensor([1.0] * len(seen) + ([k_total - len(seen)] if k_total > len(seen) else []),
                                        dtype=torch.float64)
            rows = []
            for ch in channels:
                ctx = [math.nan if v is None else float(v == ch) for v in c.context_values]
                rows += [[*ctx, math.nan], [*ctx, 0.0], [*ctx, 1.0]]
            values = torch.tensor(rows, dtype=torch.float64)
            n = values.shape[0]
            comp = bank.component_log_ml(values, torch.full((n,), 1.0 / k_total),
                                         torch.tensor([[0.0, 1.0]] * n, dtype=torch.float64))
            comp = comp.reshape(len(channels), 3, -1)  # (channel, {ctx, 0, 1}, C)
            ctx_c = (comp[:, 0] * multiplicity[:, None]).sum(0)  # (C,)
            zero_c = (comp[:, 1] * multiplicity[:, None]).sum(0)
            per_cat = zero_c[None] + comp[:, 2] - comp[:, 1]  # (channel, C): ML_c(ctx + e_channel)
            ctx_rule = bank.rule_log_ml(ctx_c[None])[0]
            cat_rule = bank.rule_log_ml(per_cat)  # (channel, R+1)
            # renormalise the predictive over all K categories (each unseen one counted once per multiplicity)
            norm = torch.logsumexp(cat_rule + torch.log(multiplicity)[:, None], 0)  # (R+1,)
            cand = torch.full((len(c.candidate_values), len(bank.rule_names)), math.nan, dtype=torch.float64)
            for q, v in enumerate(c.candidate_values):
                if v is not None:
                    cand[q] = cat_rule[channels.index(v)] - norm + ctx_rule
            self._finish(results, [(i, j, c)], bank.rule_names, ctx_rule[None], cand[None])


def compute_evidence(proposals: Sequence[ConceptProposal], config: CRDConfig | None = None,
                     model: EvidenceModel | None = None) -> list[list[ConceptEvidence]]:
    """Evidence of every proposed concept (see :class:`EvidenceModel`).

    Args:
        proposals (`Sequence[ConceptProposal]`).
        config (:class:`~hfx.vision.crd.CRDConfig`, *optional*): defaults to ``CRDConfig()``.
        model (:class:`EvidenceModel`, *optional*): reuse the banks (and their cached factorisations).

    Returns:
        `list[list[ConceptEvidence]]`.
    """
    model = model or EvidenceModel(config or CRDConfig())
    return model(proposals)


__all__ = ["NONE_RULE", "ConceptEvidence", "EvidenceModel", "compute_evidence"]
