"""`MemGASRetrieverTool`: a session memory as a ``smolagents`` tool (imports smolagents; load it lazily)."""

from __future__ import annotations

from typing import Any, ClassVar

from smolagents import Tool

from .base import SessionMemory, format_memories


class MemGASRetrieverTool(Tool):
    """A smolagents :class:`~smolagents.Tool` that searches a long-term conversation memory.

    ``forward(query)`` returns the ``top_k`` retrieved sessions (``### Session <id>`` blocks, best first, with their
    summary and keywords when the memory has them), or a line saying nothing is stored. Use it with any agent:
    ``CodeAgent(tools=[MemGASRetrieverTool(memory)], model=...)``.

    Args:
        memory: a :class:`~hfx.memory.MemGAS` (or a baseline memory with the same API).
        top_k (`int`, *optional*): sessions per call (default: the memory's ``top_k``).
        with_units (`bool`, *optional*, defaults to `True`): include summaries and keywords.
        name (`str`, *optional*, defaults to `"memory_retriever"`): the tool name the agent sees.

    Raises:
        TypeError: when ``memory`` has no ``retrieve`` method.
    """

    name = "memory_retriever"
    description = (
        "Searches the long-term memory of earlier conversations with the user and returns the most relevant past "
        "sessions. Use it for anything the user may have said before (names, preferences, plans, events)."
    )
    inputs: ClassVar[dict] = {
        "query": {"type": "string", "description": "What to look up in the conversation memory."}
    }
    output_type = "string"

    def __init__(
        self, memory: SessionMemory, top_k: int | None = None, with_units: bool = True, name: str | None = None
    ):
        if not hasattr(memory, "retrieve"):
            raise TypeError(f"`memory` must have a `retrieve` method (a MemGAS memory), got {type(memory).__name__}")
        if name is not None:
            self.name = name
        super().__init__()
        self.memory, self.top_k, self.with_units = memory, top_k, with_units

    def forward(self, query: str) -> str:
        if len(self.memory) == 0:
            return "The memory is empty: no earlier conversations are stored."
        memories = self.memory.retrieve(query, top_k=self.top_k)
        with_units = self.with_units and any(m.summary or m.keywords for m in memories)
        return format_memories(memories, with_units=with_units, max_chars=self.memory.max_session_chars)

    def __repr__(self) -> str:  # pragma: no cover - cosmetic
        return f"MemGASRetrieverTool(name={self.name!r}, memory={self.memory!r})"


def as_tool(memory: SessionMemory, **kwargs: Any) -> MemGASRetrieverTool:
    """``MemGASRetrieverTool(memory, **kwargs)``."""
    return MemGASRetrieverTool(memory, **kwargs)
