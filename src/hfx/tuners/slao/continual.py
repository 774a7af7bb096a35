"""Continual-learning driver, metrics and export for SLAO (arXiv:2512.23017).

* :class:`SLAOCallback` -- a ``transformers.TrainerCallback`` that calls ``start_task()`` when ``Trainer.train()``
  begins and ``finish_task()`` when it ends.
* :class:`ContinualTrainer` -- a ``transformers.Trainer`` that trains on a sequence of ``datasets.Dataset``s (one
  ``train()`` per task, fresh AdamW state per task [reconstruction]), evaluates every task after every stage and
  returns a :class:`ContinualResult` with the accuracy matrix, AA and BWT.
* :func:`average_accuracy`, :func:`backward_transfer`, :func:`plot_accuracy_matrix` -- the paper's metrics.
* :func:`sequence_exact_match` -- the default task metric for causal LMs (greedy exact match of the answer span).
* :func:`export_lora` -- the merged adapter as a plain PEFT LoRA adapter (loads with stock PEFT, no hfx needed).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import Trainer, TrainerCallback

from .layer import SLAOLinear
from .model import SLAOModel  # stays: model.py imports this module only inside export_lora (no import cycle)


# ------------------------------------------------------------------------------------------------------------- metrics
def _check_accuracy_matrix(accuracy_matrix) -> np.ndarray:
    a = np.asarray(accuracy_matrix, dtype=float)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] == 0:
        raise ValueError(f"`accuracy_matrix` must be a non-empty square (T, T) matrix, but has shape {tuple(a.shape)}")
    return a


def average_accuracy(accuracy_matrix) -> float:
    """Average accuracy AA = mean_i a[i, T] (paper, Section 5 "Metrics").

    Args:
        accuracy_matrix (array-like of shape `(T, T)`): ``a[i, j]`` = accuracy on task i after training on tasks
            1..j (rows: evaluated task, columns: training stage).

    Returns:
        `float`: the mean of the last column.

    Raises:
        ValueError: if the matrix is not square and non-empty.
    """
    a = _check_accuracy_matrix(accuracy_matrix)
    return float(np.mean(a[:, -1]))


def backward_transfer(accuracy_matrix) -> float:
    """Backward transfer BWT = mean_{i<T} (a[i, T] - a[i, i]); negative values mean forgetting.

    Args:
        accuracy_matrix (array-like of shape `(T, T)`): as in :func:`average_accuracy`.

    Returns:
        `float`: BWT (0.0 for T = 1, where no earlier task exists).

    Raises:
        ValueError: if the matrix is not square and non-empty.
    """
    a = _check_accuracy_matrix(accuracy_matrix)
    if a.shape[0] == 1:
        return 0.0
    return float(np.mean(a[:-1, -1] - np.diag(a)[:-1]))


def plot_accuracy_matrix(
    accuracy_matrix,
    task_names: Sequence[str] | None = None,
    *,
    title: str | None = None,
    ax=None,
    path: str | Path | None = None,
):
    """Heat map of the accuracy matrix (rows: evaluated task, columns: after training on task j), annotated.

    Args:
        accuracy_matrix (array-like of shape `(T, T)`).
        task_names (`list[str]`, *optional*): T labels; defaults to ``task 1 .. task T``.
        title (`str`, *optional*): defaults to ``"AA = .. BWT = .."``.
        ax (`matplotlib.axes.Axes`, *optional*): draw into this axes; otherwise a new figure is created.
        path (`str` or `Path`, *optional*): save the figure there (PNG, 150 dpi).

    Returns:
        `matplotlib.figure.Figure`.

    Raises:
        ValueError: for a non-square matrix or ``task_names`` of the wrong length.
    """
    import matplotlib

    if ax is None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    a = _check_accuracy_matrix(accuracy_matrix)
    names = list(task_names) if task_names is not None else [f"task {i + 1}" for i in range(a.shape[0])]
    if len(names) != a.shape[0]:
        raise ValueError(f"`task_names` must have {a.shape[0]} entries, but has {len(names)}")
    if ax is None:
        fig, ax = plt.subplots(figsize=(1.2 * a.shape[0] + 2.5, 1.0 * a.shape[0] + 1.8))
    else:
        fig = ax.figure
    image = ax.imshow(a, vmin=0.0, vmax=1.0, cmap="viridis")
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            if not math.isnan(a[i, j]):
                ax.text(j, i, f"{a[i, j]:.2f}", ha="center", va="center", color="w" if a[i, j] < 0.6 else "k")
    ax.set_xticks(range(a.shape[1]), [f"after {n}" for n in names], rotation=30, ha="right")
    ax.set_yticks(range(a.shape[0]), names)
    ax.set_xlabel("training stage")
    ax.set_ylabel("evaluated task")
    ax.set_title(title or f"AA = {average_accuracy(a):.3f}   BWT = {backward_transfer(a):+.3f}")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="accuracy")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=150)
    return fig


@torch.no_grad()
def sequence_exact_match(model, dataset, *, data_collator=None, batch_size: int = 8) -> float:
    """Fraction of examples whose whole answer span is predicted exactly (teacher-forced argmax, one forward pass).

    An example counts as correct when ``argmax logits[t-1] == labels[t]`` at every position with ``labels != -100``,
    which is exactly when greedy decoding from the prompt reproduces the answer tokens.

    Args:
        model: a causal LM (e.g. the ``PeftModel``); it is put in eval mode and restored afterwards.
        dataset (`datasets.Dataset` or a sequence of dicts): rows with ``input_ids`` and ``labels`` (-100 on the
            prompt), optionally ``attention_mask``.
        data_collator (*optional*): batches rows (e.g. ``DataCollatorForSeq2Seq``); by default rows are right-padded
            with 0 / -100.
        batch_size (`int`, *optional*, defaults to 8).

    Returns:
        `float` in [0, 1].

    Raises:
        ValueError: if the dataset is empty or an example has no answer token.
    """
    n = len(dataset)
    if n == 0:
        raise ValueError("`dataset` is empty")
    collate = data_collator or _pad_collate
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    correct = 0
    try:
        for start in range(0, n, batch_size):
            rows = [dataset[k] for k in range(start, min(start + batch_size, n))]
            batch = {k: torch.as_tensor(v).to(device) for k, v in collate(rows).items()}
            labels = batch.pop("labels")
            logits = model(**batch).logits
            predictions = logits[:, :-1].argmax(-1)
            targets = labels[:, 1:]
            mask = targets != -100
            if not bool(mask.any(-1).all()):
                raise ValueError("every example needs at least one answer token (`labels` != -100)")
            correct += int(((predictions == targets) | ~mask).all(-1).sum())
    finally:
        model.train(was_training)
    return correct / n


def _pad_collate(rows: list[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
    length = max(len(r["input_ids"]) for r in rows)

    def pad(values, fill):
        return [list(v) + [fill] * (length - len(v)) for v in values]

    batch = {
        "input_ids": torch.tensor(pad([r["input_ids"] for r in rows], 0)),
        "attention_mask": torch.tensor(pad([r.get("attention_mask", [1] * len(r["input_ids"])) for r in rows], 0)),
        "labels": torch.tensor(pad([r["labels"] for r in rows], -100)),
    }
    return batch


# ---------------------------------------------------------------------------------------------------------- driver
def get_slao_tuner(model) -> SLAOModel:
    """The :class:`SLAOModel` inside ``model`` (a ``PeftModel``, the tuner itself, or a wrapper with ``.module``).

    Raises:
        TypeError: if ``model`` carries no SLAO adapter.
    """
    seen = model
    for _ in range(4):
        if isinstance(seen, SLAOModel):
            return seen
        inner = getattr(seen, "base_model", None)
        if inner is None:
            inner = getattr(seen, "module", None)
        if inner is None or inner is seen:
            break
        seen = inner
    raise TypeError(
        f"`model` must be a PeftModel built from an SLAOConfig (or an SLAOModel), but is {type(model).__name__}"
    )


class SLAOCallback(TrainerCallback):
    """Drives SLAO from ``transformers.Trainer``: ``start_task()`` on train begin, ``finish_task()`` on train end.

    Each ``trainer.train()`` call is one task. ``start_task`` copies into the existing ``lora_A`` / ``lora_B``
    parameters in place, so the optimizer Trainer already built keeps pointing at them.

    Resuming: a checkpoint written during a task holds the adapter with that task in progress (its SLAO state says
    so). ``trainer.train(resume_from_checkpoint=...)`` loads it before ``on_train_begin``; the callback then sees a
    task in progress at ``global_step > 0`` and continues it instead of starting a new one, so the resumed run goes on
    exactly where the interrupted one stopped.

    Args:
        adapter_name (`str`, *optional*): defaults to the model's single active adapter.

    Attributes:
        task_indices (`list[int]`): the index of every task started (or resumed); ``coefficients`` (`list[float]`):
            lambda(i) of every merge; ``expected_task`` (`int` or `None`): when set (by :class:`ContinualTrainer`),
            the task index the next ``train()`` must start or resume, checked against the adapter's state.

    Raises:
        RuntimeError: (on train begin) when resuming from a checkpoint whose adapter has no task in progress, or when
            the task index differs from ``expected_task``.
    """

    def __init__(self, adapter_name: str | None = None):
        self.adapter_name = adapter_name
        self.task_indices: list[int] = []
        self.coefficients: list[float] = []
        self.expected_task: int | None = None

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        tuner = get_slao_tuner(model)
        if state.global_step > 0:  # resumed from a checkpoint: it was written while a task was in progress
            if not tuner.in_task(self.adapter_name):
                raise RuntimeError(
                    f"resuming at global step {state.global_step}, but the checkpoint's SLAO adapter has no task in "
                    "progress; SLAO checkpoints are written during a task, so this checkpoint is not from an SLAO run."
                )
            index = tuner.num_tasks_finished(self.adapter_name) + 1
        else:
            index = tuner.start_task(self.adapter_name)
        if self.expected_task is not None and index != self.expected_task:
            raise RuntimeError(
                f"the SLAO adapter is at task {index}, but task {self.expected_task} was expected (the model and the "
                "checkpoint / task list do not match)."
            )
        self.task_indices.append(index)

    def on_train_end(self, args, state, control, model=None, **kwargs):
        self.coefficients.append(get_slao_tuner(model).finish_task(self.adapter_name))


@dataclass
class ContinualResult:
    """Outcome of :meth:`ContinualTrainer.train_tasks`.

    Attributes:
        task_names (`list[str]`): T names.
        accuracy_matrix (`np.ndarray` of shape `(T, T)`): ``a[i, j]`` = metric on task i after training task j.
        coefficients (`list[float]`): lambda(i) used at every merge.
    """

    task_names: list[str]
    accuracy_matrix: np.ndarray
    coefficients: list[float] = field(default_factory=list)

    @property
    def average_accuracy(self) -> float:
        return average_accuracy(self.accuracy_matrix)

    @property
    def backward_transfer(self) -> float:
        return backward_transfer(self.accuracy_matrix)

    def plot(self, path: str | Path | None = None, **kwargs):
        """Heat map, see :func:`plot_accuracy_matrix`."""
        return plot_accuracy_matrix(self.accuracy_matrix, self.task_names, path=path, **kwargs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_names": self.task_names,
            "accuracy_matrix": self.accuracy_matrix.tolist(),
            "average_accuracy": self.average_accuracy,
            "backward_transfer": self.backward_transfer,
            "coefficients": self.coefficients,
        }


def _as_named(datasets, what: str) -> list[tuple[str, Any]]:
    if isinstance(datasets, Mapping):
        items = list(datasets.items())
    elif isinstance(datasets, Sequence) and not isinstance(datasets, str):
        items = [(f"task {i + 1}", d) for i, d in enumerate(datasets)]
    else:
        raise TypeError(f"`{what}` must be a dict name -> Dataset or a list of Datasets, but is {type(datasets)}")
    if not items:
        raise ValueError(f"`{what}` must contain at least one dataset")
    return items


#: Written into every checkpoint of :class:`ContinualTrainer`: which task it belongs to and the results so far.
CONTINUAL_STATE_NAME = "slao_continual.json"


class ContinualTrainer(Trainer):
    """A ``transformers.Trainer`` that fine-tunes one SLAO adapter on a sequence of tasks and fills the accuracy matrix.

    Every task is one ``Trainer.train()`` call with a fresh optimizer and scheduler (AdamW state is not carried
    across tasks [reconstruction]); :class:`SLAOCallback` runs ``start_task`` / ``finish_task`` around it. After
    each task every evaluation set is scored with ``task_metric`` (default :func:`sequence_exact_match`) using the
    merged pair W0 + s B_merge A_merge. Baselines (sequential LoRA, ablations) are the same driver with another
    :class:`SLAOConfig` (see ``SLAOConfig.for_baseline``).

    Checkpoints (``save_strategy``) of task j go to ``<output_dir>/task-<j>/checkpoint-<step>`` (each task restarts
    the step count) together with ``slao_continual.json`` (task index, task names, the accuracy matrix and the
    lambda(i) so far); ``train_tasks(resume_from_checkpoint=...)`` continues from one of them exactly.

    Args:
        model: a ``PeftModel`` built from an :class:`SLAOConfig`.
        args (`transformers.TrainingArguments`): used for every task.
        task_datasets (`dict[str, Dataset]` or `list[Dataset]`): training sets in task order.
        eval_datasets (`dict[str, Dataset]` or `list[Dataset]`, *optional*): one per task, same order; defaults to
            ``task_datasets``.
        task_metric (`Callable[[model, Dataset], float]`, *optional*): the per-task accuracy.
        adapter_name (`str`, *optional*): the SLAO adapter to drive.
        reset_optimizer_per_task (`bool`, *optional*, defaults to `True`): build a fresh optimizer (AdamW moments)
            for every task [reconstruction: the paper does not say whether optimizer state carries over]; with
            `False` the first task's optimizer and its moments are kept (the scheduler is always rebuilt).
        **kwargs: passed to ``Trainer`` (``data_collator``, ``processing_class``, ``callbacks``, ...).

    Raises:
        TypeError: if ``model`` has no SLAO adapter.
        ValueError: if the numbers of training and evaluation sets differ.
    """

    def __init__(
        self,
        model,
        args=None,
        task_datasets=None,
        eval_datasets=None,
        task_metric: Callable[[Any, Any], float] | None = None,
        adapter_name: str | None = None,
        reset_optimizer_per_task: bool = True,
        **kwargs,
    ):
        get_slao_tuner(model)
        self.reset_optimizer_per_task = bool(reset_optimizer_per_task)
        self.task_datasets = _as_named(task_datasets, "task_datasets")
        self.task_eval_datasets = _as_named(eval_datasets, "eval_datasets") if eval_datasets else self.task_datasets
        if len(self.task_eval_datasets) != len(self.task_datasets):
            raise ValueError(
                f"`eval_datasets` must have one dataset per task ({len(self.task_datasets)}), "
                f"but has {len(self.task_eval_datasets)}"
            )
        self._task_index: int | None = None  # 1-based index of the task being trained inside train_tasks()
        self._accuracy: np.ndarray | None = None
        super().__init__(model=model, args=args, train_dataset=self.task_datasets[0][1], **kwargs)
        self.slao_callback = SLAOCallback(adapter_name)
        self.add_callback(self.slao_callback)
        self.task_metric = task_metric

    def evaluate_task(self, dataset) -> float:
        """Score ``dataset`` with ``task_metric`` (or :func:`sequence_exact_match` with this trainer's collator)."""
        if self.task_metric is not None:
            return float(self.task_metric(self.model, dataset))
        return sequence_exact_match(
            self.model, dataset, data_collator=self.data_collator, batch_size=self.args.per_device_eval_batch_size
        )

    @property
    def task_names(self) -> list[str]:
        return [name for name, _ in self.task_datasets]

    def train_tasks(self, resume_from_checkpoint: str | Path | bool | None = None) -> ContinualResult:
        """Train on every task in order and evaluate all tasks after each one.

        Args:
            resume_from_checkpoint (`str`, `Path` or `bool`, *optional*): a checkpoint folder written by this
                trainer (``<output_dir>/task-<j>/checkpoint-<step>``), or `True` for the latest one under
                ``args.output_dir``. Tasks before j are skipped (their results come from the checkpoint), task j
                continues from the checkpoint's step with its optimizer, scheduler, RNG and data position
                (``Trainer.train(resume_from_checkpoint=...)``), and the run goes on as if it had not stopped.

        Returns:
            :class:`ContinualResult` with the `(T, T)` accuracy matrix (column j: after task j).

        Raises:
            ValueError: if the checkpoint is not a ContinualTrainer checkpoint, its task names differ from this
                trainer's, or `True` finds none.
        """
        from tqdm.auto import tqdm

        T = len(self.task_datasets)
        self._accuracy = np.full((T, T), np.nan)
        coefficients: list[float] = []
        first, checkpoint = 0, None
        if resume_from_checkpoint is not None and resume_from_checkpoint is not False:
            checkpoint = self._find_continual_checkpoint(resume_from_checkpoint)
            saved = json.loads((checkpoint / CONTINUAL_STATE_NAME).read_text())
            if saved["task_names"] != self.task_names:
                raise ValueError(
                    f"`resume_from_checkpoint` was written for tasks {saved['task_names']}, but this trainer has "
                    f"{self.task_names}"
                )
            first = int(saved["task_index"]) - 1
            self._accuracy[:, :first] = np.array(saved["accuracy_matrix"], dtype=float)[:, :first]
            coefficients = [float(c) for c in saved["coefficients"]][:first]
        self.slao_callback.coefficients = list(coefficients)
        try:
            for j in tqdm(range(first, T), desc="SLAO tasks", disable=T - first < 2):
                self._task_index = j + 1
                self.slao_callback.expected_task = j + 1
                self.train_dataset = self.task_datasets[j][1]
                if self.reset_optimizer_per_task:
                    self.optimizer = None  # fresh AdamW state per task
                self.lr_scheduler = None
                self.train(resume_from_checkpoint=str(checkpoint) if j == first and checkpoint else None)
                for i, (_, eval_set) in enumerate(self.task_eval_datasets):
                    self._accuracy[i, j] = self.evaluate_task(eval_set)
        finally:
            self._task_index = None
            self.slao_callback.expected_task = None
        return ContinualResult(
            task_names=self.task_names,
            accuracy_matrix=self._accuracy,
            coefficients=list(self.slao_callback.coefficients),
        )

    # ------------------------------------------------------------------------------------------------ checkpoints
    def _get_output_dir(self, trial) -> str:
        """Trainer's run folder, plus ``task-<j>`` while :meth:`train_tasks` trains task j (step counts restart)."""
        run_dir = super()._get_output_dir(trial)
        if self._task_index is None:
            return run_dir
        return str(Path(run_dir) / f"task-{self._task_index}")

    def _save_checkpoint(self, model, trial) -> None:
        super()._save_checkpoint(model, trial)
        if self._task_index is None or not self.args.should_save:
            return
        from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

        folder = Path(self._get_output_dir(trial)) / f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        if folder.is_dir():
            accuracy = self._accuracy if self._accuracy is not None else np.full((1, 1), np.nan)
            state = {
                "task_index": self._task_index,
                "task_names": self.task_names,
                "accuracy_matrix": [[None if math.isnan(v) else float(v) for v in row] for row in accuracy],
                "coefficients": list(self.slao_callback.coefficients),
            }
            (folder / CONTINUAL_STATE_NAME).write_text(json.dumps(state, indent=2))

    def _find_continual_checkpoint(self, resume_from_checkpoint) -> Path:
        if resume_from_checkpoint is True:
            from transformers.trainer_utils import get_last_checkpoint

            root = Path(self.args.output_dir)
            task_dirs = sorted(
                (d for d in root.glob("task-*") if d.name[5:].isdigit()), key=lambda d: int(d.name[5:]), reverse=True
            )
            for task_dir in task_dirs:
                last = get_last_checkpoint(str(task_dir))
                if last is not None and (Path(last) / CONTINUAL_STATE_NAME).is_file():
                    return Path(last)
            raise ValueError(f"`resume_from_checkpoint=True`: no ContinualTrainer checkpoint under {root}/task-*/")
        checkpoint = Path(resume_from_checkpoint)
        if not (checkpoint / CONTINUAL_STATE_NAME).is_file():
            raise ValueError(
                f"`resume_from_checkpoint` must be a checkpoint folder written by ContinualTrainer (with "
                f"{CONTINUAL_STATE_NAME}), but {checkpoint} has none"
            )
        return checkpoint


# ---------------------------------------------------------------------------------------------------------- export
def export_lora(model, save_directory: str | Path, adapter_name: str | None = None) -> Path:
    """Save the merged SLAO pair (A_merge, B_merge) as a plain PEFT LoRA adapter.

    The folder holds ``adapter_config.json`` (a ``LoraConfig`` with the same ``r``, ``lora_alpha``,
    ``target_modules``, ``use_rslora``, ``modules_to_save``, ``trainable_token_indices``, ...; ``"peft_type":
    "LORA"``) and ``adapter_model.safetensors`` with the standard ``base_model.model.<module>.lora_A.weight`` /
    ``lora_B.weight`` keys plus the entries of the adapter's ``modules_to_save`` and trainable tokens, so stock PEFT
    loads it without hfx: ``PeftModel.from_pretrained(base, folder)`` computes what the SLAO model computes after its
    last ``finish_task()``: W0 x + s B_merge A_merge x, with the extra modules as trained.

    ``modules_to_save`` and ``trainable_token_indices`` are full (or per-token) copies, not low-rank pairs, so SLAO's
    merge rule does not apply to them: they are trained continually across tasks and exported with their current
    values [reconstruction: the paper adapts q/v projections only].

    Args:
        model: a ``PeftModel`` built from an :class:`SLAOConfig`, or the :class:`SLAOModel`.
        save_directory (`str` or `Path`): created if needed.
        adapter_name (`str`, *optional*): defaults to the single active adapter.

    Returns:
        `Path`: ``save_directory``.

    Raises:
        TypeError: if ``model`` has no SLAO adapter.
        ValueError: if no task was finished yet (there is no merged pair), or a task is in progress while the adapter
            has ``modules_to_save`` / trainable tokens (their values at the last ``finish_task()`` are not kept, so
            the export would mix two states; finish the task first).
    """
    from peft import LoraConfig
    from safetensors.torch import save_file

    tuner = get_slao_tuner(model)
    adapter_name = tuner._resolve_adapter(adapter_name)
    if tuner.num_tasks_finished(adapter_name) < 1:
        raise ValueError("export_lora() needs at least one finished task (call finish_task() first).")
    config = tuner.peft_config[adapter_name]
    auxiliary = _auxiliary_state_dict(tuner, adapter_name)
    if auxiliary and tuner.in_task(adapter_name):
        raise ValueError(
            f"export_lora(): adapter {adapter_name!r} has modules_to_save / trainable tokens "
            f"({sorted({k.rsplit('.', 1)[0] for k in auxiliary})[:3]} ...) and a task is in progress; their values "
            "at the last finish_task() are not kept, so call finish_task() before exporting."
        )
    lora_fields = {f.name for f in dataclasses.fields(LoraConfig) if f.init}
    skip = {"peft_type", *(f.name for f in dataclasses.fields(type(config)) if f.name not in lora_fields)}
    kwargs = {name: getattr(config, name) for name in lora_fields if name not in skip}
    kwargs["inference_mode"] = True
    lora_config = LoraConfig(**kwargs)

    state_dict = {}
    for name, layer in tuner.model.named_modules():
        if isinstance(layer, SLAOLinear) and adapter_name in layer.lora_A:
            A_merge, B_merge = layer.slao_merged_pair(adapter_name)
            state_dict[f"base_model.model.{name}.lora_A.weight"] = A_merge.detach().cpu().contiguous().clone()
            state_dict[f"base_model.model.{name}.lora_B.weight"] = B_merge.detach().cpu().contiguous().clone()
    state_dict.update(auxiliary)
    out = Path(save_directory)
    out.mkdir(parents=True, exist_ok=True)
    lora_config.save_pretrained(str(out))
    save_file(state_dict, str(out / "adapter_model.safetensors"), metadata={"format": "pt"})
    (out / "slao_export.json").write_text(
        json.dumps(
            {
                "source": "hfx SLAO (arXiv:2512.23017)",
                "tasks_finished": tuner.num_tasks_finished(adapter_name),
                "init_strategy": config.init_strategy,
                "merge_schedule": config.merge_schedule,
            },
            indent=2,
        )
    )
    return out


def _auxiliary_state_dict(tuner: SLAOModel, adapter_name: str) -> dict[str, torch.Tensor]:
    """The saved entries of ``adapter_name``'s ``modules_to_save`` and trainable tokens, keyed as PEFT saves them
    (``base_model.model.<module>.<key>``), via PEFT's own ``AuxiliaryTrainingWrapper.adapter_state_dict``."""
    from peft.utils import AuxiliaryTrainingWrapper

    out = {}
    for name, module in tuner.model.named_modules():
        if isinstance(module, AuxiliaryTrainingWrapper):
            entries = module.adapter_state_dict(adapter_name, module.state_dict())
            for key, value in entries.items():
                out[f"base_model.model.{name}.{key}"] = value.detach().cpu().contiguous().clone()
    return out


__all__ = [
    "CONTINUAL_STATE_NAME",
    "ContinualResult",
    "ContinualTrainer",
    "SLAOCallback",
    "average_accuracy",
    "backward_transfer",
    "export_lora",
    "get_slao_tuner",
    "plot_accuracy_matrix",
    "sequence_exact_match",
]
