"""Baselines of MemGAS in the same API (``add`` / ``retrieve`` / ``answer``): flat dense retrieval at turn or session
level, and BM25 (``rank-bm25``). The paper's ablations are :meth:`MemGASConfig.for_ablation` switches instead."""

from __future__ import annotations

import re
from typing import Any

import torch

from .base import SessionMemory


class FlatDenseMemory(SessionMemory):
    """Flat dense retrieval over single-granularity units.

    ``granularity="turn"``: every turn is embedded on its own; a session's score is its best turn's similarity (the
    usual turn-to-session evaluation), and the answer prompt shows that best turn. ``granularity="session"``: one
    embedding per whole session; the prompt shows the session.

    Args:
        granularity (`str`, *optional*, defaults to `"turn"`): ``"turn"`` or ``"session"``.
        normalize_embeddings (`bool`, *optional*, defaults to `True`): cosine similarity.
        **kwargs: :class:`~hfx.memory.memgas.base.SessionMemory` arguments (``embedder``, ``llm``, ``top_k``, ...).

    Raises:
        ValueError: for another ``granularity``.
    """

    def __init__(self, granularity: str = "turn", normalize_embeddings: bool = True, **kwargs: Any):
        if granularity not in ("turn", "session"):
            raise ValueError(f"`granularity` must be 'turn' or 'session', got {granularity!r}")
        super().__init__(**kwargs)
        self.granularity = granularity
        self.normalize_embeddings = normalize_embeddings
        self._emb = torch.zeros(0, 0)
        self._owner = torch.zeros(0, dtype=torch.long)  # unit -> session index
        self._unit_text: list[str] = []
        self._best_unit: torch.Tensor | None = None

    def _encode(self, texts):
        emb = self.embedder.encode(list(texts), show_progress_bar=None if len(texts) > 1 else False).float()
        return torch.nn.functional.normalize(emb, dim=-1) if self.normalize_embeddings else emb

    def _index_sessions(self, turns, ids, dates, **unit_kwargs):
        super()._index_sessions(turns, ids, dates, **unit_kwargs)
        start = len(self)
        if self.granularity == "turn":
            units = [t for session in turns for t in session]
            owner = [start + i for i, session in enumerate(turns) for _ in session]
        else:
            units = ["\n".join(session) for session in turns]
            owner = [start + i for i in range(len(turns))]
        emb = self._encode(units)
        self._emb = emb if self._emb.numel() == 0 else torch.cat([self._emb, emb])
        self._owner = torch.cat([self._owner, torch.tensor(owner, dtype=torch.long)])
        self._unit_text.extend(units)

    def score_sessions(self, queries):
        if len(self) == 0:
            raise ValueError("the memory is empty: `add` sessions before retrieving")
        q = self._encode(queries)
        unit_scores = q @ self._emb.T  # (B, U)
        if self.granularity == "session":
            self._best_unit = torch.arange(len(self)).expand(len(queries), -1)
            return unit_scores
        b = unit_scores.shape[0]
        scores = torch.full((b, len(self)), float("-inf"))
        scores = scores.scatter_reduce(1, self._owner.expand(b, -1), unit_scores, reduce="amax")
        # the best unit of each session: the first unit reaching the session's max
        hit = unit_scores == scores.gather(1, self._owner.expand(b, -1))
        unit_ids = torch.arange(unit_scores.shape[1]).expand(b, -1)
        big = torch.full_like(unit_ids, unit_scores.shape[1])
        best = torch.full((b, len(self)), unit_scores.shape[1], dtype=torch.long)
        self._best_unit = best.scatter_reduce(1, self._owner.expand(b, -1), torch.where(hit, unit_ids, big), "amin")
        return scores

    def _memory_text(self, index, query_row):
        if self.granularity == "turn" and self._best_unit is not None:
            return self._unit_text[int(self._best_unit[query_row, index])]
        return self.session_text(index)


def bm25_tokenize(text: str) -> list[str]:
    """Lower-cased word tokens (``[a-z0-9]+``) for BM25."""
    return re.findall(r"[a-z0-9]+", text.lower())


class BM25Memory(SessionMemory):
    """BM25 (Okapi, ``rank_bm25.BM25Okapi``) over whole sessions (``unit="session"``) or turns (``unit="turn"``,
    session score = best turn). The index is rebuilt on ``add`` (BM25's IDF needs the whole corpus; no embeddings).

    Args:
        unit (`str`, *optional*, defaults to `"session"`).
        k1 (`float`, *optional*, defaults to `1.5`), b (`float`, *optional*, defaults to `0.75`): BM25 parameters.
        **kwargs: :class:`~hfx.memory.memgas.base.SessionMemory` arguments.
    """

    def __init__(self, unit: str = "session", k1: float = 1.5, b: float = 0.75, **kwargs: Any):
        if unit not in ("turn", "session"):
            raise ValueError(f"`unit` must be 'turn' or 'session', got {unit!r}")
        super().__init__(**kwargs)
        self.unit, self.k1, self.b = unit, k1, b
        self._tokens: list[list[str]] = []
        self._owner: list[int] = []
        self._bm25 = None

    def _index_sessions(self, turns, ids, dates, **unit_kwargs):
        super()._index_sessions(turns, ids, dates, **unit_kwargs)
        start = len(self)
        for i, session in enumerate(turns):
            units = session if self.unit == "turn" else ["\n".join(session)]
            for u in units:
                self._tokens.append(bm25_tokenize(u))
                self._owner.append(start + i)
        self._bm25 = None

    def score_sessions(self, queries):
        from rank_bm25 import BM25Okapi

        if len(self) == 0:
            raise ValueError("the memory is empty: `add` sessions before retrieving")
        if self._bm25 is None:
            self._bm25 = BM25Okapi([t if t else ["<empty>"] for t in self._tokens], k1=self.k1, b=self.b)
        owner = torch.tensor(self._owner)
        rows = []
        for q in queries:
            unit_scores = torch.as_tensor(self._bm25.get_scores(bm25_tokenize(q)), dtype=torch.float32)
            rows.append(torch.full((len(self),), float("-inf")).scatter_reduce(0, owner, unit_scores, reduce="amax"))
        return torch.stack(rows)
