"""Celo2 (arXiv 2602.19142): the update rule against a NumPy re-derivation, Newton-Schulz, routing, AdamW parity,
state-dict resume, dtypes, schedulers, checkpoint conversion and the Hub round trip."""

import copy
import itertools
import logging

import numpy as np
import pytest
import torch
from celo2_numpy_reference import init_state as np_init_state
from celo2_numpy_reference import newton_schulz as np_newton_schulz
from celo2_numpy_reference import step as np_step
from torch import nn

from hfx.optim import Celo2, Celo2MetaWeights
from hfx.optim.celo2 import convert
from hfx.optim.celo2.functional import FEATURE_NAMES, factored_dims, newton_schulz
from hfx.optim.celo2.routing import route_parameters


def _meta(seed=0, init="random"):
    return Celo2MetaWeights(init=init, seed=seed)


def _np_blocks(meta):
    """The reference's split first-layer blocks w0__i (width_i, H) and dense (in, out) matrices, from our module."""
    w0 = meta.layers[0].weight.detach().double().numpy().T
    blocks = [w0[s] for s in meta.feature_slices().values()]
    dense = [layer.weight.detach().double().numpy().T for layer in meta.layers[1:]]
    biases = [layer.bias.detach().double().numpy() for layer in meta.layers]
    return blocks, dense, biases


def _mlp(seed=0, sizes=(12, 16, 16, 5)):
    torch.manual_seed(seed)
    layers = []
    for a, b in itertools.pairwise(sizes):
        layers += [nn.Linear(a, b), nn.Tanh()]
    return nn.Sequential(*layers[:-1])


def _data(n=64, d=12, k=5, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=gen), torch.randint(0, k, (n,), generator=gen)


def _train(model, opt, steps, data=None):
    X, y = data or _data()
    losses = []
    for _ in range(steps):
        loss = nn.functional.cross_entropy(model(X), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


# --------------------------------------------------------------------------------------------- golden: update rule
@pytest.mark.parametrize(
    ("shape", "variant"),
    [
        ((6, 9), "celo2"),
        ((9, 6), "celo2"),
        ((7, 7), "celo2"),
        ((3, 4, 5), "celo2"),
        ((11,), "celo2-base"),
        ((6, 9), "celo2-base"),
    ],
)
def test_update_matches_numpy_rederivation(shape, variant):
    meta = _meta(seed=3)
    blocks, dense, biases = _np_blocks(meta)
    rng = np.random.default_rng(0)
    p0 = rng.normal(size=shape)
    p = nn.Parameter(torch.tensor(p0))  # float64: the optimizer computes in the parameter's dtype
    opt = Celo2([p], lr=1.0, meta_weights=meta, variant=variant)
    st, p_np = np_init_state(shape), p0.copy()
    for t in range(3):
        g = rng.normal(size=shape) * 10.0 ** (t - 1)
        p.grad = torch.tensor(g)
        opt.step()
        p_np = p_np - np_step(p_np, g, st, blocks, dense, biases, orthogonalize=variant == "celo2")
        np.testing.assert_allclose(p.detach().numpy(), p_np, rtol=1e-9, atol=1e-9)
    state = opt.state[p]
    # hfx keeps the decay channel first, the reference last
    np.testing.assert_allclose(state["momentum"].numpy(), np.moveaxis(st["m"], -1, 0), rtol=1e-12)
    if len(shape) >= 2:
        np.testing.assert_allclose(state["v_row"].numpy(), np.moveaxis(st["v_row"], -1, 0), rtol=1e-12)
        np.testing.assert_allclose(state["v_col"].numpy(), np.moveaxis(st["v_col"], -1, 0), rtol=1e-12)


def test_factored_dims_follow_numpy_argsort():
    for shape in [(3, 5), (5, 3), (4, 4), (2, 7, 5), (8,)]:
        expected = None if len(shape) < 2 else tuple(int(i) for i in np.argsort(shape)[-2:])
        assert factored_dims(shape) == expected


def test_stacked_parameters_match_one_at_a_time():
    model_a = _mlp(sizes=(12, 16, 16, 16, 5))
    model_b = copy.deepcopy(model_a)
    meta = _meta(init="adam_like")
    opt_a = Celo2(model_a.named_parameters(), meta_weights=meta)  # the two 16x16 matrices are stacked
    opt_b = Celo2(model_b.named_parameters(), meta_weights=meta, max_batch_elements=1)  # one by one
    _train(model_a, opt_a, 3)
    _train(model_b, opt_b, 3)
    for pa, pb in zip(model_a.parameters(), model_b.parameters()):
        torch.testing.assert_close(pa, pb, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------------------------- Newton-Schulz
def test_newton_schulz_singular_values_in_quintic_band():
    x = torch.randn(64, 32, dtype=torch.float64)
    s = torch.linalg.svdvals(newton_schulz(x))
    assert 0.68 <= s.min() and s.max() <= 1.14, (s.min(), s.max())
    # the same as the NumPy iteration, and tall/wide handled by transposition
    np.testing.assert_allclose(newton_schulz(x).numpy(), np_newton_schulz(x.numpy()), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(newton_schulz(x.T), newton_schulz(x).T)
    # batched over leading axes
    xb = torch.randn(3, 2, 8, 5, dtype=torch.float64)
    torch.testing.assert_close(newton_schulz(xb)[1, 0], newton_schulz(xb[1, 0]))
    with pytest.raises(ValueError, match="at least 2 axes"):
        newton_schulz(torch.randn(4))


def test_learned_step_has_unit_rms_before_lr_and_rms_mult_scales_it():
    meta = _meta(seed=1)
    for rms_mult in (1.0, 2.5):
        torch.manual_seed(0)
        w = nn.Parameter(torch.randn(20, 30))
        before = w.detach().clone()
        opt = Celo2([("hidden.weight", w)], lr=1e-3, meta_weights=meta, rms_mult=rms_mult)
        w.grad = torch.randn(20, 30)
        opt.step()
        rms = ((w.detach() - before) / 1e-3).square().mean().sqrt()
        assert abs(rms.item() - rms_mult) < 1e-3 * rms_mult


# ------------------------------------------------------------------------------------------------ training works
def test_loss_decreases_on_quadratic_and_tiny_mlp_with_shipped_weights():
    torch.manual_seed(0)
    A = torch.randn(16, 16)
    H = A @ A.T / 16 + 0.1 * torch.eye(16)
    W = nn.Parameter(torch.randn(16, 8))
    opt = Celo2([("w", W)], lr=3e-2)  # default meta-weights: the ones shipped with hfx
    losses = []
    for _ in range(60):
        loss = 0.5 * torch.einsum("ik,ij,jk->", W, H, W)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.2 * losses[0]
    model = _mlp()
    losses = _train(model, Celo2(model.named_parameters(), lr=1e-2), 60)
    assert losses[-1] < 0.5 * losses[0]


def test_decoupled_weight_decay_and_lr_scheduler():
    meta = _meta(seed=2)
    torch.manual_seed(0)
    w0, g = torch.randn(8, 6), torch.randn(8, 6)
    out = {}
    for wd in (0.0, 0.1):
        w = nn.Parameter(w0.clone())
        opt = Celo2([("w", w)], lr=0.05, weight_decay=wd, meta_weights=meta)
        w.grad = g.clone()
        opt.step()
        out[wd] = w.detach()
    torch.testing.assert_close(out[0.1] - out[0.0], -0.05 * 0.1 * w0)  # p <- p - lr*(step + wd*p_old)
    # a scheduler's param_group["lr"] is what the step uses: half the LR, half the (unit-RMS) step
    deltas = []
    for factor in (1.0, 0.5):
        w = nn.Parameter(w0.clone())
        opt = Celo2([("w", w)], lr=0.05, meta_weights=meta)
        torch.optim.lr_scheduler.LambdaLR(opt, lambda _s, f=factor: f)
        w.grad = g.clone()
        opt.step()
        deltas.append(w.detach() - w0)
    torch.testing.assert_close(deltas[1], 0.5 * deltas[0])


# ---------------------------------------------------------------------------------------------------- AdamW branch
def test_adamw_branch_is_torch_adamw():
    torch.manual_seed(0)
    b_ours, b_ref = nn.Parameter(torch.randn(7)), None
    b_ref = nn.Parameter(b_ours.detach().clone())
    ours = Celo2([("bias", b_ours)], lr=3e-3, weight_decay=0.1, meta_weights=_meta(), adamw_lr_ratio=2.0)
    ref = torch.optim.AdamW([b_ref], lr=6e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, foreach=True)
    for _ in range(5):
        g = torch.randn(7)
        b_ours.grad, b_ref.grad = g.clone(), g.clone()
        ours.step()
        ref.step()
    assert torch.equal(b_ours, b_ref)


# -------------------------------------------------------------------------------------------------------- routing
def test_routing_rules_on_an_hf_model(tiny_llama, caplog):
    model, _ = tiny_llama
    named = list(model.named_parameters())
    names = [n for n, _ in named]
    ref = dict(zip(names, route_parameters(named, "reference")))
    assert ref["model.embed_tokens.weight"] == "adamw" and ref["model.norm.weight"] == "adamw"
    assert ref["model.layers.0.self_attn.q_proj.weight"] == "celo2"
    assert "lm_head.weight" not in ref or ref["lm_head.weight"] == "celo2"  # tied head: listed once (as embed)
    pylo = dict(zip(names, route_parameters(named, "pylo")))
    matrices = [n for n, p in named if p.ndim >= 2]
    assert pylo[matrices[0]] == pylo[matrices[-1]] == "adamw" and pylo[matrices[1]] == "celo2"
    assert set(route_parameters(named, "all")) == {"celo2"}
    custom = dict(zip(names, route_parameters(named, "reference", adamw_pattern=r"q_proj")))
    assert custom["model.layers.0.self_attn.q_proj.weight"] == "adamw"
    assert custom["model.embed_tokens.weight"] == "celo2"  # the pattern replaces the default "embed"
    # Trainer-style groups of plain tensors: names recovered with names_from; without it, a warning + shape rule
    groups = [{"params": [p for _, p in named if p.ndim >= 2]}, {"params": [p for _, p in named if p.ndim < 2]}]
    opt = Celo2(groups, meta_weights=_meta(), names_from=model)
    table = {r["name"]: r["rule"] for r in opt.routing_table()}
    assert table == ref
    with caplog.at_level(logging.WARNING, logger="hfx.optim.celo2.optimizer"):
        opt = Celo2([p for _, p in named], meta_weights=_meta())
    assert "without names" in caplog.text
    assert [r["rule"] for r in opt.routing_table()] == ["adamw" if p.ndim < 2 else "celo2" for _, p in named]


# ------------------------------------------------------------------------------------------------- state / resume
def test_state_dict_resumes_bit_exactly(tmp_path):
    model = _mlp(sizes=(12, 16, 16, 5))
    opt = Celo2(model.named_parameters(), lr=1e-2, weight_decay=0.01, meta_weights=_meta(seed=4, init="adam_like"))
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    X, y = _data()

    def run(m, o, s, n):
        for _ in range(n):
            loss = nn.functional.cross_entropy(m(X), y)
            o.zero_grad()
            loss.backward()
            o.step()
            s.step()

    run(model, opt, sched, 3)
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict()}, tmp_path / "c.pt")
    run(model, opt, sched, 3)
    # a fresh process would rebuild everything: different meta-weights here, restored from the checkpoint
    ckpt = torch.load(tmp_path / "c.pt", weights_only=False)
    model2 = _mlp(seed=9, sizes=(12, 16, 16, 5))
    model2.load_state_dict(ckpt["model"])
    opt2 = Celo2(model2.named_parameters(), lr=1e-2, weight_decay=0.01, meta_weights=_meta(seed=7))
    sched2 = torch.optim.lr_scheduler.StepLR(opt2, step_size=2, gamma=0.5)
    opt2.load_state_dict(ckpt["opt"])
    sched2.load_state_dict(ckpt["sched"])
    run(model2, opt2, sched2, 3)
    for a, b in zip(model.parameters(), model2.parameters()):
        assert torch.equal(a, b)


def test_dtype_and_state_dtype_follow_parameters(tmp_path):
    w64 = nn.Parameter(torch.randn(6, 5, dtype=torch.float64))
    opt = Celo2([("w", w64)], meta_weights=_meta())
    w64.grad = torch.randn(6, 5, dtype=torch.float64)
    opt.step()
    assert w64.dtype == torch.float64 and opt.state[w64]["momentum"].dtype == torch.float64
    wb = nn.Parameter(torch.randn(6, 5).bfloat16())
    bb = nn.Parameter(torch.randn(5).bfloat16())
    opt = Celo2([("w", wb), ("b", bb)], meta_weights=_meta(init="adam_like"), state_dtype=torch.float32)
    for _ in range(2):
        wb.grad, bb.grad = torch.randn(6, 5).bfloat16(), torch.randn(5).bfloat16()
        opt.step()
    assert wb.dtype == torch.bfloat16 and torch.isfinite(wb.float()).all()
    assert opt.state[wb]["momentum"].dtype == torch.float32 and opt.state[bb]["exp_avg"].dtype == torch.float32
    sd = opt.state_dict()
    fresh = Celo2([("w", wb), ("b", bb)], meta_weights=_meta(init="adam_like"), state_dtype=torch.float32)
    fresh.load_state_dict(sd)  # torch would cast the state to bf16; ours stays exact float32
    assert torch.equal(fresh.state[wb]["momentum"], opt.state[wb]["momentum"])
    assert fresh.state[bb]["exp_avg_sq"].dtype == torch.float32


def test_invalid_arguments_raise_clear_errors():
    p = [nn.Parameter(torch.randn(3, 3))]
    with pytest.raises(ValueError, match="`lr`"):
        Celo2(p, lr=-1.0, meta_weights=_meta())
    with pytest.raises(ValueError, match="`variant`"):
        Celo2(p, meta_weights=_meta(), variant="celo3")
    with pytest.raises(ValueError, match="`routing`"):
        Celo2(p, meta_weights=_meta(), routing="muon")
    with pytest.raises(ValueError, match="`adamw_betas`"):
        Celo2(p, meta_weights=_meta(), adamw_betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="`adamw_pattern`"):
        route_parameters([("a", p[0])], adamw_pattern="(")
    with pytest.raises(TypeError, match="`meta_weights`"):
        Celo2(p, meta_weights=3)
    with pytest.raises(ValueError, match="`features`"):
        Celo2MetaWeights(features=("g", "nope"))
    with pytest.raises(ValueError, match="reference order"):
        Celo2MetaWeights(features=("p", "g"))


# ------------------------------------------------------------------------------------------ checkpoints and the Hub
def _flax_msgpack(tree) -> bytes:
    """Serialise like flax.serialization.to_bytes: arrays as msgpack ext type 1 of (shape, dtype, bytes)."""
    msgpack = pytest.importorskip("msgpack")

    def default(x):
        if isinstance(x, np.ndarray):
            payload = msgpack.packb((list(x.shape), x.dtype.name, x.tobytes("C")), use_bin_type=True)
            return msgpack.ExtType(1, payload)
        raise TypeError(type(x))

    return msgpack.packb(tree, default=default, strict_types=True, use_bin_type=True)


def _features_out(meta, seed=0):
    x = torch.randn(10, meta.input_size, generator=torch.Generator().manual_seed(seed))
    return meta(x)


def test_official_flax_checkpoint_converts(tmp_path):
    src = _meta(seed=5)
    blocks, dense, biases = _np_blocks(src)
    theta = {f"w0__{i}": b.astype(np.float32) for i, b in enumerate(blocks)}
    theta.update({f"w{j + 1}": w.astype(np.float32) for j, w in enumerate(dense)})
    theta.update({f"b{j}": b.astype(np.float32) for j, b in enumerate(biases)})
    (tmp_path / "official").mkdir()
    (tmp_path / "official" / "theta.state").write_bytes(_flax_msgpack({"ff_mod_stack": {"~": theta}}))
    meta = convert.convert_checkpoint(tmp_path / "official" / "theta.state")
    torch.testing.assert_close(_features_out(meta), _features_out(src))
    # a folder (or Hub repo) holding one such file loads through Celo2.from_pretrained
    w = nn.Parameter(torch.randn(4, 4))
    opt = Celo2.from_pretrained(tmp_path / "official", [("w", w)], lr=1e-3)
    torch.testing.assert_close(opt.meta_weights.flat_parameters(), src.flat_parameters())
    # ... and so does a Hub repo in the official layout (resolved offline from the HF cache)
    from huggingface_hub import constants

    from hfx.hub import add_to_hf_cache

    add_to_hf_cache(tmp_path / "official", "someone/celo2-official", cache_dir=tmp_path / "cache")
    old, constants.HF_HUB_CACHE = constants.HF_HUB_CACHE, str(tmp_path / "cache")
    try:
        opt = Celo2.from_pretrained("someone/celo2-official", [("w", w)], lr=1e-3)
    finally:
        constants.HF_HUB_CACHE = old
    torch.testing.assert_close(opt.meta_weights.flat_parameters(), src.flat_parameters())
    # wrong feature widths are refused, naming what was found
    theta["w0__3"] = np.zeros((2, 8), np.float32)
    (tmp_path / "bad.state").write_bytes(_flax_msgpack({"ff_mod_stack": {"~": theta}}))
    with pytest.raises(ValueError, match="block widths"):
        convert.convert_checkpoint(tmp_path / "bad.state")
    (tmp_path / "junk.state").write_bytes(b"\x00not msgpack")
    with pytest.raises(ValueError, match="not a flax msgpack checkpoint"):
        convert.convert_checkpoint(tmp_path / "junk.state")


def test_pylo_checkpoint_layouts_convert(tmp_path):
    src = _meta(seed=6)
    blocks, dense, biases = _np_blocks(src)
    dense_sd = {
        "first_layer.weight": src.layers[0].weight.detach().clone(),
        "first_layer.bias": src.layers[0].bias.detach().clone(),
        "hidden.weight": src.layers[1].weight.detach().clone(),
        "hidden.bias": src.layers[1].bias.detach().clone(),
        "output.weight": src.layers[2].weight.detach().clone(),
        "output.bias": src.layers[2].bias.detach().clone(),
    }
    split_sd = {f"w0.{i}": torch.tensor(b, dtype=torch.float32) for i, b in enumerate(blocks)}
    split_sd.update({"b0": torch.tensor(biases[0], dtype=torch.float32)})
    split_sd.update({f"dense_w.{j}": torch.tensor(w, dtype=torch.float32) for j, w in enumerate(dense)})
    split_sd.update({f"dense_b.{j}": torch.tensor(b, dtype=torch.float32) for j, b in enumerate(biases[1:])})
    for name, sd in (("dense.pt", dense_sd), ("split.pt", split_sd)):
        torch.save(sd, tmp_path / name)
        meta = convert.convert_checkpoint(tmp_path / name)
        torch.testing.assert_close(_features_out(meta), _features_out(src))
    torch.save({"something": torch.zeros(2)}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="unrecognised"):
        convert.convert_checkpoint(tmp_path / "other.pt")


def test_hub_round_trip_and_publish(tmp_path):
    from hfx.hub import add_to_hf_cache, publish

    src = _meta(seed=8, init="adam_like")
    src.save_pretrained(tmp_path / "meta")
    loaded = Celo2MetaWeights.from_pretrained(tmp_path / "meta")
    assert torch.equal(loaded.flat_parameters(), src.flat_parameters()) and loaded.features == FEATURE_NAMES
    add_to_hf_cache(tmp_path / "meta", "hfx-test/celo2-meta", cache_dir=tmp_path / "cache")
    from huggingface_hub import constants

    old = constants.HF_HUB_CACHE
    constants.HF_HUB_CACHE = str(tmp_path / "cache")
    try:
        w = nn.Parameter(torch.randn(3, 3))
        opt = Celo2.from_pretrained("hfx-test/celo2-meta", [("w", w)])
    finally:
        constants.HF_HUB_CACHE = old
    assert torch.equal(opt.meta_weights.flat_parameters(), src.flat_parameters())
    out = publish("celo2", tmp_path / "pub", source=str(tmp_path / "meta"))
    card = (out / "README.md").read_text()
    assert "not the paper" in card and "celo2" in card
    assert torch.equal(Celo2MetaWeights.from_pretrained(out).flat_parameters(), src.flat_parameters())


# ----------------------------------------------------------------------------------------------------- meta-training
def test_pes_estimator_recovers_a_linear_meta_gradient():
    from hfx.optim.celo2.meta_train import MetaTrainConfig, MetaTrainer

    trainer = MetaTrainer(MetaTrainConfig(families=("teacher_mlp",), pes_std=0.01))
    c = torch.randn(trainer.theta.numel(), generator=torch.Generator().manual_seed(0))

    class LinearRun:  # L(theta) = c . theta, so L+ - L- = 2 c . eps and the PES estimate is unbiased for c
        K = 20000

        def truncation(self, theta, std):
            eps = torch.randn(self.K, theta.numel(), generator=torch.Generator().manual_seed(1)) * std
            return eps, 2 * eps @ c, 0.0

    grad, _ = trainer.estimate([LinearRun()])
    assert nn.functional.cosine_similarity(grad, c, dim=0) > 0.95
    assert abs(grad.norm() / c.norm() - 1) < 0.1


@pytest.mark.slow
def test_meta_training_checkpoints_resumes_and_publishes(tmp_path):
    from hfx.hub import publish
    from hfx.optim.celo2.meta_train import MetaTrainConfig, MetaTrainer, main

    cfg = dict(families=("teacher_mlp",), num_particles=2, trunc_length=2, min_unroll=2, max_unroll=4,
               eval_instances=1, eval_steps=3, eval_every=1, checkpoint_every=1, output_dir=str(tmp_path / "run"))  # fmt: skip
    trainer = MetaTrainer(MetaTrainConfig(outer_iterations=2, **cfg))
    final = trainer.train()
    assert not torch.equal(trainer.theta, Celo2MetaWeights(init="adam_like").flat_parameters())  # PES moved it
    for name in ("final", "best", "checkpoint-latest"):
        assert (tmp_path / "run" / name / "model.safetensors").is_file()
    lines = (tmp_path / "run" / "history.jsonl").read_text().splitlines()
    assert len(lines) == 3 and "eval_adamw" in lines[0]
    loaded = Celo2MetaWeights.from_pretrained(final)
    torch.testing.assert_close(loaded.flat_parameters(), trainer.theta)
    # resume continues the iteration count from the latest checkpoint (CLI entry point)
    argv = ["--outer-iterations", "3", "--resume"]
    for key, value in cfg.items():
        argv += [f"--{key.replace('_', '-')}", *(map(str, value) if isinstance(value, tuple) else [str(value)])]
    main(argv)
    summary = (tmp_path / "run" / "summary.json").read_text()
    assert '"outer_iterations_done": 3' in summary
    card = (publish("celo2", tmp_path / "hub", source=str(final)) / "README.md").read_text()
    assert "meta-trained by hfx's CPU recipe" in card and "`teacher_mlp`" in card
