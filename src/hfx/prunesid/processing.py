"""Processors that emit one image placeholder per kept visual token (PruneSID / baselines).

``PruneSIDLlavaProcessor`` gives N ``<image>`` tokens per image, ``PruneSIDLlavaNextProcessor`` gives N per AnyRes
crop (``(1 + rows·cols) · N`` per image, no newline tokens), matching :mod:`hfx.prunesid.modeling`, so
``processor(...)`` → ``model.generate(...)`` works unchanged with batches, left padding and mixed image sizes.
``num_visual_tokens=None`` reproduces the stock processor. Both settings are ``__init__`` arguments, so they
round-trip through ``processor_config.json``.
"""

from __future__ import annotations

from transformers import LlavaNextProcessor, LlavaProcessor
from transformers.image_utils import get_image_size, to_numpy_array


def _check_budget(n: int, available: int) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise ValueError(f"`num_visual_tokens` must be a positive int or None, but is {n!r}")
    if n > available:
        raise ValueError(f"`num_visual_tokens`={n} exceeds the {available} visual tokens available per image/crop")
    return n


class _BudgetMixin:
    def _init_budget(self, num_visual_tokens, keep_cls):
        if num_visual_tokens is not None:
            _check_budget(num_visual_tokens, 10**9)
        self.num_visual_tokens = num_visual_tokens
        self.keep_cls = keep_cls
        self._per_image_budgets = None  # set temporarily by `prepare_dynamic_inputs` (PruneSID-Dyn)

    def _budget(self, image_idx: int, available: int) -> int:
        if self._per_image_budgets is not None:
            return _check_budget(int(self._per_image_budgets[image_idx]), available)
        return _check_budget(self.num_visual_tokens, available)


class PruneSIDLlavaProcessor(_BudgetMixin, LlavaProcessor):
    """``LlavaProcessor`` emitting `num_visual_tokens` placeholders per image.

    Args:
        num_visual_tokens (`int`, *optional*): N per image (CLS included with `keep_cls`); `None` = stock counts.
        keep_cls (`bool`, *optional*, defaults to `True`): whether the model keeps the CLS token (then N may be
            up to ``patches + 1``), as ``PruneSIDConfig.keep_cls``.
        **kwargs: as ``LlavaProcessor`` (``patch_size``, ``vision_feature_select_strategy``,
            ``num_additional_image_tokens``, ...).

    Raises:
        ValueError: at call time if N exceeds the available tokens of an image.
    """

    def __init__(
        self,
        image_processor=None,
        tokenizer=None,
        patch_size=None,
        vision_feature_select_strategy=None,
        chat_template=None,
        image_token="<image>",
        num_additional_image_tokens=0,
        num_visual_tokens=None,
        keep_cls=True,
        **kwargs,
    ):
        # every argument is explicit: `from_pretrained` only passes the saved keys named in the signature
        self._init_budget(num_visual_tokens, keep_cls)
        super().__init__(
            image_processor,
            tokenizer,
            patch_size=patch_size,
            vision_feature_select_strategy=vision_feature_select_strategy,
            chat_template=chat_template,
            image_token=image_token,
            num_additional_image_tokens=num_additional_image_tokens,
            **kwargs,
        )

    def replace_image_token(self, image_inputs: dict, image_idx: int, **kwargs) -> str:
        if self.num_visual_tokens is None and self._per_image_budgets is None:
            return super().replace_image_token(image_inputs, image_idx, **kwargs)
        height, width = get_image_size(to_numpy_array(image_inputs["pixel_values"][image_idx]))
        patches = (height // self.patch_size) * (width // self.patch_size)
        return self.image_token * self._budget(image_idx, patches + int(self.keep_cls))

    def _get_num_multimodal_tokens(self, image_sizes=None, **kwargs):
        data = super()._get_num_multimodal_tokens(image_sizes=image_sizes, **kwargs)
        if image_sizes is not None and self.num_visual_tokens is not None:
            data.num_image_tokens = [self.num_visual_tokens] * len(image_sizes)
        return data


class PruneSIDLlavaNextProcessor(_BudgetMixin, LlavaNextProcessor):
    """``LlavaNextProcessor`` emitting `num_visual_tokens` placeholders per AnyRes crop (base + rows·cols crops).

    Args: as :class:`PruneSIDLlavaProcessor`.
    """

    def __init__(
        self,
        image_processor=None,
        tokenizer=None,
        patch_size=None,
        vision_feature_select_strategy=None,
        chat_template=None,
        image_token="<image>",
        num_additional_image_tokens=0,
        num_visual_tokens=None,
        keep_cls=True,
        **kwargs,
    ):
        # every argument is explicit: `from_pretrained` only passes the saved keys named in the signature
        self._init_budget(num_visual_tokens, keep_cls)
        super().__init__(
            image_processor,
            tokenizer,
            patch_size=patch_size,
            vision_feature_select_strategy=vision_feature_select_strategy,
            chat_template=chat_template,
            image_token=image_token,
            num_additional_image_tokens=num_additional_image_tokens,
            **kwargs,
        )

    def num_crops(self, image_size) -> int:
        """1 + rows·cols for an image of size ``(height, width)``, as the model computes it."""
        from transformers.models.llava_next.modeling_llava_next import image_size_to_num_patches

        crop = self.image_processor.crop_size["height"]
        return image_size_to_num_patches(
            image_size=list(image_size), grid_pinpoints=self.image_processor.image_grid_pinpoints, patch_size=crop
        )

    def replace_image_token(self, image_inputs: dict, image_idx: int, **kwargs) -> str:
        if self.num_visual_tokens is None and self._per_image_budgets is None:
            return super().replace_image_token(image_inputs, image_idx, **kwargs)
        image_size = image_inputs["image_sizes"][image_idx]
        image_size = image_size.tolist() if hasattr(image_size, "tolist") else list(image_size)
        height, width = image_inputs["pixel_values"][0][0].shape[-2:]
        patches = (height // self.patch_size) * (width // self.patch_size)
        n = self._budget(image_idx, patches + int(self.keep_cls))
        return self.image_token * (n * self.num_crops(image_size))

    def _get_num_multimodal_tokens(self, image_sizes=None, **kwargs):
        data = super()._get_num_multimodal_tokens(image_sizes=image_sizes, **kwargs)
        if image_sizes is not None and self.num_visual_tokens is not None:
            data.num_image_tokens = [self.num_visual_tokens * self.num_crops(s) for s in image_sizes]
        return data


def num_video_tokens(num_frames: int, num_visual_tokens: int) -> int:
    """Placeholders per video for the per-frame pruning of ``PruneSIDLlavaNextVideoModel``: ``frames · N``."""
    return int(num_frames) * int(num_visual_tokens)


__all__ = ["PruneSIDLlavaNextProcessor", "PruneSIDLlavaProcessor", "num_video_tokens"]


def _register_with_auto_classes() -> None:  # see hfx.prunesid.registration (waits while imports are in progress)
    from .registration import register

    register()


_register_with_auto_classes()
