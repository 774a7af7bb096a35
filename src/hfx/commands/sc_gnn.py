"""`hfx sc-gnn --method gsat [--dataset ba-2motifs] [--out DIR]`: train an SI-GNN and its self-consistent variant
(same seed) on an offline synthetic benchmark and print the paper's metrics for both."""

from __future__ import annotations


HELP = (
    "Train a self-interpretable GNN (GSAT / ATT / SIZE / CAL) with and without the self-consistency loss on "
    "BA-2Motifs or BA-Shapes and compare accuracy, explanation AUC, Fid and sparsity."
)

DATASETS = ("ba-2motifs", "ba-shapes")


def add_arguments(parser) -> None:
    from hfx.commands import _types

    parser.add_argument("--method", default="gsat", choices=("gsat", "att", "size", "cal"), help="base SI-GNN")
    parser.add_argument("--dataset", default="ba-2motifs", choices=DATASETS, help="graph task or node task")
    parser.add_argument(
        "--num-graphs", type=_types.int_range(10, 100_000), default=1000, help="BA-2Motifs size (even; split 80/10/10)"
    )
    parser.add_argument("--epochs", type=_types.int_range(1, 10_000), default=30, help="base epochs (authors': 100)")
    parser.add_argument(
        "--sc-epochs", type=_types.int_range(0, 10_000), default=15, help="SC fine-tuning epochs (authors': 100)"
    )
    parser.add_argument("--mode", default="finetune", choices=("finetune", "joint"), help="SC recipe")
    parser.add_argument("--batch-size", type=_types.int_range(1, 65_536), default=128, help="graphs per batch")
    parser.add_argument("--seed", type=_types.seed, default=0, help="data and training seed (default 0)")
    parser.add_argument(
        "--out", required=True, help="folder for the SC model (and the base model in OUT/base); must be new or empty"
    )
    parser.add_argument("--plot", default=None, help="PNG of one test graph's explanation with and without SC")
    parser.add_argument("--overwrite", action="store_true", help="allow a non-empty --out / an existing --plot")


def _check(args) -> None:
    from hfx.utils.validation import check_choice, check_int

    check_choice("--dataset", args.dataset, DATASETS)
    check_choice("--method", args.method, ("gsat", "att", "size", "cal"))
    check_choice("--mode", args.mode, ("finetune", "joint"))
    for name in ("epochs", "batch_size", "num_graphs"):
        check_int(f"--{name.replace('_', '-')}", getattr(args, name), minimum=1)
    if args.sc_epochs < 1 and args.mode == "finetune":
        raise ValueError(f"`--sc-epochs` has to be an integer >= 1 with --mode finetune, but is {args.sc_epochs}")
    if args.dataset == "ba-2motifs" and args.num_graphs % 2:
        raise ValueError(f"`--num-graphs` must be even, but is {args.num_graphs}")
    from hfx.utils.artifacts import check_output_file, prepare_output_dir

    prepare_output_dir(args.out, overwrite=args.overwrite, arg="--out", create=False)
    if args.plot is not None:
        check_output_file(args.plot, suffixes=(".png", ".jpg", ".jpeg", ".pdf", ".svg"), overwrite=args.overwrite,
                          arg="--plot")  # fmt: skip


def run(args) -> int:
    _check(args)
    import copy
    import tempfile
    from pathlib import Path

    from hfx.gnn.self_consistency import (
        SelfConsistencyTrainingArguments,
        SelfInterpretableGNNConfig,
        ba_2motifs,
        ba_shapes,
        evaluate_si_gnn,
        split_dataset,
        train_si_gnn,
    )

    if args.dataset == "ba-2motifs":
        if args.num_graphs % 2 or args.num_graphs < 10:
            raise ValueError(f"`--num-graphs` must be even and >= 10, but is {args.num_graphs}")
        splits = split_dataset(ba_2motifs(args.num_graphs, seed=args.seed))
        config = SelfInterpretableGNNConfig(si_gnn=args.method, num_node_features=10, num_classes=2)
    else:
        splits = ba_shapes(seed=args.seed)
        config = SelfInterpretableGNNConfig(si_gnn=args.method, num_node_features=10, num_classes=4, task="node")
    config.sc_training = args.mode
    with tempfile.TemporaryDirectory() as tmp:
        training_args = SelfConsistencyTrainingArguments(
            output_dir=tmp,
            num_train_epochs=args.epochs,
            per_device_train_batch_size=args.batch_size,
            per_device_eval_batch_size=args.batch_size,
            seed=args.seed,
            use_cpu=True,
            best_model_min_epoch=min(10, args.epochs - 2),
            logging_strategy="no",
        )
        base = train_si_gnn(config, splits["train"], splits["validation"], training_args).model
        sc_config = copy.deepcopy(config)
        sc_config.use_self_consistency = True
        sc = train_si_gnn(
            sc_config,
            splits["train"],
            splits["validation"],
            training_args,
            sc_epochs=args.sc_epochs,
            base_model=base if args.mode == "finetune" else None,
        ).model
    rows = {"base": evaluate_si_gnn(base, splits["test"]), "+SC": evaluate_si_gnn(sc, splits["test"])}
    names = list(rows["base"])
    print(f"{args.method.upper()} on {args.dataset} (seed {args.seed}, test split):")
    print(f"{'':6}" + "".join(f"{n:>17}" for n in names))
    for label, metrics in rows.items():
        print(f"{label:6}" + "".join(f"{metrics[n]:>17.4f}" for n in names))
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        sc.save_pretrained(args.out)
        base.save_pretrained(Path(args.out) / "base")
        print(f"saved the SC model to {args.out} (base model: {Path(args.out) / 'base'})")
    if args.plot:
        from hfx.gnn.self_consistency import plot_explanations

        graph = splits["test"][0]
        plot_explanations(
            graph,
            {f"{args.method.upper()}": base.explain(graph), f"{args.method.upper()} + SC": sc.explain(graph)},
            path=args.plot,
        )
        print(f"wrote {args.plot}")
    return 0
