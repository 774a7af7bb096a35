"""`hfx ssm-theory --regime majority --alpha-r 0.6 --alpha-c 0.2 --steps 300 --out DIR`: one run of the Mamba
training-dynamics theory kit (arXiv 2602.12499): draw the synthetic data, train the selective-SSM theory model by
plain GD / SGD, print the test accuracy and the gate-pattern cosines, and save the model, the datasets, the
training history and a per-token gate plot to ``--out`` (a new or empty folder unless ``--overwrite``; every flag is
checked before anything is trained)."""

from __future__ import annotations

from hfx.commands import _types


HELP = (
    "Mamba training-dynamics theory (arXiv:2602.12499): generate synthetic majority / locality data, train the "
    "one-layer selective SSM by GD or SGD, report accuracy and gate-pattern alignment."
)


# the recurrences of hfx.models.selective_ssm.configuration.RECURRENCES (kept here so the parser stays light; a test
# checks they agree)
RECURRENCES = ("zoh", "mamba_euler", "input_gate")
# upper bounds of the size flags: far above the CPU-scale runs this kit is for, low enough that a typo is refused
# before anything is allocated
MAX_SIZE = 100_000
MAX_EXAMPLES = 10_000_000


def add_arguments(parser) -> None:
    size = _types.int_range(1, MAX_SIZE)
    parser.add_argument("--regime", default="majority", choices=("majority", "locality"), help="the data regime")
    parser.add_argument("--sequence-length", type=size, default=20, help="L")
    parser.add_argument("--hidden-size", type=_types.int_range(3, MAX_SIZE), default=32, help="d, the token dimension")
    parser.add_argument("--num-irrelevant-patterns", type=size, default=16, help="M (at most d - 2)")
    parser.add_argument(
        "--alpha-r",
        type=_types.float_range(0.0, 1.0),
        default=0.6,
        help="majority: fraction of label-consistent tokens",
    )
    parser.add_argument(
        "--alpha-c", type=_types.float_range(0.0, 1.0), default=0.2, help="majority: fraction of confusing tokens"
    )
    distance = _types.int_range(0, MAX_SIZE)
    parser.add_argument("--delta-plus", type=distance, default=1, help="locality: distance of o_y from the last token")
    parser.add_argument("--delta-minus", type=distance, default=3, help="locality: distance of o_not-y")
    parser.add_argument("--noise", type=_types.non_negative_float, default=0.1, help="token noise standard deviation")
    parser.add_argument(
        "--recurrence",
        default="input_gate",
        choices=RECURRENCES,
        help="'zoh' (the spec's block), 'mamba_euler' or 'input_gate'",
    )
    examples = _types.int_range(1, MAX_EXAMPLES)
    parser.add_argument("--num-train", type=examples, default=256)
    parser.add_argument("--num-test", type=examples, default=1000)
    parser.add_argument("--steps", type=_types.int_range(1, MAX_EXAMPLES), default=300, help="(S)GD iterations")
    parser.add_argument("--learning-rate", type=_types.positive_float, default=0.5)
    parser.add_argument("--batch-size", type=examples, default=None, help="SGD minibatch size; default: full-batch GD")
    parser.add_argument("--seed", type=_types.seed, default=0, help="model initialisation and training data")
    parser.add_argument(
        "--out", required=True, help="a new (or empty) folder for the model, datasets, history and gate plot"
    )
    parser.add_argument("--overwrite", action="store_true", help="allow writing into a non-empty --out folder")


def run(args) -> int:
    import json

    from hfx.utils.artifacts import prepare_output_dir

    # outputs first: a bad --out is refused before anything is imported or trained
    out = prepare_output_dir(args.out, overwrite=args.overwrite, arg="--out", create=False)
    if args.batch_size is not None and args.batch_size > args.num_train:
        raise ValueError(f"`--batch-size` must be <= `--num-train` ({args.num_train}), but is {args.batch_size}")

    from hfx.models.selective_ssm import (
        SelectiveSSMConfig,
        SyntheticSequenceConfig,
        generate_dataset,
        plot_gate_values,
        sample_sequences,
        train_gd,
    )
    from hfx.models.selective_ssm.experiments import TEST_SEED_OFFSET, seeded_models

    data = SyntheticSequenceConfig(
        regime=args.regime,
        sequence_length=args.sequence_length,
        hidden_size=args.hidden_size,
        num_irrelevant_patterns=args.num_irrelevant_patterns,
        alpha_r=args.alpha_r,
        alpha_c=args.alpha_c,
        delta_consistent=args.delta_plus,
        delta_confusing=args.delta_minus,
        noise_std=args.noise,
    )
    config = SelectiveSSMConfig(
        hidden_size=args.hidden_size,
        recurrence=args.recurrence,
        state_normalization="length" if args.recurrence == "input_gate" else "none",
    )
    model = seeded_models(config, [args.seed])[0]
    train = sample_sequences(data, args.num_train, seed=args.seed)
    test = sample_sequences(data, args.num_test, seed=TEST_SEED_OFFSET + args.seed)
    history = train_gd(
        model,
        train["inputs_embeds"],
        train["labels"],
        learning_rate=args.learning_rate,
        max_steps=args.steps,
        batch_size=args.batch_size,
        seed=args.seed,
        eval_inputs_embeds=test["inputs_embeds"],
        eval_labels=test["labels"],
        patterns=data.patterns(),
        log_every=max(1, args.steps // 20),
        progress=True,
    )
    print(
        f"{args.regime}, {args.recurrence}, {'SGD b=' + str(args.batch_size) if args.batch_size else 'GD'}, "
        f"{args.steps} steps: train loss {history.train_loss[-1]:.4f}, test accuracy {history.eval_accuracy[-1]:.4f}; "
        f"cos(w_g, o+) {history.cos_plus[-1]:+.3f}, cos(w_g, o-) {history.cos_minus[-1]:+.3f}, "
        f"max |cos(w_g, q_m)| {history.cos_irrelevant_max_abs[-1]:.3f}"
    )
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out / "model")
    generate_dataset(data, args.num_train, seed=args.seed, split="train").save_to_disk(str(out / "train"))
    test_ds = generate_dataset(data, args.num_test, seed=TEST_SEED_OFFSET + args.seed, split="test")
    test_ds.save_to_disk(str(out / "test"))
    (out / "history.json").write_text(json.dumps(history.to_dict(), indent=1) + "\n")
    plot_gate_values(
        model,
        test["inputs_embeds"][0],
        test["pattern_ids"][0].tolist(),
        out / "gates.png",
        title="per-token gates, test sequence 0",
    )
    print(f"wrote {out}/model, {out}/train, {out}/test, {out}/history.json and {out}/gates.png")
    return 0
