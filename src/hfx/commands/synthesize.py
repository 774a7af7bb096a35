"""`hfx synthesize "PROMPT" --steps 400 --out apple.png [--model PATH_OR_ID]`: CLIP^-1 text-to-image."""

from __future__ import annotations

from hfx.commands import _types


IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff")


HELP = "Generate an image with a frozen CLIP only (CLIP^-1, arXiv:2505.23161): optimise an INR to match the prompt."


def add_arguments(parser) -> None:
    parser.add_argument("prompt", help="the text to render")
    parser.add_argument(
        "--steps",
        type=_types.int_range(1, 100_000),
        default=400,
        help="optimisation steps (paper: 400; 40 for a fast draft)",
    )
    parser.add_argument(
        "--out", default="clip_inversion.png", help=f"output image path ({', '.join(IMAGE_SUFFIXES)}; default PNG)"
    )
    parser.add_argument("--overwrite", action="store_true", help="allow replacing an existing --out file")
    parser.add_argument(
        "--model",
        default=None,
        help="a CLIP checkpoint (local folder or Hub id) or a saved CLIP^-1 pipeline folder; default: "
        "openai/clip-vit-base-patch32 from the local HF cache, else the tiny random CLIP (said so on stderr)",
    )
    parser.add_argument("--height", type=_types.int_range(8, 2048), default=224, help="pixels (8..2048)")
    parser.add_argument("--width", type=_types.int_range(8, 2048), default=224, help="pixels (8..2048)")
    parser.add_argument("--seed", type=_types.seed, default=0)
    parser.add_argument(
        "--num-augmentations", type=_types.int_range(1, 256), default=8, help="augmented views averaged per step"
    )
    parser.add_argument("--learning-rate", type=_types.positive_float, default=5e-4, help="peak Adam learning rate")


def run(args) -> int:
    import sys

    from hfx.utils.artifacts import check_output_file, resolve_model

    # every input and the output are checked before the heavy imports and the optimisation
    if not args.prompt.strip():
        raise ValueError(f"`PROMPT` has to be a non-empty string, but is {args.prompt!r}")
    if args.model is not None:  # another artifact's folder is refused before anything is built
        args.model = resolve_model(
            args.model,
            arg="--model",
            allowed=("clip", "diffusers:CLIPInversionPipeline"),
            what="a CLIP folder or a saved CLIP^-1 pipeline",
        )
    target = check_output_file(args.out, suffixes=IMAGE_SUFFIXES, overwrite=args.overwrite, arg="--out")

    import torch

    from hfx.pipelines.clip_inversion import CLIPInversionPipeline
    from hfx.pipelines.clip_inversion.hub import load_clip

    pipe, model, processor, description = load_clip(args.model)
    if "tiny random CLIP" in description:
        print(
            f"note: no --model given and no offline CLIP weights found; using the {description}.",
            file=sys.stderr,
        )
    else:
        print(f"CLIP: {description}", file=sys.stderr)
    if pipe is None:
        pipe = CLIPInversionPipeline(model, processor)
    out = pipe(
        args.prompt,
        height=args.height,
        width=args.width,
        num_inference_steps=args.steps,
        num_augmentations=args.num_augmentations,
        learning_rate=args.learning_rate,
        generator=torch.Generator().manual_seed(args.seed),
    )
    out.images[0].save(target)
    print(f"wrote {target} (CLIP cosine similarity to the target: {float(out.clip_similarity[0]):.4f})")
    return 0
