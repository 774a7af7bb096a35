"""Training and evaluation of mm-TEM / Hippoformer / the baselines with the standard HF ``Trainer``.

The models' ``forward(observations, actions, labels)`` returns ``loss``, so a plain :class:`transformers.Trainer`
trains them (progress bar, checkpoints, accelerate); ``remove_unused_columns`` drops the dataset's ``nodes`` /
``revisited`` columns. :func:`revisited_accuracy` is the paper's metric on a :mod:`.data` split: next-observation
accuracy of the forecast ``logits[:, t]`` on steps whose node was visited before in the walk.
"""

from __future__ import annotations

import torch


def next_observation_trainer(model, train_dataset, output_dir: str, eval_dataset=None, **training_args):
    """A :class:`transformers.Trainer` for ``model`` with sensible tiny-scale defaults (overridable by
    ``training_args``: any :class:`transformers.TrainingArguments` field)."""
    from transformers import Trainer, TrainingArguments

    defaults = dict(
        output_dir=output_dir,
        per_device_train_batch_size=16,
        learning_rate=3e-3,
        max_steps=200,
        logging_steps=20,
        save_strategy="no",
        report_to=[],
        use_cpu=not torch.cuda.is_available(),
        dataloader_num_workers=0,
        disable_tqdm=False,
    )
    defaults.update(training_args)
    return Trainer(
        model=model, args=TrainingArguments(**defaults), train_dataset=train_dataset, eval_dataset=eval_dataset
    )


@torch.no_grad()
def revisited_accuracy(model, dataset, batch_size: int = 32) -> dict:
    """Next-observation accuracy on revisited steps.

    Args:
        model: an :class:`MMTEMModel` or :class:`HippoformerForNextObservation` (``logits`` `(B, T, V)`).
        dataset: a :mod:`.data` split (torch format; ``observations``, ``actions``, ``revisited``).
        batch_size (`int`): walks per forward pass.

    Returns:
        `dict`: ``accuracy`` (pooled over revisited steps), ``per_walk_correct`` / ``per_walk_count`` (lists, for
        walk-level bootstrap intervals), ``first_visit_accuracy`` (steps on new nodes: chance level is expected).
    """
    model.eval()
    device = next(model.parameters()).device
    correct, count, first_correct, first_count = [], [], 0, 0
    for start in range(0, len(dataset), batch_size):
        batch = dataset[start : start + batch_size]
        obs, act = batch["observations"].to(device), batch["actions"].to(device)
        hit = model(obs, act).logits.argmax(-1) == obs
        rev = batch["revisited"].to(device).bool()
        correct += (hit & rev).sum(1).tolist()
        count += rev.sum(1).tolist()
        first_correct += int((hit & ~rev).sum())
        first_count += int((~rev).sum())
    return {
        "accuracy": sum(correct) / max(sum(count), 1),
        "per_walk_correct": correct,
        "per_walk_count": count,
        "first_visit_accuracy": first_correct / max(first_count, 1),
    }


def bootstrap_interval(correct, count, num_resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95 % percentile bootstrap interval of pooled accuracy over walks (resampling walks)."""
    import numpy as np

    correct, count = np.asarray(correct, float), np.asarray(count, float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(correct), size=(num_resamples, len(correct)))
    stats = correct[idx].sum(1) / np.maximum(count[idx].sum(1), 1)
    return float(np.percentile(stats, 2.5)), float(np.percentile(stats, 97.5))


__all__ = ["bootstrap_interval", "next_observation_trainer", "revisited_accuracy"]
