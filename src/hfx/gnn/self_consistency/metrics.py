"""The SC-GNN paper's evaluation: explanation ROC-AUC, Fid- / Fid+ / Fid, sparsity, accuracy, and SHD across seeds
before and after ensembling (definitions of the authors' ``calculate_shd_auc_fid_acc``), plus paired statistics.

Definitions (per test graph ``G``, explanation ``a = h(G)``, the SI-GNN's prediction ``y(G) = f(G * a)``):

* Fid- = mean 1[y(G) != f(G * h(G * a))]: the SI-GNN run on its own explanation subgraph ``G_s = G * a`` (which it
  re-explains) should predict as on ``G`` (lower is better);
* Fid+ = mean 1[y(G) != f(G * h(G * (1 - a)))]: on the complement it should not (higher is better);
* Fid = (Fid+ + (1 - Fid-)) / 2;
* sparsity = mean over graphs of the mean edge attention;
* SHD = mean over pairs of disjoint groups of ``k`` models (different seeds) of the per-graph mean absolute
  difference of their (averaged) edge attention; ``k = 1`` is "before ensembling", ``k = n / 2`` "after".

CAL predicts from a causal and a shortcut graph: on ``G_s`` its shortcut attention is ``(a - h(G_s))_+``, on the
complement ``((1 - a) - h(G * (1 - a)))_+``, as in the authors' code.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch

from .modeling import SelfInterpretableGNN, logits_to_predictions, logits_to_probabilities


def explanation_auc(edge_attention: torch.Tensor, edge_label: torch.Tensor) -> float:
    """ROC-AUC of the edge attention against the ground-truth explanation edges
    (``torch_geometric.explain.metric.groundtruth_metrics(..., "auroc")``).

    Raises:
        ValueError: if the shapes differ or the labels are not both 0 and 1 somewhere.
    """
    from torch_geometric.explain.metric import groundtruth_metrics

    edge_attention, edge_label = edge_attention.reshape(-1).float().cpu(), edge_label.reshape(-1).float().cpu()
    if edge_attention.shape != edge_label.shape:
        raise ValueError(
            f"`edge_attention` {tuple(edge_attention.shape)} and `edge_label` {tuple(edge_label.shape)} differ"
        )
    if torch.unique(edge_label).numel() != 2:
        raise ValueError("`edge_label` must contain both explanation (1) and non-explanation (0) edges")
    return float(groundtruth_metrics(edge_attention, edge_label, "auroc"))


def fidelity_scores(
    predictions: torch.Tensor, minus_predictions: torch.Tensor, plus_predictions: torch.Tensor
) -> dict[str, float]:
    """Fid- / Fid+ / Fid from predicted classes on ``G``, on the explanation's re-explanation and on the complement's
    (all of shape `(n,)`): ``fid_minus = mean 1[y != y_minus]``, ``fid_plus = mean 1[y != y_plus]``,
    ``fid = (fid_plus + 1 - fid_minus) / 2``."""
    fid_minus = float((predictions != minus_predictions).float().mean())
    fid_plus = float((predictions != plus_predictions).float().mean())
    return {"fid_minus": fid_minus, "fid_plus": fid_plus, "fid": (fid_plus + 1.0 - fid_minus) / 2.0}


@torch.no_grad()
def collect_explanations(model: SelfInterpretableGNN, dataset, batch_size: int = 128) -> dict[str, torch.Tensor]:
    """Run ``model`` (evaluation mode) over ``dataset`` and gather what the metrics need.

    Returns:
        `dict` of CPU tensors: ``edge_attention`` `(E,)`, ``edge_label`` `(E,)` (-1 = unknown), ``edge_graph`` `(E,)`
        (graph id of each edge), ``labels`` / ``predictions`` / ``minus_predictions`` / ``plus_predictions`` and
        ``probabilities`` for every labelled graph (graph task) or node (node task, ``y != -100``).
    """
    from .trainer import GraphCollator

    collate = GraphCollator()
    was_training = model.training
    model.eval()
    keys = ("edge_attention", "edge_label", "edge_graph", "labels", "logits", "minus_logits", "plus_logits")
    parts = {k: [] for k in keys}
    graph_offset = 0
    try:
        for start in range(0, len(dataset), batch_size):
            inputs = collate([dataset[i] for i in range(start, min(start + batch_size, len(dataset)))])
            x, edge_index, batch = (inputs[k].to(model.device) for k in ("x", "edge_index", "batch"))
            out = model(x, edge_index, batch)
            att = out.edge_attention
            minus_att = model.explain_embeddings(model.encode(x, edge_index, att), edge_index, batch)
            plus_att = model.explain_embeddings(model.encode(x, edge_index, 1 - att), edge_index, batch)
            if model.config.si_gnn == "cal":
                minus_logits = model.predict_from_attention(
                    x, edge_index, batch, minus_att, (att - minus_att).clamp(min=0)
                )
                plus_logits = model.predict_from_attention(
                    x, edge_index, batch, plus_att, (1 - att - plus_att).clamp(min=0)
                )
            else:
                minus_logits = model.predict_from_attention(x, edge_index, batch, minus_att)
                plus_logits = model.predict_from_attention(x, edge_index, batch, plus_att)
            labels = inputs["labels"].to(model.device)
            keep = labels != -100
            parts["edge_attention"].append(att)
            parts["edge_label"].append(inputs["edge_label"])
            parts["edge_graph"].append(batch[edge_index[0]] + graph_offset)
            parts["labels"].append(labels[keep])
            parts["logits"].append(out.logits[keep])
            parts["minus_logits"].append(minus_logits[keep])
            parts["plus_logits"].append(plus_logits[keep])
            graph_offset += int(batch.max()) + 1 if batch.numel() else 0
    finally:
        model.train(was_training)
    result = {k: torch.cat(v).cpu() for k, v in parts.items()}
    for key in ("edge_attention", "edge_label", "logits", "minus_logits", "plus_logits"):
        result[key] = result[key].float()
    result["labels"] = result["labels"].long()
    for key in ("", "minus_", "plus_"):
        result[f"{key}predictions"] = logits_to_predictions(result[f"{key}logits"])
    result["probabilities"] = logits_to_probabilities(result["logits"])
    return result


def _per_graph_mean(values: torch.Tensor, edge_graph: torch.Tensor) -> torch.Tensor:
    from torch_geometric.utils import scatter

    return scatter(values, edge_graph, dim=-1, reduce="mean")


def explanation_metrics(collected: dict[str, torch.Tensor]) -> dict[str, float]:
    """Accuracy, explanation AUC (when ``edge_label`` is known), Fid- / Fid+ / Fid and sparsity from
    :func:`collect_explanations`'s output."""
    metrics = {"accuracy": float((collected["predictions"] == collected["labels"]).float().mean())}
    known = collected["edge_label"] >= 0
    if bool(known.any()) and torch.unique(collected["edge_label"][known]).numel() == 2:
        metrics["explanation_auc"] = explanation_auc(
            collected["edge_attention"][known], collected["edge_label"][known]
        )
    metrics.update(
        fidelity_scores(collected["predictions"], collected["minus_predictions"], collected["plus_predictions"])
    )
    metrics["sparsity"] = float(_per_graph_mean(collected["edge_attention"], collected["edge_graph"]).mean())
    return metrics


def evaluate_si_gnn(model: SelfInterpretableGNN, dataset, batch_size: int = 128) -> dict[str, float]:
    """The paper's single-model metrics on ``dataset``: ``accuracy``, ``explanation_auc``, ``fid_minus``,
    ``fid_plus``, ``fid``, ``sparsity`` (see the module docstring)."""
    return explanation_metrics(collect_explanations(model, dataset, batch_size))


def _disjoint_group_pairs(num_models: int, group_size: int):
    groups = list(itertools.combinations(range(num_models), group_size))
    return [(a, b) for a, b in itertools.combinations(groups, 2) if not set(a) & set(b)]


def structural_hamming_distance(
    attentions: torch.Tensor, edge_graph: torch.Tensor, ensemble_size: int = 1
) -> tuple[float, float]:
    r"""SHD across seeds: for every pair of disjoint groups of ``ensemble_size`` models, the mean over graphs of the
    per-graph mean ``|mean_{i in S} a_i - mean_{j in T} a_j|``; returns its mean and standard deviation over pairs.

    Args:
        attentions (`torch.Tensor` of shape `(num_models, E)`): each model's edge attention on the same graphs.
        edge_graph (`torch.Tensor` of shape `(E,)`): graph id of each edge.
        ensemble_size (`int`, *optional*, defaults to 1): ``k``; 1 compares single models.

    Raises:
        ValueError: if fewer than ``2 * ensemble_size`` models are given.
    """
    num_models = attentions.shape[0]
    if ensemble_size < 1 or num_models < 2 * ensemble_size:
        raise ValueError(
            f"`ensemble_size`={ensemble_size} needs at least {2 * ensemble_size} models, got {num_models}"
        )
    scores = []
    for group_a, group_b in _disjoint_group_pairs(num_models, ensemble_size):
        diff = (attentions[list(group_a)].mean(0) - attentions[list(group_b)].mean(0)).abs()
        scores.append(float(_per_graph_mean(diff, edge_graph).mean()))
    return float(np.mean(scores)), float(np.std(scores))


def ensemble_metrics(runs: list[dict[str, torch.Tensor]], ensemble_size: int | None = None) -> dict[str, float]:
    """Across-seed metrics of ``n`` runs of one method on the same test set (each a :func:`collect_explanations`
    output): SHD of single models and of ``ensemble_size``-model ensembles (default ``n // 2``), and the AUC and
    accuracy of the ensembles (mean attention / mean probability over each group of ``ensemble_size``)."""
    n = len(runs)
    k = ensemble_size or n // 2
    attentions = torch.stack([r["edge_attention"] for r in runs])
    edge_graph, edge_label, labels = runs[0]["edge_graph"], runs[0]["edge_label"], runs[0]["labels"]
    out = {"num_models": n, "ensemble_size": k}
    out["shd"], out["shd_std"] = structural_hamming_distance(attentions, edge_graph, 1)
    out["shd_ensemble"], out["shd_ensemble_std"] = structural_hamming_distance(attentions, edge_graph, k)
    probabilities = torch.stack([r["probabilities"] for r in runs])
    aucs, accs = [], []
    known = edge_label >= 0
    for group in itertools.combinations(range(n), k):
        idx = list(group)
        if bool(known.any()):
            aucs.append(explanation_auc(attentions[idx].mean(0)[known], edge_label[known]))
        p = probabilities[idx].mean(0)
        pred = (p > 0.5).long() if p.dim() == 1 else p.argmax(-1)
        accs.append(float((pred == labels).float().mean()))
    if aucs:
        out["auc_ensemble"], out["auc_ensemble_std"] = float(np.mean(aucs)), float(np.std(aucs))
    out["accuracy_ensemble"], out["accuracy_ensemble_std"] = float(np.mean(accs)), float(np.std(accs))
    return out


def mean_interval(values, confidence: float = 0.95) -> dict[str, float]:
    """Mean and Student-t ``confidence`` interval of independent values (e.g. one per seed)."""
    from scipy import stats

    values = np.asarray(values, dtype=float)
    mean = float(values.mean())
    if len(values) < 2:
        return {"mean": mean, "low": float("nan"), "high": float("nan"), "n": len(values)}
    half = float(stats.t.ppf(0.5 + confidence / 2, len(values) - 1) * values.std(ddof=1) / math.sqrt(len(values)))
    return {"mean": mean, "low": mean - half, "high": mean + half, "n": len(values)}


def paired_comparison(base, treated, confidence: float = 0.95) -> dict[str, float]:
    """Paired comparison of one metric over seeds (``treated[i]`` and ``base[i]`` share seed ``i``): the mean
    difference ``treated - base`` with its Student-t ``confidence`` interval, and the exact two-sided sign-flip
    permutation p-value of the mean difference (with 5 seeds the smallest possible p is 1/16 = 0.0625).

    Raises:
        ValueError: if the lists differ in length or have fewer than 2 pairs.
    """
    base, treated = np.asarray(base, dtype=float), np.asarray(treated, dtype=float)
    if base.shape != treated.shape or base.size < 2:
        raise ValueError(f"`base` and `treated` need the same length >= 2, got {base.size} and {treated.size}")
    diff = treated - base
    interval = mean_interval(diff, confidence)
    signs = np.array(list(itertools.product([1.0, -1.0], repeat=diff.size)))
    null = np.abs((signs * diff).mean(axis=1))
    p_value = float((null >= abs(diff.mean()) - 1e-12).mean())
    return {
        "base_mean": float(base.mean()),
        "treated_mean": float(treated.mean()),
        "diff_mean": interval["mean"],
        "diff_low": interval["low"],
        "diff_high": interval["high"],
        "p_value": p_value,
        "n": int(diff.size),
    }
