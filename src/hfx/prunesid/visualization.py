"""`visualize`: the image with the kept visual-token patches highlighted (PIL; saved as PNG on request)."""

from __future__ import annotations

from pathlib import Path

import torch


def visualize(
    image,
    kept_indices,
    grid_size: int,
    has_cls: bool = True,
    image_size: int | None = None,
    center_crop: bool = True,
    dim: float = 0.25,
    save_path: str | Path | None = None,
):
    """Draw the kept patches of a LLaVA-1.5-style square patch grid on the image the vision tower saw.

    The image is resized (shortest edge) and centre-cropped to ``image_size`` px like ``CLIPImageProcessor``, pruned
    patches are dimmed to `dim` brightness and kept patches get a red outline.

    Args:
        image (`PIL.Image.Image` or `numpy.ndarray` `(H, W, 3)` uint8): the input image.
        kept_indices (`torch.Tensor` or sequence of `int`, shape `(N,)`): kept positions; with `has_cls` they index
            ``1 + T`` tokens (0 = CLS, not drawn), else the T patches. Merged tokens are drawn at their
            representative position.
        grid_size (`int`): patches per side (7 for the tiny test model, 24 for CLIP-L/336).
        has_cls (`bool`, *optional*, defaults to `True`).
        image_size (`int`, *optional*): side of the processed image in px; defaults to ``max(336, 16*grid_size)``
            rounded to a multiple of `grid_size`.
        center_crop (`bool`, *optional*, defaults to `True`): crop like CLIP; `False` squashes to a square.
        dim (`float`, *optional*, defaults to 0.25): brightness of pruned patches in ``[0, 1]``.
        save_path (`str` or `Path`, *optional*): write a PNG there.

    Returns:
        `PIL.Image.Image` (RGB).

    Raises:
        ValueError: if an index is outside the grid or `grid_size` / `dim` are invalid.
    """
    import numpy as np
    from PIL import Image, ImageDraw

    if not isinstance(grid_size, int) or grid_size <= 0:
        raise ValueError(f"`grid_size` must be a positive int, but is {grid_size!r}")
    if not 0.0 <= dim <= 1.0:
        raise ValueError(f"`dim` must be in [0, 1], but is {dim}")
    img = Image.fromarray(np.asarray(image)) if not isinstance(image, Image.Image) else image
    img = img.convert("RGB")
    side = image_size or max(336, 16 * grid_size)
    side -= side % grid_size
    if center_crop:
        w, h = img.size
        scale = side / min(w, h)
        img = img.resize((max(side, round(w * scale)), max(side, round(h * scale))), Image.BICUBIC)
        w, h = img.size
        left, top = (w - side) // 2, (h - side) // 2
        img = img.crop((left, top, left + side, top + side))
    else:
        img = img.resize((side, side), Image.BICUBIC)
    idx = torch.as_tensor(kept_indices).flatten().long()
    if has_cls:
        idx = idx[idx > 0] - 1
    if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= grid_size * grid_size):
        raise ValueError(f"`kept_indices` must index a {grid_size}x{grid_size} grid (has_cls={has_cls})")
    mask = torch.zeros(grid_size * grid_size, dtype=torch.bool)
    mask[idx] = True
    cell = side // grid_size
    pixel_mask = mask.reshape(grid_size, grid_size).repeat_interleave(cell, 0).repeat_interleave(cell, 1).numpy()
    arr = np.asarray(img).astype(np.float32)
    arr[~pixel_mask] *= dim
    out = Image.fromarray(arr.clip(0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(out)
    for p in idx.tolist():
        y, x = divmod(p, grid_size)
        draw.rectangle([x * cell, y * cell, (x + 1) * cell - 1, (y + 1) * cell - 1], outline=(255, 40, 40))
    if save_path is not None:
        Path(save_path).parent.mkdir(parents=True, exist_ok=True)
        out.save(save_path, format="PNG")
    return out


__all__ = ["visualize"]
