"""Plot RMOD's per-block objective weights (which objective was the worst case at each step)."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def plot_weights(
    output_or_weights,
    objective_names: Sequence[str] | None = None,
    batch_index: int = 0,
    ax=None,
    title: str | None = None,
):
    """Stacked bars of the objective weights used to choose each decoded block, for one prompt.

    Args:
        output_or_weights (`RMODOutput` or sequence of `torch.Tensor` of shape `(batch_size, num_objectives)`):
            the output of ``generate(..., custom_generate="rmod", return_dict_in_generate=True)`` or its
            ``block_weights``.
        objective_names (`Sequence[str]`, *optional*): legend labels (defaults to the output's names, or ``obj 0``...).
        batch_index (`int`, *optional*, defaults to 0): which prompt of the batch to draw.
        ax (`matplotlib.axes.Axes`, *optional*): draw into this axes (a new figure otherwise).
        title (`str`, *optional*).

    Returns:
        `matplotlib.figure.Figure`.

    Raises:
        ValueError: if there are no blocks or ``batch_index`` is out of range.
    """
    import matplotlib

    if ax is None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    weights = getattr(output_or_weights, "block_weights", output_or_weights)
    if objective_names is None:
        objective_names = getattr(output_or_weights, "objective_names", None)
    if weights is None or len(weights) == 0:
        raise ValueError("`output_or_weights` has no decoded blocks to plot")
    w = torch.stack([torch.as_tensor(b) for b in weights]).float()  # (num_blocks, batch, G)
    if not 0 <= batch_index < w.shape[1]:
        raise ValueError(f"`batch_index` must be in [0, {w.shape[1]}), but is {batch_index}")
    w = w[:, batch_index].cpu().numpy()  # (num_blocks, G)
    num_blocks, num_objectives = w.shape
    names = list(objective_names) if objective_names is not None else [f"obj {g}" for g in range(num_objectives)]
    if len(names) != num_objectives:
        raise ValueError(f"`objective_names` must have {num_objectives} entries, got {len(names)}")
    if ax is None:
        fig, ax = plt.subplots(figsize=(max(5.0, 0.35 * num_blocks + 3.5), 3.0))
    else:
        fig = ax.figure
    bottom = [0.0] * num_blocks
    for g in range(num_objectives):
        ax.bar(range(num_blocks), w[:, g], bottom=bottom, label=names[g], width=0.85)
        bottom = [b + v for b, v in zip(bottom, w[:, g])]
    ax.set_xlabel("decoded block")
    ax.set_ylabel("objective weight")
    ax.set_ylim(0, 1)
    ax.set_title(title or "RMOD worst-case weights per block")
    ax.set_xticks(range(num_blocks))
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    fig.tight_layout()
    return fig


__all__ = ["plot_weights"]
