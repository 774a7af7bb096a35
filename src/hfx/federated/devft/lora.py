"""LoRA for DevFT: plain PEFT LoRA, an EVA-style initialisation from the previous stage, and the stage-to-stage map.

No new ``PeftType``: a stage's adapter is a :class:`peft.LoraConfig` adapter on that stage's sub-model. Stage 0 uses
PEFT's default initialisation (Kaiming ``A``, zero ``B``); every later stage is created with
``init_lora_weights=False`` and then filled by :func:`initialize_lora_from_state` with the tensors
:func:`transfer_lora` mapped from the previous stage -- the same pattern as PEFT's EVA (``initialize_lora_eva_weights``).

Transfer **[reconstruction]** (the paper only says knowledge moves forward as the next stage's initialisation): each
layer of the new stage takes the LoRA of the previous stage's layer whose group holds most of its members (ties: the
group of its anchor, then the shallower layer). `"copy"` copies ``A`` and ``B``; `"split"` multiplies ``B`` by
``|new group| / |old group|``.
"""

from __future__ import annotations

import re
from collections import OrderedDict

import torch

from .configuration import LORA_TRANSFERS, DevFTConfig, _check_choice


_LAYER_KEY = re.compile(r"^(?P<pre>.*?layers)\.(?P<idx>\d+)\.(?P<rest>.+)$")

# (input features, output features) of each Llama-family projection, from the config
_LLAMA_PROJECTIONS = {
    "q_proj": ("hidden", "q"),
    "k_proj": ("hidden", "kv"),
    "v_proj": ("hidden", "kv"),
    "o_proj": ("q", "hidden"),
    "gate_proj": ("hidden", "inter"),
    "up_proj": ("hidden", "inter"),
    "down_proj": ("inter", "hidden"),
}


def make_lora_config(config: DevFTConfig, init_lora_weights: bool = True):
    """The :class:`peft.LoraConfig` of every stage (``task_type="CAUSAL_LM"``, bias ``"none"``)."""
    from peft import LoraConfig

    return LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=list(config.target_modules),
        task_type="CAUSAL_LM",
        init_lora_weights=init_lora_weights,
    )


def wrap_with_lora(model, config: DevFTConfig, state: dict | None = None, seed: int | None = None):
    """``get_peft_model(model, LoraConfig)``; with ``state``, created with ``init_lora_weights=False`` and filled by
    :func:`initialize_lora_from_state` (EVA-style); without, PEFT's default init under ``torch.manual_seed(seed)``.

    Raises:
        ValueError: if a targeted module lies outside the decoder layers (its LoRA could not move between stages).
    """
    from peft import get_peft_model

    if state is None and seed is not None:
        torch.manual_seed(seed)
    peft_model = get_peft_model(model, make_lora_config(config, init_lora_weights=state is None))
    outside = [k for k in lora_state(peft_model) if not _LAYER_KEY.match(k)]
    if outside:
        raise ValueError(
            f"`target_modules`={config.target_modules} also matches modules outside the decoder layers ({outside[:3]}"
            "...); DevFT moves LoRA layer by layer, so target decoder-layer projections only"
        )
    if state is not None:
        initialize_lora_from_state(peft_model, state)
    return peft_model


def lora_state(peft_model) -> OrderedDict:
    """The adapter's LoRA tensors as PEFT saves them (``get_peft_model_state_dict``), detached CPU copies."""
    from peft import get_peft_model_state_dict

    return OrderedDict((k, v.detach().cpu().clone()) for k, v in get_peft_model_state_dict(peft_model).items())


@torch.no_grad()
def initialize_lora_from_state(peft_model, state: dict):
    """Fill a LoRA adapter (created with ``init_lora_weights=False``) with given tensors, EVA-style, in place.

    Args:
        peft_model (`peft.PeftModel`): the stage's model with its (single, default) LoRA adapter.
        state (`dict[str, torch.Tensor]`): keys as :func:`lora_state` returns them (``...lora_A.weight``).

    Returns:
        the same ``peft_model``.

    Raises:
        ValueError: if the keys or shapes differ from the adapter's own LoRA tensors.
    """
    from peft import set_peft_model_state_dict

    own = lora_state(peft_model)
    if set(own) != set(state):
        missing, extra = sorted(set(own) - set(state)), sorted(set(state) - set(own))
        raise ValueError(f"LoRA state does not match the adapter: missing {missing[:3]}, unexpected {extra[:3]}")
    bad = [k for k in own if tuple(own[k].shape) != tuple(state[k].shape)]
    if bad:
        raise ValueError(f"LoRA tensor shapes differ for {bad[:3]}: {[tuple(state[k].shape) for k in bad[:3]]}")
    set_peft_model_state_dict(peft_model, {k: torch.as_tensor(v) for k, v in state.items()})
    return peft_model


def layer_index(key: str) -> tuple[str, int, str]:
    """Split a LoRA key into ``(prefix, decoder-layer index, rest)``.

    Raises:
        ValueError: for a key outside the decoder layers.
    """
    m = _LAYER_KEY.match(key)
    if m is None:
        raise ValueError(f"LoRA key {key!r} is not inside a decoder layer (`...layers.<i>....`)")
    return m["pre"], int(m["idx"]), m["rest"]


def source_layers(src_plan, dst_plan) -> list[int]:
    """For each layer of the new stage, the previous stage's layer its LoRA comes from **[reconstruction]**: the one
    whose group holds most of the new group's members; ties go to the group holding the new anchor, then the shallower.

    Raises:
        ValueError: if the plans are for different base depths.
    """
    if src_plan.base_num_layers != dst_plan.base_num_layers:
        raise ValueError("the two plans are for different base models")
    owner = src_plan.group_of()
    sources = []
    for group, anchor in zip(dst_plan.groups, dst_plan.anchors):
        counts: dict[int, int] = {}
        for i in group:
            counts[owner[i]] = counts.get(owner[i], 0) + 1
        best = max(counts.values())
        tied = sorted(k for k, c in counts.items() if c == best)
        sources.append(owner[anchor] if owner[anchor] in tied else tied[0])
    return sources


def transfer_lora(state: dict, src_plan, dst_plan, mode: str = "copy") -> tuple[OrderedDict, list[int]]:
    """Map a stage's LoRA tensors onto the next stage's layers.

    Args:
        state (`dict[str, torch.Tensor]`): the previous stage's LoRA (keys ``...layers.<k>.<module>.lora_A.weight``,
            ``k < src_plan.num_layers``).
        src_plan, dst_plan (`StagePlan`): the previous and the new stage.
        mode (`str`, *optional*, defaults to `"copy"`): `"copy"` or `"split"` (see the module docstring).

    Returns:
        `(OrderedDict, list[int])`: the new stage's LoRA state -- the same modules and shapes for each of
        ``dst_plan.num_layers`` layers -- and, per new layer, the source layer index.

    Raises:
        ValueError: for an unknown mode, a key outside the decoder layers, or a state whose layers do not match
            ``src_plan``.
    """
    _check_choice("mode", mode, LORA_TRANSFERS)
    by_layer: dict[int, dict[str, tuple[str, torch.Tensor]]] = {}
    for key, value in state.items():
        pre, idx, rest = layer_index(key)
        by_layer.setdefault(idx, {})[rest] = (pre, value)
    if sorted(by_layer) != list(range(src_plan.num_layers)):
        raise ValueError(
            f"the LoRA state covers layers {sorted(by_layer)} but the source stage has {src_plan.num_layers} layers"
        )
    sources = source_layers(src_plan, dst_plan)
    out = OrderedDict()
    for k, src in enumerate(sources):
        scale = len(dst_plan.groups[k]) / len(src_plan.groups[src]) if mode == "split" else 1.0
        for rest, (pre, value) in by_layer[src].items():
            tensor = value.detach().clone()
            if scale != 1.0 and ".lora_B." in f".{rest}":
                tensor = tensor * scale
            out[f"{pre}.{k}.{rest}"] = tensor
    return out, sources


def lora_params_per_layer(model_config, target_modules, r: int) -> int:
    """LoRA parameters in one decoder layer: ``sum over targeted projections of r * (in_features + out_features)``,
    from a Llama-family config (``hidden_size``, ``num_attention_heads``, ``num_key_value_heads``, ``head_dim``,
    ``intermediate_size``).

    Raises:
        ValueError: for a target outside q/k/v/o/gate/up/down_proj.
    """
    hidden = model_config.hidden_size
    heads = model_config.num_attention_heads
    head_dim = getattr(model_config, "head_dim", None) or hidden // heads
    kv_heads = getattr(model_config, "num_key_value_heads", None) or heads
    dims = {
        "hidden": hidden,
        "q": heads * head_dim,
        "kv": kv_heads * head_dim,
        "inter": model_config.intermediate_size,
    }
    total = 0
    for name in target_modules:
        if name not in _LLAMA_PROJECTIONS:
            raise ValueError(f"no LoRA size formula for target module {name!r}; known: {sorted(_LLAMA_PROJECTIONS)}")
        d_in, d_out = _LLAMA_PROJECTIONS[name]
        total += r * (dims[d_in] + dims[d_out])
    return total


def payload_bytes(arrays) -> int:
    """Bytes of the tensor data in a state dict or a Flower ``ArrayRecord`` (keys and headers not counted)."""
    total = 0
    for value in arrays.values():
        if isinstance(value, torch.Tensor):
            total += value.numel() * value.element_size()
        else:  # flwr.app.Array
            total += value.numpy().nbytes
    return total
