"""`hfx hippoformer --model mmtem --steps 200 --out DIR`: train a structural-memory model on random walks and report
next-observation accuracy on revisited nodes (Hippoformer / mm-TEM, ICLR 2026)."""

from __future__ import annotations


HELP = (
    "Train mm-TEM / Hippoformer (or the TEM-style / Transformer baselines) on random walks over grid graphs with the "
    "HF Trainer, save it, and print next-observation accuracy on revisited nodes."
)
MODELS = ("mmtem", "tem-style", "hippoformer", "transformer")


def add_arguments(parser) -> None:
    from hfx.commands import _types

    size = _types.int_range(2, 64)
    length = _types.int_range(2, 4096)
    parser.add_argument("--model", default="mmtem", choices=MODELS, help="the model to train (default mmtem)")
    parser.add_argument("--out", required=True, help="folder the trained model is saved to (must be new or empty)")
    parser.add_argument("--overwrite", action="store_true", help="allow a non-empty --out")
    parser.add_argument("--steps", type=_types.int_range(1, 1_000_000), default=200, help="optimizer steps (batch 16)")
    parser.add_argument("--graph", default="square", choices=("square", "hexagonal", "torus"), help="graph family")
    parser.add_argument("--grid-size", type=size, default=4, help="training environments are SIZE x SIZE")
    parser.add_argument("--walk-length", type=length, default=48)
    parser.add_argument("--eval-size", type=size, default=6, help="evaluation grid size (unseen, may be larger)")
    parser.add_argument("--eval-length", type=length, default=96)
    parser.add_argument("--vocab-size", type=_types.int_range(2, 100_000), default=10, help="sensory tokens")
    parser.add_argument("--num-walks", type=_types.int_range(1, 1_000_000), default=512)
    parser.add_argument("--seed", type=_types.int_range(0, 2**32 - 1 - 10_000), default=0)


def run(args) -> int:
    from hfx.utils.artifacts import prepare_output_dir
    from hfx.utils.validation import check_choice, check_int

    check_choice("--model", args.model, MODELS)
    for name in ("steps", "num_walks"):
        check_int(f"--{name.replace('_', '-')}", getattr(args, name), minimum=1)

    prepare_output_dir(args.out, overwrite=args.overwrite, arg="--out", create=False)
    from hfx.models.hippoformer.data import num_actions_of, random_walk_dataset

    num_actions = num_actions_of(args.graph)  # validates --graph
    train = random_walk_dataset(
        args.num_walks, args.grid_size, args.walk_length, args.vocab_size, args.graph, args.seed
    )
    test = random_walk_dataset(64, args.eval_size, args.eval_length, args.vocab_size, args.graph, args.seed + 10_000)

    from transformers import set_seed

    from hfx.models.hippoformer import (
        HippoformerConfig,
        HippoformerForNextObservation,
        MMTEMConfig,
        MMTEMModel,
        matched_transformer_config,
    )
    from hfx.models.hippoformer.training import bootstrap_interval, next_observation_trainer, revisited_accuracy

    set_seed(args.seed)
    common = dict(observation_vocab_size=args.vocab_size, num_actions=num_actions)
    hippo = HippoformerConfig(**common)
    model = {
        "mmtem": lambda: MMTEMModel(MMTEMConfig(**common)),
        "tem-style": lambda: MMTEMModel(MMTEMConfig.tem_style(**common)),
        "hippoformer": lambda: HippoformerForNextObservation(hippo),
        "transformer": lambda: HippoformerForNextObservation(matched_transformer_config(hippo)),
    }[args.model]()
    next_observation_trainer(
        model, train, args.out, max_steps=args.steps, logging_steps=max(args.steps // 10, 1)
    ).train()
    model.save_pretrained(args.out)
    acc = revisited_accuracy(model, test)
    low, high = bootstrap_interval(acc["per_walk_correct"], acc["per_walk_count"])
    print(
        f"{args.model}: accuracy on revisited nodes of {args.eval_size}x{args.eval_size} walks of {args.eval_length} "
        f"steps: {acc['accuracy']:.3f} (95% CI {low:.3f}-{high:.3f}; chance {1 / args.vocab_size:.3f}); saved to {args.out}"
    )
    return 0
