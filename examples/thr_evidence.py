"""THR evidence: GRPO vs THR-exploit (p > 0) vs THR-explore (p < 0) on locally generated addition, SmolLM2-135M.

    OMP_NUM_THREADS=1 python examples/thr_evidence.py --steps 16 --prompts-per-step 4 --eval-prompts 200 \
        --mech-batches 20 --mech-prompts 1 --max-minutes 33

**Task** (generated here, exact-match reward). A one-shot prompt ``"c + d = c+d\\na + b ="`` (plain text, no chat
template: the shot fixes the answer format, so 4 completion tokens suffice); the reward is 1 when the first integer of
the completion equals ``a + b``. The operand range (``--task``) is chosen on a **dev split** (``--dev-prompts``
prompts x 8 samples at T=1, run first and recorded under ``probe``): the task whose per-prompt correct count is most
often within 1..7 of 8 (groups GRPO does not skip). The question pairs ``(a, b)`` are split in two halves: training
(and dev, and the mechanism batches) use one half, the held-out evaluation only the other, each held-out prompt with
its own random shot ``(c, d)``; intervals resample question pairs (clustered bootstrap), so repeated pairs with
different shots are not counted as independent.

**Arms** (same seed, same initial weights, same prompt stream: TRL's seeded sampler over the same dataset):

* ``grpo``        -- ``THRGRPOConfig(thr_mode="reweight", thr_p=0.0)``: exactly GRPO (advantages unchanged; tested
  in ``tests/test_thr*``), but the trainer still logs ``thr/skipped_group_frac``;
* ``thr_exploit`` -- ``thr_p=+0.5`` (paper: better Pass@1);
* ``thr_explore`` -- ``thr_p=-0.5`` (paper: better Pass@K).

Every arm: ``loss_type="dapo"``, ``beta=0``, full fine-tuning (AdamW), ``num_generations=8``, T=1, top-k 0.

**Held-out evaluation** (``--eval-prompts`` prompts): greedy Pass@1, Pass@8 at T=1 (any of 8 samples correct), the
mean sampled accuracy, the mean token entropy of the sampled completions (T=1, full vocabulary), and the fraction of
held-out prompts whose 8 samples are all right or all wrong (groups GRPO would skip). The training-time
``thr/skipped_group_frac`` is read from the trainer's logged metrics.

**One-update mechanism check** (``--mech-batches`` fixed batches of ``--mech-prompts`` prompts x 8): from the SAME
starting weights, each arm's trainer runs its own ``_generate_and_score_completions`` (same seed, so the same sampled
groups: checked), its ``compute_loss`` (TRL's dapo loss on the THR token advantages), ``backward`` and one optimizer
step (SGD, so the step is the gradient; AdamW's first step is sign-like). Measured: the change of the mean sequence
log-probability of the batch's correct responses, and of fixed held-out correct answers. The paper predicts
exploit > GRPO > explore; paired differences over batches get a bootstrap 95 % interval and a Wilcoxon p.

Writes ``benchmarks/results/thr_evidence.json`` (rewritten after every stage; ``complete: false`` until the end or
when ``--max-minutes`` stops it) and ``docs/figures/thr_evidence.png``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import re
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path


os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
import torch
from scipy.stats import binomtest, wilcoxon


ROOT = Path(__file__).resolve().parents[1]
ARMS = {"grpo": 0.0, "thr_exploit": 0.5, "thr_explore": -0.5}
TASKS = {  # operand ranges of the question a + b
    "add1": ((1, 9), (1, 9)),
    "add12": ((1, 12), (1, 12)),
    "add21": ((10, 99), (1, 9)),
}
_INT = re.compile(r"-?\d+")


# ---------------------------------------------------------------- task
def task_pairs(task: str) -> list[tuple[int, int]]:
    (a0, a1), (b0, b1) = TASKS[task]
    return [(a, b) for a in range(a0, a1 + 1) for b in range(b0, b1 + 1)]


def split_pairs(task: str, seed: int = 1234) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(train pairs, held-out pairs): a seeded half split of the task's question pairs."""
    pairs = task_pairs(task)
    random.Random(seed).shuffle(pairs)
    half = len(pairs) // 2
    return pairs[half:], pairs[:half]


def make_prompt(a: int, b: int, c: int, d: int) -> str:
    return f"{c} + {d} = {c + d}\n{a} + {b} ="


def make_rows(pairs: list[tuple[int, int]], n: int, seed: int, exclude: set[str] = frozenset()) -> list[dict]:
    """``n`` distinct prompts: question pairs cycled in a seeded order, each with a random one-shot example."""
    rng = random.Random(seed)
    order = list(pairs)
    rng.shuffle(order)
    rows, seen, i = [], set(exclude), 0
    if n > len(pairs) * 80:
        raise ValueError(f"cannot draw {n} distinct prompts from {len(pairs)} question pairs")
    while len(rows) < n:
        a, b = order[i % len(order)]
        i += 1
        c, d = rng.randint(1, 9), rng.randint(1, 9)
        prompt = make_prompt(a, b, c, d)
        if (c, d) == (a, b) or prompt in seen:
            continue
        seen.add(prompt)
        rows.append({"prompt": prompt, "answer": str(a + b), "pair": f"{a}+{b}"})
    return rows


def first_int(text: str) -> str | None:
    found = _INT.search(text)
    return found.group(0) if found else None


def answer_reward(prompts, completions, answer, **kwargs) -> list[float]:
    """1.0 when the completion's first integer equals ``answer`` (a dataset column)."""
    return [float(first_int(c) == a) for c, a in zip(completions, answer)]


# ---------------------------------------------------------------- statistics
def cluster_bootstrap(values: np.ndarray, clusters: np.ndarray, resamples: int = 10_000, seed: int = 0) -> list:
    """95 % interval of the mean of ``values``, resampling whole clusters."""
    ids = np.unique(clusters)
    sums = np.array([values[clusters == c].sum() for c in ids])
    counts = np.array([(clusters == c).sum() for c in ids])
    idx = np.random.default_rng(seed).integers(0, len(ids), size=(resamples, len(ids)))
    boot = sums[idx].sum(1) / counts[idx].sum(1)
    return [float(x) for x in np.percentile(boot, [2.5, 97.5])]


def paired_binary(a: np.ndarray, b: np.ndarray, clusters: np.ndarray) -> dict:
    """a − b for 0/1 per-prompt outcomes: clustered bootstrap 95 % CI and the exact McNemar p."""
    a, b = a.astype(float), b.astype(float)
    only_a, only_b = int(((a == 1) & (b == 0)).sum()), int(((a == 0) & (b == 1)).sum())
    p = binomtest(only_a, only_a + only_b, 0.5).pvalue if only_a + only_b else 1.0
    return {
        "diff": float((a - b).mean()),
        "ci95": cluster_bootstrap(a - b, clusters),
        "a_only": only_a,
        "b_only": only_b,
        "mcnemar_p": float(p),
    }


def paired_continuous(a: np.ndarray, b: np.ndarray, resamples: int = 10_000, seed: int = 0) -> dict:
    """a − b over paired units: bootstrap 95 % CI of the mean, Wilcoxon signed-rank p, count of a > b."""
    diff = np.asarray(a, float) - np.asarray(b, float)
    idx = np.random.default_rng(seed).integers(0, len(diff), size=(resamples, len(diff)))
    lo, hi = np.percentile(diff[idx].mean(1), [2.5, 97.5])
    p = float(wilcoxon(diff).pvalue) if np.any(diff != 0) else 1.0
    return {
        "diff": float(diff.mean()),
        "ci95": [float(lo), float(hi)],
        "wilcoxon_p": p,
        "a_greater": int((diff > 0).sum()),
        "n": len(diff),
    }


# ---------------------------------------------------------------- generation / evaluation
def _encode(tok, prompts: list[str]):
    return tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)


def _completion_texts(tok, out: torch.Tensor, n_prompt: int) -> list[str]:
    return [tok.decode(row[n_prompt:], skip_special_tokens=True) for row in out]


@torch.no_grad()
def sample_counts(model, tok, rows, k: int, max_new_tokens: int, seed: int, batch_prompts: int = 32):
    """Per prompt: number of correct samples out of ``k`` (T=1, top-k 0), plus the token entropies."""
    model.eval()
    counts, entropy_sum, entropy_n = [], 0.0, 0
    torch.manual_seed(seed)
    for start in range(0, len(rows), batch_prompts):
        chunk = rows[start : start + batch_prompts]
        enc = _encode(tok, [r["prompt"] for r in chunk])
        n = enc["input_ids"].size(1)
        out = model.generate(
            **enc,
            do_sample=True,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            num_return_sequences=k,
            max_new_tokens=max_new_tokens,
            pad_token_id=tok.pad_token_id,
            output_logits=True,
            return_dict_in_generate=True,
        )
        texts = _completion_texts(tok, out.sequences, n)
        for i, r in enumerate(chunk):
            counts.append(sum(first_int(t) == r["answer"] for t in texts[i * k : (i + 1) * k]))
        # mean entropy of the model's T=1 distribution over the generated tokens (up to and including EOS)
        gen = out.sequences[:, n:]
        alive = torch.ones(gen.size(0), dtype=torch.bool)
        for step, logits in enumerate(out.logits):
            logp = torch.log_softmax(logits.float(), dim=-1)
            ent = -(logp.exp() * logp).sum(-1)
            entropy_sum += float(ent[alive].sum())
            entropy_n += int(alive.sum())
            alive &= gen[:, step] != tok.eos_token_id
    return np.array(counts), entropy_sum / max(entropy_n, 1)


@torch.no_grad()
def greedy_correct(model, tok, rows, max_new_tokens: int, batch_prompts: int = 64) -> np.ndarray:
    model.eval()
    correct = []
    for start in range(0, len(rows), batch_prompts):
        chunk = rows[start : start + batch_prompts]
        enc = _encode(tok, [r["prompt"] for r in chunk])
        out = model.generate(**enc, do_sample=False, max_new_tokens=max_new_tokens, pad_token_id=tok.pad_token_id)
        texts = _completion_texts(tok, out, enc["input_ids"].size(1))
        correct += [first_int(t) == r["answer"] for t, r in zip(texts, chunk)]
    return np.array(correct, dtype=int)


def evaluate(model, tok, rows, args) -> dict:
    t0 = time.perf_counter()
    greedy = greedy_correct(model, tok, rows, args.max_completion_length)
    counts, entropy = sample_counts(model, tok, rows, 8, args.max_completion_length, seed=args.seed + 17)
    return {
        "pass1_greedy": float(greedy.mean()),
        "pass8_t1": float((counts > 0).mean()),
        "mean_sample_acc_t1": float(counts.mean() / 8),
        "token_entropy_t1": entropy,
        "heldout_all_same_frac": float(((counts == 0) | (counts == 8)).mean()),
        "per_prompt_greedy": greedy.tolist(),
        "per_prompt_correct_of_8": counts.tolist(),
        "eval_s": round(time.perf_counter() - t0, 1),
    }


# ---------------------------------------------------------------- trainer
def make_config(args, thr_p: float, out_dir: str, *, max_steps: int, per_device: int):
    from hfx.trainers.thr import THRGRPOConfig

    return THRGRPOConfig(
        output_dir=out_dir,
        max_steps=max_steps,
        per_device_train_batch_size=per_device,
        num_generations=8,
        max_completion_length=args.max_completion_length,
        learning_rate=args.learning_rate,
        lr_scheduler_type="constant",
        loss_type="dapo",
        beta=0.0,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        use_cpu=not torch.cuda.is_available(),
        bf16=False,
        save_strategy="no",
        report_to="none",
        logging_steps=1,
        seed=args.seed,
        data_seed=args.seed,
        thr_mode="reweight",
        thr_p=thr_p,
        disable_tqdm=True,
    )


def train_arm(base, tok, train_rows, args, thr_p: float) -> tuple[torch.nn.Module, dict]:
    from datasets import Dataset

    from hfx.trainers.thr import THRGRPOTrainer

    model = copy.deepcopy(base)
    config = make_config(
        args, thr_p, tempfile.mkdtemp(prefix="thr_ev_"), max_steps=args.steps, per_device=8 * args.prompts_per_step
    )
    dataset = Dataset.from_list(train_rows)
    trainer = THRGRPOTrainer(
        model=model, reward_funcs=answer_reward, args=config, train_dataset=dataset, processing_class=tok
    )
    t0 = time.perf_counter()
    trainer.train()
    logs = [h for h in trainer.state.log_history if "reward" in h]

    def series(key):
        return [round(float(h[key]), 4) for h in logs if key in h]

    info = {
        "train_s": round(time.perf_counter() - t0, 1),
        "steps": len(logs),
        "train_reward_per_step": series("reward"),
        "skipped_group_frac_per_step": series("thr/skipped_group_frac"),
        "frac_reward_zero_std_per_step": series("frac_reward_zero_std"),
        "thr_dominant_frac_per_step": series("thr/dominant_frac"),
        "entropy_per_step": series("entropy"),
        "hidden_source": trainer.last_thr_hidden_source,
    }
    for key in ("skipped_group_frac", "frac_reward_zero_std", "train_reward", "thr_dominant_frac"):
        vals = info[f"{key}_per_step" if key != "train_reward" else "train_reward_per_step"]
        info[f"{key}_mean"] = float(np.mean(vals)) if vals else float("nan")
    model = trainer.model
    del trainer
    return model, info


# ---------------------------------------------------------------- mechanism check
@torch.no_grad()
def sequence_logps(model, prompt_ids, prompt_mask, completion_ids, completion_mask) -> torch.Tensor:
    """Sum of the completion tokens' log-probabilities (T=1), one value per row."""
    model.eval()
    ids = torch.cat([prompt_ids, completion_ids], 1)
    mask = torch.cat([prompt_mask, completion_mask], 1)
    logits = model(input_ids=ids, attention_mask=mask).logits[:, prompt_ids.size(1) - 1 : -1].float()
    logp = torch.log_softmax(logits, -1).gather(-1, completion_ids.unsqueeze(-1)).squeeze(-1)
    return (logp * completion_mask).sum(1)


def heldout_answer_tensors(tok, rows):
    """Left-padded prompts and right-padded reference completions ``" {answer}\\n"`` of held-out rows."""
    enc = _encode(tok, [r["prompt"] for r in rows])
    comp = [tok(f" {r['answer']}\n", add_special_tokens=False)["input_ids"] for r in rows]
    width = max(len(c) for c in comp)
    ids = torch.full((len(rows), width), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, c in enumerate(comp):
        ids[i, : len(c)], mask[i, : len(c)] = torch.tensor(c), 1
    return enc["input_ids"], enc["attention_mask"], ids, mask


def mechanism_check(base, tok, mech_rows, heldout_rows, args, deadline: float, on_batch) -> dict:
    """One update per arm from the same weights on each fixed batch; changes of correct-response log-probs."""
    from datasets import Dataset

    from hfx.trainers.thr import THRGRPOTrainer

    model = copy.deepcopy(base)
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    per_device = 8 * args.mech_prompts
    trainers = {}
    for arm, p in ARMS.items():
        config = make_config(args, p, tempfile.mkdtemp(prefix="thr_mech_"), max_steps=1, per_device=per_device)
        trainers[arm] = THRGRPOTrainer(
            model=model,
            reward_funcs=answer_reward,
            args=config,
            train_dataset=Dataset.from_list(mech_rows),
            processing_class=tok,
        )
        if not hasattr(trainers[arm], "current_gradient_accumulation_steps"):
            trainers[arm].current_gradient_accumulation_steps = 1
    held = heldout_answer_tensors(tok, heldout_rows)
    results = {"batches": [], "skipped_batches": 0}
    for b in range(0, len(mech_rows), args.mech_prompts):
        if len(results["batches"]) >= args.mech_batches or time.time() > deadline:
            break
        chunk = mech_rows[b : b + args.mech_prompts]
        inputs = [dict(r) for r in chunk for _ in range(8)]
        record, reference = {"prompts": [r["prompt"] for r in chunk]}, None
        for arm, trainer in trainers.items():
            model.load_state_dict(start)
            model.train()
            torch.manual_seed(args.seed + 1000 + b)
            out = trainer._generate_and_score_completions(inputs)
            if reference is None:  # the first arm (GRPO) fixes the batch; the others must sample the same groups
                reference = out
                texts = tok.batch_decode(out["completion_ids"], skip_special_tokens=True)
                correct = torch.tensor(answer_reward(None, texts, [r["answer"] for r in inputs]), dtype=torch.bool)
                counts = correct.view(-1, 8).sum(1)
                record["correct_of_8"] = counts.tolist()
                if not correct.any() or not ((counts > 0) & (counts < 8)).any():
                    break
                rows = correct.nonzero().flatten()
                mixed_rows = (correct & ((counts > 0) & (counts < 8)).repeat_interleave(8)).nonzero().flatten()
                batch_t = [out[k][rows] for k in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask")]
                before = sequence_logps(model, *batch_t)
                before_held = sequence_logps(model, *held)
                model.train()
            elif not torch.equal(out["completion_ids"], reference["completion_ids"]):
                raise RuntimeError(f"arm {arm} sampled other completions than grpo on batch {b}: seeds not shared")
            model.zero_grad(set_to_none=True)
            loss = trainer.compute_loss(model, out)
            loss.backward()
            torch.optim.SGD(model.parameters(), lr=args.mech_lr).step()
            after = sequence_logps(model, *batch_t)
            after_held = sequence_logps(model, *held)
            delta = after - before
            record[arm] = {
                "loss": float(loss.detach()),
                "delta_correct_logp": float(delta.mean()),
                "delta_correct_logp_mixed_groups": float(delta[torch.isin(rows, mixed_rows)].mean()),
                "delta_heldout_answer_logp": float((after_held - before_held).mean()),
            }
        else:
            record["n_correct"] = int(rows.numel())
            results["batches"].append(record)
            on_batch(results)
            continue
        results["skipped_batches"] += 1  # no mixed group: no arm has a gradient
    model.load_state_dict(start)
    del trainers, model
    return summarize_mechanism(results)


def summarize_mechanism(results: dict) -> dict:
    batches = results["batches"]
    if not batches:
        return results
    summary = {}
    for key in ("delta_correct_logp", "delta_correct_logp_mixed_groups", "delta_heldout_answer_logp"):
        vals = {arm: np.array([r[arm][key] for r in batches]) for arm in ARMS}
        summary[key] = {
            "mean": {arm: float(v.mean()) for arm, v in vals.items()},
            "exploit_minus_grpo": paired_continuous(vals["thr_exploit"], vals["grpo"]),
            "grpo_minus_explore": paired_continuous(vals["grpo"], vals["thr_explore"]),
            "exploit_minus_explore": paired_continuous(vals["thr_exploit"], vals["thr_explore"]),
            "order_exploit_gt_grpo_gt_explore": int(
                sum(r["thr_exploit"][key] > r["grpo"][key] > r["thr_explore"][key] for r in batches)
            ),
        }
    results["summary"] = summary
    results["n_batches"] = len(batches)
    return results


# ---------------------------------------------------------------- probe
def probe(base, tok, args) -> dict:
    out = {}
    for task in args.probe_tasks:
        train_pairs, _ = split_pairs(task)
        rows = make_rows(train_pairs, args.dev_prompts, seed=args.seed + 99)
        t0 = time.perf_counter()
        counts, _ = sample_counts(base, tok, rows, 8, args.max_completion_length, seed=args.seed + 5)
        greedy = greedy_correct(base, tok, rows, args.max_completion_length)
        out[task] = {
            "correct_of_8": counts.tolist(),
            "frac_within_1_7": float(((counts > 0) & (counts < 8)).mean()),
            "greedy_acc": float(greedy.mean()),
            "seconds": round(time.perf_counter() - t0, 1),
        }
        print(f"probe {task}: within 1..7 {out[task]['frac_within_1_7']:.2f}, greedy {greedy.mean():.2f}", flush=True)
    return out


# ---------------------------------------------------------------- figure
def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = [a for a in ARMS if a in results.get("arms", {})]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    colors = {"base": "0.6", "grpo": "tab:blue", "thr_exploit": "tab:green", "thr_explore": "tab:orange"}
    names = (["base"] if "base" in results else []) + arms
    for ax, metric, title in (
        (axes[0], "pass1_greedy", "held-out greedy Pass@1"),
        (axes[1], "pass8_t1", "held-out Pass@8 (T=1)"),
    ):
        for i, name in enumerate(names):
            ev = results["base"] if name == "base" else results["arms"][name]["eval"]
            v, (lo, hi) = ev[metric], ev[f"{metric}_ci95"]
            ax.bar(i, v, color=colors[name], yerr=[[v - lo], [hi - v]], capsize=4)
            ax.text(i, hi + 0.01, f"{v:.3f}", ha="center", fontsize=8)
        ax.set_xticks(range(len(names)), names, rotation=15)
        ax.set_title(f"{title}, n={results['heldout']['n_prompts']}")
        ax.set_ylim(0, 1.08)
    mech = results.get("mechanism", {})
    ax = axes[2]
    if "summary" in mech:
        vals = {arm: [r[arm]["delta_correct_logp"] for r in mech["batches"]] for arm in ARMS}
        for i, arm in enumerate(ARMS):
            ax.scatter(
                np.full(len(vals[arm]), i) + np.random.default_rng(i).uniform(-0.12, 0.12, len(vals[arm])),
                vals[arm],
                s=10,
                color=colors[arm],
                alpha=0.6,
            )
            ax.errorbar(i, np.mean(vals[arm]), fmt="k_", markersize=20)
        for j in range(len(mech["batches"])):
            ax.plot(range(3), [vals[a][j] for a in ARMS], color="0.8", lw=0.5, zorder=0)
        s = mech["summary"]["delta_correct_logp"]
        ax.set_title(
            f"one SGD update, {mech['n_batches']} batches: Δ mean log p(correct)\n"
            f"exploit−grpo {s['exploit_minus_grpo']['diff']:+.3g} (p={s['exploit_minus_grpo']['wilcoxon_p']:.2g}), "
            f"grpo−explore {s['grpo_minus_explore']['diff']:+.3g} (p={s['grpo_minus_explore']['wilcoxon_p']:.2g})",
            fontsize=9,
        )
        ax.set_xticks(range(3), list(ARMS))
        ax.axhline(0, color="k", lw=0.5)
    else:
        ax.set_axis_off()
    fig.suptitle(
        f"THR evidence: SmolLM2-135M, task {results['settings']['task']}, {results['settings']['steps']} steps"
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---------------------------------------------------------------- main
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="auto", help="add1 / add12 / add21, or auto: chosen by the dev probe")
    parser.add_argument("--probe-tasks", nargs="+", default=["add1", "add12", "add21"])
    parser.add_argument("--dev-prompts", type=int, default=32)
    parser.add_argument("--probe-only", action="store_true")
    parser.add_argument("--steps", type=int, default=30, help="GRPO steps per arm")
    parser.add_argument("--prompts-per-step", type=int, default=4, help="prompts per step (x 8 completions)")
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    parser.add_argument("--max-completion-length", type=int, default=4)
    parser.add_argument("--eval-prompts", type=int, default=216)
    parser.add_argument("--no-base-eval", action="store_true")
    parser.add_argument("--mech-batches", type=int, default=20)
    parser.add_argument("--mech-prompts", type=int, default=4, help="prompts per mechanism batch (x 8)")
    parser.add_argument("--mech-lr", type=float, default=1e-3, help="SGD learning rate of the one update")
    parser.add_argument("--mech-heldout", type=int, default=32, help="held-out reference answers tracked")
    parser.add_argument("--mech-max-frac", type=float, default=0.4, help="budget share of the mechanism check")
    parser.add_argument("--skip-mechanism", action="store_true")
    parser.add_argument(
        "--mechanism-from", type=Path, help="reuse the mechanism check (and probe) of an earlier run's JSON"
    )
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-minutes", type=float, default=35.0)
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks/results/thr_evidence.json")
    parser.add_argument("--figure", type=Path, default=ROOT / "docs/figures/thr_evidence.png")
    args = parser.parse_args(argv)
    t_start = time.time()
    deadline = t_start + 60 * args.max_minutes

    from transformers.utils import logging as hf_logging

    from hfx.models import DEFAULT_MODEL_ID, load_causal_lm

    hf_logging.set_verbosity_error()
    torch.manual_seed(args.seed)
    base, tok = load_causal_lm(None)
    tok.padding_side = "left"
    command = "OMP_NUM_THREADS=1 python examples/thr_evidence.py " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    results = {
        "metric": "held-out greedy Pass@1 / Pass@8 (T=1) per arm; one-update rise of correct-response log-prob",
        "value": None,
        "goal": "paper: THR-exploit > GRPO on Pass@1, THR-explore > GRPO on Pass@K; one update: exploit > GRPO > explore",
        "command": command.strip(),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "model": DEFAULT_MODEL_ID,
        "complete": False,
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "arms": {},
    }

    def save(stage: str) -> None:
        results["stage"] = stage
        results["elapsed_min"] = round((time.time() - t_start) / 60, 2)
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(results, indent=1) + "\n")

    earlier = json.loads(args.mechanism_from.read_text()) if args.mechanism_from else None
    if earlier is not None:
        results["probe"], results["mechanism"] = earlier["probe"], earlier["mechanism"]
        results["mechanism"]["command"] = earlier["command"]
        args.skip_mechanism = True
    else:
        results["probe"] = probe(base, tok, args)
    task = args.task
    if task == "auto":
        task = max(results["probe"], key=lambda t: results["probe"][t]["frac_within_1_7"])
    results["settings"]["task"] = task
    save("probe")
    if args.probe_only:
        return 0

    train_pairs, held_pairs = split_pairs(task)
    heldout = make_rows(held_pairs, args.eval_prompts, seed=args.seed + 7)
    train_rows = make_rows(train_pairs, args.steps * args.prompts_per_step, seed=args.seed + 11)
    mech_rows = make_rows(
        train_pairs,
        2 * args.mech_batches * args.mech_prompts,
        seed=args.seed + 13,
        exclude={r["prompt"] for r in train_rows},
    )
    clusters = np.array([r["pair"] for r in heldout])
    results["heldout"] = {
        "n_prompts": len(heldout),
        "n_question_pairs": len(set(clusters)),
        "train_pairs": len(train_pairs),
    }

    if not args.skip_mechanism:
        t0 = time.perf_counter()

        def on_batch(partial):
            results["mechanism"] = summarize_mechanism(dict(partial))
            save("mechanism")

        # the mechanism check gets at most --mech-max-frac of the budget
        mech_deadline = min(deadline, time.time() + args.mech_max_frac * 60 * args.max_minutes)
        held_ref = heldout[: args.mech_heldout]
        results["mechanism"] = mechanism_check(base, tok, mech_rows, held_ref, args, mech_deadline, on_batch)
        results["mechanism"]["seconds"] = round(time.perf_counter() - t0, 1)
        results["mechanism"]["optimizer"] = f"SGD lr={args.mech_lr}, one step from the same weights"
        save("mechanism")

    def add_cis(ev: dict) -> dict:
        g, c = np.array(ev["per_prompt_greedy"]), np.array(ev["per_prompt_correct_of_8"])
        ev["pass1_greedy_ci95"] = cluster_bootstrap(g.astype(float), clusters)
        ev["pass8_t1_ci95"] = cluster_bootstrap((c > 0).astype(float), clusters)
        return ev

    for arm in args.arms:
        if time.time() > deadline:
            break
        model, info = train_arm(base, tok, train_rows, args, ARMS[arm])
        results["arms"][arm] = {"thr_p": ARMS[arm], "train": info}
        save(f"train {arm}")
        if time.time() > deadline:
            break
        results["arms"][arm]["eval"] = add_cis(evaluate(model, tok, heldout, args))
        ev = results["arms"][arm]["eval"]
        print(
            f"{arm}: pass1 {ev['pass1_greedy']:.3f} pass8 {ev['pass8_t1']:.3f} ent {ev['token_entropy_t1']:.3f} "
            f"skipped {info['skipped_group_frac_mean']:.3f} ({info['train_s']} s train, {ev['eval_s']} s eval)",
            flush=True,
        )
        del model
        save(f"eval {arm}")

    if not args.no_base_eval and time.time() < deadline:
        results["base"] = add_cis(evaluate(base, tok, heldout, args))
        save("base")

    done = [a for a in ARMS if "eval" in results["arms"].get(a, {})]
    comparisons = {}
    for a, b in (("thr_exploit", "grpo"), ("thr_explore", "grpo"), ("thr_exploit", "thr_explore")):
        if a in done and b in done:
            ea, eb = results["arms"][a]["eval"], results["arms"][b]["eval"]
            comparisons[f"{a}_minus_{b}"] = {
                "pass1_greedy": paired_binary(
                    np.array(ea["per_prompt_greedy"]), np.array(eb["per_prompt_greedy"]), clusters
                ),
                "pass8_t1": paired_binary(
                    np.array(ea["per_prompt_correct_of_8"]) > 0, np.array(eb["per_prompt_correct_of_8"]) > 0, clusters
                ),
            }
    results["comparisons"] = comparisons
    results["value"] = {
        a: {k: results["arms"][a]["eval"][k] for k in ("pass1_greedy", "pass8_t1", "token_entropy_t1")} for a in done
    }
    mech_ok = args.skip_mechanism or results.get("mechanism", {}).get("n_batches", 0) >= args.mech_batches
    results["complete"] = bool(len(done) == len(args.arms) and mech_ok and (args.no_base_eval or "base" in results))
    save("done")
    if done or "summary" in results.get("mechanism", {}):
        plot(results, args.figure)
    print(json.dumps({"value": results["value"], "comparisons": comparisons}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
