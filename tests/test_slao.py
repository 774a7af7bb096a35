"""Tests for the SLAO PEFT tuner (arXiv:2512.23017): spec conformance cases 1-8, save/load, export, driver, errors."""

import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch


R = 8
ALPHA = 16
TARGETS = ["q_proj", "v_proj"]
X = torch.tensor([[1, 17, 42, 99, 5, 230, 7], [1, 300, 12, 8, 64, 2, 3]])


def _peft():
    import peft

    return peft


def make_slao(seed=0, lora_seed=1, **overrides):
    from hfx.testing import tiny_llama
    from hfx.tuners.slao import SLAOConfig

    base, tok = tiny_llama(seed=seed)
    kwargs = dict(r=R, lora_alpha=ALPHA, lora_dropout=0.0, target_modules=TARGETS, task_type="CAUSAL_LM")
    kwargs.update(overrides)
    torch.manual_seed(lora_seed)
    return _peft().get_peft_model(base, SLAOConfig(**kwargs)), tok


def fake_train(model, seed):
    """Stand-in for fine-tuning: move every lora_A / lora_B by a seeded random step (both factors, like training)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_A" in name or "lora_B" in name:
                p.add_(0.05 * torch.randn(p.shape, generator=g))


def slao_layers(model):
    from hfx.tuners.slao import SLAOLinear

    return [(n, m) for n, m in model.named_modules() if isinstance(m, SLAOLinear)]


def lora_AB(layer):
    return layer.lora_A["default"].weight.detach().clone(), layer.lora_B["default"].weight.detach().clone()


def base_logits(seed=0):
    from hfx.testing import tiny_llama

    base, _ = tiny_llama(seed=seed)
    with torch.no_grad():
        return base(X).logits


# ------------------------------------------------------------------------------------------------------ registration
def test_registered_with_peft_and_exposes_lora_layers():
    from peft.mapping import PEFT_TYPE_TO_CONFIG_MAPPING, PEFT_TYPE_TO_TUNER_MAPPING
    from peft.tuners.lora import LoraLayer

    from hfx.tuners.slao import SLAOConfig, SLAOModel, register

    assert register() is False  # idempotent: already registered on import
    assert PEFT_TYPE_TO_CONFIG_MAPPING["SLAO"] is SLAOConfig
    assert PEFT_TYPE_TO_TUNER_MAPPING["SLAO"] is SLAOModel
    model, _ = make_slao()
    assert isinstance(model.base_model, SLAOModel)
    layers = slao_layers(model)
    assert len(layers) == 4 and all(isinstance(m, LoraLayer) for _, m in layers)
    assert {n.rsplit(".", 1)[-1] for n, _ in layers} == {"q_proj", "v_proj"}
    # hand count: q_proj 32->32: 8*32 + 32*8 = 512; v_proj 32->16 (2 KV heads x 8): 8*32 + 16*8 = 384; 2 layers
    n_trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert n_trainable == 2 * (512 + 384)
    assert layers[0][1].scaling["default"] == ALPHA / R


# ------------------------------------------------------------------------------------------ conformance 1: constant size
def test_case1_constant_size_after_1_and_10_tasks():
    from peft import get_peft_model_state_dict

    model, _ = make_slao()

    def snapshot():
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        stored = {k: tuple(v.shape) for k, v in get_peft_model_state_dict(model).items()}
        return trainable, stored

    snapshots = {}
    for task in range(1, 11):
        assert model.start_task() == task
        fake_train(model, seed=task)
        model.finish_task()
        if task in (1, 10):
            snapshots[task] = snapshot()
    assert snapshots[1] == snapshots[10]
    assert model.num_tasks_finished() == 10
    for _, layer in slao_layers(model):
        # persistent SLAO state: exactly two LoRA pairs (merged + last fine-tuned) and the task counter
        state = {n: b for n, b in layer.named_buffers() if n.startswith("lora_slao_")}
        assert set(state) == {
            "lora_slao_A_merge.default",
            "lora_slao_B_merge.default",
            "lora_slao_A_ft.default",
            "lora_slao_B_ft.default",
            "lora_slao_task_state.default",
        }
        assert state["lora_slao_A_merge.default"].shape == state["lora_slao_A_ft.default"].shape == (R, 32)


# ---------------------------------------------------------------------------------------- conformance 2-4: initialisation
def test_case2_orthonormal_init_spans_previous_A():
    model, _ = make_slao()
    model.start_task()
    fake_train(model, seed=3)
    A_ft = {n: lora_AB(m)[0] for n, m in slao_layers(model)}
    model.finish_task()
    assert model.start_task() == 2
    for name, layer in slao_layers(model):
        A_init = layer.lora_A["default"].weight.detach()
        assert (A_init @ A_init.T - torch.eye(R)).abs().max() < 1e-5
        projected = A_ft[name] @ A_init.T @ A_init
        torch.testing.assert_close(projected, A_ft[name], atol=1e-5, rtol=1e-5)


def test_case3_sign_canonicalisation_hand_computed_and_deterministic():
    from hfx.tuners.slao import orthogonal_init, sign_fixed_qr

    # A_ft^T = [[-2, 0], [0, 3], [0, 0]]: Q = [[-1, 0], [0, 1], [0, 0]], R = diag(2, 3) after the sign fix
    A_ft = torch.tensor([[-2.0, 0.0, 0.0], [0.0, 3.0, 0.0]])
    q, r = sign_fixed_qr(A_ft.T)
    torch.testing.assert_close(r, torch.tensor([[2.0, 0.0], [0.0, 3.0]]))
    torch.testing.assert_close(orthogonal_init(A_ft), torch.tensor([[-1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))
    # a random A: Q R reconstructs A^T, diag(R) >= 0, and two inits are bitwise identical
    A = torch.randn(R, 32)
    q, r = sign_fixed_qr(A.T)
    torch.testing.assert_close(q @ r, A.T, atol=1e-5, rtol=1e-5)
    assert bool((torch.diagonal(r) >= 0).all())
    assert torch.equal(orthogonal_init(A), orthogonal_init(A.clone()))
    # through the tuner: two identical runs give bitwise-identical A_init
    inits = []
    for _ in range(2):
        model, _ = make_slao()
        model.start_task()
        fake_train(model, seed=5)
        model.finish_task()
        model.start_task()
        inits.append([lora_AB(m)[0] for _, m in slao_layers(model)])
    assert all(torch.equal(a, b) for a, b in zip(*inits))


def test_case4_B_inherited_from_last_finetuned_B():
    model, _ = make_slao()
    B_ft = []
    for task in (1, 2, 3):
        model.start_task()
        if task >= 2:
            for (_, layer), previous in zip(slao_layers(model), B_ft[-1]):
                B_init = layer.lora_B["default"].weight.detach()
                assert torch.equal(B_init, previous)  # B_ft,i-1 exactly
                assert B_init.abs().sum() > 0  # not zero
                if task == 3:  # and not B_merge,i-1 (they differ from i = 3 on)
                    assert not torch.equal(B_init, layer.lora_slao_B_merge["default"])
        fake_train(model, seed=10 + task)
        B_ft.append([lora_AB(m)[1] for _, m in slao_layers(model)])
        model.finish_task()


# --------------------------------------------------------------------------------------------- conformance 5: merge rule
def test_case5_merge_formula_hand_computed():
    from hfx.tuners.slao import time_aware_merge

    B_merge1 = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    B_ft2 = torch.tensor([[3.0, 2.0], [1.0, 0.0]])
    # 1 + 0.70710678 * 2 = 2.41421356; 3 - 0.70710678 * 2 = 1.58578644; 4 - 0.70710678 * 4 = 1.17157288
    expected = torch.tensor([[2.41421356, 2.0], [1.58578644, 1.17157288]])
    torch.testing.assert_close(time_aware_merge(B_merge1, B_ft2, 1 / math.sqrt(2)), expected)
    torch.testing.assert_close(time_aware_merge(B_merge1, B_ft2, 0.5), torch.tensor([[2.0, 2.0], [2.0, 2.0]]))


def test_case5_merge_rule_in_the_tuner():
    model, _ = make_slao()
    merged_B, ft = None, None
    lambdas = []
    for task in (1, 2, 3, 4):
        model.start_task()
        fake_train(model, seed=20 + task)
        ft = [lora_AB(m) for _, m in slao_layers(model)]
        previous = merged_B
        lambdas.append(model.finish_task())
        merged_B = [m.lora_slao_B_merge["default"].clone() for _, m in slao_layers(model)]
        for (_, layer), (A_ft, B_ft), B_now, j in zip(slao_layers(model), ft, merged_B, range(4)):
            assert torch.equal(layer.lora_slao_A_merge["default"], A_ft)  # A_merge,i = A_ft,i exactly
            assert torch.equal(layer.lora_A["default"].weight, A_ft)  # live weights = merged pair
            if task == 1:
                assert torch.equal(B_now, B_ft)
            elif task in (2, 4):
                lam = {2: 0.70710678, 4: 0.5}[task]
                torch.testing.assert_close(B_now, previous[j] + lam * (B_ft - previous[j]), atol=1e-6, rtol=1e-6)
    assert lambdas[0] == 1.0 and abs(lambdas[1] - 0.70710678) < 1e-8 and lambdas[3] == 0.5


def test_case5_fixed_point_when_every_task_ends_with_the_same_B():
    model, _ = make_slao()
    g = torch.Generator().manual_seed(0)
    fixed_B = [0.1 * torch.randn(m.lora_B["default"].weight.shape, generator=g) for _, m in slao_layers(model)]
    for _ in range(4):
        model.start_task()
        with torch.no_grad():
            for (_, layer), B in zip(slao_layers(model), fixed_B):
                layer.lora_B["default"].weight.copy_(B)
        model.finish_task()
        for (_, layer), B in zip(slao_layers(model), fixed_B):
            torch.testing.assert_close(layer.lora_slao_B_merge["default"], B, atol=1e-7, rtol=0)


# ---------------------------------------------------------------------------------- conformance 6-7: degenerate, W0 intact
def test_case6_task1_start_equals_base_and_T1_equals_plain_lora():
    from peft import LoraConfig, get_peft_model

    from hfx.testing import tiny_llama

    model, _ = make_slao()
    model.start_task()
    with torch.no_grad():
        torch.testing.assert_close(model(X).logits, base_logits(), rtol=0, atol=0)

    base, _ = tiny_llama(seed=0)
    torch.manual_seed(1)
    lora = get_peft_model(
        base, LoraConfig(r=R, lora_alpha=ALPHA, lora_dropout=0.0, target_modules=TARGETS, task_type="CAUSAL_LM")
    )
    labels = X.clone()
    for peft_model in (model, lora):
        optimizer = torch.optim.AdamW([p for p in peft_model.parameters() if p.requires_grad], lr=1e-2)
        for _ in range(3):
            optimizer.zero_grad()
            peft_model(input_ids=X, labels=labels).loss.backward()
            optimizer.step()
    model.finish_task()
    with torch.no_grad():
        slao_out, lora_out = model(X).logits, lora(X).logits
    torch.testing.assert_close(slao_out, lora_out, rtol=1e-6, atol=1e-6)
    assert not torch.allclose(slao_out, base_logits(), atol=1e-4)  # training did change the model


def test_case7_base_weights_untouched_and_disable_adapter_gives_base():
    model, _ = make_slao()
    W0 = {n: p.detach().clone() for n, p in model.named_parameters() if "base_layer" in n}
    for task in range(1, 4):
        model.start_task()
        fake_train(model, seed=30 + task)
        model.finish_task()
    for n, p in model.named_parameters():
        if "base_layer" in n:
            assert torch.equal(p, W0[n])
    with torch.no_grad(), model.disable_adapter():
        torch.testing.assert_close(model(X).logits, base_logits(), rtol=0, atol=0)


def test_merged_model_equals_W0_plus_scaled_B_merge_A_merge():
    from hfx.testing import tiny_llama

    model, _ = make_slao()
    for task in range(1, 4):
        model.start_task()
        fake_train(model, seed=40 + task)
        model.finish_task()
    reference, _ = tiny_llama(seed=0)
    modules = dict(reference.named_modules())
    with torch.no_grad():
        for name, layer in slao_layers(model):
            A, B = layer.lora_slao_A_merge["default"], layer.lora_slao_B_merge["default"]
            modules[name.removeprefix("base_model.model.")].weight.add_((ALPHA / R) * (B @ A))
        expected = reference(X).logits
        torch.testing.assert_close(model(X).logits, expected, atol=1e-5, rtol=1e-5)
        merged = model.merge_and_unload()
        torch.testing.assert_close(merged(X).logits, expected, atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------------------------------------------ save / load
def test_save_load_round_trip_identical_logits_and_state(tmp_path):
    from peft import PeftModel

    from hfx.testing import tiny_llama

    model, _ = make_slao()
    for task in (1, 2):
        model.start_task()
        fake_train(model, seed=50 + task)
        model.finish_task()
    model.save_pretrained(tmp_path)
    assert '"peft_type": "SLAO"' in (tmp_path / "adapter_config.json").read_text()
    loaded = PeftModel.from_pretrained(tiny_llama(seed=0)[0], tmp_path, is_trainable=True)
    with torch.no_grad():
        torch.testing.assert_close(loaded(X).logits, model(X).logits, rtol=0, atol=0)
    assert loaded.num_tasks_finished() == 2 and not loaded.in_task()
    assert loaded.peft_config["default"].init_strategy == "orthogonal"
    for (_, a), (_, b) in zip(slao_layers(model), slao_layers(loaded)):
        for buffer in (
            "lora_slao_A_merge",
            "lora_slao_B_merge",
            "lora_slao_A_ft",
            "lora_slao_B_ft",
            "lora_slao_task_state",
        ):
            assert torch.equal(getattr(a, buffer)["default"], getattr(b, buffer)["default"])
    # the loaded adapter resumes the sequence identically
    assert model.start_task() == loaded.start_task() == 3
    for (_, a), (_, b) in zip(slao_layers(model), slao_layers(loaded)):
        assert all(torch.equal(x, y) for x, y in zip(lora_AB(a), lora_AB(b)))


def _run_python(code, tmp_path, env_extra=None):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **(env_extra or {})}
    script = tmp_path / "check.py"
    script.write_text(textwrap.dedent(code))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _save_base_and_expected(model, tmp_path):
    from hfx.testing import tiny_llama

    base, _ = tiny_llama(seed=0)
    base.save_pretrained(tmp_path / "base")
    with torch.no_grad():
        torch.save({"x": X, "logits": model(X).logits}, tmp_path / "expected.pt")


def test_fresh_process_import_hfx_then_peft_from_pretrained(tmp_path):
    model, _ = make_slao()
    model.start_task()
    fake_train(model, seed=60)
    model.finish_task()
    model.save_pretrained(tmp_path / "slao")
    _save_base_and_expected(model, tmp_path)
    out = _run_python(
        f"""
        import sys, torch
        import hfx
        assert "peft" not in sys.modules
        from peft import PeftModel
        from transformers import AutoModelForCausalLM
        base = AutoModelForCausalLM.from_pretrained({str(tmp_path / "base")!r})
        model = PeftModel.from_pretrained(base, {str(tmp_path / "slao")!r})
        ref = torch.load({str(tmp_path / "expected.pt")!r})
        with torch.no_grad():
            torch.testing.assert_close(model(ref["x"]).logits, ref["logits"], rtol=0, atol=0)
        print("OK", type(model.base_model).__name__)
        """,
        tmp_path,
    )
    assert "OK SLAOModel" in out


def test_export_lora_loads_in_stock_peft_without_hfx(tmp_path):
    model, _ = make_slao()
    for task in (1, 2, 3):
        model.start_task()
        fake_train(model, seed=70 + task)
        model.finish_task()
    model.start_task()  # a task in progress does not change what is exported (the merged pair)
    fake_train(model, seed=99)
    export_dir = model.export_lora(tmp_path / "lora")
    model.finish_task()
    config_text = (export_dir / "adapter_config.json").read_text()
    assert '"peft_type": "LORA"' in config_text and "init_strategy" not in config_text
    # expected logits: the merged pair of tasks 1-3, i.e. the model state before task 4 -> rebuild it
    ref_model, _ = make_slao()
    for task in (1, 2, 3):
        ref_model.start_task()
        fake_train(ref_model, seed=70 + task)
        ref_model.finish_task()
    _save_base_and_expected(ref_model, tmp_path)
    out = _run_python(
        f"""
        import importlib.abc, sys, torch

        class _NoHfx(importlib.abc.MetaPathFinder):  # behave as if hfx were not installed
            def find_spec(self, name, path=None, target=None):
                if name == "hfx" or name.startswith("hfx."):
                    raise ModuleNotFoundError(name)
        sys.meta_path.insert(0, _NoHfx())
        from peft import PeftModel, LoraConfig
        from peft.tuners.lora import LoraModel
        from transformers import AutoModelForCausalLM
        base = AutoModelForCausalLM.from_pretrained({str(tmp_path / "base")!r})
        model = PeftModel.from_pretrained(base, {str(export_dir)!r})
        assert type(model.base_model) is LoraModel and isinstance(model.peft_config["default"], LoraConfig)
        ref = torch.load({str(tmp_path / "expected.pt")!r})
        with torch.no_grad():
            torch.testing.assert_close(model(ref["x"]).logits, ref["logits"], rtol=0, atol=0)
        assert not any(m == "hfx" or m.startswith("hfx.") for m in sys.modules)
        print("OK")
        """,
        tmp_path,
    )
    assert "OK" in out


# ------------------------------------------------------------------------------------------------ conformance 8: metrics
def test_case8_metrics_hand_computed():
    from hfx.tuners.slao import average_accuracy, backward_transfer

    no_forgetting = np.array([[0.9, 0.5, 0.9], [0.1, 0.7, 0.7], [0.2, 0.3, 0.4]])  # a[i, T] == a[i, i]
    assert backward_transfer(no_forgetting) == 0.0
    assert average_accuracy(no_forgetting) == pytest.approx((0.9 + 0.7 + 0.4) / 3)
    forgetting = np.array([[0.9, 0.8, 0.6], [0.0, 0.7, 0.5], [0.0, 0.0, 0.4]])
    assert average_accuracy(forgetting) == pytest.approx(0.5)
    assert backward_transfer(forgetting) == pytest.approx(((0.6 - 0.9) + (0.5 - 0.7)) / 2)
    assert backward_transfer([[0.3]]) == 0.0
    with pytest.raises(ValueError, match="accuracy_matrix"):
        average_accuracy(np.zeros((2, 3)))


def test_sequence_exact_match_hand_computed():
    from hfx.tuners.slao import sequence_exact_match

    class NextIsPlusOne(torch.nn.Module):  # predicts token t+1 after token t
        def __init__(self):
            super().__init__()
            self.dummy = torch.nn.Parameter(torch.zeros(1))

        def forward(self, input_ids, attention_mask=None):
            return type("Out", (), {"logits": torch.nn.functional.one_hot(input_ids + 1, 20).float()})()

    rows = [
        {"input_ids": [3, 4, 5, 6], "labels": [-100, -100, 5, 6]},  # 4->5, 5->6: correct
        {"input_ids": [3, 4, 9], "labels": [-100, -100, 9]},  # 4->5 != 9: wrong
        {"input_ids": [1, 2, 3, 4, 5], "labels": [-100, -100, -100, -100, 5]},  # correct
    ]
    assert sequence_exact_match(NextIsPlusOne(), rows, batch_size=2) == pytest.approx(2 / 3)


# --------------------------------------------------------------------------------------------------------- baselines
def test_baseline_switches():
    from hfx.tuners.slao import SLAOConfig

    # sequential LoRA: task 2 starts from the exact fine-tuned pair, and the model is the last fine-tuned pair
    seq_config = SLAOConfig.for_baseline("seq_lora")
    assert (seq_config.init_strategy, seq_config.merge_schedule) == ("last_ft", "none")
    seq, _ = make_slao(init_strategy="last_ft", merge_schedule="none")
    seq.start_task()
    fake_train(seq, seed=80)
    ft1 = [lora_AB(m) for _, m in slao_layers(seq)]
    seq.finish_task()
    seq.start_task()
    assert all(torch.equal(lora_AB(m)[0], a) for (_, m), (a, _) in zip(slao_layers(seq), ft1))
    fake_train(seq, seed=81)
    ft2 = [lora_AB(m) for _, m in slao_layers(seq)]
    assert seq.finish_task() == 1.0
    assert all(torch.equal(lora_AB(m)[1], b) for (_, m), (_, b) in zip(slao_layers(seq), ft2))

    # no time-aware scaling: constant lambda
    const, _ = make_slao(merge_schedule="constant", merge_lambda=0.25)
    coefficients = []
    for task in (1, 2, 3):
        const.start_task()
        fake_train(const, seed=90 + task)
        coefficients.append(const.finish_task())
    assert coefficients == [1.0, 0.25, 0.25]

    # random init ablation: task 2 starts with B = 0; last-merge init: B <- B_merge
    rnd, _ = make_slao(init_strategy="random")
    rnd.start_task()
    fake_train(rnd, seed=95)
    rnd.finish_task()
    rnd.start_task()
    assert all(float(m.lora_B["default"].weight.detach().abs().sum()) == 0.0 for _, m in slao_layers(rnd))
    assert SLAOConfig.for_baseline("no_orth_init").init_strategy == "last_ft"


# ---------------------------------------------------------------------------------------------------------- bad input
def test_bad_input_raises_clear_errors():
    from peft import get_peft_model

    from hfx.testing import tiny_llama
    from hfx.tuners.slao import SLAOConfig, export_lora, orthogonal_init, time_aware_merge

    for bad_rank in (0, -2, 1.5):
        with pytest.raises(ValueError, match="`r` must be a positive integer"):
            SLAOConfig(r=bad_rank, target_modules=["q_proj"])

    model, _ = make_slao()
    with pytest.raises(RuntimeError, match="finish_task\\(\\) called before start_task\\(\\)"):
        model.finish_task()
    with pytest.raises(ValueError, match="at least one finished task"):
        export_lora(model, "/nonexistent/never-written")
    model.start_task()
    with pytest.raises(RuntimeError, match="start_task\\(\\) called twice"):
        model.start_task()
    # rank mismatch
    # rank mismatch: found when task 1 starts (before any training), not at creation, so PEFT's generic
    # operations that build larger ranks (add_weighted_adapter "cat") keep working
    big, _ = make_slao(r=64)
    with pytest.raises(ValueError, match="rank mismatch.*`r`=64 exceeds in_features=32"):
        big.start_task()
    assert not big.in_task()
    assert make_slao(r=64, init_strategy="last_ft")[0].start_task() == 1  # no QR needed
    with pytest.raises(ValueError, match="rank mismatch"):
        time_aware_merge(torch.zeros(16, 8), torch.zeros(16, 4), 0.5)
    with pytest.raises(ValueError, match="rank mismatch"):
        orthogonal_init(torch.zeros(8, 4))
    # non-Linear targets
    with pytest.raises(TypeError, match="torch.nn.Linear.*embed_tokens.*Embedding"):
        get_peft_model(tiny_llama()[0], SLAOConfig(target_modules=["embed_tokens", "q_proj"]))
    # bad config values
    with pytest.raises(ValueError, match="init_strategy"):
        SLAOConfig(init_strategy="pissa")
    with pytest.raises(ValueError, match="merge_schedule"):
        SLAOConfig(merge_schedule="cosine")
    with pytest.raises(ValueError, match="merge_lambda"):
        SLAOConfig(merge_schedule="constant", merge_lambda=1.5)
    with pytest.raises(ValueError, match="init_lora_weights"):
        SLAOConfig(init_lora_weights="pissa")
    with pytest.raises(ValueError, match="use_dora"):
        SLAOConfig(use_dora=True)
    with pytest.raises(ValueError, match="task_index"):
        SLAOConfig().merge_coefficient(0)
    with pytest.raises(ValueError, match="name"):
        SLAOConfig.for_baseline("ewc")


# ------------------------------------------------------------------------------------ ablation switches (mutation)
def test_merge_lora_A_merges_A_with_the_same_rule_as_B():
    model, _ = make_slao(merge_lora_A=True)
    A_merge = None
    for task in (1, 2, 3):
        model.start_task()
        fake_train(model, seed=200 + task)
        A_ft = [lora_AB(m)[0] for _, m in slao_layers(model)]
        model.finish_task()
        for (_, layer), a_ft, j in zip(slao_layers(model), A_ft, range(4)):
            now = layer.lora_slao_A_merge["default"]
            if task == 1:
                assert torch.equal(now, a_ft)
            else:  # A_merge,i = A_merge,i-1 + lambda(i) (A_ft,i - A_merge,i-1), not A_ft,i
                lam = 1 / math.sqrt(task)
                torch.testing.assert_close(now, A_merge[j] + lam * (a_ft - A_merge[j]), atol=1e-6, rtol=1e-6)
                assert not torch.allclose(now, a_ft, atol=1e-3)
        A_merge = [m.lora_slao_A_merge["default"].clone() for _, m in slao_layers(model)]


def test_last_merge_init_starts_from_the_merged_pair():
    from hfx.tuners.slao import orthogonal_init

    model, _ = make_slao(init_strategy="last_merge")
    for task in (1, 2):
        model.start_task()
        fake_train(model, seed=210 + task)
        model.finish_task()
    merged = [
        (m.lora_slao_A_merge["default"].clone(), m.lora_slao_B_merge["default"].clone()) for _, m in slao_layers(model)
    ]
    ft = [(m.lora_slao_A_ft["default"].clone(), m.lora_slao_B_ft["default"].clone()) for _, m in slao_layers(model)]
    assert model.start_task() == 3
    for (_, layer), (A_merge, B_merge), (_, B_ft) in zip(slao_layers(model), merged, ft):
        A, B = lora_AB(layer)
        assert torch.equal(B, B_merge) and not torch.allclose(B, B_ft, atol=1e-4)  # B_merge,2 != B_ft,2
        assert torch.equal(A, orthogonal_init(A_merge))  # Q^T of A_merge: orthonormal rows, not A_ft itself
        assert (A @ A.T - torch.eye(R)).abs().max() < 1e-5


def test_inverse_schedule_makes_B_merge_the_running_mean_of_B_ft():
    from hfx.tuners.slao import SLAOConfig

    config = SLAOConfig(merge_schedule="inverse")
    assert [config.merge_coefficient(i) for i in (1, 2, 3, 4)] == pytest.approx([1.0, 1 / 2, 1 / 3, 1 / 4])
    model, _ = make_slao(merge_schedule="inverse")
    B_fts = []
    for task in (1, 2, 3):
        model.start_task()
        fake_train(model, seed=220 + task)
        B_fts.append([lora_AB(m)[1] for _, m in slao_layers(model)])
        model.finish_task()
    for j, (_, layer) in enumerate(slao_layers(model)):
        mean = sum(b[j] for b in B_fts) / 3
        torch.testing.assert_close(layer.lora_slao_B_merge["default"], mean, atol=1e-6, rtol=1e-6)


def test_rank_deficient_A_warns_and_full_rank_does_not():
    import warnings

    from hfx.tuners.slao import orthogonal_init

    A = torch.randn(4, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a full-rank A gives no warning
        orthogonal_init(A)
    A[3] = 2.0 * A[1]  # rank 3 < r = 4
    with pytest.warns(UserWarning, match="rank-deficient"):
        A_init = orthogonal_init(A)
    assert (A_init @ A_init.T - torch.eye(4)).abs().max() < 1e-5  # still orthonormal rows
    # through the tuner: a task that ends with a rank-deficient lora_A warns at the next start_task
    model, _ = make_slao()
    model.start_task()
    with torch.no_grad():
        for _, layer in slao_layers(model):
            layer.lora_A["default"].weight[1:] = 0.0
    model.finish_task()
    with pytest.warns(UserWarning, match="rank-deficient"):
        model.start_task()


# ----------------------------------------------------------------------------- init_lora_weights (issue 12, item 6)
def test_every_w0_preserving_lora_init_is_accepted_and_w0_rewriting_ones_are_rejected():
    from hfx.tuners.slao import SLAOConfig

    for init in (True, False, "gaussian", "orthogonal", "eva", "mica"):
        assert SLAOConfig(init_lora_weights=init, target_modules=TARGETS).init_lora_weights == init
    for init in ("pissa", "pissa_niter_4", "olora", "corda", "loftq", "lora_ga"):
        with pytest.raises(ValueError, match="`init_lora_weights`=.*rewrites the base weights W0"):
            SLAOConfig(init_lora_weights=init, target_modules=TARGETS)
    with pytest.raises(ValueError, match="`init_lora_weights` must be one of"):
        SLAOConfig(init_lora_weights="kaiming", target_modules=TARGETS)

    # init_lora_weights=False (PEFT's generic tests use it): A and B random, so task 1 starts away from the base
    model, _ = make_slao(init_lora_weights=False, init_strategy="random")
    W0 = {n: p.detach().clone() for n, p in model.named_parameters() if "base_layer" in n}
    assert model.start_task() == 1
    assert all(float(lora_AB(m)[1].abs().sum()) > 0 for _, m in slao_layers(model))
    with torch.no_grad():
        assert not torch.allclose(model(X).logits, base_logits(), atol=1e-4)
    fake_train(model, seed=230)
    model.finish_task()
    # the "random" strategy re-initialises task 2 the standard way (B = 0, fresh A) even though task 1 used False
    model.start_task()
    for _, layer in slao_layers(model):
        A, B = lora_AB(layer)
        assert float(B.abs().sum()) == 0.0 and not torch.allclose(A, layer.lora_slao_A_ft["default"])
    assert all(torch.equal(p, W0[n]) for n, p in model.named_parameters() if "base_layer" in n)
    # "mica" and "orthogonal" build and run a task too
    for init in ("mica", "orthogonal"):
        other, _ = make_slao(init_lora_weights=init)
        other.start_task()
        fake_train(other, seed=231)
        other.finish_task()
        assert other.start_task() == 2


# --------------------------------------------------------------------------------- peft_type (issue 12, item 7)
def test_peft_type_behaves_like_a_peft_type_member(tmp_path):
    import copy
    import json
    import pickle

    from peft import PeftConfig
    from peft.mapping import PEFT_TYPE_TO_CONFIG_MAPPING, PEFT_TYPE_TO_TUNER_MAPPING
    from peft.utils import PeftType

    from hfx.tuners.slao import SLAO_PEFT_TYPE, SLAOConfig, SLAOModel

    config = SLAOConfig(target_modules=TARGETS)
    for value in (
        config.peft_type,
        SLAO_PEFT_TYPE,
        copy.deepcopy(config).peft_type,
        pickle.loads(pickle.dumps(config.peft_type)),
    ):
        assert value == "SLAO" and value.value == "SLAO" and value.name == "SLAO" and hash(value) == hash("SLAO")
    assert str(config.peft_type) == f"{config.peft_type}" == str(PeftType.LORA).replace("LORA", "SLAO")
    assert json.loads(json.dumps({"t": config.peft_type})) == {"t": "SLAO"}
    assert config.to_dict()["peft_type"] == "SLAO"
    config.save_pretrained(str(tmp_path))
    loaded = PeftConfig.from_pretrained(str(tmp_path))
    assert type(loaded) is SLAOConfig and loaded.peft_type.value == "SLAO"
    # PEFT itself is untouched: its enum has no SLAO member, LoRA still maps to LoRA
    assert "SLAO" not in PeftType.__members__ and len(PeftType) == len(list(PeftType.__members__))
    assert PEFT_TYPE_TO_TUNER_MAPPING["SLAO"] is SLAOModel and PEFT_TYPE_TO_CONFIG_MAPPING["SLAO"] is SLAOConfig
    assert PEFT_TYPE_TO_TUNER_MAPPING[PeftType.LORA].__name__ == "LoraModel"
    # PEFT code that parses str(peft_type) ("PeftType.LORA" -> "LORA"): get_model_status
    model, _ = make_slao()
    assert model.get_model_status().peft_types == {"default": "SLAO"}


def _trained_slao_dir(tmp_path):
    """An SLAO adapter after 2 tasks (task 3 in progress), saved with a local base-model folder as its base."""
    from hfx.testing import tiny_llama

    base_dir = tmp_path / "base"
    tiny_llama(seed=0)[0].save_pretrained(base_dir)
    model, _ = make_slao()
    model.base_model.model.name_or_path = str(base_dir)
    model.peft_config["default"].base_model_name_or_path = str(base_dir)
    for task in (1, 2, 3):
        model.start_task()
        fake_train(model, seed=240 + task)
        if task < 3:
            model.finish_task()
    model.save_pretrained(tmp_path / "slao")
    return model, base_dir, tmp_path / "slao"


def _assert_same_slao_state(a, b, adapter="default"):
    from hfx.tuners.slao.layer import SLAO_BUFFER_NAMES

    layers_a, layers_b = slao_layers(a), slao_layers(b)
    assert len(layers_a) == len(layers_b) == 4
    for (_, x), (_, y) in zip(layers_a, layers_b):
        for name in SLAO_BUFFER_NAMES:
            assert torch.equal(getattr(x, name)[adapter], getattr(y, name)[adapter]), name


def test_transformers_load_adapter_and_auto_from_pretrained_load_slao(tmp_path):
    from transformers import AutoModelForCausalLM

    model, base_dir, slao_dir = _trained_slao_dir(tmp_path)
    with torch.no_grad():
        expected = model(X).logits
    # transformers' PEFT integration: load_adapter on a plain model, and an adapter folder through the Auto class
    base = AutoModelForCausalLM.from_pretrained(base_dir)
    base.load_adapter(str(slao_dir), adapter_name="slao")
    auto = AutoModelForCausalLM.from_pretrained(slao_dir)
    for loaded, name in ((base, "slao"), (auto, "default")):
        with torch.no_grad():
            torch.testing.assert_close(loaded(X).logits, expected, rtol=0, atol=0)
        assert loaded.peft_config[name].peft_type.value == "SLAO"
    # the continual state came along too (its keys carry LoRA's prefix, which transformers renames per adapter)
    _assert_same_slao_state(model, auto)
    for (_, x), (_, y) in zip(slao_layers(model), slao_layers(base)):
        assert torch.equal(x.lora_slao_task_state["default"], y.lora_slao_task_state["slao"])
        assert torch.equal(x.lora_slao_B_merge["default"], y.lora_slao_B_merge["slao"])


def test_mixed_peft_model_refuses_slao_clearly_and_takes_the_exported_lora(tmp_path):
    from peft import LoraConfig, PeftMixedModel, get_peft_model

    from hfx.testing import tiny_llama
    from hfx.tuners.slao import SLAOConfig

    with pytest.raises(ValueError, match="`peft_type` 'SLAO' is not compatible with the `PeftMixedModel`"):
        get_peft_model(tiny_llama()[0], SLAOConfig(target_modules=TARGETS), mixed=True)
    model, _ = make_slao()
    model.start_task()
    fake_train(model, seed=250)
    model.finish_task()
    model.export_lora(tmp_path / "lora")
    mixed = PeftMixedModel.from_pretrained(tiny_llama(seed=0)[0], str(tmp_path / "lora"), adapter_name="slao")
    mixed.add_adapter("other", LoraConfig(target_modules=["o_proj"], init_lora_weights=True))
    mixed.set_adapter(["slao", "other"])  # "other" starts at B = 0: adds nothing
    with torch.no_grad():
        torch.testing.assert_close(mixed(X).logits, model(X).logits, atol=1e-6, rtol=1e-6)


# --------------------------------------------------------------------- export with extra modules (issue 12, item 8)
def test_export_lora_writes_modules_to_save_and_trainable_tokens(tmp_path):
    from peft import PeftModel
    from safetensors.torch import load_file

    from hfx.testing import tiny_llama
    from hfx.tuners.slao.hub import publish, slao_to_lora_state_dict

    model, _ = make_slao(modules_to_save=["lm_head"], trainable_token_indices={"embed_tokens": [5, 17]})
    for task in (1, 2):
        model.start_task()
        fake_train(model, seed=260 + task)
        with torch.no_grad():  # train the extra modules too
            for name, p in model.named_parameters():
                if p.requires_grad and "lora_" not in name:
                    p.add_(0.05 * torch.randn_like(p))
        model.finish_task()
    with torch.no_grad():
        expected = model(X).logits
        assert not torch.allclose(expected, base_logits(), atol=1e-3)
    export_dir = model.export_lora(tmp_path / "lora")
    model.save_pretrained(tmp_path / "slao")
    publish(tmp_path / "pub", source=tmp_path / "slao")
    for folder in (export_dir, tmp_path / "pub" / "lora"):  # export_lora and the hub helper write the same
        loaded = PeftModel.from_pretrained(tiny_llama(seed=0)[0], str(folder))
        assert loaded.peft_config["default"].peft_type == "LORA"
        with torch.no_grad():
            torch.testing.assert_close(loaded(X).logits, expected, rtol=0, atol=0)
    # a task in progress: the extra modules' values at the last finish_task() are not kept -> refuse, don't mix
    model.start_task()
    with pytest.raises(ValueError, match="modules_to_save / trainable tokens .* finish_task"):
        model.export_lora(tmp_path / "mid")
    model.save_pretrained(tmp_path / "mid-task")
    with pytest.raises(ValueError, match="saved during a task"):
        slao_to_lora_state_dict(load_file(str(tmp_path / "mid-task" / "adapter_model.safetensors")))


def test_adapter_saved_with_legacy_state_names_still_loads(tmp_path):
    from peft import PeftModel
    from safetensors.torch import load_file, save_file

    from hfx.testing import tiny_llama
    from hfx.tuners.slao.hub import slao_to_lora_state_dict

    model, _ = make_slao()
    model.start_task()
    fake_train(model, seed=270)
    model.finish_task()
    model.save_pretrained(tmp_path)
    path = tmp_path / "adapter_model.safetensors"
    state = load_file(str(path))
    legacy = {k.replace(".lora_slao_", ".slao_"): v for k, v in state.items()}
    assert legacy.keys() != state.keys()
    save_file(legacy, str(path))
    loaded = PeftModel.from_pretrained(tiny_llama(seed=0)[0], tmp_path, is_trainable=True)
    _assert_same_slao_state(model, loaded)
    assert slao_to_lora_state_dict(legacy).keys() == slao_to_lora_state_dict(state).keys()


# ---------------------------------------------------------------------- inference-mode adapters (issue 12, item 10)
def test_start_task_on_an_adapter_loaded_for_inference_raises(tmp_path):
    from peft import PeftModel

    from hfx.testing import tiny_llama

    model, _ = make_slao()
    model.start_task()
    fake_train(model, seed=280)
    model.finish_task()
    model.save_pretrained(tmp_path)
    frozen = PeftModel.from_pretrained(tiny_llama(seed=0)[0], tmp_path)  # is_trainable=False by default
    with pytest.raises(RuntimeError, match="no trainable LoRA parameter.*is_trainable=True"):
        frozen.start_task()
    assert not frozen.in_task()  # nothing changed
    # an active adapter whose LoRA weights were all frozen by hand: same refusal
    model, _ = make_slao()
    for p in model.parameters():
        p.requires_grad_(False)
    with pytest.raises(RuntimeError, match="no trainable LoRA parameter"):
        model.start_task()
    trainable = PeftModel.from_pretrained(tiny_llama(seed=0)[0], tmp_path, is_trainable=True)
    assert trainable.start_task() == 2


# ------------------------------------------------------------------------------------------------------------ driver
def _constant_answer_task(tok, word, answer, ks):
    """Rows "<word> <k> :" -> " <answer>" (labels on the answer only): a constant answer a tiny model can learn."""
    from datasets import Dataset

    target = tok(f" {answer}", add_special_tokens=False)["input_ids"]
    rows = []
    for k in ks:
        prompt = tok(f"{word} {k} :")["input_ids"]
        rows.append({"input_ids": prompt + target, "labels": [-100] * len(prompt) + target})
    return Dataset.from_list(rows)


def _continual_args(tmp_path, **overrides):
    from transformers import TrainingArguments

    kwargs = dict(
        output_dir=str(tmp_path / "out"),
        max_steps=20,
        per_device_train_batch_size=8,
        per_device_eval_batch_size=8,
        learning_rate=3e-2,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
    )
    kwargs.update(overrides)
    return TrainingArguments(**kwargs)


def _optimizer_steps(trainer):
    """The AdamW step count of the trainer's optimizer (the same for every parameter)."""
    steps = {int(state["step"]) for state in trainer.optimizer.state.values()}
    assert len(steps) == 1, steps
    return steps.pop()


def test_continual_trainer_learns_each_task_and_resets_the_optimizer(tmp_path):
    from transformers import DataCollatorForSeq2Seq

    from hfx.tuners.slao import ContinualTrainer, sequence_exact_match

    model, tok = make_slao()
    collator = DataCollatorForSeq2Seq(tok, label_pad_token_id=-100)
    train_sets = {
        "cat": _constant_answer_task(tok, "cat", "mat", range(8)),
        "dog": _constant_answer_task(tok, "dog", "fox", range(8)),
    }
    # evaluated on prompts never trained on (k = 8..15): the answer must be learned, not the rows
    eval_sets = {
        "cat": _constant_answer_task(tok, "cat", "mat", range(8, 16)),
        "dog": _constant_answer_task(tok, "dog", "fox", range(8, 16)),
    }
    before = [sequence_exact_match(model, d, data_collator=collator) for d in eval_sets.values()]
    assert before == [0.0, 0.0]
    trainer = ContinualTrainer(
        model=model,
        args=_continual_args(tmp_path),
        task_datasets=train_sets,
        eval_datasets=eval_sets,
        data_collator=collator,
    )
    result = trainer.train_tasks()
    a = result.accuracy_matrix
    # real learning: each task's held-out prompts are answered exactly right by the merged model after its stage
    assert a[0, 0] == 1.0 and a[1, 1] == 1.0
    assert trainer.slao_callback.task_indices == [1, 2]
    assert result.coefficients == pytest.approx([1.0, 1 / math.sqrt(2)])
    assert result.average_accuracy == pytest.approx(a[:, -1].mean())
    assert result.backward_transfer == pytest.approx(a[0, 1] - a[0, 0])
    assert model.num_tasks_finished() == 2 and not model.in_task()
    # a fresh AdamW per task: the optimizer that trained task 2 made task 2's 20 steps only, not 40
    assert _optimizer_steps(trainer) == 20
    fig = result.plot(tmp_path / "heatmap.png")
    assert (tmp_path / "heatmap.png").stat().st_size > 1000 and len(fig.axes) == 2
    assert set(result.to_dict()) >= {"accuracy_matrix", "average_accuracy", "backward_transfer"}

    # reset_optimizer_per_task=False keeps the first task's optimizer and its moments: 2 + 2 steps
    model, tok = make_slao()
    kept = ContinualTrainer(
        model=model,
        args=_continual_args(tmp_path, max_steps=2),
        task_datasets=train_sets,
        data_collator=collator,
        reset_optimizer_per_task=False,
        task_metric=lambda m, d: 0.0,
    )
    kept.train_tasks()
    assert _optimizer_steps(kept) == 4


def test_continual_trainer_resumed_mid_task_equals_uninterrupted_run(tmp_path):
    from transformers import DataCollatorForSeq2Seq

    from hfx.tuners.slao import ContinualTrainer

    tok = make_slao()[1]
    collator = DataCollatorForSeq2Seq(tok, label_pad_token_id=-100)
    tasks = {
        "cat": _constant_answer_task(tok, "cat", "mat", range(12)),
        "dog": _constant_answer_task(tok, "dog", "fox", range(12)),
    }
    # 12 rows / batch 4 = 3 steps per epoch, 2 epochs; dropout on, so the RNG state matters too
    args = _continual_args(
        tmp_path,
        max_steps=-1,
        num_train_epochs=2,
        per_device_train_batch_size=4,
        learning_rate=5e-3,
        save_strategy="steps",
        save_steps=2,
    )

    def run(resume=None):
        model, _ = make_slao(lora_dropout=0.1)
        trainer = ContinualTrainer(model=model, args=args, task_datasets=tasks, data_collator=collator)
        result = trainer.train_tasks(resume_from_checkpoint=resume)
        state = {k: v.detach().clone() for k, v in model.state_dict().items() if "lora_" in k}
        return result, state, model

    full, full_state, _ = run()
    out = tmp_path / "out"
    # each task keeps its own checkpoints (step counts restart per task), with the continual state beside them
    assert sorted(p.name for p in (out / "task-2").iterdir()) == ["checkpoint-2", "checkpoint-4", "checkpoint-6"]
    # resume inside task 2, after an epoch boundary: the adapter is mid-task, task 1 is only in the SLAO state
    resumed, resumed_state, model = run(out / "task-2" / "checkpoint-4")
    assert model.num_tasks_finished() == 2 and not model.in_task()
    assert resumed_state.keys() == full_state.keys()
    for key, value in full_state.items():
        assert torch.equal(resumed_state[key], value), key
    np.testing.assert_array_equal(resumed.accuracy_matrix, full.accuracy_matrix)
    assert resumed.coefficients == full.coefficients
    # the same through a plain Trainer driven by SLAOCallback: one task, resumed from its step-2 checkpoint
    from transformers import Trainer

    from hfx.tuners.slao import SLAOCallback

    def one_task(resume=None):
        model, _ = make_slao(lora_dropout=0.1)
        single = _continual_args(
            tmp_path,
            output_dir=str(tmp_path / "single"),
            max_steps=4,
            save_strategy="steps",
            save_steps=2,
            per_device_train_batch_size=4,
            learning_rate=5e-3,
        )
        trainer = Trainer(
            model=model, args=single, train_dataset=tasks["cat"], data_collator=collator, callbacks=[SLAOCallback()]
        )
        trainer.train(resume_from_checkpoint=resume)
        assert model.num_tasks_finished() == 1
        return {k: v.detach().clone() for k, v in model.state_dict().items() if "lora_" in k}

    uninterrupted = one_task()
    resumed_single = one_task(str(tmp_path / "single" / "checkpoint-2"))
    assert all(torch.equal(resumed_single[k], v) for k, v in uninterrupted.items())

    with pytest.raises(ValueError, match="written for tasks"):
        ContinualTrainer(
            model=make_slao()[0],
            args=args,
            task_datasets={"x": tasks["cat"], "y": tasks["dog"]},
            data_collator=collator,
        ).train_tasks(resume_from_checkpoint=out / "task-2" / "checkpoint-4")


def test_publish_writes_hub_ready_folder(tmp_path):
    from hfx.tuners.slao.hub import publish

    model, _ = make_slao()
    model.start_task()
    fake_train(model, seed=7)
    model.finish_task()
    model.save_pretrained(tmp_path / "src")
    out = publish(tmp_path / "pub", source=tmp_path / "src")
    card = (out / "README.md").read_text()
    assert card.startswith("---\n") and "arxiv:2512.23017" in card and "library_name: peft" in card
    assert (out / "adapter_config.json").is_file() and (out / "adapter_model.safetensors").is_file()
    assert Path(out / "lora" / "adapter_config.json").is_file()  # the plain-LoRA export rides along
