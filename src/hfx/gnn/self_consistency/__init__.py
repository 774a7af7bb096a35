"""SC-GNN: self-consistency training for self-interpretable GNNs (Tai, Zhong, Trajcevski, Zhou; ICLR 2026,
OpenReview ``hxGdAUn3sB``; code github.com/ICDM-UESTC/SelfConsistencyXGNN) on PyTorch Geometric.

* :class:`SelfInterpretableGNNConfig` / :class:`SelfInterpretableGNN` -- GSAT, ATT, SIZE and CAL over a GIN backbone
  as a ``transformers.PreTrainedModel`` (``save_pretrained`` / ``from_pretrained`` / ``AutoModel``), SC as a switch.
* :class:`SelfConsistencyLoss` -- the model-agnostic ``mean |h(emb(G)) - h(emb(G_s))|`` (both embeddings detached).
* :class:`SelfConsistencyTrainer` / :class:`SelfConsistencyTrainingArguments` / :class:`GraphCollator` -- an HF
  ``Trainer`` with the SI-GNN + SC loss in ``compute_loss``; :func:`train_si_gnn` -- the authors' two-stage recipe.
* :func:`ba_2motifs`, :func:`ba_shapes` -- offline synthetic benchmarks with ground-truth explanation edges.
* :func:`evaluate_si_gnn`, :func:`ensemble_metrics`, :func:`paired_comparison` -- the paper's metrics (AUC, Fid,
  SHD, accuracy, sparsity) and paired statistics; :func:`pyg_explainer` -- PyG ``Explainer`` / metrics bridge.
* :func:`plot_explanations` -- a graph's explanations side by side.

Importing this package loads neither torch nor torch_geometric (PEP 562 lazy attributes).
"""

from hfx._lazy import attach


_LAZY = {
    "SelfInterpretableGNNConfig": "hfx.gnn.self_consistency.configuration",
    "SelfInterpretableGNN": "hfx.gnn.self_consistency.modeling",
    "SelfInterpretableGNNOutput": "hfx.gnn.self_consistency.modeling",
    "WeightedGINConv": "hfx.gnn.self_consistency.modeling",
    "concrete_sample": "hfx.gnn.self_consistency.modeling",
    "reverse_edge_permutation": "hfx.gnn.self_consistency.modeling",
    "SelfConsistencyLoss": "hfx.gnn.self_consistency.losses",
    "si_gnn_loss": "hfx.gnn.self_consistency.losses",
    "bernoulli_kl": "hfx.gnn.self_consistency.losses",
    "GraphCollator": "hfx.gnn.self_consistency.trainer",
    "SelfConsistencyTrainer": "hfx.gnn.self_consistency.trainer",
    "SelfConsistencyTrainingArguments": "hfx.gnn.self_consistency.trainer",
    "BestValidationCallback": "hfx.gnn.self_consistency.trainer",
    "SIGNNTrainingResult": "hfx.gnn.self_consistency.trainer",
    "train_si_gnn": "hfx.gnn.self_consistency.trainer",
    "si_gnn_metrics": "hfx.gnn.self_consistency.trainer",
    "ba_2motifs": "hfx.gnn.self_consistency.data",
    "ba_shapes": "hfx.gnn.self_consistency.data",
    "split_dataset": "hfx.gnn.self_consistency.data",
    "explanation_auc": "hfx.gnn.self_consistency.metrics",
    "fidelity_scores": "hfx.gnn.self_consistency.metrics",
    "collect_explanations": "hfx.gnn.self_consistency.metrics",
    "explanation_metrics": "hfx.gnn.self_consistency.metrics",
    "evaluate_si_gnn": "hfx.gnn.self_consistency.metrics",
    "structural_hamming_distance": "hfx.gnn.self_consistency.metrics",
    "ensemble_metrics": "hfx.gnn.self_consistency.metrics",
    "mean_interval": "hfx.gnn.self_consistency.metrics",
    "paired_comparison": "hfx.gnn.self_consistency.metrics",
    "pyg_explainer": "hfx.gnn.self_consistency.explain",
    "SIGNNAttentionExplainer": "hfx.gnn.self_consistency.explain",
    "plot_explanations": "hfx.gnn.self_consistency.plotting",
    "publish": "hfx.gnn.self_consistency.hub",
}

__all__ = sorted(_LAZY)  # noqa: PLE0605


__getattr__, __dir__ = attach(__name__, _LAZY, __all__)
