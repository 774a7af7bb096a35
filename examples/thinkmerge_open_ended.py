"""ThinkMerge on an open-ended task where majority vote does not apply: MT-Bench questions scored by reference similarity.

    OMP_NUM_THREADS=1 python examples/thinkmerge_open_ended.py --max-minutes 30

Task: the 30 MT-Bench questions that ship a GPT-4 reference answer (``../shared/data/mt_bench``; math, reasoning,
coding), both turns (turn 2 sees turn 1 with the *reference* turn-1 answer, so every unit has a fixed context):
60 units. The answers are free text, so there is nothing to vote over — the paper's point for ThinkMerge. Score: the
cosine similarity of all-MiniLM-L6-v2 embeddings between the model's answer and the reference answer (a cheap,
offline reference-similarity judge; in [-1, 1], higher is closer to the reference).

Per unit, SmolLM2-135M-Instruct (the embedded default) thinks, then answers after ``Final answer:``:

* ``greedy``          -- one greedy trace and its greedy answer;
* ``single``          -- the mean score of the K=8 independent answers (each answers from its own sampled trace): the
  expected score of one sampled trace, the fair baseline at equal sampling temperature;
* ``thinkmerge@4/8``  -- one answer decoded from the averaged next-token logits of the first 4 / all 8 traces.

The K traces are shared by every K-strategy (same prompt stream, same seeds). Sampling settings (T=0.7, top-p 0.95,
48 thinking tokens) are those chosen for the arithmetic task (``examples/thinkmerge_arithmetic.py``); nothing was tuned
on these questions. Paired comparisons: bootstrap 95 % interval of the mean score difference over units (10,000
resamples) and the Wilcoxon signed-rank p-value. The JSON is rewritten after every batch; ``--max-minutes`` stops
starting new batches (the ``n`` used is reported).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch
from scipy.stats import wilcoxon

from hfx.generation.thinkmerge import thinkmerge
from hfx.models import load_default_model
from hfx.models.default import default_sentence_encoder_path


DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "mt_bench"
FINAL = "Final answer:"
ARMS = ("greedy", "single", "thinkmerge@4", "thinkmerge@8")
PAIRS = (
    ("thinkmerge@4", "single"),
    ("thinkmerge@8", "single"),
    ("thinkmerge@8", "thinkmerge@4"),
    ("thinkmerge@4", "greedy"),
    ("thinkmerge@8", "greedy"),
    ("greedy", "single"),
)


def load_units(data_dir: Path) -> list[dict]:
    """One unit per (question, turn) with a reference: ``messages`` (chat history ending in the user turn), ``reference``."""
    if not data_dir.is_dir():
        raise FileNotFoundError(f"MT-Bench folder not found: {data_dir} (pass --data)")

    def read(name):
        return [json.loads(x) for x in (data_dir / name).read_text(encoding="utf-8").splitlines() if x.strip()]

    questions = {q["question_id"]: q for q in read("question.jsonl")}
    units = []
    for ref in read("reference_answer_gpt-4.jsonl"):
        q = questions[ref["question_id"]]
        turns, answers = q["turns"], ref["choices"][0]["turns"]
        for t in range(min(len(turns), len(answers))):
            messages = []
            for s in range(t):
                messages += [{"role": "user", "content": turns[s]}, {"role": "assistant", "content": answers[s]}]
            messages.append(
                {"role": "user", "content": f"{turns[t]}\nThink step by step, then write '{FINAL}' and your answer."}
            )
            units.append(
                {
                    "id": f"{q['question_id']}-{t + 1}",
                    "category": q["category"],
                    "messages": messages,
                    "reference": answers[t],
                }
            )
    return units


def paired(a: np.ndarray, b: np.ndarray, resamples: int = 10_000, seed: int = 0) -> dict:
    """Mean score difference a − b with a paired bootstrap 95 % interval and the Wilcoxon signed-rank p-value."""
    rng = np.random.default_rng(seed)
    diff = a - b
    boot = diff[rng.integers(0, len(diff), size=(resamples, len(diff)))].mean(axis=1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    p = float(wilcoxon(a, b).pvalue) if np.any(diff != 0) and len(diff) > 1 else 1.0
    return {"diff": float(diff.mean()), "ci95": [float(lo), float(hi)], "wilcoxon_p": p, "n": len(diff)}


def run_batch(model, tok, encoder, units: list[dict], args) -> list[dict]:
    prompts = [tok.apply_chat_template(u["messages"], tokenize=False, add_generation_prompt=True) for u in units]
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    plen = enc["input_ids"].shape[1]
    common = dict(
        custom_generate=thinkmerge,
        think_end=FINAL,
        think_end_tokenizer=tok,
        max_thinking_tokens=args.max_thinking_tokens,
        max_new_tokens=args.max_new_tokens,
        return_dict_in_generate=True,
        pad_token_id=tok.pad_token_id,
    )
    sampling = dict(do_sample=True, temperature=args.temperature, top_p=args.top_p, top_k=0)
    eos = tok.eos_token_id

    def text(row) -> str:
        ids = row.tolist()
        if eos in ids:
            ids = ids[: ids.index(eos)]
        return tok.decode(ids, skip_special_tokens=True).strip()

    k_max = 8
    with torch.no_grad():
        torch.manual_seed(args.seed)
        greedy = model.generate(**enc, num_traces=1, do_sample=False, **common)
        torch.manual_seed(args.seed + 1)
        stage1 = model.generate(**enc, num_traces=k_max, answer_mode="none", **sampling, **common)
        answers = {"greedy": [[text(r[plen:])] for r in greedy.sequences]}
        for k in (4, 8):
            torch.manual_seed(args.seed + 2)
            merged = model.generate(**enc, num_traces=k, traces=[t[:k] for t in stage1.traces], **sampling, **common)
            answers[f"thinkmerge@{k}"] = [[text(r[plen:])] for r in merged.sequences]
        torch.manual_seed(args.seed + 2)
        indep = model.generate(
            **enc, num_traces=k_max, traces=stage1.traces, answer_mode="independent", **sampling, **common
        )
        flat = [text(r[plen:]) for r in indep.sequences]
        answers["single"] = [flat[b * k_max : (b + 1) * k_max] for b in range(len(units))]
    refs = encoder.encode([u["reference"] for u in units], convert_to_tensor=True, normalize_embeddings=True)
    rows = []
    for b, u in enumerate(units):
        row = {"id": u["id"], "category": u["category"], "answers": {}, "scores": {}}
        for arm in ARMS:
            texts = answers[arm][b]
            emb = encoder.encode([t or "(empty)" for t in texts], convert_to_tensor=True, normalize_embeddings=True)
            sims = (emb @ refs[b]).tolist()
            row["answers"][arm] = texts
            row["scores"][arm] = float(np.mean(sims))
            if arm == "single":
                row["single_scores"] = sims
        rows.append(row)
    return rows


def summarise(rows: list[dict], args, seconds: float, finished: bool) -> dict:
    scores = {arm: np.array([r["scores"][arm] for r in rows]) for arm in ARMS}
    comparisons = {f"{a} - {b}": paired(scores[a], scores[b]) for a, b in PAIRS}
    lengths = {
        arm: float(np.mean([np.mean([len(t.split()) for t in r["answers"][arm]]) for r in rows])) for arm in ARMS
    }
    return {
        "metric": "MiniLM cosine similarity of the answer to the MT-Bench GPT-4 reference (60 question-turns), "
        "SmolLM2-135M; value: ThinkMerge@8 - single sampled trace",
        "value": comparisons["thinkmerge@8 - single"]["diff"],
        "goal": "ThinkMerge@K - single trace > 0 (paired 95 % CI excluding 0): merging traces helps where voting cannot",
        "command": "OMP_NUM_THREADS=1 python examples/thinkmerge_open_ended.py " + " ".join(args.argv),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "finished": finished,
        "n": len(rows),
        "mean_score": {arm: float(s.mean()) for arm, s in scores.items()},
        "mean_answer_words": lengths,
        "paired": comparisons,
        "settings": {
            k: getattr(args, k)
            for k in ("max_thinking_tokens", "max_new_tokens", "temperature", "top_p", "seed", "batch_size")
        },
        "seconds": seconds,
        "loadavg": os.getloadavg(),
        "rows": rows,
    }


def plot(summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.4))
    rows = summary["rows"]
    data = [[r["scores"][arm] for r in rows] for arm in ARMS]
    ax1.boxplot(data, showmeans=True)
    ax1.set_xticks(range(1, len(ARMS) + 1), ARMS, rotation=20, fontsize=8)
    ax1.set_ylabel("cosine similarity to reference")
    ax1.set_title(f"MT-Bench with references, n={summary['n']}")
    names = list(summary["paired"])
    diffs = [summary["paired"][k]["diff"] for k in names]
    lo = [d - summary["paired"][k]["ci95"][0] for d, k in zip(diffs, names, strict=True)]
    hi = [summary["paired"][k]["ci95"][1] - d for d, k in zip(diffs, names, strict=True)]
    ax2.errorbar(diffs, range(len(names)), xerr=[lo, hi], fmt="o", capsize=3)
    ax2.axvline(0, c="k", lw=0.8)
    ax2.set_yticks(range(len(names)), names, fontsize=8)
    ax2.set_xlabel("paired mean difference (95 % bootstrap CI)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="MT-Bench folder (question.jsonl, reference answers)")
    parser.add_argument("--limit", type=int, default=None, help="first N units only")
    parser.add_argument("--batch-size", type=int, default=6)
    parser.add_argument("--max-thinking-tokens", type=int, default=48)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--top-p", type=float, default=0.95)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-minutes", type=float, default=30.0, help="no new batch starts after this")
    parser.add_argument("--output", default="benchmarks/results/thinkmerge_open_ended.json")
    parser.add_argument("--figure", default="docs/figures/thinkmerge_open_ended.png")
    parser.add_argument("--plot-only", action="store_true", help="redraw --figure from an existing --output")
    args = parser.parse_args()
    for name in ("batch_size", "max_thinking_tokens", "max_new_tokens"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be >= 1")
    args.argv = sys.argv[1:]
    if args.plot_only:
        plot(json.loads(Path(args.output).read_text()), Path(args.figure))
        return

    from sentence_transformers import SentenceTransformer

    units = load_units(args.data)[: args.limit]
    model, tok = load_default_model()
    tok.padding_side = "left"
    model.eval()
    encoder = SentenceTransformer(str(default_sentence_encoder_path()), device="cpu")
    rows: list[dict] = []
    start = time.perf_counter()
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    for i in range(0, len(units), args.batch_size):
        if (time.perf_counter() - start) / 60 > args.max_minutes:
            break
        rows += run_batch(model, tok, encoder, units[i : i + args.batch_size], args)
        summary = summarise(rows, args, time.perf_counter() - start, finished=False)
        out.write_text(json.dumps(summary, indent=1))
        means = " ".join(f"{a}={v:.3f}" for a, v in summary["mean_score"].items())
        print(f"n={len(rows)} {time.perf_counter() - start:.0f}s {means}", flush=True)
    summary = summarise(rows, args, time.perf_counter() - start, finished=len(rows) == len(units))
    out.write_text(json.dumps(summary, indent=1))
    Path(args.figure).parent.mkdir(parents=True, exist_ok=True)
    plot(summary, Path(args.figure))
    for name, c in summary["paired"].items():
        print(f"{name}: {c['diff']:+.4f} [{c['ci95'][0]:+.4f}, {c['ci95'][1]:+.4f}] Wilcoxon p={c['wilcoxon_p']:.3g}")


if __name__ == "__main__":
    main()
