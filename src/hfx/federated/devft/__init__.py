"""DevFT: Developmental Federated Tuning (Wu, Li, Guo, Li; ICLR 2026, arXiv 2508.00041) on Flower + PEFT LoRA.

Federated LoRA fine-tuning through stages of growing sub-models (e.g. 4 -> 8 -> 16 -> 30 layers): each stage groups
the base model's decoder layers by spectral clustering of a layer-similarity graph, fuses each group into one layer
from an anchor, trains LoRA on that sub-model with FedAvg, and initialises the next stage's LoRA from it. The last
stage is the full model.

* :class:`DevFTConfig` -- every setting; reconstructed choices (similarity, anchor, fusion weights, LoRA transfer)
  are fields; :meth:`DevFTConfig.for_baseline` gives FedIT (full model from the start), no-grouping, no-fusion.
* :class:`DevFTScheduler`, :class:`StagePlan`, :func:`build_submodel` -- plans and real ``PreTrainedModel``
  sub-models.
* :func:`run_devft` -- the federated run on Flower's simulation engine (ClientApp / ServerApp, FedAvg over LoRA
  tensors, ``flwr-datasets`` partitioners), returning a :class:`DevFTResult` (history, bytes, compute, final adapter).

Importing this package loads nothing heavy; torch / transformers / peft / scikit-learn / flwr load on first use.
"""

from hfx._lazy import attach


_LAZY = {
    "DevFTConfig": "hfx.federated.devft.configuration",
    "default_stages": "hfx.federated.devft.configuration",
    "StagePlan": "hfx.federated.devft.stages",
    "DevFTScheduler": "hfx.federated.devft.stages",
    "build_submodel": "hfx.federated.devft.stages",
    "plan_stage": "hfx.federated.devft.stages",
    "layer_similarity": "hfx.federated.devft.grouping",
    "spectral_grouping": "hfx.federated.devft.grouping",
    "contiguous_grouping": "hfx.federated.devft.grouping",
    "pick_anchor": "hfx.federated.devft.grouping",
    "fusion_coefficients": "hfx.federated.devft.fusion",
    "fuse_tensors": "hfx.federated.devft.fusion",
    "transfer_lora": "hfx.federated.devft.lora",
    "initialize_lora_from_state": "hfx.federated.devft.lora",
    "lora_params_per_layer": "hfx.federated.devft.lora",
    "run_devft": "hfx.federated.devft.flower",
    "DevFTResult": "hfx.federated.devft.flower",
    "make_client_app": "hfx.federated.devft.flower",
    "make_server_app": "hfx.federated.devft.flower",
    "load_cl_benchmark": "hfx.federated.devft.data",
    "make_partitioner": "hfx.federated.devft.data",
    "plot_runs": "hfx.federated.devft.plot",
    "publish": "hfx.federated.devft.hub",
}
_SUBMODULES = {"configuration", "grouping", "fusion", "stages", "lora", "data", "training", "flower", "plot", "hub"}

__all__ = sorted([*_LAZY, *_SUBMODULES])  # noqa: PLE0605

__getattr__, __dir__ = attach(__name__, _LAZY, __all__, submodules=_SUBMODULES)
