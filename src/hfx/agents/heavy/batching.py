"""``BatchedTransformersModel``: a smolagents ``TransformersModel`` that merges concurrent calls into one batched
HF ``generate``, so K agent trajectories (and K verifiers) decode together on one local model.

Why: a local model on CPU or one GPU is much faster per token in a batch than K single-sequence calls, and smolagents
agents are synchronous. Heavy runs each trajectory in its own thread (agents are not thread-safe, models are shared);
each thread's ``generate`` call waits at a rendezvous until every registered trajectory has a request pending (or
``max_wait`` seconds pass), then one thread runs a single left-padded ``model.generate`` for all of them, with the
KV cache and a per-row stop-string criterion, and hands each row back. Calls with different generation settings
(stop sequences, ``max_new_tokens``, sampling options) run as separate batches. API model classes need none of this:
Heavy uses a thread pool for them (I/O-bound calls overlap).
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from contextlib import contextmanager

import torch
from smolagents import TransformersModel
from smolagents.models import (
    ChatMessage,
    ChatMessageToolCall,
    ChatMessageToolCallFunction,
    MessageRole,
    Model,
    TokenUsage,
    remove_content_after_stop_sequences,
)
from transformers import StoppingCriteria, StoppingCriteriaList, StopStringCriteria


class _Request:
    def __init__(self, kwargs: dict):
        self.kwargs = kwargs
        self.key = _settings_key(kwargs)
        self.result = None
        self.error = None
        self.done = False


class BatchedTransformersModel(TransformersModel):
    """A ``TransformersModel`` built from a loaded causal LM and tokenizer, batching concurrent ``generate`` calls.

    Args:
        model (`PreTrainedModel`): a decoder-only causal LM (e.g. ``hfx.models.load_default_model()[0]``).
        tokenizer (`PreTrainedTokenizerBase`): its tokenizer (with a chat template).
        max_new_tokens (`int`, *optional*, defaults to 128): tokens per call.
        max_batch_size (`int`, *optional*, defaults to 16): rows per batched ``generate``.
        max_wait (`float`, *optional*, defaults to 0.5): seconds a pending call waits for the other registered
            trajectories before its batch runs anyway.
        model_id (`str`, *optional*): a label (defaults to the model's ``name_or_path``).
        text_actions (`bool`, *optional*, defaults to `False`): also accept the plain-text actions of
            :data:`~hfx.agents.heavy.prompts.TEXT_ACTION_SOLVER_PROMPT` (``search: ...``, ``browse: ...``,
            ``answer: ...``) besides smolagents' JSON tool calls, and read any other non-empty output as the final
            answer. For small local models that cannot write JSON tool calls (SmolLM2-135M writes none, see the docs).
        **kwargs: generation options for every call (``do_sample=True``, ``temperature``, ``top_p``, ...).

    Heavy calls :meth:`expect` with K before starting K threads and each thread calls :meth:`leave` when its trajectory
    ends, so the rendezvous knows how many calls to wait for;
    without sessions every call runs at once, alone (plain ``TransformersModel`` behaviour).
    """

    def __init__(
        self,
        model,
        tokenizer,
        max_new_tokens: int = 128,
        max_batch_size: int = 16,
        max_wait: float = 0.5,
        model_id: str | None = None,
        text_actions: bool = False,
        **kwargs,
    ):
        if not isinstance(max_batch_size, int) or max_batch_size < 1:
            raise ValueError(f"`max_batch_size` must be an integer >= 1, but is {max_batch_size!r}")
        if not max_wait >= 0:
            raise ValueError(f"`max_wait` must be >= 0 seconds, but is {max_wait!r}")
        # TransformersModel.__init__ loads from a model id; here the model is already loaded
        Model.__init__(
            self,
            flatten_messages_as_text=True,
            model_id=model_id or getattr(model.config, "name_or_path", None) or type(model).__name__,
            max_new_tokens=max_new_tokens,
            **kwargs,
        )
        self.model, self.tokenizer = model, tokenizer
        self._is_vlm = False
        self.model_kwargs, self.apply_chat_template_kwargs = {}, {}
        self.streamer = None
        self.max_batch_size, self.max_wait = max_batch_size, float(max_wait)
        self._cond = threading.Condition()
        self._pending: list[_Request] = []
        self._active = 0
        self._running = False
        self.batch_sizes: list[int] = []  # rows of every batched generate (for inspection and tests)
        self.text_actions = bool(text_actions)

    def parse_tool_calls(self, message):
        """smolagents' JSON tool-call parsing, or (``text_actions=True``) the plain-text actions."""
        if self.text_actions and not message.tool_calls:
            call = parse_text_action(message.content or "")
            if call is not None:
                message.role = MessageRole.ASSISTANT
                message.tool_calls = [call]
                return message
        return super().parse_tool_calls(message)

    def expect(self, n: int = 1) -> None:
        """Announce ``n`` concurrent callers (trajectories) for the rendezvous; each calls :meth:`leave` when done."""
        with self._cond:
            self._active += n

    def leave(self) -> None:
        """One announced caller is done (the rendezvous stops waiting for it)."""
        with self._cond:
            self._active = max(0, self._active - 1)
            self._cond.notify_all()

    @contextmanager
    def session(self):
        """One concurrent caller for the duration of the block (:meth:`expect` + :meth:`leave`)."""
        self.expect(1)
        try:
            yield self
        finally:
            self.leave()

    def generate(self, messages, stop_sequences=None, response_format=None, tools_to_call_from=None, **kwargs):
        if response_format is not None:
            raise ValueError("`response_format` is not supported by BatchedTransformersModel (as TransformersModel).")
        request = _Request(
            {
                "messages": messages,
                "stop_sequences": stop_sequences,
                "tools_to_call_from": tools_to_call_from,
                **kwargs,
            }
        )
        with self._cond:
            self._pending.append(request)
            self._cond.notify_all()
            deadline = time.monotonic() + self.max_wait
            while not request.done:
                ready = len(self._pending) >= max(1, self._active) or time.monotonic() >= deadline
                if not self._running and request in self._pending and ready:
                    batch = [r for r in self._pending if r.key == request.key][: self.max_batch_size]
                    self._pending = [r for r in self._pending if r not in batch]
                    self._running = True
                    self._cond.release()
                    try:
                        self._run_batch(batch)
                    finally:
                        self._cond.acquire()
                        self._running = False
                        self._cond.notify_all()
                else:
                    self._cond.wait(timeout=max(0.005, deadline - time.monotonic()) if not ready else 0.05)
        if request.error is not None:
            raise request.error
        return request.result

    def _run_batch(self, batch: list[_Request]) -> None:
        try:
            rows = [self._prepare_completion_args(**r.kwargs) for r in batch]
            first = rows[0]
            prompts = [r["inputs"][0] for r in rows]
            pad_id = self.tokenizer.pad_token_id
            if pad_id is None:
                pad_id = self.tokenizer.eos_token_id
            width = max(len(p) for p in prompts)
            input_ids = torch.full((len(prompts), width), pad_id, dtype=torch.long, device=self.model.device)
            attention_mask = torch.zeros_like(input_ids)
            for i, p in enumerate(prompts):
                input_ids[i, width - len(p) :] = p
                attention_mask[i, width - len(p) :] = 1
            stop = batch[0].kwargs.get("stop_sequences")
            recorder = _FinishRecorder(len(prompts), width, self.tokenizer, stop, self._eos_ids())
            options = {
                k: v for k, v in first.items() if k not in ("inputs", "stopping_criteria", "use_cache", "messages")
            }
            with torch.no_grad():
                out = self.model.generate(
                    input_ids=input_ids,
                    attention_mask=attention_mask,
                    stopping_criteria=StoppingCriteriaList([recorder]),
                    pad_token_id=pad_id,
                    use_cache=True,
                    **options,
                )
            self.batch_sizes.append(len(prompts))
            for i, request in enumerate(batch):
                end = recorder.lengths[i] if recorder.lengths[i] is not None else out.shape[1]
                generated = out[i, width:end]
                text = self.tokenizer.decode(generated, skip_special_tokens=True)
                text = remove_content_after_stop_sequences(text, stop)
                request.result = ChatMessage(
                    role=MessageRole.ASSISTANT,
                    content=text,
                    raw={"out": text, "batch_size": len(prompts)},
                    token_usage=TokenUsage(input_tokens=len(prompts[i]), output_tokens=int(generated.shape[0])),
                )
        except Exception as err:  # noqa: BLE001 -- every waiting caller gets the error
            for request in batch:
                request.error = err
        finally:
            for request in batch:
                request.done = True

    def _eos_ids(self) -> list[int]:
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        return [eos] if isinstance(eos, int) else list(eos or [])


class _FinishRecorder(StoppingCriteria):
    """Stop strings + EOS per row, remembering the length at which each row finished."""

    def __init__(self, batch_size, prompt_length, tokenizer, stop_sequences, eos_ids):
        self.lengths = [None] * batch_size
        self.prompt_length = prompt_length
        self.eos = torch.tensor(eos_ids or [-1])
        self.stop = StopStringCriteria(tokenizer, stop_sequences) if stop_sequences else None

    def __call__(self, input_ids, scores, **kwargs):
        done = torch.isin(input_ids[:, -1], self.eos.to(input_ids.device))
        if self.stop is not None:
            done = done | self.stop(input_ids, scores)
        for i in done.nonzero().flatten().tolist():
            if self.lengths[i] is None:
                self.lengths[i] = input_ids.shape[1]
        return done


_TEXT_ACTION = re.compile(
    r"^\s*(?:action\s*:\s*)?(search|browse|answer|final answer)\s*[:=]\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE
)


def parse_text_action(text: str):
    """A ``ChatMessageToolCall`` for the first ``search: ...`` / ``browse: ...`` / ``answer: ...`` line of ``text``;
    JSON is left to smolagents; any other non-empty text is read as the final answer; ``None`` for empty text."""
    if "{" in text and "}" in text:
        return None  # a JSON action: smolagents parses it
    match = _TEXT_ACTION.search(text)
    if match:
        verb, argument = match.group(1).lower(), match.group(2).strip().strip("\"'")
    elif text.strip():
        verb, argument = "answer", text.strip()
    else:
        return None
    name, key = {"search": ("search", "query"), "browse": ("browse", "title")}.get(verb, ("final_answer", "answer"))
    return ChatMessageToolCall(
        id=str(uuid.uuid4()),
        type="function",
        function=ChatMessageToolCallFunction(name=name, arguments={key: argument}),
    )


def _settings_key(kwargs: dict):
    parts = []
    for k in sorted(kwargs):
        if k in ("messages", "tools_to_call_from"):
            continue
        v = kwargs[k]
        parts.append((k, tuple(v) if isinstance(v, list) else v))
    return tuple(parts)
