"""PruneSID on real LLaVA-1.5: answers with and without visual-token pruning on a small synthetic VQA set.

Needs the real ``llava-hf/llava-1.5-7b-hf`` weights (a local folder or the HF cache; ~14 GB, a GPU recommended).
When they are absent the script says so and exits 0. ``--model tiny`` runs the same pipeline on the tiny random
LLaVA from ``hfx.testing`` (answers are meaningless; it only checks the plumbing).

The VQA set is generated: one coloured shape (square / circle / triangle) on a plain background, asked "What colour
is the shape?" and "What shape is it?", so no dataset download is needed. For each budget (default 192 / 128 / 64
tokens) it reports accuracy (answer contains the ground truth) and agreement with the unpruned model's answer.

    python examples/prunesid_llava.py --model llava-hf/llava-1.5-7b-hf --limit 12 --budgets 192 128 64
    python examples/prunesid_llava.py --model tiny --limit 4
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch
from PIL import Image, ImageDraw


COLOURS = {"red": (220, 30, 30), "green": (30, 170, 60), "blue": (30, 60, 220), "yellow": (235, 215, 30)}
SHAPES = ["square", "circle", "triangle"]


def synthetic_vqa(limit: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    items = []
    for i in range(limit):
        colour = list(COLOURS)[int(torch.randint(len(COLOURS), (1,), generator=g))]
        shape = SHAPES[int(torch.randint(len(SHAPES), (1,), generator=g))]
        img = Image.new("RGB", (336, 336), (245, 245, 245))
        d = ImageDraw.Draw(img)
        x0, y0 = int(torch.randint(40, 140, (1,), generator=g)), int(torch.randint(40, 140, (1,), generator=g))
        box = [x0, y0, x0 + 150, y0 + 150]
        if shape == "square":
            d.rectangle(box, fill=COLOURS[colour])
        elif shape == "circle":
            d.ellipse(box, fill=COLOURS[colour])
        else:
            d.polygon([(x0 + 75, y0), (x0, y0 + 150), (x0 + 150, y0 + 150)], fill=COLOURS[colour])
        question, answer = ("What color is the shape?", colour) if i % 2 == 0 else ("What shape is it?", shape)
        items.append((img, question + " Answer with one word.", answer))
    return items


def load(model_id: str):
    from transformers import AutoProcessor

    from hfx.prunesid import PruneSIDLlavaForConditionalGeneration

    if model_id == "tiny":
        from hfx.testing import tiny_llava

        return tiny_llava(image_size=336, patch_size=14)
    try:
        dtype = torch.float16 if torch.cuda.is_available() else torch.float32
        model = PruneSIDLlavaForConditionalGeneration.from_pretrained(model_id, dtype=dtype, local_files_only=True)
        processor = AutoProcessor.from_pretrained(model_id, local_files_only=True)
    except OSError as err:
        print(
            f"SKIPPED: the real weights of {model_id!r} are not available locally ({type(err).__name__}). "
            "Download them first (e.g. `hf download llava-hf/llava-1.5-7b-hf --local-dir DIR`) on a machine with "
            "~16 GB of GPU memory, or pass `--model tiny` to check the pipeline on a random tiny model."
        )
        sys.exit(0)
    return model.to("cuda" if torch.cuda.is_available() else "cpu"), processor


def main():
    parser = argparse.ArgumentParser(description="PruneSID vs unpruned LLaVA-1.5 on a synthetic VQA set")
    parser.add_argument("--model", default="llava-hf/llava-1.5-7b-hf", help="llava-hf LLaVA-1.5 id/folder or 'tiny'")
    parser.add_argument("--budgets", type=int, nargs="+", default=[192, 128, 64])
    parser.add_argument("--method", default="prunesid", help="prunesid, random, pooling, visionzip, divprune or fastv")
    parser.add_argument("--fastv-k", type=int, default=2, help="FastV's K (only with --method fastv; < LM layers)")
    parser.add_argument("--limit", type=int, default=12, help="number of questions")
    parser.add_argument("--max-new-tokens", type=int, default=8)
    args = parser.parse_args()

    from hfx.prunesid import apply

    model, processor = load(args.model)
    data = synthetic_vqa(args.limit)
    prompts = [f"USER: <image>\n{q} ASSISTANT:" for _, q, _ in data]

    def answers(m, p):
        out, t0 = [], time.perf_counter()
        for (img, _, _), prompt in zip(data, prompts):
            batch = p(images=[img], text=[prompt], return_tensors="pt").to(m.device)
            batch["pixel_values"] = batch["pixel_values"].to(m.dtype)
            ids = m.generate(**batch, max_new_tokens=args.max_new_tokens, do_sample=False)
            out.append(p.decode(ids[0, batch["input_ids"].shape[1] :], skip_special_tokens=True).strip().lower())
        return out, time.perf_counter() - t0

    model, base_proc = apply(model, processor, num_visual_tokens=None)
    ref, ref_s = answers(model, base_proc)
    results = {"unpruned": {"accuracy": sum(a in r for r, (_, _, a) in zip(ref, data)) / len(data), "seconds": ref_s}}
    for n in args.budgets:
        extra = {"fastv_k": args.fastv_k} if args.method == "fastv" else {}
        model, proc = apply(model, processor, num_visual_tokens=n, method=args.method, **extra)
        got, s = answers(model, proc)
        results[f"{args.method}@{n}"] = {
            "accuracy": sum(a in g for g, (_, _, a) in zip(got, data)) / len(data),
            "agreement_with_unpruned": sum(g == r for g, r in zip(got, ref)) / len(data),
            "seconds": s,
        }
    print(json.dumps({"model": args.model, "questions": len(data), "results": results}, indent=2))


if __name__ == "__main__":
    main()
