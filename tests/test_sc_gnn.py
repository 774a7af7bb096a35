"""SC-GNN: self-consistency loss, SI-GNNs (GSAT / ATT / SIZE / CAL), the Trainer recipe, data, metrics, hub, CLI."""

import math
import subprocess
import sys

import numpy as np
import pytest
import torch


pytest.importorskip("torch_geometric")

from torch_geometric.data import Batch, Data

from hfx.gnn.self_consistency import (
    GraphCollator,
    SelfConsistencyLoss,
    SelfConsistencyTrainer,
    SelfConsistencyTrainingArguments,
    SelfInterpretableGNN,
    SelfInterpretableGNNConfig,
    WeightedGINConv,
    ba_2motifs,
    ba_shapes,
    bernoulli_kl,
    collect_explanations,
    ensemble_metrics,
    explanation_auc,
    explanation_metrics,
    fidelity_scores,
    paired_comparison,
    reverse_edge_permutation,
    si_gnn_loss,
    structural_hamming_distance,
    train_si_gnn,
)


def _tiny_config(**kw):
    return SelfInterpretableGNNConfig(**{"hidden_size": 16, "num_node_features": 10, **kw})


@pytest.fixture(scope="module")
def graphs():
    return ba_2motifs(24, seed=1)


def _inputs(graphs):
    batch = GraphCollator()(graphs)
    labels = batch.pop("labels")
    batch.pop("edge_label")
    return batch, labels


def _path_graph():
    # 0 - 1 - 2 - 3, both directions
    edge_index = torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]])
    return edge_index


# ------------------------------------------------------------------------------------------------ the SC loss
def test_sc_loss_matches_a_hand_computation_on_a_4_node_graph():
    edge_index = _path_graph()
    x = torch.tensor([[1.0], [2.0], [3.0], [4.0]])
    conv = WeightedGINConv(torch.nn.Identity())  # emb_i = x_i + sum_{j -> i} w_ji x_j  (eps = 0)
    alpha, beta, gamma = 0.3, -0.2, -1.0
    perm = reverse_edge_permutation(edge_index)

    def explain(emb):  # asymmetric edge logits, symmetrised like the SI-GNN's edge attention
        att = torch.sigmoid(alpha * emb[edge_index[0], 0] + beta * emb[edge_index[1], 0] + gamma)
        return (att + att[perm]) / 2

    weights = torch.tensor([0.9, 0.7, 0.2, 0.4, 0.5, 0.1])
    loss = SelfConsistencyLoss()(
        explain=explain, embeddings=conv(x, edge_index), encode=lambda w: conv(x, edge_index, w), attention=weights
    )

    # by hand
    xs = [1.0, 2.0, 3.0, 4.0]
    edges = [(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2)]
    w = [0.9, 0.7, 0.2, 0.4, 0.5, 0.1]

    def emb(weight):
        return [xs[i] + sum(weight[e] * xs[s] for e, (s, d) in enumerate(edges) if d == i) for i in range(4)]

    def sym_att(h):
        raw = {(s, d): 1 / (1 + math.exp(-(alpha * h[s] + beta * h[d] + gamma))) for s, d in edges}
        return [(raw[(s, d)] + raw[(d, s)]) / 2 for s, d in edges]

    old, new = sym_att(emb([1.0] * 6)), sym_att(emb(w))
    expected = sum(abs(a - b) for a, b in zip(old, new)) / 6
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert expected > 1e-3  # the case is not trivially zero


def test_sc_loss_is_zero_for_a_constant_explainer(graphs):
    model = SelfInterpretableGNN(_tiny_config(use_self_consistency=True, explainer_dropout=0.0))
    model.train()
    inputs, labels = _inputs(graphs)
    _, parts = si_gnn_loss(model, inputs, model(**inputs), labels)
    assert parts["sc"] > 1e-4  # a random explainer is not self-consistent
    with torch.no_grad():
        model.explainer.layers[-1].weight.zero_()  # logits = bias: a constant explanation
    _, parts = si_gnn_loss(model, inputs, model(**inputs), labels)
    assert parts["sc"] == pytest.approx(0.0, abs=1e-7)


def test_sc_loss_is_zero_when_the_encoder_ignores_edge_weights(graphs):
    model = SelfInterpretableGNN(_tiny_config(use_self_consistency=True)).eval()
    inputs, _ = _inputs(graphs)
    x, edge_index, batch = inputs["x"], inputs["edge_index"], inputs["batch"]
    emb = model.encode(x, edge_index)
    att = torch.rand(edge_index.shape[1])
    sc = SelfConsistencyLoss()

    def explain(e):
        return model.explain_embeddings(e, edge_index, batch)

    assert sc(explain=explain, embeddings=emb, encode=lambda w: model.encode(x, edge_index), attention=att) == 0
    assert sc(explain=explain, embeddings=emb, encode=lambda w: model.encode(x, edge_index, w), attention=att) > 1e-4


def test_sc_loss_argument_errors():
    sc = SelfConsistencyLoss()
    emb = torch.zeros(3, 2)
    with pytest.raises(ValueError, match="new_embeddings"):
        sc(explain=lambda e: e.sum(-1), embeddings=emb)
    with pytest.raises(ValueError, match="not both"):
        sc(explain=lambda e: e.sum(-1), embeddings=emb, new_embeddings=emb, encode=lambda w: emb, attention=emb[:, 0])


@pytest.mark.parametrize("si_gnn", ["gsat", "cal"])
def test_sc_gradients_reach_only_the_explainer(graphs, si_gnn):
    model = SelfInterpretableGNN(_tiny_config(si_gnn=si_gnn, use_self_consistency=True)).train()
    inputs, _ = _inputs(graphs)
    out = model(**inputs)
    x, edge_index, batch = inputs["x"], inputs["edge_index"], inputs["batch"]
    sc = SelfConsistencyLoss()(
        explain=lambda e: model.explain_embeddings(e, edge_index, batch),
        embeddings=out.node_embeddings,
        encode=lambda w: model.encode(x, edge_index, w),
        attention=out.edge_attention,
    )
    sc.backward()
    for name, param in model.named_parameters():
        if name.startswith("explainer."):
            continue
        assert param.grad is None or not param.grad.any(), name
    explainer_grads = [p.grad for p in model.explainer.parameters()]
    assert all(g is not None for g in explainer_grads) and any(g.abs().sum() > 0 for g in explainer_grads)


# ------------------------------------------------------------------------------------------------ the model
def test_eval_attention_is_deterministic_and_training_attention_is_sampled(graphs):
    model = SelfInterpretableGNN(_tiny_config())
    inputs, _ = _inputs(graphs)
    model.eval()
    a, b = model(**inputs), model(**inputs)
    assert torch.equal(a.edge_attention, b.edge_attention) and torch.equal(a.logits, b.logits)
    perm = reverse_edge_permutation(inputs["edge_index"])
    assert torch.allclose(a.edge_attention, (a.attention_logits.sigmoid() + a.attention_logits.sigmoid()[perm]) / 2)
    model = SelfInterpretableGNN(_tiny_config(dropout=0.0, explainer_dropout=0.0)).train()
    a, b = model(**inputs), model(**inputs)
    assert torch.equal(a.attention_logits, b.attention_logits)  # no dropout: only the concrete noise differs
    assert not torch.equal(a.edge_attention, b.edge_attention)


def test_reverse_edge_permutation_and_node_level_attention():
    edge_index = _path_graph()
    perm = reverse_edge_permutation(edge_index)
    assert torch.equal(edge_index[:, perm], edge_index.flip(0))
    assert reverse_edge_permutation(torch.tensor([[0, 1], [1, 2]])) is None  # directed: no reverse edges
    model = SelfInterpretableGNN(_tiny_config(attention_level="node"))
    node_att = torch.tensor([0.5, 0.2, 1.0, 0.1])
    assert torch.allclose(
        model.to_edge_attention(node_att, edge_index, 4), torch.tensor([0.1, 0.1, 0.2, 0.2, 0.1, 0.1])
    )


def test_save_load_gives_equal_explanations(tmp_path, graphs):
    from transformers import AutoModel

    model = SelfInterpretableGNN(_tiny_config(si_gnn="cal", use_self_consistency=True)).eval()
    batch = Batch.from_data_list(graphs)
    model.save_pretrained(tmp_path)
    for loaded in (SelfInterpretableGNN.from_pretrained(tmp_path), AutoModel.from_pretrained(tmp_path)):
        assert isinstance(loaded, SelfInterpretableGNN) and loaded.config.use_self_consistency
        assert torch.equal(loaded.explain(batch), model.explain(batch))
        assert torch.equal(loaded.predict(batch), model.predict(batch))


def test_config_validation():
    with pytest.raises(ValueError, match="`si_gnn` must be one of"):
        SelfInterpretableGNNConfig(si_gnn="pgexplainer")
    with pytest.raises(ValueError, match="ATT has no regulariser"):
        SelfInterpretableGNNConfig(si_gnn="att", reg_loss_weight=0.5)
    with pytest.raises(ValueError, match="`sc_loss_weight`"):
        SelfInterpretableGNNConfig(sc_loss_weight=-1)
    with pytest.raises(ValueError, match="`sc_encoder_attention`"):
        SelfInterpretableGNNConfig(sc_encoder_attention="hard")
    assert SelfInterpretableGNNConfig(si_gnn="gsat").reg_loss_weight == 0.5
    model = SelfInterpretableGNN(_tiny_config())
    with pytest.raises(ValueError, match="`x` must have shape"):
        model(torch.zeros(3, 4), _path_graph())


# ------------------------------------------------------------------------------------------------ the loss
def test_gsat_sc_training_loss_is_ce_plus_half_kl_plus_sc_on_a_4_node_graph():
    graph = Data(x=torch.full((4, 10), 0.1), edge_index=_path_graph(), y=torch.tensor([1]))
    config = _tiny_config(si_gnn="gsat", use_self_consistency=True)
    model = SelfInterpretableGNN(config).eval()  # deterministic attention: everything below is reproducible
    inputs, labels = _inputs([graph])
    out = model(**inputs)
    loss, parts = si_gnn_loss(model, inputs, out, labels, epoch=50)

    p = torch.sigmoid(out.logits[0, 0]).item()
    ce = -math.log(p)  # label 1
    r = 0.5  # epoch 50 >= the decay: the final r
    att = out.attention.tolist()
    kl = sum(a * math.log(a / r + 1e-6) + (1 - a) * math.log((1 - a) / (1 - r + 1e-6) + 1e-6) for a in att) / len(att)
    x, edge_index, batch = inputs["x"], inputs["edge_index"], inputs["batch"]
    old = model.explain_embeddings(model.encode(x, edge_index), edge_index, batch)
    new = model.explain_embeddings(model.encode(x, edge_index, out.edge_attention), edge_index, batch)
    sc = (old - new).abs().mean().item()
    assert parts["ce"] == pytest.approx(ce, rel=1e-5)
    assert parts["reg"] == pytest.approx(kl, rel=1e-5)
    assert parts["sc"] == pytest.approx(sc, rel=1e-5) and sc > 0
    assert loss.item() == pytest.approx(ce + 0.5 * kl + 1.0 * sc, rel=1e-5)
    # GSAT's r schedule: 0.9 at epoch 0, then -0.1 every 10 epochs down to 0.5; fixed at 0.5 when fine-tuning
    assert bernoulli_kl(out.attention, 0.9).item() == pytest.approx(
        si_gnn_loss(model, inputs, out, labels, epoch=0)[1]["reg"], rel=1e-6
    )
    assert si_gnn_loss(model, inputs, out, labels, epoch=0, finetune=True)[1]["reg"] == pytest.approx(kl, rel=1e-5)


@pytest.mark.parametrize("si_gnn", ["att", "size", "cal"])
def test_other_si_gnn_losses(graphs, si_gnn):
    model = SelfInterpretableGNN(_tiny_config(si_gnn=si_gnn)).eval()
    inputs, labels = _inputs(graphs)
    out = model(**inputs)
    loss, parts = si_gnn_loss(model, inputs, out, labels, epoch=1)
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    if si_gnn == "att":
        assert set(parts) == {"ce"} and loss.item() == pytest.approx(parts["ce"], rel=1e-6)
    elif si_gnn == "size":  # sparsity weight warms up: 0.5 * (1 + 1) / 10 at epoch 1
        assert parts["reg"] == pytest.approx(out.attention.mean().item(), rel=1e-6)
        assert loss.item() == pytest.approx(parts["ce"] + 0.1 * parts["reg"], rel=1e-5)
    else:
        s = out.shortcut_logits.sigmoid().view(-1)
        kl = (s * torch.log(s / 0.5 + 1e-6) + (1 - s) * torch.log((1 - s) / (1 - 0.5 + 1e-6) + 1e-6)).mean()
        causal = bce(out.causal_logits.view(-1), labels.float())
        assert parts["shortcut"] == pytest.approx(kl.item(), rel=1e-5)
        assert parts["causal"] == pytest.approx(causal.item(), rel=1e-5)
        expected = 0.5 * parts["ce"] + 1.0 * parts["causal"] + 0.5 * parts["shortcut"] + 0.1 * parts["reg"]
        assert loss.item() == pytest.approx(expected, rel=1e-5)


# ------------------------------------------------------------------------------------------------ Trainer
def test_trainer_finetune_stage_freezes_message_passing_and_trains_the_explainer(tmp_path, graphs):
    torch.manual_seed(0)
    model = SelfInterpretableGNN(_tiny_config(use_self_consistency=True))
    convs = {k: v.clone() for k, v in model.encoder.convs.state_dict().items()}
    explainer = {k: v.clone() for k, v in model.explainer.state_dict().items()}
    args = SelfConsistencyTrainingArguments(
        output_dir=str(tmp_path),
        num_train_epochs=2,
        per_device_train_batch_size=8,
        finetune_from_base=True,
        use_cpu=True,
        disable_tqdm=True,
        logging_strategy="no",
    )
    trainer = SelfConsistencyTrainer(model=model, args=args, train_dataset=graphs[:16], eval_dataset=graphs[16:])
    trainer.train()
    for key, value in model.encoder.convs.state_dict().items():  # weights and batch-norm statistics unchanged
        assert torch.equal(value, convs[key]), key
    assert any(not torch.equal(v, explainer[k]) for k, v in model.explainer.state_dict().items())
    metrics = trainer.evaluate()
    assert {"eval_accuracy", "eval_explanation_auc", "eval_sc_loss", "eval_ce_loss"} <= set(metrics)
    assert trainer.best_validation.best_epoch in (0, 1)


def test_train_si_gnn_is_reproducible_from_the_seed(tmp_path, graphs):
    # the benchmark's numbers must reproduce from its command: same seed, same weights; another seed, others
    def train(seed):
        args = SelfConsistencyTrainingArguments(
            output_dir=str(tmp_path / str(seed)),
            num_train_epochs=1,
            per_device_train_batch_size=8,
            best_model_min_epoch=0,
            use_cpu=True,
            disable_tqdm=True,
            logging_strategy="no",
            seed=seed,
        )
        config = _tiny_config(use_self_consistency=True, sc_training="joint")
        return train_si_gnn(config, graphs[:16], graphs[16:], args).model.state_dict()

    first, again, other = train(3), train(3), train(4)
    assert all(torch.equal(first[k], again[k]) for k in first)
    assert any(not torch.equal(first[k], other[k]) for k in first)


def test_trainer_evaluation_of_a_node_task_matches_the_direct_metrics(tmp_path):
    splits = ba_shapes(seed=0, num_base_nodes=40, num_base_edges=2, num_motifs=6)
    model = SelfInterpretableGNN(_tiny_config(task="node", num_classes=4)).eval()
    args = SelfConsistencyTrainingArguments(output_dir=str(tmp_path), use_cpu=True, disable_tqdm=True)
    metrics = SelfConsistencyTrainer(model=model, args=args, eval_dataset=splits["test"]).evaluate()
    direct = explanation_metrics(collect_explanations(model, splits["test"]))
    assert metrics["eval_accuracy"] == pytest.approx(direct["accuracy"])  # over the 7 test nodes, not 1 row
    assert metrics["eval_explanation_auc"] == pytest.approx(direct["explanation_auc"], rel=1e-5)


def test_best_validation_callback_restores_the_best_epoch_with_loss_tie_break():
    from types import SimpleNamespace

    from hfx.gnn.self_consistency import BestValidationCallback

    model = torch.nn.Linear(1, 1, bias=False)
    callback = BestValidationCallback(min_epoch=0)
    history = [(1, 0.9, 0.5), (2, 1.0, 0.4), (3, 1.0, 0.3), (4, 1.0, 0.35), (5, 0.8, 0.1)]  # epoch, acc, loss
    for epoch, acc, loss in history:
        with torch.no_grad():
            model.weight.fill_(epoch)
        callback.on_evaluate(
            None,
            SimpleNamespace(epoch=float(epoch)),
            None,
            model=model,
            metrics={"eval_accuracy": acc, "eval_loss": loss},
        )
    callback.on_train_end(None, None, None, model=model)
    assert model.weight.item() == 3.0 and callback.best_epoch == 2  # epoch 1 (index 0) is excluded by min_epoch


def test_collator_batches_graphs_and_rejects_incomplete_ones(graphs):
    batch = GraphCollator()(graphs[:3])
    assert batch["labels"].tolist() == [int(g.y) for g in graphs[:3]]
    assert batch["edge_index"].max() == sum(g.num_nodes for g in graphs[:3]) - 1
    no_truth = Data(x=torch.zeros(2, 10), edge_index=torch.tensor([[0, 1], [1, 0]]), y=torch.tensor([0]))
    assert GraphCollator()([no_truth])["edge_label"].tolist() == [-1.0, -1.0]
    with pytest.raises(ValueError, match="has no `y`"):
        GraphCollator()([Data(x=torch.zeros(2, 10), edge_index=torch.tensor([[0], [1]]))])


# ------------------------------------------------------------------------------------------------ data
def test_ba_2motifs_is_seeded_and_labels_the_motif_edges():
    a, b, c = ba_2motifs(8, seed=3), ba_2motifs(8, seed=3), ba_2motifs(8, seed=4)
    assert all(torch.equal(x.edge_index, y.edge_index) for x, y in zip(a, b))
    assert not all(torch.equal(x.edge_index, y.edge_index) for x, y in zip(a, c))
    assert sorted(int(g.y) for g in a) == [0] * 4 + [1] * 4
    for g in a:  # house: 6 undirected edges, 5-cycle: 5; both directions are present
        assert int(g.edge_label.sum()) == (12 if int(g.y) == 0 else 10)
        assert g.num_nodes == 25 and reverse_edge_permutation(g.edge_index) is not None
    state = torch.random.get_rng_state()
    np.random.seed(1)
    first = ba_2motifs(4, seed=3)
    np.random.seed(2)  # PyG's BA generator draws from numpy: the seed must fix it too
    assert all(torch.equal(x.edge_index, y.edge_index) for x, y in zip(first, ba_2motifs(4, seed=3)))
    assert torch.equal(state, torch.random.get_rng_state())  # the global torch RNG is untouched


def test_ba_shapes_splits_are_disjoint_and_cover_the_graph():
    splits = ba_shapes(seed=0, num_base_nodes=30, num_base_edges=2, num_motifs=4)
    masks = [splits[s][0].y != -100 for s in ("train", "validation", "test")]
    assert sum(int(m.sum()) for m in masks) == 30 + 4 * 5
    assert not (masks[0] & masks[1]).any() and not (masks[1] & masks[2]).any()
    assert int(splits["test"][0].edge_label.sum()) == 4 * 12


# ------------------------------------------------------------------------------------------------ metrics
def test_fidelity_shd_auc_and_paired_statistics_by_hand():
    y = torch.tensor([1, 0, 1, 1])
    scores = fidelity_scores(y, torch.tensor([1, 0, 0, 1]), torch.tensor([0, 1, 1, 0]))
    assert scores == {"fid_minus": 0.25, "fid_plus": 0.75, "fid": (0.75 + 1 - 0.25) / 2}
    assert explanation_auc(torch.tensor([0.9, 0.2, 0.6, 0.4]), torch.tensor([1, 0, 0, 1])) == pytest.approx(0.75)
    # 3 models, 2 graphs (edges 0-1 in graph 0, edge 2 in graph 1)
    att = torch.tensor([[1.0, 0.0, 0.5], [0.0, 0.0, 0.5], [1.0, 1.0, 0.0]])
    graph = torch.tensor([0, 0, 1])
    # pairs (0,1): g0 0.5, g1 0 -> 0.25; (0,2): g0 0.5, g1 0.5 -> 0.5; (1,2): g0 1.0, g1 0.5 -> 0.75
    mean, std = structural_hamming_distance(att, graph)
    assert mean == pytest.approx(0.5) and std == pytest.approx(math.sqrt(((0.25) ** 2 + 0 + 0.25**2) / 3))
    with pytest.raises(ValueError, match="needs at least 4 models"):
        structural_hamming_distance(att, graph, ensemble_size=2)
    stats = paired_comparison([0.5, 0.6, 0.7], [0.6, 0.8, 0.7])
    assert stats["diff_mean"] == pytest.approx(0.1)
    # diffs (0.1, 0.2, 0): of the 8 sign flips, (+,+,.) and (-,-,.) (x2 for the zero) reach |mean| >= 0.1
    assert stats["p_value"] == pytest.approx(4 / 8)
    assert stats["diff_low"] < 0.1 < stats["diff_high"]


def test_collected_metrics_constant_explainer_is_perfectly_fid_minus_faithful(graphs):
    model = SelfInterpretableGNN(_tiny_config())
    with torch.no_grad():
        model.explainer.layers[-1].weight.zero_()
    collected = collect_explanations(model, graphs, batch_size=10)
    metrics = explanation_metrics(collected)
    assert metrics["fid_minus"] == 0.0  # h(G_s) = h(G): the SI-GNN on its explanation predicts the same
    assert metrics["explanation_auc"] == pytest.approx(0.5)  # constant attention ranks nothing
    assert metrics["sparsity"] == pytest.approx(torch.sigmoid(model.explainer.layers[-1].bias).item(), rel=1e-5)
    assert collected["edge_attention"].shape == collected["edge_graph"].shape
    assert collected["edge_graph"].max() == len(graphs) - 1
    other = collect_explanations(SelfInterpretableGNN(_tiny_config()), graphs)
    ens = ensemble_metrics([collected, other, collected, other], ensemble_size=2)
    single = structural_hamming_distance(
        torch.stack([collected["edge_attention"], other["edge_attention"]]), collected["edge_graph"]
    )[0]
    assert single > 0
    # 2-model ensembles: {0,1}|{2,3} and {0,3}|{1,2} are both (c + d) / 2 (distance 0); {0,2}|{1,3} is c vs d
    assert ens["shd_ensemble"] == pytest.approx(single / 3, rel=1e-5)
    assert ens["auc_ensemble"] > 0 and 0 <= ens["accuracy_ensemble"] <= 1


def test_collected_fidelity_predictions_re_explain_the_explanation(graphs):
    model = SelfInterpretableGNN(_tiny_config()).eval()
    collected = collect_explanations(model, graphs, batch_size=7)
    inputs, labels = _inputs(graphs)
    x, edge_index, batch = inputs["x"], inputs["edge_index"], inputs["batch"]
    with torch.no_grad():
        att = model(**inputs).edge_attention
        minus = model.explain_embeddings(model.encode(x, edge_index, att), edge_index, batch)  # h(G_s)
        plus = model.explain_embeddings(
            model.encode(x, edge_index, 1 - att), edge_index, batch
        )  # h(complement of G_s)
        minus_logits = model.predict_from_attention(x, edge_index, batch, minus)
        plus_logits = model.predict_from_attention(x, edge_index, batch, plus)
    assert torch.equal(collected["labels"], labels)
    # logits, not only classes: a random model's classes can coincide for G_s and its complement
    assert torch.allclose(collected["minus_logits"], minus_logits, atol=1e-5)
    assert torch.allclose(collected["plus_logits"], plus_logits, atol=1e-5)
    assert not torch.allclose(minus_logits, plus_logits, atol=1e-5)
    assert torch.equal(collected["minus_predictions"], (minus_logits.view(-1) > 0).long())
    assert torch.equal(collected["plus_predictions"], (plus_logits.view(-1) > 0).long())
    assert torch.allclose(collected["edge_attention"], att)


def test_pyg_explainer_bridge(graphs):
    from torch_geometric.explain.metric import fidelity

    from hfx.gnn.self_consistency import pyg_explainer

    model = SelfInterpretableGNN(_tiny_config())
    batch = Batch.from_data_list(graphs)
    explainer = pyg_explainer(model)
    explanation = explainer(batch.x, batch.edge_index, batch=batch.batch)
    assert torch.equal(explanation.edge_mask, model.explain(batch))
    fid_plus, fid_minus = fidelity(explainer, explanation)
    assert 0 <= fid_plus <= 1 and 0 <= fid_minus <= 1


# ------------------------------------------------------------------------------------------------ hub and CLI
def test_publish_writes_a_loadable_model_and_card(tmp_path):
    from hfx.hub import publish

    out = publish("sc-gnn", tmp_path / "card")
    card = (out / "README.md").read_text()
    assert "sc-gnn" in card and "Untrained demo" in card and "GSAT + SC" in card
    loaded = SelfInterpretableGNN.from_pretrained(out)
    assert loaded.config.use_self_consistency and loaded.config.si_gnn == "gsat"
    again = publish("sc-gnn", tmp_path / "again", source=str(out))
    assert "Untrained demo" not in (again / "README.md").read_text()


def test_cli_bad_input_is_one_line_error(tmp_path):
    for argv, flag in (
        (["--method", "pgexplainer"], "--method"),
        (["--epochs", "0"], "--epochs"),
        (["--seed", "-1"], "--seed"),
        ([], "--out"),  # required: nothing is trained without a place for the result
    ):
        if flag != "--out":
            argv = [*argv, "--out", str(tmp_path / "m")]
        result = subprocess.run([sys.executable, "-m", "hfx.cli", "sc-gnn", *argv], capture_output=True, text=True)
        assert result.returncode == 2, argv
        last = result.stderr.strip().splitlines()[-1]
        assert last.startswith("hfx sc-gnn: error:") and flag in last, last
        assert not (tmp_path / "m").exists()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("keep")
    result = subprocess.run(
        [sys.executable, "-m", "hfx.cli", "sc-gnn", "--out", str(tmp_path / "full")], capture_output=True, text=True
    )
    assert result.returncode == 2 and "--overwrite" in result.stderr
    assert (tmp_path / "full" / "x").read_text() == "keep"


@pytest.mark.slow
def test_cli_trains_base_and_sc_and_saves(tmp_path):
    from hfx.cli import main

    assert (
        main(
            [
                "sc-gnn",
                "--num-graphs",
                "40",
                "--epochs",
                "2",
                "--sc-epochs",
                "1",
                "--batch-size",
                "16",
                "--out",
                str(tmp_path / "m"),
                "--plot",
                str(tmp_path / "p.png"),
            ]
        )
        == 0
    )
    assert (tmp_path / "m" / "config.json").is_file() and (tmp_path / "m" / "base" / "model.safetensors").is_file()
    assert (tmp_path / "p.png").stat().st_size > 1000
    assert SelfInterpretableGNN.from_pretrained(tmp_path / "m").config.use_self_consistency
