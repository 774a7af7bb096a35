"""`hfx eval gsm8k --strategies greedy,majority,thinkmerge --num-traces 4 --limit N [--data-file FILE]`.

Loads GSM8K (``openai/gsm8k``, config ``main``, split ``test`` with ``datasets``; or a local JSON-lines file with
``question``/``answer`` fields via ``--data-file``), runs each strategy on the first ``--limit`` questions in batches,
prints a table (accuracy, mean generated tokens, wall seconds) and writes ``results.json`` and ``accuracy.png`` to
``--out-dir`` (checked before anything is computed; existing results are replaced only with ``--overwrite``), plus
``results.partial.json`` after every batch while it runs. ``majority`` and ``thinkmerge`` are compared on the same sampled traces.
"""

from __future__ import annotations

from hfx.commands import _types


HELP = "Evaluate decoding strategies (greedy, sample, majority, thinkmerge) on GSM8K."


def add_arguments(parser) -> None:
    from hfx.commands.generate import add_decoding_arguments

    parser.add_argument("task", choices=["gsm8k"], help="the benchmark (gsm8k)")
    parser.add_argument(
        "--strategies",
        default="greedy,majority,thinkmerge",
        help="comma-separated among greedy, sample, majority, thinkmerge (default: greedy,majority,thinkmerge)",
    )
    parser.add_argument("--limit", type=_types.positive_int, default=20, help="number of test questions (default: 20)")
    parser.add_argument("--data-file", default=None, help="local GSM8K JSON-lines file (offline); default: the Hub")
    add_decoding_arguments(parser)
    parser.add_argument("--batch-size", type=_types.positive_int, default=8, help="questions per batch (default: 8)")
    parser.add_argument(
        "--out-dir",
        default="outputs/gsm8k",
        help="where results.json and accuracy.png go (a new or empty folder, unless --overwrite)",
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="allow replacing results.json / accuracy.png in --out-dir"
    )


def load_gsm8k(data_file: str | None, limit: int):
    """The first ``limit`` GSM8K test rows as a list of dicts (``question``, ``answer``).

    Raises:
        FileNotFoundError: if ``data_file`` does not exist (or the Hub copy cannot be loaded).
        ValueError: if ``data_file`` is a folder, empty, not JSON lines, or its rows lack string ``question`` /
            ``answer`` fields (e.g. an MT-Bench file).
    """
    import json
    from pathlib import Path

    if data_file:
        path = Path(data_file)
        if not path.exists():
            raise FileNotFoundError(f"`--data-file` {data_file!r} does not exist")
        if not path.is_file():
            raise ValueError(f"`--data-file` must be a JSON-lines file, but {data_file!r} is a folder")
        rows = []
        with path.open(encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    raise ValueError(
                        f"`--data-file` {data_file!r} line {number} is not JSON (expected JSON lines with `question` "
                        "and `answer`)"
                    ) from None
                if not (isinstance(row, dict) and isinstance(row.get("question"), str)
                        and isinstance(row.get("answer"), str)):  # fmt: skip
                    fields = sorted(row) if isinstance(row, dict) else type(row).__name__
                    raise ValueError(  # noqa: TRY004 -- bad file content, not a bad Python argument
                        f"`--data-file` {data_file!r} line {number} needs string fields `question` and `answer` "
                        f"(GSM8K format), but has {fields}"
                    )
                rows.append({"question": row["question"], "answer": row["answer"]})
                if len(rows) >= limit:
                    break
        if not rows:
            raise ValueError(f"`--data-file` {data_file!r} holds no rows")
        return rows
    from datasets import load_dataset

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

    from hfx.commands.generate import load_backend, token_progress, vllm_backend_error

    error = vllm_backend_error(args, "eval")
    if error:
        print(error, file=sys.stderr)
        return 2
    import json
    import time
    from datetime import datetime, timezone

    from hfx.utils.artifacts import prepare_output_dir

    # outputs and inputs are checked before the heavy imports and any compute: a bad --out-dir never costs a run
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    if len(set(strategies)) != len(strategies):
        raise ValueError(f"`--strategies` names a strategy twice: {args.strategies!r}")
    out_dir = prepare_output_dir(args.out_dir, overwrite=True, arg="--out-dir", create=False)
    if not args.overwrite and any((out_dir / name).exists() for name in ("results.json", "accuracy.png")):
        raise ValueError(
            f"`--out-dir` {args.out_dir!r} already holds results.json / accuracy.png; choose a new folder or pass "
            "--overwrite"
        )
    if args.model is not None and args.model != "default":
        from hfx.utils.artifacts import resolve_model

        resolve_model(args.model, arg="--model", allowed=("transformers:causal_lm",), what="a causal LM folder or Hub id")
    if args.data_file:
        rows = load_gsm8k(args.data_file, args.limit)

    import torch
    from tqdm.auto import tqdm

    from hfx.generation.thinkmerge.answer import gsm8k_reference, is_correct
    from hfx.generation.thinkmerge.baselines import STRATEGIES, run_strategies

    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown or not strategies:
        raise ValueError(f"`--strategies` must be a comma-separated subset of {STRATEGIES}, got {args.strategies!r}")
    if not args.data_file:
        rows = load_gsm8k(None, args.limit)  # the Hub copy
    out_dir = prepare_output_dir(args.out_dir, overwrite=True, arg="--out-dir")
    model, tokenizer = load_backend(args)
    extra = {"merge": args.merge, "num_candidates": args.num_candidates} if args.merge != "direct" else {}
    per_question = [{"question": r["question"], "reference": gsm8k_reference(r["answer"])} for r in rows]
    seconds = dict.fromkeys(strategies, 0.0)
    start = time.perf_counter()
    progress = tqdm(total=len(rows) * len(strategies), desc="gsm8k", unit="answer")
    steps = tqdm(desc="decoding steps", unit="tok", leave=False, position=1)
    if args.backend == "hf":
        extra["logits_processor"] = token_progress(steps)
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
        # partial results as they come, so an interrupted run keeps the questions already answered
        done_questions = per_question[: first + len(batch)]
        (out_dir / "results.partial.json").write_text(json.dumps({"partial": True, "questions": done_questions}))
    progress.close()
    steps.close()
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
    (out_dir / "results.partial.json").unlink(missing_ok=True)
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
