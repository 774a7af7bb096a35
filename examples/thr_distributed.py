"""THR-GRPO on several processes: one script for torchrun on CPU and for accelerate launch (DDP / DeepSpeed / FSDP).

GRPO groups of ``--num-generations`` completions are split across processes whenever ``--batch`` (completions per
process) is not a multiple of it; THR then assembles each split group with all-gathers (``thr_exchange="auto"``:
hidden states or Gram factors, whichever moves fewer bytes) and every process reweights its own tokens. The logged
``thr/exchange_bytes`` is what one process received per generation batch.

    # CPU, 2 processes, tiny random Llama, split groups (3 completions per process, groups of 2):
    torchrun --nproc_per_node 2 examples/thr_distributed.py --tiny --batch 3 --num-generations 2 --steps 2
    # GPUs (see examples/accelerate/ for DeepSpeed ZeRO-2/3 and FSDP2 configs):
    accelerate launch --config_file examples/accelerate/deepspeed_zero3.yaml examples/thr_distributed.py \\
        --model Qwen/Qwen2.5-1.5B-Instruct --batch 6 --num-generations 8 --steps 100

(``accelerate launch --cpu --num_processes 2`` starts a single process unless ``mpirun`` is configured; use torchrun
on CPU.) Prompts: GSM8K training questions from ``../shared/data/gsm8k/train.jsonl`` when present, else built-in
arithmetic questions; reward 1 when the last number of the completion is the answer (``--tiny``: a token-parity
reward, since the untrained model never answers).
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path


os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

GSM8K = Path(__file__).resolve().parents[2] / "shared" / "data" / "gsm8k" / "train.jsonl"
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def load_prompts(limit: int) -> list[dict]:
    if GSM8K.is_file():
        with GSM8K.open() as f:
            rows = [json.loads(line) for _, line in zip(range(limit), f)]
        return [{"prompt": r["question"], "answer": r["answer"].split("####")[-1].strip()} for r in rows]
    return [{"prompt": f"What is {i} plus {i + 3}?", "answer": str(2 * i + 3)} for i in range(limit)]


def answer_reward(prompts, completions, answer, **kwargs):
    """1 when the last number in the completion equals the reference answer."""
    out = []
    for completion, target in zip(completions, answer):
        numbers = _NUMBER.findall(completion if isinstance(completion, str) else completion[-1]["content"])
        out.append(float(bool(numbers) and numbers[-1].replace(",", "") == target.replace(",", "")))
    return out


def parity_reward(prompts, completions, completion_ids, **kwargs):
    """Smoke-run reward for the untrained tiny model (it never answers): 1 when the first token id is even."""
    return [float(ids[0] % 2 == 0) if len(ids) else 0.0 for ids in completion_ids]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="Hub id or local path (default: the embedded default model)")
    parser.add_argument("--tiny", action="store_true", help="the tiny random Llama of hfx.testing (CPU smoke run)")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--batch", type=int, default=3, help="completions per process (per_device_train_batch_size)")
    parser.add_argument("--num-generations", type=int, default=2)
    parser.add_argument("--max-completion-length", type=int, default=32)
    parser.add_argument("--thr-mode", default="reweight", choices=["reweight", "thr_only", "nthr", "off"])
    parser.add_argument("--thr-p", type=float, default=0.1)
    parser.add_argument("--learning-rate", type=float, default=1e-6)
    parser.add_argument("--output-dir", default="outputs/thr_distributed")
    args = parser.parse_args(argv)

    import torch
    from datasets import Dataset

    from hfx.trainers.thr import THRGRPOConfig, THRGRPOTrainer

    if args.tiny:
        from hfx.testing import tiny_llama

        model, tok = tiny_llama()
    else:
        from hfx.models import load_causal_lm

        model, tok = load_causal_lm(args.model)
    on_gpu = torch.cuda.is_available()
    config = THRGRPOConfig(
        output_dir=args.output_dir,
        max_steps=args.steps,
        per_device_train_batch_size=args.batch,
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        learning_rate=args.learning_rate,
        thr_mode=args.thr_mode,
        thr_p=args.thr_p,
        use_cpu=not on_gpu,
        bf16=on_gpu,
        save_strategy="no",
        report_to="none",
        logging_steps=1,
        disable_tqdm=True,
    )
    trainer = THRGRPOTrainer(
        model=model,
        reward_funcs=parity_reward if args.tiny else answer_reward,
        args=config,
        train_dataset=Dataset.from_list(load_prompts(64)),
        processing_class=tok,
    )
    trainer.train()
    if trainer.accelerator.is_main_process:
        keys = ("reward", "thr/dominant_frac", "thr/skipped_group_frac", "thr/exchange_bytes")
        for log in trainer.state.log_history:
            if "loss" in log:
                print({k: log[k] for k in ("step", "loss", *keys) if k in log})
        exchange = trainer.last_thr_exchange
        print(
            f"processes: {trainer.accelerator.num_processes}; last exchange: "
            f"{None if exchange is None else (exchange.kind, exchange.bytes_received, exchange.split_groups)}"
        )


if __name__ == "__main__":
    main()
