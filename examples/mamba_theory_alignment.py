"""Experiment (a) of the Mamba training-dynamics theory (arXiv 2602.12499) at CPU scale: does the gate vector align
with the class-relevant patterns (o₊, o₋) rather than the irrelevant ones after GD / SGD, and is the accuracy at chance
when α_r = α_c? With transformers' tiny Mamba on the same data as the "real Mamba" comparison.

Runs (5 seeds each, full-batch GD unless said otherwise; seed s initialises the model and draws its training set):

* majority voting, α_r - α_c = 0.4 (α_r = 0.6, α_c = 0.2), and α_r = α_c = 0.3 (chance), for the three recurrences of
  ``SelectiveSSMConfig.recurrence`` (``zoh`` = the spec's block, ``mamba_euler``, ``input_gate`` with
  ``state_normalization="length"``), plus ``input_gate`` trained by SGD (batch 16, i.i.d. minibatches);
* locality, ΔL₊ = 1, ΔL₋ = 3, with the spec's ``zoh`` block;
* transformers' ``MambaModel`` (1 layer, d_state 4, expand 1) + a linear head on the last position, on the
  majority / chance / locality data (Adam, since this comparison model is not the analysed one).

    OMP_NUM_THREADS=1 nice -n 5 python examples/mamba_theory_alignment.py       # ~10 min on a loaded 2-core CPU
    python examples/mamba_theory_alignment.py --quick                         # smoke run

Writes ``benchmarks/results/mamba_theory.json`` (section ``alignment``), ``docs/figures/mamba_theory_alignment.png``
(gate-pattern cosines over training) and ``docs/figures/mamba_theory_gates.png`` (per-token gates on one sequence).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from hfx.models.selective_ssm import (
    SelectiveSSMConfig,
    SyntheticSequenceConfig,
    mamba_time_steps,
    plot_alignment_history,
    sample_sequences,
    tiny_mamba_classifier,
    train_ensemble,
    train_gd,
)
from hfx.models.selective_ssm.data import chance_accuracy_interval
from hfx.models.selective_ssm.diagnostics import accuracy, mean_interval
from hfx.models.selective_ssm.experiments import TEST_SEED_OFFSET, seeded_models, update_results


ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "mamba_theory.json"
FIGURE = ROOT / "docs" / "figures" / "mamba_theory_alignment.png"
GATES_FIGURE = ROOT / "docs" / "figures" / "mamba_theory_gates.png"
COMMAND = "OMP_NUM_THREADS=1 python examples/mamba_theory_alignment.py"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--hidden-size", type=int, default=32)
    p.add_argument("--sequence-length", type=int, default=20)
    p.add_argument("--noise", type=float, default=0.1)
    p.add_argument("--num-train", type=int, default=256)
    p.add_argument("--num-test", type=int, default=2000)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--learning-rate", type=float, default=0.5)
    p.add_argument("--sgd-batch-size", type=int, default=16)
    p.add_argument("--mamba-steps", type=int, default=60)
    p.add_argument("--mamba-learning-rate", type=float, default=0.01)
    p.add_argument("--mamba-num-train", type=int, default=128)
    p.add_argument(
        "--blocks",
        nargs="+",
        default=["zoh", "mamba_euler", "input_gate"],
        help="recurrences of the majority / chance runs (the SGD and locality runs always run)",
    )
    p.add_argument("--quick", action="store_true", help="smoke run (2 seeds, few steps), not for reporting")
    p.add_argument("--results", default=str(RESULTS))
    p.add_argument("--figure", default=str(FIGURE))
    p.add_argument("--gates-figure", default=str(GATES_FIGURE))
    args = p.parse_args(argv)
    if args.quick:
        args.seeds, args.steps, args.num_test, args.mamba_steps = 2, 100, 300, 5
    return args


def summarise(histories) -> dict:
    """Final cosines and test accuracy, with 95 % t-intervals over seeds."""
    last = {
        key: [getattr(h, key)[-1] for h in histories]
        for key in ("cos_plus", "cos_minus", "cos_irrelevant_mean", "cos_irrelevant_max_abs", "eval_accuracy")
    }
    relevant = [(p + m) / 2 for p, m in zip(last["cos_plus"], last["cos_minus"])]
    gap = [r - q for r, q in zip(relevant, last["cos_irrelevant_mean"])]
    gap_abs = [r - q for r, q in zip(relevant, last["cos_irrelevant_max_abs"])]
    # the sign of w_g is not identified for every recurrence (zoh learns a gate *closed* on o+ / o-): |cos| too
    relevant_abs = [(abs(p) + abs(m)) / 2 for p, m in zip(last["cos_plus"], last["cos_minus"])]
    gap_abs_abs = [r - q for r, q in zip(relevant_abs, last["cos_irrelevant_max_abs"])]
    return {
        "cos_relevant": mean_interval(relevant),
        "cos_irrelevant_mean": mean_interval(last["cos_irrelevant_mean"]),
        "cos_irrelevant_max_abs": mean_interval(last["cos_irrelevant_max_abs"]),
        "relevant_minus_irrelevant": mean_interval(gap),
        "relevant_minus_max_abs_irrelevant": mean_interval(gap_abs),
        "abs_cos_relevant": mean_interval(relevant_abs),
        "abs_relevant_minus_max_abs_irrelevant": mean_interval(gap_abs_abs),
        "test_accuracy": mean_interval(last["eval_accuracy"]),
        "per_seed": last,
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)
    seeds = list(range(args.seeds))
    d = args.hidden_size
    common = dict(
        sequence_length=args.sequence_length, hidden_size=d, num_irrelevant_patterns=d // 2, noise_std=args.noise
    )
    datasets = {
        "majority (gap 0.4)": SyntheticSequenceConfig(regime="majority", alpha_r=0.6, alpha_c=0.2, **common),
        "chance (alpha_r = alpha_c)": SyntheticSequenceConfig(regime="majority", alpha_r=0.3, alpha_c=0.3, **common),
        "locality (dL+ = 1, dL- = 3)": SyntheticSequenceConfig(
            regime="locality", delta_consistent=1, delta_confusing=3, **common
        ),
    }
    blocks = {
        "zoh": SelectiveSSMConfig(hidden_size=d),
        "mamba_euler": SelectiveSSMConfig(hidden_size=d, recurrence="mamba_euler"),
        "input_gate": SelectiveSSMConfig(hidden_size=d, recurrence="input_gate", state_normalization="length"),
    }
    runs = [(block, data, None) for data in list(datasets)[:2] for block in blocks if block in args.blocks]
    runs += [("input_gate", "majority (gap 0.4)", args.sgd_batch_size), ("zoh", "locality (dL+ = 1, dL- = 3)", None)]
    section = {
        "command": COMMAND + (" --quick" if args.quick else ""),
        "settings": {k: v for k, v in vars(args).items() if not k.endswith(("results", "figure"))},
        "chance_interval_of_one_seed": chance_accuracy_interval(args.num_test),
        "runs": {},
    }
    histories_for_plot, trained = {}, {}
    started = time.time()
    for block, data_name, batch_size in runs:
        data_config = datasets[data_name]
        train = [sample_sequences(data_config, args.num_train, seed=s) for s in seeds]
        test = [sample_sequences(data_config, args.num_test, seed=TEST_SEED_OFFSET + s) for s in seeds]
        models = seeded_models(blocks[block], seeds)
        t0 = time.time()
        histories = train_ensemble(
            models,
            torch.stack([t["inputs_embeds"] for t in train]),
            torch.stack([t["labels"] for t in train]),
            learning_rate=args.learning_rate,
            max_steps=args.steps,
            batch_size=batch_size,
            eval_inputs_embeds=torch.stack([t["inputs_embeds"] for t in test]),
            eval_labels=torch.stack([t["labels"] for t in test]),
            patterns=data_config.patterns(),
            log_every=max(1, args.steps // 20),
        )
        name = f"{block} | {data_name} | {'SGD b=' + str(batch_size) if batch_size else 'GD'}"
        result = summarise(histories)
        result.update(
            block=block,
            data=data_config.to_dict(),
            optimiser="sgd" if batch_size else "gd",
            seconds=round(time.time() - t0, 1),
        )
        section["runs"][name] = result
        histories_for_plot[name] = histories
        trained[name] = (models[0], test[0])
        print(
            f"[{name}] cos(w, o±) {fmt(result['cos_relevant'])}  mean cos(w, q) "
            f"{fmt(result['cos_irrelevant_mean'])}  test acc {fmt(result['test_accuracy'])}",
            flush=True,
        )
        update_results(args.results, "alignment", section)

    # transformers' Mamba on the same data
    section["mamba"] = {}
    for data_name, data_config in datasets.items():
        accs, deltas = [], []
        t0 = time.time()
        for s in seeds:
            train = sample_sequences(data_config, args.mamba_num_train, seed=s)
            test = sample_sequences(data_config, args.num_test, seed=TEST_SEED_OFFSET + s)
            model = tiny_mamba_classifier(hidden_size=d, seed=s, state_size=4, expand=1)
            train_gd(
                model,
                train["inputs_embeds"],
                train["labels"],
                learning_rate=args.mamba_learning_rate,
                max_steps=args.mamba_steps,
                log_every=args.mamba_steps,
                optimizer=lambda ps: torch.optim.Adam(ps, lr=args.mamba_learning_rate),
            )
            model.eval()
            accs.append(accuracy(model, test["inputs_embeds"], test["labels"]))
            delta = mamba_time_steps(model, test["inputs_embeds"][:200]).mean((0, 3))  # (B, L): mean Δ per token
            ids = test["pattern_ids"][:200]
            deltas.append({"relevant": float(delta[ids < 2].mean()), "irrelevant": float(delta[ids >= 2].mean())})
        section["mamba"][data_name] = {
            "test_accuracy": mean_interval(accs),
            "per_seed_accuracy": accs,
            "mean_delta_on_relevant_tokens": mean_interval([x["relevant"] for x in deltas]),
            "mean_delta_on_irrelevant_tokens": mean_interval([x["irrelevant"] for x in deltas]),
            "seconds": round(time.time() - t0, 1),
        }
        print(
            f"[transformers Mamba | {data_name}] test acc {fmt(section['mamba'][data_name]['test_accuracy'])}",
            flush=True,
        )
        update_results(args.results, "alignment", section)
    section["wall_seconds"] = round(time.time() - started, 1)
    update_results(args.results, "alignment", section)

    keep = [n for n in histories_for_plot if "SGD" not in n and ("chance" not in n or n.startswith("input_gate"))]
    plot_alignment_history(
        {shorten(n): histories_for_plot[n] for n in keep},
        args.figure,
        title="Gate-pattern cosines over training (mean, min-max band over seeds)",
    )
    plot_gates(trained, args.gates_figure)
    print(f"wrote {args.results}, {args.figure} and {args.gates_figure}")
    return 0


def fmt(interval):
    return f"{interval['mean']:.3f} [{interval['low']:.3f}, {interval['high']:.3f}]"


def shorten(name: str) -> str:
    block, data, opt = (part.strip() for part in name.split("|"))
    return f"{block}, {data.split(' (')[0]}" + ("" if opt == "GD" else f", {opt}")


def plot_gates(trained, path):
    """Per-token gate values of one test sequence for three trained models (seed 0)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hfx.models.selective_ssm.diagnostics import _TOKEN_COLOURS, _token_kind

    chosen = [n for n in trained if "SGD" not in n and "chance" not in n]
    fig, axes = plt.subplots(len(chosen), 1, figsize=(7, 1.7 * len(chosen)), sharex=True, squeeze=False)
    for ax, name in zip(axes[:, 0], chosen):
        model, test = trained[name]
        with torch.no_grad():
            out = model(inputs_embeds=test["inputs_embeds"][:1])
        kinds = [_token_kind(int(p)) for p in test["pattern_ids"][0]]
        ax.bar(range(len(kinds)), out.gates[0].tolist(), color=[_TOKEN_COLOURS[k] for k in kinds])
        ax.set_ylabel("gate", fontsize=8)
        ax.set_title(shorten(name), fontsize=8)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in _TOKEN_COLOURS.values()]
    axes[0, 0].legend(handles, ["o+", "o-", "irrelevant"], fontsize=7, ncol=3, loc="upper left")
    axes[-1, 0].set_xlabel("token position (decision point = last); one test sequence, seed 0")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)


if __name__ == "__main__":
    sys.exit(main())
