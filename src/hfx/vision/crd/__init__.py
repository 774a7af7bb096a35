"""CRD: concept-level rule decomposition of visual scenes (ICLR 2026, OpenReview huEYU44Ax4).

* :class:`CRDPipeline` / :class:`CRDConfig` / :class:`CRDOutput` -- proposer -> GP rule evidence -> MH concept
  selection -> answer scores; ``save_pretrained`` / ``from_pretrained`` of the config; ``plot``.
* :class:`ConceptProposer` (protocol), :class:`AttributeProposer` (symbolic, with noise),
  :class:`VLMConceptProposer` (any ``AutoModelForImageTextToText`` + ``AutoProcessor``).
* :mod:`~hfx.vision.crd.rules` -- the rule GPs and the categorical partition likelihood;
  :mod:`~hfx.vision.crd.selection` -- Metropolis-Hastings and the baselines.
* :func:`load_dataset` (generated RAVEN-style matrices with I-RAVEN answer sets, rendered with PIL),
  :func:`load_raven` (RAVEN / I-RAVEN files), :func:`concept_recovery`.
"""

from hfx._lazy import attach


_LAZY = {
    "CRDConfig": ".config",
    "CRDPipeline": ".pipeline",
    "CRDOutput": ".pipeline",
    "ConceptRule": ".pipeline",
    "MHTrace": ".pipeline",
    "Concept": ".proposers",
    "ConceptProposal": ".proposers",
    "ConceptProposer": ".proposers",
    "AttributeProposer": ".proposers",
    "VLMConceptProposer": ".vlm",
    "ConceptEvidence": ".evidence",
    "compute_evidence": ".evidence",
    "metropolis_hastings": ".selection",
    "exhaustive_best": ".selection",
    "load_dataset": ".data",
    "load_raven": ".data",
    "load_iraven": ".data",
    "generate_matrix": ".data",
    "generate_matrices": ".data",
    "render_panel": ".data",
    "render_puzzle": ".data",
    "split_puzzle_image": ".data",
    "concept_recovery": ".metrics",
    "frequency_scores": ".metrics",
    "plot_decomposition": ".plotting",
}
_SUBMODULES = {"config", "data", "evidence", "metrics", "pipeline", "plotting", "proposers", "rules", "selection", "vlm"}
__all__ = sorted(_LAZY)  # noqa: PLE0605

__getattr__, __dir__ = attach(__name__, _LAZY, __all__, submodules=_SUBMODULES)
