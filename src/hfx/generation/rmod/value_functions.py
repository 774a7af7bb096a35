"""Value functions for RMOD: the protocol, a trainable multi-head value model, and a zero-training reward wrapper.

**Protocol.** A value function is any callable ``values = vf(input_ids, attention_mask)`` with

* ``input_ids`` (`torch.LongTensor` of shape `(N, L)`): prompt + partial response in the *language model's* token ids
  (left-padded prompts; tokens after an EOS are padding);
* ``attention_mask`` (`torch.LongTensor` of shape `(N, L)`): 1 for real tokens, 0 for padding (also after EOS);
* returning ``values`` (`torch.Tensor` of shape `(N, G)`): the value of each prefix for each of the ``G`` objectives,
  i.e. an estimate of the final reward ``r_g`` of a response continuing that prefix (arXiv 2503.08796, Sec. 3).

A callable may also return a :class:`~transformers.utils.ModelOutput` with a ``last_values`` field (what
:class:`MultiObjectiveValueModel` returns). When its signature has a ``prompt_length`` parameter, RMOD passes the
number of leading (left-padded) prompt columns as ``prompt_length=`` (an `int`), so text-level rewards can split
prompt and completion. An optional ``num_objectives`` attribute lets RMOD validate ``weights`` before decoding.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch
from huggingface_hub.dataclasses import strict
from torch import nn
from transformers import AutoConfig, AutoModel, PreTrainedConfig, PreTrainedModel
from transformers.utils import ModelOutput

from hfx.utils.artifacts import ConfigArtifactMixin, ModelArtifactMixin, register_module


try:  # transformers >= 5.20: PreTrainedConfig builds sub-configs declared with SubConfigSpec
    from transformers.configuration_utils import SubConfigSpec
except (
    ImportError
):  # older transformers 5.x (the vLLM environment's): built in MultiObjectiveValueConfig.__post_init__
    SubConfigSpec = None


# --------------------------------------------------------------------------------------------------------------------
# loss
# --------------------------------------------------------------------------------------------------------------------


def monte_carlo_value_loss(
    values: torch.Tensor, rewards: torch.Tensor, mask: torch.Tensor | None = None, reduction: str = "mean"
) -> torch.Tensor:
    r"""CD-FUDGE / Monte-Carlo regression of every prefix value on the final per-objective reward.

    ``loss = sum_{b,t,g} mask[b,t] * (values[b,t,g] - rewards[b,g])^2 / (G * sum_{b,t} mask[b,t])``

    Source: arXiv 2503.08796, value-function training (``E[sum_t (V_g(x, y^{<=t}) - r_g(x, y))^2]``) and the reference
    code's ``MonteCarloLoss`` (``(v[..., 1:] - r_last)^2``). Padding is masked out [reconstruction: the code
    regresses every position; here ``mask`` selects the positions, e.g. the attention mask or the completion mask].

    Args:
        values (`torch.Tensor` of shape `(batch_size, sequence_length, num_objectives)`): prefix values.
        rewards (`torch.Tensor` of shape `(batch_size, num_objectives)`): final reward of each response.
        mask (`torch.Tensor` of shape `(batch_size, sequence_length)`, *optional*): 1 = position is regressed.
            Defaults to all positions.
        reduction (`str`, *optional*, defaults to `"mean"`): ``"mean"`` (as above) or ``"sum"``.

    Returns:
        `torch.Tensor`: a scalar; exactly 0 iff every unmasked prefix value equals the final reward.

    Raises:
        ValueError: on shape mismatches, an empty mask or an unknown ``reduction``.
    """
    if values.dim() != 3:
        raise ValueError(
            f"`values` must have shape (batch_size, sequence_length, num_objectives), got {tuple(values.shape)}"
        )
    if rewards.shape != (values.shape[0], values.shape[2]):
        raise ValueError(
            f"`rewards` must have shape (batch_size, num_objectives) = {(values.shape[0], values.shape[2])}, "
            f"got {tuple(rewards.shape)}"
        )
    if mask is None:
        mask = torch.ones(values.shape[:2], dtype=values.dtype, device=values.device)
    if mask.shape != values.shape[:2]:
        raise ValueError(f"`mask` must have shape {tuple(values.shape[:2])}, got {tuple(mask.shape)}")
    if reduction not in ("mean", "sum"):
        raise ValueError(f"`reduction` must be 'mean' or 'sum', but is {reduction!r}")
    mask = mask.to(values.dtype)
    sq = (values - rewards.to(values.dtype).unsqueeze(1)).pow(2) * mask.unsqueeze(-1)
    total = sq.sum()
    if reduction == "sum":
        return total
    denom = mask.sum() * values.shape[2]
    if denom <= 0:
        raise ValueError("`mask` selects no position: nothing to regress")
    return total / denom


def last_token_index(attention_mask: torch.Tensor) -> torch.Tensor:
    """Index of the last position with ``attention_mask == 1`` in each row (works for left and right padding).

    Args:
        attention_mask (`torch.Tensor` of shape `(N, L)`).

    Returns:
        `torch.LongTensor` of shape `(N,)` (0 for an all-zero row).
    """
    length = attention_mask.shape[1]
    positions = torch.arange(length, device=attention_mask.device).expand_as(attention_mask)
    return torch.where(attention_mask.bool(), positions, torch.zeros_like(positions)).max(dim=1).values


# --------------------------------------------------------------------------------------------------------------------
# MultiObjectiveValueModel
# --------------------------------------------------------------------------------------------------------------------


def _backbone_config(value):
    """A backbone config from ``None`` (Llama defaults), a dict (its ``model_type``, default ``"llama"``) or a config;
    used only with transformers releases that predate ``SubConfigSpec``."""
    from transformers import CONFIG_MAPPING

    if value is None:
        return CONFIG_MAPPING["llama"]()
    if isinstance(value, dict):
        kwargs = dict(value)
        return CONFIG_MAPPING[kwargs.pop("model_type", "llama")](**kwargs)
    return value


@strict
class MultiObjectiveValueConfig(ConfigArtifactMixin, PreTrainedConfig):
    r"""Configuration of a [`MultiObjectiveValueModel`]: a backbone config plus ``G`` linear value heads.

    Args:
        backbone_config (`dict` or `PreTrainedConfig`, *optional*):
            Config of the transformer backbone, built with ``AutoModel.from_config`` (any model type). Defaults to a
            Llama config.
        num_objectives (`int`, *optional*, defaults to `2`): ``G``, the number of objectives (value heads).
        objective_names (`list[str]`, *optional*): one name per objective (defaults to ``objective_0``, ...).
        value_head_dropout (`float`, *optional*, defaults to `0.0`): dropout on the hidden states before the heads.
        loss_on_prompt (`bool`, *optional*, defaults to `False`):
            Whether prompt positions are regressed too when a ``completion_mask`` is not given (the code regresses
            every position; default here: only positions the attention mask marks) [reconstruction].

    Raises:
        ValueError: if ``num_objectives < 1`` or ``objective_names`` does not have ``num_objectives`` entries.
    """

    model_type = "hfx_rmod_value"
    # (ConfigArtifactMixin) another artifact's config.json, or one without a field of this class (`backbone_config`,
    # `num_objectives`, ...), is refused instead of building a default 4096-wide Llama backbone or inventing names
    if SubConfigSpec is not None:
        sub_configs_defaults: ClassVar[dict] = {
            "backbone_config": SubConfigSpec(config_class=AutoConfig, model_type="llama")
        }
    else:
        sub_configs = {"backbone_config": AutoConfig}

    backbone_config: dict | PreTrainedConfig | None = None
    num_objectives: int = 2
    objective_names: list[str] | None = None
    value_head_dropout: float = 0.0
    loss_on_prompt: bool = False

    def __post_init__(self, **kwargs):
        if SubConfigSpec is None:
            self.backbone_config = _backbone_config(self.backbone_config)
        super().__post_init__(**kwargs)
        if self.num_objectives < 1:
            raise ValueError(f"`num_objectives` must be >= 1, but is {self.num_objectives}")
        if self.objective_names is None:
            self.objective_names = [f"objective_{g}" for g in range(self.num_objectives)]
        if len(self.objective_names) != self.num_objectives:
            raise ValueError(
                f"`objective_names` must have `num_objectives`={self.num_objectives} entries, "
                f"got {len(self.objective_names)}: {self.objective_names}"
            )
        if not 0.0 <= self.value_head_dropout < 1.0:
            raise ValueError(f"`value_head_dropout` must be in [0, 1), but is {self.value_head_dropout}")


@dataclass
class MultiObjectiveValueOutput(ModelOutput):
    """Output of [`MultiObjectiveValueModel`].

    Args:
        loss (`torch.FloatTensor` of shape `()`, *optional*): Monte-Carlo value loss, when ``rewards`` are given.
        values (`torch.FloatTensor` of shape `(batch_size, sequence_length, num_objectives)`): every prefix's values.
        last_values (`torch.FloatTensor` of shape `(batch_size, num_objectives)`):
            values at the last attended token of each row (what RMOD uses to score a prefix).
        hidden_states (`tuple(torch.FloatTensor)`, *optional*): the backbone's hidden states, when requested.
    """

    loss: torch.FloatTensor | None = None
    values: torch.FloatTensor | None = None
    last_values: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None


class MultiObjectiveValuePreTrainedModel(ModelArtifactMixin, PreTrainedModel):
    config_class = MultiObjectiveValueConfig
    accepts_loss_kwargs = False  # a mean loss: `Trainer` passes no `num_items_in_batch`, divides by accumulation steps
    base_model_prefix = "backbone"
    supports_gradient_checkpointing = True
    _supports_sdpa = True

    def _init_weights(self, module):
        if isinstance(module, nn.Linear) and getattr(module, "_is_value_head", False):
            nn.init.normal_(module.weight, std=1.0 / (module.in_features + 1) ** 0.5)
            nn.init.zeros_(module.bias)
        else:
            super()._init_weights(module)


class MultiObjectiveValueModel(MultiObjectiveValuePreTrainedModel):
    r"""A transformer backbone with ``G`` linear value heads: ``V_g(x, y^{<=t})`` for every prefix (RMOD's value function).

    Works with any ``AutoModel`` backbone (decoder or encoder). It is a [`~transformers.PreTrainedModel`], so
    ``save_pretrained`` / ``from_pretrained`` / ``push_to_hub`` work as usual; train it with
    [`ValueFunctionTrainer`]. Calling it with ``(input_ids, attention_mask)`` returns a
    [`MultiObjectiveValueOutput`] whose ``last_values`` `(N, G)` is what RMOD uses, so the model can be passed as
    ``value_function=`` directly. The backbone must share the language model's tokenizer (RMOD passes token ids).

    Source: arXiv 2503.08796 (value functions with several heads; CD-FUDGE-style training).

    Example:

    ```python
    >>> from hfx.generation.rmod import MultiObjectiveValueModel
    >>> vf = MultiObjectiveValueModel.from_backbone(lm.model, num_objectives=2, objective_names=["helpful", "harmless"])
    >>> out = lm.generate(**enc, custom_generate="rmod", value_function=vf, do_sample=True, max_new_tokens=32)
    ```
    """

    def __init__(self, config: MultiObjectiveValueConfig):
        super().__init__(config)
        self.backbone = AutoModel.from_config(config.backbone_config)
        hidden_size = getattr(config.backbone_config, "hidden_size", None) or config.backbone_config.d_model
        self.dropout = nn.Dropout(config.value_head_dropout)
        self.value_head = nn.Linear(hidden_size, config.num_objectives)
        self.value_head._is_value_head = True
        self.post_init()

    @property
    def num_objectives(self) -> int:
        """``G``, the number of objectives (value heads)."""
        return self.config.num_objectives

    @property
    def objective_names(self) -> list[str]:
        return list(self.config.objective_names)

    def get_input_embeddings(self):
        return self.backbone.get_input_embeddings()

    def set_input_embeddings(self, value):
        self.backbone.set_input_embeddings(value)

    @classmethod
    def from_backbone(
        cls,
        backbone: str | PreTrainedModel,
        num_objectives: int,
        objective_names: list[str] | None = None,
        **config_kwargs,
    ) -> MultiObjectiveValueModel:
        """Build a value model on a pretrained backbone (its weights are copied; value heads are freshly initialised).

        Args:
            backbone (`str` or `PreTrainedModel`): a Hub id / local folder (loaded with ``AutoModel``), or a loaded
                model (a ``*ForCausalLM``'s base model is used, e.g. ``lm.model``).
            num_objectives (`int`): ``G``.
            objective_names (`list[str]`, *optional*).
            **config_kwargs: other [`MultiObjectiveValueConfig`] fields.
        """
        if isinstance(backbone, str):
            backbone = AutoModel.from_pretrained(backbone)
        if not isinstance(backbone, PreTrainedModel):
            raise TypeError(f"`backbone` must be a model id, a folder or a PreTrainedModel, got {type(backbone)}")
        base = backbone.base_model if getattr(backbone, "base_model", None) is not None else backbone
        config = MultiObjectiveValueConfig(
            backbone_config=base.config,
            num_objectives=num_objectives,
            objective_names=objective_names,
            **config_kwargs,
        )
        model = cls(config).to(next(base.parameters()).dtype)
        _missing, unexpected = model.backbone.load_state_dict(base.state_dict(), strict=False)
        if unexpected:
            raise ValueError(f"`backbone` weights do not match its config: unexpected keys {unexpected[:5]}")
        return model

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        rewards: torch.Tensor | None = None,
        completion_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> MultiObjectiveValueOutput:
        r"""Values of every prefix.

        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`).
            attention_mask (`torch.Tensor` of shape `(batch_size, sequence_length)`, *optional*): 1 = real token.
            rewards (`torch.Tensor` of shape `(batch_size, num_objectives)`, *optional*):
                final per-objective rewards; when given, ``loss`` is the Monte-Carlo value loss.
            completion_mask (`torch.Tensor` of shape `(batch_size, sequence_length)`, *optional*):
                positions to regress (e.g. the response tokens); defaults to ``attention_mask``.

        Returns:
            [`MultiObjectiveValueOutput`] with ``values`` `(B, L, G)` and ``last_values`` `(B, G)`.
        """
        if input_ids is None and inputs_embeds is None:
            raise ValueError("Pass `input_ids` or `inputs_embeds`.")
        if attention_mask is None:
            ref = input_ids if input_ids is not None else inputs_embeds[..., 0]
            attention_mask = torch.ones(ref.shape[:2], dtype=torch.long, device=ref.device)
        backbone_out = self.backbone(
            input_ids=input_ids,
            attention_mask=attention_mask,
            inputs_embeds=inputs_embeds,
            output_hidden_states=output_hidden_states,
            return_dict=True,
            **kwargs,
        )
        hidden = backbone_out.last_hidden_state  # (B, L, D)
        values = self.value_head(self.dropout(hidden)).float()  # (B, L, G)
        idx = last_token_index(attention_mask)
        last_values = values[torch.arange(values.shape[0], device=values.device), idx]  # (B, G)
        loss = None
        if rewards is not None:
            mask = completion_mask if completion_mask is not None else attention_mask
            loss = monte_carlo_value_loss(values, rewards.float(), mask)
        return MultiObjectiveValueOutput(
            loss=loss,
            values=values,
            last_values=last_values,
            hidden_states=backbone_out.hidden_states if output_hidden_states else None,
        )


register_module(__name__)  # AutoConfig + AutoModel (see hfx.utils.artifacts.ARCHITECTURES)


# --------------------------------------------------------------------------------------------------------------------
# RewardFunctionValues
# --------------------------------------------------------------------------------------------------------------------


class RewardFunctionValues:
    r"""Zero-training value function: ``G`` final-reward functions applied to the decoded (partial) text.

    Each reward function is either

    * a callable ``fn(prompts: list[str], completions: list[str], **kwargs) -> list[float] | torch.Tensor`` (the
      same keyword convention as TRL reward functions: it is called **by keyword**, so its parameters must be named
      ``prompts`` and ``completions``, or it must accept ``**kwargs``), or
    * a sequence-classification [`~transformers.PreTrainedModel`] (one label), scored on ``prompt + completion``
      with its tokenizer from ``reward_processing_classes``.

    Scoring the partial response with the final reward is the simplest value estimate (no training; exact at the
    last block). Source: arXiv 2503.08796 uses trained value heads or oracle reward models ("oracle" decoding in the
    reference code); this wrapper is the oracle path [reconstruction].

    Args:
        reward_funcs (`Sequence[Callable | PreTrainedModel]`): the ``G`` objectives.
        tokenizer (`PreTrainedTokenizerBase`): the *language model's* tokenizer, used to decode ``input_ids``.
        reward_processing_classes (`Sequence`, *optional*): one tokenizer (or ``None``) per reward function; required
            for model rewards.
        objective_names (`list[str]`, *optional*): defaults to the functions' ``__name__`` (or class name).
        skip_special_tokens (`bool`, *optional*, defaults to `True`): passed to ``tokenizer.batch_decode``.

    Raises:
        ValueError: if ``reward_funcs`` is empty, a model reward has no tokenizer, or lengths disagree.
        TypeError: if an entry is neither callable nor a model.
    """

    def __init__(
        self,
        reward_funcs: Sequence[Callable | PreTrainedModel],
        tokenizer,
        reward_processing_classes: Sequence | None = None,
        objective_names: list[str] | None = None,
        skip_special_tokens: bool = True,
    ):
        if callable(reward_funcs) and not isinstance(reward_funcs, (list, tuple)):
            reward_funcs = [reward_funcs]
        reward_funcs = list(reward_funcs)
        if not reward_funcs:
            raise ValueError("`reward_funcs` must contain at least one reward function")
        processing = (
            list(reward_processing_classes) if reward_processing_classes is not None else [None] * len(reward_funcs)
        )
        if len(processing) != len(reward_funcs):
            raise ValueError(
                f"`reward_processing_classes` must have one entry per reward function ({len(reward_funcs)}), "
                f"got {len(processing)}"
            )
        for i, fn in enumerate(reward_funcs):
            if isinstance(fn, PreTrainedModel):
                if processing[i] is None:
                    raise ValueError(f"reward model #{i} needs a tokenizer in `reward_processing_classes[{i}]`")
            elif not callable(fn):
                raise TypeError(f"`reward_funcs[{i}]` must be a callable or a PreTrainedModel, got {type(fn)}")
        if objective_names is None:
            objective_names = [getattr(fn, "__name__", type(fn).__name__) for fn in reward_funcs]
        if len(objective_names) != len(reward_funcs):
            raise ValueError(f"`objective_names` must have {len(reward_funcs)} entries, got {len(objective_names)}")
        self.reward_funcs = reward_funcs
        self.reward_processing_classes = processing
        self.tokenizer = tokenizer
        self.objective_names = list(objective_names)
        self.skip_special_tokens = skip_special_tokens

    @property
    def num_objectives(self) -> int:
        return len(self.reward_funcs)

    def decode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, prompt_length: int | None):
        """Split and decode ``input_ids`` into ``(prompts, completions)`` text lists (padding removed)."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        p = 0 if prompt_length is None else int(prompt_length)
        prompts, completions = [], []
        for ids, mask in zip(input_ids.tolist(), attention_mask.tolist()):
            prompts.append([t for t, m in zip(ids[:p], mask[:p]) if m])
            completions.append([t for t, m in zip(ids[p:], mask[p:]) if m])
        decode = self.tokenizer.batch_decode
        return (
            decode(prompts, skip_special_tokens=self.skip_special_tokens),
            decode(completions, skip_special_tokens=self.skip_special_tokens),
        )

    @torch.no_grad()
    def __call__(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, prompt_length: int | None = None
    ) -> torch.Tensor:
        """Scores `(N, G)` (float32, on ``input_ids.device``) of the decoded prefixes."""
        prompts, completions = self.decode(input_ids, attention_mask, prompt_length)
        columns = []
        for i, fn in enumerate(self.reward_funcs):
            if isinstance(fn, PreTrainedModel):
                tok = self.reward_processing_classes[i]
                enc = tok([p + c for p, c in zip(prompts, completions)], return_tensors="pt", padding=True)
                enc = {k: v.to(fn.device) for k, v in enc.items()}
                scores = fn(**enc).logits[:, 0]
            else:
                kwargs = {}
                if "input_ids" in inspect.signature(fn).parameters:
                    kwargs["input_ids"] = input_ids
                scores = fn(prompts=prompts, completions=completions, **kwargs)
            scores = torch.as_tensor(scores, dtype=torch.float32).reshape(-1).to(input_ids.device)
            if scores.shape[0] != input_ids.shape[0]:
                raise ValueError(
                    f"reward function {self.objective_names[i]!r} returned {scores.shape[0]} scores for "
                    f"{input_ids.shape[0]} sequences"
                )
            columns.append(scores)
        return torch.stack(columns, dim=-1)


__all__ = [
    "MultiObjectiveValueConfig",
    "MultiObjectiveValueModel",
    "MultiObjectiveValueOutput",
    "MultiObjectiveValuePreTrainedModel",
    "RewardFunctionValues",
    "last_token_index",
    "monte_carlo_value_loss",
]
