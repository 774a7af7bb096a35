"""Long-term conversational memory (family ``memory``): :mod:`hfx.memory.memgas` (MemGAS, arXiv 2505.19549).

The public names resolve lazily (PEP 562); ``import hfx.memory`` loads no torch, sklearn, sentence-transformers,
smolagents or rank_bm25.
"""

from hfx._lazy import attach


_MEMGAS = "hfx.memory.memgas"
_LAZY = dict.fromkeys(
    (
        "MemGAS",
        "MemGASConfig",
        "MemGASRetrieverTool",
        "FlatDenseMemory",
        "BM25Memory",
        "SessionMemory",
        "RetrievedMemory",
        "MemoryAnswer",
        "add_memories_to_messages",
        "apply_chat_template_with_memory",
        "load_long_memory_json",
        "build_long_memory_benchmark",
    ),
    _MEMGAS,
)
_SUBMODULES = {"memgas"}

__all__ = sorted([*_LAZY, *_SUBMODULES])  # noqa: PLE0605

__getattr__, __dir__ = attach(__name__, _LAZY, __all__, submodules=_SUBMODULES)
