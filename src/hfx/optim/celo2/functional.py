"""Celo2's update rule as batched tensor functions (shared by :class:`~hfx.optim.Celo2` and the meta-trainer).

Source: Moudgil, Knyazev, Belilovsky, *Celo2: Towards Learned Optimization Free Lunch*, ICLR 2026,
`arXiv:2602.19142 <https://huggingface.co/papers/2602.19142>`_, and the authors' MIT-licensed optax reference
``celo2_optax.py`` (``Celo2Transformation``), re-implemented here in torch (no code copied). Markers follow the spec:
[code] = as in the reference, [reconstruction] = our choice, documented and switchable.

Every function works on a *batch* of ``B`` same-shaped tensors stacked on a leading axis: ``p``, ``g`` of shape
``(B, *S)``; accumulators and features carry their channels (one per decay) on axis 1, ``(B, C, *S)``, so each
channel is contiguous (the reference keeps channels last; the arithmetic is the same). The optimizer stacks same-shaped parameters (one
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

    Channels come first (so the features of one channel are contiguous): ``{"momentum": (Nm, *S), "rms": (Nr, *S)}``
    plus ``"v_row"`` (``(Nf, *S without d0)``) and ``"v_col"`` (``(Nf, *S without d1)``) when ``len(S) >= 2``, else
    ``"v"`` (``(Nf, *S)``).
    """
    shape = tuple(shape)
    state = {
        "momentum": torch.zeros(num_momentum, *shape, **tensor_kw),
        "rms": torch.zeros(num_rms, *shape, **tensor_kw),
    }
    dims = factored_dims(shape)
    if dims is None:
        state["v"] = torch.zeros(num_adafactor, *shape, **tensor_kw)
    else:
        d1, d0 = dims
        state["v_row"] = torch.zeros(num_adafactor, *[s for i, s in enumerate(shape) if i != d0], **tensor_kw)
        state["v_col"] = torch.zeros(num_adafactor, *[s for i, s in enumerate(shape) if i != d1], **tensor_kw)
    return state


def _decay(decays, like: torch.Tensor, ndim: int) -> torch.Tensor:
    """Decays as a ``(1, C, 1, ..., 1)`` tensor broadcasting against ``(B, C, *S)`` (``ndim = len(S)``)."""
    return torch.tensor(decays, dtype=like.dtype, device=like.device).view(1, -1, *([1] * ndim))


@dataclass
class Statistics:
    """What the features need after the accumulator update (batched, channels second: ``(B, C, *S)``)."""

    fac_g: torch.Tensor  # (B, Nf, *S)
    row_factor: torch.Tensor | None = None  # broadcastable to (B, Nf, *S): size 1 at d0
    col_factor: torch.Tensor | None = None  # size 1 at d1
    row: torch.Tensor | None = None  # v_row unsqueezed at d0
    col: torch.Tensor | None = None  # v_col unsqueezed at d1


def update_accumulators_(
    g: torch.Tensor,
    state: dict[str, torch.Tensor],
    momentum_decays,
    rms_decays,
    adafactor_decays,
) -> Statistics:
    """Update ``state`` (batched: each tensor ``(B, C, ...)``) in place with the gradient ``g`` of ``(B, *S)``.

    Returns the :class:`Statistics` the features are built from. ``g`` must already be clipped.
    """
    shape = tuple(g.shape[1:])
    n = len(shape)
    gx = g.unsqueeze(1)
    g2 = gx.square()
    bm = _decay(momentum_decays, g, n)
    state["momentum"].mul_(bm).add_(gx * (1 - bm))
    br = _decay(rms_decays, g, n)
    state["rms"].mul_(br).add_(g2 * (1 - br))
    bf = _decay(adafactor_decays, g, n)
    grad_sqr = g2.add_(FACTORED_EPS)  # (B, 1, *S); g2 is not used after this
    dims = factored_dims(shape)
    if dims is None:
        v = state["v"]
        v.mul_(bf).add_(grad_sqr * (1 - bf))
        return Statistics(fac_g=gx * torch.rsqrt(torch.clamp_min(v + 1e-9, SAFE_RSQRT_MIN)))
    d1, d0 = dims
    v_row, v_col = state["v_row"], state["v_col"]
    bf_row = bf.view(1, -1, *([1] * (n - 1)))
    v_row.mul_(bf_row).add_(grad_sqr.mean(dim=2 + d0) * (1 - bf_row))
    v_col.mul_(bf_row).add_(grad_sqr.mean(dim=2 + d1) * (1 - bf_row))
    reduced_d1 = d1 - 1 if d1 > d0 else d1
    row_col_mean = v_row.mean(dim=2 + reduced_d1, keepdim=True)
    row_factor = torch.rsqrt(torch.clamp_min(v_row / (row_col_mean + 1e-9), SAFE_RSQRT_MIN)).unsqueeze(2 + d0)
    col_factor = torch.rsqrt(torch.clamp_min(v_col, SAFE_RSQRT_MIN)).unsqueeze(2 + d1)
    return Statistics(
        fac_g=gx * row_factor * col_factor,
        row_factor=row_factor,
        col_factor=col_factor,
        row=v_row.unsqueeze(2 + d0),
        col=v_col.unsqueeze(2 + d1),
    )


# ----------------------------------------------------------------------------------------------------------- features


def elementwise_features(
    names, p: torch.Tensor, g: torch.Tensor, state: dict[str, torch.Tensor], stats: Statistics
) -> torch.Tensor:
    """The per-element features named ``names`` (in order), written into one ``(B, C, *S)`` buffer, not normalised."""
    mom, rms = state["momentum"], state["rms"]
    widths = {"g": 1, "clip_g": 1, "p": 1, "m": mom.shape[1], "rms": rms.shape[1], "rsqrt_rms": rms.shape[1],
              "m_rsqrt_rms": max(mom.shape[1], rms.shape[1]), "fac_g": stats.fac_g.shape[1],
              "g_rsqrt_rms": rms.shape[1], "fac_mom": max(mom.shape[1], stats.fac_g.shape[1])}  # fmt: skip
    E = torch.empty(g.shape[0], sum(widths[n] for n in names), *g.shape[1:], dtype=g.dtype, device=g.device)
    rsq, start = None, 0
    for name in names:
        out = E[:, start : start + widths[name]]
        start += widths[name]
        if name in ("m_rsqrt_rms", "rsqrt_rms", "g_rsqrt_rms") and rsq is None:
            rsq = torch.rsqrt(rms + RSQRT_EPS)
        if name == "g":
            out.copy_(g.unsqueeze(1))
        elif name == "clip_g":
            torch.clamp(g.unsqueeze(1), -FEATURE_CLIP, FEATURE_CLIP, out=out)
        elif name == "p":
            out.copy_(p.unsqueeze(1))
        elif name == "m":
            out.copy_(mom)
        elif name == "rms":
            out.copy_(rms)
        elif name == "m_rsqrt_rms":
            torch.mul(mom, rsq, out=out)
        elif name == "rsqrt_rms":
            out.copy_(rsq)
        elif name == "fac_g":
            out.copy_(stats.fac_g)
        elif name == "g_rsqrt_rms":
            torch.mul(g.unsqueeze(1), rsq, out=out)
        elif name == "fac_mom":
            torch.mul(mom, stats.row_factor, out=out).mul_(stats.col_factor)
        else:  # pragma: no cover - guarded by the meta-weights config
            raise ValueError(f"unknown elementwise feature {name!r}")
    return E


def _broadcast_features(names, base: torch.Tensor) -> torch.Tensor:
    out = []
    for name in names:
        out.append(base if name in ("row", "col") else torch.rsqrt(base + RSQRT_EPS))
    return torch.cat(out, dim=1)


def _act(x: torch.Tensor, activation: str) -> torch.Tensor:
    return torch.relu_(x) if activation == "relu" else torch.tanh_(x)


def _normalized_linear(X: torch.Tensor, w: torch.Tensor, ndim: int) -> torch.Tensor:
    """``W^T normalize(X)`` as ``(B, H, N)`` for ``X`` of ``(B, C, *S')``, ``w`` of ``(C, H)`` or ``(B, C, H)``.

    Each channel is normalised by ``sqrt(1e-9 + mean(x^2))`` over the last two axes of ``S`` (``ndim = len(S)``);
    when those are all the spatial axes (``ndim <= 2``) the scales are folded into ``w`` (one pass less over ``X``).
    """
    B, C = X.shape[:2]
    if ndim <= 2:
        Xf = X.reshape(B, C, -1)
        scale = torch.rsqrt(Xf.square().mean(dim=-1).add_(INPUT_NORM_EPS))  # (B, C)
        w_eff = scale.unsqueeze(-1) * w  # (B, C, H)
        return torch.bmm(w_eff.transpose(1, 2), Xf)
    scale = torch.rsqrt(X.square().mean(dim=(-2, -1), keepdim=True).add_(INPUT_NORM_EPS))
    Xf = (X * scale).reshape(B, C, -1)
    wt = w.transpose(-2, -1)
    return torch.bmm(wt, Xf) if wt.ndim == 3 else torch.matmul(wt, Xf)


def _bias(b: torch.Tensor, batched: bool) -> torch.Tensor:
    """A bias ``(H,)`` / ``(B, H)`` shaped to broadcast against ``(B, H, N)``."""
    return b.unsqueeze(-1) if batched else b.view(1, -1, 1)


def _dense(h: torch.Tensor, w: torch.Tensor, b: torch.Tensor, batched: bool) -> torch.Tensor:
    """``W^T h + b`` for ``h`` of ``(B, H, N)`` and ``w`` of ``(H, K)`` (shared) or ``(B, H, K)``."""
    wt = w.transpose(-2, -1)
    out = torch.bmm(wt, h) if batched else torch.matmul(wt, h)
    return out.add_(_bias(b, batched))


def mlp_outputs(
    p: torch.Tensor,
    g: torch.Tensor,
    state: dict[str, torch.Tensor],
    stats: Statistics,
    weights: MLPWeights,
    num_outputs: int = 1,
) -> torch.Tensor:
    """Normalised features -> meta-MLP -> the first ``num_outputs`` outputs, ``(B, num_outputs, *S)``."""
    B, shape = p.shape[0], tuple(p.shape[1:])
    n = len(shape)
    factored = stats.row is not None
    names = weights.elem_factored if factored else weights.elem_plain
    w_elem = weights.w_elem_factored if factored else weights.w_elem_plain
    E = elementwise_features(names, p, g, state, stats)
    h = _normalized_linear(E, w_elem, n)  # (B, H, N)
    del E
    H = h.shape[1]
    if factored:
        hs = h.view(B, H, *shape)
        for group, base, w in ((weights.row, stats.row, weights.w_row), (weights.col, stats.col, weights.w_col)):
            if group:
                F = _broadcast_features(group, base)  # (B, C, *S with 1 at d0 / d1)
                hs += _normalized_linear(F, w, n).view(B, H, *F.shape[2:])
    h = _act(h.add_(_bias(weights.b0, weights.batched)), weights.activation)
    for w, b in weights.hidden:
        h = _act(_dense(h, w, b, weights.batched), weights.activation)
    out = _dense(h, weights.w_out[..., :num_outputs], weights.b_out[..., :num_outputs], weights.batched)
    return out.view(B, num_outputs, *shape)


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
    step = out[:, 0]
    if exp_mult:
        step = step * torch.exp(out[:, 1] * exp_mult)
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
    "update_accumulators_",
]
