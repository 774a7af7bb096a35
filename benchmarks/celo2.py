"""Celo2 (arXiv 2602.19142): held-out quality vs AdamW, step time and optimizer-state memory vs AdamW.

``--part quality``: on three tasks that meta-training never saw, the final training loss (mean of the last 10% of
steps) of

* **Celo2** (hfx's shipped meta-weights, CPU meta-trained; LR picked on the dev split from the grid),
* **AdamW tuned** (torch defaults but the LR, picked on the dev split from the same grid),
* **AdamW default** (``torch.optim.AdamW()``: lr 1e-3, betas (0.9, 0.999), weight decay 0.01),

each over the test seeds, with 95 % t-intervals and paired (same seed) differences. Dev and test use disjoint data
and different seeds; the LR grid is run on dev only. Tasks (held out from :mod:`hfx.optim.celo2.meta_train`):

* ``digits``: MLP 64-128-128-10 on full-resolution 8x8 ``load_digits`` images of the *held-out half*
  (:func:`hfx.optim.celo2.tasks.digits_split`), dev / test = its two halves; batch 64.
* ``char_lm``: a tiny ``LlamaForCausalLM`` (2 layers, hidden 64, untied head) trained from scratch on GSM8K question
  text, 32-symbol characters, 64-character windows, batch 16; dev / test = disjoint question ranges.
* ``lora``: LoRA (r 8, q_proj / v_proj) on the embedded SmolLM2-135M-Instruct, GSM8K question + answer text,
  48 tokens, batch 4, 30 steps (a few hundred steps do not fit this 2-core machine); dev / test = disjoint examples.

``--part cost``: full training-step time (forward + backward + step) of Celo2 ÷ AdamW, interleaved step by step in one
process so machine load cancels (tiny Llama char-LM, SmolLM2 LoRA, SmolLM2 full fine-tune), the optimizer step alone
on the full fine-tune, and the optimizer-state bytes of Celo2 ÷ AdamW.

    python benchmarks/celo2.py --part quality --tasks digits char_lm lora
    python benchmarks/celo2.py --part ablation --tasks digits char_lm   # the un-meta-trained starting rule
    python benchmarks/celo2.py --part cost

Writes (merging) ``benchmarks/results/celo2.json`` and ``docs/figures/celo2_loss_curves.png``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn


ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "celo2.json"
FIGURE = ROOT / "docs" / "figures" / "celo2_loss_curves.png"
GSM8K = ROOT.parent / "shared" / "data" / "gsm8k" / "train.jsonl"
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


# ---------------------------------------------------------------------------------------------------------- tasks
def _gsm8k(limit: int):
    if not GSM8K.is_file():
        raise FileNotFoundError(f"GSM8K not found at {GSM8K} (the project's shared data)")
    rows = [json.loads(line) for line in GSM8K.read_text().splitlines()[:limit]]
    return rows


class DigitsTask:
    name, steps, batch = "digits", 300, 64

    def __init__(self):
        from sklearn.datasets import load_digits

        from hfx.optim.celo2.tasks import digits_split

        _, held = digits_split()
        data = load_digits()
        X = torch.tensor(data.data, dtype=torch.float32)[held] / 16.0
        y = torch.tensor(data.target)[held]
        half = len(y) // 2
        self.splits = {"dev": (X[:half], y[:half]), "test": (X[half:], y[half:])}

    def build(self, seed: int):
        torch.manual_seed(seed)
        return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))

    def batches(self, split: str, seed: int):
        X, y = self.splits[split]
        gen = torch.Generator().manual_seed(seed)
        while True:
            i = torch.randint(0, len(y), (self.batch,), generator=gen)
            yield X[i], y[i]

    def loss(self, model, batch):
        return nn.functional.cross_entropy(model(batch[0]), batch[1])


class CharLMTask:
    name, steps, batch, length = "char_lm", 300, 16, 64

    def __init__(self):
        from hfx.optim.celo2.tasks import encode_chars

        rows = _gsm8k(6000)
        self.splits = {
            "dev": encode_chars("\n".join(r["question"] for r in rows[:3000])),
            "test": encode_chars("\n".join(r["question"] for r in rows[3000:6000])),
        }

    def build(self, seed: int):
        from transformers import LlamaConfig, LlamaForCausalLM

        from hfx.optim.celo2.tasks import VOCAB

        torch.manual_seed(seed)
        config = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=self.length,
                             tie_word_embeddings=False, bos_token_id=None, eos_token_id=None, pad_token_id=None)  # fmt: skip
        return LlamaForCausalLM(config).train()

    def batches(self, split: str, seed: int):
        ids = self.splits[split]
        gen = torch.Generator().manual_seed(seed)
        while True:
            start = torch.randint(0, len(ids) - self.length, (self.batch,), generator=gen)
            yield ids[start.unsqueeze(1) + torch.arange(self.length)]

    def loss(self, model, batch):
        return model(input_ids=batch, labels=batch).loss


class LoRATask:
    name, steps, batch, length = "lora", 30, 4, 48

    def __init__(self, steps: int | None = None):
        self.steps = steps or self.steps
        from hfx.models import load_default_model

        self.base, self.tok = load_default_model()
        self.tok.padding_side = "right"
        rows = _gsm8k(1000)
        texts = [f"Question: {r['question']}\nAnswer: {r['answer']}" for r in rows]
        enc = self.tok(texts, max_length=self.length, truncation=True, padding="max_length", return_tensors="pt")
        self.splits = {"dev": (enc.input_ids[:500], enc.attention_mask[:500]),
                       "test": (enc.input_ids[500:], enc.attention_mask[500:])}  # fmt: skip

    def build(self, seed: int):
        import copy

        from peft import LoraConfig, get_peft_model

        torch.manual_seed(seed)
        config = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=["q_proj", "v_proj"],
                            task_type="CAUSAL_LM")  # fmt: skip
        return get_peft_model(copy.deepcopy(self.base), config).train()

    def batches(self, split: str, seed: int):
        ids, mask = self.splits[split]
        gen = torch.Generator().manual_seed(seed)
        while True:
            i = torch.randint(0, len(ids), (self.batch,), generator=gen)
            labels = ids[i].masked_fill(mask[i] == 0, -100)
            yield ids[i], mask[i], labels

    def loss(self, model, batch):
        return model(input_ids=batch[0], attention_mask=batch[1], labels=batch[2]).loss


TASKS = {"digits": DigitsTask, "char_lm": CharLMTask, "lora": LoRATask}


# ----------------------------------------------------------------------------------------------------- optimizers
def make_optimizer(kind: str, model, lr: float | None, meta_weights=None):
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if kind == "celo2":
        from hfx.optim import Celo2

        return Celo2(named, lr=lr, meta_weights=meta_weights)
    if kind == "adamw":
        return torch.optim.AdamW([p for _, p in named], lr=lr)
    if kind == "adamw_default":
        return torch.optim.AdamW([p for _, p in named])
    raise ValueError(kind)


def run(task, kind: str, lr, split: str, seed: int, meta_weights=None) -> list[float]:
    model = task.build(seed)
    opt = make_optimizer(kind, model, lr, meta_weights)
    data = task.batches(split, seed + 1)
    losses = []
    for _ in range(task.steps):
        loss = task.loss(model, next(data))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        value = loss.item()
        losses.append(value if math.isfinite(value) else float("inf"))
    return losses


def final_loss(losses: list[float]) -> float:
    tail = losses[-max(1, len(losses) // 10) :]
    return sum(tail) / len(tail)


def interval(values: list[float]) -> dict:
    n = len(values)
    mean = statistics.fmean(values)
    half = T95.get(n - 1, 1.96) * statistics.stdev(values) / math.sqrt(n) if n > 1 else float("nan")
    return {"mean": mean, "ci95": [mean - half, mean + half], "n": n, "values": values}


def quality(args, meta_weights) -> dict:
    from tqdm.auto import tqdm

    out = {}
    for name in args.tasks:
        task = TASKS[name](args.lora_steps) if name == "lora" else TASKS[name]()
        grid = args.lora_grid if name == "lora" else args.grid
        dev = {"celo2": {}, "adamw": {}}
        for kind in ("celo2", "adamw"):
            for lr in tqdm(grid, desc=f"{name} dev {kind}", leave=False):
                dev[kind][lr] = final_loss(run(task, kind, lr, "dev", args.dev_seed, meta_weights))
        best = {kind: min(dev[kind], key=dev[kind].get) for kind in dev}
        arms = {"celo2": ("celo2", best["celo2"]), "adamw_tuned": ("adamw", best["adamw"]),
                "adamw_default": ("adamw_default", None)}  # fmt: skip
        curves, finals = {}, {}
        for arm, (kind, lr) in arms.items():
            runs = [run(task, kind, lr, "test", seed, meta_weights) for seed in tqdm(args.seeds, desc=f"{name} {arm}")]
            finals[arm] = interval([final_loss(r) for r in runs])
            every = max(1, task.steps // 60)
            curves[arm] = [[round(statistics.fmean(r[i : i + every]), 5) for i in range(0, task.steps, every)]
                           for r in runs]  # fmt: skip
        diffs = {}
        for other in ("adamw_tuned", "adamw_default"):
            d = [a - b for a, b in zip(finals["celo2"]["values"], finals[other]["values"])]
            ci = interval(d)
            verdict = "celo2 lower" if ci["ci95"][1] < 0 else "celo2 higher" if ci["ci95"][0] > 0 else "inconclusive"
            diffs[f"celo2_minus_{other}"] = {**ci, "verdict": verdict}
        out[name] = {"steps": task.steps, "batch": task.batch, "dev_final_loss": dev, "chosen_lr": best,
                     "final_loss": finals, "paired": diffs, "curve_every": max(1, task.steps // 60), "curves": curves}  # fmt: skip
        print(json.dumps({name: {k: v["mean"] for k, v in finals.items()}, "lr": best}), flush=True)
        _merge({"quality": {name: out[name]}}, args)  # partial results as they come
    return out


def ablation(args) -> None:
    """The meta-training's *starting* rule (``Celo2MetaWeights(init="adam_like", seed=0)``) at Celo2's chosen LR, on the
    test seeds: how much of Celo2's result the 40 minutes of meta-training contributed."""
    from tqdm.auto import tqdm

    from hfx.optim import Celo2MetaWeights

    start = Celo2MetaWeights(init="adam_like", seed=0)
    for name in args.tasks:
        data = json.loads(RESULTS.read_text())
        res = data["quality"][name]
        task = TASKS[name](args.lora_steps) if name == "lora" else TASKS[name]()
        lr = res["chosen_lr"]["celo2"]
        runs = [run(task, "celo2", lr, "test", seed, start) for seed in tqdm(args.seeds, desc=f"{name} start rule")]
        finals = interval([final_loss(r) for r in runs])
        every = res["curve_every"]
        curves = [[round(statistics.fmean(r[i : i + every]), 5) for i in range(0, task.steps, every)] for r in runs]
        d = [a - b for a, b in zip(res["final_loss"]["celo2"]["values"], finals["values"])]
        ci = interval(d)
        verdict = "celo2 lower" if ci["ci95"][1] < 0 else "celo2 higher" if ci["ci95"][0] > 0 else "inconclusive"
        data = json.loads(RESULTS.read_text())  # re-read: another part may have written meanwhile
        res = data["quality"][name]
        res["final_loss"]["celo2_start_rule"] = finals
        res["curves"]["celo2_start_rule"] = curves
        res["paired"]["celo2_minus_celo2_start_rule"] = {**ci, "verdict": verdict}
        RESULTS.write_text(json.dumps(data, indent=2) + "\n")
        print(json.dumps({name: {"celo2_start_rule": finals["mean"], "celo2": res["final_loss"]["celo2"]["mean"]}}))


# ------------------------------------------------------------------------------------------------------------ cost
def state_bytes(opt) -> int:
    return sum(v.numel() * v.element_size() for s in opt.state.values() for v in s.values()
               if isinstance(v, torch.Tensor) and v.ndim > 0)  # fmt: skip


def interleaved_step_time(task, steps: int, warmup: int, meta_weights, lr_celo2=1e-3, lr_adamw=1e-3) -> dict:
    """Alternate one Celo2 and one AdamW training step on two copies of the same model; median times."""
    models = {"celo2": task.build(0), "adamw": task.build(0)}
    opts = {"celo2": make_optimizer("celo2", models["celo2"], lr_celo2, meta_weights),
            "adamw": make_optimizer("adamw", models["adamw"], lr_adamw)}  # fmt: skip
    data = task.batches("test", 1)
    times = {"celo2": [], "adamw": []}
    opt_times = {"celo2": [], "adamw": []}
    for i in range(warmup + steps):
        batch = next(data)
        order = ("celo2", "adamw") if i % 2 == 0 else ("adamw", "celo2")
        for kind in order:
            t0 = time.perf_counter()
            loss = task.loss(models[kind], batch)
            opts[kind].zero_grad(set_to_none=True)
            loss.backward()
            t1 = time.perf_counter()
            opts[kind].step()
            t2 = time.perf_counter()
            if i >= warmup:
                times[kind].append(t2 - t0)
                opt_times[kind].append(t2 - t1)
    med = {k: statistics.median(v) for k, v in times.items()}
    opt_med = {k: statistics.median(v) for k, v in opt_times.items()}
    ratios = [a / b for a, b in zip(times["celo2"], times["adamw"])]
    return {
        "step_time_ratio": med["celo2"] / med["adamw"],
        "step_time_ratio_median_of_pairs": statistics.median(ratios),
        "step_s": med,
        "optimizer_step_s": opt_med,
        "optimizer_step_ratio": opt_med["celo2"] / opt_med["adamw"],
        "state_bytes": {k: state_bytes(o) for k, o in opts.items()},
        "state_memory_ratio": state_bytes(opts["celo2"]) / state_bytes(opts["adamw"]),
        "trainable_parameters": sum(p.numel() for p in models["celo2"].parameters() if p.requires_grad),
        "timed_steps": steps,
    }


class FullFinetuneTask:
    """SmolLM2-135M, every parameter trained (no LoRA), 2 x 32 tokens: the optimizer's worst case here."""

    name, batch, length = "smollm2_full", 2, 32

    def __init__(self):
        from hfx.models import load_default_model

        self.model, tok = load_default_model()
        rows = _gsm8k(64)
        self.ids = tok([r["question"] for r in rows], max_length=self.length, truncation=True,
                       padding="max_length", return_tensors="pt").input_ids  # fmt: skip

    def build(self, seed: int):
        import copy

        return copy.deepcopy(self.model).train()

    def batches(self, split, seed):
        gen = torch.Generator().manual_seed(seed)
        while True:
            i = torch.randint(0, len(self.ids), (self.batch,), generator=gen)
            yield self.ids[i]

    def loss(self, model, batch):
        return model(input_ids=batch, labels=batch).loss


def cost(args, meta_weights) -> dict:
    out = {}
    for name, task_cls, steps in (("char_lm", CharLMTask, args.cost_steps), ("lora", LoRATask, args.cost_steps_large),
                                  ("smollm2_full", FullFinetuneTask, args.cost_steps_large)):  # fmt: skip
        if name not in args.cost_tasks:
            continue
        task = task_cls()
        out[name] = interleaved_step_time(task, steps, warmup=2, meta_weights=meta_weights)
        print(json.dumps({name: {k: v for k, v in out[name].items() if "ratio" in k}}), flush=True)
        _merge({"cost": {name: out[name]}}, args)
        del task
    return out


# ------------------------------------------------------------------------------------------------------- output
def _merge(update: dict, args) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    for key, value in update.items():
        if isinstance(value, dict):
            data.setdefault(key, {}).update(value)
        else:
            data[key] = value
    cost = data.get("cost", {})
    headline = cost.get("char_lm") or next(iter(cost.values()), None)
    data.update(
        {
            "metric": "training-step time Celo2 / AdamW (forward + backward + step, interleaved, tiny Llama char-LM)",
            "value": None if headline is None else round(headline["step_time_ratio"], 3),
            "goal": "<= 1.5",
            "command": "python benchmarks/celo2.py --part quality && python benchmarks/celo2.py --part cost",
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "loadavg": list(os.getloadavg()),
            "threads": torch.get_num_threads(),
            "meta_weights": args.meta_weights or "hfx shipped (src/hfx/optim/celo2/weights)",
        }
    )
    RESULTS.write_text(json.dumps(data, indent=2) + "\n")


def plot(path: Path = FIGURE) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = json.loads(RESULTS.read_text()).get("quality", {})
    if not data:
        return
    fig, axes = plt.subplots(1, len(data), figsize=(4.2 * len(data), 3.4))
    axes = [axes] if len(data) == 1 else axes
    colors = {
        "celo2": "tab:red",
        "adamw_tuned": "tab:blue",
        "adamw_default": "tab:gray",
        "celo2_start_rule": "tab:orange",
    }
    for ax, (name, res) in zip(axes, data.items()):
        every = res["curve_every"]
        for arm, curves in res["curves"].items():
            x = [i * every for i in range(len(curves[0]))]
            mean = [statistics.fmean(c[i] for c in curves) for i in range(len(x))]
            lo = [min(c[i] for c in curves) for i in range(len(x))]
            hi = [max(c[i] for c in curves) for i in range(len(x))]
            lr = 1e-3 if arm == "adamw_default" else res["chosen_lr"]["adamw" if arm == "adamw_tuned" else "celo2"]
            style = "--" if arm == "celo2_start_rule" else "-"
            ax.plot(x, mean, style, color=colors[arm], label=f"{arm} (lr {lr:g})")
            ax.fill_between(x, lo, hi, color=colors[arm], alpha=0.15)
        ax.set_title(f"{name} (held out), {len(res['curves']['celo2'])} seeds")
        ax.set_xlabel("step")
        ax.set_ylabel("training loss")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    print(f"wrote {path}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=["quality", "ablation", "cost", "plot"], required=True)
    parser.add_argument("--tasks", nargs="+", default=["digits", "char_lm", "lora"], choices=sorted(TASKS))
    parser.add_argument("--cost-tasks", nargs="+", default=["char_lm", "lora", "smollm2_full"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--dev-seed", type=int, default=100)
    parser.add_argument("--grid", nargs="+", type=float, default=[3e-4, 1e-3, 3e-3, 1e-2])
    parser.add_argument("--lora-grid", nargs="+", type=float, default=[3e-4, 1e-3, 3e-3])
    parser.add_argument("--lora-steps", type=int, default=30)
    parser.add_argument("--cost-steps", type=int, default=20)
    parser.add_argument("--cost-steps-large", type=int, default=4)
    parser.add_argument("--meta-weights", default=None, help="meta-weights folder / repo (default: hfx's shipped)")
    args = parser.parse_args(argv)
    meta = None
    if args.meta_weights:
        from hfx.optim.celo2 import load_meta_weights

        meta = load_meta_weights(args.meta_weights)
    if args.part == "quality":
        quality(args, meta)
        plot()
    elif args.part == "ablation":
        ablation(args)
        plot()
    elif args.part == "cost":
        cost(args, meta)
    else:
        plot()
    return 0


if __name__ == "__main__":
    sys.exit(main())
