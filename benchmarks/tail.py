"""TAIL-style data benchmark: generation throughput per task and how the trace grows with the input length.

TAIL (arXiv 2507.13332) pays for length generalisation with long traces: every loop iteration is unrolled into atomic
steps with explicit memory fetches. This script measures, for every registered task:

* examples/s of :func:`hfx.data.tail.generate_example` in the TAIL format (program + render + the generator's own
  program-vs-reference check), interleaved round by round with the plain-answer format on the same rows, so machine
  load cancels in the ratio ``TAIL time / plain time``;
* trace length (lines, characters, tokens of the experiment tokenizer) at every train and ood length, and the
  growth exponent ``b`` of ``tokens ~ length^b`` (least squares on log-log; 1 = linear, 2 = quadratic).

    python benchmarks/tail.py [--rows 40] [--rounds 3]

Writes ``benchmarks/results/tail.json`` (metric: median examples/s over tasks, goal >= 100 examples/s).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import statistics
import time
from pathlib import Path


RESULTS = Path(__file__).resolve().parent / "results" / "tail.json"


def _time_rows(task: str, fmt: str, rows: int, offset: int) -> float:
    from hfx.data.tail.dataset import generate_example

    t0 = time.perf_counter()
    for i in range(rows):
        generate_example(task, "train", offset + i, 0, format=fmt)
    return time.perf_counter() - t0


def _slope(xs, ys) -> float:
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=40, help="rows per task, format and round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--per-length", type=int, default=6, help="rows per length for the growth table")
    args = p.parse_args(argv)

    from hfx.data.tail import get_task, list_tasks
    from hfx.data.tail.dataset import generate_example
    from hfx.data.tail.recipe import build_tokenizer

    tok = build_tokenizer()
    per_task = {}
    for name in list_tasks():
        spec = get_task(name)
        tail_s = plain_s = 0.0
        for r in range(args.rounds):  # interleave: load changes hit both formats alike
            offset = r * args.rows
            tail_s += _time_rows(name, "tail", args.rows, offset)
            plain_s += _time_rows(name, "plain", args.rows, offset)
        n = args.rows * args.rounds
        growth = {}
        for length in [*spec.lengths("train"), *spec.lengths("ood_test")]:
            split = "ood_test" if length >= spec.ood_lengths[0] else "train"
            rows = []
            for i in range(args.per_length):
                try:
                    rows.append(generate_example(name, split, i, 0, lengths=[length]))
                except ValueError:  # a tiny length with no input in this split
                    break
            if rows:
                growth[length] = {
                    "steps": statistics.fmean(r["metadata"]["num_steps"] for r in rows),
                    "chars": statistics.fmean(len(r["trace"]) for r in rows),
                    "tokens": statistics.fmean(len(tok(r["trace"])["input_ids"]) for r in rows),
                    "plain_tokens": statistics.fmean(len(tok(f"ANSWER {r['answer']}")["input_ids"]) for r in rows),
                }
        lengths = sorted(growth)
        per_task[name] = {
            "algorithm_class": spec.algorithm_class,
            "examples_per_s_tail": round(n / tail_s, 1),
            "examples_per_s_plain": round(n / plain_s, 1),
            "time_ratio_tail_vs_plain": round(tail_s / plain_s, 3),
            "trace_tokens_growth_exponent": round(_slope(lengths, [growth[x]["tokens"] for x in lengths]), 2),
            "tokens_at_max_train_length": round(
                growth[max(x for x in lengths if x <= spec.train_lengths[1])]["tokens"]
            ),
            "tokens_at_max_ood_length": round(growth[lengths[-1]]["tokens"]),
            "trace_by_length": {str(k): {kk: round(vv, 1) for kk, vv in v.items()} for k, v in growth.items()},
        }
        t = per_task[name]
        print(
            f"{name:15s} {t['examples_per_s_tail']:8.1f} ex/s (plain {t['examples_per_s_plain']:8.1f}, "
            f"ratio {t['time_ratio_tail_vs_plain']:.2f})  tokens ~ length^{t['trace_tokens_growth_exponent']:.2f}  "
            f"{t['tokens_at_max_train_length']} -> {t['tokens_at_max_ood_length']} tokens",
            flush=True,
        )
    median = statistics.median(t["examples_per_s_tail"] for t in per_task.values())
    out = {
        "metric": "TAIL-format examples generated per second (median over tasks; one process, train split)",
        "value": round(median, 1),
        "goal": ">= 100 examples/s per task median (a 100k-row dataset in minutes on one core)",
        "slowest_task": min(per_task, key=lambda k: per_task[k]["examples_per_s_tail"]),
        "median_time_ratio_tail_vs_plain": round(
            statistics.median(t["time_ratio_tail_vs_plain"] for t in per_task.values()), 3
        ),
        "per_task": per_task,
        "command": "python benchmarks/tail.py " + " ".join(argv if argv is not None else os.sys.argv[1:]),
        "date": dt.date.today().isoformat(),
        "load_average": os.getloadavg(),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=1))
    print(f"median {median:.1f} examples/s; wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
