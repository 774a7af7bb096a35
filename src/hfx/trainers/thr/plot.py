"""Render a completion with its tokens coloured by Token Hidden Reward (PNG via matplotlib, or HTML).

Red tokens have ``THR > 0`` (their update raises the likelihood of the group's correct responses: exploitation),
blue tokens ``THR < 0``; the colour scale is symmetric around 0. Dominant tokens (``|THR| > tau``) get a black frame.
matplotlib is imported inside the functions (``import hfx`` never loads it), and no pyplot state is touched.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

import torch


def _as_tokens(tokens, tokenizer) -> list[str]:
    if torch.is_tensor(tokens) or (isinstance(tokens, Sequence) and tokens and isinstance(tokens[0], int)):
        if tokenizer is None:
            raise ValueError("`tokenizer` is required when `tokens` are token ids, to turn them into text pieces")
        ids = torch.as_tensor(tokens).flatten().tolist()
        return [tokenizer.decode([i]) for i in ids]
    if not isinstance(tokens, Sequence) or not all(isinstance(t, str) for t in tokens):
        raise TypeError(f"`tokens` must be a list of strings or a 1-D tensor of token ids, but is {type(tokens)}")
    return list(tokens)


def _prepare(tokens, thr, tokenizer=None, dominant=None, mask=None):
    pieces = _as_tokens(tokens, tokenizer)
    values = torch.as_tensor(thr, dtype=torch.float64).flatten()
    if values.numel() != len(pieces):
        raise ValueError(f"`thr` has {values.numel()} values but there are {len(pieces)} tokens; they must match")
    dom = (
        torch.zeros(len(pieces), dtype=torch.bool) if dominant is None else torch.as_tensor(dominant).flatten().bool()
    )
    if dom.numel() != len(pieces):
        raise ValueError(f"`dominant` has {dom.numel()} values but there are {len(pieces)} tokens; they must match")
    if mask is not None:
        keep = torch.as_tensor(mask).flatten().bool()
        if keep.numel() != len(pieces):
            raise ValueError(f"`mask` has {keep.numel()} values but there are {len(pieces)} tokens; they must match")
        pieces = [p for p, k in zip(pieces, keep.tolist()) if k]
        values, dom = values[keep], dom[keep]
    return pieces, values, dom


def token_thr_html(
    tokens,
    thr,
    *,
    tokenizer=None,
    dominant=None,
    mask=None,
    title: str | None = None,
    output_path: str | Path | None = None,
) -> str:
    """An HTML snippet of the completion with each token's background coloured by THR (hover shows the value).

    Args:
        tokens (`list[str]` or `torch.LongTensor` of shape `(T,)`): text pieces, or ids decoded with ``tokenizer``.
        thr (`torch.Tensor` or sequence of shape `(T,)`): token hidden rewards (e.g. ``trainer.last_thr["thr"][i]``).
        tokenizer (*optional*): needed when ``tokens`` are ids.
        dominant (`torch.BoolTensor` of shape `(T,)`, *optional*): tokens to frame.
        mask (`torch.Tensor` of shape `(T,)`, *optional*): 0 drops a position (padding).
        title (`str`, *optional*).
        output_path (`str` or `Path`, *optional*): also write the HTML there.

    Returns:
        `str`: the HTML.

    Raises:
        ValueError: if the lengths of ``tokens``, ``thr``, ``dominant`` or ``mask`` differ, or ids come without a
            tokenizer. TypeError: for ``tokens`` of another type.
    """
    pieces, values, dom = _prepare(tokens, thr, tokenizer, dominant, mask)
    scale = float(values.abs().max()) if values.numel() and float(values.abs().max()) > 0 else 1.0
    spans = []
    for piece, value, is_dom in zip(pieces, values.tolist(), dom.tolist()):
        a = min(abs(value) / scale, 1.0)
        rgb = "220,40,40" if value > 0 else "40,90,220"
        border = "border:1px solid #000;" if is_dom else "border:1px solid transparent;"
        spans.append(
            f'<span title="THR={value:.4g}" style="background:rgba({rgb},{a:.3f});{border}'
            f'white-space:pre;padding:0 1px;">{html.escape(piece)}</span>'
        )
    head = f"<h4>{html.escape(title)}</h4>" if title else ""
    legend = (
        '<p style="font-size:80%">red: THR &gt; 0 (exploitation), blue: THR &lt; 0 (exploration), '
        f"framed: dominant |THR| &gt; tau; max |THR| = {scale:.4g}</p>"
    )
    doc = f'<div style="font-family:monospace;line-height:1.8">{head}{"".join(spans)}{legend}</div>'
    if output_path is not None:
        Path(output_path).write_text(doc, encoding="utf-8")
    return doc


def plot_token_thr(
    tokens,
    thr,
    *,
    tokenizer=None,
    dominant=None,
    mask=None,
    title: str | None = None,
    output_path: str | Path | None = None,
    width: float = 10.0,
    cmap: str = "coolwarm",
):
    """A matplotlib figure of the completion, tokens wrapped into lines and coloured by THR, with a colour bar.

    Args:
        tokens, thr, tokenizer, dominant, mask, title: see :func:`token_thr_html`.
        output_path (`str` or `Path`, *optional*): save there; a ``.html`` suffix writes :func:`token_thr_html`
            instead, any other suffix (``.png``, ``.svg``, ``.pdf``) the figure.
        width (`float`, *optional*, defaults to `10.0`): figure width in inches.
        cmap (`str`, *optional*, defaults to `"coolwarm"`): a diverging matplotlib colormap, centred at THR = 0.

    Returns:
        `matplotlib.figure.Figure`.

    Raises:
        ValueError / TypeError: as :func:`token_thr_html`.
    """
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import TwoSlopeNorm
    from matplotlib.figure import Figure

    pieces, values, dom = _prepare(tokens, thr, tokenizer, dominant, mask)
    if output_path is not None and Path(output_path).suffix.lower() == ".html":
        token_thr_html(pieces, values, dominant=dom, title=title, output_path=output_path)
    scale = float(values.abs().max()) if values.numel() and float(values.abs().max()) > 0 else 1.0
    norm = TwoSlopeNorm(vmin=-scale, vcenter=0.0, vmax=scale)
    colormap = colormaps[cmap]

    n_lines_guess = max(1, sum(len(p) + 1 for p in pieces) // int(width * 11) + 1)
    fig = Figure(figsize=(width, 0.9 + 0.32 * n_lines_guess), dpi=120)  # text is placed in pixels of this dpi
    FigureCanvasAgg(fig)
    renderer = fig.canvas.get_renderer()
    ax = fig.add_axes((0.01, 0.02, 0.86, 0.84 if title else 0.94))
    ax.set_axis_off()
    ax_box = ax.get_window_extent(renderer)
    line_height_px = 0.3 * fig.dpi
    x_px, y_px, gap_px = 0.0, 0.0, 0.4 * 9 * fig.dpi / 72  # 2 x box pad + a little air
    for i, piece in enumerate(pieces):
        shown = piece.replace("\n", "\\n") or " "
        text = ax.text(
            0,
            0,
            shown,
            transform=None,
            family="monospace",
            fontsize=9,
            va="top",
            ha="left",
            bbox={
                "facecolor": colormap(norm(float(values[i]))),
                "edgecolor": "black" if bool(dom[i]) else "none",
                "linewidth": 1.2,
                "boxstyle": "square,pad=0.15",
            },
        )
        w = text.get_window_extent(renderer).width
        if x_px > 0 and x_px + w > ax_box.width:
            x_px, y_px = 0.0, y_px + line_height_px
        text.set_position((ax_box.x0 + x_px, ax_box.y1 - y_px - 4))
        x_px += w + gap_px
    used = (y_px + line_height_px) / fig.dpi
    if used > 0.32 * n_lines_guess:  # more lines than guessed: grow the figure downwards
        extra = used - 0.32 * n_lines_guess
        fig.set_size_inches(width, fig.get_size_inches()[1] + extra)
        for text in ax.texts:
            x, y = text.get_position()
            text.set_position((x, y + extra * fig.dpi))
    if title:
        fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    cax = fig.add_axes((0.9, 0.1, 0.02, 0.8))
    fig.colorbar(ScalarMappable(norm=norm, cmap=colormap), cax=cax, label="THR")
    if output_path is not None and Path(output_path).suffix.lower() != ".html":
        fig.savefig(output_path, dpi=fig.dpi)
    return fig


__all__ = ["plot_token_thr", "token_thr_html"]
