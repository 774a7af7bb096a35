"""Stages of DevFT (arXiv 2508.00041, Sec. 3): the stage plan, the stage's sub-model, and :class:`DevFTScheduler`.

A :class:`StagePlan` says which base layers each of the stage's K layers fuses (``groups``), from which anchor and
with which coefficients. It is a few hundred bytes of JSON: the server sends it to the clients, which build the same
sub-model from their local copy of the (public) base model with :func:`build_submodel`.

The sub-model is a real :class:`~transformers.PreTrainedModel` of the base model's class: the base config with
``num_hidden_layers=K`` (and the anchors' ``layer_types`` where the config has them), the base embeddings, final norm
and head, and K fused decoder layers in depth order. Its config carries the plan as ``config.devft_stage``, so
``save_pretrained`` / ``from_pretrained`` round-trip it with the stock class. The last stage (K = L, one layer per
group) is the base model itself.
"""

from __future__ import annotations

import copy
import json
from dataclasses import asdict, dataclass

import torch

from .configuration import DevFTConfig
from .fusion import fuse_layer_states, fusion_coefficients
from .grouping import (
    affinity_matrix,
    contiguous_grouping,
    decoder_layers,
    decoder_layers_path,
    layer_similarity,
    pick_anchor,
    spectral_grouping,
)


@dataclass
class StagePlan:
    """How one stage's sub-model is made from the base model.

    Attributes:
        stage (`int`): stage index (0-based).
        base_num_layers (`int`): L, the base model's decoder layers.
        groups (`list[list[int]]`): K groups of base-layer indices; layer ``k`` of the sub-model fuses ``groups[k]``.
        anchors (`list[int]`): the anchor of each group.
        coefficients (`list[list[float]]`): fusion coefficients aligned with ``groups`` (each sums to 1).
    """

    stage: int
    base_num_layers: int
    groups: list
    anchors: list
    coefficients: list

    def __post_init__(self) -> None:
        self.groups = [sorted(int(i) for i in g) for g in self.groups]
        self.anchors = [int(a) for a in self.anchors]
        self.coefficients = [[float(c) for c in cs] for cs in self.coefficients]
        if not self.groups or not (len(self.groups) == len(self.anchors) == len(self.coefficients)):
            raise ValueError("`groups`, `anchors` and `coefficients` must be non-empty and of equal length")
        seen = sorted(i for g in self.groups for i in g)
        if seen != list(range(self.base_num_layers)):
            raise ValueError(
                f"`groups` must partition the {self.base_num_layers} base layers exactly once each, got {self.groups}"
            )
        for g, a, cs in zip(self.groups, self.anchors, self.coefficients):
            if a not in g or len(cs) != len(g):
                raise ValueError(
                    f"group {g}: anchor {a} must be a member and there must be one coefficient per member"
                )

    @property
    def num_layers(self) -> int:
        """K, the sub-model's decoder layers."""
        return len(self.groups)

    @property
    def is_identity(self) -> bool:
        """Whether the sub-model is the base model itself (one layer per group, in order, coefficient 1)."""
        return self.groups == [[i] for i in range(self.base_num_layers)] and all(
            cs == [1.0] for cs in self.coefficients
        )

    def group_of(self) -> list[int]:
        """For each base layer, the index of the sub-model layer (group) that holds it."""
        owner = [0] * self.base_num_layers
        for k, g in enumerate(self.groups):
            for i in g:
                owner[i] = k
        return owner

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict) -> StagePlan:
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> StagePlan:
        return cls.from_dict(json.loads(text))

    @classmethod
    def identity(cls, num_layers: int, stage: int = 0) -> StagePlan:
        """The plan whose sub-model is the full base model."""
        return cls(stage, num_layers, [[i] for i in range(num_layers)], list(range(num_layers)), [[1.0]] * num_layers)


def plan_stage(
    num_layers: int,
    base_num_layers: int,
    config: DevFTConfig,
    similarity: torch.Tensor | None = None,
    stage: int = 0,
) -> StagePlan:
    """Group the base layers into ``num_layers`` groups and choose each group's anchor and fusion coefficients.

    Args:
        num_layers (`int`): K, the stage's layers.
        base_num_layers (`int`): L.
        config (`DevFTConfig`): ``grouping``, ``affinity``, ``anchor``, ``fusion_mu``, ``fusion_weighting``, ``seed``.
        similarity (`torch.Tensor` of shape `(L, L)`, *optional*): required by spectral grouping, the medoid anchor
            and similarity weighting (see :func:`needs_similarity`).
        stage (`int`, *optional*): the stage index recorded in the plan.

    Raises:
        ValueError: if ``similarity`` is needed but missing, or ``num_layers`` is out of range.
    """
    if needs_similarity(config) and similarity is None:
        raise ValueError("this configuration needs the layer `similarity` matrix")
    if config.grouping == "spectral":
        groups = spectral_grouping(similarity, num_layers, seed=config.seed, affinity=config.affinity)
    else:
        groups = contiguous_grouping(base_num_layers, num_layers)
    anchors = [pick_anchor(g, similarity, config.anchor) for g in groups]
    affinity = affinity_matrix(similarity, config.affinity) if config.fusion_weighting == "similarity" else None
    coefficients = [
        fusion_coefficients(g, a, config.fusion_mu, config.fusion_weighting, affinity) for g, a in zip(groups, anchors)
    ]
    return StagePlan(stage, base_num_layers, groups, anchors, coefficients)


def needs_similarity(config: DevFTConfig) -> bool:
    """Whether planning needs the layer-similarity matrix (spectral grouping, medoid anchors, similarity weights)."""
    if config.method == "fedit":
        return False
    return config.grouping == "spectral" or config.anchor == "medoid" or config.fusion_weighting == "similarity"


@torch.no_grad()
def build_submodel(base_model, plan: StagePlan):
    """The stage's sub-model: a new instance of ``type(base_model)`` with ``plan.num_layers`` fused decoder layers.

    Args:
        base_model (`transformers.PreTrainedModel`): a Llama-family causal LM (decoder layers at ``model.layers``).
        plan (`StagePlan`): from :func:`plan_stage` / :meth:`DevFTScheduler.plan`.

    Returns:
        `transformers.PreTrainedModel` in eval mode, same class, dtype and device as ``base_model``;
        ``config.num_hidden_layers == plan.num_layers`` and ``config.devft_stage == plan.to_dict()``. Layer ``k``'s
        tensors are ``sum_l coefficients[k][l] * W_{groups[k][l]}``; everything outside the decoder layers is copied.

    Raises:
        ValueError: if the plan was made for another depth.
        TypeError: for a model without a single decoder-layer list (see
            :func:`~hfx.federated.devft.grouping.decoder_layers_path`).
    """
    path = decoder_layers_path(base_model)
    base_num = base_model.config.num_hidden_layers
    if plan.base_num_layers != base_num:
        raise ValueError(f"the plan is for {plan.base_num_layers} base layers but the model has {base_num}")
    config = copy.deepcopy(base_model.config)
    config.num_hidden_layers = plan.num_layers
    layer_types = getattr(config, "layer_types", None)
    if isinstance(layer_types, (list, tuple)) and len(layer_types) == base_num:
        config.layer_types = [layer_types[a] for a in plan.anchors]
    config.devft_stage = plan.to_dict()
    param = next(base_model.parameters())
    sub = type(base_model)(config).to(device=param.device, dtype=param.dtype)

    layers = decoder_layers(base_model)
    prefix = path + "."
    state = {k: v for k, v in base_model.state_dict().items() if not k.startswith(prefix)}
    for k, (group, coefs) in enumerate(zip(plan.groups, plan.coefficients)):
        fused = fuse_layer_states([layers[i].state_dict() for i in group], coefs)
        state.update({f"{prefix}{k}.{name}": t for name, t in fused.items()})
    sub.load_state_dict(state, strict=True)
    sub.generation_config = copy.deepcopy(base_model.generation_config)
    return sub.eval()


class DevFTScheduler:
    """The stage schedule of a DevFT run over one base model: plans, sub-models and LoRA transfer.

    Args:
        base_model (`transformers.PreTrainedModel`): the Llama-family causal LM being fine-tuned.
        config (`DevFTConfig`, *optional*): defaults to ``DevFTConfig()``.

    Attributes:
        stages (`list[int]`): layers per stage (e.g. ``[4, 8, 16, 30]``; ``[L]`` for the ``"fedit"`` baseline).
        rounds (`list[int]`): federated rounds per stage.

    Example:

        >>> from hfx.testing import tiny_llama
        >>> from hfx.federated.devft import DevFTConfig, DevFTScheduler
        >>> base, tok = tiny_llama(num_hidden_layers=8)
        >>> sched = DevFTScheduler(base, DevFTConfig(stages=[2, 4, 8]))
        >>> [p.num_layers for p in sched.plans()], sched.build_submodel(0).config.num_hidden_layers
        ([2, 4, 8], 2)
    """

    def __init__(self, base_model, config: DevFTConfig | None = None):
        self.base_model = base_model
        self.config = config if config is not None else DevFTConfig()
        self.num_layers = base_model.config.num_hidden_layers
        decoder_layers_path(base_model)  # raises early for unsupported models
        self.stages = self.config.resolve_stages(self.num_layers)
        self.rounds = self.config.resolve_rounds(self.num_layers)
        self._similarity = None
        self._plans: dict[int, StagePlan] = {}

    @property
    def similarity(self) -> torch.Tensor:
        """The `(L, L)` layer-similarity matrix (computed once, see :func:`layer_similarity`)."""
        if self._similarity is None:
            self._similarity = layer_similarity(
                decoder_layers(self.base_model), self.config.similarity, self.config.similarity_reduction
            )
        return self._similarity

    def plan(self, stage: int) -> StagePlan:
        """The plan of stage ``stage`` (0-based).

        Raises:
            IndexError: for a stage outside the schedule.
        """
        if not 0 <= stage < len(self.stages):
            raise IndexError(f"`stage` must be in [0, {len(self.stages) - 1}], but is {stage}")
        if stage not in self._plans:
            k = self.stages[stage]
            if self.config.method == "fedit" or k == self.num_layers:
                self._plans[stage] = StagePlan.identity(self.num_layers, stage)
            else:
                sim = self.similarity if needs_similarity(self.config) else None
                self._plans[stage] = plan_stage(k, self.num_layers, self.config, sim, stage)
        return self._plans[stage]

    def plans(self) -> list[StagePlan]:
        """Every stage's plan, in order."""
        return [self.plan(i) for i in range(len(self.stages))]

    def build_submodel(self, stage: int | StagePlan):
        """The sub-model of a stage (index or plan); see :func:`build_submodel`."""
        plan = stage if isinstance(stage, StagePlan) else self.plan(stage)
        return build_submodel(self.base_model, plan)

    def lora_config(self):
        """The stage-independent :class:`peft.LoraConfig` (see :func:`~hfx.federated.devft.lora.make_lora_config`)."""
        from .lora import make_lora_config

        return make_lora_config(self.config)

    def transfer_lora(self, state: dict, stage: int) -> tuple[dict, list[int]]:
        """Map the LoRA state of stage ``stage - 1`` onto stage ``stage`` (see
        :func:`~hfx.federated.devft.lora.transfer_lora`); returns ``(new_state, source_layer_of_each_new_layer)``."""
        from .lora import transfer_lora

        if stage < 1:
            raise ValueError("`stage` must be >= 1: stage 0 starts from PEFT's own LoRA initialisation")
        return transfer_lora(state, self.plan(stage - 1), self.plan(stage), self.config.lora_transfer)
