"""RMOD: robust multi-objective controlled decoding (Son, Bankes et al., arXiv 2503.08796, ICLR 2026).

``model.generate(**inputs, custom_generate="rmod", value_function=vf, do_sample=True, ...)`` decodes block by block:
K sampled continuations per block, worst-case objective weights on the simplex, the best block under those weights.

* :func:`rmod` -- the ``custom_generate`` callable; :class:`RMODOutput` its output.
* :func:`robust_weights` (exact by default, or the authors' truncated loop), :func:`fixed_weights`,
  :func:`tilted_probs`, :func:`frank_wolfe_gap` -- the weight math (pure tensors).
* :class:`MultiObjectiveValueModel` / :class:`MultiObjectiveValueConfig` -- a backbone + G value heads
  (a ``PreTrainedModel``); :class:`RewardFunctionValues` -- G plain reward functions as a value function.
* :class:`ValueFunctionTrainer` -- a ``transformers.Trainer`` for the value model (Monte-Carlo regression).
* :func:`plot_weights` (matplotlib), :func:`build_distillation_dataset` (datasets; Distill-RMOD for TRL's
  ``SFTTrainer``), :func:`hfx.generation.rmod.hub.publish` -- loaded lazily.
"""

from hfx._lazy import attach

from .generate import RMODOutput, rmod
from .value_functions import (
    MultiObjectiveValueConfig,
    MultiObjectiveValueModel,
    MultiObjectiveValueOutput,
    RewardFunctionValues,
    last_token_index,
    monte_carlo_value_loss,
)
from .weights import fixed_weights, frank_wolfe_gap, robust_weights, tilted_probs


_LAZY = {
    "ValueFunctionTrainer": "hfx.generation.rmod.trainer",
    "DataCollatorForValueFunction": "hfx.generation.rmod.trainer",
    "build_value_dataset": "hfx.generation.rmod.trainer",
    "plot_weights": "hfx.generation.rmod.plot",
    "build_distillation_dataset": "hfx.generation.rmod.distill",
    "publish": "hfx.generation.rmod.hub",
}

__all__ = [
    "DataCollatorForValueFunction",
    "MultiObjectiveValueConfig",
    "MultiObjectiveValueModel",
    "MultiObjectiveValueOutput",
    "RMODOutput",
    "RewardFunctionValues",
    "ValueFunctionTrainer",
    "build_distillation_dataset",
    "build_value_dataset",
    "fixed_weights",
    "frank_wolfe_gap",
    "last_token_index",
    "monte_carlo_value_loss",
    "plot_weights",
    "publish",
    "rmod",
    "robust_weights",
    "tilted_probs",
]


__getattr__, __dir__ = attach(__name__, _LAZY, __all__)
