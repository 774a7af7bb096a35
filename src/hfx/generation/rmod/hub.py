"""``hfx publish rmod-value``: a Hub-ready :class:`MultiObjectiveValueModel` folder with its rendered model card.

Layout::

    <out_dir>/
      config.json, model.safetensors    # MultiObjectiveValueModel.save_pretrained (model_type "hfx_rmod_value")
      tokenizer files                   # when available (the value model reads the language model's token ids)
      README.md                         # rendered from model_cards/rmod-value/README.md

Pull it back with ``MultiObjectiveValueModel.from_pretrained("org/name")`` (``import hfx`` first, or use the class
directly). Push with ``hfx publish rmod-value --out DIR --source TRAINED_DIR --push ORG/NAME``.
"""

from __future__ import annotations

from pathlib import Path


ARXIV_ID = "2503.08796"


def publish(
    out_dir: str | Path,
    source: str | Path | None = None,
    repo_id: str = "hfx/rmod-value",
    num_objectives: int = 2,
    objective_names: list[str] | None = None,
    **kwargs,
) -> Path:
    """Write a Hub-ready RMOD value-model folder.

    Args:
        out_dir (`str` or `Path`): destination (created).
        source (`str` or `Path`, *optional*): a folder saved by ``MultiObjectiveValueModel.save_pretrained`` (e.g.
            the output of :class:`ValueFunctionTrainer`); its tokenizer is copied when present. Without it, an
            **untrained** value model on the tiny test backbone (``hfx.testing.tiny_llama``) is written, to exercise
            the plumbing (the card says so).
        repo_id (`str`, *optional*, defaults to `"hfx/rmod-value"`): the id used in the card's example.
        num_objectives (`int`, *optional*, defaults to 2): ``G`` for the untrained demo model.
        objective_names (`list[str]`, *optional*): names for the demo model's objectives.
        **kwargs: extra template variables for the card.

    Returns:
        `Path`: ``out_dir``.

    Raises:
        ValueError: if ``source`` is not a folder with a ``config.json``.
    """
    from hfx.hub import card_data, write_model_card

    from .value_functions import MultiObjectiveValueModel

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = None
    trained = source is not None
    if source is not None:
        source = Path(source)
        if not (source / "config.json").is_file():
            raise ValueError(f"`source` must be a folder saved by MultiObjectiveValueModel, but is {str(source)!r}")
        model = MultiObjectiveValueModel.from_pretrained(source)
        if (source / "tokenizer_config.json").is_file():
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(source)
    else:
        from hfx.testing import tiny_llama

        lm, tokenizer = tiny_llama()
        model = MultiObjectiveValueModel.from_backbone(
            lm.model, num_objectives=num_objectives, objective_names=objective_names
        )
    model.save_pretrained(out_dir)
    if tokenizer is not None:
        tokenizer.save_pretrained(out_dir)
    backbone_name = getattr(model.config.backbone_config, "_name_or_path", "") or ""
    base_model = backbone_name if "/" in backbone_name and not Path(backbone_name).exists() else None
    data = card_data(
        method="rmod",
        arxiv_id=ARXIV_ID,
        base_model=base_model,
        library_name="hfx",
        tags=["value-function", "multi-objective", "controlled-decoding"],
    )
    write_model_card(
        out_dir,
        "rmod-value",
        data,
        repo_id=repo_id,
        objective_names=list(model.config.objective_names),
        num_objectives=model.config.num_objectives,
        backbone_type=model.config.backbone_config.model_type,
        trained=trained,
        **kwargs,
    )
    return out_dir


__all__ = ["ARXIV_ID", "publish"]
