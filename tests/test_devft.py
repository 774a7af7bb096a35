"""DevFT (arXiv 2508.00041): grouping, fusion, stage sub-models, LoRA transfer and counts, client training, and a
2-client 2-round Flower simulation on a tiny Llama."""

import json
import subprocess
import sys
import textwrap

import pytest
import torch

from hfx.federated.devft import (
    DevFTConfig,
    DevFTScheduler,
    StagePlan,
    build_submodel,
    contiguous_grouping,
    default_stages,
    fusion_coefficients,
    layer_similarity,
    lora_params_per_layer,
    pick_anchor,
    spectral_grouping,
    transfer_lora,
)
from hfx.federated.devft.lora import initialize_lora_from_state, lora_state, wrap_with_lora


# tiny_llama: hidden 32, 4 heads (head_dim 8), 2 KV heads, intermediate 64. LoRA r=8 per layer, derived by hand:
# q_proj 8*(32+32)=512, k_proj 8*(32+16)=384, v_proj 8*(32+16)=384, o_proj 8*(32+32)=512, gate/up 8*(32+64)=768,
# down_proj 8*(64+32)=768.
QV_LORA_PER_LAYER = 512 + 384
ALL_LORA_PER_LAYER = 512 + 384 + 384 + 512 + 768 + 768 + 768


@pytest.fixture(scope="module")
def base8():
    from hfx.testing import tiny_llama

    model, tok = tiny_llama(seed=1, num_hidden_layers=8)
    with torch.no_grad():  # distinct norms per layer (random-init norms are all ones)
        for i, layer in enumerate(model.model.layers):
            layer.input_layernorm.weight.add_(0.05 * torch.randn(32, generator=torch.Generator().manual_seed(i)))
    return model, tok


def _logits(model, tok, text="the cat sat on the mat"):
    enc = tok([text], return_tensors="pt")
    with torch.no_grad():
        return model(**enc).logits


# ----------------------------------------------------------------------------------------------------------- config
def test_config_validation_schedules_and_baselines():
    assert default_stages(30) == [4, 8, 16, 30] and default_stages(32) == [4, 8, 16, 32] and default_stages(3) == [3]
    cfg = DevFTConfig()
    assert cfg.resolve_stages(30) == [4, 8, 16, 30] and cfg.resolve_rounds(30) == [2, 2, 2, 2]
    fedit = DevFTConfig.for_baseline("fedit", rounds_per_stage=[1, 2, 3, 4])
    assert fedit.resolve_stages(30) == [30] and fedit.resolve_rounds(30) == [10]  # equal total rounds
    assert DevFTConfig.for_baseline("no_grouping").grouping == "contiguous"
    assert DevFTConfig.for_baseline("no_fusion").fusion_mu == 0.0
    assert [DevFTConfig.for_baseline(b).name for b in ("fedit", "no_grouping", "no_fusion")] == [
        "fedit",
        "devft-no_grouping",
        "devft-no_fusion",
    ]
    assert DevFTConfig.from_dict(cfg.to_dict()) == cfg
    for bad, match in [
        (dict(anchor="centroid"), "`anchor` must be one of"),
        (dict(stages=[4, 4, 8]), "strictly increasing"),
        (dict(stages=[2, 4], rounds_per_stage=[1, 2, 3]), "rounds_per_stage"),
        (dict(fusion_mu=float("nan")), "fusion_mu"),
        (dict(lora_r=0), "lora_r"),
        (dict(target_modules="q_proj"), "target_modules"),
    ]:
        with pytest.raises(ValueError, match=match):
            DevFTConfig(**bad)
    with pytest.raises(ValueError, match="must end with the base model's depth"):
        DevFTConfig(stages=[2, 4]).resolve_stages(8)
    with pytest.raises(ValueError, match="`name` must be one of"):
        DevFTConfig.for_baseline("fedprox")
    with pytest.raises(ValueError, match="unknown DevFTConfig field"):
        DevFTConfig.from_dict({"stage": [4]})


# --------------------------------------------------------------------------------------------------------- grouping
def _toy_layers():
    torch.manual_seed(0)
    layers = []
    for _ in range(3):
        layer = torch.nn.Module()
        layer.proj = torch.nn.Linear(4, 3, bias=False)
        layer.norm = torch.nn.Parameter(torch.rand(5) + 0.5)
        layers.append(layer)
    return layers


def test_layer_similarity_matches_direct_computation():
    layers = _toy_layers()
    per_tensor = layer_similarity(layers, "weight_cosine", "per_tensor_mean")
    flat = layer_similarity(layers, "weight_cosine", "flatten")
    cos = torch.nn.functional.cosine_similarity
    for i in range(3):
        for j in range(3):
            wi, wj = layers[i].proj.weight.flatten().double(), layers[j].proj.weight.flatten().double()
            ni, nj = layers[i].norm.double(), layers[j].norm.double()
            expected = (cos(wi, wj, dim=0) + cos(ni, nj, dim=0)) / 2
            assert per_tensor[i, j].item() == pytest.approx(expected.item(), abs=1e-10)
            expected_flat = cos(torch.cat([wi, ni]), torch.cat([wj, nj]), dim=0)
            assert flat[i, j].item() == pytest.approx(expected_flat.item(), abs=1e-10)
    # sign agreement, by hand: two layers of one 4-vector each; centred: a - m, b - m with m = (a + b) / 2
    a, b = torch.nn.Module(), torch.nn.Module()
    a.w = torch.nn.Parameter(torch.tensor([1.0, 2.0, 0.0, 5.0]))
    b.w = torch.nn.Parameter(torch.tensor([3.0, 0.0, 0.0, 1.0]))
    # centred a: [-1, 1, 0, 2]; centred b: [1, -1, 0, -2] -> products of signs [-1, -1, 0, -1], mean -0.75
    sa = layer_similarity([a, b], "sign_agreement")
    assert sa[0, 1].item() == pytest.approx((1 - 0.75) / 2)
    with pytest.raises(ValueError, match="`measure` must be one of"):
        layer_similarity(layers, "cka")


def test_spectral_grouping_recovers_blocks_and_is_deterministic(base8):
    # 9 layers in 3 planted blocks {0,4,7}, {1,2,8}, {3,5,6}: high similarity inside, low across, plus noise
    blocks = [[0, 4, 7], [1, 2, 8], [3, 5, 6]]
    gen = torch.Generator().manual_seed(0)
    s = 0.1 * torch.rand(9, 9, generator=gen, dtype=torch.float64)
    for b in blocks:
        for i in b:
            for j in b:
                s[i, j] += 0.8
    s = (s + s.T) / 2
    s.fill_diagonal_(1.0)
    groups = spectral_grouping(s, 3, seed=0)
    assert sorted(groups) == sorted(blocks)
    assert groups == sorted(groups, key=lambda g: sum(g) / len(g))  # depth order
    # deterministic by seed on a real (tiny) model's layers
    sim = layer_similarity(base8[0])
    runs = [spectral_grouping(sim, 3, seed=7) for _ in range(2)]
    assert runs[0] == runs[1]
    assert sorted(i for g in runs[0] for i in g) == list(range(8)) and len(runs[0]) == 3
    # an ambiguous graph (uniform noise, 24 layers, 6 groups) has many k-means optima: the same seed must give the same
    # groups on every call, and the seed must matter (so it is really k-means' random_state, not a constant)
    noise = torch.rand(24, 24, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    noise = (noise + noise.T) / 2
    noise.fill_diagonal_(1.0)
    by_seed = [[spectral_grouping(noise, 6, seed=seed) for _ in range(3)] for seed in range(4)]
    assert all(calls[0] == calls[1] == calls[2] for calls in by_seed)
    assert len({str(calls[0]) for calls in by_seed}) > 1
    assert spectral_grouping(sim, 8) == [[i] for i in range(8)] and spectral_grouping(sim, 1) == [list(range(8))]
    with pytest.raises(ValueError, match="`num_groups` must be an integer in"):
        spectral_grouping(sim, 9)


def test_contiguous_grouping_and_anchor_rules():
    assert contiguous_grouping(10, 4) == [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]
    s = torch.tensor([[1.0, 0.9, 0.1], [0.9, 1.0, 0.8], [0.1, 0.8, 1.0]], dtype=torch.float64)
    assert pick_anchor([0, 1, 2], s, "medoid") == 1  # mean similarity to the others: 0.5, 0.85, 0.45
    assert pick_anchor([2, 0, 1], s, "first") == 0 and pick_anchor([0, 1, 2, 3], None, "middle") == 1
    assert pick_anchor([5], None, "medoid") == 5


# ----------------------------------------------------------------------------------------------------------- fusion
def test_fusion_identity_for_one_layer_groups(base8):
    base = base8[0]
    assert fusion_coefficients([3], 3, mu=0.37, weighting="uniform") == [1.0]
    groups = [[0], [1, 2], [3], [4, 5, 6], [7]]
    anchors = [0, 2, 3, 5, 7]
    coefs = [fusion_coefficients(g, a, 0.8) for g, a in zip(groups, anchors)]
    sub = build_submodel(base, StagePlan(0, 8, groups, anchors, coefs))
    for k, src in [(0, 0), (2, 3), (4, 7)]:
        for (name, p), (_, q) in zip(
            sub.model.layers[k].named_parameters(), base.model.layers[src].named_parameters()
        ):
            assert torch.equal(p, q), name


def test_fusion_matches_the_differential_formula(base8):
    base = base8[0]
    group, anchor, mu = [1, 3, 4], 3, 0.7
    w = {i: base.model.layers[i].self_attn.q_proj.weight for i in group}
    expected = w[3] + mu * ((w[1] - w[3]) / 3 + (w[4] - w[3]) / 3)  # W_a + mu * sum (W_l - W_a) / |g|
    rest = [i for i in range(8) if i not in group]
    groups = [[rest[0]], [rest[1]], group, *[[i] for i in rest[2:]]]
    anchors = [g[0] if g != group else anchor for g in groups]
    coefs = [fusion_coefficients(g, a, mu) for g, a in zip(groups, anchors)]
    plan = StagePlan(0, 8, groups, anchors, coefs)
    k = plan.groups.index(group)
    sub = build_submodel(base, plan)
    torch.testing.assert_close(sub.model.layers[k].self_attn.q_proj.weight, expected, rtol=0, atol=1e-6)
    # mu = 0: the anchor alone ("without fusion"); mu = 1, uniform: the group mean
    assert fusion_coefficients(group, anchor, 0.0) == [0.0, 1.0, 0.0]
    assert fusion_coefficients(group, anchor, 1.0) == pytest.approx([1 / 3] * 3)
    # similarity weights: proportional to the anchor's affinities, same total as uniform
    aff = torch.zeros(5, 5, dtype=torch.float64)
    aff[3, 1], aff[3, 4] = 0.2, 0.6
    c = fusion_coefficients(group, anchor, 1.0, "similarity", aff)
    assert (
        c[0] / c[2] == pytest.approx(0.2 / 0.6) and c[0] + c[2] == pytest.approx(2 / 3) and sum(c) == pytest.approx(1)
    )


# ------------------------------------------------------------------------------------------------------- sub-models
def test_stage_submodels_have_the_stated_layers_save_load_and_last_is_the_base(base8, tmp_path):
    from transformers import LlamaForCausalLM

    base, tok = base8
    sched = DevFTScheduler(base, DevFTConfig(stages=[2, 4, 8]))
    plans = sched.plans()
    assert [p.num_layers for p in plans] == [2, 4, 8]
    for plan in plans:
        sub = sched.build_submodel(plan)
        assert isinstance(sub, LlamaForCausalLM)
        assert sub.config.num_hidden_layers == plan.num_layers == len(sub.model.layers)
    sub = sched.build_submodel(0)
    sub.save_pretrained(tmp_path / "stage0")
    loaded = LlamaForCausalLM.from_pretrained(tmp_path / "stage0")
    assert loaded.config.devft_stage == plans[0].to_dict()
    assert torch.equal(_logits(loaded, tok), _logits(sub, tok))
    assert not torch.allclose(_logits(sub, tok), _logits(base, tok))
    final = sched.build_submodel(2)
    assert plans[-1].is_identity
    full_cfg = {k: v for k, v in final.config.to_dict().items() if k not in ("devft_stage", "_name_or_path")}
    base_cfg = {k: v for k, v in base.config.to_dict().items() if k != "_name_or_path"}
    assert full_cfg == base_cfg
    assert all(torch.equal(v, base.state_dict()[k]) for k, v in final.state_dict().items())
    assert torch.equal(_logits(final, tok), _logits(base, tok))
    with pytest.raises(ValueError, match="plan is for 4 base layers"):
        build_submodel(base, StagePlan.identity(4))


# -------------------------------------------------------------------------------------------------------------- LoRA
def test_lora_parameter_counts_match_the_formula(base8):
    base = base8[0]
    assert lora_params_per_layer(base.config, ["q_proj", "v_proj"], 8) == QV_LORA_PER_LAYER
    all_targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    assert lora_params_per_layer(base.config, all_targets, 8) == ALL_LORA_PER_LAYER
    for targets, per_layer in [(["q_proj", "v_proj"], QV_LORA_PER_LAYER), (all_targets, ALL_LORA_PER_LAYER)]:
        cfg = DevFTConfig(stages=[2, 4, 8], target_modules=targets)
        sched = DevFTScheduler(base, cfg)
        for plan in sched.plans():
            state = lora_state(wrap_with_lora(sched.build_submodel(plan), cfg, seed=0))
            assert sum(v.numel() for v in state.values()) == per_layer * plan.num_layers
    with pytest.raises(ValueError, match="outside the decoder layers"):
        wrap_with_lora(build_submodel(base, StagePlan.identity(8)), DevFTConfig(target_modules=["q_proj", "lm_head"]))


def test_lora_transfer_maps_layers_shapes_and_values(base8):
    base = base8[0]
    cfg = DevFTConfig(target_modules=["q_proj", "v_proj"])
    src = StagePlan(0, 8, [[0, 1, 2, 3], [4, 5, 6, 7]], [1, 5], [[0.25] * 4, [0.25] * 4])
    # [2,3,4]: 2 of 3 members in source group 0; [3,4] would tie -> its anchor's group; [5,6], [7] -> group 1
    dst_groups = [[0, 1], [2, 3, 4], [5, 6], [7]]
    dst = StagePlan(1, 8, dst_groups, [0, 4, 5, 7], [[0.5, 0.5], [1 / 3] * 3, [0.5, 0.5], [1.0]])
    state = lora_state(wrap_with_lora(build_submodel(base, src), cfg, seed=0))
    gen = torch.Generator().manual_seed(0)
    state = {k: torch.randn(v.shape, generator=gen) for k, v in state.items()}  # non-zero B too
    fresh = lora_state(wrap_with_lora(build_submodel(base, dst), cfg, seed=0))
    for mode in ("copy", "split"):
        new, sources = transfer_lora(state, src, dst, mode)
        assert sources == [0, 0, 1, 1]
        assert list(new) == list(fresh) and all(new[k].shape == fresh[k].shape for k in fresh)
        for k, s in enumerate(sources):
            for module in ("q_proj", "v_proj"):
                key = f"base_model.model.model.layers.{{}}.self_attn.{module}.lora_{{}}.weight"
                assert torch.equal(new[key.format(k, "A")], state[key.format(s, "A")])
                scale = len(dst_groups[k]) / 4 if mode == "split" else 1.0
                torch.testing.assert_close(new[key.format(k, "B")], state[key.format(s, "B")] * scale)
    tie = StagePlan(1, 8, [[0, 1, 2], [3, 4], [5, 6, 7]], [0, 4, 5], [[1 / 3] * 3, [0.5, 0.5], [1 / 3] * 3])
    assert transfer_lora(state, src, tie)[1] == [0, 1, 1]
    # EVA-style initialisation loads the mapped tensors into a LoRA created with init_lora_weights=False
    new, _ = transfer_lora(state, src, dst, "copy")
    model = wrap_with_lora(build_submodel(base, dst), cfg, state=new)
    assert all(torch.equal(v, new[k]) for k, v in lora_state(model).items())
    with pytest.raises(ValueError, match="missing"):
        initialize_lora_from_state(model, dict(list(new.items())[:-1]))
    with pytest.raises(ValueError, match="covers layers"):
        transfer_lora(new, src, dst)


# -------------------------------------------------------------------------------------------------- local training
def _examples(tok, n=8):
    from datasets import Dataset

    from hfx.federated.devft.data import encode_examples

    rows = {
        "prompt": [f"question {i}: what is two plus {i} ?\nTopic:" for i in range(n)],
        "completion": [" four" if i % 2 else " the answer is two" for i in range(n)],
    }
    return encode_examples(tok, Dataset.from_dict(rows), max_length=32)


def test_completion_loss_matches_hf_labels_padding_and_greedy(base8):
    from hfx.federated.devft.training import collate, completion_losses, evaluate

    base, tok = base8
    examples = _examples(tok, 4)
    pad = tok.pad_token_id
    singles = []
    for e in examples:  # HF's own loss with prompt labels masked
        ids = torch.tensor([e["input_ids"]])
        labels = ids.clone()
        labels[0, : -e["num_completion"]] = -100
        with torch.no_grad():
            singles.append(base(input_ids=ids, labels=labels).loss.item())
    with torch.no_grad():
        nll, _ = completion_losses(base, collate(examples, pad))  # left-padded batch
    batch = collate(examples, pad)
    per_example = (nll.sum(1) / batch["completion_mask"].sum(1)).tolist()
    assert per_example == pytest.approx(singles, abs=1e-5)
    # exact match == greedy decoding reproduces the completion
    prompt = tok(["what is two plus two ?"])["input_ids"][0]
    greedy = base.generate(torch.tensor([prompt]), max_new_tokens=3, do_sample=False)[0, len(prompt) :].tolist()
    wrong = greedy[:2] + [(greedy[2] + 1) % len(tok)]
    cases = [{"input_ids": prompt + c, "num_completion": 3} for c in (greedy, wrong)]
    assert evaluate(base, cases, pad)["example_correct"] == [True, False]


def test_local_train_updates_only_lora_and_counts_flops(base8):
    from hfx.federated.devft.training import collate, decoder_flops, evaluate, local_train

    base, tok = base8
    cfg = DevFTConfig(stages=[2, 8])
    sched = DevFTScheduler(base, cfg)
    model = wrap_with_lora(sched.build_submodel(0), cfg, seed=0)
    frozen = {k: v.clone() for k, v in model.state_dict().items() if "lora_" not in k}
    examples = _examples(tok, 8)
    before = evaluate(model, examples, tok.pad_token_id)["loss"]
    layer_params = sum(p.numel() for p in base.model.layers[0].parameters())
    stats = local_train(model, examples, steps=6, batch_size=4, learning_rate=2e-2, pad_token_id=tok.pad_token_id,
                        layer_params=layer_params)  # fmt: skip
    assert evaluate(model, examples, tok.pad_token_id)["loss"] < before - 0.1
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in frozen.items())
    # FLOPs: 4 * (params of one layer * K layers) * tokens + 4 * (V * d) * kept head positions, per step
    batch = collate(examples[:4], tok.pad_token_id)
    tokens, kept = batch["input_ids"].numel(), 4 * (batch["completion_mask"].shape[1] + 1)
    assert (
        decoder_flops(base.config, 2, batch, layer_params) == 4 * layer_params * 2 * tokens + 4 * len(tok) * 32 * kept
    )
    assert stats["steps"] == 6 and stats["flops"] > 0 and stats["tokens"] > 0


def test_partitions_are_deterministic_disjoint_and_cover_the_data():
    from datasets import Dataset

    from hfx.federated.devft.data import client_partition, make_partitioner

    ds = Dataset.from_dict({"prompt": [f"p{i}" for i in range(60)], "task": [f"t{i % 3}" for i in range(60)]})
    part = make_partitioner(4, "task", alpha=0.3, seed=0)
    parts = [client_partition(ds, part, i) for i in range(4)]
    again = [client_partition(ds, part, i) for i in range(4)]
    assert [p["prompt"][:] for p in parts] == [p["prompt"][:] for p in again]
    rows = [r for p in parts for r in p["prompt"]]
    assert sorted(rows) == sorted(ds["prompt"]) and len(rows) == len(set(rows))
    with pytest.raises(ValueError, match="`partition_id` must be in"):
        client_partition(ds, part, 4)


def test_load_cl_benchmark(shared_data):
    from hfx.federated.devft import load_cl_benchmark

    ds = load_cl_benchmark(shared_data / "cl_benchmark", "train", ["agnews", "amazon"], limit_per_task=3)
    assert ds["task"][:] == ["agnews"] * 3 + ["amazon"] * 3
    assert ds["prompt"][0].endswith("\nTopic:") and ds["prompt"][3].endswith("\nSentiment:")
    assert ds["completion"][0] == " " + ds["label"][0]
    dev = load_cl_benchmark(shared_data / "cl_benchmark", "train", ["agnews"], limit_per_task=3, skip_per_task=3)
    assert not set(dev["prompt"]) & set(ds["prompt"])
    with pytest.raises(ValueError, match="unknown task"):
        load_cl_benchmark(shared_data / "cl_benchmark", "train", ["imdb"])


# ------------------------------------------------------------------------------------------- Flower simulation
@pytest.fixture(scope="module")
def flower_run():
    """DevFT on a 4-layer tiny Llama, stages 2 -> 4 (one round each), 2 clients, Flower's Ray simulation engine."""
    import psutil
    from datasets import Dataset

    from hfx.federated.devft import run_devft
    from hfx.testing import tiny_llama

    base, tok = tiny_llama(seed=0, num_hidden_layers=4)
    rows = {
        "prompt": [f"the cat {i} sat on the mat\nTopic:" for i in range(24)],
        "completion": [" four" if i % 2 else " two" for i in range(24)],
        "task": ["a" if i < 14 else "b" for i in range(24)],
    }
    ds = Dataset.from_dict(rows)
    cfg = DevFTConfig(stages=[2, 4], rounds_per_stage=1, num_clients=2, local_steps=2, batch_size=2,
                      max_length=32, learning_rate=1e-2)  # fmt: skip
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    result = run_devft(cfg, base, ds, tokenizer=tok, eval_dataset=ds.select(range(6)), progress=False)
    after = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    alive = [p.pid for p in after if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    return result, base, tok, cfg, alive


@pytest.mark.slow
def test_flower_simulation_two_clients_two_rounds(flower_run):
    result, alive = flower_run[0], flower_run[-1]
    assert alive == []  # Ray's processes are gone
    trained = [r for r in result.history if r["num_clients"]]
    assert [(r["round"], r["num_layers"]) for r in trained] == [(1, 2), (2, 4)]
    # communication = LoRA params per layer x layers in stage x clients x 4 bytes (float32), each direction
    for r in trained:
        assert r["bytes_down"] == r["bytes_up"] == QV_LORA_PER_LAYER * r["num_layers"] * 2 * 4
    assert result.total_bytes == 2 * QV_LORA_PER_LAYER * (2 + 4) * 2 * 4
    assert all(r["client_seconds"] > 0 and r["client_flops"] > 0 for r in trained)
    assert [r["round"] for r in result.history if r["eval_loss"] is not None] == [0, 1, 1, 2]
    assert sum(result.partition_sizes) == 24 and len(result.partition_sizes) == 2
    assert result.plans[0]["lora_sources"] is None and len(result.plans[1]["lora_sources"]) == 4
    # the final adapter is the full model's: 4 layers, B trained away from PEFT's zero init
    keys = list(result.lora_state)
    assert len(keys) == 4 * 2 * 2 and any(result.lora_state[k].abs().sum() > 0 for k in keys if "lora_B" in k)


@pytest.mark.slow
def test_flower_result_saves_as_a_peft_adapter_and_publishes(flower_run, tmp_path):
    from peft import PeftModel

    from hfx.federated.devft import DevFTResult
    from hfx.hub import publish

    result, base = flower_run[0], flower_run[1]
    out = result.save_pretrained(tmp_path / "run")
    model = PeftModel.from_pretrained(base, out)
    loaded = lora_state(model)
    assert all(torch.equal(loaded[k], v) for k, v in result.lora_state.items())
    model.unload()
    again = DevFTResult.from_pretrained(out)
    assert again.history == json.loads(json.dumps(result.history)) and again.total_bytes == result.total_bytes
    card = (publish("devft", tmp_path / "pub", source=str(out)) / "README.md").read_text()
    assert "arxiv:2508.00041" in card and "2 -> 4" in card and "Untrained" not in card


def test_publish_demo_and_cli_errors(tmp_path, capsys):
    from peft import PeftModel

    from hfx.cli import main
    from hfx.hub import publish
    from hfx.testing import tiny_llama

    out = publish("devft", tmp_path / "demo")
    card = (out / "README.md").read_text()
    assert "Untrained demo" in card and "| 1 | 2 |" in card
    base, _ = tiny_llama(num_hidden_layers=8)
    PeftModel.from_pretrained(base, out)  # a plain LoRA adapter for the full model
    assert main(["federate", "--out", str(tmp_path / "x"), "--data-dir", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--data-dir" in err[0]
    for bad in (
        "4,0",
        "4,,8",
        "",
        "99999",
    ):  # --stages is parsed by its own type, outside the fuzz's int / float cases
        with pytest.raises(SystemExit) as exit_:
            main(["federate", "--out", str(tmp_path / "y"), "--stages", bad])
        assert exit_.value.code == 2 and "argument --stages" in capsys.readouterr().err
    assert not (tmp_path / "y").exists()


def test_import_is_light():
    code = """
        import sys, hfx
        cfg = hfx.DevFTConfig(stages=[4, 8])
        import hfx.federated.devft as d
        d.default_stages(8)
        print(",".join(m for m in ("torch", "flwr", "ray", "sklearn", "peft", "transformers") if m in sys.modules))
    """
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
