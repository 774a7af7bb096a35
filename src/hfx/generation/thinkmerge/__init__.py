"""ThinkMerge (arXiv 2512.02874): think in parallel, answer as one, as a transformers ``custom_generate`` method.

* :func:`thinkmerge` -- the ``custom_generate`` callable (``model.generate(..., custom_generate=hfx.thinkmerge)``, or
  ``custom_generate="thinkmerge"`` after ``import hfx``).
* :class:`ThinkMergeOutput` -- returned with ``return_dict_in_generate=True``.
* :mod:`.baselines` -- greedy, single sample, majority vote over K answers, in the same API.
* :mod:`.answer` -- GSM8K-style numeric answer extraction.
* :mod:`.hub` -- :func:`~.hub.publish` writes the self-contained Hub folder (``custom_generate/generate.py``).
"""

from .generate import (
    ANSWER_MODES,
    MERGE_MODES,
    Delimiter,
    ThinkMergeOutput,
    left_pad,
    merge_logits,
    thinkmerge,
    trim_repetitive_suffix,
)


__all__ = [
    "ANSWER_MODES",
    "MERGE_MODES",
    "Delimiter",
    "ThinkMergeOutput",
    "left_pad",
    "merge_logits",
    "thinkmerge",
    "trim_repetitive_suffix",
]
