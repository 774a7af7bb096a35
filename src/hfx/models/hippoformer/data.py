"""Random walks on graphs with random sensory tokens per node, as ``datasets.Dataset`` (the TEM / Hippoformer task).

Each environment is a graph (a ``size x size`` square grid, a hexagonal = triangular-lattice grid, or a square
torus) whose nodes carry sensory tokens drawn uniformly from ``[0, V)``; a walk moves to a uniformly chosen
neighbour each step. Rows have ``observations`` `(T,)` (token of the node at step ``t``), ``actions`` `(T,)` (the
move into step ``t``; ``actions[0] = num_actions`` is the start id), ``nodes`` `(T,)` (node ids, for rate maps),
``revisited`` `(T,)` (1 where the node was visited earlier in the walk: only there is ``o_t`` predictable), and
``labels`` (= observations). A new environment (graph tokens) is sampled for every walk, so nothing can be memorised
across walks: only the structure (how actions compose) transfers. Splits by environment size and walk length are
made by :func:`generalization_splits`.
"""

from __future__ import annotations

import tempfile

import numpy as np


# family -> list of (action id, row delta, col delta); hex uses axial coordinates
GRAPH_FAMILIES = {
    "square": [(0, -1, 0), (1, 0, 1), (2, 1, 0), (3, 0, -1)],  # N, E, S, W
    "hexagonal": [(0, -1, 0), (1, -1, 1), (2, 0, 1), (3, 1, 0), (4, 1, -1), (5, 0, -1)],
    "torus": [(0, -1, 0), (1, 0, 1), (2, 1, 0), (3, 0, -1)],
}


def num_actions_of(graph: str) -> int:
    """Movement actions of a family (4 for square / torus, 6 for hexagonal)."""
    _check_graph(graph)
    return len(GRAPH_FAMILIES[graph])


def _check_graph(graph):
    if graph not in GRAPH_FAMILIES:
        raise ValueError(f"`graph` must be one of {sorted(GRAPH_FAMILIES)}, but is {graph!r}")


def sample_walk(rng: np.random.Generator, size: int, walk_length: int, vocab_size: int, graph: str = "square"):
    """One walk in a fresh environment; returns a dict of int64 arrays (see the module docstring).

    Raises:
        ValueError: for ``size < 2``, ``walk_length < 1``, ``vocab_size < 2`` or an unknown ``graph``.
    """
    _check_graph(graph)
    if size < 2 or walk_length < 1 or vocab_size < 2:
        raise ValueError(
            f"need `size` >= 2, `walk_length` >= 1, `vocab_size` >= 2; got {size}, {walk_length}, {vocab_size}"
        )
    moves = GRAPH_FAMILIES[graph]
    tokens = rng.integers(0, vocab_size, size=size * size)
    r, c = (int(v) for v in rng.integers(0, size, size=2))
    nodes, actions = [r * size + c], [len(moves)]
    for _ in range(walk_length - 1):
        options = []
        for a, dr, dc in moves:
            nr, nc = r + dr, c + dc
            if graph == "torus":
                nr, nc = nr % size, nc % size
            if 0 <= nr < size and 0 <= nc < size:
                options.append((a, nr, nc))
        a, r, c = options[rng.integers(len(options))]
        nodes.append(r * size + c)
        actions.append(a)
    nodes = np.asarray(nodes, dtype=np.int64)
    seen, revisited = set(), np.zeros(walk_length, dtype=np.int64)
    for t, n in enumerate(nodes.tolist()):
        revisited[t] = n in seen
        seen.add(n)
    obs = tokens[nodes].astype(np.int64)
    return {
        "observations": obs,
        "actions": np.asarray(actions, np.int64),
        "nodes": nodes,
        "revisited": revisited,
        "labels": obs.copy(),
    }


def random_walk_dataset(
    num_walks: int,
    size: int = 4,
    walk_length: int = 50,
    vocab_size: int = 16,
    graph: str = "square",
    seed: int = 0,
):
    """A ``datasets.Dataset`` of ``num_walks`` random walks (one fresh environment each), built with
    ``Dataset.from_generator`` and formatted as torch tensors.

    Args:
        num_walks (`int`): rows. size (`int`): grid side (``size**2`` nodes). walk_length (`int`): steps ``T``.
        vocab_size (`int`): sensory tokens ``V``. graph (`str`): ``"square"``, ``"hexagonal"`` or ``"torus"``.
        seed (`int`): the walks are a deterministic function of all arguments.
    """
    from datasets import Dataset

    if num_walks < 1:
        raise ValueError(f"`num_walks` must be >= 1, but is {num_walks}")
    _check_graph(graph)

    def gen(num_walks, size, walk_length, vocab_size, graph, seed):
        rng = np.random.default_rng(seed)
        for _ in range(num_walks):
            yield {k: v.tolist() for k, v in sample_walk(rng, size, walk_length, vocab_size, graph).items()}

    kwargs = dict(
        num_walks=num_walks, size=size, walk_length=walk_length, vocab_size=vocab_size, graph=graph, seed=seed
    )
    # a private cache dir: `from_generator` would otherwise reuse a cached table keyed by the generator's arguments
    # (stale after a code change); the table is kept in memory, so the folder can go at once
    with tempfile.TemporaryDirectory(prefix="hfx_walks_") as cache_dir:
        ds = Dataset.from_generator(gen, gen_kwargs=kwargs, keep_in_memory=True, cache_dir=cache_dir)
    return ds.with_format("torch")


def generalization_splits(
    num_train: int = 512,
    num_test: int = 128,
    train_size: int = 4,
    train_length: int = 50,
    test_sizes=(4, 6),
    test_lengths=(50, 100),
    vocab_size: int = 16,
    graph: str = "square",
    seed: int = 0,
):
    """A ``datasets.DatasetDict`` with ``"train"`` (``train_size``, ``train_length``) and one test split per
    (size, length) pair, named ``"test_s{size}_t{length}"``; test seeds differ from the training seed."""
    from datasets import DatasetDict

    splits = {"train": random_walk_dataset(num_train, train_size, train_length, vocab_size, graph, seed)}
    for i, s in enumerate(test_sizes):
        for j, t in enumerate(test_lengths):
            splits[f"test_s{s}_t{t}"] = random_walk_dataset(
                num_test, s, t, vocab_size, graph, seed=10_000 + 100 * seed + 10 * i + j
            )
    return DatasetDict(splits)


__all__ = ["GRAPH_FAMILIES", "generalization_splits", "num_actions_of", "random_walk_dataset", "sample_walk"]
