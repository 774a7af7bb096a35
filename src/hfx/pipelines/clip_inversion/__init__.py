"""CLIP^-1 ("Implicit Inversion turns CLIP into a Decoder", arXiv:2505.23161) as a diffusers pipeline.

Importing this subpackage imports diffusers (``import hfx`` alone does not).

* :class:`CLIPInversionPipeline` -- text-to-image, :meth:`~CLIPInversionPipeline.reconstruct`,
  :meth:`~CLIPInversionPipeline.stylize` with a frozen ``CLIPModel``; :class:`CLIPInversionPipelineOutput`.
* :class:`FinerINR`, :func:`finer_activation`, :func:`fit_inr` -- the frequency-aware INR (FINER).
* :func:`gaussian_layer_lrs`, :func:`peak_layer` -- the coarse-to-fine layer-wise learning-rate sweep.
* :func:`orthogonal_procrustes`, :func:`procrustes_align`, :func:`blend_target` -- modality-gap alignment, blending.
* :func:`augment_images` -- the augmentation-averaging views.
* :class:`CLIPEmbeddingBank`, :class:`INRBank` -- the optional banks saved with the pipeline.
"""

from .augment import augment_images
from .banks import CLIPEmbeddingBank, INRBank
from .inr import FinerINR, coordinate_grid, finer_activation, fit_inr, gaussian_blur
from .pipeline_clip_inversion import CLIPInversionPipeline
from .pipeline_output import CLIPInversionPipelineOutput
from .procrustes import blend_target, cosine_distance, orthogonal_procrustes, procrustes_align, retrieve
from .schedules import gaussian_layer_lrs, peak_layer


__all__ = [
    "CLIPEmbeddingBank",
    "CLIPInversionPipeline",
    "CLIPInversionPipelineOutput",
    "FinerINR",
    "INRBank",
    "augment_images",
    "blend_target",
    "coordinate_grid",
    "cosine_distance",
    "finer_activation",
    "fit_inr",
    "gaussian_blur",
    "gaussian_layer_lrs",
    "orthogonal_procrustes",
    "peak_layer",
    "procrustes_align",
    "retrieve",
]
