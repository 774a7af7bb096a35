# This file is copied verbatim into folders written by `CLIPInversionPipeline.save_pretrained` so that
# `DiffusionPipeline.from_pretrained(folder, trust_remote_code=True)` works without hfx installed. Keep its imports to
# torch / numpy / PIL / transformers / diffusers and the sibling modules it imports relatively.
"""CLIP^-1: image synthesis with a frozen CLIP only ("Implicit Inversion turns CLIP into a Decoder", arXiv:2505.23161).

The pipeline optimises the weights of a frequency-aware implicit neural representation (FINER INR) until the CLIP
embedding of the rendered (augmented) image matches a target embedding: the Procrustes-aligned text embedding for
text-to-image, an image embedding for reconstruction, or a style prompt plus a content image for style transfer.
CLIP is never updated; there is no generator or decoder.
"""

import json
import math
import numbers
import operator
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import numpy as np
import PIL.Image
import torch
import torch.nn.functional as F
from diffusers import DiffusionPipeline
from diffusers.models.modeling_utils import ModelMixin
from diffusers.utils import replace_example_docstring

from .augment import augment_images
from .banks import CLIPEmbeddingBank, INRBank
from .inr import OUTPUT_ACTIVATIONS, FinerINR, coordinate_grid, fit_inr, gaussian_blur
from .pipeline_output import CLIPInversionPipelineOutput
from .procrustes import blend_target, cosine_distance, procrustes_align, retrieve
from .schedules import gaussian_layer_lrs


SOURCE_FILES = (
    "pipeline_clip_inversion.py",
    "inr.py",
    "schedules.py",
    "procrustes.py",
    "augment.py",
    "banks.py",
    "pipeline_output.py",
)
BANK_COMPONENTS = ("embedding_bank", "inr_bank")
OUTPUT_TYPES = ("pil", "np", "pt")
INR_BANK_INITS = ("per_image", "nearest")


def as_int(name: str, value, minimum: int = 1) -> int:
    """``value`` as a Python ``int`` >= ``minimum``: any integer-like (``int``, ``np.int64``, a 0-d integer tensor; not
    ``bool``). Raises ``ValueError`` naming the argument otherwise."""
    if isinstance(value, (bool, np.bool_)) or (torch.is_tensor(value) and value.dtype == torch.bool):
        raise ValueError(f"`{name}` has to be an integer >= {minimum}, but is {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise ValueError(f"`{name}` has to be an integer >= {minimum}, but is {value!r}") from None
    if number < minimum:
        raise ValueError(f"`{name}` has to be an integer >= {minimum}, but is {value!r}")
    return int(number)


def as_float(name: str, value, minimum: float = 0.0, strict: bool = False) -> float:
    """``value`` as a finite Python ``float`` >= ``minimum`` (> with ``strict``): any real number (``float``,
    ``np.float32``, ``int``; not ``bool``). Raises ``TypeError`` for other types and ``ValueError`` for values out of
    range, NaN and inf (either would turn the image into NaN), naming the argument."""
    relation = ">" if strict else ">="
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"`{name}` has to be a finite float {relation} {minimum}, but is {value!r}")
    number = float(value)
    if not math.isfinite(number) or number < minimum or (strict and number == minimum):
        raise ValueError(f"`{name}` has to be a finite float {relation} {minimum}, but is {value!r}")
    return number


EXAMPLE_DOC_STRING = """
    Examples:
        ```py
        >>> import torch
        >>> from transformers import CLIPModel, CLIPProcessor
        >>> from hfx.pipelines.clip_inversion import CLIPInversionPipeline

        >>> clip = CLIPModel.from_pretrained("openai/clip-vit-base-patch32")
        >>> processor = CLIPProcessor.from_pretrained("openai/clip-vit-base-patch32")
        >>> pipe = CLIPInversionPipeline(clip_model=clip, processor=processor)
        >>> out = pipe("a red apple on a table", num_inference_steps=400, generator=torch.Generator().manual_seed(0))
        >>> out.images[0].save("apple.png")
        >>> float(out.clip_similarity[0])  # cosine similarity of the final image to the target embedding
        ```
"""


@torch.no_grad()
def realign_tensors(module: torch.nn.Module | None, alignment: int = 64) -> None:
    """Copy parameters and buffers whose storage is not ``alignment``-byte aligned into fresh memory (same values).

    Weights loaded from safetensors can live in memory-mapped storage at arbitrary byte offsets, and CPU BLAS picks
    different kernels for unaligned operands, so a reloaded CLIP computed embeddings that differed from the saved
    pipeline's by ~1e-7, and images drifted by ~1e-5 after a few steps. Re-allocating makes save -> load exact.
    """
    if module is None:
        return
    for tensor in [*module.parameters(), *module.buffers()]:
        if tensor.numel() and tensor.data_ptr() % alignment:
            tensor.data = tensor.data.clone()


# the artifact type of a saved pipeline folder (hfx.utils.artifacts.artifact_type reads it from model_index.json)
PIPELINE_TYPE = "diffusers:CLIPInversionPipeline"


class CLIPInversionPipeline(DiffusionPipeline):
    r"""
    Pipeline for image synthesis by inverting a frozen CLIP through an implicit neural representation (CLIP^-1).

    This model inherits from [`DiffusionPipeline`]. Check the superclass documentation for the generic methods
    implemented for all pipelines (downloading, saving, running on a particular device, etc.).

    Method (D'Orazio et al., "Implicit Inversion turns CLIP into a Decoder", https://huggingface.co/papers/2505.23161):
    a FINER INR ``f_phi`` renders the image; each step averages the CLIP image embeddings of ``num_augmentations``
    augmented views (``e*_i``), and Adam minimises ``(1 - cos(e*_i, e_t2i)) + beta (1 - cos(e*_i, e*_img))`` with
    per-layer learning rates from a coarse-to-fine Gaussian sweep. With an ``embedding_bank``, ``e_t2i`` is the
    prompt embedding rotated by a per-prompt Orthogonal Procrustes map fitted on its ``procrustes_k`` nearest
    text/image pairs, and ``e*_img`` is a softmax blend of the ``blend_k`` nearest real-image embeddings; with an
    ``inr_bank`` the INR starts from the pre-fitted (AWP, blurred-image) INR nearest to the target. Without banks the
    pipeline runs "plain CLIP^-1" (random init, ``R = I``, ``beta = 0``).

    Reconstructed settings (the spec's confidence is low; the paper gives only the 400 / 40 steps and ViT-B/32): the
    INR width / depth / ``omega`` / bias scale / output activation (config), and in ``__call__`` the learning rate,
    the sweep width, the augmentations, ``procrustes_k``, ``blend_k``, ``blend_weight`` (beta), ``blend_temperature``,
    the 224 px resolution and Adam. Every one is a named argument with the spec's default.

    Parameters:
        clip_model ([`~transformers.CLIPModel`]): the frozen CLIP (the paper uses ``openai/clip-vit-base-patch32``).
        processor ([`~transformers.CLIPProcessor`]): its tokenizer and image normalisation constants.
        embedding_bank ([`CLIPEmbeddingBank`], *optional*): paired text/image embeddings (Procrustes + blending).
        inr_bank ([`INRBank`], *optional*): pre-fitted INR initialisations keyed by CLIP image embeddings.
        inr_hidden_features (`int`, *optional*, defaults to `256`): INR width [reconstruction].
        inr_hidden_layers (`int`, *optional*, defaults to `5`): FINER layers after the first [reconstruction].
        inr_omega (`float`, *optional*, defaults to `30.0`): FINER ``omega_0`` [code].
        inr_first_bias_scale (`float`, *optional*, defaults to `20.0`): first-layer bias range ``U(-k, k)`` [summary].
        inr_output_activation (`str`, *optional*, defaults to `"sigmoid"`): ``"sigmoid"`` or ``"clamp"`` to map RGB
            into ``[0, 1]`` [reconstruction].

    Banks are always float32 (``pipe.to(torch.bfloat16)`` or ``torch_dtype=`` cast only CLIP): a bf16 INR bank would
    shift the robust initialisation by ~0.05 per weight. The bank arguments are annotated with diffusers'
    ``ModelMixin``: a folder loaded with remote code defines its own ``CLIPEmbeddingBank`` / ``INRBank`` classes, and
    diffusers' type check would otherwise warn ("Expected types for inr_bank") about its own classes.

    Step cost: the default optimisation is exact (see :class:`~hfx.pipelines.clip_inversion.FinerINR`: 2-D GEMMs for
    one image, a fused FINER layer); ``coarse_grid_factor`` and ``min_layer_lr_ratio`` are opt-in speed options that
    change the optimisation (documented in ``__call__``).

    Raises:
        ValueError: if a bank's embedding dimension differs from ``clip_model.config.projection_dim``, or the
            ``inr_bank`` was fitted with a different INR architecture.
        TypeError: if a bank is not a :class:`CLIPEmbeddingBank` / :class:`INRBank` (by class name).
    """

    model_cpu_offload_seq = "clip_model"
    _optional_components: ClassVar[list[str]] = ["embedding_bank", "inr_bank"]
    _callback_tensor_inputs: ClassVar[list[str]] = ["image", "image_embeds", "target_embeds", "loss"]

    def __init__(
        self,
        clip_model,
        processor,
        embedding_bank: ModelMixin | None = None,  # CLIPEmbeddingBank; see the note in the class docstring
        inr_bank: ModelMixin | None = None,  # INRBank
        inr_hidden_features: int = 256,
        inr_hidden_layers: int = 5,
        inr_omega: float = 30.0,
        inr_first_bias_scale: float = 20.0,
        inr_output_activation: str = "sigmoid",
    ):
        super().__init__()
        if not hasattr(clip_model, "get_image_features") or not hasattr(clip_model, "get_text_features"):
            raise TypeError(f"`clip_model` has to be a transformers `CLIPModel`, but is {type(clip_model).__name__}")
        if not callable(processor):
            raise TypeError(f"`processor` has to be a transformers `CLIPProcessor`, but is {type(processor).__name__}")
        if inr_output_activation not in OUTPUT_ACTIVATIONS:
            raise ValueError(
                f"`inr_output_activation` has to be one of {OUTPUT_ACTIVATIONS}, but is {inr_output_activation!r}"
            )
        for module in (clip_model, embedding_bank, inr_bank):
            realign_tensors(module)
        self.register_modules(
            clip_model=clip_model, processor=processor, embedding_bank=embedding_bank, inr_bank=inr_bank
        )
        self.register_to_config(
            inr_hidden_features=inr_hidden_features,
            inr_hidden_layers=inr_hidden_layers,
            inr_omega=float(inr_omega),
            inr_first_bias_scale=float(inr_first_bias_scale),
            inr_output_activation=inr_output_activation,
        )
        self._interrupt = False
        self._check_banks(embedding_bank, inr_bank)

    # ------------------------------------------------------------------ properties and checks
    @property
    def projection_dim(self) -> int:
        """The CLIP embedding dimension ``d``."""
        return int(self.clip_model.config.projection_dim)

    @property
    def clip_image_size(self) -> int:
        """The CLIP vision input side in pixels (renders are resized to it)."""
        return int(self.clip_model.config.vision_config.image_size)

    @property
    def interrupt(self) -> bool:
        """Set ``pipe._interrupt = True`` from a step callback to stop the optimisation early."""
        return self._interrupt

    def inr_config(self) -> dict:
        """The INR architecture of this pipeline, as ``FinerINR.config()`` returns it."""
        return {
            "in_features": 2,
            "out_features": 3,
            "hidden_features": int(self.config.inr_hidden_features),
            "hidden_layers": int(self.config.inr_hidden_layers),
            "omega": float(self.config.inr_omega),
            "first_bias_scale": float(self.config.inr_first_bias_scale),
            "output_activation": self.config.inr_output_activation,
        }

    def make_inr(self, num_images: int = 1, generator: torch.Generator | None = None) -> FinerINR:
        """A freshly initialised :class:`FinerINR` batch with this pipeline's architecture (float32, on its device)."""
        cfg = self.inr_config()
        return FinerINR(
            in_features=cfg["in_features"],
            out_features=cfg["out_features"],
            hidden_features=cfg["hidden_features"],
            hidden_layers=cfg["hidden_layers"],
            omega=cfg["omega"],
            first_bias_scale=cfg["first_bias_scale"],
            output_activation=cfg["output_activation"],
            num_images=num_images,
            generator=generator,
        ).to(self.clip_model.device)

    def _check_banks(self, embedding_bank, inr_bank) -> None:
        d = self.projection_dim
        for name, bank, cls_name in (
            ("embedding_bank", embedding_bank, "CLIPEmbeddingBank"),
            ("inr_bank", inr_bank, "INRBank"),
        ):
            if bank is not None and type(bank).__name__ != cls_name:
                raise TypeError(f"`{name}` has to be a `{cls_name}`, but is {type(bank).__name__}")
        if embedding_bank is not None and int(embedding_bank.config.embed_dim) != d:
            raise ValueError(
                f"`embedding_bank` has embed_dim={embedding_bank.config.embed_dim}, but the CLIP projection_dim is "
                f"{d}; build the bank with this CLIP model."
            )
        if inr_bank is not None:
            if int(inr_bank.config.embed_dim) != d:
                raise ValueError(
                    f"`inr_bank` has embed_dim={inr_bank.config.embed_dim}, but the CLIP projection_dim is {d}; "
                    "build the bank with this CLIP model."
                )
            expected = self.inr_config()
            got = dict(inr_bank.config.inr_config or {})
            if got != expected:
                raise ValueError(f"`inr_bank` was fitted with INR config {got}, but this pipeline uses {expected}.")
            num_params = self.make_inr(1).flat_parameters().shape[1]
            if int(inr_bank.config.num_parameters) != num_params:
                raise ValueError(
                    f"`inr_bank` stores {inr_bank.config.num_parameters} parameters per INR, but this pipeline's INR "
                    f"has {num_params}."
                )

    def set_banks(self, embedding_bank: CLIPEmbeddingBank | None = None, inr_bank: INRBank | None = None):
        """Attach (or replace) banks after construction; they are then saved with the pipeline. Returns ``self``."""
        self._check_banks(embedding_bank, inr_bank)
        modules = {}
        if embedding_bank is not None:
            modules["embedding_bank"] = embedding_bank.to(self.clip_model.device)
        if inr_bank is not None:
            modules["inr_bank"] = inr_bank.to(self.clip_model.device)
        self.register_modules(**modules)
        return self

    @staticmethod
    def _check_positive_int(name: str, value) -> None:
        as_int(name, value)

    def check_inputs(
        self,
        prompt,
        height,
        width,
        num_inference_steps,
        num_images_per_prompt=1,
        prompt_embeds=None,
        output_type="pil",
        learning_rate=5e-4,
        lr_sigma_layers=1.0,
        num_augmentations=8,
        augmentation_strength=1.0,
        procrustes_k=32,
        blend_k=8,
        blend_weight=0.2,
        blend_temperature=0.01,
        generator=None,
        callback_on_step_end_tensor_inputs=None,
    ) -> None:
        """Validate ``__call__`` arguments; raises `ValueError` / `TypeError` naming the argument."""
        for name, value in (
            ("height", height),
            ("width", width),
            ("num_inference_steps", num_inference_steps),
            ("num_images_per_prompt", num_images_per_prompt),
            ("num_augmentations", num_augmentations),
            ("procrustes_k", procrustes_k),
            ("blend_k", blend_k),
        ):
            self._check_positive_int(name, value)
        if prompt is not None and prompt_embeds is not None:
            raise ValueError("Cannot forward both `prompt` and `prompt_embeds`; pass only one of them.")
        if prompt is None and prompt_embeds is None:
            raise ValueError("Provide either `prompt` (a non-empty string or list of strings) or `prompt_embeds`.")
        if prompt is not None:
            prompts = [prompt] if isinstance(prompt, str) else prompt
            if not isinstance(prompts, (list, tuple)) or not all(isinstance(p, str) for p in prompts):
                raise TypeError(f"`prompt` has to be a `str` or a list of `str`, but is {type(prompt).__name__}")
            if len(prompts) == 0 or any(not p.strip() for p in prompts):
                raise ValueError(f"`prompt` has to be a non-empty string (or list of them), but is {prompt!r}")
        if prompt_embeds is not None and (
            not torch.is_tensor(prompt_embeds)
            or prompt_embeds.dim() != 2
            or prompt_embeds.shape[1] != self.projection_dim
        ):
            shape = tuple(prompt_embeds.shape) if torch.is_tensor(prompt_embeds) else type(prompt_embeds).__name__
            raise ValueError(
                f"`prompt_embeds` has to be a tensor of shape (batch_size, {self.projection_dim}), but is {shape}"
            )
        if prompt_embeds is not None and not torch.isfinite(prompt_embeds).all():
            rows = torch.nonzero(~torch.isfinite(prompt_embeds).all(dim=-1)).flatten().tolist()
            raise ValueError(f"`prompt_embeds` has to be finite, but row(s) {rows} hold NaN or inf")
        if prompt_embeds is not None and (prompt_embeds.norm(dim=-1) == 0).any():
            raise ValueError("`prompt_embeds` has a zero row: a target direction needs a non-zero embedding")
        if output_type not in OUTPUT_TYPES:
            raise ValueError(f"`output_type` has to be one of {OUTPUT_TYPES}, but is {output_type!r}")
        for name, value in (
            ("learning_rate", learning_rate),
            ("lr_sigma_layers", lr_sigma_layers),
            ("blend_temperature", blend_temperature),
        ):
            as_float(name, value, 0.0, strict=True)
        for name, value in (("augmentation_strength", augmentation_strength), ("blend_weight", blend_weight)):
            as_float(name, value, 0.0)
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"`generator` has to be a single `torch.Generator`, but is {type(generator).__name__}")
        if callback_on_step_end_tensor_inputs is not None and not all(
            k in self._callback_tensor_inputs for k in callback_on_step_end_tensor_inputs
        ):
            raise ValueError(
                f"`callback_on_step_end_tensor_inputs` has to be in {self._callback_tensor_inputs}, but found "
                f"{[k for k in callback_on_step_end_tensor_inputs if k not in self._callback_tensor_inputs]}"
            )

    # ------------------------------------------------------------------ CLIP encoders
    @staticmethod
    def _features(output) -> torch.Tensor:
        return output if torch.is_tensor(output) else output.pooler_output

    @torch.no_grad()
    def encode_prompt(self, prompt: str | list[str]) -> torch.Tensor:
        """Unit-norm CLIP text embeddings ``theta_T(y)``, shape `(len(prompt), projection_dim)`."""
        prompts = [prompt] if isinstance(prompt, str) else list(prompt)
        max_length = int(self.clip_model.config.text_config.max_position_embeddings)
        inputs = self.processor(
            text=prompts, padding=True, truncation=True, max_length=max_length, return_tensors="pt"
        )
        inputs = {k: v.to(self.clip_model.device) for k, v in inputs.items() if k in ("input_ids", "attention_mask")}
        return F.normalize(self._features(self.clip_model.get_text_features(**inputs)).float(), dim=-1)

    def embed_pixels(self, pixels: torch.Tensor) -> torch.Tensor:
        """CLIP image embeddings (not normalised) of `(N, 3, S, S)` images in ``[0, 1]`` at the CLIP resolution ``S``.

        Normalises with the processor's ``image_mean`` / ``image_std``; differentiable w.r.t. ``pixels``.
        """
        image_processor = self.processor.image_processor
        mean = torch.tensor(image_processor.image_mean, device=pixels.device, dtype=pixels.dtype).view(1, 3, 1, 1)
        std = torch.tensor(image_processor.image_std, device=pixels.device, dtype=pixels.dtype).view(1, 3, 1, 1)
        pixel_values = ((pixels - mean) / std).to(self.clip_model.dtype)
        return self._features(self.clip_model.get_image_features(pixel_values=pixel_values)).float()

    def images_to_tensor(self, image, height: int, width: int) -> torch.Tensor:
        """Convert image(s) into a `(B, 3, height, width)` float tensor in ``[0, 1]`` on the pipeline's device.

        Accepted: PIL image(s); numpy arrays `(H, W, 3)` / `(B, H, W, 3)`; tensors `(3, H, W)` / `(B, 3, H, W)`.
        Arrays and tensors follow one rule: an **integer** dtype (e.g. ``uint8``) is read as 0-255 and divided by 255;
        a **floating** dtype must already lie in ``[0, 1]`` (values within 1e-3 outside are clamped).

        Raises:
            TypeError: for other types or a boolean dtype; ValueError: for the wrong shape, NaN / inf values,
                integers outside 0-255 or floats outside ``[0, 1]``.
        """
        if isinstance(image, PIL.Image.Image):
            image = [image]
        if isinstance(image, (list, tuple)) and len(image) > 0 and all(isinstance(i, PIL.Image.Image) for i in image):
            image = np.stack([np.asarray(i.convert("RGB")) for i in image])  # uint8
        if isinstance(image, np.ndarray):
            if image.ndim == 3:
                image = image[None]
            if image.ndim != 4 or image.shape[-1] != 3:
                raise ValueError(f"`image` arrays have to be (H, W, 3) or (B, H, W, 3), but are {image.shape}")
            if image.dtype == np.bool_ or image.dtype.kind not in "uif":
                raise TypeError(f"`image` arrays have to hold integers (0-255) or floats (0-1), not {image.dtype}")
            image = torch.from_numpy(np.ascontiguousarray(image)).permute(0, 3, 1, 2)
        if not torch.is_tensor(image):
            raise TypeError(
                f"`image` has to be a PIL image, a list of them, a numpy array or a tensor, but is {type(image).__name__}"
            )
        if image.dim() == 3:
            image = image.unsqueeze(0)
        if image.dim() != 4 or image.shape[1] != 3:
            raise ValueError(f"`image` tensors have to be (B, 3, H, W), but are {tuple(image.shape)}")
        if image.dtype == torch.bool or image.is_complex():
            raise TypeError(f"`image` has to hold integers (0-255) or floats (0-1), not {image.dtype}")
        if image.dtype.is_floating_point:
            image = image.float()
            if not torch.isfinite(image).all():
                raise ValueError("`image` holds NaN or inf values")
            low, high = image.min().item(), image.max().item()
            if low < -1e-3 or high > 1 + 1e-3:
                raise ValueError(
                    f"float `image` values have to lie in [0, 1], but span [{low:.4g}, {high:.4g}]; pass uint8 for "
                    "0-255 data (or divide by 255)"
                )
        else:
            low, high = image.min().item(), image.max().item()
            if low < 0 or high > 255:
                raise ValueError(f"integer `image` values are read as 0-255, but span [{low}, {high}]")
            image = image.float() / 255.0
        image = image.to(self.clip_model.device)
        if image.shape[-2:] != (height, width):
            image = F.interpolate(image, size=(height, width), mode="bilinear", align_corners=False, antialias=True)
        return image.clamp(0.0, 1.0)

    @torch.no_grad()
    def encode_image(self, image, height: int = 224, width: int = 224) -> torch.Tensor:
        """Unit-norm CLIP image embeddings of ``image`` (any :meth:`images_to_tensor` input), `(B, projection_dim)`.

        The image goes through the same resize + normalisation as the renders (no augmentation), so a render that
        equals the image has exactly this embedding.
        """
        pixels = self.images_to_tensor(image, height, width)
        size = self.clip_image_size
        pixels = F.interpolate(pixels, size=(size, size), mode="bilinear", align_corners=False, antialias=True)
        return F.normalize(self.embed_pixels(pixels), dim=-1)

    # ------------------------------------------------------------------ banks
    @torch.no_grad()
    def build_embedding_bank(self, captions: list[str], images, height: int = 224, width: int = 224):
        """Encode paired ``captions`` and ``images`` into a :class:`CLIPEmbeddingBank` (not attached; see
        :meth:`set_banks`).

        Raises:
            ValueError: if the numbers of captions and images differ.
        """
        text = self.encode_prompt(list(captions))
        image = self.encode_image(images, height, width)
        if text.shape[0] != image.shape[0]:
            raise ValueError(
                f"`captions` ({text.shape[0]}) and `images` ({image.shape[0]}) have to pair up one to one"
            )
        return CLIPEmbeddingBank.from_embeddings(text.cpu(), image.cpu())

    def build_inr_bank(
        self,
        images,
        height: int = 64,
        width: int = 64,
        num_steps: int = 200,
        learning_rate: float = 1e-3,
        awp_gamma: float = 0.01,
        blur_sigma: float = 2.0,
        generator: torch.Generator | None = None,
    ) -> INRBank:
        """Fit one INR per image to a **blurred** copy with adversarial weight perturbation (the robust init).

        ``min_phi max_{||Delta|| <= gamma ||phi||} MSE(f_{phi+Delta}, blur(x))`` (one ascent step per update), keyed by
        the CLIP image embedding of the unblurred image. ``awp_gamma``, ``blur_sigma`` (pixels at ``height x
        width``), ``num_steps`` and the fitting resolution are [reconstruction] (unknown in the paper).

        Returns:
            :class:`INRBank` (not attached; see :meth:`set_banks`).

        Raises:
            ValueError: non-positive ``height`` / ``width`` / ``num_steps`` or ``learning_rate``, negative
                ``awp_gamma`` / ``blur_sigma``, or bad images (see :meth:`images_to_tensor`).
        """
        height, width, num_steps = as_int("height", height), as_int("width", width), as_int("num_steps", num_steps)
        learning_rate = as_float("learning_rate", learning_rate, 0.0, strict=True)
        awp_gamma, blur_sigma = as_float("awp_gamma", awp_gamma), as_float("blur_sigma", blur_sigma)
        pixels = self.images_to_tensor(images, height, width)
        keys = self.encode_image(pixels, height, width)
        inr = self.make_inr(pixels.shape[0], generator=generator)
        fit_inr(inr, gaussian_blur(pixels, blur_sigma), num_steps, learning_rate, awp_gamma=awp_gamma)
        flat = inr.flat_parameters().detach().cpu()
        bank = INRBank(
            num_entries=flat.shape[0],
            embed_dim=keys.shape[1],
            num_parameters=flat.shape[1],
            inr_config=self.inr_config(),
        )
        with torch.no_grad():
            bank.key_embeds.copy_(keys.cpu())
            bank.inr_parameters.copy_(flat)
        return bank

    def text_targets(
        self, text_embeds: torch.Tensor, use_procrustes: bool = True, procrustes_k: int = 32
    ) -> torch.Tensor:
        """``e_t2i``: the Procrustes-aligned, renormalised text embeddings (or the text embeddings without a bank)."""
        if self.embedding_bank is None or not use_procrustes:
            return F.normalize(text_embeds.float(), dim=-1)
        bank = self.embedding_bank
        targets, _ = procrustes_align(
            text_embeds.float(), bank.text_embeds.float(), bank.image_embeds.float(), procrustes_k
        )
        return targets

    # ------------------------------------------------------------------ optimisation core
    def _optimise(
        self,
        target_embeds: torch.Tensor,
        height: int,
        width: int,
        num_inference_steps: int,
        generator: torch.Generator | None,
        learning_rate: float,
        lr_sigma_layers: float,
        num_augmentations: int,
        augmentation_strength: float,
        blend_k: int,
        blend_weight: float,
        blend_temperature: float,
        use_inr_bank: bool,
        output_type: str,
        return_dict: bool,
        callback_on_step_end: Callable | None,
        callback_on_step_end_tensor_inputs: list[str],
        extra_terms: list | None = None,
        init_images: torch.Tensor | None = None,
        init_fit_steps: int = 0,
        init_ranks: torch.Tensor | None = None,
        coarse_grid_factor: int = 1,
        min_layer_lr_ratio: float = 0.0,
    ):
        coarse_grid_factor = as_int("coarse_grid_factor", coarse_grid_factor)
        min_layer_lr_ratio = as_float("min_layer_lr_ratio", min_layer_lr_ratio)
        if min_layer_lr_ratio >= 1:
            raise ValueError(f"`min_layer_lr_ratio` has to lie in [0, 1), but is {min_layer_lr_ratio!r}")
        device = self.clip_model.device
        if generator is None:
            generator = torch.Generator().manual_seed(int(torch.randint(0, 2**62, (1,)).item()))
        target_embeds = F.normalize(target_embeds.float().to(device), dim=-1)
        batch_size = target_embeds.shape[0]

        terms = [(target_embeds, 1.0)]
        if self.embedding_bank is not None and blend_weight > 0:
            blend_embeds, _ = blend_target(
                target_embeds, self.embedding_bank.image_embeds.float().to(device), blend_k, blend_temperature
            )
            terms.append((blend_embeds, float(blend_weight)))
        terms += list(extra_terms or [])

        inr = self.make_inr(batch_size, generator=generator)
        if self.inr_bank is not None and use_inr_bank:
            keys = self.inr_bank.key_embeds.float().to(device)
            ranks = torch.zeros(batch_size, dtype=torch.long) if init_ranks is None else init_ranks.long().cpu()
            ranked = retrieve(target_embeds, keys, int(ranks.max()) + 1).cpu()  # (B, min(k, N)) nearest first
            entries = ranked[torch.arange(batch_size), ranks % ranked.shape[1]]
            inr.load_flat_parameters(self.inr_bank.inr_parameters[entries.to(self.inr_bank.inr_parameters.device)])
        if init_images is not None and init_fit_steps > 0:
            fit_inr(inr, init_images, init_fit_steps, learning_rate=1e-3)

        num_layers = inr.num_layers
        optimizer = torch.optim.Adam(
            [{"params": inr.layer_parameters(index), "lr": 0.0} for index in range(num_layers)], lr=learning_rate
        )
        size = self.clip_image_size
        coarse_grid = None
        if coarse_grid_factor > 1:
            coarse_shape = (math.ceil(height / coarse_grid_factor), math.ceil(width / coarse_grid_factor))
            coarse_grid = coordinate_grid(*coarse_shape, device=device)
            coarse_pixel = torch.tensor([2.0 / coarse_shape[1], 2.0 / coarse_shape[0]], device=device)  # (x, y)
        self._interrupt = False
        history = []
        requires_grad = [p.requires_grad for p in self.clip_model.parameters()]
        self.clip_model.requires_grad_(False)  # frozen CLIP: gradients flow through it to the pixels only
        try:
            with torch.enable_grad():
                for step in self.progress_bar(range(num_inference_steps)):
                    if self.interrupt:
                        break
                    lrs = gaussian_layer_lrs(step, num_inference_steps, num_layers, learning_rate, lr_sigma_layers)
                    for group, lr in zip(optimizer.param_groups, lrs.tolist()):
                        group["lr"] = lr
                    if min_layer_lr_ratio > 0:  # no gradient (hence no weight-gradient GEMM) for near-frozen layers
                        keep = (lrs >= min_layer_lr_ratio * learning_rate) | (lrs == lrs.max())
                        for index, flag in enumerate(keep.tolist()):
                            for param in inr.layer_parameters(index):
                                param.requires_grad_(flag)
                    if coarse_grid is None:
                        image = inr.render(height, width)
                    else:  # a coarse grid shifted by a random sub-pixel offset; CLIP sees it upsampled
                        jitter = (torch.rand(2, generator=generator) - 0.5).to(device) * coarse_pixel
                        image = inr(coarse_grid + jitter).transpose(1, 2).reshape(batch_size, -1, *coarse_shape)
                    views = augment_images(
                        image, num_augmentations, size, strength=augmentation_strength, generator=generator
                    )
                    feats = self.embed_pixels(views).view(batch_size, num_augmentations, -1).mean(dim=1)
                    image_embeds = F.normalize(feats, dim=-1)
                    loss = sum(weight * cosine_distance(image_embeds, embeds) for embeds, weight in terms)
                    optimizer.zero_grad(set_to_none=True)
                    loss.sum().backward()
                    optimizer.step()
                    history.append(loss.detach().float().cpu())
                    if callback_on_step_end is not None:
                        values = {
                            "image": image.detach(),
                            "image_embeds": image_embeds.detach(),
                            "target_embeds": target_embeds,
                            "loss": loss.detach(),
                        }
                        callback_kwargs = {k: values[k] for k in callback_on_step_end_tensor_inputs}
                        callback_outputs = callback_on_step_end(self, step, step, callback_kwargs) or {}
                        if "target_embeds" in callback_outputs:  # the only input a callback may replace
                            new_target = callback_outputs["target_embeds"]
                            if not torch.isfinite(new_target).all():
                                raise ValueError("the `target_embeds` returned by `callback_on_step_end` hold NaN/inf")
                            target_embeds = F.normalize(new_target.float().to(device), dim=-1)
                            terms[0] = (target_embeds, 1.0)
        finally:
            optimizer.zero_grad(set_to_none=True)
            inr.requires_grad_(True)
            for param, flag in zip(self.clip_model.parameters(), requires_grad):
                param.requires_grad_(flag)

        with torch.no_grad():
            image = inr.render(height, width)
            pixels = F.interpolate(image, size=(size, size), mode="bilinear", align_corners=False, antialias=True)
            final_embeds = F.normalize(self.embed_pixels(pixels), dim=-1)
            similarity = F.cosine_similarity(final_embeds, target_embeds, dim=-1).cpu().numpy()
        self.maybe_free_model_hooks()
        image = image.detach().float().cpu().clamp(0, 1)
        if output_type == "pt":
            images = image
        else:
            images = image.permute(0, 2, 3, 1).numpy()
            if output_type == "pil":
                images = self.numpy_to_pil(images)
        loss_history = torch.stack(history).numpy() if history else np.zeros((0, batch_size), dtype=np.float32)
        if not return_dict:
            return (images, similarity)
        return CLIPInversionPipelineOutput(images=images, clip_similarity=similarity, loss_history=loss_history)

    # ------------------------------------------------------------------ public entry points
    @replace_example_docstring(EXAMPLE_DOC_STRING)
    def __call__(
        self,
        prompt: str | list[str] | None = None,
        height: int = 224,
        width: int = 224,
        num_inference_steps: int = 400,
        num_images_per_prompt: int = 1,
        generator: torch.Generator | None = None,
        learning_rate: float = 5e-4,
        lr_sigma_layers: float = 1.0,
        num_augmentations: int = 8,
        augmentation_strength: float = 1.0,
        use_procrustes: bool = True,
        procrustes_k: int = 32,
        blend_k: int = 8,
        blend_weight: float = 0.2,
        blend_temperature: float = 0.01,
        use_inr_bank: bool = True,
        inr_bank_init: str = "per_image",
        prompt_embeds: torch.Tensor | None = None,
        output_type: str = "pil",
        return_dict: bool = True,
        callback_on_step_end: Callable[..., dict] | None = None,
        callback_on_step_end_tensor_inputs: list[str] | None = None,
        coarse_grid_factor: int = 1,
        min_layer_lr_ratio: float = 0.0,
    ):
        r"""
        Generate images from text by inverting the frozen CLIP.

        Args:
            prompt (`str` or `list[str]`): the text(s); non-empty. Pass `prompt_embeds` instead to give embeddings.
            height (`int`, *optional*, defaults to `224`), width (`int`, *optional*, defaults to `224`): output size
                in pixels [reconstruction]; renders are resized to the CLIP resolution before encoding.
            num_inference_steps (`int`, *optional*, defaults to `400`): optimisation steps (the paper: 400, or 40).
            num_images_per_prompt (`int`, *optional*, defaults to `1`): independent INRs per prompt.
            generator (`torch.Generator`, *optional*): RNG of the INR initialisation and the augmentations; the same
                seed gives the same image.
            learning_rate (`float`, *optional*, defaults to `5e-4`): Adam peak learning rate [reconstruction].
            lr_sigma_layers (`float`, *optional*, defaults to `1.0`): width in layers of the Gaussian sweep
                [reconstruction].
            num_augmentations (`int`, *optional*, defaults to `8`): augmented views averaged per step [reconstruction].
            augmentation_strength (`float`, *optional*, defaults to `1.0`): scales every augmentation range; 0 turns
                augmentation off [reconstruction].
            use_procrustes (`bool`, *optional*, defaults to `True`): align with Procrustes when an `embedding_bank`
                is attached.
            procrustes_k (`int`, *optional*, defaults to `32`): neighbours for Procrustes [reconstruction].
            blend_k (`int`, *optional*, defaults to `8`): neighbours of the blending anchor [reconstruction].
            blend_weight (`float`, *optional*, defaults to `0.2`): beta of the blending loss; used only with an
                `embedding_bank` [reconstruction].
            blend_temperature (`float`, *optional*, defaults to `0.01`): softmax temperature [reconstruction].
            use_inr_bank (`bool`, *optional*, defaults to `True`): start from the nearest INR of `inr_bank` if any.
            inr_bank_init (`str`, *optional*, defaults to `"per_image"`): with `num_images_per_prompt > 1` and an
                `inr_bank`: `"per_image"` starts image j of a prompt from the prompt's (j mod N)-th nearest of the N
                bank INRs, so the images start apart [reconstruction: the paper retrieves one INR per prompt and
                does not say how several images per prompt start]; `"nearest"` starts every image from the nearest
                INR (they then differ only through their augmentations).
            prompt_embeds (`torch.Tensor` of shape `(batch_size, projection_dim)`, *optional*): text embeddings.
            output_type (`str`, *optional*, defaults to `"pil"`): `"pil"`, `"np"` or `"pt"`.
            return_dict (`bool`, *optional*, defaults to `True`): return a
                [`CLIPInversionPipelineOutput`] instead of a tuple.
            callback_on_step_end (`Callable`, *optional*): called as
                `callback_on_step_end(self, step, step, callback_kwargs)` after each optimiser step;
                `callback_kwargs` holds the names in `callback_on_step_end_tensor_inputs`. A returned
                `"target_embeds"` replaces the target; set `pipe._interrupt = True` to stop early.
            callback_on_step_end_tensor_inputs (`list[str]`, *optional*, defaults to `["loss"]`): subset of
                `["image", "image_embeds", "target_embeds", "loss"]`.
            coarse_grid_factor (`int`, *optional*, defaults to `1`): speed option, not exact. With `F > 1` the INR is
                optimised on a grid `F` times coarser in each direction (`ceil(height / F) x ceil(width / F)`),
                shifted each step by a random sub-pixel offset drawn from `generator`, which CLIP sees upsampled;
                the output is rendered at full `height x width`. The callback's `"image"` is the coarse render.
                See `benchmarks/clip_inversion_options.py` for its measured cost and effect.
            min_layer_lr_ratio (`float`, *optional*, defaults to `0.0`): speed option, not exact. At each step, an
                INR layer whose scheduled learning rate is below `min_layer_lr_ratio * learning_rate` gets no
                gradient (its weight-gradient GEMM is skipped, the backward stops below the lowest layer that needs a
                gradient, and its Adam state does not move that step); the layer with the highest learning rate
                always learns. Must lie in `[0, 1)`; `0` is the exact default.

        Examples:

        Returns:
            [`CLIPInversionPipelineOutput`] if `return_dict` is True, otherwise a `tuple` whose first element is the
            images and second the final CLIP similarities.

        Raises:
            ValueError: non-positive `height` / `width` / `num_inference_steps` / ... (integer-likes such as
                `np.int64` are accepted), an empty prompt, both or neither of `prompt` and `prompt_embeds`,
                non-finite `prompt_embeds`, a NaN / inf / non-positive `learning_rate` (or another float argument
                out of range), an unknown `output_type`, `inr_bank_init` or callback input.
            TypeError: a prompt that is not text, or a `generator` that is not a single `torch.Generator`.
        """
        callback_on_step_end_tensor_inputs = callback_on_step_end_tensor_inputs or ["loss"]
        height, width = as_int("height", height), as_int("width", width)
        num_inference_steps = as_int("num_inference_steps", num_inference_steps)
        num_images_per_prompt = as_int("num_images_per_prompt", num_images_per_prompt)
        num_augmentations = as_int("num_augmentations", num_augmentations)
        procrustes_k, blend_k = as_int("procrustes_k", procrustes_k), as_int("blend_k", blend_k)
        if inr_bank_init not in INR_BANK_INITS:
            raise ValueError(f"`inr_bank_init` has to be one of {INR_BANK_INITS}, but is {inr_bank_init!r}")
        self.check_inputs(
            prompt,
            height,
            width,
            num_inference_steps,
            num_images_per_prompt,
            prompt_embeds,
            output_type,
            learning_rate,
            lr_sigma_layers,
            num_augmentations,
            augmentation_strength,
            procrustes_k,
            blend_k,
            blend_weight,
            blend_temperature,
            generator,
            callback_on_step_end_tensor_inputs,
        )
        text_embeds = self.encode_prompt(prompt) if prompt_embeds is None else prompt_embeds
        num_prompts = text_embeds.shape[0]
        text_embeds = text_embeds.to(self.clip_model.device).repeat_interleave(num_images_per_prompt, dim=0)
        targets = self.text_targets(text_embeds, use_procrustes=use_procrustes, procrustes_k=procrustes_k)
        init_ranks = None
        if inr_bank_init == "per_image":
            init_ranks = torch.arange(num_images_per_prompt).repeat(num_prompts)
        return self._optimise(
            targets,
            height,
            width,
            num_inference_steps,
            generator,
            learning_rate,
            lr_sigma_layers,
            num_augmentations,
            augmentation_strength,
            blend_k,
            blend_weight,
            blend_temperature,
            use_inr_bank,
            output_type,
            return_dict,
            callback_on_step_end,
            callback_on_step_end_tensor_inputs,
            init_ranks=init_ranks,
            coarse_grid_factor=coarse_grid_factor,
            min_layer_lr_ratio=min_layer_lr_ratio,
        )

    def reconstruct(
        self,
        image,
        height: int = 224,
        width: int = 224,
        num_inference_steps: int = 400,
        generator: torch.Generator | None = None,
        learning_rate: float = 5e-4,
        lr_sigma_layers: float = 1.0,
        num_augmentations: int = 8,
        augmentation_strength: float = 1.0,
        blend_k: int = 8,
        blend_weight: float = 0.0,
        blend_temperature: float = 0.01,
        use_inr_bank: bool = True,
        output_type: str = "pil",
        return_dict: bool = True,
        callback_on_step_end: Callable[..., dict] | None = None,
        callback_on_step_end_tensor_inputs: list[str] | None = None,
        coarse_grid_factor: int = 1,
        min_layer_lr_ratio: float = 0.0,
    ):
        """Reconstruct ``image`` from its CLIP embedding alone (target = the unit-norm image embedding).

        The INR never sees the pixels: only the CLIP embedding of ``image`` (see :meth:`encode_image`). No
        Procrustes (the target is already an image embedding); blending is off by default (``blend_weight=0``).
        Other arguments as in ``__call__``.

        Returns:
            [`CLIPInversionPipelineOutput`] (or a tuple, see ``__call__``).

        Raises:
            ValueError / TypeError: as ``__call__``, and for images of the wrong shape, dtype or range (see
                :meth:`images_to_tensor`).
        """
        callback_on_step_end_tensor_inputs = callback_on_step_end_tensor_inputs or ["loss"]
        height, width = as_int("height", height), as_int("width", width)
        num_inference_steps = as_int("num_inference_steps", num_inference_steps)
        num_augmentations, blend_k = as_int("num_augmentations", num_augmentations), as_int("blend_k", blend_k)
        self.check_inputs(
            "image",
            height,
            width,
            num_inference_steps,
            1,
            None,
            output_type,
            learning_rate,
            lr_sigma_layers,
            num_augmentations,
            augmentation_strength,
            1,
            blend_k,
            blend_weight,
            blend_temperature,
            generator,
            callback_on_step_end_tensor_inputs,
        )
        targets = self.encode_image(image, height, width)
        return self._optimise(
            targets,
            height,
            width,
            num_inference_steps,
            generator,
            learning_rate,
            lr_sigma_layers,
            num_augmentations,
            augmentation_strength,
            blend_k,
            blend_weight,
            blend_temperature,
            use_inr_bank,
            output_type,
            return_dict,
            callback_on_step_end,
            callback_on_step_end_tensor_inputs,
            coarse_grid_factor=coarse_grid_factor,
            min_layer_lr_ratio=min_layer_lr_ratio,
        )

    def stylize(
        self,
        image,
        style_prompt: str | list[str],
        content_weight: float = 0.5,
        init_fit_steps: int = 100,
        height: int = 224,
        width: int = 224,
        num_inference_steps: int = 400,
        generator: torch.Generator | None = None,
        learning_rate: float = 5e-4,
        lr_sigma_layers: float = 1.0,
        num_augmentations: int = 8,
        augmentation_strength: float = 1.0,
        use_procrustes: bool = True,
        procrustes_k: int = 32,
        blend_k: int = 8,
        blend_weight: float = 0.0,
        blend_temperature: float = 0.01,
        output_type: str = "pil",
        return_dict: bool = True,
        callback_on_step_end: Callable[..., dict] | None = None,
        callback_on_step_end_tensor_inputs: list[str] | None = None,
        coarse_grid_factor: int = 1,
        min_layer_lr_ratio: float = 0.0,
    ):
        """Text-guided style transfer: start from an INR fitted to ``image`` and pull it toward ``style_prompt``.

        [reconstruction] (the paper reports style transfer without its recipe): the INR is first fitted to the
        content image by pixel MSE for ``init_fit_steps`` Adam steps (lr 1e-3), then optimised for
        ``(1 - cos(e*_i, e_t2i(style))) + content_weight * (1 - cos(e*_i, e_content))`` under the usual sweep.
        One style prompt per content image (a single prompt is broadcast).

        Raises:
            ValueError: if ``content_weight < 0``, ``init_fit_steps < 0`` or the numbers of prompts and images differ.
        """
        content_weight = as_float("content_weight", content_weight, 0.0)
        init_fit_steps = as_int("init_fit_steps", init_fit_steps, minimum=0)
        callback_on_step_end_tensor_inputs = callback_on_step_end_tensor_inputs or ["loss"]
        height, width = as_int("height", height), as_int("width", width)
        num_inference_steps = as_int("num_inference_steps", num_inference_steps)
        num_augmentations = as_int("num_augmentations", num_augmentations)
        procrustes_k, blend_k = as_int("procrustes_k", procrustes_k), as_int("blend_k", blend_k)
        self.check_inputs(
            style_prompt,
            height,
            width,
            num_inference_steps,
            1,
            None,
            output_type,
            learning_rate,
            lr_sigma_layers,
            num_augmentations,
            augmentation_strength,
            procrustes_k,
            blend_k,
            blend_weight,
            blend_temperature,
            generator,
            callback_on_step_end_tensor_inputs,
        )
        pixels = self.images_to_tensor(image, height, width)
        prompts = [style_prompt] if isinstance(style_prompt, str) else list(style_prompt)
        if len(prompts) == 1:
            prompts = prompts * pixels.shape[0]
        if len(prompts) != pixels.shape[0]:
            raise ValueError(f"got {len(prompts)} `style_prompt`s for {pixels.shape[0]} images; pass one or one each")
        targets = self.text_targets(self.encode_prompt(prompts), use_procrustes, procrustes_k)
        content = self.encode_image(pixels, height, width)
        extra = [(content, float(content_weight))] if content_weight > 0 else []
        return self._optimise(
            targets,
            height,
            width,
            num_inference_steps,
            generator,
            learning_rate,
            lr_sigma_layers,
            num_augmentations,
            augmentation_strength,
            blend_k,
            blend_weight,
            blend_temperature,
            False,
            output_type,
            return_dict,
            callback_on_step_end,
            callback_on_step_end_tensor_inputs,
            extra_terms=extra,
            coarse_grid_factor=coarse_grid_factor,
            min_layer_lr_ratio=min_layer_lr_ratio,
            init_images=pixels,
            init_fit_steps=init_fit_steps,
        )

    # ------------------------------------------------------------------ save / load
    def save_pretrained(self, save_directory: str | os.PathLike, *args, push_to_hub: bool = False, **kwargs):
        """Save like [`DiffusionPipeline.save_pretrained`], and make the folder self-contained.

        Besides ``clip_model/``, ``processor/``, the optional ``embedding_bank/`` / ``inr_bank/`` and
        ``model_index.json``, the pipeline's source files are copied in and ``model_index.json`` names the class as
        ``["pipeline_clip_inversion", "CLIPInversionPipeline"]`` (each bank folder gets ``banks.py`` and the entry
        ``["banks", <class>]``). So the folder loads with ``CLIPInversionPipeline.from_pretrained(folder)`` (hfx
        installed, no remote code) or ``DiffusionPipeline.from_pretrained(folder, trust_remote_code=True)`` (any
        diffusers install, as diffusers documents for custom pipelines). With ``push_to_hub=True`` the folder is
        uploaded to ``repo_id`` (a keyword argument; defaults to the folder name).
        """
        from hfx.utils.artifacts import check_save_target

        check_save_target(save_directory, PIPELINE_TYPE, who=f"{type(self).__name__}.save_pretrained")
        repo_id = kwargs.pop("repo_id", None)
        token = kwargs.pop("token", None)
        private = kwargs.pop("private", None)
        commit_message = kwargs.pop("commit_message", None)
        super().save_pretrained(save_directory, *args, push_to_hub=False, **kwargs)
        folder = Path(save_directory)
        source = Path(__file__).resolve().parent
        for name in SOURCE_FILES:
            shutil.copyfile(source / name, folder / name)
        index_path = folder / "model_index.json"
        index = json.loads(index_path.read_text())
        index["_class_name"] = ["pipeline_clip_inversion", self.__class__.__name__]
        for component in BANK_COMPONENTS:
            entry = index.get(component)
            if entry and entry[0] is not None:
                index[component] = ["banks", entry[1]]
                shutil.copyfile(source / "banks.py", folder / component / "banks.py")
        index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
        if push_to_hub:
            from huggingface_hub import HfApi

            api = HfApi(token=token)
            repo_id = repo_id or folder.name
            api.create_repo(repo_id, private=private, exist_ok=True)
            api.upload_folder(
                folder_path=str(folder), repo_id=repo_id, commit_message=commit_message or "Upload CLIP^-1 pipeline"
            )

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str | os.PathLike, **kwargs):
        """Load a folder (or Hub repo) written by :meth:`save_pretrained` with this class, without remote code.

        [`DiffusionPipeline.from_pretrained`] would see the self-contained folder's custom ``_class_name`` and ask for
        ``trust_remote_code=True`` even when this class is importable, so this override resolves the folder
        (``huggingface_hub.snapshot_download`` for repo ids, honouring ``cache_dir``, ``revision``, ``token``,
        ``local_files_only`` and ``HF_HUB_OFFLINE``) and loads each component with its own ``from_pretrained``.

        Args:
            pretrained_model_name_or_path (`str` or `os.PathLike`): a local folder or a Hub repo id.
            torch_dtype (`torch.dtype`, *optional*): dtype of the CLIP model (``dtype`` is accepted as an alias); the
                banks stay float32.
            clip_model, processor, embedding_bank, inr_bank (*optional*): components that replace the saved ones.
            **kwargs: config overrides (``inr_hidden_features``, ...) and the download options above.

        Raises:
            ValueError: for unknown keyword arguments, or a folder holding another artifact (naming both) or a corrupt
                file; FileNotFoundError: for a missing local path ("no such folder").
        """
        download_keys = ("cache_dir", "revision", "token", "local_files_only", "force_download")
        download = {k: kwargs.pop(k) for k in download_keys if k in kwargs}
        kwargs.pop("trust_remote_code", None)
        torch_dtype = kwargs.pop("torch_dtype", None) or kwargs.pop("dtype", None)
        from hfx.utils.artifacts import check_load_source

        checks = dict(who=f"{cls.__name__}.from_pretrained", cache_dir=download.get("cache_dir"))
        path = check_load_source(pretrained_model_name_or_path, (PIPELINE_TYPE,), **checks)
        if path is None:  # a Hub repo id that is not cached
            from huggingface_hub import snapshot_download

            path = Path(snapshot_download(str(pretrained_model_name_or_path), **download))
            check_load_source(path, (PIPELINE_TYPE,), **checks)
        index_path = path / "model_index.json"
        if not index_path.is_file():
            raise OSError(f"{path} has no `model_index.json`; is it a folder written by `save_pretrained`?")
        index = json.loads(index_path.read_text())
        components = {}
        from . import banks as banks_module

        for name in ("clip_model", "processor", *BANK_COMPONENTS):
            if name in kwargs:
                components[name] = kwargs.pop(name)
                continue
            entry = index.get(name)
            if not entry or entry[0] is None:
                components[name] = None
                continue
            library, class_name = entry
            if name in BANK_COMPONENTS:
                component_cls = getattr(banks_module, class_name)
                components[name] = component_cls.from_pretrained(path / name)
            else:
                import importlib

                component_cls = getattr(importlib.import_module(library), class_name)
                load_kwargs = {"dtype": torch_dtype} if (name == "clip_model" and torch_dtype is not None) else {}
                components[name] = component_cls.from_pretrained(path / name, **load_kwargs)
        config_keys = (
            "inr_hidden_features",
            "inr_hidden_layers",
            "inr_omega",
            "inr_first_bias_scale",
            "inr_output_activation",
        )
        from hfx.utils.artifacts import check_required_keys

        where = repr(str(pretrained_model_name_or_path))
        check_required_keys(index, config_keys, who=checks["who"], where=where, file="model_index.json")
        config = {k: index[k] for k in config_keys}
        for key in list(kwargs):
            if key in config_keys:
                config[key] = kwargs.pop(key)
        if kwargs:
            raise ValueError(
                f"Unknown keyword arguments {sorted(kwargs)}; allowed: components {('clip_model', 'processor', *BANK_COMPONENTS)}, "
                f"config {config_keys}, torch_dtype / dtype and {download_keys}."
            )
        return cls(**components, **config)
