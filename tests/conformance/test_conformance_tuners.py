"""Conformance harness for hfx's PEFT tuners: generic behaviour checks, parametrised over our tuners and PEFT's own.

Our own code, in the spirit of huggingface/peft ``tests/test_custom_models.py`` / ``testing_common.py``: every check
runs on the parent's ``LoraConfig`` (the control: a failure there means the check or the environment is wrong) and on
each hfx tuner (``SLAOConfig``). The model is the tiny random Llama of :mod:`hfx.testing`; adapters are created with
``init_lora_weights=False`` (as PEFT's generic tests do) so that they change the output, and each one is "exercised"
into the state a trained adapter has (SLAO: a finished task, then a task in progress, so the merged pair, the last
fine-tuned pair and the live pair all differ).

Checks: forward; merge / unmerge / safe_merge / merge_and_unload; save -> load in a fresh process (``PeftModel
.from_pretrained`` with and without ``low_cpu_mem_usage``, transformers' ``load_adapter`` and
``AutoModelForCausalLM.from_pretrained(adapter_dir)``);
multiple, multiply-active and deleted adapters; ``disable_adapter``; dtype (bf16 base, adapter autocast on/off);
gradients only on the active adapter's parameters.
"""

import os
import subprocess
import sys
import textwrap

import pytest
import torch


TARGETS = ["q_proj", "v_proj"]
X = torch.tensor([[1, 17, 42, 99, 5, 230, 7], [1, 300, 12, 8, 64, 2, 3]])
# hand count for r=8 on q_proj (32 -> 32) and v_proj (32 -> 16) of 2 layers: 2 * ((8*32 + 32*8) + (8*32 + 16*8))
N_ADAPTER_PARAMS = 2 * ((8 * 32 + 32 * 8) + (8 * 32 + 16 * 8))

TUNERS = ["lora", "slao"]  # "lora": PEFT's LoraConfig, the control


def make_config(kind, **overrides):
    kwargs = dict(
        r=8, lora_alpha=16, lora_dropout=0.0, target_modules=TARGETS, task_type="CAUSAL_LM", init_lora_weights=False
    )
    kwargs.update(overrides)
    if kind == "lora":
        from peft import LoraConfig

        return LoraConfig(**kwargs)
    if kind == "slao":
        from hfx.tuners.slao import SLAOConfig

        return SLAOConfig(**kwargs)
    raise ValueError(kind)


def make_model(kind, adapter_name="default", dtype=torch.float32, seed=0, **kwargs):
    from peft import get_peft_model

    from hfx.testing import tiny_llama

    base, _ = tiny_llama(seed=0, dtype=dtype)
    torch.manual_seed(seed)
    return get_peft_model(base, make_config(kind), adapter_name=adapter_name, **kwargs)


def base_model(dtype=torch.float32):
    from hfx.testing import tiny_llama

    return tiny_llama(seed=0, dtype=dtype)[0]


def _random_step(model, adapter_name, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if f".{adapter_name}." in name and ("lora_A" in name or "lora_B" in name):
                p.add_((0.05 * torch.randn(p.shape, generator=g)).to(p.dtype))


def exercise(model, kind, adapter_name="default", seed=0):
    """Put the adapter in the state a trained one has (SLAO: task 1 finished, task 2 in progress)."""
    if kind == "slao":
        model.start_task(adapter_name)
        _random_step(model, adapter_name, seed)
        model.finish_task(adapter_name)
        model.start_task(adapter_name)
    _random_step(model, adapter_name, seed + 1)


def logits(model, x=X):
    with torch.no_grad():
        return model(x).logits


def base_weights(model):
    return {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" not in n}


def adapter_tensors(model):
    """Every parameter and buffer of the adapters (names without the ``base_model.model.`` prefix of PeftModel)."""
    tensors = dict(model.named_parameters()) | dict(model.named_buffers())
    return {k.removeprefix("base_model.model."): v.detach().clone() for k, v in tensors.items() if "lora_" in k}


def tuner_layers(model):
    from peft.tuners.tuners_utils import BaseTunerLayer

    return [m for m in model.modules() if isinstance(m, BaseTunerLayer)]


# --------------------------------------------------------------------------------------------------------- forward
@pytest.mark.parametrize("kind", TUNERS)
def test_forward(kind):
    model = make_model(kind)
    exercise(model, kind)
    reference = logits(base_model())
    out = logits(model)
    assert out.shape == reference.shape == (2, X.shape[1], model.config.vocab_size)
    assert torch.isfinite(out).all() and not torch.allclose(out, reference, atol=1e-4)
    torch.testing.assert_close(logits(model), out, rtol=0, atol=0)  # deterministic
    # rows are independent: the batch equals each row alone
    for i in range(X.shape[0]):
        torch.testing.assert_close(logits(model, X[i : i + 1])[0], out[i], atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------------------------------------------- merging
@pytest.mark.parametrize("kind", TUNERS)
def test_merge_unmerge_safe_merge(kind):
    model = make_model(kind)
    exercise(model, kind)
    W0 = base_weights(model)
    expected = logits(model)

    model.merge_adapter()
    assert all(layer.merged for layer in tuner_layers(model))
    assert any(not torch.equal(p, W0[n]) for n, p in base_weights(model).items())
    torch.testing.assert_close(logits(model), expected, atol=1e-5, rtol=1e-5)
    model.unmerge_adapter()
    assert not any(layer.merged for layer in tuner_layers(model))
    for name, p in base_weights(model).items():
        torch.testing.assert_close(p, W0[name], atol=1e-6, rtol=0)
    torch.testing.assert_close(logits(model), expected, atol=1e-5, rtol=1e-5)

    # a NaN in the adapter: safe_merge refuses, and the base weights stay intact
    broken = make_model(kind)
    exercise(broken, kind)
    with torch.no_grad():
        tuner_layers(broken)[0].lora_B["default"].weight[0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        broken.base_model.merge_adapter(safe_merge=True)
    assert all(torch.equal(p, W0[n]) for n, p in base_weights(broken).items())

    merged = model.merge_and_unload(safe_merge=True)
    assert type(merged).__name__ == "LlamaForCausalLM" and not tuner_layers(merged)
    torch.testing.assert_close(logits(merged), expected, atol=1e-5, rtol=1e-5)


# -------------------------------------------------------------------------------------------- save -> fresh process
def _run_python(code, tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    script = tmp_path / "load.py"
    script.write_text(textwrap.dedent(code))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("kind", TUNERS)
def test_save_load_in_a_fresh_process_peft_and_transformers(kind, tmp_path):
    base_dir, adapter_dir = tmp_path / "base", tmp_path / "adapter"
    base_model().save_pretrained(base_dir)
    model = make_model(kind)
    model.base_model.model.name_or_path = str(base_dir)  # recorded as base_model_name_or_path
    exercise(model, kind)
    model.save_pretrained(adapter_dir)
    state = adapter_tensors(model)
    torch.save({"x": X, "logits": logits(model), "state": state}, tmp_path / "expected.pt")
    out = _run_python(
        f"""
        import torch
        {"import hfx  # registers the SLAO PEFT type" if kind != "lora" else ""}
        from peft import PeftModel
        from transformers import AutoModelForCausalLM

        ref = torch.load({str(tmp_path / "expected.pt")!r})
        def check(model):
            assert not any(t.is_meta for t in model.state_dict().values())
            with torch.no_grad():
                torch.testing.assert_close(model(ref["x"]).logits, ref["logits"], rtol=0, atol=0)
            own = dict(model.named_parameters()) | dict(model.named_buffers())
            own = {{k.removeprefix("base_model.model."): v for k, v in own.items() if "lora_" in k}}
            assert own.keys() == ref["state"].keys()
            for key, value in ref["state"].items():
                assert torch.equal(own[key], value), key

        # 1. PEFT
        peft_model = PeftModel.from_pretrained(
            AutoModelForCausalLM.from_pretrained({str(base_dir)!r}), {str(adapter_dir)!r}, is_trainable=True
        )
        check(peft_model)
        # 1b. PEFT with low_cpu_mem_usage (adapter created on the meta device, then filled from the file)
        lean = PeftModel.from_pretrained(
            AutoModelForCausalLM.from_pretrained({str(base_dir)!r}), {str(adapter_dir)!r}, low_cpu_mem_usage=True
        )
        check(lean)
        # 2. transformers' PEFT integration: load_adapter on a plain model
        plain = AutoModelForCausalLM.from_pretrained({str(base_dir)!r})
        plain.load_adapter({str(adapter_dir)!r})
        check(plain)
        # 3. an adapter folder through the Auto class (base from base_model_name_or_path)
        check(AutoModelForCausalLM.from_pretrained({str(adapter_dir)!r}))
        print("OK", type(peft_model.base_model).__name__, peft_model.peft_config["default"].peft_type.value)
        """,
        tmp_path,
    )
    assert out.split()[-3:] == ["OK", {"lora": "LoraModel", "slao": "SLAOModel"}[kind], kind.upper()]


# --------------------------------------------------------------------------------------------- several adapters
@pytest.mark.parametrize("kind", TUNERS)
def test_multiple_active_and_deleted_adapters(kind):
    model = make_model(kind, adapter_name="a")
    model.add_adapter("b", make_config(kind))
    exercise(model, kind, "a", seed=10)
    exercise(model, kind, "b", seed=20)
    reference = logits(base_model())
    model.set_adapter("a")
    out_a = logits(model)
    model.set_adapter("b")
    out_b = logits(model)
    model.base_model.set_adapter(["a", "b"])
    out_ab = logits(model)
    for x, y in ((out_a, out_b), (out_a, out_ab), (out_b, out_ab), (out_a, reference)):
        assert not torch.allclose(x, y, atol=1e-4)
    # merging both active adapters gives the same function as running them unmerged
    model.base_model.merge_adapter(["a", "b"])
    torch.testing.assert_close(logits(model), out_ab, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="merged"):  # a merged adapter cannot be deleted
        model.delete_adapter("b")
    model.base_model.unmerge_adapter()

    model.delete_adapter("b")
    assert set(model.peft_config) == {"a"} and model.active_adapters == ["a"]
    leftovers = [k for k in model.state_dict() if k.endswith(".b") or ".b." in k]
    assert leftovers == []  # every per-adapter tensor of "b" is gone (parameters and buffers)
    torch.testing.assert_close(logits(model), out_a, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("kind", TUNERS)
def test_disable_adapter(kind):
    model = make_model(kind)
    exercise(model, kind)
    expected = logits(model)
    with model.disable_adapter():
        torch.testing.assert_close(logits(model), logits(base_model()), rtol=0, atol=0)
    torch.testing.assert_close(logits(model), expected, rtol=0, atol=0)


# ------------------------------------------------------------------------------------------------------------ dtype
@pytest.mark.parametrize("autocast", [True, False])
@pytest.mark.parametrize("kind", TUNERS)
def test_dtype_bf16_base(kind, autocast):
    model = make_model(kind, dtype=torch.bfloat16, autocast_adapter_dtype=autocast)
    adapter_dtype = torch.float32 if autocast else torch.bfloat16
    for name, p in model.named_parameters():
        assert p.dtype == (adapter_dtype if "lora_" in name else torch.bfloat16), name
    for name, b in model.named_buffers():  # an adapter's own state follows its parameters
        if "lora_" in name and b.is_floating_point():
            assert b.dtype == adapter_dtype, name
    exercise(model, kind)
    out = model(X, labels=X)
    assert out.logits.dtype == torch.bfloat16 and torch.isfinite(out.loss)
    out.loss.backward()
    grads = [p.grad for n, p in model.named_parameters() if p.requires_grad]
    assert grads and all(g is not None and g.dtype == adapter_dtype and torch.isfinite(g).all() for g in grads)


# -------------------------------------------------------------------------------------------------------- gradients
@pytest.mark.parametrize("kind", TUNERS)
def test_gradients_only_on_the_active_adapter(kind):
    model = make_model(kind)
    model.add_adapter("other", make_config(kind))  # inactive: must get no gradient
    exercise(model, kind)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(".default." in n and ("lora_A" in n or "lora_B" in n) for n in trainable)
    assert sum(p.numel() for n, p in model.named_parameters() if n in trainable) == N_ADAPTER_PARAMS
    model(X, labels=X).loss.backward()
    with_grad = {n for n, p in model.named_parameters() if p.grad is not None}
    assert with_grad == trainable
    assert all(float(model.get_parameter(n).grad.abs().sum()) > 0 for n in with_grad)
    assert not any(b.requires_grad for b in model.buffers())
