"""Differentiable colour / scale / shear augmentations for CLIP^-1's augmentation averaging (arXiv:2505.23161).

``e*_i = normalise(mean_k theta_I(augment_k(x)))``. The augmentations are plain torch ops (``affine_grid`` +
``grid_sample`` and colour arithmetic) drawn from an explicit ``torch.Generator``, so a seed fixes the whole run.
kornia would fit too, but draws its random parameters from the global RNG, and this file is copied into saved
pipeline folders for remote-code loading, where it should need nothing beyond torch. Ranges are [reconstruction].
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _uniform(n: int, generator, device, low: float, high: float) -> torch.Tensor:
    gen_device = generator.device if generator is not None else device
    return (torch.rand(n, generator=generator, device=gen_device) * (high - low) + low).to(device)


def augment_images(
    images: torch.Tensor,
    num_augmentations: int,
    size: int,
    strength: float = 1.0,
    scale_range: float = 0.2,
    shear_range: float = 0.2,
    translate_range: float = 0.1,
    color_range: float = 0.2,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Random augmented views of each image, resized to ``size x size`` for the CLIP vision tower.

    Each view gets a random zoom ``1 +- strength * scale_range``, shear ``+- strength * shear_range``, translation
    ``+- strength * translate_range`` (fraction of the half-width), and brightness, contrast and saturation factors
    ``1 +- strength * color_range``. With ``strength == 0`` every view is the resized image itself.

    Args:
        images (`torch.Tensor` of shape `(batch, 3, height, width)`), values in ``[0, 1]``.
        num_augmentations (`int`): views per image ``n`` (>= 1).
        size (`int`): output side (the CLIP ``image_size``).
        generator (`torch.Generator`, *optional*): RNG of the random parameters.

    Returns:
        `torch.Tensor` of shape `(batch * n, 3, size, size)` in ``[0, 1]``, views of image ``b`` at rows
        ``b * n ... b * n + n - 1``.
    """
    if num_augmentations < 1:
        raise ValueError(f"`num_augmentations` has to be >= 1, but is {num_augmentations}")
    x = images
    if x.shape[-2:] != (size, size):
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False, antialias=True)
    x = x.repeat_interleave(num_augmentations, dim=0)
    if strength == 0:
        return x
    n, device, dtype = x.shape[0], x.device, x.dtype

    def draw(r):
        return _uniform(n, generator, device, -strength * r, strength * r).to(dtype)

    zoom = 1.0 + draw(scale_range)
    shear = draw(shear_range)
    tx, ty = draw(translate_range), draw(translate_range)
    theta = torch.zeros(n, 2, 3, device=device, dtype=dtype)
    theta[:, 0, 0] = 1.0 / zoom
    theta[:, 0, 1] = shear / zoom
    theta[:, 1, 1] = 1.0 / zoom
    theta[:, 0, 2] = tx
    theta[:, 1, 2] = ty
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    x = F.grid_sample(x, grid, mode="bilinear", padding_mode="reflection", align_corners=False)

    brightness = 1.0 + draw(color_range)
    contrast = 1.0 + draw(color_range)
    saturation = 1.0 + draw(color_range)
    x = x * brightness.view(-1, 1, 1, 1)
    mean = x.mean(dim=(1, 2, 3), keepdim=True)
    x = (x - mean) * contrast.view(-1, 1, 1, 1) + mean
    gray = (0.299 * x[:, 0:1] + 0.587 * x[:, 1:2] + 0.114 * x[:, 2:3]).expand_as(x)
    x = gray + (x - gray) * saturation.view(-1, 1, 1, 1)
    return x.clamp(0.0, 1.0)
