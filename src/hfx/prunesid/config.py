"""`PruneSIDConfig`: the pruning settings, stored on the model config as ``config.prunesid`` (a dict)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


METHODS = ("prunesid", "random", "pooling", "visionzip", "divprune")
TOKEN_ORDERS = ("selection", "spatial")


@dataclass
class PruneSIDConfig:
    """Visual-token pruning settings for the hfx LLaVA classes (PruneSID, arXiv 2603.09480, and its baselines).

    Saved in the model's ``config.json`` under the key ``prunesid`` (see :meth:`to_dict`), so a pruned model
    round-trips with ``save_pretrained`` / ``from_pretrained``.

    Args:
        num_visual_tokens (`int`, *optional*, defaults to `64`):
            N, visual tokens fed to the LLM per image (LLaVA-1.5) or per AnyRes crop / video frame (LLaVA-NeXT).
            With `keep_cls` the CLS token is one of the N, as in the authors' code. `None` disables pruning.
        method (`str`, *optional*, defaults to `"prunesid"`):
            One of ``"prunesid"``, ``"random"``, ``"pooling"``, ``"visionzip"``, ``"divprune"`` (see
            :mod:`hfx.prunesid.baselines`).
        score (`str`, *optional*, defaults to `"cls_attention"`):
            PruneSID importance score: ``"cls_attention"`` (the LLaVA code) or ``"pca_loading"`` (the paper).
        num_groups (`int`, *optional*): PSCA components K; defaults to ``max(floor(N/4), 1)``.
        nms_lambda (`float`, *optional*): λ of τ = λ·ρ; defaults to N/32.
        use_nms (`bool`, *optional*, defaults to `True`): disable to rank by raw score inside groups (ablation).
        dynamic (`bool`, *optional*, defaults to `False`):
            PruneSID-Dyn (paper §3.4): N'_img = round(N · φ_img / reference_phi), φ = 1 - ρ. The normalisation is a
            [reconstruction]. Placeholders then depend on the image: build inputs with
            :func:`hfx.prunesid.prepare_dynamic_inputs`.
        reference_phi (`float`, *optional*): the dataset mean φ for `dynamic`; `None` uses the batch mean.
        keep_cls (`bool`, *optional*, defaults to `True`):
            Keep the penultimate-layer CLS token as the first of the N tokens (the authors' code). `False` selects N
            patch tokens only (stock LLaVA drops CLS).
        token_order (`str`, *optional*, defaults to `"selection"`):
            ``"selection"``: CLS then group by group (the authors' code, base image); ``"spatial"``: raster order.
        seed (`int`, *optional*, defaults to `0`): seeds the randomised PCA and the random baseline.
        pca_niter (`int`, *optional*, defaults to `2`): power iterations of ``torch.pca_lowrank``.
        quota_upper_factor (`int`, *optional*, defaults to `5`): per-group cap ``factor * ceil(N/64)``.
        visionzip_contextual_ratio (`float`, *optional*, defaults to `10/64`):
            VisionZip's share of contextual (merged) tokens: 64 = 54 dominant + 10 contextual.

    Raises:
        ValueError: for a non-positive `num_visual_tokens` or an unknown `method` / `score` / `token_order`.
    """

    num_visual_tokens: int | None = 64
    method: str = "prunesid"
    score: str = "cls_attention"
    num_groups: int | None = None
    nms_lambda: float | None = None
    use_nms: bool = True
    dynamic: bool = False
    reference_phi: float | None = None
    keep_cls: bool = True
    token_order: str = "selection"
    seed: int = 0
    pca_niter: int = 2
    quota_upper_factor: int = 5
    visionzip_contextual_ratio: float = field(default=10 / 64)

    def __post_init__(self):
        from .selection import SCORES

        n = self.num_visual_tokens
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n <= 0):
            raise ValueError(f"`num_visual_tokens` must be a positive int or None, but is {n!r}")
        if self.method not in METHODS:
            raise ValueError(f"`method` must be one of {METHODS}, but is {self.method!r}")
        if self.score not in SCORES:
            raise ValueError(f"`score` must be one of {SCORES}, but is {self.score!r}")
        if self.token_order not in TOKEN_ORDERS:
            raise ValueError(f"`token_order` must be one of {TOKEN_ORDERS}, but is {self.token_order!r}")
        if self.num_groups is not None and self.num_groups <= 0:
            raise ValueError(f"`num_groups` must be a positive int or None, but is {self.num_groups!r}")
        if not 0.0 <= self.visionzip_contextual_ratio < 1.0:
            raise ValueError(
                f"`visionzip_contextual_ratio` must be in [0, 1), but is {self.visionzip_contextual_ratio}"
            )
        if self.dynamic and self.method != "prunesid":
            raise ValueError("`dynamic=True` is only defined for `method='prunesid'` (PruneSID-Dyn)")

    @property
    def enabled(self) -> bool:
        return self.num_visual_tokens is not None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> PruneSIDConfig:
        """Build from a dict (unknown keys raise `ValueError`); `None` gives a disabled config."""
        if data is None:
            return cls(num_visual_tokens=None)
        if isinstance(data, cls):
            return data
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown PruneSIDConfig keys {sorted(unknown)}; allowed: {sorted(known)}")
        return cls(**data)

    @classmethod
    def from_model_config(cls, config) -> PruneSIDConfig:
        """Read ``config.prunesid`` of a (LLaVA) model config; absent means pruning disabled."""
        return cls.from_dict(getattr(config, "prunesid", None))


__all__ = ["METHODS", "TOKEN_ORDERS", "PruneSIDConfig"]
