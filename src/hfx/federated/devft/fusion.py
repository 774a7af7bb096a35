"""Differential-based layer fusion (DevFT, arXiv 2508.00041, Sec. 3.3): one representative layer per group.

The paper fuses a group "starting from an anchor layer and adding aggregated parameter differences of the other
members"; the weights are not published. Here, **[reconstruction]**:

    W_fused = W_anchor + mu * sum_{l in group, l != anchor} w_l * (W_l - W_anchor)

with ``w_l = 1/|group|`` (`"uniform"`) or affinity-proportional weights of the same total (`"similarity"`). The result
is a linear combination ``sum_l c_l W_l`` whose coefficients sum to 1: :func:`fusion_coefficients` returns them, so a
stage plan stores plain numbers and building a sub-model is a weighted sum. ``mu = 1`` with uniform weights is the group
mean, ``mu = 0`` the anchor alone; a one-layer group is always the layer itself.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .configuration import FUSION_WEIGHTINGS, _check_choice


def fusion_coefficients(
    group: Sequence[int],
    anchor: int,
    mu: float = 1.0,
    weighting: str = "uniform",
    affinity: torch.Tensor | None = None,
) -> list[float]:
    """Coefficients ``c_l`` (aligned with ``sorted(group)``) such that ``W_fused = sum_l c_l W_l``.

    Args:
        group (`Sequence[int]`): the members' layer indices.
        anchor (`int`): a member of ``group``.
        mu (`float`, *optional*, defaults to 1.0): fusion strength **[reconstruction]**.
        weighting (`str`, *optional*, defaults to `"uniform"`): `"uniform"`: ``w_l = 1/|group|``; `"similarity"`:
            ``w_l`` proportional to ``affinity[anchor, l] + 1e-12`` and summing to ``(|group| - 1)/|group|`` (equal
            affinities give the uniform weights) **[reconstruction]**.
        affinity (`torch.Tensor` of shape `(L, L)`, *optional*): graph weights, required for `"similarity"`.

    Returns:
        `list[float]` of length ``|group|``: ``c_anchor = 1 - mu * sum_{l != anchor} w_l`` and ``c_l = mu * w_l``; they
        sum to 1.

    Raises:
        ValueError: if ``anchor`` is not in ``group``, for an unknown weighting, or `"similarity"` without affinity.
    """
    _check_choice("weighting", weighting, FUSION_WEIGHTINGS)
    members = sorted(int(i) for i in group)
    if anchor not in members:
        raise ValueError(f"`anchor`={anchor} is not a member of `group`={members}")
    size = len(members)
    others = [m for m in members if m != anchor]
    if weighting == "uniform" or not others:
        weights = dict.fromkeys(others, 1.0 / size)
    else:
        if affinity is None:
            raise ValueError("`affinity` is required for `weighting='similarity'`")
        raw = torch.as_tensor(affinity, dtype=torch.float64)[anchor, others] + 1e-12
        scaled = raw / raw.sum() * (size - 1) / size
        weights = dict(zip(others, scaled.tolist()))
    total = sum(weights.values())
    return [1.0 - mu * total if m == anchor else mu * weights[m] for m in members]


@torch.no_grad()
def fuse_tensors(tensors: Sequence[torch.Tensor], coefficients: Sequence[float]) -> torch.Tensor:
    """``sum_l c_l * tensors[l]`` accumulated in float32 (float64 for float64 inputs), returned in the inputs' dtype.

    A single tensor with coefficient 1 is returned as an exact copy (the fusion of a one-layer group is the identity).

    Raises:
        ValueError: for mismatched lengths, no tensors, or tensors of different shapes.
    """
    if len(tensors) != len(coefficients) or not tensors:
        raise ValueError(f"need one coefficient per tensor, got {len(tensors)} tensors and {len(coefficients)}")
    shape, dtype = tensors[0].shape, tensors[0].dtype
    if any(t.shape != shape for t in tensors):
        raise ValueError("all tensors of a group must have the same shape")
    if len(tensors) == 1 and coefficients[0] == 1.0:
        return tensors[0].detach().clone()
    acc_dtype = torch.float64 if dtype == torch.float64 else torch.float32
    out = torch.zeros(shape, dtype=acc_dtype, device=tensors[0].device)
    for t, c in zip(tensors, coefficients):
        out.add_(t.detach().to(acc_dtype), alpha=float(c))
    return out.to(dtype)


@torch.no_grad()
def fuse_layer_states(layer_states: Sequence[dict], coefficients: Sequence[float]) -> dict:
    """Fuse the ``state_dict()`` of each member layer into one state dict (every tensor, norms included).

    Raises:
        ValueError: if the members' state-dict keys differ.
    """
    keys = list(layer_states[0])
    if any(list(s) != keys for s in layer_states[1:]):
        raise ValueError("member layers have different state-dict keys")
    return {k: fuse_tensors([s[k] for s in layer_states], coefficients) for k in keys}
