"""One-liners: :func:`apply` (turn existing LLaVA objects into PruneSID ones) and :func:`prepare_dynamic_inputs`."""

from __future__ import annotations

import torch

from .config import PruneSIDConfig


def apply(model, processor=None, num_visual_tokens: int | None = 64, **config_kwargs):
    """Enable PruneSID (or a baseline) on an existing LLaVA / LLaVA-NeXT / LLaVA-NeXT-Video model and processor.

    The model's class (and its inner ``model``'s) is switched to the hfx subclass -- a documented, reversible
    ``__class__`` swap to a subclass that adds no parameters -- and ``model.config.prunesid`` is set. Calling again
    with ``num_visual_tokens=None`` disables pruning (the model then behaves exactly as the stock class).

    Args:
        model: a ``LlavaForConditionalGeneration``, ``LlavaNextForConditionalGeneration`` or
            ``LlavaNextVideoForConditionalGeneration`` (or the matching hfx class).
        processor (*optional*): the matching ``LlavaProcessor`` / ``LlavaNextProcessor``; a PruneSID processor
            sharing its image processor and tokenizer is returned.
        num_visual_tokens (`int`, *optional*, defaults to 64): N per image / crop / frame; `None` disables.
        **config_kwargs: other :class:`PruneSIDConfig` fields (``method="divprune"``, ``score=...``, ...).

    Returns:
        `(model, processor)` (processor `None` if none was given).

    Raises:
        TypeError: for an unsupported model or processor class.
        ValueError: for invalid settings (see :class:`PruneSIDConfig`).
    """
    from transformers import LlavaNextProcessor, LlavaProcessor

    from .modeling import SUPPORTED
    from .processing import PruneSIDLlavaNextProcessor, PruneSIDLlavaProcessor

    cfg = PruneSIDConfig(num_visual_tokens=num_visual_tokens, **config_kwargs)
    for stock, (gen_cls, model_cls) in SUPPORTED.items():
        if type(model) in (stock, gen_cls):
            model.__class__ = gen_cls
            model.model.__class__ = model_cls
            break
    else:
        supported = sorted(c.__name__ for c in SUPPORTED)
        raise TypeError(f"`model` must be one of {supported} (or the hfx classes), but is {type(model).__name__}")
    model.config.prunesid = cfg.to_dict()
    if processor is None:
        return model, None
    if isinstance(processor, LlavaNextProcessor):
        new_cls = PruneSIDLlavaNextProcessor
    elif isinstance(processor, LlavaProcessor):
        new_cls = PruneSIDLlavaProcessor
    else:
        raise TypeError(
            f"`processor` must be a LlavaProcessor or LlavaNextProcessor, but is {type(processor).__name__}"
        )
    new = new_cls(
        image_processor=processor.image_processor,
        tokenizer=processor.tokenizer,
        patch_size=processor.patch_size,
        vision_feature_select_strategy=processor.vision_feature_select_strategy,
        chat_template=getattr(processor, "chat_template", None),
        image_token=processor.image_token,
        num_additional_image_tokens=processor.num_additional_image_tokens,
        num_visual_tokens=num_visual_tokens,
        keep_cls=cfg.keep_cls,
    )
    return model, new


@torch.no_grad()
def prepare_dynamic_inputs(model, processor, images, text, **processor_kwargs):
    """Build inputs for PruneSID-Dyn (``config.prunesid["dynamic"] = True``), LLaVA-1.5 only.

    Runs the vision tower once to get each image's budget ``N'`` (:func:`hfx.prunesid.selection.dynamic_budget`),
    then calls `processor` with ``N'`` placeholders for each image. The model recomputes the same budgets from the
    same pixels in ``generate``. Without ``reference_phi`` the batch mean φ is the reference, so pass the returned
    batch to ``generate`` as a whole.

    Returns:
        `BatchFeature` from the processor.
    """
    from .baselines import per_image_budgets

    cfg = PruneSIDConfig.from_model_config(model.config)
    if not cfg.dynamic:
        raise ValueError("`model.config.prunesid['dynamic']` must be True to prepare dynamic inputs")
    inner = model.model
    pixel_values = processor.image_processor(images, return_tensors="pt")["pixel_values"]
    pixel_values = pixel_values.to(device=model.device, dtype=inner.vision_tower.dtype)
    layer, _ = inner._resolve(None, None)
    _, selected = inner._run_tower(pixel_values, layer)
    processor._per_image_budgets = per_image_budgets(selected, cfg)
    try:
        return processor(images=images, text=text, **processor_kwargs)
    finally:
        processor._per_image_budgets = None


__all__ = ["apply", "prepare_dynamic_inputs"]
