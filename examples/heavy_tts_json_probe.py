"""Can the embedded SmolLM2-135M drive smolagents' JSON tool-calling loop? Counts parsed tool calls (issue 20, item 5).

Runs the default ``solve`` (smolagents ``ToolCallingAgent``, JSON actions, no help from the environment) on the first
N dev questions of the DBpedia two-hop set and prints how many model outputs became tool calls. This is why the
benchmark uses ``text_actions=True`` and ``initial_search=True``.

    OMP_NUM_THREADS=1 python examples/heavy_tts_json_probe.py --limit 3
"""

import argparse
import json

import torch

from hfx.agents.heavy import BatchedTransformersModel, LocalCorpus, grade, search_tools, solve
from hfx.agents.heavy.questions import build_questions, load_dbpedia_pages
from hfx.models import load_default_model


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--limit", type=int, default=3)
    p.add_argument("--tool-budget", type=int, default=2)
    args = p.parse_args()
    torch.manual_seed(0)
    pages = load_dbpedia_pages()
    questions = build_questions(pages)["dev"][: args.limit]
    lm, tok = load_default_model()
    model = BatchedTransformersModel(lm, tok, max_new_tokens=48, do_sample=True, temperature=0.7, top_p=0.95)
    tools = search_tools(LocalCorpus(pages))
    calls = tool_calls = answered = correct = 0
    for q in questions:
        t = solve(q.question, model, tools, tool_budget=args.tool_budget)
        calls += t.cost.model_calls
        tool_calls += t.cost.tool_calls + t.cost.refused_tool_calls
        answered += t.answer is not None
        correct += grade(t.final, q.answer)
    print(
        json.dumps(
            {
                "questions": len(questions),
                "model_calls": calls,
                "tool_calls_parsed": tool_calls,
                "final_answer_tool_used": answered,
                "correct": correct,
            }
        )
    )


if __name__ == "__main__":
    main()
