"""One-liners: :func:`apply` (turn existing LLaVA objects into PruneSID ones) and :func:`prepare_dynamic_inputs`."""

from __future__ import annotations

import torch

from .config import PruneSIDConfig


def apply(model, processor=None, num_visual_tokens: int | None = 64, **config_kwargs):
    """Enable PruneSID (or a baseline) on an existing LLaVA / LLaVA-NeXT / LLaVA-NeXT-Video model and processor.

    The model's class (and its inner ``model``'s) is switched to the hfx subclass -- a documented, reversible
    ``__class__`` swap to a subclass that adds no parameters -- its config to the matching
    :mod:`hfx.prunesid.configuration` class (model type ``prunesid_llava``, ... so a saved folder reloads as the
    pruned class through the Auto classes), ``model.config.prunesid`` is set and the FastV hooks (inactive unless
    ``method="fastv"``) are installed. Calling again with ``num_visual_tokens=None`` disables pruning (the model then
    behaves exactly as the stock class).

    Args:
        model: a ``LlavaForConditionalGeneration``, ``LlavaNextForConditionalGeneration`` or
            ``LlavaNextVideoForConditionalGeneration`` (or the matching hfx class).
        processor (*optional*): the matching ``LlavaProcessor`` / ``LlavaNextProcessor``; a PruneSID processor
            sharing its image processor and tokenizer is returned. With ``method="fastv"`` it emits the stock
            placeholder counts (FastV prunes inside the LLM).
        num_visual_tokens (`int`, *optional*, defaults to 64): N per image / crop / frame; `None` disables (for
            ``method="fastv"`` pass `None` together with ``fastv_ratio=R``).
        **config_kwargs: other :class:`PruneSIDConfig` fields (``method="divprune"``, ``score=...``,
            ``fastv_k=2``, ...).

    Returns:
        `(model, processor)` (processor `None` if none was given).

    Raises:
        TypeError: for an unsupported model or processor class.
        ValueError: for invalid settings (see :class:`PruneSIDConfig`).

    Example:
        ```py
        >>> model, processor = apply(model, processor, num_visual_tokens=64)                  # PruneSID
        >>> model, processor = apply(model, processor, num_visual_tokens=64, method="fastv")  # FastV, K=2
        >>> model, processor = apply(model, processor, None, method="fastv", fastv_ratio=0.5)  # FastV, R=50%
        ```
    """
    from transformers import LlavaNextProcessor, LlavaProcessor

    from .configuration import CONFIG_CLASSES
    from .fastv import install_fastv_hooks
    from .modeling import SUPPORTED
    from .processing import PruneSIDLlavaNextProcessor, PruneSIDLlavaProcessor

    cfg = PruneSIDConfig(num_visual_tokens=num_visual_tokens, **config_kwargs)
    match = next((pair for stock, pair in SUPPORTED.items() if type(model) in (stock, pair[0])), None)
    if match is None:
        supported = sorted(c.__name__ for c in SUPPORTED)
        raise TypeError(f"`model` must be one of {supported} (or the hfx classes), but is {type(model).__name__}")
    gen_cls, model_cls = match
    if processor is not None and not isinstance(processor, (LlavaProcessor, LlavaNextProcessor)):
        raise TypeError(
            f"`processor` must be a LlavaProcessor or LlavaNextProcessor, but is {type(processor).__name__}"
        )
    config_cls = gen_cls.config_class
    if type(model.config) is not config_cls:
        if type(model.config) not in CONFIG_CLASSES:
            raise TypeError(f"`model.config` must be a stock LLaVA config, but is {type(model.config).__name__}")
        model.config.__class__ = config_cls  # shared with model.model.config; adds only the `prunesid` field
    model.__class__ = gen_cls
    model.model.__class__ = model_cls
    model.config.prunesid = cfg.to_dict()
    install_fastv_hooks(model)
    if processor is None:
        return model, None
    new_cls = PruneSIDLlavaNextProcessor if isinstance(processor, LlavaNextProcessor) else PruneSIDLlavaProcessor
    prunes_features = cfg.enabled and cfg.method != "fastv"
    new = new_cls(
        image_processor=processor.image_processor,
        tokenizer=processor.tokenizer,
        patch_size=processor.patch_size,
        vision_feature_select_strategy=processor.vision_feature_select_strategy,
        chat_template=getattr(processor, "chat_template", None),
        image_token=processor.image_token,
        num_additional_image_tokens=processor.num_additional_image_tokens,
        num_visual_tokens=num_visual_tokens if prunes_features else None,
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
