"""Self-interpretable GNNs (GSAT, ATT, SIZE, CAL) on a GIN backbone, as a `transformers.PreTrainedModel`.

An SI-GNN predicts through its own explanation: an encoder embeds the graph, an explainer turns the embeddings into
edge (or node) attention, and a classifier runs on the attention-weighted graph. The architecture follows the SC-GNN
authors' code (github.com/ICDM-UESTC/SelfConsistencyXGNN, ``model.py`` / ``explainer.py``): GIN convolutions whose
messages are multiplied by the edge attention, an explainer MLP with instance norm, and a sum-pooled MLP head.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import GINConv, InstanceNorm, global_add_pool
from transformers import PreTrainedModel
from transformers.utils import ModelOutput

from hfx.utils.artifacts import ModelArtifactMixin, register_module

from .configuration import SelfInterpretableGNNConfig


# --------------------------------------------------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------------------------------------------------


class WeightedGINConv(GINConv):
    r"""PyG's :class:`~torch_geometric.nn.conv.GINConv` whose messages are scaled by an edge weight:

    ``x_i' = nn((1 + eps) * x_i + sum_{j in N(i)} w_ji * x_j)``  (``w = 1`` without ``edge_weight``).

    This is how an SI-GNN's classifier (and the SC term's ``emb_new``) sees the attention-weighted graph.
    """

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_weight: torch.Tensor | None = None):
        """Args: ``x`` `(N, F)`, ``edge_index`` `(2, E)`, ``edge_weight`` `(E,)` or `None`. Returns `(N, F')`."""
        # propagate_type: (x: OptPairTensor, edge_weight: OptTensor)
        out = self.propagate(edge_index, x=(x, x), edge_weight=edge_weight)
        return self.nn(out + (1 + self.eps) * x)

    def message(self, x_j: torch.Tensor, edge_weight: torch.Tensor | None = None) -> torch.Tensor:
        return x_j if edge_weight is None else x_j * edge_weight.view(-1, 1)


def dropout(h: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Inverted dropout (as ``F.dropout``) with the mask drawn by ``torch.rand_like``: the same distribution, about
    3x cheaper on CPU than ``F.dropout``'s Bernoulli sampler, which dominated the step time of these small GNNs."""
    if not training or p == 0:
        return h
    return h * (torch.rand_like(h) >= p).to(h.dtype) * (1.0 / (1.0 - p))


def _gin_mlp(in_channels: int, out_channels: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(in_channels, out_channels),
        nn.BatchNorm1d(out_channels),
        nn.ReLU(),
        nn.Linear(out_channels, out_channels),
    )


def _classifier_head(hidden_size: int, num_logits: int) -> nn.Sequential:
    return nn.Sequential(
        _gin_mlp(hidden_size, hidden_size), nn.BatchNorm1d(hidden_size), nn.Linear(hidden_size, num_logits)
    )


class GINEncoder(nn.Module):
    """Linear node encoder + ``num_layers`` :class:`WeightedGINConv` layers, each followed by ReLU and dropout."""

    def __init__(self, num_node_features: int, hidden_size: int, num_layers: int, dropout: float):
        super().__init__()
        self.node_encoder = nn.Linear(num_node_features, hidden_size)
        self.convs = nn.ModuleList(WeightedGINConv(_gin_mlp(hidden_size, hidden_size)) for _ in range(num_layers))
        self.dropout = dropout

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_weight: torch.Tensor | None = None):
        """Node embeddings `(N, hidden_size)`; ``edge_weight`` `(E,)` scales every layer's messages."""
        h = self.node_encoder(x)
        for conv in self.convs:
            h = dropout(F.relu(conv(h, edge_index, edge_weight)), self.dropout, self.training)
        return h


class AttentionExplainer(nn.Module):
    """The explainer ``h``: an MLP (Linear -> InstanceNorm -> ReLU -> Dropout, widths ``[d, 2d, H, 1]``) mapping
    concatenated endpoint embeddings (edge level, ``d = 2H``) or node embeddings (node level, ``d = H``) to attention
    logits. Instance norm runs per graph (over that graph's edges or nodes)."""

    def __init__(self, hidden_size: int, attention_level: str, dropout: float):
        super().__init__()
        self.attention_level = attention_level
        in_channels = 2 * hidden_size if attention_level == "edge" else hidden_size
        channels = [in_channels, 2 * in_channels, hidden_size, 1]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(channels))
        self.norms = nn.ModuleList(InstanceNorm(c) for c in channels[1:-1])
        self.dropout = dropout

    def forward(self, embeddings: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
        """Attention logits: `(E,)` at edge level, `(N,)` at node level."""
        if self.attention_level == "edge":
            src, dst = edge_index
            h, group = torch.cat([embeddings[src], embeddings[dst]], dim=-1), batch[src]
        else:
            h, group = embeddings, batch
        for linear, norm in zip(self.layers[:-1], self.norms):
            h = dropout(F.relu(norm(linear(h), group)), self.dropout, self.training)
        return self.layers[-1](h).squeeze(-1)


def reverse_edge_permutation(edge_index: torch.Tensor, num_nodes: int | None = None) -> torch.Tensor | None:
    """``perm`` with ``edge_index[:, perm] == edge_index.flip(0)`` (the index of each edge's reverse), or ``None``
    when some edge has no reverse (a directed graph).

    Args:
        edge_index (`torch.LongTensor` of shape `(2, E)`).
        num_nodes (`int`, *optional*): defaults to ``edge_index.max() + 1``.
    """
    if edge_index.numel() == 0:
        return edge_index.new_empty(0)
    n = int(num_nodes if num_nodes is not None else edge_index.max() + 1)
    key = edge_index[0] * n + edge_index[1]
    reverse_key = edge_index[1] * n + edge_index[0]
    sorted_key, order = torch.sort(key)
    pos = torch.searchsorted(sorted_key, reverse_key).clamp(max=key.numel() - 1)
    if not bool((sorted_key[pos] == reverse_key).all()):
        return None
    return order[pos]


def concrete_sample(logits: torch.Tensor, temperature: float = 1.0, training: bool = True) -> torch.Tensor:
    r"""Relaxed Bernoulli (binary concrete) sample ``sigmoid((logits + log u - log(1 - u)) / temperature)``,
    ``u ~ U(1e-10, 1 - 1e-10)``, in training; ``sigmoid(logits)`` otherwise (GSAT, arXiv 2201.12987, Eq. 9; the
    SC-GNN code's ``concrete_sample``). Same shape as ``logits``."""
    if not training:
        return logits.sigmoid()
    u = torch.empty_like(logits).uniform_(1e-10, 1 - 1e-10)
    return ((logits + torch.log(u) - torch.log1p(-u)) / temperature).sigmoid()


# --------------------------------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class SelfInterpretableGNNOutput(ModelOutput):
    """Output of [`SelfInterpretableGNN`].

    Args:
        logits (`torch.FloatTensor` of shape `(num_graphs, num_logits)` or `(num_nodes, num_logits)`): the
            prediction through the explanation (CAL: the intervention head).
        edge_attention (`torch.FloatTensor` of shape `(num_edges,)`): the explanation, in [0, 1]: the concrete
            sample in training, its sigmoid at evaluation; symmetrised on undirected graphs (edge level) or the
            product of the endpoints' attention (node level).
        attention (`torch.FloatTensor` of shape `(num_edges,)` or `(num_nodes,)`): the raw attention before
            symmetrisation (what GSAT's and SIZE's regularisers see).
        attention_logits (`torch.FloatTensor`, same shape as ``attention``): the explainer's logits.
        node_embeddings (`torch.FloatTensor` of shape `(num_nodes, hidden_size)`): ``emb(G)``, the explainer's input.
        causal_logits, shortcut_logits (`torch.FloatTensor`, *optional*): CAL's causal and shortcut branch logits.
    """

    logits: torch.FloatTensor | None = None
    edge_attention: torch.FloatTensor | None = None
    attention: torch.FloatTensor | None = None
    attention_logits: torch.FloatTensor | None = None
    node_embeddings: torch.FloatTensor | None = None
    causal_logits: torch.FloatTensor | None = None
    shortcut_logits: torch.FloatTensor | None = None


class SelfInterpretableGNN(ModelArtifactMixin, PreTrainedModel):
    r"""A self-interpretable GNN (GSAT / ATT / SIZE / CAL over GIN) whose explanation can be trained to be
    self-consistent (SC-GNN, Tai et al., ICLR 2026, OpenReview ``hxGdAUn3sB``).

    ``forward`` computes ``emb = encoder(G)``, attention logits ``explainer(emb)``, the attention (concrete sample in
    training, sigmoid at evaluation) and the prediction ``classifier(G weighted by the attention)``. CAL adds a
    shortcut branch on ``1 - attention`` and predicts from causal + shuffled shortcut embeddings. The losses
    (including the self-consistency term) are computed by [`SelfConsistencyTrainer`] /
    :func:`si_gnn_loss`; this model only exposes the pieces.

    It is a [`~transformers.PreTrainedModel`]: ``save_pretrained`` / ``from_pretrained`` / ``push_to_hub`` and
    ``AutoModel.from_pretrained`` (after ``import hfx`` and once this module is imported) work as usual; a saved folder
    carries this code and an ``auto_map``, so it also loads with plain transformers and ``trust_remote_code=True``.

    Example:

    ```python
    >>> from hfx.gnn.self_consistency import SelfInterpretableGNN, SelfInterpretableGNNConfig, ba_2motifs
    >>> model = SelfInterpretableGNN(SelfInterpretableGNNConfig(si_gnn="gsat", use_self_consistency=True))
    >>> graph = ba_2motifs(num_graphs=2)[0]
    >>> model.explain(graph).shape  # one attention value in [0, 1] per edge
    ```
    """

    config_class = SelfInterpretableGNNConfig
    accepts_loss_kwargs = False  # a mean loss: `Trainer` passes no `num_items_in_batch`, divides by accumulation steps
    base_model_prefix = "si_gnn"
    main_input_name = "x"

    def __init__(self, config: SelfInterpretableGNNConfig):
        super().__init__(config)
        self.encoder = GINEncoder(config.num_node_features, config.hidden_size, config.num_layers, config.dropout)
        self.explainer = AttentionExplainer(config.hidden_size, config.attention_level, config.explainer_dropout)
        # the prediction head (CAL: the intervention head on causal + shortcut embeddings)
        self.classifier = _classifier_head(config.hidden_size, config.num_logits)
        if config.si_gnn == "cal":
            self.causal_classifier = _classifier_head(config.hidden_size, config.num_logits)
            self.shortcut_classifier = _classifier_head(config.hidden_size, config.num_logits)
        self._message_passing_frozen = False
        self.post_init()

    def _init_weights(self, module):
        # PyTorch's default initialisation, as the authors' code (not transformers' N(0, 0.02)).
        if isinstance(module, (nn.Linear, nn.BatchNorm1d)):
            module.reset_parameters()

    # ---------------------------------------------------------------------------------------------- freezing
    def freeze_message_passing(self) -> None:
        """Freeze the GIN convolutions and keep them in eval mode (batch norm statistics fixed) even under
        ``model.train()``: the authors' SC fine-tuning stage. The node encoder, explainer and heads stay trainable."""
        for param in self.encoder.convs.parameters():
            param.requires_grad_(False)
        self._message_passing_frozen = True
        self.encoder.convs.eval()

    def unfreeze_message_passing(self) -> None:
        """Undo :meth:`freeze_message_passing`."""
        for param in self.encoder.convs.parameters():
            param.requires_grad_(True)
        self._message_passing_frozen = False
        self.encoder.convs.train(self.training)

    def train(self, mode: bool = True):
        super().train(mode)
        if self._message_passing_frozen:
            self.encoder.convs.eval()
        return self

    # ---------------------------------------------------------------------------------------------- pieces
    def encode(self, x: torch.Tensor, edge_index: torch.Tensor, edge_weight: torch.Tensor | None = None):
        """``emb(G)`` `(N, hidden_size)`; with ``edge_weight`` `(E,)`, ``emb`` of the weighted graph."""
        return self.encoder(x, edge_index, edge_weight)

    def to_edge_attention(self, attention: torch.Tensor, edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
        """Edge weights `(E,)` from raw attention: edge level, ``(a_ij + a_ji) / 2`` when every edge has a reverse
        (else unchanged); node level, ``a_i * a_j``."""
        if self.config.attention_level == "node":
            return attention[edge_index[0]] * attention[edge_index[1]]
        perm = reverse_edge_permutation(edge_index, num_nodes)
        return attention if perm is None else (attention + attention[perm]) / 2

    def explain_embeddings(self, embeddings: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor):
        """The deterministic explanation ``h(emb)``: sigmoid of the explainer's logits, as edge weights `(E,)`.
        This is the map the self-consistency loss compares on ``emb(G)`` and ``emb(G_s)``."""
        return self.to_edge_attention(self.explainer(embeddings, edge_index, batch).sigmoid(), edge_index, len(batch))

    def readout(self, node_embeddings: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
        """Sum pooling per graph (graph task) or the node embeddings themselves (node task)."""
        return global_add_pool(node_embeddings, batch) if self.config.task == "graph" else node_embeddings

    def predict_from_attention(
        self,
        x: torch.Tensor,
        edge_index: torch.Tensor,
        batch: torch.Tensor,
        edge_attention: torch.Tensor,
        shortcut_attention: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits of the classifier on the graph weighted by ``edge_attention`` `(E,)` (no shuffling).

        CAL predicts from ``emb(G * edge_attention) + emb(G * shortcut_attention)`` (``shortcut_attention``
        defaults to ``1 - edge_attention``); the other SI-GNNs ignore ``shortcut_attention`` and raise if it is given.
        """
        if self.config.si_gnn != "cal":
            if shortcut_attention is not None:
                raise ValueError(f"`shortcut_attention` is only used by CAL, not by {self.config.si_gnn!r}")
            return self.classifier(self.readout(self.encode(x, edge_index, edge_attention), batch))
        if shortcut_attention is None:
            shortcut_attention = 1 - edge_attention
        causal = self.encode(x, edge_index, edge_attention)
        shortcut = self.encode(x, edge_index, shortcut_attention)
        return self.classifier(self.readout(causal + shortcut, batch))

    # ---------------------------------------------------------------------------------------------- forward
    def forward(
        self,
        x: torch.Tensor,
        edge_index: torch.Tensor,
        batch: torch.Tensor | None = None,
        return_dict: bool | None = None,
    ) -> SelfInterpretableGNNOutput:
        r"""Run the SI-GNN on a (batched) graph.

        Args:
            x (`torch.FloatTensor` of shape `(num_nodes, num_node_features)`).
            edge_index (`torch.LongTensor` of shape `(2, num_edges)`).
            batch (`torch.LongTensor` of shape `(num_nodes,)`, *optional*): graph id of each node (PyG's ``batch``);
                defaults to one graph.
            return_dict (`bool`, *optional*): ``False`` returns a tuple.

        Returns:
            [`SelfInterpretableGNNOutput`].

        Raises:
            ValueError: if ``x`` does not have ``config.num_node_features`` columns or ``edge_index`` is not `(2, E)`.
        """
        if x.dim() != 2 or x.shape[1] != self.config.num_node_features:
            raise ValueError(
                f"`x` must have shape (num_nodes, {self.config.num_node_features}), but has {tuple(x.shape)}"
            )
        if edge_index.dim() != 2 or edge_index.shape[0] != 2:
            raise ValueError(f"`edge_index` must have shape (2, num_edges), but has {tuple(edge_index.shape)}")
        if batch is None:
            batch = torch.zeros(x.shape[0], dtype=torch.long, device=x.device)
        x = x.to(self.dtype)
        embeddings = self.encode(x, edge_index)
        attention_logits = self.explainer(embeddings, edge_index, batch)
        attention = concrete_sample(attention_logits, self.config.concrete_temperature, training=self.training)
        edge_attention = self.to_edge_attention(attention, edge_index, x.shape[0])
        causal_logits = shortcut_logits = None
        if self.config.si_gnn == "cal":
            causal = self.encode(x, edge_index, edge_attention)
            shortcut = self.encode(x, edge_index, 1 - edge_attention)
            causal_logits = self.causal_classifier(self.readout(causal, batch))
            shortcut_logits = self.shortcut_classifier(self.readout(shortcut, batch))
            if self.training:  # the authors' intervention: shortcut node embeddings shuffled across the batch
                shortcut = shortcut[torch.randperm(shortcut.shape[0], device=shortcut.device)]
            logits = self.classifier(self.readout(causal + shortcut, batch))
        else:
            logits = self.classifier(self.readout(self.encode(x, edge_index, edge_attention), batch))
        out = SelfInterpretableGNNOutput(
            logits=logits,
            edge_attention=edge_attention,
            attention=attention,
            attention_logits=attention_logits,
            node_embeddings=embeddings,
            causal_logits=causal_logits,
            shortcut_logits=shortcut_logits,
        )
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        return out if return_dict else out.to_tuple()

    # ---------------------------------------------------------------------------------------------- convenience
    @torch.no_grad()
    def _eval_forward(self, data):
        """One forward pass in evaluation mode on a PyG ``Data`` / ``Batch`` (the train/eval mode is restored)."""
        was_training = self.training
        self.eval()
        try:
            batch = getattr(data, "batch", None)
            return self(
                data.x.to(self.device),
                data.edge_index.to(self.device),
                None if batch is None else batch.to(self.device),
            )
        finally:
            self.train(was_training)

    def explain(self, data) -> torch.Tensor:
        """Deterministic edge attention `(num_edges,)` for a PyG ``Data`` / ``Batch`` (evaluation mode, no grad;
        the model's train/eval mode is restored afterwards)."""
        return self._eval_forward(data).edge_attention

    def predict(self, data) -> torch.Tensor:
        """Predicted class ids for a PyG ``Data`` / ``Batch`` (evaluation mode): one per graph (graph task) or node."""
        return logits_to_predictions(self._eval_forward(data).logits)


def logits_to_predictions(logits: torch.Tensor) -> torch.Tensor:
    """Class ids from logits: ``sigmoid > 0.5`` for one logit (binary), ``argmax`` otherwise."""
    if logits.shape[-1] == 1:
        return (logits.squeeze(-1) > 0).long()
    return logits.argmax(-1)


def logits_to_probabilities(logits: torch.Tensor) -> torch.Tensor:
    """Probabilities: ``sigmoid`` of one logit `(B,)` (binary, P(class 1)), ``softmax`` otherwise `(B, C)`."""
    if logits.shape[-1] == 1:
        return logits.squeeze(-1).sigmoid()
    return logits.softmax(-1)


register_module(__name__)  # AutoModel (see hfx.utils.artifacts.ARCHITECTURES)
