"""`CRDPipeline`: concept proposal -> rule evidence -> MH concept selection -> answer scores, with save / load."""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from huggingface_hub import ModelHubMixin

from hfx.utils.validation import check_bool

from .config import CONFIG_MODEL_TYPE, CRDConfig
from .evidence import ConceptEvidence, EvidenceModel
from .proposers import AttributeProposer, ConceptProposal
from .selection import MHResult, exhaustive_best, metropolis_hastings, random_subsets


PAPER_URL = "https://openreview.net/forum?id=huEYU44Ax4"
PROPOSER_FILE = "proposer.json"



@dataclass
class ConceptRule:
    """One concept's rule in a matrix.

    Attributes:
        name (`str`), kind (`str`), confidence (`float`).
        rule (`str`): the rule with the largest evidence.
        rule_posterior (`dict[str, float]`): ``p(rule | context)``.
        log_evidence (`float`): the rule-averaged log marginal likelihood of the 8 context panels (nats).
        log_bayes_factor (`float`): against the no-rule model.
        selected (`bool`): in the reported subset.
        inclusion_probability (`float` or `None`): ``p(c in S)`` from the chains (MH only).
        values (`list`): the 9 panel values (context, then the chosen candidate's).
        fitted_values (`list` or `None`): the rule's fit at the 9 panels (ordinal: posterior mean of the GP;
            categorical: the most probable category of each panel's class); computed for selected concepts.
    """

    name: str
    kind: str
    confidence: float
    rule: str
    rule_posterior: dict[str, float]
    log_evidence: float
    log_bayes_factor: float
    selected: bool
    inclusion_probability: float | None
    values: list
    fitted_values: list | None = None


@dataclass
class MHTrace:
    """The chains of one matrix.

    Attributes:
        concept_names (`list[str]`): the columns of ``states``.
        states (`torch.Tensor` of shape `(chains, steps, n)`, bool), scores (`(chains, steps)`),
        accepted (`(chains, steps)`, bool), log_alpha (`(chains, steps)`).
        acceptance_rate (`list[float]`): per chain, after burn-in.
        burn_in (`int`).
    """

    concept_names: list[str]
    states: torch.Tensor
    scores: torch.Tensor
    accepted: torch.Tensor
    log_alpha: torch.Tensor
    acceptance_rate: list[float]
    burn_in: int


@dataclass
class CRDOutput:
    """The decomposition of one matrix.

    Attributes:
        item_id (`str` or `None`).
        selected_concepts (`list[str]`): the concepts found to follow rules.
        rules (`dict[str, ConceptRule]`): every proposed concept with its rule and evidence.
        answer (`int`): the chosen candidate (ties broken at random, seeded).
        answer_scores (`list[float]`): ``sum_{c in S} log p_c(candidate | context)`` per candidate (nats).
        answer_probabilities (`list[float]`): ``softmax(answer_scores)``.
        selection (`str`): how the subset was chosen (``config.selection``).
        acceptance_rate (`float` or `None`): mean over chains (MH only).
        trace (:class:`MHTrace` or `None`): the chains (MH only, when ``return_trace``).
        proposal (:class:`~hfx.vision.crd.ConceptProposal`): the proposer's output.
        target (`int` or `None`): the item's answer, when it has one; ``correct`` then says whether it was chosen.
    """

    item_id: str | None
    selected_concepts: list[str]
    rules: dict[str, ConceptRule]
    answer: int
    answer_scores: list[float]
    answer_probabilities: list[float]
    selection: str
    acceptance_rate: float | None = None
    trace: MHTrace | None = field(default=None, repr=False)
    proposal: ConceptProposal | None = field(default=None, repr=False)
    target: int | None = None

    @property
    def correct(self) -> bool | None:
        """Whether ``answer == target`` (``None`` without a target)."""
        return None if self.target is None else self.answer == self.target

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (no trace tensors, no proposal).

        Returns:
            `dict`.
        """
        return {
            "item_id": self.item_id,
            "selected_concepts": self.selected_concepts,
            "answer": self.answer,
            "target": self.target,
            "correct": self.correct,
            "answer_scores": self.answer_scores,
            "answer_probabilities": self.answer_probabilities,
            "selection": self.selection,
            "acceptance_rate": self.acceptance_rate,
            "rules": {
                k: {"kind": r.kind, "rule": r.rule, "rule_posterior": r.rule_posterior,
                    "log_evidence": r.log_evidence, "log_bayes_factor": r.log_bayes_factor, "selected": r.selected,
                    "inclusion_probability": r.inclusion_probability, "confidence": r.confidence,
                    "values": r.values, "fitted_values": r.fitted_values}
                for k, r in self.rules.items()
            },
        }


def _safe(v: float) -> float | None:
    return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else v


class CRDPipeline(
    ModelHubMixin,
    library_name="hfx",
    tags=["hfx", "crd", "visual-reasoning", "raven", "gaussian-process", "mcmc"],
    license="apache-2.0",
    paper_url=PAPER_URL,
    repo_url="https://github.com/hfx-org/hfx",
):
    r"""Concept-level rule decomposition of a 3 x 3 visual matrix (CRD; ICLR 2026, OpenReview huEYU44Ax4).

    1. ``proposer`` (an LVLM via :class:`~hfx.vision.crd.VLMConceptProposer`, or
       :class:`~hfx.vision.crd.AttributeProposer`) proposes concepts with a value per panel and a confidence [paper];
    2. each concept gets a GP rule function over the panel layout; its evidence under every rule and under no rule
       (:mod:`hfx.vision.crd.rules`) [paper: GPs; kernels and likelihoods: reconstruction];
    3. Metropolis-Hastings over concept subsets with the confidence-guided add / remove / swap proposal and a
       parsimony prior selects the concepts that follow rules (:mod:`hfx.vision.crd.selection`) [paper: MH with an
       LVLM-guided proposal; details: reconstruction];
    4. every candidate answer is scored by ``sum_{c in S} log p_c(candidate's value | context)``, the rules'
       posterior predictive at the missing panel [spec: reconstruction]; the best candidate is the answer.

    It is a :class:`huggingface_hub.ModelHubMixin`: ``save_pretrained(dir)`` writes ``config.json`` (the
    :class:`~hfx.vision.crd.CRDConfig`, ``model_type = "hfx_crd"``), ``proposer.json`` (an
    :class:`~hfx.vision.crd.AttributeProposer`'s settings, or a VLM proposer's model path) and a model card;
    ``from_pretrained`` restores the config exactly and refuses another artifact's folder.

    Args:
        proposer (:class:`~hfx.vision.crd.ConceptProposer`, *optional*): defaults to ``AttributeProposer()``.
        config (:class:`~hfx.vision.crd.CRDConfig` or `dict`, *optional*): defaults to ``CRDConfig()``.
        **config_overrides: fields of the config to change (e.g. ``selection="exhaustive"``).

    Raises:
        TypeError: if ``proposer`` has no ``propose`` method or ``config`` is neither a config nor a dict.
        ValueError: for bad config values.

    Example:

    ```python
    from hfx.vision.crd import AttributeProposer, CRDPipeline, load_dataset

    matrices = load_dataset("test", size=4, seed=0, configuration="distribute_four")
    pipe = CRDPipeline(proposer=AttributeProposer(noise=0.1, seed=0))
    out = pipe(matrices[0])
    print(out.selected_concepts, out.answer, matrices[0]["target"])
    print({name: rule.rule for name, rule in out.rules.items() if rule.selected})
    fig = pipe.plot(out, matrices[0])  # the 3 x 3 grid with each selected concept's fitted values
    ```
    """

    def __init__(self, proposer=None, config: CRDConfig | dict | None = None, **config_overrides):
        if proposer is None:
            proposer = AttributeProposer()
        if not callable(getattr(proposer, "propose", None)):
            raise TypeError(f"`proposer` has to have a `propose(items)` method, but is {type(proposer).__name__}")
        if config is None:
            config = CRDConfig()
        elif isinstance(config, dict):
            config = CRDConfig.from_dict(config)
        elif not isinstance(config, CRDConfig):
            raise TypeError(f"`config` has to be a CRDConfig or a dict, but is {type(config).__name__}")
        if config_overrides:
            config = config.replace(**config_overrides)
        self.proposer = proposer
        self.config = config
        self._evidence_model: EvidenceModel | None = None
        self.timings: dict[str, float] = {}  # seconds per stage of the last call (propose, evidence, selection, answers)

    @property
    def evidence_model(self) -> EvidenceModel:
        """The rule banks (built on first use, cached)."""
        if self._evidence_model is None or self._evidence_model.config is not self.config:
            self._evidence_model = EvidenceModel(self.config)
        return self._evidence_model

    # --------------------------------------------------------------------------------------------- inputs
    @staticmethod
    def _as_items(inputs) -> tuple[list[Mapping[str, Any]], bool]:
        single = isinstance(inputs, Mapping) or hasattr(inputs, "convert") and hasattr(inputs, "size")
        if single:
            inputs = [inputs]
        if hasattr(inputs, "column_names") and hasattr(inputs, "__getitem__"):  # a datasets.Dataset
            inputs = [inputs[i] for i in range(len(inputs))]
        if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
            raise TypeError(
                "`inputs` has to be a matrix (a dataset row / dict, or a PIL image of a puzzle), a list of them or a "
                f"datasets.Dataset, but is {type(inputs).__name__}"
            )
        items = []
        for i, item in enumerate(inputs):
            if hasattr(item, "convert") and hasattr(item, "size"):
                item = {"image": item}
            if not isinstance(item, Mapping):
                raise TypeError(f"`inputs[{i}]` has to be a dict (dataset row) or a PIL image, but is "
                                f"{type(item).__name__}")
            items.append(item)
        if not items:
            raise ValueError("`inputs` is empty: nothing to solve")
        return items, single

    # ------------------------------------------------------------------------------------------------ call
    def __call__(self, inputs, *, return_trace: bool = True, return_fitted: bool = True,
                 progress: bool | None = None):
        """Decompose and solve one or more matrices.

        Args:
            inputs: a dataset row (``dict``) or PIL puzzle image, a list of them, or a ``datasets.Dataset``.
            return_trace (`bool`, *optional*, defaults to `True`): keep the MH chains in the outputs.
            return_fitted (`bool`, *optional*, defaults to `True`): compute the fitted values of selected concepts.
            progress (`bool`, *optional*): a tqdm bar over batches (default: when there is more than one batch).

        Returns:
            :class:`CRDOutput` for one input, else `list[CRDOutput]`.

        Raises:
            TypeError / ValueError: for unusable inputs (before any proposer call).
        """
        return_trace = check_bool("return_trace", return_trace)
        return_fitted = check_bool("return_fitted", return_fitted)
        items, single = self._as_items(inputs)
        bs = self.config.batch_size
        batches = range(0, len(items), bs)
        show = len(batches) > 1 if progress is None else check_bool("progress", progress)
        if show:
            from tqdm.auto import tqdm

            batches = tqdm(batches, desc="CRD", unit="batch")
        outputs = []
        timings = {"propose": 0.0, "evidence": 0.0, "selection": 0.0, "answers": 0.0}
        for k, start in enumerate(batches):
            chunk = items[start : start + bs]
            tic = time.perf_counter()
            proposals = self.proposer.propose(chunk)
            timings["propose"] += time.perf_counter() - tic
            if len(proposals) != len(chunk):
                raise ValueError(f"the proposer returned {len(proposals)} proposals for {len(chunk)} matrices")
            outputs += self.solve_proposals(proposals, chunk, batch_index=k, return_trace=return_trace,
                                            return_fitted=return_fitted)
            for key in ("evidence", "selection", "answers"):
                timings[key] += self.timings.get(key, 0.0)
        self.timings = timings
        return outputs[0] if single else outputs

    def solve_proposals(self, proposals: Sequence[ConceptProposal], items: Sequence[Mapping] | None = None, *,
                        batch_index: int = 0, return_trace: bool = True, return_fitted: bool = True,
                        evidence: list[list[ConceptEvidence]] | None = None,
                        subsets: list[list[str]] | None = None) -> list[CRDOutput]:
        """Steps 2-4 on given proposals (the proposer is not called).

        Args:
            proposals (`Sequence[ConceptProposal]`).
            items (`Sequence[Mapping]`, *optional*): the matrices (their ``id`` / ``target`` go into the outputs).
            batch_index (`int`, *optional*, defaults to `0`): mixed into the seed (one stream per batch).
            evidence (*optional*): precomputed :func:`~hfx.vision.crd.compute_evidence` output.
            subsets (`list[list[str]]`, *optional*): fixed concept subsets (skips the selection; e.g. an oracle).

        Returns:
            `list[CRDOutput]`.
        """
        if not proposals:
            return []
        tic = time.perf_counter()
        evidence = evidence if evidence is not None else self.evidence_model(proposals)
        toc = time.perf_counter()
        self.timings = {"evidence": toc - tic}
        generator = torch.Generator().manual_seed(self.config.seed * 1_000_003 + batch_index)
        n = max(len(p.concepts) for p in proposals)
        if n > self.config.max_concepts:
            raise ValueError(f"a matrix has {n} proposed concepts, more than `max_concepts` = {self.config.max_concepts}")
        b = len(proposals)
        valid = torch.zeros(b, n, dtype=torch.bool)
        util = torch.zeros(b, n, dtype=torch.float64)
        conf = torch.zeros(b, n, dtype=torch.float64)
        for i, ev in enumerate(evidence):
            for j, e in enumerate(ev):
                valid[i, j] = True
                util[i, j] = e.log_bayes_factor if self.config.subset_score == "bayes_factor" else e.log_evidence
                conf[i, j] = e.confidence
        mh: MHResult | None = None
        if subsets is not None:
            chosen = torch.zeros(b, n, dtype=torch.bool)
            for i, names in enumerate(subsets):
                known = proposals[i].names
                for name in names:
                    if name in known:
                        chosen[i, known.index(name)] = True
            selection = "given"
        elif self.config.selection == "mh":
            mh = metropolis_hastings(util, conf, valid, self.config, generator)
            chosen, selection = mh.subset, "mh"
        elif self.config.selection == "exhaustive":
            chosen, selection = exhaustive_best(util, valid, self.config)[0], "exhaustive"
        elif self.config.selection == "all":
            chosen, selection = valid.clone(), "all"
        else:
            chosen, selection = random_subsets(valid, generator), "random"
        tac = time.perf_counter()
        self.timings["selection"] = tac - toc
        outputs = []
        for i, (proposal, ev) in enumerate(zip(proposals, evidence)):
            item = items[i] if items is not None else {}
            outputs.append(self._output(proposal, ev, chosen[i], mh, i, item, selection, generator, return_trace,
                                        return_fitted))
        self.timings["answers"] = time.perf_counter() - tac
        return outputs

    def answer_scores(self, evidence: Sequence[ConceptEvidence], selected: Sequence[bool]) -> torch.Tensor:
        """``sum_{c in S} log p_c(candidate | context)`` (plus the no-rule predictive of unselected concepts with
        ``answer_score="joint"``); a concept with a candidate lacking its value is left out for all candidates.

        Returns:
            `torch.Tensor` of shape `(num_candidates,)` (float64).
        """
        j = len(evidence[0].answer_log_prob)
        scores = torch.zeros(j, dtype=torch.float64)
        for e, s in zip(evidence, selected):
            lp = torch.tensor(e.answer_log_prob if s else e.null_answer_log_prob, dtype=torch.float64)
            if torch.isnan(lp).any():
                continue
            if s or self.config.answer_score == "joint":
                scores = scores + lp
        return scores

    def _output(self, proposal, ev, chosen, mh, i, item, selection, generator, return_trace, return_fitted):
        sel = chosen[: len(ev)].tolist()
        scores = self.answer_scores(ev, sel)
        best = scores.max()
        tied = torch.nonzero(scores >= best - 1e-9).flatten()
        answer = int(tied[torch.randint(len(tied), (1,), generator=generator)].item()) if len(tied) > 1 else int(tied[0])
        probs = torch.softmax(scores, 0).tolist()
        rules = {}
        for j, (c, e) in enumerate(zip(proposal.concepts, ev)):
            values = [*c.context_values, c.candidate_values[answer]]
            fitted = self._fitted(c, e) if (return_fitted and sel[j]) else None
            rules[c.name] = ConceptRule(
                name=c.name, kind=c.kind, confidence=c.confidence, rule=e.best_rule, rule_posterior=e.rule_posterior,
                log_evidence=e.log_evidence, log_bayes_factor=e.log_bayes_factor, selected=bool(sel[j]),
                inclusion_probability=float(mh.inclusion[i, j]) if mh is not None else None, values=values,
                fitted_values=fitted,
            )
        trace, rate = None, None
        if mh is not None:
            rate = float(mh.acceptance_rate[i].mean())
            if return_trace:
                n = len(ev)
                trace = MHTrace(proposal.names, mh.states[i, :, :, :n].clone(), mh.scores[i].clone(),
                                mh.accepted[i].clone(), mh.log_alpha[i].clone(),
                                mh.acceptance_rate[i].tolist(), mh.burn_in)
        target = item.get("target") if isinstance(item, Mapping) else None
        return CRDOutput(
            item_id=proposal.item_id if proposal.item_id is not None else item.get("id"),
            selected_concepts=[c.name for c, s in zip(proposal.concepts, sel) if s],
            rules=rules, answer=answer, answer_scores=[_safe(float(s)) for s in scores.tolist()],
            answer_probabilities=probs, selection=selection, acceptance_rate=rate, trace=trace, proposal=proposal,
            target=None if target is None else int(target),
        )

    def _fitted(self, concept, evidence: ConceptEvidence) -> list:
        model = self.evidence_model
        if concept.kind == "ordinal":
            low, high = concept.value_range()
            values = torch.tensor([math.nan if v is None else v for v in concept.context_values] + [math.nan],
                                  dtype=torch.float64)
            fit = model.ordinal.fitted_values(values, (low + high) / 2, (low, high), evidence.best_rule)
            return [round(float(v), 4) for v in fit]
        labels = concept.categories()
        if self.config.categorical_likelihood != "partition" or len(labels) == 0:
            return None
        index = {label: k for k, label in enumerate(labels)}
        values = torch.tensor([-1 if v is None else index[v] for v in concept.context_values] + [-1])
        fit = model.categorical.fitted_categories(values, len(labels), evidence.best_rule)
        return [labels[int(k)] for k in fit.tolist()]

    # -------------------------------------------------------------------------------------------------- plot
    def plot(self, output: CRDOutput, item: Mapping | None = None, **kwargs):
        """The decomposition as a figure (:func:`hfx.vision.crd.plotting.plot_decomposition`).

        Returns:
            `matplotlib.figure.Figure`.
        """
        from .plotting import plot_decomposition

        return plot_decomposition(output, item, **kwargs)

    # ------------------------------------------------------------------------------------------ save / load
    def _save_pretrained(self, save_directory: Path) -> None:
        save_directory = Path(save_directory)
        (save_directory / "config.json").write_text(json.dumps(self.config.to_dict(), indent=2, sort_keys=True))
        spec = proposer_spec(self.proposer)
        (save_directory / PROPOSER_FILE).write_text(json.dumps(spec, indent=2, sort_keys=True))

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str | os.PathLike, *, proposer=None,
                        revision: str | None = None, cache_dir: str | os.PathLike | None = None,
                        force_download: bool = False, local_files_only: bool = False, token: str | bool | None = None,
                        **config_overrides) -> CRDPipeline:
        """Load a pipeline saved by :meth:`save_pretrained` (a local folder or a Hub repo id).

        Args:
            pretrained_model_name_or_path (`str` or `os.PathLike`): the folder or repo id.
            proposer (*optional*): the proposer to use; default: rebuilt from ``proposer.json`` (an
                :class:`~hfx.vision.crd.AttributeProposer`, or a VLM proposer loaded from its recorded path).
            revision, cache_dir, force_download, local_files_only, token: as in ``huggingface_hub.snapshot_download``.
            **config_overrides: config fields to change after loading.

        Returns:
            :class:`CRDPipeline` whose config equals the saved one (plus the overrides).

        Raises:
            FileNotFoundError: if the folder does not exist.
            ValueError: if it holds another artifact (checked from its ``config.json`` before anything is built).
        """
        from hfx._artifacts import ArtifactNotFoundError, artifact_type, hub_offline, looks_like_path

        model_id = str(pretrained_model_name_or_path)
        if os.path.isdir(model_id):
            folder = Path(model_id)
        elif looks_like_path(model_id) or os.path.exists(model_id):
            raise ArtifactNotFoundError(f"`pretrained_model_name_or_path` {model_id!r} is not a folder")
        else:
            from huggingface_hub import snapshot_download

            folder = Path(snapshot_download(repo_id=model_id, revision=revision, cache_dir=cache_dir,
                                            force_download=force_download,
                                            local_files_only=local_files_only or hub_offline(), token=token))
        kind = artifact_type(folder)
        if kind != CONFIG_MODEL_TYPE:
            raise ValueError(
                f"`{model_id}` is not a CRDPipeline folder (it holds a {kind!r} artifact): pass a folder written by "
                "`CRDPipeline.save_pretrained`"
            )
        config = CRDConfig.from_dict(json.loads((folder / "config.json").read_text(encoding="utf-8")))
        if proposer is None:
            spec_path = folder / PROPOSER_FILE
            spec = json.loads(spec_path.read_text(encoding="utf-8")) if spec_path.is_file() else {"type": "attribute"}
            proposer = proposer_from_spec(spec)
        return cls(proposer=proposer, config=config, **config_overrides)

    @classmethod
    def _from_pretrained(cls, *, model_id: str, **kwargs: Any) -> CRDPipeline:  # the mixin's hook
        keep = {k: v for k, v in kwargs.items() if k in ("proposer", "revision", "cache_dir", "force_download",
                                                         "local_files_only", "token")}
        return cls.from_pretrained(model_id, **keep)

    def generate_model_card(self, *args, **kwargs):
        """The model card rendered from ``model_cards/crd/README.md`` (:func:`hfx.hub.render_model_card`).

        Returns:
            `huggingface_hub.ModelCard`.
        """
        from hfx.hub import card_data, render_model_card

        data = card_data(method="crd", tags=["visual-reasoning", "raven", "gaussian-process", "mcmc"],
                         model_name=kwargs.pop("model_name", "CRD pipeline config"))
        return render_model_card("crd", data, config=self.config.to_dict(), proposer=proposer_spec(self.proposer),
                                 **kwargs)

    def __repr__(self) -> str:
        return f"CRDPipeline(proposer={self.proposer!r}, selection={self.config.selection!r})"


def proposer_spec(proposer) -> dict[str, Any]:
    """What ``save_pretrained`` records about a proposer (:class:`AttributeProposer` settings; a VLM proposer's model
    path; otherwise its class name).

    Returns:
        `dict` with a ``type`` key.
    """
    to_dict = getattr(proposer, "to_dict", None)
    if callable(to_dict):
        return dict(to_dict())
    return {"type": "custom", "class": type(proposer).__name__}


def proposer_from_spec(spec: Mapping[str, Any]):
    """Rebuild a proposer from :func:`proposer_spec` (a VLM is loaded from its recorded local path).

    Returns:
        a proposer.

    Raises:
        ValueError: for a custom proposer, which has to be passed as ``proposer=``.
    """
    kind = spec.get("type")
    if kind == "attribute":
        return AttributeProposer(**{k: v for k, v in spec.items() if k != "type"})
    if kind == "vlm":
        from .vlm import VLMConceptProposer

        model = spec.get("model_name_or_path")
        if not model:
            raise ValueError("this CRD folder names no VLM path: pass `proposer=VLMConceptProposer(...)`")
        return VLMConceptProposer.from_pretrained(model, **spec.get("settings", {}))
    raise ValueError(f"this CRD folder was saved with a {spec.get('class', kind)!r} proposer, which cannot be rebuilt: "
                     "pass `proposer=` to `from_pretrained`")


__all__ = ["CRDOutput", "CRDPipeline", "ConceptRule", "MHTrace", "proposer_from_spec", "proposer_spec"]
