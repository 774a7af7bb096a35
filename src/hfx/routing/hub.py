"""`hfx publish bayesian-router`: write a Hub-ready :class:`~hfx.routing.OfflineRouter` folder with its model card."""

from __future__ import annotations

from pathlib import Path


def _demo_router():
    from hfx.testing import tiny_llama

    from .offline import OfflineRouter

    model, tok = tiny_llama(seed=0)
    return OfflineRouter.from_encoder(model, tok, ["rm_0", "rm_1", "rm_2", "rm_3"], max_length=256)


def publish(out_dir: Path, source=None, repo_id: str | None = None, **kw) -> Path:
    """Save an :class:`~hfx.routing.OfflineRouter` (weights, ``config.json``, tokenizer) + the rendered card.

    Args:
        out_dir (`Path`): destination folder (created).
        source (`str`, *optional*): a trained router folder or repo id (``OfflineRouter.from_pretrained``). Without
            it, an **untrained** tiny demo router (random tiny-Llama encoder, 4 RMs) is written, and the card says so.
        repo_id (`str`, *optional*): the repo id shown in the card's usage snippet.

    Returns:
        `Path`: ``out_dir``.
    """
    from hfx.hub import card_data, write_model_card

    from .offline import OfflineRouter

    out_dir = Path(out_dir)
    router = OfflineRouter.from_pretrained(source) if source else _demo_router()
    router.save_pretrained(out_dir)
    base = router.base_model or None
    data = card_data(
        method="bayesian-router",
        arxiv_id="2510.02850",
        base_model=base,
        tags=["reward-model-routing", "rlhf", "thompson-sampling"],
        model_name="BayesianRouter offline router",
    )
    write_model_card(
        out_dir,
        "bayesian-router",
        data,
        repo_id=repo_id or "hfx/bayesian-router",
        base_model=base,
        num_rms=router.num_rms,
        rm_names=", ".join(f"`{n}`" for n in router.rm_names),
        hidden_size=router.hidden_size,
        max_length=router.max_length,
        lambda_bt=router.lambda_bt,
        lambda_cls=router.lambda_cls,
        trained_note=None
        if source
        else "**Untrained demo**: a random tiny encoder, for testing the publish/pull path only. Publish a trained "
        "router with `hfx publish bayesian-router --source PATH`.",
    )
    return out_dir
