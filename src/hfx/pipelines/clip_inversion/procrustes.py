"""Orthogonal Procrustes alignment of text to image CLIP embeddings, and the blending target (arXiv:2505.23161).

Embedding matrices follow the spec's convention: ``E_T, E_I`` have shape ``(d, k)`` (one column per retrieved pair).

This file is copied verbatim into saved pipeline folders (remote-code loading), so it imports only torch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def orthogonal_procrustes(text_embeds: torch.Tensor, image_embeds: torch.Tensor) -> torch.Tensor:
    """Solve ``min_R ||R E_T - E_I||_F`` subject to ``R^T R = I``.

    The solution is ``R = U V^T`` with ``U S V^T = SVD(E_I E_T^T)`` (Schoenemann 1966), computed in float64.

    Args:
        text_embeds (`torch.Tensor` of shape `(d, k)`): ``E_T``, paired text embeddings as columns.
        image_embeds (`torch.Tensor` of shape `(d, k)`): ``E_I``, the matching image embeddings.

    Returns:
        `torch.Tensor` of shape `(d, d)`, orthogonal, in the dtype of ``text_embeds``.

    Raises:
        ValueError: if the shapes differ or are not 2-D.
    """
    if text_embeds.dim() != 2 or text_embeds.shape != image_embeds.shape:
        raise ValueError(
            "`text_embeds` and `image_embeds` have to be 2-D of the same shape (d, k), but are "
            f"{tuple(text_embeds.shape)} and {tuple(image_embeds.shape)}"
        )
    m = image_embeds.double() @ text_embeds.double().T
    u, _, vh = torch.linalg.svd(m)
    return (u @ vh).to(text_embeds.dtype)


def retrieve(queries: torch.Tensor, keys: torch.Tensor, k: int) -> torch.Tensor:
    """Indices of the ``k`` keys with the highest cosine similarity to each query: shape `(batch, k)`."""
    if k < 1:
        raise ValueError(f"`k` has to be >= 1, but is {k}")
    k = min(k, keys.shape[0])
    sims = F.normalize(queries.float(), dim=-1) @ F.normalize(keys.float(), dim=-1).T
    return sims.topk(k, dim=-1).indices


def procrustes_align(
    text_embeds: torch.Tensor, bank_text_embeds: torch.Tensor, bank_image_embeds: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-prompt local modality-gap alignment ``e_t2i = normalise(R theta_T(y))``.

    For each prompt embedding, the ``k`` bank pairs whose text embeddings are nearest give ``E_T, E_I`` and ``R``.

    Args:
        text_embeds (`torch.Tensor` of shape `(batch, d)`): prompt embeddings ``theta_T(y)``.
        bank_text_embeds, bank_image_embeds (`torch.Tensor` of shape `(num_pairs, d)`): the paired bank.
        k (`int`): neighbours per prompt (clipped to ``num_pairs``).

    Returns:
        `(e_t2i, rotations)`: unit-norm targets of shape `(batch, d)` and the rotations `(batch, d, d)`.
    """
    indices = retrieve(text_embeds, bank_text_embeds, k)
    rotations = torch.stack(
        [orthogonal_procrustes(bank_text_embeds[idx].T, bank_image_embeds[idx].T) for idx in indices]
    ).to(text_embeds)
    aligned = torch.einsum("bij,bj->bi", rotations, text_embeds)
    return F.normalize(aligned, dim=-1), rotations


def blend_target(
    queries: torch.Tensor, bank_image_embeds: torch.Tensor, k: int, temperature: float = 0.01
) -> tuple[torch.Tensor, torch.Tensor]:
    """The blending anchor ``e*_img = normalise(sum_j softmax_j(cos(q, e_img_j) / tau) e_img_j)``.

    Over the ``k`` bank image embeddings nearest to each query; the temperature ``tau`` is [reconstruction]
    (default CLIP's logit scale, 1/100). The final renormalisation is [reconstruction] (the spec requires a unit
    norm); the bank stores unit-norm embeddings, so with ``k = 1`` the anchor is exactly the retrieved embedding.

    Args:
        queries (`torch.Tensor` of shape `(batch, d)`): unit-norm targets ``e_t2i``.
        bank_image_embeds (`torch.Tensor` of shape `(num_pairs, d)`), unit norm.
        k (`int`): neighbours; temperature (`float`, *optional*, defaults to `0.01`).

    Returns:
        `(e_img, weights)`: anchors `(batch, d)` and the softmax weights `(batch, k)` (rows sum to 1).
    """
    if temperature <= 0:
        raise ValueError(f"`temperature` has to be a positive float, but is {temperature}")
    indices = retrieve(queries, bank_image_embeds, k)
    neighbours = bank_image_embeds[indices].to(queries)  # (batch, k, d)
    sims = torch.einsum("bd,bkd->bk", F.normalize(queries, dim=-1), F.normalize(neighbours, dim=-1))
    weights = torch.softmax(sims / temperature, dim=-1)
    return F.normalize(torch.einsum("bk,bkd->bd", weights, neighbours), dim=-1), weights


def cosine_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``1 - cos(a, b)`` along the last dimension; values in ``[0, 2]``."""
    return 1.0 - F.cosine_similarity(a, b, dim=-1)
