"""`hfx federate --method devft --clients 4 --out run/`: DevFT (or a baseline) federated LoRA fine-tuning on Flower."""

from __future__ import annotations

from pathlib import Path

from hfx.commands import _types


HELP = (
    "Federated LoRA fine-tuning with DevFT (growing sub-models) or a baseline on Flower's simulation engine, clients "
    "holding Dirichlet splits of the local CL-benchmark tasks; writes the final adapter and the round history."
)

METHODS = ("devft", "fedit", "no_grouping", "no_fusion")


# upper bounds of the size flags: far above what a CPU / single-GPU run uses, low enough that a typo is refused
# before the model is loaded
MAX_LAYERS = 1024


def _stages(text: str) -> list[int]:
    """``--stages``: comma-separated layer counts, each in [1, MAX_LAYERS]."""
    import argparse

    layer = _types.int_range(1, MAX_LAYERS)
    parts = [x.strip() for x in text.split(",")]
    if not text.strip() or any(not x for x in parts):
        raise argparse.ArgumentTypeError(f"expected comma-separated layer counts, e.g. 4,8,16,30, got {text!r}")
    return [layer(x) for x in parts]


def add_arguments(parser) -> None:
    parser.add_argument("--method", default="devft", choices=METHODS, help="devft (default) or a baseline")
    parser.add_argument("--out", required=True, help="output folder (PEFT adapter + devft_history.json + plot)")
    parser.add_argument("--model", default=None, help="a local model folder; default: the embedded SmolLM2-135M")
    parser.add_argument(
        "--data-dir", default=None, help="the cl_benchmark folder (default: ../shared/data/cl_benchmark)"
    )
    parser.add_argument("--tasks", default="agnews,amazon,dbpedia,yelp", help="comma-separated tasks (clients' mix)")
    rows = _types.int_range(1, 10_000_000)
    parser.add_argument("--train-per-task", type=rows, default=100, help="training rows per task (default 100)")
    parser.add_argument(
        "--eval-per-task", type=rows, default=25, help="test rows per task for the server (default 25)"
    )
    parser.add_argument("--clients", type=_types.int_range(1, 10_000), default=4, help="simulated clients (default 4)")
    parser.add_argument(
        "--alpha", type=_types.positive_float, default=0.5, help="Dirichlet concentration over tasks (default 0.5)"
    )
    parser.add_argument("--stages", type=_stages, default=None, help="layers per stage, e.g. 4,8,16,30")
    parser.add_argument(
        "--rounds-per-stage", type=_types.int_range(1, 100_000), default=2, help="rounds of each stage (default 2)"
    )
    parser.add_argument(
        "--local-steps", type=_types.int_range(1, 1_000_000), default=4, help="local steps per round (default 4)"
    )
    parser.add_argument("--batch-size", type=_types.int_range(1, 65_536), default=4)
    parser.add_argument(
        "--lr", type=_types.positive_float, default=5e-4, help="local AdamW learning rate (default 5e-4)"
    )
    parser.add_argument(
        "--max-length", type=_types.int_range(1, 1_048_576), default=64, help="tokens per example (default 64)"
    )
    parser.add_argument("--lora-r", type=_types.int_range(1, 65_536), default=8)
    parser.add_argument(
        "--workers", type=_types.int_range(1, 1024), default=1, help="Ray actors running clients at once (default 1)"
    )
    parser.add_argument("--seed", type=_types.seed, default=0)
    parser.add_argument("--overwrite", action="store_true", help="allow writing into a non-empty --out folder")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def _data_dir(arg: str | None) -> Path:
    if arg is not None:
        path = Path(arg)
        if not path.is_dir():
            raise ValueError(f"`--data-dir` {arg!r} is not a folder")
        return path
    here = Path(__file__).resolve()
    for candidate in (
        Path.cwd().parent / "shared" / "data" / "cl_benchmark",
        here.parents[3].parent / "shared" / "data" / "cl_benchmark",
    ):
        if candidate.is_dir():
            return candidate
    raise ValueError("no cl_benchmark folder found: pass `--data-dir` (the folder with <task>.train.jsonl files)")


def run(args) -> int:
    from hfx.utils.artifacts import prepare_output_dir, require_artifact

    # every input and the output are checked before Flower, torch or the model are loaded
    prepare_output_dir(args.out, overwrite=args.overwrite, arg="--out", create=False)
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    if not tasks:
        raise ValueError(f"`--tasks` must name at least one task (comma-separated), but is {args.tasks!r}")
    data_dir = _data_dir(args.data_dir)
    if args.model is None:
        from hfx.models.default import default_model_path

        model = default_model_path()
    else:
        model = Path(args.model)
        if not model.is_dir():
            raise ValueError(f"`--model` must be a local model folder (clients load it from disk), got {args.model!r}")
        require_artifact(model, ("transformers:causal_lm",), arg="--model", what="a causal LM folder (config.json)")

    from hfx.federated.devft import DevFTConfig, load_cl_benchmark, run_devft

    settings = dict(
        stages=args.stages,
        rounds_per_stage=args.rounds_per_stage,
        local_steps=args.local_steps,
        batch_size=args.batch_size,
        learning_rate=args.lr,
        max_length=args.max_length,
        lora_r=args.lora_r,
        num_clients=args.clients,
        num_workers=args.workers,
        seed=args.seed,
    )
    config = DevFTConfig(**settings) if args.method == "devft" else DevFTConfig.for_baseline(args.method, **settings)
    train = load_cl_benchmark(data_dir, "train", tasks, limit_per_task=args.train_per_task)
    test = load_cl_benchmark(data_dir, "test", tasks, limit_per_task=args.eval_per_task)
    result = run_devft(
        config, model, train, eval_dataset=test, dirichlet_alpha=args.alpha, progress=not args.no_progress
    )
    out = result.save_pretrained(prepare_output_dir(args.out, overwrite=args.overwrite, arg="--out"))
    result.plot(out / "devft_curves.png")
    print(f"{'round':>5} {'stage':>5} {'layers':>6} {'MiB':>8} {'eval loss':>9} {'acc':>6}")
    for r in result.history:
        loss = "-" if r["eval_loss"] is None else f"{r['eval_loss']:.4f}"
        acc = "-" if r["eval_accuracy"] is None else f"{r['eval_accuracy']:.3f}"
        print(
            f"{r['round']:>5} {r['stage'] + 1:>5} {r['num_layers']:>6} {r['cum_bytes'] / 2**20:>8.2f} {loss:>9} {acc:>6}"
        )
    print(f"clients' examples {result.partition_sizes}; wrote {out} (adapter, devft_history.json, devft_curves.png)")
    return 0
