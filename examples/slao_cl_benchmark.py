"""SLAO on the Standard CL benchmark (AG News, Amazon, DBpedia, Yelp) with SmolLM2-135M, on cached hidden states.

Paper: "Merge before Forget: A Single LoRA Continual Learning via Continual Merging" (arXiv:2512.23017).

Data: ``../shared/data/cl_benchmark`` (the O-LoRA CL_Benchmark folder; 1,000 train / 500 test per task; Yahoo is
not available, Yelp stands in). Each example is a prompt (``News: <text>\\nTopic:``, ``Review: ...\\nSentiment:``,
``Text: ...\\nCategory:``, the text cut to ``--text-tokens`` tokens) scored by **rank classification**: the predicted
label is the label word with the highest summed log-probability given the prompt.

Why it is feasible on one CPU core: LoRA (rank 8, q_proj/v_proj) sits only in the top ``--top-layers`` decoder
layers; the layers below are frozen, so the hidden state entering the first adapted layer is a fixed function of the
input. It is computed once per example and stored (``<out>/cache_*.pt``); every method then trains and evaluates the
top layers on the stored states only. This is exact (the script checks it and writes the largest deviation into the
JSON). All label words of an example are scored in ONE forward pass: the prompt is followed by every candidate, with
a 4-D attention mask (a candidate sees the prompt and its own earlier tokens) and position ids that restart after the
prompt for each candidate; the script also checks this against scoring each candidate on its own.

Methods (switches of ``SLAOConfig``, driven with ``start_task()`` / ``finish_task()`` as ``ContinualTrainer`` does:
fresh AdamW state per task, constant learning rate, the merged pair evaluated after every task):
``slao``, ``seq_lora``, ``no_orth_init``, ``no_time_scaling`` and ``per_task`` (one fresh LoRA per task, scored on
its own task only: the upper bound). The learning rate is chosen on a dev split carved from the train file (disjoint
from the train examples, never from the test file) by the per-task LoRA's mean dev accuracy, a criterion that favours
no continual method. Reported: AA and BWT per method and task order with 95 % bootstrap intervals over test examples,
paired bootstrap intervals of AA(SLAO) - AA(method), and exact McNemar tests of SLAO vs each method on the final-stage
predictions of all test examples.

    OMP_NUM_THREADS=1 nice -n 5 python examples/slao_cl_benchmark.py --max-minutes 40
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import math
import os
import random
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch


DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "cl_benchmark"
TASKS = ("agnews", "amazon", "dbpedia", "yelp")
TEMPLATES = {
    "agnews": ("News: ", "\nTopic:"),
    "amazon": ("Review: ", "\nSentiment:"),
    "dbpedia": ("Text: ", "\nCategory:"),
    "yelp": ("Review: ", "\nSentiment:"),
}
METHODS = ("slao", "seq_lora", "no_orth_init", "no_time_scaling", "per_task")


# ------------------------------------------------------------------------------------------------------------- data
def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def pack(prompt_ids: list[int], candidates: list[list[int]]) -> dict:
    """One sequence: the prompt, then every candidate; ``segment`` 0 = prompt, j + 1 = candidate j.

    ``score`` lists (predecessor position, target token, candidate j) for every candidate token: the first token is
    predicted from the last prompt position, later ones from the previous token of the same candidate.
    """
    P = len(prompt_ids)
    ids, pos, seg, score = list(prompt_ids), list(range(P)), [0] * P, []
    for j, cand in enumerate(candidates):
        start = len(ids)
        for t, tok in enumerate(cand):
            score.append((P - 1 if t == 0 else start + t - 1, tok, j))
            ids.append(tok)
            pos.append(P + t)
            seg.append(j + 1)
    return {"input_ids": ids, "position_ids": pos, "segment": seg, "score": score, "n_candidates": len(candidates)}


def build_examples(rows, labels, task, tok, text_tokens, *, gold_only: bool) -> list[dict]:
    head, tail = TEMPLATES[task]
    head_ids = tok(head, add_special_tokens=False)["input_ids"]
    tail_ids = tok(tail, add_special_tokens=False)["input_ids"]
    cands = [tok(" " + label, add_special_tokens=False)["input_ids"] for label in labels]
    out = []
    for row in rows:
        text_ids = tok(" ".join(row["text"].split()), add_special_tokens=False)["input_ids"][:text_tokens]
        y = labels.index(row["label"])
        ex = pack(head_ids + text_ids + tail_ids, [cands[y]] if gold_only else cands)
        ex["label"] = y
        out.append(ex)
    return out


def collate(examples: list[dict], states: list[torch.Tensor] | None = None, dtype=torch.float32) -> dict:
    """Right-pad to the longest sequence and build the additive 4-D mask (B, 1, S, S)."""
    S = max(len(e["input_ids"]) for e in examples)
    B = len(examples)
    ids = torch.zeros(B, S, dtype=torch.long)
    pos = torch.zeros(B, S, dtype=torch.long)
    seg = torch.full((B, S), -1, dtype=torch.long)
    for b, e in enumerate(examples):
        n = len(e["input_ids"])
        ids[b, :n] = torch.tensor(e["input_ids"])
        pos[b, :n] = torch.tensor(e["position_ids"])
        seg[b, :n] = torch.tensor(e["segment"])
    q, k = seg[:, :, None], seg[:, None, :]
    causal = torch.ones(S, S, dtype=torch.bool).tril()
    allowed = causal & (k >= 0) & ((k == 0) | (k == q))
    allowed |= torch.eye(S, dtype=torch.bool)  # padded rows attend to themselves (no all-masked row)
    mask = torch.zeros(B, 1, S, S, dtype=dtype).masked_fill(~allowed[:, None], torch.finfo(dtype).min)
    batch = {"input_ids": ids, "position_ids": pos, "attention_mask": mask}
    if states is not None:
        h = torch.zeros(B, S, states[0].shape[-1], dtype=dtype)
        for b, s in enumerate(states):
            h[b, : s.shape[0]] = s.to(dtype)
        batch["inputs_embeds"] = h
    return batch


def token_logprobs(hidden: torch.Tensor, lm_head: torch.Tensor, examples: list[dict]):
    """Log-probabilities of every scored token: (flat log-probs, example index, candidate index)."""
    bi, pi, ti, ci = [], [], [], []
    for b, e in enumerate(examples):
        for p, t, c in e["score"]:
            bi.append(b), pi.append(p), ti.append(t), ci.append(c)
    bi, pi, ti = torch.tensor(bi), torch.tensor(pi), torch.tensor(ti)
    logits = hidden[bi, pi] @ lm_head.T
    return logits.log_softmax(-1).gather(-1, ti[:, None])[:, 0], bi, torch.tensor(ci)


def predict(hidden, lm_head, examples) -> np.ndarray:
    logp, bi, ci = token_logprobs(hidden, lm_head, examples)
    preds = []
    for b, e in enumerate(examples):
        scores = torch.zeros(e["n_candidates"]).index_add_(0, ci[bi == b], logp[bi == b])
        preds.append(int(scores.argmax()))
    return np.array(preds)


# ------------------------------------------------------------------------------------------------------------ cache
@torch.no_grad()
def bottom_states(base, examples: list[dict], n_bottom: int, batch_size: int) -> list[torch.Tensor]:
    """Hidden state entering decoder layer ``n_bottom`` for every example (unpadded, fp32, CPU)."""
    inner = base.model
    layers = inner.layers
    captured = {}
    hook = inner.norm.register_forward_pre_hook(lambda m, args: captured.__setitem__("h", args[0]))
    inner.layers = layers[:n_bottom]
    n_layers = inner.config.num_hidden_layers
    inner.config.num_hidden_layers = n_bottom
    out: list[torch.Tensor | None] = [None] * len(examples)
    order = sorted(range(len(examples)), key=lambda i: len(examples[i]["input_ids"]))
    try:
        for s in range(0, len(order), batch_size):
            idx = order[s : s + batch_size]
            batch = collate([examples[i] for i in idx])
            inner(
                input_ids=batch["input_ids"],
                attention_mask=batch["attention_mask"],
                position_ids=batch["position_ids"],
                use_cache=False,
            )
            for b, i in enumerate(idx):
                out[i] = captured["h"][b, : len(examples[i]["input_ids"])].clone()
    finally:
        inner.layers = layers
        inner.config.num_hidden_layers = n_layers
        hook.remove()
    return out


def top_model(base, n_bottom: int):
    """A copy of ``base`` holding only decoder layers ``n_bottom..L-1`` (fed with ``inputs_embeds`` = cached states)."""
    layers = base.model.layers
    base.model.layers = torch.nn.ModuleList()
    top = copy.deepcopy(base)
    base.model.layers = layers
    top.model.layers = copy.deepcopy(layers[n_bottom:])
    top.config.num_hidden_layers = len(top.model.layers)
    if getattr(top.config, "layer_types", None):
        top.config.layer_types = top.config.layer_types[n_bottom:]
    for p in top.parameters():
        p.requires_grad_(False)
    return top


def inner_model(model):
    """The decoder stack (``LlamaModel``) of a plain or PEFT-wrapped causal LM."""
    if hasattr(model, "get_base_model"):  # PeftModel: the LoRA layers are injected in place
        model = model.get_base_model()
    return model.model, model.lm_head.weight


def forward_hidden(model, examples, states):
    decoder, lm_head = inner_model(model)
    batch = collate(examples, states)
    out = decoder(
        inputs_embeds=batch["inputs_embeds"],
        attention_mask=batch["attention_mask"],
        position_ids=batch["position_ids"],
        use_cache=False,
    )
    return out.last_hidden_state, lm_head


@torch.no_grad()
def evaluate(model, examples, states, batch_size=32) -> np.ndarray:
    """Per-example correctness (bool array)."""
    was = model.training
    model.eval()
    correct = []
    for s in range(0, len(examples), batch_size):
        ex, st = examples[s : s + batch_size], states[s : s + batch_size]
        hidden, lm_head = forward_hidden(model, ex, st)
        correct.append(predict(hidden, lm_head, ex) == np.array([e["label"] for e in ex]))
    model.train(was)
    return np.concatenate(correct)


def train_task(model, examples, states, *, lr, batch_size, seed, epochs=1) -> list[float]:
    """One task: fresh AdamW over the trainable (LoRA) parameters, constant lr, token-mean CE on the gold label."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    rng = random.Random(seed)
    model.train()
    losses = []
    for _ in range(epochs):
        order = list(range(len(examples)))
        rng.shuffle(order)
        for s in range(0, len(order), batch_size):
            idx = order[s : s + batch_size]
            ex = [examples[i] for i in idx]
            hidden, lm_head = forward_hidden(model, ex, [states[i] for i in idx])
            logp, _, _ = token_logprobs(hidden, lm_head, ex)
            loss = -logp.mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return losses


# ------------------------------------------------------------------------------------------------------------- stats
def mcnemar(a: np.ndarray, b: np.ndarray) -> dict:
    from scipy.stats import binomtest

    n10, n01 = int((a & ~b).sum()), int((~a & b).sum())
    p = binomtest(n10, n10 + n01, 0.5).pvalue if n10 + n01 else 1.0
    return {"slao_only_correct": n10, "other_only_correct": n01, "p_value": float(p)}


def aa_bwt(correct: np.ndarray, slices: list[slice], idx=None):
    """correct: (T stages, N test) bool, columns grouped by task in sequence order; idx: resampled columns per task."""
    T = len(slices)
    a = np.zeros((T, T))
    for i, sl in enumerate(slices):
        cols = np.arange(sl.start, sl.stop) if idx is None else idx[i]
        a[i] = correct[:, cols].mean(1)
    aa = a[:, -1].mean()
    bwt = float(np.mean(a[:-1, -1] - np.diag(a)[:-1])) if T > 1 else 0.0
    return a, float(aa), bwt


def bootstrap(results: dict, slices, n_boot: int, seed: int) -> dict:
    """95 % percentile intervals of AA and BWT per method, and of AA(slao) - AA(method), resampling test examples."""
    rng = np.random.default_rng(seed)
    draws = {m: {"aa": [], "bwt": []} for m in results}
    diffs = {m: [] for m in results if m != "slao"}
    for _ in range(n_boot):
        idx = [rng.integers(sl.start, sl.stop, sl.stop - sl.start) for sl in slices]
        vals = {}
        for m, corr in results.items():
            if m == "per_task":  # diagonal only: a[i, i] = a[i, T]
                acc = np.array([corr[i, ix].mean() for i, ix in enumerate(idx)])
                vals[m] = (float(acc.mean()), 0.0)
            else:
                _, aa, bwt = aa_bwt(corr, slices, idx)
                vals[m] = (aa, bwt)
            draws[m]["aa"].append(vals[m][0])
            draws[m]["bwt"].append(vals[m][1])
        if "slao" in vals:
            for m, d in diffs.items():
                d.append(vals["slao"][0] - vals[m][0])

    def ci(x):
        return [float(np.percentile(x, 2.5)), float(np.percentile(x, 97.5))]

    out = {m: {"aa_ci95": ci(d["aa"]), "bwt_ci95": ci(d["bwt"])} for m, d in draws.items()}
    for m, d in diffs.items():
        out[m]["aa_slao_minus_this_ci95"] = ci(d)
    return out


# -------------------------------------------------------------------------------------------------------------- main
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="Hub id / local path; default: the embedded SmolLM2-135M")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--orders", default="agnews,amazon,dbpedia,yelp;yelp,dbpedia,amazon,agnews")
    parser.add_argument("--top-layers", type=int, default=2)
    parser.add_argument("--text-tokens", type=int, default=48)
    parser.add_argument("--train-per-task", type=int, default=256)
    parser.add_argument("--dev-per-task", type=int, default=64)
    parser.add_argument("--test-per-task", type=int, default=500)
    parser.add_argument(
        "--lrs", default="1e-3,3e-3,1e-2", help="grid searched on the dev split (one value: no search)"
    )
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--r", type=int, default=8)
    parser.add_argument("--lora-alpha", type=int, default=32)
    parser.add_argument("--lora-dropout", type=float, default=0.1)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-minutes", type=float, default=35.0)
    parser.add_argument("--out", type=Path, default=Path("outputs/slao_cl_benchmark"))
    parser.add_argument("--json", type=Path, default=Path("benchmarks/results/slao_cl_benchmark.json"))
    parser.add_argument("--figure", type=Path, default=Path("docs/figures/slao_cl_benchmark.png"))
    parser.add_argument("--plot-only", action="store_true", help="redraw --figure from an existing --json")
    args = parser.parse_args(argv)
    if args.plot_only:
        plot(json.loads(args.json.read_text()), args.figure)
        return 0
    t_start = time.perf_counter()
    deadline = t_start + 60 * args.max_minutes

    from peft import get_peft_model

    from hfx.models import load_causal_lm
    from hfx.tuners.slao import SLAOConfig

    methods = [m for m in args.methods.split(",") if m]
    orders = [o.split(",") for o in args.orders.split(";") if o]
    lrs = [float(x) for x in args.lrs.split(",")]
    torch.manual_seed(args.seed)
    base, tok = load_causal_lm(args.model, dtype=torch.float32)
    base.eval()
    L = base.config.num_hidden_layers
    n_bottom = L - args.top_layers

    # ---- data: train subset and dev split from the train file (disjoint), test from the test file
    data = {}
    for task in TASKS:
        labels = json.loads((args.data / f"{task}.labels.json").read_text())
        train_rows = read_jsonl(args.data / f"{task}.train.jsonl")
        random.Random(f"{args.seed}-{task}").shuffle(train_rows)
        test_rows = read_jsonl(args.data / f"{task}.test.jsonl")[: args.test_per_task]
        dev_rows = train_rows[: args.dev_per_task]
        train_rows = train_rows[args.dev_per_task : args.dev_per_task + args.train_per_task]
        data[task] = {
            "labels": labels,
            "train": build_examples(train_rows, labels, task, tok, args.text_tokens, gold_only=True),
            "dev": build_examples(dev_rows, labels, task, tok, args.text_tokens, gold_only=False),
            "test": build_examples(test_rows, labels, task, tok, args.text_tokens, gold_only=False),
        }

    # ---- cache: hidden states entering the first adapted layer (frozen layers below: exact)
    args.out.mkdir(parents=True, exist_ok=True)
    key = (
        f"cache_L{n_bottom}_tt{args.text_tokens}_tr{args.train_per_task}_dev{args.dev_per_task}"
        f"_te{args.test_per_task}_s{args.seed}.pt"
    )
    cache_path = args.out / key
    t0 = time.perf_counter()
    if cache_path.is_file():
        states = torch.load(cache_path)
        cache_seconds, cache_reused = 0.0, True
    else:
        states = {}
        for task in TASKS:
            for split in ("train", "dev", "test"):
                states[(task, split)] = bottom_states(base, data[task][split], n_bottom, 16)
                print(f"cached {task}/{split}: {len(states[(task, split)])} ({time.perf_counter() - t0:.0f} s)")
        torch.save(states, cache_path)
        cache_seconds, cache_reused = time.perf_counter() - t0, False
    print(f"cache {cache_path} ({'reused' if cache_reused else f'{cache_seconds:.0f} s'})")

    # ---- exactness checks: cached top layers == full model; packed scoring == scoring each candidate alone
    top = top_model(base, n_bottom)
    checks = {}
    with torch.no_grad():
        ex = data["dbpedia"]["test"][:4]
        batch = collate(ex)
        full_h = base.model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], position_ids=batch["position_ids"]
        ).last_hidden_state
        full_lp, _, _ = token_logprobs(full_h, base.lm_head.weight, ex)
        top_h, lm_head = forward_hidden(top, ex, states[("dbpedia", "test")][:4])
        top_lp, _, _ = token_logprobs(top_h, lm_head, ex)
        checks["cached_vs_full_max_abs_logprob_diff"] = float((full_lp - top_lp).abs().max())
        e = ex[0]
        P = e["segment"].count(0)
        alone = []
        for j in range(e["n_candidates"]):
            toks = [t for t, s in zip(e["input_ids"], e["segment"]) if s == j + 1]
            ids = torch.tensor([e["input_ids"][:P] + toks])
            lp = base(input_ids=ids).logits[0].log_softmax(-1)
            alone.append(float(sum(lp[P - 1 + t, tok] for t, tok in enumerate(toks))))
        lp0, _, ci = token_logprobs(full_h[:1], base.lm_head.weight, ex[:1])
        packed = torch.zeros(e["n_candidates"]).index_add_(0, ci, lp0)
        checks["packed_vs_separate_max_abs_logprob_diff"] = float((packed - torch.tensor(alone)).abs().max())
    print("checks:", checks)

    results = {
        "metric": "average accuracy AA (final stage) of SLAO, mean over task orders; also BWT, per method and order",
        "goal": "SLAO AA >= sequential LoRA AA with a paired test (paper: 80.4 vs 76.0 on Llama-2-7B); report null results as such",
        "command": "python examples/slao_cl_benchmark.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "complete": False,
        "model": "SmolLM2-135M-Instruct (embedded default)" if args.model is None else args.model,
        "settings": {k: str(v) for k, v in vars(args).items()},
        "setup": {
            "layers_total": L,
            "adapted_layers": list(range(n_bottom, L)),
            "target_modules": ["q_proj", "v_proj"],
            "cache_file": str(cache_path),
            "cache_seconds": cache_seconds,
            "cache_reused": cache_reused,
            "examples_per_task": {"train": args.train_per_task, "dev": args.dev_per_task, "test": args.test_per_task},
            "reductions_vs_issue": (
                f"{args.train_per_task} of 1,000 train examples per task (the dev split of {args.dev_per_task} comes "
                f"from the remaining train rows), text cut to {args.text_tokens} tokens, LoRA in the top "
                f"{args.top_layers} of {L} layers only, {args.epochs} epoch; "
                f"{args.test_per_task} of 500 test examples per task; the accuracy matrix below its diagonal "
                "(tasks not trained yet) is not scored, AA and BWT do not use it"
            ),
        },
        "checks": checks,
    }

    def lora_config(method):
        name = "slao" if method == "per_task" else method
        return SLAOConfig.for_baseline(
            name,
            r=args.r,
            lora_alpha=args.lora_alpha,
            lora_dropout=args.lora_dropout,
            target_modules=["q_proj", "v_proj"],
        )

    def write(partial: bool):
        results["complete"] = not partial
        results["elapsed_minutes"] = (time.perf_counter() - t_start) / 60
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))

    def out_of_time():
        return time.perf_counter() > deadline

    # ---- zero-shot (base model) on the test sets
    with torch.no_grad():
        results["zero_shot_test_accuracy"] = {
            t: float(evaluate(top, data[t]["test"], states[(t, "test")]).mean()) for t in TASKS
        }
    print("zero-shot:", results["zero_shot_test_accuracy"])

    def fit_per_task_lora(task: str, lr: float):
        """A fresh per-task LoRA on ``task`` alone (same seed for every call): the dev lr search and the upper bound."""
        torch.manual_seed(args.seed)
        model = get_peft_model(copy.deepcopy(top), lora_config("per_task"))
        model.start_task()
        train_task(
            model,
            data[task]["train"],
            states[(task, "train")],
            lr=lr,
            batch_size=args.batch_size,
            seed=args.seed,
            epochs=args.epochs,
        )
        model.finish_task()
        return model

    # ---- learning rate on the dev split: per-task LoRA, mean dev accuracy over the 4 tasks
    t0 = time.perf_counter()
    dev = {}
    if len(lrs) > 1:
        for lr in lrs:
            accs = []
            for task in TASKS:
                model = fit_per_task_lora(task, lr)
                accs.append(float(evaluate(model, data[task]["dev"], states[(task, "dev")]).mean()))
            dev[str(lr)] = {"per_task_dev_accuracy": dict(zip(TASKS, accs)), "mean": float(np.mean(accs))}
            print(f"dev lr {lr:g}: {dev[str(lr)]}")
            if out_of_time():
                break
        lr = float(max(dev, key=lambda k: dev[k]["mean"]))
    else:
        lr = lrs[0]
    results["dev_lr_search"] = {"grid": lrs, "chosen": lr, "by_lr": dev, "seconds": time.perf_counter() - t0}
    print(f"chosen lr {lr:g}")
    write(partial=True)

    # ---- per-task LoRA (order-independent: one adapter per task, scored on its own task)
    runs = {}
    correct_per_task = {}
    if "per_task" in methods:
        t0 = time.perf_counter()
        for task in TASKS:
            model = fit_per_task_lora(task, lr)
            correct_per_task[task] = evaluate(model, data[task]["test"], states[(task, "test")])
        runs["per_task"] = {
            "test_accuracy": {t: float(c.mean()) for t, c in correct_per_task.items()},
            "seconds": time.perf_counter() - t0,
        }
        print("per-task LoRA:", runs["per_task"])
    results["per_task_lora"] = runs.get("per_task")
    results["orders"] = {}

    # ---- the continual runs, method-major (a time cut loses whole methods, never a task order)
    per_order = {}
    for order in orders:
        oname = " > ".join(order)
        bounds = np.cumsum([0, *(len(data[t]["test"]) for t in order)])
        slices = [slice(int(a), int(b)) for a, b in itertools.pairwise(bounds)]
        per_order[oname] = (order, bounds, slices, {})
        results["orders"][oname] = {"order": order, "methods": {}, "n_test": int(bounds[-1])}
    for method in [m for m in methods if m != "per_task"]:
        for oname, (order, bounds, slices, correct_all) in per_order.items():
            if out_of_time():
                break
            t0 = time.perf_counter()
            torch.manual_seed(args.seed)
            model = get_peft_model(copy.deepcopy(top), lora_config(method))
            stage_correct, coefficients, losses = [], [], []
            for j, task in enumerate(order):
                index = model.start_task()
                assert index == j + 1
                losses.append(
                    train_task(
                        model,
                        data[task]["train"],
                        states[(task, "train")],
                        lr=lr,
                        batch_size=args.batch_size,
                        seed=args.seed + j,
                        epochs=args.epochs,
                    )
                )
                coefficients.append(model.finish_task())  # the merged pair is now loaded: evaluate it
                row = np.full(int(bounds[-1]), np.nan)  # tasks not trained yet (below the diagonal) are not scored
                for i in range(j + 1):
                    row[slices[i]] = evaluate(model, data[order[i]]["test"], states[(order[i], "test")])
                stage_correct.append(row)
            corr = np.stack(stage_correct)
            correct_all[method] = corr
            a, aa, bwt = aa_bwt(corr, slices)
            results["orders"][oname]["methods"][method] = {
                "accuracy_matrix": [[None if math.isnan(v) else float(v) for v in row] for row in a],
                "AA": aa,
                "BWT": bwt,
                "coefficients": coefficients,
                "mean_train_loss_per_task": [float(np.mean(x)) for x in losses],
                "seconds": time.perf_counter() - t0,
            }
            print(f"[{oname}] {method}: AA {aa:.3f} BWT {bwt:+.3f} ({time.perf_counter() - t0:.0f} s)\n{a.round(3)}")
            write(partial=True)
    for oname, (order, _, slices, correct_all) in per_order.items():
        order_res = results["orders"][oname]
        if "per_task" in methods and correct_per_task:
            corr = np.concatenate([correct_per_task[t] for t in order]).astype(float)
            correct_all["per_task"] = np.stack([corr] * len(order))  # only the last column is meaningful
            acc = [float(correct_per_task[t].mean()) for t in order]
            order_res["methods"]["per_task"] = {"diagonal": acc, "AA": float(np.mean(acc)), "BWT": 0.0}
        if not correct_all:
            continue
        for m, b in bootstrap(correct_all, slices, args.bootstrap, args.seed).items():
            order_res["methods"][m].update(b)
        if "slao" in correct_all:
            final = {m: c[-1].astype(bool) for m, c in correct_all.items()}
            order_res["mcnemar_slao_vs"] = {m: mcnemar(final["slao"], final[m]) for m in final if m != "slao"}
        np.savez_compressed(args.out / f"correct_{'-'.join(order)}.npz", **correct_all)

    done = all(
        {m for m in methods if m != "per_task"} <= set(o["methods"]) for o in results["orders"].values()
    ) and len(results["orders"]) == len(orders)
    slao_aa = [o["methods"]["slao"]["AA"] for o in results["orders"].values() if "slao" in o["methods"]]
    results["value"] = float(np.mean(slao_aa)) if slao_aa else None
    write(partial=not done)
    plot(results, args.figure)
    print(
        json.dumps(
            {o: {m: (r["AA"], r["BWT"]) for m, r in v["methods"].items()} for o, v in results["orders"].items()},
            indent=1,
        )
    )
    print(f"wrote {args.json} and {args.figure} ({(time.perf_counter() - t_start) / 60:.1f} min)")
    return 0


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hfx.tuners.slao import plot_accuracy_matrix

    panels = [
        (oname, m, r)
        for oname, o in results["orders"].items()
        for m, r in o["methods"].items()
        if "accuracy_matrix" in r
    ]
    if not panels:
        return
    n_orders = len(results["orders"])
    n_cols = max(sum(1 for o, _, _ in panels if o == oname) for oname in results["orders"]) + 1
    fig, axes = plt.subplots(n_orders, n_cols, figsize=(4.3 * n_cols, 4.0 * n_orders), squeeze=False)
    for ax in axes.ravel():
        ax.set_visible(False)
    for row, oname in enumerate(results["orders"]):
        order = results["orders"][oname]["order"]
        for col, (_, m, r) in enumerate(p for p in panels if p[0] == oname):
            ax = axes[row, col]
            ax.set_visible(True)
            plot_accuracy_matrix(
                r["accuracy_matrix"], order, ax=ax, title=f"{m}\nAA {r['AA']:.3f}  BWT {r['BWT']:+.3f}"
            )
        ax = axes[row, -1]  # AA with 95 % bootstrap intervals, every method of this order
        ax.set_visible(True)
        methods = [(m, r) for m, r in results["orders"][oname]["methods"].items() if "aa_ci95" in r]
        for k, (_, r) in enumerate(methods):
            lo, hi = r["aa_ci95"]
            ax.errorbar(k, r["AA"], yerr=[[r["AA"] - lo], [hi - r["AA"]]], fmt="o", capsize=4)
        ax.set_xticks(range(len(methods)), [m for m, _ in methods], rotation=30, ha="right")
        ax.set_ylabel("AA (95 % bootstrap CI)")
        ax.set_title(" > ".join(order), fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("SLAO on Standard CL (SmolLM2-135M, rank classification); rows: orders", fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
