"""Graph neural networks (PyTorch Geometric): self-consistency training for self-interpretable GNNs (SC-GNN) in
:mod:`hfx.gnn.self_consistency`.

``import hfx.gnn`` loads neither torch nor torch_geometric; the names below resolve on first use.
"""

from .._lazy import attach


_LAZY = {
    "SelfInterpretableGNN": ".self_consistency",
    "SelfInterpretableGNNConfig": ".self_consistency",
    "SelfConsistencyLoss": ".self_consistency",
    "SelfConsistencyTrainer": ".self_consistency",
    "SelfConsistencyTrainingArguments": ".self_consistency",
    "train_si_gnn": ".self_consistency",
}
_SUBMODULES = {"self_consistency"}

__all__ = sorted([*_LAZY, *_SUBMODULES])  # noqa: PLE0605

__getattr__, __dir__ = attach(__name__, _LAZY, __all__, submodules=_SUBMODULES)
