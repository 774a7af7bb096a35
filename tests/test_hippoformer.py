"""Tests for mm-TEM / Hippoformer (Li et al., ICLR 2026): fast-weight writes, path integration, chunked scan vs the
step-by-step reference, Hebbian baseline, data generator, training, save/load, Auto classes, publish."""

import numpy as np
import pytest
import torch


def tiny_mmtem_config(**kw):
    from hfx.models.hippoformer import MMTEMConfig

    base = dict(
        observation_vocab_size=6,
        structural_size=8,
        sensory_size=6,
        transition_hidden_size=16,
        memory_size=8,
        memory_hidden_size=12,
        memory_chunk_size=4,
    )
    base.update(kw)
    return MMTEMConfig(**base)


def walks(batch=3, steps=11, vocab=6, num_actions=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    obs = torch.randint(0, vocab, (batch, steps), generator=gen)
    act = torch.randint(0, num_actions, (batch, steps), generator=gen)
    act[:, 0] = num_actions
    return obs, act


# ------------------------------------------------------------------------------------------------ fast weights
def test_linear_memory_write_then_read_recovers_value():
    """Depth-1 memory, unit key: one write with lr = 1 / (2 (|k|^2 + 1)) solves ||W k + b - v||^2 exactly."""
    from hfx.models.hippoformer.fast_weights import MetaMLPMemory

    torch.manual_seed(0)
    mem = MetaMLPMemory(5, 7, depth=1, activation_name="gelu")
    torch.nn.init.normal_(mem.weights[0])
    key = torch.nn.functional.normalize(torch.randn(2, 5), dim=-1)
    value = torch.randn(2, 5)
    state = mem.initial_state(2)
    before = mem.read_state(state, key)
    assert (before - value).abs().max() > 0.5
    lr = torch.full((2,), 0.25)
    after_state = mem.write_step(state, state, key, value, lr, None, None)
    torch.testing.assert_close(mem.read_state(after_state, key), value, atol=1e-5, rtol=0)
    # the chunked form reads the same memory at the next step
    _readers, end_state = mem.chunked_write(state, key[:, None], value[:, None], lr[:, None], None, None, chunk_size=4)
    torch.testing.assert_close(mem.read_state(end_state, key), value, atol=1e-5, rtol=0)


def test_deep_memory_repeated_writes_recover_values():
    """Depth-2 meta-MLP: writing 3 (key, value) pairs repeatedly drives every read to its value."""
    from hfx.models.hippoformer.fast_weights import MetaMLPMemory

    torch.manual_seed(1)
    mem = MetaMLPMemory(6, 16, depth=2, activation_name="silu")
    for w in mem.weights:
        torch.nn.init.normal_(w, std=w.shape[1] ** -0.5)
    keys = torch.nn.functional.normalize(torch.randn(1, 3, 6), dim=-1)
    values = torch.randn(1, 3, 6)
    state = mem.initial_state(1)
    lr = torch.full((1,), 0.05)
    for _ in range(150):
        for i in range(3):
            state = mem.write_step(state, state, keys[:, i], values[:, i], lr, None, None)
    torch.testing.assert_close(mem.read_state(state, keys), values, atol=2e-2, rtol=0)


@pytest.mark.parametrize("chunk_size", [1, 3, 16])
@pytest.mark.parametrize("depth,act", [(1, "relu"), (2, "gelu"), (3, "tanh")])
def test_chunked_scan_equals_step_by_step_reference(chunk_size, depth, act):
    """Closed-form chunk coefficients + dual-form reads == explicit weights updated by torch.func.grad each step."""
    from hfx.models.hippoformer.fast_weights import MetaMLPMemory

    torch.manual_seed(2)
    batch, steps, d = 2, 13, 5
    mem = MetaMLPMemory(d, 7, depth=depth, activation_name=act).double()
    for w in mem.weights:
        torch.nn.init.normal_(w, std=w.shape[1] ** -0.5)
    for b in mem.biases:
        torch.nn.init.normal_(b, std=0.1)
    keys = torch.randn(batch, steps, d, dtype=torch.float64)
    values = torch.randn(batch, steps, d, dtype=torch.float64)
    queries = torch.randn(batch, steps, 2, d, dtype=torch.float64)
    lr = torch.rand(batch, steps, dtype=torch.float64) * 0.2
    eta = torch.rand(batch, steps, dtype=torch.float64)
    alpha = torch.rand(batch, steps, dtype=torch.float64) * 0.3
    state = mem.initial_state(batch)
    readers, end = mem.chunked_write(state, keys, values, lr, eta, alpha, chunk_size)
    chunked = torch.cat([r.read(queries[:, s:e]) for s, e, r in readers], 1)
    ref_state, anchor, ref = state, state, []
    for t in range(steps):
        if t % chunk_size == 0:
            anchor = ref_state
        ref.append(mem.read_state(ref_state, queries[:, t]))
        ref_state = mem.write_step(ref_state, anchor, keys[:, t], values[:, t], lr[:, t], eta[:, t], alpha[:, t])
    torch.testing.assert_close(chunked, torch.stack(ref, 1), atol=1e-10, rtol=1e-10)
    for a, b in zip(end.weights + end.weight_momenta, ref_state.weights + ref_state.weight_momenta):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-10)
    assert (chunked[:, -1] - chunked[:, 0]).abs().max() > 1e-3  # the writes changed the reads


def test_chunk_coefficients_against_unrolled_recurrence():
    """Coefficients of theta_0, S_0 and each write's gradient, from an independent scalar unrolling."""
    from hfx.models.hippoformer.fast_weights import chunk_coefficients

    torch.manual_seed(3)
    c = 5
    lr = torch.rand(1, c, dtype=torch.float64)
    eta = torch.rand(1, c, dtype=torch.float64)
    alpha = torch.rand(1, c, dtype=torch.float64) * 0.5
    decay, momentum, mix, momentum_mix, eta_prod = chunk_coefficients(lr, eta, alpha)
    # track theta and S as vectors of coefficients over the basis [theta_0, S_0, g_0..g_{c-1}] (g_q carries lr_q)
    theta = np.zeros(c + 2)
    theta[0] = 1
    s = np.zeros(c + 2)
    s[1] = 1
    for p in range(c):
        assert np.allclose(theta[0], decay[0, p]) and np.allclose(theta[1], momentum[0, p])
        assert np.allclose(-theta[2:], mix[0, p].numpy())
        g = np.zeros(c + 2)
        g[2 + p] = 1
        s = eta[0, p].item() * s - g
        theta = (1 - alpha[0, p].item()) * theta + s
    assert np.allclose(theta[0], decay[0, c]) and np.allclose(-theta[2:], mix[0, c].numpy())
    assert np.allclose(s[1], eta_prod[0]) and np.allclose(-s[2:], momentum_mix[0].numpy())


def test_hebbian_write_matches_hand_computation():
    from hfx.models.hippoformer.fast_weights import HebbianMemory

    mem = HebbianMemory(2, learning_rate=0.5, decay=0.9, attractor_steps=1, kappa=0.0)
    m0 = torch.tensor([[[1.0, 0.0], [0.0, 2.0]]])
    p, p_hat = torch.tensor([[1.0, 2.0]]), torch.tensor([[0.5, 0.0]])
    expected = torch.tensor([[[0.9 + 0.5 * 1.5 * 0.5, 0.5 * 1.5 * 2.0], [0.5 * 2 * 0.5, 1.8 + 0.5 * 2 * 2]]])
    torch.testing.assert_close(mem.write_step(m0, p, p_hat), expected)
    # one attractor step with kappa = 0: clamp(leaky_relu(M h), -1, 1)
    h = torch.tensor([[0.3, -0.2]])
    torch.testing.assert_close(mem.read_state(m0, h), torch.tensor([[0.3, -0.004]]))


# -------------------------------------------------------------------------------------------------- the models
def test_path_integration_unit_norm_every_step_even_when_all_units_are_off():
    from hfx.models.hippoformer import MMTEMModel

    torch.manual_seed(0)
    model = MMTEMModel(tiny_mmtem_config())
    obs, act = walks(steps=9)
    g = model(obs, act).structural_codes
    torch.testing.assert_close(g.norm(dim=-1), torch.ones(g.shape[:2]))
    # a transition that maps every unit below zero: relu kills all of g, the eps floor keeps the norm at 1
    with torch.no_grad():
        model.transition[-1].weight.zero_()
        model.transition[-1].bias.fill_(-1.0)
        model.initial_structural_code.abs_()
    g = model(obs, act).structural_codes
    assert torch.isfinite(g).all()
    torch.testing.assert_close(g.norm(dim=-1), torch.ones(g.shape[:2]))


def test_path_integration_follows_the_equation():
    from hfx.models.hippoformer import MMTEMModel

    torch.manual_seed(0)
    model = MMTEMModel(tiny_mmtem_config(path_integration_eps=0.0))
    obs, act = walks(steps=4)
    g = model(obs, act).structural_codes
    w = model.transition_matrices()
    prev = torch.nn.functional.normalize(model.initial_structural_code, dim=0)
    for t in range(4):
        manual = torch.relu(prev @ w[act[0, t]])
        manual = manual / manual.norm()
        torch.testing.assert_close(g[0, t], manual)
        prev = manual


def test_model_chunked_equals_recurrent_and_shapes():
    from hfx.models.hippoformer import MMTEMModel

    torch.manual_seed(0)
    model = MMTEMModel(tiny_mmtem_config()).double()
    obs, act = walks()
    a = model(obs, act, labels=obs)
    b = model(obs, act, labels=obs, memory_scan="recurrent")
    assert a.logits.shape == (3, 11, 6) and a.structural_codes.shape == (3, 11, 8)
    assert a.memory_readout.shape == (3, 11, 8) and a.loss.dim() == 0
    torch.testing.assert_close(a.logits, b.logits, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(a.inference_logits, b.inference_logits, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(a.loss, b.loss)


def test_generative_forecast_never_sees_the_current_observation():
    from hfx.models.hippoformer import HippoformerConfig, HippoformerForNextObservation, MMTEMModel

    torch.manual_seed(0)
    obs, act = walks(steps=8)
    changed = obs.clone()
    changed[:, 5] = (changed[:, 5] + 1) % 6
    for model in (
        MMTEMModel(tiny_mmtem_config()),
        MMTEMModel(tiny_mmtem_config(memory_type="hebbian", memory_scan="recurrent")),
        HippoformerForNextObservation(
            HippoformerConfig(
                observation_vocab_size=6,
                hidden_size=16,
                intermediate_size=32,
                mmtem_config=tiny_mmtem_config().to_dict(),
            )
        ),
    ):
        a, b = model(obs, act).logits, model(changed, act).logits
        torch.testing.assert_close(a[:, :6], b[:, :6])
        assert (a[:, 6:] - b[:, 6:]).abs().max() > 0  # later steps did read the write


@pytest.mark.parametrize("fusion", ["concat", "sum", "gate"])
def test_hippoformer_fusions_and_transformer_baseline_shapes(fusion):
    from hfx.models.hippoformer import HippoformerConfig, HippoformerForNextObservation

    torch.manual_seed(0)
    cfg = HippoformerConfig(
        observation_vocab_size=6,
        hidden_size=16,
        intermediate_size=32,
        fusion=fusion,
        sliding_window=4,
        mmtem_config=tiny_mmtem_config().to_dict(),
    )
    obs, act = walks()
    out = HippoformerForNextObservation(cfg)(obs, act, labels=obs)
    assert out.logits.shape == (3, 11, 6) and out.mmtem.logits.shape == (3, 11, 6)
    assert torch.isclose(
        out.loss, torch.nn.functional.cross_entropy(out.logits.reshape(-1, 6), obs.reshape(-1)) + out.mmtem.loss
    )
    base = HippoformerForNextObservation(
        HippoformerConfig(observation_vocab_size=6, hidden_size=16, structural_memory="none")
    )
    assert base(obs, act).logits.shape == (3, 11, 6) and base(obs, act).mmtem is None


def test_matched_transformer_has_matched_parameter_count():
    from hfx.models.hippoformer import HippoformerForNextObservation, MMTEMModel, matched_transformer_config

    ref = MMTEMModel(tiny_mmtem_config(structural_size=24, memory_size=24, memory_hidden_size=48))
    cfg = matched_transformer_config(ref, num_attention_heads=2)
    count = sum(p.numel() for p in HippoformerForNextObservation(cfg).parameters())
    target = sum(p.numel() for p in ref.parameters())
    assert cfg.structural_memory == "none" and abs(count - target) / target < 0.1


def test_config_and_input_errors():
    from hfx.models.hippoformer import HippoformerConfig, MMTEMConfig, MMTEMModel

    with pytest.raises(ValueError, match="memory_type"):
        MMTEMConfig(memory_type="outer")
    with pytest.raises(ValueError, match="recurrent"):
        MMTEMConfig(memory_type="hebbian", memory_scan="chunked")
    with pytest.raises(ValueError, match="recurrent"):
        MMTEMConfig(consistency_feedback=True)
    with pytest.raises(ValueError, match="integration_ratio_init"):
        MMTEMConfig(integration_ratio_init=1.5)
    with pytest.raises(ValueError, match="fusion"):
        HippoformerConfig(fusion="add")
    with pytest.raises(ValueError, match="observation_vocab_size"):
        HippoformerConfig(observation_vocab_size=8, mmtem_config={"observation_vocab_size": 9})
    model = MMTEMModel(tiny_mmtem_config())
    obs, act = walks()
    with pytest.raises(ValueError, match="observations"):
        model(obs + 6, act)
    with pytest.raises(ValueError, match="actions"):
        model(obs, act + 5)
    with pytest.raises(ValueError, match="memory_scan"):
        model(obs, act, memory_scan="parallel")


def test_consistency_feedback_and_tem_style_run_and_backprop():
    from hfx.models.hippoformer import MMTEMConfig, MMTEMModel

    obs, act = walks()
    for cfg in (
        tiny_mmtem_config(memory_scan="recurrent", consistency_feedback=True),
        MMTEMConfig.tem_style(
            **tiny_mmtem_config().to_dict() | {"memory_type": "hebbian", "memory_scan": "recurrent"}
        ),
    ):
        model = MMTEMModel(cfg)
        out = model(obs, act, labels=obs)
        out.loss.backward()
        assert torch.isfinite(out.loss) and model.transition[-1].weight.grad.abs().sum() > 0
        torch.testing.assert_close(out.structural_codes.norm(dim=-1), torch.ones(3, 11))


# ------------------------------------------------------------------------------------------------------- data
@pytest.mark.parametrize("graph", ["square", "hexagonal", "torus"])
def test_random_walks_move_along_edges(graph):
    from hfx.models.hippoformer.data import GRAPH_FAMILIES, random_walk_dataset

    size = 4
    ds = random_walk_dataset(5, size=size, walk_length=30, vocab_size=7, graph=graph, seed=1)
    moves = {a: (dr, dc) for a, dr, dc in GRAPH_FAMILIES[graph]}
    wraps = 0
    for row in ds:
        nodes, actions, rev = row["nodes"].tolist(), row["actions"].tolist(), row["revisited"].tolist()
        assert actions[0] == len(moves) and max(actions[1:]) < len(moves)
        for t in range(1, 30):
            (r0, c0), (r1, c1) = divmod(nodes[t - 1], size), divmod(nodes[t], size)
            dr, dc = moves[actions[t]]
            if graph == "torus":
                assert ((r0 + dr) % size, (c0 + dc) % size) == (r1, c1)
                wraps += (r0 + dr, c0 + dc) != (r1, c1)
            else:
                assert (r0 + dr, c0 + dc) == (r1, c1)
            assert rev[t] == (nodes[t] in nodes[:t])
        assert torch.equal(row["observations"], row["labels"])
    assert (wraps > 0) == (graph == "torus")  # only the torus moves across its edges
    # same node -> same token within a walk
    row = ds[0]
    tokens = {}
    for n, o in zip(row["nodes"].tolist(), row["observations"].tolist()):
        assert tokens.setdefault(n, o) == o


def test_generalization_splits_names_and_sizes():
    from hfx.models.hippoformer.data import generalization_splits

    dd = generalization_splits(
        num_train=4, num_test=2, train_size=3, train_length=10, test_sizes=(3, 5), test_lengths=(10, 20)
    )
    assert set(dd) == {"train", "test_s3_t10", "test_s3_t20", "test_s5_t10", "test_s5_t20"}
    assert dd["test_s5_t20"][:]["nodes"].shape == (2, 20) and int(dd["test_s5_t20"][:]["nodes"].max()) < 25
    with pytest.raises(ValueError, match="graph"):
        generalization_splits(graph="cube")


# --------------------------------------------------------------------------------------------- training / io
@pytest.mark.slow
def test_loss_decreases_within_100_steps_on_a_tiny_grid():
    from hfx.models.hippoformer import MMTEMModel
    from hfx.models.hippoformer.data import random_walk_dataset

    torch.manual_seed(0)
    ds = random_walk_dataset(32, size=3, walk_length=16, vocab_size=6, seed=0)
    model = MMTEMModel(tiny_mmtem_config())
    opt = torch.optim.Adam(model.parameters(), 1e-2)
    losses = []
    for step in range(100):
        b = ds[(step * 8) % 32 : (step * 8) % 32 + 8]
        loss = model(b["observations"], b["actions"], labels=b["labels"]).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert np.mean(losses[-10:]) < 0.8 * np.mean(losses[:10])


def test_trainer_runs_and_save_load_exact(tmp_path):
    from transformers import AutoModel

    import hfx  # noqa: F401 -- registers the Auto classes
    from hfx.models.hippoformer import HippoformerConfig, HippoformerForNextObservation, MMTEMModel
    from hfx.models.hippoformer.data import random_walk_dataset
    from hfx.models.hippoformer.training import next_observation_trainer, revisited_accuracy

    torch.manual_seed(0)
    ds = random_walk_dataset(8, size=3, walk_length=10, vocab_size=6, seed=0)
    model = HippoformerForNextObservation(
        HippoformerConfig(
            observation_vocab_size=6, hidden_size=16, intermediate_size=32, mmtem_config=tiny_mmtem_config().to_dict()
        )
    )
    before = [p.detach().clone() for p in model.parameters()]
    trainer = next_observation_trainer(
        model, ds, str(tmp_path / "run"), max_steps=2, per_device_train_batch_size=4, disable_tqdm=True
    )
    trainer.train()
    assert any((a - b).abs().max() > 0 for a, b in zip(before, model.parameters()))
    acc = revisited_accuracy(model, ds)
    assert 0.0 <= acc["accuracy"] <= 1.0 and sum(acc["per_walk_count"]) == int(ds[:]["revisited"].sum())
    obs, act = ds[:4]["observations"], ds[:4]["actions"]
    for m in (model, MMTEMModel(tiny_mmtem_config(memory_type="hebbian", memory_scan="recurrent"))):
        m.eval()
        m.save_pretrained(tmp_path / type(m).__name__)
        loaded = AutoModel.from_pretrained(tmp_path / type(m).__name__)
        assert type(loaded) is type(m)
        with torch.no_grad():
            torch.testing.assert_close(loaded(obs, act).logits, m(obs, act).logits, atol=0, rtol=0)


def test_publish_writes_loadable_folder_with_card(tmp_path):
    from transformers import AutoModel

    from hfx.hub import PUBLISHERS, publish
    from hfx.models.hippoformer import HippoformerForNextObservation, MMTEMModel

    assert {"hippoformer", "mmtem"} <= set(PUBLISHERS)
    for name, cls in (("hippoformer", HippoformerForNextObservation), ("mmtem", MMTEMModel)):
        out = publish(name, tmp_path / name)
        card = (out / "README.md").read_text()
        assert card.startswith("---\n") and f"hfx_method: {name}" in card and "Untrained demo" in card
        assert type(AutoModel.from_pretrained(out)) is cls


def test_cli_trains_saves_and_rejects_bad_input(tmp_path, capsys):
    from hfx.cli import main

    out = tmp_path / "m"
    for bad, flag in (
        (["--model", "lstm"], "--model"),
        (["--graph", "cube"], "--graph"),
        (["--steps", "0"], "--steps"),
    ):
        with pytest.raises(SystemExit) as refused:  # argparse refuses before anything loads
            main(["hippoformer", *bad, "--out", str(out)])
        assert refused.value.code == 2 and f"argument {flag}" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["hippoformer"])  # --out is required
    assert not out.exists()
    args = ["hippoformer", "--model", "transformer", "--steps", "2", "--num-walks", "8", "--out", str(out)]
    assert main([*args, "--grid-size", "3", "--walk-length", "10", "--eval-size", "4", "--eval-length", "12"]) == 0
    assert "accuracy on revisited nodes" in capsys.readouterr().out and (out / "config.json").is_file()


def test_transformer_branch_is_causal_and_sliding_window():
    from hfx.models.hippoformer import HippoformerConfig, HippoformerForNextObservation

    torch.manual_seed(0)
    cfg = HippoformerConfig(observation_vocab_size=6, hidden_size=16, structural_memory="none", sliding_window=4)
    model = HippoformerForNextObservation(cfg).eval()
    obs, act = walks(batch=2, steps=14)
    changed = obs.clone()
    changed[:, 2] = (changed[:, 2] + 1) % 6  # enters the Transformer at position 3 (as o_{t-1})
    with torch.no_grad():
        a, b = model(obs, act).logits, model(changed, act).logits
    torch.testing.assert_close(a[:, :3], b[:, :3])  # causal, and o_t itself is never an input at step t
    assert (a[:, 3] - b[:, 3]).abs().max() > 1e-6
    torch.testing.assert_close(a[:, 9:], b[:, 9:])  # outside the window of 4 positions
