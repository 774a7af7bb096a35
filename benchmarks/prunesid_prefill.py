"""Prefill speed-up and selection overhead of PruneSID (and its baselines) on a LLaVA-1.5-shaped random model (CPU).

Model: a CLIP ViT-L/14-336 tower (width 1024, 24 layers, 576 patches + CLS; realistic) feeding a LLaMA-7B-width
language model (hidden 4096, MLP 11008, 32 heads) with only a few layers, randomly initialised. In one run:

* prefill time (LM forward over text + visual tokens, batch 1, with KV cache) at 64 / 128 / 192 kept tokens vs the
  576 tokens of stock LLaVA, and the ratio of the measured speed-up to the token-count bound
  ``(text + 576) / (text + N)``;
* selection time of each method (PruneSID incl. its CLS-attention recomputation, random, pooling, VisionZip, DivPrune
  incl. its projector pass) relative to the vision-tower time;
* FastV (``method="fastv"``, K = ``--fastv-k``): prefill through the hooked inner model (text + 576 image
  placeholders, precomputed image features) keeping N image tokens from layer K on, vs the same call with pruning
  off, on an LM of ``--fastv-text-layers`` layers (FastV needs layers after K); its bound is the token-layer count
  ``L·(text+576) / (K·(text+576) + (L-K)·(text+N))``.

Writes ``benchmarks/results/prunesid_prefill.json``. Run: ``python benchmarks/prunesid_prefill.py`` (~3-5 min on
2 CPU cores).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path

import torch


METHODS = ["prunesid", "random", "pooling", "visionzip", "divprune"]


def timed(fn, reps):
    fn()  # warm-up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def build(args, vision_layers=None, text_layers=None):
    from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig

    from hfx.prunesid import PruneSIDLlavaForConditionalGeneration

    vision = CLIPVisionConfig(
        hidden_size=1024,
        intermediate_size=4096,
        num_hidden_layers=args.vision_layers if vision_layers is None else vision_layers,
        num_attention_heads=16,
        image_size=336,
        patch_size=14,
        projection_dim=768,
    )
    text = LlamaConfig(
        vocab_size=1000,
        hidden_size=args.text_hidden,
        intermediate_size=args.text_intermediate,
        num_hidden_layers=args.text_layers if text_layers is None else text_layers,
        num_attention_heads=32,
        num_key_value_heads=32,
        max_position_embeddings=2048,
    )
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=999,
        vision_feature_select_strategy="default",
        vision_feature_layer=-2,
    )
    torch.manual_seed(0)
    return PruneSIDLlavaForConditionalGeneration(config).eval()


@torch.inference_mode()
def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vision-layers", type=int, default=24)
    parser.add_argument("--text-layers", type=int, default=2)
    parser.add_argument("--text-hidden", type=int, default=4096)
    parser.add_argument("--text-intermediate", type=int, default=11008)
    parser.add_argument("--text-tokens", type=int, default=40, help="prompt tokens besides the visual tokens")
    parser.add_argument("--budgets", type=int, nargs="+", default=[64, 128, 192])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (default 1: on the shared, oversubscribed 2-core machine, 2 threads made small GEMMs "
        "~1.7x less efficient than large ones, which measures contention rather than pruning; 0 = torch default)",
    )
    parser.add_argument("--fastv-text-layers", type=int, default=4, help="LM layers for the FastV rows (> K)")
    parser.add_argument("--fastv-k", type=int, default=2, help="FastV's K (default 2)")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "prunesid_prefill.json"))
    args = parser.parse_args()

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    from hfx.prunesid import PruneSIDConfig
    from hfx.prunesid.baselines import reduce_visual_tokens
    from hfx.prunesid.modeling import cls_attention_and_keys

    t_build = time.perf_counter()
    model = build(args)
    inner = model.model
    print(f"built model in {time.perf_counter() - t_build:.1f}s; torch threads = {torch.get_num_threads()}")
    pixel_values = torch.randn(1, 3, 336, 336)

    tower_s = timed(lambda: inner.vision_tower(pixel_values, output_hidden_states=True), max(1, args.reps - 1))
    out = inner.vision_tower(pixel_values, output_hidden_states=True)
    selected = out.hidden_states[-2]
    print(f"vision tower (CLIP-L/336, {args.vision_layers} layers): {tower_s * 1e3:.0f} ms")

    selection = {}
    for n in args.budgets:
        for method in METHODS:
            cfg = PruneSIDConfig(num_visual_tokens=n, method=method)

            def select(cfg=cfg, n=n):
                cls_attn = keys = None
                if cfg.method in ("prunesid", "visionzip"):
                    cls_attn, keys = cls_attention_and_keys(inner.vision_tower, out.hidden_states, -2)
                return reduce_visual_tokens(selected, cfg, cls_attn, keys, inner.multi_modal_projector, n)

            s = timed(select, args.reps)
            selection[f"{method}@{n}"] = {"seconds": s, "overhead_vs_tower": s / tower_s}
            print(f"selection {method:>9} @ {n:3d}: {s * 1e3:7.1f} ms = {s / tower_s:.4f} x tower")

    lm = inner.language_model
    hidden = args.text_hidden
    sizes = [576, *args.budgets]
    embeds = {n: torch.randn(1, args.text_tokens + n, hidden) * 0.02 for n in sizes}

    def run(n):
        h = lm(inputs_embeds=embeds[n], use_cache=True).last_hidden_state
        return model.lm_head(h[:, -1:])

    times = {n: [] for n in sizes}
    for n in sizes:  # warm-up
        run(n)
    for _ in range(args.reps):  # interleaved, so that load drifts on the shared machine hit every size alike
        for n in sizes:
            t0 = time.perf_counter()
            run(n)
            times[n].append(time.perf_counter() - t0)
    prefill = {n: statistics.median(v) for n, v in times.items()}
    for n in sizes:
        print(f"prefill {args.text_tokens} text + {n:3d} visual tokens: {prefill[n] * 1e3:.0f} ms")

    rows = {}
    for n in args.budgets:
        bound = (args.text_tokens + 576) / (args.text_tokens + n)
        speedup = prefill[576] / prefill[n]
        rows[n] = {
            "prefill_s": prefill[n],
            "speedup": speedup,
            "token_bound": bound,
            "speedup_over_bound": speedup / bound,
            "ttft_speedup_prunesid": (tower_s + prefill[576])
            / (tower_s + selection[f"prunesid@{n}"]["seconds"] + prefill[n]),
        }
        print(
            f"N={n}: prefill speed-up {speedup:.2f}x (bound {bound:.2f}x, ratio {speedup / bound:.3f}); "
            f"tower+selection+prefill speed-up {rows[n]['ttft_speedup_prunesid']:.2f}x"
        )
    model = inner = lm = embeds = None  # free the first model before building the FastV one
    fastv = fastv_rows(args)
    key = 64 if 64 in rows else args.budgets[0]
    result = {
        "metric": f"prefill speed-up at {key} visual tokens / token-count bound ((text+576)/(text+{key}))",
        "value": round(rows[key]["speedup_over_bound"], 4),
        "goal": ">= 0.9",
        "selection_overhead": round(selection[f"prunesid@{key}"]["overhead_vs_tower"], 4),
        "selection_overhead_goal": "<= 0.05 (PruneSID selection time / vision-tower time)",
        "fastv_speedup_over_bound": round(fastv["budgets"][str(key)]["speedup_over_bound"], 4),
        "fastv_goal": ">= 0.9 (FastV prefill speed-up / its token-layer bound, same budget)",
        "command": "python benchmarks/prunesid_prefill.py "
        + " ".join(
            f"--{k.replace('_', '-')} {' '.join(map(str, v)) if isinstance(v, list) else v}"
            for k, v in vars(args).items()
            if k != "out"
        ),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "detail": {
            "device": "cpu",
            "torch_threads": torch.get_num_threads(),
            "load_average_1min": os.getloadavg()[0],
            "model": {
                "vision": f"CLIP ViT-L/14-336 shape, {args.vision_layers} layers, random",
                "text": f"LLaMA width {hidden}/{args.text_intermediate}, {args.text_layers} layers, random",
                "text_tokens": args.text_tokens,
            },
            "vision_tower_s": tower_s,
            "prefill_s": {str(k): v for k, v in prefill.items()},
            "budgets": {str(k): v for k, v in rows.items()},
            "selection": selection,
            "fastv": fastv,
        },
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    keys = ("metric", "value", "goal", "selection_overhead", "fastv_speedup_over_bound")
    print(json.dumps({k: result[k] for k in keys}, indent=2))


def fastv_rows(args) -> dict:
    """FastV prefill (hooked inner model, pruning off vs N kept from layer K), interleaved; see the module docstring."""
    from transformers.modeling_outputs import BaseModelOutputWithPooling

    from hfx.prunesid import PruneSIDConfig

    layers, k, text = args.fastv_text_layers, args.fastv_k, args.text_tokens
    model = build(args, vision_layers=1, text_layers=layers)  # the tower is not run: features are given
    inner = model.model
    image_id = model.config.image_token_index
    before = 5  # text tokens before the image, as in "USER: <image>\n..."
    ids = torch.cat([torch.arange(1, before + 1), torch.full((576,), image_id), torch.arange(10, 10 + text - before)])[
        None
    ]
    feats = {"image": BaseModelOutputWithPooling(pooler_output=[torch.randn(576, args.text_hidden) * 0.02])}
    settings = {"576": None}
    settings.update(
        {str(n): PruneSIDConfig(num_visual_tokens=n, method="fastv", fastv_k=k).to_dict() for n in args.budgets}
    )

    def run(name):
        model.config.prunesid = settings[name]
        inner(input_ids=ids, mm_encoder_outputs=feats, use_cache=True)

    for name in settings:  # warm-up
        run(name)
    times = {name: [] for name in settings}
    for _ in range(args.reps):
        for name in settings:
            t0 = time.perf_counter()
            run(name)
            times[name].append(time.perf_counter() - t0)
    prefill = {name: statistics.median(v) for name, v in times.items()}
    budgets = {}
    for n in args.budgets:
        bound = layers * (text + 576) / (k * (text + 576) + (layers - k) * (text + n))
        speedup = prefill["576"] / prefill[str(n)]
        budgets[str(n)] = {"prefill_s": prefill[str(n)], "speedup": speedup, "bound": bound}
        budgets[str(n)]["speedup_over_bound"] = speedup / bound
        print(f"FastV K={k}, N={n} of 576, {layers} LM layers: prefill speed-up {speedup:.2f}x (bound {bound:.2f}x)")
    return {"text_layers": layers, "k": k, "prefill_576_s": prefill["576"], "budgets": budgets}


if __name__ == "__main__":
    main()
