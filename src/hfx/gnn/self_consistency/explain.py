"""The SI-GNN as a PyG ``torch_geometric.explain`` citizen: its own attention as an ``ExplainerAlgorithm``, so PyG's
``Explainer``, ``Explanation`` (``visualize_graph``, ``get_explanation_subgraph``) and metrics (``fidelity``,
``characterization_score``, ``groundtruth_metrics``, ``unfaithfulness``) apply to it unchanged.

PyG's ``fidelity`` masks the messages of every message-passing layer with the explanation (``set_masks``), so the
SI-GNN re-explains the masked graph inside the model -- a different (complementary) definition from the paper's
Fid- / Fid+ in :mod:`~hfx.gnn.self_consistency.metrics`.
"""

from __future__ import annotations

import torch
from torch import nn
from torch_geometric.explain import Explainer, Explanation
from torch_geometric.explain.algorithm import ExplainerAlgorithm
from torch_geometric.explain.config import MaskType

from .modeling import SelfInterpretableGNN


class SIGNNLogits(nn.Module):
    """Wraps a [`SelfInterpretableGNN`] so that ``forward(x, edge_index, batch=None)`` returns its logits tensor
    (what ``torch_geometric.explain.Explainer`` expects of a model)."""

    def __init__(self, model: SelfInterpretableGNN):
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor | None = None) -> torch.Tensor:
        return self.model(x, edge_index, batch).logits


class SIGNNAttentionExplainer(ExplainerAlgorithm):
    """An ``ExplainerAlgorithm`` whose explanation is the SI-GNN's own deterministic edge attention (no
    optimisation): ``Explanation(edge_mask=model(x, edge_index, batch).edge_attention)`` in evaluation mode.

    Supports ``edge_mask_type="object"`` and no node mask.
    """

    def __init__(self, model: SelfInterpretableGNN):
        super().__init__()
        self.si_gnn = model

    def forward(self, model, x, edge_index, *, target, index=None, **kwargs) -> Explanation:
        was_training = self.si_gnn.training
        self.si_gnn.eval()
        try:
            with torch.no_grad():
                edge_mask = self.si_gnn(x, edge_index, kwargs.get("batch")).edge_attention
        finally:
            self.si_gnn.train(was_training)
        return Explanation(edge_mask=edge_mask)

    def supports(self) -> bool:
        config = self.explainer_config
        if config.edge_mask_type != MaskType.object:
            raise ValueError(f"SI-GNN attention gives an edge mask of type 'object', not {config.edge_mask_type}")
        if config.node_mask_type is not None:
            raise ValueError("SI-GNN attention gives no node mask (set `node_mask_type=None`)")
        return True


def pyg_explainer(model: SelfInterpretableGNN) -> Explainer:
    """A ``torch_geometric.explain.Explainer`` explaining ``model`` with its own attention (explanation type
    ``"model"``, raw logits; binary or multi-class classification at the model's graph / node level).

    Example:

    ```python
    >>> from torch_geometric.explain.metric import fidelity
    >>> explainer = pyg_explainer(model)
    >>> explanation = explainer(batch.x, batch.edge_index, batch=batch.batch)
    >>> fid_plus, fid_minus = fidelity(explainer, explanation)
    ```
    """
    mode = "binary_classification" if model.config.num_logits == 1 else "multiclass_classification"
    return Explainer(
        model=SIGNNLogits(model),
        algorithm=SIGNNAttentionExplainer(model),
        explanation_type="model",
        edge_mask_type="object",
        node_mask_type=None,
        model_config={"mode": mode, "task_level": model.config.task, "return_type": "raw"},
    )
