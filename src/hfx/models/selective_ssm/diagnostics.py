"""Diagnostics of the selective-SSM theory model (arXiv 2602.12499): gate alignment, the gate's analytic gradient,
accuracy, iterations to a loss threshold, power-law fits with intervals over seeds, and plots.

The paper's mechanism claim is that "the gating vector aligns with class-relevant features while ignoring irrelevant
ones". :func:`cosine_alignment` measures it as ``cos(w_g, o₊)``, ``cos(w_g, o₋)`` against ``cos(w_g, q_m)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .data import O_MINUS, O_PLUS
from .modeling_selective_ssm import gate_coefficients


# ---------------------------------------------------------------------------------------------------------- alignment
def cosine_alignment(gate_vector: torch.Tensor, patterns: torch.Tensor) -> dict[str, torch.Tensor]:
    """Cosines of the gate vector with the relevant and irrelevant patterns.

    Args:
        gate_vector (`torch.Tensor` of shape `(..., hidden_size)`): ``w_g`` (a leading dimension for an ensemble).
        patterns (`torch.Tensor` of shape `(M + 2, hidden_size)`): rows ``o₊, o₋, q_1 .. q_M``
            (:meth:`~hfx.models.selective_ssm.SyntheticSequenceConfig.patterns`).

    Returns:
        `dict[str, torch.Tensor]` of shape `(...,)` each: ``cos_plus``, ``cos_minus``, ``cos_relevant`` (their mean),
        ``cos_irrelevant_mean`` (mean over ``q_m``) and ``cos_irrelevant_max_abs`` (largest ``|cos|`` over ``q_m``).
        A zero gate vector (the default initialisation) has every cosine ``0`` (not NaN).
    """
    gate_vector = gate_vector.detach().float()
    patterns = patterns.to(gate_vector.device).float()
    norm = gate_vector.norm(dim=-1, keepdim=True)
    unit = torch.where(norm > 0, gate_vector / norm.clamp_min(1e-30), torch.zeros_like(gate_vector))
    cos = (unit @ patterns.T) / patterns.norm(dim=-1)
    irrelevant = cos[..., 2:]
    return {
        "cos_plus": cos[..., O_PLUS],
        "cos_minus": cos[..., O_MINUS],
        "cos_relevant": (cos[..., O_PLUS] + cos[..., O_MINUS]) / 2,
        "cos_irrelevant_mean": irrelevant.mean(-1),
        "cos_irrelevant_max_abs": irrelevant.abs().max(-1).values,
    }


def gate_alignment(model, patterns: torch.Tensor) -> dict[str, float]:
    """:func:`cosine_alignment` of ``model.gate_vector`` as floats."""
    return {k: float(v) for k, v in cosine_alignment(model.gate_vector, patterns).items()}


# ------------------------------------------------------------------------------------------------ accuracy, thresholds
@torch.no_grad()
def accuracy(model, inputs_embeds: torch.Tensor, labels: torch.Tensor, batch_size: int = 4096) -> float:
    """Fraction of ``argmax(logits) == labels`` (``sign(f) = y`` for the theory model), in batches, without grad."""
    correct = 0
    for start in range(0, len(labels), batch_size):
        logits = model(inputs_embeds=inputs_embeds[start : start + batch_size]).logits
        correct += int((logits.argmax(-1) == labels[start : start + batch_size].to(logits.device)).sum())
    return correct / len(labels)


def iterations_to_threshold(losses, threshold: float, steps=None) -> int | None:
    """The first step whose (full-batch) training loss is ``<= threshold``, or `None` if never.

    Args:
        losses (sequence of `float`): the recorded losses.
        threshold (`float`).
        steps (sequence of `int`, *optional*): the step of each loss (defaults to ``0, 1, 2, ...``).
    """
    for i, loss in enumerate(losses):
        if loss <= threshold:
            return i if steps is None else int(steps[i])
    return None


# ---------------------------------------------------------------------------------------------- analytic gate gradient
@dataclass
class GateGradient:
    """Analytic gradient of the mean training loss with respect to the gate.

    Args:
        gate_logits (`torch.Tensor` of shape `(batch_size, sequence_length)`): ``∂loss/∂z_l`` per token: the
            contribution of each token to the gate's update (``-learning_rate ·`` this moves ``z_l``).
        gate_vector (`torch.Tensor` of shape `(hidden_size,)`): ``∂loss/∂w_g = Σ_{b,l} ∂loss/∂z_{b,l} · x_{b,l}``.
        gate_bias (`torch.Tensor` of shape `()`): ``∂loss/∂b_g`` (meaningful when the gate has a bias).
    """

    gate_logits: torch.Tensor
    gate_vector: torch.Tensor
    gate_bias: torch.Tensor


@torch.no_grad()
def gate_gradient(model, inputs_embeds: torch.Tensor, labels: torch.Tensor) -> GateGradient:
    r"""The gate's gradient in closed form (no autograd), for a [`SelectiveSSMForSequenceClassification`].

    With ``c_j = b_j exp(Σ_{k>j} a_k)``, ``h_L = s Σ_j c_j u_j`` (``s = 1`` or ``1/L``) and
    ``δ_j = s · (∂loss/∂h_L) · u_j``:

    ``∂loss/∂z_k = δ_k · b'(z_k) · exp(Σ_{m>k} a_m) + a'(z_k) · Σ_{j<k} δ_j c_j``

    (a token's own write, plus how its decay scales every earlier token's contribution), where ``b'``, ``a'`` are the
    derivatives of the input coefficient and the log decay (``zoh``: ``σ(1-σ)``, ``-σ``; ``mamba_euler``: ``σ``,
    ``-σ``; ``input_gate``: ``σ(1-σ)``, ``0``). ``∂loss/∂h_L`` uses the MLP's closed form
    ``∂loss/∂f · Vᵀ (a ⊙ act'(V h_L))`` and ``∂loss/∂f = -y 1[y f < 1]`` (hinge) or ``-y σ(-y f)`` (logistic), divided
    by the batch size (the loss is a mean).

    Args:
        model ([`SelectiveSSMForSequenceClassification`]).
        inputs_embeds (`torch.FloatTensor` of shape `(batch_size, sequence_length, hidden_size)`).
        labels (`torch.LongTensor` of shape `(batch_size,)`): in ``{0, 1}``.

    Returns:
        [`GateGradient`].
    """
    config = model.config
    out = model(inputs_embeds=inputs_embeds)
    z, margin = out.gate_logits, out.margin
    b, log_decays = gate_coefficients(z, config)
    y = (2 * labels - 1).to(margin.dtype)
    if config.loss_type == "hinge":
        dloss_df = -y * (y * margin < 1).to(margin.dtype)
    else:
        dloss_df = -y * torch.sigmoid(-y * margin)
    dloss_df = dloss_df / len(labels)
    mlp = model.mlp
    pre = mlp.fc1(out.last_state)
    act_grad = (pre > 0).to(pre.dtype) if config.mlp_activation == "relu" else torch.ones_like(pre)
    dloss_dh = dloss_df[:, None] * ((act_grad * mlp.output_weights()) @ mlp.fc1.weight)  # (B, n)
    scale = 1.0 / inputs_embeds.shape[1] if config.state_normalization == "length" else 1.0
    values = model.model.mixer.values(inputs_embeds)
    delta = scale * torch.einsum("bn,bln->bl", dloss_dh, values)
    sigma = torch.sigmoid(z)
    if config.recurrence == "zoh":
        b_prime, a_prime = sigma * (1 - sigma), -sigma
    elif config.recurrence == "mamba_euler":
        b_prime, a_prime = sigma, -sigma
    else:
        b_prime, a_prime = sigma * (1 - sigma), torch.zeros_like(sigma)
    later = torch.flip(torch.cumsum(torch.flip(log_decays, [-1]), -1), [-1])
    later = torch.cat([later[..., 1:], torch.zeros_like(later[..., :1])], -1)  # Σ_{m>k} a_m
    weights = b * torch.exp(later)  # c_j
    earlier = torch.cumsum(delta * weights, -1) - delta * weights  # Σ_{j<k} δ_j c_j
    dz = delta * b_prime * torch.exp(later) + a_prime * earlier
    return GateGradient(gate_logits=dz, gate_vector=torch.einsum("bl,bld->d", dz, inputs_embeds), gate_bias=dz.sum())


# ----------------------------------------------------------------------------------------------- fits and intervals
def mean_interval(values, confidence: float = 0.95) -> dict[str, float]:
    """Mean and Student-t interval over independent runs (seeds).

    Returns:
        `dict` with ``mean``, ``low``, ``high``, ``std`` and ``n``; with one value the interval is that value.
    """
    from scipy.stats import t

    values = [float(v) for v in values]
    n = len(values)
    if n == 0:
        raise ValueError("`values` must not be empty")
    mean = sum(values) / n
    if n == 1:
        return {"mean": mean, "low": mean, "high": mean, "std": 0.0, "n": 1}
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t.ppf(0.5 + confidence / 2, n - 1) * std / math.sqrt(n)
    return {"mean": mean, "low": mean - half, "high": mean + half, "std": std, "n": n}


def fit_power_law(x, y) -> tuple[float, float]:
    """Least-squares fit of ``log y = log C + k log x``; returns ``(k, C)``.

    Raises:
        ValueError: for fewer than two points or non-positive values.
    """
    x, y = [float(v) for v in x], [float(v) for v in y]
    if len(x) != len(y) or len(x) < 2:
        raise ValueError(f"need at least two (x, y) pairs of equal length, got {len(x)} and {len(y)}")
    if min(x) <= 0 or min(y) <= 0:
        raise ValueError("`x` and `y` must be positive for a log-log fit")
    lx, ly = [math.log(v) for v in x], [math.log(v) for v in y]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    sxx = sum((a - mx) ** 2 for a in lx)
    if sxx == 0:
        raise ValueError("`x` must take at least two distinct values")
    k = sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sxx
    return k, math.exp(my - k * mx)


def exponent_interval(x, y_per_seed, confidence: float = 0.95) -> dict:
    """Fit the power law separately for each seed and give the exponent's mean and t-interval over seeds.

    Args:
        x (sequence of `float`): the swept quantity (e.g. ``L`` or ``α_r - α_c``).
        y_per_seed (sequence of sequences): one row per seed, one value per ``x`` (``None`` / non-positive entries
            are dropped for that seed; a seed with fewer than two points left is skipped).

    Returns:
        `dict`: ``mean``, ``low``, ``high``, ``std``, ``n`` (seeds used) and ``per_seed`` exponents.
    """
    exponents = []
    for row in y_per_seed:
        points = [(a, b) for a, b in zip(x, row) if b is not None and b > 0]
        if len(points) >= 2 and len({a for a, _ in points}) >= 2:
            exponents.append(fit_power_law([a for a, _ in points], [b for _, b in points])[0])
    if not exponents:
        raise ValueError("no seed has two usable points")
    return {**mean_interval(exponents, confidence), "per_seed": exponents}


# --------------------------------------------------------------------------------------------------------------- plots
_TOKEN_COLOURS = {"o+": "#d62728", "o-": "#1f77b4", "q": "#bbbbbb"}


def _token_kind(pattern_id: int) -> str:
    return "o+" if pattern_id == O_PLUS else "o-" if pattern_id == O_MINUS else "q"


@torch.no_grad()
def plot_gate_values(model, inputs_embeds: torch.Tensor, pattern_ids, output_path=None, title: str | None = None):
    """Per-token gate values and token weights of one sequence (bars coloured by pattern: o₊ red, o₋ blue, q grey).

    Args:
        model: a [`SelectiveSSMForSequenceClassification`] (or anything returning ``gates`` / ``token_weights``).
        inputs_embeds (`torch.Tensor` of shape `(sequence_length, hidden_size)`): one sequence.
        pattern_ids (sequence of `int` of length `sequence_length`).
        output_path (`str` or `Path`, *optional*): where to save the PNG.
        title (`str`, *optional*).

    Returns:
        `matplotlib.figure.Figure`.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = model(inputs_embeds=inputs_embeds[None])
    gates = out.gates[0].float().cpu()
    weights = out.token_weights[0].float().cpu()
    kinds = [_token_kind(int(p)) for p in pattern_ids]
    colours = [_TOKEN_COLOURS[k] for k in kinds]
    positions = list(range(len(kinds)))
    fig, axes = plt.subplots(2, 1, figsize=(7, 4), sharex=True)
    axes[0].bar(positions, gates.tolist(), color=colours)
    axes[0].set_ylabel("gate b_l")
    axes[1].bar(positions, weights.tolist(), color=colours)
    axes[1].set_ylabel("weight in h_L")
    axes[1].set_xlabel("token position (decision point = last)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in _TOKEN_COLOURS.values()]
    axes[0].legend(handles, ["o+", "o-", "irrelevant"], loc="upper left", fontsize=8, ncol=3)
    if title:
        axes[0].set_title(title, fontsize=10)
    fig.tight_layout()
    if output_path is not None:
        fig.savefig(output_path, dpi=90)
    return fig


def plot_alignment_history(histories: dict, output_path=None, title: str | None = None):
    """Gate-pattern cosines over training, one panel per named run (mean over the run's seeds).

    Args:
        histories (`dict[str, list[TrainingHistory]]`): run name -> the histories of its seeds.
        output_path (`str` or `Path`, *optional*).

    Returns:
        `matplotlib.figure.Figure`.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(histories), figsize=(3.6 * len(histories), 3.2), squeeze=False)
    for ax, (name, runs) in zip(axes[0], histories.items()):
        steps = runs[0].steps
        for key, label, colour in (
            ("cos_plus", "cos(w, o+)", _TOKEN_COLOURS["o+"]),
            ("cos_minus", "cos(w, o-)", _TOKEN_COLOURS["o-"]),
            ("cos_irrelevant_mean", "mean cos(w, q)", "#555555"),
        ):
            series = torch.tensor([getattr(r, key) for r in runs], dtype=torch.float64)
            ax.plot(steps, series.mean(0).tolist(), label=label, color=colour)
            ax.fill_between(
                steps, series.min(0).values.tolist(), series.max(0).values.tolist(), color=colour, alpha=0.15
            )
        ax.axhline(0, color="black", lw=0.5)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("iteration")
    axes[0][0].set_ylabel("cosine")
    axes[0][0].legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    if output_path is not None:
        fig.savefig(output_path, dpi=90)
    return fig


__all__ = [
    "GateGradient",
    "accuracy",
    "cosine_alignment",
    "exponent_interval",
    "fit_power_law",
    "gate_alignment",
    "gate_gradient",
    "iterations_to_threshold",
    "mean_interval",
    "plot_alignment_history",
    "plot_gate_values",
]
