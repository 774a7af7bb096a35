"""ThinkMerge quick start: K reasoning traces, one answer from their averaged logits (arXiv 2512.02874).

    python examples/thinkmerge_quickstart.py [--model HUB_ID_OR_PATH] [--question "..."] [--num-traces 4]

Uses the embedded SmolLM2-135M-Instruct by default (no think tags, so the delimiter is the phrase "Final answer:",
matched on decoded text); with a Qwen3-style model the delimiter is `</think>`. Prints the K traces, the merged
answer, and, for comparison on the same traces, the K independent answers and their majority vote.
"""

from __future__ import annotations

import argparse
import time

import torch

import hfx
from hfx.generation.thinkmerge.answer import extract_numeric_answer
from hfx.generation.thinkmerge.baselines import build_prompt, majority_vote
from hfx.models import load_causal_lm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="Hub id or local path (default: embedded SmolLM2-135M)")
    parser.add_argument(
        "--question",
        default="Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
        "How many clips did Natalia sell altogether in April and May?",
    )
    parser.add_argument("--num-traces", type=int, default=4)
    parser.add_argument("--max-thinking-tokens", type=int, default=128)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--merge", default="direct", choices=["direct", "early_ready", "shortest_k"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    model, tok = load_causal_lm(args.model)
    prompt, think_end = build_prompt(tok, args.question)
    enc = tok([prompt], return_tensors="pt", add_special_tokens=False).to(model.device)
    kwargs = dict(
        num_traces=args.num_traces,
        think_end=think_end,
        tokenizer=tok,  # the HF form; with custom_generate=hfx.thinkmerge pass think_end_tokenizer=tok instead
        max_thinking_tokens=args.max_thinking_tokens,
        max_new_tokens=args.max_new_tokens,
        merge=args.merge,
        do_sample=True,
        temperature=0.7,
        top_p=0.95,
        return_dict_in_generate=True,
    )
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    out = model.generate(**enc, custom_generate="thinkmerge", **kwargs)  # or custom_generate=hfx.thinkmerge
    seconds = time.perf_counter() - start
    prompt_length = enc["input_ids"].shape[1]
    for k, trace in enumerate(out.traces[0]):
        print(f"--- trace {k + 1} ({len(trace)} tokens) ---\n{tok.decode(trace, skip_special_tokens=True).strip()}")
    merged = tok.decode(out.sequences[0, prompt_length:], skip_special_tokens=True)
    print(f"=== ThinkMerge answer ({seconds:.1f} s) ===\n{merged.strip()}\n-> {extract_numeric_answer(merged)}")

    # the majority-vote baseline on the very same traces: one independent answer per trace
    independent = model.generate(
        **enc, custom_generate=hfx.thinkmerge, traces=out.traces, answer_mode="independent", **kwargs
    )
    answers = [tok.decode(row[prompt_length:], skip_special_tokens=True) for row in independent.sequences]
    predictions = [extract_numeric_answer(a) for a in answers]
    vote, counts = majority_vote(predictions)
    print(f"=== independent answers: {predictions} -> majority {vote} ({dict(counts)})")


if __name__ == "__main__":
    main()
