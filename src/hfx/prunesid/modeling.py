"""PruneSID for Hugging Face LLaVA-1.5, LLaVA-NeXT (AnyRes) and LLaVA-NeXT-Video: model subclasses.

The pruning sits in ``get_image_features`` / ``get_video_features`` of the inner ``*Model`` (hook A of the hfx
integration notes): the vision tower runs as usual, the selection (:func:`hfx.prunesid.baselines.reduce_visual_tokens`)
picks N tokens per image / AnyRes crop / video frame from the ``vision_feature_layer`` features (CLS included), and
only those go through the multimodal projector. ``generate()``, training ``forward`` and the KV cache are untouched;
the matching processors (:mod:`hfx.prunesid.processing`) emit N placeholders per image.

The settings are read from ``config.prunesid`` (a :class:`~hfx.prunesid.PruneSIDConfig` dict, saved in
``config.json``); without it the classes behave exactly like their parents. ``method="fastv"`` leaves the visual
features alone and prunes inside the LLM through hooks (:mod:`hfx.prunesid.fastv`), installed by every class here.

Configs: the classes use :mod:`hfx.prunesid.configuration` (``model_type`` ``prunesid_llava``, ...), so a saved
pruned folder loads as these classes through ``AutoModelForImageTextToText`` / ``AutoModel`` after ``import hfx``
(:mod:`hfx.prunesid.registration`) and fails loudly without hfx. A stock config passed to ``__init__`` /
``from_pretrained(..., config=...)`` is converted (copied) to the PruneSID config class.

Checkpoint loading: classes defined outside ``transformers`` skip the built-in key conversions (legacy
``language_model.model.*`` layout of llava-hf checkpoints), which would leave the language model random. This module
registers the stock conversion mappings under the hfx class names on import (see ``hf_integration.md`` §2.5).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import (
    LlavaForConditionalGeneration,
    LlavaNextForConditionalGeneration,
    LlavaNextVideoForConditionalGeneration,
)
from transformers.conversion_mapping import get_checkpoint_conversion_mapping, register_checkpoint_conversion_mapping
from transformers.modeling_outputs import BaseModelOutputWithPooling
from transformers.models.llava.modeling_llava import LlavaModel, LlavaPreTrainedModel
from transformers.models.llava_next.modeling_llava_next import (
    LlavaNextModel,
    LlavaNextPreTrainedModel,
    get_anyres_image_grid_shape,
    image_size_to_num_patches,
)
from transformers.models.llava_next_video.modeling_llava_next_video import (
    LlavaNextVideoModel,
    LlavaNextVideoPreTrainedModel,
)

from hfx.utils.artifacts import ModelArtifactMixin

from .baselines import TokenReduction, per_image_budgets, reduce_visual_tokens
from .config import PruneSIDConfig
from .configuration import (
    PruneSIDLlavaConfig,
    PruneSIDLlavaNextConfig,
    PruneSIDLlavaNextVideoConfig,
    as_prunesid_config,
)
from .fastv import install_fastv_hooks


def cls_attention_and_keys(vision_tower, hidden_states: tuple, feature_layer: int):
    """CLS-row attention and mean-over-heads keys of the CLIP layer producing ``hidden_states[feature_layer]``.

    Recomputes the layer's attention for the CLS query only (``softmax(q_cls · kᵀ · scale)``, exactly the eager
    attention weights ``attentions[feature_layer]`` of the authors' code), so the tower may run with SDPA.

    Args:
        vision_tower: a ``CLIPVisionModel`` (``[vision_model.]encoder.layers[i].{layer_norm1, self_attn}``).
        hidden_states (`tuple` of `torch.Tensor` `(n, 1 + T, hidden)`): all tower hidden states (embeddings first).
        feature_layer (`int`): the ``vision_feature_layer`` (e.g. -2).

    Returns:
        `(cls_attention, keys)`: `(n, T)` fp32 attention summed over heads, and `(n, 1 + T, head_dim)` keys.

    Raises:
        TypeError: if the tower is not CLIP-like (no CLS attention available).
    """
    idx = feature_layer % len(hidden_states)
    try:
        encoder = vision_tower.vision_model.encoder if hasattr(vision_tower, "vision_model") else vision_tower.encoder
        layer = encoder.layers[idx - 1]
        attn = layer.self_attn
        norm = layer.layer_norm1
    except (AttributeError, IndexError) as err:
        raise TypeError(
            f"CLS attention needs a CLIP-like vision tower with a CLS token, got {type(vision_tower).__name__}; "
            "use `score='pca_loading'` with `method='prunesid'`, or another method"
        ) from err
    if idx < 1:
        raise ValueError(f"`vision_feature_layer`={feature_layer} selects the embeddings, which have no attention")
    x = norm(hidden_states[idx - 1])
    n, length, _ = x.shape
    h, d = attn.num_heads, attn.head_dim
    q = attn.q_proj(x[:, :1]).view(n, 1, h, d).transpose(1, 2).float()
    k = attn.k_proj(x).view(n, length, h, d).transpose(1, 2).float()
    weights = torch.softmax((q @ k.transpose(-1, -2)) * attn.scale, dim=-1)  # (n, H, 1, 1 + T)
    return weights[:, :, 0, 1:].sum(dim=1), k.mean(dim=1)


def _inner_init(stock_model, config_cls):
    def __init__(self, config):
        stock_model.__init__(self, as_prunesid_config(config, config_cls))
        install_fastv_hooks(self)

    return __init__


class PruneSIDMixin:
    """Shared plumbing of the hfx LLaVA ``*Model`` subclasses: tower call, selection, projection."""

    @property
    def prunesid_config(self) -> PruneSIDConfig:
        return PruneSIDConfig.from_model_config(self.config)

    @property
    def prunes_features(self) -> bool:
        """Whether the visual features are pruned before the LLM (enabled and not ``method="fastv"``)."""
        cfg = self.prunesid_config
        return cfg.enabled and cfg.method != "fastv"

    def _resolve(self, vision_feature_layer, vision_feature_select_strategy):
        layer = self.config.vision_feature_layer if vision_feature_layer is None else vision_feature_layer
        strategy = (
            self.config.vision_feature_select_strategy
            if vision_feature_select_strategy is None
            else vision_feature_select_strategy
        )
        if not isinstance(layer, int):
            raise TypeError(f"PruneSID needs a single int `vision_feature_layer`, but got {layer!r}")
        return layer, strategy

    def _run_tower(self, pixel_values, layer, **kwargs):
        kwargs.pop("output_hidden_states", None)
        kwargs.pop("return_dict", None)
        out = self.vision_tower(pixel_values, output_hidden_states=True, return_dict=True, **kwargs)
        return out, out.hidden_states[layer]

    @torch.no_grad()
    def prunesid_reduce(self, tower_out, selected: torch.Tensor, layer: int) -> tuple[list[torch.Tensor], list]:
        """Select tokens for every row of `selected` `(n, 1 + T, hidden)`; returns per-row projected features
        `(N_i, D)` and per-row index tensors `(N_i,)` (positions into ``1 + T``, 0 = CLS)."""
        cfg = self.prunesid_config
        cls_attn = keys = None
        if (cfg.method == "prunesid" and cfg.score == "cls_attention") or cfg.method == "visionzip":
            cls_attn, keys = cls_attention_and_keys(self.vision_tower, tower_out.hidden_states, layer)
        budgets = per_image_budgets(selected, cfg)
        groups: dict[int, list[int]] = {}
        for i, n in enumerate(budgets):
            groups.setdefault(n, []).append(i)
        feats: list = [None] * len(budgets)
        indices: list = [None] * len(budgets)
        for n, rows in groups.items():
            rows_t = torch.tensor(rows, device=selected.device)
            red = reduce_visual_tokens(
                selected[rows_t],
                cfg,
                cls_attention=None if cls_attn is None else cls_attn[rows_t],
                keys=None if keys is None else keys[rows_t],
                projector=self.multi_modal_projector,
                num_tokens=n,
            )
            proj = self._project(red, selected[rows_t])
            for j, r in enumerate(rows):
                feats[r], indices[r] = proj[j], red.indices[j]
        return feats, indices

    def _project(self, red: TokenReduction, selected: torch.Tensor) -> torch.Tensor:
        return self.multi_modal_projector(red.apply(selected))


class PruneSIDLlavaModel(PruneSIDMixin, LlavaModel):
    """``LlavaModel`` whose ``get_image_features`` keeps N visual tokens per image (PruneSID or a baseline).

    ``pooler_output`` is a list of `(N, text_hidden_size)` tensors (one per image, CLS first with ``keep_cls``);
    the image outputs also carry ``prunesid_indices``: a list of `(N,)` positions into the ``1 + T`` tower tokens.
    """

    config_class = PruneSIDLlavaConfig
    __init__ = _inner_init(LlavaModel, PruneSIDLlavaConfig)

    def get_image_features(
        self,
        pixel_values: torch.Tensor,
        vision_feature_layer: int | list[int] | None = None,
        vision_feature_select_strategy: str | None = None,
        image_sizes: torch.Tensor | None = None,
        **kwargs,
    ) -> BaseModelOutputWithPooling:
        if not self.prunes_features:
            return super().get_image_features(
                pixel_values,
                vision_feature_layer=vision_feature_layer,
                vision_feature_select_strategy=vision_feature_select_strategy,
                image_sizes=image_sizes,
                **kwargs,
            )
        if image_sizes is not None:
            raise ValueError("PruneSID for LLaVA-1.5 expects fixed-size images; `image_sizes` must be None")
        layer, _ = self._resolve(vision_feature_layer, vision_feature_select_strategy)
        out, selected = self._run_tower(pixel_values, layer, **kwargs)
        feats, indices = self.prunesid_reduce(out, selected, layer)
        out.pooler_output = feats
        out.prunesid_indices = indices
        return out


class PruneSIDAnyResMixin(PruneSIDMixin):
    """LLaVA-NeXT AnyRes: every crop (base + sub-crops) is pruned independently with the same N (5N tokens for
    base + 4 crops), as the authors' ``llava_arch.py``. Base-crop tokens stay in selection order, then the sub-crop
    tokens, then the sub-crops' CLS tokens (crop order); no ``image_newline`` token and no unpadding.

    Sub-crop order (``PruneSIDConfig.anyres_order``, see :func:`anyres_subcrop_order`): the authors'
    ``restore_image_features_sorted`` sorts each crop's kept positions ascending and writes the crop's tokens *in
    selection order* into those sorted slots (the tokens are not sorted with their positions), then reads the slots
    in raster order of the assembled (rows·S)×(cols·S) grid. hfx reproduces that by default (``"code"``), because the
    published LLaVA-NeXT numbers come from it; ``"spatial"`` puts every kept token at its own position instead (the
    order the spec's description implies), for users who want the tokens in their true raster order.
    """

    def anyres_image_features(
        self, pixel_values, image_sizes, vision_feature_layer=None, vision_feature_select_strategy=None, **kwargs
    ) -> BaseModelOutputWithPooling:
        cfg = self.prunesid_config
        if cfg.dynamic:
            raise ValueError("`dynamic=True` (PruneSID-Dyn) is supported for LLaVA-1.5 only, not for AnyRes crops")
        layer, _ = self._resolve(vision_feature_layer, vision_feature_select_strategy)
        crop = self.config.vision_config.image_size
        num_crops = [
            image_size_to_num_patches(image_size=s, grid_pinpoints=self.config.image_grid_pinpoints, patch_size=crop)
            for s in image_sizes
        ]
        if pixel_values.dim() == 5:
            pixel_values = torch.cat([pv[:n] for pv, n in zip(pixel_values, num_crops)], dim=0)
        elif pixel_values.dim() != 4:
            raise ValueError(f"`pixel_values` must have 4 or 5 dimensions, got shape {tuple(pixel_values.shape)}")
        out, selected = self._run_tower(pixel_values, layer, **kwargs)
        feats, indices = self.prunesid_reduce(out, selected, layer)
        side = crop // self.config.vision_config.patch_size
        packed, packed_idx, start = [], [], 0
        for image_size, n in zip(image_sizes, num_crops):
            f, idx = feats[start : start + n], indices[start : start + n]
            start += n
            rows, cols = get_anyres_image_grid_shape(image_size, self.config.image_grid_pinpoints, crop)
            order = anyres_subcrop_order(idx[1:], rows, cols, side, mode=cfg.anyres_order) if n > 1 else None
            parts, pidx = [f[0]], [idx[0]]
            if n > 1:
                sub_f, sub_i = (
                    torch.cat(f[1:]),
                    torch.cat([i + (c + 1) * (side * side + 1) for c, i in enumerate(idx[1:])]),
                )
                parts.append(sub_f[order])
                pidx.append(sub_i[order])
            packed.append(torch.cat(parts))
            packed_idx.append(torch.cat(pidx))
        out.pooler_output = packed
        out.prunesid_indices = packed_idx
        return out


def anyres_subcrop_order(
    crop_indices: list[torch.Tensor], rows: int, cols: int, side: int, mode: str = "code"
) -> torch.Tensor:
    """Order of the concatenated sub-crop tokens for LLaVA-NeXT packing (see :class:`PruneSIDAnyResMixin`).

    Args:
        crop_indices (`list` of `torch.LongTensor` `(N,)`): kept positions per sub-crop, in the order the crop's
            tokens come (0 = CLS, p ≥ 1 = patch p - 1 in raster order of the `side`×`side` grid), sub-crops in
            row-major grid order.
        rows, cols (`int`): the AnyRes grid shape; side (`int`): patches per crop side (24 for CLIP-L/336).
        mode (`str`, *optional*, defaults to `"code"`):
            ``"code"`` -- the authors' ``restore_image_features_sorted``: in each crop the j-th smallest kept position
            receives the crop's j-th (non-CLS) token in the given order; ``"spatial"`` -- every token at its own
            position. Either way the slots are then read by global raster position ``(r·S + y)·(cols·S) + (c·S + x)``
            and the CLS tokens follow in crop order.

    Returns:
        `torch.LongTensor`: a permutation of ``range(sum N)`` (positions into the concatenated crop tokens).

    Raises:
        ValueError: for a grid / crop-count mismatch or an unknown `mode`.
    """
    if mode not in ("code", "spatial"):
        raise ValueError(f"`mode` must be 'code' or 'spatial', but is {mode!r}")
    if len(crop_indices) != rows * cols:
        raise ValueError(f"expected {rows * cols} sub-crops for a {rows}x{cols} grid, got {len(crop_indices)}")
    slot_keys, slot_tokens, cls_tokens, offset = [], [], [], 0
    for c, idx in enumerate(crop_indices):
        r, col = divmod(c, cols)
        is_cls = idx == 0
        tokens = offset + torch.nonzero(~is_cls).flatten()  # the crop's patch tokens, in the given order
        positions = idx[~is_cls] - 1
        if mode == "code":
            positions = positions.sort().values  # slot j <- token j: positions sorted, tokens not
        y, x = positions // side, positions % side
        slot_keys.append((r * side + y) * (cols * side) + (col * side + x))
        slot_tokens.append(tokens)
        cls_tokens.append(offset + torch.nonzero(is_cls).flatten())
        offset += len(idx)
    keys = torch.cat(slot_keys)
    tokens = torch.cat(slot_tokens)
    patch_order = tokens[torch.argsort(keys, stable=True)]
    return torch.cat([patch_order, *cls_tokens])


class PruneSIDLlavaNextModel(PruneSIDAnyResMixin, LlavaNextModel):
    """``LlavaNextModel`` with per-crop PruneSID pruning (see :class:`PruneSIDAnyResMixin`)."""

    config_class = PruneSIDLlavaNextConfig
    __init__ = _inner_init(LlavaNextModel, PruneSIDLlavaNextConfig)

    def get_image_features(
        self,
        pixel_values: torch.Tensor,
        image_sizes: torch.Tensor,
        vision_feature_layer: int | list[int] | None = None,
        vision_feature_select_strategy: str | None = None,
        **kwargs,
    ) -> BaseModelOutputWithPooling:
        if not self.prunes_features:
            return super().get_image_features(
                pixel_values,
                image_sizes,
                vision_feature_layer=vision_feature_layer,
                vision_feature_select_strategy=vision_feature_select_strategy,
                **kwargs,
            )
        return self.anyres_image_features(
            pixel_values, image_sizes, vision_feature_layer, vision_feature_select_strategy, **kwargs
        )


class PruneSIDLlavaNextVideoModel(PruneSIDAnyResMixin, LlavaNextVideoModel):
    """``LlavaNextVideoModel`` with per-crop image pruning and per-frame video pruning.

    Video: each frame's tower features are pruned to N tokens (replacing the stock 2×2 spatial pooler) and
    projected; ``pooler_output`` is `(batch_size, num_frames * N, D)`. Place ``num_frames * N`` ``<video>``
    placeholders per video (see :func:`hfx.prunesid.processing.num_video_tokens`).
    """

    config_class = PruneSIDLlavaNextVideoConfig
    __init__ = _inner_init(LlavaNextVideoModel, PruneSIDLlavaNextVideoConfig)

    def get_image_features(
        self,
        pixel_values: torch.Tensor,
        image_sizes: torch.Tensor,
        vision_feature_layer: int | list[int] | None = None,
        vision_feature_select_strategy: str | None = None,
        **kwargs,
    ) -> BaseModelOutputWithPooling:
        if not self.prunes_features:
            return super().get_image_features(
                pixel_values,
                image_sizes,
                vision_feature_layer=vision_feature_layer,
                vision_feature_select_strategy=vision_feature_select_strategy,
                **kwargs,
            )
        return self.anyres_image_features(
            pixel_values, image_sizes, vision_feature_layer, vision_feature_select_strategy, **kwargs
        )

    def get_video_features(
        self,
        pixel_values_videos: torch.Tensor,
        vision_feature_layer: int | list[int] | None = None,
        vision_feature_select_strategy: str | None = None,
        **kwargs,
    ) -> BaseModelOutputWithPooling:
        cfg = self.prunesid_config
        if not self.prunes_features:
            return super().get_video_features(
                pixel_values_videos,
                vision_feature_layer=vision_feature_layer,
                vision_feature_select_strategy=vision_feature_select_strategy,
                **kwargs,
            )
        if cfg.dynamic:
            raise ValueError("`dynamic=True` is not supported for video (frames of one video must share N)")
        layer, _ = self._resolve(vision_feature_layer, vision_feature_select_strategy)
        b, frames = pixel_values_videos.shape[:2]
        out, selected = self._run_tower(pixel_values_videos.flatten(0, 1), layer, **kwargs)
        feats, indices = self.prunesid_reduce(out, selected, layer)
        out.pooler_output = torch.stack(feats).unflatten(0, (b, frames)).flatten(1, 2)
        out.prunesid_indices = torch.stack(indices).unflatten(0, (b, frames))
        return out


def _with_model(stock_pretrained, model_cls, config_cls):
    def __init__(self, config):
        config = as_prunesid_config(config, config_cls)
        stock_pretrained.__init__(self, config)
        self.model = model_cls(config)
        self.lm_head = nn.Linear(config.text_config.hidden_size, config.text_config.vocab_size, bias=False)
        self.post_init()
        install_fastv_hooks(self)

    return __init__


class PruneSIDLlavaForConditionalGeneration(ModelArtifactMixin, LlavaForConditionalGeneration):
    """``LlavaForConditionalGeneration`` with PruneSID visual-token pruning (``self.model`` is
    :class:`PruneSIDLlavaModel`). Loads stock llava-hf checkpoints with every weight (conversion mapping registered).

    Example:
        ```py
        >>> cfg = LlavaConfig.from_pretrained("llava-hf/llava-1.5-7b-hf")
        >>> cfg.prunesid = PruneSIDConfig(num_visual_tokens=64).to_dict()
        >>> model = PruneSIDLlavaForConditionalGeneration.from_pretrained("llava-hf/llava-1.5-7b-hf", config=cfg)
        >>> model.save_pretrained("llava-prunesid-64")  # model_type "prunesid_llava": Auto classes load this class
        ```
    """

    _hfx_loads = ("llava",)  # a stock checkpoint loads (identity checks: ModelArtifactMixin)
    config_class = PruneSIDLlavaConfig
    __init__ = _with_model(LlavaPreTrainedModel, PruneSIDLlavaModel, PruneSIDLlavaConfig)


class PruneSIDLlavaNextForConditionalGeneration(ModelArtifactMixin, LlavaNextForConditionalGeneration):
    """``LlavaNextForConditionalGeneration`` with per-crop PruneSID pruning (:class:`PruneSIDLlavaNextModel`)."""

    _hfx_loads = ("llava_next",)  # a stock checkpoint loads (identity checks: ModelArtifactMixin)
    config_class = PruneSIDLlavaNextConfig
    __init__ = _with_model(LlavaNextPreTrainedModel, PruneSIDLlavaNextModel, PruneSIDLlavaNextConfig)


class PruneSIDLlavaNextVideoForConditionalGeneration(ModelArtifactMixin, LlavaNextVideoForConditionalGeneration):
    """``LlavaNextVideoForConditionalGeneration`` with per-crop / per-frame pruning (:class:`PruneSIDLlavaNextVideoModel`)."""

    _hfx_loads = ("llava_next_video",)  # a stock checkpoint loads (identity checks: ModelArtifactMixin)
    config_class = PruneSIDLlavaNextVideoConfig
    __init__ = _with_model(LlavaNextVideoPreTrainedModel, PruneSIDLlavaNextVideoModel, PruneSIDLlavaNextVideoConfig)


# stock class -> (hfx generation class, hfx inner model class)
SUPPORTED = {
    LlavaForConditionalGeneration: (PruneSIDLlavaForConditionalGeneration, PruneSIDLlavaModel),
    LlavaNextForConditionalGeneration: (PruneSIDLlavaNextForConditionalGeneration, PruneSIDLlavaNextModel),
    LlavaNextVideoForConditionalGeneration: (
        PruneSIDLlavaNextVideoForConditionalGeneration,
        PruneSIDLlavaNextVideoModel,
    ),
}

_CONVERSIONS = {
    "PruneSIDLlavaForConditionalGeneration": "llava",
    "PruneSIDLlavaModel": "LlavaModel",
    "PruneSIDLlavaNextForConditionalGeneration": "llava_next",
    "PruneSIDLlavaNextModel": "LlavaNextModel",
    "PruneSIDLlavaNextVideoForConditionalGeneration": "llava_next_video",
    "PruneSIDLlavaNextVideoModel": "LlavaNextModel",
}


def register_conversion_mappings() -> None:
    """Register the stock checkpoint key conversions under the hfx class names (idempotent)."""
    for name, stock in _CONVERSIONS.items():
        mapping = get_checkpoint_conversion_mapping(stock)
        if mapping is None:
            mapping = get_checkpoint_conversion_mapping("llava_next")
        register_checkpoint_conversion_mapping(name, mapping, overwrite=True)


register_conversion_mappings()


__all__ = [
    "SUPPORTED",
    "PruneSIDLlavaForConditionalGeneration",
    "PruneSIDLlavaModel",
    "PruneSIDLlavaNextForConditionalGeneration",
    "PruneSIDLlavaNextModel",
    "PruneSIDLlavaNextVideoForConditionalGeneration",
    "PruneSIDLlavaNextVideoModel",
    "anyres_subcrop_order",
    "cls_attention_and_keys",
    "register_conversion_mappings",
]


def _register_with_auto_classes() -> None:  # see hfx.prunesid.registration (waits while imports are in progress)
    from .registration import register

    register()


_register_with_auto_classes()
