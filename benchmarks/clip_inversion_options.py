"""Quality and cost of CLIP^-1's optional speed-ups vs the default optimisation (issue 11, item 11).

Options measured (each a named ``CLIPInversionPipeline.__call__`` argument; the default is the exact path):

* ``coarse_grid_factor=F``: optimise on a grid F times coarser in each direction, shifted by a random sub-pixel
  offset each step (CLIP sees it upsampled), and render the output at full size;
* ``min_layer_lr_ratio=r``: layers whose scheduled learning rate is below ``r`` x the peak get no gradient that step
  (their weight-gradient GEMMs are skipped, and the backward stops below the lowest layer that needs one).

For each option and seed, the same prompts are optimised from the same INR init; the metric is the final CLIP
similarity (cosine of the full-size render's embedding to the target), paired per (prompt, seed) against the
default, with a paired bootstrap 95 % CI of the mean difference. Cost: process CPU seconds per optimisation step
on one thread (robust to machine load), INR-dominated because the CLIP is tiny.

**Caveat:** no CLIP weights exist offline; this runs on the tiny *random* CLIP of ``hfx.testing`` (64 px input,
so the 64 px render is not downsampled before CLIP), whose similarity is only a proxy for image quality.

    python benchmarks/clip_inversion_options.py --steps 40 --seeds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import torch


PROMPTS = [
    "a red apple on a wooden table",
    "a photo of a cat sleeping on a sofa",
    "a mountain lake at sunset",
    "a bowl of soup with bread",
    "an old car parked in the street",
    "a portrait of a smiling woman",
    "a field of yellow flowers under a blue sky",
    "a city skyline at night",
]
OPTIONS = {
    "default (exact)": {},
    "coarse_grid_factor=2": {"coarse_grid_factor": 2},
    "min_layer_lr_ratio=0.01": {"min_layer_lr_ratio": 0.01},
    "min_layer_lr_ratio=0.05": {"min_layer_lr_ratio": 0.05},
}


def paired_bootstrap(diffs: list[float], reps: int = 10000, seed: int = 0) -> tuple[float, float]:
    g = torch.Generator().manual_seed(seed)
    d = torch.tensor(diffs, dtype=torch.float64)
    idx = torch.randint(0, len(diffs), (reps, len(diffs)), generator=g)
    means = d[idx].mean(dim=1)
    return float(torch.quantile(means, 0.025)), float(torch.quantile(means, 0.975))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--size", type=int, default=64, help="render size = tiny CLIP input size")
    parser.add_argument("--num-augmentations", type=int, default=4)
    parser.add_argument("--out", default="benchmarks/results/clip_inversion_options.json")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    from hfx.pipelines.clip_inversion import CLIPInversionPipeline
    from hfx.testing import tiny_clip

    model, processor = tiny_clip(image_size=args.size)
    pipe = CLIPInversionPipeline(model, processor)  # the default INR (5 x 256), as in the step benchmark
    pipe.set_progress_bar_config(disable=True)
    common = {
        "height": args.size,
        "width": args.size,
        "num_inference_steps": args.steps,
        "num_augmentations": args.num_augmentations,
        "output_type": "pt",
    }
    sims = {name: [] for name in OPTIONS}
    cpu = {name: [] for name in OPTIONS}
    t_start = time.time()
    for seed in range(args.seeds):
        for name, option in OPTIONS.items():  # interleaved: every option runs at each seed
            c0 = time.process_time()
            out = pipe(PROMPTS, generator=torch.Generator().manual_seed(seed), **common, **option)
            cpu[name].append((time.process_time() - c0) / args.steps)
            sims[name] += [float(s) for s in out.clip_similarity]
            print(f"seed {seed} {name}: mean sim {out.clip_similarity.mean():.4f}", flush=True)
    base = sims["default (exact)"]
    rows = {}
    for name in OPTIONS:
        diffs = [a - b for a, b in zip(sims[name], base)]
        lo, hi = paired_bootstrap(diffs)
        rows[name] = {
            "mean_clip_similarity": round(statistics.mean(sims[name]), 4),
            "mean_diff_vs_default": round(statistics.mean(diffs), 4),
            "diff_ci95": [round(lo, 4), round(hi, 4)],
            "cpu_seconds_per_step": round(statistics.median(cpu[name]), 4),
            "cpu_ratio_vs_default": round(statistics.median(cpu[name]) / statistics.median(cpu["default (exact)"]), 3),
        }
        print(name, json.dumps(rows[name]), flush=True)
    result = {
        "metric": "final CLIP similarity (tiny random CLIP, proxy) and CPU time per step of each option vs default",
        "value": {k: v["mean_diff_vs_default"] for k, v in rows.items()},
        "goal": "an option is offered if its 95 % CI of the similarity difference includes 0 or lies above it",
        "command": "python " + " ".join(["benchmarks/clip_inversion_options.py", *(argv or sys.argv[1:])]),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "loadavg": os.getloadavg(),
        "detail": {
            "clip": f"hfx.testing.tiny_clip(image_size={args.size}) (random weights: similarity is only a proxy)",
            "prompts": PROMPTS,
            "seeds": args.seeds,
            "paired_samples": len(base),
            "inr": pipe.inr_config(),
            **{k: v for k, v in vars(args).items() if k != "out"},
            "torch_threads": 1,
            "wall_seconds": round(time.time() - t_start, 1),
            "options": rows,
        },
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
