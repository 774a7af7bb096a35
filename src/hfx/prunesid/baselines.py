"""Baselines of the PruneSID paper under one API, and the dispatcher :func:`reduce_visual_tokens`.

Every method maps vision-tower features ``(batch_size, 1 + T, hidden_size)`` (CLS at 0) to N tokens and returns a
:class:`TokenReduction`: the kept positions and, for merging methods, a row-stochastic weight matrix. Selection and
projection commute for token selection (the projector is applied per token), so reductions are applied to the tower
features before the LLaVA projector.

* ``random`` -- a uniform random subset of the patch positions, drawn per image from a generator seeded with
  ``seed`` (the same subset for every image, whatever its position in the batch); the usual sanity baseline.
* ``pooling`` -- uniform spatial average pooling of the patch grid to N tokens (as in LLaVA-style pooled
  baselines, e.g. the LLaVA-NeXT-Video pooler).
* ``visionzip`` -- VisionZip (Yang et al., CVPR 2025, arXiv 2412.04467; ``visionzip/clip_encoder.py``): CLS and the
  dominant tokens by CLS attention at CLIP layer -2 (CLS counts as one of the dominant tokens: 64 = 54 + 10), plus
  contextual tokens: a target plus the mean of the tokens merged into it by key similarity.
* ``divprune`` -- DivPrune (Alvar et al., CVPR 2025, arXiv 2503.02175; ``llava_arch.py`` ``DivPrune``): greedy
  max-min diversity on cosine distance of the projected patch tokens (stock LLaVA features: no CLS).
* ``prunesid`` -- :func:`hfx.prunesid.selection.prunesid_select`.

FastV (Chen et al., ECCV 2024, arXiv 2403.06764) drops tokens *inside* the LLM at layer K, so it is not a function of
the tower features: see :mod:`hfx.prunesid.fastv` (``method="fastv"`` in the same :func:`hfx.prunesid.apply` API).

``keep_cls`` defaults follow each publication (:data:`hfx.prunesid.config.KEEP_CLS_DEFAULTS`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .config import PruneSIDConfig
from .selection import _validate_budget, cosine_similarity_matrix, dynamic_budget, information_score, prunesid_select


@dataclass
class TokenReduction:
    """The result of a token-reduction method.

    Attributes:
        indices (`torch.LongTensor` of shape `(batch_size, N)`): kept positions into the ``1 + T`` input tokens
            (for merged tokens: the representative position, used for visualisation).
        weights (`torch.Tensor` of shape `(batch_size, N, 1 + T)`, *optional*): row-stochastic merge weights;
            `None` means pure selection (``out = x[indices]``).
    """

    indices: torch.Tensor
    weights: torch.Tensor | None = None

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        """Reduce `x` `(batch_size, 1 + T, D)` to `(batch_size, N, D)`."""
        if self.weights is None:
            return x.gather(1, self.indices[..., None].expand(-1, -1, x.shape[-1]))
        return torch.bmm(self.weights.to(x.dtype), x)

    def spatial_order(self) -> TokenReduction:
        order = self.indices.argsort(dim=-1, stable=True)
        idx = self.indices.gather(1, order)
        w = (
            None
            if self.weights is None
            else self.weights.gather(1, order[..., None].expand(-1, -1, self.weights.shape[-1]))
        )
        return TokenReduction(idx, w)


def _with_cls(patch_idx: torch.Tensor, keep_cls: bool) -> torch.Tensor:
    """Patch positions `(B, M)` -> token positions (``+ 1``), with the CLS position 0 prepended when `keep_cls`."""
    idx = patch_idx + 1
    if keep_cls:
        cls = torch.zeros(idx.shape[0], 1, dtype=idx.dtype, device=idx.device)
        idx = torch.cat([cls, idx], dim=1)
    return idx


def random_select(
    hidden_states: torch.Tensor, num_tokens: int, keep_cls: bool = False, seed: int = 0
) -> TokenReduction:
    """Random baseline: N tokens (CLS + N-1 random patches when `keep_cls`), spatial order.

    Each image draws its subset from its own ``torch.Generator`` seeded with `seed`, so the kept positions do not
    depend on the image's position in the batch (and equal those of the image alone); change `seed` for another draw.
    """
    b, total, _ = hidden_states.shape
    _validate_budget(num_tokens, total if keep_cls else total - 1)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    noise = torch.rand(total - 1, generator=gen)  # one draw per image: every row gets a freshly seeded generator
    patch = noise.argsort()[: num_tokens - int(keep_cls)].sort().values
    patch = patch.to(hidden_states.device).expand(b, -1)
    return TokenReduction(_with_cls(patch, keep_cls))


def _grid(n: int) -> tuple[int, int]:
    a = math.isqrt(n)
    while n % a:
        a -= 1
    return a, n // a


def pooling_select(hidden_states: torch.Tensor, num_tokens: int, keep_cls: bool = False) -> TokenReduction:
    """Uniform spatial pooling: adaptive average pooling of the √T×√T patch grid to an a×b grid, a·b = N (- 1 CLS).

    The output grid is the factorisation of the patch budget closest to a square (a prime budget gives 1×n).

    Raises:
        ValueError: if the patch tokens do not form a square grid.
    """
    b, total, _ = hidden_states.shape
    t = total - 1
    _validate_budget(num_tokens, total if keep_cls else t)
    side = math.isqrt(t)
    if side * side != t:
        raise ValueError(f"`method='pooling'` needs a square patch grid, but there are {t} patch tokens")
    m = num_tokens - int(keep_cls)
    a, c = _grid(m) if m > 0 else (0, 0)
    eye = torch.eye(t, device=hidden_states.device, dtype=torch.float32).reshape(t, 1, side, side)
    w = F.adaptive_avg_pool2d(eye, (a, c)).reshape(t, m).T if m > 0 else eye.new_zeros(0, t)  # (m, T)
    w = F.pad(w, (1, 0))
    if keep_cls:
        cls_row = torch.zeros(1, total, device=w.device)
        cls_row[0, 0] = 1
        w = torch.cat([cls_row, w], dim=0)
    w = w.unsqueeze(0).expand(b, -1, -1).contiguous()
    return TokenReduction(w.argmax(dim=-1), w)


def visionzip_select(
    hidden_states: torch.Tensor,
    num_tokens: int,
    cls_attention: torch.Tensor,
    keys: torch.Tensor,
    keep_cls: bool = True,
    contextual_ratio: float = 10 / 64,
) -> TokenReduction:
    """VisionZip (arXiv 2412.04467): dominant tokens by CLS attention + contextual tokens merged by key similarity.

    As ``visionzip/clip_encoder.py``: ``n_ctx = round(N · contextual_ratio)`` (64 → 10, 128 → 20, 192 → 30) and
    ``n_dom = N - n_ctx`` dominant tokens, CLS included when `keep_cls` (the repo's ``visionzip(model, dominant=54,
    contextual=10)`` keeps CLS + 53 patches + 10 = 64). Dominant: the top patches by CLS attention summed over heads,
    in spatial order after CLS. Among the remaining R patches (ascending positions), ``n_ctx`` targets are taken with
    stride ``max(1, R // n_ctx)``; every other remaining patch joins its most similar target (cosine of the layer's
    keys averaged over heads), and each contextual token is ``target + mean(joined tokens)`` (the target itself plus
    the average of the others, ``0`` if none joined) -- the code's rule, not the mean over target and members.

    Args:
        cls_attention (`torch.Tensor` of shape `(batch_size, T)`): CLS-row attention summed over heads.
        keys (`torch.Tensor` of shape `(batch_size, 1 + T, head_dim)`): keys of the same layer, mean over heads.
        keep_cls (`bool`, *optional*, defaults to `True`): CLS as one of the dominant tokens (VisionZip's rule).
    """
    b, total, _ = hidden_states.shape
    t = total - 1
    _validate_budget(num_tokens, total if keep_cls else t)
    n_ctx = min(round(num_tokens * contextual_ratio), num_tokens - 1) if num_tokens > 1 else 0
    n_dom = num_tokens - n_ctx - int(keep_cls)
    device = hidden_states.device
    dom = cls_attention.float().topk(n_dom, dim=-1).indices.sort(dim=-1).values  # patch positions
    w = torch.zeros(b, num_tokens, total, device=device)
    rows = torch.arange(b, device=device)[:, None]
    if keep_cls:
        w[:, 0, 0] = 1
    off = int(keep_cls)
    w[rows, off + torch.arange(n_dom, device=device)[None], dom + 1] = 1
    if n_ctx > 0:
        is_dom = torch.zeros(b, t, dtype=torch.bool, device=device)
        is_dom[rows, dom] = True
        rest = (~is_dom).float().argsort(dim=-1, descending=True, stable=True)[:, : t - n_dom]  # (B, R), ascending
        r = rest.shape[1]
        step = max(1, r // n_ctx)
        tpos = torch.arange(0, r, step, device=device)[:n_ctx]
        targets = rest[:, tpos]  # (B, n_ctx)
        k = F.normalize(keys[:, 1:].float(), dim=-1)
        k_rest = k.gather(1, rest[..., None].expand(-1, -1, k.shape[-1]))
        k_tgt = k.gather(1, targets[..., None].expand(-1, -1, k.shape[-1]))
        assign = (k_rest @ k_tgt.transpose(1, 2)).argmax(dim=-1)  # (B, R)
        member = F.one_hot(assign, n_ctx).transpose(1, 2).float()  # (B, n_ctx, R)
        member[:, :, tpos] = 0  # targets are not merged into anything
        member = member / member.sum(-1, keepdim=True).clamp(min=1)  # mean of the joined tokens (0 if none)
        member[:, torch.arange(n_ctx, device=device), tpos] = 1  # + the target itself
        w[
            rows[..., None], (off + n_dom + torch.arange(n_ctx, device=device))[None, :, None], (rest + 1)[:, None, :]
        ] = member
        idx = torch.cat([dom + 1, targets + 1], dim=1)
    else:
        idx = dom + 1
    if keep_cls:
        idx = torch.cat([torch.zeros(b, 1, dtype=idx.dtype, device=device), idx], dim=1)
    return TokenReduction(idx, w)


@torch.no_grad()
def divprune_select(projected: torch.Tensor, num_tokens: int, keep_cls: bool = False) -> TokenReduction:
    """DivPrune (arXiv 2503.02175): greedy max-min diversity on D = 1 - cos of the projected patch tokens.

    First pick: the token whose second-smallest distance (the smallest is itself) is largest; then repeatedly the
    unselected token with the largest minimum distance to the selected set. Kept patches in spatial order. As
    published, DivPrune runs on stock LLaVA features (CLS dropped) and keeps N patch tokens (`keep_cls` False); the
    repo's default keep ratio 0.098 of 576 is ``round(56.4) = 56`` tokens, so pass ``num_tokens=56`` to reproduce
    that setting. Unlike the repo's loop, already selected tokens are excluded from later picks (with near-duplicate
    tokens the repo can pick one twice).

    Args:
        projected (`torch.Tensor` of shape `(batch_size, 1 + T, D)`): projector outputs (CLS at 0, not scored).
    """
    b, total, _ = projected.shape
    t = total - 1
    _validate_budget(num_tokens, total if keep_cls else t)
    m = num_tokens - int(keep_cls)
    dist = 1.0 - cosine_similarity_matrix(projected[:, 1:])  # (B, T, T)
    rows = torch.arange(b, device=projected.device)
    picks = []
    if m > 0:
        second = dist.topk(min(2, t), dim=-1, largest=False).values[..., -1]
        first = second.argmax(dim=-1)
        picks.append(first)
        selected = torch.zeros(b, t, dtype=torch.bool, device=projected.device)
        selected[rows, first] = True
        min_dist = dist[rows, first].masked_fill(selected, -float("inf"))
        for _ in range(m - 1):
            nxt = min_dist.argmax(dim=-1)
            picks.append(nxt)
            selected[rows, nxt] = True
            min_dist = torch.minimum(min_dist, dist[rows, nxt]).masked_fill(selected, -float("inf"))
    patch = torch.stack(picks, 1).sort(dim=-1).values if picks else torch.zeros(b, 0, dtype=torch.long)
    return TokenReduction(_with_cls(patch.to(projected.device), keep_cls))


def reduce_visual_tokens(
    hidden_states: torch.Tensor,
    config: PruneSIDConfig,
    cls_attention: torch.Tensor | None = None,
    keys: torch.Tensor | None = None,
    projector=None,
    num_tokens: int | None = None,
) -> TokenReduction:
    """Dispatch on ``config.method`` for one batch of crops / frames with the same budget.

    Args:
        hidden_states (`torch.Tensor` of shape `(batch_size, 1 + T, hidden_size)`): tower features, CLS first.
        config (:class:`PruneSIDConfig`).
        cls_attention (`(batch_size, T)`, *optional*): needed by ``prunesid`` (score ``cls_attention``), ``visionzip``.
        keys (`(batch_size, 1 + T, head_dim)`, *optional*): needed by ``visionzip``.
        projector (`Callable`, *optional*): the multimodal projector; needed by ``divprune``.
        num_tokens (`int`, *optional*): overrides ``config.num_visual_tokens``.
    """
    n = config.num_visual_tokens if num_tokens is None else num_tokens
    method = config.method
    if method == "prunesid":
        if not config.keep_cls:
            idx = (
                prunesid_select(hidden_states[:, 1:], n, cls_attention, has_cls=False, **_prunesid_kwargs(config)) + 1
            )
        else:
            idx = prunesid_select(hidden_states, n, cls_attention, **_prunesid_kwargs(config))
        red = TokenReduction(idx)
    elif method == "random":
        red = random_select(hidden_states, n, config.keep_cls, config.seed)
    elif method == "pooling":
        red = pooling_select(hidden_states, n, config.keep_cls)
    elif method == "visionzip":
        if cls_attention is None or keys is None:
            raise ValueError("`method='visionzip'` needs `cls_attention` and `keys` (a vision tower with a CLS token)")
        red = visionzip_select(
            hidden_states, n, cls_attention, keys, config.keep_cls, config.visionzip_contextual_ratio
        )
    elif method == "divprune":
        if projector is None:
            raise ValueError("`method='divprune'` needs the multimodal `projector`")
        red = divprune_select(projector(hidden_states), n, config.keep_cls)
    elif method == "fastv":
        raise ValueError(
            "`method='fastv'` prunes inside the LLM (hfx.prunesid.fastv), not the tower features; "
            "`reduce_visual_tokens` covers the pre-LLM methods only"
        )
    else:  # pragma: no cover - validated by PruneSIDConfig
        raise ValueError(f"unknown `method` {method!r}")
    return red.spatial_order() if config.token_order == "spatial" else red


def _prunesid_kwargs(config: PruneSIDConfig) -> dict:
    return dict(
        score=config.score,
        num_groups=config.num_groups,
        nms_lambda=config.nms_lambda,
        use_nms=config.use_nms,
        upper_factor=config.quota_upper_factor,
        seed=config.seed,
        niter=config.pca_niter,
        quota_arithmetic=config.quota_arithmetic,
    )


def per_image_budgets(hidden_states: torch.Tensor, config: PruneSIDConfig) -> list[int]:
    """Budgets per row of `hidden_states`: N for every row, or the PruneSID-Dyn budgets when ``config.dynamic``."""
    b, total, _ = hidden_states.shape
    available = total if config.keep_cls else total - 1
    if not config.dynamic:
        return [_validate_budget(config.num_visual_tokens, available)] * b
    phi = information_score(hidden_states, has_cls=True)
    return dynamic_budget(phi, config.num_visual_tokens, available, config.reference_phi)


__all__ = [
    "TokenReduction",
    "divprune_select",
    "per_image_budgets",
    "pooling_select",
    "random_select",
    "reduce_visual_tokens",
    "visionzip_select",
]
