"""Token Hidden Reward (THR) for TRL's GRPO: `THRGRPOTrainer`, `THRGRPOConfig`, `plot_token_thr`.

Deng et al., "Token Hidden Reward: Steering Exploration-Exploitation in Group Relative Deep Reinforcement Learning",
arXiv 2510.03669 (https://huggingface.co/papers/2510.03669), with the NTHR machinery of arXiv 2505.18830.

Names resolve lazily (PEP 562): the pure math in :mod:`.token_rewards` and the plotting in :mod:`.plot` load without
trl; :class:`THRGRPOTrainer` / :class:`THRGRPOConfig` import trl on first access.
"""

from typing import TYPE_CHECKING

from hfx._lazy import attach


_LAZY = {
    "THRGRPOConfig": ".config",
    "THRGRPOTrainer": ".trainer",
    "plot_token_thr": ".plot",
    "token_thr_html": ".plot",
    "publish": ".hub",
    "BatchTHR": ".token_rewards",
    "GroupTHR": ".token_rewards",
    "batch_token_hidden_reward": ".token_rewards",
    "group_token_hidden_reward": ".token_rewards",
    "grpo_group_advantages": ".token_rewards",
    "hidden_reward_scores": ".token_rewards",
    "nthr_eta": ".token_rewards",
    "thr_token_advantages": ".token_rewards",
    "token_hidden_reward": ".token_rewards",
}

__all__ = [
    "BatchTHR",
    "GroupTHR",
    "THRGRPOConfig",
    "THRGRPOTrainer",
    "batch_token_hidden_reward",
    "group_token_hidden_reward",
    "grpo_group_advantages",
    "hidden_reward_scores",
    "nthr_eta",
    "plot_token_thr",
    "publish",
    "thr_token_advantages",
    "token_hidden_reward",
    "token_thr_html",
]


__getattr__, __dir__ = attach(__name__, _LAZY, __all__)


if TYPE_CHECKING:  # pragma: no cover
    from .config import THRGRPOConfig
    from .plot import plot_token_thr, token_thr_html
    from .trainer import THRGRPOTrainer
