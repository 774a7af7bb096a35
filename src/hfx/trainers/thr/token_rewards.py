"""Token Hidden Reward (THR): the pure per-token math, no trainer and no TRL import.

THR (Deng et al., "Token Hidden Reward: Steering Exploration-Exploitation in Group Relative Deep Reinforcement
Learning", arXiv 2510.03669, https://huggingface.co/papers/2510.03669) scores how much each generated token's GRPO
update changes the likelihood of the group's *correct* responses. The scoring machinery is NTHR's (Deng et al.,
arXiv 2505.18830, Sec. 4): with final-layer hidden states ``h`` and prediction errors ``g = e_y - pi_old`` of every
completion token, one gradient step changes ``ln pi(y_i+)`` by ``sum_k sum_(j,k') A_j <g_ik, g_jk'> <h_ik, h_jk'>``,
and the influence of token ``t = (j, k')`` on the correct set ``P`` is computed in the efficient form

    s_t = g_t^T M+ h_t,    M+ = G+^T H+ = sum_{i in P} sum_k g_ik h_ik^T      (|V*| x d, fp32 or better)

where ``V*`` is the set of token ids that appear in the group's completions (probabilities are sliced, not
renormalised). Then ``THR_t = A_j * s_t``.

Reconstructed choices (the THR paper's exact form is not public; each is a switch, see ``THRGRPOConfig``):

* ``normalization`` -- ``"none"`` (default), ``"positive_length"`` (divide by ``sum_{i in P} |y_i|``) or
  ``"response_length"`` (divide by ``|y_j|``).
* ``include_self`` -- whether the terms of response ``j`` itself (``i = j``, possible only when ``j`` is correct)
  enter ``s``; default ``True`` (the plain efficient form).
* the positive set ``P`` -- responses with advantage ``> 0`` (equals "reward 1" for binary rewards) that keep at
  least one unmasked token: a correct response whose mask is all zero (``mask_truncated_completions=True`` keeps its
  positive advantage but zeroes its mask) carries no token to score and would drag the anchor ``tau`` to 0.
* the threshold -- ``tau = tau_beta * min_{i in P} mean_k |THR_ik|`` (NTHR's anchor heuristic, ``beta = 1``, applied
  to ``|THR|``), or a fixed ``tau`` when given.
* the rules -- THR-only ``A'_jk = A_j 1[|THR_jk| > tau]``; reweighting
  ``A'_jk = A_j (1 + p_w sign(THR_jk))`` on dominant tokens, ``A_j`` elsewhere.

Shapes: ``G`` responses per group, ``T`` completion length, ``d`` hidden size, ``V`` vocabulary, ``V*`` the group's
vocabulary subset. Every function here runs under ``torch.no_grad`` and returns tensors with ``requires_grad=False``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from hfx.utils.validation import check_choice, check_float


THR_MODES = ("off", "reweight", "thr_only", "nthr")
THR_NORMALIZATIONS = ("none", "positive_length", "response_length")


@torch.no_grad()
def grpo_group_advantages(
    rewards: torch.Tensor, num_generations: int, unbiased: bool = False, eps: float = 0.0
) -> torch.Tensor:
    """GRPO group-normalised advantages ``A_i = (r_i - mean) / (std + eps)`` (NTHR arXiv 2505.18830, Sec. 3).

    For binary rewards with group accuracy ``p`` and the population std this is ``+sqrt((1-p)/p)`` for correct and
    ``-sqrt(p/(1-p))`` for incorrect responses. TRL uses the unbiased std (``unbiased=True``), which scales every
    advantage by ``sqrt((G-1)/G)``: magnitudes change, signs do not. A group with zero std gets all zeros.

    Args:
        rewards (`torch.Tensor` of shape `(B,)`): one scalar reward per response, groups of ``num_generations``
            consecutive rows.
        num_generations (`int`): the group size ``G``; ``B`` must be a multiple of it.
        unbiased (`bool`, *optional*, defaults to `False`): Bessel-corrected std (TRL's choice) instead of population.
        eps (`float`, *optional*, defaults to `0.0`): added to the std.

    Returns:
        `torch.Tensor` of shape `(B,)` (dtype of ``rewards``, promoted to float).

    Raises:
        ValueError: if ``rewards`` is not 1-D or ``B`` is not a multiple of ``num_generations``.
    """
    if rewards.dim() != 1 or rewards.numel() % num_generations != 0:
        raise ValueError(
            f"`rewards` must be 1-D with a length that is a multiple of `num_generations`={num_generations}, "
            f"but has shape {tuple(rewards.shape)}"
        )
    grouped = (rewards if rewards.is_floating_point() else rewards.float()).view(-1, num_generations)
    mean = grouped.mean(dim=1, keepdim=True)
    std = grouped.std(dim=1, keepdim=True, unbiased=unbiased) if num_generations > 1 else torch.zeros_like(mean)
    centred = grouped - mean
    safe = std + eps
    adv = torch.where(
        safe > 0, centred / torch.where(safe > 0, safe, torch.ones_like(safe)), torch.zeros_like(centred)
    )
    return adv.reshape(-1)


def nthr_eta(group_accuracy: float | torch.Tensor):
    """NTHR's shrink factor ``eta = 2 |0.5 - p|`` for flagged negative tokens (arXiv 2505.18830, Sec. 4.2).

    ``p = 0.5`` gives ``0`` (flagged tokens lose their advantage), ``p = 0.25`` or ``0.75`` gives ``0.5``.
    """
    return 2 * abs(0.5 - group_accuracy) if not torch.is_tensor(group_accuracy) else 2 * (0.5 - group_accuracy).abs()


@torch.no_grad()
def group_vocab_subset(completion_ids: torch.Tensor, completion_mask: torch.Tensor) -> torch.Tensor:
    """``V*``: the sorted unique token ids at valid completion positions of one group.

    Args:
        completion_ids (`torch.LongTensor` of shape `(G, T)`).
        completion_mask (`torch.Tensor` of shape `(G, T)`): 1 for generated tokens, 0 for padding.

    Returns:
        `torch.LongTensor` of shape `(|V*|,)`.
    """
    return torch.unique(completion_ids[completion_mask.bool()])


@torch.no_grad()
def sliced_token_probs(
    hidden_states: torch.Tensor,
    lm_head: torch.Tensor | Callable[[torch.Tensor], torch.Tensor],
    vocab_subset: torch.Tensor | None,
    lm_head_bias: torch.Tensor | None = None,
    temperature: float = 1.0,
    logit_scale: float = 1.0,
    final_logit_softcapping: float | None = None,
    chunk_size: int = 1024,
) -> torch.Tensor:
    """``pi_old(v | x, y_<k)`` for ``v`` in ``V*``, softmax over the FULL vocabulary, then sliced (not renormalised).

    ``lm_head`` is either the model's own output head as a callable ``h -> logits`` (what
    [`THRGRPOTrainer`] passes: :func:`hfx.trainers.thr.policy.output_logits`, i.e. the model's ``forward`` from the
    backbone output on, with every rescaling the architecture applies), or an LM-head weight ``(V, d)``, for which the
    logits are ``logit_scale * (h W^T + b)`` followed by optional softcapping (a plain linear head). Either way the
    logits are divided by ``temperature`` and normalised in fp32 (fp64 for fp64 inputs), ``chunk_size`` positions at
    a time, so the ``(G, T, V)`` logits are never materialised.

    Args:
        hidden_states (`torch.Tensor` of shape `(..., d)`): final-layer hidden states (the backbone's output).
        lm_head (`torch.Tensor` of shape `(V, d)`, or a callable mapping `(1, n, d)` hidden states to `(1, n, V)`
            logits).
        vocab_subset (`torch.LongTensor` of shape `(|V*|,)`, *optional*): ``None`` keeps the full vocabulary.
        lm_head_bias (`torch.Tensor` of shape `(V,)`, *optional*): only with a weight.
        temperature (`float`, *optional*, defaults to `1.0`): the sampling temperature (GRPOConfig.temperature).
        logit_scale (`float`, *optional*, defaults to `1.0`): only with a weight.
        final_logit_softcapping (`float`, *optional*): only with a weight.
        chunk_size (`int`, *optional*, defaults to `1024`): positions per chunk.

    Returns:
        `torch.Tensor` of shape `(..., |V*|)` (or `(..., V)`), float32 unless ``hidden_states`` is float64.

    Raises:
        ValueError: if ``lm_head`` is a callable and ``lm_head_bias``, ``logit_scale`` or ``final_logit_softcapping``
            is given too (the callable already forms the final logits), or ``temperature <= 0``.
    """
    temperature = check_float("temperature", temperature, minimum=0.0, strict_minimum=True)
    dtype = torch.float64 if hidden_states.dtype == torch.float64 else torch.float32
    lead = hidden_states.shape[:-1]
    if callable(lm_head) and not torch.is_tensor(lm_head):
        if lm_head_bias is not None or logit_scale != 1.0 or final_logit_softcapping is not None:
            raise ValueError(
                "`lm_head` is a callable returning the model's final logits: `lm_head_bias`, `logit_scale` and "
                "`final_logit_softcapping` must be left at their defaults."
            )
        flat = hidden_states.reshape(-1, hidden_states.size(-1))

        def logits_of(rows: torch.Tensor) -> torch.Tensor:
            return lm_head(rows.unsqueeze(0)).squeeze(0).to(dtype)

    else:
        flat = hidden_states.reshape(-1, hidden_states.size(-1)).to(dtype)
        weight = lm_head.to(dtype)
        bias = lm_head_bias.to(dtype) if lm_head_bias is not None else None

        def logits_of(rows: torch.Tensor) -> torch.Tensor:
            logits = torch.nn.functional.linear(rows, weight, bias) * logit_scale
            if final_logit_softcapping is not None:
                logits = torch.tanh(logits / final_logit_softcapping) * final_logit_softcapping
            return logits

    out = None
    for start in range(0, flat.size(0), chunk_size):
        logits = logits_of(flat[start : start + chunk_size]) / temperature
        log_probs = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
        if vocab_subset is not None:
            log_probs = log_probs.index_select(-1, vocab_subset.to(log_probs.device))
        if out is None:
            out = log_probs.new_empty(flat.size(0), log_probs.size(-1))
        out[start : start + chunk_size] = log_probs.exp()
    if out is None:  # no position at all
        n_out = vocab_subset.numel() if vocab_subset is not None else (0 if callable(lm_head) else lm_head.size(0))
        out = torch.empty(0, n_out, dtype=dtype, device=hidden_states.device)
    return out.view(*lead, out.size(-1))


@torch.no_grad()
def prediction_errors(
    token_probs: torch.Tensor, completion_ids: torch.Tensor, vocab_subset: torch.Tensor | None = None
) -> torch.Tensor:
    """Prediction errors ``g = e_y - pi_old`` restricted to ``V*`` (NTHR arXiv 2505.18830, Eq. 4).

    Args:
        token_probs (`torch.Tensor` of shape `(G, T, |V*|)`): see :func:`sliced_token_probs`.
        completion_ids (`torch.LongTensor` of shape `(G, T)`): the sampled tokens ``y``.
        vocab_subset (`torch.LongTensor` of shape `(|V*|,)`, *optional*): the ids of the columns of ``token_probs``;
            ``None`` means the full vocabulary (column ``v`` is token ``v``).

    Returns:
        `torch.Tensor` of shape `(G, T, |V*|)`. Tokens absent from ``V*`` (only possible at padding positions) get no
        one-hot entry.
    """
    if vocab_subset is None:
        columns = completion_ids
        present = torch.ones_like(completion_ids, dtype=torch.bool)
    else:
        columns = torch.searchsorted(vocab_subset, completion_ids.contiguous()).clamp(max=vocab_subset.numel() - 1)
        present = vocab_subset[columns] == completion_ids
    one_hot = torch.zeros_like(token_probs)
    one_hot.scatter_(-1, columns.unsqueeze(-1), present.unsqueeze(-1).to(token_probs.dtype))
    return one_hot - token_probs


def _float_dtype(t: torch.Tensor) -> torch.dtype:
    return torch.float64 if t.dtype == torch.float64 else torch.float32


@torch.no_grad()
def valid_positive(advantages: torch.Tensor, completion_mask: torch.Tensor) -> torch.Tensor:
    """The correct set ``P``: responses with ``A > 0`` that keep at least one unmasked token.

    A correct response whose mask is all zero (e.g. truncated under ``mask_truncated_completions=True``, which keeps
    its positive advantage) contributes nothing to ``M+`` and has no token mean: counting it in ``P`` would put a
    ``0`` into the anchor ``tau = beta * min_{i in P} mean_k |THR_ik|`` and make every token dominant.

    Args:
        advantages (`torch.Tensor` of shape `(G,)`), completion_mask (`torch.Tensor` of shape `(G, T)`).

    Returns:
        `torch.BoolTensor` of shape `(G,)`.
    """
    return (advantages > 0) & (completion_mask.sum(-1) > 0)


@torch.no_grad()
def positive_gram(
    hidden_states: torch.Tensor, prediction_errors: torch.Tensor, completion_mask: torch.Tensor, positive: torch.Tensor
) -> torch.Tensor:
    """The Gram factor ``M+ = G+^T H+ = sum_{i in P} sum_k g_ik h_ik^T`` of the correct responses (NTHR Sec. 4).

    ``M+`` is additive over responses, so on several processes each one computes the partial sum of its own correct
    responses and the partials are summed (see :mod:`hfx.trainers.thr.distributed`).

    Args:
        hidden_states (`torch.Tensor` of shape `(G, T, d)`), prediction_errors (`(G, T, |V*|)`),
        completion_mask (`(G, T)`), positive (`torch.BoolTensor` of shape `(G,)`).

    Returns:
        `torch.Tensor` of shape `(|V*|, d)`, fp32 (fp64 for fp64 inputs).
    """
    dtype = _float_dtype(hidden_states)
    weight = completion_mask.to(dtype) * positive.to(dtype).view(-1, 1)
    h = hidden_states.to(dtype)
    g = prediction_errors.to(dtype) * weight.unsqueeze(-1)
    return torch.einsum("gtv,gtd->vd", g, h)


@torch.no_grad()
def hidden_reward_scores(
    hidden_states: torch.Tensor,
    prediction_errors: torch.Tensor,
    completion_mask: torch.Tensor,
    positive: torch.Tensor,
    include_self: bool = True,
    m_plus: torch.Tensor | None = None,
) -> torch.Tensor:
    """Influence score ``s_t = g_t^T (G+^T H+) h_t`` of every token on the correct responses (efficient form).

    Equals the explicit double sum ``s_t = sum_{i in P} sum_k <g_ik, g_t> <h_ik, h_t>`` (see
    :func:`hidden_reward_scores_explicit`) at ``O(|P| T |V*| d)`` instead of ``O(G T^2 |P| (|V*| + d))``.

    Args:
        hidden_states (`torch.Tensor` of shape `(G, T, d)`): ``h`` at the positions predicting each completion token.
        prediction_errors (`torch.Tensor` of shape `(G, T, |V*|)`): ``g``, see :func:`prediction_errors`.
        completion_mask (`torch.Tensor` of shape `(G, T)`): 0 at padding (and prompt) positions: they never enter
            ``M+`` and get ``s = 0``.
        positive (`torch.BoolTensor` of shape `(G,)`): membership of the correct set ``P`` (see
            :func:`valid_positive`).
        include_self (`bool`, *optional*, defaults to `True`): keep the ``i = j`` terms (a correct response's own
            tokens); ``False`` removes them [reconstruction: the paper's choice is unknown].
        m_plus (`torch.Tensor` of shape `(|V*|, d)`, *optional*): a precomputed ``M+`` (e.g. summed over processes);
            ``None`` computes it from these rows with :func:`positive_gram`.

    Returns:
        `torch.Tensor` of shape `(G, T)` in fp32 (fp64 if the inputs are fp64).
    """
    dtype = _float_dtype(hidden_states)
    mask = completion_mask.to(dtype)
    h = hidden_states.to(dtype) * mask.unsqueeze(-1)
    g = prediction_errors.to(dtype) * mask.unsqueeze(-1)
    if m_plus is None:
        m_plus = positive_gram(h, g, mask, positive)
    scores = torch.einsum("gtv,vd,gtd->gt", g, m_plus.to(dtype), h)
    if not include_self:
        # sum_k <g_jk, g_jt> <h_jk, h_jt> for correct j: the response's own terms
        own = (torch.einsum("gtv,gkv->gtk", g, g) * torch.einsum("gtd,gkd->gtk", h, h)).sum(-1)
        scores = scores - own * positive.to(dtype).view(-1, 1)
    return scores * mask


@torch.no_grad()
def hidden_reward_scores_explicit(
    hidden_states: torch.Tensor,
    prediction_errors: torch.Tensor,
    completion_mask: torch.Tensor,
    positive: torch.Tensor,
) -> torch.Tensor:
    """Reference double sum ``s_jt = sum_{i in P} sum_k <g_ik, g_jt> <h_ik, h_jt>`` (slow; for tests and docs)."""
    dtype = torch.float64 if hidden_states.dtype == torch.float64 else torch.float32
    mask = completion_mask.to(dtype)
    h = hidden_states.to(dtype) * mask.unsqueeze(-1)
    g = prediction_errors.to(dtype) * mask.unsqueeze(-1)
    gg = torch.einsum("itv,jsv->itjs", g, g)  # <g_it, g_js>
    hh = torch.einsum("itd,jsd->itjs", h, h)
    weights = positive.to(dtype).view(-1, 1, 1, 1)
    return (gg * hh * weights).sum(dim=(0, 1)) * mask


@torch.no_grad()
def token_hidden_reward(
    scores: torch.Tensor,
    advantages: torch.Tensor,
    completion_mask: torch.Tensor,
    positive: torch.Tensor,
    normalization: str = "none",
    positive_length: float | torch.Tensor | None = None,
) -> torch.Tensor:
    """``THR_jt = A_j * s_jt / Z`` with ``Z`` from ``normalization`` [reconstruction].

    Args:
        scores (`torch.Tensor` of shape `(G, T)`): see :func:`hidden_reward_scores`.
        advantages (`torch.Tensor` of shape `(G,)`): the response-level GRPO advantages ``A_j``.
        completion_mask (`torch.Tensor` of shape `(G, T)`).
        positive (`torch.BoolTensor` of shape `(G,)`).
        normalization (`str`, *optional*, defaults to `"none"`): ``"none"``, ``"positive_length"`` (``Z = sum_{i in
            P} |y_i|``) or ``"response_length"`` (``Z = |y_j|``).
        positive_length (`float`, *optional*): ``sum_{i in P} |y_i|`` when ``P`` is larger than these rows (responses
            of the group held by other processes); ``None`` sums over ``positive``.

    Returns:
        `torch.Tensor` of shape `(G, T)`, 0 at masked positions.

    Raises:
        ValueError: for an unknown ``normalization``.
    """
    check_choice("normalization", normalization, THR_NORMALIZATIONS)
    mask = completion_mask.to(scores.dtype)
    thr = advantages.to(scores.dtype).view(-1, 1) * scores * mask
    lengths = mask.sum(-1)
    if normalization == "positive_length":
        total = (
            lengths[positive].sum() if positive_length is None else torch.as_tensor(positive_length, dtype=thr.dtype)
        )
        thr = thr / total.clamp(min=1.0)
    elif normalization == "response_length":
        thr = thr / lengths.clamp(min=1.0).view(-1, 1)
    return thr


@torch.no_grad()
def row_means(values: torch.Tensor, completion_mask: torch.Tensor, absolute: bool = True) -> torch.Tensor:
    """``mean_k v_ik`` (of ``|v|`` when ``absolute``) over each row's unmasked tokens; rows without any give 0.

    Returns:
        `torch.Tensor` of shape `(G,)`.
    """
    mask = completion_mask.to(values.dtype)
    v = values.abs() if absolute else values
    return (v * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)


@torch.no_grad()
def anchor_threshold(
    values: torch.Tensor, completion_mask: torch.Tensor, positive: torch.Tensor, beta: float = 1.0, absolute=True
) -> torch.Tensor:
    """NTHR's anchor ``tau = beta * min_{i in P} mean_k v_ik`` (arXiv 2505.18830, Sec. 4.2).

    With ``absolute=True`` (THR) the mean is over ``|v|`` [reconstruction: "the NTHR anchor applied to |THR|"];
    with ``absolute=False`` (NTHR rule) over the signed scores ``s+``. Pass ``positive`` from
    :func:`valid_positive`: a fully masked row in ``P`` would contribute a mean of 0.

    Returns:
        0-dim `torch.Tensor`; ``+inf`` when ``P`` is empty (nothing is dominant).
    """
    if not bool(positive.any()):
        return values.new_tensor(math.inf)
    return beta * row_means(values, completion_mask, absolute)[positive].min()


@torch.no_grad()
def thr_token_advantages(
    advantages: torch.Tensor,
    thr: torch.Tensor,
    completion_mask: torch.Tensor,
    tau,
    mode: str = "reweight",
    p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token advantages from THR (the THR paper's two rules; the reweighting form is [reconstruction]).

    * ``"thr_only"``: ``A'_jt = A_j * 1[|THR_jt| > tau]`` (dominant-token training).
    * ``"reweight"``: ``A'_jt = A_j * (1 + p * sign(THR_jt))`` for dominant tokens, ``A_j`` elsewhere; ``p > 0``
      exploitation (amplifies positive THR), ``p < 0`` exploration.
    * ``"off"``: ``A'_jt = A_j``.

    Args:
        advantages (`torch.Tensor` of shape `(G,)` or `(B,)`).
        thr (`torch.Tensor` of shape `(G, T)`).
        completion_mask (`torch.Tensor` of shape `(G, T)`): masked positions are never dominant.
        tau (`float` or 0-dim / `(G,)` / `(G, 1)` `torch.Tensor`): the threshold on ``|THR|``.
        mode (`str`, *optional*, defaults to `"reweight"`).
        p (`float`, *optional*, defaults to `0.0`): the reweighting coefficient ``p_w``, ``|p| < 1``.

    Returns:
        `(token_advantages, dominant)`: `(G, T)` advantages (dtype of ``advantages``) and the `(G, T)` bool mask ``D``.

    Raises:
        ValueError: for an unknown ``mode`` or ``|p| >= 1``.
    """
    check_choice("mode", mode, ("off", "reweight", "thr_only"))
    p = check_float("p", p, minimum=-1.0, maximum=1.0, strict_minimum=True, strict_maximum=True)
    tau = torch.as_tensor(tau, dtype=thr.dtype, device=thr.device)
    if tau.dim() == 1:
        tau = tau.view(-1, 1)
    dominant = (thr.abs() > tau) & completion_mask.bool()
    base = advantages.view(-1, 1).expand_as(thr)
    if mode == "off":
        factor = torch.ones_like(thr)
    elif mode == "thr_only":
        factor = dominant.to(thr.dtype)
    else:
        factor = torch.where(dominant, 1.0 + p * torch.sign(thr), torch.ones_like(thr))
    return (base * factor.to(base.dtype)).contiguous(), dominant


@torch.no_grad()
def nthr_token_advantages(
    advantages: torch.Tensor,
    scores: torch.Tensor,
    completion_mask: torch.Tensor,
    positive: torch.Tensor,
    beta: float = 1.0,
    tau=None,
    group_accuracy: float | torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """NTHR's rule (arXiv 2505.18830, Sec. 4.2): ``A'_jt = eta * A_j`` for negative tokens with ``s_jt > tau``.

    ``tau = beta * min_{i in P} mean_k s+_ik`` (unless ``tau`` is given), ``eta = 2 |0.5 - p|`` with the group
    accuracy ``p`` (``group_accuracy``; default: the fraction of these rows with ``A > 0``, truncated ones included).

    Returns:
        `(token_advantages, flagged)` of shape `(G, T)`.
    """
    G = advantages.numel()
    if tau is None:
        tau = anchor_threshold(scores, completion_mask, positive, beta=beta, absolute=False)
    accuracy = (advantages > 0).float().sum() / G if group_accuracy is None else torch.as_tensor(group_accuracy)
    eta = nthr_eta(accuracy).to(advantages.dtype)
    negative = (advantages < 0).view(-1, 1)
    flagged = (scores > tau) & negative & completion_mask.bool()
    base = advantages.view(-1, 1).expand_as(scores).to(advantages.dtype)
    return torch.where(flagged, base * eta, base).contiguous(), flagged


@torch.no_grad()
def skipped_groups(
    advantages: torch.Tensor, num_generations: int, completion_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Groups THR skips: no response with ``A < 0``, or no correct response (see :func:`valid_positive`).

    That covers all-correct / all-wrong groups (every ``A = 0``) and groups whose only correct responses are fully
    masked (nothing to score them on).

    Args:
        advantages (`torch.Tensor` of shape `(B,)`), groups of ``num_generations`` consecutive rows.
        completion_mask (`torch.Tensor` of shape `(B, T)`, *optional*): ``None`` treats every response as unmasked.

    Returns:
        `torch.BoolTensor` of shape `(B // num_generations,)`.
    """
    grouped = advantages.view(-1, num_generations)
    positive = grouped > 0
    if completion_mask is not None:
        positive = positive & (completion_mask.sum(-1) > 0).view(-1, num_generations)
    return ~(positive.any(-1) & (grouped < 0).any(-1))


def check_mode_normalization(mode: str, normalization: str) -> None:
    """``normalization`` rescales THR; the NTHR rule thresholds the unnormalised scores ``s``, so only ``"none"`` is
    meaningful with ``mode="nthr"``.

    Raises:
        ValueError: for ``mode="nthr"`` with a ``normalization`` other than ``"none"``.
    """
    if mode == "nthr" and normalization != "none":
        raise ValueError(
            f"`thr_normalization`={normalization!r} has no effect with `thr_mode='nthr'` (the NTHR rule thresholds the "
            "unnormalised influence scores s); use `thr_normalization='none'` or another `thr_mode`."
        )


@dataclass
class GroupTHR:
    """THR of one group (all tensors have ``requires_grad=False``).

    Attributes:
        thr (`torch.Tensor` of shape `(G, T)`): token hidden rewards, 0 at masked positions.
        scores (`torch.Tensor` of shape `(G, T)`): influence scores ``s``.
        token_advantages (`torch.Tensor` of shape `(G, T)`): ``A'``.
        dominant (`torch.BoolTensor` of shape `(G, T)`): ``D`` (or NTHR's flagged tokens).
        tau (0-dim `torch.Tensor`): the threshold used.
    """

    thr: torch.Tensor
    scores: torch.Tensor
    token_advantages: torch.Tensor
    dominant: torch.Tensor
    tau: torch.Tensor


@torch.no_grad()
def group_prediction_errors(
    hidden_states: torch.Tensor,
    completion_ids: torch.Tensor,
    vocab_subset: torch.Tensor | None,
    lm_head: torch.Tensor | Callable[[torch.Tensor], torch.Tensor],
    lm_head_bias: torch.Tensor | None = None,
    temperature: float = 1.0,
    logit_scale: float = 1.0,
    final_logit_softcapping: float | None = None,
) -> torch.Tensor:
    """``g = e_y - pi_old`` over ``V*`` (``None``: the full vocabulary) from hidden states, shape `(G, T, |V*|)`."""
    probs = sliced_token_probs(
        hidden_states,
        lm_head,
        vocab_subset,
        lm_head_bias,
        temperature=temperature,
        logit_scale=logit_scale,
        final_logit_softcapping=final_logit_softcapping,
    )
    return prediction_errors(probs, completion_ids, vocab_subset)


@torch.no_grad()
def apply_threshold(
    mode: str,
    advantages: torch.Tensor,
    thr: torch.Tensor,
    scores: torch.Tensor,
    completion_mask: torch.Tensor,
    tau,
    p: float = 0.0,
    group_accuracy: float | torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token advantages and dominant / flagged mask for ``mode`` given the threshold ``tau`` (on ``|THR|``, or on
    ``s`` for ``"nthr"``); see :func:`thr_token_advantages` and :func:`nthr_token_advantages`."""
    if mode == "nthr":
        positive = advantages > 0
        return nthr_token_advantages(
            advantages, scores, completion_mask, positive, tau=tau, group_accuracy=group_accuracy
        )
    return thr_token_advantages(advantages, thr, completion_mask, tau, mode=mode, p=p)


@torch.no_grad()
def group_token_hidden_reward(
    hidden_states: torch.Tensor,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    advantages: torch.Tensor,
    lm_head: torch.Tensor | Callable[[torch.Tensor], torch.Tensor],
    lm_head_bias: torch.Tensor | None = None,
    *,
    mode: str = "reweight",
    p: float = 0.0,
    tau_beta: float = 1.0,
    tau: float | None = None,
    normalization: str = "none",
    include_self: bool = True,
    vocab_subset: str = "group",
    temperature: float = 1.0,
    logit_scale: float = 1.0,
    final_logit_softcapping: float | None = None,
) -> GroupTHR:
    """THR and per-token advantages for ONE non-degenerate group, from the old policy's hidden states.

    The correct set ``P`` is :func:`valid_positive` (``A > 0`` and at least one unmasked token).

    Args:
        hidden_states (`torch.Tensor` of shape `(G, T, d)`): final-layer hidden states predicting each completion
            token (position ``P - 1 + t`` of prompt + completion).
        completion_ids (`torch.LongTensor` of shape `(G, T)`).
        completion_mask (`torch.Tensor` of shape `(G, T)`).
        advantages (`torch.Tensor` of shape `(G,)`).
        lm_head (`torch.Tensor` of shape `(V, d)` or a callable ``h -> logits``): see :func:`sliced_token_probs`;
            lm_head_bias (`(V,)`, *optional*).
        mode (`str`): ``"reweight"``, ``"thr_only"``, ``"nthr"`` or ``"off"``.
        p (`float`): the reweighting coefficient ``p_w``.
        tau_beta (`float`): the anchor scale ``beta``; tau (`float`, *optional*): a fixed threshold instead.
        normalization (`str`), include_self (`bool`): see :func:`token_hidden_reward`, :func:`hidden_reward_scores`.
        vocab_subset (`str`, *optional*, defaults to `"group"`): ``"group"`` slices to ``V*`` (the paper's choice),
            ``"full"`` keeps all ``V`` columns (exact ``<g, g'>``, more memory).
        temperature, logit_scale, final_logit_softcapping: how logits are formed (see :func:`sliced_token_probs`).

    Returns:
        [`GroupTHR`].

    Raises:
        ValueError: for an unknown ``mode`` / ``vocab_subset`` / ``normalization``, or ``mode="nthr"`` with a
            ``normalization`` other than ``"none"``.
    """
    check_choice("mode", mode, THR_MODES)
    check_choice("vocab_subset", vocab_subset, ("group", "full"))
    check_choice("normalization", normalization, THR_NORMALIZATIONS)
    check_mode_normalization(mode, normalization)
    positive = valid_positive(advantages, completion_mask)
    subset = group_vocab_subset(completion_ids, completion_mask) if vocab_subset == "group" else None
    errors = group_prediction_errors(
        hidden_states, completion_ids, subset, lm_head, lm_head_bias, temperature, logit_scale, final_logit_softcapping
    )
    scores = hidden_reward_scores(hidden_states, errors, completion_mask, positive, include_self=include_self)
    thr = token_hidden_reward(scores, advantages, completion_mask, positive, normalization=normalization)
    values = scores if mode == "nthr" else thr
    if tau is not None:
        used_tau = torch.as_tensor(tau, dtype=values.dtype, device=values.device)
    else:
        used_tau = anchor_threshold(values, completion_mask, positive, tau_beta, absolute=mode != "nthr")
    token_adv, dominant = apply_threshold(mode, advantages, thr, scores, completion_mask, used_tau, p)
    return GroupTHR(thr=thr, scores=scores, token_advantages=token_adv, dominant=dominant, tau=used_tau)


@dataclass
class BatchTHR:
    """THR of a whole batch (see [`GroupTHR`]); skipped groups keep ``A'_jt = A_j`` and ``THR = 0``.

    Attributes:
        thr, scores, token_advantages (`torch.Tensor` of shape `(B, T)`), dominant (`torch.BoolTensor` `(B, T)`),
        skipped (`torch.BoolTensor` of shape `(B // G,)`), tau (`torch.Tensor` of shape `(B // G,)`, NaN if skipped).
    """

    thr: torch.Tensor
    scores: torch.Tensor
    token_advantages: torch.Tensor
    dominant: torch.Tensor
    skipped: torch.Tensor
    tau: torch.Tensor


@torch.no_grad()
def batch_token_hidden_reward(
    hidden_states: torch.Tensor,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    advantages: torch.Tensor,
    num_generations: int,
    lm_head: torch.Tensor | Callable[[torch.Tensor], torch.Tensor],
    lm_head_bias: torch.Tensor | None = None,
    **kwargs,
) -> BatchTHR:
    """:func:`group_token_hidden_reward` over consecutive groups of ``num_generations`` rows, skipping degenerate ones.

    Args:
        hidden_states (`torch.Tensor` of shape `(B, T, d)`, or a callable `rows: slice -> (G, T, d)` tensor): the
            final-layer hidden states; the rows of skipped groups are never read (a callable is never called for them).
        completion_ids, completion_mask (`(B, T)`), advantages (`(B,)`), num_generations (`int`).
        lm_head, lm_head_bias: see :func:`sliced_token_probs`.
        **kwargs: passed to :func:`group_token_hidden_reward`.

    Returns:
        [`BatchTHR`].
    """
    B, T = completion_ids.shape
    if B % num_generations != 0:
        raise ValueError(f"The batch size ({B}) must be a multiple of `num_generations`={num_generations}")
    check_mode_normalization(kwargs.get("mode", "reweight"), kwargs.get("normalization", "none"))
    get_hidden = hidden_states if callable(hidden_states) else (lambda rows: hidden_states[rows])
    is_f64 = torch.is_tensor(hidden_states) and hidden_states.dtype == torch.float64
    dtype = torch.float64 if is_f64 else torch.float32
    skipped = skipped_groups(advantages, num_generations, completion_mask)
    thr = torch.zeros(B, T, dtype=dtype, device=completion_ids.device)
    scores = torch.zeros_like(thr)
    token_adv = advantages.view(-1, 1).expand(B, T).clone()
    dominant = torch.zeros(B, T, dtype=torch.bool, device=completion_ids.device)
    taus = torch.full((B // num_generations,), float("nan"), dtype=dtype, device=completion_ids.device)
    for group in torch.nonzero(~skipped).flatten().tolist():
        rows = slice(group * num_generations, (group + 1) * num_generations)
        out = group_token_hidden_reward(
            get_hidden(rows),
            completion_ids[rows],
            completion_mask[rows],
            advantages[rows],
            lm_head,
            lm_head_bias,
            **kwargs,
        )
        thr[rows], scores[rows], token_adv[rows], dominant[rows] = (
            out.thr,
            out.scores,
            out.token_advantages,
            out.dominant,
        )
        taus[group] = out.tau.to(dtype)
    return BatchTHR(thr=thr, scores=scores, token_advantages=token_adv, dominant=dominant, skipped=skipped, tau=taus)


__all__ = [
    "THR_MODES",
    "THR_NORMALIZATIONS",
    "BatchTHR",
    "GroupTHR",
    "anchor_threshold",
    "apply_threshold",
    "batch_token_hidden_reward",
    "check_mode_normalization",
    "group_prediction_errors",
    "group_token_hidden_reward",
    "group_vocab_subset",
    "grpo_group_advantages",
    "hidden_reward_scores",
    "hidden_reward_scores_explicit",
    "nthr_eta",
    "nthr_token_advantages",
    "positive_gram",
    "prediction_errors",
    "row_means",
    "skipped_groups",
    "sliced_token_probs",
    "thr_token_advantages",
    "token_hidden_reward",
    "valid_positive",
]
