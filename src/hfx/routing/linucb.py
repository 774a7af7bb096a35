"""Baseline routers with the :class:`~hfx.routing.ThompsonRouter` interface: LASeR's LinUCB and uniform random.

LASeR: Nguyen, Prasad, Stengel-Eskin, Bansal, "LASeR: Learning to Adaptively Select Reward Models with Multi-Armed
Bandits", arXiv 2410.01735 (NeurIPS 2025). LASeR picks **one RM per batch**; the context is the mean embedding of
the batch.
"""

from __future__ import annotations

from typing import Any

import torch

from hfx.utils.validation import check_choice, check_float, check_int

from .base import BaseRouter, check_arm_names


class LinUCBRouter(BaseRouter):
    r"""LinUCB router (the LASeR baseline).

    Score of arm k for context c: :math:`c^\top \hat\theta_k + \alpha \sqrt{c^\top A_k^{-1} c}`; update
    :math:`A_k \mathrel{+}= c c^\top`, :math:`b_k \mathrel{+}= r c`, :math:`\hat\theta_k = A_k^{-1} b_k`.
    With ``granularity="batch"`` (LASeR) the context is the mean of the P pair embeddings, every pair of the batch
    goes to the same arm and :meth:`update` performs one update per routed arm with the mean context and mean
    reward of its pairs; with ``granularity="pair"`` each pair is routed and updated on its own.

    Args:
        num_arms (`int`): R >= 1.
        dim (`int`): d, the context size.
        alpha (`float`, *optional*, defaults to `1.0`): exploration weight (LASeR's value is open [reconstruction]).
        ridge (`float`, *optional*, defaults to `1.0`): :math:`A_k^{(0)} = \text{ridge} \cdot I` (standard LinUCB).
        granularity (`str`, *optional*, defaults to `"batch"`): ``"batch"`` (LASeR) or ``"pair"``.
        arm_names (`list[str]`, *optional*).

    Raises:
        ValueError: ``num_arms < 1`` (empty pool), ``dim < 1``, ``alpha < 0``, ``ridge <= 0``, unknown ``granularity``.
    """

    _config_keys = ("num_arms", "dim", "alpha", "ridge", "granularity", "arm_names")

    def __init__(
        self,
        num_arms: int,
        dim: int,
        alpha: float = 1.0,
        ridge: float = 1.0,
        granularity: str = "batch",
        arm_names: list[str] | None = None,
    ):
        num_arms = check_int("num_arms", num_arms)
        if num_arms < 1:
            raise ValueError(f"`num_arms` has to be an integer >= 1 (the reward-model pool must not be empty), but is {num_arms}")
        dim = check_int("dim", dim, minimum=1)
        alpha = check_float("alpha", alpha, minimum=0.0)
        ridge = check_float("ridge", ridge, minimum=0.0, strict_minimum=True)
        check_choice("granularity", granularity, ("batch", "pair"))
        self.num_arms, self.dim = int(num_arms), int(dim)
        self.alpha, self.ridge, self.granularity = float(alpha), float(ridge), granularity
        self.arm_names = check_arm_names(arm_names, self.num_arms)
        self.A = (self.ridge * torch.eye(self.dim, dtype=torch.float64)).expand(self.num_arms, -1, -1).clone()
        self.b = torch.zeros(self.num_arms, self.dim, dtype=torch.float64)
        self.theta = torch.zeros(self.num_arms, self.dim, dtype=torch.float64)
        self.counts = torch.zeros(self.num_arms, dtype=torch.long)
        self._A_inv: torch.Tensor | None = None

    def ucb_scores(self, contexts: torch.Tensor) -> torch.Tensor:
        """UCB score per context and arm, shape `(N, R)` for contexts of shape `(N, d)`."""
        c = contexts.to(torch.float64)
        if self._A_inv is None:
            self._A_inv = torch.cholesky_inverse(torch.linalg.cholesky(self.A))  # (R, d, d), cached until update
        bonus = torch.einsum("nd,rde,ne->nr", c, self._A_inv, c).clamp_min(0).sqrt()  # (N, R)
        return c @ self.theta.T + self.alpha * bonus

    @torch.no_grad()
    def select(self, h: torch.Tensor, generator: torch.Generator | None = None) -> torch.LongTensor:
        """Arm per pair, shape `(P,)` (all equal with ``granularity="batch"``). ``generator`` is unused (LinUCB is
        deterministic; ties go to the lowest index)."""
        h = self._check_h(h).detach().to("cpu", torch.float64)
        if self.granularity == "batch":
            arm = self.ucb_scores(h.mean(0, keepdim=True)).argmax(-1)
            return arm.expand(h.shape[0]).clone()
        return self.ucb_scores(h).argmax(-1)

    @torch.no_grad()
    def update(self, h: torch.Tensor, arms, rewards) -> None:
        """LinUCB update of the routed arms (see the class docstring for the batch form)."""
        h, arms, rewards = self._check_update(h, arms, rewards)
        h = h.detach().to("cpu", torch.float64)
        for arm in torch.unique(arms).tolist():
            sel = arms == arm
            if self.granularity == "batch":
                contexts, r = h[sel].mean(0, keepdim=True), rewards[sel].mean()[None]
            else:
                contexts, r = h[sel], rewards[sel]
            self.A[arm] += contexts.T @ contexts
            self.b[arm] += (r[:, None] * contexts).sum(0)
            self.theta[arm] = torch.linalg.solve(self.A[arm], self.b[arm])
            self.counts[arm] += contexts.shape[0]
        self._A_inv = None

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"A": self.A.clone(), "b": self.b.clone(), "theta": self.theta.clone(), "counts": self.counts.clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        if tuple(state["A"].shape) != (self.num_arms, self.dim, self.dim):
            raise ValueError(f"`state['A']` must have shape {(self.num_arms, self.dim, self.dim)}")
        self.A, self.b = state["A"].double().clone(), state["b"].double().clone()
        self.theta, self.counts = state["theta"].double().clone(), state["counts"].long().clone()
        self._A_inv = None

    def _config(self) -> dict[str, Any]:
        return {
            "num_arms": self.num_arms,
            "dim": self.dim,
            "alpha": self.alpha,
            "ridge": self.ridge,
            "granularity": self.granularity,
            "arm_names": self.arm_names,
        }

    @classmethod
    def _from_config(cls, config: dict[str, Any]) -> LinUCBRouter:
        return cls(**config)


class RandomRouter(BaseRouter):
    """Uniform random routing (baseline): each pair goes to an RM drawn uniformly; :meth:`update` only counts.

    Args:
        num_arms (`int`): R >= 1.
        dim (`int`, *optional*): if given, ``h`` is checked against it.
        arm_names (`list[str]`, *optional*).
    """

    _config_keys = ("num_arms", "dim", "arm_names")

    def __init__(self, num_arms: int, dim: int | None = None, arm_names: list[str] | None = None):
        num_arms = check_int("num_arms", num_arms)
        if num_arms < 1:
            raise ValueError(f"`num_arms` has to be an integer >= 1 (the reward-model pool must not be empty), but is {num_arms}")
        self.num_arms, self.dim = int(num_arms), dim
        self.arm_names = check_arm_names(arm_names, self.num_arms)
        self.counts = torch.zeros(self.num_arms, dtype=torch.long)

    def select(self, h: torch.Tensor, generator: torch.Generator | None = None) -> torch.LongTensor:
        """Uniform arm per pair, shape `(P,)`."""
        h = self._check_h(h)
        return torch.randint(self.num_arms, (h.shape[0],), generator=generator)

    def update(self, h: torch.Tensor, arms, rewards) -> None:
        _, arms, _ = self._check_update(h, arms, rewards)
        self.counts += torch.bincount(arms, minlength=self.num_arms)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"counts": self.counts.clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.counts = state["counts"].long().clone()

    def _config(self) -> dict[str, Any]:
        return {"num_arms": self.num_arms, "dim": self.dim, "arm_names": self.arm_names}

    @classmethod
    def _from_config(cls, config: dict[str, Any]) -> RandomRouter:
        return cls(**config)
