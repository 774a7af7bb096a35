"""Concept proposers: the `ConceptProposer` protocol, its output, and `AttributeProposer` (symbolic, with noise).

A proposer looks at one matrix (8 context panels, the candidate answers) and returns a :class:`ConceptProposal`:
candidate concepts, each with its kind (ordinal / categorical), a value per context panel and per candidate, and a
confidence in ``(0, 1]`` that steers the MH proposal. :class:`~hfx.vision.crd.VLMConceptProposer` asks an
image-text-to-text model; :class:`AttributeProposer` reads a generated (or RAVEN) matrix's symbolic attributes and can
corrupt them at a controlled rate, for robustness experiments.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from hfx.utils.validation import check_choice, check_float, check_int, check_optional, check_str

from .data import NUM_CONTEXT, parse_item


KINDS = ("ordinal", "categorical")


@dataclass
class Concept:
    """One proposed concept of one matrix.

    Args:
        name (`str`): e.g. ``"size"``.
        kind (`str`): ``"ordinal"`` (numeric levels) or ``"categorical"`` (labels).
        context_values (`list`): 8 values, row-major over the 3 x 3 grid without the last panel (``None`` / NaN =
            not seen).
        candidate_values (`list`): one value per candidate answer (``None`` = not seen).
        confidence (`float`, *optional*, defaults to `1.0`): the proposer's confidence, in ``(0, 1]``.
        domain (`list`, *optional*): ordinal: the possible levels (their min / max set the value range and the
            outlier density); categorical: the labels (values outside it are appended). Inferred from the values
            when omitted.

    Raises:
        ValueError / TypeError: for a bad kind, the wrong number of context values, a non-numeric ordinal value or a
        confidence outside ``(0, 1]``.
    """

    name: str
    kind: str
    context_values: list
    candidate_values: list
    confidence: float = 1.0
    domain: list | None = None

    def __post_init__(self):
        self.name = check_str("name", self.name)
        check_choice("kind", self.kind, KINDS)
        self.context_values = list(self.context_values)
        self.candidate_values = list(self.candidate_values)
        if len(self.context_values) != NUM_CONTEXT:
            raise ValueError(
                f"concept {self.name!r}: `context_values` has to hold 8 values (the 3 x 3 grid without its last "
                f"panel), but holds {len(self.context_values)}"
            )
        if not self.candidate_values:
            raise ValueError(f"concept {self.name!r}: `candidate_values` has to hold at least one value")
        self.confidence = check_float("confidence", self.confidence, minimum=0.0, maximum=1.0, strict_minimum=True)
        if self.kind == "ordinal":
            self.context_values = [_number(self.name, v) for v in self.context_values]
            self.candidate_values = [_number(self.name, v) for v in self.candidate_values]
            if self.domain is not None:
                self.domain = [_number(self.name, v) for v in self.domain]
                if any(v is None for v in self.domain) or not self.domain:
                    raise ValueError(f"concept {self.name!r}: an ordinal `domain` has to list numbers")
        else:
            self.context_values = [None if _missing(v) else str(v) for v in self.context_values]
            self.candidate_values = [None if _missing(v) else str(v) for v in self.candidate_values]
            if self.domain is not None:
                self.domain = [str(v) for v in self.domain]

    @property
    def observed(self) -> int:
        """Number of context panels with a value."""
        return sum(v is not None for v in self.context_values)

    def value_range(self) -> tuple[float, float]:
        """``(low, high)`` of an ordinal concept: its domain, else the observed values.

        Returns:
            `tuple[float, float]`.
        """
        values = self.domain or [v for v in [*self.context_values, *self.candidate_values] if v is not None]
        if not values:
            return 0.0, 0.0
        return float(min(values)), float(max(values))

    def categories(self) -> list[str]:
        """The labels of a categorical concept: its domain, then any other value seen (in order of appearance).

        Returns:
            `list[str]`.
        """
        labels = list(self.domain or [])
        for v in [*self.context_values, *self.candidate_values]:
            if v is not None and v not in labels:
                labels.append(v)
        return labels


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _number(name: str, v):
    if _missing(v):
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"concept {name!r} is ordinal, so its values have to be numbers, but one is {v!r}")
    v = float(v)
    if not math.isfinite(v):
        raise ValueError(f"concept {name!r}: values have to be finite, but one is {v}")
    return v


@dataclass
class ConceptProposal:
    """The concepts a proposer found in one matrix.

    Args:
        concepts (`list[Concept]`): at least one; names unique; every concept has the same number of candidates.
        item_id (`str`, *optional*): the matrix's id.
        raw (`Any`, *optional*): the proposer's raw output (e.g. the VLM's answers per panel).

    Raises:
        ValueError: for no concept, duplicate names or mismatched candidate counts.
    """

    concepts: list[Concept]
    item_id: str | None = None
    raw: Any = field(default=None, repr=False)

    def __post_init__(self):
        self.concepts = list(self.concepts)
        if not self.concepts:
            where = f" for {self.item_id!r}" if self.item_id else ""
            raise ValueError(f"a ConceptProposal needs at least one concept, but the proposer returned none{where}")
        for c in self.concepts:
            if not isinstance(c, Concept):
                raise TypeError(f"`concepts` has to hold Concept objects, but holds {type(c).__name__}")
        names = [c.name for c in self.concepts]
        if len(set(names)) != len(names):
            raise ValueError(f"concept names have to be unique, but are {names}")
        counts = {len(c.candidate_values) for c in self.concepts}
        if len(counts) != 1:
            raise ValueError(f"every concept needs the same number of candidate values, but they have {sorted(counts)}")

    @property
    def names(self) -> list[str]:
        """The concept names, in order."""
        return [c.name for c in self.concepts]

    @property
    def num_candidates(self) -> int:
        """Candidate answers per concept."""
        return len(self.concepts[0].candidate_values)


@runtime_checkable
class ConceptProposer(Protocol):
    """What :class:`~hfx.vision.crd.CRDPipeline` needs from a proposer.

    ``propose(items)`` takes a list of matrices (dataset rows: ``panels`` / ``image``, and for symbolic proposers
    ``attributes`` / ``concepts``) and returns one :class:`ConceptProposal` per matrix.
    """

    def propose(self, items: Sequence[Mapping[str, Any]]) -> list[ConceptProposal]: ...


DISTRACTORS = {
    "texture": ("categorical", ["plain", "striped", "dotted", "checkered"]),
    "line_width": ("ordinal", [1, 2, 3, 4, 5]),
    "shadow": ("categorical", ["none", "left", "right"]),
    "brightness": ("ordinal", [1, 2, 3, 4, 5, 6]),
}


class AttributeProposer:
    """A proposer that reads a matrix's symbolic attributes (``attributes`` / ``concepts`` columns of
    :func:`~hfx.vision.crd.load_dataset` or :func:`~hfx.vision.crd.load_raven`), optionally corrupted -- a stand-in
    for an LVLM with a controlled error rate.

    With ``noise = p`` (or the three rates set separately):

    * **wrong values**: each panel value (context and candidates) is replaced by another value of its domain with
      probability ``value_noise``;
    * **missing concepts**: each concept is dropped with probability ``drop_rate`` (at least one is kept);
    * **distractor concepts**: each of the 4 distractors of :data:`DISTRACTORS` (``texture``, ``line_width``,
      ``shadow``, ``brightness``) is added with probability ``distractor_rate``, with independent random values in
      every panel.

    Confidences ([reconstruction], only the MH proposal uses them): 1 for every real concept at zero noise;
    otherwise uniform in ``[1 - 2 p, 1]`` for real concepts and in ``(0, 1]`` for distractors (``p`` the largest
    rate), i.e. informative but overlapping.

    The corruption of an item is a function of ``seed`` and the item's ``id`` only (not of the batch or order).

    Args:
        noise (`float`, *optional*, defaults to `0.0`): the default of the three rates, in ``[0, 1)``.
        value_noise, drop_rate, distractor_rate (`float`, *optional*): override ``noise`` per kind of error.
        seed (`int`, *optional*, defaults to `0`).

    Raises:
        ValueError: for a rate outside ``[0, 1)``; at ``propose``, for an item without symbolic attributes.
    """

    def __init__(self, noise: float = 0.0, *, value_noise: float | None = None, drop_rate: float | None = None,
                 distractor_rate: float | None = None, seed: int = 0):
        self.noise = check_float("noise", noise, minimum=0.0, maximum=1.0, strict_maximum=True)
        kw = dict(minimum=0.0, maximum=1.0, strict_maximum=True)
        self.value_noise = check_optional(check_float, "value_noise", value_noise, **kw)
        self.drop_rate = check_optional(check_float, "drop_rate", drop_rate, **kw)
        self.distractor_rate = check_optional(check_float, "distractor_rate", distractor_rate, **kw)
        self.value_noise = self.noise if self.value_noise is None else self.value_noise
        self.drop_rate = self.noise if self.drop_rate is None else self.drop_rate
        self.distractor_rate = self.noise if self.distractor_rate is None else self.distractor_rate
        self.seed = check_int("seed", seed, minimum=0)

    def to_dict(self) -> dict[str, Any]:
        """The proposer's settings (saved beside a pipeline's config).

        Returns:
            `dict`.
        """
        return {"type": "attribute", "noise": self.noise, "value_noise": self.value_noise,
                "drop_rate": self.drop_rate, "distractor_rate": self.distractor_rate, "seed": self.seed}

    def __repr__(self) -> str:
        return (f"AttributeProposer(noise={self.noise}, value_noise={self.value_noise}, drop_rate={self.drop_rate}, "
                f"distractor_rate={self.distractor_rate}, seed={self.seed})")

    def propose(self, items: Sequence[Mapping[str, Any]]) -> list[ConceptProposal]:
        """One proposal per item.

        Args:
            items (`Sequence[Mapping]`): dataset rows or generated matrices (a single mapping is accepted too).

        Returns:
            `list[ConceptProposal]`.
        """
        if isinstance(items, Mapping):
            items = [items]
        return [self._propose_one(item, i) for i, item in enumerate(items)]

    def _rng(self, item: Mapping[str, Any], index: int) -> np.random.Generator:
        key = str(item.get("id", index))
        return np.random.default_rng([self.seed, zlib.crc32(key.encode())])

    def _propose_one(self, item: Mapping[str, Any], index: int) -> ConceptProposal:
        if not isinstance(item, Mapping):
            raise TypeError(f"`items[{index}]` has to be a mapping (a dataset row), but is {type(item).__name__}")
        parsed = parse_item(dict(item))
        attributes, specs = parsed["attributes"], parsed["concepts"]
        if len(attributes) <= NUM_CONTEXT:
            raise ValueError(f"item {item.get('id', index)!r} has {len(attributes)} panels; 8 context panels and at "
                             "least one candidate are needed")
        rng = self._rng(item, index)
        top = max(self.value_noise, self.drop_rate, self.distractor_rate)
        concepts = []
        for name, spec in specs.items():
            kind, domain = spec["kind"], list(spec["domain"])
            values = [panel.get(name) for panel in attributes]
            values = [self._corrupt(rng, v, domain) for v in values]
            confidence = 1.0 if top == 0 else float(rng.uniform(max(1e-3, 1 - 2 * top), 1.0))
            concepts.append(Concept(name, kind, values[:NUM_CONTEXT], values[NUM_CONTEXT:], confidence, domain))
        if self.drop_rate > 0 and len(concepts) > 1:
            keep = [c for c in concepts if rng.random() >= self.drop_rate]
            concepts = keep or [concepts[int(rng.integers(len(concepts)))]]
        n_panels = len(attributes)
        for name, (kind, domain) in DISTRACTORS.items():
            if self.distractor_rate > 0 and rng.random() < self.distractor_rate and name not in specs:
                values = [domain[int(rng.integers(len(domain)))] for _ in range(n_panels)]
                confidence = float(rng.uniform(1e-3, 1.0))
                concepts.append(Concept(name, kind, values[:NUM_CONTEXT], values[NUM_CONTEXT:], confidence, domain))
        return ConceptProposal(concepts, item_id=str(item.get("id", index)))

    def _corrupt(self, rng: np.random.Generator, value, domain: list):
        if self.value_noise == 0 or value is None or len(domain) < 2:
            return value
        if rng.random() >= self.value_noise:
            return value
        others = [d for d in domain if d != value]
        return others[int(rng.integers(len(others)))]


__all__ = ["DISTRACTORS", "KINDS", "AttributeProposer", "Concept", "ConceptProposal", "ConceptProposer"]
