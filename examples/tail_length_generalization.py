"""TAIL-style traces vs baselines vs ablations: SFT on short inputs, exact match on longer ones (arXiv 2507.13332).

For each task and arm, a small Llama is trained from scratch with TRL's ``SFTTrainer`` on the ``train`` split at
the training lengths, then decoded greedily at those and at longer lengths (the ``test`` split inside the task's
train range, ``ood_test`` beyond it: no evaluated input can occur in training). Arms: ``tail`` (all three principles), ``plain`` (answer only), ``cot`` (human-style), ``no_fetch``
/ ``no_atomic`` / ``no_linear`` (the paper's ablations), ``index_hint``, ``reversed``. An arm whose data would be
identical to another's for a task (``no_atomic`` where every iteration is one atomic step; ``reversed`` for a
one-element answer) is skipped and listed in the JSON as such.

Writes ``outputs/tail_lg/partial_<tasks>.json`` after every run, then ``--out-json`` and ``--out-plot``; the JSON
also compares TAIL with every other arm on the same ood rows (exact McNemar test). ``--merge`` combines the files of
runs made in separate processes (one per task).

    OMP_NUM_THREADS=1 nice -n 5 python examples/tail_length_generalization.py            # the README run
    python examples/tail_length_generalization.py --tasks add --arms tail plain --max-steps 50 --eval-per-length 8
    python examples/tail_length_generalization.py --select-lr 5e-4 1e-3 2e-3 --tasks add --arms tail plain cot
"""

from __future__ import annotations

import argparse
import json
import os
import time
from datetime import date
from pathlib import Path


ARMS = {
    "tail": {"format": "tail"},
    "plain": {"format": "plain"},
    "cot": {"format": "cot"},
    "no_fetch": {"format": "tail", "fetch": False},
    "no_atomic": {"format": "tail", "atomic": False},
    "no_linear": {"format": "tail", "linear": False},
    "index_hint": {"format": "index_hint"},
    "reversed": {"format": "reversed"},
}


def identical_arm(task_name: str, arm: str) -> str | None:
    """The arm whose data this arm reproduces exactly for this task (so it is not trained), or None."""
    from hfx.data.tail import get_task

    task = get_task(task_name)
    if arm == "no_atomic":
        inp = task.sample(__import__("random").Random(0), task.train_lengths[1])
        if all(len(it) == 1 for it in task.execute(inp).iterations):
            return "tail"
    if arm == "reversed" and (task.answer_kind == "symbol" or task_name in ("dfa_mod3", "parity")):
        return "plain"  # a one-character answer reads the same both ways
    return None


def eval_splits(task_name: str, lengths, dev: bool):
    """Group evaluation lengths by the split that holds them: lengths inside the task's train range come from
    ``test`` (``validation`` in dev mode), longer ones from ``ood_test`` (``ood_validation``). Either way no
    evaluated input can occur in ``train`` (the splits partition the inputs)."""
    from hfx.data.tail import get_task

    hi = get_task(task_name).train_lengths[1]
    groups = {}
    for length in lengths:
        ood = length > hi
        split = ("ood_validation" if ood else "validation") if dev else ("ood_test" if ood else "test")
        groups.setdefault(split, []).append(length)
    return list(groups.items())


def run_arm(task, arm, args, tok, lr, eval_split_lengths):
    import torch
    from transformers import LlamaForCausalLM

    from hfx.data.tail import load_dataset
    from hfx.data.tail.recipe import evaluate_exact_match, tiny_llama_config, to_prompt_completion, train_sft

    kw = ARMS[arm]
    train = to_prompt_completion(
        load_dataset(task, "train", args.train_size, seed=args.seed, lengths=args.train_lengths, **kw),
        prompt=args.prompt,
    )
    torch.manual_seed(args.seed)
    config = tiny_llama_config(
        tok,
        hidden_size=args.hidden_size,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        intermediate_size=args.intermediate_size,
    )
    model = LlamaForCausalLM(config)
    t0 = time.time()
    trainer = train_sft(
        model,
        tok,
        train,
        f"outputs/tail_lg/{task}_{arm}",
        max_steps=args.max_steps,
        learning_rate=lr,
        batch_size=args.batch_size,
        seed=args.seed,
    )
    train_s = time.time() - t0
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    result = {"train_seconds": round(train_s, 1), "final_loss": losses[-1] if losses else None, "curve": {}}
    t0 = time.time()
    for split, lengths in eval_split_lengths:
        ds = to_prompt_completion(
            load_dataset(task, split, args.eval_per_length * len(lengths), seed=args.seed, lengths=lengths, **kw),
            prompt=args.prompt,
        )
        ev = evaluate_exact_match(trainer.model, tok, ds, batch_size=args.eval_batch_size)
        for length, stats in ev["by_length"].items():
            result["curve"][str(length)] = {**stats, "split": split}
        result.setdefault("trace_exact", {})[split] = sum(ev["trace_exact"]) / len(ev["trace_exact"])
        result.setdefault("correct", {})[split] = [int(c) for c in ev["correct"]]  # row order = the split's order
        result.setdefault("examples", {})[split] = [
            {"prompt": r["prompt"], "completion": c, "answer": r["answer"]}
            for r, c in list(zip(ds, ev["completions"]))[:2]
        ]
    result["eval_seconds"] = round(time.time() - t0, 1)
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tasks", nargs="+", default=["add", "dfa_mod3", "reverse"])
    p.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    p.add_argument("--train-lengths", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    p.add_argument("--ood-lengths", type=int, nargs="+", default=[6, 7, 8, 9, 10])
    p.add_argument("--train-size", type=int, default=4000)
    p.add_argument("--eval-per-length", type=int, default=30)
    p.add_argument("--max-steps", type=int, default=300)
    p.add_argument("--learning-rate", type=float, default=2e-3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--eval-batch-size", type=int, default=60)
    p.add_argument("--hidden-size", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--intermediate-size", type=int, default=384)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--prompt",
        default="tape",
        choices=["tape", "question"],
        help="tape: every arm is prompted with the TASK/INPUT tape line (the TAIL trace without it is the target)",
    )
    p.add_argument(
        "--select-lr",
        type=float,
        nargs="+",
        default=None,
        help="dev mode: train each arm at these learning rates and report validation / ood_validation accuracy",
    )
    p.add_argument(
        "--merge",
        nargs="+",
        default=None,
        metavar="JSON",
        help="combine result files of separate runs (e.g. one process per task) into --out-json and --out-plot",
    )
    p.add_argument("--out-json", default="benchmarks/results/tail_length_generalization.json")
    p.add_argument("--out-plot", default="docs/figures/tail_length_generalization.png")
    args = p.parse_args(argv)
    if args.merge:
        return merge(args.merge, args.out_json, args.out_plot)

    import datasets

    from hfx.data.tail import get_task
    from hfx.data.tail.recipe import build_tokenizer, plot_length_generalization

    datasets.disable_progress_bars()

    for task in args.tasks:  # training lengths must lie in the task's train range
        spec = get_task(task)
        if max(args.train_lengths) > spec.train_lengths[1] or max(args.ood_lengths) > spec.ood_lengths[1]:
            raise SystemExit(
                f"{task}: train lengths <= {spec.train_lengths[1]}, eval lengths <= {spec.ood_lengths[1]}"
            )
    tok = build_tokenizer()
    Path("outputs/tail_lg").mkdir(parents=True, exist_ok=True)
    dev = args.select_lr is not None
    eval_lengths = [*args.train_lengths, *args.ood_lengths]
    lrs = args.select_lr if dev else [args.learning_rate]
    results = {"curves": {}, "skipped": {}, "runs": {}}
    t_start = time.time()
    for task in args.tasks:
        for arm in args.arms:
            same = identical_arm(task, arm)
            if same:
                results["skipped"].setdefault(task, {})[arm] = f"identical data to `{same}` for this task"
                continue
            for lr in lrs:
                key = f"{task}/{arm}" + (f"/lr={lr:g}" if dev else "")
                print(f"[{time.time() - t_start:6.0f}s] {key}", flush=True)
                res = run_arm(task, arm, args, tok, lr, eval_splits(task, eval_lengths, dev))
                results["runs"][key] = res
                results["curves"].setdefault(task, {})[arm if not dev else f"{arm} lr={lr:g}"] = res["curve"]
                acc = _summary(res["curve"], args)
                print(
                    f"    loss {res['final_loss']:.3f}  acc {acc}  ({res['train_seconds']}s + {res['eval_seconds']}s)"
                )
                Path(f"outputs/tail_lg/partial_{'_'.join(args.tasks)}.json").write_text(json.dumps(results, indent=1))
    summary = {
        f"{task}/{arm}": _summary(curve, args)
        for task, arms in results["curves"].items()
        for arm, curve in arms.items()
    }
    paired = {} if dev else _paired(results["runs"], args)
    out = {
        "metric": "exact-match accuracy by input length (greedy), 95% Wilson intervals",
        "value": summary,
        "goal": "TAIL keeps its in-distribution accuracy at the longer (ood) lengths better than the baselines and "
        "ablations (the paper's claim, arXiv 2507.13332), at this small scale",
        "command": "OMP_NUM_THREADS=1 nice -n 5 python examples/tail_length_generalization.py "
        + " ".join(argv if argv is not None else __import__("sys").argv[1:]),
        "date": date.today().isoformat(),
        "dev_mode": dev,
        "settings": {k: v for k, v in vars(args).items() if k not in ("out_json", "out_plot")},
        "load_average": os.getloadavg(),
        "wall_seconds": round(time.time() - t_start),
        "paired_vs_tail": paired,
        **results,
    }
    out_json = Path(args.out_json if not dev else "outputs/tail_lg/dev.json")
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps(out, indent=1))
    print(f"wrote {out_json}")
    if not dev:
        Path(args.out_plot).parent.mkdir(parents=True, exist_ok=True)
        plot_length_generalization(
            results["curves"],
            args.train_lengths,
            args.out_plot,
            title="TAIL-style SFT, tiny Llama from scratch: exact match vs input length (shaded: train lengths)",
        )
        print(f"wrote {args.out_plot}")
    return 0


def _mcnemar_p(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value from the discordant counts b and c."""
    from math import comb

    n = b + c
    if n == 0:
        return 1.0
    return min(1.0, 2 * sum(comb(n, k) for k in range(min(b, c) + 1)) / 2**n)


def _row_lengths(task: str, split: str, lengths, settings) -> list[int]:
    """The input length of every evaluated row of ``split`` (regenerated: rows depend on the seed, not the format)."""
    from hfx.data.tail.dataset import generate_example

    n = settings.eval_per_length * len(lengths)
    return [
        generate_example(task, split, i, settings.seed, lengths=lengths, format="plain")["metadata"]["length"]
        for i in range(n)
    ]


def _paired(runs: dict, settings) -> dict:
    """TAIL vs every other arm on the same rows at the longer lengths (all arms see the same inputs): accuracy
    difference, the discordant counts and the exact McNemar p-value; plus the number of distinct inputs."""
    eval_lengths = [*settings.train_lengths, *settings.ood_lengths]
    out, row_lengths = {}, {}
    for key, run in runs.items():
        task, arm = key.split("/")[:2]
        base = runs.get(f"{task}/tail")
        if arm == "tail" or base is None:
            continue
        a, b = [], []
        for split, lengths in eval_splits(task, eval_lengths, dev=False):
            if (task, split) not in row_lengths:
                row_lengths[task, split] = _row_lengths(task, split, lengths, settings)
            keep = [i for i, n in enumerate(row_lengths[task, split]) if n in settings.ood_lengths]
            a += [base["correct"][split][i] for i in keep]
            b += [run["correct"][split][i] for i in keep]
        tail_only = sum(x and not y for x, y in zip(a, b))
        arm_only = sum(y and not x for x, y in zip(a, b))
        out[key] = {
            "ood_accuracy_tail_minus_arm": round((sum(a) - sum(b)) / len(a), 4),
            "tail_right_arm_wrong": tail_only,
            "arm_right_tail_wrong": arm_only,
            "mcnemar_p": round(_mcnemar_p(tail_only, arm_only), 4),
            "n": len(a),
        }
    return out


def _distinct_inputs(tasks, settings) -> dict:
    """Rows and distinct inputs per evaluated length (small input spaces repeat inputs: fewer independent rows)."""
    from hfx.data.tail.dataset import generate_example

    eval_lengths = [*settings.train_lengths, *settings.ood_lengths]
    out = {}
    for task in tasks:
        seen: dict[int, list] = {}
        for split, lengths in eval_splits(task, eval_lengths, dev=False):
            for i in range(settings.eval_per_length * len(lengths)):
                ex = generate_example(task, split, i, settings.seed, lengths=lengths, format="plain")
                seen.setdefault(ex["metadata"]["length"], []).append(ex["question"])
        out[task] = {str(k): {"rows": len(v), "distinct": len(set(v))} for k, v in sorted(seen.items())}
    return out


def merge(paths, out_json: str, out_plot: str) -> int:
    """Combine several result files (same settings, different tasks) into one JSON and one plot."""
    from hfx.data.tail.recipe import plot_length_generalization

    parts = [json.loads(Path(p).read_text()) for p in paths]
    full = [part for part in parts if "settings" in part]
    if not full:
        raise SystemExit("--merge needs at least one finished result file (partial files may be added)")
    settings = argparse.Namespace(**full[0]["settings"])
    for part in parts:  # a partial file (outputs/tail_lg/partial_*.json, a run stopped early) has no summary yet
        part.setdefault(
            "value", {f"{t}/{a}": _summary(c, settings) for t, arms in part["curves"].items() for a, c in arms.items()}
        )
    out = {**full[0], "value": {}, "curves": {}, "runs": {}, "skipped": {}}
    for part in parts:
        for key in ("value", "runs"):
            out[key].update(part[key])
        for key in ("curves", "skipped"):  # {task: {arm: ...}}: merge per task
            for task, arms in part[key].items():
                out[key].setdefault(task, {}).update(arms)
    out["paired_vs_tail"] = _paired(out["runs"], settings)
    out["distinct_inputs"] = _distinct_inputs(list(out["curves"]), settings)
    out["command"] = [part.get("command", "(partial file)") for part in parts] + [
        "python examples/tail_length_generalization.py --merge " + " ".join(map(str, paths))
    ]
    out["wall_seconds"] = max(part.get("wall_seconds", 0) for part in parts)
    out["load_average"] = [part["load_average"] for part in full]
    Path(out_json).parent.mkdir(parents=True, exist_ok=True)
    Path(out_json).write_text(json.dumps(out, indent=1))
    Path(out_plot).parent.mkdir(parents=True, exist_ok=True)
    plot_length_generalization(
        out["curves"],
        out["settings"]["train_lengths"],
        out_plot,
        title="TAIL-style SFT, tiny Llama from scratch: exact match vs input length (shaded: train lengths)",
    )
    print(f"wrote {out_json} and {out_plot}")
    return 0


def _summary(curve: dict, args) -> dict:
    """Pooled accuracy (and Wilson 95 % interval) over the train lengths ("id") and the longer ones ("ood")."""
    from hfx.data.tail.recipe import wilson_interval

    out = {}
    for name, lengths in (("id", args.train_lengths), ("ood", args.ood_lengths)):
        rows = [curve[str(x)] for x in lengths if str(x) in curve]
        k, n = sum(v["correct"] for v in rows), sum(v["n"] for v in rows)
        if n:
            lo, hi = wilson_interval(k, n)
            out[name] = {"accuracy": round(k / n, 4), "ci95": [round(lo, 4), round(hi, 4)], "n": n}
    return out


if __name__ == "__main__":
    raise SystemExit(main())
