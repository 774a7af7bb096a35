"""Celo2 inside the Hugging Face stack: Trainer (optimizers= / optimizer_cls_and_kwargs, checkpoint resume), TRL's
SFTTrainer, and a 2-process accelerate (gloo) run that must match 1 process."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hfx.optim import Celo2, Celo2MetaWeights


HERE = Path(__file__).resolve().parent


def _meta():
    return Celo2MetaWeights(init="adam_like", seed=0)


def _dataset(tok, n=16):
    from datasets import Dataset

    texts = [f"step {i} of the optimizer test, with words {i * 7 % 13} and {i * 3 % 11}" for i in range(n)]
    enc = tok(texts, padding="max_length", max_length=24, truncation=True)
    labels = [
        [t if m else -100 for t, m in zip(ids, mask)] for ids, mask in zip(enc["input_ids"], enc["attention_mask"])
    ]
    return Dataset.from_dict({**enc, "labels": labels})


def _args(tmp_path, **kw):
    from transformers import TrainingArguments

    base = dict(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        max_steps=4,
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        save_strategy="no",
        logging_steps=1,
        seed=0,
        lr_scheduler_type="linear",
    )
    base.update(kw)
    return TrainingArguments(**base)


@pytest.mark.slow
def test_trainer_with_celo2_instance_and_scheduler(tiny_llama, tmp_path):
    from transformers import Trainer

    model, tok = tiny_llama
    model.train()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = Celo2(model.named_parameters(), lr=1e-2, weight_decay=0.01, meta_weights=_meta())
    trainer = Trainer(model=model, args=_args(tmp_path), train_dataset=_dataset(tok), optimizers=(opt, None))
    trainer.train()
    assert trainer.optimizer.optimizer is opt
    q = model.model.layers[0].self_attn.q_proj.weight
    assert "momentum" in opt.state[q] and "exp_avg" in opt.state[model.model.embed_tokens.weight]
    assert all(not torch.equal(before[n], p) for n, p in model.named_parameters())
    # the linear schedule drove param_group["lr"] (to 0 after the last of 4 steps)
    assert opt.param_groups[0]["initial_lr"] == 1e-2 and opt.param_groups[0]["lr"] == 0.0
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 4 and all(torch.isfinite(torch.tensor(losses)))


def test_trainer_optimizer_cls_and_kwargs_keeps_routing_and_decay_groups(tiny_llama, tmp_path):
    from transformers import Trainer

    model, tok = tiny_llama
    model.train()
    kwargs = {"lr": 1e-2, "names_from": model, "meta_weights": _meta()}
    trainer = Trainer(model=model, args=_args(tmp_path, max_steps=2, weight_decay=0.1), train_dataset=_dataset(tok),
                      optimizer_cls_and_kwargs=(Celo2, kwargs))  # fmt: skip
    trainer.train()
    opt = trainer.optimizer.optimizer
    assert isinstance(opt, Celo2)
    assert [g["weight_decay"] for g in opt.param_groups] == [0.1, 0.0]  # Trainer's decay / no-decay groups
    rules = {r["name"]: r["rule"] for r in opt.routing_table()}
    assert rules["model.embed_tokens.weight"] == "adamw" and rules["model.norm.weight"] == "adamw"
    assert rules["model.layers.1.mlp.down_proj.weight"] == "celo2"


@pytest.mark.slow
def test_trainer_checkpoint_resume_is_exact(tiny_llama, tmp_path):
    from transformers import Trainer

    _, tok = tiny_llama
    ds = _dataset(tok)

    def make(seed_model_dir=None):
        from hfx.testing import tiny_llama as build

        model, _ = build(seed=0)
        model.train()
        return model

    straight = make()
    opt = Celo2(straight.named_parameters(), lr=1e-2, weight_decay=0.01, meta_weights=_meta())
    Trainer(model=straight, args=_args(tmp_path / "a"), train_dataset=ds, optimizers=(opt, None)).train()

    first = make()
    opt = Celo2(first.named_parameters(), lr=1e-2, weight_decay=0.01, meta_weights=_meta())
    args = _args(tmp_path / "b", save_strategy="steps", save_steps=2)
    Trainer(model=first, args=args, train_dataset=ds, optimizers=(opt, None)).train()
    resumed = make()
    opt = Celo2(resumed.named_parameters(), lr=1e-2, weight_decay=0.01, meta_weights=Celo2MetaWeights(seed=5))
    trainer = Trainer(model=resumed, args=args, train_dataset=ds, optimizers=(opt, None))
    trainer.train(resume_from_checkpoint=str(tmp_path / "b" / "checkpoint-2"))
    for (n, a), b in zip(straight.named_parameters(), resumed.parameters()):
        assert torch.equal(a, b), n


@pytest.mark.slow
def test_trl_sft_trainer_with_celo2(tiny_llama, tmp_path):
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    model, tok = tiny_llama
    model.train()
    ds = Dataset.from_dict({"text": [f"celo2 learns to optimise, example {i}." for i in range(8)]})
    args = SFTConfig(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=4, report_to=[],
                     save_strategy="no", use_cpu=True, bf16=False, disable_tqdm=True, max_length=32)  # fmt: skip
    q = model.model.layers[0].self_attn.q_proj.weight
    before = q.detach().clone()
    opt = Celo2(model.named_parameters(), lr=1e-2, meta_weights=_meta())
    trainer = SFTTrainer(model=model, args=args, train_dataset=ds, processing_class=tok, optimizers=(opt, None))
    trainer.train()
    assert trainer.state.global_step == 2 and trainer.optimizer.optimizer is opt
    assert opt.state[q]["step"].item() == 2 and not torch.equal(before, q)
    # and through TRL with optimizer_cls_and_kwargs
    trainer = SFTTrainer(model=model, args=args, train_dataset=ds, processing_class=tok,
                         optimizer_cls_and_kwargs=(Celo2, {"lr": 1e-2, "names_from": model, "meta_weights": _meta()}))  # fmt: skip
    trainer.train()
    assert isinstance(trainer.optimizer.optimizer, Celo2)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_process_accelerate_run_matches_one_process(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    script = str(HERE / "celo2_ddp_script.py")
    one = subprocess.run([sys.executable, script, str(tmp_path)], env=env, capture_output=True, text=True, timeout=120)
    assert one.returncode == 0, one.stderr[-3000:]
    for _attempt in range(2):  # a port taken before torchrun binds it, or a rank aborted at gloo teardown: retry once
        two = subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(_free_port()),
             script, str(tmp_path)],
            env=env, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        if two.returncode == 0:
            break
    assert two.returncode == 0, two.stderr[-3000:]
    p1 = torch.load(tmp_path / "params_1.pt", weights_only=False)
    p2 = torch.load(tmp_path / "params_2.pt", weights_only=False)
    assert p1["world_size"] == 1 and p2["world_size"] == 2 and p2["env_world_size"] == 2
    for name, a in p1["params"].items():
        torch.testing.assert_close(p2["params"][name], a, rtol=1e-9, atol=1e-10, msg=name)
        assert not torch.equal(p1["init"][name], a), name  # every parameter was trained
