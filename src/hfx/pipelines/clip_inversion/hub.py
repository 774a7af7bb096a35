"""``hfx publish clip-inversion``: write a Hub-ready CLIP^-1 pipeline folder with its model card."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any


logger = logging.getLogger(__name__)

ARXIV_ID = "2505.23161"
PAPER_CLIP = "openai/clip-vit-base-patch32"


def load_clip(source: str | Path | None = None, local_files_only: bool = True):
    """Resolve a CLIP for the pipeline.

    Args:
        source: a folder written by ``CLIPInversionPipeline.save_pretrained`` (has ``model_index.json``), a local CLIP
            checkpoint folder or a Hub id; ``None`` tries the paper's ``openai/clip-vit-base-patch32`` in the local
            HF cache, then falls back to the tiny random CLIP of :mod:`hfx.testing`.
        local_files_only (`bool`, *optional*, defaults to `True`): for ``source=None`` only.

    Returns:
        `(pipeline_or_None, clip_model, processor, description)` where ``description`` says what was loaded (e.g.
        ``"tiny random CLIP (hfx.testing.tiny_clip; random weights, images are not meaningful)"``).
    """
    from transformers import CLIPModel, CLIPProcessor

    from hfx._artifacts import _cached_snapshot, resolve_model

    from .pipeline_clip_inversion import CLIPInversionPipeline

    if source is not None:
        # checked before loading: another artifact's folder would otherwise build a default-sized CLIP
        path = Path(
            resolve_model(
                str(source),
                arg="source",
                allowed=("clip", "diffusers:CLIPInversionPipeline"),
                what="a CLIP folder or a saved CLIP^-1 pipeline",
            )
        )
        if (path / "model_index.json").is_file():
            pipe = CLIPInversionPipeline.from_pretrained(path)
            return pipe, pipe.clip_model, pipe.processor, f"CLIP^-1 pipeline folder {source}"
        return None, CLIPModel.from_pretrained(str(path)), CLIPProcessor.from_pretrained(str(path)), str(source)
    try:
        # the paper's CLIP from the local cache only, resolved to its snapshot folder: no network look-up at all
        cached = _cached_snapshot(PAPER_CLIP) if local_files_only else PAPER_CLIP
        if cached is None:
            raise OSError(f"{PAPER_CLIP} is not in the local HF cache")
        model = CLIPModel.from_pretrained(cached, local_files_only=local_files_only)
        processor = CLIPProcessor.from_pretrained(cached, local_files_only=local_files_only)
        return None, model, processor, f"{PAPER_CLIP} (local HF cache)"
    except OSError:
        from hfx.testing import tiny_clip

        model, processor = tiny_clip(image_size=32)
        return (
            None,
            model,
            processor,
            "tiny random CLIP (hfx.testing.tiny_clip; random weights, images are not meaningful)",
        )


def publish(out_dir: str | Path, source: str | Path | None = None, **kwargs: Any) -> Path:
    """Write a CLIP^-1 pipeline folder (``save_pretrained``, self-contained) plus the rendered model card.

    Args:
        out_dir: destination folder.
        source (*optional*): see :func:`load_clip`; without it, the paper's CLIP from the local cache or else the
            tiny random CLIP (the card then says so).
        **kwargs: pipeline config (``inr_hidden_features``, ``inr_hidden_layers``, ...) for a new pipeline.

    Returns:
        `Path`: ``out_dir``.
    """
    from hfx.hub import card_data, write_model_card

    from .pipeline_clip_inversion import CLIPInversionPipeline

    out = Path(out_dir)
    pipe, model, processor, description = load_clip(source)
    if pipe is None:
        pipe = CLIPInversionPipeline(model, processor, **kwargs)
    elif kwargs:
        raise ValueError(f"config overrides {sorted(kwargs)} cannot be applied to an existing pipeline folder")
    pipe.save_pretrained(out)
    name_or_path = getattr(model.config, "_name_or_path", "") or ""
    base_model = name_or_path if name_or_path and not Path(name_or_path).exists() and "/" in name_or_path else None
    data = card_data(
        method="clip-inversion",
        arxiv_id=ARXIV_ID,
        base_model=base_model,
        pipeline_tag="text-to-image",
        library_name="diffusers",
        tags=["clip", "inr", "implicit-neural-representation", "diffusers-custom-pipeline"],
    )
    write_model_card(
        out,
        "clip-inversion",
        data,
        clip_description=description,
        config=dict(pipe.config),
        has_embedding_bank=pipe.embedding_bank is not None,
        has_inr_bank=pipe.inr_bank is not None,
    )
    logger.info("wrote CLIP^-1 pipeline (%s) to %s", description, out)
    return out
