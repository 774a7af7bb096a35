"""Architectures (transformers-style ``models/<name>/`` folders) and the embedded default language model.

The embedded-default API (:func:`load_default_model`, :func:`load_causal_lm`, :data:`DEFAULT_MODEL_ID`, ...) lives in
:mod:`hfx.models.default` and is re-exported here lazily, so ``hfx.models.load_default_model`` keeps working and
``import hfx.models`` loads no torch.

``models/selective_ssm/`` holds the one-layer selective SSM of the Mamba training-dynamics theory (arXiv 2602.12499):
its config / model classes and synthetic-data config are re-exported here, lazily too.
"""

from .._lazy import attach


_LAZY = {
    "DEFAULT_MODEL_ID": ".default",
    "DEFAULT_GGUF_PACKAGE": ".default",
    "DEFAULT_GGUF_FILE": ".default",
    "hfx_cache_dir": ".default",
    "default_gguf_path": ".default",
    "is_default_model_available": ".default",
    "default_model_path": ".default",
    "load_default_model": ".default",
    "load_causal_lm": ".default",
    "DEFAULT_SENTENCE_ENCODER_ID": ".default",
    "default_sentence_encoder_path": ".default",
    # Mamba training-dynamics theory (arXiv 2602.12499): models/selective_ssm/
    "SelectiveSSMConfig": ".selective_ssm",
    "SelectiveSSMModel": ".selective_ssm",
    "SelectiveSSMForSequenceClassification": ".selective_ssm",
    "SyntheticSequenceConfig": ".selective_ssm",
    # Hippoformer / mm-TEM (hippocampus-inspired structural memory): models/hippoformer/
    "MMTEMConfig": ".hippoformer",
    "MMTEMModel": ".hippoformer",
    "HippoformerConfig": ".hippoformer",
    "HippoformerForNextObservation": ".hippoformer",
}
_SUBMODULES: set[str] = {"default", "selective_ssm", "hippoformer"}

__all__ = sorted([*_LAZY, *_SUBMODULES])  # noqa: PLE0605

__getattr__, __dir__ = attach(__name__, _LAZY, __all__, submodules=_SUBMODULES)
