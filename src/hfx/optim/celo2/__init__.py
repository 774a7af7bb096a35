"""Celo2 (arXiv 2602.19142, ICLR 2026): a learned optimizer as a ``torch.optim.Optimizer``.

* :class:`Celo2` -- the optimizer (learned rule + Newton-Schulz for matrices, AdamW for 1-D / embeddings), for
  ``Trainer(optimizers=(Celo2(...), None))`` or ``optimizer_cls_and_kwargs``.
* :class:`Celo2MetaWeights` -- the meta-MLP (``PyTorchModelHubMixin``: ``save_pretrained`` / ``from_pretrained``).
* :mod:`~hfx.optim.celo2.convert` -- official (flax msgpack) / PyLO checkpoints -> :class:`Celo2MetaWeights`.
* :mod:`~hfx.optim.celo2.meta_train` -- the CPU-sized PES meta-training recipe (``python -m
  hfx.optim.celo2.meta_train``).

Re-implemented from the paper and the authors' MIT-licensed optax reference; no code or weights are vendored.
"""

from hfx._lazy import attach


_LAZY = {
    "Celo2": "hfx.optim.celo2.optimizer",
    "load_meta_weights": "hfx.optim.celo2.optimizer",
    "default_meta_weights_path": "hfx.optim.celo2.optimizer",
    "Celo2MetaWeights": "hfx.optim.celo2.meta_weights",
    "route_parameters": "hfx.optim.celo2.routing",
    "newton_schulz": "hfx.optim.celo2.functional",
    "convert_checkpoint": "hfx.optim.celo2.convert",
    "publish": "hfx.optim.celo2.hub",
}
_SUBMODULES = {"functional", "optimizer", "meta_weights", "routing", "convert", "meta_train", "tasks", "hub"}

__all__ = sorted([*_LAZY, *_SUBMODULES])  # noqa: PLE0605

__getattr__, __dir__ = attach(__name__, _LAZY, __all__, submodules=_SUBMODULES)
