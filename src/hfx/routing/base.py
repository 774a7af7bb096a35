"""Shared interface of the online routers (Thompson sampling, LinUCB, random) and their input checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import torch


ROUTER_STATE_FILE = "router.safetensors"
ROUTER_CONFIG_FILE = "router_config.json"

# router class name -> class, filled by `BaseRouter.__init_subclass__` (so `load` dispatches without importing the
# subclasses' modules: no import circle between this module and thompson.py / linucb.py)
ROUTER_CLASSES: dict[str, type] = {}


def check_arm_names(arm_names, num_arms: int) -> list[str]:
    """Validate ``arm_names`` (defaults to ``rm_0 .. rm_{R-1}``)."""
    if arm_names is None:
        return [f"rm_{i}" for i in range(num_arms)]
    arm_names = [str(n) for n in arm_names]
    if len(arm_names) != num_arms:
        raise ValueError(f"`arm_names` must hold {num_arms} names (one per reward model), but holds {len(arm_names)}")
    if len(set(arm_names)) != len(arm_names):
        raise ValueError(f"`arm_names` must be unique, but is {arm_names}")
    return arm_names


class BaseRouter:
    """One-reward-model-per-pair router: ``select(h) -> arms`` then ``update(h, arms, rewards)``.

    Subclasses implement :meth:`select`, :meth:`update`, :meth:`state_dict`, :meth:`load_state_dict` and
    :meth:`_config`. Routers keep their statistics in float64 on CPU by default; inputs of any floating dtype /
    device are cast.

    Attributes:
        num_arms (`int`): R, the number of reward models in the pool.
        dim (`int` or `None`): d, the pair-embedding size (``None`` for context-free routers).
        arm_names (`list[str]`): one name per reward model; :meth:`arm_index` maps a name to its index.
    """

    num_arms: int
    dim: int | None
    arm_names: list[str]
    _config_keys: ClassVar[tuple[str, ...]] = ()  # what `_config` writes and `_from_config` needs

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        ROUTER_CLASSES[cls.__name__] = cls

    # ----------------------------------------------------------------------------------------------- checks
    def _check_h(self, h) -> torch.Tensor:
        if not isinstance(h, torch.Tensor):
            raise TypeError(f"`h` must be a torch.Tensor of shape (P, d), but is {type(h).__name__}")
        if h.dim() == 1:
            h = h[None]
        if h.dim() != 2:
            raise ValueError(f"`h` must have shape (P, d), but has shape {tuple(h.shape)}")
        if self.dim is not None and h.shape[1] != self.dim:
            raise ValueError(
                f"`h` has embedding dim {h.shape[1]} but the router was built for d={self.dim} "
                f"(shape {tuple(h.shape)}); embed pairs with the same encoder as the prior"
            )
        if not torch.is_floating_point(h):
            raise TypeError(f"`h` must be a floating tensor, but has dtype {h.dtype}")
        finite = torch.isfinite(h).all(dim=-1)
        if not finite.all():
            rows = torch.nonzero(~finite).flatten().tolist()
            raise ValueError(
                f"`h` must be finite, but row(s) {rows[:10]} hold NaN or inf: a bad pair embedding would make "
                "`select` route by a NaN comparison and `update` poison the posterior; check the encoder"
            )
        return h

    def _check_update(self, h, arms, rewards):
        h = self._check_h(h)
        arms = torch.as_tensor(arms).reshape(-1)
        rewards = torch.as_tensor(rewards, dtype=torch.float64).reshape(-1)
        if arms.dtype.is_floating_point or arms.dtype == torch.bool:
            raise TypeError(f"`arms` must hold integer arm indices, but has dtype {arms.dtype}")
        if not (arms.numel() == rewards.numel() == h.shape[0]):
            raise ValueError(
                f"`h` (P={h.shape[0]}), `arms` ({arms.numel()}) and `rewards` ({rewards.numel()}) must have the same "
                "number of pairs"
            )
        if arms.numel() and (arms.min() < 0 or arms.max() >= self.num_arms):
            raise ValueError(f"`arms` must lie in [0, {self.num_arms - 1}], but holds {arms.tolist()}")
        if not torch.isfinite(rewards).all():
            bad = torch.nonzero(~torch.isfinite(rewards)).flatten().tolist()
            raise ValueError(f"`rewards` must be finite, but entries {bad[:10]} are NaN or inf")
        return h, arms.long(), rewards

    def arm_index(self, name: str) -> int:
        """Index of the reward model called ``name``.

        Raises:
            ValueError: if ``name`` is not one of :attr:`arm_names`.
        """
        if name not in self.arm_names:
            raise ValueError(f"Unknown reward model name {name!r}; the router's arms are {self.arm_names}")
        return self.arm_names.index(name)

    # ----------------------------------------------------------------------------------------------- API
    def select(self, h: torch.Tensor, generator: torch.Generator | None = None) -> torch.LongTensor:
        raise NotImplementedError

    def update(self, h: torch.Tensor, arms, rewards) -> None:
        raise NotImplementedError

    def state_dict(self) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        raise NotImplementedError

    def _config(self) -> dict[str, Any]:
        raise NotImplementedError

    # ----------------------------------------------------------------------------------------------- save / load
    def save(self, directory: str | Path) -> Path:
        """Write ``router_config.json`` + ``router.safetensors`` into ``directory`` (an online run can resume).

        Raises:
            ValueError: if ``directory`` is a file or holds another artifact (nothing is written).
        """
        from safetensors.torch import save_file

        from hfx.utils.artifacts import check_save_target

        directory = check_save_target(directory, "hfx_online_router", who=f"{type(self).__name__}.save", arg="directory")
        directory.mkdir(parents=True, exist_ok=True)
        config = {"router_class": type(self).__name__, **self._config()}
        (directory / ROUTER_CONFIG_FILE).write_text(json.dumps(config, indent=2, sort_keys=True))
        state = {k: v.detach().contiguous().cpu() for k, v in self.state_dict().items()}
        save_file(state, str(directory / ROUTER_STATE_FILE))
        return directory

    @classmethod
    def load(cls, directory: str | Path):
        """Rebuild a router saved with :meth:`save` (exact round trip of its statistics).

        Called on :class:`BaseRouter` it dispatches on the saved ``router_class``.

        Raises:
            FileNotFoundError: if ``directory`` does not exist.
            ValueError: if it holds another artifact (naming both), a corrupt file, a config missing a field, or
                another router class than ``cls``.
        """
        from safetensors.torch import load_file

        from hfx.utils.artifacts import ArtifactNotFoundError, check_load_source, check_required_keys

        who = f"{cls.__name__}.load"
        path = check_load_source(directory, ("hfx_online_router",), who=who, arg="directory")
        if path is None:
            raise ArtifactNotFoundError(f"{who}: `directory` {str(directory)!r}: no such folder")
        config = json.loads((path / ROUTER_CONFIG_FILE).read_text())
        check_required_keys(config, ("router_class",), who=who, where=repr(str(directory)), file=ROUTER_CONFIG_FILE)
        name = config.pop("router_class")
        if name not in ROUTER_CLASSES:
            raise ValueError(f"`router_class` in {directory} must be one of {sorted(ROUTER_CLASSES)}, but is {name!r}")
        target = ROUTER_CLASSES[name]
        if cls is not BaseRouter and target is not cls:
            raise ValueError(f"{directory} holds a {name}, not a {cls.__name__}")
        check_required_keys(config, target._config_keys, who=who, where=repr(str(directory)), file=ROUTER_CONFIG_FILE)
        if not (path / ROUTER_STATE_FILE).is_file():
            raise ArtifactNotFoundError(f"{who}: {str(path / ROUTER_STATE_FILE)!r} is missing")
        router = target._from_config(config)
        router.load_state_dict(load_file(str(path / ROUTER_STATE_FILE)))
        return router

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_arms={self.num_arms}, dim={self.dim}, arm_names={self.arm_names})"
