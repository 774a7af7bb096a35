"""`hfx prune IMAGE --num-tokens 64 [--model ...] [--out PNG]`: PruneSID on one image, visualised."""

from __future__ import annotations

from hfx.commands import _types


IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp")
# hfx.prunesid.config.METHODS without fastv (it prunes inside the LLM, per prompt: no per-image picture)
PICTURE_METHODS = ("prunesid", "random", "pooling", "visionzip", "divprune")


HELP = "Prune the visual tokens of one image with PruneSID (or a baseline) and save the kept patches as a PNG."


def add_arguments(parser) -> None:
    parser.add_argument("image", help="path to an image file")
    parser.add_argument(
        "--num-tokens", type=_types.positive_int, default=64, help="N visual tokens kept (CLS included; default 64)"
    )
    parser.add_argument(
        "--model",
        default=None,
        help="a llava-hf LLaVA-1.5 checkpoint (Hub id or folder); default: a tiny random LLaVA (24x24 patches)",
    )
    parser.add_argument(
        "--method",
        default="prunesid",
        help="prunesid, random, pooling, visionzip or divprune (default prunesid); fastv prunes inside the LLM, per "
        "prompt, so it has no per-image picture",
    )
    parser.add_argument("--seed", type=_types.seed, default=0, help="seed of the randomised PCA / random baseline")
    parser.add_argument("--out", default=None, help="output PNG (default: <image>_prunesid.png)")
    parser.add_argument("--overwrite", action="store_true", help="allow replacing an existing --out file")


def run(args) -> int:
    from pathlib import Path

    from hfx.utils.artifacts import check_output_file, resolve_model

    # every input and the output are checked before the heavy imports and before a model is built
    if args.method == "fastv":
        raise ValueError(
            "`--method fastv` drops tokens inside the LLM by the prompt's attention, so there is no pre-LLM selection "
            "to draw; use hfx.prunesid.apply(model, processor, method='fastv') for generation"
        )
    from hfx.utils.validation import check_choice

    check_choice("--method", args.method, PICTURE_METHODS)
    source = Path(args.image)
    if not source.exists():
        raise FileNotFoundError(f"`IMAGE` {args.image!r} does not exist")
    if not source.is_file():
        raise ValueError(f"`IMAGE` must be an image file, but {args.image!r} is a folder")
    model_path = None
    if args.model is not None:
        model_path = resolve_model(
            args.model, arg="--model", allowed=("llava", "prunesid_llava"), what="a llava-hf LLaVA-1.5 folder"
        )
    out = Path(args.out) if args.out else source.with_name(source.stem + "_prunesid.png")
    out = check_output_file(out, suffixes=IMAGE_SUFFIXES, overwrite=args.overwrite, arg="--out")

    import torch
    from PIL import Image, UnidentifiedImageError

    from hfx.prunesid import apply, visualize

    try:
        image = Image.open(source).convert("RGB")
    except (UnidentifiedImageError, OSError) as err:
        raise ValueError(f"`IMAGE` {args.image!r} is not an image file PIL can read") from err
    if model_path is None:
        from hfx.testing import tiny_llava

        print("no --model given: using the tiny random LLaVA from hfx.testing (336 px, 24x24 patches + CLS)")
        model, processor = tiny_llava(image_size=336, patch_size=14)
    else:
        from transformers import AutoProcessor, LlavaForConditionalGeneration

        model = LlavaForConditionalGeneration.from_pretrained(model_path)
        processor = AutoProcessor.from_pretrained(model_path)
    model, processor = apply(model, processor, num_visual_tokens=args.num_tokens, method=args.method, seed=args.seed)
    pixel_values = processor.image_processor([image], return_tensors="pt")["pixel_values"]
    pixel_values = pixel_values.to(model.device, model.model.vision_tower.dtype)
    with torch.no_grad():
        kept = model.model.get_image_features(pixel_values).prunesid_indices[0]
    vision = model.config.vision_config
    grid = vision.image_size // vision.patch_size
    visualize(image, kept, grid_size=grid, image_size=vision.image_size, save_path=out)
    print(f"kept {len(kept)} of {grid * grid + 1} visual tokens ({args.method}); wrote {out}")
    return 0
