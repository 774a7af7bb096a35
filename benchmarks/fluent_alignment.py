"""Fluent alignment cost: judge calls and seconds per on-policy step, `FluentOnlineDPOTrainer` + `ConstitutionJudge`
vs plain TRL online DPO with a reward model.

Both arms train the same policy (the tiny random Llama of ``hfx.testing``; ``--real`` for the embedded SmolLM2-135M)
on the same prompts with the same ``OnlineDPOConfig``; they differ only in how the two samples of each prompt are
compared:

* ``plain``  -- ``trl.experimental.online_dpo.OnlineDPOTrainer(reward_funcs=reward_model)``: a sequence-classification
  reward model of the policy's size scores each of the ``2 B`` completions once (``2 B`` reward forwards per step);
* ``fluent`` -- ``FluentOnlineDPOTrainer(judge=ConstitutionJudge(judge_model))``: a causal-LM judge of the policy's size
  reads the constitution and both completions in both orders (``2 B`` judge prompts per step, each holding the
  prompt, the constitution and two completions), plus the provenance guard at construction.

Step time is measured by a ``TrainerCallback`` (``on_step_begin`` -> ``on_step_end``: generation, rewards / judge,
policy + reference forward, backward, optimizer step). Each arm runs ``--steps`` steps per round after one warm-up
step; rounds alternate the arm order (ABBA...) so machine load hits both alike; medians are reported.

Metric: ``median step time (fluent) / median step time (plain)``; goal <= 2.0 (the judge reads about twice the tokens
of a reward model per completion: both orders). Writes ``benchmarks/results/fluent_alignment.json``.

    OMP_NUM_THREADS=1 python benchmarks/fluent_alignment.py [--steps 4] [--rounds 2] [--batch 4] [--real]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch


RESULTS = Path(__file__).resolve().parent / "results" / "fluent_alignment.json"
GSM8K = Path(__file__).resolve().parents[2] / "shared" / "data" / "gsm8k" / "train.jsonl"
GOAL = 2.0


def _prompts(n: int) -> list[str]:
    if GSM8K.is_file():
        with GSM8K.open() as f:
            return [json.loads(line)["question"] for _, line in zip(range(n), f)]
    return [f"Tom has {i} apples and buys {i + 3} more. How many apples does he have?" for i in range(n)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=4, help="timed steps per arm and round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch", type=int, default=4, help="prompts per step (2 samples each)")
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--real", action="store_true", help="SmolLM2-135M policy, judge and reward backbone")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)

    from datasets import Dataset
    from transformers import TrainerCallback
    from trl.experimental.online_dpo import OnlineDPOConfig, OnlineDPOTrainer

    from hfx.recipes.fluent import ConstitutionJudge, FluentOnlineDPOTrainer, with_provenance
    from hfx.testing import tiny_llama, tiny_reward_model

    if args.real:
        from transformers import AutoModelForSequenceClassification

        from hfx.models import load_default_model
        from hfx.models.default import default_model_path

        def policy():
            return load_default_model()

        def judge_model():
            return load_default_model()

        def reward_model():
            path = default_model_path()
            from transformers import AutoTokenizer

            return AutoModelForSequenceClassification.from_pretrained(path, num_labels=1), AutoTokenizer.from_pretrained(path)

        model_name = "SmolLM2-135M-Instruct"
    else:

        def policy():
            return tiny_llama(seed=0)

        def judge_model():
            return tiny_llama(seed=1)

        def reward_model():
            return tiny_reward_model(seed=1)

        model_name = "tiny random Llama (hfx.testing)"

    prompts = with_provenance(Dataset.from_dict({"prompt": _prompts(64)}), "native")

    class Timer(TrainerCallback):
        def __init__(self):
            self.times, self.start = [], None

        def on_step_begin(self, a, state, control, **kw):
            self.start = time.perf_counter()

        def on_step_end(self, a, state, control, **kw):
            self.times.append(time.perf_counter() - self.start)

    def run(arm: str, tmp: str) -> dict:
        model, tok = policy()
        config = OnlineDPOConfig(
            output_dir=tmp, max_steps=args.steps + 1, per_device_train_batch_size=args.batch,
            max_new_tokens=args.max_new_tokens, learning_rate=1e-5, use_cpu=not torch.cuda.is_available(), bf16=False,
            save_strategy="no", report_to=[], logging_steps=1, seed=0, disable_tqdm=True,
        )
        timer = Timer()
        calls = {"n": 0}
        if arm == "fluent":
            jm, jt = judge_model()
            judge = ConstitutionJudge(jm.eval(), jt, language="English", tie_rule="margin")
            trainer = FluentOnlineDPOTrainer(model=model, judge=judge, args=config, train_dataset=prompts,
                                             processing_class=tok, callbacks=[timer])
        else:
            rm, rt = reward_model()
            rm.register_forward_hook(lambda mod, inp, out: calls.__setitem__("n", calls["n"] + out.logits.shape[0]))
            trainer = OnlineDPOTrainer(model=model, reward_funcs=rm, args=config, train_dataset=prompts,
                                       processing_class=tok, reward_processing_classes=rt, callbacks=[timer])
        trainer.train()
        if arm == "fluent":
            calls["n"] = judge.stats.forward_prompts
        return {"step_s": timer.times[1:], "reward_calls_per_step": calls["n"] / (args.steps + 1)}

    results = {"plain": {"step_s": [], "calls": []}, "fluent": {"step_s": [], "calls": []}}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = ("plain", "fluent") if r % 2 == 0 else ("fluent", "plain")
            for arm in order:
                out = run(arm, f"{tmp}/{arm}{r}")
                results[arm]["step_s"] += out["step_s"]
                results[arm]["calls"].append(out["reward_calls_per_step"])
                print(f"round {r} {arm}: median step {statistics.median(out['step_s']):.3f} s", flush=True)
    med = {arm: statistics.median(v["step_s"]) for arm, v in results.items()}
    ratio = med["fluent"] / med["plain"]
    summary = {
        "metric": "median on-policy step time, FluentOnlineDPOTrainer + ConstitutionJudge / plain OnlineDPOTrainer + reward model",
        "value": round(ratio, 3),
        "goal": f"<= {GOAL}",
        "goal_met": ratio <= GOAL,
        "command": "OMP_NUM_THREADS=1 python benchmarks/fluent_alignment.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "model": model_name,
        "device": "cuda" if torch.cuda.is_available() else "cpu",
        "torch_threads": torch.get_num_threads(),
        "load_average": os.getloadavg(),
        "batch_prompts": args.batch,
        "max_new_tokens": args.max_new_tokens,
        "median_step_s": med,
        "judge_or_reward_calls_per_step": {arm: statistics.mean(v["calls"]) for arm, v in results.items()},
        "calls_note": "plain: reward-model sequences scored per step (2 per prompt); fluent: judge prompts per step (2 per pair: both orders)",
        "all_step_s": {arm: v["step_s"] for arm, v in results.items()},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(summary, indent=2), encoding="utf-8")
    print(json.dumps({k: summary[k] for k in ("metric", "value", "goal", "median_step_s", "judge_or_reward_calls_per_step")}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
