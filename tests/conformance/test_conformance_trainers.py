"""Conformance harness for hfx's TRL trainers: generic behaviour checks, parametrised over the parent class as a
control and hfx's subclasses.

Written for hfx (no code from TRL's test-suite), modelled on what TRL checks for its own trainers: every loss type
trains, PEFT adapters train only the adapter, evaluation runs, iterable datasets, several policy updates per
generation (``num_iterations > 1``), the KL term (``beta > 0``), several reward functions, and a run resumed from a
checkpoint equals an uninterrupted one. Each check runs for ``trl.GRPOTrainer`` (control), ``THRGRPOTrainer`` with
``thr_mode="off"`` and with ``thr_mode="reweight"``; a check that fails for the control points at the harness or at
TRL, one that fails only for a subclass at hfx.
"""

from __future__ import annotations

import math

import pytest
import torch


TRAINERS = ["trl.GRPOTrainer", "THRGRPOTrainer[off]", "THRGRPOTrainer[reweight]"]
LOSS_TYPES = ["grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "vespo", "luspo"]
PROMPTS = ["hello world", "two plus two ?", "the quick brown", "a photo of"]


def alternating_reward(prompts, completions, completion_ids, **kwargs):
    """1, 0, 1, 0 within each group (rows of a prompt are consecutive), so every group is mixed."""
    seen, out = {}, []
    for prompt in prompts:
        out.append(float(seen.get(prompt, 0) % 2 == 0))
        seen[prompt] = seen.get(prompt, 0) + 1
    return out


def length_reward(prompts, completions, completion_ids, **kwargs):
    return [-0.1 * len(ids) for ids in completion_ids]


def _dataset(n=4):
    from datasets import Dataset

    return Dataset.from_dict({"prompt": PROMPTS * n})


def _make(
    kind,
    tmp_path,
    model=None,
    reward_funcs=alternating_reward,
    train_dataset=None,
    eval_dataset=None,
    peft_config=None,
    **cfg,
):
    from trl import GRPOConfig, GRPOTrainer

    from hfx.testing import tiny_llama, tiny_tokenizer
    from hfx.trainers.thr import THRGRPOConfig, THRGRPOTrainer

    if model is None:
        model, tok = tiny_llama()
    else:
        tok = tiny_tokenizer()
    common = dict(
        output_dir=str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=6,
        learning_rate=1e-2,
        temperature=0.8,
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        report_to="none",
        logging_steps=1,
        disable_tqdm=True,
        seed=0,
    )
    common.update(cfg)
    if kind == "trl.GRPOTrainer":
        args, cls = GRPOConfig(**common), GRPOTrainer
    else:
        mode = kind[kind.index("[") + 1 : -1]
        args, cls = THRGRPOConfig(thr_mode=mode, thr_p=0.5, thr_tau_beta=0.5, **common), THRGRPOTrainer
    return cls(
        model=model,
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=_dataset() if train_dataset is None else train_dataset,
        eval_dataset=eval_dataset,
        processing_class=tok,
        peft_config=peft_config,
    )


def _params(trainer):
    return {n: p.detach().clone() for n, p in trainer.model.named_parameters()}


def _changed(before, trainer):
    return {n for n, p in trainer.model.named_parameters() if not torch.equal(before[n], p.detach())}


def _check_thr(kind, trainer):
    """THR-specific: reweight produced per-token THR on the last training batch; off / control left none."""
    last = getattr(trainer, "last_thr", None)
    if kind.endswith("[reweight]"):
        assert last is not None and last["thr"].abs().sum() > 0 and last["advantages"].dim() == 2
    else:
        assert last is None


@pytest.mark.parametrize("kind", TRAINERS)
def test_every_loss_type_trains(kind, tmp_path):
    """One real `train()` step with the config's loss type, then for every other loss type one training step of the
    same trainer (`training_step`, which generates, then an optimizer step: a step of `train()` without its loop)."""
    trainer = _make(kind, tmp_path, loss_type="dapo")
    trainer.train()
    assert math.isfinite(trainer.state.log_history[0]["loss"])
    _check_thr(kind, trainer)
    optimizer = torch.optim.SGD([p for p in trainer.model.parameters() if p.requires_grad], lr=1e-2)
    batch = [{"prompt": p} for p in PROMPTS[:2] for _ in range(2)]
    for loss_type in LOSS_TYPES:
        trainer.loss_type = loss_type
        trainer.importance_sampling_level = "sequence" if loss_type == "luspo" else "token"
        trainer._buffered_inputs, trainer._step = None, 0
        before = _params(trainer)
        trainer.model.train()
        loss = trainer.training_step(trainer.model, batch, None)  # runs _prepare_inputs (generation) itself
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        assert torch.isfinite(loss), loss_type
        assert _changed(before, trainer), loss_type
        _check_thr(kind, trainer)


@pytest.mark.parametrize("kind", TRAINERS)
def test_peft_lora_trains_only_the_adapter(kind, tmp_path):
    from peft import LoraConfig

    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    trainer = _make(kind, tmp_path, peft_config=lora, max_steps=2)
    before = _params(trainer)
    trainer.train()
    changed = _changed(before, trainer)
    assert changed and all("lora_" in n for n in changed)
    assert all(not p.requires_grad for n, p in trainer.model.named_parameters() if "lora_" not in n)
    _check_thr(kind, trainer)


@pytest.mark.parametrize("kind", TRAINERS)
def test_evaluation(kind, tmp_path):
    trainer = _make(
        kind,
        tmp_path,
        eval_dataset=_dataset(1),
        max_steps=2,
        eval_strategy="steps",
        eval_steps=1,
        per_device_eval_batch_size=4,
    )
    metrics = trainer.evaluate()
    assert math.isfinite(metrics["eval_loss"]) and "eval_reward" in metrics
    assert not any(k.startswith("eval_thr/") for k in metrics)  # THR acts in training only
    trainer.train()
    evals = [log for log in trainer.state.log_history if "eval_loss" in log]
    assert len(evals) == 2
    _check_thr(kind, trainer)


@pytest.mark.parametrize("kind", TRAINERS)
def test_iterable_dataset(kind, tmp_path):
    stream = _dataset().to_iterable_dataset()
    trainer = _make(kind, tmp_path, train_dataset=stream, max_steps=2)
    before = _params(trainer)
    trainer.train()
    assert trainer.state.global_step == 2 and _changed(before, trainer)
    _check_thr(kind, trainer)


@pytest.mark.parametrize("kind", TRAINERS)
def test_several_updates_per_generation(kind, tmp_path):
    """num_iterations = 2: one generation serves 2 optimizer steps (TRL then computes the old log-probs); the
    second step really updates the policy with the same (THR) advantages."""
    trainer = _make(kind, tmp_path, num_iterations=2, max_steps=2)
    calls = []
    original = trainer._generate_and_score_completions

    def counted(inputs):
        out = original(inputs)
        calls.append(out)
        return out

    trainer._generate_and_score_completions = counted
    trainer.train()
    assert len(calls) == 1 and "old_per_token_logps" in calls[0]
    assert trainer.state.global_step == 2
    _check_thr(kind, trainer)


@pytest.mark.parametrize("kind", TRAINERS)
def test_kl_term(kind, tmp_path):
    """beta > 0 without PEFT: the reference model is loaded from the policy's saved folder; KL is logged."""
    from hfx.testing import tiny_llama

    model, tok = tiny_llama()
    model.save_pretrained(tmp_path / "policy")
    tok.save_pretrained(tmp_path / "policy")
    trainer = _make(kind, tmp_path / "run", model=str(tmp_path / "policy"), beta=0.1, max_steps=2)
    assert trainer.ref_model is not None
    trainer.train()
    kls = [log["kl"] for log in trainer.state.log_history if "kl" in log]
    assert len(kls) == 2 and all(math.isfinite(k) and k >= -1e-6 for k in kls) and kls[1] > 0
    _check_thr(kind, trainer)


@pytest.mark.parametrize("kind", TRAINERS)
def test_several_reward_functions(kind, tmp_path):
    trainer = _make(kind, tmp_path, reward_funcs=[alternating_reward, length_reward], reward_weights=[1.0, 0.5])
    trainer.train()
    logs = trainer.state.log_history[0]
    assert "rewards/alternating_reward/mean" in logs and "rewards/length_reward/mean" in logs
    expected = logs["rewards/alternating_reward/mean"] + 0.5 * logs["rewards/length_reward/mean"]
    assert logs["reward"] == pytest.approx(expected, abs=1e-4)
    _check_thr(kind, trainer)


@pytest.mark.parametrize("kind", TRAINERS)
def test_resume_from_checkpoint_equals_uninterrupted(kind, tmp_path):
    full = _make(kind, tmp_path / "full", max_steps=2, save_strategy="steps", save_steps=1)
    full.train()
    checkpoint = tmp_path / "full" / "checkpoint-1"
    assert checkpoint.is_dir()
    if kind.startswith("THR"):
        assert (checkpoint / "thr_config.json").is_file()
    resumed = _make(kind, tmp_path / "resumed", max_steps=2, save_strategy="steps", save_steps=1)
    resumed.train(resume_from_checkpoint=str(checkpoint))
    assert resumed.state.global_step == 2
    for (name, p), (_, q) in zip(full.model.named_parameters(), resumed.model.named_parameters()):
        torch.testing.assert_close(q, p, rtol=1e-5, atol=1e-7, msg=name)
    _check_thr(kind, resumed)
