"""Train with Celo2 inside ``transformers.Trainer``: LoRA on the embedded SmolLM2-135M-Instruct (or a tiny random
Llama with ``--tiny``), GSM8K question + answer text, a linear LR schedule driving Celo2's ``param_group["lr"]``.

Paper: "Celo2: Towards Learned Optimization Free Lunch" (arXiv:2602.19142). The optimizer uses hfx's shipped
meta-weights unless ``--meta-weights`` points at another folder / Hub repo / official checkpoint file.

    python examples/celo2_trainer.py --steps 20            # prints the routing table and the loss per step
    python examples/celo2_trainer.py --tiny --steps 5       # seconds, no embedded model needed
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "gsm8k" / "train.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--tiny", action="store_true", help="tiny random Llama instead of SmolLM2-135M")
    parser.add_argument("--meta-weights", default=None)
    parser.add_argument("--out", default="outputs/celo2_trainer")
    args = parser.parse_args()

    from datasets import Dataset
    from peft import LoraConfig, get_peft_model
    from transformers import Trainer, TrainingArguments

    from hfx.optim import Celo2

    if args.tiny:
        from hfx.testing import tiny_llama

        model, tok = tiny_llama()
    else:
        from hfx.models import load_default_model

        model, tok = load_default_model()
    model = get_peft_model(
        model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    )
    if DATA.is_file():
        rows = [json.loads(line) for line in DATA.read_text().splitlines()[:256]]
        texts = [f"Question: {r['question']}\nAnswer: {r['answer']}" for r in rows]
    else:
        texts = [f"Question: what is {i} + {i}?\nAnswer: {2 * i}" for i in range(256)]
    tok.padding_side = "right"
    enc = tok(texts, max_length=64, truncation=True, padding="max_length")
    enc["labels"] = [
        [t if m else -100 for t, m in zip(ids, mask)] for ids, mask in zip(enc["input_ids"], enc["attention_mask"])
    ]
    ds = Dataset.from_dict(dict(enc))

    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    opt = Celo2(named, lr=args.lr, weight_decay=0.0, meta_weights=args.meta_weights)
    rules = {}
    for row in opt.routing_table():
        rules[row["rule"]] = rules.get(row["rule"], 0) + 1
    print("routing:", rules, "e.g.", opt.routing_table()[0])
    targs = TrainingArguments(output_dir=args.out, max_steps=args.steps, per_device_train_batch_size=4,
                              lr_scheduler_type="linear", warmup_steps=max(1, args.steps // 10), logging_steps=1,
                              report_to=[], save_strategy="no", use_cpu=True, disable_tqdm=False)  # fmt: skip
    trainer = Trainer(model=model, args=targs, train_dataset=ds, optimizers=(opt, None))
    trainer.train()
    losses = [round(h["loss"], 4) for h in trainer.state.log_history if "loss" in h]
    print("loss per step:", losses)


if __name__ == "__main__":
    main()
