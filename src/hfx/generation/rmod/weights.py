"""Worst-case objective weights for RMOD (pure tensor math, no model).

RMOD (Son, Bankes et al., "Robust Multi-Objective Controlled Decoding of Large Language Models", arXiv 2503.08796,
https://huggingface.co/papers/2503.08796) picks, for every prompt and every decoded block, the weights on the
probability simplex that minimise

    L(w) = E_{z ~ pi_ref}[ exp(lambda * sum_g w_g V_g(z)) ]        (code form; the paper's log E[.] has the same argmin)

estimated on the K sampled candidate blocks. The reference code solves it with 10 steps of gradient descent on
softmax logits (initialised at 0) with step ``eta0 / sqrt(it + 1)`` and the gradient clipped to ``[-10, 10]``;
:func:`robust_weights` reproduces that loop, vectorised over a batch of prompts.
"""

from __future__ import annotations

import math

import torch


WEIGHT_OBJECTIVES = ("mean_exp", "log_mean_exp")


def _check_values(values: torch.Tensor, name: str = "values") -> None:
    if not isinstance(values, torch.Tensor):
        raise TypeError(
            f"`{name}` must be a torch.Tensor of shape (..., num_branches, num_objectives), got {type(values)}"
        )
    if values.dim() < 2:
        raise ValueError(
            f"`{name}` must have shape (..., num_branches, num_objectives), but has shape {tuple(values.shape)}"
        )
    if values.shape[-1] < 1 or values.shape[-2] < 1:
        raise ValueError(f"`{name}` needs at least one branch and one objective, but has shape {tuple(values.shape)}")


@torch.no_grad()
def robust_weights(
    values: torch.Tensor,
    rmod_lambda: float = 1.0,
    num_iterations: int = 10,
    step_size: float = 1.0,
    grad_clip: float = 10.0,
    objective: str = "mean_exp",
) -> torch.Tensor:
    r"""Worst-case weights ``w*`` on the simplex for each group of candidate values (RMOD's inner minimisation).

    Solves ``argmin_{w in simplex} mean_k exp(lambda * sum_g w_g values[..., k, g])`` by gradient descent on softmax
    logits ``l`` (start ``l = 0``, i.e. uniform weights)::

        for it in range(num_iterations):
            w = softmax(l)
            L = mean_k exp(lambda * values[k] @ w)
            l = l - step_size / sqrt(it + 1) * clip(dL/dl, -grad_clip, grad_clip)
        return softmax(l)

    Source: arXiv 2503.08796, worst-case weights (Sec. 3) and the reference code's ``_compute_weights``
    (``blockwise_robust_decoder.py``). The code evaluates the weights in bfloat16; here everything runs in float64,
    so results agree with the code up to bfloat16 rounding.

    Args:
        values (`torch.Tensor` of shape `(..., num_branches, num_objectives)`):
            ``V[k, g]``: the value of candidate ``k`` for objective ``g`` (leading dims are prompts).
        rmod_lambda (`float`, *optional*, defaults to `1.0`):
            ``lambda >= 0``; larger values concentrate the weight on the worst objective, ``0`` gives uniform weights.
        num_iterations (`int`, *optional*, defaults to `10`): gradient steps ``I`` (code: ``group_weights_iter``).
        step_size (`float`, *optional*, defaults to `1.0`): ``eta0`` (code: ``weight_step_size``).
        grad_clip (`float`, *optional*, defaults to `10.0`): the gradient is clipped to ``[-grad_clip, grad_clip]``.
        objective (`str`, *optional*, defaults to `"mean_exp"`):
            ``"mean_exp"`` (the code's ``mean exp(.)``) or ``"log_mean_exp"`` (the paper's ``log mean exp(.)``,
            same minimiser, gradients divided by ``L``, numerically safer for large ``lambda * V``)
            [reconstruction: the choice is exposed because the two forms interact differently with clipping].

    Returns:
        `torch.Tensor` of shape `(..., num_objectives)`: non-negative weights summing to 1, in ``values.dtype``
        (float32 for integer inputs).

    Raises:
        TypeError: if ``values`` is not a tensor.
        ValueError: for a bad shape, a negative or non-finite ``rmod_lambda``, ``num_iterations < 0``,
            ``step_size < 0``, ``grad_clip <= 0`` or an unknown ``objective``.
    """
    _check_values(values)
    if not isinstance(rmod_lambda, (int, float)) or not math.isfinite(rmod_lambda) or rmod_lambda < 0:
        raise ValueError(f"`rmod_lambda` must be a finite number >= 0, but is {rmod_lambda!r}")
    if not isinstance(num_iterations, int) or num_iterations < 0:
        raise ValueError(f"`num_iterations` must be an integer >= 0, but is {num_iterations!r}")
    if not isinstance(step_size, (int, float)) or step_size < 0:
        raise ValueError(f"`step_size` must be a number >= 0, but is {step_size!r}")
    if not isinstance(grad_clip, (int, float)) or grad_clip <= 0:
        raise ValueError(f"`grad_clip` must be a number > 0, but is {grad_clip!r}")
    if objective not in WEIGHT_OBJECTIVES:
        raise ValueError(f"`objective` must be one of {WEIGHT_OBJECTIVES}, but is {objective!r}")

    out_dtype = values.dtype if values.is_floating_point() else torch.float32
    v = values.to(torch.float64)  # (..., K, G)
    logits = torch.zeros(v.shape[:-2] + v.shape[-1:], dtype=torch.float64, device=v.device)  # (..., G)
    for it in range(num_iterations):
        w = torch.softmax(logits, dim=-1)  # (..., G)
        s = rmod_lambda * (v @ w.unsqueeze(-1)).squeeze(-1)  # (..., K)
        if objective == "mean_exp":
            p = torch.exp(s) / s.shape[-1]  # d mean_k exp(s_k) / d s_k
        else:
            p = torch.softmax(s, dim=-1)  # d log mean_k exp(s_k) / d s_k
        grad_w = rmod_lambda * (p.unsqueeze(-2) @ v).squeeze(-2)  # (..., G)
        # softmax Jacobian: dl_j = w_j * (grad_w_j - <w, grad_w>)
        grad_l = w * (grad_w - (w * grad_w).sum(-1, keepdim=True))
        grad_l = torch.nan_to_num(grad_l, nan=0.0, posinf=grad_clip, neginf=-grad_clip)
        logits = logits - (step_size / math.sqrt(it + 1)) * grad_l.clamp(-grad_clip, grad_clip)
    return torch.softmax(logits, dim=-1).to(out_dtype)


def fixed_weights(weights, num_objectives: int, batch_size: int = 1, device=None, dtype=torch.float32) -> torch.Tensor:
    """Resolve a fixed weighting (the controlled-decoding baseline) into a `(batch_size, num_objectives)` tensor.

    Args:
        weights (`str` or sequence of `float` or `torch.Tensor`):
            ``"uniform"`` (``1/G`` each), or ``G`` non-negative numbers (normalised to sum to 1), or a
            `(batch_size, G)` tensor of per-prompt weights.
        num_objectives (`int`): ``G``.
        batch_size (`int`, *optional*, defaults to 1).

    Raises:
        ValueError: if the number of weights differs from ``num_objectives``, a weight is negative, or all are 0.
    """
    if isinstance(weights, str):
        if weights != "uniform":
            raise ValueError(f"`weights` must be 'robust', 'uniform' or a sequence of floats, but is {weights!r}")
        w = torch.full((num_objectives,), 1.0 / num_objectives, dtype=dtype, device=device)
    else:
        w = torch.as_tensor(weights, dtype=dtype, device=device)
        if w.dim() == 0 or w.shape[-1] != num_objectives:
            raise ValueError(
                f"`weights` must have {num_objectives} entries (one per objective of the value function), "
                f"but has shape {tuple(w.shape)}"
            )
        if not torch.isfinite(w).all() or (w < 0).any():
            raise ValueError(f"`weights` must be finite and non-negative, but is {w.tolist()}")
        total = w.sum(-1, keepdim=True)
        if (total <= 0).any():
            raise ValueError("`weights` must not be all zero")
        w = w / total
    if w.dim() == 1:
        w = w.expand(batch_size, num_objectives)
    elif w.shape[0] != batch_size:
        raise ValueError(
            f"per-prompt `weights` must have shape ({batch_size}, {num_objectives}), got {tuple(w.shape)}"
        )
    return w


def tilted_probs(values: torch.Tensor, weights: torch.Tensor, rmod_lambda: float = 1.0) -> torch.Tensor:
    """Probabilities of the tilted best-response policy over the K candidates (Prop. 1 of arXiv 2503.08796).

    ``pi(z_k) ∝ exp(lambda * sum_g w_g V[k, g])`` over candidates drawn from ``pi_ref``.

    Args:
        values (`torch.Tensor` of shape `(..., K, G)`).
        weights (`torch.Tensor` of shape `(..., G)`).
        rmod_lambda (`float`, *optional*, defaults to `1.0`).

    Returns:
        `torch.Tensor` of shape `(..., K)`, rows summing to 1.
    """
    scores = (values.to(torch.float64) @ weights.to(torch.float64).unsqueeze(-1)).squeeze(-1)
    return torch.softmax(rmod_lambda * scores, dim=-1).to(
        values.dtype if values.is_floating_point() else torch.float32
    )


__all__ = ["WEIGHT_OBJECTIVES", "fixed_weights", "robust_weights", "tilted_probs"]
