"""Heavy test-time scaling at small scale: accuracy vs total compute on a local two-hop question set (issue 20, item 5).

SmolLM2-135M-Instruct (the embedded default) as solver and verifier, offline BM25 search over the 1,500 DBpedia pages of
../shared/data (see :mod:`hfx.agents.heavy.questions` for the question set). Per question, K_max trajectories are
sampled once (batched: :class:`~hfx.agents.heavy.BatchedTransformersModel`, several questions at a time); solve,
majority@K and Heavy@K for K = 2, 4, 8 are read off the same samples (the first K), each distinct answer is verified
once (its score is shared by every K), and the first ``--bf-trajectories`` trajectories continue with 1..R
budget-forcing rounds. Compute = total tokens (prompt + generated, every model call) per question, solver + verifier.

The selector used for the headline Heavy@K is chosen on the dev split (never reported as a result); 95 % intervals
are percentile bootstraps over questions (paired for differences). Partial results are written after every chunk.

    OMP_NUM_THREADS=1 nice -n 5 python benchmarks/heavy_tts.py --dev 8 --test-limit 60 --max-minutes 45
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
from datetime import date
from pathlib import Path

import torch


SELECTOR_SETTINGS = {
    "score_argmax": {"selector": "score_argmax"},
    "weighted_vote": {"selector": "weighted_vote"},
    "best_of_k": {"selector": "best_of_k", "accept_threshold": 1.0},
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dev", type=int, default=4, help="dev questions (selector choice)")
    p.add_argument("--test-limit", type=int, default=60, help="test questions at most")
    p.add_argument("--k", type=int, default=8, help="trajectories per question (K_max)")
    p.add_argument("--ks", type=int, nargs="+", default=[2, 4, 8])
    p.add_argument("--bf-trajectories", type=int, default=1, help="trajectories that continue with budget forcing")
    p.add_argument("--rounds", type=int, default=3, help="budget-forcing rounds")
    p.add_argument("--solver-budget", type=int, default=2)
    p.add_argument("--verifier-budget", type=int, default=1)
    p.add_argument("--max-new-tokens", type=int, default=40, help="solver tokens per model call")
    p.add_argument("--verifier-max-new-tokens", type=int, default=16)
    p.add_argument("--top-k", type=int, default=2, help="search results per query")
    p.add_argument("--snippet-chars", type=int, default=100, help="characters of each search result")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--top-p", type=float, default=0.95)
    p.add_argument("--questions-per-batch", type=int, default=2)
    p.add_argument("--max-minutes", type=float, default=45.0, help="stop starting new chunks after this")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="benchmarks/results/heavy_tts.json")
    p.add_argument("--raw", default="outputs/heavy_tts/raw.jsonl")
    p.add_argument("--figure", default="docs/figures/heavy_tts.png")
    p.add_argument(
        "--from-raw",
        default=None,
        help="recompute the results JSON and figure from a --raw file of an earlier run (no model is loaded)",
    )
    return p.parse_args(argv)


def run_chunk(questions, model, verifier_model, tools, args, prompts):
    """K trajectories per question (the first bf ones with R forcing rounds), then one verification per answer."""
    from hfx.agents.heavy import normalize_answer, solve_budget_forcing, verify

    solver_prompt, verifier_prompt = prompts
    jobs = [(qi, k) for qi in range(len(questions)) for k in range(args.k)]
    trajectories = {}

    def solver_job(qi, k):
        try:
            trajectories[(qi, k)] = solve_budget_forcing(
                questions[qi].question,
                model,
                tools,
                tool_budget=args.solver_budget,
                rounds=args.rounds if k < args.bf_trajectories else 0,
                system_prompt=solver_prompt,
                initial_search=True,
            )
        finally:
            model.leave()

    _threads(model, [lambda qi=qi, k=k: solver_job(qi, k) for qi, k in jobs])
    records = []
    verify_jobs = []
    for qi, q in enumerate(questions):
        trajs = [trajectories[(qi, k)] for k in range(args.k)]
        answers0 = [t.answers[0] or "" for t in trajs]
        distinct = list(dict.fromkeys(normalize_answer(a) for a in answers0))
        rep = {key: answers0[[normalize_answer(a) for a in answers0].index(key)] for key in distinct}
        records.append({"q": q, "trajs": trajs, "answers0": answers0, "distinct": distinct, "rep": rep, "ver": {}})
        verify_jobs += [(qi, key) for key in distinct]

    def verify_job(qi, key):
        try:
            r = records[qi]
            r["ver"][key] = verify(
                questions[qi].question,
                r["rep"][key],
                verifier_model,
                tools,
                tool_budget=args.verifier_budget,
                system_prompt=verifier_prompt,
                initial_search=True,
            )
        finally:
            verifier_model.leave()

    _threads(verifier_model, [lambda qi=qi, key=key: verify_job(qi, key) for qi, key in verify_jobs])
    return [_summarise(r, args) for r in records]


def _threads(model, jobs):
    model.expect(len(jobs))
    errors = []

    def wrap(job):
        try:
            job()
        except Exception as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=wrap, args=(j,)) for j in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def _summarise(r, args) -> dict:
    from hfx.agents.heavy import grade, normalize_answer

    q = r["q"]
    trajs = r["trajs"]
    return {
        "id": q.id,
        "question": q.question,
        "answer": q.answer,
        "title": q.title,
        "answers0": r["answers0"],
        "correct0": [grade(a, q.answer) for a in r["answers0"]],
        "cost0": [t.round_costs[0].to_dict() for t in trajs],
        "gave_answer0": [t.answers[0] is not None and t.answer is not None or bool(t.answers[0]) for t in trajs],
        "bf_answers": [t.answers for t in trajs[: args.bf_trajectories]],
        "bf_correct": [[grade(a, q.answer) for a in t.answers] for t in trajs[: args.bf_trajectories]],
        "bf_costs": [[c.to_dict() for c in t.round_costs] for t in trajs[: args.bf_trajectories]],
        "bf_tool_calls": [t.cost.tool_calls for t in trajs[: args.bf_trajectories]],
        "keys0": [normalize_answer(a) for a in r["answers0"]],
        "verifier": {
            key: {"score": v.score, "raw": v.raw, "cost": v.cost.to_dict(), "correct": grade(r["rep"][key], q.answer)}
            for key, v in r["ver"].items()
        },
    }


def evaluate(rows, ks, bf_rounds) -> dict:
    """Accuracy and mean compute per arm: lists of per-question (correct, tokens, tool calls, output tokens)."""
    from hfx.agents.heavy import select

    arms = {}

    def add(name, correct, tokens, tools, out_tokens):
        a = arms.setdefault(name, {"correct": [], "tokens": [], "tool_calls": [], "output_tokens": []})
        a["correct"].append(float(correct))
        a["tokens"].append(float(tokens))
        a["tool_calls"].append(float(tools))
        a["output_tokens"].append(float(out_tokens))

    for row in rows:
        c0 = row["cost0"]
        k_all = len(row["answers0"])
        add(
            "solve",
            sum(row["correct0"]) / k_all,
            sum(c["total_tokens"] for c in c0) / k_all,
            sum(c["tool_calls"] for c in c0) / k_all,
            sum(c["output_tokens"] for c in c0) / k_all,
        )
        for r in range(1, bf_rounds + 1):
            n = len(row["bf_correct"])
            add(
                f"budget_forcing_{r}",
                sum(b[r] for b in row["bf_correct"]) / n,
                sum(cs[r]["total_tokens"] for cs in row["bf_costs"]) / n,
                sum(cs[r]["tool_calls"] for cs in row["bf_costs"]) / n,
                sum(cs[r]["output_tokens"] for cs in row["bf_costs"]) / n,
            )
        for K in ks:
            answers, keys = row["answers0"][:K], row["keys0"][:K]
            solver_tokens = sum(c["total_tokens"] for c in c0[:K])
            solver_tools = sum(c["tool_calls"] for c in c0[:K])
            solver_out = sum(c["output_tokens"] for c in c0[:K])
            i = select(answers, selector="majority")
            add(f"majority@{K}", row["correct0"][i], solver_tokens, solver_tools, solver_out)
            add(f"pass@{K}", any(row["correct0"][:K]), solver_tokens, solver_tools, solver_out)
            order = list(dict.fromkeys(keys))
            for name, settings in SELECTOR_SETTINGS.items():
                verified = order
                if name == "best_of_k":  # verification stops at the first accepted candidate
                    verified = []
                    for key in order:
                        verified.append(key)
                        s = row["verifier"][key]["score"]
                        if (s if s is not None else 0.0) >= settings["accept_threshold"]:
                            break
                scores = [row["verifier"][k]["score"] if k in verified else None for k in keys]
                i = select(answers, scores, **settings)
                v = [row["verifier"][k]["cost"] for k in verified]
                add(
                    f"heavy_{name}@{K}",
                    row["correct0"][i],
                    solver_tokens + sum(c["total_tokens"] for c in v),
                    solver_tools + sum(c["tool_calls"] for c in v),
                    solver_out + sum(c["output_tokens"] for c in v),
                )
    return arms


def bootstrap(values, seed=0, n=2000):
    rng = random.Random(seed)
    m = len(values)
    if m == 0:
        return [float("nan"), float("nan")]
    means = sorted(sum(values[rng.randrange(m)] for _ in range(m)) / m for _ in range(n))
    return [means[int(0.025 * n)], means[int(0.975 * n) - 1]]


def summary(arms) -> dict:
    out = {}
    for name, a in arms.items():
        n = len(a["correct"])
        out[name] = {
            "accuracy": sum(a["correct"]) / n,
            "ci95": bootstrap(a["correct"]),
            "mean_total_tokens": sum(a["tokens"]) / n,
            "mean_output_tokens": sum(a["output_tokens"]) / n,
            "mean_tool_calls": sum(a["tool_calls"]) / n,
            "n": n,
        }
    return out


def paired(arms, a, b) -> dict:
    d = [x - y for x, y in zip(arms[a]["correct"], arms[b]["correct"], strict=True)]
    return {"difference": sum(d) / len(d), "ci95": bootstrap(d, seed=1), "n": len(d)}


def plot(test, chosen, ks, rounds, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))

    def line(names, label, marker):
        xs = [test[n]["mean_total_tokens"] for n in names]
        ys = [100 * test[n]["accuracy"] for n in names]
        lo = [100 * (test[n]["accuracy"] - test[n]["ci95"][0]) for n in names]
        hi = [100 * (test[n]["ci95"][1] - test[n]["accuracy"]) for n in names]
        ax.errorbar(xs, ys, yerr=[lo, hi], marker=marker, capsize=3, label=label)

    line(["solve"] + [f"budget_forcing_{r}" for r in range(1, rounds + 1)], "solve, budget forcing 1..R", "s")
    line(["solve"] + [f"majority@{k}" for k in ks], "majority@K", "o")
    line(["solve"] + [f"heavy_{chosen}@{k}" for k in ks], f"Heavy@K ({chosen})", "^")
    ax.set_xscale("log")
    ax.set_xlabel("total tokens per question (prompt + generated, solver + verifier)")
    ax.set_ylabel("accuracy (%), 95% CI")
    ax.set_title("SmolLM2-135M search agent, DBpedia two-hop questions (test)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.from_raw:
        return from_raw(args, argv)
    from hfx.agents.heavy import BatchedTransformersModel, LocalCorpus, search_tools
    from hfx.agents.heavy.prompts import TEXT_ACTION_SOLVER_PROMPT, TEXT_ACTION_VERIFIER_PROMPT
    from hfx.agents.heavy.questions import build_questions, load_dbpedia_pages
    from hfx.models import load_default_model

    started = time.time()
    torch.manual_seed(args.seed)
    pages = load_dbpedia_pages()
    split = build_questions(pages, seed=args.seed, dev_size=args.dev)
    tools = search_tools(LocalCorpus(pages), top_k=args.top_k, snippet_chars=args.snippet_chars)
    lm, tok = load_default_model()
    model = BatchedTransformersModel(
        lm,
        tok,
        max_new_tokens=args.max_new_tokens,
        max_batch_size=args.k * args.questions_per_batch,
        max_wait=2.0,
        text_actions=True,
        do_sample=True,
        temperature=args.temperature,
        top_p=args.top_p,
    )
    verifier_model = BatchedTransformersModel(
        lm,
        tok,
        max_new_tokens=args.verifier_max_new_tokens,
        max_batch_size=args.k * args.questions_per_batch,
        max_wait=2.0,
        text_actions=True,
        do_sample=True,
        temperature=args.temperature,
        top_p=args.top_p,
    )
    prompts = (TEXT_ACTION_SOLVER_PROMPT, TEXT_ACTION_VERIFIER_PROMPT)
    raw_path = Path(args.raw)
    raw_path.parent.mkdir(parents=True, exist_ok=True)
    rows = {"dev": [], "test": []}
    queue = [("dev", q) for q in split["dev"]] + [("test", q) for q in split["test"][: args.test_limit]]
    command = "OMP_NUM_THREADS=1 python benchmarks/heavy_tts.py " + " ".join(sys.argv[1:] if argv is None else argv)
    with open(raw_path, "w", encoding="utf-8") as raw:
        while queue:
            if (time.time() - started) / 60 > args.max_minutes:
                print(f"time limit reached: {len(queue)} questions not run", flush=True)
                break
            chunk, queue = queue[: args.questions_per_batch], queue[args.questions_per_batch :]
            t0 = time.time()
            results = run_chunk([q for _, q in chunk], model, verifier_model, tools, args, prompts)
            for (name, _), res in zip(chunk, results, strict=True):
                res["split"] = name
                rows[name].append(res)
                raw.write(json.dumps(res) + "\n")
            raw.flush()
            done = len(rows["dev"]) + len(rows["test"])
            print(
                f"{done} questions ({len(rows['test'])} test), chunk {time.time() - t0:.0f} s, "
                f"load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
            write_results(rows, args, command, started)
    write_results(rows, args, command, started, final=True, not_run=len(queue))
    return 0


def from_raw(args, argv) -> int:
    """Results JSON + figure from the per-question rows of an earlier run (same --ks / --rounds / --k)."""
    rows = {"dev": [], "test": []}
    with open(args.from_raw, encoding="utf-8") as raw:
        for line in raw:
            if line.strip():
                row = json.loads(line)
                rows[row["split"]].append(row)
    from hfx.agents.heavy.questions import build_questions, load_dbpedia_pages

    split = build_questions(load_dbpedia_pages(), seed=args.seed, dev_size=args.dev)
    planned = len(split["dev"]) + len(split["test"][: args.test_limit])
    command = "OMP_NUM_THREADS=1 python benchmarks/heavy_tts.py " + " ".join(sys.argv[1:] if argv is None else argv)
    write_results(rows, args, command, None, final=True, not_run=planned - len(rows["dev"]) - len(rows["test"]))
    return 0


def write_results(rows, args, command, started, final=False, not_run=None):
    dev = summary(evaluate(rows["dev"], args.ks, args.rounds)) if rows["dev"] else {}
    test = summary(evaluate(rows["test"], args.ks, args.rounds)) if rows["test"] else {}
    chosen = "score_argmax"
    if dev:
        chosen = max(
            SELECTOR_SETTINGS,
            key=lambda s: (sum(dev[f"heavy_{s}@{k}"]["accuracy"] for k in args.ks), s == "score_argmax"),
        )
    k_max = max(args.ks)
    result = {
        "metric": f"test accuracy of Heavy@{k_max} ({chosen}, chosen on dev) minus majority@{k_max}, same samples",
        "value": None,
        "goal": "> 0 with a 95% interval above 0 (the paper's claim: a modest verifier budget beats more sampling)",
        "command": command,
        "date": date.today().isoformat(),
        "loadavg": list(os.getloadavg()),
        "wall_minutes": None if started is None else round((time.time() - started) / 60, 1),
        "complete": final and not not_run,
        "questions_not_run": not_run,
        "settings": vars(args),
        "n_dev": len(rows["dev"]),
        "n_test": len(rows["test"]),
        "chosen_selector": chosen,
        "test": test,
        "dev": dev,
    }
    if test:
        arms = evaluate(rows["test"], args.ks, args.rounds)
        result["paired"] = {
            f"heavy_{chosen}@{k}-majority@{k}": paired(arms, f"heavy_{chosen}@{k}", f"majority@{k}") for k in args.ks
        }
        result["paired"].update(
            {
                f"budget_forcing_{r}-solve": paired(arms, f"budget_forcing_{r}", "solve")
                for r in range(1, args.rounds + 1)
            }
        )
        result["value"] = result["paired"][f"heavy_{chosen}@{k_max}-majority@{k_max}"]["difference"]
        n_steps = [c["tool_calls"] for r in rows["test"] for c in r["cost0"]]
        result["solver_tool_calls_mean"] = sum(n_steps) / len(n_steps)
        if final:
            plot(test, chosen, args.ks, args.rounds, args.figure)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
