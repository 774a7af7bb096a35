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

``--num-processes N`` (N > 1) relaunches the script under ``torch.distributed.run`` (gloo on CPU, NCCL on GPUs): each
process holds ``--batch`` completions of the global batch, both models are wrapped in DDP (the gradient all-reduce is
in both arms), and a step is timed on process 0 between barriers (so it covers the slowest process). With ``--batch``
not a multiple of ``--num-generations`` groups are split across processes and THR's step includes its all-gathers;
the JSON then also records the bytes THR received per step and process and which exchange ``"auto"`` chose.
Metric: the same ratio, goal <= 1.10 (``benchmarks/results/thr_overhead_multiprocess.json``).

    python benchmarks/thr_overhead.py [--tiny | --model ID] [--steps 4] [--batch 8] [--num-generations 4]
    python benchmarks/thr_overhead.py --tiny --num-processes 2 --batch 6 --num-generations 4 --steps 20
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
RESULTS_MULTI = Path(__file__).resolve().parent / "results" / "thr_overhead_multiprocess.json"
GSM8K = Path(__file__).resolve().parents[2] / "shared" / "data" / "gsm8k" / "train.jsonl"


def _prompts(n: int) -> list[str]:
    if GSM8K.is_file():
        with GSM8K.open() as f:
            rows = [json.loads(line) for _, line in zip(range(n), f)]
        return [r["question"] + " Answer with a number." for r in rows]
    return [f"Tom has {i} apples and buys {i + 3} more. How many apples does he have?" for i in range(n)]


def _reward(prompts, completions, **kwargs):
    """1, 0, 1, 0 by global row (groups are consecutive rows of an even size): every group is mixed."""
    offset = int(os.environ.get("RANK", "0")) * len(prompts)
    return [float((offset + i) % 2 == 0) for i in range(len(prompts))]


def _relaunch(num_processes: int, argv: list[str]) -> int:
    """Run this script under torch.distributed.run with ``num_processes`` processes (the workers see WORLD_SIZE)."""
    import socket
    import subprocess

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(num_processes)]
    cmd += ["--master_addr", "127.0.0.1", "--master_port", str(port), __file__, *argv]
    return subprocess.call(cmd)


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
    parser.add_argument("--num-processes", type=int, default=1, help="processes (> 1: torch.distributed.run)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    raw_argv = list(argv if argv is not None else sys.argv[1:])
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if args.num_processes > 1 and world == 1:
        return _relaunch(args.num_processes, raw_argv)
    if args.out is None:
        args.out = RESULTS_MULTI if world > 1 else RESULTS
    rank = int(os.environ.get("RANK", "0"))

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
    if (args.batch * world) % G != 0:
        raise ValueError(f"--batch x processes ({args.batch} x {world}) must be a multiple of --num-generations={G}")
    n_prompts = args.batch * world // G  # prompts per global batch
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
        ddp_backend=("nccl" if device.type == "cuda" else "gloo") if world > 1 else None,
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
    optimizers, loss_models = {}, {}
    for name, trainer in arms.items():
        trainer.model.train()
        trainer.current_gradient_accumulation_steps = 1
        optimizers[name] = torch.optim.AdamW([p for p in trainer.model.parameters() if p.requires_grad], lr=1e-6)
        # on several processes the loss runs through DDP, so both arms include the gradient all-reduce
        loss_models[name] = trainer.accelerator.prepare_model(trainer.model) if world > 1 else trainer.model
    exchanges = []

    def barrier():
        if world > 1:
            torch.distributed.barrier()

    times = {name: [] for name in arms}
    peaks = {name: [] for name in arms}
    for step in range(args.steps + 1):
        rows = [{"prompt": p} for p in prompts[step * n_prompts : (step + 1) * n_prompts] for _ in range(G)]
        batch = rows[rank * args.batch : (rank + 1) * args.batch]  # this process's rows of the global batch
        order = list(arms) if step % 2 == 0 else list(arms)[::-1]
        for name in order:
            trainer, optimizer = arms[name], optimizers[name]
            torch.manual_seed(step)
            _peak_reset(device)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            barrier()
            start = time.perf_counter()
            inputs = trainer._generate_and_score_completions(batch)
            loss = trainer.compute_loss(loss_models[name], inputs)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            barrier()
            elapsed = time.perf_counter() - start
            if name == "thr" and trainer.last_thr_exchange is not None and step > 0:
                exchanges.append(trainer.last_thr_exchange)
            if step > 0:  # step 0 is the warm-up
                times[name].append(elapsed)
                peaks[name].append(_peak_mib(device))
            if rank == 0:
                print(f"step {step} {name:4s} {elapsed:7.3f} s  peak {_peak_mib(device):8.1f} MiB", file=sys.stderr)

    med = {name: statistics.median(v) for name, v in times.items()}
    ratio = med["thr"] / med["grpo"]
    thr_med = statistics.median(thr_seconds[1:]) if len(thr_seconds) > 1 else float("nan")
    result = {
        "metric": "step_time_ratio_thr_over_grpo" + (f"_{world}_processes" if world > 1 else ""),
        "value": round(ratio, 4),
        "goal": "<= 1.10" if world > 1 else "<= 1.25",
        "command": "python benchmarks/thr_overhead.py " + " ".join(raw_argv),
        "date": dt.date.today().isoformat(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "num_processes": world,
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
    if world > 1:
        split = exchanges[0].split_groups if exchanges else 0
        result.update(
            {
                "batch_per_process": args.batch,
                "split_groups_per_step": split,
                "exchange_kind_counts": {
                    kind: sum(e.kind == kind for e in exchanges) for kind in sorted({e.kind for e in exchanges})
                },
                "exchange_bytes_per_step_per_process": {
                    "median": statistics.median(e.bytes_received for e in exchanges) if exchanges else 0,
                    "max": max((e.bytes_received for e in exchanges), default=0),
                },
                "bytes_by_kind_last_step": exchanges[-1].bytes_by_kind if exchanges else {},
            }
        )
    if world > 1:
        torch.distributed.barrier()
    if rank != 0:
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
