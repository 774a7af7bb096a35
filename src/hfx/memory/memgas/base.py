"""What every hfx session memory shares: session storage, ``retrieve`` / ``answer`` and the answer prompt.

:class:`SessionMemory` is the common API of :class:`~hfx.memory.MemGAS` and its baselines
(:class:`~hfx.memory.memgas.FlatDenseMemory`, :class:`~hfx.memory.memgas.BM25Memory`): ``add(session)``,
``add_sessions(sessions)``, ``retrieve(query, top_k)``, ``answer(query)``, plus batched ``retrieve_batch`` /
``answer_batch`` and ``score_sessions`` (one score per stored session).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .components import as_chat_callable, as_embedder, normalize_session
from .config import ANSWER_PROMPT


@dataclass
class RetrievedMemory:
    """One retrieved session.

    Attributes:
        session_id (`str`), session_index (`int`): which stored session (insertion order).
        rank (`int`): 0 for the best. score (`float`): the method's session score (PPR mass for MemGAS).
        text (`str`): what the answer prompt shows for it: the session text, or for turn-level retrieval its
            best-matching turn.
        date (`str`, *optional*), summary (`str`, *optional*), keywords (`str`, *optional*).
    """

    session_id: str
    session_index: int
    rank: int
    score: float
    text: str
    date: str | None = None
    summary: str | None = None
    keywords: str | None = None


@dataclass
class MemoryAnswer:
    """The result of ``answer(question)``.

    Attributes:
        question (`str`), answer (`str`): the LLM's reply.
        memories (`list[RetrievedMemory]`): the retrieved sessions, best first.
        context (`str`): the memory text the answerer saw (LLM-filtered for MemGAS, else the raw sessions).
    """

    question: str
    answer: str
    memories: list[RetrievedMemory] = field(default_factory=list)
    context: str = ""


def format_memories(memories: Sequence[RetrievedMemory], with_units: bool = False, max_chars: int = 6000) -> str:
    """The memory block of a prompt: one ``### Session <id> (<date>)`` section per memory, best first.

    Args:
        memories: retrieved memories.
        with_units (`bool`, *optional*, defaults to `False`): also show each session's summary and keywords (the
            MemGAS filter prompt does) [code].
        max_chars (`int`, *optional*, defaults to `6000`): each memory's text is cut to this many characters.
    """
    blocks = []
    for m in memories:
        head = f"### Session {m.session_id}" + (f" ({m.date})" if m.date else "")
        body = m.text if len(m.text) <= max_chars else m.text[:max_chars] + " ..."
        block = f"{head}\n{body}"
        if with_units:
            block += f"\nSummary: {m.summary or ''}\nKeywords: {m.keywords or ''}"
        blocks.append(block)
    return "\n\n".join(blocks)


class SessionMemory:
    """Base class of the session memories (not used on its own).

    Args:
        embedder: see :func:`~hfx.memory.memgas.components.as_embedder` (resolved on first use; ``None`` = the
            offline all-MiniLM-L6-v2).
        llm: the default chat model for every LLM role, see
            :func:`~hfx.memory.memgas.components.as_chat_callable` (resolved on first use; ``None`` = the embedded
            SmolLM2-135M-Instruct).
        answerer: the chat model that writes answers (defaults to ``llm``).
        top_k (`int`, *optional*, defaults to `3`): sessions retrieved by ``retrieve`` / ``answer``.
        answer_prompt (`str`): template with ``{memories}`` and ``{question}``.
        max_new_tokens_answer (`int`, *optional*, defaults to `32`).
        max_session_chars (`int`, *optional*, defaults to `6000`): per-session text cut in prompts.
        pair_turns (`bool`, *optional*, defaults to `True`): see :func:`~hfx.memory.memgas.components.normalize_session`.
        embed_batch_size / llm_batch_size (`int`): batch sizes.
    """

    def __init__(
        self,
        embedder: Any = None,
        llm: Any = None,
        answerer: Any = None,
        top_k: int = 3,
        answer_prompt: str = ANSWER_PROMPT,
        max_new_tokens_answer: int = 32,
        max_session_chars: int = 6000,
        pair_turns: bool = True,
        embed_batch_size: int = 32,
        llm_batch_size: int = 8,
    ):
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ValueError(f"`top_k` must be a positive int, got {top_k!r}")
        self._embedder_spec, self._embedder = embedder, None
        self._llm_spec, self._llm = llm, None
        self._answerer_spec, self._answerer = answerer, None
        self.top_k = top_k
        self.answer_prompt = answer_prompt
        self.max_new_tokens_answer = max_new_tokens_answer
        self.max_session_chars = max_session_chars
        self.pair_turns = pair_turns
        self.embed_batch_size, self.llm_batch_size = embed_batch_size, llm_batch_size
        self.session_ids: list[str] = []
        self.dates: list[str | None] = []
        self.turns: list[list[str]] = []

    # -------------------------------------------------------------------------------------------- lazy components
    @property
    def embedder(self):
        """The :class:`~hfx.memory.memgas.components.TextEmbedder` (built on first use)."""
        if self._embedder is None:
            self._embedder = as_embedder(self._embedder_spec, batch_size=self.embed_batch_size)
        return self._embedder

    @property
    def llm(self):
        """The default :class:`~hfx.memory.memgas.components.ChatLLM` (built on first use)."""
        if self._llm is None:
            self._llm = as_chat_callable(self._llm_spec, batch_size=self.llm_batch_size)
        return self._llm

    def _role(self, name: str):
        """The chat model of one role (``answerer``, ``summarizer``, ...): its own if given, else :attr:`llm`."""
        cached = getattr(self, f"_{name}")
        if cached is None:
            spec = getattr(self, f"_{name}_spec")
            cached = self.llm if spec is None else as_chat_callable(spec, batch_size=self.llm_batch_size)
            setattr(self, f"_{name}", cached)
        return cached

    # ------------------------------------------------------------------------------------------------- sessions
    def __len__(self) -> int:
        return len(self.session_ids)

    def session_text(self, index: int) -> str:
        """The full text of stored session ``index`` (its turns joined by newlines)."""
        return "\n".join(self.turns[index])

    def _prepare_sessions(self, sessions, session_ids=None, dates=None):
        if isinstance(sessions, (str, dict)) or not isinstance(sessions, Sequence):
            raise TypeError("`sessions` must be a list of sessions (use `add` for one session)")
        n = len(sessions)
        session_ids = [None] * n if session_ids is None else list(session_ids)
        dates = [None] * n if dates is None else list(dates)
        if len(session_ids) != n or len(dates) != n:
            raise ValueError(f"`session_ids` and `dates` must have {n} entries (one per session)")
        taken = set(self.session_ids)
        ids, turns = [], []
        for i, (session, sid) in enumerate(zip(sessions, session_ids)):
            sid = f"session_{len(self) + i + 1}" if sid is None else str(sid)
            if sid in taken:
                raise ValueError(f"`session_id` {sid!r} is already in the memory")
            taken.add(sid)
            ids.append(sid)
            turns.append(normalize_session(session, pair_turns=self.pair_turns))
        return ids, [None if d is None else str(d) for d in dates], turns

    def add(self, session, session_id: str | None = None, date: str | None = None, **unit_kwargs) -> str:
        """Store one session; returns its id.

        Args:
            session: chat messages (``[{"role": ..., "content": ...}, ...]``), a list of turn strings, or a string.
            session_id (`str`, *optional*): defaults to ``"session_<n>"``; must be new.
            date (`str`, *optional*): shown next to the session in prompts.
        """
        extra = {k: [v] for k, v in unit_kwargs.items()}
        return self.add_sessions([session], [session_id], [date], **extra)[0]

    def add_sessions(self, sessions, session_ids=None, dates=None, **unit_kwargs) -> list[str]:
        """Store several sessions at once (batched embedding / generation); returns their ids."""
        ids, dates, turns = self._prepare_sessions(sessions, session_ids, dates)
        start = len(self)
        self._index_sessions(turns, ids, dates, **unit_kwargs)
        self.session_ids.extend(ids)
        self.dates.extend(dates)
        self.turns.extend(turns)
        self._after_add(start)
        return ids

    def _index_sessions(self, turns, ids, dates, **unit_kwargs) -> None:
        """Subclasses: compute and store the index of new sessions (called before they are appended)."""
        if unit_kwargs:
            raise TypeError(f"{type(self).__name__}.add got unexpected arguments {sorted(unit_kwargs)}")

    def _after_add(self, start: int) -> None:
        """Subclasses: work that needs the new sessions appended (e.g. MemGAS association)."""

    # ------------------------------------------------------------------------------------------------ retrieval
    def score_sessions(self, queries: Sequence[str]) -> torch.Tensor:
        """One relevance score per (query, stored session): `torch.Tensor` of shape `(len(queries), len(self))`."""
        raise NotImplementedError

    def _memory_text(self, index: int, query_row: int) -> str:
        return self.session_text(index)

    def _unit_texts(self, index: int) -> tuple[str | None, str | None]:
        return None, None

    def retrieve_batch(self, queries: Sequence[str], top_k: int | None = None) -> list[list[RetrievedMemory]]:
        """:meth:`retrieve` for several queries (one batched embedding / PPR)."""
        queries = self._check_queries(queries)
        if len(self) == 0:
            raise ValueError("the memory is empty: `add` sessions before retrieving")
        top_k = self.top_k if top_k is None else top_k
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ValueError(f"`top_k` must be a positive int, got {top_k!r}")
        scores = self.score_sessions(queries)
        order = torch.argsort(scores, dim=-1, descending=True, stable=True)[:, :top_k]
        out = []
        for row, idx in enumerate(order.tolist()):
            mems = []
            for rank, i in enumerate(idx):
                summary, keywords = self._unit_texts(i)
                mems.append(
                    RetrievedMemory(
                        session_id=self.session_ids[i],
                        session_index=i,
                        rank=rank,
                        score=float(scores[row, i]),
                        text=self._memory_text(i, row),
                        date=self.dates[i],
                        summary=summary,
                        keywords=keywords,
                    )
                )
            out.append(mems)
        return out

    def retrieve(self, query: str, top_k: int | None = None) -> list[RetrievedMemory]:
        """The ``top_k`` (default :attr:`top_k`) stored sessions most relevant to ``query``, best first.

        Raises:
            ValueError: on an empty memory or a bad ``top_k``; TypeError: when ``query`` is not a str.
        """
        if not isinstance(query, str):
            raise TypeError(f"`query` must be a str, got {type(query).__name__}")
        return self.retrieve_batch([query], top_k)[0]

    def rank_sessions(self, queries: Sequence[str]) -> torch.LongTensor:
        """Session indices sorted by decreasing score, shape `(len(queries), len(self))` (ties keep insertion order)."""
        scores = self.score_sessions(self._check_queries(queries))
        return torch.argsort(scores, dim=-1, descending=True, stable=True)

    @staticmethod
    def _check_queries(queries) -> list[str]:
        if isinstance(queries, str) or not all(isinstance(q, str) for q in queries):
            raise TypeError("`queries` must be a list of str")
        return list(queries)

    # ------------------------------------------------------------------------------------------------ answering
    def _contexts(self, questions: list[str], retrieved: list[list[RetrievedMemory]]) -> list[str]:
        return [format_memories(m, max_chars=self.max_session_chars) for m in retrieved]

    def answer_batch(self, questions: Sequence[str], top_k: int | None = None) -> list[MemoryAnswer]:
        """:meth:`answer` for several questions (batched retrieval and generation)."""
        questions = self._check_queries(questions)
        retrieved = self.retrieve_batch(questions, top_k)
        contexts = self._contexts(questions, retrieved)
        prompts = [self.answer_prompt.format(memories=c, question=q) for c, q in zip(contexts, questions)]
        replies = self._role("answerer").generate(prompts, max_new_tokens=self.max_new_tokens_answer)
        return [
            MemoryAnswer(question=q, answer=a, memories=m, context=c)
            for q, a, m, c in zip(questions, replies, retrieved, contexts)
        ]

    def answer(self, question: str, top_k: int | None = None) -> MemoryAnswer:
        """Retrieve the ``top_k`` sessions for ``question`` and let the answerer reply from them."""
        if not isinstance(question, str):
            raise TypeError(f"`question` must be a str, got {type(question).__name__}")
        return self.answer_batch([question], top_k)[0]
