"""`OfflineRouterTrainer`: a transformers `Trainer` for :class:`~hfx.routing.OfflineRouter` (authors' code defaults:
lr 2e-5, batch 8, 2 epochs, AdamW eps 1e-8; model selection by router accuracy)."""

from __future__ import annotations

import numpy as np
import torch
from transformers import Trainer, TrainingArguments


class OfflineRouterCollator:
    """Tokenises rows of (prompt, response_a, response_b, agree_<rm>...) into :meth:`OfflineRouter.forward` inputs.

    An optional ``triple_mask`` column (`(K, K)` per row, e.g. from :func:`~hfx.routing.balance_bt_triples`) is passed
    on to the BT loss.

    Args:
        router (`OfflineRouter`): supplies the tokenizer, ``max_length`` and the RM order (``rm_names``).
        agreement_prefix (`str`, *optional*, defaults to `"agree_"`): column ``f"{prefix}{name}"`` per RM.
    """

    def __init__(self, router, agreement_prefix: str = "agree_"):
        self.router = router
        self.agreement_prefix = agreement_prefix

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        prompts = [r["prompt"] for r in rows]
        enc_a = self.router.tokenize(prompts, [r["response_a"] for r in rows])
        enc_b = self.router.tokenize(prompts, [r["response_b"] for r in rows])
        agreement = torch.tensor(
            [[float(r[f"{self.agreement_prefix}{n}"]) for n in self.router.rm_names] for r in rows]
        )
        batch = {
            "input_ids_a": enc_a["input_ids"],
            "attention_mask_a": enc_a["attention_mask"],
            "input_ids_b": enc_b["input_ids"],
            "attention_mask_b": enc_b["attention_mask"],
            "agreement": agreement,
        }
        if "triple_mask" in rows[0]:
            batch["triple_mask"] = torch.tensor([r["triple_mask"] for r in rows], dtype=torch.float32)
        return batch


def _router_metrics(eval_pred) -> dict[str, float]:
    preds, labels = eval_pred.predictions, eval_pred.label_ids
    bt_scores = preds[1] if isinstance(preds, tuple) else preds
    chosen = bt_scores.argmax(-1)
    acc = labels[np.arange(len(chosen)), chosen]
    return {"router_accuracy": float(acc.mean()), "best_single_rm_accuracy": float(labels.mean(0).max())}


def router_accuracy(router, dataset, batch_size: int = 16, agreement_prefix: str = "agree_") -> float:
    """Fraction of pairs whose greedily routed RM (argmax of the BT scores) agrees with the gold label."""
    h = router.embed_pairs(
        list(dataset["prompt"]), list(dataset["response_a"]), list(dataset["response_b"]), batch_size
    )
    agreement = torch.tensor([list(dataset[f"{agreement_prefix}{n}"]) for n in router.rm_names]).T.float()
    chosen = router.route(h.to(router.bt_embeddings.dtype))
    return float(agreement[torch.arange(len(chosen)), chosen].mean())


class OfflineRouterTrainer(Trainer):
    """[`~transformers.Trainer`] for :class:`~hfx.routing.OfflineRouter` on (prompt, response_a, response_b, label) data.

    The dataset needs columns ``prompt``, ``response_a``, ``response_b`` and one ``agree_<name>`` column per RM of
    ``model.rm_names`` (build them with :func:`~hfx.routing.label_with_reward_models`). Evaluation reports
    ``eval_router_accuracy`` (agreement of the greedily routed RM with the gold label) and
    ``eval_best_single_rm_accuracy``. Checkpoints are written with ``OfflineRouter.save_pretrained`` (loadable with
    ``OfflineRouter.from_pretrained``).

    Args:
        model (`OfflineRouter`): the router (with a tokenizer attached).
        args (`TrainingArguments`, *optional*): defaults to the authors' values (lr 2e-5, batch 8, 2 epochs, AdamW
            eps 1e-8); ``remove_unused_columns`` is forced to ``False`` and ``label_names`` to ``["agreement"]``.
        train_dataset, eval_dataset (`datasets.Dataset`): see above.
        **kwargs: other [`~transformers.Trainer`] arguments (``callbacks``, ``optimizers``, ...).

    Raises:
        ValueError: missing columns (naming them, e.g. an ``agree_<name>`` for an RM name the data does not have).
    """

    def __init__(self, model, args: TrainingArguments | None = None, train_dataset=None, eval_dataset=None, **kwargs):
        if model.tokenizer is None:
            raise ValueError(
                "`model` has no tokenizer: build it with `OfflineRouter.from_encoder(encoder, tokenizer, ...)`"
            )
        if args is None:
            import tempfile

            # no stray ./offline-router/ in the caller's directory: checkpoints are off (save_strategy "no"); save
            # the router with `trainer.save_model(PATH)` or `model.save_pretrained(PATH)`
            args = TrainingArguments(
                output_dir=tempfile.mkdtemp(prefix="offline-router-"),
                learning_rate=2e-5,
                per_device_train_batch_size=8,
                num_train_epochs=2,
                adam_epsilon=1e-8,
                report_to="none",
                save_strategy="no",
            )
        args.remove_unused_columns = False
        args.label_names = ["agreement"]
        # `label_with_reward_models` returns the type it was given: accept a plain dict of columns too.
        train_dataset, eval_dataset = _as_dataset(train_dataset), _as_dataset(eval_dataset)
        for split, ds in (("train_dataset", train_dataset), ("eval_dataset", eval_dataset)):
            if ds is None:
                continue
            for d in ds.values() if isinstance(ds, dict) else [ds]:
                needed = ["prompt", "response_a", "response_b", *[f"agree_{n}" for n in model.rm_names]]
                missing = [c for c in needed if c not in d.column_names]
                if missing:
                    raise ValueError(
                        f"`{split}` is missing column(s) {missing} (the router's RMs are {model.rm_names}); "
                        "add them with `hfx.routing.label_with_reward_models`"
                    )
        kwargs.setdefault("data_collator", OfflineRouterCollator(model))
        kwargs.setdefault("compute_metrics", _router_metrics)
        super().__init__(model=model, args=args, train_dataset=train_dataset, eval_dataset=eval_dataset, **kwargs)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        outputs = model(**inputs)
        return (outputs.loss, outputs) if return_outputs else outputs.loss

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        inputs = self._prepare_inputs(inputs)
        with torch.no_grad():
            outputs = model(**inputs)
        loss = outputs.loss.detach() if outputs.loss is not None else None
        if prediction_loss_only:
            return loss, None, None
        return loss, (outputs.pair_embeddings.detach(), outputs.bt_scores.detach()), inputs["agreement"]

    def _save(self, output_dir: str | None = None, state_dict=None):
        output_dir = output_dir if output_dir is not None else self.args.output_dir
        self.accelerator.unwrap_model(self.model).save_pretrained(output_dir)
        torch.save(self.args, f"{output_dir}/training_args.bin")


def _as_dataset(data):
    """A dict of equal-length column lists becomes a ``datasets.Dataset``; anything else is returned unchanged."""
    if isinstance(data, dict) and data and all(isinstance(v, (list, tuple)) for v in data.values()):
        from datasets import Dataset

        return Dataset.from_dict({k: list(v) for k, v in data.items()})
    return data
