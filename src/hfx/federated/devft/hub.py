"""`hfx publish devft`: a Hub-ready folder with a DevFT run's final LoRA adapter, its stage history and a model card."""

from __future__ import annotations

import shutil
from pathlib import Path


def _demo_result():
    """An **untrained** demo: tiny random 8-layer Llama, stages 2 -> 4 -> 8, PEFT's initial LoRA, no rounds run."""
    from collections import OrderedDict

    from hfx.testing import tiny_llama

    from .configuration import DevFTConfig
    from .flower import DevFTResult
    from .lora import lora_state, wrap_with_lora
    from .stages import DevFTScheduler

    base, _ = tiny_llama(num_hidden_layers=8)
    config = DevFTConfig(stages=[2, 4, 8])
    scheduler = DevFTScheduler(base, config)
    plans = [p.to_dict() for p in scheduler.plans()]
    model = wrap_with_lora(scheduler.build_submodel(len(plans) - 1), config, seed=config.seed)
    lora_config = scheduler.lora_config().to_dict()
    lora_config["base_model_name_or_path"] = "hfx.testing.tiny_llama(num_hidden_layers=8)"
    lora_config["target_modules"] = sorted(lora_config["target_modules"])
    return DevFTResult(
        config=config.to_dict(),
        base_model=lora_config["base_model_name_or_path"],
        plans=plans,
        history=[],
        lora_state=OrderedDict(lora_state(model)),
        lora_config=lora_config,
        partition_sizes=[],
        partition_counts=[],
    )


def _stage_table(result) -> str:
    rows = ["| stage | layers | rounds | groups (base layers) | anchors |", "|---|---|---|---|---|"]
    rounds: dict[int, int] = {}
    for r in result.history:
        if r.get("num_clients"):
            rounds[r["stage"]] = rounds.get(r["stage"], 0) + 1
    for plan in result.plans:
        groups = " ".join("{" + ",".join(map(str, g)) + "}" for g in plan["groups"])
        rows.append(
            f"| {plan['stage'] + 1} | {len(plan['groups'])} | {rounds.get(plan['stage'], '-')} | {groups} | "
            f"{', '.join(map(str, plan['anchors']))} |"
        )
    return "\n".join(rows)


def publish(out_dir: Path, source=None, repo_id: str | None = None, **kw) -> Path:
    """Write a DevFT run (PEFT adapter + ``devft_history.json``) and its rendered card to ``out_dir``.

    Args:
        out_dir (`Path`): destination folder (created).
        source (`str`, *optional*): a folder written by :meth:`DevFTResult.save_pretrained` (e.g. the ``--out`` of
            ``hfx federate`` or ``examples/devft_federated.py``). Without it an **untrained** demo (tiny random Llama,
            no federated rounds) is written and the card says so.
        repo_id (`str`, *optional*): the repo id shown in the card's usage snippet.

    Returns:
        `Path`: ``out_dir``.

    Raises:
        FileNotFoundError: if ``source`` is not a saved DevFT run.
    """
    from hfx.hub import card_data, write_model_card

    from .flower import DevFTResult

    out_dir = Path(out_dir)
    result = DevFTResult.from_pretrained(source) if source else _demo_result()
    if source and Path(source).resolve() != out_dir.resolve():
        out_dir.mkdir(parents=True, exist_ok=True)
        for name in ("adapter_config.json", "adapter_model.safetensors", "devft_history.json"):
            shutil.copy2(Path(source) / name, out_dir / name)
    else:
        result.save_pretrained(out_dir)
    config = result.config
    evals = [r for r in result.history if r.get("eval_loss") is not None]
    last = evals[-1] if evals else None
    base = result.base_model if "/" in result.base_model and not result.base_model.startswith("/") else None
    data = card_data(
        method="devft",
        arxiv_id="2508.00041",
        base_model=base,
        pipeline_tag="text-generation",
        tags=["federated-learning", "flower", "lora", "peft"],
        model_name=f"DevFT LoRA adapter ({config.get('method', 'devft')})",
    )
    write_model_card(
        out_dir,
        "devft",
        data,
        repo_id=repo_id or "hfx/devft",
        base_model=result.base_model,
        method=config.get("method", "devft"),
        stages=" -> ".join(str(len(p["groups"])) for p in result.plans),
        stage_table=_stage_table(result),
        num_clients=config.get("num_clients"),
        rounds=sum(1 for r in result.history if r.get("num_clients")),
        total_mib=f"{result.total_bytes / 2**20:.2f}",
        lora_r=result.lora_config.get("r"),
        lora_alpha=result.lora_config.get("lora_alpha"),
        target_modules=", ".join(f"`{m}`" for m in sorted(result.lora_config.get("target_modules") or [])),
        config_line=", ".join(
            f"{k}={config[k]}"
            for k in ("grouping", "similarity", "anchor", "fusion_mu", "fusion_weighting", "lora_transfer")
        ),
        eval_line=None
        if last is None
        else f"eval loss {last['eval_loss']:.4f}, exact-match accuracy {last['eval_accuracy']:.3f} after round {last['round']}",
        trained_note=None
        if source
        else "**Untrained demo**: PEFT's initial LoRA on a tiny random Llama, no federated rounds; for testing the "
        "publish/pull path only. Publish a real run with `hfx publish devft --source RUN_DIR`.",
    )
    return out_dir
