"""Synthetic data of the Mamba training-dynamics theory (arXiv 2602.12499): majority-voting and locality sequences.

The paper's data model: every token carries a class-relevant pattern (``o₊`` or ``o₋``) or a class-irrelevant pattern,
plus token-level noise; two regimes, *majority voting* (the label is the majority relevant pattern; fractions
``α_r`` / ``α_c`` set the difficulty) and *locality-structured* (the relevant tokens sit near the decision point,
bounds in ``(1/2)^ΔL₊ - (1/2)^ΔL₋``). The generator below is a **reconstruction** [reconstruction] (spec
``mamba_theory.md``); each reconstructed choice is a field of :class:`SyntheticSequenceConfig`:

* patterns: ``o₊``, ``o₋``, ``q_1 .. q_M`` are orthonormal (rows of a seeded random orthonormal matrix, or standard
  basis vectors); token ``l`` is ``x_l = pattern_l + N(0, noise_std² I)``;
* ``y`` is ``+1`` / ``-1`` with probability 1/2; ``o_y`` is the label-consistent pattern, ``o_¬y`` the confusing one;
* majority: ``round(α_r L)`` random positions carry ``o_y`` and ``round(α_c L)`` carry ``o_¬y`` (``α`` are fractions
  of **all** ``L`` tokens), every other token a uniformly drawn ``q_m``; ``fraction_mode="bernoulli"`` draws each
  token independently instead;
* locality: the decision point is the last position; ``o_y`` sits ``delta_consistent`` (our ``ΔL₊``) and ``o_¬y``
  ``delta_confusing`` (our ``ΔL₋``) positions before it (distance 0 = the last token); every other token is a
  ``q_m``.

Pattern ids: ``0`` = ``o₊``, ``1`` = ``o₋``, ``2 + m`` = ``q_m``. Labels: ``1`` means ``y = +1``, ``0`` means ``y = -1``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import torch


REGIMES = ("majority", "locality")
FRACTION_MODES = ("exact", "bernoulli")
PATTERN_BASES = ("random", "standard")
O_PLUS, O_MINUS = 0, 1


@dataclass
class SyntheticSequenceConfig:
    """Parameters of the synthetic sequences [reconstruction]; stored in every example's ``metadata``.

    Args:
        regime (`str`, *optional*, defaults to `"majority"`): ``"majority"`` or ``"locality"``.
        sequence_length (`int`, *optional*, defaults to `20`): ``L``.
        hidden_size (`int`, *optional*, defaults to `32`): ``d``, the token dimension.
        num_irrelevant_patterns (`int`, *optional*, defaults to `16`): ``M``; at most ``d - 2``.
        alpha_r (`float`, *optional*, defaults to `0.5`): majority regime: fraction of tokens carrying ``o_y``.
        alpha_c (`float`, *optional*, defaults to `0.2`): majority regime: fraction carrying ``o_¬y``
            (``α_c <= α_r``, ``α_r + α_c <= 1``; ``α_r = α_c`` makes the label independent of the tokens).
        fraction_mode (`str`, *optional*, defaults to `"exact"`): ``"exact"`` places exactly ``round(α L)`` tokens
            of each relevant pattern; ``"bernoulli"`` draws each token's pattern independently with probabilities
            ``α_r``, ``α_c``, ``1 - α_r - α_c``.
        delta_consistent (`int`, *optional*, defaults to `0`): locality regime: distance of ``o_y`` from the last
            position (``ΔL₊`` in our reading).
        delta_confusing (`int`, *optional*, defaults to `2`): locality regime: distance of ``o_¬y`` (``ΔL₋``).
        noise_std (`float`, *optional*, defaults to `0.1`): standard deviation of the Gaussian token noise.
        pattern_basis (`str`, *optional*, defaults to `"random"`): ``"random"`` (QR of a seeded Gaussian matrix) or
            ``"standard"`` (``o₊ = e_1``, ``o₋ = e_2``, ``q_m = e_{m+2}``).
        pattern_seed (`int`, *optional*, defaults to `0`): seed of the patterns; train and test sets must share it.

    Raises:
        ValueError: for values outside the ranges above (checked at construction).
    """

    regime: str = "majority"
    sequence_length: int = 20
    hidden_size: int = 32
    num_irrelevant_patterns: int = 16
    alpha_r: float = 0.5
    alpha_c: float = 0.2
    fraction_mode: str = "exact"
    delta_consistent: int = 0
    delta_confusing: int = 2
    noise_std: float = 0.1
    pattern_basis: str = "random"
    pattern_seed: int = 0

    def __post_init__(self):
        for name, allowed in (
            ("regime", REGIMES),
            ("fraction_mode", FRACTION_MODES),
            ("pattern_basis", PATTERN_BASES),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(f"`{name}` must be one of {list(allowed)}, but is {getattr(self, name)!r}")
        if self.sequence_length < 1:
            raise ValueError(f"`sequence_length` must be >= 1, but is {self.sequence_length}")
        if self.num_irrelevant_patterns < 1:
            raise ValueError(f"`num_irrelevant_patterns` must be >= 1, but is {self.num_irrelevant_patterns}")
        if self.hidden_size < self.num_irrelevant_patterns + 2:
            raise ValueError(
                f"`hidden_size` must be >= `num_irrelevant_patterns` + 2 = {self.num_irrelevant_patterns + 2} for "
                f"orthonormal patterns, but is {self.hidden_size}"
            )
        if self.noise_std < 0:
            raise ValueError(f"`noise_std` must be >= 0, but is {self.noise_std}")
        if self.regime == "majority":
            if not 0.0 <= self.alpha_c <= self.alpha_r <= 1.0:
                raise ValueError(f"need 0 <= `alpha_c` <= `alpha_r` <= 1, but got {self.alpha_c=}, {self.alpha_r=}")
            if self.alpha_r + self.alpha_c > 1.0 + 1e-9:
                raise ValueError(f"`alpha_r` + `alpha_c` must be <= 1, but is {self.alpha_r + self.alpha_c}")
            if self.fraction_mode == "exact" and self.num_consistent + self.num_confusing > self.sequence_length:
                raise ValueError(
                    f"round(alpha_r L) + round(alpha_c L) = {self.num_consistent + self.num_confusing} exceeds "
                    f"`sequence_length`={self.sequence_length}"
                )
        else:
            for name in ("delta_consistent", "delta_confusing"):
                value = getattr(self, name)
                if not 0 <= value < self.sequence_length:
                    raise ValueError(f"`{name}` must be in [0, sequence_length), but is {value}")
            if self.delta_consistent == self.delta_confusing:
                raise ValueError(
                    f"`delta_consistent` and `delta_confusing` must differ (one position each), both are "
                    f"{self.delta_consistent}"
                )

    @property
    def num_consistent(self) -> int:
        """``round(α_r L)``: tokens carrying ``o_y`` in the exact majority regime."""
        return round(self.alpha_r * self.sequence_length)

    @property
    def num_confusing(self) -> int:
        """``round(α_c L)``: tokens carrying ``o_¬y`` in the exact majority regime."""
        return round(self.alpha_c * self.sequence_length)

    @property
    def locality_signal(self) -> float:
        """``(1/2)^ΔL₊ - (1/2)^ΔL₋``, the quantity the paper's locality bounds depend on."""
        return 0.5**self.delta_consistent - 0.5**self.delta_confusing

    def patterns(self) -> torch.Tensor:
        """The orthonormal patterns, shape `(num_irrelevant_patterns + 2, hidden_size)`: rows ``o₊, o₋, q_1, ...``."""
        count = self.num_irrelevant_patterns + 2
        if self.pattern_basis == "standard":
            return torch.eye(self.hidden_size)[:count].clone()
        generator = torch.Generator().manual_seed(self.pattern_seed)
        gaussian = torch.randn(self.hidden_size, count, generator=generator, dtype=torch.float64)
        q, r = torch.linalg.qr(gaussian)
        q = q * torch.sign(torch.diagonal(r))[None, :]  # unique QR (positive diagonal of R)
        return q.T.contiguous().float()

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> SyntheticSequenceConfig:
        """Build from a dict (e.g. an example's ``metadata``); unknown keys are ignored."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})


def sample_sequences(config: SyntheticSequenceConfig, num_examples: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Draw ``num_examples`` sequences as tensors (the fast path used by the experiments).

    Args:
        config ([`SyntheticSequenceConfig`]).
        num_examples (`int`): ``N >= 1``.
        seed (`int`, *optional*, defaults to `0`): seeds labels, positions, irrelevant patterns and noise
            (a private ``torch.Generator``; the global RNG is untouched).

    Returns:
        `dict` with ``inputs_embeds`` (`(N, L, d)` float32), ``labels`` (`(N,)` int64 in ``{0, 1}``) and
        ``pattern_ids`` (`(N, L)` int64: ``0`` = ``o₊``, ``1`` = ``o₋``, ``2 + m`` = ``q_m``).

    Raises:
        ValueError: if ``num_examples < 1``.
    """
    if num_examples < 1:
        raise ValueError(f"`num_examples` must be >= 1, but is {num_examples}")
    generator = torch.Generator().manual_seed(seed)
    n, length, m = num_examples, config.sequence_length, config.num_irrelevant_patterns
    labels = torch.randint(0, 2, (n,), generator=generator)
    consistent = torch.where(labels == 1, O_PLUS, O_MINUS)  # o_y
    confusing = 1 - consistent  # o_¬y
    pattern_ids = torch.randint(2, m + 2, (n, length), generator=generator)
    if config.regime == "majority":
        if config.fraction_mode == "exact":
            order = torch.argsort(torch.rand(n, length, generator=generator), dim=1)
            n_r, n_c = config.num_consistent, config.num_confusing
            pattern_ids.scatter_(1, order[:, :n_r], consistent[:, None].expand(n, n_r).contiguous())
            pattern_ids.scatter_(1, order[:, n_r : n_r + n_c], confusing[:, None].expand(n, n_c).contiguous())
        else:
            u = torch.rand(n, length, generator=generator)
            pattern_ids = torch.where(u < config.alpha_r, consistent[:, None], pattern_ids)
            is_confusing = (u >= config.alpha_r) & (u < config.alpha_r + config.alpha_c)
            pattern_ids = torch.where(is_confusing, confusing[:, None], pattern_ids)
    else:
        pattern_ids[:, length - 1 - config.delta_consistent] = consistent
        pattern_ids[:, length - 1 - config.delta_confusing] = confusing
    noise = torch.randn(n, length, config.hidden_size, generator=generator) * config.noise_std
    inputs_embeds = config.patterns()[pattern_ids] + noise
    return {"inputs_embeds": inputs_embeds, "labels": labels, "pattern_ids": pattern_ids}


def nearest_distance(pattern_ids: torch.Tensor, pattern: int) -> torch.Tensor:
    """Distance from the last position to the nearest token with ``pattern`` (``-1`` where there is none).

    Args:
        pattern_ids (`torch.LongTensor` of shape `(N, L)`).
        pattern (`int`): e.g. ``0`` for ``o₊``.

    Returns:
        `torch.LongTensor` of shape `(N,)`.
    """
    length = pattern_ids.shape[-1]
    distance = torch.arange(length - 1, -1, -1, device=pattern_ids.device).expand_as(pattern_ids)
    masked = torch.where(pattern_ids == pattern, distance, torch.full_like(distance, length))
    nearest = masked.min(-1).values
    return torch.where(nearest == length, torch.full_like(nearest, -1), nearest)


def dataset_features(config: SyntheticSequenceConfig):
    """The declared ``datasets.Features`` of :func:`generate_dataset` for ``config``."""
    from datasets import Array2D, ClassLabel, Features, Sequence, Value

    length = config.sequence_length
    metadata = {
        "regime": Value("string"),
        "sequence_length": Value("int32"),
        "hidden_size": Value("int32"),
        "num_irrelevant_patterns": Value("int32"),
        "alpha_r": Value("float64"),
        "alpha_c": Value("float64"),
        "fraction_mode": Value("string"),
        "delta_consistent": Value("int32"),
        "delta_confusing": Value("int32"),
        "noise_std": Value("float64"),
        "pattern_basis": Value("string"),
        "pattern_seed": Value("int64"),
        "seed": Value("int64"),
        "index": Value("int64"),
        "num_o_plus": Value("int32"),
        "num_o_minus": Value("int32"),
        "delta_plus": Value("int32"),
        "delta_minus": Value("int32"),
    }
    return Features(
        {
            "inputs_embeds": Array2D(shape=(length, config.hidden_size), dtype="float32"),
            "label": ClassLabel(names=["negative", "positive"]),
            "pattern_ids": Sequence(Value("int32"), length=length),
            "metadata": metadata,
        }
    )


def generate_dataset(config: SyntheticSequenceConfig, num_examples: int, seed: int = 0, split: str | None = None):
    """The synthetic sequences as a ``datasets.Dataset`` with declared features (see :func:`dataset_features`).

    Each example has ``inputs_embeds`` (`(L, d)`), ``label`` (``ClassLabel``: 0 = ``negative`` = ``y = -1``,
    1 = ``positive``), ``pattern_ids`` and ``metadata``: every field of ``config``, the ``seed``, the example's
    ``index``, its counts ``num_o_plus`` / ``num_o_minus`` and its nearest distances ``delta_plus`` / ``delta_minus``
    (``-1`` when absent). ``SyntheticSequenceConfig.from_dict(example["metadata"]).patterns()`` rebuilds the patterns.

    Args:
        config ([`SyntheticSequenceConfig`]).
        num_examples (`int`): ``N >= 1``.
        seed (`int`, *optional*, defaults to `0`): same seed, same dataset (see :func:`sample_sequences`).
        split (`str`, *optional*): recorded as the dataset's split name.

    Returns:
        `datasets.Dataset` (``.with_format("torch")`` gives tensors for the models).
    """
    from datasets import Dataset, NamedSplit

    tensors = sample_sequences(config, num_examples, seed)
    ids = tensors["pattern_ids"]
    counts_plus, counts_minus = (ids == O_PLUS).sum(-1), (ids == O_MINUS).sum(-1)
    near_plus, near_minus = nearest_distance(ids, O_PLUS), nearest_distance(ids, O_MINUS)
    base = config.to_dict()
    metadata = [
        {
            **base,
            "seed": seed,
            "index": i,
            "num_o_plus": int(counts_plus[i]),
            "num_o_minus": int(counts_minus[i]),
            "delta_plus": int(near_plus[i]),
            "delta_minus": int(near_minus[i]),
        }
        for i in range(num_examples)
    ]
    data = {
        "inputs_embeds": tensors["inputs_embeds"].numpy(),
        "label": tensors["labels"].tolist(),
        "pattern_ids": ids.to(torch.int32).tolist(),
        "metadata": metadata,
    }
    return Dataset.from_dict(data, features=dataset_features(config), split=NamedSplit(split) if split else None)


def chance_accuracy_interval(num_examples: int, confidence: float = 0.95) -> tuple[float, float]:
    """Normal-approximation interval of the accuracy of a coin flip on ``num_examples`` test examples."""
    from scipy.stats import norm

    half = norm.ppf(0.5 + confidence / 2) * math.sqrt(0.25 / num_examples)
    return 0.5 - half, 0.5 + half


__all__ = [
    "SyntheticSequenceConfig",
    "chance_accuracy_interval",
    "dataset_features",
    "generate_dataset",
    "nearest_distance",
    "sample_sequences",
]
