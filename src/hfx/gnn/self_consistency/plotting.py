"""Draw a graph's explanations side by side (e.g. the base SI-GNN vs its self-consistent variant)."""

from __future__ import annotations

from pathlib import Path

import torch


def plot_explanations(
    graph,
    explanations: dict[str, torch.Tensor],
    path: str | Path | None = None,
    seed: int = 0,
    title: str | None = None,
):
    """One panel per explanation: edges coloured and thickened by their attention (dark = 1), ground-truth
    explanation edges (``graph.edge_label == 1``) outlined in red; an undirected edge shows the mean of its two
    directions. The first panel is the ground truth when ``edge_label`` is present.

    Args:
        graph (`torch_geometric.data.Data`): one graph (``edge_index``; ``edge_label`` optional).
        explanations (`dict[str, torch.Tensor]`): panel title -> edge attention `(E,)` in [0, 1].
        path (`str` or `Path`, *optional*): save the figure there (PNG, 110 dpi).
        seed (`int`, *optional*, defaults to 0): the spring-layout seed (same layout in every panel).
        title (`str`, *optional*): figure title.

    Returns:
        `matplotlib.figure.Figure`.

    Raises:
        ValueError: if an explanation does not have one value per edge.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import networkx as nx

    edge_index = graph.edge_index.cpu()
    num_edges = edge_index.shape[1]
    for name, att in explanations.items():
        if att.numel() != num_edges:
            raise ValueError(f"explanation {name!r} has {att.numel()} values for {num_edges} edges")
    undirected: dict[tuple[int, int], list[int]] = {}
    for e, (u, v) in enumerate(edge_index.t().tolist()):
        undirected.setdefault((min(u, v), max(u, v)), []).append(e)
    g = nx.Graph()
    g.add_nodes_from(range(graph.num_nodes))
    g.add_edges_from(undirected)
    pos = nx.spring_layout(g, seed=seed)
    edges = list(undirected)
    label = getattr(graph, "edge_label", None)
    panels = dict(explanations)
    if label is not None:
        panels = {"ground truth": label.float(), **panels}
    fig, axes = plt.subplots(1, len(panels), figsize=(3.4 * len(panels), 3.4), squeeze=False)
    for ax, (name, att) in zip(axes[0], panels.items()):
        att = att.detach().float().cpu()
        values = [float(att[undirected[e]].mean()) for e in edges]
        if label is not None:
            truth = [e for e in edges if float(label[undirected[e]].max()) > 0.5]
            nx.draw_networkx_edges(g, pos, edgelist=truth, ax=ax, width=6, edge_color="#e41a1c", alpha=0.35)
        nx.draw_networkx_edges(
            g,
            pos,
            edgelist=edges,
            ax=ax,
            width=[0.5 + 3 * v for v in values],
            edge_color=values,
            edge_cmap=plt.cm.Greys,
            edge_vmin=-0.25,
            edge_vmax=1.0,  # attention 0 stays visible (light grey)
        )
        nx.draw_networkx_nodes(g, pos, ax=ax, node_size=18, node_color="#377eb8")
        ax.set_title(name, fontsize=10)
        ax.set_axis_off()
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig
