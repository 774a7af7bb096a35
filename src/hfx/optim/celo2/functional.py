"""Celo2's update rule as batched tensor functions (shared by :class:`~hfx.optim.Celo2` and the meta-trainer).

Source: Moudgil, Knyazev, Belilovsky, *Celo2: Towards Learned Optimization Free Lunch*, ICLR 2026,
`arXiv:2602.19142 <https://huggingface.co/papers/2602.19142>`_, and the authors' MIT-licensed optax reference
``celo2_optax.py`` (``Celo2Transformation``), re-implemented here in torch (no code copied). Markers follow the spec:
[code] = as in the reference, [reconstruction] = our choice, documented and switchable.

Every function works on a *batch* of ``B`` same-shaped tensors stacked on a leading axis: ``p``, ``g`` of shape
``(B, *S)``; accumulators carry one trailing channel per decay. The optimizer stacks same-shaped parameters (one
kernel launch per shape instead of per parameter); the meta-trainer stacks the members of a population, each with its
own meta-weights (``MLPWeights.batched``).

Per tensor of shape ``S`` (``n = len(S) >= 1``) and step [code]:

1. ``g = clip(g, -grad_clip, grad_clip)``; momenta ``m_k = b_k m_k + (1 - b_k) g`` (decays 0.9, 0.99, 0.999);
   ``rms = 0.95 rms + 0.05 g^2``; Adafactor row/column second moments of ``g^2 + 1e-30`` (decays 0.9, 0.99, 0.999)
   over the two largest axes (``d1`` second largest, ``d0`` largest; :func:`factored_dims`), or a full second moment
   when ``n < 2``. All accumulators start at zero; no bias correction.
2. Features: ``g``, ``clip(g, +-0.1)``, ``p``, ``m``, ``rms``, ``m * rsqrt(rms + 1e-8)``, ``rsqrt(rms + 1e-8)``, the
   Adafactor-normalised gradient, ``g * rsqrt(rms + 1e-8)``; for ``n >= 2`` also the row and column moments, their
   ``rsqrt(. + 1e-8)`` and the factored momentum ``m * row_factor * col_factor``. Each feature channel is divided by
   ``sqrt(1e-9 + mean(x^2))`` over the last two axes of ``S``.
3. A per-element MLP (ReLU, 2 hidden layers of 8, 3 outputs); output 0 is the direction ``d``, output 1 the magnitude
   (used only when ``exp_mult != 0``: ``d * exp(exp_mult * mag)``).
4. Celo2 (not Celo2-base) orthogonalises ``d`` with 5 Newton-Schulz steps, coefficients (3.4445, -4.7750, 2.0315),
   after dividing by its Frobenius norm (+1e-8), over the last two axes when ``n >= 2``.
5. ``d`` is divided by its RMS over the last two axes (``sqrt(1e-9 + mean(d^2))``) and multiplied by ``rms_mult``.

The row/column features depend on one index only, so they are never tiled to the full shape: their normalisation
uses the broadcastable tensor (identical to normalising the tiled one) and their first-layer contribution is a small
``(rows, hidden)`` / ``(cols, hidden)`` product added by broadcasting. This is an exact re-arrangement of the
reference's concatenate-then-matmul (up to float rounding), checked against a NumPy re-derivation in the tests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


# feature names in the reference's order (celo2_optax.Celo2Transformation._ff_mod) [code]
FEATURE_NAMES: tuple[str, ...] = (
    "g",
    "clip_g",
    "p",
    "m",
    "rms",
    "m_rsqrt_rms",
    "rsqrt_rms",
    "fac_g",
    "g_rsqrt_rms",
    "row",
    "col",
    "rsqrt_row",
    "rsqrt_col",
    "fac_mom",
)
# features that exist only for tensors with >= 2 axes (the factored case) [code]
FACTORED_ONLY = frozenset({"row", "col", "rsqrt_row", "rsqrt_col", "fac_mom"})
ROW_FEATURES = ("row", "rsqrt_row")
COL_FEATURES = ("col", "rsqrt_col")

NS_COEFFS = (3.4445, -4.7750, 2.0315)
INPUT_NORM_EPS = 1e-9  # _second_moment_normalizer(eps=1e-9) [code]
OUTPUT_NORM_EPS = 1e-9
RSQRT_EPS = 1e-8  # rsqrt(rms + 1e-8), rsqrt(row + 1e-8) [code]
SAFE_RSQRT_MIN = 1e-9  # _safe_rsqrt: rsqrt(max(x, 1e-9)) [code]
FACTORED_EPS = 1e-30  # g * g + 1e-30 in the Adafactor accumulator [code]
FEATURE_CLIP = 0.1  # clip(g, -0.1, 0.1) feature [code]


def factored_dims(shape) -> tuple[int, int] | None:
    """The two axes Adafactor factors over: ``(d1, d0)`` = (second-largest, largest) axis; ``None`` if ``len < 2``.

    Ties keep the earlier axis first (``numpy.argsort`` on short arrays is stable), so a square matrix has
    ``d1 = 0, d0 = 1`` [code].
    """
    shape = tuple(shape)
    if len(shape) < 2:
        return None
    order = sorted(range(len(shape)), key=lambda i: shape[i])
    return order[-2], order[-1]


def feature_widths(names, momentum_decays, rms_decays, adafactor_decays) -> dict[str, int]:
    """Channels of each feature group (e.g. 3 for ``m`` with three momentum decays)."""
    nm, nr, nf = len(momentum_decays), len(rms_decays), len(adafactor_decays)
    widths = {
        "g": 1,
        "clip_g": 1,
        "p": 1,
        "m": nm,
        "rms": nr,
        "m_rsqrt_rms": max(nm, nr),
        "rsqrt_rms": nr,
        "fac_g": nf,
        "g_rsqrt_rms": nr,
        "row": nf,
        "col": nf,
        "rsqrt_row": nf,
        "rsqrt_col": nf,
        "fac_mom": max(nm, nf),
    }
    return {n: widths[n] for n in names}


@dataclass
class MLPWeights:
    """The meta-MLP's tensors, split for the broadcast-aware forward pass (see the module docstring).

    Weights are stored ``(in, out)`` for ``x @ w``. With ``batched=True`` every tensor has a leading population axis
    that matches the batch axis of the features (the meta-trainer's per-member weights).
    """

    w_elem_factored: torch.Tensor  # (Ce_f, H): elementwise features of a factored tensor
    w_elem_plain: torch.Tensor  # (Ce_p, H): elementwise features of a 1-D tensor
    w_row: torch.Tensor | None  # (Cr, H)
    w_col: torch.Tensor | None  # (Cc, H)
    b0: torch.Tensor  # (H,)
    hidden: list[tuple[torch.Tensor, torch.Tensor]]  # [(W (H, H), b (H,))]
    w_out: torch.Tensor  # (H, K)
    b_out: torch.Tensor  # (K,)
    elem_factored: tuple[str, ...]
    elem_plain: tuple[str, ...]
    row: tuple[str, ...]
    col: tuple[str, ...]
    activation: str = "relu"
    batched: bool = False


def split_first_layer(
    w0: torch.Tensor, names, widths: dict[str, int]
) -> tuple[dict[str, torch.Tensor], tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """Slice the first-layer weight ``w0`` (``(..., C, H)``, rows in feature order) into per-group blocks."""
    blocks, start = {}, 0
    for name in names:
        blocks[name] = w0[..., start : start + widths[name], :]
        start += widths[name]
    if start != w0.shape[-2]:
        raise ValueError(f"first-layer weight has {w0.shape[-2]} input rows, the features need {start}")
    elem_plain = tuple(n for n in names if n not in FACTORED_ONLY)
    elem_factored = tuple(n for n in names if n not in ROW_FEATURES + COL_FEATURES)
    row = tuple(n for n in names if n in ROW_FEATURES)
    col = tuple(n for n in names if n in COL_FEATURES)
    return blocks, elem_factored, elem_plain, row, col


def make_mlp_weights(
    layers: list[tuple[torch.Tensor, torch.Tensor]], names, widths, activation: str = "relu", batched: bool = False
) -> MLPWeights:
    """Build :class:`MLPWeights` from ``[(W, b), ...]`` in ``(in, out)`` layout, first layer over all features."""
    (w0, b0), *rest = layers
    (w_out, b_out), hidden = rest[-1], rest[:-1]
    blocks, elem_f, elem_p, row, col = split_first_layer(w0, names, widths)

    def cat(group):
        return torch.cat([blocks[n] for n in group], dim=-2) if group else None

    return MLPWeights(
        w_elem_factored=cat(elem_f),
        w_elem_plain=cat(elem_p),
        w_row=cat(row),
        w_col=cat(col),
        b0=b0,
        hidden=list(hidden),
        w_out=w_out,
        b_out=b_out,
        elem_factored=elem_f,
        elem_plain=elem_p,
        row=row,
        col=col,
        activation=activation,
        batched=batched,
    )


# ------------------------------------------------------------------------------------------------------- accumulators


def init_state(shape, num_momentum: int, num_rms: int, num_adafactor: int, **tensor_kw) -> dict[str, torch.Tensor]:
    """Zero accumulators for one tensor of shape ``shape`` (no batch axis) [code: zeros, no first-gradient init].

    Returns ``{"momentum": (*S, Nm), "rms": (*S, Nr)}`` plus ``"v_row"`` (``S`` without ``d0``, ``Nf``) and
    ``"v_col"`` (``S`` without ``d1``, ``Nf``) when ``len(S) >= 2``, else ``"v"`` (``(*S, Nf)``).
    """
    shape = tuple(shape)
    state = {
        "momentum": torch.zeros(*shape, num_momentum, **tensor_kw),
        "rms": torch.zeros(*shape, num_rms, **tensor_kw),
    }
    dims = factored_dims(shape)
    if dims is None:
        state["v"] = torch.zeros(*shape, num_adafactor, **tensor_kw)
    else:
        d1, d0 = dims
        state["v_row"] = torch.zeros(*[s for i, s in enumerate(shape) if i != d0], num_adafactor, **tensor_kw)
        state["v_col"] = torch.zeros(*[s for i, s in enumerate(shape) if i != d1], num_adafactor, **tensor_kw)
    return state


def _decay(decays, like: torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(decays, dtype=like.dtype, device=like.device)


@dataclass
class Statistics:
    """What the features need after the accumulator update (batched, channel-last)."""

    fac_g: torch.Tensor  # (B, *S, Nf)
    row_factor: torch.Tensor | None = None  # broadcastable to (B, *S, Nf): 1 at d0
    col_factor: torch.Tensor | None = None  # broadcastable: 1 at d1
    row: torch.Tensor | None = None  # v_row unsqueezed at d0
    col: torch.Tensor | None = None  # v_col unsqueezed at d1


def update_accumulators_(
    g: torch.Tensor,
    state: dict[str, torch.Tensor],
    momentum_decays,
    rms_decays,
    adafactor_decays,
) -> Statistics:
    """Update ``state`` (batched: each tensor has a leading ``B`` axis) in place with gradient ``g`` of ``(B, *S)``.

    Returns the :class:`Statistics` the features are built from. ``g`` must already be clipped.
    """
    shape = tuple(g.shape[1:])
    gx = g.unsqueeze(-1)
    bm = _decay(momentum_decays, g)
    state["momentum"].mul_(bm).add_(gx * (1 - bm))
    br = _decay(rms_decays, g)
    state["rms"].mul_(br).add_(gx.square() * (1 - br))
    bf = _decay(adafactor_decays, g)
    grad_sqr = g.square() + FACTORED_EPS
    dims = factored_dims(shape)
    if dims is None:
        v = state["v"]
        v.mul_(bf).add_(grad_sqr.unsqueeze(-1) * (1 - bf))
        return Statistics(fac_g=gx * torch.rsqrt(torch.clamp_min(v + 1e-9, SAFE_RSQRT_MIN)))
    d1, d0 = dims
    v_row, v_col = state["v_row"], state["v_col"]
    v_row.mul_(bf).add_(grad_sqr.mean(dim=1 + d0).unsqueeze(-1) * (1 - bf))
    v_col.mul_(bf).add_(grad_sqr.mean(dim=1 + d1).unsqueeze(-1) * (1 - bf))
    reduced_d1 = d1 - 1 if d1 > d0 else d1
    row_col_mean = v_row.mean(dim=1 + reduced_d1, keepdim=True)
    row_factor = torch.rsqrt(torch.clamp_min(v_row / (row_col_mean + 1e-9), SAFE_RSQRT_MIN)).unsqueeze(1 + d0)
    col_factor = torch.rsqrt(torch.clamp_min(v_col, SAFE_RSQRT_MIN)).unsqueeze(1 + d1)
    return Statistics(
        fac_g=gx * row_factor * col_factor,
        row_factor=row_factor,
        col_factor=col_factor,
        row=v_row.unsqueeze(1 + d0),
        col=v_col.unsqueeze(1 + d1),
    )


# ----------------------------------------------------------------------------------------------------------- features


def norm_dims(ndim: int) -> tuple[int, ...]:
    """Axes (negative, of a channel-last batched tensor) that are the last two axes of ``S`` (``ndim = len(S)``)."""
    return (-3, -2) if ndim >= 2 else (-2,)


def second_moment_normalize_(x: torch.Tensor, dims: tuple[int, ...], eps: float = INPUT_NORM_EPS) -> torch.Tensor:
    """In place: ``x * rsqrt(eps + mean(x^2 over dims))`` per channel [code: _second_moment_normalizer]."""
    return x.mul_(torch.rsqrt(x.square().mean(dim=dims, keepdim=True).add_(eps)))


def elementwise_features(
    names, p: torch.Tensor, g: torch.Tensor, state: dict[str, torch.Tensor], stats: Statistics
) -> torch.Tensor:
    """The per-element features named ``names`` (in order), concatenated: ``(B, *S, C)``, not yet normalised."""
    mom, rms = state["momentum"], state["rms"]
    rsq = torch.rsqrt(rms + RSQRT_EPS)
    out = []
    for name in names:
        if name == "g":
            out.append(g.unsqueeze(-1))
        elif name == "clip_g":
            out.append(g.clamp(-FEATURE_CLIP, FEATURE_CLIP).unsqueeze(-1))
        elif name == "p":
            out.append(p.unsqueeze(-1))
        elif name == "m":
            out.append(mom)
        elif name == "rms":
            out.append(rms)
        elif name == "m_rsqrt_rms":
            out.append(mom * rsq)
        elif name == "rsqrt_rms":
            out.append(rsq)
        elif name == "fac_g":
            out.append(stats.fac_g)
        elif name == "g_rsqrt_rms":
            out.append(g.unsqueeze(-1) * rsq)
        elif name == "fac_mom":
            out.append(mom * stats.row_factor * stats.col_factor)
        else:  # pragma: no cover - guarded by the meta-weights config
            raise ValueError(f"unknown elementwise feature {name!r}")
    return torch.cat(out, dim=-1)


def _broadcast_features(names, base: torch.Tensor) -> torch.Tensor:
    out = []
    for name in names:
        out.append(base if name in ("row", "col") else torch.rsqrt(base + RSQRT_EPS))
    return torch.cat(out, dim=-1)


def _act(x: torch.Tensor, activation: str) -> torch.Tensor:
    return torch.relu_(x) if activation == "relu" else torch.tanh_(x)


def _bmm(x: torch.Tensor, w: torch.Tensor, batched: bool) -> torch.Tensor:
    """``(B, N, C) @ w`` with ``w`` of ``(C, H)`` (shared) or ``(B, C, H)`` (per member)."""
    if batched:
        return torch.bmm(x, w)
    return (x.reshape(-1, x.shape[-1]) @ w).view(*x.shape[:-1], w.shape[-1])


def _normalized_linear(X: torch.Tensor, w: torch.Tensor, dims, batched: bool, ndim: int) -> torch.Tensor:
    """``normalize(X) @ w`` as ``(B, N, H)``: per-channel scales over ``dims``; for ``ndim <= 2`` (one scale per
    member and channel) they are folded into ``w`` instead of rescaling ``X`` (one pass less over the features)."""
    B, C = X.shape[0], X.shape[-1]
    count = math.prod(X.shape[d] for d in dims)
    scale = torch.rsqrt(torch.linalg.vector_norm(X, dim=dims, keepdim=True).square_().div_(count).add_(INPUT_NORM_EPS))
    if ndim <= 2:
        w_eff = scale.reshape(B, C, 1) * w  # (B, C, H), w shared (C, H) or per member (B, C, H)
        return torch.bmm(X.reshape(B, -1, C), w_eff)
    return _bmm((X * scale).reshape(B, -1, C), w, batched)


def _bias(b: torch.Tensor, batched: bool, ndim: int) -> torch.Tensor:
    """Reshape a bias ``(H,)`` / ``(B, H)`` to broadcast against ``(B, *S, H)`` (``ndim = len(S)``)."""
    if batched:
        return b.view(b.shape[0], *([1] * ndim), b.shape[-1])
    return b


def mlp_outputs(
    p: torch.Tensor,
    g: torch.Tensor,
    state: dict[str, torch.Tensor],
    stats: Statistics,
    weights: MLPWeights,
    num_outputs: int = 1,
) -> torch.Tensor:
    """Normalised features -> meta-MLP -> the first ``num_outputs`` outputs, ``(B, *S, num_outputs)``."""
    B, shape = p.shape[0], tuple(p.shape[1:])
    n = len(shape)
    dims = norm_dims(n)
    factored = stats.row is not None
    names = weights.elem_factored if factored else weights.elem_plain
    w_elem = weights.w_elem_factored if factored else weights.w_elem_plain
    E = elementwise_features(names, p, g, state, stats)
    h = _normalized_linear(E, w_elem, dims, weights.batched, n).view(*p.shape, -1)
    del E
    if factored:
        for group, base, w in ((weights.row, stats.row, weights.w_row), (weights.col, stats.col, weights.w_col)):
            if group:
                F = _broadcast_features(group, base)
                h += _normalized_linear(F, w, dims, weights.batched, n).view(*F.shape[:-1], -1)
    h += _bias(weights.b0, weights.batched, n)
    h = _act(h, weights.activation).view(B, -1, h.shape[-1])
    for w, b in weights.hidden:
        h = _act(_bmm(h, w, weights.batched) + (b.unsqueeze(1) if weights.batched else b), weights.activation)
    w_out, b_out = weights.w_out[..., :num_outputs], weights.b_out[..., :num_outputs]
    out = _bmm(h, w_out, weights.batched) + (b_out.unsqueeze(1) if weights.batched else b_out)
    return out.view(*p.shape, num_outputs)


# ------------------------------------------------------------------------------------------------------ orthogonalise


def newton_schulz(x: torch.Tensor, coeffs=NS_COEFFS, steps: int = 5, eps: float = 1e-8) -> torch.Tensor:
    """Quintic Newton-Schulz orthogonalisation over the last two axes [code: orthogonalize_via_newton_schulz].

    ``x`` is transposed to be wide (rows <= columns), divided by its Frobenius norm ``+ eps``, then
    ``A = X X^T; X <- a X + (b A + c A A) X`` ``steps`` times with ``(a, b, c) = coeffs``. The quintic does not
    converge to exactly 1: singular values of a well-conditioned input end in roughly [0.68, 1.14] after 5 steps.

    Args:
        x (`torch.Tensor` of shape `(..., r, c)`): at least 2 axes.
        coeffs (`tuple[float, float, float]`, defaults to `(3.4445, -4.7750, 2.0315)`).
        steps (`int`, defaults to `5`); eps (`float`, defaults to `1e-8`).

    Returns:
        `torch.Tensor` of the same shape and dtype.

    Raises:
        ValueError: if ``x`` has fewer than 2 axes or ``coeffs`` is not 3 numbers.
    """
    if x.ndim < 2:
        raise ValueError(f"`x` must have at least 2 axes, but has shape {tuple(x.shape)}")
    if len(coeffs) != 3:
        raise ValueError(f"`coeffs` must be 3 numbers (a, b, c), but is {coeffs!r}")
    a, b, c = (float(v) for v in coeffs)
    shape = x.shape
    transposed = shape[-2] > shape[-1]
    X = x.reshape(-1, shape[-2], shape[-1])
    if transposed:
        X = X.mT
    X = X / (torch.linalg.matrix_norm(X, keepdim=True) + eps)
    for _ in range(steps):
        A = torch.bmm(X, X.mT)
        Bm = torch.baddbmm(A, A, A, beta=b, alpha=c)
        X = torch.baddbmm(X, Bm, X, beta=a)
    if transposed:
        X = X.mT
    return X.reshape(shape)


# ------------------------------------------------------------------------------------------------------ the whole rule


def celo2_step_direction(
    p: torch.Tensor,
    g: torch.Tensor,
    state: dict[str, torch.Tensor],
    weights: MLPWeights,
    *,
    momentum_decays,
    rms_decays,
    adafactor_decays,
    orthogonalize: bool = True,
    ns_coeffs=NS_COEFFS,
    ns_steps: int = 5,
    ns_eps: float = 1e-8,
    exp_mult: float = 0.0,
    rms_mult: float = 1.0,
    grad_clip: float = 1000.0,
) -> torch.Tensor:
    """Update the accumulators in ``state`` (in place) and return the Celo2 step ``(B, *S)`` before the LR.

    The parameter update is then ``p <- p - lr * step - lr * weight_decay * p`` [code: scale_by_celo2 ->
    add_decayed_weights -> scale_by_learning_rate].

    Args:
        p, g (`torch.Tensor` of shape `(B, *S)`, ``len(S) >= 1``): parameters and gradients, stacked.
        state (`dict[str, torch.Tensor]`): batched accumulators from :func:`init_state` (stacked).
        weights (:class:`MLPWeights`): the meta-MLP (shared, or per batch member when ``weights.batched``).
        orthogonalize (`bool`, defaults to `True`): Newton-Schulz for ``len(S) >= 2`` (Celo2; off for Celo2-base).
        exp_mult (`float`, defaults to `0.0`): magnitude multiplier; 0 uses the direction output only [code].
        rms_mult (`float`, defaults to `1.0`): the step's RMS before the LR [code: rmsmult].
        grad_clip (`float`, defaults to `1000.0`): gradients are clipped to ``[-grad_clip, grad_clip]`` [code].

    Returns:
        `torch.Tensor` of shape `(B, *S)`: the step, with unit RMS (times ``rms_mult``) over the last two axes.
    """
    if p.ndim < 2:
        raise ValueError(f"`p` must be batched with shape (B, *S), len(S) >= 1, but has shape {tuple(p.shape)}")
    g = g.clamp(-grad_clip, grad_clip)
    stats = update_accumulators_(g, state, momentum_decays, rms_decays, adafactor_decays)
    out = mlp_outputs(p, g, state, stats, weights, num_outputs=2 if exp_mult else 1)
    step = out[..., 0]
    if exp_mult:
        step = step * torch.exp(out[..., 1] * exp_mult)
    if orthogonalize and p.ndim >= 3:
        step = newton_schulz(step, ns_coeffs, ns_steps, ns_eps)
    dims = (-2, -1) if p.ndim >= 3 else (-1,)
    step = step * torch.rsqrt(step.square().mean(dim=dims, keepdim=True) + OUTPUT_NORM_EPS)
    if rms_mult != 1.0:
        step = step * rms_mult
    return step


__all__ = [
    "FEATURE_NAMES",
    "NS_COEFFS",
    "MLPWeights",
    "Statistics",
    "celo2_step_direction",
    "factored_dims",
    "feature_widths",
    "init_state",
    "make_mlp_weights",
    "mlp_outputs",
    "newton_schulz",
    "norm_dims",
    "second_moment_normalize_",
    "update_accumulators_",
]
