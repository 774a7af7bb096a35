"""Worst-case objective weights for RMOD (pure tensor math, no model).

RMOD (Son, Bankes et al., "Robust Multi-Objective Controlled Decoding of Large Language Models", arXiv 2503.08796,
https://huggingface.co/papers/2503.08796) picks, for every prompt and every decoded block, the weights on the
probability simplex that solve the convex problem (Sec. 3, worst-case weights)

    w* = argmin_{w in simplex}  f(w),   f(w) = log (1/K) sum_k exp(lambda * sum_g w_g V[k, g])

over the K sampled candidate blocks (the code minimises ``mean exp(.)``, which has the same minimiser).
:func:`robust_weights` offers two solvers:

* ``solver="exact"`` (default): an active-set Newton method on the simplex that stops when the Frank-Wolfe duality
  gap, an upper bound on ``f(w) - f(w*)``, is below a stated tolerance (vectorised over the batch, float64);
* ``solver="authors_loop"``: the reference code's truncated loop, 10 clipped gradient steps on softmax logits. It
  reproduces the released code, but it is not the minimiser: on random candidates the chosen block differs from
  the exact solution's in most cases at G >= 2.
"""

from __future__ import annotations

import math
import warnings

import torch


WEIGHT_SOLVERS = ("exact", "authors_loop")
WEIGHT_OBJECTIVES = ("mean_exp",)
DEFAULT_TOL = 1e-9
"""Default tolerance of the exact solver (Frank-Wolfe gap relative to ``max(1, max_g |df/dw_g|)``)."""
DEFAULT_MAX_ITERATIONS = 100
"""Default iteration cap of the exact solver (random problems with G <= 10 converge in 3 to 30 iterations)."""
AUTHORS_NUM_ITERATIONS, AUTHORS_STEP_SIZE, AUTHORS_GRAD_CLIP = 10, 1.0, 10.0
"""The reference code's ``group_weights_iter``, ``weight_step_size`` and gradient clip."""


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
    if values.is_floating_point() and not torch.isfinite(values).all():
        raise ValueError(f"`{name}` must be finite, but holds NaN or infinite entries")


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


@torch.no_grad()
def robust_weights(
    values: torch.Tensor,
    rmod_lambda: float = 1.0,
    num_iterations: int | None = None,
    step_size: float | None = None,
    grad_clip: float | None = None,
    objective: str = "mean_exp",
    *,
    solver: str = "exact",
    tol: float = DEFAULT_TOL,
) -> torch.Tensor:
    r"""Worst-case weights ``w*`` on the simplex for each group of candidate values (RMOD's inner minimisation).

    Minimises ``f(w) = log mean_k exp(lambda * sum_g w_g values[..., k, g])`` over the probability simplex
    (arXiv 2503.08796, Sec. 3; the code's ``mean exp(.)`` has the same minimiser). ``f`` is convex, with gradient
    ``lambda * E_p[V]`` and Hessian ``lambda^2 Cov_p(V)`` under the tilted distribution ``p = softmax(lambda * V w)``.

    * ``solver="exact"`` (default): active-set Newton. Start at uniform weights; on the current face (the objectives
      with positive weight) take the Newton step of ``f`` restricted to ``sum_g w_g = 1`` (ridge ``1e-10`` times the
      mean Hessian diagonal), cut it at the simplex boundary (an objective that reaches 0 leaves the face) and
      backtrack (Armijo); when the face is solved, the objective with the most negative reduced gradient joins it.
      Where Newton cannot descend, a pairwise Frank-Wolfe step is taken instead. **Convergence check**: a problem
      is solved when its Frank-Wolfe gap ``sum_g w_g grad_g - min_g grad_g`` (an upper bound on ``f(w) - f(w*)``)
      is at most ``tol * max(1, max_g |grad_g|)``. Problems that are not solved after ``num_iterations`` iterations
      (default 100) are returned as they are, with a ``RuntimeWarning`` giving the largest remaining gap. Every
      prompt of the batch is solved at once (batched ``torch.linalg.solve`` on ``(G+1) x (G+1)`` systems).
      ``rmod_lambda = 0`` makes every weighting optimal: uniform weights are returned.
    * ``solver="authors_loop"``: the reference code's loop (``_compute_weights`` in ``blockwise_robust_decoder.py``),
      gradient descent on softmax logits ``l`` started at 0::

          for it in range(num_iterations):                     # 10
              w = softmax(l)
              L = mean_k exp(lambda * values[k] @ w)
              l = l - step_size / sqrt(it + 1) * clip(dL/dl, -grad_clip, grad_clip)   # 1.0, 10.0
          return softmax(l)

      It stops after ``num_iterations`` steps whatever the gradient, and the softmax parametrisation never reaches a
      vertex: it is kept to reproduce the released code (which runs it in bfloat16; here float64).

    Args:
        values (`torch.Tensor` of shape `(..., num_branches, num_objectives)`):
            ``V[k, g]``: the value of candidate ``k`` for objective ``g`` (leading dims are prompts). Must be finite.
        rmod_lambda (`float`, *optional*, defaults to `1.0`): ``lambda >= 0``.
        num_iterations (`int`, *optional*): ``"exact"``: the iteration cap (default 100); ``"authors_loop"``: the
            number of steps ``I`` (default 10, the code's ``group_weights_iter``).
        step_size (`float`, *optional*): ``"authors_loop"`` only: ``eta0`` (default 1.0).
        grad_clip (`float`, *optional*): ``"authors_loop"`` only: the gradient is clipped to
            ``[-grad_clip, grad_clip]`` (default 10.0).
        objective (`str`, *optional*, defaults to `"mean_exp"`): the form whose gradient the authors' loop follows,
            ``"mean_exp"`` (the code's). The exact solver's minimiser does not depend on it. (``"log_mean_exp"`` was
            removed: with softmax logits its bounded gradients stall at a wrong vertex, e.g. an objective gap of 25.8
            at ``lambda = 10`` after 5000 steps; use ``solver="exact"``.)
        solver (`str`, *optional*, defaults to `"exact"`): ``"exact"`` or ``"authors_loop"``.
        tol (`float`, *optional*, defaults to `1e-9`): ``"exact"`` only: the Frank-Wolfe gap tolerance, relative to
            ``max(1, max_g |grad_g|)``.

    Returns:
        `torch.Tensor` of shape `(..., num_objectives)`: non-negative weights summing to 1, in ``values.dtype``
        (float32 for integer inputs).

    Raises:
        TypeError: if ``values`` is not a tensor.
        ValueError: for a bad shape, non-finite ``values``, a negative or non-finite ``rmod_lambda``, an unknown
            ``solver`` or ``objective``, ``num_iterations < 0`` (``< 1`` for ``"exact"``), ``step_size < 0``,
            ``grad_clip <= 0``, ``tol <= 0``, or ``step_size`` / ``grad_clip`` given with ``solver="exact"``.
    """
    _check_values(values)
    if not _is_number(rmod_lambda) or not math.isfinite(rmod_lambda) or rmod_lambda < 0:
        raise ValueError(f"`rmod_lambda` must be a finite number >= 0, but is {rmod_lambda!r}")
    if solver not in WEIGHT_SOLVERS:
        raise ValueError(f"`solver` must be one of {WEIGHT_SOLVERS}, but is {solver!r}")
    if objective == "log_mean_exp":
        raise ValueError(
            "`objective`='log_mean_exp' was removed: in the softmax-logit loop its bounded gradients stall at a wrong "
            "vertex (objective gap 25.8 at lambda=10 after 5000 steps). Use `solver`='exact', which minimises the "
            "same function exactly."
        )
    if objective not in WEIGHT_OBJECTIVES:
        raise ValueError(f"`objective` must be one of {WEIGHT_OBJECTIVES}, but is {objective!r}")
    if num_iterations is not None and (not isinstance(num_iterations, int) or isinstance(num_iterations, bool)):
        raise ValueError(f"`num_iterations` must be an integer, but is {num_iterations!r}")
    out_dtype = values.dtype if values.is_floating_point() else torch.float32
    if solver == "authors_loop":
        num_iterations = AUTHORS_NUM_ITERATIONS if num_iterations is None else num_iterations
        step_size = AUTHORS_STEP_SIZE if step_size is None else step_size
        grad_clip = AUTHORS_GRAD_CLIP if grad_clip is None else grad_clip
        if num_iterations < 0:
            raise ValueError(f"`num_iterations` must be an integer >= 0, but is {num_iterations!r}")
        if not _is_number(step_size) or step_size < 0:
            raise ValueError(f"`step_size` must be a number >= 0, but is {step_size!r}")
        if not _is_number(grad_clip) or grad_clip <= 0:
            raise ValueError(f"`grad_clip` must be a number > 0, but is {grad_clip!r}")
        w = _authors_loop(values.to(torch.float64), float(rmod_lambda), num_iterations, step_size, grad_clip)
        return w.to(out_dtype)
    for name, given in (("step_size", step_size), ("grad_clip", grad_clip)):
        if given is not None:
            raise ValueError(
                f"`{name}` is a setting of `solver`='authors_loop' (the reference code's gradient loop); the default "
                f"`solver`='exact' has no {name}. Pass `solver`='authors_loop' or drop `{name}`."
            )
    num_iterations = DEFAULT_MAX_ITERATIONS if num_iterations is None else num_iterations
    if num_iterations < 1:
        raise ValueError(f"`num_iterations` (the exact solver's cap) must be an integer >= 1, but is {num_iterations}")
    if not _is_number(tol) or not tol > 0:
        raise ValueError(f"`tol` must be a number > 0, but is {tol!r}")
    lead, (K, G) = values.shape[:-2], values.shape[-2:]
    v = values.to(torch.float64).reshape(-1, K, G)
    if rmod_lambda == 0 or G == 1 or v.shape[0] == 0:
        w = torch.full((v.shape[0], G), 1.0 / G, dtype=torch.float64, device=v.device)
    else:
        w, gap, solved = _active_set_newton(rmod_lambda * v, float(tol), num_iterations)
        if not solved.all():
            warnings.warn(
                f"robust_weights: {int((~solved).sum())} of {len(solved)} weight problems did not reach `tol`={tol} "
                f"in {num_iterations} iterations (largest Frank-Wolfe gap {float(gap.max()):.3g}); raise "
                "`num_iterations` (`weight_iterations` in rmod).",
                RuntimeWarning,
                stacklevel=2,
            )
    return w.reshape(*lead, G).to(out_dtype)


def _authors_loop(v, rmod_lambda, num_iterations, step_size, grad_clip):
    logits = torch.zeros(v.shape[:-2] + v.shape[-1:], dtype=torch.float64, device=v.device)  # (..., G)
    for it in range(num_iterations):
        w = torch.softmax(logits, dim=-1)  # (..., G)
        s = rmod_lambda * (v @ w.unsqueeze(-1)).squeeze(-1)  # (..., K)
        p = torch.exp(s) / s.shape[-1]  # d mean_k exp(s_k) / d s_k
        grad_w = rmod_lambda * (p.unsqueeze(-2) @ v).squeeze(-2)  # (..., G)
        # softmax Jacobian: dl_j = w_j * (grad_w_j - <w, grad_w>)
        grad_l = w * (grad_w - (w * grad_w).sum(-1, keepdim=True))
        grad_l = torch.nan_to_num(grad_l, nan=0.0, posinf=grad_clip, neginf=-grad_clip)
        logits = logits - (step_size / math.sqrt(it + 1)) * grad_l.clamp(-grad_clip, grad_clip)
    return torch.softmax(logits, dim=-1)


def _objective(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """f(w) = logsumexp_k (a w)_k - log K for scaled values ``a = lambda * V`` `(N, K, G)` and weights `(N, G)`."""
    return torch.logsumexp((a @ w.unsqueeze(-1)).squeeze(-1), dim=-1) - math.log(a.shape[-2])


def _active_set_newton(a: torch.Tensor, tol: float, max_iterations: int):
    """Active-set Newton for ``min_{w in simplex} log mean exp(a w)``, batched over N problems.

    Args:
        a (`torch.Tensor` of shape `(N, K, G)`, float64): ``lambda * V``.

    Returns:
        `(w, gap, solved)`: weights `(N, G)`, the final Frank-Wolfe gaps `(N,)` and which problems met the tolerance.
    """
    N, K, G = a.shape
    dtype, device = a.dtype, a.device
    unit = torch.eye(G, dtype=torch.bool, device=device)
    w = torch.full((N, G), 1.0 / G, dtype=dtype, device=device)
    face = torch.ones(N, G, dtype=torch.bool, device=device)  # objectives free to move (w_g > 0 or just freed)
    pairwise = torch.zeros(N, dtype=torch.bool, device=device)  # Newton failed last time: take a Frank-Wolfe step
    for iteration in range(max_iterations + 1):
        s = (a @ w.unsqueeze(-1)).squeeze(-1)  # (N, K)
        f = torch.logsumexp(s, dim=-1) - math.log(K)
        p = torch.softmax(s, dim=-1)
        grad = (p.unsqueeze(-2) @ a).squeeze(-2)  # (N, G): E_p[a]
        level = (w * grad).sum(-1)
        gap = level - grad.min(-1).values  # Frank-Wolfe gap >= f(w) - f(w*)
        scale = grad.abs().amax(-1).clamp_min(1.0)
        solved = gap <= tol * scale
        if solved.all() or iteration == max_iterations:
            return w, gap, solved
        # Newton step on the face: [[H_F + rho I, 1], [1^T, 0]] [d; nu] = [-(grad - level)_F; 0]
        centred = (a - grad.unsqueeze(-2)) * p.sqrt().unsqueeze(-1)
        hessian = centred.transpose(-1, -2) @ centred  # Cov_p(a), PSD by construction
        face_f = face.to(dtype)
        rho = 1e-10 * hessian.diagonal(dim1=-2, dim2=-1).mean(-1).clamp_min(1e-300)
        kkt = torch.zeros(N, G + 1, G + 1, dtype=dtype, device=device)
        kkt[:, :G, :G] = hessian * face_f.unsqueeze(-1) * face_f.unsqueeze(-2) + torch.diag_embed(
            torch.where(face, rho.unsqueeze(-1), torch.ones_like(face_f))
        )
        kkt[:, :G, G] = face_f
        kkt[:, G, :G] = face_f
        reduced = (grad - level.unsqueeze(-1)) * face_f
        rhs = torch.cat([-reduced, torch.zeros(N, 1, dtype=dtype, device=device)], dim=-1)
        d = torch.linalg.solve(kkt, rhs)[:, :G] * face_f
        decrement = -(reduced * d).sum(-1)  # d^T (H + rho) d >= 0: the predicted decrease
        # a solved face frees the objective with the most negative reduced gradient
        outside = torch.where(face, torch.full_like(grad, math.inf), grad - level.unsqueeze(-1))
        most_negative, j_in = outside.min(-1)
        free = ~solved & (decrement <= 0.1 * tol * scale) & (most_negative < 0)
        face = face | (free.unsqueeze(-1) & unit[j_in])
        # pairwise Frank-Wolfe step (weight from the worst objective in use to the best) where Newton cannot descend
        use_pairwise = ~solved & (pairwise | ~(decrement > 0))
        j_best = grad.argmin(-1)
        j_worst = torch.where(w > 0, grad, torch.full_like(grad, -math.inf)).argmax(-1)
        w_worst = w.gather(-1, j_worst.unsqueeze(-1))
        d_pairwise = (unit[j_best].to(dtype) - unit[j_worst].to(dtype)) * w_worst
        d = torch.where(use_pairwise.unsqueeze(-1), d_pairwise, d)
        slope = torch.where(use_pairwise, (grad * d_pairwise).sum(-1), -decrement)
        move = ~solved & (slope < 0)
        # ratio test: the longest step that stays on the simplex, then Armijo backtracking
        ratio = torch.where(d < 0, w / -d, torch.full_like(d, math.inf))
        max_step, j_block = ratio.min(-1)
        step = max_step.clamp(max=1.0)
        flat = ~use_pairwise & (decrement <= 1e-13 * (1 + f.abs()))  # below f's resolution: take the Newton step
        for _ in range(60):
            w_new = (w + step.unsqueeze(-1) * d).clamp_min(0)
            accepted = ~move | flat | (_objective(a, w_new) <= f + 1e-4 * step * slope)
            if accepted.all():
                break
            step = torch.where(accepted, step, step / 2)
        pairwise = move & ~accepted
        move = move & accepted
        blocked = (move & (step >= max_step)).unsqueeze(-1) & unit[j_block]
        w_new = torch.where(blocked, torch.zeros_like(w_new), w_new)
        face = (face & ~blocked & ~(use_pairwise.unsqueeze(-1) & (w_new <= 0))) | (
            use_pairwise.unsqueeze(-1) & unit[j_best]
        )
        w = torch.where(move.unsqueeze(-1), w_new / w_new.sum(-1, keepdim=True), w)
    raise AssertionError("unreachable")  # the loop returns at iteration == max_iterations


def frank_wolfe_gap(values: torch.Tensor, weights: torch.Tensor, rmod_lambda: float = 1.0) -> torch.Tensor:
    """The Frank-Wolfe gap ``sum_g w_g grad_g - min_g grad_g`` of ``f(w) = log mean_k exp(lambda * V w)``.

    An upper bound on ``f(w) - min_simplex f`` for any ``w`` on the simplex (0 exactly at the minimiser).

    Args:
        values (`torch.Tensor` of shape `(..., K, G)`), weights (`torch.Tensor` of shape `(..., G)`),
        rmod_lambda (`float`, *optional*, defaults to `1.0`).

    Returns:
        `torch.Tensor` of shape `(...)`, float64.
    """
    a = rmod_lambda * values.to(torch.float64)
    w = weights.to(torch.float64)
    p = torch.softmax((a @ w.unsqueeze(-1)).squeeze(-1), dim=-1)
    grad = (p.unsqueeze(-2) @ a).squeeze(-2)
    return (w * grad).sum(-1) - grad.min(-1).values


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


__all__ = ["WEIGHT_OBJECTIVES", "WEIGHT_SOLVERS", "fixed_weights", "frank_wolfe_gap", "robust_weights", "tilted_probs"]
