"""SC-GNN evidence: each base SI-GNN vs its self-consistent variant, paired by seed, on offline synthetic data.

Two recipes (``--recipe``):

* ``joint`` (default; the spec's pseudo-code): from the same seed (same initial weights, same batch order) train the
  base SI-GNN and the SI-GNN with ``+ 1 * L_SC`` for the same epochs. The two arms differ only by the SC term.
* ``finetune`` (the authors' code): train the base, then from that checkpoint fine-tune two arms with the GIN
  convolutions frozen (and in eval mode), as their ``train_ft``: ``sc`` (their ``<method>_sc`` config) and
  ``control`` (the same stage without ``L_SC``, isolating the SC term from the extra epochs).

Each arm is evaluated on the test split (explanation ROC-AUC, Fid- / Fid+ / Fid, accuracy, sparsity); across seeds
the SHD of single models and of ``n // 2``-model ensembles. Paired differences (same seed) get 95 % t-intervals and
exact sign-flip p-values. Partial results are written after every seed.

    OMP_NUM_THREADS=1 nice -n 5 python examples/sc_gnn_benchmark.py --methods gsat att size cal --seeds 5
    OMP_NUM_THREADS=1 nice -n 5 python examples/sc_gnn_benchmark.py --dataset ba-shapes --methods gsat --seeds 5

No hyper-parameters are tuned here: every loss weight is the authors' BA-2Motifs config; the epoch budgets are
shortened (their 100 + 100 epochs do not fit a shared 2-core CPU), the batch is 32 instead of their 128 (so the
shortened runs still take enough optimizer steps), GSAT's r decay interval and the first selectable epoch are scaled
in proportion (the sparsity warm-up stays 10 epochs: scaled, it collapsed SIZE on the validation split), and model
selection uses the validation split.
"""

from __future__ import annotations

import argparse
import copy
import fcntl
import json
import os
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import torch

from hfx.gnn.self_consistency import (
    SelfConsistencyTrainer,
    SelfConsistencyTrainingArguments,
    SelfInterpretableGNNConfig,
    ba_2motifs,
    ba_shapes,
    collect_explanations,
    ensemble_metrics,
    explanation_metrics,
    mean_interval,
    paired_comparison,
    plot_explanations,
    split_dataset,
    train_si_gnn,
)


METRICS = ("explanation_auc", "accuracy", "fid_minus", "fid_plus", "fid", "sparsity")


def schedule_epochs(epochs: int) -> int:
    """The authors' 10-epoch schedules (GSAT r decay interval, sparsity warm-up, first selectable epoch) scaled to a
    shortened run: ``round(10 * epochs / 100)``, at least 1."""
    return max(1, round(10 * epochs / 100))


def stage_configs(
    method: str, dataset: str, epochs: int
) -> tuple[SelfInterpretableGNNConfig, SelfInterpretableGNNConfig]:
    """(base config, SC-stage config) from the authors' configs/method/<method>[_sc].yaml for BA-2Motifs, with GSAT's
    10-epoch r decay interval scaled to ``epochs`` (:func:`schedule_epochs`)."""
    if dataset == "ba-2motifs":
        common = {"num_node_features": 10, "num_classes": 2, "task": "graph"}
    else:
        common = {"num_node_features": 10, "num_classes": 4, "task": "node"}
    # GSAT's r decay scaled to the budget; the sparsity warm-up (SIZE, CAL+CR) kept at the authors' 10 epochs: scaled
    # down to 1 epoch it let the sparsity term collapse the attention before SIZE learned the task (validation split)
    common.update(gsat_decay_interval=schedule_epochs(epochs), sparsity_warmup_epochs=10)
    base = SelfInterpretableGNNConfig(si_gnn=method, **common)
    sc = copy.deepcopy(base)
    sc.use_self_consistency = True
    if method == "gsat":
        sc.explainer_dropout = 0.3  # gsat_sc.yaml
    if method == "size":
        sc.reg_loss_weight = 0.05  # size_sc.yaml: sparsity_mask_coef 5e-2 (base 5e-1)
    return base, sc


def finetune(base_model, config, splits, args):
    """The SC stage recipe (frozen convolutions, final GSAT r) with ``config`` (with or without L_SC)."""
    model = copy.deepcopy(base_model)
    model.config = copy.deepcopy(config)
    model.encoder.dropout, model.explainer.dropout = config.dropout, config.explainer_dropout
    trainer = SelfConsistencyTrainer(
        model=model, args=args, train_dataset=splits["train"], eval_dataset=splits["validation"]
    )
    trainer.train()
    model.unfreeze_message_passing()
    return model.eval(), trainer.best_validation.best_epoch


def summarize(records: list[dict], runs: dict) -> dict:
    """Per method: mean and 95 % CI of each metric per arm, paired SC - base (and SC - control), across-seed SHD."""
    summary = {}
    for method in sorted({r["method"] for r in records}):
        rows = sorted((r for r in records if r["method"] == method), key=lambda r: r["seed"])
        entry = {"seeds": [r["seed"] for r in rows], "arms": {}, "paired": {}, "across_seeds": {}}
        arms = [arm for arm in ("base", "control", "sc") if arm in rows[0]]
        for arm in arms:
            entry["arms"][arm] = {m: mean_interval([r[arm][m] for r in rows]) for m in METRICS if m in rows[0][arm]}
        if len(rows) >= 2:
            for ref in [a for a in arms if a != "sc"]:
                entry["paired"][f"sc_minus_{ref}"] = {
                    m: paired_comparison([r[ref][m] for r in rows], [r["sc"][m] for r in rows])
                    for m in METRICS
                    if m in rows[0]["sc"]
                }
            for arm in arms:
                arm_runs = runs[method][arm]
                if len(arm_runs) >= 2:
                    entry["across_seeds"][arm] = ensemble_metrics(arm_runs, ensemble_size=max(1, len(arm_runs) // 2))
        summary[method] = entry
    return summary


def store(path: Path, args, partial: dict) -> None:
    """Merge this run's summary into ``path`` under ``experiments[<dataset>][<methods>]`` (other entries kept)."""
    with open(Path(tempfile.gettempdir()) / "hfx_sc_gnn_results.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two runs (e.g. two method groups) may write concurrently
        _store_locked(path, args, partial)


def _store_locked(path: Path, args, partial: dict) -> None:
    data = json.loads(path.read_text()) if path.is_file() else {}
    command = "OMP_NUM_THREADS=1 nice -n 5 python examples/sc_gnn_benchmark.py " + " ".join(sys.argv[1:])
    key = f"{args.recipe}:{'+'.join(args.methods)}"
    data.setdefault("experiments", {}).setdefault(args.dataset, {})[key] = {
        "command": command,
        "date": partial["date"],
        "elapsed_s": partial["elapsed_s"],
        "loadavg": partial["loadavg"],
        "settings": {k: v for k, v in vars(args).items() if k not in ("out", "results", "figure")},
        "summary": partial["summary"],
        "per_seed": partial["records"],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="ba-2motifs", choices=["ba-2motifs", "ba-shapes"])
    parser.add_argument("--methods", nargs="+", default=["gsat", "att", "size", "cal"])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--num-graphs", type=int, default=1000)
    parser.add_argument("--data-seed", type=int, default=0)
    parser.add_argument("--recipe", default="joint", choices=["joint", "finetune"])
    parser.add_argument("--epochs", type=int, default=10, help="training epochs per arm (the authors': 100)")
    parser.add_argument("--sc-epochs", type=int, default=5, help="finetune recipe: epochs per fine-tuned arm")
    parser.add_argument("--batch-size", type=int, default=32, help="training batch (the authors': 128)")
    parser.add_argument("--out", default="outputs/sc_gnn", help="partial results and the raw explanations")
    parser.add_argument("--figure", default=None, help="PNG: one test graph, base vs control vs SC (first method)")
    parser.add_argument(
        "--results", default=None, help="also store the summary in this JSON (e.g. benchmarks/results/sc_gnn.json)"
    )
    args = parser.parse_args()

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.dataset == "ba-2motifs":
        splits = split_dataset(ba_2motifs(args.num_graphs, seed=args.data_seed))
    else:
        splits = ba_shapes(seed=args.data_seed)
    tag = f"{args.dataset}_{args.recipe}"
    arms = ("base", "sc") if args.recipe == "joint" else ("base", "control", "sc")
    records, runs = [], {m: {arm: [] for arm in arms} for m in args.methods}
    started = time.time()
    for method in args.methods:
        base_config, sc_config = stage_configs(method, args.dataset, args.epochs)
        if args.recipe == "joint":
            sc_config = copy.deepcopy(base_config)  # identical but for the SC term
            sc_config.use_self_consistency, sc_config.sc_training = True, "joint"
        control_config = copy.deepcopy(sc_config)
        control_config.use_self_consistency = False
        for seed in range(args.seeds):
            t0 = time.time()
            common = {
                "output_dir": str(out / "trainer"),
                "seed": seed,
                "use_cpu": True,
                "disable_tqdm": True,
                "logging_strategy": "no",
                "per_device_train_batch_size": args.batch_size,
                "per_device_eval_batch_size": 128,
            }
            base_args = SelfConsistencyTrainingArguments(
                num_train_epochs=args.epochs, best_model_min_epoch=schedule_epochs(args.epochs), **common
            )
            result = train_si_gnn(base_config, splits["train"], splits["validation"], base_args)
            models = {"base": result.model}
            best = {"base": result.stages[0]["best_epoch"]}
            if args.recipe == "joint":
                sc_result = train_si_gnn(sc_config, splits["train"], splits["validation"], base_args)
                models["sc"], best["sc"] = sc_result.model, sc_result.stages[0]["best_epoch"]
            else:
                ft_args = SelfConsistencyTrainingArguments(
                    num_train_epochs=args.sc_epochs, finetune_from_base=True, **common
                )
                for arm, config in (("control", control_config), ("sc", sc_config)):
                    torch.manual_seed(seed)
                    models[arm], best[arm] = finetune(models["base"], config, splits, ft_args)
            record = {"method": method, "seed": seed, "best_epoch": best}
            for arm in arms:
                collected = collect_explanations(models[arm], splits["test"])
                record[arm] = explanation_metrics(collected)
                runs[method][arm].append(collected)
            record["seconds"] = round(time.time() - t0, 1)
            records.append(record)
            print(
                f"[{tag}] {method} seed {seed} ({record['seconds']} s): "
                + "; ".join(
                    f"{arm} auc {record[arm].get('explanation_auc', float('nan')):.3f} acc {record[arm]['accuracy']:.3f} "
                    f"fid- {record[arm]['fid_minus']:.3f}"
                    for arm in arms
                ),
                flush=True,
            )
            if args.figure and method == args.methods[0] and seed == 0:
                graph = (
                    next(g for g in splits["test"] if int(g.y.view(-1)[0]) == 0)
                    if args.dataset == "ba-2motifs"
                    else splits["test"][0]
                )
                names = {"base": method.upper(), "control": "+ fine-tuning (no SC)", "sc": f"{method.upper()} + SC"}
                plot_explanations(
                    graph,
                    {names[arm]: models[arm].explain(graph) for arm in arms},
                    path=args.figure,
                    title=f"{method.upper()} on a BA-2Motifs test graph (motif outlined in red), seed 0, {args.recipe}",
                )
            partial = {
                "dataset": args.dataset,
                "settings": vars(args),
                "records": records,
                "summary": summarize(records, runs),
                "elapsed_s": round(time.time() - started, 1),
                "loadavg": os.getloadavg(),
                "date": date.today().isoformat(),
            }
            (out / f"results_{tag}.json").write_text(json.dumps(partial, indent=1))
            if args.results:
                store(Path(args.results), args, partial)
            torch.save(runs, out / f"explanations_{tag}.pt")
    print(json.dumps(summarize(records, runs), indent=1)[:4000])


if __name__ == "__main__":
    main()
