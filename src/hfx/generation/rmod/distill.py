"""Distill-RMOD: turn RMOD generations into a prompt-completion dataset for TRL's ``SFTTrainer``.

Fine-tuning the reference model on its own RMOD outputs gives a policy that needs a single sampling pass at inference
(arXiv 2503.08796, "Distill-RMOD"). ``datasets`` is imported only when the dataset is built.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


@torch.no_grad()
def build_distillation_dataset(
    model,
    tokenizer,
    prompts: Sequence[str] | Sequence[list[dict]],
    value_function,
    batch_size: int = 4,
    max_new_tokens: int = 128,
    as_dataset: bool = True,
    **rmod_kwargs,
):
    """Generate one RMOD response per prompt and return SFT rows in TRL's prompt-completion format.

    Args:
        model (`PreTrainedModel`): the reference policy (it is also the model to distil into).
        tokenizer: its tokenizer (set to left padding).
        prompts (`list[str]` or `list[list[dict]]`): plain prompts (rows ``{"prompt": str, "completion": str}``) or
            chat messages (rows ``{"prompt": messages, "completion": [{"role": "assistant", "content": ...}]}``,
            TRL's conversational format; the chat template is applied for generation).
        value_function: the RMOD value function (see :func:`hfx.generation.rmod.rmod`).
        batch_size (`int`, *optional*, defaults to 4): prompts per ``generate`` call.
        max_new_tokens (`int`, *optional*, defaults to 128).
        as_dataset (`bool`, *optional*, defaults to `True`): return ``datasets.Dataset`` (else a list of dicts).
        **rmod_kwargs: ``num_branches``, ``block_size``, ``rmod_lambda``, ``weights``, ``seed``, sampling settings...
            (``do_sample=True`` by default).

    Returns:
        `datasets.Dataset` (or `list[dict]`) with ``prompt`` and ``completion`` columns, ready for
        ``trl.SFTTrainer(model=..., train_dataset=...)``.

    Raises:
        ValueError: if ``prompts`` is empty or ``batch_size < 1``.
    """
    from tqdm.auto import tqdm

    if len(prompts) == 0:
        raise ValueError("`prompts` must not be empty")
    if batch_size < 1:
        raise ValueError(f"`batch_size` must be >= 1, but is {batch_size}")
    from .generate import rmod

    tokenizer.padding_side = "left"
    rmod_kwargs.setdefault("do_sample", True)
    rows = []
    for start in tqdm(
        range(0, len(prompts), batch_size), desc="RMOD distillation data", disable=len(prompts) <= batch_size
    ):
        chunk = list(prompts[start : start + batch_size])
        conversational = [not isinstance(p, str) for p in chunk]
        texts = [
            tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) if conv else p
            for p, conv in zip(chunk, conversational)
        ]
        enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=not any(conversational))
        enc = enc.to(model.device)
        out = model.generate(
            **enc, max_new_tokens=max_new_tokens, custom_generate=rmod, value_function=value_function, **rmod_kwargs
        )
        completions = tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
        for prompt, conv, text in zip(chunk, conversational, completions):
            if conv:
                rows.append({"prompt": list(prompt), "completion": [{"role": "assistant", "content": text}]})
            else:
                rows.append({"prompt": prompt, "completion": text})
    if not as_dataset:
        return rows
    from datasets import Dataset

    return Dataset.from_list(rows)


__all__ = ["build_distillation_dataset"]
