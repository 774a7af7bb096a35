"""SLAO memory benchmark: parameters stored and trained after 1, 5 and 10 tasks, and merge time.

SLAO (arXiv:2512.23017) keeps one LoRA adapter whatever the number of tasks: the trainable pair plus two stored pairs
(merged + last fine-tuned). This script runs 10 tasks on the embedded default model (SmolLM2-135M-Instruct, or a tiny
random Llama with ``--tiny``) with SLAO (rank 8 on q_proj/v_proj, the paper's setting), replacing the fine-tuning by a
random step of the LoRA weights (memory and merge cost do not depend on the training), and records after tasks 1, 5
and 10:

* trainable parameters and the parameters ``save_pretrained`` stores (``get_peft_model_state_dict``), and the bytes on
  disk of the saved adapter;
* the time of ``start_task`` (QR init) and ``finish_task`` (merge) per task.

The baseline is the usual per-task adapter approach (one PEFT LoRA adapter per task via ``add_adapter``), whose stored
parameters grow linearly. Metric: stored-parameter ratio after 10 vs after 1 task (goal 1.0).

    python benchmarks/slao_memory.py [--tiny] [--tasks 10]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch


RESULTS = Path(__file__).resolve().parent / "results" / "slao_memory.json"


def _load(tiny: bool):
    from hfx.models import DEFAULT_MODEL_ID, is_default_model_available, load_default_model
    from hfx.testing import tiny_llama

    if not tiny and is_default_model_available():
        model, _ = load_default_model()
        return model, DEFAULT_MODEL_ID
    model, _ = tiny_llama()
    return model, "hfx.testing.tiny_llama"


def _perturb(model, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(1e-3 * torch.randn(p.shape, generator=g, dtype=p.dtype))


def _folder_bytes(model) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        return sum(f.stat().st_size for f in Path(tmp).rglob("*.safetensors"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="use the tiny random Llama instead of the default model")
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    import copy

    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict

    from hfx.tuners.slao import SLAOConfig

    base, model_id = _load(args.tiny)
    lora_kwargs = dict(
        r=8, lora_alpha=32, lora_dropout=0.1, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"
    )
    checkpoints = sorted({1, 5, args.tasks} & set(range(1, args.tasks + 1)))

    # ---- SLAO: one adapter for the whole sequence
    torch.manual_seed(0)
    slao = get_peft_model(copy.deepcopy(base), SLAOConfig(**lora_kwargs))
    rows, start_times, finish_times = {}, [], []
    for task in range(1, args.tasks + 1):
        t0 = time.perf_counter()
        slao.start_task()
        start_times.append(time.perf_counter() - t0)
        _perturb(slao, seed=task)
        t0 = time.perf_counter()
        slao.finish_task()
        finish_times.append(time.perf_counter() - t0)
        if task in checkpoints:
            rows[task] = {
                "trainable_params": sum(p.numel() for p in slao.parameters() if p.requires_grad),
                "stored_params": sum(v.numel() for v in get_peft_model_state_dict(slao).values()),
                "stored_bytes": _folder_bytes(slao),
                "start_task_ms": 1e3 * start_times[-1],
                "finish_task_ms": 1e3 * finish_times[-1],
            }
        print(
            f"SLAO task {task}: start {1e3 * start_times[-1]:.1f} ms, finish (merge) {1e3 * finish_times[-1]:.1f} ms"
        )

    # ---- baseline: one plain LoRA adapter per task
    torch.manual_seed(0)
    per_task = get_peft_model(copy.deepcopy(base), LoraConfig(**lora_kwargs), adapter_name="task1")
    baseline = {}
    for task in range(1, args.tasks + 1):
        if task > 1:
            per_task.add_adapter(f"task{task}", LoraConfig(**lora_kwargs))
        if task in checkpoints:
            stored = sum(
                v.numel()
                for name in per_task.peft_config
                for v in get_peft_model_state_dict(per_task, adapter_name=name).values()
            )
            baseline[task] = {"stored_params": stored}

    first, last = checkpoints[0], checkpoints[-1]
    ratio = rows[last]["stored_params"] / rows[first]["stored_params"]
    trainable_ratio = rows[last]["trainable_params"] / rows[first]["trainable_params"]
    baseline_ratio = baseline[last]["stored_params"] / baseline[first]["stored_params"]
    lora_pair = rows[first]["trainable_params"]
    result = {
        "metric": f"SLAO stored parameters after {last} tasks / after {first} task",
        "value": ratio,
        "goal": 1.0,
        "command": "python benchmarks/slao_memory.py" + (" --tiny" if args.tiny else ""),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "detail": {
            "model": model_id,
            "lora": {k: v for k, v in lora_kwargs.items() if k != "task_type"},
            "trainable_ratio": trainable_ratio,
            "stored_over_one_lora_pair": rows[last]["stored_params"] / lora_pair,
            "per_task_lora_baseline_ratio": baseline_ratio,
            "slao": {str(k): v for k, v in rows.items()},
            "per_task_lora_baseline": {str(k): v for k, v in baseline.items()},
            "median_start_task_ms": 1e3 * statistics.median(start_times[1:] or start_times),
            "median_finish_task_ms": 1e3 * statistics.median(finish_times),
            "note": "stored = live LoRA pair + merged pair + last fine-tuned pair (+ a 2-int task counter per layer); "
            "fine-tuning replaced by a random step (memory and merge cost do not depend on it).",
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
        },
    }
    print(
        f"stored params after {first} task: {rows[first]['stored_params']:,}; after {last}: "
        f"{rows[last]['stored_params']:,}; ratio {ratio:.3f} (goal 1.0); trainable ratio {trainable_ratio:.3f}; "
        f"per-task LoRA baseline ratio {baseline_ratio:.1f}"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
