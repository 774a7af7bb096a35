"""The SI-GNN training losses and the self-consistency (SC) loss of SC-GNN (Tai et al., ICLR 2026).

``L = ce_loss_weight * CE + reg_loss_weight * reg + sc_loss_weight * L_SC`` with

``L_SC = mean |h(stopgrad(emb(G))) - h(stopgrad(emb(G * att)))|``

where ``h`` is the explainer's deterministic attention map (sigmoid, symmetrised) and ``att`` the attention that
weighted the graph for the prediction. Both embeddings are detached, so the gradient of ``L_SC`` reaches only the
explainer's parameters (the authors' ``GSATSCTrainer`` and its ATT / SIZE / CAL siblings in ``code/trainer.py``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn


class SelfConsistencyLoss(nn.Module):
    r"""Model-agnostic self-consistency loss ``mean |att_old - att_new|``.

    * ``att_old = explain(stopgrad(embeddings))`` -- the explanation of ``G``;
    * ``emb_new = stopgrad(encode(attention))`` -- the encoder on the explanation subgraph ``G_s`` (``G`` weighted by
      ``attention``), run without building a graph (its gradient would be discarded anyway);
    * ``att_new = explain(emb_new)`` -- the explanation of ``G_s``.

    A self-consistent explainer gives ``h(G_s) = h(G)``; the paper ties this to faithfulness ``f(G_s) = f(G)``.
    The loss is 0 for a constant explainer and for an encoder that ignores edge weights (``emb_new = emb``); its
    gradient reaches only the parameters used inside ``explain``.

    Works with any SI-GNN: pass callables for its explainer (deterministic, e.g. sigmoid of the logits) and encoder.
    [`SelfConsistencyTrainer`] calls it with :meth:`SelfInterpretableGNN.explain_embeddings` and
    :meth:`SelfInterpretableGNN.encode`.

    Example:

    ```python
    >>> sc = SelfConsistencyLoss()
    >>> loss = sc(explain=lambda emb: model.explain_embeddings(emb, edge_index, batch), embeddings=out.node_embeddings,
    ...           encode=lambda w: model.encode(x, edge_index, w), attention=out.edge_attention)
    ```
    """

    def forward(
        self,
        explain: Callable[[torch.Tensor], torch.Tensor],
        embeddings: torch.Tensor,
        *,
        encode: Callable[[torch.Tensor], torch.Tensor] | None = None,
        attention: torch.Tensor | None = None,
        new_embeddings: torch.Tensor | None = None,
    ) -> torch.Tensor:
        r"""Compute ``L_SC`` (a scalar; unweighted).

        Args:
            explain (`Callable`): embeddings `(N, H)` -> attention in [0, 1] (`(E,)` or any fixed shape).
            embeddings (`torch.Tensor` of shape `(N, H)`): ``emb(G)``.
            encode (`Callable`, *optional*): edge weights `(E,)` -> embeddings `(N, H)` of the weighted graph.
            attention (`torch.Tensor` of shape `(E,)`, *optional*): the edge weights defining ``G_s``.
            new_embeddings (`torch.Tensor` of shape `(N, H)`, *optional*): ``emb(G_s)`` if already computed (then
                ``encode`` and ``attention`` must be omitted).

        Raises:
            ValueError: unless exactly one of ``new_embeddings`` or (``encode`` and ``attention``) is given.
        """
        if new_embeddings is None:
            if encode is None or attention is None:
                raise ValueError("Pass `new_embeddings`, or both `encode` and `attention`.")
            with torch.no_grad():
                new_embeddings = encode(attention.detach())
        elif encode is not None or attention is not None:
            raise ValueError("Pass either `new_embeddings` or (`encode`, `attention`), not both.")
        att_old = explain(embeddings.detach())
        att_new = explain(new_embeddings.detach())
        return (att_old - att_new).abs().mean()


def classification_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """BCE-with-logits for one logit (binary, as the authors' code), cross-entropy otherwise; labels ``-100`` are
    ignored (unlabelled nodes in a node task)."""
    labels = labels.view(-1)
    if logits.shape[-1] == 1:
        keep = labels != -100
        return F.binary_cross_entropy_with_logits(logits.view(-1)[keep], labels[keep].to(logits.dtype))
    return F.cross_entropy(logits, labels.long(), ignore_index=-100)


def bernoulli_kl(attention: torch.Tensor, r: float) -> torch.Tensor:
    r"""GSAT's information regulariser: mean KL(Bernoulli(att) || Bernoulli(r)) in the authors' form
    ``att * log(att / r + 1e-6) + (1 - att) * log((1 - att) / (1 - r + 1e-6) + 1e-6)`` (GSAT, arXiv 2201.12987,
    Eq. 8)."""
    return (
        attention * torch.log(attention / r + 1e-6)
        + (1 - attention) * torch.log((1 - attention) / (1 - r + 1e-6) + 1e-6)
    ).mean()


def shortcut_uniformity_loss(shortcut_logits: torch.Tensor) -> torch.Tensor:
    """CAL's shortcut loss: the shortcut branch should predict uniformly. Binary: :func:`bernoulli_kl` of its
    probability to 0.5; multi-class: ``KL(uniform || softmax)`` (``F.kl_div``, batch mean)."""
    if shortcut_logits.shape[-1] == 1:
        return bernoulli_kl(shortcut_logits.sigmoid(), 0.5)
    uniform = torch.full_like(shortcut_logits, 1.0 / shortcut_logits.shape[-1])
    return F.kl_div(shortcut_logits.log_softmax(-1), uniform, reduction="batchmean")


def gsat_r(config, epoch: int, finetune: bool = False) -> float:
    """GSAT's prior ``r`` at ``epoch`` (0-based): ``max(gsat_r, gsat_init_r - (epoch // gsat_decay_interval) *
    gsat_decay_r)``; the final ``gsat_r`` throughout SC fine-tuning (the authors' ``GSATSCTrainer.get_r``)."""
    if finetune:
        return config.gsat_r
    return max(config.gsat_r, config.gsat_init_r - (epoch // config.gsat_decay_interval) * config.gsat_decay_r)


def sparsity_weight(config, epoch: int) -> float:
    """SIZE / CAL+CR sparsity weight at ``epoch`` (0-based): ``reg_loss_weight * min(1, (epoch + 1) / warm-up)``."""
    return config.reg_loss_weight * min(1.0, (epoch + 1) / config.sparsity_warmup_epochs)


def si_gnn_loss(
    model,
    inputs: dict[str, torch.Tensor],
    outputs,
    labels: torch.Tensor,
    epoch: int = 0,
    finetune: bool = False,
    sc_loss: SelfConsistencyLoss | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    r"""The full training loss of an SI-GNN (with the SC term when ``model.config.use_self_consistency``).

    Args:
        model ([`SelfInterpretableGNN`]).
        inputs (`dict`): the model inputs (``x``, ``edge_index``, ``batch``).
        outputs ([`SelfInterpretableGNNOutput`]): ``model(**inputs)``.
        labels (`torch.Tensor`): graph (or node) labels, ``-100`` = unlabelled.
        epoch (`int`, *optional*, defaults to 0): 0-based epoch, for GSAT's ``r`` and the sparsity warm-up.
        finetune (`bool`, *optional*, defaults to `False`): the SC fine-tuning stage (GSAT uses the final ``r``).
        sc_loss ([`SelfConsistencyLoss`], *optional*).

    Returns:
        `(loss, parts)`: the scalar loss and its unweighted parts (``ce``, ``reg``, ``sc`` ... as floats).
    """
    config = model.config
    parts: dict[str, torch.Tensor] = {}
    if config.si_gnn == "cal":
        parts["ce"] = classification_loss(outputs.logits, labels)  # intervention (prediction) loss
        parts["causal"] = classification_loss(outputs.causal_logits, labels)
        parts["shortcut"] = shortcut_uniformity_loss(outputs.shortcut_logits)
        loss = (
            config.cal_intervention_weight * parts["ce"]
            + config.cal_causal_weight * parts["causal"]
            + config.cal_shortcut_weight * parts["shortcut"]
        )
        if config.reg_loss_weight:
            parts["reg"] = outputs.attention.mean()
            loss = loss + sparsity_weight(config, epoch) * parts["reg"]
    else:
        parts["ce"] = classification_loss(outputs.logits, labels)
        loss = config.ce_loss_weight * parts["ce"]
        if config.si_gnn == "gsat":
            parts["reg"] = bernoulli_kl(outputs.attention, gsat_r(config, epoch, finetune))
            loss = loss + config.reg_loss_weight * parts["reg"]
        elif config.si_gnn == "size":
            parts["reg"] = outputs.attention.mean()
            loss = loss + sparsity_weight(config, epoch) * parts["reg"]
    if config.use_self_consistency:
        sc_loss = sc_loss or SelfConsistencyLoss()
        x, edge_index, batch = inputs["x"], inputs["edge_index"], inputs.get("batch")
        if batch is None:
            batch = torch.zeros(x.shape[0], dtype=torch.long, device=x.device)
        if config.sc_encoder_attention == "sample":
            attention = outputs.edge_attention
        else:
            attention = model.to_edge_attention(outputs.attention_logits.sigmoid(), edge_index, x.shape[0])
        parts["sc"] = sc_loss(
            explain=lambda emb: model.explain_embeddings(emb, edge_index, batch),
            embeddings=outputs.node_embeddings,
            encode=lambda weight: model.encode(x.to(model.dtype), edge_index, weight),
            attention=attention,
        )
        loss = loss + config.sc_loss_weight * parts["sc"]
    return loss, {name: float(value.detach()) for name, value in parts.items()}
