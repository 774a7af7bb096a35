"""`hfx publish selective-ssm-theory`: write a Hub-ready folder of the theory model with its model card."""

from __future__ import annotations

import json
from pathlib import Path


def _demo_model(steps: int, seed: int):
    """A seeded theory model trained by full-batch GD on the default majority-voting data (d=16, L=20)."""
    from .configuration_selective_ssm import SelectiveSSMConfig
    from .data import SyntheticSequenceConfig, sample_sequences
    from .experiments import TEST_SEED_OFFSET, seeded_models
    from .training import train_gd

    data = SyntheticSequenceConfig(hidden_size=16, num_irrelevant_patterns=8, alpha_r=0.6, alpha_c=0.2)
    model = seeded_models(
        SelectiveSSMConfig(hidden_size=16, recurrence="input_gate", state_normalization="length"), [seed]
    )[0]
    train = sample_sequences(data, 256, seed=seed)
    test = sample_sequences(data, 1000, seed=TEST_SEED_OFFSET + seed)
    history = train_gd(
        model,
        train["inputs_embeds"],
        train["labels"],
        learning_rate=0.5,
        max_steps=steps,
        eval_inputs_embeds=test["inputs_embeds"],
        eval_labels=test["labels"],
        patterns=data.patterns(),
        log_every=max(1, steps),
    )
    return model, data, history


def publish(out_dir: Path, source=None, repo_id: str | None = None, steps: int = 300, seed: int = 0, **kw) -> Path:
    """Save a :class:`~hfx.models.selective_ssm.SelectiveSSMForSequenceClassification` + the rendered card.

    Args:
        out_dir (`Path`): destination folder (created).
        source (`str`, *optional*): a saved model folder (``from_pretrained``). Without it, a **demo** model is
            trained here by full-batch GD (``steps`` iterations, ``seed``) on majority-voting data (α_r = 0.6,
            α_c = 0.2, d = 16, L = 20, 256 examples) and its synthetic-data config is saved as
            ``synthetic_data_config.json`` beside it; the card reports its test accuracy and gate cosines.
        repo_id (`str`, *optional*): the repo id shown in the card's usage snippet.
        steps (`int`, *optional*, defaults to `300`), seed (`int`, *optional*, defaults to `0`): the demo's training.

    Returns:
        `Path`: ``out_dir``.

    Raises:
        ValueError: for ``steps < 0``.
    """
    from hfx.hub import card_data, write_model_card

    from .modeling_selective_ssm import SelectiveSSMForSequenceClassification

    if not isinstance(steps, int) or steps < 0:
        raise ValueError(f"`steps` must be an int >= 0, but is {steps!r}")
    out_dir = Path(out_dir)
    demo = None
    if source:
        model = SelectiveSSMForSequenceClassification.from_pretrained(source)
    else:
        model, data, history = _demo_model(steps, seed)
        demo = {
            "steps": steps,
            "seed": seed,
            "test_accuracy": round(history.eval_accuracy[-1], 4),
            "cos_plus": round(history.cos_plus[-1], 3),
            "cos_minus": round(history.cos_minus[-1], 3),
            "cos_irrelevant_max_abs": round(history.cos_irrelevant_max_abs[-1], 3),
            "data": data.to_dict(),
        }
    model.save_pretrained(out_dir)
    if demo is not None:
        (out_dir / "synthetic_data_config.json").write_text(json.dumps(demo["data"], indent=1) + "\n")
    config = model.config
    data = card_data(
        method="selective-ssm-theory",
        arxiv_id="2602.12499",
        tags=["mamba", "state-space-model", "theory", "synthetic-data"],
        model_name="Selective SSM (Mamba training-dynamics theory model)",
    )
    write_model_card(
        out_dir,
        "selective-ssm-theory",
        data,
        repo_id=repo_id or "hfx/selective-ssm-theory",
        hidden_size=config.hidden_size,
        state_size=config.state_size,
        recurrence=config.recurrence,
        state_normalization=config.state_normalization,
        mlp_hidden_size=config.mlp_hidden_size,
        mlp_output=config.mlp_output,
        loss_type=config.loss_type,
        demo=demo,
    )
    return out_dir
