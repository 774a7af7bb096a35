"""SLAO: single-LoRA continual learning with orthogonal initialisation and time-aware merging, as a PEFT tuner.

"Merge before Forget: A Single LoRA Continual Learning via Continual Merging" (Qiao & Mahdavi, ICLR 2026),
arXiv:2512.23017. Importing this package registers the ``"SLAO"`` PEFT type (see :mod:`.registration`).

* :class:`SLAOConfig`, :class:`SLAOModel`, :class:`SLAOLinear` -- the tuner (``get_peft_model(model, SLAOConfig())``);
  :class:`ExternalPeftType` -- the ``peft_type`` (``"SLAO"`` with ``.value`` / ``.name``, like a ``PeftType`` member).
* :func:`orthogonal_init`, :func:`time_aware_merge`, :func:`sign_fixed_qr` -- the math of Algorithm 1.
* :mod:`.continual` -- :class:`SLAOCallback`, :class:`ContinualTrainer`, :func:`average_accuracy`,
  :func:`backward_transfer`, :func:`plot_accuracy_matrix`, :func:`export_lora` (imported lazily: it needs
  transformers' ``Trainer``; the plot needs matplotlib).
"""

from hfx._lazy import attach

from .config import BASELINES, SLAO_PEFT_TYPE, ExternalPeftType, SLAOConfig
from .layer import SLAOLinear, orthogonal_init, sign_fixed_qr, time_aware_merge
from .model import SLAOModel
from .registration import register


register()

_CONTINUAL = (
    "ContinualResult",
    "ContinualTrainer",
    "SLAOCallback",
    "average_accuracy",
    "backward_transfer",
    "export_lora",
    "plot_accuracy_matrix",
    "sequence_exact_match",
)

__all__ = [
    "BASELINES",
    "SLAO_PEFT_TYPE",
    "ContinualResult",
    "ContinualTrainer",
    "ExternalPeftType",
    "SLAOCallback",
    "SLAOConfig",
    "SLAOLinear",
    "SLAOModel",
    "average_accuracy",
    "backward_transfer",
    "export_lora",
    "orthogonal_init",
    "plot_accuracy_matrix",
    "register",
    "sequence_exact_match",
    "sign_fixed_qr",
    "time_aware_merge",
]


__getattr__, __dir__ = attach(__name__, dict.fromkeys(_CONTINUAL, ".continual"), __all__)
