"""Building blocks of the paper's numerical experiments at CPU scale (arXiv 2602.12499), for the ``examples/`` scripts.

* :func:`seeded_models` -- one model per seed (``torch.manual_seed(seed)`` before each).
* :func:`iterations_to_loss` -- full-batch GD iterations until the training loss reaches a threshold, per seed.
* :func:`sample_complexity` -- the smallest training-set size whose GD-trained model reaches a target test accuracy,
  per seed, from a grid of sizes.
* :func:`update_results` -- merge one experiment's numbers into the shared results JSON (written after each setting,
  so an interrupted run keeps what it measured).

Seeds: seed ``s`` initialises model ``s`` and draws its training set (``sample_sequences(..., seed=s)``); test sets use
``seed = 10_000 + s``.
"""

from __future__ import annotations

import datetime
import json
import os
from dataclasses import replace
from pathlib import Path

import torch

from .configuration_selective_ssm import SelectiveSSMConfig
from .data import SyntheticSequenceConfig, sample_sequences
from .modeling_selective_ssm import SelectiveSSMForSequenceClassification
from .training import train_ensemble


TEST_SEED_OFFSET = 10_000


def seeded_models(config: SelectiveSSMConfig, seeds) -> list[SelectiveSSMForSequenceClassification]:
    """One freshly initialised model per seed (the global RNG is restored afterwards)."""
    models = []
    with torch.random.fork_rng(devices=[]):
        for seed in seeds:
            torch.manual_seed(seed)
            models.append(SelectiveSSMForSequenceClassification(config))
    return models


def _stacked(data_config: SyntheticSequenceConfig, num_examples: int, seeds, offset: int = 0):
    draws = [sample_sequences(data_config, num_examples, seed=offset + s) for s in seeds]
    return torch.stack([d["inputs_embeds"] for d in draws]), torch.stack([d["labels"] for d in draws])


def iterations_to_loss(
    data_config: SyntheticSequenceConfig,
    model_config: SelectiveSSMConfig,
    seeds,
    *,
    num_train: int,
    learning_rate: float,
    max_steps: int,
    loss_threshold: float,
    num_test: int = 0,
    patterns: bool = False,
) -> dict:
    """Full-batch GD iterations until the training loss is ``<= loss_threshold``, one run per seed (vectorised).

    Returns:
        `dict` with ``steps`` (per seed; `None` where not reached within ``max_steps``), ``test_accuracy`` (per seed,
        at the end; only when ``num_test > 0``) and ``histories`` (:class:`TrainingHistory` per seed).
    """
    seeds = list(seeds)
    x, y = _stacked(data_config, num_train, seeds)
    kwargs = {}
    if num_test:
        kwargs["eval_inputs_embeds"], kwargs["eval_labels"] = _stacked(data_config, num_test, seeds, TEST_SEED_OFFSET)
    histories = train_ensemble(
        seeded_models(model_config, seeds),
        x,
        y,
        learning_rate=learning_rate,
        max_steps=max_steps,
        loss_threshold=loss_threshold,
        stop_when_all_reached=not num_test,
        patterns=data_config.patterns() if patterns else None,
        log_every=max(1, max_steps // 20),
        **kwargs,
    )
    return {
        "steps": [h.steps_to_threshold for h in histories],
        "test_accuracy": [h.eval_accuracy[-1] for h in histories] if num_test else None,
        "histories": histories,
    }


def sample_complexity(
    data_config: SyntheticSequenceConfig,
    model_config: SelectiveSSMConfig,
    seeds,
    *,
    sample_sizes,
    target_accuracy: float,
    learning_rate: float,
    steps: int,
    num_test: int = 1000,
) -> dict:
    """Smallest ``N`` of ``sample_sizes`` whose model (GD for ``steps`` iterations on ``N`` examples) reaches
    ``target_accuracy`` on a fresh test set, per seed.

    For each ``N`` the seeds train together (:func:`~hfx.models.selective_ssm.train_ensemble`); seed ``s`` uses the
    first ``N`` examples of its own draw, so the training sets of one seed are nested.

    Returns:
        `dict` with ``sample_sizes``, ``accuracy`` (``[seed][size]``) and ``n_star`` (per seed; `None` if no size
        reaches the target).
    """
    seeds, sizes = list(seeds), sorted(sample_sizes)
    x_all, y_all = _stacked(data_config, sizes[-1], seeds)
    x_test, y_test = _stacked(data_config, num_test, seeds, TEST_SEED_OFFSET)
    accuracy = [[None] * len(sizes) for _ in seeds]
    for j, size in enumerate(sizes):
        histories = train_ensemble(
            seeded_models(model_config, seeds),
            x_all[:, :size],
            y_all[:, :size],
            learning_rate=learning_rate,
            max_steps=steps,
            eval_inputs_embeds=x_test,
            eval_labels=y_test,
            log_every=steps,
        )
        for i, history in enumerate(histories):
            accuracy[i][j] = history.eval_accuracy[-1]
    n_star = [next((n for n, a in zip(sizes, row) if a >= target_accuracy), None) for row in accuracy]
    return {"sample_sizes": sizes, "accuracy": accuracy, "n_star": n_star}


def with_changes(config: SyntheticSequenceConfig, **changes) -> SyntheticSequenceConfig:
    """A copy of ``config`` with fields changed (validated again)."""
    return replace(config, **changes)


def update_results(path: str | Path, section: str, values: dict, summary: dict | None = None) -> dict:
    """Merge ``values`` under ``experiments[section]`` of the JSON at ``path`` (created if absent) and write it.

    ``summary`` (``metric``, ``value``, ``goal``, ``command``) updates the top-level fields; ``date`` and the load
    average are refreshed on every write.
    """
    path = Path(path)
    data = json.loads(path.read_text()) if path.is_file() else {}
    data.setdefault("experiments", {})
    data["experiments"][section] = values
    if summary:
        data.update(summary)
    data["date"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    data["loadavg"] = list(os.getloadavg())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    return data


__all__ = ["iterations_to_loss", "sample_complexity", "seeded_models", "update_results", "with_changes"]
