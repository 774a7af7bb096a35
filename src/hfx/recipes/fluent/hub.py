"""``hfx publish fluent-alignment``: a Hub-ready folder for a policy aligned by :func:`run_fluent_alignment`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any


ARXIV_ID = "2512.08777"
_STAGE_FILES = ("stage.json",)


def _stage_folder(source: Path) -> tuple[Path, dict | None]:
    """The folder holding the model: ``source`` itself (a stage folder) or the last stage of a run folder."""
    manifest = source / "fluent_alignment.json"
    if manifest.is_file():
        data = json.loads(manifest.read_text(encoding="utf-8"))
        stages = data.get("stages") or {}
        if not stages:
            raise ValueError(f"`source` {str(source)!r} is a fluent-alignment run without a saved stage")
        return Path(list(stages.values())[-1]), data
    parent = source.parent / "fluent_alignment.json"  # a stage folder inside a run folder
    if parent.is_file():
        return source, json.loads(parent.read_text(encoding="utf-8"))
    return source, None


def publish(out_dir: Path, source: str | Path | None = None, **kw: Any) -> Path:
    """Write a Hub-ready folder for a fluent-alignment policy with its model card.

    Args:
        out_dir (`Path`): destination (created).
        source (`str` or `Path`, *optional*): a run folder of :func:`run_fluent_alignment` (its last stage is
            published, with the run's manifest) or one stage folder (``stage1_sft/``, ``stage2_online_dpo/``, ...).
            When omitted, an **untrained demo** (a tiny random Llama) is written so that the layout and card can be
            checked offline; its card says so.
        **kw: card variables: ``repo_id``, ``base_model``, ``target_language``, ``results`` (markdown).

    Returns:
        `Path`: ``out_dir`` with the model files, tokenizer files, ``fluent_alignment.json`` (the run's manifest,
        when known) and ``README.md``; it loads with ``AutoModelForCausalLM.from_pretrained(out_dir)``.

    Raises:
        ValueError: if ``source`` holds no model (``config.json``).
    """
    from hfx.hub import card_data, write_model_card

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    demo = source is None
    manifest = None
    if demo:
        from hfx.testing import tiny_llama

        model, tok = tiny_llama()
        model.save_pretrained(out_dir)
        tok.save_pretrained(out_dir)
        stage = "demo"
    else:
        folder, manifest = _stage_folder(Path(source))
        if not (folder / "config.json").is_file():
            raise ValueError(
                f"`source` must be a run folder of `run_fluent_alignment` or one of its stage folders (with "
                f"`config.json`), but {str(folder)!r} holds no model"
            )
        if folder.resolve() != out_dir.resolve():
            for path in sorted(folder.iterdir()):
                if path.is_file() and path.name not in _STAGE_FILES and path.name != "README.md":
                    shutil.copy2(path, out_dir / path.name)
        stage = folder.name
        if manifest is not None:
            (out_dir / "fluent_alignment.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    config = (manifest or {}).get("config", {})
    base_model = kw.pop("base_model", None) or config.get("base_model")
    if base_model and Path(str(base_model)).exists():  # a local path is no Hub id
        base_model = None
    target_language = kw.pop("target_language", None) or config.get("target_language")
    data = card_data(
        method="fluent-alignment",
        arxiv_id=ARXIV_ID,
        base_model=base_model,
        pipeline_tag="text-generation",
        library_name="transformers",
        language=[target_language] if target_language else None,
        tags=["trl", "online-dpo", "rlaif", "low-resource-languages", *(["demo"] if demo else [])],
    )
    records = (manifest or {}).get("records", {})
    write_model_card(
        out_dir,
        "fluent-alignment",
        data,
        demo=demo,
        stage=stage,
        base_model=base_model or "(see config.json)",
        target_language=target_language or "(not recorded)",
        arm=(manifest or {}).get("arm", "(not recorded)"),
        records=records,
        config=config,
        **kw,
    )
    return out_dir


__all__ = ["ARXIV_ID", "publish"]
