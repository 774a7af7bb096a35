"""``hfx publish celo2``: a Hub-ready folder of Celo2 meta-weights (config + safetensors + rendered model card)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any


ARXIV_ID = "2602.19142"
TRAINING_FILES = ("meta_train_config.json",)


def _training_info(folder: Path | None) -> dict[str, Any]:
    if folder is None or not (folder / "meta_train_config.json").is_file():
        return {}
    return json.loads((folder / "meta_train_config.json").read_text())


def publish(out_dir: Path, source: str | Path | None = None, repo_id: str | None = None, **kw: Any) -> Path:
    """Write Celo2 meta-weights (``Celo2MetaWeights.save_pretrained``) and their model card into ``out_dir``.

    Args:
        out_dir (`Path`): destination (created).
        source (`str` or `Path`, *optional*): meta-weights to publish: a folder written by
            :mod:`hfx.optim.celo2.meta_train` (``<output_dir>/final``; its ``meta_train_config.json`` fills the card's
            "Meta-training" section), an hfx folder / Hub repo, or an official / PyLO checkpoint file. Defaults to the
            weights shipped with hfx.
        repo_id (`str`, *optional*): the repo id shown in the card's usage snippet.
        **kw: extra template variables.

    Returns:
        `Path`: ``out_dir`` with ``config.json``, ``model.safetensors``, ``README.md`` (and ``meta_train_config.json``
        when the source has one).
    """
    from hfx.hub import card_data, write_model_card

    from .optimizer import default_meta_weights_path, load_meta_weights

    out_dir = Path(out_dir)
    folder = Path(source) if source is not None and Path(source).is_dir() else None
    if source is None:
        folder = default_meta_weights_path()
        source = folder
    meta = load_meta_weights(source)
    meta.save_pretrained(out_dir)
    for name in TRAINING_FILES:
        if folder is not None and (folder / name).is_file() and folder.resolve() != out_dir.resolve():
            shutil.copy(folder / name, out_dir / name)
    info = _training_info(folder)
    cfg = info.get("config", {})
    data = card_data(
        method="celo2",
        arxiv_id=ARXIV_ID,
        tags=["learned-optimizer", "optimizer", "meta-learning"],
        model_name="Celo2 meta-weights (hfx, CPU meta-trained)",
    )
    write_model_card(
        out_dir,
        "celo2",
        data,
        repo_id=repo_id or "hfx/celo2",
        num_parameters=meta.num_parameters(),
        hidden_size=meta.hidden_size,
        hidden_layers=meta.hidden_layers,
        features=", ".join(f"`{f}`" for f in meta.features),
        meta_trained=bool(info),
        families=", ".join(f"`{f}`" for f in cfg.get("families", [])),
        iterations=info.get("outer_iterations_done"),
        wall_minutes=info.get("wall_minutes"),
        trunc_length=cfg.get("trunc_length"),
        unroll=f"{cfg.get('min_unroll')}-{cfg.get('max_unroll')}" if cfg else None,
        num_particles=cfg.get("num_particles"),
        outer_lr=cfg.get("outer_lr"),
        pes_std=cfg.get("pes_std"),
        inner_lr=cfg.get("inner_lr"),
        reparam_range=cfg.get("reparam_range"),
        init=cfg.get("init"),
        threads=info.get("threads"),
        eval_initial=(info.get("eval_initial_rule") or {}).get("mean"),
        eval_adamw=(info.get("eval_adamw_baseline") or {}).get("mean"),
        eval_best=info.get("eval_best"),
        eval_steps=cfg.get("eval_steps"),
        **kw,
    )
    return out_dir
