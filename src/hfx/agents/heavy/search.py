"""Offline search environment: a local corpus with a ``search`` tool (BM25 or MiniLM dense) and a ``browse`` tool.

The paper's agents use one ``deep_websearch`` tool (web search + page reading by an auxiliary model, arXiv 2510.06135,
Sec. 3). Offline, hfx splits it into the two smolagents tools every deep-search agent has: ``search`` returns the
top-k page titles with a short snippet, ``browse`` returns a page's text. Both are :class:`smolagents.Tool`
subclasses, so any smolagents agent can use them, and both are pure Python over a :class:`LocalCorpus`.

**Swapping in the web.** For real use, replace them with smolagents' own tools, e.g.
``[smolagents.WebSearchTool(), smolagents.VisitWebpageTool()]`` (or ``DuckDuckGoSearchTool``, ``GoogleSearchTool``):
:func:`hfx.agents.heavy.solve` and :func:`hfx.agents.heavy.heavy` take any list of tools and wrap each in the same
tool budget.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from smolagents import Tool


_TOKEN = re.compile(r"\w+", re.UNICODE)
RETRIEVERS = ("bm25", "dense")


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens (the BM25 analyser)."""
    return _TOKEN.findall(text.lower())


@dataclass
class Document:
    """One page of a :class:`LocalCorpus`: a unique ``title`` and its ``text``."""

    title: str
    text: str


class LocalCorpus:
    """A small document collection with BM25 (``rank-bm25``) and/or dense (sentence-transformers) retrieval.

    Args:
        documents (`list[Document]` or `list[dict]`): pages with unique ``title`` and ``text``.
        retriever (`str`, *optional*, defaults to `"bm25"`): ``"bm25"`` (Okapi BM25 over title + text) or
            ``"dense"`` (cosine similarity of MiniLM embeddings; the encoder loads on first search).
        encoder (*optional*): a ``SentenceTransformer`` or a path for ``"dense"`` (defaults to the embedded
            all-MiniLM-L6-v2, :func:`hfx.models.default_sentence_encoder_path`).

    Raises:
        ValueError: for an empty corpus, duplicate titles or an unknown ``retriever``.
    """

    def __init__(self, documents, retriever: str = "bm25", encoder=None):
        docs = [d if isinstance(d, Document) else Document(str(d["title"]), str(d["text"])) for d in documents]
        if not docs:
            raise ValueError("`documents` is empty; a corpus needs at least one page")
        titles = [d.title for d in docs]
        if len(set(titles)) != len(titles):
            raise ValueError("`documents` have duplicate titles; every page needs a unique `title`")
        if retriever not in RETRIEVERS:
            raise ValueError(f"`retriever` must be one of {RETRIEVERS}, but is {retriever!r}")
        self.documents = docs
        self.retriever = retriever
        self._by_title = {d.title.lower(): d for d in docs}
        self._encoder = encoder
        self._bm25 = None
        self._embeddings = None

    def __len__(self) -> int:
        return len(self.documents)

    def search(self, query: str, top_k: int = 3) -> list[tuple[Document, float]]:
        """The ``top_k`` pages for ``query``, best first, with their scores (ties: corpus order)."""
        if not isinstance(query, str) or not query.strip():
            return []
        if self.retriever == "bm25":
            scores = self._bm25_index().get_scores(tokenize(query))
        else:
            scores = self._dense_scores(query)
        order = sorted(range(len(self.documents)), key=lambda i: (-float(scores[i]), i))[:top_k]
        return [(self.documents[i], float(scores[i])) for i in order]

    def get(self, title: str) -> Document | None:
        """The page called ``title`` (case-insensitive; surrounding quotes and spaces ignored), else ``None``."""
        return self._by_title.get(str(title).strip().strip("\"'").strip().lower())

    def _bm25_index(self):
        if self._bm25 is None:
            from rank_bm25 import BM25Okapi

            self._bm25 = BM25Okapi([tokenize(f"{d.title} {d.text}") for d in self.documents])
        return self._bm25

    def _dense_scores(self, query: str):
        if self._embeddings is None:
            if self._encoder is None or isinstance(self._encoder, (str, Path)):
                from sentence_transformers import SentenceTransformer

                from hfx.models import default_sentence_encoder_path

                self._encoder = SentenceTransformer(
                    str(self._encoder or default_sentence_encoder_path()), device="cpu"
                )
            texts = [f"{d.title}. {d.text}" for d in self.documents]
            self._embeddings = self._encoder.encode(texts, normalize_embeddings=True, convert_to_tensor=True)
        q = self._encoder.encode([query], normalize_embeddings=True, convert_to_tensor=True)
        return (self._embeddings @ q[0]).tolist()

    @classmethod
    def from_jsonl(cls, path, **kwargs) -> LocalCorpus:
        """A corpus from a JSON-lines file of ``{"title": ..., "text": ...}`` rows."""
        with open(path, encoding="utf-8") as f:
            return cls([json.loads(line) for line in f if line.strip()], **kwargs)

    def to_jsonl(self, path) -> Path:
        """Write the pages as JSON lines (the format :meth:`from_jsonl` reads)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(
                json.dumps({"title": d.title, "text": d.text}, ensure_ascii=False) + "\n" for d in self.documents
            )
        return path


class SearchTool(Tool):
    """``search(query)``: the top-k pages of a :class:`LocalCorpus` as ``[i] Title: snippet`` lines.

    Args:
        corpus (`LocalCorpus`): the collection.
        top_k (`int`, *optional*, defaults to 3): pages returned per query.
        snippet_chars (`int`, *optional*, defaults to 160): characters of each page shown (0: titles only).
    """

    name = "search"
    description = "Searches the document collection. Returns the titles of the best matching pages with a snippet."
    inputs = {"query": {"type": "string", "description": "keywords to search for"}}  # noqa: RUF012 (smolagents API)
    output_type = "string"

    def __init__(self, corpus: LocalCorpus, top_k: int = 3, snippet_chars: int = 160):
        if not isinstance(top_k, int) or top_k < 1:
            raise ValueError(f"`top_k` must be an integer >= 1, but is {top_k!r}")
        if not isinstance(snippet_chars, int) or snippet_chars < 0:
            raise ValueError(f"`snippet_chars` must be an integer >= 0, but is {snippet_chars!r}")
        super().__init__()
        self.corpus, self.top_k, self.snippet_chars = corpus, top_k, snippet_chars

    def forward(self, query: str) -> str:
        hits = self.corpus.search(query, self.top_k)
        if not hits:
            return "No results. Try other keywords."
        lines = []
        for i, (doc, _) in enumerate(hits, 1):
            snippet = doc.text[: self.snippet_chars].strip()
            lines.append(f"[{i}] {doc.title}: {snippet}" if snippet else f"[{i}] {doc.title}")
        return "\n".join(lines)


class BrowseTool(Tool):
    """``browse(title)``: the text of the page with that title (a search result's title).

    Args:
        corpus (`LocalCorpus`): the collection.
        max_chars (`int`, *optional*, defaults to 1200): the page text is cut to this many characters.
    """

    name = "browse"
    description = "Returns the full text of the page with the given title (a title returned by search)."
    inputs = {"title": {"type": "string", "description": "the page title"}}  # noqa: RUF012 (smolagents API)
    output_type = "string"

    def __init__(self, corpus: LocalCorpus, max_chars: int = 1200):
        if not isinstance(max_chars, int) or max_chars < 1:
            raise ValueError(f"`max_chars` must be an integer >= 1, but is {max_chars!r}")
        super().__init__()
        self.corpus, self.max_chars = corpus, max_chars

    def forward(self, title: str) -> str:
        doc = self.corpus.get(title)
        if doc is None:
            hits = self.corpus.search(str(title), 1)  # a near-miss title: the closest page
            if not hits:
                return f"No page titled {title!r}."
            doc = hits[0][0]
        return f"{doc.title}\n{doc.text[: self.max_chars]}"


def search_tools(corpus: LocalCorpus, top_k: int = 3, snippet_chars: int = 160, max_chars: int = 1200) -> list[Tool]:
    """``[SearchTool, BrowseTool]`` over ``corpus``: the offline stand-in for the paper's ``deep_websearch``."""
    return [SearchTool(corpus, top_k=top_k, snippet_chars=snippet_chars), BrowseTool(corpus, max_chars=max_chars)]
