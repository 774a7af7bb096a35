"""Offline synthetic benchmarks with ground-truth explanation edges, generated with PyG's ``ExplainerDataset``.

* :func:`ba_2motifs` -- graph classification (Luo et al., PGExplainer, arXiv 2011.04573): a 20-node Barabasi-Albert
  graph with one house motif (label 0) or one 5-cycle (label 1) attached; the motif's edges are the ground truth.
* :func:`ba_shapes` -- node classification (Ying et al., GNNExplainer, arXiv 1903.03894): a 300-node BA graph with 80
  house motifs; node labels 0 (base) and 1-3 (house roles); the houses' edges are the ground truth.

Each graph carries ``x``, ``edge_index``, ``y`` and ``edge_label`` (1 = ground-truth explanation edge), and is
generated from a seed without touching the global RNG. No real molecule set with ground-truth explanations ships
with a PyPI package we could find (MUTAG, Benzene, 3MR are downloads), so those are not provided; any PyG dataset
with ``edge_label`` works with the trainer and metrics.
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.datasets import ExplainerDataset
from torch_geometric.datasets.graph_generator import BAGraph
from torch_geometric.datasets.motif_generator import CycleMotif, HouseMotif
from torch_geometric.utils import coalesce


@contextlib.contextmanager
def _seeded(seed: int):
    """Seed torch and numpy (PyG's ``barabasi_albert_graph`` draws from both) and restore their global states."""
    state = np.random.get_state()
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            np.random.seed(seed)
            yield
    finally:
        np.random.set_state(state)


def _motif_graphs(motif, count: int, num_nodes: int, num_edges: int) -> list:
    if count == 0:
        return []
    dataset = ExplainerDataset(
        BAGraph(num_nodes=num_nodes, num_edges=num_edges), motif, num_motifs=1, num_graphs=count
    )
    return [dataset[i] for i in range(count)]


def _sorted_graph(edge_index: torch.Tensor, edge_mask: torch.Tensor, num_nodes: int):
    edge_index, edge_label = coalesce(edge_index, edge_mask.float(), num_nodes=num_nodes, reduce="max")
    return edge_index, edge_label


def ba_2motifs(
    num_graphs: int = 1000,
    seed: int = 0,
    num_base_nodes: int = 20,
    num_base_edges: int = 1,
    num_node_features: int = 10,
) -> list[Data]:
    """BA-2Motifs: ``num_graphs`` graphs, half with a house (``y = 0``), half with a 5-cycle (``y = 1``), shuffled.

    Args:
        num_graphs (`int`, *optional*, defaults to 1000): total graphs (the benchmark's size); must be even and >= 2.
        seed (`int`, *optional*, defaults to 0): the generator seed (the global RNG is left untouched).
        num_base_nodes (`int`, *optional*, defaults to 20), num_base_edges (`int`, *optional*, defaults to 1):
            the Barabasi-Albert base graph (each new node attaches ``num_base_edges`` edges).
        num_node_features (`int`, *optional*, defaults to 10): node features are the constant 0.1 (as the original).

    Returns:
        `list[torch_geometric.data.Data]` with ``x`` `(25, 10)`, ``edge_index`` (undirected, sorted), ``y`` `(1,)`,
        ``edge_label`` `(E,)` (1.0 on the motif's 12 / 10 directed edges) and ``node_label`` `(25,)`.

    Raises:
        ValueError: for an odd or too small ``num_graphs``.
    """
    if not isinstance(num_graphs, int) or num_graphs < 2 or num_graphs % 2:
        raise ValueError(f"`num_graphs` must be an even int >= 2, but is {num_graphs!r}")
    with _seeded(seed):
        half = num_graphs // 2
        raw = [(g, 0) for g in _motif_graphs(HouseMotif(), half, num_base_nodes, num_base_edges)]
        raw += [(g, 1) for g in _motif_graphs(CycleMotif(5), half, num_base_nodes, num_base_edges)]
        order = torch.randperm(num_graphs).tolist()
    graphs = []
    for i in order:
        g, label = raw[i]
        edge_index, edge_label = _sorted_graph(g.edge_index, g.edge_mask, g.num_nodes)
        graphs.append(
            Data(
                x=torch.full((g.num_nodes, num_node_features), 0.1),
                edge_index=edge_index,
                y=torch.tensor([label]),
                edge_label=edge_label,
                node_label=g.node_mask.float(),
            )
        )
    return graphs


def ba_shapes(
    seed: int = 0,
    num_base_nodes: int = 300,
    num_base_edges: int = 5,
    num_motifs: int = 80,
    num_node_features: int = 10,
    split: tuple[float, float, float] = (0.8, 0.1, 0.1),
) -> dict[str, list[Data]]:
    """BA-Shapes: one BA graph with house motifs; node classification (4 classes), ground-truth edges = houses.

    The node split is expressed the Hugging Face way: the same graph three times with ``y = -100`` on the nodes
    outside the split, so a loss / metric over ``y != -100`` sees only that split.

    Args:
        seed (`int`, *optional*, defaults to 0).
        num_base_nodes (`int`, *optional*, defaults to 300), num_base_edges (`int`, *optional*, defaults to 5),
        num_motifs (`int`, *optional*, defaults to 80): the original sizes (700 nodes).
        num_node_features (`int`, *optional*, defaults to 10): constant features 1.0.
        split (`tuple`, *optional*, defaults to `(0.8, 0.1, 0.1)`): train / validation / test node fractions.

    Returns:
        `dict` with ``"train"``, ``"validation"``, ``"test"``: each a one-graph list.

    Raises:
        ValueError: if ``split`` does not have three positive fractions summing to 1.
    """
    if len(split) != 3 or min(split) <= 0 or abs(sum(split) - 1) > 1e-6:
        raise ValueError(f"`split` must be three positive fractions summing to 1, but is {split!r}")
    with _seeded(seed):
        g = ExplainerDataset(BAGraph(num_nodes=num_base_nodes, num_edges=num_base_edges), HouseMotif(), num_motifs)[0]
        perm = torch.randperm(g.num_nodes)
    edge_index, edge_label = _sorted_graph(g.edge_index, g.edge_mask, g.num_nodes)
    n_train, n_val = int(split[0] * g.num_nodes), int(split[1] * g.num_nodes)
    parts = {"train": perm[:n_train], "validation": perm[n_train : n_train + n_val], "test": perm[n_train + n_val :]}
    out = {}
    for name, nodes in parts.items():
        y = torch.full((g.num_nodes,), -100, dtype=torch.long)
        y[nodes] = g.y[nodes]
        out[name] = [
            Data(
                x=torch.ones(g.num_nodes, num_node_features),
                edge_index=edge_index,
                y=y,
                edge_label=edge_label,
                node_label=g.node_mask.float(),
            )
        ]
    return out


def split_dataset(graphs: list, fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)) -> dict[str, list]:
    """Split a list of graphs into ``train`` / ``validation`` / ``test`` in order (shuffle beforehand; the
    generators here already do). The authors use 80 / 10 / 10.

    Raises:
        ValueError: if ``fractions`` are not three positive numbers summing to 1.
    """
    if len(fractions) != 3 or min(fractions) <= 0 or abs(sum(fractions) - 1) > 1e-6:
        raise ValueError(f"`fractions` must be three positive numbers summing to 1, but is {fractions!r}")
    n_train, n_val = int(fractions[0] * len(graphs)), int(fractions[1] * len(graphs))
    return {
        "train": graphs[:n_train],
        "validation": graphs[n_train : n_train + n_val],
        "test": graphs[n_train + n_val :],
    }
