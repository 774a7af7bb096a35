"""DevFT vs FedAvg-LoRA (FedIT) on SmolLM2-135M with Flower's simulation engine, clients holding non-IID task mixes.

Each method is one :func:`hfx.federated.devft.run_devft` call: 4 simulated clients hold a Dirichlet(0.5) split over
the tasks of the local CL benchmark (AG News, Amazon, DBpedia, Yelp; ``../shared/data/cl_benchmark``), train LoRA
(q/v, r=8) locally and the server averages the LoRA tensors (Flower's FedAvg). DevFT grows the model 4 -> 8 -> 16 -> 30
layers; FedIT trains the full 30-layer model for the same total rounds. The server evaluates the global adapter on
held-out test rows (completion NLL and exact match of the label word).

Writes ``outputs/devft/<method>/`` (PEFT adapter + history), ``benchmarks/results/devft.json`` (updated after each
run) and ``docs/figures/devft_curves.png``. CPU, single thread per process; about 20-40 minutes on a busy 2-core box::

    OMP_NUM_THREADS=1 python examples/devft_federated.py                 # the README numbers
    OMP_NUM_THREADS=1 python examples/devft_federated.py --quick         # a 2-minute smoke run (tiny sizes)
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import os
import random
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]


def bootstrap_ci(diffs: list[float], n: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """95 % percentile-bootstrap interval of the mean of paired differences."""
    rng = random.Random(seed)
    k = len(diffs)
    means = sorted(sum(diffs[rng.randrange(k)] for _ in range(k)) / k for _ in range(n))
    return means[int(0.025 * n)], means[int(0.975 * n) - 1]


def loss_at(history: list[dict], column: str, x: float) -> float | None:
    """Eval loss of a run at ``column == x``, linearly interpolated between its evaluated points (None outside)."""
    pts = [(r[column], r["eval_loss"]) for r in history if r["eval_loss"] is not None]
    for (x0, y0), (x1, y1) in itertools.pairwise(pts):
        if x0 <= x <= x1:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return None


def cost_to_reach(history: list[dict], column: str, target: float) -> float | None:
    """The first ``column`` value at which an evaluated point has eval loss <= ``target`` (None if never)."""
    for r in history:
        if r["eval_loss"] is not None and r["eval_loss"] <= target:
            return r[column]
    return None


def plot(runs: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("cum_bytes", 2**20, "LoRA communicated, down + up (MiB)", "eval_loss"),
        ("cum_client_flops", 1e12, "client compute, all clients (TFLOP)", "eval_loss"),
        ("round", 1, "federated round", "eval_accuracy"),
    ]
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    for ax, (column, scale, label, metric) in zip(axes, panels):
        for name, history in runs.items():
            pts = [(r[column] / scale, r[metric]) for r in history if r[metric] is not None]
            ax.plot(*zip(*pts), marker="o", markersize=3, label=name)
        ax.set_xlabel(label)
        ax.set_ylabel(metric.replace("_", " ") + (" (nats)" if metric == "eval_loss" else ""))
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("SmolLM2-135M, 4 Flower clients (Dirichlet 0.5 over 4 tasks), LoRA q/v r=8", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--methods", default="devft,fedit", help="comma-separated: devft, fedit, no_grouping, no_fusion"
    )
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data" / "cl_benchmark"))
    parser.add_argument("--train-per-task", type=int, default=100)
    parser.add_argument("--eval-per-task", type=int, default=16)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rounds-per-stage", type=int, default=2)
    parser.add_argument("--local-steps", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--eval-every", type=int, default=2, help="server evaluation every this many rounds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, results not written to benchmarks/")
    parser.add_argument("--out", default=str(ROOT / "outputs" / "devft"))
    args = parser.parse_args(argv)

    from hfx.federated.devft import DevFTConfig, load_cl_benchmark, run_devft
    from hfx.models.default import default_model_path

    if args.quick:
        args.train_per_task, args.eval_per_task, args.rounds_per_stage, args.local_steps = 8, 2, 1, 1
    tasks = ["agnews", "amazon", "dbpedia", "yelp"]
    train = load_cl_benchmark(args.data_dir, "train", tasks, limit_per_task=args.train_per_task)
    test = load_cl_benchmark(args.data_dir, "test", tasks, limit_per_task=args.eval_per_task)
    settings = dict(
        stages=[4, 8, 16, 30],
        rounds_per_stage=args.rounds_per_stage,
        local_steps=args.local_steps,
        batch_size=4,
        learning_rate=args.lr,
        max_length=args.max_length,
        num_clients=args.clients,
        seed=args.seed,
    )
    results_path = ROOT / "benchmarks" / "results" / "devft.json"
    command = "OMP_NUM_THREADS=1 python examples/devft_federated.py " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    runs: dict[str, dict] = {}
    for method in [m for m in args.methods.split(",") if m]:
        config = DevFTConfig(**settings) if method == "devft" else DevFTConfig.for_baseline(method, **settings)
        print(f"== {config.name}: stages {config.resolve_stages(30)}, rounds {config.resolve_rounds(30)}", flush=True)
        result = run_devft(
            config, default_model_path(), train, eval_dataset=test, dirichlet_alpha=0.5, eval_every=args.eval_every
        )
        result.save_pretrained(Path(args.out) / config.name)
        runs[config.name] = {
            "history": result.history,
            "final_eval": result.final_eval,
            "total_bytes": result.total_bytes,
            "total_client_flops": result.total_client_flops,
            "wall_seconds": result.wall_seconds,
            "partition_counts": result.partition_counts,
            "groups": [p["groups"] for p in result.plans],
            "command": command,
        }
        last = result.history[-1]
        print(f"   final eval loss {last['eval_loss']:.4f}, acc {last['eval_accuracy']:.3f}, "
              f"{result.total_bytes / 2**20:.2f} MiB, {result.total_client_flops / 1e12:.2f} TFLOP, "
              f"{result.wall_seconds:.0f} s", flush=True)  # fmt: skip
        if not args.quick:
            write_results(results_path, runs, args, command)
    if args.quick:
        return 0
    runs = json.loads(results_path.read_text(encoding="utf-8"))["runs"]  # with the other invocations' runs
    plot({k: v["history"] for k, v in runs.items()}, ROOT / "docs" / "figures" / "devft_curves.png")
    print(json.dumps(json.loads(results_path.read_text())["comparison"], indent=1))
    return 0


def write_results(path: Path, runs: dict, args, command: str) -> None:
    """benchmarks/results/devft.json: the runs' histories and, once both are there, DevFT vs FedIT."""
    if path.is_file():  # runs of the same settings written by another invocation (e.g. `--methods fedit` in parallel)
        old = json.loads(path.read_text(encoding="utf-8"))
        ours = {k: v for k, v in vars(args).items() if k not in ("out", "data_dir", "methods")}
        if {k: v for k, v in old.get("settings", {}).items() if k != "methods"} == ours:
            runs = {**{k: v for k, v in old["runs"].items() if k not in runs}, **runs}
    comparison: dict = {}
    if "devft" in runs and "fedit" in runs:
        d, f = runs["devft"], runs["fedit"]
        dl, fl = d["final_eval"]["example_loss"], f["final_eval"]["example_loss"]
        dc, fc = d["final_eval"]["example_correct"], f["final_eval"]["example_correct"]
        loss_diff = [a - b for a, b in zip(dl, fl)]
        acc_diff = [float(a) - float(b) for a, b in zip(dc, fc)]
        d_final = d["history"][-1]["eval_loss"]
        comparison = {
            "n_eval_examples": len(dl),
            "final_eval_loss": {"devft": d_final, "fedit": f["history"][-1]["eval_loss"]},
            "final_eval_accuracy": {"devft": d["history"][-1]["eval_accuracy"], "fedit": f["history"][-1]["eval_accuracy"]},
            "final_loss_diff_devft_minus_fedit": sum(loss_diff) / len(loss_diff),
            "final_loss_diff_ci95": bootstrap_ci(loss_diff),
            "final_accuracy_diff_devft_minus_fedit": sum(acc_diff) / len(acc_diff),
            "final_accuracy_diff_ci95": bootstrap_ci(acc_diff),
            "bytes_ratio_fedit_over_devft": f["total_bytes"] / d["total_bytes"],
            "client_flops_ratio_fedit_over_devft": f["total_client_flops"] / d["total_client_flops"],
            "fedit_loss_at_devft_total_bytes": loss_at(f["history"], "cum_bytes", d["total_bytes"]),
            "fedit_bytes_to_reach_devft_final_loss": cost_to_reach(f["history"], "cum_bytes", d_final),
            "devft_bytes_to_reach_fedit_final_loss": cost_to_reach(d["history"], "cum_bytes", f["history"][-1]["eval_loss"]),
        }  # fmt: skip
    data = {
        "metric": "communication reduction at equal rounds (FedIT LoRA bytes / DevFT LoRA bytes); final eval loss diff",
        "value": comparison.get("bytes_ratio_fedit_over_devft"),
        "goal": "paper: ~10.67x less communication, faster convergence; here: a ratio > 1 at no worse eval loss",
        "command": command,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "loadavg": os.getloadavg(),
        "settings": {k: v for k, v in vars(args).items() if k not in ("out", "data_dir", "methods")},
        "model": "SmolLM2-135M-Instruct (embedded, 30 layers)",
        "comparison": comparison,
        "runs": runs,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
