"""`hfx synthesize "PROMPT" --steps 400 --out apple.png [--model PATH_OR_ID]`: CLIP^-1 text-to-image."""

from __future__ import annotations


HELP = "Generate an image with a frozen CLIP only (CLIP^-1, arXiv:2505.23161): optimise an INR to match the prompt."


def add_arguments(parser) -> None:
    parser.add_argument("prompt", help="the text to render")
    parser.add_argument("--steps", type=int, default=400, help="optimisation steps (paper: 400; 40 for a fast draft)")
    parser.add_argument("--out", default="clip_inversion.png", help="output PNG path")
    parser.add_argument(
        "--model",
        default=None,
        help="a CLIP checkpoint (local folder or Hub id) or a saved CLIP^-1 pipeline folder; default: "
        "openai/clip-vit-base-patch32 from the local HF cache, else the tiny random CLIP (said so on stderr)",
    )
    parser.add_argument("--height", type=int, default=224)
    parser.add_argument("--width", type=int, default=224)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-augmentations", type=int, default=8, help="augmented views averaged per step")
    parser.add_argument("--learning-rate", type=float, default=5e-4, help="peak Adam learning rate")


def run(args) -> int:
    import sys
    from pathlib import Path

    import torch

    from hfx.pipelines.clip_inversion import CLIPInversionPipeline
    from hfx.pipelines.clip_inversion.hub import load_clip

    if not args.prompt.strip():
        raise ValueError(f"`prompt` has to be a non-empty string, but is {args.prompt!r}")
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
    target = Path(args.out)
    target.parent.mkdir(parents=True, exist_ok=True)
    out.images[0].save(target)
    print(f"wrote {target} (CLIP cosine similarity to the target: {float(out.clip_similarity[0]):.4f})")
    return 0
