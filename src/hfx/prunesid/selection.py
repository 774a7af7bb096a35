"""PruneSID token selection: PSCA grouping, intra-group NMS, group quotas and the dynamic budget.

Pure, batched torch on visual features of shape ``(batch_size, 1 + num_patches, hidden_size)`` (CLS first), as in
"Prune Redundancy, Preserve Essence: Vision Token Compression in VLMs via Synergistic Importance-Diversity"
(Fang et al., ICLR 2026, https://huggingface.co/papers/2603.09480, §3.2-3.4) and the authors' LLaVA code
(``prunesid/prunesid_llava/clip_encoder.py`` of https://github.com/ZhengyaoFang/PruneSID).

The entry point is :func:`prunesid_select`; the building blocks (:func:`psca_groups`, :func:`redundancy`,
:func:`group_nms`, :func:`allocate_quotas`, :func:`dynamic_budget`, :func:`qwen2vl_budget`) are public so that each
step can be tested against hand-computed values.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F


SCORES = ("cls_attention", "pca_loading")
QUOTA_ARITHMETIC = ("code", "float64")
VARIANTS = ("llava", "qwen2vl")


def _check_features(hidden_states: torch.Tensor, name: str = "hidden_states") -> None:
    if not isinstance(hidden_states, torch.Tensor):
        raise TypeError(f"`{name}` must be a torch.Tensor, but is {type(hidden_states).__name__}")
    if hidden_states.dim() != 3:
        raise ValueError(
            f"`{name}` must have shape (batch_size, num_tokens, hidden_size), got {tuple(hidden_states.shape)}"
        )


@contextmanager
def _single_thread(device: torch.device):
    """Run small CPU LAPACK calls (QR / SVD of a (D, K) matrix) on one thread.

    Multi-threaded LAPACK on these tiny matrices is no faster and, on a busy machine, spin-waiting threads made
    ``pca_lowrank`` 50x slower in our measurements (2.1 s vs 38 ms). Restores the previous setting on exit.
    """
    if device.type != "cpu":
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@torch.no_grad()
def psca_groups(
    patch_features: torch.Tensor, num_groups: int, niter: int = 2, seed: int | None = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Principal Semantic Components Analysis (PSCA): group tokens by their dominant low-rank PCA component.

    As in the authors' LLaVA code: ``M = sigmoid(X)`` in fp32 is transposed to ``(B, D, T)`` so that tokens are the
    variable axis, ``torch.pca_lowrank(M, q=num_groups, center=True, niter=niter)`` gives the right factor
    ``V (B, T, K)``, and token ``i`` joins group ``argmax_k |V[i, k]|`` (paper Eq. 3-4). Note that the centring of
    ``pca_lowrank`` subtracts, per token, its mean over the feature dimensions (the code's behaviour).

    Args:
        patch_features (`torch.Tensor` of shape `(batch_size, num_patches, hidden_size)`): the tokens to group
            (CLS already removed).
        num_groups (`int`): number of components / groups K (the paper uses K = N/4).
        niter (`int`, *optional*, defaults to 2): power iterations of the randomised PCA.
        seed (`int`, *optional*, defaults to 0): seeds the randomised PCA in a forked RNG (the global RNG is left
            untouched); `None` uses the global RNG.

    Returns:
        `(loadings, groups)`: `loadings` `(batch_size, num_patches, num_groups)` = ``|V|`` (fp32), and `groups`
        `(batch_size, num_patches)` long in ``[0, num_groups)``.

    Raises:
        ValueError: if `num_groups` is not in ``[1, min(num_patches, hidden_size)]``.
    """
    _check_features(patch_features, "patch_features")
    _, t, d = patch_features.shape
    if not 1 <= num_groups <= min(t, d):
        raise ValueError(f"`num_groups` must be in [1, {min(t, d)}] for {t} tokens of width {d}, but is {num_groups}")
    m = torch.sigmoid(patch_features.float()).transpose(1, 2)
    devices = [m.device] if m.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices, enabled=seed is not None), _single_thread(m.device):
        if seed is not None:
            torch.manual_seed(seed)
        _, _, v = torch.pca_lowrank(m, q=num_groups, center=True, niter=niter)
    loadings = v.abs()
    return loadings, loadings.argmax(dim=-1)


def cosine_similarity_matrix(patch_features: torch.Tensor) -> torch.Tensor:
    """Cosine similarities ``(batch_size, T, T)`` (fp32) of the tokens in `patch_features` ``(batch_size, T, D)``."""
    x = F.normalize(patch_features.float(), p=2, dim=-1)
    return x @ x.transpose(1, 2)


def redundancy(similarity: torch.Tensor, variant: str = "llava") -> torch.Tensor:
    """Global redundancy ρ of each image from its cosine-similarity matrix ``(batch_size, T, T)``.

    * ``"llava"`` (paper Eq. 5, LLaVA code): mean of the strict upper triangle, ρ = 2/(T(T-1)) Σ_{i<j} cos(x_i, x_j).
    * ``"qwen2vl"`` (Qwen2-VL code): the upper triangle *including the diagonal*, divided by all T² entries.

    Returns:
        `torch.Tensor` of shape `(batch_size,)`. A single token (T = 1) gives ρ = 0 for ``"llava"``.
    """
    if variant not in VARIANTS:
        raise ValueError(f"`variant` must be one of {VARIANTS}, but is {variant!r}")
    t = similarity.shape[-1]
    if variant == "qwen2vl":
        return torch.triu(similarity).sum(dim=(-1, -2)) / (t * t)
    if t < 2:
        return similarity.new_zeros(similarity.shape[0])
    return torch.triu(similarity, diagonal=1).sum(dim=(-1, -2)) / (t * (t - 1) / 2)


@torch.no_grad()
def group_nms(
    similarity: torch.Tensor, scores: torch.Tensor, groups: torch.Tensor, num_groups: int, tau: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Intra-group greedy NMS, all groups and images in parallel (paper §3.3; ``batch_similarity_nms`` in the code).

    Semantics (the code's loop): each round, every group that still has a positive remaining score keeps its highest-scoring token ``t`` and
    zeroes the remaining score of ``t`` and of every token ``j`` of the same group with ``cos(t, j) > tau``.
    Kept tokens get the priority ``P0 - round`` (the code uses ``P0 = 1000``; here ``P0 = max(1000, T + 1 +
    max(score))`` so that priorities always exceed raw scores, which is order-identical to the code whenever the
    code's own invariant holds). Computed without the round loop: greedy NMS is the unique fixed point of
    ``kept[j] = not any(kept[i] and sim[i, j] > tau)`` over higher-scored tokens ``i`` of j's group, found by a few
    batched mat-vec iterations; the round in which a token is kept is its rank among its group's kept tokens.

    Args:
        similarity (`torch.Tensor` of shape `(batch_size, T, T)`): token cosine similarities.
        scores (`torch.Tensor` of shape `(batch_size, T)`): positive importance scores.
        groups (`torch.Tensor` of shape `(batch_size, T)`): group ids in ``[0, num_groups)``.
        num_groups (`int`): K.
        tau (`torch.Tensor` of shape `(batch_size,)` or a float): similarity threshold τ = λ·ρ.

    Returns:
        `(priority, kept, kept_counts)`: `priority` `(batch_size, T)` fp32 (NMS priority for kept tokens, the raw
        score otherwise), `kept` `(batch_size, T)` bool, `kept_counts` `(batch_size, num_groups)` long (k_g).
    """
    b, t = scores.shape
    device = scores.device
    scores = scores.float()
    tau = torch.as_tensor(tau, dtype=torch.float32, device=device).reshape(-1).expand(b)
    p0 = max(1000.0, t + 1.0 + float(scores.max())) if scores.numel() else 1000.0
    valid = scores > 0  # tokens with a zero score are never picked (the loop stops at zero)
    # tokens sorted by descending score (ties: lower index first); pos[i] = rank of token i in that order
    order = torch.argsort(scores, dim=-1, descending=True, stable=True)
    pos = torch.empty_like(order).scatter_(1, order, torch.arange(t, device=device).expand(b, t))
    # suppress[i, j]: if i is kept, it suppresses the later (lower-score) token j of its group
    suppress = (
        (similarity > tau[:, None, None])
        & (groups[:, :, None] == groups[:, None, :])
        & (pos[:, :, None] < pos[:, None, :])
        & valid[:, :, None]
    ).float()
    # Greedy NMS is the unique solution of kept[j] = valid[j] and not any_i(kept[i] and suppress[i, j]); Jacobi
    # iteration from "all valid" fixes at least one more position (in score order) per step and stops at it.
    kept = valid.clone()
    for _ in range(t + 1):
        new = valid & ~(torch.bmm(kept.float()[:, None, :], suppress)[:, 0] > 0)
        if torch.equal(new, kept):
            break
        kept = new
    # round in which the loop keeps a token = its rank among the kept tokens of its group (descending score)
    g_sorted = groups.gather(1, order)
    by_group = torch.argsort(g_sorted, dim=-1, stable=True)
    sorted_tokens = order.gather(1, by_group)  # (group asc, score desc)
    kept_sorted = kept.gather(1, sorted_tokens).long()
    g_of_sorted = groups.gather(1, sorted_tokens)
    kept_counts = torch.zeros(b, num_groups, dtype=torch.long, device=device).scatter_add_(1, g_of_sorted, kept_sorted)
    before_group = torch.cumsum(kept_counts, -1) - kept_counts
    rank_sorted = torch.cumsum(kept_sorted, -1) - 1 - before_group.gather(1, g_of_sorted)
    rank = torch.empty_like(rank_sorted).scatter_(1, sorted_tokens, rank_sorted)
    priority = torch.where(kept, p0 - rank.float(), scores)
    return priority, kept, kept_counts


def allocate_quotas(
    group_sizes: torch.Tensor,
    kept_counts: torch.Tensor,
    num_tokens: int,
    reserve_cls: bool = True,
    upper_factor: int = 5,
    arithmetic: str = "code",
) -> torch.Tensor:
    """Share the budget across groups (the code's quota rule; paper Eq. 6 leaves n_k open).

    ``lower_g = min(1, n_g)``; ``upper_g = min(upper_factor * ceil(N/64), n_g, k_g)``, raised by one (capped at n_g)
    until Σ upper ≥ N; ``R = max(N - Σ lower - 1, 0)`` (``- 1`` only when the CLS token is reserved);
    ``q_g = min(diff(round(cumsum(k/Σk) · R)) + lower_g, upper_g)``; then any deficit is filled walking groups in
    descending ``k_g``.

    `arithmetic` picks how ``round(cumsum(k/Σk) · R)`` and the deficit walk are computed:

    * ``"code"`` (default): as the authors' ``clip_encoder.py`` -- ``k/Σk``, the cumulative sum and the product in
      float32, ``torch.round`` (half to even), and the groups walked in the order of torch's default (not stable)
      ``argsort(k, descending=True)``.
    * ``"float64"``: the same formula in float64 with a stable sort (ties in ``k_g`` walked by group index).

    float32 rounding moves a cumulative boundary across ``x.5`` in a small share of cases (one token moves between
    two groups: 42 of 10,209 random quota problems in our check, e.g. ``k = (1, 4, 1)``, N = 13). The sort only
    orders groups with equal ``k_g`` in the deficit walk; in our searches it never changed a quota.

    Args:
        group_sizes (`torch.Tensor` of shape `(batch_size, K)`): n_g.
        kept_counts (`torch.Tensor` of shape `(batch_size, K)`): k_g, tokens kept by NMS.
        num_tokens (`int`): N, the budget including the CLS token when `reserve_cls`.
        reserve_cls (`bool`, *optional*, defaults to `True`): whether one token of N is the CLS token.
        upper_factor (`int`, *optional*, defaults to 5): the ``5`` of the upper bound.
        arithmetic (`str`, *optional*, defaults to `"code"`): ``"code"`` or ``"float64"`` (above).

    Returns:
        `torch.Tensor` of shape `(batch_size, K)` (long): q_g, summing to ``N - 1`` (or ``N``) per image.

    Raises:
        ValueError: for an unknown `arithmetic`.
    """
    if arithmetic not in QUOTA_ARITHMETIC:
        raise ValueError(f"`arithmetic` must be one of {QUOTA_ARITHMETIC}, but is {arithmetic!r}")
    n = group_sizes.long()
    k = kept_counts.long()
    lower = n.clamp(max=1)
    upper = torch.minimum(torch.minimum(torch.full_like(n, upper_factor * math.ceil(num_tokens / 64)), n), k)
    while bool((upper.sum(-1) < num_tokens).any()) and bool((upper < n).any()):
        short = (upper.sum(-1) < num_tokens)[:, None]
        upper = torch.where(short, torch.minimum(upper + 1, n), upper)
    target = num_tokens - lower.sum(-1) - int(reserve_cls)  # R
    target = target.clamp(min=0)
    dtype = torch.float32 if arithmetic == "code" else torch.float64
    share = k.to(dtype) / k.sum(-1, keepdim=True).to(dtype)
    cum = (torch.cumsum(share, dim=-1) * target[:, None].to(dtype)).round().long()
    d = cum - F.pad(cum[:, :-1], (1, 0))
    quotas = torch.minimum(d + lower, upper)
    deficit = target + lower.sum(-1) - quotas.sum(-1)
    if arithmetic == "code":
        order = torch.argsort(k, dim=-1, descending=True)  # the authors' call: torch's default, not stable
    else:
        order = torch.argsort(k, dim=-1, descending=True, stable=True)
    rows = torch.arange(n.shape[0], device=n.device)
    for j in range(order.shape[1]):
        if not bool((deficit > 0).any()):
            break
        g = order[:, j]
        add = torch.minimum(upper[rows, g] - quotas[rows, g], deficit).clamp(min=0)
        quotas[rows, g] += add
        deficit = deficit - add
    return quotas


def select_by_quota(priority: torch.Tensor, groups: torch.Tensor, quotas: torch.Tensor) -> torch.Tensor:
    """Take the top ``q_g`` tokens of each group by `priority`; returns `(batch_size, Σ q)` indices, group by group.

    All rows must have the same Σ q. Within a group the order is descending priority (so NMS-kept tokens first).
    """
    b, t = priority.shape
    by_priority = torch.argsort(priority, dim=-1, descending=True, stable=True)
    g_sorted = groups.gather(1, by_priority)
    by_group = torch.argsort(g_sorted, dim=-1, stable=True)
    order = by_priority.gather(1, by_group)  # tokens sorted by (group asc, priority desc)
    g_order = groups.gather(1, order)
    counts = _counts(groups, quotas.shape[1])
    starts = torch.cumsum(counts, -1) - counts  # first sorted position of each group
    rank = torch.arange(t, device=priority.device)[None, :] - starts.gather(1, g_order)
    chosen = rank < quotas.gather(1, g_order)
    total = int(chosen[0].sum())
    if not bool((chosen.sum(-1) == total).all()):
        raise ValueError("every image must select the same number of tokens; got " + str(chosen.sum(-1).tolist()))
    return order[chosen].reshape(b, total)


def _counts(groups: torch.Tensor, num_groups: int) -> torch.Tensor:
    return F.one_hot(groups, num_groups).sum(dim=1)


@dataclass
class SelectionInfo:
    """Intermediate quantities of :func:`prunesid_select` (for tests, plots and analysis).

    Attributes:
        groups (`(batch_size, T)` long): PSCA group of each patch token.
        loadings (`(batch_size, T, K)` fp32): ``|V|``.
        scores (`(batch_size, T)` fp32): importance scores used for ranking.
        priority (`(batch_size, T)` fp32): NMS priority (kept) or raw score (not kept).
        kept (`(batch_size, T)` bool): NMS-kept tokens.
        kept_counts, group_sizes, quotas (`(batch_size, K)` long): k_g, n_g, q_g.
        rho, tau (`(batch_size,)` fp32): redundancy ρ and NMS threshold τ = λ·ρ.
        num_groups (`int`), nms_lambda (`float`).
    """

    groups: torch.Tensor
    loadings: torch.Tensor
    scores: torch.Tensor
    priority: torch.Tensor
    kept: torch.Tensor
    kept_counts: torch.Tensor
    group_sizes: torch.Tensor
    quotas: torch.Tensor
    rho: torch.Tensor
    tau: torch.Tensor
    num_groups: int
    nms_lambda: float


def _validate_budget(num_tokens, available: int) -> int:
    if isinstance(num_tokens, bool) or not isinstance(num_tokens, int):
        raise TypeError(f"`num_tokens` must be an int, but is {type(num_tokens).__name__}")
    if num_tokens <= 0:
        raise ValueError(f"`num_tokens` must be a positive int, but is {num_tokens}")
    if num_tokens > available:
        raise ValueError(f"`num_tokens` must be <= the {available} available visual tokens, but is {num_tokens}")
    return num_tokens


@torch.no_grad()
def prunesid_select(
    hidden_states: torch.Tensor,
    num_tokens: int,
    cls_attention: torch.Tensor | None = None,
    *,
    score: str = "cls_attention",
    has_cls: bool = True,
    num_groups: int | None = None,
    nms_lambda: float | None = None,
    use_nms: bool = True,
    upper_factor: int = 5,
    seed: int | None = 0,
    niter: int = 2,
    quota_arithmetic: str = "code",
    return_info: bool = False,
):
    """PruneSID selection for the LLaVA path (the authors' ``CLIPVisionTower_PruneSID.forward``), batched.

    Steps: PSCA groups with K = max(floor(N/4), 1) (:func:`psca_groups`); scores = CLS attention summed over heads
    (code) or the PCA loading ``|V[i, g(i)]|`` (paper); ρ = strict-upper-triangle mean cosine similarity and
    τ = λ·ρ with λ = N/32 (:func:`redundancy`); intra-group NMS (:func:`group_nms`); quotas (:func:`allocate_quotas`);
    the top ``q_g`` tokens of every group by NMS priority. Because cosine ≤ 1, NMS suppresses nothing once τ ≥ 1
    (e.g. N = 192 with ρ ≥ 0.17): this saturation is reproduced, not "fixed".

    Args:
        hidden_states (`torch.Tensor` of shape `(batch_size, 1 + T, hidden_size)` if `has_cls` else `(batch_size, T,
            hidden_size)`): vision-tower features (the penultimate CLIP layer for LLaVA), CLS at position 0.
        num_tokens (`int`): N, the number of tokens returned, CLS included when `has_cls`.
        cls_attention (`torch.Tensor` of shape `(batch_size, T)`, *optional*): CLS-row attention to the patch tokens
            summed over heads; required when ``score="cls_attention"``.
        score (`str`, *optional*, defaults to `"cls_attention"`): ``"cls_attention"`` (LLaVA code) or
            ``"pca_loading"`` (paper, Qwen2-VL code).
        has_cls (`bool`, *optional*, defaults to `True`): position 0 is a CLS token that is always kept (first).
        num_groups (`int`, *optional*): K; defaults to ``max(floor(N / 4), 1)`` (``floor(N/4)`` in the code, which
            fails for N < 4), capped at the number of patch tokens and the hidden size. An explicit K must not exceed
            the patch budget (``N - 1`` with `has_cls`): every non-empty group keeps at least one token.
        nms_lambda (`float`, *optional*): λ; defaults to N / 32.
        use_nms (`bool`, *optional*, defaults to `True`): `False` ranks by raw score inside groups (k_g = n_g).
        upper_factor (`int`, *optional*, defaults to 5): see :func:`allocate_quotas`.
        seed (`int`, *optional*, defaults to 0) and niter (`int`, *optional*, defaults to 2): randomised PCA.
        quota_arithmetic (`str`, *optional*, defaults to `"code"`): see :func:`allocate_quotas`.
        return_info (`bool`, *optional*, defaults to `False`): also return a :class:`SelectionInfo`.

    Returns:
        `torch.LongTensor` of shape `(batch_size, N)`: positions into `hidden_states`, ``[0, selected...]`` (CLS
        first, then group by group) -- plus a :class:`SelectionInfo` when `return_info`.

    Raises:
        ValueError: for N <= 0, N > available tokens, an unknown `score`, a missing `cls_attention`, or a
            `num_groups` outside ``[1, N - 1]`` (``[1, N]`` without CLS).
    """
    _check_features(hidden_states)
    if score not in SCORES:
        raise ValueError(f"`score` must be one of {SCORES}, but is {score!r}")
    b, total, d = hidden_states.shape
    _validate_budget(num_tokens, total)
    patches = hidden_states[:, 1:] if has_cls else hidden_states
    t = patches.shape[1]
    n_patch = num_tokens - int(has_cls)
    device = hidden_states.device
    if n_patch == 0 or t == 0:
        idx = torch.zeros(b, num_tokens, dtype=torch.long, device=device)
        return (idx, None) if return_info else idx
    if num_groups is not None:
        if isinstance(num_groups, bool) or not isinstance(num_groups, int) or not 1 <= num_groups <= n_patch:
            raise ValueError(
                f"`num_groups` must be an int in [1, {n_patch}] (the patch tokens kept: every non-empty group keeps "
                f"one), but is {num_groups!r}"
            )
        k = num_groups
    else:
        k = max(num_tokens // 4, 1)
    k = max(1, min(k, t, d))
    loadings, groups = psca_groups(patches, k, niter=niter, seed=seed)
    if score == "cls_attention":
        if cls_attention is None:
            raise ValueError(
                "`cls_attention` of shape (batch_size, num_patches) is required for score='cls_attention'"
            )
        if tuple(cls_attention.shape) != (b, t):
            raise ValueError(f"`cls_attention` must have shape {(b, t)}, got {tuple(cls_attention.shape)}")
        scores = cls_attention.float()
    else:
        scores = loadings.gather(-1, groups[..., None]).squeeze(-1)
    lam = float(nms_lambda) if nms_lambda is not None else num_tokens / 32
    sim = cosine_similarity_matrix(patches)
    rho = redundancy(sim, "llava")
    tau = lam * rho
    group_sizes = _counts(groups, k)
    if use_nms:
        priority, kept, kept_counts = group_nms(sim, scores, groups, k, tau)
    else:
        priority, kept, kept_counts = scores.clone(), torch.ones_like(groups, dtype=torch.bool), group_sizes.clone()
    quotas = allocate_quotas(
        group_sizes,
        kept_counts,
        num_tokens,
        reserve_cls=has_cls,
        upper_factor=upper_factor,
        arithmetic=quota_arithmetic,
    )
    chosen = select_by_quota(priority, groups, quotas)
    if has_cls:
        chosen = torch.cat([torch.zeros(b, 1, dtype=torch.long, device=device), chosen + 1], dim=1)
    if not return_info:
        return chosen
    info = SelectionInfo(groups, loadings, scores, priority, kept, kept_counts, group_sizes, quotas, rho, tau, k, lam)
    return chosen, info


def qwen2vl_budget(num_patches: int, num_tokens: int) -> int:
    """The Qwen2-VL path's budget: N means "tokens per 576", N_q = max(round(T·N/576), 16); T ≤ 16 keeps all."""
    if num_patches <= 16:
        return num_patches
    return min(max(round(num_patches * num_tokens / 576), 16), num_patches)


@torch.no_grad()
def prunesid_select_qwen2vl(
    hidden_states: torch.Tensor, num_tokens: int, seed: int | None = 0, niter: int = 2, quota_arithmetic: str = "code"
) -> torch.Tensor:
    """The Qwen2-VL variant of the selection (``prunesid_qwen/modeling_qwen2_vl.py``), on merger outputs (no CLS).

    N_q = :func:`qwen2vl_budget`; K = max(floor(N_q/4), 4); score = PCA loading; ρ_q = :func:`redundancy` with
    ``variant="qwen2vl"``; threshold = max(N_q / (T/18), 1)·ρ_q; quotas without CLS reservation. The kept positions
    are sorted ascending only when more than 150 are kept (as in the code); otherwise they come group by group.
    An input with T ≤ 16 is returned unchanged (all positions, in order). Gather ``position_ids[..., kept]`` (the
    M-RoPE ids, `(3, batch_size, T)`) with the returned indices so that kept tokens keep their original positions.

    Returns:
        `torch.LongTensor` of shape `(batch_size, N_q)`.
    """
    _check_features(hidden_states)
    b, t, d = hidden_states.shape
    if isinstance(num_tokens, bool) or not isinstance(num_tokens, int) or num_tokens <= 0:
        raise ValueError(f"`num_tokens` must be a positive int, but is {num_tokens!r}")
    n_q = qwen2vl_budget(t, num_tokens)
    if n_q == t:
        return torch.arange(t, device=hidden_states.device).expand(b, t).clone()
    k = max(1, min(max(n_q // 4, 4), t, d))
    loadings, groups = psca_groups(hidden_states, k, niter=niter, seed=seed)
    scores = loadings.gather(-1, groups[..., None]).squeeze(-1)
    sim = cosine_similarity_matrix(hidden_states)
    tau = max(n_q / (t / 18), 1.0) * redundancy(sim, "qwen2vl")
    priority, _, kept_counts = group_nms(sim, scores, groups, k, tau)
    quotas = allocate_quotas(_counts(groups, k), kept_counts, n_q, reserve_cls=False, arithmetic=quota_arithmetic)
    chosen = select_by_quota(priority, groups, quotas)[:, :n_q]
    if n_q > 150:
        chosen = chosen.sort(dim=-1).values
    return chosen


def information_score(hidden_states: torch.Tensor, has_cls: bool = True) -> torch.Tensor:
    """φ = 1 - ρ per image (paper Eq. 7): the information content used by PruneSID-Dyn; shape `(batch_size,)`."""
    _check_features(hidden_states)
    patches = hidden_states[:, 1:] if has_cls else hidden_states
    return 1.0 - redundancy(cosine_similarity_matrix(patches), "llava")


def dynamic_budget(
    phi: torch.Tensor, mean_budget: int, max_tokens: int, reference_phi: float | None = None
) -> list[int]:
    """PruneSID-Dyn per-image budgets (paper §3.4; the normalisation is a [reconstruction], not in the code).

    ``N'_img = round(N̄ · φ_img / φ̄)`` clipped to ``[1, max_tokens]``, where φ̄ is `reference_phi` (the mean φ over
    a dataset, e.g. measured with :func:`information_score` on a calibration set) or, when `None`, the mean φ of
    the given batch, so that the batch's average budget stays ≈ N̄.

    Args:
        phi (`torch.Tensor` of shape `(batch_size,)`): φ per image.
        mean_budget (`int`): N̄.
        max_tokens (`int`): the clip's upper end (available tokens per image).
        reference_phi (`float`, *optional*): φ̄.

    Returns:
        `list[int]` of per-image budgets.
    """
    _validate_budget(mean_budget, max_tokens)
    ref = float(phi.float().mean()) if reference_phi is None else float(reference_phi)
    if not ref > 0:
        raise ValueError(f"`reference_phi` must be > 0, but is {ref}")
    raw = torch.round(mean_budget * phi.float() / ref).clamp(1, max_tokens)
    return [int(v) for v in raw.tolist()]


__all__ = [
    "QUOTA_ARITHMETIC",
    "SCORES",
    "SelectionInfo",
    "allocate_quotas",
    "cosine_similarity_matrix",
    "dynamic_budget",
    "group_nms",
    "information_score",
    "prunesid_select",
    "prunesid_select_qwen2vl",
    "psca_groups",
    "qwen2vl_budget",
    "redundancy",
    "select_by_quota",
]
