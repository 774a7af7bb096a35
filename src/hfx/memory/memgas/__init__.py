"""MemGAS: multi-granularity long-term dialogue memory (arXiv 2505.19549), plus its baselines and data.

* :class:`MemGAS` / :class:`MemGASConfig` -- the memory (``add`` / ``retrieve`` / ``answer``, ``save_pretrained`` /
  ``from_pretrained`` / ``push_to_hub``); ablations via :meth:`MemGASConfig.for_ablation`.
* :class:`FlatDenseMemory`, :class:`BM25Memory` -- baselines in the same API.
* :class:`MemGASRetrieverTool` -- a smolagents tool; :func:`apply_chat_template_with_memory` /
  :func:`add_memories_to_messages` -- retrieved memories in front of a chat for ``model.generate``.
* :func:`load_long_memory_json` (LoCoMo / LongMemEval, local files) and :func:`build_long_memory_benchmark`.

Everything resolves lazily: importing this package loads neither torch, sklearn, sentence-transformers, smolagents
nor rank_bm25.
"""

from hfx._lazy import attach


_LAZY = {
    "MemGAS": ".memory",
    "MemGASConfig": ".config",
    "GRANULARITIES": ".config",
    "ABLATIONS": ".config",
    "SessionMemory": ".base",
    "RetrievedMemory": ".base",
    "MemoryAnswer": ".base",
    "format_memories": ".base",
    "FlatDenseMemory": ".baselines",
    "BM25Memory": ".baselines",
    "MemGASRetrieverTool": ".tools",
    "add_memories_to_messages": ".integrations",
    "apply_chat_template_with_memory": ".integrations",
    "entropy_router_weights": ".router",
    "granularity_entropy": ".router",
    "gmm_accept_mask": ".graph",
    "associate": ".graph",
    "personalized_pagerank": ".graph",
    "as_embedder": ".components",
    "as_chat_callable": ".components",
    "AutoModelEmbedder": ".components",
    "TextEmbedder": ".components",
    "ChatLLM": ".components",
    "normalize_session": ".components",
    "load_long_memory_json": ".data",
    "load_locomo": ".data",
    "load_longmemeval": ".data",
    "build_long_memory_benchmark": ".data",
    "retrieval_metrics": ".metrics",
    "answer_matches": ".metrics",
    "publish": ".hub",
}
_SUBMODULES = {
    "base",
    "baselines",
    "components",
    "config",
    "data",
    "graph",
    "hub",
    "integrations",
    "memory",
    "metrics",
    "router",
    "tools",
}

__all__ = sorted(_LAZY)  # noqa: PLE0605

__getattr__, __dir__ = attach(__name__, _LAZY, __all__, submodules=_SUBMODULES)
