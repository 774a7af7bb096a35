"""TRL integration: a routed reward function / pairwise judge that calls exactly one RM per pair, and a callback that
feeds the training signal back to the router after each optimizer step
(:class:`~hfx.routing.RouterUpdateCallback`, in :mod:`hfx.routing.callback`).

Source: Wu & Lu, arXiv 2510.02850 (ICLR 2026), "Online stage"; router reward of the authors' ``utils5.py``
(``mean(L_DPO) - L_DPO^i``, quantile-normalised). trl itself is not imported here: the reward function follows
``GRPOTrainer``'s calling convention (``prompts=..., completions=..., **kwargs -> list[float]``) and the judge follows
TRL's pairwise-judge interface (``judge(prompts, completions, shuffle_order=True) -> list[int]``; the judge classes
left core TRL in 1.x, the interface is kept by duck typing).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch

from .base import BaseRouter
from .labeling import PairScorer, as_pair_scorer
from .thompson import EMARewardNormalizer, QuantileRewardNormalizer, advantage


logger = logging.getLogger(__name__)


class RoutedRewardModel:
    """Route each preference pair to one reward model of a pool and learn the routing online (BayesianRouter).

    Usable as

    * a **reward function** for [`~trl.GRPOTrainer`] (``reward_funcs=routed``): completions of the same prompt (TRL
      puts them consecutively) are paired (0,1), (2,3), ...; an odd last completion is paired with the group's first
      one. For ``OnlineDPOTrainer`` (``prompts = 2 * prompts``) completion i is paired with i + B (see ``pairing``). Each pair is scored by its routed RM only; with ``reward_mode="preference"`` the winner gets 1, the loser
      0 (0.5 each on a tie); with ``"score"`` each completion gets the routed RM's raw score;
    * a **pairwise judge** (:meth:`judge`, TRL's judge interface) for online-DPO style loops;
    * a plain router for custom loops (:meth:`route_and_score` then :meth:`feedback`).

    Routed pairs wait in :attr:`pending` until :meth:`feedback` (called by :class:`RouterUpdateCallback` after each
    optimizer step, or by you) turns per-pair DPO losses into router rewards (``advantage`` then the normaliser) and
    updates the router (only the routed arms learn).

    Args:
        router (`BaseRouter`): :class:`~hfx.routing.ThompsonRouter` (BayesianRouter), :class:`~hfx.routing.LinUCBRouter`
            or :class:`~hfx.routing.RandomRouter`; ``router.arm_names`` name the RMs.
        reward_models (`dict[str, Any]` or `list`): name -> RM (anything :func:`~hfx.routing.as_pair_scorer` accepts:
            a TRL reward function, a ``(model, tokenizer)`` sequence classifier, a :class:`PairScorer`). A dict's keys
            must be exactly ``router.arm_names``; a list is taken in arm order.
        encoder (`OfflineRouter` or callable): gives the pair contexts ``h`` of shape `(P, d)`: an
            :class:`~hfx.routing.OfflineRouter` (frozen; its ``embed_pairs`` is used) or ``f(prompts, responses_a,
            responses_b) -> Tensor``.
        normalizer (*optional*): :class:`QuantileRewardNormalizer` (default, ``utils5.py``) or
            :class:`EMARewardNormalizer` (``utils4.py``).
        reward_mode (`str`, *optional*, defaults to `"preference"`): ``"preference"`` or ``"score"`` (see above).
        pairing (`str`, *optional*, defaults to `"auto"`): how the reward function pairs completions:
            ``"consecutive"`` (GRPO: completions of a prompt are adjacent), ``"halves"`` (OnlineDPO: ``prompts = 2 *
            prompts`` and completion i pairs with i + B) or ``"auto"`` (``"halves"`` when the prompt list is two
            identical halves, else ``"consecutive"``).
        seed (`int`, *optional*): seeds the router's sampling generator.

    Raises:
        ValueError: empty pool, pool size != ``router.num_arms``, unknown / missing RM names, unknown ``reward_mode``.
    """

    def __init__(
        self,
        router: BaseRouter,
        reward_models,
        encoder,
        normalizer=None,
        reward_mode: str = "preference",
        pairing: str = "auto",
        seed: int | None = None,
        embed_batch_size: int = 16,
    ):
        if not isinstance(router, BaseRouter):
            raise TypeError(
                f"`router` must be a ThompsonRouter, LinUCBRouter or RandomRouter, got {type(router).__name__}"
            )
        if not reward_models:
            raise ValueError("`reward_models` must not be empty: the reward-model pool needs at least one RM")
        if isinstance(reward_models, dict):
            unknown = [n for n in reward_models if n not in router.arm_names]
            if unknown:
                raise ValueError(f"Unknown reward model name(s) {unknown}; the router's arms are {router.arm_names}")
            missing = [n for n in router.arm_names if n not in reward_models]
            if missing:
                raise ValueError(f"`reward_models` lacks the router arm(s) {missing}")
            scorers = [as_pair_scorer(reward_models[n], name=n) for n in router.arm_names]
        else:
            reward_models = list(reward_models)
            if len(reward_models) != router.num_arms:
                raise ValueError(
                    f"`reward_models` holds {len(reward_models)} RMs but the router has {router.num_arms} arms"
                )
            scorers = [as_pair_scorer(rm, name=n) for rm, n in zip(reward_models, router.arm_names)]
        if reward_mode not in ("preference", "score"):
            raise ValueError(f"`reward_mode` must be one of ['preference', 'score'], but is {reward_mode!r}")
        if pairing not in ("auto", "consecutive", "halves"):
            raise ValueError(f"`pairing` must be one of ['auto', 'consecutive', 'halves'], but is {pairing!r}")
        self.pairing = pairing
        if not (hasattr(encoder, "embed_pairs") or callable(encoder)):
            raise TypeError(
                "`encoder` must be an OfflineRouter or a callable (prompts, responses_a, responses_b) -> h"
            )
        self.router = router
        self.scorers: list[PairScorer] = scorers
        self.encoder = encoder
        self.normalizer = normalizer if normalizer is not None else QuantileRewardNormalizer()
        self.reward_mode = reward_mode
        self.embed_batch_size = embed_batch_size
        self.generator = torch.Generator().manual_seed(seed) if seed is not None else None
        self.pending: list[dict] = []
        self.__name__ = "routed_reward"  # TRL logs rewards under the callable's name

    # ------------------------------------------------------------------------------------------------ routing
    @property
    def rm_names(self) -> list[str]:
        """RM names in arm order."""
        return list(self.router.arm_names)

    @property
    def num_rm_calls(self) -> dict[str, int]:
        """Pairs scored so far, per RM (one call per pair)."""
        return {s.name: s.num_pair_calls for s in self.scorers}

    @torch.no_grad()
    def embed(self, prompts, responses_a, responses_b) -> torch.Tensor:
        """Pair contexts `(P, d)` from the frozen encoder."""
        if hasattr(self.encoder, "embed_pairs"):
            return self.encoder.embed_pairs(prompts, responses_a, responses_b, batch_size=self.embed_batch_size)
        return torch.as_tensor(self.encoder(prompts, responses_a, responses_b))

    def route_and_score(self, prompts: Sequence, responses_a: Sequence, responses_b: Sequence, record: bool = True):
        """Route each pair to one RM and score it with that RM only.

        Returns:
            `dict` with ``arms`` (LongTensor `(P,)`), ``scores_a``/``scores_b`` (`(P,)`, the routed RM's scores),
            ``h`` (`(P, d)`). With ``record=True`` the pairs join :attr:`pending` (winner = higher score).
        """
        prompts, responses_a, responses_b = list(prompts), list(responses_a), list(responses_b)
        h = self.embed(prompts, responses_a, responses_b)
        arms = self.router.select(h, generator=self.generator)
        scores_a = torch.full((len(prompts),), float("nan"))
        scores_b = torch.full((len(prompts),), float("nan"))
        for arm in torch.unique(arms).tolist():
            idx = torch.nonzero(arms == arm).flatten().tolist()
            sa, sb = self.scorers[arm].score_pairs(
                [prompts[i] for i in idx], [responses_a[i] for i in idx], [responses_b[i] for i in idx]
            )
            scores_a[idx], scores_b[idx] = sa, sb
        if record:
            for i in range(len(prompts)):
                a_wins = bool(scores_a[i] >= scores_b[i])
                self.pending.append(
                    {
                        "h": h[i],
                        "arm": int(arms[i]),
                        "prompt": prompts[i],
                        "chosen": responses_a[i] if a_wins else responses_b[i],
                        "rejected": responses_b[i] if a_wins else responses_a[i],
                    }
                )
        return {"arms": arms, "scores_a": scores_a, "scores_b": scores_b, "h": h}

    # ------------------------------------------------------------------------------------------------ TRL reward function
    def __call__(self, prompts: list, completions: list, **kwargs) -> list[float]:
        """GRPO reward function: one routed RM call per completion pair (see the class docstring)."""
        if len(prompts) != len(completions):
            raise ValueError(f"`prompts` ({len(prompts)}) and `completions` ({len(completions)}) differ in length")
        n = len(prompts)
        pairing = self.pairing
        if pairing == "auto":
            pairing = "halves" if n % 2 == 0 and n > 0 and prompts[: n // 2] == prompts[n // 2 :] else "consecutive"
        pairs = []  # (i, j)
        if pairing == "halves":  # OnlineDPOTrainer: prompts = 2 * prompts, completion i pairs with i + B
            if n % 2 or prompts[: n // 2] != prompts[n // 2 :]:
                raise ValueError("`pairing='halves'` needs `prompts` made of two identical halves (OnlineDPO layout)")
            pairs = [(i, i + n // 2) for i in range(n // 2)]
        else:  # GRPOTrainer: the completions of one prompt are consecutive
            start = 0
            for end in range(1, n + 1):
                if end == n or prompts[end] != prompts[start]:
                    group = list(range(start, end))
                    pairs += [(group[k], group[k + 1]) for k in range(0, len(group) - 1, 2)]
                    if len(group) % 2 == 1:
                        pairs.append((group[-1], group[0]) if len(group) > 1 else (group[0], group[0]))
                    start = end
        out = self.route_and_score(
            [prompts[i] for i, _ in pairs], [completions[i] for i, _ in pairs], [completions[j] for _, j in pairs]
        )
        rewards = [0.0] * len(prompts)
        assigned = [False] * len(prompts)
        for (i, j), sa, sb in zip(pairs, out["scores_a"].tolist(), out["scores_b"].tolist()):
            if self.reward_mode == "score":
                ra, rb = sa, sb
            else:
                ra, rb = (0.5, 0.5) if sa == sb else (float(sa > sb), float(sb > sa))
            if not assigned[i]:
                rewards[i], assigned[i] = ra, True
            if not assigned[j]:
                rewards[j], assigned[j] = rb, True
        return rewards

    # ------------------------------------------------------------------------------------------------ TRL judge
    def judge(
        self, prompts: list, completions: list[list], shuffle_order: bool = True, return_scores: bool = False
    ) -> list:
        """Pairwise judge (TRL's interface): index (0 or 1) of the preferred completion of each pair.

        Each pair is scored by its routed RM only. ``shuffle_order`` is accepted for interface compatibility: RM
        scores and the pair context are symmetric in the two completions, so order cannot bias the verdict.
        With ``return_scores=True`` returns ``sigmoid(score_0 - score_1)``, the probability that completion 0 wins.
        Ties go to completion 0.
        """
        if any(len(c) != 2 for c in completions):
            raise ValueError("`completions` must hold exactly two completions per prompt")
        out = self.route_and_score(prompts, [c[0] for c in completions], [c[1] for c in completions])
        if return_scores:
            return torch.sigmoid(out["scores_a"] - out["scores_b"]).tolist()
        return [0 if a >= b else 1 for a, b in zip(out["scores_a"].tolist(), out["scores_b"].tolist())]

    # ------------------------------------------------------------------------------------------------ feedback
    def feedback(self, losses: torch.Tensor) -> torch.Tensor:
        """Update the router from per-pair DPO losses of the :attr:`pending` pairs (in order) and clear them.

        Args:
            losses (`torch.Tensor` of shape `(P,)`): per-pair DPO loss after the update (e.g. :func:`dpo_pair_losses`).

        Returns:
            `torch.Tensor` of shape `(P,)`: the normalised router rewards used (NaN = skipped by the EMA warm-up).

        Raises:
            ValueError: if ``losses`` does not hold one value per pending pair.
        """
        losses = torch.as_tensor(losses, dtype=torch.float64).reshape(-1)
        if losses.numel() != len(self.pending):
            raise ValueError(
                f"`losses` must hold {len(self.pending)} values (one per pending pair), got {losses.numel()}"
            )
        if not self.pending:
            return losses
        h = torch.stack([p["h"] for p in self.pending])
        arms = torch.tensor([p["arm"] for p in self.pending])
        if isinstance(self.normalizer, EMARewardNormalizer):
            rewards = self.normalizer(losses, arms)
        else:
            rewards = self.normalizer(advantage(losses))
        keep = torch.isfinite(rewards)
        self.router.update(h[keep], arms[keep], rewards[keep])
        self.pending = []
        return rewards
