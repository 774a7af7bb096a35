"""Frequency-aware implicit neural representation (FINER) used by CLIP^-1 as its image "generator".

The INR maps pixel coordinates ``(x, y)`` in ``[-1, 1]`` to RGB. Every hidden layer uses FINER's variable-periodic
activation ``sin(omega * alpha * z)`` with ``alpha = |z| + 1`` (FINER, Liu et al., CVPR 2024; used by CLIP^-1,
arXiv:2505.23161, section 3). The module holds ``num_images`` independent INRs as batched weight tensors, so a batch of
prompts is optimised in one vectorised pass; Adam is elementwise, so this is exactly equivalent to independent runs.
Each FINER layer runs as one fused autograd function (:class:`_FinerLinear`): same values and gradients as
``finer_activation(x W + b)``, with fewer element-wise passes and the derivative stored in place of ``z``; a single
INR takes 2-D GEMMs instead of a batch-of-one ``baddbmm``.

This file is copied verbatim into saved pipeline folders (remote-code loading), so it imports only torch.
"""

from __future__ import annotations

import itertools
import math

import torch
from torch import nn


OUTPUT_ACTIVATIONS = ("sigmoid", "clamp")


class _FinerSine(torch.autograd.Function):
    """``sin(omega * (|z| + 1) * z)`` with ``alpha`` detached, saving only ``z`` (backward recomputes ``alpha``)."""

    @staticmethod
    def forward(ctx, z, omega):
        ctx.save_for_backward(z)
        ctx.omega = omega
        return z.abs().add_(1.0).mul_(z).mul_(omega).sin_()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        (z,) = ctx.saved_tensors
        omega_alpha = z.abs().add_(1.0).mul_(ctx.omega)
        return torch.mul(omega_alpha, z).cos_().mul_(omega_alpha).mul_(grad), None


def _linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, with_bias: bool = True) -> torch.Tensor:
    """``x W + b`` for a batch of INRs: ``x`` `(P, d_in)` (shared) or `(N, P, d_in)`, ``weight`` `(N, d_in, d_out)`,
    ``bias`` `(N, 1, d_out)` -> `(N, P, d_out)`. One INR (N = 1) takes the 2-D ``addmm`` / ``mm`` path, which is
    faster on CPU than a batch-of-one ``baddbmm`` and gives the same values up to GEMM rounding."""
    if weight.shape[0] == 1:
        x2 = x if x.dim() == 2 else x[0]
        out = torch.addmm(bias[0], x2, weight[0]) if with_bias else torch.mm(x2, weight[0])
        return out.unsqueeze(0)
    x3 = x.expand(weight.shape[0], -1, -1) if x.dim() == 2 else x
    return torch.baddbmm(bias, x3, weight) if with_bias else torch.bmm(x3, weight)


# rows of the point dimension that the fused FINER layer processes per block. Small blocks (~1k rows, ~1 MB) keep
# the element-wise chain in cache and were ~5 % faster single-threaded, but every block is a separate (parallel)
# kernel: on an oversubscribed CPU (a shared 2-core machine at load 20) 49 blocks per 224 x 224 layer made the INR
# 5x slower than the unfused formula. So by default a 224 x 224 render is one block.
FINER_CHUNK_ROWS = 1 << 16


class _FinerLinear(torch.autograd.Function):
    """A fused FINER layer: ``y = sin(omega * alpha * z)``, ``z = x W + b``, ``alpha = |z| + 1`` detached.

    Same values and gradients as ``finer_activation(x W + b, omega)`` (the element-wise formulas are those of
    :class:`_FinerSine`, so they agree up to float rounding of the GEMMs), but faster on CPU:

    * ``z`` is computed without the bias broadcast copy, then the bias add, ``sin`` and the local derivative
      ``dy/dz = omega * alpha * cos(omega * alpha * z)`` are computed in one sweep over blocks of
      ``FINER_CHUNK_ROWS`` points (by default one block up to 256 x 256 points);
    * ``dy/dz`` is stored over ``z`` (the same memory the unfused path saves), so the backward is one multiply plus
      the GEMMs, and a GEMM whose result is not needed (a weight that does not require grad, the coordinates) is
      skipped.
    """

    @staticmethod
    def forward(ctx, x, weight, bias, omega, need_grad=True):
        z = _linear(x, weight, bias, with_bias=False)  # (N, P, d_out), owned here
        out = torch.empty_like(z)
        for start in range(0, z.shape[1], FINER_CHUNK_ROWS):
            rows = slice(start, start + FINER_CHUNK_ROWS)
            zc = z[:, rows].add_(bias)
            alpha = zc.abs().add_(1.0)
            torch.sin(torch.mul(alpha, zc).mul_(omega), out=out[:, rows])  # sin(((|z| + 1) z) omega), as _FinerSine
            if need_grad:
                omega_alpha = alpha.mul_(omega)
                zc.mul_(omega_alpha).cos_().mul_(omega_alpha)  # dy/dz, in place of z
        if need_grad:
            ctx.save_for_backward(x, weight, z)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        x, weight, dydz = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        gz = grad * dydz
        grad_x = grad_w = grad_b = None
        if need_b:
            grad_b = gz.sum(dim=1, keepdim=True)
        if weight.shape[0] == 1:
            x2 = x if x.dim() == 2 else x[0]
            if need_w:
                grad_w = torch.mm(x2.T, gz[0]).unsqueeze(0)
            if need_x:
                grad_x = torch.mm(gz[0], weight[0].T)
                grad_x = grad_x if x.dim() == 2 else grad_x.unsqueeze(0)
        else:
            x3 = x.expand(weight.shape[0], -1, -1) if x.dim() == 2 else x
            if need_w:
                grad_w = torch.bmm(x3.transpose(1, 2), gz)
            if need_x:
                grad_x = torch.bmm(gz, weight.transpose(1, 2))
                grad_x = grad_x.sum(0) if x.dim() == 2 else grad_x
        return grad_x, grad_w, grad_b, None, None


def finer_activation(z: torch.Tensor, omega: float = 30.0, detach_alpha: bool = True) -> torch.Tensor:
    """FINER variable-periodic activation ``sin(omega * alpha * z)`` with ``alpha = |z| + 1``.

    Args:
        z (`torch.Tensor` of any shape): pre-activations ``W z_{i-1} + b``.
        omega (`float`, *optional*, defaults to `30.0`): base frequency (SIREN/FINER ``omega_0``).
        detach_alpha (`bool`, *optional*, defaults to `True`): compute ``alpha`` without gradient, as the FINER
            reference code does; the derivative is then ``omega * alpha * cos(omega * alpha * z)``. This path is a
            fused autograd function that keeps only ``z`` for backward (less memory at 224 x 224 x 256); it is
            first-order only.

    Returns:
        `torch.Tensor` of the same shape as ``z``, in ``[-1, 1]``; exactly 0 where ``z == 0``.
    """
    if detach_alpha:
        return _FinerSine.apply(z, float(omega))
    alpha = z.abs() + 1.0
    return torch.sin(omega * alpha * z)


def coordinate_grid(height: int, width: int, device=None, dtype=torch.float32) -> torch.Tensor:
    """Pixel-centre coordinates in ``[-1, 1]``, row-major, shape ``(height * width, 2)`` ordered ``(x, y)``."""
    ys = (torch.arange(height, device=device, dtype=dtype) + 0.5) / height * 2 - 1
    xs = (torch.arange(width, device=device, dtype=dtype) + 0.5) / width * 2 - 1
    grid_y, grid_x = torch.meshgrid(ys, xs, indexing="ij")
    return torch.stack([grid_x, grid_y], dim=-1).reshape(-1, 2)


def _uniform(shape, bound: float, generator: torch.Generator | None) -> torch.Tensor:
    device = generator.device if generator is not None else None
    return (torch.rand(shape, generator=generator, device=device) * 2 - 1) * bound


class FinerINR(nn.Module):
    """A batch of FINER implicit neural representations ``f_phi: (x, y) -> RGB``.

    Layout (FINER reference code): one FINER layer ``in_features -> hidden_features``, ``hidden_layers`` FINER layers
    ``hidden_features -> hidden_features``, then a linear layer to ``out_features``. The INR therefore has
    ``num_layers = hidden_layers + 2`` linear layers, indexed 0 (shallowest) to ``num_layers - 1`` (the RGB head):
    these are the "layers" of the coarse-to-fine learning-rate sweep.

    Initialisation (FINER reference code [code], first-layer bias scale from a community library [summary]):

    * first layer ``W ~ U(-1/in, 1/in)``, ``b ~ U(-first_bias_scale, first_bias_scale)``;
    * hidden and output layers ``W ~ U(-sqrt(6/in)/omega, sqrt(6/in)/omega)``;
    * hidden and output biases ``b ~ U(-1/sqrt(in), 1/sqrt(in))`` (PyTorch's ``nn.Linear`` default) [reconstruction].

    Args:
        in_features (`int`, *optional*, defaults to `2`): coordinate dimension.
        out_features (`int`, *optional*, defaults to `3`): RGB.
        hidden_features (`int`, *optional*, defaults to `256`): width [reconstruction].
        hidden_layers (`int`, *optional*, defaults to `5`): FINER layers after the first one [reconstruction].
        omega (`float`, *optional*, defaults to `30.0`): ``omega_0`` of every FINER layer [code].
        first_bias_scale (`float`, *optional*, defaults to `20.0`): ``k`` of the first-layer bias ``U(-k, k)``.
        num_images (`int`, *optional*, defaults to `1`): independent INRs held as a batch.
        output_activation (`str`, *optional*, defaults to `"sigmoid"`): maps the RGB head to ``[0, 1]``; one of
            ``"sigmoid"`` or ``"clamp"`` [reconstruction].
        detach_alpha (`bool`, *optional*, defaults to `True`): see :func:`finer_activation`; ``True`` runs each
            FINER layer as the fused autograd function (first-order only), ``False`` as plain autograd ops.
        generator (`torch.Generator`, *optional*): RNG for the initialisation (reproducible images).

    Raises:
        ValueError: if a size is not a positive integer or ``output_activation`` is unknown.
    """

    def __init__(
        self,
        in_features: int = 2,
        out_features: int = 3,
        hidden_features: int = 256,
        hidden_layers: int = 5,
        omega: float = 30.0,
        first_bias_scale: float = 20.0,
        num_images: int = 1,
        output_activation: str = "sigmoid",
        detach_alpha: bool = True,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        for name, value in (
            ("in_features", in_features),
            ("out_features", out_features),
            ("hidden_features", hidden_features),
            ("num_images", num_images),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"`{name}` has to be a positive integer, but is {value!r}")
        if not isinstance(hidden_layers, int) or hidden_layers < 0:
            raise ValueError(f"`hidden_layers` has to be a non-negative integer, but is {hidden_layers!r}")
        if output_activation not in OUTPUT_ACTIVATIONS:
            raise ValueError(
                f"`output_activation` has to be one of {OUTPUT_ACTIVATIONS}, but is {output_activation!r}"
            )
        if omega <= 0:
            raise ValueError(f"`omega` has to be a positive float, but is {omega!r}")
        self.in_features = in_features
        self.out_features = out_features
        self.hidden_features = hidden_features
        self.hidden_layers = hidden_layers
        self.omega = float(omega)
        self.first_bias_scale = float(first_bias_scale)
        self.num_images = num_images
        self.output_activation = output_activation
        self.detach_alpha = detach_alpha
        dims = [in_features] + [hidden_features] * (hidden_layers + 1) + [out_features]
        self.weights = nn.ParameterList(
            [nn.Parameter(torch.empty(num_images, d_in, d_out)) for d_in, d_out in itertools.pairwise(dims)]
        )
        self.biases = nn.ParameterList([nn.Parameter(torch.empty(num_images, 1, d_out)) for d_out in dims[1:]])
        self.reset_parameters(generator)

    @property
    def num_layers(self) -> int:
        """Number of linear layers (``hidden_layers + 2``), i.e. the layers of the learning-rate sweep."""
        return len(self.weights)

    def config(self) -> dict:
        """The architecture as plain values (what an INR bank must match)."""
        return {
            "in_features": self.in_features,
            "out_features": self.out_features,
            "hidden_features": self.hidden_features,
            "hidden_layers": self.hidden_layers,
            "omega": self.omega,
            "first_bias_scale": self.first_bias_scale,
            "output_activation": self.output_activation,
        }

    @torch.no_grad()
    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """FINER initialisation (see the class docstring), drawn from ``generator``."""
        for index, (weight, bias) in enumerate(zip(self.weights, self.biases)):
            fan_in = weight.shape[1]
            if index == 0:
                w_bound, b_bound = 1.0 / fan_in, self.first_bias_scale
            else:
                w_bound, b_bound = math.sqrt(6.0 / fan_in) / self.omega, 1.0 / math.sqrt(fan_in)
            weight.copy_(_uniform(weight.shape, w_bound, generator))
            bias.copy_(_uniform(bias.shape, b_bound, generator))

    def layer_parameters(self, index: int) -> list[nn.Parameter]:
        """The parameters of linear layer ``index`` (weight and bias), for per-layer optimiser groups."""
        return [self.weights[index], self.biases[index]]

    def forward(self, coords: torch.Tensor) -> torch.Tensor:
        """Evaluate the INRs.

        Args:
            coords (`torch.Tensor` of shape `(num_points, in_features)` (shared by the images) or
                `(num_images, num_points, in_features)`).

        Returns:
            `torch.Tensor` of shape `(num_images, num_points, out_features)`, values in ``[0, 1]``.

        Raises:
            ValueError: if 3-D ``coords`` do not have ``num_images`` rows.
        """
        if coords.dim() == 3 and coords.shape[0] != self.num_images:
            raise ValueError(
                f"`coords` of shape {tuple(coords.shape)} has to be (num_points, {self.in_features}) or "
                f"({self.num_images}, num_points, {self.in_features})"
            )
        x = coords.to(self.weights[0].dtype)
        last = self.num_layers - 1
        for index, (weight, bias) in enumerate(zip(self.weights, self.biases)):
            if index == last:
                x = _linear(x, weight, bias)
            elif self.detach_alpha:
                need_grad = torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad or bias.requires_grad)
                x = _FinerLinear.apply(x, weight, bias, self.omega, need_grad)
            else:
                x = finer_activation(_linear(x, weight, bias), self.omega, detach_alpha=False)
        if self.output_activation == "sigmoid":
            return torch.sigmoid(x)
        return x.clamp(0.0, 1.0)

    def render(self, height: int, width: int) -> torch.Tensor:
        """Render every INR on a ``height x width`` pixel grid.

        Returns:
            `torch.Tensor` of shape `(num_images, out_features, height, width)`, values in ``[0, 1]``.
        """
        coords = coordinate_grid(height, width, device=self.weights[0].device, dtype=self.weights[0].dtype)
        out = self.forward(coords)
        return out.transpose(1, 2).reshape(self.num_images, self.out_features, height, width)

    def flat_parameters(self) -> torch.Tensor:
        """All parameters of each INR as one vector: shape `(num_images, num_parameters_per_image)`."""
        parts = []
        for weight, bias in zip(self.weights, self.biases):
            parts += [weight.reshape(self.num_images, -1), bias.reshape(self.num_images, -1)]
        return torch.cat(parts, dim=1)

    @torch.no_grad()
    def load_flat_parameters(self, flat: torch.Tensor) -> None:
        """Inverse of :meth:`flat_parameters`; ``flat`` has shape `(num_images, num_parameters_per_image)`.

        Raises:
            ValueError: if the shape does not match this INR.
        """
        expected = sum(w[0].numel() + b[0].numel() for w, b in zip(self.weights, self.biases))
        if flat.dim() != 2 or flat.shape != (self.num_images, expected):
            raise ValueError(
                f"`flat` has to have shape ({self.num_images}, {expected}) for this INR, but has {tuple(flat.shape)}"
            )
        offset = 0
        for weight, bias in zip(self.weights, self.biases):
            for tensor in (weight, bias):
                size = tensor[0].numel()
                tensor.copy_(flat[:, offset : offset + size].reshape(tensor.shape).to(tensor))
                offset += size


def gaussian_blur(images: torch.Tensor, sigma: float) -> torch.Tensor:
    """Separable Gaussian blur of `(batch, channels, height, width)` images (reflect padding); identity for sigma 0."""
    if sigma <= 0:
        return images
    radius = max(1, math.ceil(3 * sigma))
    x = torch.arange(-radius, radius + 1, device=images.device, dtype=images.dtype)
    kernel = torch.exp(-(x**2) / (2 * sigma**2))
    kernel = kernel / kernel.sum()
    channels = images.shape[1]
    padded = nn.functional.pad(images, (radius, radius, radius, radius), mode="reflect")
    out = nn.functional.conv2d(padded, kernel.view(1, 1, 1, -1).expand(channels, 1, 1, -1), groups=channels)
    return nn.functional.conv2d(out, kernel.view(1, 1, -1, 1).expand(channels, 1, -1, 1), groups=channels)


def fit_inr(
    inr: FinerINR,
    images: torch.Tensor,
    num_steps: int = 200,
    learning_rate: float = 1e-3,
    awp_gamma: float = 0.0,
    progress: bool = False,
) -> list[float]:
    """Fit ``inr`` to ``images`` by pixel MSE, optionally with adversarial weight perturbation (AWP).

    With ``awp_gamma > 0`` each step solves ``min_phi max_{||Delta|| <= gamma ||phi||} MSE(f_{phi+Delta}, images)``
    with one ascent step per tensor and per image: ``Delta = gamma * ||phi|| * g / ||g||`` (the adversarially robust
    initialisation of CLIP^-1, arXiv:2505.23161; radius and one-step inner maximisation are [reconstruction]).

    Args:
        inr (`FinerINR`) with ``num_images == images.shape[0]``.
        images (`torch.Tensor` of shape `(num_images, out_features, height, width)`), values in ``[0, 1]``.
        num_steps (`int`, *optional*, defaults to `200`), learning_rate (`float`, *optional*, defaults to `1e-3`):
            Adam settings [reconstruction].
        awp_gamma (`float`, *optional*, defaults to `0.0`): relative AWP radius; 0 disables AWP.
        progress (`bool`, *optional*, defaults to `False`): show a tqdm bar.

    Returns:
        `list[float]`: the (unperturbed-point or perturbed-point, with AWP) MSE per step.
    """
    if images.dim() != 4 or images.shape[0] != inr.num_images or images.shape[1] != inr.out_features:
        raise ValueError(
            f"`images` has to have shape ({inr.num_images}, {inr.out_features}, height, width), "
            f"but has {tuple(images.shape)}"
        )
    height, width = images.shape[-2:]
    target = images.to(inr.weights[0])
    params = list(inr.parameters())
    optimizer = torch.optim.Adam(params, lr=learning_rate)
    losses = []
    steps = range(num_steps)
    if progress:
        from tqdm.auto import tqdm

        steps = tqdm(steps, desc="fit INR")
    with torch.enable_grad():
        for _ in steps:
            deltas = []
            if awp_gamma > 0:
                loss = ((inr.render(height, width) - target) ** 2).mean(dim=(1, 2, 3)).sum()
                grads = torch.autograd.grad(loss, params)
                with torch.no_grad():
                    for param, grad in zip(params, grads):
                        dims = tuple(range(1, param.dim()))
                        scale = (
                            awp_gamma
                            * param.norm(dim=dims, keepdim=True)
                            / (grad.norm(dim=dims, keepdim=True) + 1e-12)
                        )
                        delta = scale * grad
                        param.add_(delta)
                        deltas.append(delta)
            loss = ((inr.render(height, width) - target) ** 2).mean(dim=(1, 2, 3)).sum()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            with torch.no_grad():
                for param, delta in zip(params, deltas):
                    param.sub_(delta)
            optimizer.step()
            losses.append(loss.item() / inr.num_images)
    optimizer.zero_grad(set_to_none=True)
    return losses
