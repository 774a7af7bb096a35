"""A matplotlib figure of a CRD decomposition: the puzzle, each selected concept's 3 x 3 grid of values with the rule's
fit, and the candidates' scores."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def plot_decomposition(output, item: Mapping[str, Any] | None = None, *, concepts: list[str] | None = None,
                       show_image: bool = True, figsize_per_panel: float = 2.6):
    """Draw a :class:`~hfx.vision.crd.CRDOutput`.

    One column per shown concept: the 3 x 3 grid of the concept's panel values (the last cell holds the chosen
    candidate's value, framed), each cell coloured by the rule's fitted value (ordinal: the GP posterior mean, also
    printed as ``~x``; categorical: the class's most probable category, printed when it differs), titled with the
    rule and its log Bayes factor. The first column shows the puzzle image (when ``item`` has one), the last the
    candidates' answer probabilities (the chosen one dark, the target, when known, outlined).

    Args:
        output (:class:`~hfx.vision.crd.CRDOutput`): the decomposition.
        item (`Mapping`, *optional*): the dataset row (for its ``image``).
        concepts (`list[str]`, *optional*): concepts to draw (default: the selected ones; all when none is).
        show_image (`bool`, *optional*, defaults to `True`).
        figsize_per_panel (`float`, *optional*, defaults to `2.6`): inches per column.

    Returns:
        `matplotlib.figure.Figure`.

    Raises:
        ValueError: for a concept name not in the output.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib import colormaps
    from matplotlib.colors import is_color_like

    names = list(concepts) if concepts is not None else (list(output.selected_concepts) or list(output.rules))
    unknown = [n for n in names if n not in output.rules]
    if unknown:
        raise ValueError(f"`concepts` {unknown} are not in this output (it has {list(output.rules)})")
    image = item.get("image") if isinstance(item, Mapping) and show_image else None
    cols = len(names) + 1 + (image is not None)
    fig, axes = plt.subplots(1, cols, figsize=(figsize_per_panel * cols, figsize_per_panel * 1.15), squeeze=False)
    axes = list(axes[0])
    if image is not None:
        ax = axes.pop(0)
        ax.imshow(image)
        ax.set_title(f"puzzle {output.item_id or ''}".strip(), fontsize=9)
        ax.axis("off")
    cmap, palette = colormaps["viridis"], colormaps["tab10"]
    for ax, name in zip(axes, names):
        rule = output.rules[name]
        values = list(rule.values)
        fitted = rule.fitted_values
        ax.set_xlim(0, 3)
        ax.set_ylim(3, 0)
        ax.set_xticks([])
        ax.set_yticks([])
        numeric = [v for v in (fitted or values) if _is_number(v)]
        lo, hi = (min(numeric), max(numeric)) if numeric else (0.0, 1.0)
        labels = {}
        for i in range(9):
            r, c = divmod(i, 3)
            shown = fitted[i] if fitted is not None else values[i]
            if rule.kind == "ordinal" and _is_number(shown):
                color = cmap(0.15 + 0.7 * ((shown - lo) / (hi - lo) if hi > lo else 0.5))
            elif shown is not None and is_color_like(str(shown)):  # colour concepts are drawn in their colour
                color = str(shown)
            elif shown is not None:
                color = palette(labels.setdefault(shown, len(labels)) % 10)
            else:
                color = (0.9, 0.9, 0.9, 1.0)
            ax.add_patch(plt.Rectangle((c, r), 1, 1, facecolor=color, alpha=0.45, edgecolor="white", lw=2))
            value = values[i]
            text = "-" if value is None else (f"{value:g}" if _is_number(value) else str(value))
            if fitted is not None and rule.kind == "ordinal" and _is_number(fitted[i]):
                text += f"\n~{fitted[i]:.1f}"
            elif fitted is not None and fitted[i] != value:
                text += f"\n({fitted[i]})"
            ax.text(c + 0.5, r + 0.5, text, ha="center", va="center", fontsize=8)
        ax.add_patch(plt.Rectangle((2, 2), 1, 1, fill=False, edgecolor="black", lw=2, ls="--"))
        flag = "" if rule.selected else " (not selected)"
        ax.set_title(f"{name}: {rule.rule}{flag}\nlog BF {rule.log_bayes_factor:.1f}", fontsize=9)
    ax = axes[-1]
    probs = output.answer_probabilities
    bars = ax.bar(range(len(probs)), probs, color=["#1f3b73" if j == output.answer else "#9bb1d4"
                                                  for j in range(len(probs))])
    if output.target is not None and 0 <= output.target < len(probs):
        bars[output.target].set_edgecolor("red")
        bars[output.target].set_linewidth(2)
    ax.set_xticks(range(len(probs)))
    ax.set_xticklabels([str(j + 1) for j in range(len(probs))], fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_title("answer probability" + ("" if output.target is None else " (red: target)"), fontsize=9)
    fig.tight_layout()
    return fig


__all__ = ["plot_decomposition"]
