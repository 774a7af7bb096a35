"""`hfx generate "QUESTION" --strategy thinkmerge --num-traces 4 [--model ...] [--show-traces]`."""

from __future__ import annotations

from hfx.commands import _types


HELP = "Answer a question with ThinkMerge (or greedy / sample / majority) on a causal LM (default: SmolLM2-135M)."


def add_decoding_arguments(parser) -> None:
    """Options shared by `hfx generate` and `hfx eval`: model, trace count and budgets, sampling, merge variant."""
    parser.add_argument(
        "--num-traces", type=_types.positive_int, default=4, help="K, traces per question (default: 4)"
    )
    parser.add_argument("--model", default=None, help="Hub id or local path (default: the embedded SmolLM2-135M)")
    parser.add_argument(
        "--max-thinking-tokens", type=_types.positive_int, default=256, help="thinking budget per trace (default: 256)"
    )
    parser.add_argument("--max-new-tokens", type=_types.positive_int, default=64, help="answer budget (default: 64)")
    parser.add_argument(
        "--temperature", type=_types.positive_float, default=0.7, help="thinking temperature (default: 0.7)"
    )
    parser.add_argument("--top-p", type=_types.probability, default=0.95, help="thinking top-p (default: 0.95)")
    parser.add_argument(
        "--merge", default="direct", choices=["direct", "early_ready", "shortest_k"], help="trace handling variant"
    )
    parser.add_argument(
        "--num-candidates", type=_types.positive_int, default=None, help="N for early_ready / shortest_k"
    )
    parser.add_argument("--answer-greedy", action="store_true", help="decode the answer greedily")
    parser.add_argument("--seed", type=_types.seed, default=0, help="random seed (default: 0)")
    parser.add_argument(
        "--backend",
        default="hf",
        choices=["hf", "vllm"],
        help="hf: transformers `model.generate` (default); vllm: a vLLM engine (needs vLLM: `pip install 'hfx[vllm]'` "
        "or `scripts/setup --vllm`)",
    )


def vllm_backend_error(args, command: str) -> str | None:
    """The one-line error for ``--backend vllm`` where vLLM is not installed (``None`` when it is usable)."""
    if getattr(args, "backend", "hf") != "vllm":
        return None
    from hfx.integrations.vllm import VLLM_INSTALL_HINT, is_vllm_available

    if is_vllm_available():
        return None
    return f"hfx {command}: error: `--backend vllm` needs vLLM, which is not installed here. {VLLM_INSTALL_HINT}"


def check_model_arg(args) -> None:
    """Resolve ``--model`` before anything heavy loads (:func:`hfx.utils.artifacts.resolve_model`)."""
    if args.model is not None and args.model != "default":
        from hfx.utils.artifacts import resolve_model

        resolve_model(args.model, arg="--model", allowed=("transformers:causal_lm",), what="a causal LM folder or Hub id")


def load_backend(args):
    """``(model, tokenizer)`` for ``--backend``: a transformers model, or a vLLM engine behind
    :class:`hfx.integrations.vllm.VLLMGenerator` (the same ``generate`` call).

    ``--model`` is resolved first (:func:`check_model_arg`): a missing folder, another artifact's folder
    (an adapter, a pipeline, a router) or a Hub id that is not cached while ``HF_HUB_OFFLINE`` is set is refused with
    a one-line error before anything loads."""
    check_model_arg(args)
    if getattr(args, "backend", "hf") != "vllm":
        from hfx.models import load_causal_lm

        return load_causal_lm(args.model)
    from hfx.integrations.vllm import VLLMGenerator, load_tokenizer, load_vllm

    return VLLMGenerator(load_vllm(args.model), use_tqdm=False), load_tokenizer(args.model)


def token_progress(bar):
    """A logits processor that advances the tqdm ``bar`` once per decoding step (it returns the scores unchanged).

    ThinkMerge may call a processor once per replica of a step; a step is counted once per new sequence length."""
    from transformers import LogitsProcessor, LogitsProcessorList

    class _TokenProgress(LogitsProcessor):
        last_length = None

        def __call__(self, input_ids, scores):
            if input_ids.shape[-1] != self.last_length:
                self.last_length = input_ids.shape[-1]
                bar.update(1)
            return scores

    return LogitsProcessorList([_TokenProgress()])


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
    import sys

    error = vllm_backend_error(args, "generate")
    if error:
        print(error, file=sys.stderr)
        return 2
    if not args.question.strip():
        raise ValueError(f"`QUESTION` must be a non-empty string, but is {args.question!r}")
    check_model_arg(args)  # fails fast (one Hub request at most) before torch and transformers load
    from tqdm.auto import tqdm

    from hfx.generation.thinkmerge.baselines import run_strategies

    model, tokenizer = load_backend(args)
    extra = {}
    if args.strategy in ("thinkmerge", "majority") and args.merge != "direct":
        extra = {"merge": args.merge, "num_candidates": args.num_candidates}
    steps = args.max_thinking_tokens + args.max_new_tokens
    bar = tqdm(total=steps, desc=f"{args.strategy} (decoding steps)", unit="tok")
    if args.backend == "hf":
        extra["logits_processor"] = token_progress(bar)
    try:
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
    finally:
        bar.close()
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
