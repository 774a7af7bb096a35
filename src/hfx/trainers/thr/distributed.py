"""THR on several processes: GRPO groups whole on a process, or split across processes.

TRL gives process ``r`` the rows ``[r B, (r + 1) B)`` of the global generation batch (``B`` rows per process; the
groups of ``G = num_generations`` consecutive rows are numbered globally), so the layout is known on every process
without communication: a group is *split* when its first and last rows live on different processes (``B`` not a
multiple of ``G``, or ``G > B``). Whole groups are computed locally, exactly as on one process. For split groups THR
needs, from the other processes, what enters the group's shared quantities:

* ``V*`` (the group's token ids), the correct set ``P`` (advantages and masks), ``sum_{i in P} |y_i|`` and the group
  accuracy -- small: one all-gather of the boundary rows' ids, masks and advantages (``metadata``);
* ``M+ = sum_{i in P} sum_k g_ik h_ik^T`` over ``V*`` -- large. Two ways to assemble it:

  - ``"hidden_states"``: all-gather the final hidden states ``h`` of the boundary rows in ``P`` (``n_P x T x d``
    values per process, in the model's dtype); every process holding part of the group rebuilds the group (other
    processes' incorrect rows are not needed: they only enter through ``V*`` and the advantages) and runs the
    single-process computation on it, keeping its own rows. ``pi_old`` of the received rows is recomputed locally from
    ``h`` with the model's own head.
  - ``"gram"``: each process computes its partial ``M+`` from its own correct rows over the group's ``V*`` (fp32,
    ``|V*| x d`` per split group), all-gathers the partials and sums them; then the anchor ``tau`` (a min over ``P`` of
    per-row means, which needs ``M+``) takes a second, tiny all-gather of per-row means.

  Bytes received per process and step: ``(W - 1) * n_P,max * T * d * itemsize`` (hidden states) vs
  ``(W - 1) * m * |V*|_max * d * 4`` (Gram factors; ``m`` split groups with correct rows per process, at most 2
  when ``G <= B``). Neither dominates: ``|V*|`` (distinct ids in the group) grows sub-linearly with the group's
  token count and is bounded by the vocabulary, while ``n_P T`` grows linearly with response length and with the
  number of correct responses on the other process; short responses favour hidden states, long reasoning traces
  favour Gram factors. ``exchange="auto"`` (the default) computes both sizes from the metadata (identical on every
  process, so every process makes the same choice) and takes the smaller.

No scatter is needed: after the exchange every process computes the scores, THR, threshold and token advantages of
its own rows itself. Every collective is an accelerate ``gather`` (all-gather) after ``pad_across_processes``, and
every process issues the same collectives in the same order (their shapes follow from the metadata).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from hfx.utils.validation import check_choice

from .token_rewards import (
    BatchTHR,
    apply_threshold,
    check_mode_normalization,
    group_prediction_errors,
    group_token_hidden_reward,
    group_vocab_subset,
    hidden_reward_scores,
    positive_gram,
    row_means,
    skipped_groups,
    token_hidden_reward,
    valid_positive,
)


THR_EXCHANGES = ("auto", "hidden_states", "gram")


@dataclass
class Collectives:
    """The collectives THR uses: an all-gather (concatenating along dim 0) and a pad-to-the-largest along a dim.

    Attributes:
        process_index (`int`), num_processes (`int`).
        gather (`Callable[[torch.Tensor], torch.Tensor]`): every process passes a tensor of the same shape ``(n,
            ...)`` and receives ``(num_processes * n, ...)`` in process order (``accelerate.utils.gather``).
        pad (`Callable[[torch.Tensor, int], torch.Tensor]`): pads with zeros along ``dim`` to the largest size over
            processes (``accelerate.utils.pad_across_processes``).
    """

    process_index: int
    num_processes: int
    gather: Callable[[torch.Tensor], torch.Tensor]
    pad: Callable[[torch.Tensor, int], torch.Tensor]

    @classmethod
    def from_accelerator(cls, accelerator) -> Collectives:
        from accelerate.utils import gather, pad_across_processes

        return cls(
            process_index=accelerator.process_index,
            num_processes=accelerator.num_processes,
            gather=gather,
            pad=lambda tensor, dim: pad_across_processes(tensor, dim=dim, pad_index=0),
        )


@dataclass
class ExchangeStats:
    """What one call moved: ``kind`` (``"none"``, ``"hidden_states"`` or ``"gram"``), ``bytes_received`` (payload
    bytes this process received from the others, all collectives), ``split_groups`` (global count) and
    ``bytes_by_kind`` (the heavy payload each kind would have received; ``{}`` without split groups)."""

    kind: str = "none"
    bytes_received: int = 0
    split_groups: int = 0
    bytes_by_kind: dict = field(default_factory=dict)


def split_group_ids(num_processes: int, local_batch: int, num_generations: int) -> list[int]:
    """Global ids of the groups whose rows live on more than one process (rows ``[r B, (r+1) B)`` on process r)."""
    total = num_processes * local_batch
    if total % num_generations != 0:
        raise ValueError(
            f"The global generation batch ({num_processes} x {local_batch} rows) must be a multiple of "
            f"`num_generations`={num_generations}"
        )
    G, B = num_generations, local_batch
    return [g for g in range(total // G) if (g * G) // B != ((g + 1) * G - 1) // B]


def _pad_time(t: torch.Tensor, length: int) -> torch.Tensor:
    if t.size(1) == length:
        return t
    pad = t.new_zeros((t.size(0), length - t.size(1), *t.shape[2:]))
    return torch.cat([t, pad], dim=1)


@torch.no_grad()
def distributed_token_hidden_reward(
    hidden_states: torch.Tensor | Callable[[slice], torch.Tensor],
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    advantages: torch.Tensor,
    num_generations: int,
    lm_head,
    collectives: Collectives,
    *,
    hidden_size: int,
    hidden_dtype: torch.dtype = torch.float32,
    exchange: str = "auto",
    **kwargs,
) -> tuple[BatchTHR, ExchangeStats]:
    """THR of this process's rows when the global batch is spread over ``collectives.num_processes`` processes.

    Gives the same scores, THR, thresholds and token advantages as
    :func:`~hfx.trainers.thr.token_rewards.batch_token_hidden_reward` on the concatenated global batch (up to float
    summation order). Every process must call it at the same step (it issues collectives when groups are split).

    Args:
        hidden_states (`torch.Tensor` of shape `(B, T, d)` or a callable `rows: slice -> (n, T, d)`): this process's
            final hidden states (model dtype); a callable is only called for rows of non-skipped groups.
        completion_ids, completion_mask (`(B, T)`), advantages (`(B,)`): this process's rows.
        num_generations (`int`): ``G``.
        lm_head: the output head (a callable ``h -> logits`` or a weight), see
            :func:`~hfx.trainers.thr.token_rewards.sliced_token_probs`.
        collectives ([`Collectives`]).
        hidden_size (`int`), hidden_dtype (`torch.dtype`): ``d`` and the dtype of the hidden states (for the
            byte counts and the received buffers).
        exchange (`str`, *optional*, defaults to `"auto"`): ``"auto"``, ``"hidden_states"`` or ``"gram"`` (see the
            module docstring).
        **kwargs: ``mode``, ``p``, ``tau_beta``, ``tau``, ``normalization``, ``include_self``, ``vocab_subset``,
            ``temperature`` as in :func:`~hfx.trainers.thr.token_rewards.group_token_hidden_reward`.

    Returns:
        `(BatchTHR, ExchangeStats)`: ``BatchTHR`` over this process's rows; its ``skipped`` and ``tau`` list the
        groups that have rows here, in order.

    Raises:
        ValueError: for an unknown ``exchange``, or a global batch that is not whole groups.
    """
    check_choice("exchange", exchange, THR_EXCHANGES)
    mode = kwargs.get("mode", "reweight")
    check_mode_normalization(mode, kwargs.get("normalization", "none"))
    G = num_generations
    W, r = collectives.num_processes, collectives.process_index
    B, T = completion_ids.shape
    device = completion_ids.device
    get_hidden = hidden_states if callable(hidden_states) else (lambda rows: hidden_states[rows])
    split = set(split_group_ids(W, B, G))
    start = r * B
    local_groups = list(range(start // G, (start + B - 1) // G + 1))

    def local_slice(g: int) -> slice:
        return slice(max(g * G, start) - start, min((g + 1) * G, start + B) - start)

    thr = torch.zeros(B, T, dtype=torch.float32, device=device)
    scores = torch.zeros_like(thr)
    token_adv = advantages.view(-1, 1).expand(B, T).clone()
    dominant = torch.zeros(B, T, dtype=torch.bool, device=device)
    skipped = torch.zeros(len(local_groups), dtype=torch.bool, device=device)
    taus = torch.full((len(local_groups),), float("nan"), dtype=torch.float32, device=device)
    stats = ExchangeStats(split_groups=len(split))

    def store(g: int, rows_local: slice, out_thr, out_scores, out_adv, out_dom, tau) -> None:
        n_t = min(out_thr.size(1), T)  # split groups are padded to the longest completion over processes
        thr[rows_local, :n_t], scores[rows_local, :n_t] = out_thr[:, :n_t], out_scores[:, :n_t]
        token_adv[rows_local, :n_t] = out_adv[:, :n_t].to(token_adv.dtype)
        dominant[rows_local, :n_t] = out_dom[:, :n_t]
        taus[local_groups.index(g)] = torch.as_tensor(tau, dtype=torch.float32)

    # -------- whole groups: the single-process computation on this process's rows
    for g in local_groups:
        if g in split:
            continue
        rows = local_slice(g)
        if bool(skipped_groups(advantages[rows], G, completion_mask[rows])[0]):
            skipped[local_groups.index(g)] = True
            continue
        out = group_token_hidden_reward(
            get_hidden(rows), completion_ids[rows], completion_mask[rows], advantages[rows], lm_head, **kwargs
        )
        store(g, rows, out.thr, out.scores, out.token_advantages, out.dominant, out.tau)

    if not split:
        return BatchTHR(thr, scores, token_adv, dominant, skipped, taus), stats

    # -------- split groups: metadata of every boundary row (rows of split groups), on every process
    def boundary_rows(process: int) -> list[int]:
        return [row for row in range(process * B, (process + 1) * B) if row // G in split]

    boundaries = [boundary_rows(s) for s in range(W)]
    nb_max = max(len(rows) for rows in boundaries)
    where = {row: (s, k) for s in range(W) for k, row in enumerate(boundaries[s])}  # global row -> (process, slot)
    mine = [row - start for row in boundaries[r]]
    meta = torch.zeros((nb_max, 2, T), dtype=torch.int32, device=device)
    meta_adv = torch.zeros(nb_max, dtype=torch.float32, device=device)
    if mine:
        meta[: len(mine), 0] = completion_ids[mine]
        meta[: len(mine), 1] = completion_mask[mine].to(meta.dtype)
        meta_adv[: len(mine)] = advantages[mine].float()
    meta = collectives.pad(meta, 2)
    T_max = meta.size(2)
    all_meta, all_adv = collectives.gather(meta), collectives.gather(meta_adv)
    stats.bytes_received += (W - 1) * (meta.numel() * meta.element_size() + meta_adv.numel() * 4)

    groups = {}
    for g in sorted(split):
        slots = [where[row][0] * nb_max + where[row][1] for row in range(g * G, (g + 1) * G)]
        ids, mask = all_meta[slots, 0].long(), all_meta[slots, 1].long()
        adv = all_adv[slots].to(advantages.dtype)
        positive = valid_positive(adv, mask)
        info = {
            "ids": ids,
            "mask": mask,
            "adv": adv,
            "positive": positive,
            "skipped": bool(skipped_groups(adv, G, mask)[0]),
            "owners": [where[row][0] for row in range(g * G, (g + 1) * G)],
            "positive_length": mask[positive].sum().float(),
            "accuracy": (adv > 0).float().mean(),
        }
        if kwargs.get("vocab_subset", "group") == "group":
            info["subset"] = group_vocab_subset(ids, mask)
        groups[g] = info
        if g in local_groups:
            skipped[local_groups.index(g)] = info["skipped"]

    active = [g for g in sorted(split) if not groups[g]["skipped"]]
    if not active:
        stats.kind = "none"
        return BatchTHR(thr, scores, token_adv, dominant, skipped, taus), stats

    # -------- which exchange moves fewer bytes (same numbers on every process)
    def positive_boundary_rows(process: int) -> list[int]:
        return [
            row for row in boundaries[process] if row // G in active and bool(groups[row // G]["positive"][row % G])
        ]

    pos_rows = [positive_boundary_rows(s) for s in range(W)]
    n_pos_max = max(len(rows) for rows in pos_rows)
    itemsize = torch.empty((), dtype=hidden_dtype).element_size()
    vocab_rows = max(
        (
            groups[g]["subset"].numel()
            if "subset" in groups[g]
            else _vocab_size(lm_head, hidden_size, hidden_dtype, device)
        )
        for g in active
    )
    gram_groups = [[g for g in active if any(row // G == g for row in pos_rows[s])] for s in range(W)]
    m_max = max(len(gs) for gs in gram_groups)
    bytes_hidden = (W - 1) * n_pos_max * T_max * hidden_size * itemsize
    bytes_gram = (W - 1) * (m_max * vocab_rows * hidden_size * 4 + nb_max * 4)
    stats.bytes_by_kind = {"hidden_states": int(bytes_hidden), "gram": int(bytes_gram)}
    kind = exchange if exchange != "auto" else ("hidden_states" if bytes_hidden <= bytes_gram else "gram")
    stats.kind = kind
    mine_active = [g for g in active if g in local_groups]
    hidden_cache: dict[int, torch.Tensor] = {}

    def local_hidden(g: int) -> torch.Tensor:
        if g not in hidden_cache:
            hidden_cache[g] = get_hidden(local_slice(g))
        return hidden_cache[g]

    if kind == "hidden_states":
        send = torch.zeros(n_pos_max, T_max, hidden_size, dtype=hidden_dtype, device=device)
        for k, row in enumerate(pos_rows[r]):
            g = row // G
            send[k, :T] = local_hidden(g)[row - start - local_slice(g).start].to(hidden_dtype)
        received = collectives.gather(send)
        stats.bytes_received += bytes_hidden
        for g in mine_active:
            info, rows = groups[g], local_slice(g)
            h_group = torch.zeros(G, T_max, hidden_size, dtype=hidden_dtype, device=device)
            for i, row in enumerate(range(g * G, (g + 1) * G)):
                owner = info["owners"][i]
                if owner == r:
                    h_group[i, :T] = local_hidden(g)[row - start - rows.start].to(hidden_dtype)
                elif row in pos_rows[owner]:
                    h_group[i] = received[owner * n_pos_max + pos_rows[owner].index(row)]
            out = group_token_hidden_reward(h_group, info["ids"], info["mask"], info["adv"], lm_head, **kwargs)
            keep = slice(rows.start + start - g * G, rows.stop + start - g * G)
            store(g, rows, out.thr[keep], out.scores[keep], out.token_advantages[keep], out.dominant[keep], out.tau)
        return BatchTHR(thr, scores, token_adv, dominant, skipped, taus), stats

    # -------- Gram factors: partial M+ per split group from this process's correct rows, summed over processes
    temperature = kwargs.get("temperature", 1.0)
    local = {}
    for g in mine_active:
        info, rows = groups[g], local_slice(g)
        in_group = slice(rows.start + start - g * G, rows.stop + start - g * G)
        h = local_hidden(g)
        errors = group_prediction_errors(h, completion_ids[rows], info.get("subset"), lm_head, temperature=temperature)
        local[g] = (h, errors, info["positive"][in_group])
    send = torch.zeros(m_max, vocab_rows, hidden_size, dtype=torch.float32, device=device)
    for k, g in enumerate(gram_groups[r]):
        h, errors, positive = local[g]
        partial = positive_gram(h, errors, completion_mask[local_slice(g)], positive)
        send[k, : partial.size(0)] = partial
    received = collectives.gather(send) if m_max > 0 else send
    stats.bytes_received += (W - 1) * m_max * vocab_rows * hidden_size * 4
    row_stat = torch.full((nb_max,), float("inf"), dtype=torch.float32, device=device)
    computed = {}
    for g in mine_active:
        info, rows = groups[g], local_slice(g)
        h, errors, positive = local[g]
        n_v = errors.size(-1)
        m_plus = sum(received[s * m_max + gram_groups[s].index(g), :n_v] for s in range(W) if g in gram_groups[s])
        mask = completion_mask[rows]
        sc = hidden_reward_scores(
            h, errors, mask, positive, include_self=kwargs.get("include_self", True), m_plus=m_plus
        )
        adv = advantages[rows]
        t = token_hidden_reward(
            sc, adv, mask, positive, kwargs.get("normalization", "none"), positive_length=info["positive_length"]
        )
        means = row_means(sc if mode == "nthr" else t, mask, absolute=mode != "nthr")
        for i in torch.nonzero(positive).flatten().tolist():
            row_stat[boundaries[r].index(start + rows.start + i)] = means[i].float()
        computed[g] = (sc, t, adv, mask)
    all_stats = collectives.gather(row_stat)
    stats.bytes_received += (W - 1) * nb_max * 4
    for g in mine_active:
        info, rows = groups[g], local_slice(g)
        sc, t, adv, mask = computed[g]
        if kwargs.get("tau") is not None:
            tau = torch.as_tensor(kwargs["tau"], dtype=t.dtype, device=device)
        else:
            slots = [where[row][0] * nb_max + where[row][1] for row in range(g * G, (g + 1) * G)]
            tau = kwargs.get("tau_beta", 1.0) * all_stats[slots][info["positive"]].min()
        token_a, dom = apply_threshold(
            mode, adv, t, sc, mask, tau, kwargs.get("p", 0.0), group_accuracy=info["accuracy"]
        )
        store(g, rows, t, sc, token_a, dom, tau)
    return BatchTHR(thr, scores, token_adv, dominant, skipped, taus), stats


def _vocab_size(lm_head, hidden_size: int, dtype: torch.dtype, device) -> int:
    if torch.is_tensor(lm_head):
        return lm_head.size(0)
    probe = torch.zeros(1, 1, hidden_size, dtype=dtype, device=device)
    return int(lm_head(probe).size(-1))


__all__ = ["THR_EXCHANGES", "Collectives", "ExchangeStats", "distributed_token_hidden_reward", "split_group_ids"]
