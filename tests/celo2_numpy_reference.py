"""An independent NumPy re-derivation of Celo2's update rule, written from the spec and the optax reference's
semantics (tile the row/column statistics to full shape, concatenate the 14 feature groups, normalise each channel
over the last two axes, run the split-first-layer MLP, Newton-Schulz, RMS-normalise). Used by the golden tests only.
"""

from __future__ import annotations

import numpy as np


MOM, RMS, FAC = (0.9, 0.99, 0.999), (0.95,), (0.9, 0.99, 0.999)


def factored_dims(shape):
    if len(shape) < 2:
        return None
    order = np.argsort(np.asarray(shape), kind="stable")
    return int(order[-2]), int(order[-1])


def init_state(shape):
    st = {"m": np.zeros(shape + (3,)), "rms": np.zeros(shape + (1,))}
    fd = factored_dims(shape)
    if fd is None:
        st["v"] = np.zeros(shape + (3,))
    else:
        d1, d0 = fd
        st["v_row"] = np.zeros(tuple(np.delete(shape, d0)) + (3,))
        st["v_col"] = np.zeros(tuple(np.delete(shape, d1)) + (3,))
    return st


def safe_rsqrt(x):
    return 1.0 / np.sqrt(np.maximum(x, 1e-9))


def normalize(x, axis, eps=1e-9):
    return x / np.sqrt(eps + np.mean(x**2, axis=axis, keepdims=True))


def newton_schulz(x, coeffs=(3.4445, -4.7750, 2.0315), steps=5, eps=1e-8):
    a, b, c = coeffs
    transposed = x.shape[-2] > x.shape[-1]
    if transposed:
        x = np.swapaxes(x, -2, -1)
    x = x / (np.sqrt(np.sum(x**2, axis=(-2, -1), keepdims=True)) + eps)
    for _ in range(steps):
        A = x @ np.swapaxes(x, -2, -1)
        B = b * A + c * (A @ A)
        x = a * x + B @ x
    return np.swapaxes(x, -2, -1) if transposed else x


def step(p, g, st, blocks, dense, biases, orthogonalize=True):
    """One update: returns the step (before the LR); ``st`` is updated in place.

    ``blocks``: the 14 first-layer matrices ``(width_i, H)``; ``dense``: ``[(H, H), (H, 3)]``; ``biases``: 3 vectors.
    """
    g = np.clip(g, -1000.0, 1000.0)
    mom, rmsd, facd = np.asarray(MOM), np.asarray(RMS), np.asarray(FAC)
    st["m"] = mom * st["m"] + (1 - mom) * g[..., None]
    st["rms"] = rmsd * st["rms"] + (1 - rmsd) * g[..., None] ** 2
    gsq = g**2 + 1e-30
    fd = factored_dims(p.shape)
    inps = [g[..., None], np.clip(g, -0.1, 0.1)[..., None], p[..., None], st["m"], st["rms"]]
    rsqrt = 1.0 / np.sqrt(st["rms"] + 1e-8)
    if fd is None:
        st["v"] = facd * st["v"] + (1 - facd) * gsq[..., None]
        fac_g = g[..., None] * safe_rsqrt(st["v"] + 1e-9)
    else:
        d1, d0 = fd
        st["v_row"] = facd * st["v_row"] + (1 - facd) * np.mean(gsq, axis=d0)[..., None]
        st["v_col"] = facd * st["v_col"] + (1 - facd) * np.mean(gsq, axis=d1)[..., None]
        rd1 = d1 - 1 if d1 > d0 else d1
        row_factor = safe_rsqrt(st["v_row"] / (np.mean(st["v_row"], axis=rd1, keepdims=True) + 1e-9))
        col_factor = safe_rsqrt(st["v_col"])
        fac_g = g[..., None] * np.expand_dims(row_factor, d0) * np.expand_dims(col_factor, d1)
    inps += [st["m"] * rsqrt, rsqrt, fac_g, g[..., None] * rsqrt]
    if fd is not None:
        reps = [1] * (p.ndim + 1)
        reps[d0] = p.shape[d0]
        row = np.tile(np.expand_dims(st["v_row"], d0), reps)
        reps = [1] * (p.ndim + 1)
        reps[d1] = p.shape[d1]
        col = np.tile(np.expand_dims(st["v_col"], d1), reps)
        inps += [row, col, 1.0 / np.sqrt(row + 1e-8), 1.0 / np.sqrt(col + 1e-8)]
        inps.append(st["m"] * np.expand_dims(row_factor, d0) * np.expand_dims(col_factor, d1))
    axis = tuple(range(p.ndim))[-2:]
    inps = [normalize(x, axis) for x in inps]
    h = sum(x @ w for x, w in zip(inps, blocks)) + biases[0]
    h = np.maximum(h, 0)
    for i, (w, b) in enumerate(zip(dense, biases[1:])):
        h = h @ w + b
        if i < len(dense) - 1:
            h = np.maximum(h, 0)
    d = h[..., 0]
    if orthogonalize and p.ndim >= 2:
        d = newton_schulz(d)
    return normalize(d, axis)
