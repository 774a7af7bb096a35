r"""Concept-subset selection: Metropolis-Hastings with an LVLM-guided proposal, and the baselines.

The target is :math:`\pi(S) \propto \exp(\mathrm{score}(S))` over subsets :math:`S` of a matrix's proposed concepts,

.. math:: \mathrm{score}(S) = \sum_{c \in S} u_c + \log p(S),

with :math:`u_c` the concept's log Bayes factor (rule vs no rule) or its rule log evidence
(``CRDConfig.subset_score``) and a parsimony prior :math:`p(S)`. A step proposes :math:`S'` from :math:`q(S' \mid S)`
and accepts with

.. math:: \alpha = \min\Bigl(1, \exp(\mathrm{score}(S') - \mathrm{score}(S))\,
          \frac{q(S \mid S')}{q(S' \mid S)}\Bigr),

the exact Hastings ratio of the proposal used ([paper]: MH with an LVLM-guided proposal; the proposal is our
[reconstruction]):

* ``"guided"``: a move type -- add, remove, swap -- with probabilities ``move_probs`` renormalised over the moves
  possible in :math:`S` (add needs a concept outside, remove one inside, swap both); the concept to add is drawn
  outside :math:`S` with weight :math:`a_c = (\mathrm{conf}_c + 10^{-3})^\gamma`, the one to remove inside with
  :math:`r_c = (1 - \mathrm{conf}_c + 10^{-3})^\gamma`. The reverse of an add is a remove (and vice versa), of a swap
  a swap; the reverse move's probability is computed at :math:`S'` (its own renormalised move probabilities and
  weight sums), so the asymmetry is exact;
* ``"uniform"``: the same moves with :math:`\gamma = 0`;
* ``"toggle"``: flip one concept drawn uniformly: symmetric, :math:`q(S' \mid S) = q(S \mid S') = 1/n`.

All chains of all matrices run together as tensors (one ``torch.Generator``, seeded).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .config import CRDConfig


WEIGHT_FLOOR = 1e-3


def log_prior(sizes: torch.Tensor, num_valid: torch.Tensor, config: CRDConfig) -> torch.Tensor:
    """``log p(S)`` as a function of ``|S|`` and the number of concepts ``n`` (unnormalised for ``"geometric"``,
    which only shifts every subset of a matrix by the same constant).

    Args:
        sizes (`torch.Tensor` of shape `(M,)`): ``|S|``.
        num_valid (`torch.Tensor` of shape `(M,)`): ``n``.
        config (:class:`~hfx.vision.crd.CRDConfig`): ``prior`` and ``parsimony``.

    Returns:
        `torch.Tensor` of shape `(M,)` (float64).
    """
    sizes = sizes.to(torch.float64)
    n = num_valid.to(torch.float64)
    if config.prior == "geometric":
        return -config.parsimony * sizes
    if config.prior == "uniform":
        return torch.zeros_like(sizes)
    # size_uniform: p(|S| = k) = 1 / (n + 1), then uniform over the C(n, k) subsets of that size
    log_comb = torch.lgamma(n + 1) - torch.lgamma(sizes + 1) - torch.lgamma(n - sizes + 1)
    return -torch.log(n + 1) - log_comb


def subset_score(states: torch.Tensor, utilities: torch.Tensor, valid: torch.Tensor, config: CRDConfig) -> torch.Tensor:
    """``score(S) = sum_{c in S} u_c + log p(S)``.

    Args:
        states (`torch.Tensor` of shape `(M, n)`, bool): subsets.
        utilities (`torch.Tensor` of shape `(M, n)`): :math:`u_c` (anything at invalid positions).
        valid (`torch.Tensor` of shape `(M, n)`, bool): which positions are real concepts.

    Returns:
        `torch.Tensor` of shape `(M,)`.
    """
    x = states & valid
    u = torch.where(valid, utilities.to(torch.float64), torch.zeros((), dtype=torch.float64))
    return (x.to(torch.float64) * u).sum(-1) + log_prior(x.sum(-1), valid.sum(-1), config)


@dataclass
class MHResult:
    """A Metropolis-Hastings run over ``B`` matrices.

    Attributes:
        states (`torch.Tensor` of shape `(B, chains, steps, n)`, bool): the chain after each step.
        scores (`torch.Tensor` of shape `(B, chains, steps)`): ``score`` of those states.
        accepted (`torch.Tensor` of shape `(B, chains, steps)`, bool): whether each step's proposal was accepted.
        log_alpha (`torch.Tensor` of shape `(B, chains, steps)`): the log acceptance ratio of each proposal.
        acceptance_rate (`torch.Tensor` of shape `(B, chains)`): share of accepted proposals after burn-in.
        inclusion (`torch.Tensor` of shape `(B, n)`): ``p(c in S)`` estimated after burn-in, all chains pooled.
        subset (`torch.Tensor` of shape `(B, n)`, bool): the reported subset (``config.subset_estimate``).
        burn_in (`int`).
    """

    states: torch.Tensor
    scores: torch.Tensor
    accepted: torch.Tensor
    log_alpha: torch.Tensor
    acceptance_rate: torch.Tensor
    inclusion: torch.Tensor
    subset: torch.Tensor
    burn_in: int


def proposal_weights(confidences: torch.Tensor, valid: torch.Tensor, config: CRDConfig):
    """The add / remove weights of the proposal (zero at invalid positions).

    Returns:
        `(add_weights, remove_weights)`, two `(M, n)` float64 tensors.
    """
    conf = confidences.to(torch.float64).clamp(0.0, 1.0)
    gamma = config.guidance if config.proposal == "guided" else 0.0
    add = (conf + WEIGHT_FLOOR) ** gamma
    remove = (1.0 - conf + WEIGHT_FLOOR) ** gamma
    zero = torch.zeros((), dtype=torch.float64)
    return torch.where(valid, add, zero), torch.where(valid, remove, zero)


def _draw(weights: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One index per row with probability proportional to ``weights`` (inverse CDF; rows without weight get an
    arbitrary index, which the caller ignores). Zero-weight positions are never drawn."""
    cdf = torch.cumsum(weights, -1)
    total = cdf[:, -1:]
    u = torch.rand(weights.shape[0], 1, generator=generator, dtype=cdf.dtype) * total
    idx = (cdf <= u).sum(-1)  # first position whose cdf exceeds u
    return idx.clamp(max=weights.shape[-1] - 1)


def _move_probs(size: torch.Tensor, num_valid: torch.Tensor, config: CRDConfig) -> torch.Tensor:
    base = torch.tensor(config.move_probs, dtype=torch.float64)
    possible = torch.stack([size < num_valid, size > 0, (size > 0) & (size < num_valid)], dim=-1).to(torch.float64)
    probs = possible * base
    total = probs.sum(-1, keepdim=True)
    return torch.where(total > 0, probs / total.clamp_min(1e-300), torch.zeros_like(probs))


def mh_step(state, score, utilities, valid, add_w, rem_w, config, generator):
    """One MH step for every chain.

    Returns:
        `(new_state, new_score, accepted, log_alpha)`.
    """
    m = state.shape[0]
    rows = torch.arange(m)
    size = state.sum(-1)
    num_valid = valid.sum(-1)
    if config.proposal == "toggle":
        pick = _draw(valid.to(torch.float64), generator)
        proposal = state.clone()
        proposal[rows, pick] = ~proposal[rows, pick]
        log_q_ratio = torch.zeros(m, dtype=torch.float64)
    else:
        probs = _move_probs(size, num_valid, config)
        move = _draw(probs, generator)
        out_w = torch.where(state, torch.zeros((), dtype=torch.float64), add_w)
        in_w = torch.where(state, rem_w, torch.zeros((), dtype=torch.float64))
        out_sum, in_sum = out_w.sum(-1), in_w.sum(-1)
        c_add, c_rem = _draw(out_w, generator), _draw(in_w, generator)
        a_add, a_rem = add_w[rows, c_add], add_w[rows, c_rem]
        r_add, r_rem = rem_w[rows, c_add], rem_w[rows, c_rem]
        is_add, is_rem, is_swap = move == 0, move == 1, move == 2
        proposal = state.clone()
        proposal[rows[is_add | is_swap], c_add[is_add | is_swap]] = True
        proposal[rows[is_rem | is_swap], c_rem[is_rem | is_swap]] = False
        new_size = proposal.sum(-1)
        back = _move_probs(new_size, num_valid, config)
        log = lambda t: torch.log(t.clamp_min(1e-300))  # noqa: E731
        fwd = torch.where(
            is_add, log(probs[:, 0]) + log(a_add) - log(out_sum),
            torch.where(is_rem, log(probs[:, 1]) + log(r_rem) - log(in_sum),
                        log(probs[:, 2]) + log(r_rem) - log(in_sum) + log(a_add) - log(out_sum)))
        rev = torch.where(
            is_add, log(back[:, 1]) + log(r_add) - log(in_sum + r_add),
            torch.where(is_rem, log(back[:, 0]) + log(a_rem) - log(out_sum + a_rem),
                        log(back[:, 2]) + log(r_add) - log(in_sum - r_rem + r_add)
                        + log(a_rem) - log(out_sum - a_add + a_rem)))
        log_q_ratio = rev - fwd
    new_score = subset_score(proposal, utilities, valid, config)
    log_alpha = (new_score - score + log_q_ratio).clamp(max=0.0)
    u = torch.rand(m, generator=generator, dtype=torch.float64)
    accept = torch.log(u) < log_alpha
    state = torch.where(accept[:, None], proposal, state)
    score = torch.where(accept, new_score, score)
    return state, score, accept, log_alpha


def initial_states(valid: torch.Tensor, confidences: torch.Tensor, config: CRDConfig,
                   generator: torch.Generator) -> torch.Tensor:
    """The chains' starting subsets (``config.init``).

    Returns:
        `torch.Tensor` of shape `(M, n)`, bool.
    """
    if config.init == "empty":
        return torch.zeros_like(valid)
    if config.init == "full":
        return valid.clone()
    if config.init == "confident":
        return valid & (confidences >= 0.5)
    return valid & (torch.rand(valid.shape, generator=generator) < 0.5)


def metropolis_hastings(utilities: torch.Tensor, confidences: torch.Tensor, valid: torch.Tensor, config: CRDConfig,
                        generator: torch.Generator | None = None) -> MHResult:
    """Run ``config.num_chains`` chains of ``config.num_steps`` MH steps per matrix.

    Args:
        utilities (`torch.Tensor` of shape `(B, n)`): :math:`u_c` per matrix and concept.
        confidences (`torch.Tensor` of shape `(B, n)`): the proposer's confidences.
        valid (`torch.Tensor` of shape `(B, n)`, bool): real concepts (matrices with fewer are padded).
        config (:class:`~hfx.vision.crd.CRDConfig`).
        generator (`torch.Generator`, *optional*): defaults to one seeded with ``config.seed``.

    Returns:
        :class:`MHResult`.

    Raises:
        ValueError: if a matrix has no valid concept or the shapes differ.
    """
    if utilities.shape != valid.shape or confidences.shape != valid.shape or utilities.dim() != 2:
        raise ValueError(f"`utilities`, `confidences`, `valid` have to be (B, n) of one shape, but are "
                         f"{tuple(utilities.shape)}, {tuple(confidences.shape)}, {tuple(valid.shape)}")
    if not bool(valid.any(-1).all()):
        raise ValueError("every matrix needs at least one concept")
    if generator is None:
        generator = torch.Generator().manual_seed(config.seed)
    b, n = valid.shape
    k = config.num_chains
    rep = lambda t: t.repeat_interleave(k, dim=0)  # noqa: E731
    u, conf, val = rep(utilities.to(torch.float64)), rep(confidences.to(torch.float64)), rep(valid.bool())
    add_w, rem_w = proposal_weights(conf, val, config)
    state = initial_states(val, conf, config, generator)
    score = subset_score(state, u, val, config)
    steps = config.num_steps
    states = torch.empty(b * k, steps, n, dtype=torch.bool)
    scores = torch.empty(b * k, steps, dtype=torch.float64)
    accepted = torch.empty(b * k, steps, dtype=torch.bool)
    log_alpha = torch.empty(b * k, steps, dtype=torch.float64)
    for t in range(steps):
        state, score, acc, la = mh_step(state, score, u, val, add_w, rem_w, config, generator)
        states[:, t], scores[:, t], accepted[:, t], log_alpha[:, t] = state, score, acc, la
    states = states.reshape(b, k, steps, n)
    scores = scores.reshape(b, k, steps)
    accepted = accepted.reshape(b, k, steps)
    log_alpha = log_alpha.reshape(b, k, steps)
    kept = states[:, :, config.burn_in :]
    inclusion = kept.to(torch.float64).mean((1, 2))
    subset = _estimate(kept, scores[:, :, config.burn_in :], config)
    rate = accepted[:, :, config.burn_in :].to(torch.float64).mean(-1)
    return MHResult(states, scores, accepted, log_alpha, rate, inclusion, subset, config.burn_in)


def _estimate(kept: torch.Tensor, kept_scores: torch.Tensor, config: CRDConfig) -> torch.Tensor:
    b, _, _, n = kept.shape
    flat = kept.reshape(b, -1, n)
    flat_scores = kept_scores.reshape(b, -1)
    if config.subset_estimate == "best_visited":
        best = flat_scores.argmax(-1)
        return flat[torch.arange(b), best]
    codes = (flat.long() * (2 ** torch.arange(n))).sum(-1)  # (B, L)
    out = torch.zeros(b, n, dtype=torch.bool)
    for i in range(b):
        values, counts = torch.unique(codes[i], return_counts=True)
        top = counts.max()
        tied = values[counts == top]
        if tied.numel() > 1:  # ties: the best-scoring of the most visited subsets
            first = {int(c): float(s) for c, s in zip(codes[i].tolist(), flat_scores[i].tolist())}
            code = max(tied.tolist(), key=lambda c: first[int(c)])
        else:
            code = int(tied[0])
        out[i] = torch.tensor([bool(code >> j & 1) for j in range(n)])
    return out


def exhaustive_best(utilities: torch.Tensor, valid: torch.Tensor, config: CRDConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact best subset of each matrix, over all ``2^n`` subsets of its concepts.

    Returns:
        `(subset, score)`: `(B, n)` bool and `(B,)`.

    Raises:
        ValueError: if ``n > config.max_concepts``.
    """
    b, n = valid.shape
    if n > config.max_concepts:
        raise ValueError(f"exhaustive search over {n} concepts (2^{n} subsets) exceeds `max_concepts` = "
                         f"{config.max_concepts}")
    codes = torch.arange(2**n)
    bits = (codes[:, None] >> torch.arange(n)) & 1  # (2^n, n)
    bits = bits.bool()
    out = torch.zeros(b, n, dtype=torch.bool)
    best_scores = torch.empty(b, dtype=torch.float64)
    chunk = max(1, 2**20 // 2**n)
    for start in range(0, b, chunk):
        u, val = utilities[start : start + chunk].to(torch.float64), valid[start : start + chunk]
        m = u.shape[0]
        states = bits[None].expand(m, -1, -1)  # (m, 2^n, n)
        allowed = ~(states & ~val[:, None, :]).any(-1)  # subsets of the valid concepts only
        sc = subset_score(states.reshape(-1, n), u.repeat_interleave(2**n, 0), val.repeat_interleave(2**n, 0),
                          config).reshape(m, -1)
        sc = torch.where(allowed, sc, torch.full_like(sc, -math.inf))
        idx = sc.argmax(-1)
        out[start : start + m] = bits[idx]
        best_scores[start : start + m] = sc[torch.arange(m), idx]
    return out, best_scores


def random_subsets(valid: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Each valid concept independently with probability 1/2 (the random-subset baseline).

    Returns:
        `torch.Tensor` of shape `(B, n)`, bool.
    """
    return valid & (torch.rand(valid.shape, generator=generator) < 0.5)


__all__ = [
    "MHResult",
    "exhaustive_best",
    "initial_states",
    "log_prior",
    "metropolis_hastings",
    "mh_step",
    "proposal_weights",
    "random_subsets",
    "subset_score",
]
