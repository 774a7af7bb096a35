"""Heavy test-time scaling for search agents with asymmetric verification (Zeng et al., arXiv 2510.06135, ICLR 2026).

Built on smolagents (any model class; tools are ``smolagents.Tool``):

* :func:`solve` -- a ReAct search agent (``ToolCallingAgent``) with a tool budget; :func:`solve_budget_forcing` --
  sequential scaling: after the final answer, grant extra budget and force the agent to continue ``rounds`` times.
* :func:`heavy` / :class:`HeavyConfig` / :class:`HeavyResult` -- parallel scaling: K trajectories, a verifier agent
  (:func:`verify`) with its own small tool budget per candidate, and a selector (:func:`select`: verifier-score argmax,
  verifier-weighted vote, best-of-K, or majority vote as the verifier-free baseline).
* :class:`LocalCorpus`, :class:`SearchTool`, :class:`BrowseTool`, :func:`search_tools` -- the offline search
  environment (BM25 via rank-bm25 or MiniLM dense retrieval).
* :class:`ToolBudget`, :class:`Cost` -- budgets that are never exceeded, and per-run cost (tool calls, tokens, time).
* :class:`BatchedTransformersModel` -- K concurrent agents on one local HF model as one batched ``generate``.
* :class:`ScriptedModel` -- a smolagents model driven by a Python function (tests, examples).

Everything loads lazily: ``import hfx`` does not import smolagents, rank_bm25 or sentence-transformers.
"""

from hfx._lazy import attach


_LAZY = {
    "solve": ".agent",
    "solve_budget_forcing": ".agent",
    "build_agent": ".agent",
    "Trajectory": ".agent",
    "heavy": ".orchestrator",
    "HeavyConfig": ".orchestrator",
    "HeavyResult": ".orchestrator",
    "verify_candidates": ".orchestrator",
    "verify": ".verifier",
    "parse_score": ".verifier",
    "Verification": ".verifier",
    "select": ".selectors",
    "normalize_answer": ".selectors",
    "SELECTORS": ".selectors",
    "LocalCorpus": ".search",
    "Document": ".search",
    "SearchTool": ".search",
    "BrowseTool": ".search",
    "search_tools": ".search",
    "ToolBudget": ".budget",
    "BudgetedTool": ".budget",
    "Cost": ".budget",
    "BatchedTransformersModel": ".batching",
    "ScriptedModel": ".scripted",
    "action": ".scripted",
    "build_questions": ".questions",
    "load_dbpedia_pages": ".questions",
    "grade": ".questions",
}

__all__ = sorted(_LAZY)  # noqa: PLE0605

__getattr__, __dir__ = attach(__name__, _LAZY, __all__)
