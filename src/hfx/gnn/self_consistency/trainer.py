"""Training SI-GNNs with the Hugging Face `Trainer`: a PyG-aware collator, a `compute_loss` override with the
self-consistency term, the authors' model selection, and the two-stage SC recipe.

Logging, progress bars, checkpoints, accelerate and seeds come from `transformers.Trainer`; the loss is
:func:`~hfx.gnn.self_consistency.si_gnn_loss`.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import torch
from transformers import Trainer, TrainerCallback, TrainingArguments, set_seed
from transformers.utils import logging

from .configuration import SelfInterpretableGNNConfig
from .losses import SelfConsistencyLoss, si_gnn_loss
from .modeling import SelfInterpretableGNN


logger = logging.get_logger(__name__)


class GraphCollator:
    """Batch PyG ``Data`` objects (``torch_geometric.data.Batch.from_data_list``) into the model's keyword inputs.

    Returns a dict with ``x`` `(N, F)`, ``edge_index`` `(2, E)` (offset per graph), ``batch`` `(N,)`, ``labels``
    (``y``: `(B,)` for graph tasks, `(N,)` for node tasks) and ``edge_label`` `(E,)` -- the ground-truth explanation,
    or ``-1`` on every edge of a graph without one (the metrics then skip the explanation AUC).

    Raises:
        ValueError: if a graph has no ``x``, ``edge_index`` or ``y``.
    """

    def __call__(self, features: list) -> dict[str, torch.Tensor]:
        from torch_geometric.data import Batch

        for i, data in enumerate(features):
            for key in ("x", "edge_index", "y"):
                if getattr(data, key, None) is None:
                    raise ValueError(f"graph {i} of the batch has no `{key}`: every graph needs x, edge_index and y")
        features = [
            data if getattr(data, "edge_label", None) is not None else _with_unknown_edge_label(data)
            for data in features
        ]
        batch = Batch.from_data_list(features)
        return {
            "x": batch.x.float(),
            "edge_index": batch.edge_index,
            "batch": batch.batch,
            "labels": batch.y.view(-1),
            "edge_label": batch.edge_label.float(),
        }


def _with_unknown_edge_label(data):
    data = data.clone()
    data.edge_label = torch.full((data.edge_index.shape[1],), -1.0)
    return data


def si_gnn_metrics(eval_pred) -> dict[str, float]:
    """``compute_metrics`` for the Trainer: ``accuracy`` (labels ``!= -100``) and ``explanation_auc`` (ROC-AUC of
    the edge attention against ``edge_label``, when the ground truth is known and has both classes).

    Expects the per-graph padded arrays of :meth:`SelfConsistencyTrainer.prediction_step` (padding ``-100``):
    predictions ``(logits, edge_attention)``, label ids ``(labels, edge_label)``.
    """
    from torch_geometric.explain.metric import groundtruth_metrics

    logits, edge_attention = eval_pred.predictions[:2]
    labels, edge_label = eval_pred.label_ids[:2]
    logits, labels = np.asarray(logits), np.asarray(labels).reshape(-1)
    logits = logits.reshape(-1, logits.shape[-1])
    preds = (logits[:, 0] > 0).astype(int) if logits.shape[-1] == 1 else logits.argmax(-1)
    keep = labels != -100
    metrics = {"accuracy": float((preds[keep] == labels[keep]).mean())}
    edge_label = np.asarray(edge_label).reshape(-1)
    known = edge_label >= 0  # -1: no ground truth for that graph; -100: padding
    if known.any() and len(np.unique(edge_label[known])) == 2:
        metrics["explanation_auc"] = groundtruth_metrics(
            torch.as_tensor(np.asarray(edge_attention).reshape(-1)[known]),
            torch.as_tensor(edge_label[known]),
            "auroc",
        )
    return metrics


class BestValidationCallback(TrainerCallback):
    """Keep the weights of the best evaluation so far and restore them when training ends (in memory, no disk
    checkpoints): best ``eval_accuracy``, ties broken by lower ``eval_loss``, considering only epochs whose 0-based
    index exceeds ``min_epoch`` -- the authors' selection (``e > 10`` for base training, every epoch in SC
    fine-tuning).

    Attributes:
        best_epoch (`int` or `None`): 0-based epoch of the kept weights; ``best_metrics`` (`dict`): their metrics.
    """

    def __init__(self, min_epoch: int = 10):
        self.min_epoch = min_epoch
        self.best_state = None
        self.best_epoch = None
        self.best_metrics: dict[str, float] = {}

    def on_evaluate(self, args, state, control, metrics=None, model=None, **kwargs):
        if not metrics or model is None or "eval_accuracy" not in metrics:
            return
        epoch = math.ceil(state.epoch or 0) - 1
        if epoch <= self.min_epoch:
            return
        key = (metrics["eval_accuracy"], -metrics.get("eval_loss", 0.0))
        best = (self.best_metrics.get("eval_accuracy", -1.0), -self.best_metrics.get("eval_loss", 0.0))
        if self.best_state is None or key > best:
            self.best_state = copy.deepcopy(model.state_dict())
            self.best_epoch, self.best_metrics = epoch, dict(metrics)

    def on_train_end(self, args, state, control, model=None, **kwargs):
        if self.best_state is not None and model is not None:
            model.load_state_dict(self.best_state)
        elif model is not None:
            logger.warning(
                "No evaluated epoch had a 0-based index above `best_model_min_epoch`=%d: keeping the last weights.",
                self.min_epoch,
            )


@dataclass
class SelfConsistencyTrainingArguments(TrainingArguments):
    r"""[`~transformers.TrainingArguments`] with the SC-GNN authors' recipe as defaults: Adam (``adamw_torch`` with
    ``weight_decay=0``, i.e. Adam) at lr 1e-3, constant schedule, batch 128, 100 epochs, no gradient clipping,
    evaluation every epoch, no checkpoints on disk (the best weights are kept in memory), no reporting.

    Args:
        finetune_from_base (`bool`, *optional*, defaults to `False`): this run is the SC fine-tuning stage of a
            trained base SI-GNN: the GIN convolutions are frozen (and kept in eval mode), GSAT uses the final
            ``r`` from the first step, and every epoch is a model-selection candidate (the authors' ``train_ft``).
        best_model_min_epoch (`int`, *optional*, defaults to 10): only epochs with 0-based index above it are
            candidates for the restored best model (``-1``: all); ignored (all epochs) when ``finetune_from_base``.
        select_best_model (`bool`, *optional*, defaults to `True`): restore the best validation epoch at the end
            (needs an ``eval_dataset``).
    """

    learning_rate: float = field(default=1e-3, metadata={"help": "Adam learning rate (the authors': 1e-3)."})
    weight_decay: float = field(default=0.0, metadata={"help": "0: AdamW is then Adam, as the authors'."})
    lr_scheduler_type: str = field(default="constant", metadata={"help": "Constant learning rate, as the authors'."})
    per_device_train_batch_size: int = field(default=128, metadata={"help": "Graphs per training batch."})
    per_device_eval_batch_size: int = field(default=128, metadata={"help": "Graphs per evaluation batch."})
    num_train_epochs: float = field(default=100, metadata={"help": "Epochs (the authors': 100 per stage)."})
    max_grad_norm: float = field(default=0.0, metadata={"help": "No gradient clipping, as the authors'."})
    eval_strategy: str = field(default="epoch", metadata={"help": "Evaluate after every epoch."})
    save_strategy: str = field(default="no", metadata={"help": "Best weights are kept in memory."})
    logging_strategy: str = field(default="epoch", metadata={"help": "Log once per epoch."})
    report_to: str | list[str] | None = field(default="none", metadata={"help": "No experiment trackers."})
    remove_unused_columns: bool = field(default=False, metadata={"help": "Graph data has no columns to remove."})
    label_names: list[str] | None = field(
        default_factory=lambda: ["labels", "edge_label"], metadata={"help": "Targets passed to compute_metrics."}
    )
    finetune_from_base: bool = field(default=False, metadata={"help": "SC fine-tuning stage (frozen convolutions)."})
    best_model_min_epoch: int = field(default=10, metadata={"help": "First candidate epoch (0-based) minus one."})
    select_best_model: bool = field(default=True, metadata={"help": "Restore the best validation epoch at the end."})


class SelfConsistencyTrainer(Trainer):
    r"""[`~transformers.Trainer`] for [`SelfInterpretableGNN`]: ``compute_loss`` is the SI-GNN loss plus, when
    ``model.config.use_self_consistency``, ``sc_loss_weight * L_SC`` (:class:`SelfConsistencyLoss`), i.e. by default
    ``L = CE + 0.5 * reg + 1 * L_SC`` for GSAT. Datasets are lists (or PyG datasets) of ``Data`` graphs, batched by
    :class:`GraphCollator`. Evaluation reports ``eval_accuracy``, ``eval_explanation_auc`` and the loss parts;
    training logs ``ce`` / ``reg`` / ``sc`` averages. With an ``eval_dataset`` the best validation epoch is restored
    at the end (:class:`BestValidationCallback`; its ``best_epoch`` is ``trainer.best_validation.best_epoch``).

    Args:
        model ([`SelfInterpretableGNN`]).
        args ([`SelfConsistencyTrainingArguments`], *optional*): defaults to the authors' recipe.
        train_dataset, eval_dataset: sequences of ``torch_geometric.data.Data`` (with ``x``, ``edge_index``, ``y``,
            and ``edge_label`` when the ground-truth explanation is known).
        **kwargs: other [`~transformers.Trainer`] arguments (``callbacks``, ``compute_metrics``, ...).

    Raises:
        TypeError: if ``model`` is not a [`SelfInterpretableGNN`] or ``args`` not
            [`SelfConsistencyTrainingArguments`].
    """

    def __init__(self, model=None, args=None, train_dataset=None, eval_dataset=None, **kwargs):
        if not isinstance(model, SelfInterpretableGNN):
            raise TypeError(f"`model` must be a SelfInterpretableGNN, but is {type(model).__name__}")
        if args is None:
            args = SelfConsistencyTrainingArguments(output_dir="outputs/sc_gnn")
        if not isinstance(args, SelfConsistencyTrainingArguments):
            raise TypeError(
                f"`args` must be SelfConsistencyTrainingArguments (it carries the SC recipe), not {type(args).__name__}"
            )
        kwargs.setdefault("data_collator", GraphCollator())
        kwargs.setdefault("compute_metrics", si_gnn_metrics)
        callbacks = list(kwargs.pop("callbacks", None) or [])
        self.best_validation = None
        if args.select_best_model and eval_dataset is not None:
            min_epoch = -1 if args.finetune_from_base else args.best_model_min_epoch
            self.best_validation = BestValidationCallback(min_epoch=min_epoch)
            callbacks.append(self.best_validation)
        super().__init__(
            model=model,
            args=args,
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            callbacks=callbacks,
            **kwargs,
        )
        if args.finetune_from_base:
            model.freeze_message_passing()
        self.sc_loss = SelfConsistencyLoss()
        self._loss_parts: dict[str, dict[str, list[float]]] = {"train": defaultdict(list), "eval": defaultdict(list)}

    @property
    def current_epoch(self) -> int:
        """0-based epoch of the running training step (0 before training)."""
        return int(self.state.epoch or 0)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        inputs = dict(inputs)
        labels = inputs.pop("labels")
        inputs.pop("edge_label", None)  # the ground-truth explanation is for metrics only
        outputs = model(**inputs)
        loss, parts = si_gnn_loss(
            model,
            inputs,
            outputs,
            labels,
            epoch=self.current_epoch,
            finetune=self.args.finetune_from_base,
            sc_loss=self.sc_loss,
        )
        split = "train" if model.training else "eval"
        for name, value in parts.items():
            self._loss_parts[split][name].append(value)
        return (loss, outputs) if return_outputs else loss

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        """The parent's step, with per-node / per-edge tensors packed per graph (`(num_graphs, max_nodes_or_edges,
        ...)`, padding ``-100``) so that the Trainer's gathering, which counts dataset items (graphs), keeps them
        whole."""
        loss, logits, labels = super().prediction_step(model, inputs, prediction_loss_only, ignore_keys)
        if prediction_loss_only or logits is None or labels is None:
            return loss, logits, labels
        from torch_geometric.utils import to_dense_batch

        batch = inputs["batch"].to(logits[0].device)
        edge_graph = batch[inputs["edge_index"][0].to(batch.device)]
        num_graphs = int(batch.max()) + 1

        def per_graph(values, index):
            return to_dense_batch(values, index, fill_value=-100, batch_size=num_graphs)[0]

        node_task = self.model.config.task == "node"
        prediction, edge_attention = logits[0], logits[1]
        target, edge_label = labels[0], labels[1]
        if node_task:
            prediction, target = per_graph(prediction, batch), per_graph(target, batch)
        return loss, (prediction, per_graph(edge_attention, edge_graph)), (target, per_graph(edge_label, edge_graph))

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        split = "eval" if any(k.startswith("eval_") for k in logs) else "train"
        prefix = "eval_" if split == "eval" else ""
        for name, values in self._loss_parts[split].items():
            if values:
                logs[f"{prefix}{name}_loss"] = float(np.mean(values))
        self._loss_parts[split] = defaultdict(list)
        super().log(logs, start_time)


@dataclass
class SIGNNTrainingResult:
    """What :func:`train_si_gnn` returns: the trained ``model``, the ``base_model`` it was fine-tuned from (the SC
    ``"finetune"`` recipe; else ``None``), and each stage's best validation epoch and metrics."""

    model: SelfInterpretableGNN
    base_model: SelfInterpretableGNN | None = None
    stages: list[dict] = field(default_factory=list)


def _stage_args(args: SelfConsistencyTrainingArguments, **changes) -> SelfConsistencyTrainingArguments:
    return dataclasses.replace(args, **changes)


def train_si_gnn(
    config: SelfInterpretableGNNConfig,
    train_dataset,
    eval_dataset=None,
    args: SelfConsistencyTrainingArguments | None = None,
    sc_epochs: float | None = None,
    base_model: SelfInterpretableGNN | None = None,
    callbacks: list | None = None,
) -> SIGNNTrainingResult:
    r"""Train an SI-GNN, with self-consistency as ``config`` says.

    * ``use_self_consistency=False``: one stage, the base SI-GNN.
    * ``use_self_consistency=True, sc_training="joint"``: one stage with ``L_SC`` from the first step.
    * ``use_self_consistency=True, sc_training="finetune"`` (the authors' code): stage 1 trains the base SI-GNN
      (skipped when ``base_model`` is given); stage 2 copies it, adds ``L_SC``, freezes the GIN convolutions and
      trains ``sc_epochs`` more epochs (default: ``args.num_train_epochs``).

    The model is built after ``set_seed(args.seed)``, so a seed fixes the initial weights.

    Args:
        config ([`SelfInterpretableGNNConfig`]).
        train_dataset, eval_dataset: graph sequences (see [`SelfConsistencyTrainer`]).
        args ([`SelfConsistencyTrainingArguments`], *optional*).
        sc_epochs (`float`, *optional*): epochs of the SC fine-tuning stage.
        base_model ([`SelfInterpretableGNN`], *optional*): an already trained base SI-GNN to fine-tune (finetune
            recipe only); it is copied, not modified.
        callbacks (`list`, *optional*): extra Trainer callbacks for every stage.

    Returns:
        [`SIGNNTrainingResult`].

    Raises:
        ValueError: if ``base_model`` is given outside the finetune recipe.
    """
    args = args or SelfConsistencyTrainingArguments(output_dir="outputs/sc_gnn")
    finetune = config.use_self_consistency and config.sc_training == "finetune"
    if base_model is not None and not finetune:
        raise ValueError(
            "`base_model` is only used by the SC fine-tuning recipe (use_self_consistency=True, "
            "sc_training='finetune')"
        )
    result = SIGNNTrainingResult(model=None)

    def _run(model, stage_args):
        trainer = SelfConsistencyTrainer(
            model=model,
            args=stage_args,
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            callbacks=list(callbacks or []),
        )
        trainer.train()
        best = trainer.best_validation
        result.stages.append(
            {
                "best_epoch": None if best is None else best.best_epoch,
                "metrics": {} if best is None else best.best_metrics,
            }
        )
        model.eval()
        return model

    if not finetune:
        set_seed(args.seed)
        result.model = _run(SelfInterpretableGNN(config), args)
        return result
    if base_model is None:
        set_seed(args.seed)
        base_config = copy.deepcopy(config)
        base_config.use_self_consistency = False
        base_model = _run(SelfInterpretableGNN(base_config), args)
    sc_model = copy.deepcopy(base_model)
    sc_model.config = copy.deepcopy(config)
    sc_model.config.use_self_consistency = True
    # the stage may change dropout rates (the authors' GSAT + SC uses explainer dropout 0.3 on BA-2Motifs)
    sc_model.encoder.dropout, sc_model.explainer.dropout = config.dropout, config.explainer_dropout
    set_seed(args.seed)
    ft_args = _stage_args(
        args, finetune_from_base=True, num_train_epochs=sc_epochs if sc_epochs is not None else args.num_train_epochs
    )
    result.model = _run(sc_model, ft_args)
    result.model.unfreeze_message_passing()
    result.model.eval()
    result.base_model = base_model
    return result
