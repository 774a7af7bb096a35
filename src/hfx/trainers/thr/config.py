"""`THRGRPOConfig`: `trl.GRPOConfig` plus the Token Hidden Reward switches."""

from __future__ import annotations

from dataclasses import dataclass, field

from trl import GRPOConfig

from hfx.utils.validation import check_choice, check_float, check_int

from .distributed import THR_EXCHANGES
from .token_rewards import THR_MODES, THR_NORMALIZATIONS, check_mode_normalization


@dataclass
class THRGRPOConfig(GRPOConfig):
    r"""Configuration for [`THRGRPOTrainer`]: every [`~trl.GRPOConfig`] field plus the `thr_*` fields below.

    Token Hidden Reward (Deng et al., arXiv 2510.03669, https://huggingface.co/papers/2510.03669) turns the response
    advantage ``A_j`` of GRPO into per-token advantages ``A'_jt`` using each token's influence on the likelihood of
    the group's correct responses. The exact THR formula is not public; the choices marked [reconstruction] follow
    ``hfx``'s spec and can be switched here.

    Args:
        thr_mode (`str`, *optional*, defaults to `"reweight"`):
            ``"off"`` (exactly `trl.GRPOTrainer`), ``"reweight"`` (``A'_jt = A_j (1 + thr_p sign(THR_jt))`` on
            dominant tokens, ``A_j`` elsewhere), ``"thr_only"`` (``A'_jt = A_j 1[|THR_jt| > tau]``: dominant-token
            training) or ``"nthr"`` (the predecessor NTHR rule, arXiv 2505.18830: ``A'_jt = eta A_j`` for negative
            tokens with influence score ``s_jt > tau``, ``eta = 2|0.5 - p|``).
        thr_p (`float`, *optional*, defaults to `0.1`):
            The reweighting coefficient ``p_w`` in ``(-1, 1)``: ``p > 0`` amplifies positive-THR tokens and weakens
            negative ones (exploitation, Pass@1), ``p < 0`` the reverse (exploration, Pass@K). The paper tunes its
            magnitude per model; ``0`` is plain GRPO.
        thr_tau_beta (`float`, *optional*, defaults to `1.0`):
            Scale ``beta >= 0`` of NTHR's anchor threshold ``tau = beta * min_{i in P} mean_k |THR_ik|``
            [reconstruction: NTHR's anchor applied to ``|THR|``]. Smaller values mark more tokens as dominant.
        thr_tau (`float`, *optional*):
            A fixed threshold on ``|THR|`` (on ``s`` for ``"nthr"``) that replaces the anchor; e.g. ``-1`` marks every
            token as dominant.
        thr_normalization (`str`, *optional*, defaults to `"none"`):
            [reconstruction] ``"none"``, ``"positive_length"`` (divide THR by ``sum_{i in P} |y_i|``) or
            ``"response_length"`` (by ``|y_j|``). Only ``"none"`` with ``thr_mode="nthr"`` (the NTHR rule thresholds
            the unnormalised scores).
        thr_include_self (`bool`, *optional*, defaults to `True`):
            [reconstruction] whether a correct response's own tokens (``i = j`` terms) count in its tokens' scores.
        thr_vocab_subset (`str`, *optional*, defaults to `"group"`):
            ``"group"``: prediction errors restricted to ``V*``, the token ids appearing in the group's completions
            (the paper's efficient form); ``"full"``: the whole vocabulary (exact ``<g, g'>``, more memory).
        thr_hidden_states (`str`, *optional*, defaults to `"generation"`):
            Where the rollout policy's final hidden states (the backbone's ``last_hidden_state``) come from.
            ``"generation"``: captured during the rollout itself by a forward hook on the backbone, registered only
            while ``_generate`` runs (no extra forward pass; equal to a fresh forward up to KV-cache float rounding);
            when generation is not one transformers ``generate`` call (vLLM, continuous batching, tools, a
            ``rollout_func``) or the capture does not match the completions, ``"forward"`` is used (on every process,
            when one of them cannot use its capture; logged once). ``"forward"``: the training model's no-grad
            forward of prompt + completion -- the one TRL already runs for the old log-probs when it does (vLLM with
            ``vllm_importance_sampling_correction=True``, TRL's default; generation not aligned with optimizer steps,
            e.g. ``num_iterations > 1``), captured by a backbone hook during that call, otherwise one extra pass.
            Either way ``pi_old`` is computed from these hidden states by the model's own ``forward`` (see
            :mod:`hfx.trainers.thr.policy`).
        thr_exchange (`str`, *optional*, defaults to `"auto"`):
            On several processes, how a GRPO group split across processes is assembled: ``"hidden_states"``
            (all-gather the correct responses' hidden states), ``"gram"`` (all-gather partial Gram factors ``M+``)
            or ``"auto"`` (whichever moves fewer bytes at that step). See :mod:`hfx.trainers.thr.distributed`.
            Unused on one process or when every group is whole on its process.
        thr_log_stats (`bool`, *optional*, defaults to `True`):
            Log ``thr/dominant_frac``, ``thr/abs_mean``, ``thr/positive_frac``, ``thr/negative_frac``,
            ``thr/top_abs_mean``, ``thr/skipped_group_frac`` and keep the last batch's THR on
            ``trainer.last_thr`` (for :func:`plot_token_thr`).
        thr_top_k (`int`, *optional*, defaults to `5`):
            How many top-``|THR|`` tokens ``thr/top_abs_mean`` averages over.

    Raises:
        ValueError: if ``thr_mode``, ``thr_normalization``, ``thr_vocab_subset``, ``thr_hidden_states`` or
            ``thr_exchange`` is not an allowed value, ``thr_p`` is outside ``(-1, 1)``, ``thr_tau_beta < 0``,
            ``thr_top_k < 1``, or ``thr_mode="nthr"`` is combined with a ``thr_normalization`` other than ``"none"``.
    """

    thr_mode: str = field(
        default="reweight",
        metadata={"help": "THR mode: 'off' (plain GRPO), 'reweight', 'thr_only' (dominant tokens only) or 'nthr'."},
    )
    thr_p: float = field(
        default=0.1,
        metadata={
            "help": "Reweighting coefficient p in (-1, 1): > 0 exploitation (Pass@1), < 0 exploration (Pass@K)."
        },
    )
    thr_tau_beta: float = field(
        default=1.0,
        metadata={"help": "Scale beta >= 0 of the NTHR anchor threshold tau = beta * min_{i in P} mean_k |THR_ik|."},
    )
    thr_tau: float | None = field(
        default=None, metadata={"help": "Fixed threshold on |THR| replacing the anchor heuristic (None: anchor)."}
    )
    thr_normalization: str = field(
        default="none",
        metadata={"help": "THR normalisation: 'none', 'positive_length' (sum of correct lengths), 'response_length'."},
    )
    thr_include_self: bool = field(
        default=True, metadata={"help": "Include a correct response's own tokens (i = j terms) in its THR scores."}
    )
    thr_vocab_subset: str = field(
        default="group",
        metadata={"help": "'group': prediction errors over the group's vocabulary V*; 'full': the whole vocabulary."},
    )
    thr_hidden_states: str = field(
        default="generation",
        metadata={"help": "Hidden states from 'generation' (captured during the rollout) or an extra 'forward'."},
    )
    thr_exchange: str = field(
        default="auto",
        metadata={"help": "Split groups on several processes: 'auto', 'hidden_states' or 'gram' (Gram factors)."},
    )
    thr_log_stats: bool = field(default=True, metadata={"help": "Log THR statistics and keep the last batch's THR."})
    thr_top_k: int = field(default=5, metadata={"help": "Number of top-|THR| tokens averaged in thr/top_abs_mean."})

    def __post_init__(self):
        # the THR fields are validated first, so a bad value is reported before any device/precision check
        check_choice("thr_mode", self.thr_mode, THR_MODES)
        # p > 0: exploitation (Pass@1), p < 0: exploration (Pass@K)
        self.thr_p = check_float("thr_p", self.thr_p, minimum=-1.0, maximum=1.0, strict_minimum=True, strict_maximum=True)
        self.thr_tau_beta = check_float("thr_tau_beta", self.thr_tau_beta, minimum=0.0)
        check_choice("thr_normalization", self.thr_normalization, THR_NORMALIZATIONS)
        check_choice("thr_vocab_subset", self.thr_vocab_subset, ("group", "full"))
        check_choice("thr_hidden_states", self.thr_hidden_states, ("generation", "forward"))
        check_choice("thr_exchange", self.thr_exchange, THR_EXCHANGES)
        check_mode_normalization(self.thr_mode, self.thr_normalization)
        self.thr_top_k = check_int("thr_top_k", self.thr_top_k, minimum=1)
        super().__post_init__()

    def thr_kwargs(self) -> dict:
        """The `thr_*` fields as a JSON-serialisable dict (saved as ``thr_config.json`` next to checkpoints)."""
        return {
            "thr_mode": self.thr_mode,
            "thr_p": self.thr_p,
            "thr_tau_beta": self.thr_tau_beta,
            "thr_tau": self.thr_tau,
            "thr_normalization": self.thr_normalization,
            "thr_include_self": self.thr_include_self,
            "thr_vocab_subset": self.thr_vocab_subset,
            "thr_hidden_states": self.thr_hidden_states,
            "thr_exchange": self.thr_exchange,
            "thr_log_stats": self.thr_log_stats,
            "thr_top_k": self.thr_top_k,
        }


__all__ = ["THRGRPOConfig"]
