"""`MemGASConfig`: every setting of MemGAS (arXiv 2505.19549), with its provenance.

Provenance markers follow the project's spec: [code] = the authors' released code (github.com/quqxui/MemGAS),
[paper] = the paper, [reconstruction] = a choice hfx made where neither fixes it (each one is an option here).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


GRANULARITIES = ("session", "turn", "summary", "keyword")
"""The four memory granularities of MemGAS, in node order (node index = ``session_index * G + g``) [code]."""

ABLATIONS = ("full", "no_router", "no_gmm", "no_ppr", "no_filter")
"""The paper's ablations, as :meth:`MemGASConfig.for_ablation` names."""

SUMMARY_PROMPT = (
    "Here is a conversation between a user and an AI assistant. Write a short paragraph that summarises it as "
    "briefly as you can, keeping its main topics and the key facts the user mentions.\n\n{session}\n\nSummary:"
)
KEYWORD_PROMPT = (
    "Here is a conversation between a user and an AI assistant. List the most relevant keywords of the "
    "conversation, separated by semicolons.\n\n{session}\n\nKeywords:"
)
FILTER_PROMPT = (
    "You are shown earlier conversations with a user, each with a summary and keywords. Copy out only the parts "
    "that are directly relevant to the question, word for word (do not rephrase them), and leave out every "
    "irrelevant turn, repetition and detail.\n\n{memories}\n\nQuestion: {question}\nRelevant parts:"
)
ANSWER_PROMPT = (
    "You are a helpful assistant that remembers earlier conversations with the user. Use the memories below to "
    "answer the question in a few words.\n\nMemories:\n{memories}\n\nQuestion: {question}\nAnswer:"
)


@dataclass
class MemGASConfig:
    r"""Settings of :class:`~hfx.memory.MemGAS`. JSON-serialisable; saved as ``config.json`` by ``save_pretrained``.

    Memory construction:
        granularities (`tuple[str]`, defaults to all four): which of ``"session"`` (the whole session text
            embedded), ``"turn"`` (the mean of the turn embeddings), ``"summary"`` and ``"keyword"`` (LLM-generated,
            then embedded) are built [code]. Without ``"summary"`` / ``"keyword"`` no LLM is called while building.
        pair_turns (`bool`, defaults to `True`): a "turn" is one user message plus the assistant reply that follows
            it, joined as ``"[user]: ...\n[assistant]: ..."``, as the code's data processing does [code]; ``False``
            makes every chat message its own turn.
        normalize_embeddings (`bool`, defaults to `True`) [reconstruction]: L2-normalise every text embedding (so
            similarities are cosines). The code uses raw Contriever dot products; the default MiniLM encoder is
            trained for cosine similarity. The turn unit is the *mean* of (normalised) turn embeddings, as in the code.
        embed_batch_size (`int`, defaults to `32`): texts per embedder batch.

    GMM association (built incrementally, for each new node i) [code]:
        association (`str`, defaults to `"gmm"`): ``"gmm"`` links i to the candidates in the higher-mean component of
            a 1-D Gaussian mixture fitted to their similarities; ``"topk"`` links i to its ``association_top_k`` most
            similar candidates (the fixed-size alternative left commented out in the code; hfx's "w/o GMM"
            ablation [reconstruction]); ``"none"`` adds no edges.
        mem_threshold (`int`, defaults to `30`): candidates = the ``mem_threshold`` most similar nodes of earlier
            sessions (all granularities) [code: 30 in the published retrieval command, 20 in the script default].
        n_components (`int`, defaults to `2`): GMM components [code].
        association_top_k (`int`, defaults to `5`): edges per node for ``association="topk"`` [code, commented out].
        association_start_session (`int`, defaults to `5`): nodes of sessions with (0-based) index below this are
            not associated with older ones (the code starts at the sixth session) [code].
        gmm_random_state (`int`, defaults to `0`): ``GaussianMixture(random_state=...)`` [code].
        gmm_init_params (`str`, defaults to `"kmeans"`): ``GaussianMixture(init_params=...)``; the code uses
            scikit-learn's default ``"kmeans"``; ``"k-means++"`` is about 4x faster to fit and gives the same split
            on clearly bimodal scores.

    Retrieval:
        router (`str`, defaults to `"entropy"`): ``"entropy"`` weighs granularity g by
            :math:`w_g = (1-\tilde H_g)/\sum_{g'}(1-\tilde H_{g'})` with :math:`H_g` the entropy of
            :math:`\mathrm{softmax}(q E_g^\top/\tau)` [code]; ``"uniform"`` gives every granularity 1/G (the
            "w/o router" ablation).
        temperature (`float`, defaults to `0.1`): :math:`\tau` [code; the README's command uses 0.2].
        entropy_normalization (`str`, defaults to `"log_n"`) [reconstruction, the spec's one deliberate deviation]:
            ``"log_n"`` divides :math:`H_g` by :math:`\log N_g` (N_g = items of granularity g) so that
            :math:`\tilde H_g \in [0, 1]` and every weight is non-negative; ``"none"`` uses the raw entropy as the
            code does (weights can then be negative or unstable for more than 2 sessions).
        num_seednodes (`int`, defaults to `15`): the top-scoring nodes kept as the PPR personalisation vector [code].
        use_ppr (`bool`, defaults to `True`): ``False`` is the "w/o PPR" ablation [reconstruction of its form]:
            a session's score is the sum of its router-weighted node similarities, with no seed truncation.
        damping (`float`, defaults to `0.1`): PPR damping in igraph's sense, the probability of following an edge
            (0.9 restart probability to the seeds) [code; its semantics a spec reconstruction].
        ppr_max_iter (`int`, defaults to `100`) / ppr_tol (`float`, defaults to `1e-10`): power-iteration limits.

    Answering:
        top_k (`int`, defaults to `3`): sessions passed on to the filter / answer step [code: ``--topk 3``].
        use_filter (`bool`, defaults to `True`): LLM filtering of the retrieved sessions, summaries and keywords
            before answering [code]; ``False`` is the "w/o filtering" ablation.
        summary_prompt / keyword_prompt / filter_prompt / answer_prompt (`str`): prompt templates (``{session}``,
            ``{memories}``, ``{question}`` fields); hfx's own wording of the code's prompts.
        max_new_tokens_summary / _keyword / _filter / _answer (`int`): generation budgets (greedy decoding).
        max_session_chars (`int`, defaults to `6000`): a session's text is cut to this many characters inside the
            summary / keyword / filter prompts (the embedder truncates on its own) [reconstruction].
        llm_batch_size (`int`, defaults to `8`): prompts per batch when the LLM is a transformers pipeline.

    Raises:
        ValueError: for an unknown granularity / association / router / normalisation, or a non-positive count.
    """

    granularities: tuple[str, ...] = GRANULARITIES
    pair_turns: bool = True
    normalize_embeddings: bool = True
    embed_batch_size: int = 32
    association: str = "gmm"
    mem_threshold: int = 30
    n_components: int = 2
    association_top_k: int = 5
    association_start_session: int = 5
    gmm_random_state: int = 0
    gmm_init_params: str = "kmeans"
    router: str = "entropy"
    temperature: float = 0.1
    entropy_normalization: str = "log_n"
    num_seednodes: int = 15
    use_ppr: bool = True
    damping: float = 0.1
    ppr_max_iter: int = 100
    ppr_tol: float = 1e-10
    top_k: int = 3
    use_filter: bool = True
    summary_prompt: str = SUMMARY_PROMPT
    keyword_prompt: str = KEYWORD_PROMPT
    filter_prompt: str = FILTER_PROMPT
    answer_prompt: str = ANSWER_PROMPT
    max_new_tokens_summary: int = 96
    max_new_tokens_keyword: int = 48
    max_new_tokens_filter: int = 192
    max_new_tokens_answer: int = 32
    max_session_chars: int = 6000
    llm_batch_size: int = 8
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        self.granularities = tuple(self.granularities)
        if not self.granularities or any(g not in GRANULARITIES for g in self.granularities):
            raise ValueError(
                f"`granularities` must be a non-empty subset of {GRANULARITIES}, got {self.granularities}"
            )
        if len(set(self.granularities)) != len(self.granularities):
            raise ValueError(f"`granularities` has duplicates: {self.granularities}")
        self.granularities = tuple(g for g in GRANULARITIES if g in self.granularities)  # canonical node order
        choices = {
            "association": ("gmm", "topk", "none"),
            "router": ("entropy", "uniform"),
            "entropy_normalization": ("log_n", "none"),
            "gmm_init_params": ("kmeans", "k-means++", "random", "random_from_data"),
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"`{name}` must be one of {allowed}, got {getattr(self, name)!r}")
        for name in (
            "embed_batch_size",
            "mem_threshold",
            "n_components",
            "association_top_k",
            "num_seednodes",
            "ppr_max_iter",
            "top_k",
            "max_new_tokens_summary",
            "max_new_tokens_keyword",
            "max_new_tokens_filter",
            "max_new_tokens_answer",
            "max_session_chars",
            "llm_batch_size",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"`{name}` must be a positive int, got {value!r}")
        if self.association_start_session < 0:
            raise ValueError(f"`association_start_session` must be >= 0, got {self.association_start_session}")
        if not self.temperature > 0:
            raise ValueError(f"`temperature` must be > 0, got {self.temperature}")
        if not 0.0 <= self.damping < 1.0:
            raise ValueError(f"`damping` must be in [0, 1), got {self.damping}")

    # ------------------------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["granularities"] = list(self.granularities)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MemGASConfig:
        """Build from a dict (e.g. a saved ``config.json``); unknown keys raise ``ValueError``."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown MemGASConfig keys {unknown}; allowed: {sorted(names)}")
        return cls(**data)

    def replace(self, **changes) -> MemGASConfig:
        """A copy with ``changes`` applied (validated)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def for_ablation(cls, name: str, **overrides) -> MemGASConfig:
        """The paper's ablations as config switches.

        Args:
            name (`str`): ``"full"`` (MemGAS), ``"no_router"`` (uniform granularity weights), ``"no_gmm"``
                (``association="topk"``: a fixed 5-neighbour association instead of the GMM accept set
                [reconstruction]), ``"no_ppr"`` (rank by router-weighted similarity, no graph), ``"no_filter"``
                (answer from the raw retrieved sessions).
            **overrides: further settings.

        Raises:
            ValueError: for an unknown ``name``.
        """
        switches = {
            "full": {},
            "no_router": {"router": "uniform"},
            "no_gmm": {"association": "topk"},
            "no_ppr": {"use_ppr": False},
            "no_filter": {"use_filter": False},
        }
        if name not in switches:
            raise ValueError(f"`name` must be one of {ABLATIONS}, got {name!r}")
        return cls(**{**switches[name], **overrides})
