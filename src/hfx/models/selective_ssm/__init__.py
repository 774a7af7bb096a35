"""Mamba training-dynamics theory made runnable (arXiv 2602.12499): data, block, (S)GD, diagnostics, real Mamba.

* :class:`SyntheticSequenceConfig`, :func:`generate_dataset`, :func:`sample_sequences` -- the majority-voting and
  locality-structured synthetic sequences (a reconstruction), as a ``datasets.Dataset`` with declared features.
* :class:`SelectiveSSMConfig`, :class:`SelectiveSSMModel`, :class:`SelectiveSSMForSequenceClassification` -- the
  one-layer selective SSM + two-layer MLP (a reconstruction) as transformers models.
* :func:`train_gd`, :func:`train_sgd`, :func:`train_ensemble` -- plain full-batch GD / SGD as in the analysis.
* :func:`cosine_alignment`, :func:`gate_gradient`, :func:`plot_gate_values`, ... -- the diagnostics.
* :class:`MambaForSequenceClassification`, :func:`tiny_mamba_classifier` -- transformers' Mamba as the comparison.

Importing this package loads nothing heavy; each name imports its module on first use.
"""

from hfx._lazy import attach


_LAZY = {
    "SelectiveSSMConfig": ".configuration_selective_ssm",
    "SelectiveSSMModel": ".modeling_selective_ssm",
    "SelectiveSSMForSequenceClassification": ".modeling_selective_ssm",
    "SelectiveSSMPreTrainedModel": ".modeling_selective_ssm",
    "SelectiveSSMOutput": ".modeling_selective_ssm",
    "SelectiveSSMClassifierOutput": ".modeling_selective_ssm",
    "gate_coefficients": ".modeling_selective_ssm",
    "token_weights": ".modeling_selective_ssm",
    "all_states": ".modeling_selective_ssm",
    "margin_loss": ".modeling_selective_ssm",
    "SyntheticSequenceConfig": ".data",
    "sample_sequences": ".data",
    "generate_dataset": ".data",
    "dataset_features": ".data",
    "nearest_distance": ".data",
    "TrainingHistory": ".training",
    "train_gd": ".training",
    "train_sgd": ".training",
    "train_ensemble": ".training",
    "GateGradient": ".diagnostics",
    "accuracy": ".diagnostics",
    "cosine_alignment": ".diagnostics",
    "gate_alignment": ".diagnostics",
    "gate_gradient": ".diagnostics",
    "iterations_to_threshold": ".diagnostics",
    "fit_power_law": ".diagnostics",
    "exponent_interval": ".diagnostics",
    "mean_interval": ".diagnostics",
    "plot_gate_values": ".diagnostics",
    "plot_alignment_history": ".diagnostics",
    "MambaForSequenceClassification": ".mamba_baseline",
    "tiny_mamba_classifier": ".mamba_baseline",
    "tiny_mamba_config": ".mamba_baseline",
    "mamba_time_steps": ".mamba_baseline",
    "publish": ".hub",
}
_SUBMODULES = {
    "configuration_selective_ssm",
    "modeling_selective_ssm",
    "data",
    "training",
    "diagnostics",
    "experiments",
    "mamba_baseline",
    "hub",
}

__all__ = sorted([*_LAZY, *_SUBMODULES])  # noqa: PLE0605

__getattr__, __dir__ = attach(__name__, _LAZY, __all__, submodules=_SUBMODULES)
