"""`Celo2`: the learned optimizer as a :class:`torch.optim.Optimizer` that drops into ``transformers.Trainer``."""

from __future__ import annotations

import copy
import functools
import logging
import math
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .functional import NS_COEFFS, celo2_step_direction, init_state
from .meta_weights import Celo2MetaWeights
from .routing import ADAMW, LEARNED, ROUTINGS, route_parameters


logger = logging.getLogger(__name__)

VARIANTS = ("celo2", "celo2-base")
_LOW_PRECISION = (torch.float16, torch.bfloat16)
_META_KEY = "celo2_meta_weights"


def default_meta_weights_path() -> Path:
    """The folder of the meta-weights shipped with hfx (meta-trained on CPU by :mod:`hfx.optim.celo2.meta_train`;
    **not** the paper's checkpoint, see ``weights/README.md``)."""
    return Path(__file__).resolve().parent / "weights"


def load_meta_weights(source) -> Celo2MetaWeights:
    """Meta-weights from a :class:`Celo2MetaWeights`, an hfx folder / Hub repo, or an official checkpoint file.

    Args:
        source: a :class:`Celo2MetaWeights`; a folder or Hub repo id written by ``save_pretrained`` (has
            ``config.json``); or a checkpoint in the official / PyLO formats, as a file or a folder / Hub repo holding
            one (see :func:`hfx.optim.celo2.convert.convert_checkpoint`).

    Raises:
        TypeError: for another type. FileNotFoundError / ValueError: from the loaders.
    """
    if isinstance(source, Celo2MetaWeights):
        return source
    if not isinstance(source, (str, Path)):
        raise TypeError(f"`meta_weights` must be a Celo2MetaWeights, a path or a repo id, but is {type(source)}")
    if Path(source) == default_meta_weights_path():
        return copy.deepcopy(_default_meta_weights())
    from .convert import load_any

    return load_any(source)


@functools.lru_cache(maxsize=1)
def _default_meta_weights() -> Celo2MetaWeights:
    from .convert import load_any

    return load_any(default_meta_weights_path())


class Celo2(torch.optim.Optimizer):
    r"""Celo2, the learned optimizer of arXiv 2602.19142 (ICLR 2026), as a ``torch.optim.Optimizer``.

    Parameters routed to the learned rule (see :func:`~hfx.optim.celo2.routing.route_parameters`) get the meta-MLP's
    direction from normalised per-tensor features, Newton-Schulz orthogonalisation for tensors with ``ndim >= 2``
    (Celo2; off for Celo2-base) and a unit-RMS step; the others get AdamW(0.9, 0.95) [code]. Both apply decoupled
    weight decay with the group's (scheduled) learning rate:

    - learned: ``p <- p - lr * (step + weight_decay * p)`` [code: ``scale_by_celo2`` -> ``add_decayed_weights`` ->
      ``scale_by_learning_rate``];
    - AdamW: ``torch.optim.AdamW`` with ``lr * adamw_lr_ratio`` (the reference's ``mult_1d``), same formula as
      ``optax.adamw`` and as ``torch.optim.AdamW(foreach=True)`` (bit-identical in the tests).

    Learning-rate schedulers work as for any optimizer: each step reads ``param_group["lr"]``. Same-shaped parameters
    are stacked and processed in one batched call (``max_batch_elements`` bounds the stack); state tensors follow
    each parameter's device and dtype (or ``state_dtype``). ``state_dict()`` also carries the meta-weights, so
    ``load_state_dict`` resumes bit-exactly.

    Args:
        params: ``model.named_parameters()`` (recommended: enables name-based routing), an iterable of tensors, or
            param groups (dicts whose ``"params"`` hold tensors or ``(name, tensor)`` pairs; per-group keys ``lr``,
            ``weight_decay``, ``adamw_betas``, ``adamw_eps``, ``adamw_lr_ratio``).
        lr (`float`, *optional*, defaults to `1e-3`): learning rate of the learned rule (the step has unit RMS, so
            this is the per-element RMS change).
        weight_decay (`float`, *optional*, defaults to `0.0`): decoupled weight decay, both rules.
        meta_weights (:class:`Celo2MetaWeights`, `str` or `Path`, *optional*): the learned optimizer. Defaults to the
            weights shipped with hfx (meta-trained here on CPU; not the paper's checkpoint).
        variant (`str`, *optional*, defaults to `"celo2"`): ``"celo2"`` (orthogonalise, reference routing) or
            ``"celo2-base"`` (no Newton-Schulz, learned rule for every tensor). ``orthogonalize`` / ``routing``
            override it.
        orthogonalize (`bool`, *optional*): Newton-Schulz on the learned direction of tensors with ``ndim >= 2``.
        routing (`str`, *optional*): ``"reference"``, ``"pylo"`` or ``"all"``; see
            :func:`~hfx.optim.celo2.routing.route_parameters`.
        adamw_pattern (`str`, *optional*): regular expression of names routed to AdamW (default ``"embed"``).
        names_from (`torch.nn.Module`, *optional*): look up names of plain-tensor params in this module (for
            ``Trainer(optimizer_cls_and_kwargs=(Celo2, {"names_from": model, ...}))``, where ``Trainer`` passes
            param groups without names).
        adamw_betas (`tuple[float, float]`, defaults to `(0.9, 0.95)`); adamw_eps (`float`, defaults to `1e-8`);
        adamw_lr_ratio (`float`, defaults to `1.0`): AdamW branch LR = ``lr * adamw_lr_ratio``.
        ns_coeffs (`tuple`, defaults to `(3.4445, -4.7750, 2.0315)`); ns_steps (`int`, defaults to `5`);
        ns_eps (`float`, defaults to `1e-8`): Newton-Schulz settings [code].
        exp_mult (`float`, defaults to `0.0`): magnitude-output multiplier (0 in Celo2) [code].
        rms_mult (`float`, defaults to `1.0`): RMS of the learned step before the LR [code].
        grad_clip (`float`, defaults to `1000.0`): element-wise gradient clip before the learned rule [code].
        state_dtype (`torch.dtype`, *optional*): dtype of the optimizer state (default: each parameter's dtype);
            e.g. ``torch.float32`` for bf16 parameters. Computation runs in float32 for 16-bit state.
        max_batch_elements (`int`, defaults to `2**22`): at most this many elements are stacked per batched call.

    Raises:
        ValueError: for out-of-range hyper-parameters, an unknown ``variant`` / ``routing``, or ``exp_mult != 0``
            with a single-output meta-MLP. TypeError: for sparse gradients or non-floating ``state_dtype``.

    Example:

    ```python
    >>> from hfx.optim import Celo2
    >>> opt = Celo2(model.named_parameters(), lr=1e-3, weight_decay=0.1)
    >>> trainer = Trainer(model=model, args=args, train_dataset=ds, optimizers=(opt, None))
    ```
    """

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        weight_decay: float = 0.0,
        *,
        meta_weights=None,
        variant: str = "celo2",
        orthogonalize: bool | None = None,
        routing: str | None = None,
        adamw_pattern: str | None = None,
        names_from: nn.Module | None = None,
        adamw_betas: tuple[float, float] = (0.9, 0.95),
        adamw_eps: float = 1e-8,
        adamw_lr_ratio: float = 1.0,
        ns_coeffs=NS_COEFFS,
        ns_steps: int = 5,
        ns_eps: float = 1e-8,
        exp_mult: float = 0.0,
        rms_mult: float = 1.0,
        grad_clip: float = 1000.0,
        state_dtype: torch.dtype | None = None,
        max_batch_elements: int = 2**22,
    ):
        if variant not in VARIANTS:
            raise ValueError(f"`variant` must be one of {VARIANTS}, but is {variant!r}")
        if orthogonalize is None:
            orthogonalize = variant == "celo2"
        if routing is None:
            routing = "reference" if variant == "celo2" else "all"
        if routing not in ROUTINGS:
            raise ValueError(f"`routing` must be one of {ROUTINGS}, but is {routing!r}")
        _check_nonneg(lr=lr, weight_decay=weight_decay, adamw_eps=adamw_eps, adamw_lr_ratio=adamw_lr_ratio)
        _check_betas(adamw_betas)
        if len(tuple(ns_coeffs)) != 3:
            raise ValueError(f"`ns_coeffs` must be 3 numbers (a, b, c), but is {ns_coeffs!r}")
        if int(ns_steps) < 0:
            raise ValueError(f"`ns_steps` must be >= 0, but is {ns_steps}")
        if not rms_mult > 0 or not grad_clip > 0:
            raise ValueError(f"`rms_mult` and `grad_clip` must be > 0, but are {rms_mult} and {grad_clip}")
        if int(max_batch_elements) < 1:
            raise ValueError(f"`max_batch_elements` must be >= 1, but is {max_batch_elements}")
        if state_dtype is not None and not (isinstance(state_dtype, torch.dtype) and state_dtype.is_floating_point):
            raise TypeError(f"`state_dtype` must be a floating torch.dtype or None, but is {state_dtype!r}")
        self.meta_weights = load_meta_weights(default_meta_weights_path() if meta_weights is None else meta_weights)
        if exp_mult and self.meta_weights.output_size < 2:
            raise ValueError("`exp_mult != 0` needs a meta-MLP with at least 2 outputs (direction, magnitude)")
        self.variant, self.orthogonalize, self.routing = variant, bool(orthogonalize), routing
        self.adamw_pattern = adamw_pattern
        self.ns_coeffs, self.ns_steps, self.ns_eps = tuple(float(c) for c in ns_coeffs), int(ns_steps), float(ns_eps)
        self.exp_mult, self.rms_mult, self.grad_clip = float(exp_mult), float(rms_mult), float(grad_clip)
        self.state_dtype, self.max_batch_elements = state_dtype, int(max_batch_elements)
        self._weights_cache: dict[Any, Any] = {}
        self._names_from = names_from
        self._routing_ready = False  # route once all constructor groups are in ("pylo" looks at all of them)
        defaults = dict(
            lr=lr,
            weight_decay=weight_decay,
            adamw_betas=tuple(adamw_betas),
            adamw_eps=adamw_eps,
            adamw_lr_ratio=adamw_lr_ratio,
        )
        super().__init__(self._with_names(params, names_from), defaults)
        self._routing_ready = True
        self._assign_roles()

    # -------------------------------------------------------------------------------------------- construction
    @classmethod
    def from_pretrained(cls, pretrained, params, **kwargs) -> Celo2:
        """``Celo2(params, meta_weights=<loaded>, **kwargs)``: load the meta-weights from a folder, a Hub repo id
        (``Celo2MetaWeights.save_pretrained`` / ``push_to_hub`` layout), or an official / PyLO checkpoint file.

        Args:
            pretrained (`str` or `Path`): where the meta-weights are (see :func:`load_meta_weights`).
            params: as for :class:`Celo2`.
            **kwargs: the other :class:`Celo2` arguments.
        """
        return cls(params, meta_weights=load_meta_weights(pretrained), **kwargs)

    @staticmethod
    def _with_names(params, names_from):
        if isinstance(params, torch.Tensor):
            raise TypeError("`params` must be an iterable of tensors, (name, tensor) pairs or param groups")
        params = list(params)
        if names_from is None:
            return params
        if not isinstance(names_from, nn.Module):
            raise TypeError(f"`names_from` must be a torch.nn.Module, but is {type(names_from)}")
        names = {id(p): n for n, p in names_from.named_parameters()}

        def named(items):
            items = [items] if isinstance(items, torch.Tensor) else list(items)
            out = []
            for item in items:
                if isinstance(item, tuple):
                    out.append(item)
                else:
                    out.append((names.get(id(item), f"<unnamed {len(out)}>"), item))
            return out

        if params and isinstance(params[0], dict):
            return [{**group, "params": named(group["params"])} for group in params]
        return named(params)

    def _assign_roles(self) -> None:
        todo = [g for g in self.param_groups if "celo2_roles" not in g]
        if not todo:
            return
        named = []
        for group in todo:
            names = group.get("param_names") or [None] * len(group["params"])
            named.extend(zip(names, group["params"]))
        if all(n is None for n, _ in named) and self.routing != "all" and any(p.ndim >= 2 for _, p in named):
            logger.warning(
                "Celo2: parameters were given without names, so routing uses shapes only (ndim <= 1 -> AdamW, "
                "matrices -> learned rule; embeddings are not recognised). Pass `model.named_parameters()` or "
                "`names_from=model`."
            )
        roles = route_parameters(named, self.routing, self.adamw_pattern)
        start = 0
        for group in todo:
            group["celo2_roles"] = roles[start : start + len(group["params"])]
            start += len(group["params"])

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        if getattr(self, "_names_from", None) is not None:
            param_group = self._with_names([param_group], self._names_from)[0]
        super().add_param_group(param_group)
        if getattr(self, "_routing_ready", False):  # after __init__: route the new group
            self._assign_roles()

    def routing_table(self) -> list[dict[str, Any]]:
        """One row per parameter: ``name``, ``shape``, ``rule`` (``"celo2"`` / ``"adamw"``), ``newton_schulz``."""
        rows = []
        for group in self.param_groups:
            names = group.get("param_names") or [None] * len(group["params"])
            for name, p, role in zip(names, group["params"], group["celo2_roles"]):
                rows.append(
                    {
                        "name": name,
                        "shape": tuple(p.shape),
                        "rule": role,
                        "newton_schulz": role == LEARNED and self.orthogonalize and p.ndim >= 2,
                    }
                )
        return rows

    # ---------------------------------------------------------------------------------------------------- state
    def _state_dtype(self, p: torch.Tensor) -> torch.dtype:
        return self.state_dtype or p.dtype

    def _init_state(self, p: torch.Tensor, role: str) -> None:
        kw = {"dtype": self._state_dtype(p), "device": p.device}
        state = self.state[p]
        state["step"] = torch.zeros((), dtype=torch.float32)
        if role == ADAMW:
            state["exp_avg"] = torch.zeros(p.shape, **kw)
            state["exp_avg_sq"] = torch.zeros(p.shape, **kw)
        else:
            mw = self.meta_weights
            shape = p.shape if p.ndim else (1,)
            state.update(
                init_state(shape, len(mw.momentum_decays), len(mw.rms_decays), len(mw.adafactor_decays), **kw)
            )

    def state_dict(self) -> dict[str, Any]:
        """``torch.optim.Optimizer.state_dict()`` plus the meta-weights (config and tensors) under
        ``"celo2_meta_weights"``, so a checkpoint resumes with the same learned rule."""
        out = super().state_dict()
        out[_META_KEY] = {
            "config": dict(self.meta_weights._hub_mixin_config or {}),
            "state": {k: v.detach().clone() for k, v in self.meta_weights.state_dict().items()},
        }
        return out

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a :meth:`state_dict`; meta-weights stored in it replace the current ones. Keeps ``state_dtype``."""
        state_dict = dict(state_dict)
        meta = state_dict.pop(_META_KEY, None)
        super().load_state_dict(state_dict)
        if meta is not None:
            config = {k: tuple(v) if isinstance(v, list) else v for k, v in meta["config"].items()}
            new = Celo2MetaWeights(**config) if config else Celo2MetaWeights()
            new.load_state_dict(meta["state"])
            self.meta_weights = new
            self._weights_cache.clear()
        if self.state_dtype is not None:  # torch casts floating state to the parameter's dtype: undo that exactly
            params = [p for g in self.param_groups for p in g["params"]]
            for index, saved in state_dict["state"].items():
                p = params[int(index)]
                for key, value in saved.items():
                    if key != "step" and isinstance(value, torch.Tensor) and value.is_floating_point():
                        self.state[p][key] = value.to(device=p.device, dtype=self.state_dtype, copy=True)

    # ----------------------------------------------------------------------------------------------------- step
    def _mlp(self, dtype: torch.dtype, device: torch.device):
        version = tuple(p._version for p in self.meta_weights.parameters())
        key = (id(self.meta_weights), version, dtype, device)
        if key not in self._weights_cache:
            self._weights_cache.clear()
            self._weights_cache[key] = self.meta_weights.mlp_weights(dtype=dtype, device=device)
        return self._weights_cache[key]

    @torch.no_grad()
    def step(self, closure=None):
        """Perform one optimization step.

        Args:
            closure (`Callable`, *optional*): re-evaluates the model and returns the loss.

        Returns:
            The closure's loss, or `None`.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        learned: dict[Any, list] = defaultdict(list)
        adamw: dict[Any, list] = defaultdict(list)
        for group in self.param_groups:
            for p, role in zip(group["params"], group["celo2_roles"]):
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise TypeError("Celo2 does not support sparse gradients")
                if not self.state[p]:
                    self._init_state(p, role)
                sd = self._state_dtype(p)
                if role == ADAMW:
                    key = (p.device, p.dtype, sd, group["adamw_betas"], group["adamw_eps"])
                    adamw[key].append((p, group))
                else:
                    compute = torch.float32 if sd in _LOW_PRECISION else sd
                    learned[(tuple(p.shape), p.device, p.dtype, sd, compute)].append((p, group))
        for (_, _, _, betas, eps), items in adamw.items():
            self._adamw_step(items, betas, eps)
        for (shape, device, _, _, compute), items in learned.items():
            per_chunk = max(1, self.max_batch_elements // max(1, math.prod(shape)))
            for start in range(0, len(items), per_chunk):
                self._learned_step(items[start : start + per_chunk], compute, device)
        return loss

    def _learned_step(self, items, compute: torch.dtype, device) -> None:
        params = [p for p, _ in items]
        shape = params[0].shape if params[0].ndim else torch.Size([1])
        states = [self.state[p] for p in params]
        keys = [k for k in states[0] if k != "step"]
        single = len(params) == 1 and all(states[0][k].dtype == compute for k in keys)
        if single:  # views: the accumulators update in place, nothing to copy back
            P = params[0].detach().reshape(shape).unsqueeze(0).to(compute)
            G = params[0].grad.reshape(shape).unsqueeze(0).to(compute)
            stacked = {k: states[0][k].unsqueeze(0) for k in keys}
        else:
            P = torch.stack([p.detach().reshape(shape) for p in params]).to(compute)
            G = torch.stack([p.grad.reshape(shape) for p in params]).to(compute)
            stacked = {k: torch.stack([s[k] for s in states]).to(compute) for k in keys}
        step = celo2_step_direction(
            P,
            G,
            stacked,
            self._mlp(compute, device),
            **self.meta_weights.rule_config(),
            orthogonalize=self.orthogonalize,
            ns_coeffs=self.ns_coeffs,
            ns_steps=self.ns_steps,
            ns_eps=self.ns_eps,
            exp_mult=self.exp_mult,
            rms_mult=self.rms_mult,
            grad_clip=self.grad_clip,
        )
        del P, G
        if not single:
            for k in keys:
                torch._foreach_copy_([s[k] for s in states], list(stacked[k].unbind(0)))
        torch._foreach_add_([s["step"] for s in states], 1.0)
        decay = [(p, 1.0 - g["lr"] * g["weight_decay"]) for p, g in items if g["weight_decay"] != 0]
        if decay:
            torch._foreach_mul_([p for p, _ in decay], [f for _, f in decay])
        updates = [u.reshape(p.shape).to(p.dtype) for u, p in zip(step.unbind(0), params)]
        torch._foreach_mul_(updates, [-g["lr"] for _, g in items])
        torch._foreach_add_(params, updates)

    def _adamw_step(self, items, betas, eps: float) -> None:
        beta1, beta2 = betas
        params = [p for p, _ in items]
        states = [self.state[p] for p in params]
        sd = states[0]["exp_avg"].dtype
        work = params if sd == params[0].dtype else [p.detach().to(sd) for p in params]
        grads = [p.grad if p.grad.dtype == sd else p.grad.to(sd) for p in params]
        exp_avgs = [s["exp_avg"] for s in states]
        exp_avg_sqs = [s["exp_avg_sq"] for s in states]
        steps = [s["step"] for s in states]
        torch._foreach_add_(steps, 1.0)
        lrs = [g["lr"] * g["adamw_lr_ratio"] for _, g in items]
        decay = [(w, 1.0 - lr * g["weight_decay"]) for w, lr, (_, g) in zip(work, lrs, items) if g["weight_decay"]]
        if decay:
            torch._foreach_mul_([w for w, _ in decay], [f for _, f in decay])
        torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
        torch._foreach_mul_(exp_avg_sqs, beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2)
        counts = [s.item() for s in steps]
        step_sizes = [-lr / (1 - beta1**t) for lr, t in zip(lrs, counts)]
        denom = torch._foreach_sqrt(exp_avg_sqs)
        torch._foreach_div_(denom, [math.sqrt(1 - beta2**t) for t in counts])
        torch._foreach_add_(denom, eps)
        torch._foreach_addcdiv_(work, exp_avgs, denom, step_sizes)
        if work is not params:
            torch._foreach_copy_(params, work)


def _check_nonneg(**values) -> None:
    for name, value in values.items():
        if not (isinstance(value, (int, float)) and value >= 0 and math.isfinite(value)):
            raise ValueError(f"`{name}` must be a finite number >= 0, but is {value!r}")


def _check_betas(betas: Iterable[float]) -> None:
    betas = tuple(betas)
    if len(betas) != 2 or not all(0.0 <= b < 1.0 for b in betas):
        raise ValueError(f"`adamw_betas` must be two numbers in [0, 1), but is {betas!r}")


__all__ = ["Celo2", "default_meta_weights_path", "load_meta_weights"]
