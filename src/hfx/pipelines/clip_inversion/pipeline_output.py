"""Output dataclass of :class:`CLIPInversionPipeline`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import PIL.Image
import torch
from diffusers.utils import BaseOutput


@dataclass
class CLIPInversionPipelineOutput(BaseOutput):
    """Output of :class:`CLIPInversionPipeline` (and its ``reconstruct`` / ``stylize``).

    Args:
        images (`list[PIL.Image.Image]`, `np.ndarray` of shape `(batch_size, height, width, 3)` or `torch.Tensor` of
            shape `(batch_size, 3, height, width)`): the rendered INRs, values in ``[0, 1]`` for np/pt, per
            ``output_type``.
        clip_similarity (`np.ndarray` of shape `(batch_size,)`): cosine similarity between the CLIP image embedding of
            each final (un-augmented) image and its target embedding ``e_t2i``.
        loss_history (`np.ndarray` of shape `(num_inference_steps, batch_size)`): the optimised loss per step.
    """

    images: list[PIL.Image.Image] | np.ndarray | torch.Tensor
    clip_similarity: np.ndarray | None = None
    loss_history: np.ndarray | None = None
