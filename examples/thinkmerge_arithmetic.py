"""ThinkMerge vs greedy vs majority vote on locally generated arithmetic, SmolLM2-135M, paired 95 % intervals.

    OMP_NUM_THREADS=1 python examples/thinkmerge_arithmetic.py --task mul1 --split test --dev-n 32 --batch-size 8 \
        --max-minutes 45

Tasks (``--task``; exact match on the number): ``add1`` (1-digit + 1-digit), ``add21`` (2-digit + 1-digit), ``add2``
(2-digit + 2-digit), ``add3`` (three 1-digit terms), ``mul1`` (2-digit x 1-digit), ``sub1`` (``a - b``, b in 2-9, a
1-digit result). The task is chosen on the ``dev`` split (seed 123, never reported) with ``--probe`` (greedy and the
accuracy of 8 independent sampled traces): on 32 dev questions, greedy / single trace = add21 0.06 / 0.06, add2
0.16 / 0.16, add3 0.06 / 0.09, mul1 0.28 / 0.16, sub1 0.28 / 0.19 (and add1 0.81 greedy on the first 16). The rule
"greedy within 20-80 %, then the highest single-trace accuracy" picks ``sub1``, but it has only 72 distinct
questions (40 left after the dev split): too few, so ``mul1`` (720 questions) is used. An earlier, shorter test
run (16 dev questions, ``--dev-n 16``) is superseded by this one.

Per question: greedy (one trace, greedy answer); then K=8 sampled traces (T=0.7, top-p 0.95) shared by all the
K-strategies; majority vote over the independent answers of the first 4 / all 8 traces; ThinkMerge (the averaged
logits of the first 4 / all 8 traces). Questions are processed in batches; the results JSON is rewritten after each
batch, and ``--max-minutes`` stops starting new batches (the ``n`` used is reported). Paired comparisons: bootstrap
95 % interval of the accuracy difference over questions (10,000 resamples) and the exact McNemar p-value.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch
from scipy.stats import binomtest

from hfx.generation.thinkmerge import thinkmerge
from hfx.generation.thinkmerge.answer import extract_numeric_answer
from hfx.generation.thinkmerge.baselines import build_prompt, majority_vote
from hfx.models import load_default_model


ARMS = ("greedy", "majority@4", "thinkmerge@4", "majority@8", "thinkmerge@8")
PAIRS = (
    ("thinkmerge@4", "majority@4"),
    ("thinkmerge@8", "majority@8"),
    ("thinkmerge@4", "greedy"),
    ("thinkmerge@8", "greedy"),
    ("majority@4", "greedy"),
    ("majority@8", "greedy"),
)


def make_questions(task: str, n: int, seed: int, exclude: set[str] = frozenset()) -> list[tuple[str, str]]:
    """``n`` distinct (question, answer) pairs of ``task`` (``add1``: 1-digit + 1-digit, ``add21``: 2-digit +
    1-digit, ``add2``: 2-digit + 2-digit, ``add3``: three 1-digit terms, ``mul1``: 2-digit x 1-digit, ``sub1``:
    ``a - b`` with b in 2-9 and a 1-digit result) drawn with ``seed``."""
    pool = {"add1": 81, "add21": 810, "add2": 8100, "add3": 729, "mul1": 720, "sub1": 72}
    if task in pool and n > pool[task] - len(exclude):
        raise ValueError(f"`n`={n} exceeds the {pool[task] - len(exclude)} distinct {task} questions left")
    rng = random.Random(seed)
    out, seen = [], set(exclude)
    while len(out) < n:
        if task == "add1":
            a, b = rng.randint(1, 9), rng.randint(1, 9)
            question, answer = f"What is {a} + {b}?", a + b
        elif task == "add2":
            a, b = rng.randint(10, 99), rng.randint(10, 99)
            question, answer = f"What is {a} + {b}?", a + b
        elif task == "add21":
            a, b = rng.randint(10, 99), rng.randint(1, 9)
            question, answer = f"What is {a} + {b}?", a + b
        elif task == "mul1":
            a, b = rng.randint(10, 99), rng.randint(2, 9)
            question, answer = f"What is {a} * {b}?", a * b
        elif task == "add3":
            a, b, c = rng.randint(1, 9), rng.randint(1, 9), rng.randint(1, 9)
            question, answer = f"What is {a} + {b} + {c}?", a + b + c
        elif task == "sub1":
            b = rng.randint(2, 9)
            a = rng.randint(b + 1, b + 9)
            question, answer = f"What is {a} - {b}?", a - b
        else:
            raise ValueError(f"`task` must be one of add1, add21, add2, add3, mul1, sub1, got {task!r}")
        if question in seen:
            continue
        seen.add(question)
        out.append((question, str(answer)))
    return out


def paired(a: np.ndarray, b: np.ndarray, resamples: int = 10_000, seed: int = 0) -> dict:
    """Accuracy difference a − b with a paired bootstrap 95 % interval and the exact McNemar p-value."""
    rng = np.random.default_rng(seed)
    diff = a.astype(float) - b.astype(float)
    idx = rng.integers(0, len(diff), size=(resamples, len(diff)))
    boot = diff[idx].mean(axis=1)
    only_a, only_b = int(((a == 1) & (b == 0)).sum()), int(((a == 0) & (b == 1)).sum())
    p = binomtest(only_a, only_a + only_b, 0.5).pvalue if only_a + only_b else 1.0
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return {
        "diff": float(diff.mean()),
        "ci95": [float(lo), float(hi)],
        "a_only": only_a,
        "b_only": only_b,
        "mcnemar_p": float(p),
    }


def encode_batch(tok, batch, args) -> tuple[dict, int, dict, dict]:
    """Left-padded prompts of ``batch`` and the ``generate`` kwargs every arm shares: ``(enc, prompt_len, common,
    sampling)``."""
    prompts, think_ends = zip(*(build_prompt(tok, q) for q, _ in batch), strict=True)
    enc = tok(list(prompts), return_tensors="pt", padding=True, add_special_tokens=False)
    common = dict(
        custom_generate=thinkmerge,
        think_end=think_ends[0],
        think_end_tokenizer=tok,
        max_thinking_tokens=args.max_thinking_tokens,
        max_new_tokens=args.max_new_tokens,
        return_dict_in_generate=True,
        pad_token_id=tok.pad_token_id,
    )
    sampling = dict(do_sample=True, temperature=args.temperature, top_p=args.top_p, top_k=0)
    return enc, enc["input_ids"].shape[1], common, sampling


def run_batch(model, tok, batch, args) -> list[dict]:
    enc, plen, common, sampling = encode_batch(tok, batch, args)
    eos = tok.eos_token_id

    def text(row) -> str:
        ids = row.tolist()
        if eos in ids:
            ids = ids[: ids.index(eos)]
        return tok.decode(ids, skip_special_tokens=True)

    with torch.no_grad():
        torch.manual_seed(args.seed)
        greedy = model.generate(**enc, num_traces=1, do_sample=False, **common)
        torch.manual_seed(args.seed + 1)
        stage1 = model.generate(**enc, num_traces=8, answer_mode="none", **sampling, **common)
        preds = {"greedy": [extract_numeric_answer(text(r[plen:])) for r in greedy.sequences]}
        for k in (4, 8):
            traces = [t[:k] for t in stage1.traces]
            torch.manual_seed(args.seed + 2)
            merged = model.generate(**enc, num_traces=k, traces=traces, **sampling, **common)
            preds[f"thinkmerge@{k}"] = [extract_numeric_answer(text(r[plen:])) for r in merged.sequences]
            torch.manual_seed(args.seed + 2)
            indep = model.generate(**enc, num_traces=k, traces=traces, answer_mode="independent", **sampling, **common)
            answers = [extract_numeric_answer(text(r[plen:])) for r in indep.sequences]
            preds[f"majority@{k}"] = [majority_vote(answers[b * k : (b + 1) * k])[0] for b in range(len(batch))]
            if k == 8:
                per_trace = [answers[b * k : (b + 1) * k] for b in range(len(batch))]
    rows = []
    for b, (question, gold) in enumerate(batch):
        row = {"question": question, "gold": gold, "trace_answers": per_trace[b]}
        for arm in ARMS:
            row[arm] = preds[arm][b]
        rows.append(row)
    return rows


def probe_batch(model, tok, batch, args) -> list[dict]:
    """Dev-split probe (task choice): greedy and K=8 independent sampled traces only, no ThinkMerge."""
    enc, plen, common, sampling = encode_batch(tok, batch, args)
    with torch.no_grad():
        torch.manual_seed(args.seed)
        greedy = model.generate(**enc, num_traces=1, do_sample=False, **common)
        torch.manual_seed(args.seed + 1)
        indep = model.generate(**enc, num_traces=8, answer_mode="independent", **sampling, **common)
    decode = lambda r: extract_numeric_answer(tok.decode(r[plen:], skip_special_tokens=True))  # noqa: E731
    g = [decode(r) for r in greedy.sequences]
    a = [decode(r) for r in indep.sequences]
    return [
        {"question": q, "gold": gold, "greedy": g[b], "trace_answers": a[b * 8 : (b + 1) * 8]}
        for b, (q, gold) in enumerate(batch)
    ]


def summarise(rows: list[dict], args, seconds: float, finished: bool) -> dict:
    correct = {arm: np.array([r[arm] == r["gold"] for r in rows], dtype=int) for arm in ARMS}
    trace_acc = float(np.mean([np.mean([a == r["gold"] for a in r["trace_answers"]]) for r in rows]))
    comparisons = {f"{a} - {b}": paired(correct[a], correct[b]) for a, b in PAIRS}
    return {
        "metric": f"exact-match accuracy on '{args.task}' arithmetic ({args.split} split), SmolLM2-135M",
        "value": float(correct["thinkmerge@8"].mean()),
        "goal": "ThinkMerge accuracy - majority accuracy > 0 at K=4 and K=8 (paired 95 % CI excluding 0)",
        "command": "OMP_NUM_THREADS=1 python examples/thinkmerge_arithmetic.py " + " ".join(args.argv),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "finished": finished,
        "n": len(rows),
        "accuracy": {arm: float(c.mean()) for arm, c in correct.items()},
        "single_trace_accuracy": trace_acc,
        "paired": comparisons,
        "settings": {
            k: getattr(args, k)
            for k in ("task", "split", "max_thinking_tokens", "max_new_tokens", "temperature", "top_p", "seed")
        },
        "seconds": seconds,
        "loadavg": os.getloadavg(),
        "rows": rows,
    }


def plot(summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.4))
    acc = summary["accuracy"]
    ax1.bar(range(len(ARMS)), [acc[a] for a in ARMS], color=["grey", "C0", "C1", "C0", "C1"])
    ax1.axhline(summary["single_trace_accuracy"], ls="--", c="k", lw=0.8, label="one sampled trace")
    ax1.set_xticks(range(len(ARMS)), ARMS, rotation=30, fontsize=8)
    ax1.set_ylabel("accuracy")
    ax1.set_title(f"{summary['settings']['task']}, n={summary['n']}")
    ax1.legend(fontsize=8)
    names = list(summary["paired"])
    diffs = [summary["paired"][k]["diff"] for k in names]
    lo = [d - summary["paired"][k]["ci95"][0] for d, k in zip(diffs, names, strict=True)]
    hi = [summary["paired"][k]["ci95"][1] - d for d, k in zip(diffs, names, strict=True)]
    ax2.errorbar(diffs, range(len(names)), xerr=[lo, hi], fmt="o", capsize=3)
    ax2.axvline(0, c="k", lw=0.8)
    ax2.set_yticks(range(len(names)), names, fontsize=8)
    ax2.set_xlabel("paired accuracy difference (95 % bootstrap CI)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="mul1", choices=["add1", "add21", "add2", "add3", "mul1", "sub1"])
    parser.add_argument("--split", default="test", choices=["dev", "test"])
    parser.add_argument("--n", type=int, default=400, help="questions drawn (fewer are run if --max-minutes stops)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-thinking-tokens", type=int, default=48)
    parser.add_argument("--max-new-tokens", type=int, default=10)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--top-p", type=float, default=0.95)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-minutes", type=float, default=25.0, help="no new batch starts after this")
    parser.add_argument("--output", default="benchmarks/results/thinkmerge_arithmetic.json")
    parser.add_argument("--figure", default="docs/figures/thinkmerge_arithmetic.png")
    parser.add_argument("--plot-only", action="store_true", help="redraw --figure from an existing --output")
    parser.add_argument("--dev-n", type=int, default=16, help="dev questions (seed 123; never reported)")
    parser.add_argument(
        "--probe",
        action="store_true",
        help="dev split only: greedy and single-trace accuracy (K=8 independent traces), no ThinkMerge, for the "
        "task choice; prints and writes outputs/thinkmerge_probe_<task>.json",
    )
    args = parser.parse_args()
    if args.probe and args.split != "dev":
        parser.error("--probe runs on the dev split only (pass --split dev)")

    args.argv = sys.argv[1:]
    if args.plot_only:
        plot(json.loads(Path(args.output).read_text()), Path(args.figure))
        return

    dev = make_questions(args.task, args.dev_n, seed=123)
    questions = dev if args.split == "dev" else make_questions(args.task, args.n, 2026, {q for q, _ in dev})
    model, tok = load_default_model()
    tok.padding_side = "left"
    model.eval()
    rows: list[dict] = []
    start = time.perf_counter()
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.probe:
        for i in range(0, len(questions), args.batch_size):
            rows += probe_batch(model, tok, questions[i : i + args.batch_size], args)
        greedy = float(np.mean([r["greedy"] == r["gold"] for r in rows]))
        trace = float(np.mean([np.mean([a == r["gold"] for a in r["trace_answers"]]) for r in rows]))
        report = {"task": args.task, "n": len(rows), "greedy": greedy, "single_trace": trace, "rows": rows}
        Path("outputs").mkdir(exist_ok=True)
        Path(f"outputs/thinkmerge_probe_{args.task}.json").write_text(json.dumps(report, indent=1))
        print(
            f"{args.task}: n={len(rows)} greedy={greedy:.3f} single_trace={trace:.3f} ({time.perf_counter() - start:.0f}s)"
        )
        return
    for i in range(0, len(questions), args.batch_size):
        if (time.perf_counter() - start) / 60 > args.max_minutes:
            break
        rows += run_batch(model, tok, questions[i : i + args.batch_size], args)
        summary = summarise(rows, args, time.perf_counter() - start, finished=False)
        out.write_text(json.dumps(summary, indent=1))
        acc = " ".join(f"{a}={v:.3f}" for a, v in summary["accuracy"].items())
        print(f"n={len(rows)} {time.perf_counter() - start:.0f}s {acc}", flush=True)
    summary = summarise(rows, args, time.perf_counter() - start, finished=True)
    out.write_text(json.dumps(summary, indent=1))
    Path(args.figure).parent.mkdir(parents=True, exist_ok=True)
    plot(summary, Path(args.figure))
    for name, c in summary["paired"].items():
        print(f"{name}: {c['diff']:+.3f} [{c['ci95'][0]:+.3f}, {c['ci95'][1]:+.3f}] McNemar p={c['mcnemar_p']:.3g}")


if __name__ == "__main__":
    main()
