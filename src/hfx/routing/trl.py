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

import itertools
import logging
from collections.abc import Sequence

import torch

from hfx.utils.validation import check_choice, check_float, check_int, check_optional

from .base import BaseRouter
from .labeling import PairScorer, as_pair_scorer
from .thompson import EMARewardNormalizer, QuantileRewardNormalizer, advantage


logger = logging.getLogger(__name__)


PAIRINGS = ("auto", "all_pairs", "consecutive", "halves")


class RoutedRewardModel:
    """Route each preference pair to one reward model of a pool and learn the routing online (BayesianRouter).

    Usable as

    * a **reward function** for [`~trl.GRPOTrainer`] (``reward_funcs=routed``). TRL puts the completions of one
      prompt consecutively; how they are paired is ``pairing``:

      - ``"all_pairs"`` (the default for GRPO batches; the authors' rule [code], ``generate_offline_prior`` in
        ``gp_router/utils4.py``): every ``i < j`` pair of a prompt's completions is routed and scored by its routed RM
        (G(G-1)/2 RM calls for G completions; still one RM per pair);
      - ``"consecutive"`` (the rule before issue 11): completions (0,1), (2,3), ... of a prompt; an odd last
        completion is paired with the group's first one (G/2 rounded up calls);
      - ``"halves"`` (``OnlineDPOTrainer``: ``prompts = 2 * prompts``): completion i is paired with i + B;
      - ``"auto"`` (default): ``"all_pairs"`` when every run of identical consecutive prompts has length >= 2 (the
        GRPO layout), else ``"halves"`` when the prompt list is two identical halves, else ``"all_pairs"``.

      A completion's reward averages its pairs: with ``reward_mode="preference"`` 1 for a win, 0 for a loss, 0.5
      for a tie; with ``"score"`` the routed RMs' raw scores. Under ``"consecutive"`` each completion is credited
      by its own pair only (the wrap-around pair credits the odd last completion), as before. A completion none of
      whose pairs could be scored (an RM returned ``None``) gets ``None``, which TRL ignores like its own
      ``None`` rewards.
    * a **pairwise judge** (:meth:`judge`, TRL's judge interface) for online-DPO style loops;
    * a plain router for custom loops (:meth:`route_and_score` then :meth:`feedback`).

    **Ties.** A pair with ``|s_a - s_b| <= tie_eps`` under its routed RM is a tie [code: ``train_bo_router4.py``
    passes ``tie_eps=1e-1`` to ``generate_preference_pairs_multi_rm``]: it carries no preference, so it is neither
    given to the DPO loss nor to the router (it never joins :attr:`pending`). **Pairs used for learning.** Of the
    scored, non-tied pairs of each prompt at most ``pairs_per_query`` (default 4, as the authors' GSM8K run) are
    drawn at random (``seed``) and join :attr:`pending`; the authors draw with replacement (a pair may be used
    twice), here without. Routed pairs wait in :attr:`pending` until :meth:`feedback` (called by
    :class:`RouterUpdateCallback` after each optimizer step, or by you) turns per-pair DPO losses into router rewards
    (``advantage`` then the normaliser) and updates the router (only the routed arms learn).

    **TRL keyword arguments.** Like ``GRPOTrainer`` does for every reward function, the keyword arguments the
    trainer passes (dataset columns such as ``answer``, ``completion_ids``, ``trainer_state``, ``log_metric``, ...)
    are passed on to every RM that is a TRL reward function: a list with one value per completion is sliced to the
    rows that RM scores, anything else is passed unchanged. ``log_extra`` raises inside a routed RM (its rows are
    pair rows, not the trainer's completion rows). Model RMs get no columns, as in TRL.

    **Bad numbers.** An RM returning NaN / inf, a non-finite pair embedding, DPO loss or router reward raises
    ``ValueError`` before anything reaches the posterior or the normaliser. An RM returning ``None`` (TRL allows
    it) skips the pair; skipped pairs and ties are counted in :attr:`num_unscored_pairs` / :attr:`num_tie_pairs`,
    per call in :attr:`last_metrics`, and logged through TRL's ``log_metric`` as ``routed_reward/pairs``,
    ``routed_reward/tie_pairs``, ``routed_reward/unscored_pairs`` and ``routed_reward/recorded_pairs``.

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
        pairing (`str`, *optional*, defaults to `"auto"`): ``"auto"``, ``"all_pairs"``, ``"consecutive"`` or
            ``"halves"`` (see above).
        tie_eps (`float`, *optional*, defaults to `0.1`): score gap at or below which a pair is a tie [code]; ``0``
            treats only equal scores as ties.
        pairs_per_query (`int` or `None`, *optional*, defaults to `4`): non-tied pairs per prompt that join
            :attr:`pending` [code]; ``None`` keeps all of them.
        seed (`int`, *optional*): seeds the router's sampling generator and the draw of the pending pairs.
        embed_batch_size (`int`, *optional*, defaults to `16`): pairs per encoder forward pass.

    Raises:
        ValueError: empty pool, pool size != ``router.num_arms``, unknown / missing RM names, unknown ``reward_mode``
            or ``pairing``, negative / non-finite ``tie_eps``, ``pairs_per_query`` < 1.
    """

    def __init__(
        self,
        router: BaseRouter,
        reward_models,
        encoder,
        normalizer=None,
        reward_mode: str = "preference",
        pairing: str = "auto",
        tie_eps: float = 0.1,
        pairs_per_query: int | None = 4,
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
        check_choice("reward_mode", reward_mode, ("preference", "score"))
        check_choice("pairing", pairing, PAIRINGS)
        tie_eps = check_float("tie_eps", tie_eps, minimum=0.0)
        pairs_per_query = check_optional(check_int, "pairs_per_query", pairs_per_query, minimum=1)
        if not (hasattr(encoder, "embed_pairs") or callable(encoder)):
            raise TypeError(
                "`encoder` must be an OfflineRouter or a callable (prompts, responses_a, responses_b) -> h"
            )
        self.pairing = pairing
        self.tie_eps = float(tie_eps)
        self.pairs_per_query = pairs_per_query
        self.router = router
        self.scorers: list[PairScorer] = scorers
        self.encoder = encoder
        self.normalizer = normalizer if normalizer is not None else QuantileRewardNormalizer()
        self.reward_mode = reward_mode
        self.embed_batch_size = embed_batch_size
        self.generator = torch.Generator().manual_seed(seed) if seed is not None else None
        self.pending: list[dict] = []
        self.num_tie_pairs = 0
        self.num_unscored_pairs = 0
        self.last_metrics: dict[str, int] = {}
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

    def route_and_score(
        self,
        prompts: Sequence,
        responses_a: Sequence,
        responses_b: Sequence,
        record: bool = True,
        row_kwargs_a: dict | None = None,
        row_kwargs_b: dict | None = None,
        **shared_kwargs,
    ):
        """Route each pair to one RM and score it with that RM only.

        Args:
            prompts, responses_a, responses_b (`Sequence` of length P).
            record (`bool`, *optional*, defaults to `True`): append the scored, non-tied pairs to :attr:`pending`
                (winner = higher score).
            row_kwargs_a, row_kwargs_b (`dict[str, list]`, *optional*): per-pair keyword arguments for response a / b
                (lists of length P), passed to RMs that take them (see :class:`~hfx.routing.PairScorer`).
            **shared_kwargs: passed unchanged to those RMs.

        Returns:
            `dict` with ``arms`` (LongTensor `(P,)`), ``scores_a``/``scores_b`` (`(P,)`, the routed RM's scores,
            ``nan`` where it returned ``None``), ``h`` (`(P, d)`), ``tie`` and ``unscored`` (BoolTensor `(P,)`).

        Raises:
            ValueError: a non-finite pair embedding or RM score (nothing is recorded then).
        """
        prompts, responses_a, responses_b = list(prompts), list(responses_a), list(responses_b)
        row_kwargs_a, row_kwargs_b = row_kwargs_a or {}, row_kwargs_b or {}
        h = self.embed(prompts, responses_a, responses_b)
        arms = self.router.select(h, generator=self.generator)
        scores_a = torch.full((len(prompts),), float("nan"))
        scores_b = torch.full((len(prompts),), float("nan"))
        for arm in torch.unique(arms).tolist():
            idx = torch.nonzero(arms == arm).flatten().tolist()
            sa, sb = self.scorers[arm].score_pairs(
                [prompts[i] for i in idx],
                [responses_a[i] for i in idx],
                [responses_b[i] for i in idx],
                row_kwargs_a={k: [v[i] for i in idx] for k, v in row_kwargs_a.items()},
                row_kwargs_b={k: [v[i] for i in idx] for k, v in row_kwargs_b.items()},
                **shared_kwargs,
            )
            scores_a[idx], scores_b[idx] = sa, sb
        unscored = torch.isnan(scores_a) | torch.isnan(scores_b)
        tie = ~unscored & ((scores_a - scores_b).abs() <= self.tie_eps)
        self.num_unscored_pairs += int(unscored.sum())
        self.num_tie_pairs += int(tie.sum())
        out = {"arms": arms, "scores_a": scores_a, "scores_b": scores_b, "h": h, "tie": tie, "unscored": unscored}
        if record:
            self._record(out, prompts, responses_a, responses_b, torch.nonzero(~tie & ~unscored).flatten().tolist())
        return out

    def _record(self, out: dict, prompts: list, responses_a: list, responses_b: list, indices: list[int]) -> None:
        for i in indices:
            a_wins = bool(out["scores_a"][i] > out["scores_b"][i])
            self.pending.append(
                {
                    "h": out["h"][i],
                    "arm": int(out["arms"][i]),
                    "prompt": prompts[i],
                    "chosen": responses_a[i] if a_wins else responses_b[i],
                    "rejected": responses_b[i] if a_wins else responses_a[i],
                }
            )

    # ------------------------------------------------------------------------------------------------ TRL reward function
    def resolve_pairing(self, prompts: Sequence) -> str:
        """The pairing rule ``"auto"`` picks for this prompt list (see the class docstring); other values as set."""
        if self.pairing != "auto":
            return self.pairing
        runs = [len(list(g)) for _, g in itertools.groupby(range(len(prompts)), key=lambda i: prompts[i])]
        if runs and all(r >= 2 for r in runs):
            return "all_pairs"
        n = len(prompts)
        if n and n % 2 == 0 and prompts[: n // 2] == prompts[n // 2 :]:
            return "halves"
        return "all_pairs"

    def form_pairs(self, prompts: Sequence) -> tuple[list[tuple[int, int]], list[tuple[bool, bool]], list[int]]:
        """Pairs of completion indices for a reward-function call.

        Returns:
            ``(pairs, credit, group)``: the ``(i, j)`` pairs; whether each pair's result counts toward the reward of
            completion i / j; the prompt group of each pair (``pairs_per_query`` applies per group).

        Raises:
            ValueError: ``"halves"`` on a prompt list that is not two identical halves, or ``"all_pairs"`` with a
                prompt that has a single completion.
        """
        n = len(prompts)
        pairing = self.resolve_pairing(prompts)
        pairs, credit, group = [], [], []
        if pairing == "halves":  # OnlineDPOTrainer: prompts = 2 * prompts, completion i pairs with i + B
            if n % 2 or prompts[: n // 2] != prompts[n // 2 :]:
                raise ValueError("`pairing='halves'` needs `prompts` made of two identical halves (OnlineDPO layout)")
            for i in range(n // 2):
                pairs.append((i, i + n // 2))
                credit.append((True, True))
                group.append(i)
            return pairs, credit, group
        for g, (_, run) in enumerate(itertools.groupby(range(n), key=lambda i: prompts[i])):
            members = list(run)
            if pairing == "all_pairs":
                if len(members) < 2:
                    raise ValueError(
                        f"completion {members[0]} is the only one of its prompt: `pairing='all_pairs'` compares the "
                        "completions of a prompt, so it needs >= 2 per prompt, consecutive (GRPO: "
                        "num_generations >= 2); use `pairing='halves'` for the OnlineDPO layout"
                    )
                for a, b in itertools.combinations(members, 2):
                    pairs.append((a, b))
                    credit.append((True, True))
                    group.append(g)
            else:  # "consecutive": (0,1), (2,3), ...; an odd last completion is paired with the group's first one
                for k in range(0, len(members) - 1, 2):
                    pairs.append((members[k], members[k + 1]))
                    credit.append((True, True))
                    group.append(g)
                if len(members) % 2 == 1:
                    pairs.append((members[-1], members[0]))
                    credit.append((True, False))
                    group.append(g)
        return pairs, credit, group

    def __call__(self, prompts: list, completions: list, **kwargs) -> list[float | None]:
        """GRPO reward function: one routed RM call per completion pair (see the class docstring).

        Args:
            prompts (`list`), completions (`list`): one entry per completion (TRL's layout).
            **kwargs: what the trainer passes (dataset columns, ``completion_ids``, ``trainer_state``,
                ``log_metric``, ...): forwarded to the routed RMs that are reward functions.

        Returns:
            `list[float | None]`: one reward per completion; ``None`` where no pair of it could be scored.

        Raises:
            ValueError: ``prompts`` / ``completions`` lengths differ, see :meth:`form_pairs`, or a bad number
                (see the class docstring).
        """
        if len(prompts) != len(completions):
            raise ValueError(f"`prompts` ({len(prompts)}) and `completions` ({len(completions)}) differ in length")
        n = len(prompts)
        if n == 0:
            return []
        pairs, credit, group = self.form_pairs(prompts)
        row = {k: v for k, v in kwargs.items() if isinstance(v, (list, tuple)) and len(v) == n}
        shared = {k: v for k, v in kwargs.items() if k not in row}
        first, second = [i for i, _ in pairs], [j for _, j in pairs]
        pair_prompts = [prompts[i] for i in first]
        resp_a, resp_b = [completions[i] for i in first], [completions[j] for j in second]
        out = self.route_and_score(
            pair_prompts,
            resp_a,
            resp_b,
            record=False,
            row_kwargs_a={k: [v[i] for i in first] for k, v in row.items()},
            row_kwargs_b={k: [v[j] for j in second] for k, v in row.items()},
            **shared,
        )
        sums, counts = [0.0] * n, [0] * n
        tie, unscored = out["tie"].tolist(), out["unscored"].tolist()
        for k, ((i, j), (credit_i, credit_j)) in enumerate(zip(pairs, credit)):
            if unscored[k]:
                continue
            sa, sb = float(out["scores_a"][k]), float(out["scores_b"][k])
            if self.reward_mode == "score":
                ra, rb = sa, sb
            else:
                ra, rb = (0.5, 0.5) if tie[k] else (float(sa > sb), float(sb > sa))
            if credit_i:
                sums[i], counts[i] = sums[i] + ra, counts[i] + 1
            if credit_j:
                sums[j], counts[j] = sums[j] + rb, counts[j] + 1
        rewards = [s / c if c else None for s, c in zip(sums, counts)]

        usable = [k for k in range(len(pairs)) if not (tie[k] or unscored[k])]
        if self.pairs_per_query is not None:
            chosen = []
            for _, members in itertools.groupby(usable, key=lambda k: group[k]):
                members = list(members)
                if len(members) > self.pairs_per_query:
                    pick = torch.randperm(len(members), generator=self.generator)[: self.pairs_per_query]
                    members = [members[m] for m in sorted(pick.tolist())]
                chosen += members
            usable = chosen
        self._record(out, pair_prompts, resp_a, resp_b, usable)
        self.last_metrics = {
            "pairs": len(pairs),
            "tie_pairs": sum(tie),
            "unscored_pairs": sum(unscored),
            "recorded_pairs": len(usable),
        }
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            for key, value in self.last_metrics.items():
                log_metric(f"{self.__name__}/{key}", float(value))
        return rewards

    # ------------------------------------------------------------------------------------------------ TRL judge
    def judge(
        self, prompts: list, completions: list[list], shuffle_order: bool = True, return_scores: bool = False
    ) -> list:
        """Pairwise judge (TRL's interface): index (0 or 1) of the preferred completion of each pair.

        Each pair is scored by its routed RM only. The verdict does not depend on the order of the two completions:
        the pair context ``h`` is symmetric in them (``(e + e')/2`` and ``|e - e'|``), so the same router draw picks
        the same RM, and an RM that scores each completion on its own (a reward function or a sequence classifier)
        gives the same two scores; swapping the completions therefore mirrors the verdict (0 <-> 1), under the same
        generator state. ``shuffle_order`` is accepted for interface compatibility and not needed.

        Returns:
            `list[int]`: 0 or 1, or ``-1`` (TRL's "no verdict") for a tie (``|s_0 - s_1| <= tie_eps``) or a pair the
            RM declined (``None``); ties and declined pairs are not recorded in :attr:`pending`. With
            ``return_scores=True``: `list[float | None]`, ``sigmoid(s_0 - s_1)`` (the probability that completion 0
            wins), ``None`` for declined pairs.

        Raises:
            ValueError: a prompt without exactly two completions, or a bad number (see the class docstring).
        """
        if len(prompts) != len(completions):
            raise ValueError(f"`prompts` ({len(prompts)}) and `completions` ({len(completions)}) differ in length")
        if any(len(c) != 2 for c in completions):
            raise ValueError("`completions` must hold exactly two completions per prompt")
        out = self.route_and_score(prompts, [c[0] for c in completions], [c[1] for c in completions])
        self.last_metrics = {
            "pairs": len(prompts),
            "tie_pairs": int(out["tie"].sum()),
            "unscored_pairs": int(out["unscored"].sum()),
            "recorded_pairs": int((~out["tie"] & ~out["unscored"]).sum()),
        }
        if return_scores:
            probs = torch.sigmoid(out["scores_a"] - out["scores_b"]).tolist()
            return [None if u else p for p, u in zip(probs, out["unscored"].tolist())]
        verdicts = []
        for a, b, t, u in zip(
            out["scores_a"].tolist(), out["scores_b"].tolist(), out["tie"].tolist(), out["unscored"].tolist()
        ):
            verdicts.append(-1 if (t or u) else (0 if a > b else 1))
        return verdicts

    # ------------------------------------------------------------------------------------------------ feedback
    def feedback(self, losses: torch.Tensor) -> torch.Tensor:
        """Update the router from per-pair DPO losses of the :attr:`pending` pairs (in order) and clear them.

        Args:
            losses (`torch.Tensor` of shape `(P,)`): per-pair DPO loss after the update (e.g. :func:`dpo_pair_losses`).

        Returns:
            `torch.Tensor` of shape `(P,)`: the normalised router rewards used (NaN = skipped by the EMA warm-up).

        Raises:
            ValueError: if ``losses`` does not hold one value per pending pair, or holds NaN / inf (then nothing is
                updated, the normaliser history is untouched and :attr:`pending` is kept).
        """
        losses = torch.as_tensor(losses, dtype=torch.float64).reshape(-1)
        if losses.numel() != len(self.pending):
            raise ValueError(
                f"`losses` must hold {len(self.pending)} values (one per pending pair), got {losses.numel()}"
            )
        if not torch.isfinite(losses).all():
            bad = torch.nonzero(~torch.isfinite(losses)).flatten().tolist()
            raise ValueError(
                f"`losses` must be finite, but the DPO loss of pending pair(s) {bad[:10]} is NaN or inf; the router "
                "was not updated and the pairs stay pending (a diverged policy or a bad reference model?)"
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
