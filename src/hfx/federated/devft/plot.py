"""Plots of DevFT runs: eval loss and accuracy against communicated bytes, client compute or rounds."""

from __future__ import annotations

from pathlib import Path


_X_LABELS = {
    "cum_bytes": ("cum_bytes", 2**20, "LoRA communicated, down + up (MiB)"),
    "cum_client_flops": ("cum_client_flops", 1e12, "client compute (TFLOP, all clients)"),
    "round": ("round", 1, "federated round"),
}


def plot_runs(
    runs: dict, path: str | Path | None = None, x: str = "cum_bytes", metrics=("eval_loss", "eval_accuracy")
):
    """One panel per metric, one line per run, against ``x``.

    Args:
        runs (`dict[str, DevFTResult | list[dict]]`): label -> a result (or its ``history`` rows).
        path (`str` or `Path`, *optional*): save the figure there (PNG, 120 dpi).
        x (`str`, *optional*, defaults to `"cum_bytes"`): `"cum_bytes"`, `"cum_client_flops"` or `"round"`.
        metrics (`tuple[str]`): history columns to plot.

    Returns:
        `matplotlib.figure.Figure`.

    Raises:
        ValueError: for an unknown ``x``.
    """
    if x not in _X_LABELS:
        raise ValueError(f"`x` must be one of {sorted(_X_LABELS)}, but is {x!r}")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    column, scale, label = _X_LABELS[x]
    fig, axes = plt.subplots(1, len(metrics), figsize=(5.2 * len(metrics), 3.6), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        for name, run in runs.items():
            rows = run if isinstance(run, list) else run.history
            pts = [(r[column] / scale, r[metric]) for r in rows if r.get(metric) is not None]
            if pts:
                ax.plot(*zip(*pts), marker="o", markersize=3, label=name)
        ax.set_xlabel(label)
        ax.set_ylabel(metric.replace("_", " "))
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig
