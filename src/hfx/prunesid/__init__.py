"""PruneSID: training-free visual-token pruning for Hugging Face LLaVA / LLaVA-NeXT (arXiv 2603.09480).

Public API (imported lazily, PEP 562):

* :class:`PruneSIDConfig` -- the settings (stored on the model config as ``config.prunesid``).
* :func:`apply` -- ``model, processor = apply(model, processor, num_visual_tokens=64)`` for existing objects.
* selection core on any ``(B, T, D)`` features: :func:`prunesid_select`, :func:`psca_groups`, :func:`group_nms`,
  :func:`allocate_quotas`, :func:`redundancy`, :func:`dynamic_budget`, :func:`information_score`,
  :func:`prunesid_select_qwen2vl`, :func:`qwen2vl_budget`.
* baselines: :func:`reduce_visual_tokens`, :func:`random_select`, :func:`pooling_select`,
  :func:`visionzip_select`, :func:`divprune_select`; FastV inside the LLM (``method="fastv"``):
  :func:`install_fastv_hooks`, :func:`remove_fastv_hooks`, :func:`last_token_attention`.
* model / processor classes: ``PruneSIDLlava[Next|NextVideo]ForConditionalGeneration``, ``PruneSIDLlava[Next]Model``,
  ``PruneSIDLlava[Next]Processor``; :func:`prepare_dynamic_inputs` for PruneSID-Dyn.
* HF configs with their own model types (registered with the Auto classes on ``import hfx``):
  ``PruneSIDLlava[Next|NextVideo]Config``.
* :func:`visualize` -- the image with kept patches highlighted.
"""

from hfx._lazy import attach


_LAZY = {
    "PruneSIDConfig": "hfx.prunesid.config",
    "METHODS": "hfx.prunesid.config",
    "SelectionInfo": "hfx.prunesid.selection",
    "allocate_quotas": "hfx.prunesid.selection",
    "cosine_similarity_matrix": "hfx.prunesid.selection",
    "dynamic_budget": "hfx.prunesid.selection",
    "group_nms": "hfx.prunesid.selection",
    "information_score": "hfx.prunesid.selection",
    "prunesid_select": "hfx.prunesid.selection",
    "prunesid_select_qwen2vl": "hfx.prunesid.selection",
    "psca_groups": "hfx.prunesid.selection",
    "qwen2vl_budget": "hfx.prunesid.selection",
    "redundancy": "hfx.prunesid.selection",
    "select_by_quota": "hfx.prunesid.selection",
    "TokenReduction": "hfx.prunesid.baselines",
    "divprune_select": "hfx.prunesid.baselines",
    "pooling_select": "hfx.prunesid.baselines",
    "random_select": "hfx.prunesid.baselines",
    "reduce_visual_tokens": "hfx.prunesid.baselines",
    "visionzip_select": "hfx.prunesid.baselines",
    "PruneSIDLlavaForConditionalGeneration": "hfx.prunesid.modeling",
    "PruneSIDLlavaModel": "hfx.prunesid.modeling",
    "PruneSIDLlavaNextForConditionalGeneration": "hfx.prunesid.modeling",
    "PruneSIDLlavaNextModel": "hfx.prunesid.modeling",
    "PruneSIDLlavaNextVideoForConditionalGeneration": "hfx.prunesid.modeling",
    "PruneSIDLlavaNextVideoModel": "hfx.prunesid.modeling",
    "cls_attention_and_keys": "hfx.prunesid.modeling",
    "PruneSIDLlavaProcessor": "hfx.prunesid.processing",
    "PruneSIDLlavaNextProcessor": "hfx.prunesid.processing",
    "num_video_tokens": "hfx.prunesid.processing",
    "PruneSIDLlavaConfig": "hfx.prunesid.configuration",
    "PruneSIDLlavaNextConfig": "hfx.prunesid.configuration",
    "PruneSIDLlavaNextVideoConfig": "hfx.prunesid.configuration",
    "install_fastv_hooks": "hfx.prunesid.fastv",
    "remove_fastv_hooks": "hfx.prunesid.fastv",
    "last_token_attention": "hfx.prunesid.fastv",
    "apply": "hfx.prunesid.api",
    "prepare_dynamic_inputs": "hfx.prunesid.api",
    "visualize": "hfx.prunesid.visualization",
}

__all__ = sorted(_LAZY)  # noqa: PLE0605


__getattr__, __dir__ = attach(__name__, _LAZY, __all__)
