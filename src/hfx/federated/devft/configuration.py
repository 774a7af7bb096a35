"""`DevFTConfig`: every setting of a DevFT run (stages, grouping, fusion, LoRA transfer, local training, federation).

DevFT is *Developmental Federated Tuning* (Wu, Li, Guo, Li; ICLR 2026, arXiv 2508.00041): federated LoRA fine-tuning
through stages of growing sub-models, each built by grouping similar decoder layers and fusing every group into one
representative layer. The paper publishes neither the similarity measure, the anchor rule, the fusion weights nor how
LoRA moves between stages: each of those is a **[reconstruction]** here, named in its field's docstring and switchable.

Baselines are configurations of the same class (:meth:`DevFTConfig.for_baseline`):

* ``"fedit"`` -- FedAvg-LoRA on the full model from the first round (FedIT-style), same total rounds;
* ``"no_grouping"`` -- DevFT with contiguous blocks of layers instead of spectral groups;
* ``"no_fusion"`` -- DevFT whose representative layer is the anchor alone (``fusion_mu=0``).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass, field
from typing import Any


METHODS = ("devft", "fedit")
GROUPINGS = ("spectral", "contiguous")
SIMILARITIES = ("weight_cosine", "sign_agreement")
SIMILARITY_REDUCTIONS = ("per_tensor_mean", "flatten")
AFFINITIES = ("minmax", "clip")
ANCHORS = ("medoid", "first", "middle")
FUSION_WEIGHTINGS = ("uniform", "similarity")
LORA_TRANSFERS = ("copy", "split")
BASELINES = ("fedit", "no_grouping", "no_fusion")


def default_stages(num_layers: int, first: int = 4) -> list[int]:
    """The default stage schedule: powers of two from ``first`` below ``num_layers``, then ``num_layers``.

    ``default_stages(30) == [4, 8, 16, 30]``, ``default_stages(32) == [4, 8, 16, 32]``, ``default_stages(8) == [4, 8]``
    (the paper's example is 4 -> 8 -> 16 -> 32 layers; its per-model schedules are not published [reconstruction]).

    Raises:
        ValueError: if ``num_layers`` or ``first`` is not a positive integer.
    """
    if not isinstance(num_layers, int) or num_layers < 1:
        raise ValueError(f"`num_layers` must be a positive integer, but is {num_layers!r}")
    if not isinstance(first, int) or first < 1:
        raise ValueError(f"`first` must be a positive integer, but is {first!r}")
    stages, k = [], first
    while k < num_layers:
        stages.append(k)
        k *= 2
    return [*stages, num_layers]


def _check_choice(name: str, value: Any, allowed: tuple) -> None:
    if value not in allowed:
        raise ValueError(f"`{name}` must be one of {list(allowed)}, but is {value!r}")


@dataclass
class DevFTConfig:
    """Settings of a DevFT (or baseline) federated LoRA run.

    Method (arXiv 2508.00041, Sec. 3):
        method (`str`, defaults to `"devft"`): `"devft"` (growing sub-models) or `"fedit"` (one stage: the full model
            for all rounds; grouping, fusion and transfer settings are then unused).
        stages (`list[int]`, *optional*): decoder layers of each stage's sub-model, strictly increasing, the last equal
            to the base model's depth. Defaults to :func:`default_stages` (``[4, 8, 16, 30]`` for 30 layers).
        rounds_per_stage (`int` or `list[int]`, defaults to 2): federated rounds of each stage (one value for all, or
            one per stage). The ``"fedit"`` baseline runs their sum on the full model, so rounds are equal.
        grouping (`str`, defaults to `"spectral"`): `"spectral"` = deconfliction-guided grouping (Laplacian eigenmaps
            of the layer-similarity graph + k-means, Sec. 3.2); `"contiguous"` = equal blocks of adjacent layers (the
            "without grouping" ablation).
        similarity (`str`, defaults to `"weight_cosine"`) **[reconstruction]**: the layer-similarity measure over the
            layers' parameters; `"weight_cosine"` = cosine of the weights, `"sign_agreement"` = share of coordinates
            whose signs agree after removing the across-layer mean (sign conflicts as in TIES-merging).
        similarity_reduction (`str`, defaults to `"per_tensor_mean"`) **[reconstruction]**: `"per_tensor_mean"`
            averages the measure over the layer's tensors (each tensor gets one vote); `"flatten"` concatenates all of a
            layer's tensors first (the large matrices then dominate, and on SmolLM2 every pair is ~0).
        affinity (`str`, defaults to `"minmax"`) **[reconstruction]**: similarity -> graph edge weight; `"minmax"`
            rescales the off-diagonal similarities to [0, 1], `"clip"` keeps ``max(S, 0)``.
        anchor (`str`, defaults to `"medoid"`) **[reconstruction]**: the anchor layer of a group; `"medoid"` = the
            member with the highest mean similarity to the other members, `"first"` = the shallowest, `"middle"` = the
            median depth.
        fusion_mu (`float`, defaults to 1.0) **[reconstruction]**: the differential-fusion strength ``mu`` in
            ``W = W_anchor + mu * sum_{l != anchor} w_l (W_l - W_anchor)``; with uniform weights ``1/|group|``,
            ``mu = 1`` gives the group mean and ``mu = 0`` the anchor alone (the "without fusion" ablation).
        fusion_weighting (`str`, defaults to `"uniform"`) **[reconstruction]**: ``w_l = 1/|group|`` (`"uniform"`) or
            proportional to the anchor-to-member affinity, normalised to sum to ``(|group|-1)/|group|`` like the
            uniform weights (`"similarity"`).
        lora_transfer (`str`, defaults to `"copy"`) **[reconstruction]**: how a layer of the next stage is initialised
            from the previous stage's layer whose group holds most of its members: `"copy"` copies ``A`` and ``B``;
            `"split"` scales ``B`` by ``|new group| / |old group|`` so that the old group's total update is shared out.

    LoRA (PEFT, plain LoRA; later stages are initialised by :func:`~hfx.federated.devft.lora.initialize_lora_from_state`):
        lora_r (`int`, defaults to 8), lora_alpha (`int`, defaults to 16), lora_dropout (`float`, defaults to 0.0),
        target_modules (`list[str]`, defaults to ``["q_proj", "v_proj"]``): as in :class:`peft.LoraConfig`; only
        decoder-layer modules may be targeted (their LoRA tensors are what moves between stages).

    Local training (each client, each round; a fresh AdamW every round, as in FedIT):
        local_steps (`int`, defaults to 4), batch_size (`int`, defaults to 4), learning_rate (`float`, defaults to
        5e-4), weight_decay (`float`, defaults to 0.0), max_grad_norm (`float`, defaults to 1.0; 0 disables),
        max_length (`int`, defaults to 64): prompt + completion tokens (the prompt is cut from its end).

    Federation (Flower's simulation engine):
        num_clients (`int`, defaults to 4), fraction_train (`float`, defaults to 1.0): share of clients sampled per
        round; num_workers (`int`, defaults to 1): Ray actors running clients concurrently; client_num_cpus (`float`,
        defaults to 1.0): Ray CPUs per actor; torch_threads (`int`, defaults to 1): torch threads in each actor and for
        the server's evaluation; eval_batch_size (`int`, defaults to 16); seed (`int`, defaults to 0): grouping
        (k-means), client sampling, LoRA initialisation and batch order.

    Raises:
        ValueError: for a value outside the allowed set or range (the message names the field).
    """

    method: str = "devft"
    stages: list[int] | None = None
    rounds_per_stage: int | list[int] = 2
    grouping: str = "spectral"
    similarity: str = "weight_cosine"
    similarity_reduction: str = "per_tensor_mean"
    affinity: str = "minmax"
    anchor: str = "medoid"
    fusion_mu: float = 1.0
    fusion_weighting: str = "uniform"
    lora_transfer: str = "copy"
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.0
    target_modules: list[str] = field(default_factory=lambda: ["q_proj", "v_proj"])
    local_steps: int = 4
    batch_size: int = 4
    learning_rate: float = 5e-4
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    max_length: int = 64
    num_clients: int = 4
    fraction_train: float = 1.0
    num_workers: int = 1
    client_num_cpus: float = 1.0
    torch_threads: int = 1
    eval_batch_size: int = 16
    seed: int = 0

    def __post_init__(self) -> None:
        _check_choice("method", self.method, METHODS)
        _check_choice("grouping", self.grouping, GROUPINGS)
        _check_choice("similarity", self.similarity, SIMILARITIES)
        _check_choice("similarity_reduction", self.similarity_reduction, SIMILARITY_REDUCTIONS)
        _check_choice("affinity", self.affinity, AFFINITIES)
        _check_choice("anchor", self.anchor, ANCHORS)
        _check_choice("fusion_weighting", self.fusion_weighting, FUSION_WEIGHTINGS)
        _check_choice("lora_transfer", self.lora_transfer, LORA_TRANSFERS)
        if self.stages is not None:
            stages = list(self.stages)
            if not stages or any(not isinstance(k, int) or k < 1 for k in stages):
                raise ValueError(f"`stages` must be a non-empty list of positive integers, but is {self.stages!r}")
            if any(b <= a for a, b in itertools.pairwise(stages)):
                raise ValueError(f"`stages` must be strictly increasing, but is {self.stages!r}")
            self.stages = stages
        rounds = self.rounds_per_stage
        rounds_list = rounds if isinstance(rounds, (list, tuple)) else [rounds]
        if not rounds_list or any(not isinstance(r, int) or isinstance(r, bool) or r < 1 for r in rounds_list):
            raise ValueError(
                f"`rounds_per_stage` must be a positive integer or a list of them, but is {self.rounds_per_stage!r}"
            )
        if isinstance(rounds, tuple):
            self.rounds_per_stage = list(rounds)
        stages_given = self.stages is not None
        if isinstance(self.rounds_per_stage, list) and stages_given and len(self.rounds_per_stage) != len(self.stages):
            raise ValueError(
                f"`rounds_per_stage` has {len(self.rounds_per_stage)} entries but `stages` has {len(self.stages)}"
            )
        if not math.isfinite(self.fusion_mu):
            raise ValueError(f"`fusion_mu` must be a finite number, but is {self.fusion_mu!r}")
        for name in ("lora_r", "lora_alpha", "local_steps", "batch_size", "max_length", "num_clients"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"`{name}` must be a positive integer, but is {value!r}")
        for name in ("num_workers", "torch_threads", "eval_batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"`{name}` must be a positive integer, but is {value!r}")
        if not 0.0 <= self.lora_dropout < 1.0:
            raise ValueError(f"`lora_dropout` must be in [0, 1), but is {self.lora_dropout!r}")
        if not (self.learning_rate > 0 and math.isfinite(self.learning_rate)):
            raise ValueError(f"`learning_rate` must be a positive finite number, but is {self.learning_rate!r}")
        if self.weight_decay < 0 or self.max_grad_norm < 0:
            raise ValueError("`weight_decay` and `max_grad_norm` must be >= 0")
        if not 0.0 < self.fraction_train <= 1.0:
            raise ValueError(f"`fraction_train` must be in (0, 1], but is {self.fraction_train!r}")
        if not self.client_num_cpus > 0:
            raise ValueError(f"`client_num_cpus` must be > 0, but is {self.client_num_cpus!r}")
        if isinstance(self.target_modules, str) or not self.target_modules:
            raise ValueError(
                f"`target_modules` must be a non-empty list of module names, but is {self.target_modules!r}"
            )
        self.target_modules = list(self.target_modules)

    # ------------------------------------------------------------------------------------------------ schedules
    def resolve_stages(self, num_layers: int) -> list[int]:
        """Layers per stage for a base model with ``num_layers`` decoder layers (``[num_layers]`` for ``"fedit"``).

        Raises:
            ValueError: if the schedule does not end at ``num_layers`` or exceeds it.
        """
        if self.method == "fedit":
            return [num_layers]
        stages = list(self.stages) if self.stages is not None else default_stages(num_layers)
        if stages[-1] != num_layers:
            raise ValueError(
                f"`stages` must end with the base model's depth ({num_layers} layers) so that the last stage is the "
                f"full model, but is {stages}"
            )
        return stages

    def resolve_rounds(self, num_layers: int) -> list[int]:
        """Rounds of each resolved stage; for ``"fedit"``, one stage with DevFT's total rounds (equal rounds).

        Raises:
            ValueError: if ``rounds_per_stage`` is a list whose length differs from the number of stages.
        """
        if self.method == "fedit":
            return [self.total_rounds(num_layers)]
        stages = self.resolve_stages(num_layers)
        if isinstance(self.rounds_per_stage, list):
            if len(self.rounds_per_stage) != len(stages):
                raise ValueError(
                    f"`rounds_per_stage` has {len(self.rounds_per_stage)} entries but the schedule {stages} has "
                    f"{len(stages)} stages"
                )
            return list(self.rounds_per_stage)
        return [self.rounds_per_stage] * len(stages)

    def total_rounds(self, num_layers: int) -> int:
        """Total federated rounds: the sum over the developmental schedule (also for ``"fedit"``)."""
        if isinstance(self.rounds_per_stage, list):
            return sum(self.rounds_per_stage)
        stages = list(self.stages) if self.stages is not None else default_stages(num_layers)
        return self.rounds_per_stage * len(stages)

    @property
    def name(self) -> str:
        """A short label: ``devft``, ``fedit``, ``devft-no_grouping``, ``devft-no_fusion`` (or ``devft-custom``)."""
        if self.method == "fedit":
            return "fedit"
        parts = []
        if self.grouping == "contiguous":
            parts.append("no_grouping")
        if self.fusion_mu == 0:
            parts.append("no_fusion")
        return "-".join(["devft", *parts])

    # ---------------------------------------------------------------------------------------------- constructors
    @classmethod
    def for_baseline(cls, name: str, **overrides: Any) -> DevFTConfig:
        """A baseline of the paper's comparison as a config.

        Args:
            name (`str`): `"fedit"` (FedAvg-LoRA on the full model from the start, the same total rounds),
                `"no_grouping"` (contiguous blocks) or `"no_fusion"` (anchor only, ``fusion_mu=0``).
            **overrides: any other field.

        Raises:
            ValueError: for an unknown ``name``.
        """
        _check_choice("name", name, BASELINES)
        preset = {
            "fedit": {"method": "fedit"},
            "no_grouping": {"grouping": "contiguous"},
            "no_fusion": {"fusion_mu": 0.0},
        }
        return cls(**{**preset[name], **overrides})

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of every field."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DevFTConfig:
        """The inverse of :meth:`to_dict`.

        Raises:
            ValueError: for an unknown key.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown DevFTConfig field(s) {unknown}; allowed: {sorted(known)}")
        return cls(**data)
