"""`hfx publish tail-data`: a Hub-ready dataset folder (parquet per task and split + a dataset card)."""

from __future__ import annotations

from pathlib import Path


DEFAULT_SIZES = {"train": 1000, "validation": 100, "test": 200, "ood_validation": 100, "ood_test": 200}


def publish(
    out_dir: Path,
    source=None,
    *,
    tasks: list[str] | None = None,
    sizes: dict[str, int] | None = None,
    seed: int = 0,
    format: str = "tail",
    repo_id: str | None = None,
    **kwargs,
) -> Path:
    """Write ``out_dir/<task>/<split>-00000-of-00001.parquet`` for every task and split, and ``README.md``: a
    dataset card rendered from ``model_cards/tail-data/README.md`` whose YAML lists one config per task (so
    ``datasets.load_dataset(repo_id, "add")`` works on the Hub and ``load_dataset(out_dir, "add")`` locally).

    Args:
        out_dir (`Path`): destination folder (created).
        source: unused (the data are generated); a value raises ``ValueError`` rather than being ignored.
        tasks (`list[str]`, *optional*): defaults to every registered task.
        sizes (`dict[str, int]`, *optional*): rows per split (defaults: :data:`DEFAULT_SIZES`).
        seed (`int`), format (`str`), **kwargs: passed to :func:`~hfx.data.tail.load_dataset` (toggles, ...).
        repo_id (`str`, *optional*): the repo id shown in the card's snippets.

    Returns:
        `Path`: ``out_dir``.
    """
    from huggingface_hub import DatasetCard, DatasetCardData

    from hfx.hub import model_cards_dir

    from .dataset import SPLITS
    from .registry import get_task, list_tasks

    if source is not None:
        raise ValueError("`source` is not used by tail-data (the rows are generated); drop --source")
    out_dir = Path(out_dir)
    tasks = list(tasks) if tasks else list_tasks()
    sizes = {**DEFAULT_SIZES, **(sizes or {})}
    unknown = set(sizes) - set(SPLITS)
    if unknown:
        raise ValueError(f"`sizes` keys must be splits {SPLITS}, got {sorted(unknown)}")
    for name in tasks:
        get_task(name)  # a clear error for an unknown task before anything is written
    from datasets.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    bars_were_on = not are_progress_bars_disabled()
    disable_progress_bars()
    try:
        configs, rows = _write_parquet(out_dir, tasks, sizes, seed, format, kwargs)
    finally:
        if bars_were_on:
            enable_progress_bars()
    data = DatasetCardData(
        license="apache-2.0",
        language=["en"],
        pretty_name="TAIL-style Turing-machine-imitation CoT",
        task_categories=["text-generation"],
        tags=["hfx", "tail", "arxiv:2507.13332", "length-generalization", "chain-of-thought", "synthetic"],
        size_categories=["10K<n<100K"] if len(tasks) * sum(sizes.values()) >= 10_000 else ["1K<n<10K"],
        configs=configs,
    )
    template = (model_cards_dir() / "tail-data" / "README.md").read_text(encoding="utf-8")
    toggles = {k: kwargs.get(k, True) for k in ("fetch", "atomic", "linear")}
    card = DatasetCard.from_template(
        data,
        template_str=template,
        repo_id=repo_id or "hfx/tail-data",
        tasks=rows,
        sizes=sizes,
        seed=seed,
        format=format,
        toggles=toggles,
        first_task=tasks[0],
    )
    card.save(out_dir / "README.md")
    return out_dir


def _write_parquet(out_dir: Path, tasks, sizes, seed, format, kwargs):
    from .dataset import SPLITS, load_dataset
    from .registry import get_task

    configs, rows = [], []
    for name in tasks:
        task = get_task(name)
        files = []
        for split in SPLITS:
            if not sizes[split]:
                continue
            ds = load_dataset(name, split, sizes[split], seed=seed, format=format, **kwargs)
            path = out_dir / name / f"{split}-00000-of-00001.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            ds.to_parquet(str(path))
            files.append({"split": split, "path": f"{name}/{split}-*.parquet"})
        configs.append({"config_name": name, "data_files": files})
        rows.append(
            {
                "name": name,
                "algorithm_class": task.algorithm_class,
                "description": task.description,
                "length_unit": task.length_unit,
                "train": f"{task.train_lengths[0]}-{task.train_lengths[1]}",
                "ood": f"{task.ood_lengths[0]}-{task.ood_lengths[1]}",
            }
        )
    return configs, rows
