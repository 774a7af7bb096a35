"""Experiment (b) of the Mamba training-dynamics theory (arXiv 2602.12499) at CPU scale: how GD iterations and
sample complexity scale with the signal gap (α_r - α_c), the sequence length L and the token noise, in the
majority-voting regime, with power-law exponents fitted per seed and 95 % t-intervals over seeds.

Theory (majority voting): iterations T = Θ(L² / (η (α_r - α_c)²)), sample complexity N ≥ Ω(L² d / (η² (α_r - α_c)²)),
both improving as the noise decreases. We compare the fitted exponents with +2 (L) and -2 (gap).

Model: ``recurrence="input_gate"`` with ``state_normalization="length"`` (h_L / L is a gated mean of the tokens): the
spec's default ``zoh`` block does not learn majority voting to a low loss (experiment (a)), so iterations-to-threshold
are undefined for it; its test accuracy against the gap is recorded as well (``--zoh-accuracy``, on by default).

    OMP_NUM_THREADS=1 nice -n 5 python examples/mamba_theory_scaling.py           # ~15 min on a loaded 2-core CPU
    python examples/mamba_theory_scaling.py --quick                             # a 1-minute smoke run

Writes ``benchmarks/results/mamba_theory.json`` (section ``scaling``, after every setting) and
``docs/figures/mamba_theory_scaling.png``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from hfx.models.selective_ssm import SelectiveSSMConfig, SyntheticSequenceConfig
from hfx.models.selective_ssm.diagnostics import exponent_interval, mean_interval
from hfx.models.selective_ssm.experiments import iterations_to_loss, sample_complexity, update_results, with_changes


ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "mamba_theory.json"
FIGURE = ROOT / "docs" / "figures" / "mamba_theory_scaling.png"
COMMAND = "OMP_NUM_THREADS=1 python examples/mamba_theory_scaling.py"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--hidden-size", type=int, default=32)
    p.add_argument("--noise", type=float, default=0.3, help="token noise std of the base setting")
    p.add_argument("--alpha-c", type=float, default=0.1)
    p.add_argument("--gaps", type=float, nargs="+", default=[0.2, 0.3, 0.4, 0.5])
    p.add_argument("--base-gap", type=float, default=0.3)
    p.add_argument("--lengths", type=int, nargs="+", default=[10, 20, 40, 80])
    p.add_argument("--base-length", type=int, default=20)
    p.add_argument("--noises", type=float, nargs="+", default=[0.1, 0.2, 0.4, 0.6])
    p.add_argument("--num-train", type=int, default=256, help="training set of the iteration runs")
    p.add_argument("--learning-rate", type=float, default=0.5)
    p.add_argument("--max-steps", type=int, default=3000)
    p.add_argument("--loss-threshold", type=float, default=0.05)
    p.add_argument("--sample-sizes", type=int, nargs="+", default=[4, 8, 16, 32, 64, 128, 256, 512])
    p.add_argument("--target-accuracy", type=float, default=0.9)
    p.add_argument("--sc-steps", type=int, default=400, help="GD iterations of each sample-complexity run")
    p.add_argument("--sc-learning-rate", type=float, default=1.0)
    p.add_argument("--num-test", type=int, default=1000)
    p.add_argument("--no-zoh-accuracy", action="store_true", help="skip the zoh (spec block) accuracy-vs-gap runs")
    p.add_argument("--zoh-steps", type=int, default=1500)
    p.add_argument("--quick", action="store_true", help="tiny smoke run (3 seeds, few sizes), not for reporting")
    p.add_argument("--results", default=str(RESULTS))
    p.add_argument("--figure", default=str(FIGURE))
    args = p.parse_args(argv)
    if args.quick:
        args.seeds, args.max_steps, args.sc_steps, args.zoh_steps = 3, 600, 150, 200
        args.lengths, args.noises, args.sample_sizes, args.num_test = [10, 20], [0.1, 0.3], [8, 32, 128], 300
        args.gaps = [0.3, 0.5]
    return args


def fmt(interval):
    return f"{interval['mean']:+.2f} [{interval['low']:+.2f}, {interval['high']:+.2f}]"


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)
    seeds = list(range(args.seeds))
    base = SyntheticSequenceConfig(
        regime="majority",
        sequence_length=args.base_length,
        hidden_size=args.hidden_size,
        num_irrelevant_patterns=args.hidden_size // 2,
        alpha_r=args.alpha_c + args.base_gap,
        alpha_c=args.alpha_c,
        noise_std=args.noise,
    )
    model_config = SelectiveSSMConfig(
        hidden_size=args.hidden_size, recurrence="input_gate", state_normalization="length"
    )
    sweeps = {
        "gap": (args.gaps, lambda g: with_changes(base, alpha_r=round(args.alpha_c + g, 6))),
        "length": (args.lengths, lambda n: with_changes(base, sequence_length=n)),
        "noise": (args.noises, lambda s: with_changes(base, noise_std=s)),
    }
    section = {
        "command": COMMAND + (" --quick" if args.quick else ""),
        "model_config": model_config.to_diff_dict(),
        "base_data_config": base.to_dict(),
        "settings": {k: v for k, v in vars(args).items() if k not in ("results", "figure")},
        "sweeps": {},
    }
    started = time.time()
    for name, (grid, make) in sweeps.items():
        rows = []
        for value in grid:
            data_config = make(value)
            t0 = time.time()
            it = iterations_to_loss(
                data_config,
                model_config,
                seeds,
                num_train=args.num_train,
                learning_rate=args.learning_rate,
                max_steps=args.max_steps,
                loss_threshold=args.loss_threshold,
            )
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
            rows.append({"value": value, "iterations": it["steps"], **{k: sc[k] for k in ("n_star", "accuracy")}})
            print(
                f"[{name}={value}] iterations {it['steps']}  N* {sc['n_star']}  ({time.time() - t0:.0f} s)",
                flush=True,
            )
            section["sweeps"][name] = {"grid": grid[: len(rows)], "rows": rows}
            update_results(args.results, "scaling", section)
        section["sweeps"][name]["fits"] = fits(name, grid, rows)
        update_results(args.results, "scaling", section, summary=summary(args.results, section))
    if not args.no_zoh_accuracy:
        zoh = SelectiveSSMConfig(hidden_size=args.hidden_size)  # the spec's block, defaults
        rows = []
        for gap in args.gaps:
            result = iterations_to_loss(
                with_changes(base, alpha_r=round(args.alpha_c + gap, 6)),
                zoh,
                seeds,
                num_train=args.num_train,
                learning_rate=args.learning_rate,
                max_steps=args.zoh_steps,
                loss_threshold=args.loss_threshold,
                num_test=args.num_test,
            )
            rows.append(
                {
                    "gap": gap,
                    "iterations": result["steps"],
                    "test_accuracy": result["test_accuracy"],
                    "test_accuracy_ci": mean_interval(result["test_accuracy"]),
                }
            )
            print(f"[zoh gap={gap}] iterations {result['steps']} test accuracy {result['test_accuracy']}", flush=True)
            section["zoh_accuracy_vs_gap"] = rows
            update_results(args.results, "scaling", section)
    section["wall_seconds"] = round(time.time() - started, 1)
    update_results(args.results, "scaling", section, summary=summary(args.results, section))
    plot(section, args.figure)
    print(f"wrote {args.results} and {args.figure}")
    return 0


def fits(name, grid, rows) -> dict:
    """Per-seed log-log fits (the gap sweep fits against the gap itself)."""
    out = {}
    for key in ("iterations", "n_star"):
        per_seed = [[row[key][s] for row in rows] for s in range(len(rows[0][key]))]
        missing = sum(v is None for row in per_seed for v in row)
        try:
            out[key] = {**exponent_interval(grid, per_seed), "missing_points": missing}
        except ValueError as err:
            out[key] = {"error": str(err), "missing_points": missing}
    return out


def summary(results_path, section) -> dict:
    import json

    path = Path(results_path)
    existing = json.loads(path.read_text()).get("value", {}) if path.is_file() else {}
    value = dict(existing) if isinstance(existing, dict) else {}
    for name, sweep in section["sweeps"].items():
        for key, fit in sweep.get("fits", {}).items():
            if "mean" in fit:
                value[f"{key}_exponent_vs_{name}"] = [
                    round(fit["mean"], 3),
                    round(fit["low"], 3),
                    round(fit["high"], 3),
                ]
    return {
        "metric": "fitted power-law exponents (mean and 95% t-interval over seeds) of GD iterations to a loss "
        "threshold and of sample complexity, against the theory's",
        "value": value,
        "goal": "theory (majority voting): iterations and sample complexity grow as L^2 (exponent +2) and as "
        "(alpha_r - alpha_c)^-2 (exponent -2); locality: decreasing in (1/2)^dL+ - (1/2)^dL-",
        "command": "OMP_NUM_THREADS=1 python examples/mamba_theory_alignment.py; "
        "OMP_NUM_THREADS=1 python examples/mamba_theory_scaling.py; "
        "OMP_NUM_THREADS=1 python examples/mamba_theory_locality.py",
    }


def plot(section, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    titles = {"gap": "alpha_r - alpha_c", "length": "sequence length L", "noise": "noise std"}
    theory = {"gap": -2.0, "length": 2.0, "noise": None}
    sweeps = section["sweeps"]
    fig, axes = plt.subplots(2, len(sweeps), figsize=(3.6 * len(sweeps), 6), squeeze=False)
    for col, (name, sweep) in enumerate(sweeps.items()):
        grid = sweep["grid"]
        for row_index, key in enumerate(("iterations", "n_star")):
            ax = axes[row_index][col]
            for s in range(len(sweep["rows"][0][key])):
                points = [(g, r[key][s]) for g, r in zip(grid, sweep["rows"]) if r[key][s] is not None]
                if points:
                    ax.plot(*zip(*points), "o-", color="#1f77b4", alpha=0.35, ms=3)
            fit = sweep.get("fits", {}).get(key, {})
            label = f"fit: {fmt(fit)}" if "mean" in fit else "no fit"
            if theory[name] is not None:
                label += f"\ntheory: {theory[name]:+.0f}"
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            ax.set_title(f"{'GD iterations to loss' if key == 'iterations' else 'sample complexity N*'}", fontsize=9)
            ax.set_xlabel(titles[name])
            ax.text(0.03, 0.03, label, transform=ax.transAxes, fontsize=8, va="bottom")
    fig.suptitle(
        "Majority voting, input-gated selective SSM: exponents per seed, 95% interval over seeds", fontsize=10
    )
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)


if __name__ == "__main__":
    sys.exit(main())
