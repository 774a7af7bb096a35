"""`hfx heavy "QUESTION" --k 4 [--corpus FILE.jsonl] [--model ...]`: Heavy test-time scaling with a search agent."""

from __future__ import annotations

from hfx.commands import _types


HELP = (
    "Answer a question with Heavy test-time scaling (K search-agent trajectories + a verifier agent) over a local "
    "corpus (default: the DBpedia pages of ../shared/data; model default: SmolLM2-135M)."
)


# upper bounds: far above what a run uses, low enough that a typo is refused before the model is loaded
MAX_TRAJECTORIES = 1024
MAX_BUDGET = 10_000
MAX_NEW_TOKENS = 1_048_576


def add_arguments(parser) -> None:
    budget = _types.int_range(0, MAX_BUDGET)
    parser.add_argument("question", help="the question")
    parser.add_argument(
        "--k", type=_types.int_range(1, MAX_TRAJECTORIES), default=4, help="K, parallel trajectories (default: 4)"
    )
    parser.add_argument("--corpus", default=None, help="a JSON-lines file of {title, text} pages (default: DBpedia)")
    parser.add_argument("--retriever", default="bm25", choices=["bm25", "dense"], help="search backend")
    parser.add_argument("--model", default=None, help="Hub id or local path (default: the embedded SmolLM2-135M)")
    parser.add_argument("--solver-budget", type=budget, default=2, help="tool calls per trajectory (default: 2)")
    parser.add_argument(
        "--verifier-budget", type=budget, default=1, help="verifier tool calls per answer (default: 1)"
    )
    parser.add_argument(
        "--selector",
        default="score_argmax",
        choices=["score_argmax", "weighted_vote", "best_of_k", "majority"],
        help="how the answer is chosen (majority: no verifier)",
    )
    parser.add_argument("--rounds", type=budget, default=0, help="budget-forcing rounds per trajectory (default: 0)")
    parser.add_argument(
        "--max-new-tokens",
        type=_types.int_range(1, MAX_NEW_TOKENS),
        default=48,
        help="tokens per model call (default: 48)",
    )
    parser.add_argument(
        "--temperature", type=_types.positive_float, default=0.7, help="sampling temperature (default: 0.7)"
    )
    parser.add_argument(
        "--json-actions",
        action="store_true",
        help="use smolagents' JSON tool calls only (capable models); default: also plain-text actions, and the "
        "environment's first search, for small models",
    )
    parser.add_argument("--seed", type=_types.seed, default=0, help="random seed (default: 0)")


def run(args) -> int:
    from pathlib import Path

    from hfx.utils.artifacts import resolve_model

    # every input is checked before torch, smolagents or the model are loaded
    if not args.question.strip():
        raise ValueError("`QUESTION` is empty")
    if args.corpus is not None and not Path(args.corpus).is_file():
        raise FileNotFoundError(f"`--corpus` {args.corpus!r} is not a file (expected JSON lines of {{title, text}})")
    if args.model is not None:
        args.model = resolve_model(
            args.model, arg="--model", allowed=("transformers:causal_lm",), what="a causal LM folder or Hub id"
        )
    import torch

    from hfx.agents.heavy import BatchedTransformersModel, LocalCorpus, heavy, search_tools
    from hfx.agents.heavy.prompts import (
        SOLVER_SYSTEM_PROMPT,
        TEXT_ACTION_SOLVER_PROMPT,
        TEXT_ACTION_VERIFIER_PROMPT,
        VERIFIER_SYSTEM_PROMPT,
    )
    from hfx.agents.heavy.questions import load_dbpedia_pages
    from hfx.models import load_causal_lm

    torch.manual_seed(args.seed)
    if args.corpus is not None:
        corpus = LocalCorpus.from_jsonl(args.corpus, retriever=args.retriever)
    else:
        corpus = LocalCorpus(load_dbpedia_pages(), retriever=args.retriever)
    lm, tok = load_causal_lm(args.model)
    model = BatchedTransformersModel(
        lm,
        tok,
        max_new_tokens=args.max_new_tokens,
        text_actions=not args.json_actions,
        do_sample=True,
        temperature=args.temperature,
        top_p=0.95,
    )
    small = not args.json_actions
    result = heavy(
        args.question,
        model,
        search_tools(corpus, top_k=3, snippet_chars=120),
        num_trajectories=args.k,
        solver_tool_budget=args.solver_budget,
        verifier_tool_budget=args.verifier_budget,
        verify=args.selector != "majority",
        selector=args.selector,
        solver_rounds=args.rounds,
        initial_search=small,
        system_prompt=TEXT_ACTION_SOLVER_PROMPT if small else SOLVER_SYSTEM_PROMPT,
        verifier_system_prompt=TEXT_ACTION_VERIFIER_PROMPT if small else VERIFIER_SYSTEM_PROMPT,
    )
    for k, (answer, score) in enumerate(zip(result.answers, result.scores, strict=True)):
        shown = "-" if score is None else f"{score:.2f}"
        print(f"[{k + 1}] score {shown}  {answer}")
    print(result.answer)
    s, v = result.solver_cost, result.verifier_cost
    print(
        f"[heavy K={args.k} {args.selector}: solver {s.tool_calls} tool calls, {s.total_tokens} tokens; verifier "
        f"{v.tool_calls} tool calls, {v.total_tokens} tokens; {result.wall_time:.1f} s]"
    )
    return 0
