"""``hfx publish thr-grpo``: a Hub-ready folder for a policy trained with `THRGRPOTrainer` (+ rendered model card)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any


ARXIV_ID = "2510.03669"
THR_CONFIG_NAME = "thr_config.json"

# files of a trainer checkpoint that are training state, not part of the published model
_TRAINING_STATE = ("optimizer.pt", "scheduler.pt", "training_args.bin", "trainer_state.json", "README.md")
_TRAINING_STATE_PREFIXES = ("rng_state", "global_step", "events.out")


def _copy_model_files(source: Path, out_dir: Path) -> None:
    for path in sorted(source.iterdir()):
        if path.is_dir() or path.name in _TRAINING_STATE or path.name.startswith(_TRAINING_STATE_PREFIXES):
            continue
        shutil.copy2(path, out_dir / path.name)


def _write_demo(out_dir: Path) -> dict:
    """An UNTRAINED tiny random Llama + tokenizer + default THR settings (to check the folder layout offline)."""
    from hfx.testing import tiny_llama

    from .config import THRGRPOConfig

    model, tok = tiny_llama()
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    fields = THRGRPOConfig.__dataclass_fields__
    thr = {name: fields[name].default for name in fields if name.startswith("thr_")}
    (out_dir / THR_CONFIG_NAME).write_text(json.dumps(thr, indent=2, sort_keys=True), encoding="utf-8")
    return thr


def publish(out_dir: Path, source: str | Path | None = None, **kw: Any) -> Path:
    """Write a Hub-ready folder for a THR-GRPO policy with its model card.

    Args:
        out_dir (`Path`): destination (created).
        source (`str` or `Path`, *optional*): a folder written by ``THRGRPOTrainer.save_model`` (or a checkpoint
            folder): a full model (``config.json`` + weights) or a PEFT adapter (``adapter_config.json``), usually
            with ``thr_config.json``. Training state (optimizer, scheduler, RNG, trainer state) is left out. When
            omitted, an **untrained demo** (a tiny random Llama with the default THR settings) is written, so the
            layout and card can be checked offline; its card says so.
        **kw: template variables for the card: ``repo_id``, ``base_model`` (defaults to the source config's
            ``_name_or_path`` / the adapter's ``base_model_name_or_path``), ``dataset``, ``results`` (markdown).

    Returns:
        `Path`: ``out_dir``, holding the model (or adapter) files, tokenizer files, ``thr_config.json`` and
        ``README.md``; a full model loads with ``AutoModelForCausalLM.from_pretrained(out_dir)``.

    Raises:
        ValueError: if ``source`` is not a folder with ``config.json`` or ``adapter_config.json``.
    """
    from hfx.hub import card_data, write_model_card

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    demo = source is None
    if demo:
        thr = _write_demo(out_dir)
    else:
        source = Path(source)
        if not source.is_dir() or not (
            (source / "config.json").is_file() or (source / "adapter_config.json").is_file()
        ):
            raise ValueError(
                f"`source` must be a folder saved by `THRGRPOTrainer.save_model` (with `config.json` or "
                f"`adapter_config.json`), but is {str(source)!r}"
            )
        if source.resolve() != out_dir.resolve():
            _copy_model_files(source, out_dir)
        thr_file = out_dir / THR_CONFIG_NAME
        thr = json.loads(thr_file.read_text(encoding="utf-8")) if thr_file.is_file() else {}

    is_adapter = (out_dir / "adapter_config.json").is_file()
    base_model = kw.pop("base_model", None)
    if base_model is None:
        if is_adapter:
            base_model = json.loads((out_dir / "adapter_config.json").read_text()).get("base_model_name_or_path")
        else:
            base_model = json.loads((out_dir / "config.json").read_text()).get("_name_or_path") or None
        if base_model and Path(str(base_model)).exists():  # a local path is no Hub id
            base_model = None
    dataset = kw.pop("dataset", None)
    data = card_data(
        method="thr-grpo",
        arxiv_id=ARXIV_ID,
        base_model=base_model,
        pipeline_tag="text-generation",
        library_name="peft" if is_adapter else "transformers",
        tags=["trl", "grpo", "reinforcement-learning", "token-hidden-reward", *(["demo"] if demo else [])],
        datasets=[dataset] if dataset else None,
    )
    write_model_card(
        out_dir,
        "thr-grpo",
        data,
        demo=demo,
        is_adapter=is_adapter,
        base_model=base_model or "(see config.json)",
        thr=thr,
        dataset=dataset,
        **kw,
    )
    return out_dir


__all__ = ["ARXIV_ID", "publish"]
