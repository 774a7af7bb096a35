"""``hfx publish slao``: a Hub-ready SLAO adapter folder (PEFT files + plain-LoRA export + rendered model card)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any


ARXIV_ID = "2512.23017"
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")


def slao_to_lora_state_dict(state_dict: dict) -> dict:
    """Turn a saved SLAO adapter state dict into a plain LoRA one (what :func:`~hfx.tuners.slao.export_lora` writes).

    ``<m>.lora_slao_A_merge`` -> ``<m>.lora_A.weight`` and ``<m>.lora_slao_B_merge`` -> ``<m>.lora_B.weight`` (the
    merged pair; the names of earlier hfx versions, ``<m>.slao_A_merge``, work too); the live pair, the last
    fine-tuned pair and the task counter are dropped; every other entry (``modules_to_save`` weights, trainable-token
    deltas) is kept as saved, so a ``LoraConfig`` with the same ``modules_to_save`` / ``trainable_token_indices``
    loads the result.

    Raises:
        ValueError: if the adapter has ``modules_to_save`` / trainable-token entries and was saved while a task was in
            progress (their values at the last ``finish_task()`` are not in the file).
    """
    merged, auxiliary, in_task = {}, {}, False
    for key, value in state_dict.items():
        head, _, last = key.rpartition(".")
        last = last.removeprefix("lora_")
        if last in ("slao_A_merge", "slao_B_merge"):
            merged[f"{head}.lora_{last.split('_')[1]}.weight"] = value.contiguous()
        elif last == "slao_task_state":
            in_task = in_task or bool(value[1])
        elif last in ("slao_A_ft", "slao_B_ft") or key.endswith((".lora_A.weight", ".lora_B.weight")):
            continue
        else:
            auxiliary[key] = value.contiguous()
    if auxiliary and in_task:
        raise ValueError(
            "the SLAO adapter was saved during a task and has modules_to_save / trainable-token entries "
            f"({sorted(auxiliary)[:2]} ...), whose values at the last finish_task() are not in the file; save it "
            "after finish_task()."
        )
    return {**merged, **auxiliary}


def _fresh_adapter(out_dir: Path) -> None:
    """An untrained SLAO adapter (spec defaults: r 8, alpha 32, dropout 0.1, q_proj/v_proj) on the default model."""
    from peft import get_peft_model

    from hfx.models import DEFAULT_MODEL_ID, is_default_model_available, load_default_model

    from .config import SLAOConfig

    hub_id = None
    if is_default_model_available():
        from hfx.models import default_model_path

        base, _ = load_default_model()
        # saved with the local path (PEFT then never asks the Hub about the base); the Hub id is written afterwards
        base.name_or_path = str(default_model_path())
        hub_id = DEFAULT_MODEL_ID
    else:
        from hfx.testing import tiny_llama

        base, _ = tiny_llama()
    config = SLAOConfig(
        r=8, lora_alpha=32, lora_dropout=0.1, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"
    )
    get_peft_model(base, config).save_pretrained(str(out_dir))
    if hub_id is not None:
        import json

        path = out_dir / "adapter_config.json"
        adapter = json.loads(path.read_text())
        adapter["base_model_name_or_path"] = hub_id
        path.write_text(json.dumps(adapter, indent=2, sort_keys=True) + "\n")


def publish(out_dir: Path, source: str | Path | None = None, **kw: Any) -> Path:
    """Write a Hub-ready SLAO adapter folder with its model card.

    Args:
        out_dir (`Path`): destination (created).
        source (`str` or `Path`, *optional*): a folder written by ``save_pretrained`` of an SLAO ``PeftModel``. When
            omitted, an untrained adapter with the spec's defaults on the embedded default model is written.
        **kw: extra template variables for the card (e.g. ``repo_id``, ``results`` (markdown)).

    Returns:
        `Path`: ``out_dir``, holding ``adapter_config.json``, ``adapter_model.safetensors`` (the SLAO adapter, loads
        with ``import hfx`` + ``PeftModel.from_pretrained``), ``lora/`` (the merged pair, plus any ``modules_to_save``
        / trainable tokens, as a plain LoRA adapter for stock PEFT, when at least one task was finished) and
        ``README.md``.

    Raises:
        ValueError: if ``source`` is not an SLAO adapter folder, or (see :func:`slao_to_lora_state_dict`) it was saved
            during a task while it has ``modules_to_save`` / trainable tokens.
    """
    from safetensors.torch import load_file, save_file

    from hfx.hub import card_data, write_model_card

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if source is None:
        _fresh_adapter(out_dir)
    else:
        source = Path(source)
        if not all((source / name).is_file() for name in ADAPTER_FILES):
            raise ValueError(f"`source` must be a saved SLAO adapter folder with {ADAPTER_FILES}, but is {source}")
        if source.resolve() != out_dir.resolve():
            for name in ADAPTER_FILES:
                shutil.copy2(source / name, out_dir / name)
    config = json.loads((out_dir / "adapter_config.json").read_text())
    if config.get("peft_type") != "SLAO":
        raise ValueError(f"`source` holds a {config.get('peft_type')!r} adapter, not an SLAO adapter")
    state_dict = load_file(str(out_dir / "adapter_model.safetensors"))
    task_states = [v for k, v in state_dict.items() if k.endswith("slao_task_state")]  # lora_slao_ (or legacy slao_)
    tasks_finished = int(task_states[0][0]) if task_states else 0

    if tasks_finished >= 1:
        from peft import LoraConfig

        lora_dir = out_dir / "lora"
        lora_dir.mkdir(exist_ok=True)
        lora_fields = set(LoraConfig.__dataclass_fields__)
        lora_kwargs = {
            k: v for k, v in config.items() if k in lora_fields and k not in ("peft_type", "runtime_config")
        }
        LoraConfig(**lora_kwargs).save_pretrained(str(lora_dir))
        save_file(slao_to_lora_state_dict(state_dict), str(lora_dir / "adapter_model.safetensors"), {"format": "pt"})

    base_model = config.get("base_model_name_or_path") or None
    data = card_data(
        method="slao",
        arxiv_id=ARXIV_ID,
        base_model=base_model,
        pipeline_tag="text-generation",
        library_name="peft",
        tags=["lora", "continual-learning", "model-merging"],
    )
    target_modules = config.get("target_modules")
    write_model_card(
        out_dir,
        "slao",
        data,
        base_model=base_model or "<base-model-id>",
        r=config.get("r"),
        lora_alpha=config.get("lora_alpha"),
        target_modules=", ".join(sorted(target_modules)) if isinstance(target_modules, list) else target_modules,
        init_strategy=config.get("init_strategy"),
        merge_schedule=config.get("merge_schedule"),
        tasks_finished=tasks_finished,
        has_lora_export=tasks_finished >= 1,
        **kw,
    )
    return out_dir
