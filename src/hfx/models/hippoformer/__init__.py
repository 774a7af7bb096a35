"""mm-TEM and Hippoformer (Li et al., ICLR 2026, OpenReview ``hxwV5EubAw``): hippocampus-inspired structural memory.

Public names load lazily (the configuration module imports no torch modelling code):

* :class:`MMTEMConfig`, :class:`MMTEMModel` -- path integration + meta-MLP memory written at test time (or the
  TEM-style Hebbian baseline, ``MMTEMConfig.tem_style()``);
* :class:`HippoformerConfig`, :class:`HippoformerForNextObservation` -- mm-TEM + a single-layer Transformer;
  ``structural_memory="none"`` is the Transformer-only baseline (:func:`matched_transformer_config`);
* :mod:`.data` -- random walks on graphs as a ``datasets.Dataset``; :mod:`.training` -- HF ``Trainer`` helpers.
"""

from ..._lazy import attach


_LAZY = {
    "MMTEMConfig": ".configuration_hippoformer",
    "HippoformerConfig": ".configuration_hippoformer",
    "MMTEMModel": ".modeling_hippoformer",
    "MMTEMOutput": ".modeling_hippoformer",
    "HippoformerForNextObservation": ".modeling_hippoformer",
    "HippoformerOutput": ".modeling_hippoformer",
    "matched_transformer_config": ".modeling_hippoformer",
    "MetaMLPMemory": ".fast_weights",
    "HebbianMemory": ".fast_weights",
    "random_walk_dataset": ".data",
    "generalization_splits": ".data",
    "GRAPH_FAMILIES": ".data",
    "register": ".registration",
    "next_observation_trainer": ".training",
    "revisited_accuracy": ".training",
}
_SUBMODULES = {
    "configuration_hippoformer",
    "modeling_hippoformer",
    "fast_weights",
    "data",
    "registration",
    "hub",
    "training",
}

__all__ = sorted([*_LAZY, *_SUBMODULES])  # noqa: PLE0605

__getattr__, __dir__ = attach(__name__, _LAZY, __all__, submodules=_SUBMODULES)
