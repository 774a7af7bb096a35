"""Using a session memory in HF chat: prepend retrieved memories to a chat for ``model.generate``, and keep a
conversation's sessions flowing into the memory.

* :func:`add_memories_to_messages` -- a new message list whose system message carries the retrieved memories.
* :func:`apply_chat_template_with_memory` -- the same, tokenised with ``tokenizer.apply_chat_template`` (ready for
  ``model.generate(**inputs)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .base import RetrievedMemory, SessionMemory, format_memories


MEMORY_SYSTEM_TEMPLATE = (
    "You remember these earlier conversations with the user. Use them when they help to answer.\n\n{memories}"
)


def _last_user_text(messages: Sequence[dict]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):  # multimodal content: keep the text parts
                content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
            return str(content)
    raise ValueError("`messages` has no user message to retrieve memories for")


def add_memories_to_messages(
    memory: SessionMemory,
    messages: Sequence[dict] | str,
    top_k: int | None = None,
    query: str | None = None,
    template: str = MEMORY_SYSTEM_TEMPLATE,
) -> tuple[list[dict], list[RetrievedMemory]]:
    """Retrieve memories for the conversation and put them in front of it.

    The memories go into the system message (appended to an existing first system message, else a new one is
    inserted first); the other messages are unchanged.

    Args:
        memory: a :class:`~hfx.memory.MemGAS` or a baseline memory.
        messages (`list[dict]` or `str`): the chat (HF format) or a single user message.
        top_k (`int`, *optional*): sessions to retrieve (default: the memory's ``top_k``).
        query (`str`, *optional*): the retrieval query (default: the last user message).
        template (`str`, *optional*): system text with a ``{memories}`` field.

    Returns:
        `(messages, memories)`: the new message list and the retrieved memories.

    Raises:
        ValueError: when there is no user message and no ``query``.
    """
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    messages = [dict(m) for m in messages]
    memories = memory.retrieve(query if query is not None else _last_user_text(messages), top_k=top_k)
    block = template.format(memories=format_memories(memories, max_chars=memory.max_session_chars))
    if messages and messages[0].get("role") == "system":
        messages[0]["content"] = f"{messages[0]['content']}\n\n{block}"
    else:
        messages.insert(0, {"role": "system", "content": block})
    return messages, memories


def apply_chat_template_with_memory(
    tokenizer: Any,
    memory: SessionMemory,
    messages: Sequence[dict] | str,
    top_k: int | None = None,
    query: str | None = None,
    template: str = MEMORY_SYSTEM_TEMPLATE,
    **chat_template_kwargs: Any,
):
    """``tokenizer.apply_chat_template`` on the chat with retrieved memories prepended (see
    :func:`add_memories_to_messages`).

    Defaults ``add_generation_prompt=True``, ``return_tensors="pt"``, ``return_dict=True``, so the result goes
    straight to ``model.generate(**inputs)``; any other ``apply_chat_template`` keyword is passed on.
    """
    full, _ = add_memories_to_messages(memory, messages, top_k=top_k, query=query, template=template)
    kwargs = {"add_generation_prompt": True, "return_tensors": "pt", "return_dict": True, **chat_template_kwargs}
    return tokenizer.apply_chat_template(full, **kwargs)
