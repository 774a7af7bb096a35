"""`MemGAS`: multi-granularity long-term dialogue memory (Xu et al., ICLR 2026, arXiv 2505.19549).

Build (per added session, incrementally): four memory units -- the session text, the mean of its turn embeddings,
an LLM summary and LLM keywords, each embedded -- then every new unit node of a session with index >= 5 is linked to
the higher-mean GMM component among its 30 most similar nodes of earlier sessions. Query: an entropy router weighs
the granularities, the 15 best weighted node scores seed a Personalized PageRank over the association graph, a
session's score is the sum of its nodes' PPR mass, and an LLM filters the top-k sessions before answering.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from huggingface_hub import ModelHubMixin

from hfx.utils.artifacts import ArtifactMixin

from .base import MemoryAnswer, RetrievedMemory, SessionMemory, format_memories
from .components import DEFAULT_EMBEDDER_NAME
from .config import MemGASConfig
from .graph import associate, personalized_pagerank
from .router import entropy_router_weights


PAPER_URL = "https://huggingface.co/papers/2505.19549"
FORMAT_VERSION = 1
MEMORY_FILE = "memory.json"
EMBEDDINGS_FILE = "embeddings.safetensors"


class MemGAS(
    ArtifactMixin,
    SessionMemory,
    ModelHubMixin,
    library_name="hfx",
    tags=["hfx", "memgas", "long-term-memory", "retrieval", "arxiv:2505.19549"],
    license="apache-2.0",
    paper_url=PAPER_URL,
    repo_url="https://github.com/hfx-org/hfx",
):
    r"""Multi-granularity memory with GMM association, an entropy router and Personalized PageRank (arXiv 2505.19549).

    Each stored session becomes G = 4 nodes (``config.granularities``: session text, mean turn embedding, LLM
    summary, LLM keywords; node index ``s * G + g``) [code]. ``add`` embeds only the new session's texts and links
    each of its nodes to earlier nodes (GMM accept set, Sec. 3.2) -- nothing stored is re-embedded. ``retrieve``:

    1. :math:`s_{g,n} = q \cdot e_{g,n}` for every granularity g and session n;
    2. :math:`w = ` :func:`~hfx.memory.memgas.router.entropy_router_weights` (temperature ``config.temperature``;
       entropy normalised by :math:`\log N` by default -- the spec's one deliberate deviation from the code);
    3. the ``num_seednodes`` largest :math:`w_g s_{g,n}` form the (clamped non-negative) PPR reset vector;
    4. :func:`~hfx.memory.memgas.graph.personalized_pagerank` with damping 0.1 (igraph semantics);
    5. a session's score is the sum of its G nodes' PPR mass; the ``top_k`` best are returned.

    ``answer`` asks the memory filter to keep only the parts of those sessions (with their summaries and keywords)
    relevant to the question [code], then the answerer replies from the filtered text.

    It is a :class:`huggingface_hub.ModelHubMixin`: ``save_pretrained(dir)`` writes ``config.json`` (the
    :class:`MemGASConfig`), ``memory.json`` (turns, summaries, keywords, ids, dates, the embedder's name),
    ``embeddings.safetensors`` (unit and turn embeddings, the edge list) and a model card; ``from_pretrained``
    (folder or Hub repo id) restores it exactly; ``push_to_hub`` uploads it.

    Args:
        config (:class:`MemGASConfig` or `dict`, *optional*): settings (defaults to ``MemGASConfig()``).
        embedder: text embedder (``None`` = the offline all-MiniLM-L6-v2; a SentenceTransformer, a folder / Hub id, a
            ``(AutoModel, tokenizer)`` pair or a ``list[str] -> (n, d)`` callable). Queries must use the embedder
            the memory was built with.
        llm: default chat model of every LLM role (``None`` = the embedded SmolLM2-135M-Instruct; a ``transformers``
            text-generation pipeline, a ``(model, tokenizer)`` pair, or a chat callable ``messages -> reply``).
        summarizer / keyword_extractor / memory_filter / answerer: per-role chat models (default: ``llm``).

    Raises:
        ValueError: bad config values (see :class:`MemGASConfig`); on ``add`` a duplicate session id or a summary /
        keywords list of the wrong length; on ``retrieve`` an empty memory.

    Example:

    ```python
    from hfx.memory import MemGAS

    memory = MemGAS()                        # offline MiniLM embedder, embedded SmolLM2 for summaries/answers
    memory.add([{"role": "user", "content": "I adopted a beagle called Biscuit."},
                {"role": "assistant", "content": "Congratulations!"}])
    memory.retrieve("What is my dog's name?", top_k=1)[0].session_id
    memory.answer("What is my dog's name?").answer
    memory.save_pretrained("my-memory")      # MemGAS.from_pretrained("my-memory") restores it exactly
    ```
    """

    _hfx_artifact = "hfx_memgas"

    @classmethod
    def _hfx_required_keys(cls) -> tuple[str, ...]:
        """``config.json`` is a :class:`MemGASConfig`: every field must be there (none is invented on load)."""
        return tuple(f.name for f in dataclasses.fields(MemGASConfig))

    def __init__(
        self,
        config: MemGASConfig | dict | None = None,
        *,
        embedder: Any = None,
        llm: Any = None,
        summarizer: Any = None,
        keyword_extractor: Any = None,
        memory_filter: Any = None,
        answerer: Any = None,
    ):
        if config is None:
            config = MemGASConfig()
        elif isinstance(config, dict):
            config = MemGASConfig.from_dict(config)
        elif not isinstance(config, MemGASConfig):
            raise TypeError(f"`config` must be a MemGASConfig or a dict, got {type(config).__name__}")
        self.config = config
        super().__init__(
            embedder=embedder,
            llm=llm,
            answerer=answerer,
            top_k=config.top_k,
            answer_prompt=config.answer_prompt,
            max_new_tokens_answer=config.max_new_tokens_answer,
            max_session_chars=config.max_session_chars,
            pair_turns=config.pair_turns,
            embed_batch_size=config.embed_batch_size,
            llm_batch_size=config.llm_batch_size,
        )
        self._summarizer_spec, self._summarizer = summarizer, None
        self._keyword_extractor_spec, self._keyword_extractor = keyword_extractor, None
        self._memory_filter_spec, self._memory_filter = memory_filter, None
        self.summaries: list[str | None] = []
        self.keywords: list[str | None] = []
        self._units: dict[str, torch.Tensor] = {}  # granularity -> (N, d)
        self._turn_embeddings = torch.zeros(0, 0)  # (T, d), all turns in order
        self._turn_offsets: list[int] = [0]  # session s owns turns [offsets[s], offsets[s+1])
        self._edges: list[tuple[int, int]] = []
        self._edge_tensor: torch.Tensor | None = None
        self.embedder_name: str | None = embedder if isinstance(embedder, str) else None

    # ----------------------------------------------------------------------------------------------- properties
    @property
    def num_granularities(self) -> int:
        return len(self.config.granularities)

    @property
    def num_nodes(self) -> int:
        """Nodes of the association graph: ``len(self) * num_granularities``."""
        return len(self) * self.num_granularities

    @property
    def edge_index(self) -> torch.LongTensor:
        """Undirected association edges, shape `(E, 2)`: (new node, older node), node = ``session * G + g``."""
        if self._edge_tensor is None:
            self._edge_tensor = torch.tensor(self._edges, dtype=torch.long).reshape(-1, 2)
        return self._edge_tensor

    def unit_embeddings(self, granularity: str) -> torch.Tensor:
        """Embeddings of one granularity, shape `(len(self), d)` (row n = session n)."""
        if granularity not in self.config.granularities:
            raise ValueError(f"`granularity` must be one of {self.config.granularities}, got {granularity!r}")
        return self._units[granularity]

    def node_embeddings(self) -> torch.Tensor:
        """All node embeddings in node order, shape `(len(self) * G, d)`."""
        stacked = torch.stack([self._units[g] for g in self.config.granularities], dim=1)  # (N, G, d)
        return stacked.reshape(-1, stacked.shape[-1])

    # --------------------------------------------------------------------------------------------------- build
    def _index_sessions(self, turns, ids, dates, summaries=None, keywords=None) -> None:
        cfg = self.config
        embedder = self.embedder  # resolve (and validate) the embedder before any LLM call
        n = len(turns)
        texts = ["\n".join(t) for t in turns]
        summaries = self._given_units("summaries", summaries, n)
        keywords = self._given_units("keywords", keywords, n)
        if "summary" in cfg.granularities:
            summaries = self._generate_missing(
                summaries, texts, "summarizer", cfg.summary_prompt, cfg.max_new_tokens_summary
            )
        if "keyword" in cfg.granularities:
            keywords = self._generate_missing(
                keywords, texts, "keyword_extractor", cfg.keyword_prompt, cfg.max_new_tokens_keyword
            )
        # one batched embedding call for every new text: session texts, turns, summaries, keywords
        batch, slices = [], {}

        def push(name, items):
            slices[name] = (len(batch), len(batch) + len(items))
            batch.extend(items)

        if "session" in cfg.granularities:
            push("session", texts)
        all_turns = [t for session in turns for t in session]
        if "turn" in cfg.granularities:
            push("turns", all_turns)
        if "summary" in cfg.granularities:
            push("summary", [s or "" for s in summaries])
        if "keyword" in cfg.granularities:
            push("keyword", [k or "" for k in keywords])
        emb = embedder.encode(batch)
        if emb.dim() != 2 or emb.shape[0] != len(batch):
            raise ValueError(f"the embedder returned shape {tuple(emb.shape)} for {len(batch)} texts")
        emb = emb.float()
        if cfg.normalize_embeddings:
            emb = torch.nn.functional.normalize(emb, dim=-1)
        if self._units and emb.shape[1] != next(iter(self._units.values())).shape[1]:
            raise ValueError(
                f"the embedder gives {emb.shape[1]}-dim vectors but the memory holds "
                f"{next(iter(self._units.values())).shape[1]}-dim ones: use the embedder it was built with"
            )
        new_units = {}
        for g in cfg.granularities:
            if g == "turn":
                a, b = slices["turns"]
                turn_emb = emb[a:b]
                counts = torch.tensor([len(t) for t in turns])
                owner = torch.repeat_interleave(torch.arange(n), counts)
                means = torch.zeros(n, emb.shape[1]).index_add_(0, owner, turn_emb) / counts[:, None].float()
                new_units["turn"] = means
                self._turn_embeddings = (
                    turn_emb.clone()
                    if self._turn_embeddings.numel() == 0
                    else torch.cat([self._turn_embeddings, turn_emb])
                )
                for c in counts.tolist():
                    self._turn_offsets.append(self._turn_offsets[-1] + c)
            else:
                a, b = slices[g]
                new_units[g] = emb[a:b].clone()
        for g, value in new_units.items():
            self._units[g] = value if g not in self._units else torch.cat([self._units[g], value])
        self.summaries.extend(summaries)
        self.keywords.extend(keywords)

    @staticmethod
    def _given_units(name, values, n):
        if values is None:
            return [None] * n
        values = list(values)
        if len(values) != n or not all(v is None or isinstance(v, str) for v in values):
            raise ValueError(f"`{name}` must hold {n} str (or None) entries, one per session")
        return values

    def _generate_missing(self, values, texts, role, template, max_new_tokens):
        todo = [i for i, v in enumerate(values) if v is None]
        if todo:
            cut = self.config.max_session_chars
            prompts = [template.format(session=texts[i][:cut]) for i in todo]
            for i, reply in zip(todo, self._role(role).generate(prompts, max_new_tokens=max_new_tokens)):
                values[i] = reply
        return values

    def _after_add(self, start: int) -> None:
        """Link every node of the sessions from ``start`` on to earlier sessions' nodes (GMM association)."""
        cfg = self.config
        if cfg.association == "none":
            return
        g_count = self.num_granularities
        nodes = self.node_embeddings()
        for s in range(max(start, cfg.association_start_session), len(self)):
            previous = nodes[: s * g_count]
            for g in range(g_count):
                i = s * g_count + g
                linked = associate(
                    nodes[i],
                    previous,
                    method=cfg.association,
                    mem_threshold=cfg.mem_threshold,
                    n_components=cfg.n_components,
                    top_k=cfg.association_top_k,
                    random_state=cfg.gmm_random_state,
                    init_params=cfg.gmm_init_params,
                )
                self._edges.extend((i, int(j)) for j in linked.tolist())
        self._edge_tensor = None

    # ------------------------------------------------------------------------------------------------ retrieval
    def embed_queries(self, queries: Sequence[str]) -> torch.Tensor:
        """Query embeddings, shape `(B, d)` (normalised like the memory's)."""
        q = self.embedder.encode(list(queries), show_progress_bar=False).float()
        return torch.nn.functional.normalize(q, dim=-1) if self.config.normalize_embeddings else q

    def similarities(self, query_embeddings: torch.Tensor) -> torch.Tensor:
        """:math:`s_{b,g,n} = q_b \\cdot e_{g,n}`, shape `(B, G, N)`."""
        units = torch.stack([self._units[g] for g in self.config.granularities])  # (G, N, d)
        if query_embeddings.shape[-1] != units.shape[-1]:
            raise ValueError(
                f"query embeddings are {query_embeddings.shape[-1]}-dim, the memory's {units.shape[-1]}-dim: "
                "use the embedder the memory was built with"
            )
        return torch.einsum("bd,gnd->bgn", query_embeddings.float(), units)

    def router_weights(self, similarities: torch.Tensor) -> torch.Tensor:
        """Granularity weights, shape `(B, G)`: the entropy router, or 1/G each with ``router="uniform"``."""
        if self.config.router == "uniform":
            return torch.full(similarities.shape[:-1], 1.0 / similarities.shape[-2])
        return entropy_router_weights(
            similarities, temperature=self.config.temperature, normalization=self.config.entropy_normalization
        )

    def seed_vector(self, node_scores: torch.Tensor) -> torch.Tensor:
        """PPR reset vectors from node scores `(B, n)`: the ``num_seednodes`` best (ties included) clamped at 0.

        If every kept score is <= 0, the kept nodes get equal weight instead (a reset vector must have mass).
        """
        k = min(self.config.num_seednodes, node_scores.shape[-1])
        threshold = torch.topk(node_scores, k, dim=-1).values[:, -1:]
        kept = node_scores >= threshold
        seeds = torch.where(kept, node_scores, torch.zeros_like(node_scores)).clamp(min=0)
        empty = seeds.sum(-1, keepdim=True) <= 0
        return torch.where(empty, kept.to(seeds.dtype), seeds)

    def score_sessions(self, queries: Sequence[str], return_details: bool = False):
        """MemGAS session scores, shape `(B, N)`.

        Args:
            queries (`list[str]`).
            return_details (`bool`, *optional*, defaults to `False`): also return a dict with ``similarities``
                `(B, G, N)`, ``router_weights`` `(B, G)`, ``seeds`` and ``ppr`` `(B, N*G)` (absent without PPR).
        """
        if len(self) == 0:
            raise ValueError("the memory is empty: `add` sessions before retrieving")
        sims = self.similarities(self.embed_queries(queries))
        weights = self.router_weights(sims)  # (B, G)
        weighted = weights[..., None] * sims  # (B, G, N)
        details = {"similarities": sims, "router_weights": weights}
        if not self.config.use_ppr:
            scores = weighted.sum(1)
        else:
            b, g, n = weighted.shape
            node_scores = weighted.transpose(1, 2).reshape(b, n * g)  # node index = session * G + g
            seeds = self.seed_vector(node_scores)
            ppr = personalized_pagerank(
                self.edge_index,
                n * g,
                seeds,
                damping=self.config.damping,
                max_iter=self.config.ppr_max_iter,
                tol=self.config.ppr_tol,
            )
            scores = ppr.reshape(b, n, g).sum(-1).float()
            details.update(seeds=seeds, ppr=ppr)
        return (scores, details) if return_details else scores

    def _unit_texts(self, index: int):
        return self.summaries[index], self.keywords[index]

    # ------------------------------------------------------------------------------------------------ answering
    def _contexts(self, questions, retrieved):
        raw = [format_memories(m, max_chars=self.max_session_chars) for m in retrieved]
        if not self.config.use_filter:
            return raw
        prompts = [
            self.config.filter_prompt.format(
                memories=format_memories(m, with_units=True, max_chars=self.max_session_chars), question=q
            )
            for m, q in zip(retrieved, questions)
        ]
        return self._role("memory_filter").generate(prompts, max_new_tokens=self.config.max_new_tokens_filter)

    # ---------------------------------------------------------------------------------------------- save / load
    def _save_pretrained(self, save_directory: Path) -> None:
        from safetensors.torch import save_file

        save_directory = Path(save_directory)
        (save_directory / "config.json").write_text(json.dumps(self.config.to_dict(), indent=2, sort_keys=True))
        name = self._embedder_label()
        name = None if name == "a custom embedder" else name
        sessions = [
            {"session_id": sid, "date": d, "turns": t, "summary": s, "keywords": k}
            for sid, d, t, s, k in zip(self.session_ids, self.dates, self.turns, self.summaries, self.keywords)
        ]
        info = {"format_version": FORMAT_VERSION, "embedder": name, "sessions": sessions}
        (save_directory / MEMORY_FILE).write_text(json.dumps(info, indent=1, ensure_ascii=False), encoding="utf-8")
        tensors = {f"unit.{g}": v.contiguous() for g, v in self._units.items()}
        tensors["turns"] = self._turn_embeddings.contiguous()
        tensors["turn_offsets"] = torch.tensor(self._turn_offsets, dtype=torch.long)
        tensors["edges"] = self.edge_index.contiguous()
        save_file(tensors, str(save_directory / EMBEDDINGS_FILE), metadata={"format": "hfx-memgas"})

    @classmethod
    def _from_pretrained(
        cls,
        *,
        model_id: str,
        revision: str | None,
        cache_dir: str | Path | None,
        force_download: bool,
        local_files_only: bool,
        token: str | bool | None,
        **kwargs: Any,
    ) -> MemGAS:
        from safetensors.torch import load_file

        if os.path.isdir(model_id):
            folder = Path(model_id)
        else:
            from huggingface_hub import snapshot_download

            folder = Path(
                snapshot_download(
                    repo_id=model_id,
                    revision=revision,
                    cache_dir=cache_dir,
                    force_download=force_download,
                    local_files_only=local_files_only,
                    token=token,
                )
            )
        if not (folder / MEMORY_FILE).is_file():
            raise FileNotFoundError(f"{folder} holds no {MEMORY_FILE}: not a saved MemGAS memory")
        info = json.loads((folder / MEMORY_FILE).read_text(encoding="utf-8"))
        if info.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"unsupported MemGAS format_version {info.get('format_version')!r}")
        if kwargs.get("embedder") is None and info.get("embedder"):
            kwargs["embedder"] = info["embedder"]  # resolved lazily on first query
        if kwargs.get("config") is None:
            kwargs["config"] = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        memory = cls(**kwargs)
        tensors = load_file(str(folder / EMBEDDINGS_FILE))
        for s in info["sessions"]:
            memory.session_ids.append(s["session_id"])
            memory.dates.append(s["date"])
            memory.turns.append(list(s["turns"]))
            memory.summaries.append(s["summary"])
            memory.keywords.append(s["keywords"])
        memory._units = {g: tensors[f"unit.{g}"] for g in memory.config.granularities}
        memory._turn_embeddings = tensors["turns"]
        memory._turn_offsets = tensors["turn_offsets"].tolist()
        memory._edges = [tuple(e) for e in tensors["edges"].tolist()]
        memory._edge_tensor = None
        memory.embedder_name = info.get("embedder")
        return memory

    def generate_model_card(self, *args, **kwargs):
        """The model card rendered from ``model_cards/memgas/README.md`` (:func:`hfx.hub.render_model_card`)."""
        from hfx.hub import card_data, render_model_card

        name = self._embedder_label()
        data = card_data(
            method="memgas",
            arxiv_id="2505.19549",
            base_model=name if "/" in name and not os.path.isabs(name) else None,
            tags=["long-term-memory", "retrieval", "conversational-memory"],
            model_name=kwargs.pop("model_name", "MemGAS memory"),
        )
        return render_model_card(
            "memgas",
            data,
            repo_id=kwargs.pop("repo_id", "hfx/memgas-memory"),
            num_sessions=len(self),
            num_edges=len(self._edges),
            granularities=", ".join(self.config.granularities),
            embedder=name,
            config=self.config,
            note=kwargs.pop("note", None),
            **kwargs,
        )

    def _embedder_label(self) -> str:
        """The embedder's Hub id / folder (saved with the memory), or ``"a custom embedder"``."""
        if self.embedder_name:
            return self.embedder_name
        if self._embedder_spec is None:
            return DEFAULT_EMBEDDER_NAME
        return self.embedder.name or "a custom embedder"

    def __repr__(self) -> str:
        return (
            f"MemGAS(sessions={len(self)}, granularities={list(self.config.granularities)}, "
            f"edges={len(self._edges)}, embedder={self._embedder_label()!r})"
        )


__all__ = ["MemGAS", "MemoryAnswer", "RetrievedMemory"]
