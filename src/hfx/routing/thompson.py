"""BayesianRouter's online stage: per-RM Bayesian linear regression + Thompson sampling, one RM per pair.

Source: Wu & Lu, "Reward Model Routing in Alignment", arXiv 2510.02850 (ICLR 2026), "Online stage", and the authors'
code (``gp_router/utils4.py``, ``gp_router/utils5.py``). The released scripts overwrite the prior mean with zeros
("prior temporarily disabled"); here the prior is **on** by default (``use_prior=True``) and ``use_prior=False`` is
the "w/o offline" ablation.
"""

from __future__ import annotations

from typing import Any

import torch

from hfx.utils.validation import check_float, check_int

from .base import BaseRouter, check_arm_names


class ThompsonRouter(BaseRouter):
    r"""Thompson-sampling router over R reward models with Bayesian linear-regression arms.

    Each RM n models the router reward as :math:`r = w_n^\top h + \varepsilon`, :math:`\varepsilon \sim N(0, \sigma^2)`,
    :math:`w_n \sim N(\mu_n, \Lambda_n^{-1})`, kept in information form (precision :math:`\Lambda_n`, :math:`b_n =
    \Lambda_n \mu_n`). Prior: :math:`\mu_n^{(0)} = E_{bt}[n] / \lVert E_{bt}[n] \rVert`, :math:`\Lambda_n^{(0)} =
    \lambda_0 I` (or ``prior_covariance``). Selection draws, independently **per pair**, :math:`\tilde w_n \sim
    N(\mu_n, \Lambda_n^{-1})` for every n and routes the pair to :math:`\arg\max_n h^\top \tilde w_n`. Sampling uses the
    Cholesky factor of :math:`\Lambda_n + \text{jitter}\, I` (:math:`\tilde w = \mu + L^{-\top} z`), falling back to an
    eigendecomposition with eigenvalues clamped at ``1e-10 * max`` when Cholesky fails; the factor is cached per arm
    and invalidated when that arm is updated (as in the authors' code).

    Args:
        prior_means (`torch.Tensor` of shape `(R, d)`):
            Offline Bradley-Terry vectors :math:`E_{bt}`, one row per RM (see
            :meth:`hfx.routing.OfflineRouter.prior_means`). Rows are L2-normalised here (zero rows stay zero).
        prior_precision (`float`, *optional*, defaults to `1.0`):
            :math:`\lambda_0`; the authors use 1.0 (GSM8K run) and 50.0 (simulation).
        noise_variance (`float`, *optional*, defaults to `1.0`): :math:`\sigma^2`.
        prior_covariance (`torch.Tensor` of shape `(d, d)` or `(R, d, d)`, *optional*):
            Replaces :math:`\lambda_0^{-1} I`; must be symmetric positive definite.
        use_prior (`bool`, *optional*, defaults to `True`): ``False`` sets :math:`\mu^{(0)} = 0` ("w/o offline").
        arm_names (`list[str]`, *optional*): one name per RM, defaults to ``rm_0 .. rm_{R-1}``.
        jitter (`float`, *optional*, defaults to `1e-8`): added to the diagonal before the Cholesky factorisation.
        dtype (`torch.dtype`, *optional*, defaults to `torch.float64`): dtype of the statistics.
        sample_dtype (`torch.dtype`, *optional*): dtype of the cached factors and the draws (defaults to ``dtype``;
            ``torch.float32`` halves the routing time, the posterior itself stays in ``dtype``).

    Raises:
        ValueError: empty pool (R = 0), ``prior_means`` not 2-D / not finite, non-positive ``prior_precision`` or
            ``noise_variance``, ``prior_covariance`` of the wrong shape or not symmetric positive definite,
            ``arm_names`` of the wrong length.

    Example:
        >>> router = ThompsonRouter(torch.eye(3, 8))               # 3 RMs, d = 8
        >>> h = torch.nn.functional.normalize(torch.randn(5, 8), dim=-1)
        >>> arms = router.select(h, generator=torch.Generator().manual_seed(0))   # LongTensor (5,)
        >>> router.update(h, arms, rewards=torch.rand(5))
    """

    _config_keys = ("num_arms", "dim", "prior_precision", "noise_variance", "use_prior", "arm_names", "jitter", "dtype")

    def __init__(
        self,
        prior_means: torch.Tensor,
        prior_precision: float = 1.0,
        noise_variance: float = 1.0,
        prior_covariance: torch.Tensor | None = None,
        use_prior: bool = True,
        arm_names: list[str] | None = None,
        jitter: float = 1e-8,
        dtype: torch.dtype = torch.float64,
        sample_dtype: torch.dtype | None = None,
    ):
        if not isinstance(prior_means, torch.Tensor):
            prior_means = torch.as_tensor(prior_means)
        if prior_means.dim() != 2:
            raise ValueError(f"`prior_means` must have shape (R, d), but has shape {tuple(prior_means.shape)}")
        if prior_means.shape[0] == 0:
            raise ValueError("`prior_means` has R=0 rows: the reward-model pool must not be empty")
        if prior_means.shape[1] == 0:
            raise ValueError("`prior_means` must have d >= 1 columns")
        if not torch.isfinite(prior_means).all():
            raise ValueError("`prior_means` must be finite")
        prior_precision = check_float("prior_precision", prior_precision, minimum=0.0, strict_minimum=True)
        noise_variance = check_float("noise_variance", noise_variance, minimum=0.0, strict_minimum=True)
        jitter = check_float("jitter", jitter, minimum=0.0)
        self.num_arms, self.dim = prior_means.shape
        self.arm_names = check_arm_names(arm_names, self.num_arms)
        self.prior_precision = float(prior_precision)
        self.noise_variance = float(noise_variance)
        self.use_prior = bool(use_prior)
        self.jitter = float(jitter)
        self.dtype = dtype
        self.sample_dtype = sample_dtype or dtype
        self._stack: torch.Tensor | None = None

        means = torch.nn.functional.normalize(prior_means.to(dtype), dim=-1)
        if not self.use_prior:
            means = torch.zeros_like(means)
        eye = torch.eye(self.dim, dtype=dtype)
        if prior_covariance is None:
            precision = (self.prior_precision * eye).expand(self.num_arms, -1, -1).clone()
        else:
            precision = self._precision_from_covariance(prior_covariance)
        self.prior_mean = means.clone()
        self.precision = precision  # Lambda (R, d, d)
        self.b = torch.einsum("rij,rj->ri", precision, means)  # Lambda mu (R, d)
        self.mean = means.clone()  # mu (R, d)
        self.counts = torch.zeros(self.num_arms, dtype=torch.long)
        self._factors: list[torch.Tensor | None] = [None] * self.num_arms

    def _precision_from_covariance(self, cov) -> torch.Tensor:
        cov = torch.as_tensor(cov).to(self.dtype)
        if cov.dim() == 2:
            cov = cov.expand(self.num_arms, -1, -1)
        if tuple(cov.shape) != (self.num_arms, self.dim, self.dim):
            raise ValueError(
                f"`prior_covariance` must have shape (d, d) or (R, d, d) = ({self.num_arms}, {self.dim}, {self.dim}), "
                f"but has shape {tuple(cov.shape)}"
            )
        if not torch.allclose(cov, cov.transpose(-1, -2), atol=1e-10, rtol=1e-8):
            raise ValueError("`prior_covariance` must be symmetric")
        chol, info = torch.linalg.cholesky_ex(cov)
        if (info != 0).any():
            bad = torch.nonzero(info).flatten().tolist()
            raise ValueError(
                f"`prior_covariance` must be positive definite, but is not for arm(s) {bad} "
                f"(min eigenvalue {torch.linalg.eigvalsh(cov).min().item():.3g})"
            )
        return torch.cholesky_inverse(chol)

    @classmethod
    def from_offline_router(cls, offline_router, **kwargs) -> ThompsonRouter:
        """Prior from a trained :class:`~hfx.routing.OfflineRouter` (its normalised BT vectors and RM names)."""
        kwargs.setdefault("arm_names", list(offline_router.rm_names))
        return cls(offline_router.prior_means().detach().cpu(), **kwargs)

    # ----------------------------------------------------------------------------------------------- sampling
    def _factor(self, arm: int) -> torch.Tensor:
        """S_n with S_n S_n^T = Lambda_n^{-1} (cached): L^{-T} from Cholesky, or Q diag(e^{-1/2}) from eigh."""
        factor = self._factors[arm]
        if factor is None:
            precision = self.precision[arm]
            eye = torch.eye(self.dim, dtype=self.dtype)
            chol, info = torch.linalg.cholesky_ex(precision + self.jitter * eye)
            if info == 0:
                factor = torch.linalg.solve_triangular(chol.T, eye, upper=True)  # L^{-T}
            else:
                evals, evecs = torch.linalg.eigh(0.5 * (precision + precision.T))
                evals = evals.clamp_min(1e-10 * evals.max().clamp_min(torch.finfo(self.dtype).tiny))
                factor = evecs * evals.rsqrt()
            self._factors[arm] = factor
        return factor

    def _factor_stack(self) -> torch.Tensor:
        """All arms' factors as one `(R, d, d)` tensor in ``sample_dtype`` (only stale arms are refactorised)."""
        stale = [n for n in range(self.num_arms) if self._factors[n] is None]
        if self._stack is None or stale:
            if self._stack is None:
                self._stack = torch.empty(self.num_arms, self.dim, self.dim, dtype=self.sample_dtype)
                stale = range(self.num_arms)
            for n in stale:
                self._stack[n] = self._factor(n).to(self.sample_dtype)
        return self._stack

    def sample_weights(self, num_samples: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """Draw ``num_samples`` independent weight vectors per arm: tensor of shape `(num_samples, R, d)`."""
        z = torch.randn(self.num_arms, self.dim, num_samples, generator=generator, dtype=self.sample_dtype)
        stack = self._factor_stack()
        if num_samples == 1:  # batched gemv: per-arm mv is ~10x faster than bmm on CPU
            noise = torch.stack([stack[n] @ z[n, :, 0] for n in range(self.num_arms)])[..., None]
        else:
            noise = torch.bmm(stack, z)  # (R, d, N)
        return self.mean.to(self.sample_dtype) + noise.permute(2, 0, 1)

    @torch.no_grad()
    def select(self, h: torch.Tensor, generator: torch.Generator | None = None) -> torch.LongTensor:
        """Route each pair to one RM by Thompson sampling (an independent posterior draw per pair).

        Args:
            h (`torch.Tensor` of shape `(P, d)`): pair embeddings (unit-norm from the offline encoder).
            generator (`torch.Generator`, *optional*): CPU generator for reproducible draws.

        Returns:
            `torch.LongTensor` of shape `(P,)`: the RM index per pair.

        Raises:
            ValueError: if ``h`` does not have shape ``(P, d)`` or holds NaN / inf.
        """
        h = self._check_h(h).detach().to("cpu", self.dtype)
        weights = self.sample_weights(h.shape[0], generator=generator)  # (P, R, d)
        return torch.einsum("prd,pd->pr", weights, h.to(self.sample_dtype)).argmax(dim=-1)

    def expected_scores(self, h: torch.Tensor) -> torch.Tensor:
        """Posterior-mean scores :math:`h^\\top \\mu_n`, shape `(P, R)` (greedy routing = their argmax)."""
        h = self._check_h(h).detach().to("cpu", self.dtype)
        return h @ self.mean.T

    # ----------------------------------------------------------------------------------------------- update
    @torch.no_grad()
    def update(self, h: torch.Tensor, arms, rewards) -> None:
        r"""Posterior update of the routed arms only.

        For every pair i routed to RM n with normalised reward :math:`\hat r_i`: :math:`\Lambda_n \mathrel{+}= h_i
        h_i^\top/\sigma^2`, :math:`b_n \mathrel{+}= \hat r_i h_i / \sigma^2`, :math:`\mu_n = \Lambda_n^{-1} b_n`
        (batch form identical; order-independent). Arms that received no pair are left bitwise unchanged.

        Args:
            h (`torch.Tensor` of shape `(P, d)`): pair embeddings.
            arms (`torch.LongTensor` of shape `(P,)`): the RM each pair was routed to.
            rewards (`torch.Tensor` of shape `(P,)`): normalised router rewards (e.g. from
                :class:`QuantileRewardNormalizer`).

        Raises:
            ValueError / TypeError: on shape mismatch, arms out of range, non-integer arms, non-finite ``h`` or
                non-finite rewards (nothing is updated then).
        """
        h, arms, rewards = self._check_update(h, arms, rewards)
        h = h.detach().to("cpu", self.dtype)
        rewards = rewards.to(self.dtype)
        for arm in torch.unique(arms).tolist():
            sel = arms == arm
            hs = h[sel]
            self.precision[arm] += hs.T @ hs / self.noise_variance
            self.b[arm] += (rewards[sel, None] * hs).sum(0) / self.noise_variance
            self.mean[arm] = torch.linalg.solve(self.precision[arm], self.b[arm])
            self.counts[arm] += int(sel.sum())
            self._factors[arm] = None

    def posterior_mean(self, arm: int | str) -> torch.Tensor:
        """:math:`\\mu_n`, shape `(d,)`. ``arm`` may be an index or an RM name."""
        return self.mean[self._arm(arm)].clone()

    def posterior_covariance(self, arm: int | str) -> torch.Tensor:
        """:math:`\\Lambda_n^{-1}`, shape `(d, d)`."""
        return torch.linalg.inv(self.precision[self._arm(arm)])

    def _arm(self, arm) -> int:
        if isinstance(arm, str):
            return self.arm_index(arm)
        arm = int(arm)
        if not 0 <= arm < self.num_arms:
            raise ValueError(f"`arm` must lie in [0, {self.num_arms - 1}] or be one of {self.arm_names}, but is {arm}")
        return arm

    # ----------------------------------------------------------------------------------------------- state
    def state_dict(self) -> dict[str, torch.Tensor]:
        """Tensors that fully define the posterior: ``precision`` (R, d, d), ``b``/``mean``/``prior_mean`` (R, d),
        ``counts`` (R,)."""
        return {
            "precision": self.precision.clone(),
            "b": self.b.clone(),
            "mean": self.mean.clone(),
            "prior_mean": self.prior_mean.clone(),
            "counts": self.counts.clone(),
        }

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Restore :meth:`state_dict` (shapes are checked)."""
        expected = {
            "precision": (self.num_arms, self.dim, self.dim),
            "b": (self.num_arms, self.dim),
            "mean": (self.num_arms, self.dim),
            "prior_mean": (self.num_arms, self.dim),
            "counts": (self.num_arms,),
        }
        for key, shape in expected.items():
            if key not in state:
                raise ValueError(f"`state` is missing {key!r}; expected keys {sorted(expected)}")
            if tuple(state[key].shape) != shape:
                raise ValueError(f"`state[{key!r}]` must have shape {shape}, but has {tuple(state[key].shape)}")
        self.precision = state["precision"].to(self.dtype).clone()
        self.b = state["b"].to(self.dtype).clone()
        self.mean = state["mean"].to(self.dtype).clone()
        self.prior_mean = state["prior_mean"].to(self.dtype).clone()
        self.counts = state["counts"].long().clone()
        self._factors = [None] * self.num_arms
        self._stack = None

    def _config(self) -> dict[str, Any]:
        return {
            "num_arms": self.num_arms,
            "dim": self.dim,
            "prior_precision": self.prior_precision,
            "noise_variance": self.noise_variance,
            "use_prior": self.use_prior,
            "arm_names": self.arm_names,
            "jitter": self.jitter,
            "dtype": str(self.dtype).replace("torch.", ""),
            "sample_dtype": str(self.sample_dtype).replace("torch.", ""),
        }

    @classmethod
    def _from_config(cls, config: dict[str, Any]) -> ThompsonRouter:
        return cls(
            torch.zeros(config["num_arms"], config["dim"]),
            prior_precision=config["prior_precision"],
            noise_variance=config["noise_variance"],
            use_prior=config["use_prior"],
            arm_names=config["arm_names"],
            jitter=config["jitter"],
            dtype=getattr(torch, config["dtype"]),
            sample_dtype=getattr(torch, config.get("sample_dtype", config["dtype"])),
        )


class QuantileRewardNormalizer:
    """Router reward of the authors' ``utils5.py`` (the default): quantile rescaling over the full history.

    ``r_hat = clip((r - q_lo) / (q_hi - q_lo), 0, 1)`` with ``q_lo``/``q_hi`` the 20th/80th percentiles (linear
    interpolation, as ``numpy.percentile``) of every raw reward seen so far (the current batch included); exactly
    0.5 while fewer than ``min_history`` rewards were seen; ``1[r > q_lo]`` when ``q_hi <= q_lo``.
    The raw reward is the DPO-loss advantage ``mean(L_DPO) - L_DPO^i`` over the batch (:func:`advantage`).
    Non-finite raw rewards raise ``ValueError`` and never enter :attr:`history` (one NaN there would make every later
    quantile, hence every later reward, NaN).

    Args:
        low (`float`, *optional*, defaults to `0.2`) / high (`float`, defaults to `0.8`): the quantile levels.
        min_history (`int`, *optional*, defaults to `20`).
    """

    def __init__(self, low: float = 0.2, high: float = 0.8, min_history: int = 20):
        if not 0.0 <= low < high <= 1.0:
            raise ValueError(f"`low` and `high` must satisfy 0 <= low < high <= 1, but are {low}, {high}")
        min_history = check_int("min_history", min_history, minimum=1)
        self.low, self.high, self.min_history = float(low), float(high), int(min_history)
        self.history: list[float] = []

    def transform(self, raw: torch.Tensor) -> torch.Tensor:
        """Normalise ``raw`` (any shape) against the current history, without recording it.

        Raises:
            ValueError: if ``raw`` holds NaN or inf.
        """
        raw = _finite(raw, "raw")
        if len(self.history) < self.min_history:
            return torch.full_like(raw, 0.5)
        hist = torch.tensor(self.history, dtype=torch.float64)
        q_lo, q_hi = torch.quantile(hist, torch.tensor([self.low, self.high], dtype=torch.float64)).tolist()
        if q_hi <= q_lo:
            return (raw > q_lo).to(torch.float64)
        return ((raw - q_lo) / (q_hi - q_lo)).clamp(0.0, 1.0)

    def __call__(self, raw: torch.Tensor) -> torch.Tensor:
        """Record ``raw`` in the history, then normalise it (the authors' order). Raises ``ValueError`` (and records
        nothing) if ``raw`` holds NaN or inf."""
        raw = _finite(raw, "raw")
        self.history.extend(raw.reshape(-1).tolist())
        return self.transform(raw)

    def state_dict(self) -> dict[str, Any]:
        return {"history": list(self.history)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.history = _finite(state["history"], "state['history']").reshape(-1).tolist()


class EMARewardNormalizer:
    """Router reward of the authors' ``utils4.py``: a per-arm EMA baseline of the DPO loss.

    The first observation of an arm only initialises its baseline; with fewer than ``min_count`` observations only
    the baseline is updated (the returned reward is ``nan``: skip those pairs); afterwards
    ``r = clip((EMA_mean - loss) / sqrt(EMA_var + 1e-6), -2, 2)``, computed before the EMA absorbs ``loss``.

    Args:
        num_arms (`int`): R.
        alpha (`float`, *optional*, defaults to `0.01`): EMA rate.
        min_count (`int`, *optional*, defaults to `5`).
    """

    def __init__(self, num_arms: int, alpha: float = 0.01, min_count: int = 5):
        num_arms = check_int("num_arms", num_arms, minimum=1)
        alpha = check_float("alpha", alpha, minimum=0.0, maximum=1.0, strict_minimum=True)
        self.alpha, self.min_count = float(alpha), int(min_count)
        self.ema_mean = [0.0] * num_arms
        self.ema_var = [0.0] * num_arms
        self.count = [0] * num_arms

    def __call__(self, losses, arms) -> torch.Tensor:
        """Per-pair rewards (``nan`` while an arm is warming up) for DPO ``losses`` of pairs routed to ``arms``.

        Raises:
            ValueError: if ``losses`` holds NaN or inf (the EMA baselines are left untouched).
        """
        losses = _finite(losses, "losses").reshape(-1)
        arms = torch.as_tensor(arms).reshape(-1).tolist()
        out = torch.full_like(losses, float("nan"))
        for i, (loss, arm) in enumerate(zip(losses.tolist(), arms, strict=True)):
            if self.count[arm] >= self.min_count:
                z = (self.ema_mean[arm] - loss) / (self.ema_var[arm] + 1e-6) ** 0.5
                out[i] = min(max(z, -2.0), 2.0)
            if self.count[arm] == 0:
                self.ema_mean[arm] = loss
            else:
                delta = loss - self.ema_mean[arm]
                self.ema_mean[arm] += self.alpha * delta
                self.ema_var[arm] = (1 - self.alpha) * (self.ema_var[arm] + self.alpha * delta * delta)
            self.count[arm] += 1
        return out


def advantage(losses: torch.Tensor) -> torch.Tensor:
    """Raw router reward of ``utils5.py``: ``mean(losses) - losses`` over the batch, shape `(P,)`.

    Raises:
        ValueError: if ``losses`` holds NaN or inf (one bad loss would shift every pair's advantage).
    """
    losses = _finite(losses, "losses")
    return losses.mean() - losses


def _finite(values, name: str) -> torch.Tensor:
    """``values`` as a float64 tensor; ``ValueError`` naming ``name`` and the bad positions if any is NaN / inf."""
    values = torch.as_tensor(values, dtype=torch.float64)
    bad = ~torch.isfinite(values)
    if bad.any():
        where = torch.nonzero(bad.reshape(-1)).flatten().tolist()
        raise ValueError(
            f"`{name}` must be finite, but holds NaN or inf at flat position(s) {where[:10]}: a non-finite DPO loss "
            "or router reward would poison the normaliser history and the posterior"
        )
    return values
