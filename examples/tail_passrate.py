"""How hard is each TAIL-style task / length for an instruct model? Pass rates for picking GRPO (e.g. THR) tasks.

GRPO learns only from prompts whose group of G samples is mixed (between 1 and G-1 correct). This script samples G
completions per prompt from the chat ``prompt`` column (plain format: "Reply with only the line ANSWER <answer>")
and reports, per task and length, the mean pass rate and the fraction of prompts with a mixed group, scored by
:func:`hfx.data.tail.reward_function` -- exactly what a GRPO run would see -- both strictly (an ``ANSWER`` line) and
leniently (``lenient=True``: the last answer-like match, as GSM8K rewards take the last number). Sampling follows
TRL's GRPO defaults (temperature 1, no top-k / top-p) unless told otherwise.

    python examples/tail_passrate.py                                    # the embedded SmolLM2-135M-Instruct
    python examples/tail_passrate.py --configs add:1 copy:2 --prompts 16 --samples 8 [--model PATH_OR_ID]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import date
from pathlib import Path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--configs",
        nargs="+",
        default=["add:1", "add:2", "sub:1", "mul:1", "copy:1", "copy:2", "parity:2", "parens:1"],
        help="task:length pairs",
    )
    p.add_argument("--prompts", type=int, default=16)
    p.add_argument("--samples", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=24)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--format", default="plain")
    p.add_argument("--model", default=None, help="a Hub id or local path (default: the embedded SmolLM2-135M)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="outputs/tail_passrate.json")
    args = p.parse_args(argv)

    import datasets
    import torch

    from hfx.data.tail import load_dataset, reward_function
    from hfx.models import load_causal_lm, load_default_model

    datasets.disable_progress_bars()
    torch.manual_seed(args.seed)
    model, tok = load_causal_lm(args.model) if args.model else load_default_model()
    tok.padding_side = "left"
    strict, lenient = reward_function(), reward_function(lenient=True)
    results = {}
    for config in args.configs:
        task, length = config.split(":")
        ds = load_dataset(task, "train", args.prompts, seed=args.seed, format=args.format, lengths=[int(length)])
        t0 = time.time()
        texts = [tok.apply_chat_template(r, tokenize=False, add_generation_prompt=True) for r in ds["prompt"]]
        enc = tok(texts, return_tensors="pt", padding=True)
        with torch.no_grad():
            out = model.generate(
                **enc,
                do_sample=True,
                temperature=args.temperature,
                top_p=1.0,
                top_k=args.top_k,
                max_new_tokens=args.max_new_tokens,
                num_return_sequences=args.samples,
                pad_token_id=tok.pad_token_id,
            )
        completions = tok.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
        tasks = [x for x in ds["task"] for _ in range(args.samples)]
        answers = [x for x in ds["answer"] for _ in range(args.samples)]
        results[config] = {}
        for name, reward in (("strict", strict), ("lenient", lenient)):
            scores = reward(completions=completions, task=tasks, answer=answers)
            per_prompt = [int(sum(scores[i * args.samples : (i + 1) * args.samples])) for i in range(args.prompts)]
            results[config][name] = {
                "pass_rate": round(sum(scores) / len(scores), 3),
                "mixed_groups": round(sum(0 < k < args.samples for k in per_prompt) / args.prompts, 3),
                "correct_per_prompt": per_prompt,
            }
        results[config] |= {
            "example": {"prompt": ds[0]["prompt"][-1]["content"], "completion": completions[0]},
            "seconds": round(time.time() - t0, 1),
        }
        s, r = results[config]["strict"], results[config]["lenient"]
        print(
            f"{config:18s} strict pass {s['pass_rate']:.3f} mixed {s['mixed_groups']:.3f} | lenient pass "
            f"{r['pass_rate']:.3f} mixed {r['mixed_groups']:.3f} {r['correct_per_prompt']}",
            flush=True,
        )
    out = {
        "metric": "pass rate and fraction of prompts with 1-7 of 8 samples right (mixed GRPO groups), lenient reward",
        "value": {
            config: {k: r["lenient"][k] for k in ("pass_rate", "mixed_groups")} for config, r in results.items()
        },
        "goal": "tasks where the model is neither at floor nor at ceiling (mixed groups) for GRPO/THR evidence",
        "model": args.model or "embedded SmolLM2-135M-Instruct",
        "format": args.format,
        "samples_per_prompt": args.samples,
        "prompts": args.prompts,
        "temperature": args.temperature,
        "top_k": args.top_k,
        "command": "python examples/tail_passrate.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "results": results,
        "date": date.today().isoformat(),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
