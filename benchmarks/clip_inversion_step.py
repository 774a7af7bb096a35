"""Time of one CLIP^-1 optimisation step vs one plain CLIP forward + backward of the same image batch.

One step of :class:`hfx.pipelines.clip_inversion.CLIPInversionPipeline` = render the FINER INR at ``height x width``,
draw ``num_augmentations`` augmented views, CLIP image forward, cosine loss, backward through CLIP *and* the INR,
Adam update with the per-layer learning rates. The baseline is the unavoidable part: a CLIP image forward + cosine
loss + backward to the pixels of a ``(num_augmentations, 3, S, S)`` batch (CLIP frozen in both). The ratio (goal
<= 1.3) is the overhead of the INR, the augmentations and the optimiser.

Everything is **interleaved in one run** so machine load cancels: after each optimisation step, the step-end
callback times one baseline CLIP forward + backward, the INR forward + backward with the pre-issue-11 formula
(``baddbmm`` + unfused FINER activation) and with the current one (2-D GEMMs + the fused FINER layer). Each
``--options`` entry (a pipeline keyword such as ``coarse_grid_factor=2``) gets its own interleaved run; ``default``
is the exact path. Steps are ``time.perf_counter`` wall times; ``os.getloadavg()`` is recorded.

By default the CLIP is ViT-B/32-sized (the paper's backbone: ``CLIPConfig()`` defaults, 224 px, patch 32) with random
weights, so nothing is downloaded; timings do not depend on the weight values.

    python benchmarks/clip_inversion_step.py                # ViT-B/32-sized CLIP, 224 px, 8 views, INR 5 x 256
    python benchmarks/clip_inversion_step.py --tiny --steps 5   # smoke run on the tiny CLIP
"""

from __future__ import annotations

import argparse
import json
import os
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


def old_inr_render(inr, height: int, width: int):
    """The INR forward before issue 11 (expand + ``baddbmm`` per layer, unfused FINER activation)."""
    from hfx.pipelines.clip_inversion.inr import coordinate_grid, finer_activation

    x = coordinate_grid(height, width, device=inr.weights[0].device).unsqueeze(0).expand(inr.num_images, -1, -1)
    last = inr.num_layers - 1
    for index, (weight, bias) in enumerate(zip(inr.weights, inr.biases)):
        x = torch.baddbmm(bias, x, weight)
        if index < last:
            x = finer_activation(x, inr.omega)
    return torch.sigmoid(x)


def parse_option(text: str) -> dict:
    if text == "default":
        return {}
    key, _, value = text.partition("=")
    return {key: float(value) if "." in value else int(value)}


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
    parser.add_argument(
        "--options",
        nargs="+",
        default=["default", "coarse_grid_factor=2", "min_layer_lr_ratio=0.01"],
        help="pipeline runs to time: 'default' and/or KEY=VALUE pipeline options",
    )
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
    load_before = os.getloadavg()

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    target = F.normalize(torch.randn(1, pipe.projection_dim, device=device), dim=-1)
    pixels = torch.rand(n, 3, size, size, device=device)
    probe_inr = pipe.make_inr(1, generator=torch.Generator().manual_seed(0))

    def timed(fn) -> float:
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        return time.perf_counter() - t0

    def clip_fwd_bwd():
        x = pixels.clone().requires_grad_(True)
        embeds = F.normalize(pipe.embed_pixels(x).mean(0, keepdim=True), dim=-1)
        (1 - F.cosine_similarity(embeds, target)).sum().backward()

    runs = {}
    for option in args.options:
        kwargs = parse_option(option)
        times = {"step": [], "clip_fwd_bwd": [], "inr_old_formula": [], "inr_current": []}
        last = [0.0]

        def callback(p, step, t, cb_kwargs, times=times, last=last, option=option):
            sync()
            now = time.perf_counter()
            keep = step >= args.warmup
            if keep:
                times["step"].append(now - last[0])
            # the interleaved references, outside the step being timed
            clip_t = timed(clip_fwd_bwd)
            if option == "default":
                old_t = timed(lambda: old_inr_render(probe_inr, args.height, args.width).mean().backward())
                new_t = timed(lambda: probe_inr.render(args.height, args.width).mean().backward())
            if keep:
                times["clip_fwd_bwd"].append(clip_t)
                if option == "default":
                    times["inr_old_formula"].append(old_t)
                    times["inr_current"].append(new_t)
            sync()
            last[0] = time.perf_counter()
            return {}

        model.requires_grad_(False)
        last[0] = time.perf_counter()
        pipe(
            "a red apple on a table",
            height=args.height,
            width=args.width,
            num_inference_steps=total,
            num_augmentations=n,
            generator=torch.Generator().manual_seed(0),
            callback_on_step_end=callback,
            output_type="pt",
            **kwargs,
        )
        step_med, clip_med = statistics.median(times["step"]), statistics.median(times["clip_fwd_bwd"])
        run = {
            "ratio_step_to_clip_fwd_bwd": round(step_med / clip_med, 3),
            "step_seconds_median": round(step_med, 4),
            "clip_fwd_bwd_seconds_median": round(clip_med, 4),
            "step_seconds": [round(t, 4) for t in times["step"]],
            "clip_fwd_bwd_seconds": [round(t, 4) for t in times["clip_fwd_bwd"]],
        }
        if option == "default":
            old_med, new_med = statistics.median(times["inr_old_formula"]), statistics.median(times["inr_current"])
            run.update(
                inr_fwd_bwd_old_formula_seconds_median=round(old_med, 4),
                inr_fwd_bwd_current_seconds_median=round(new_med, 4),
                inr_current_over_old_formula=round(new_med / old_med, 3),
            )
        runs[option] = run
        print(option, json.dumps(run), flush=True)

    main_run = runs.get("default", next(iter(runs.values())))
    ratio = main_run["ratio_step_to_clip_fwd_bwd"]
    result = {
        "metric": "time per CLIP^-1 optimisation step / time of one plain CLIP forward+backward of the same batch "
        "(interleaved in one run)",
        "value": ratio,
        "goal": "<= 1.3",
        "met": ratio <= 1.3,
        "command": "python " + " ".join(["benchmarks/clip_inversion_step.py", *(argv or sys.argv[1:])]),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "loadavg": {"before": load_before, "after": os.getloadavg()},
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
            "runs": runs,
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
