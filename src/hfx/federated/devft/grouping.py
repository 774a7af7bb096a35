"""Deconfliction-guided layer grouping (DevFT, arXiv 2508.00041, Sec. 3.2): layer similarity, spectral grouping,
contiguous grouping (the "without grouping" ablation) and the anchor of a group.

The paper builds a similarity graph over the decoder layers' parameters and splits it with spectral clustering
(Laplacian eigenmaps + k-means). It does not publish the similarity measure, the graph weights or the anchor rule:
:func:`layer_similarity`, :func:`affinity_matrix` and :func:`pick_anchor` implement **[reconstruction]** choices,
each switchable through :class:`~hfx.federated.devft.DevFTConfig`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .configuration import AFFINITIES, ANCHORS, SIMILARITIES, SIMILARITY_REDUCTIONS, _check_choice


def decoder_layers_path(model) -> str:
    """The dotted name of ``model``'s decoder-layer ``ModuleList`` (``"model.layers"`` for Llama-family models).

    Raises:
        TypeError: if ``model`` has no ``config.num_hidden_layers`` or not exactly one ``ModuleList`` of that length.
    """
    num_layers = getattr(getattr(model, "config", None), "num_hidden_layers", None)
    if not isinstance(num_layers, int):
        raise TypeError(f"`model` must be a transformers model with `config.num_hidden_layers`, got {type(model)}")
    candidates = [
        name
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.ModuleList) and len(module) == num_layers and name.endswith("layers")
    ]
    if len(candidates) != 1:
        raise TypeError(
            f"expected one decoder-layer ModuleList of length {num_layers} in {type(model).__name__}, found "
            f"{candidates}; DevFT supports Llama-family decoders (`model.layers`)"
        )
    return candidates[0]


def decoder_layers(model) -> torch.nn.ModuleList:
    """``model``'s decoder layers (see :func:`decoder_layers_path`)."""
    return model.get_submodule(decoder_layers_path(model))


@torch.no_grad()
def layer_similarity(
    layers: Sequence[torch.nn.Module] | torch.nn.Module,
    measure: str = "weight_cosine",
    reduction: str = "per_tensor_mean",
) -> torch.Tensor:
    """Pairwise similarity of decoder layers computed from their parameters **[reconstruction]**.

    Args:
        layers (`Sequence[nn.Module]` or a transformers model): the L decoder layers (all with the same parameter
            names and shapes), or a model whose layers are found with :func:`decoder_layers`.
        measure (`str`, *optional*, defaults to `"weight_cosine"`): `"weight_cosine"`: ``<w_i, w_j> / (|w_i| |w_j|)``;
            `"sign_agreement"`: ``(1 + mean(sign(c_i) * sign(c_j))) / 2`` with ``c_l = w_l - mean_l w_l`` (the share of
            coordinates whose update directions agree, i.e. 1 - the sign-conflict rate of TIES-merging).
        reduction (`str`, *optional*, defaults to `"per_tensor_mean"`): `"per_tensor_mean"` computes the measure
            tensor by tensor (``q_proj.weight``, ..., the norms) and averages; `"flatten"` computes it once on all of a
            layer's parameters concatenated.

    Returns:
        `torch.Tensor` of shape `(L, L)`, float64, symmetric, ones on the diagonal for `"weight_cosine"`.

    Raises:
        ValueError: for an unknown ``measure`` / ``reduction``, fewer than one layer, or layers whose parameter names
            or shapes differ.
    """
    _check_choice("measure", measure, SIMILARITIES)
    _check_choice("reduction", reduction, SIMILARITY_REDUCTIONS)
    if isinstance(layers, torch.nn.Module) and not isinstance(layers, torch.nn.ModuleList):
        layers = decoder_layers(layers)
    layers = list(layers)
    if not layers:
        raise ValueError("`layers` must hold at least one layer")
    params = [dict(layer.named_parameters()) for layer in layers]
    names = list(params[0])
    for i, p in enumerate(params[1:], start=1):
        if list(p) != names or any(p[n].shape != params[0][n].shape for n in names):
            raise ValueError(f"layer {i} has other parameter names or shapes than layer 0: cannot compare them")
    num_layers = len(layers)
    total = torch.zeros(num_layers, num_layers, dtype=torch.float64)
    numel = 0
    per_tensor = []
    for name in names:
        x = torch.stack([p[name].detach().reshape(-1).to(torch.float64) for p in params])  # (L, n)
        if measure == "weight_cosine":
            gram = x @ x.T
        else:
            s = torch.sign(x - x.mean(dim=0, keepdim=True))
            gram = s @ s.T
        if reduction == "flatten":
            total += gram
            numel += x.shape[1]
        else:
            per_tensor.append(_normalise(gram, measure, x.shape[1]))
    if reduction == "flatten":
        return _normalise(total, measure, numel)
    return torch.stack(per_tensor).mean(dim=0)


def _normalise(gram: torch.Tensor, measure: str, numel: int) -> torch.Tensor:
    if measure == "weight_cosine":
        norms = gram.diagonal().clamp_min(1e-300).sqrt()
        return gram / norms[:, None] / norms[None, :]
    return (1.0 + gram / numel) / 2.0


def affinity_matrix(similarity: torch.Tensor, kind: str = "minmax") -> torch.Tensor:
    """Edge weights of the layer graph from a similarity matrix **[reconstruction]**; zero diagonal.

    Args:
        similarity (`torch.Tensor` of shape `(L, L)`): from :func:`layer_similarity`.
        kind (`str`, *optional*, defaults to `"minmax"`): `"minmax"`: ``(S_ij - min) / (max - min)`` over the
            off-diagonal entries (all ones when they are all equal: every layer equally similar); `"clip"`:
            ``max(S_ij, 0)``.

    Returns:
        `torch.Tensor` of shape `(L, L)`, float64, symmetric, non-negative.

    Raises:
        ValueError: for a non-square or non-finite ``similarity`` or an unknown ``kind``.
    """
    _check_choice("kind", kind, AFFINITIES)
    s = torch.as_tensor(similarity, dtype=torch.float64)
    if s.ndim != 2 or s.shape[0] != s.shape[1]:
        raise ValueError(f"`similarity` must be a square matrix, got shape {tuple(s.shape)}")
    if not torch.isfinite(s).all():
        raise ValueError("`similarity` has non-finite entries")
    s = (s + s.T) / 2
    off = ~torch.eye(s.shape[0], dtype=torch.bool)
    if kind == "clip":
        w = s.clamp_min(0.0)
    elif s.shape[0] < 2:
        w = torch.zeros_like(s)
    else:
        lo, hi = s[off].min(), s[off].max()
        w = (s - lo) / (hi - lo) if hi > lo else torch.ones_like(s)
    return w * off


def spectral_grouping(similarity: torch.Tensor, num_groups: int, seed: int = 0, affinity: str = "minmax") -> list:
    """Split L layers into ``num_groups`` groups by spectral clustering (DevFT Sec. 3.2: Laplacian eigenmaps + k-means).

    The graph weights are :func:`affinity_matrix`; the embedding is the ``num_groups`` eigenvectors of the smallest
    eigenvalues of the symmetric normalised Laplacian ``I - D^-1/2 W D^-1/2``, rows normalised to unit length
    (Ng, Jordan & Weiss 2001), clustered by :class:`sklearn.cluster.KMeans` (``n_init=10``, ``random_state=seed``).

    Args:
        similarity (`torch.Tensor` of shape `(L, L)`): layer similarities.
        num_groups (`int`): K, ``1 <= K <= L``.
        seed (`int`, *optional*, defaults to 0): k-means seed; the grouping is a deterministic function of
            ``(similarity, num_groups, seed)``.
        affinity (`str`, *optional*, defaults to `"minmax"`): see :func:`affinity_matrix`.

    Returns:
        `list[list[int]]`: K non-empty groups of layer indices, each sorted, ordered by mean depth (then first index).

    Raises:
        ValueError: if ``num_groups`` is out of range, or k-means leaves a group empty (layers indistinguishable).
    """
    w = affinity_matrix(similarity, affinity)
    num_layers = w.shape[0]
    if not isinstance(num_groups, int) or not 1 <= num_groups <= num_layers:
        raise ValueError(f"`num_groups` must be an integer in [1, {num_layers}], but is {num_groups!r}")
    if num_groups == num_layers:
        return [[i] for i in range(num_layers)]
    if num_groups == 1:
        return [list(range(num_layers))]
    import numpy as np
    from sklearn.cluster import KMeans

    degree = w.sum(dim=1)
    inv_sqrt = torch.where(degree > 0, degree.clamp_min(1e-300).rsqrt(), torch.zeros_like(degree))
    laplacian = torch.eye(num_layers, dtype=torch.float64) - inv_sqrt[:, None] * w * inv_sqrt[None, :]
    _, vectors = torch.linalg.eigh(laplacian)
    embedding = vectors[:, :num_groups]
    embedding = embedding / embedding.norm(dim=1, keepdim=True).clamp_min(1e-12)
    labels = KMeans(n_clusters=num_groups, n_init=10, random_state=seed).fit_predict(embedding.numpy())
    groups = [sorted(np.flatnonzero(labels == k).tolist()) for k in range(num_groups)]
    if any(not g for g in groups):
        raise ValueError(
            f"spectral grouping left {sum(not g for g in groups)} of {num_groups} groups empty (the layers' "
            "similarities do not separate into that many groups); use `grouping='contiguous'` or fewer layers"
        )
    return _depth_order(groups)


def contiguous_grouping(num_layers: int, num_groups: int) -> list:
    """Equal blocks of adjacent layers (sizes differ by at most one, larger blocks first): the "without grouping"
    ablation, e.g. ``contiguous_grouping(10, 4) == [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]``.

    Raises:
        ValueError: unless ``1 <= num_groups <= num_layers``.
    """
    if not isinstance(num_groups, int) or not 1 <= num_groups <= num_layers:
        raise ValueError(f"`num_groups` must be an integer in [1, {num_layers}], but is {num_groups!r}")
    size, extra = divmod(num_layers, num_groups)
    groups, start = [], 0
    for k in range(num_groups):
        stop = start + size + (1 if k < extra else 0)
        groups.append(list(range(start, stop)))
        start = stop
    return groups


def _depth_order(groups: list) -> list:
    return sorted(groups, key=lambda g: (sum(g) / len(g), g[0]))


def pick_anchor(group: Sequence[int], similarity: torch.Tensor | None = None, rule: str = "medoid") -> int:
    """The anchor layer of a group **[reconstruction]** (the paper fuses "starting from an anchor layer").

    Args:
        group (`Sequence[int]`): layer indices (non-empty).
        similarity (`torch.Tensor` of shape `(L, L)`, *optional*): needed for `"medoid"`.
        rule (`str`, *optional*, defaults to `"medoid"`): `"medoid"`: the member with the highest mean similarity to
            the other members (ties: the shallowest); `"first"`: the shallowest; `"middle"`: the lower median by depth.

    Returns:
        `int`: a member of ``group``.

    Raises:
        ValueError: for an empty group, an unknown rule, or `"medoid"` without ``similarity``.
    """
    _check_choice("rule", rule, ANCHORS)
    members = sorted(int(i) for i in group)
    if not members:
        raise ValueError("`group` must not be empty")
    if len(members) == 1 or rule == "first":
        return members[0]
    if rule == "middle":
        return members[(len(members) - 1) // 2]
    if similarity is None:
        raise ValueError("`similarity` is required for the 'medoid' anchor rule")
    s = torch.as_tensor(similarity, dtype=torch.float64)[members][:, members]
    mean_to_others = (s.sum(dim=1) - s.diagonal()) / (len(members) - 1)
    best = mean_to_others.max()
    return next(m for m, v in zip(members, mean_to_others.tolist()) if v == best)
