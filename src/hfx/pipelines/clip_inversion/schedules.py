"""Coarse-to-fine layer-wise Gaussian learning-rate sweep of CLIP^-1 (arXiv:2505.23161, section 3).

At step ``t`` of ``T`` one INR layer ``l*(t)`` gets the peak learning rate and layer ``l`` gets
``lr_peak * exp(-(l - l*(t))^2 / (2 sigma^2))``. ``l*(t)`` sweeps linearly from the shallowest layer (low
frequencies) to the deepest one (high frequencies). The exact sweep is [reconstruction]: the spec's
``l*(t) = L t / T`` with ``t`` and ``l`` zero-based and the end points pinned, ``l*(t) = (L - 1) t / (T - 1)``, so the
first step peaks on layer 0 and the last step on layer ``L - 1``; ``sigma = 1`` layer.

This file is copied verbatim into saved pipeline folders (remote-code loading), so it imports only torch.
"""

from __future__ import annotations

import torch


def peak_layer(step: int, num_steps: int, num_layers: int) -> float:
    """``l*(t) = (num_layers - 1) * step / (num_steps - 1)`` (0 when ``num_steps == 1``).

    Raises:
        ValueError: if ``num_steps`` or ``num_layers`` is < 1 or ``step`` is outside ``[0, num_steps)``.
    """
    if num_steps < 1 or num_layers < 1:
        raise ValueError(f"`num_steps` and `num_layers` have to be >= 1, but are {num_steps} and {num_layers}")
    if not 0 <= step < num_steps:
        raise ValueError(f"`step` has to be in [0, {num_steps}), but is {step}")
    if num_steps == 1:
        return 0.0
    return (num_layers - 1) * step / (num_steps - 1)


def gaussian_layer_lrs(step: int, num_steps: int, num_layers: int, peak_lr: float, sigma: float = 1.0) -> torch.Tensor:
    """Per-layer learning rates at ``step``.

    Args:
        step (`int`): zero-based step index ``t``.
        num_steps (`int`): total steps ``T``.
        num_layers (`int`): INR layers ``L`` (index 0 is the shallowest).
        peak_lr (`float`): learning rate of layer ``l*(t)``.
        sigma (`float`, *optional*, defaults to `1.0`): Gaussian width in layers [reconstruction].

    Returns:
        `torch.Tensor` of shape `(num_layers,)` (float64): ``peak_lr * exp(-(l - l*(t))^2 / (2 sigma^2))``.

    Raises:
        ValueError: if ``sigma <= 0`` or ``peak_lr < 0`` (or see :func:`peak_layer`).
    """
    if sigma <= 0:
        raise ValueError(f"`sigma` has to be a positive float, but is {sigma}")
    if peak_lr < 0:
        raise ValueError(f"`peak_lr` has to be >= 0, but is {peak_lr}")
    center = peak_layer(step, num_steps, num_layers)
    layers = torch.arange(num_layers, dtype=torch.float64)
    return peak_lr * torch.exp(-((layers - center) ** 2) / (2 * sigma**2))
