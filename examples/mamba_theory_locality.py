"""Experiment (c) of the Mamba training-dynamics theory (arXiv 2602.12499) at CPU scale: in the locality-structured
regime, how GD iterations and sample complexity depend on the distances ΔL₊ / ΔL₋ of the label-consistent / confusing
pattern from the decision point (the last position).

Theory (our reading, spec ``mamba_theory.md`` [reconstruction]): the bounds depend on
``s = (1/2)^ΔL₊ - (1/2)^ΔL₋``; by analogy with the majority regime (where the signal is ``α_r - α_c`` and the
iterations scale as its ``-2`` power) we fit iterations and sample complexity against ``s`` and compare the exponent
with ``-2``. Model: the spec's ``zoh`` block (``h_l = (1 - g_l) h_{l-1} + g_l W_in x_l``), where at ``w_g = 0`` the token
at distance ``Δ`` weighs exactly ``(1/2)^(Δ+1)``. Seeds: seed ``s`` initialises model ``s`` and draws its training
set; test sets are fresh draws.

    OMP_NUM_THREADS=1 nice -n 5 python examples/mamba_theory_locality.py          # ~10 min on a loaded 2-core CPU
    python examples/mamba_theory_locality.py --quick                            # smoke run

Writes ``benchmarks/results/mamba_theory.json`` (section ``locality``, after every setting) and
``docs/figures/mamba_theory_locality.png``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from hfx.models.selective_ssm import SelectiveSSMConfig, SyntheticSequenceConfig
from hfx.models.selective_ssm.diagnostics import exponent_interval, mean_interval
from hfx.models.selective_ssm.experiments import iterations_to_loss, sample_complexity, update_results


ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "mamba_theory.json"
FIGURE = ROOT / "docs" / "figures" / "mamba_theory_locality.png"
COMMAND = "OMP_NUM_THREADS=1 python examples/mamba_theory_locality.py"
# (ΔL₊, ΔL₋) pairs, s = (1/2)^ΔL₊ - (1/2)^ΔL₋ from 0.875 down to 0.0625
PAIRS = [(0, 3), (0, 1), (1, 2), (2, 3), (3, 4)]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--hidden-size", type=int, default=32)
    p.add_argument("--sequence-length", type=int, default=20)
    p.add_argument("--noise", type=float, default=0.3)
    p.add_argument("--num-train", type=int, default=256)
    p.add_argument("--learning-rate", type=float, default=0.5)
    p.add_argument("--max-steps", type=int, default=3000)
    p.add_argument("--loss-threshold", type=float, default=0.05)
    p.add_argument("--sample-sizes", type=int, nargs="+", default=[4, 8, 16, 32, 64, 128, 256])
    p.add_argument("--target-accuracy", type=float, default=0.95)
    p.add_argument("--sc-steps", type=int, default=300)
    p.add_argument("--sc-learning-rate", type=float, default=0.5)
    p.add_argument("--num-test", type=int, default=1000)
    p.add_argument("--quick", action="store_true", help="smoke run (2 seeds, 3 pairs), not for reporting")
    p.add_argument("--results", default=str(RESULTS))
    p.add_argument("--figure", default=str(FIGURE))
    args = p.parse_args(argv)
    args.pairs = PAIRS
    if args.quick:
        args.seeds, args.max_steps, args.sc_steps, args.num_test = 2, 300, 100, 300
        args.sample_sizes, args.pairs = [8, 32, 128], PAIRS[:3]
    return args


def signal(pair) -> float:
    return 0.5 ** pair[0] - 0.5 ** pair[1]


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)
    seeds = list(range(args.seeds))
    model_config = SelectiveSSMConfig(hidden_size=args.hidden_size)  # the spec's zoh block
    section = {
        "command": COMMAND + (" --quick" if args.quick else ""),
        "model_config": model_config.to_diff_dict(),
        "settings": {k: v for k, v in vars(args).items() if k not in ("results", "figure")},
        "rows": [],
    }
    started = time.time()
    for pair in args.pairs:
        data_config = SyntheticSequenceConfig(
            regime="locality",
            sequence_length=args.sequence_length,
            hidden_size=args.hidden_size,
            num_irrelevant_patterns=args.hidden_size // 2,
            delta_consistent=pair[0],
            delta_confusing=pair[1],
            noise_std=args.noise,
        )
        t0 = time.time()
        it = iterations_to_loss(
            data_config,
            model_config,
            seeds,
            num_train=args.num_train,
            learning_rate=args.learning_rate,
            max_steps=args.max_steps,
            loss_threshold=args.loss_threshold,
        )  # no test set here: the run stops once every seed reached the threshold
        sc = sample_complexity(
            data_config,
            model_config,
            seeds,
            sample_sizes=args.sample_sizes,
            target_accuracy=args.target_accuracy,
            learning_rate=args.sc_learning_rate,
            steps=args.sc_steps,
            num_test=args.num_test,
        )
        row = {
            "delta_plus": pair[0],
            "delta_minus": pair[1],
            "signal": signal(pair),
            "iterations": it["steps"],
            "test_accuracy": [row[-1] for row in sc["accuracy"]],  # at the largest sample size
            "test_accuracy_ci": mean_interval([row[-1] for row in sc["accuracy"]]),
            "n_star": sc["n_star"],
            "sc_accuracy": sc["accuracy"],
            "seconds": round(time.time() - t0, 1),
        }
        section["rows"].append(row)
        print(
            f"[dL+={pair[0]}, dL-={pair[1]}, s={row['signal']:.4f}] iterations {it['steps']}  N* {sc['n_star']}  "
            f"acc {row['test_accuracy_ci']['mean']:.3f} ({row['seconds']:.0f} s)",
            flush=True,
        )
        update_results(args.results, "locality", section)
    grid = [row["signal"] for row in section["rows"]]
    section["fits"] = {}
    for key in ("iterations", "n_star"):
        per_seed = [[row[key][s] for row in section["rows"]] for s in range(len(seeds))]
        missing = sum(v is None for r in per_seed for v in r)
        try:
            section["fits"][key] = {**exponent_interval(grid, per_seed), "missing_points": missing}
        except ValueError as err:
            section["fits"][key] = {"error": str(err), "missing_points": missing}
        fit = section["fits"][key]
        if "mean" in fit:
            print(
                f"{key} ~ s^k: k = {fit['mean']:+.2f} [{fit['low']:+.2f}, {fit['high']:+.2f}] (theory -2, "
                f"our reading)",
                flush=True,
            )
    section["wall_seconds"] = round(time.time() - started, 1)
    update_results(args.results, "locality", section)
    plot(section, args.figure)
    print(f"wrote {args.results} and {args.figure}")
    return 0


def plot(section, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    rows = section["rows"]
    fig, axes = plt.subplots(1, 2, figsize=(7.5, 3.2))
    for ax, key, title in zip(axes, ("iterations", "n_star"), ("GD iterations to loss", "sample complexity N*")):
        for s in range(len(rows[0][key])):
            points = sorted((r["signal"], r[key][s]) for r in rows if r[key][s] is not None)
            if points:
                ax.plot(*zip(*points), "o-", color="#2ca02c", alpha=0.35, ms=3)
        fit = section["fits"].get(key, {})
        label = f"fit: {fit['mean']:+.2f} [{fit['low']:+.2f}, {fit['high']:+.2f}]" if "mean" in fit else "no fit"
        ax.text(0.03, 0.03, label + "\ntheory (our reading): -2", transform=ax.transAxes, fontsize=8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("s = (1/2)^dL+ - (1/2)^dL-")
        ax.set_title(title, fontsize=9)
    fig.suptitle("Locality regime, zoh selective SSM: per seed, 95% interval over seeds", fontsize=10)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)


if __name__ == "__main__":
    sys.exit(main())
