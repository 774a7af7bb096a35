"""`PruneSIDConfig`: the pruning settings, stored on the model config as ``config.prunesid`` (a dict)."""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, field, fields
from typing import Any


METHODS = ("prunesid", "random", "pooling", "visionzip", "divprune", "fastv")
TOKEN_ORDERS = ("selection", "spatial")
QUOTA_ARITHMETIC = ("code", "float64")
ANYRES_ORDERS = ("code", "spatial")

# `keep_cls` default of each method, as published (see docs/methods/prunesid.md, "Baselines"):
# PruneSID's LLaVA code keeps the CLS token as one of the N; VisionZip's `dominant` count includes CLS
# (`apply_info(dominant_num=dominant - 1)`, 54 = CLS + 53); DivPrune runs on stock LLaVA features (CLS already dropped)
# and keeps N patch tokens; FastV prunes inside the LLM and leaves the stock features alone; random / pooling have no
# publication and follow stock LLaVA (CLS dropped).
KEEP_CLS_DEFAULTS = {
    "prunesid": True,
    "visionzip": True,
    "divprune": False,
    "random": False,
    "pooling": False,
    "fastv": False,
}
FASTV_DEFAULT_K = 2  # FastV (arXiv 2403.06764) "K=2" in the paper's main setting and the repo's latency table


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value))


@dataclass
class PruneSIDConfig:
    """Visual-token pruning settings for the hfx LLaVA classes (PruneSID, arXiv 2603.09480, and its baselines).

    Saved in the model's ``config.json`` under the key ``prunesid`` (see :meth:`to_dict`), so a pruned model
    round-trips with ``save_pretrained`` / ``from_pretrained``. Every field is validated at construction.

    Args:
        num_visual_tokens (`int`, *optional*, defaults to `64`):
            N, visual tokens fed to the LLM per image (LLaVA-1.5) or per AnyRes crop / video frame (LLaVA-NeXT).
            With `keep_cls` the CLS token is one of the N, as in the authors' code. For ``method="fastv"``, N tokens
            are kept per ``(image_size / patch_size)²`` image tokens from layer `fastv_k` on (64 of 576 for LLaVA-1.5).
            `None` disables pruning (unless ``method="fastv"`` with `fastv_ratio`).
        method (`str`, *optional*, defaults to `"prunesid"`):
            One of ``"prunesid"``, ``"random"``, ``"pooling"``, ``"visionzip"``, ``"divprune"`` (see
            :mod:`hfx.prunesid.baselines`) or ``"fastv"`` (inside the LLM, see :mod:`hfx.prunesid.fastv`).
        score (`str`, *optional*, defaults to `"cls_attention"`):
            PruneSID importance score: ``"cls_attention"`` (the LLaVA code) or ``"pca_loading"`` (the paper).
        num_groups (`int`, *optional*): PSCA components K; defaults to ``max(floor(N/4), 1)``. Must be at most the
            number of patch tokens kept (``N - 1`` with `keep_cls`), since every non-empty group gets one token.
        nms_lambda (`float`, *optional*): λ > 0 of τ = λ·ρ; defaults to N/32.
        use_nms (`bool`, *optional*, defaults to `True`): disable to rank by raw score inside groups (ablation).
        dynamic (`bool`, *optional*, defaults to `False`):
            PruneSID-Dyn (paper §3.4): N'_img = round(N · φ_img / reference_phi), φ = 1 - ρ. The normalisation is a
            [reconstruction]. Placeholders then depend on the image: build inputs with
            :func:`hfx.prunesid.prepare_dynamic_inputs`.
        reference_phi (`float`, *optional*): the dataset mean φ > 0 for `dynamic`; `None` uses the batch mean.
        keep_cls (`bool`, *optional*):
            Keep the penultimate-layer CLS token as the first of the N tokens. `None` (default) follows each method's
            publication: `True` for ``"prunesid"`` (authors' code) and ``"visionzip"`` (its dominant count includes
            CLS), `False` for ``"divprune"`` (N patch tokens of stock LLaVA), ``"random"``, ``"pooling"`` and
            ``"fastv"`` (which must be `False`: it does not touch the vision features).
        token_order (`str`, *optional*, defaults to `"selection"`):
            ``"selection"``: the method's own order (PruneSID: CLS then group by group, as the authors' code);
            ``"spatial"``: raster order.
        seed (`int`, *optional*, defaults to `0`): seeds the randomised PCA and the random baseline (``0 <= seed <
            2**63``).
        pca_niter (`int`, *optional*, defaults to `2`): power iterations of ``torch.pca_lowrank`` (``>= 0``).
        quota_upper_factor (`int`, *optional*, defaults to `5`): per-group cap ``factor * ceil(N/64)`` (``>= 1``).
        quota_arithmetic (`str`, *optional*, defaults to `"code"`):
            How the group quotas round (see :func:`hfx.prunesid.selection.allocate_quotas`): ``"code"`` -- float32
            proportions and torch's default descending `argsort` for the deficit walk, as the authors'
            ``clip_encoder.py``; ``"float64"`` -- float64 proportions and a stable sort (ties by group index). They
            differ by one token in a small share of cases (42 of 10,209 random quota problems in our check).
        anyres_order (`str`, *optional*, defaults to `"code"`):
            LLaVA-NeXT sub-crop token order (see :class:`hfx.prunesid.modeling.PruneSIDAnyResMixin`): ``"code"`` --
            as the authors' ``restore_image_features_sorted``: the kept positions of each crop are sorted ascending
            and filled with that crop's tokens *in selection order*, then the slots are read in raster order of the
            assembled grid; ``"spatial"`` -- every kept token at its own position, read in raster order.
        visionzip_contextual_ratio (`float`, *optional*, defaults to `10/64`):
            VisionZip's share of contextual (merged) tokens, in [0, 1): 64 = 54 dominant (CLS included) + 10 contextual.
        fastv_k (`int`, *optional*): FastV's K, the decoder layer from which image tokens are dropped (``>= 1``,
            below the number of LLM layers), ranked by the last token's head-averaged attention in layer K-1.
            Defaults to 2 for ``method="fastv"``; must be `None` for other methods.
        fastv_ratio (`float`, *optional*): FastV's R, the fraction of image tokens dropped at layer K, in [0, 1)
            (the FastV repo's ``fastv_r``). Give either `fastv_ratio` (with ``num_visual_tokens=None``) or
            `num_visual_tokens`; must be `None` for other methods.

    Raises:
        ValueError: naming the field and the allowed values, for any invalid field or combination.
        TypeError: for a field of the wrong type (e.g. ``use_nms="False"``, ``seed="a"``, ``num_groups=2.5``).
    """

    num_visual_tokens: int | None = 64
    method: str = "prunesid"
    score: str = "cls_attention"
    num_groups: int | None = None
    nms_lambda: float | None = None
    use_nms: bool = True
    dynamic: bool = False
    reference_phi: float | None = None
    keep_cls: bool | None = None
    token_order: str = "selection"
    seed: int = 0
    pca_niter: int = 2
    quota_upper_factor: int = 5
    quota_arithmetic: str = "code"
    anyres_order: str = "code"
    visionzip_contextual_ratio: float = field(default=10 / 64)
    fastv_k: int | None = None
    fastv_ratio: float | None = None

    def __post_init__(self):
        from .selection import SCORES

        def choice(name, allowed):
            value = getattr(self, name)
            if not isinstance(value, str) or value not in allowed:
                raise ValueError(f"`{name}` must be one of {allowed}, but is {value!r}")

        def boolean(name):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise TypeError(f"`{name}` must be a bool (True or False), but is {value!r} ({type(value).__name__})")

        def integer(name, minimum, optional=False):
            value = getattr(self, name)
            if value is None and optional:
                return
            if not _is_int(value):
                kind = "an int or None" if optional else "an int"
                raise TypeError(f"`{name}` must be {kind}, but is {value!r} ({type(value).__name__})")
            if value < minimum:
                raise ValueError(f"`{name}` must be >= {minimum}, but is {value}")

        def real(name, low, high=None, low_open=False, optional=False):
            value = getattr(self, name)
            if value is None and optional:
                return
            if not _is_real(value):
                raise TypeError(f"`{name}` must be a finite float{' or None' if optional else ''}, but is {value!r}")
            ok = (value > low if low_open else value >= low) and (high is None or value < high)
            if not ok:
                lo = f"{'(' if low_open else '['}{low}"
                raise ValueError(f"`{name}` must be in {lo}, {high if high is not None else 'inf'}), but is {value}")

        choice("method", METHODS)
        n = self.num_visual_tokens
        if n is not None and (not _is_int(n) or n <= 0):
            raise ValueError(f"`num_visual_tokens` must be a positive int or None, but is {n!r}")
        choice("score", SCORES)
        choice("token_order", TOKEN_ORDERS)
        choice("quota_arithmetic", QUOTA_ARITHMETIC)
        choice("anyres_order", ANYRES_ORDERS)
        boolean("use_nms")
        boolean("dynamic")
        integer("num_groups", 1, optional=True)
        real("nms_lambda", 0.0, low_open=True, optional=True)
        real("reference_phi", 0.0, low_open=True, optional=True)
        integer("seed", 0)
        if self.seed >= 2**63:
            raise ValueError(f"`seed` must be < 2**63, but is {self.seed}")
        integer("pca_niter", 0)
        integer("quota_upper_factor", 1)
        real("visionzip_contextual_ratio", 0.0, 1.0)
        integer("fastv_k", 1, optional=True)
        real("fastv_ratio", 0.0, 1.0, optional=True)

        if self.keep_cls is None:
            self.keep_cls = KEEP_CLS_DEFAULTS[self.method]
        boolean("keep_cls")

        if self.dynamic and self.method != "prunesid":
            raise ValueError("`dynamic=True` is only defined for `method='prunesid'` (PruneSID-Dyn)")
        if self.reference_phi is not None and not self.dynamic:
            raise ValueError("`reference_phi` is only used with `dynamic=True`; leave it None otherwise")
        if self.dynamic and self.num_groups is not None:
            raise ValueError("`num_groups` must be None with `dynamic=True` (K follows each image's budget N'/4)")
        if self.num_groups is not None and n is not None and self.num_groups > n - int(self.keep_cls):
            raise ValueError(
                f"`num_groups` must be <= the {n - int(self.keep_cls)} patch tokens kept "
                f"(num_visual_tokens={n}, keep_cls={self.keep_cls}): every non-empty group keeps one token, "
                f"but is {self.num_groups}"
            )
        if self.method == "fastv":
            if self.keep_cls:
                raise ValueError(
                    "`keep_cls` must be False for `method='fastv'` (FastV keeps the stock visual features)"
                )
            if self.fastv_k is None:
                self.fastv_k = FASTV_DEFAULT_K
            if self.fastv_ratio is not None and n is not None:
                raise ValueError(
                    "give either `num_visual_tokens` (N kept per image) or `fastv_ratio` (R dropped) for "
                    f"`method='fastv'`, not both (got num_visual_tokens={n}, fastv_ratio={self.fastv_ratio}); "
                    "pass num_visual_tokens=None with fastv_ratio"
                )
        else:
            for name in ("fastv_k", "fastv_ratio"):
                if getattr(self, name) is not None:
                    raise ValueError(f"`{name}` is only used with `method='fastv'`; leave it None for {self.method!r}")

    @property
    def enabled(self) -> bool:
        return self.num_visual_tokens is not None or (self.method == "fastv" and self.fastv_ratio is not None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> PruneSIDConfig:
        """Build from a dict (unknown keys raise `ValueError`); `None` gives a disabled config."""
        if data is None:
            return cls(num_visual_tokens=None)
        if isinstance(data, cls):
            return data
        if not isinstance(data, dict):
            raise TypeError(f"`prunesid` settings must be a dict or None, but are {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown PruneSIDConfig keys {sorted(unknown)}; allowed: {sorted(known)}")
        return cls(**data)

    @classmethod
    def from_model_config(cls, config) -> PruneSIDConfig:
        """Read ``config.prunesid`` of a (LLaVA) model config; absent means pruning disabled."""
        return cls.from_dict(getattr(config, "prunesid", None))


__all__ = ["ANYRES_ORDERS", "KEEP_CLS_DEFAULTS", "METHODS", "QUOTA_ARITHMETIC", "TOKEN_ORDERS", "PruneSIDConfig"]
