"""hfx: ICLR 2026 methods as Hugging Face-native subclasses.

The package root only re-exports. Public names resolve lazily (PEP 562), so ``import hfx`` imports neither torch nor
transformers, and never trl, peft, diffusers, datasets or matplotlib: those load when their feature is first used.

On import, hfx arranges four small, documented registrations (via :mod:`hfx._import_hooks`, which runs
them the moment the library they extend is imported, or at once if it already is):

* :func:`hfx.generation.registry.install_custom_generate_names` lets ``model.generate(..., custom_generate="thinkmerge")``
  (and ``"rmod"``, ``"budget_forcing"``) resolve to hfx's callables; every other ``custom_generate`` value is handled by transformers as
  before. It is installed when ``transformers.generation.utils`` is imported (before any model can generate).
* :func:`hfx._import_hooks.when_imported` registers the SLAO tuner with PEFT's type mappings the moment ``peft`` is
  first imported (or at once if it already is), so a saved SLAO adapter loads with plain ``PeftModel.from_pretrained``.
* :func:`hfx.prunesid.registration.register` adds the PruneSID LLaVA model types (``prunesid_llava``, ...) to
  transformers' ``AutoConfig`` / ``AutoModel`` / ``AutoModelForImageTextToText`` / ``AutoProcessor`` once those Auto
  modules are imported, so a saved pruned folder loads as the pruned classes; stock model types are not touched.
* :func:`hfx.utils.artifacts.register_auto_configs` / :func:`~hfx.utils.artifacts.register_auto_models` add hfx's
  own architectures (``hfx_selective_ssm``, ``mmtem``, ``hippoformer``, ``si_gnn``, ``hfx_rmod_value``: the table
  :data:`hfx.utils.artifacts.ARCHITECTURES`) to ``AutoConfig`` / ``AutoModel*`` once transformers' Auto modules are
  imported (SC-GNN's model class once its module is, as PyTorch Geometric is slow to import).
"""

from typing import TYPE_CHECKING

from ._lazy import attach


__version__ = "0.1.0"

# public name -> module that defines it
_LAZY = {
    # generation
    "thinkmerge": "hfx.generation.thinkmerge",
    "ThinkMergeOutput": "hfx.generation.thinkmerge",
    "rmod": "hfx.generation.rmod",
    "RMODOutput": "hfx.generation.rmod",
    "MultiObjectiveValueModel": "hfx.generation.rmod",
    "MultiObjectiveValueConfig": "hfx.generation.rmod",
    "RewardFunctionValues": "hfx.generation.rmod",
    "ValueFunctionTrainer": "hfx.generation.rmod",
    "budget_forcing": "hfx.generation.budget_forcing",
    "BudgetForcingOutput": "hfx.generation.budget_forcing",
    # trainers (TRL)
    "THRGRPOTrainer": "hfx.trainers.thr",
    "THRGRPOConfig": "hfx.trainers.thr",
    # tuners (PEFT)
    "SLAOConfig": "hfx.tuners.slao",
    "SLAOModel": "hfx.tuners.slao",
    # pipelines (diffusers)
    "CLIPInversionPipeline": "hfx.pipelines.clip_inversion",
    # PruneSID
    "PruneSIDConfig": "hfx.prunesid",
    # routing
    "OfflineRouter": "hfx.routing",
    "ThompsonRouter": "hfx.routing",
    "LinUCBRouter": "hfx.routing",
    "RandomRouter": "hfx.routing",
    "RoutedRewardModel": "hfx.routing",
    # optimizers (torch.optim)
    "Celo2": "hfx.optim",
    # memory
    "MemGAS": "hfx.memory",
    "MemGASConfig": "hfx.memory",
    "MemGASRetrieverTool": "hfx.memory",
    # federated (Flower)
    "DevFTConfig": "hfx.federated",
    "run_devft": "hfx.federated",
    # agents (smolagents)
    "heavy": "hfx.agents.heavy",
    "HeavyConfig": "hfx.agents.heavy",
    # GNNs (PyTorch Geometric)
    "SelfInterpretableGNN": "hfx.gnn",
    "SelfInterpretableGNNConfig": "hfx.gnn",
    "SelfConsistencyLoss": "hfx.gnn",
    "SelfConsistencyTrainer": "hfx.gnn",
    # models (Hippoformer / mm-TEM)
    "MMTEMConfig": "hfx.models.hippoformer",
    "MMTEMModel": "hfx.models.hippoformer",
    "HippoformerConfig": "hfx.models.hippoformer",
    "HippoformerForNextObservation": "hfx.models.hippoformer",
    # vision (CRD)
    "CRDPipeline": "hfx.vision.crd",
    "CRDConfig": "hfx.vision.crd",
    # recipes (fluent alignment)
    "ConstitutionJudge": "hfx.recipes.fluent",
    "FluentAlignmentConfig": "hfx.recipes.fluent",
    "run_fluent_alignment": "hfx.recipes.fluent",
}
_SUBMODULES = {
    "generation",
    "trainers",
    "tuners",
    "pipelines",
    "routing",
    "optim",
    "memory",
    "federated",
    "prunesid",
    "agents",
    "gnn",
    "hub",
    "models",
    "testing",
    "cli",
    "data",
    "vision",
    "recipes",
}

__all__ = sorted([*_LAZY, *_SUBMODULES, "__version__"])  # noqa: PLE0605


__getattr__, __dir__ = attach(__name__, _LAZY, __all__, submodules=_SUBMODULES)


if TYPE_CHECKING:  # pragma: no cover
    from .generation.thinkmerge import ThinkMergeOutput, thinkmerge


from ._import_hooks import when_imported as _when_imported  # noqa: E402


_when_imported("transformers.generation.utils", "hfx.generation.registry:install_custom_generate_names")
_when_imported("peft", "hfx.tuners.slao.registration:register")


def _register_prunesid_with_auto_classes() -> None:
    from .prunesid.registration import TRIGGER_MODULES

    for module in TRIGGER_MODULES:
        _when_imported(module, "hfx.prunesid.registration:register")


_register_prunesid_with_auto_classes()


def _register_architectures_with_auto_classes() -> None:
    from .utils.artifacts import AUTO_TRIGGERS

    for module, function in AUTO_TRIGGERS.items():
        _when_imported(module, f"hfx.utils.artifacts:{function}")


_register_architectures_with_auto_classes()
