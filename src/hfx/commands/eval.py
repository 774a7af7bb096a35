"""`hfx eval gsm8k --strategies greedy,majority,thinkmerge --num-traces 4 --limit N [--data-file FILE]`.

Loads GSM8K (``openai/gsm8k``, config ``main``, split ``test`` with ``datasets``; or a local JSON-lines file with
``question``/``answer`` fields via ``--data-file``), runs each strategy on the first ``--limit`` questions in batches,
prints a table (accuracy, mean generated tokens, wall seconds) and writes ``results.json`` and ``accuracy.png`` to
``--out-dir``. ``majority`` and ``thinkmerge`` are compared on the same sampled traces.
"""

from __future__ import annotations


HELP = "Evaluate decoding strategies (greedy, sample, majority, thinkmerge) on GSM8K."


def add_arguments(parser) -> None:
    from hfx.commands.generate import add_decoding_arguments

    parser.add_argument("task", choices=["gsm8k"], help="the benchmark (gsm8k)")
    parser.add_argument(
        "--strategies",
        default="greedy,majority,thinkmerge",
        help="comma-separated among greedy, sample, majority, thinkmerge (default: greedy,majority,thinkmerge)",
    )
    parser.add_argument("--limit", type=int, default=20, help="number of test questions (default: 20)")
    parser.add_argument("--data-file", default=None, help="local GSM8K JSON-lines file (offline); default: the Hub")
    add_decoding_arguments(parser)
    parser.add_argument("--batch-size", type=int, default=8, help="questions per batch (default: 8)")
    parser.add_argument("--out-dir", default="outputs/gsm8k", help="where results.json and accuracy.png go")


def load_gsm8k(data_file: str | None, limit: int):
    """The first ``limit`` GSM8K test rows as a list of dicts (``question``, ``answer``)."""
    from datasets import load_dataset

    if data_file:
        dataset = load_dataset("json", data_files=data_file, split="train")
    else:
        try:
            dataset = load_dataset("openai/gsm8k", "main", split="test")
        except Exception as err:
            raise FileNotFoundError(
                f"could not load `openai/gsm8k` from the Hub ({type(err).__name__}); pass a local copy with "
                "`--data-file PATH` (JSON lines with `question` and `answer`, e.g. ../shared/data/gsm8k/test.jsonl)"
            ) from err
    return [dataset[i] for i in range(min(limit, len(dataset)))]


def run(args) -> int:
    import sys

    from hfx.commands.generate import load_backend, vllm_backend_error

    error = vllm_backend_error(args, "eval")
    if error:
        print(error, file=sys.stderr)
        return 2
    import json
    import time
    from datetime import datetime, timezone
    from pathlib import Path

    import torch
    from tqdm.auto import tqdm

    from hfx.generation.thinkmerge.answer import gsm8k_reference, is_correct
    from hfx.generation.thinkmerge.baselines import STRATEGIES, run_strategies

    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown or not strategies:
        raise ValueError(f"`--strategies` must be a comma-separated subset of {STRATEGIES}, got {args.strategies!r}")
    for name in ("num_traces", "limit", "batch_size", "max_thinking_tokens", "max_new_tokens"):
        if getattr(args, name) < 1:
            raise ValueError(f"`--{name.replace('_', '-')}` must be >= 1, but is {getattr(args, name)}")
    if args.data_file and not Path(args.data_file).is_file():
        raise FileNotFoundError(f"`--data-file` {args.data_file!r} does not exist")

    rows = load_gsm8k(args.data_file, args.limit)
    model, tokenizer = load_backend(args)
    extra = {"merge": args.merge, "num_candidates": args.num_candidates} if args.merge != "direct" else {}
    per_question = [{"question": r["question"], "reference": gsm8k_reference(r["answer"])} for r in rows]
    seconds = dict.fromkeys(strategies, 0.0)
    start = time.perf_counter()
    progress = tqdm(total=len(rows) * len(strategies), desc="gsm8k", unit="answer")
    for i, first in enumerate(range(0, len(rows), args.batch_size)):
        batch = per_question[first : first + args.batch_size]

        def done(name, n=len(batch)):  # noqa: B008
            progress.set_postfix_str(f"{name} done")
            progress.update(n)

        progress.set_postfix_str(f"questions {first + 1}-{first + len(batch)}")
        results, batch_seconds = run_strategies(
            model, tokenizer, [q["question"] for q in batch], strategies=strategies, num_traces=args.num_traces,
            max_thinking_tokens=args.max_thinking_tokens, max_new_tokens=args.max_new_tokens,
            temperature=args.temperature, top_p=args.top_p, answer_do_sample=False if args.answer_greedy else None,
            seed=args.seed + i, on_strategy_done=done, **extra,
        )  # fmt: skip
        for name in strategies:
            seconds[name] += batch_seconds[name]
            for q, result in zip(batch, results[name], strict=True):
                q[name] = {
                    "prediction": result.prediction,
                    "correct": is_correct(result.prediction, q["reference"]),
                    "generated_tokens": result.generated_tokens,
                    "answer": result.text,
                    "traces": result.traces,
                    **({"answers": result.answers} if result.answers else {}),
                }
    progress.close()
    total_seconds = time.perf_counter() - start

    summary = {}
    for name in strategies:
        n = len(per_question)
        summary[name] = {
            "accuracy": sum(q[name]["correct"] for q in per_question) / n,
            "correct": sum(q[name]["correct"] for q in per_question),
            "mean_generated_tokens": sum(q[name]["generated_tokens"] for q in per_question) / n,
            "wall_seconds": seconds[name],
        }
    header = f"{'strategy':<12} {'accuracy':>9} {'correct':>8} {'mean gen. tokens':>17} {'wall s':>8}"
    print(header)
    print("-" * len(header))
    for name, s in summary.items():
        print(
            f"{name:<12} {s['accuracy']:>9.1%} {s['correct']:>4}/{len(per_question):<3} "
            f"{s['mean_generated_tokens']:>17.1f} {s['wall_seconds']:>8.1f}"
        )
    print(
        f"total wall time {total_seconds:.1f} s; majority and thinkmerge share their sampled traces (counted in both)"
    )

    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    result = {
        "task": "gsm8k",
        "model": args.model or "default (SmolLM2-135M-Instruct, embedded)",
        "data": args.data_file or "openai/gsm8k:main:test",
        "settings": {k: v for k, v in vars(args).items() if not k.startswith("_")},
        "summary": summary,
        "total_wall_seconds": total_seconds,
        "torch": torch.__version__,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "questions": per_question,
    }
    (out_dir / "results.json").write_text(json.dumps(result, indent=2))
    _plot(summary, out_dir / "accuracy.png", len(per_question), args)
    print(f"wrote {out_dir / 'results.json'} and {out_dir / 'accuracy.png'}")
    return 0


def _plot(summary: dict, path, n: int, args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(summary)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.5))
    bars = ax1.bar(names, [100 * summary[k]["accuracy"] for k in names], color="tab:blue")
    ax1.bar_label(bars, labels=[f"{summary[k]['correct']}/{n}" for k in names])
    ax1.set_ylabel("accuracy (%)")
    ax1.set_ylim(0, 100)
    ax1.set_title(f"GSM8K, {n} questions, K={args.num_traces}")
    ax2.bar(names, [summary[k]["mean_generated_tokens"] for k in names], color="tab:orange")
    ax2.set_ylabel("mean generated tokens / question")
    ax2.set_title("cost")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
