"""MemGAS's association graph: GMM-based linking of new memories to old ones, and Personalized PageRank over it
(arXiv 2505.19549, Sec. 3.2 and 3.4; ``construct_asso.py`` and ``run_ppr`` in the authors' code)."""

from __future__ import annotations

import warnings

import numpy as np
import torch


def gmm_accept_mask(scores, n_components: int = 2, random_state: int = 0, init_params: str = "kmeans") -> np.ndarray:
    """Which scores fall in the Gaussian-mixture component with the highest mean (the "accept set").

    A 1-D ``sklearn.mixture.GaussianMixture(n_components)`` is fitted to ``scores``; every score assigned to the
    component whose mean is largest is accepted [code].

    Args:
        scores (array-like of shape `(M,)`): similarity scores of M candidates.
        n_components (`int`, *optional*, defaults to `2`): mixture components (>= 1).
        random_state (`int`, *optional*, defaults to `0`).
        init_params (`str`, *optional*, defaults to `"kmeans"`): scikit-learn's initialisation.

    Returns:
        `np.ndarray` of bool, shape `(M,)`. With fewer than ``n_components`` scores, or fewer distinct values than
        components (no mixture can be fitted), nothing is accepted.

    Raises:
        ValueError: for ``n_components < 1`` or non-finite scores.
    """
    from sklearn.mixture import GaussianMixture

    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    if n_components < 1:
        raise ValueError(f"`n_components` must be >= 1, got {n_components}")
    if not np.isfinite(scores).all():
        raise ValueError("`scores` contains NaN or inf")
    if scores.size < n_components or np.unique(scores).size < n_components:
        return np.zeros(scores.shape, dtype=bool)
    gmm = GaussianMixture(n_components=n_components, random_state=random_state, init_params=init_params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning on near-duplicate scores: the fit is still usable
        labels = gmm.fit(scores[:, None]).predict(scores[:, None])
    return labels == int(np.argmax(gmm.means_.reshape(-1)))


def associate(
    node_embedding: torch.Tensor,
    candidate_embeddings: torch.Tensor,
    method: str = "gmm",
    mem_threshold: int = 30,
    n_components: int = 2,
    top_k: int = 5,
    random_state: int = 0,
    init_params: str = "kmeans",
) -> torch.LongTensor:
    """Indices of the earlier memories a new memory node is linked to.

    The candidates are the ``mem_threshold`` earlier nodes most similar (dot product) to the new node [code]. Then
    ``"gmm"`` keeps those in the higher-mean component of a 1-D GMM over their similarities (:func:`gmm_accept_mask`)
    [code]; ``"topk"`` keeps the ``top_k`` most similar; ``"none"`` keeps none.

    Args:
        node_embedding (`torch.Tensor` of shape `(d,)`).
        candidate_embeddings (`torch.Tensor` of shape `(M, d)`): the nodes of earlier sessions.
        method (`str`, *optional*, defaults to `"gmm"`): ``"gmm"``, ``"topk"`` or ``"none"``.

    Returns:
        `torch.LongTensor` of shape `(E,)`: row indices into ``candidate_embeddings``, most similar first.

    Raises:
        ValueError: for an unknown ``method``.
    """
    if method not in ("gmm", "topk", "none"):
        raise ValueError(f"`method` must be 'gmm', 'topk' or 'none', got {method!r}")
    if method == "none" or candidate_embeddings.shape[0] == 0:
        return torch.zeros(0, dtype=torch.long)
    sims = candidate_embeddings.float() @ node_embedding.float()
    order = torch.argsort(sims, descending=True, stable=True)
    if method == "topk":
        return order[: min(top_k, order.numel())]
    top = order[: min(mem_threshold, order.numel())]
    mask = gmm_accept_mask(
        sims[top].numpy(), n_components=n_components, random_state=random_state, init_params=init_params
    )
    return top[torch.from_numpy(mask)]


def personalized_pagerank(
    edge_index: torch.Tensor,
    num_nodes: int,
    reset: torch.Tensor,
    damping: float = 0.1,
    max_iter: int = 100,
    tol: float = 1e-10,
) -> torch.Tensor:
    r"""Personalized PageRank on an undirected graph by power iteration (igraph ``personalized_pagerank`` semantics).

    :math:`p \leftarrow (1-d)\,r + d\,(P^\top p + m_{dangling}(p)\,r)`, with :math:`P = D^{-1}A` the random-walk
    matrix of the undirected graph (an edge listed once counts in both directions), :math:`r` the reset vector
    normalised to sum 1, :math:`d` = ``damping`` the probability of following an edge, and the mass of nodes without
    edges sent back to :math:`r` -- what igraph's PRPACK and networkx do.

    Args:
        edge_index (`torch.LongTensor` of shape `(E, 2)`): undirected edges (i, j).
        num_nodes (`int`): n.
        reset (`torch.Tensor` of shape `(n,)` or `(B, n)`): non-negative personalisation weights (one row per query).
        damping (`float`, *optional*, defaults to `0.1`): in [0, 1) [code: 0.1].
        max_iter (`int`, *optional*, defaults to `100`) / tol (`float`, *optional*, defaults to `1e-10`): stop when
            the L1 change of every row is below ``tol`` or after ``max_iter`` steps.

    Returns:
        `torch.Tensor` of shape `(n,)` or `(B, n)` (as ``reset``), float64, each row summing to 1.

    Raises:
        ValueError: for a negative or non-finite reset, a row summing to 0, a bad edge index or damping.
    """
    if not 0.0 <= damping < 1.0:
        raise ValueError(f"`damping` must be in [0, 1), got {damping}")
    squeeze = reset.dim() == 1
    r = reset.to(torch.float64).reshape(-1, num_nodes) if reset.numel() else reset.to(torch.float64)
    if r.shape[-1] != num_nodes:
        raise ValueError(f"`reset` must have {num_nodes} entries per row, got shape {tuple(reset.shape)}")
    if not torch.isfinite(r).all() or (r < 0).any():
        raise ValueError("`reset` must be finite and non-negative")
    mass = r.sum(-1, keepdim=True)
    if (mass <= 0).any():
        raise ValueError("every `reset` row needs a positive sum")
    r = r / mass
    edge_index = torch.as_tensor(edge_index, dtype=torch.long).reshape(-1, 2)
    if edge_index.numel() and (edge_index.min() < 0 or edge_index.max() >= num_nodes):
        raise ValueError(f"`edge_index` has node ids outside [0, {num_nodes})")
    src = torch.cat([edge_index[:, 0], edge_index[:, 1]])
    dst = torch.cat([edge_index[:, 1], edge_index[:, 0]])
    degree = torch.bincount(src, minlength=num_nodes).to(torch.float64)
    dangling = degree == 0
    weights = 1.0 / degree.clamp(min=1)[src]
    # transition^T as a sparse (n, n) matrix: column j of P^T p gathers p[src] / deg[src] into dst
    pt = torch.sparse_coo_tensor(
        torch.stack([dst, src]), weights, (num_nodes, num_nodes), check_invariants=False
    ).coalesce()
    p = r.clone()
    for _ in range(max_iter):
        walk = torch.sparse.mm(pt, p.T).T  # (B, n)
        new = (1.0 - damping) * r + damping * (walk + p[:, dangling].sum(-1, keepdim=True) * r)
        delta = (new - p).abs().sum(-1).max()
        p = new
        if delta < tol:
            break
    p = p / p.sum(-1, keepdim=True)
    return p[0] if squeeze else p
