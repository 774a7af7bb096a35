"""The entropy-based granularity router of MemGAS (arXiv 2505.19549, Sec. 3.3; ``multi_granularity_routing`` in the
authors' ``run_retrieval.py``)."""

from __future__ import annotations

import math

import torch


def granularity_entropy(similarities: torch.Tensor, temperature: float = 0.1) -> torch.Tensor:
    r"""Shannon entropy (nats) of :math:`\mathrm{softmax}(s/\tau)` over the last dimension.

    Args:
        similarities (`torch.Tensor` of shape `(..., N)`): query-to-memory similarities of one granularity.
        temperature (`float`, *optional*, defaults to `0.1`): :math:`\tau` (> 0).

    Returns:
        `torch.Tensor` of shape `(...)`: :math:`H = -\sum_i p_i \log p_i`, in ``[0, log N]``.
    """
    if not temperature > 0:
        raise ValueError(f"`temperature` must be > 0, got {temperature}")
    log_p = torch.log_softmax(similarities.float() / temperature, dim=-1)
    return -(log_p.exp() * log_p).sum(-1)


def entropy_router_weights(
    similarities: torch.Tensor, temperature: float = 0.1, normalization: str = "log_n"
) -> torch.Tensor:
    r"""Granularity weights :math:`w_g = (1 - \tilde H_g) / \sum_{g'} (1 - \tilde H_{g'})`.

    A granularity whose similarity distribution is peaked (low entropy: one memory stands out) gets more weight than
    one whose distribution is flat.

    Args:
        similarities (`torch.Tensor` of shape `(..., G, N)`): similarities of the query to the N memories of each of
            the G granularities (MemGAS has one memory per session and granularity, so N is shared).
        temperature (`float`, *optional*, defaults to `0.1`): softmax temperature :math:`\tau` [code].
        normalization (`str`, *optional*, defaults to `"log_n"`): ``"log_n"`` uses :math:`\tilde H_g = H_g/\log N`
            (the spec's deviation, [reconstruction]: weights in [0, 1]); ``"none"`` uses the raw :math:`H_g` as the
            code does, which gives negative or unstable weights once :math:`\log N > 1`.

    Returns:
        `torch.Tensor` of shape `(..., G)`, summing to 1 over G. When every :math:`1-\tilde H_g` is 0 (all
        distributions uniform, or N = 1 under ``"none"``) the limit is no preference, and the weights are 1/G.

    Raises:
        ValueError: for an unknown ``normalization`` or a ``similarities`` tensor with fewer than 2 dimensions.
    """
    if normalization not in ("log_n", "none"):
        raise ValueError(f"`normalization` must be 'log_n' or 'none', got {normalization!r}")
    if similarities.dim() < 2:
        raise ValueError(f"`similarities` must have shape (..., G, N), got {tuple(similarities.shape)}")
    entropy = granularity_entropy(similarities, temperature)  # (..., G)
    n = similarities.shape[-1]
    if normalization == "log_n":
        entropy = entropy / math.log(n) if n > 1 else torch.zeros_like(entropy)
    confidence = 1.0 - entropy
    total = confidence.sum(-1, keepdim=True)
    uniform = torch.full_like(confidence, 1.0 / confidence.shape[-1])
    degenerate = total.abs() < 1e-12
    return torch.where(degenerate, uniform, confidence / torch.where(degenerate, torch.ones_like(total), total))
