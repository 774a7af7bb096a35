"""Optional CLIP^-1 banks, saved as pipeline components (arXiv:2505.23161, sections 3.3-3.5).

* :class:`CLIPEmbeddingBank` -- paired, unit-norm CLIP text and image embeddings of real image-caption pairs. It
  drives the per-prompt Orthogonal Procrustes alignment (k nearest pairs) and the blending anchor (k nearest images).
* :class:`INRBank` -- pre-fitted INRs (flattened parameters) keyed by the CLIP image embedding of the image each
  was fitted to: the adversarially robust initialisation (fit with AWP on blurred images, see
  :func:`hfx.pipelines.clip_inversion.build_inr_bank`).

Both are diffusers ``ModelMixin`` + ``ConfigMixin`` modules, so ``save_pretrained`` writes them as sub-folders with
``config.json`` + safetensors; both stay float32 whatever dtype the pipeline is cast to or loaded in. The paper keeps its database in FAISS; a bank here is an exact (brute-force) cosine
search in torch, which is enough up to ~1e5 entries. This file is copied into saved pipeline folders (remote-code
loading), so it imports only torch and diffusers.
"""

from __future__ import annotations

from typing import ClassVar

import torch
import torch.nn.functional as F
from diffusers.configuration_utils import ConfigMixin, register_to_config
from diffusers.models.modeling_utils import ModelMixin
from torch import nn


class _Float32Bank(ModelMixin, ConfigMixin):
    """A frozen table of float32 tensors that no dtype cast touches (device moves still apply).

    ``pipe.to(torch.bfloat16)``, ``bank.half()`` and ``from_pretrained(..., torch_dtype=torch.bfloat16)`` (through
    ``_keep_in_fp32_modules``) leave the tables in float32: rounding pre-fitted INR weights to bf16 moves them by up
    to ~0.05 and silently degrades the robust initialisation, and the tables are small.
    """

    def _apply(self, fn, recurse=True):
        def keep_dtype(tensor):
            probe = fn(torch.empty(0, dtype=tensor.dtype, device=tensor.device))  # where / in what fn would put it
            return tensor.to(probe.device) if probe.dtype != tensor.dtype else fn(tensor)

        return super()._apply(keep_dtype, recurse)

    def to(self, *args, **kwargs):
        """Like ``nn.Module.to``, but a dtype is ignored (the tables stay float32)."""
        device, _, non_blocking, _ = torch._C._nn._parse_to(*args, **kwargs)
        return self if device is None else super().to(device=device, non_blocking=non_blocking)


class CLIPEmbeddingBank(_Float32Bank):
    """Paired CLIP text/image embeddings (unit norm) for Procrustes alignment and the blending loss.

    Args:
        num_pairs (`int`): number of pairs ``N``.
        embed_dim (`int`): CLIP projection dimension ``d`` (must equal the pipeline's ``projection_dim``).

    Attributes:
        text_embeds (`torch.Tensor` of shape `(N, d)`), image_embeds (`torch.Tensor` of shape `(N, d)`): frozen.
    """

    _keep_in_fp32_modules: ClassVar[list[str]] = ["text_embeds", "image_embeds"]

    @register_to_config
    def __init__(self, num_pairs: int, embed_dim: int):
        super().__init__()
        if num_pairs < 1 or embed_dim < 1:
            raise ValueError(f"`num_pairs` and `embed_dim` have to be >= 1, but are {num_pairs} and {embed_dim}")
        self.text_embeds = nn.Parameter(torch.zeros(num_pairs, embed_dim), requires_grad=False)
        self.image_embeds = nn.Parameter(torch.zeros(num_pairs, embed_dim), requires_grad=False)

    @classmethod
    def from_embeddings(cls, text_embeds: torch.Tensor, image_embeds: torch.Tensor) -> CLIPEmbeddingBank:
        """Build a bank from `(N, d)` text and image embeddings (they are L2-normalised here).

        Raises:
            ValueError: if the shapes differ or are not 2-D.
        """
        if text_embeds.dim() != 2 or text_embeds.shape != image_embeds.shape:
            raise ValueError(
                "`text_embeds` and `image_embeds` have to be 2-D with the same shape (N, d), but are "
                f"{tuple(text_embeds.shape)} and {tuple(image_embeds.shape)}"
            )
        bank = cls(num_pairs=text_embeds.shape[0], embed_dim=text_embeds.shape[1])
        with torch.no_grad():
            bank.text_embeds.copy_(F.normalize(text_embeds.float(), dim=-1))
            bank.image_embeds.copy_(F.normalize(image_embeds.float(), dim=-1))
        return bank


class INRBank(_Float32Bank):
    """Pre-fitted INR initialisations keyed by CLIP image embeddings (the robust-initialisation database).

    Args:
        num_entries (`int`): ``N``.
        embed_dim (`int`): CLIP projection dimension of the keys.
        num_parameters (`int`): parameters of one INR.
        inr_config (`dict`): the architecture of the stored INRs (``FinerINR.config()``); the pipeline refuses a bank
            whose architecture differs from its own.

    Attributes:
        key_embeds (`torch.Tensor` of shape `(N, embed_dim)`): unit-norm CLIP image embeddings of the fitted images.
        inr_parameters (`torch.Tensor` of shape `(N, num_parameters)`): ``FinerINR.flat_parameters()`` rows.
    """

    _keep_in_fp32_modules: ClassVar[list[str]] = ["key_embeds", "inr_parameters"]

    @register_to_config
    def __init__(self, num_entries: int, embed_dim: int, num_parameters: int, inr_config: dict | None = None):
        super().__init__()
        if min(num_entries, embed_dim, num_parameters) < 1:
            raise ValueError(
                "`num_entries`, `embed_dim` and `num_parameters` have to be >= 1, but are "
                f"{num_entries}, {embed_dim} and {num_parameters}"
            )
        self.key_embeds = nn.Parameter(torch.zeros(num_entries, embed_dim), requires_grad=False)
        self.inr_parameters = nn.Parameter(torch.zeros(num_entries, num_parameters), requires_grad=False)
