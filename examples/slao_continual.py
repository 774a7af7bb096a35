"""SLAO continual fine-tuning on three small real text tasks, against sequential LoRA and the spec's ablations.

Paper: "Merge before Forget: A Single LoRA Continual Learning via Continual Merging" (arXiv:2512.23017).

Tasks (all offline, from ../shared/data, see its README for licences), trained in this order:

1. ``mtbench-category`` -- MT-Bench questions (lm-sys/FastChat, Apache-2.0; both turns of each question): name the
   question's category (writing, roleplay, reasoning, math, coding, extraction, stem, humanities). Split by question.
2. ``gsm8k-final-answer`` -- GSM8K train solutions (openai/grade-school-math, MIT) with the calculator annotations and
   the ``#### N`` line removed: read the worked solution, answer the final number N.
3. ``gsm8k-calc`` -- the calculator annotations ``<<48/2=24>>`` of GSM8K test solutions: "48/2 =" -> "24".

Every method fine-tunes one rank-8 LoRA on q_proj/v_proj of the embedded default model (SmolLM2-135M-Instruct) with
``ContinualTrainer`` (one ``Trainer.train()`` per task, fresh AdamW) and scores every task after every stage with
greedy exact match of the answer (teacher-forced, one forward pass). Methods are switches of ``SLAOConfig``:
``slao``, ``seq_lora`` (sequential LoRA, no merge), ``no_orth_init`` (merge, init from the last fine-tuned pair as
is), ``no_time_scaling`` (merge with a constant lambda = 0.5). Outputs: ``results.json`` (accuracy matrices, AA, BWT)
and one heat map per method in ``--out``.

    python examples/slao_continual.py --train-per-task 64 --eval-per-task 32
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import re
import sys
import time
from pathlib import Path


DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
CATEGORIES = ["writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities"]


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def mtbench_category(data: Path, n_train: int, n_eval: int, rng: random.Random):
    questions = _read_jsonl(data / "mt_bench" / "question.jsonl")
    rng.shuffle(questions)
    n_eval_q = max(1, (n_eval + 1) // 2)
    options = ", ".join(CATEGORIES)

    def rows(qs):
        return [
            (f"Categories: {options}.\nRequest: {turn[:160]}\nCategory:", f" {q['category']}")
            for q in qs
            for turn in q["turns"]
        ]

    return rows(questions[n_eval_q:])[:n_train], rows(questions[:n_eval_q])[:n_eval]


def gsm8k_final_answer(data: Path, n_train: int, n_eval: int, rng: random.Random):
    rows = []
    for ex in _read_jsonl(data / "gsm8k" / "train.jsonl"):
        body, _, final = ex["answer"].rpartition("####")
        body = re.sub(r"<<[^>]*>>", "", body).strip()
        final = final.strip().replace(",", "")
        if len(body) <= 220 and re.fullmatch(r"-?\d+", final):
            rows.append((f"Solution: {body}\nFinal answer:", f" {final}"))
    rng.shuffle(rows)
    return rows[:n_train], rows[n_train : n_train + n_eval]


def gsm8k_calc(data: Path, n_train: int, n_eval: int, rng: random.Random):
    seen, rows = set(), []
    for ex in _read_jsonl(data / "gsm8k" / "test.jsonl"):
        for expr, result in re.findall(r"<<([^=<>]+)=([^<>]+)>>", ex["answer"]):
            if re.fullmatch(r"-?\d+", result) and len(expr) <= 16 and expr not in seen:
                seen.add(expr)
                rows.append((f"Calculate: {expr} =", f" {result}"))
    rng.shuffle(rows)
    return rows[:n_train], rows[n_train : n_train + n_eval]


TASKS = {"mtbench-category": mtbench_category, "gsm8k-final-answer": gsm8k_final_answer, "gsm8k-calc": gsm8k_calc}


def tokenize(pairs, tok, max_length: int):
    from datasets import Dataset

    rows = []
    for prompt, answer in pairs:
        answer_ids = tok(answer, add_special_tokens=False)["input_ids"]
        prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"][-(max_length - len(answer_ids)) :]
        rows.append({"input_ids": prompt_ids + answer_ids, "labels": [-100] * len(prompt_ids) + answer_ids})
    return Dataset.from_list(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="Hub id / local path; default: the embedded SmolLM2-135M")
    parser.add_argument("--methods", default="slao,seq_lora,no_orth_init,no_time_scaling")
    parser.add_argument("--train-per-task", type=int, default=64)
    parser.add_argument("--eval-per-task", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=96)
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--r", type=int, default=8)
    parser.add_argument("--lora-alpha", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, default=Path("slao_continual_outputs"))
    args = parser.parse_args(argv)

    import torch
    from peft import get_peft_model
    from transformers import DataCollatorForSeq2Seq, TrainingArguments

    from hfx.models import load_causal_lm
    from hfx.tuners.slao import BASELINES, ContinualTrainer, SLAOConfig, sequence_exact_match

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(BASELINES))
    if unknown:
        parser.error(f"--methods: unknown {unknown}; choose from {sorted(BASELINES)}")
    if not args.data.is_dir():
        parser.error(f"--data: {args.data} not found (needs ../shared/data)")

    torch.manual_seed(args.seed)
    base, tok = load_causal_lm(args.model)
    tok.padding_side = "right"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    rng = random.Random(args.seed)
    train_sets, eval_sets = {}, {}
    for name, build in TASKS.items():
        train_pairs, eval_pairs = build(args.data, args.train_per_task, args.eval_per_task, rng)
        train_sets[name] = tokenize(train_pairs, tok, args.max_length)
        eval_sets[name] = tokenize(eval_pairs, tok, args.max_length)
        print(f"{name}: {len(train_pairs)} train / {len(eval_pairs)} eval, e.g. {train_pairs[0]!r}")
    collator = DataCollatorForSeq2Seq(tok, padding=True, label_pad_token_id=-100)

    args.out.mkdir(parents=True, exist_ok=True)
    zero_shot = {n: sequence_exact_match(base, d, data_collator=collator, batch_size=16) for n, d in eval_sets.items()}
    print("zero-shot (base model):", {k: round(v, 3) for k, v in zero_shot.items()})
    results = {"zero_shot": zero_shot, "args": {k: str(v) for k, v in vars(args).items()}, "methods": {}}
    for method in methods:
        torch.manual_seed(args.seed)
        config = SLAOConfig.for_baseline(
            method, r=args.r, lora_alpha=args.lora_alpha, lora_dropout=0.1, target_modules=["q_proj", "v_proj"]
        )
        config.task_type = "CAUSAL_LM"
        model = get_peft_model(copy.deepcopy(base), config)
        training_args = TrainingArguments(
            output_dir=str(args.out / "checkpoints" / method),
            num_train_epochs=args.epochs,
            per_device_train_batch_size=args.batch_size,
            per_device_eval_batch_size=16,
            learning_rate=args.lr,
            lr_scheduler_type="constant",
            warmup_steps=0,
            logging_steps=4,
            save_strategy="no",
            report_to=[],
            seed=args.seed,
            use_cpu=not torch.cuda.is_available(),
            disable_tqdm=True,
        )
        trainer = ContinualTrainer(
            model=model,
            args=training_args,
            task_datasets=train_sets,
            eval_datasets=eval_sets,
            data_collator=collator,
        )
        t0 = time.perf_counter()
        result = trainer.train_tasks()
        elapsed = time.perf_counter() - t0
        result.plot(
            args.out / f"accuracy_{method}.png",
            title=f"{method}: AA {result.average_accuracy:.3f}, BWT {result.backward_transfer:+.3f}",
        )
        results["methods"][method] = {**result.to_dict(), "seconds": elapsed}
        print(
            f"\n{method}: AA = {result.average_accuracy:.3f}  BWT = {result.backward_transfer:+.3f}  ({elapsed:.0f} s)"
        )
        print(result.accuracy_matrix.round(3))
        (args.out / "results.json").write_text(json.dumps(results, indent=2))
        del trainer, model

    print("\n| method | AA | BWT |\n|---|---|---|")
    for method, r in results["methods"].items():
        print(f"| {method} | {r['average_accuracy']:.3f} | {r['backward_transfer']:+.3f} |")
    print(f"wrote {args.out / 'results.json'} and heat maps accuracy_<method>.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
