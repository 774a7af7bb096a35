"""Time of one CLIP^-1 optimisation step vs one plain CLIP forward + backward of the same image batch.

One step of :class:`hfx.pipelines.clip_inversion.CLIPInversionPipeline` = render the FINER INR at ``height x width``,
draw ``num_augmentations`` augmented views, CLIP image forward, cosine loss, backward through CLIP *and* the INR,
Adam update with the per-layer learning rates. The baseline is the unavoidable part: a CLIP image forward + cosine
loss + backward to the pixels of a ``(num_augmentations, 3, S, S)`` batch (CLIP frozen in both). The ratio (goal
<= 1.3) is the overhead of the INR, the augmentations and the optimiser.

By default the CLIP is ViT-B/32-sized (the paper's backbone: ``CLIPConfig()`` defaults, 224 px, patch 32) with random
weights, so nothing is downloaded; timings do not depend on the weight values.

    python benchmarks/clip_inversion_step.py                # ViT-B/32-sized CLIP, 224 px, 8 views, INR 5 x 256
    python benchmarks/clip_inversion_step.py --tiny --steps 5   # smoke run on the tiny CLIP
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import torch
import torch.nn.functional as F


def vit_b32_sized_clip():
    from transformers import CLIPConfig, CLIPModel, CLIPProcessor, CLIPTextConfig, CLIPVisionConfig
    from transformers import CLIPImageProcessorPil as CLIPImageProcessor

    from hfx.testing import tiny_tokenizer

    tokenizer = tiny_tokenizer(padding_side="right")
    text = CLIPTextConfig(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )  # 512 hidden, 12 layers (ViT-B/32 text tower)
    vision = CLIPVisionConfig()  # 768 hidden, 12 layers, 224 px, patch 32
    config = CLIPConfig(text_config=text.to_dict(), vision_config=vision.to_dict(), projection_dim=512)
    torch.manual_seed(0)
    model = CLIPModel(config).eval()
    image_processor = CLIPImageProcessor(size={"shortest_edge": 224}, crop_size={"height": 224, "width": 224})
    return model, CLIPProcessor(image_processor=image_processor, tokenizer=tokenizer)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tiny", action="store_true", help="use the tiny random CLIP (32 px) instead of ViT-B/32 size"
    )
    parser.add_argument("--steps", type=int, default=6, help="timed steps (after --warmup)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--height", type=int, default=224)
    parser.add_argument("--width", type=int, default=224)
    parser.add_argument("--num-augmentations", type=int, default=8)
    parser.add_argument("--inr-hidden-features", type=int, default=256)
    parser.add_argument("--inr-hidden-layers", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's choice)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", default="benchmarks/results/clip_inversion_step.json")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    from hfx.pipelines.clip_inversion import CLIPInversionPipeline

    if args.tiny:
        from hfx.testing import tiny_clip

        model, processor = tiny_clip(image_size=32)
    else:
        model, processor = vit_b32_sized_clip()
    device = torch.device(args.device)
    model = model.to(device)
    pipe = CLIPInversionPipeline(
        model,
        processor,
        inr_hidden_features=args.inr_hidden_features,
        inr_hidden_layers=args.inr_hidden_layers,
    )
    pipe.set_progress_bar_config(disable=True)
    n, size = args.num_augmentations, pipe.clip_image_size
    total = args.warmup + args.steps

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    # ours: wall time between consecutive step-end callbacks = one full optimisation step
    stamps = []

    def stamp(p, step, t, kwargs):
        sync()
        stamps.append(time.perf_counter())
        return {}

    sync()
    start = time.perf_counter()
    pipe(
        "a red apple on a table",
        height=args.height,
        width=args.width,
        num_inference_steps=total,
        num_augmentations=n,
        generator=torch.Generator().manual_seed(0),
        callback_on_step_end=stamp,
        output_type="pt",
    )
    ours = [b - a for a, b in zip([start, *stamps[:-1]], stamps)][args.warmup :]

    # baseline: plain CLIP forward + backward (to the pixels) of the same (n, 3, S, S) batch
    target = F.normalize(torch.randn(1, pipe.projection_dim, device=device), dim=-1)
    model.requires_grad_(False)
    pixels = torch.rand(n, 3, size, size, device=device)
    base = []
    for i in range(total):
        x = pixels.clone().requires_grad_(True)
        sync()
        t0 = time.perf_counter()
        embeds = F.normalize(pipe.embed_pixels(x).mean(0, keepdim=True), dim=-1)
        loss = (1 - F.cosine_similarity(embeds, target)).sum()
        loss.backward()
        sync()
        if i >= args.warmup:
            base.append(time.perf_counter() - t0)

    # where the overhead goes: the INR alone (render forward + backward)
    inr = pipe.make_inr(1, generator=torch.Generator().manual_seed(0))
    inr_times = []
    for i in range(total):
        sync()
        t0 = time.perf_counter()
        inr.render(args.height, args.width).mean().backward()
        sync()
        if i >= args.warmup:
            inr_times.append(time.perf_counter() - t0)

    ours_med, base_med, inr_med = statistics.median(ours), statistics.median(base), statistics.median(inr_times)
    ratio = ours_med / base_med
    result = {
        "metric": "time per CLIP^-1 optimisation step / time of one plain CLIP forward+backward of the same batch",
        "value": round(ratio, 3),
        "goal": "<= 1.3",
        "met": ratio <= 1.3,
        "command": "python " + " ".join(["benchmarks/clip_inversion_step.py", *(argv or sys.argv[1:])]),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "detail": {
            "clip": "tiny random CLIP (32 px)" if args.tiny else "ViT-B/32-sized CLIPConfig() with random weights",
            "device": str(device),
            "torch_threads": torch.get_num_threads(),
            "cpu": platform.processor() or platform.machine(),
            "torch": torch.__version__,
            "height": args.height,
            "width": args.width,
            "clip_image_size": size,
            "num_augmentations": n,
            "inr": pipe.inr_config(),
            "timed_steps": args.steps,
            "warmup_steps": args.warmup,
            "step_seconds_median": round(ours_med, 4),
            "clip_fwd_bwd_seconds_median": round(base_med, 4),
            "inr_render_fwd_bwd_seconds_median": round(inr_med, 4),
            "step_seconds": [round(t, 4) for t in ours],
            "clip_fwd_bwd_seconds": [round(t, 4) for t in base],
            "note": "shared 2-core CPU machine; timings are noisy" if device.type == "cpu" else "",
        },
    }
    print(json.dumps(result, indent=2))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"ratio {ratio:.3f} (goal <= 1.3); wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
