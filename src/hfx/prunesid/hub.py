"""`hfx publish prunesid-llava --out DIR [--source LLAVA_FOLDER]`: a Hub-ready PruneSID configuration folder."""

from __future__ import annotations

import json
from pathlib import Path

from .config import PruneSIDConfig


DEFAULT_BASE_MODEL = "llava-hf/llava-1.5-7b-hf"


def publish(
    out_dir: Path,
    source: str | Path | None = None,
    num_visual_tokens: int = 64,
    base_model: str = DEFAULT_BASE_MODEL,
    **config_kwargs,
) -> Path:
    """Write config + processor + model card for PruneSID on a llava-hf LLaVA-1.5 checkpoint (no weights).

    The config has ``model_type`` ``prunesid_llava`` (:class:`~hfx.prunesid.PruneSIDLlavaConfig`). Users point the
    folder at the real weights::

        import hfx
        config = AutoConfig.from_pretrained(DIR)              # a PruneSIDLlavaConfig carrying `prunesid`
        model = AutoModelForImageTextToText.from_pretrained("llava-hf/llava-1.5-7b-hf", config=config)
        processor = AutoProcessor.from_pretrained(DIR)         # only written when `source` is given

    Args:
        out_dir (`Path`): destination folder (created).
        source (`str` or `Path`, *optional*): a local llava-hf LLaVA-1.5 folder (config + tokenizer + processor
            files). Its config and processor are written with the PruneSID settings; without it the config is
            ``LlavaConfig()`` (the llava-1.5-7b layout) and no processor is written (no tokenizer offline).
        num_visual_tokens (`int`, *optional*, defaults to 64): N.
        base_model (`str`, *optional*, defaults to ``"llava-hf/llava-1.5-7b-hf"``): named in the card metadata.
        **config_kwargs: other :class:`PruneSIDConfig` fields.

    Returns:
        `Path`: `out_dir`.
    """
    from transformers import LlavaConfig

    from hfx.hub import card_data, write_model_card

    from .configuration import PruneSIDLlavaConfig, as_prunesid_config
    from .processing import PruneSIDLlavaProcessor

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cfg = PruneSIDConfig(num_visual_tokens=num_visual_tokens, **config_kwargs)
    config = LlavaConfig.from_pretrained(source) if source is not None else LlavaConfig()
    config = as_prunesid_config(config, PruneSIDLlavaConfig)
    config.prunesid = cfg.to_dict()
    config.architectures = ["PruneSIDLlavaForConditionalGeneration"]
    config.save_pretrained(out_dir)
    (out_dir / "prunesid_config.json").write_text(json.dumps(cfg.to_dict(), indent=2) + "\n")
    has_processor = False
    if source is not None:
        processor = PruneSIDLlavaProcessor.from_pretrained(
            source, num_visual_tokens=num_visual_tokens if cfg.method != "fastv" else None, keep_cls=cfg.keep_cls
        )
        processor.save_pretrained(out_dir)
        has_processor = True
    data = card_data(
        method="prunesid",
        arxiv_id="2603.09480",
        base_model=base_model,
        pipeline_tag="image-text-to-text",
        tags=["llava", "token-pruning"],
    )
    write_model_card(
        out_dir,
        "prunesid-llava",
        data,
        base_model=base_model,
        num_visual_tokens=num_visual_tokens,
        method=cfg.method,
        has_processor=has_processor,
        settings=json.dumps(cfg.to_dict()),
    )
    return out_dir


__all__ = ["publish"]
