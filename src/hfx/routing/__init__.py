"""Reward-model routing (BayesianRouter, arXiv 2510.02850): route each preference pair to one RM of a pool.

* :class:`OfflineRouter` / :class:`OfflineRouterTrainer` -- the offline multi-task (Bradley-Terry) router whose
  normalised BT vectors are the online prior; :func:`label_with_reward_models` builds its training columns.
* :class:`ThompsonRouter` -- the online Bayesian Thompson-sampling router; :class:`LinUCBRouter` (LASeR) and
  :class:`RandomRouter` are baselines with the same interface.
* cheap offline judges usable as pool members (:mod:`hfx.routing.judges`): :class:`NumericAnswerJudge`,
  :class:`DocstringExampleJudge`, :class:`ReferenceSimilarityJudge`, :class:`MeanLogProbJudge`, :class:`LengthJudge`.
* :class:`RoutedRewardModel` -- a TRL reward function / pairwise judge that calls exactly one RM per pair, with
  :class:`RouterUpdateCallback` performing the posterior update after each optimizer step.

Importing this package never imports trl or datasets (PEP 562 lazy attributes).
"""

from hfx._lazy import attach

from .base import BaseRouter
from .linucb import LinUCBRouter, RandomRouter
from .thompson import EMARewardNormalizer, QuantileRewardNormalizer, ThompsonRouter, advantage


_LAZY = {
    "OfflineRouter": "hfx.routing.offline",
    "OfflineRouterOutput": "hfx.routing.offline",
    "format_pair_text": "hfx.routing.offline",
    "bt_loss": "hfx.routing.offline",
    "balance_bt_triples": "hfx.routing.offline",
    "OfflineRouterTrainer": "hfx.routing.trainer",
    "OfflineRouterCollator": "hfx.routing.trainer",
    "router_accuracy": "hfx.routing.trainer",
    "label_with_reward_models": "hfx.routing.labeling",
    "PairScorer": "hfx.routing.labeling",
    "as_pair_scorer": "hfx.routing.labeling",
    "RoutedRewardModel": "hfx.routing.trl",
    "RouterUpdateCallback": "hfx.routing.callback",
    "dpo_pair_losses": "hfx.routing.callback",
    "publish": "hfx.routing.hub",
    "NumericAnswerJudge": "hfx.routing.judges",
    "DocstringExampleJudge": "hfx.routing.judges",
    "ReferenceSimilarityJudge": "hfx.routing.judges",
    "MeanLogProbJudge": "hfx.routing.judges",
    "LengthJudge": "hfx.routing.judges",
}

__all__ = [
    "BaseRouter",
    "DocstringExampleJudge",
    "EMARewardNormalizer",
    "LengthJudge",
    "LinUCBRouter",
    "MeanLogProbJudge",
    "NumericAnswerJudge",
    "OfflineRouter",
    "OfflineRouterCollator",
    "OfflineRouterOutput",
    "OfflineRouterTrainer",
    "PairScorer",
    "QuantileRewardNormalizer",
    "RandomRouter",
    "ReferenceSimilarityJudge",
    "RoutedRewardModel",
    "RouterUpdateCallback",
    "ThompsonRouter",
    "advantage",
    "as_pair_scorer",
    "balance_bt_triples",
    "bt_loss",
    "dpo_pair_losses",
    "format_pair_text",
    "label_with_reward_models",
    "publish",
    "router_accuracy",
]


__getattr__, __dir__ = attach(__name__, _LAZY, __all__)
