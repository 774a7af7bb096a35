"""GRPO vs THR-exploit vs THR-explore on easy GSM8K questions with a verifiable answer-match reward.

Each arm starts from the same model (``--model``, default: the embedded SmolLM2-135M-Instruct), trains for ``--steps``
GRPO steps on the easiest GSM8K training questions (fewest solution steps; ``../shared/data/gsm8k/train.jsonl``) with
reward 1 when the last number of the completion equals the reference answer, and is evaluated on held-out GSM8K test
questions with greedy accuracy (Pass@1) and Pass@k (``--k`` samples at temperature 1, a question counts when any
sample is correct). Arms:

* ``grpo``        -- `trl.GRPOTrainer` (through ``THRGRPOConfig(thr_mode="off")``, identical by the parity tests);
* ``thr-exploit`` -- ``thr_mode="reweight"``, ``thr_p=+p`` (paper: better Pass@1);
* ``thr-explore`` -- ``thr_mode="reweight"``, ``thr_p=-p`` (paper: better Pass@k).

A small CPU run (numbers are tiny and noisy at this scale):

    python examples/thr_gsm8k.py --steps 4 --train-limit 16 --eval-limit 16 --k 4 --max-completion-length 96

writes ``thr_gsm8k_results.json`` (and ``thr_tokens.png``, the last THR batch of ``thr-exploit`` coloured by THR).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path


os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch


DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "gsm8k"
INSTRUCTION = "Solve the problem. End your reply with 'The answer is N.' where N is a number."
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def extract_number(text: str) -> str | None:
    """The last number in ``text`` (commas removed, trailing ``.0`` dropped), or ``None``."""
    found = _NUMBER.findall(text)
    if not found:
        return None
    value = found[-1].replace(",", "").rstrip(".")
    return value.removesuffix(".0")


def load_gsm8k(split: str, limit: int, easy: bool) -> list[dict]:
    rows = [json.loads(line) for line in (DATA / f"{split}.jsonl").read_text().splitlines() if line.strip()]
    for row in rows:
        row["target"] = row["answer"].split("####")[-1].strip().replace(",", "")
        row["n_steps"] = row["answer"].count("<<")
    if easy:  # fewest calculator steps first (stable: keeps file order within a step count)
        rows = sorted(rows, key=lambda r: r["n_steps"])
    return rows[:limit]


def prompt_messages(question: str) -> list[dict]:
    return [{"role": "user", "content": f"{question}\n{INSTRUCTION}"}]


def answer_reward(prompts, completions, target, **kwargs) -> list[float]:
    """1.0 when the completion's last number equals ``target`` (a dataset column), else 0.0."""
    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    return [float(extract_number(t) == str(y)) for t, y in zip(texts, target)]


@torch.no_grad()
def evaluate(model, tok, rows, k: int, max_new_tokens: int, batch_size: int = 16, seed: int = 0) -> dict:
    """Greedy accuracy (Pass@1) and Pass@k (any of ``k`` samples at temperature 1 correct) on ``rows``."""
    model.eval()
    texts = [
        tok.apply_chat_template(prompt_messages(r["question"]), tokenize=False, add_generation_prompt=True)
        for r in rows
    ]
    greedy, any_correct = [], []
    torch.manual_seed(seed)
    for start in range(0, len(rows), batch_size):
        chunk, gold = texts[start : start + batch_size], [r["target"] for r in rows[start : start + batch_size]]
        enc = tok(chunk, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
        n = enc["input_ids"].size(1)
        out = model.generate(**enc, do_sample=False, max_new_tokens=max_new_tokens, pad_token_id=tok.pad_token_id)
        greedy += [extract_number(tok.decode(o[n:], skip_special_tokens=True)) == y for o, y in zip(out, gold)]
        out = model.generate(
            **enc,
            do_sample=True,
            temperature=1.0,
            num_return_sequences=k,
            max_new_tokens=max_new_tokens,
            pad_token_id=tok.pad_token_id,
        )
        decoded = [extract_number(tok.decode(o[n:], skip_special_tokens=True)) for o in out]
        any_correct += [any(d == y for d in decoded[i * k : (i + 1) * k]) for i, y in enumerate(gold)]
    return {"pass@1_greedy": sum(greedy) / len(rows), f"pass@{k}": sum(any_correct) / len(rows), "n": len(rows)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="Hub id or local path (default: the embedded default model)")
    parser.add_argument("--arms", default="grpo,thr-exploit,thr-explore")
    parser.add_argument("--p", type=float, default=0.2, help="|thr_p| of the THR arms")
    parser.add_argument("--steps", type=int, default=8, help="GRPO steps per arm")
    parser.add_argument("--train-limit", type=int, default=64, help="easy training questions")
    parser.add_argument("--eval-limit", type=int, default=32, help="held-out test questions")
    parser.add_argument("--batch", type=int, default=8, help="completions per step")
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--max-completion-length", type=int, default=128)
    parser.add_argument("--k", type=int, default=4, help="samples for Pass@k")
    parser.add_argument("--learning-rate", type=float, default=5e-6)
    parser.add_argument("--no-easy", action="store_true", help="take training questions in file order")
    parser.add_argument("--skip-base-eval", action="store_true")
    parser.add_argument("--output", type=Path, default=Path("thr_gsm8k_results.json"))
    parser.add_argument("--plot", type=Path, default=Path("thr_tokens.png"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    from datasets import Dataset

    from hfx.models import DEFAULT_MODEL_ID, load_causal_lm
    from hfx.trainers.thr import THRGRPOConfig, THRGRPOTrainer, plot_token_thr

    base, tok = load_causal_lm(args.model)
    train_rows = load_gsm8k("train", args.train_limit, easy=not args.no_easy)
    eval_rows = load_gsm8k("test", args.eval_limit, easy=False)
    dataset = Dataset.from_dict(
        {"prompt": [prompt_messages(r["question"]) for r in train_rows], "target": [r["target"] for r in train_rows]}
    )
    arms = {
        "grpo": dict(thr_mode="off"),
        "thr-exploit": dict(thr_mode="reweight", thr_p=abs(args.p)),
        "thr-explore": dict(thr_mode="reweight", thr_p=-abs(args.p)),
    }
    chosen = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = sorted(set(chosen) - set(arms))
    if unknown:
        parser.error(f"--arms: unknown {unknown}; choose from {sorted(arms)}")

    results = {
        "model": args.model or DEFAULT_MODEL_ID,
        "command": "python examples/thr_gsm8k.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "arms": {},
    }
    if not args.skip_base_eval:
        t0 = time.perf_counter()
        results["base"] = evaluate(base, tok, eval_rows, args.k, args.max_completion_length, seed=args.seed)
        results["base"]["eval_s"] = round(time.perf_counter() - t0, 1)
        print("base", results["base"], flush=True)

    for name in chosen:
        model = copy.deepcopy(base)
        config = THRGRPOConfig(
            output_dir=tempfile.mkdtemp(prefix=f"thr_gsm8k_{name}_"),
            max_steps=args.steps,
            per_device_train_batch_size=args.batch,
            num_generations=args.num_generations,
            max_completion_length=args.max_completion_length,
            learning_rate=args.learning_rate,
            temperature=1.0,
            use_cpu=not torch.cuda.is_available(),
            bf16=False,
            save_strategy="no",
            report_to="none",
            logging_steps=1,
            seed=args.seed,
            **arms[name],
        )
        trainer = THRGRPOTrainer(
            model=model, reward_funcs=answer_reward, args=config, train_dataset=dataset, processing_class=tok
        )
        t0 = time.perf_counter()
        trainer.train()
        train_s = time.perf_counter() - t0
        logs = [h for h in trainer.state.log_history if "reward" in h]
        t0 = time.perf_counter()
        scores = evaluate(trainer.model, tok, eval_rows, args.k, args.max_completion_length, seed=args.seed)
        scores.update(
            train_s=round(train_s, 1),
            eval_s=round(time.perf_counter() - t0, 1),
            train_reward_per_step=[round(h["reward"], 4) for h in logs],
            frac_reward_zero_std=[round(h.get("frac_reward_zero_std", float("nan")), 4) for h in logs],
            thr_dominant_frac=[round(h["thr/dominant_frac"], 4) for h in logs if "thr/dominant_frac" in h],
        )
        results["arms"][name] = scores
        print(name, scores, flush=True)
        if name == "thr-exploit" and trainer.last_thr is not None and args.plot:
            last = trainer.last_thr
            processed = (~last["skipped"]).repeat_interleave(args.num_generations).nonzero().flatten()
            if processed.numel():
                row = int(processed[0])
                plot_token_thr(
                    last["completion_ids"][row],
                    last["thr"][row],
                    tokenizer=tok,
                    dominant=last["dominant"][row],
                    mask=last["completion_mask"][row],
                    title=f"THR of a completion (advantage {float(last['advantages'][row].mean()):+.3f})",
                    output_path=args.plot,
                )
                results["plot"] = str(args.plot)
        del trainer, model

    args.output.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
