"""`hfx publish sc-gnn`: write a Hub-ready :class:`~hfx.gnn.self_consistency.SelfInterpretableGNN` folder + card."""

from __future__ import annotations

from pathlib import Path


def publish(out_dir: Path, source=None, repo_id: str | None = None, **kw) -> Path:
    """Save a self-interpretable GNN (``config.json`` + ``model.safetensors``) and its rendered model card.

    Args:
        out_dir (`Path`): destination folder (created).
        source (`str`, *optional*): a trained model folder or repo id (``SelfInterpretableGNN.from_pretrained``).
            Without it an **untrained** GSAT + SC model for BA-2Motifs is written, and the card says so.
        repo_id (`str`, *optional*): the repo id shown in the card's usage snippet.

    Returns:
        `Path`: ``out_dir``.

    Raises:
        ValueError: for unexpected keyword arguments.
    """
    if kw:
        raise ValueError(f"unexpected arguments for `hfx publish sc-gnn`: {sorted(kw)}")
    from hfx.hub import card_data, write_model_card

    from .configuration import SelfInterpretableGNNConfig
    from .modeling import SelfInterpretableGNN

    out_dir = Path(out_dir)
    if source:
        model = SelfInterpretableGNN.from_pretrained(source)
    else:
        import torch

        torch.manual_seed(0)
        model = SelfInterpretableGNN(SelfInterpretableGNNConfig(si_gnn="gsat", use_self_consistency=True))
    model.save_pretrained(out_dir)
    config = model.config
    name = f"{config.si_gnn.upper()}{' + SC' if config.use_self_consistency else ''} (GIN)"
    data = card_data(
        method="sc-gnn",
        tags=["graph-neural-networks", "explainability", "self-interpretable-gnn", "pytorch-geometric", config.si_gnn],
        model_name=name,
    )
    write_model_card(
        out_dir,
        "sc-gnn",
        data,
        repo_id=repo_id or "hfx/sc-gnn",
        model_name=name,
        si_gnn=config.si_gnn.upper(),
        use_self_consistency=config.use_self_consistency,
        sc_loss_weight=config.sc_loss_weight,
        reg_loss_weight=config.reg_loss_weight,
        sc_training=config.sc_training,
        task=config.task,
        attention_level=config.attention_level,
        num_node_features=config.num_node_features,
        num_classes=config.num_classes,
        hidden_size=config.hidden_size,
        num_layers=config.num_layers,
        trained_note=None
        if source
        else "**Untrained demo**: random weights, for testing the publish / pull path only. Publish a trained model "
        "with `hfx publish sc-gnn --source PATH` (e.g. the folder written by `hfx sc-gnn --out PATH`).",
    )
    return out_dir
