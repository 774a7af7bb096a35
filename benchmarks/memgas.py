"""MemGAS vs baselines on a long-memory benchmark built from real dialogues (HH-RLHF, MT-Bench) with planted facts.

Stages (each resumable; caches and partial results under ``outputs/memgas/``):

* ``units``: the LLM summaries and keywords of every distinct session, written by the embedded SmolLM2-135M-Instruct
  (greedy, MemGAS's prompts), cached by session text; built memories reuse them, so no arm pays for them twice.
* ``dev``: hyper-parameter choice on the dev conversations only (never reported): router temperature, PPR damping,
  seed count, GMM candidate count, by mean recall_all@{3,5} over the dev histories.
* ``retrieval``: recall_any / recall_all / ndcg_any @ k = 1, 3, 5, 10 on the test conversations at each history
  length, for MemGAS, its four ablations, flat turn-level and session-level dense retrieval and BM25 (MiniLM
  embeddings); paired bootstrap of MemGAS vs each arm.
* ``qa``: QA accuracy (every gold string in the reply) with SmolLM2-135M-Instruct answering from the top-3 sessions,
  on a seeded subset of test questions (the same ones at every history length), for MemGAS (LLM filter), MemGAS
  w/o filter, flat turn-level dense retrieval (its 3 best turns) and BM25.
* ``cost``: retrieval latency per query and build time per session, MemGAS vs flat turn-level dense retrieval,
  interleaved in one run (LLM unit generation timed separately, per session).

Writes ``benchmarks/results/memgas.json`` and ``docs/figures/memgas_recall.png``.

    OMP_NUM_THREADS=1 nice -n 5 python benchmarks/memgas.py
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch


ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "outputs" / "memgas"
RESULTS = ROOT / "benchmarks" / "results" / "memgas.json"
FIGURE = ROOT / "docs" / "figures" / "memgas_recall.png"
KS = (1, 3, 5, 10)

# MemGAS settings used throughout (the unit budgets are smaller than the library defaults to fit a 2-core CPU)
UNIT_SETTINGS = {
    "max_new_tokens_summary": 64,
    "max_new_tokens_keyword": 32,
    "max_new_tokens_filter": 128,
    "max_new_tokens_answer": 24,
    "max_session_chars": 2000,
}


def log(*args):
    print(f"[{time.strftime('%H:%M:%S')}]", *args, flush=True)


def session_text(messages) -> str:
    from hfx.memory.memgas.components import normalize_session

    return "\n".join(normalize_session(messages))


def key_of(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def load_json(path: Path, default):
    return json.loads(path.read_text()) if path.is_file() else default


def save_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False))
    tmp.replace(path)


# ----------------------------------------------------------------------------------------------------- stage: units
def stage_units(dataset, batch_size: int):
    from hfx.memory.memgas.components import as_chat_callable
    from hfx.memory.memgas.config import MemGASConfig

    cfg = MemGASConfig(**UNIT_SETTINGS)
    cache_path = OUT / "units.json"
    cache = load_json(cache_path, {})
    texts = {}
    for split in dataset.values():
        for row in split:
            for s in row["sessions"]:
                t = session_text(s)
                texts.setdefault(key_of(t), t)
    todo = [k for k in texts if k not in cache]
    log(f"units: {len(texts)} distinct sessions, {len(todo)} to generate")
    if not todo:
        return cache
    llm = as_chat_callable(None, batch_size=batch_size)
    for start in range(0, len(todo), batch_size):
        chunk = todo[start : start + batch_size]
        t0 = time.perf_counter()
        prompts = [cfg.summary_prompt.format(session=texts[k][: cfg.max_session_chars]) for k in chunk]
        summaries = llm.generate(prompts, max_new_tokens=cfg.max_new_tokens_summary)
        prompts = [cfg.keyword_prompt.format(session=texts[k][: cfg.max_session_chars]) for k in chunk]
        keywords = llm.generate(prompts, max_new_tokens=cfg.max_new_tokens_keyword)
        seconds = (time.perf_counter() - t0) / len(chunk)
        for k, s, kw in zip(chunk, summaries, keywords):
            cache[k] = {"summary": s, "keywords": kw, "seconds": seconds}
        save_json(cache_path, cache)
        log(f"units: {len(cache)}/{len(texts)} ({seconds:.1f} s per session, load {os.getloadavg()[0]:.1f})")
    return cache


# ------------------------------------------------------------------------------------------------------ memories
QUERY_TIME = ("router", "temperature", "entropy_normalization", "num_seednodes", "use_ppr", "damping", "use_filter")
_GRAPHS: dict = {}


def build_memory(kind: str, row, units, embedder, config_overrides=None):
    """A memory of one history; nothing calls an LLM here (MemGAS variants take the cached LLM units).

    MemGAS variants that differ only in query-time settings (router, PPR, filter, temperature, damping, seeds) share
    one built memory (embeddings + GMM graph); only the config's query-time fields are swapped.
    """
    from hfx.memory.memgas import BM25Memory, FlatDenseMemory, MemGAS, MemGASConfig

    sessions, ids = list(row["sessions"]), list(row["session_ids"])
    if kind == "flat_turn":
        memory = FlatDenseMemory("turn", embedder=embedder)
    elif kind == "session_dense":
        memory = FlatDenseMemory("session", embedder=embedder)
    elif kind == "bm25":
        memory = BM25Memory()
    else:
        ablation = kind.removeprefix("memgas_") if kind != "memgas" else "full"
        cfg = MemGASConfig.for_ablation(ablation, **UNIT_SETTINGS, **(config_overrides or {}))
        build_fields = {k: v for k, v in cfg.to_dict().items() if k not in QUERY_TIME}
        key = (row["conversation_id"], row["history_length"], json.dumps(build_fields, sort_keys=True))
        if key not in _GRAPHS:
            memory = MemGAS(cfg, embedder=embedder)
            keys = [key_of(session_text(s)) for s in sessions]
            memory.add_sessions(
                sessions,
                session_ids=ids,
                summaries=[units[k]["summary"] for k in keys],
                keywords=[units[k]["keywords"] for k in keys],
            )
            if len(_GRAPHS) > 64:
                _GRAPHS.clear()
            _GRAPHS[key] = memory
        memory = _GRAPHS[key]
        memory.config = cfg
        return memory
    memory.add_sessions(sessions, session_ids=ids)
    return memory


class CachedEmbedder:
    """Wraps the MiniLM embedder with a text -> vector cache (the same sessions recur across arms and lengths)."""

    def __init__(self, inner):
        from hfx.memory.memgas.components import TextEmbedder

        class _Wrapped(TextEmbedder):
            def encode(_, texts, show_progress_bar=None):
                missing = list(dict.fromkeys(t for t in texts if t not in self.cache))
                if missing:
                    for t, v in zip(missing, inner.encode(missing, show_progress_bar=False)):
                        self.cache[t] = v
                if not texts:
                    return torch.zeros(0, self.dim)
                return torch.stack([self.cache[t] for t in texts])

        self.cache: dict[str, torch.Tensor] = {}
        from hfx.memory.memgas.components import _st_dimension

        self.dim = _st_dimension(inner.model)
        self.embedder = _Wrapped(batch_size=inner.batch_size, name=inner.name)


def evaluate_retrieval(memory, row):
    from hfx.memory.memgas.metrics import retrieval_metrics

    questions = [q["question"] for q in row["qa"]]
    rankings = memory.rank_sessions(questions).tolist()
    index = {sid: i for i, sid in enumerate(row["session_ids"])}
    out = []
    for q, ranking in zip(row["qa"], rankings):
        evidence = [index[s] for s in q["evidence_session_ids"]]
        entry = {"type": q["question_type"]}
        for k in KS:
            for name, value in retrieval_metrics(ranking, evidence, k).items():
                entry[f"{name}@{k}"] = value
        out.append(entry)
    return out


# --------------------------------------------------------------------------------------------------- stage: dev
DEV_GRID = {
    "temperature": [0.05, 0.1, 0.2],
    "damping": [0.1, 0.3, 0.5],
    "num_seednodes": [8, 15, 30],
    "mem_threshold": [20, 30],
}


def stage_dev(dataset, units, embedder):
    """Coordinate search around the spec's defaults, on the dev conversations (never reported)."""
    path = OUT / "dev.json"
    done = load_json(path, {})
    best = {"temperature": 0.1, "damping": 0.1, "num_seednodes": 15, "mem_threshold": 30}

    def score(params):
        key = json.dumps(params, sort_keys=True)
        if key not in done:
            values = []
            for row in dataset["dev"]:
                memory = build_memory("memgas", row, units, embedder, params)
                values += [(e["recall_all@3"] + e["recall_all@5"]) / 2 for e in evaluate_retrieval(memory, row)]
            done[key] = float(np.mean(values))
            save_json(path, done)
        return done[key]

    base = score(best)
    for name, grid in DEV_GRID.items():
        for value in grid:
            trial = {**best, name: value}
            s = score(trial)
            if s > base + 1e-9:
                best, base = trial, s
        log(f"dev: after {name}: {best} -> {base:.3f}")
    return best, base


# --------------------------------------------------------------------------------------------- stage: retrieval
ARMS = ["memgas", "memgas_no_router", "memgas_no_gmm", "memgas_no_ppr", "flat_turn", "session_dense", "bm25"]


def stage_retrieval(dataset, units, embedder, params):
    path = OUT / "retrieval.json"
    done = load_json(path, {})
    for row in dataset["test"]:
        for arm in ARMS:
            key = f"{arm}|{row['conversation_id']}|{row['history_length']}"
            if key in done:
                continue
            memory = build_memory(arm, row, units, embedder, params if arm.startswith("memgas") else None)
            done[key] = evaluate_retrieval(memory, row)
        save_json(path, done)
        log(f"retrieval: {row['conversation_id']} L={row['history_length']} done")
    return done


def summarise_retrieval(done, lengths):
    from hfx.memory.memgas.metrics import bootstrap_interval, paired_bootstrap

    table = {}
    for length in lengths:
        per_arm = {}
        for arm in ARMS:
            entries = [
                e
                for key, v in sorted(done.items())
                if key.startswith(arm + "|") and key.endswith(f"|{length}")
                for e in v
            ]
            per_arm[arm] = entries
        block = {}
        for arm, entries in per_arm.items():
            stats = {"n": len(entries)}
            for metric in ("recall_all", "recall_any", "ndcg_any"):
                for k in KS:
                    vals = [e[f"{metric}@{k}"] for e in entries]
                    stats[f"{metric}@{k}"] = float(np.mean(vals))
                    if metric == "recall_all":
                        stats[f"{metric}@{k}_ci95"] = bootstrap_interval(vals)
            for qtype in ("single-session", "multi-hop", "aggregation"):
                vals = [e["recall_all@5"] for e in entries if e["type"] == qtype]
                stats[f"recall_all@5[{qtype}]"] = float(np.mean(vals)) if vals else None
            if arm != "memgas":
                stats["vs_memgas_recall_all@5"] = paired_bootstrap(
                    [e["recall_all@5"] for e in per_arm["memgas"]], [e["recall_all@5"] for e in entries]
                )
                stats["vs_memgas_recall_all@3"] = paired_bootstrap(
                    [e["recall_all@3"] for e in per_arm["memgas"]], [e["recall_all@3"] for e in entries]
                )
            block[arm] = stats
        table[str(length)] = block
    return table


# ----------------------------------------------------------------------------------------------------- stage: qa
QA_ARMS = ["memgas", "memgas_no_filter", "flat_turn", "bm25"]


def stage_qa(dataset, units, embedder, params, n_questions: int, seed: int, batch_size: int, qa_lengths=None):
    from hfx.memory.memgas.components import as_chat_callable
    from hfx.memory.memgas.metrics import answer_matches

    path = OUT / "qa.json"
    done = load_json(path, {})
    rng = np.random.default_rng(seed)
    rows = list(dataset["test"])
    all_q = sorted({(r["conversation_id"], i) for r in rows for i in range(len(r["qa"]))})
    pick = sorted(all_q[j] for j in rng.choice(len(all_q), size=min(n_questions, len(all_q)), replace=False))
    llm = as_chat_callable(None, batch_size=batch_size)
    for length in sorted({r["history_length"] for r in rows}):
        if qa_lengths and length not in qa_lengths:
            continue
        for arm in QA_ARMS:
            todo = [(c, i) for c, i in pick if f"{arm}|{c}|{i}|{length}" not in done]
            if not todo:
                continue
            t0 = time.perf_counter()
            for conv in sorted({c for c, _ in todo}):
                row = next(r for r in rows if r["conversation_id"] == conv and r["history_length"] == length)
                memory = build_memory(arm, row, units, embedder, params if arm.startswith("memgas") else None)
                memory._llm = memory._answerer = memory._memory_filter = llm
                idx = [i for c, i in todo if c == conv]
                answers = memory.answer_batch([row["qa"][i]["question"] for i in idx])
                for i, a in zip(idx, answers):
                    gold = row["qa"][i]["answers"]
                    done[f"{arm}|{conv}|{i}|{length}"] = {
                        "correct": bool(answer_matches(a.answer, gold)),
                        "answer": a.answer,
                        "gold": gold,
                        "type": row["qa"][i]["question_type"],
                        "context_has_gold": bool(answer_matches(a.context, gold)),
                    }
                save_json(path, done)
            log(f"qa: L={length} {arm}: {len(todo)} questions in {time.perf_counter() - t0:.0f} s")
    return done, pick


def summarise_qa(done, pick, lengths):
    from hfx.memory.memgas.metrics import paired_bootstrap, wilson_interval

    table = {}
    for length in lengths:
        block = {}
        per_arm = {}
        for arm in QA_ARMS:
            entries = [done.get(f"{arm}|{c}|{i}|{length}") for c, i in pick]
            if any(e is None for e in entries):
                continue
            per_arm[arm] = entries
            correct = sum(e["correct"] for e in entries)
            block[arm] = {
                "n": len(entries),
                "accuracy": correct / len(entries),
                "accuracy_wilson95": wilson_interval(correct, len(entries)),
                "gold_in_context": float(np.mean([e["context_has_gold"] for e in entries])),
            }
        if "memgas" in per_arm:
            for arm, entries in per_arm.items():
                if arm != "memgas":
                    block[arm]["vs_memgas"] = paired_bootstrap(
                        [e["correct"] for e in per_arm["memgas"]], [e["correct"] for e in entries]
                    )
        table[str(length)] = block
    return table


# --------------------------------------------------------------------------------------------------- stage: cost
def stage_cost(dataset, units, embedder_inner, params, repeats: int):
    """Latency per query and build time per session, MemGAS vs flat turn dense, interleaved (fresh embeddings)."""
    from hfx.memory.memgas import FlatDenseMemory, MemGAS, MemGASConfig

    row = max(dataset["test"], key=lambda r: r["history_length"])
    sessions, ids = list(row["sessions"]), list(row["session_ids"])
    keys = [key_of(session_text(s)) for s in sessions]
    questions = [q["question"] for q in row["qa"]]
    cfg = MemGASConfig(**UNIT_SETTINGS, **params)
    build = {"memgas": [], "flat_turn": []}
    latency = {"memgas": [], "flat_turn": []}
    for _ in range(repeats):
        for arm in ("memgas", "flat_turn"):
            t0 = time.perf_counter()
            if arm == "memgas":
                memory = MemGAS(cfg, embedder=embedder_inner)
                memory.add_sessions(
                    sessions,
                    session_ids=ids,
                    summaries=[units[k]["summary"] for k in keys],
                    keywords=[units[k]["keywords"] for k in keys],
                )
            else:
                memory = FlatDenseMemory("turn", embedder=embedder_inner)
                memory.add_sessions(sessions, session_ids=ids)
            build[arm].append((time.perf_counter() - t0) / len(sessions))
            memory.retrieve(questions[0])  # warm-up
            t0 = time.perf_counter()
            for q in questions:
                memory.retrieve(q)
            latency[arm].append((time.perf_counter() - t0) / len(questions))
    llm_seconds = [v["seconds"] for v in units.values() if "seconds" in v]
    med = {k: {a: statistics.median(v) for a, v in d.items()} for k, d in (("build", build), ("latency", latency))}
    return {
        "history_length": row["history_length"],
        "repeats": repeats,
        "build_s_per_session": med["build"],
        "build_ratio_excluding_llm": med["build"]["memgas"] / med["build"]["flat_turn"],
        "llm_units_s_per_session": statistics.median(llm_seconds) if llm_seconds else None,
        "build_ratio_including_llm": (
            (med["build"]["memgas"] + statistics.median(llm_seconds)) / med["build"]["flat_turn"]
            if llm_seconds
            else None
        ),
        "retrieval_s_per_query": med["latency"],
        "retrieval_latency_ratio": med["latency"]["memgas"] / med["latency"]["flat_turn"],
        "loadavg": os.getloadavg(),
    }


# ---------------------------------------------------------------------------------------------------------- plot
def plot(table, qa_table, lengths):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = {
        "memgas": "MemGAS",
        "memgas_no_router": "w/o router",
        "memgas_no_gmm": "w/o GMM (top-5)",
        "memgas_no_ppr": "w/o PPR",
        "memgas_no_filter": "w/o filter",
        "flat_turn": "flat turn dense",
        "session_dense": "session dense",
        "bm25": "BM25",
    }
    fig, axes = plt.subplots(1, 2 if qa_table else 1, figsize=(11 if qa_table else 6, 4), squeeze=False)
    ax = axes[0, 0]
    for arm in ARMS:
        ys = [table[str(L)][arm]["recall_all@5"] for L in lengths]
        lo = [
            table[str(L)][arm]["recall_all@5"] - table[str(L)][arm].get("recall_all@5_ci95", (0, 0))[0]
            for L in lengths
        ]
        hi = [
            table[str(L)][arm].get("recall_all@5_ci95", (0, 0))[1] - table[str(L)][arm]["recall_all@5"]
            for L in lengths
        ]
        style = "-" if arm == "memgas" else ("--" if arm.startswith("memgas") else ":")
        ax.errorbar(
            lengths, ys, yerr=[lo, hi] if arm == "memgas" else None, marker="o", ls=style, label=labels[arm], capsize=3
        )
    ax.set_xlabel("history length (sessions)")
    ax.set_ylabel("recall_all@5")
    ax.set_xticks(lengths)
    ax.set_title("Retrieval (test questions, 95% bootstrap CI for MemGAS)")
    ax.legend(fontsize=7)
    if qa_table:
        ax = axes[0, 1]
        arms = [a for a in QA_ARMS if all(a in qa_table[str(L)] for L in lengths)]
        width = 0.8 / max(1, len(arms))
        for j, arm in enumerate(arms):
            acc = [qa_table[str(L)][arm]["accuracy"] for L in lengths]
            lo = [a - qa_table[str(L)][arm]["accuracy_wilson95"][0] for a, L in zip(acc, lengths)]
            hi = [qa_table[str(L)][arm]["accuracy_wilson95"][1] - a for a, L in zip(acc, lengths)]
            ax.bar(np.arange(len(lengths)) + j * width, acc, width, yerr=[lo, hi], capsize=2, label=labels[arm])
        ax.set_xticks(np.arange(len(lengths)) + 0.4 - width / 2, [str(L) for L in lengths])
        ax.set_xlabel("history length (sessions)")
        ax.set_ylabel("QA accuracy (SmolLM2-135M answers)")
        ax.set_title("QA (Wilson 95% CI)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    FIGURE.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(FIGURE, dpi=90)
    log(f"wrote {FIGURE} ({FIGURE.stat().st_size // 1024} KB)")


# ---------------------------------------------------------------------------------------------------------- main
def _without_stages(args: list[str]) -> list[str]:
    """The command line without ``--stages X`` (stages only split one run into resumable parts)."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == "--stages":
            skip = True
        elif not a.startswith("--stages="):
            out.append(a)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--stages", default="units,dev,retrieval,qa,cost")
    parser.add_argument("--history-lengths", type=int, nargs="+", default=[10, 20, 40])
    parser.add_argument("--conversations", type=int, default=8)
    parser.add_argument("--dev-conversations", type=int, default=2)
    parser.add_argument("--qa-questions", type=int, default=16, help="test questions answered per history length")
    parser.add_argument(
        "--qa-history-lengths",
        type=int,
        nargs="+",
        default=None,
        help="history lengths the QA stage answers at (default: all; the LLM answering is the slow part on a CPU)",
    )
    parser.add_argument("--llm-batch-size", type=int, default=8)
    parser.add_argument("--cost-repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    stages = set(args.stages.split(","))
    torch.manual_seed(args.seed)
    from hfx.memory.memgas import build_long_memory_benchmark
    from hfx.memory.memgas.components import as_embedder

    t_start = time.perf_counter()
    dataset = build_long_memory_benchmark(
        args.data_dir,
        history_lengths=tuple(args.history_lengths),
        num_conversations=args.conversations,
        num_dev_conversations=args.dev_conversations,
        seed=args.seed,
    )
    lengths = sorted(set(args.history_lengths))
    units = stage_units(dataset, args.llm_batch_size) if "units" in stages else load_json(OUT / "units.json", {})
    inner = as_embedder(None)
    cached = CachedEmbedder(inner)
    embedder = cached.embedder
    results = load_json(RESULTS, {})
    walls = results.setdefault("stage_wall_s", {})
    walls["units (LLM summaries + keywords, all distinct sessions)"] = sum(v.get("seconds", 0) for v in units.values())
    t0 = time.perf_counter()
    if "dev" in stages:
        params, dev_score = stage_dev(dataset, units, embedder)
        walls["dev"] = time.perf_counter() - t0
        results["dev_choice"] = {"params": params, "dev_mean_recall_all@3,5": dev_score, "grid": DEV_GRID}
        save_json(RESULTS, results)
    params = results.get("dev_choice", {}).get("params", {})
    if "retrieval" in stages:
        t0 = time.perf_counter()
        done = stage_retrieval(dataset, units, embedder, params)
        walls["retrieval"] = time.perf_counter() - t0
        results["retrieval"] = summarise_retrieval(done, lengths)
        save_json(RESULTS, results)
    if "qa" in stages:
        t0 = time.perf_counter()
        done, pick = stage_qa(
            dataset,
            units,
            embedder,
            params,
            args.qa_questions,
            args.seed,
            args.llm_batch_size,
            args.qa_history_lengths,
        )
        walls["qa"] = time.perf_counter() - t0
        results["qa"] = summarise_qa(done, pick, lengths)
        save_json(RESULTS, results)
    if "cost" in stages:
        t0 = time.perf_counter()
        results["cost"] = stage_cost(dataset, units, inner, params, args.cost_repeats)
        walls["cost"] = time.perf_counter() - t0
        save_json(RESULTS, results)
    n_test_q = sum(len(r["qa"]) for r in dataset["test"]) // len(lengths)
    retrieval = results.get("retrieval", {})
    results.update(
        {
            "metric": "recall_all@5 of MemGAS on the built long-memory benchmark (test split), per history length",
            "value": {L: retrieval[str(L)]["memgas"]["recall_all@5"] for L in lengths if str(L) in retrieval},
            "goal": "MemGAS >= every baseline (paired bootstrap, 95 %); cost ratios reported, no goal",
            "command": " ".join(
                ["OMP_NUM_THREADS=1 nice -n 5 python benchmarks/memgas.py", *_without_stages(argv or sys.argv[1:])]
            ).strip(),
            "date": datetime.date.today().isoformat(),
            "setup": {
                "history_lengths": lengths,
                "test_conversations": args.conversations,
                "dev_conversations": args.dev_conversations,
                "test_questions_per_length": n_test_q,
                "qa_questions_per_length": args.qa_questions,
                "qa_history_lengths": args.qa_history_lengths or lengths,
                "embedder": "sentence-transformers/all-MiniLM-L6-v2 (offline)",
                "llm": "HuggingFaceTB/SmolLM2-135M-Instruct (embedded, greedy)",
                "unit_settings": UNIT_SETTINGS,
                "seed": args.seed,
            },
            "loadavg_end": os.getloadavg(),
            "wall_s_this_invocation": time.perf_counter() - t_start,
        }
    )
    save_json(RESULTS, results)
    if retrieval:
        plot(retrieval, results.get("qa"), lengths)
    log(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
