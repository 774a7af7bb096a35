"""`hfx generate "QUESTION" --strategy thinkmerge --num-traces 4 [--model ...] [--show-traces]`."""

from __future__ import annotations


HELP = "Answer a question with ThinkMerge (or greedy / sample / majority) on a causal LM (default: SmolLM2-135M)."


def add_decoding_arguments(parser) -> None:
    """Options shared by `hfx generate` and `hfx eval`: model, trace count and budgets, sampling, merge variant."""
    parser.add_argument("--num-traces", type=int, default=4, help="K, traces per question (default: 4)")
    parser.add_argument("--model", default=None, help="Hub id or local path (default: the embedded SmolLM2-135M)")
    parser.add_argument(
        "--max-thinking-tokens", type=int, default=256, help="thinking budget per trace (default: 256)"
    )
    parser.add_argument("--max-new-tokens", type=int, default=64, help="answer budget (default: 64)")
    parser.add_argument("--temperature", type=float, default=0.7, help="thinking temperature (default: 0.7)")
    parser.add_argument("--top-p", type=float, default=0.95, help="thinking top-p (default: 0.95)")
    parser.add_argument(
        "--merge", default="direct", choices=["direct", "early_ready", "shortest_k"], help="trace handling variant"
    )
    parser.add_argument("--num-candidates", type=int, default=None, help="N for early_ready / shortest_k")
    parser.add_argument("--answer-greedy", action="store_true", help="decode the answer greedily")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")


def add_arguments(parser) -> None:
    parser.add_argument("question", help="the question (a chat prompt is built with the model's chat template)")
    parser.add_argument(
        "--strategy",
        default="thinkmerge",
        choices=["thinkmerge", "greedy", "sample", "majority"],
        help="decoding strategy (default: thinkmerge)",
    )
    add_decoding_arguments(parser)
    parser.add_argument("--show-traces", action="store_true", help="also print the reasoning traces")


def run(args) -> int:
    from hfx.generation.thinkmerge.baselines import run_strategies
    from hfx.models import load_causal_lm

    if args.num_traces < 1:
        raise ValueError(f"`--num-traces` must be >= 1, but is {args.num_traces}")
    model, tokenizer = load_causal_lm(args.model)
    extra = {}
    if args.strategy in ("thinkmerge", "majority") and args.merge != "direct":
        extra = {"merge": args.merge, "num_candidates": args.num_candidates}
    results, seconds = run_strategies(
        model,
        tokenizer,
        [args.question],
        strategies=[args.strategy],
        num_traces=args.num_traces,
        max_thinking_tokens=args.max_thinking_tokens,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        answer_do_sample=False if args.answer_greedy else None,
        seed=args.seed,
        **extra,
    )
    result = results[args.strategy][0]
    if args.show_traces:
        for k, trace in enumerate(result.traces):
            print(f"--- trace {k + 1}/{len(result.traces)} ---\n{trace.strip()}")
        for k, answer in enumerate(result.answers):
            print(f"--- answer from trace {k + 1} ---\n{answer.strip()}")
        print(f"--- {args.strategy} answer ---")
    print(result.text.strip())
    print(
        f"[{args.strategy}: extracted answer {result.prediction}, {result.generated_tokens} generated tokens, "
        f"{seconds[args.strategy]:.1f} s]"
    )
    return 0
