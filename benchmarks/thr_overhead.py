"""THR overhead: time per GRPO training step of `THRGRPOTrainer` vs `trl.GRPOTrainer`, same model, batch and seed.

Both trainers wrap identical copies of the model (the embedded default SmolLM2-135M-Instruct, ``--model`` for
another, ``--tiny`` for the tiny random Llama) and see the same GSM8K prompts (``../shared/data/gsm8k/train.jsonl``,
else a built-in list). One step = ``_generate_and_score_completions`` (generation, rewards, and for THR the extra
no-grad forward + THR) + ``compute_loss`` + backward + an optimizer step, i.e. what ``Trainer.train`` does per step
with ``steps_per_generation = gradient_accumulation_steps = 1``. The arms alternate step by step (order swapped every
round) after one warm-up step each, so machine load hits both alike; the median is reported.

The reward alternates 1, 0 within each group, so every group is mixed and THR scores every token: the worst case for
THR's cost (real verifiable rewards skip all-correct / all-wrong groups for free).

Peak memory: on CUDA ``torch.cuda.max_memory_allocated`` per step; on CPU the peak resident set size per step
(``VmHWM`` after resetting it through ``/proc/self/clear_refs``), which includes the shared model and optimizer.

Metric: ``median step time (THR) / median step time (GRPO)``, goal <= 1.25.

    python benchmarks/thr_overhead.py [--tiny | --model ID] [--steps 4] [--batch 8] [--num-generations 4]
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path


os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch


RESULTS = Path(__file__).resolve().parent / "results" / "thr_overhead.json"
GSM8K = Path(__file__).resolve().parents[2] / "shared" / "data" / "gsm8k" / "train.jsonl"


def _prompts(n: int) -> list[str]:
    if GSM8K.is_file():
        with GSM8K.open() as f:
            rows = [json.loads(line) for _, line in zip(range(n), f)]
        return [r["question"] + " Answer with a number." for r in rows]
    return [f"Tom has {i} apples and buys {i + 3} more. How many apples does he have?" for i in range(n)]


def _reward(prompts, completions, **kwargs):
    """1, 0, 1, 0 within each group (groups are consecutive rows): every group is mixed."""
    out, seen = [], {}
    for prompt in prompts:
        key = str(prompt)
        out.append(float(seen.get(key, 0) % 2 == 0))
        seen[key] = seen.get(key, 0) + 1
    return out


def _peak_reset(device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    elif os.path.exists("/proc/self/clear_refs"):
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            pass


def _peak_mib(device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    with open("/proc/self/status") as f:
        return int(re.search(r"VmHWM:\s+(\d+)", f.read()).group(1)) / 1024


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="Hub id / local path; default: the embedded default model")
    parser.add_argument("--tiny", action="store_true", help="use the tiny random Llama of hfx.testing")
    parser.add_argument("--steps", type=int, default=4, help="timed steps per arm (after 1 warm-up step)")
    parser.add_argument("--batch", type=int, default=8, help="completions per step (per_device_train_batch_size)")
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--max-completion-length", type=int, default=48)
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    from trl import GRPOConfig, GRPOTrainer

    from hfx.models import DEFAULT_MODEL_ID, load_causal_lm
    from hfx.testing import tiny_llama
    from hfx.trainers.thr import THRGRPOConfig, THRGRPOTrainer

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if args.tiny:
        model, tok = tiny_llama()
        model_id = "hfx.testing.tiny_llama"
    else:
        model, tok = load_causal_lm(args.model)
        model_id = args.model or DEFAULT_MODEL_ID
    G = args.num_generations
    n_prompts = args.batch // G
    prompts = _prompts(n_prompts * (args.steps + 1))
    common = dict(
        max_steps=args.steps + 1,
        per_device_train_batch_size=args.batch,
        num_generations=G,
        max_completion_length=args.max_completion_length,
        learning_rate=1e-6,
        use_cpu=device.type == "cpu",
        bf16=False,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        seed=0,
    )
    tmp = tempfile.mkdtemp(prefix="thr_overhead_")
    from datasets import Dataset

    dataset = Dataset.from_dict({"prompt": prompts})
    arms = {
        "grpo": GRPOTrainer(
            model=copy.deepcopy(model),
            reward_funcs=_reward,
            args=GRPOConfig(output_dir=f"{tmp}/grpo", **common),
            train_dataset=dataset,
            processing_class=tok,
        ),
        "thr": THRGRPOTrainer(
            model=copy.deepcopy(model),
            reward_funcs=_reward,
            args=THRGRPOConfig(output_dir=f"{tmp}/thr", thr_mode="reweight", thr_p=0.1, **common),
            train_dataset=dataset,
            processing_class=tok,
        ),
    }
    del model
    thr_seconds: list[float] = []
    thr_trainer = arms["thr"]
    original = thr_trainer.compute_token_hidden_reward

    def timed_thr(output, hidden_states=None):  # benchmark-only instance wrapper: THR's own share of the step
        start = time.perf_counter()
        result = original(output, hidden_states=hidden_states)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        thr_seconds.append(time.perf_counter() - start)
        return result

    thr_trainer.compute_token_hidden_reward = timed_thr
    optimizers = {}
    for name, trainer in arms.items():
        trainer.model.train()
        trainer.current_gradient_accumulation_steps = 1
        optimizers[name] = torch.optim.AdamW([p for p in trainer.model.parameters() if p.requires_grad], lr=1e-6)

    times = {name: [] for name in arms}
    peaks = {name: [] for name in arms}
    for step in range(args.steps + 1):
        batch = [{"prompt": p} for p in prompts[step * n_prompts : (step + 1) * n_prompts] for _ in range(G)]
        order = list(arms) if step % 2 == 0 else list(arms)[::-1]
        for name in order:
            trainer, optimizer = arms[name], optimizers[name]
            torch.manual_seed(step)
            _peak_reset(device)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            inputs = trainer._generate_and_score_completions(batch)
            loss = trainer.compute_loss(trainer.model, inputs)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            elapsed = time.perf_counter() - start
            if step > 0:  # step 0 is the warm-up
                times[name].append(elapsed)
                peaks[name].append(_peak_mib(device))
            print(f"step {step} {name:4s} {elapsed:7.3f} s  peak {_peak_mib(device):8.1f} MiB", file=sys.stderr)

    med = {name: statistics.median(v) for name, v in times.items()}
    ratio = med["thr"] / med["grpo"]
    thr_med = statistics.median(thr_seconds[1:]) if len(thr_seconds) > 1 else float("nan")
    result = {
        "metric": "step_time_ratio_thr_over_grpo",
        "value": round(ratio, 4),
        "goal": "<= 1.25",
        "command": "python benchmarks/thr_overhead.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": dt.date.today().isoformat(),
        "model": model_id,
        "device": str(device),
        "torch_threads": torch.get_num_threads(),
        "batch": args.batch,
        "num_generations": G,
        "max_completion_length": args.max_completion_length,
        "timed_steps": args.steps,
        "median_step_s": {k: round(v, 4) for k, v in med.items()},
        "all_step_s": {k: [round(x, 4) for x in v] for k, v in times.items()},
        "median_thr_compute_s": round(thr_med, 4),
        "thr_compute_share_of_thr_step": round(thr_med / med["thr"], 4),
        "peak_memory_mib": {k: round(max(v), 1) for k, v in peaks.items()},
        "peak_memory_kind": "cuda max_memory_allocated" if device.type == "cuda" else "process peak RSS (VmHWM)",
        "reward": "alternating 1/0 within each group (every group mixed: worst case for THR)",
        "thr_logged": {k: v[-1] for k, v in thr_trainer._metrics["train"].items() if k.startswith("thr/")},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
