"""`hfx publish crd`: a Hub-ready CRD pipeline folder (``config.json``, ``proposer.json``, the model card)."""

from __future__ import annotations

from pathlib import Path


def publish(out_dir: Path, source=None, repo_id: str | None = None, **config_overrides) -> Path:
    """Save a :class:`~hfx.vision.crd.CRDPipeline` folder with its rendered model card.

    Args:
        out_dir (`Path`): destination folder (created).
        source (`str`, *optional*): a folder saved by ``CRDPipeline.save_pretrained`` (default: the default config with
            an :class:`~hfx.vision.crd.AttributeProposer`).
        repo_id (`str`, *optional*): the repo id shown in the card's usage snippet.
        **config_overrides: config fields to change.

    Returns:
        `Path`: ``out_dir``.
    """
    from .pipeline import CRDPipeline

    out_dir = Path(out_dir)
    pipe = CRDPipeline.from_pretrained(source, **config_overrides) if source else CRDPipeline(**config_overrides)
    note = None if source else "**Default configuration** (hyper-parameters chosen on the generator's validation split)."
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "README.md").unlink(missing_ok=True)
    pipe.save_pretrained(out_dir, model_card_kwargs={"repo_id": repo_id or "hfx/crd", "note": note})
    return out_dir
