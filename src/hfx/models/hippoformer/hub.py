"""``hfx publish hippoformer`` / ``hfx publish mmtem``: write a Hub-ready model folder with its model card.

The folder is a standard transformers checkpoint (``config.json`` with ``model_type`` ``"hippoformer"`` / ``"mmtem"``
+ safetensors); after ``import hfx`` it loads with ``AutoModel.from_pretrained``.
"""

from __future__ import annotations

from pathlib import Path


_DESCRIPTIONS = {
    "hippoformer": "Hippoformer: mm-TEM in parallel with a single-layer Transformer",
    "mmtem": "mm-TEM: path integration + a meta-MLP memory written at test time",
}


def _write(artifact: str, out_dir: Path, source=None, repo_id: str | None = None) -> Path:
    from hfx.hub import card_data, write_model_card

    from .configuration_hippoformer import HippoformerConfig, MMTEMConfig
    from .modeling_hippoformer import HippoformerForNextObservation, MMTEMModel

    model_cls = HippoformerForNextObservation if artifact == "hippoformer" else MMTEMModel
    out_dir = Path(out_dir)
    if source:
        model = model_cls.from_pretrained(source)
    else:
        import torch

        torch.manual_seed(0)
        model = model_cls(HippoformerConfig() if artifact == "hippoformer" else MMTEMConfig())
    model.save_pretrained(out_dir)
    cfg = model.config
    mm = cfg.mmtem_config if artifact == "hippoformer" else cfg
    data = card_data(
        method=artifact,
        tags=["hippocampus", "spatial-memory", "fast-weights", "tolman-eichenbaum-machine"],
        model_name=_DESCRIPTIONS[artifact],
    )
    write_model_card(
        out_dir,
        artifact,
        data,
        repo_id=repo_id or f"hfx/{artifact}",
        num_parameters=sum(p.numel() for p in model.parameters()),
        vocab=cfg.observation_vocab_size,
        num_actions=cfg.num_actions,
        memory_type=mm.memory_type,
        structural_size=mm.structural_size,
        memory_size=mm.memory_size,
        memory_depth=mm.memory_depth,
        fusion=getattr(cfg, "fusion", None),
        trained_note=None
        if source
        else f"**Untrained demo** (random weights, seed 0), for testing the publish/pull path only. Publish a trained "
        f"model with `hfx publish {artifact} --source PATH`.",
    )
    return out_dir


def publish(out_dir: Path, source=None, repo_id: str | None = None, **kw) -> Path:
    """Save a :class:`HippoformerForNextObservation` (``source`` folder, or an untrained default demo) + its card."""
    return _write("hippoformer", out_dir, source, repo_id)


def publish_mmtem(out_dir: Path, source=None, repo_id: str | None = None, **kw) -> Path:
    """Save an :class:`MMTEMModel` (``source`` folder, or an untrained default demo) + its card."""
    return _write("mmtem", out_dir, source, repo_id)


__all__ = ["publish", "publish_mmtem"]
