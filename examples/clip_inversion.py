"""CLIP^-1 end to end: text-to-image, reconstruction and style transfer with a frozen CLIP only.

Runs plain CLIP^-1 and the full variant (embedding bank -> Procrustes + blending, INR bank -> robust init) on a few
prompts, reports the CLIP cosine similarity of the final image to its target (and of the initial INR, for reference),
saves the images, a loss-curve plot and a JSON summary.

    # real CLIP (local folder or Hub id; the paper uses ViT-B/32)
    python examples/clip_inversion.py --model openai/clip-vit-base-patch32 --steps 400 --out-dir runs/clip_inv
    # on these machines no CLIP weights are available: the tiny random CLIP (images are not meaningful)
    python examples/clip_inversion.py --steps 40 --size 64 --out-dir runs/clip_inv_tiny

Bank images: ``--bank-images DIR`` (``*.png``/``*.jpg`` with the file stem as caption); otherwise the skimage sample
photos if scikit-image is installed, else a few synthetic shapes drawn with PIL.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image, ImageDraw


PROMPTS = ["a red apple on a table", "a photo of a cat", "a blue circle on a white background"]


def bank_images(folder: str | None, size: int):
    """`(captions, PIL images)` for the banks (see the module docstring)."""
    if folder:
        paths = sorted(p for p in Path(folder).iterdir() if p.suffix.lower() in {".png", ".jpg", ".jpeg"})
        return [p.stem.replace("_", " ") for p in paths], [Image.open(p).convert("RGB") for p in paths]
    try:
        from skimage import data

        names = {"astronaut": "a photo of an astronaut", "coffee": "a cup of coffee", "chelsea": "a photo of a cat"}
        return list(names.values()), [Image.fromarray(getattr(data, n)()).convert("RGB") for n in names]
    except ImportError:
        shapes = [("red", "ellipse"), ("blue", "ellipse"), ("green", "rectangle"), ("orange", "rectangle")]
        captions, images = [], []
        for colour, shape in shapes:
            image = Image.new("RGB", (size, size), "white")
            getattr(ImageDraw.Draw(image), shape)([size // 4, size // 4, 3 * size // 4, 3 * size // 4], fill=colour)
            captions.append(f"a {colour} {'circle' if shape == 'ellipse' else 'square'} on a white background")
            images.append(image)
        return captions, images


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", default=None, help="CLIP folder / Hub id (default: paper CLIP if cached, else tiny)"
    )
    parser.add_argument("--prompts", nargs="+", default=PROMPTS)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--size", type=int, default=224, help="output height = width")
    parser.add_argument("--num-augmentations", type=int, default=8)
    parser.add_argument("--inr-hidden-features", type=int, default=256)
    parser.add_argument("--inr-hidden-layers", type=int, default=5)
    parser.add_argument("--learning-rate", type=float, default=5e-4)
    parser.add_argument("--bank-images", default=None)
    parser.add_argument("--bank-fit-steps", type=int, default=100, help="AWP fitting steps of the INR bank")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-dir", default="runs/clip_inversion")
    args = parser.parse_args(argv)

    from hfx.pipelines.clip_inversion import CLIPInversionPipeline
    from hfx.pipelines.clip_inversion.hub import load_clip

    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _, model, processor, description = load_clip(args.model)
    print(f"CLIP: {description}")
    pipe = CLIPInversionPipeline(
        model, processor, inr_hidden_features=args.inr_hidden_features, inr_hidden_layers=args.inr_hidden_layers
    )
    size = args.size
    common = {
        "height": size,
        "width": size,
        "num_inference_steps": args.steps,
        "num_augmentations": args.num_augmentations,
        "learning_rate": args.learning_rate,
    }

    def initial_similarity(targets):
        start = pipe.make_inr(targets.shape[0], generator=torch.Generator().manual_seed(args.seed)).render(size, size)
        return F.cosine_similarity(pipe.encode_image(start.detach(), size, size), targets).tolist()

    summary = {"clip": description, "args": vars(args), "runs": {}}
    curves = {}

    def record(name, output, init_sims, seconds):
        for i, image in enumerate(output.images):
            image.save(out / f"{name}_{i}.png")
        curves[name] = output.loss_history.mean(axis=1)
        summary["runs"][name] = {
            "final_clip_similarity": [round(float(s), 4) for s in output.clip_similarity],
            "initial_clip_similarity": [round(float(s), 4) for s in init_sims],
            "loss_first_last": [
                round(float(output.loss_history[0].mean()), 4),
                round(float(output.loss_history[-1].mean()), 4),
            ],
            "seconds": round(seconds, 1),
        }
        print(name, json.dumps(summary["runs"][name]))

    # 1. plain CLIP^-1: random init, R = I, beta = 0
    text = pipe.encode_prompt(args.prompts)
    t0 = time.time()
    plain = pipe(args.prompts, generator=torch.Generator().manual_seed(args.seed), **common)
    record("plain", plain, initial_similarity(text), time.time() - t0)

    # 2. full CLIP^-1: embedding bank (Procrustes + blending) and INR bank (AWP on blurred images)
    captions, images = bank_images(args.bank_images, size)
    t0 = time.time()
    pipe.set_banks(embedding_bank=pipe.build_embedding_bank(captions, images, size, size))
    pipe.set_banks(
        inr_bank=pipe.build_inr_bank(
            images,
            height=min(size, 64),
            width=min(size, 64),
            num_steps=args.bank_fit_steps,
            generator=torch.Generator().manual_seed(args.seed),
        )
    )
    summary["bank"] = {"captions": captions, "seconds": round(time.time() - t0, 1)}
    k = min(len(captions), 32)
    targets = pipe.text_targets(text, procrustes_k=k)
    summary["procrustes_cos_text_to_target"] = [round(float(c), 4) for c in F.cosine_similarity(text, targets)]
    t0 = time.time()
    full = pipe(
        args.prompts, procrustes_k=k, blend_k=min(k, 8), generator=torch.Generator().manual_seed(args.seed), **common
    )
    record("full", full, initial_similarity(targets), time.time() - t0)

    # 3. reconstruction of the first bank image from its CLIP embedding alone, and 4. style transfer
    target = pipe.encode_image(images[0], size, size)
    t0 = time.time()
    rec = pipe.reconstruct(images[0], use_inr_bank=False, generator=torch.Generator().manual_seed(args.seed), **common)
    record("reconstruct", rec, initial_similarity(target), time.time() - t0)
    images[0].resize((size, size)).save(out / "reconstruct_target.png")
    t0 = time.time()
    sty = pipe.stylize(
        images[0],
        "a painting in the style of van gogh",
        init_fit_steps=50,
        generator=torch.Generator().manual_seed(args.seed),
        **common,
    )
    record(
        "stylize",
        sty,
        initial_similarity(pipe.text_targets(pipe.encode_prompt("a painting in the style of van gogh"))),
        time.time() - t0,
    )

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, curve in curves.items():
        ax.plot(np.arange(len(curve)), curve, label=name)
    ax.set_xlabel("step")
    ax.set_ylabel("loss (1 - cos [+ beta blend / content])")
    ax.set_title(f"CLIP^-1 on {description.split(' (')[0]}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "loss_curves.png", dpi=120)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"wrote {out}/ (images, loss_curves.png, summary.json)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
