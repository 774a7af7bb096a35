"""A scripted smolagents model for tests and examples: the model's replies come from a Python function.

smolagents calls ``model.generate(messages, stop_sequences=..., tools_to_call_from=...)``; :class:`ScriptedModel`
answers with ``policy(messages)``, a function of the chat so far, so one instance can serve many concurrent agents
(Heavy's K trajectories) without shared state. Token usage is counted in whitespace-separated words.
"""

from __future__ import annotations

import json
import threading

from smolagents.models import ChatMessage, MessageRole, Model, TokenUsage


class ScriptedModel(Model):
    """A smolagents ``Model`` whose reply to a chat is ``policy(messages)`` (a string).

    Args:
        policy (`Callable[[list[dict]], str]`): receives the messages as ``{"role", "content"}`` dicts with text
            content and returns the model output (e.g. ``action("search", query="...")``).

    Attributes:
        calls (`int`): how many times ``generate`` ran.
    """

    def __init__(self, policy, model_id: str = "scripted"):
        if not callable(policy):
            raise TypeError(f"`policy` must be callable, but is {type(policy).__name__}")
        super().__init__(model_id=model_id)
        self.policy = policy
        self.calls = 0
        self._lock = threading.Lock()

    def generate(self, messages, stop_sequences=None, response_format=None, tools_to_call_from=None, **kwargs):
        chat = [{"role": _role(m), "content": _text(m)} for m in messages]
        reply = str(self.policy(chat))
        with self._lock:
            self.calls += 1
        prompt_words = sum(len(m["content"].split()) for m in chat)
        return ChatMessage(
            role=MessageRole.ASSISTANT,
            content=reply,
            token_usage=TokenUsage(input_tokens=prompt_words, output_tokens=len(reply.split())),
        )


def action(name: str, **arguments) -> str:
    """A tool call in the text form smolagents' ``ToolCallingAgent`` parses: ``Action: {"name": ..., "arguments": ...}``."""
    return "Action: " + json.dumps({"name": name, "arguments": arguments})


def task_of(messages) -> str:
    """The first user message's text (the task), without smolagents' ``New task:`` prefix."""
    for m in messages:
        if m["role"] == "user":
            return m["content"].split("New task:", 1)[-1].strip()
    return ""


def _role(message) -> str:
    role = message["role"] if isinstance(message, dict) else message.role
    return str(getattr(role, "value", role))


def _text(message) -> str:
    content = message["content"] if isinstance(message, dict) else message.content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else str(content)
