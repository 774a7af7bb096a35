"""Training RMOD value functions: a ``transformers.Trainer`` subclass, its collator and a data builder.

Every prefix of a response sampled from the reference model regresses the final per-objective reward of that
response (CD-FUDGE style; arXiv 2503.08796, value-function training, reference code ``MonteCarloLoss``).

Dataset rows: ``input_ids`` (prompt + response token ids, unpadded), ``rewards`` (``G`` floats) and optionally
``completion_mask`` (1 on response tokens: only those positions are regressed; without it every real token is).
:func:`build_value_dataset` samples such rows from a language model and ``G`` reward functions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import torch
from transformers import Trainer, TrainingArguments

from .value_functions import RewardFunctionValues, monte_carlo_value_loss


logger = logging.getLogger(__name__)


class DataCollatorForValueFunction:
    """Pads ``input_ids`` (and ``completion_mask``) and stacks ``rewards``.

    Args:
        pad_token_id (`int`): id used for padding ``input_ids``.
        padding_side (`str`, *optional*, defaults to `"right"`): ``"right"`` or ``"left"`` (values are read per
            position, so either works).

    Returns (on call with a list of rows):
        `dict` with ``input_ids`` `(B, L)`, ``attention_mask`` `(B, L)`, ``rewards`` `(B, G)` float32 and, when the
        rows have one, ``completion_mask`` `(B, L)`.

    Raises:
        ValueError: if a row lacks ``input_ids`` / ``rewards`` or rows have different numbers of rewards.
    """

    def __init__(self, pad_token_id: int, padding_side: str = "right"):
        if padding_side not in ("left", "right"):
            raise ValueError(f"`padding_side` must be 'left' or 'right', but is {padding_side!r}")
        self.pad_token_id = int(pad_token_id)
        self.padding_side = padding_side

    def _pad(self, rows: list[list[int]], value: int) -> torch.Tensor:
        length = max(len(r) for r in rows)
        out = torch.full((len(rows), length), value, dtype=torch.long)
        for i, r in enumerate(rows):
            r = torch.as_tensor(r, dtype=torch.long)
            if self.padding_side == "right":
                out[i, : len(r)] = r
            else:
                out[i, length - len(r) :] = r
        return out

    def __call__(self, features: list[dict]) -> dict[str, torch.Tensor]:
        for f in features:
            if "input_ids" not in f or "rewards" not in f:
                raise ValueError(f"each row needs `input_ids` and `rewards`, got keys {sorted(f)}")
        ids = [list(f["input_ids"]) for f in features]
        batch = {
            "input_ids": self._pad(ids, self.pad_token_id),
            "attention_mask": self._pad([[1] * len(r) for r in ids], 0),
        }
        rewards = [torch.as_tensor(f["rewards"], dtype=torch.float32).reshape(-1) for f in features]
        if len({r.shape[0] for r in rewards}) != 1:
            raise ValueError("all rows must have the same number of `rewards` (one per objective)")
        batch["rewards"] = torch.stack(rewards)
        if any(f.get("completion_mask") is not None for f in features):
            masks = [list(f.get("completion_mask") or [1] * len(f["input_ids"])) for f in features]
            batch["completion_mask"] = self._pad(masks, 0)
        return batch


class ValueFunctionTrainer(Trainer):
    r"""[`~transformers.Trainer`] for RMOD value functions (e.g. [`MultiObjectiveValueModel`]).

    The loss is :func:`~hfx.generation.rmod.value_functions.monte_carlo_value_loss`: every prefix value
    ``V_g(x, y^{<=t})`` (the model's ``values`` `(B, L, G)`) regresses the response's final reward ``r_g``
    (``rewards`` `(B, G)`), on the positions of ``completion_mask`` (else ``attention_mask``), padding excluded.

    Source: arXiv 2503.08796, value-function training; reference code ``MonteCarloLoss``.

    Args:
        model (`PreTrainedModel`): returns an output with ``values`` of shape `(B, L, G)` (or a tensor of that shape).
        args (`TrainingArguments`, *optional*): defaults to ``output_dir="rmod-value"``, no saving, no reporting.
        data_collator (*optional*): defaults to :class:`DataCollatorForValueFunction` with the tokenizer's pad id.
        processing_class (*optional*): the tokenizer (for its ``pad_token_id``; saved with checkpoints).
        **kwargs: everything else [`~transformers.Trainer`] accepts (``train_dataset``, ``eval_dataset``, ...).
    """

    def __init__(
        self, model, args: TrainingArguments | None = None, data_collator=None, processing_class=None, **kwargs
    ):
        if args is None:
            args = TrainingArguments(
                output_dir="rmod-value", save_strategy="no", report_to=[], use_cpu=not torch.cuda.is_available()
            )
        if args.label_names is None:
            args.label_names = ["rewards"]
        if data_collator is None:
            pad = getattr(processing_class, "pad_token_id", None)
            if pad is None:
                backbone_config = getattr(getattr(model, "config", None), "backbone_config", None)
                pad = getattr(backbone_config, "pad_token_id", None)
            data_collator = DataCollatorForValueFunction(pad if pad is not None else 0)
        super().__init__(
            model=model, args=args, data_collator=data_collator, processing_class=processing_class, **kwargs
        )

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        rewards = inputs.get("rewards")
        if rewards is None:
            raise ValueError("ValueFunctionTrainer needs `rewards` (batch_size, num_objectives) in every batch")
        attention_mask = inputs.get("attention_mask")
        outputs = model(input_ids=inputs["input_ids"], attention_mask=attention_mask)
        values = outputs if isinstance(outputs, torch.Tensor) else outputs["values"]
        mask = inputs.get("completion_mask")
        if mask is None:
            mask = attention_mask
        loss = monte_carlo_value_loss(values, rewards.to(values.dtype), mask)
        return (loss, outputs) if return_outputs else loss


@torch.no_grad()
def build_value_dataset(
    model,
    tokenizer,
    prompts: Sequence[str] | Sequence[list[dict]],
    reward_funcs: Sequence[Callable] | RewardFunctionValues,
    num_samples_per_prompt: int = 4,
    max_new_tokens: int = 64,
    batch_size: int = 8,
    as_dataset: bool = True,
    **generate_kwargs,
):
    """Sample responses from the reference model and score them: rows for :class:`ValueFunctionTrainer`.

    Args:
        model (`PreTrainedModel`): the reference policy ``pi_ref``.
        tokenizer: its tokenizer (left padding is set for generation).
        prompts (`list[str]` or `list[list[dict]]`): plain prompts, or chat messages (the chat template is applied).
        reward_funcs: ``G`` reward callables ``fn(prompts, completions, **kw)`` or a :class:`RewardFunctionValues`.
        num_samples_per_prompt (`int`, *optional*, defaults to 4).
        max_new_tokens (`int`, *optional*, defaults to 64).
        batch_size (`int`, *optional*, defaults to 8): prompts per ``generate`` call.
        as_dataset (`bool`, *optional*, defaults to `True`): return a ``datasets.Dataset`` (else a list of dicts).
        **generate_kwargs: passed to ``model.generate`` (``do_sample=True`` by default).

    Returns:
        rows with ``input_ids``, ``completion_mask``, ``rewards`` (``G`` floats), ``prompt``, ``completion``.
    """
    from tqdm.auto import tqdm

    vf = (
        reward_funcs
        if isinstance(reward_funcs, RewardFunctionValues)
        else RewardFunctionValues(reward_funcs, tokenizer)
    )
    tokenizer.padding_side = "left"
    texts = [
        tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) if not isinstance(p, str) else p
        for p in prompts
    ]
    generate_kwargs.setdefault("do_sample", True)
    rows = []
    for start in tqdm(range(0, len(texts), batch_size), desc="sampling responses", disable=len(texts) <= batch_size):
        chunk = texts[start : start + batch_size]
        enc = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
        out = model.generate(
            **enc, max_new_tokens=max_new_tokens, num_return_sequences=num_samples_per_prompt, **generate_kwargs
        )
        prompt_len = enc["input_ids"].shape[1]
        prompt_mask = enc["attention_mask"].repeat_interleave(num_samples_per_prompt, dim=0)
        completion = out[:, prompt_len:]
        eos = model.generation_config.eos_token_id
        eos = set(eos if isinstance(eos, list) else [eos]) if eos is not None else set()
        comp_mask = torch.ones_like(completion)
        for i, row in enumerate(completion.tolist()):
            for t, tok in enumerate(row):
                if tok in eos:
                    comp_mask[i, t + 1 :] = 0
                    break
        full_mask = torch.cat([prompt_mask, comp_mask], dim=1)
        rewards = vf(out, full_mask, prompt_length=prompt_len)
        prompt_texts, completion_texts = vf.decode(out, full_mask, prompt_len)
        for i in range(out.shape[0]):
            keep = full_mask[i].bool()
            rows.append(
                {
                    "input_ids": out[i][keep].tolist(),
                    "completion_mask": torch.cat(
                        [torch.zeros(int(prompt_mask[i].sum())), comp_mask[i][comp_mask[i] > 0].float()]
                    )
                    .long()
                    .tolist(),
                    "rewards": rewards[i].tolist(),
                    "prompt": prompt_texts[i],
                    "completion": completion_texts[i],
                }
            )
    if not as_dataset:
        return rows
    from datasets import Dataset

    return Dataset.from_list(rows)


__all__ = ["DataCollatorForValueFunction", "ValueFunctionTrainer", "build_value_dataset"]
