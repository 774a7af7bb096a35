"""Local client training and evaluation on prompt -> completion examples (loss on the completion tokens only).

Batches are left-padded so that every completion ends the row; the model is asked for the logits of the last
``max completion length + 1`` positions only (``logits_to_keep``), which skips the vocabulary projection of the prompt
tokens (a fifth of SmolLM2-135M's compute at 64 tokens). ``position_ids`` follow the attention mask.

Accuracy is *teacher-forced exact match*: every completion token is the arg-max given the gold prefix, which is the
same event as greedy decoding reproducing the completion, at the cost of one forward pass.
"""

from __future__ import annotations

import math
import time

import torch


def collate(examples: list[dict], pad_token_id: int) -> dict:
    """Left-pad encoded examples (:func:`~hfx.federated.devft.data.encode_examples`).

    Returns:
        `dict` with ``input_ids``, ``attention_mask``, ``position_ids`` of shape `(B, T)` and ``completion_mask`` of
        shape `(B, n)`, n = the longest completion: 1 where position ``T - n + j`` is a completion token.
    """
    length = max(len(e["input_ids"]) for e in examples)
    n = max(e["num_completion"] for e in examples)
    ids = torch.full((len(examples), length), pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(examples), length), dtype=torch.long)
    completion = torch.zeros((len(examples), n), dtype=torch.bool)
    for row, e in enumerate(examples):
        seq = e["input_ids"]
        ids[row, length - len(seq) :] = torch.tensor(seq, dtype=torch.long)
        mask[row, length - len(seq) :] = 1
        completion[row, n - e["num_completion"] :] = True
    positions = (mask.cumsum(dim=-1) - 1).clamp_min(0)
    return {"input_ids": ids, "attention_mask": mask, "position_ids": positions, "completion_mask": completion}


def completion_losses(model, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token negative log-likelihood and arg-max correctness of the completion tokens.

    Args:
        model: a causal LM (or PEFT model) accepting ``logits_to_keep``.
        batch (`dict`): from :func:`collate`.

    Returns:
        `(nll, correct)`, both of shape `(B, n)`: nll in nats (0 where ``completion_mask`` is 0) and a bool tensor.
    """
    mask = batch["completion_mask"]
    n = mask.shape[1]
    device = next(model.parameters()).device
    out = model(
        input_ids=batch["input_ids"].to(device),
        attention_mask=batch["attention_mask"].to(device),
        position_ids=batch["position_ids"].to(device),
        logits_to_keep=n + 1,
        use_cache=False,
    )
    logits = out.logits[:, :-1, :].float()  # (B, n, V): position T-n-1+j predicts token T-n+j
    targets = batch["input_ids"][:, -n:].to(device)
    nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
    mask = mask.to(device)
    return nll * mask, (logits.argmax(dim=-1) == targets) | ~mask


def decoder_flops(model_config, num_layers: int, batch: dict, layer_params: int) -> float:
    """Approximate training FLOPs of one step with a frozen base: 4 x (decoder-layer parameters x K) x tokens
    (forward 2, activation gradients 2), plus the head on the kept positions; attention's ``T^2`` term ignored."""
    tokens = batch["input_ids"].numel()
    kept = batch["completion_mask"].shape[0] * (batch["completion_mask"].shape[1] + 1)
    head = model_config.vocab_size * model_config.hidden_size
    return 4.0 * layer_params * num_layers * tokens + 4.0 * head * kept


def local_train(
    model,
    examples: list[dict],
    *,
    steps: int,
    batch_size: int,
    learning_rate: float,
    pad_token_id: int,
    weight_decay: float = 0.0,
    max_grad_norm: float = 1.0,
    seed: int = 0,
    layer_params: int | None = None,
) -> dict:
    """``steps`` AdamW steps on the trainable (LoRA) parameters over random batches of ``examples``.

    Batches walk through a seeded permutation of the examples (re-drawn when exhausted). The optimizer is fresh for
    each call (one federated round), as in FedIT.

    Args:
        model: the PEFT model (only ``requires_grad`` parameters are updated).
        examples (`list[dict]`): encoded examples (:func:`~hfx.federated.devft.data.encode_examples`).
        steps, batch_size (`int`): local steps and examples per step.
        learning_rate, weight_decay, max_grad_norm (`float`): AdamW and clipping (``max_grad_norm=0`` disables it).
        pad_token_id (`int`): padding id.
        seed (`int`, *optional*): the batch order.
        layer_params (`int`, *optional*): frozen parameters of one decoder layer, for the FLOPs estimate.

    Returns:
        `dict` with ``loss`` (mean completion-token NLL over the steps), ``steps``, ``tokens`` (padded positions
        processed), ``seconds`` (wall time of the loop) and ``flops`` (estimate, 0 without ``layer_params``).

    Raises:
        ValueError: if ``examples`` is empty, or the loss becomes non-finite.
    """
    if not examples:
        raise ValueError("`examples` is empty")
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=learning_rate, weight_decay=weight_decay)
    generator = torch.Generator().manual_seed(seed)
    order: list[int] = []
    num_layers = model.config.num_hidden_layers
    model.train()
    losses, tokens, flops = [], 0, 0.0
    start = time.perf_counter()
    for _ in range(steps):
        if len(order) < batch_size:
            order += torch.randperm(len(examples), generator=generator).tolist()
        picked, order = order[:batch_size], order[batch_size:]
        batch = collate([examples[i] for i in picked], pad_token_id)
        nll, _ = completion_losses(model, batch)
        loss = nll.sum() / batch["completion_mask"].sum()
        if not torch.isfinite(loss):
            raise ValueError(f"non-finite training loss {loss.item()} (lower `learning_rate`)")
        loss.backward()
        if max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        tokens += batch["input_ids"].numel()
        if layer_params:
            flops += decoder_flops(model.config, num_layers, batch, layer_params)
    seconds = time.perf_counter() - start
    model.eval()
    return {"loss": sum(losses) / len(losses), "steps": steps, "tokens": tokens, "seconds": seconds, "flops": flops}


@torch.no_grad()
def evaluate(model, examples: list[dict], pad_token_id: int, batch_size: int = 16) -> dict:
    """Completion NLL and exact-match accuracy of each example.

    Returns:
        `dict` with ``loss`` (mean over examples of the per-example mean token NLL, nats), ``accuracy`` and the
        per-example lists ``example_loss`` / ``example_correct``.

    Raises:
        ValueError: if ``examples`` is empty.
    """
    if not examples:
        raise ValueError("`examples` is empty")
    was_training = model.training
    model.eval()
    example_loss, example_correct = [], []
    for i in range(0, len(examples), batch_size):
        batch = collate(examples[i : i + batch_size], pad_token_id)
        nll, correct = completion_losses(model, batch)
        count = batch["completion_mask"].sum(dim=1)
        example_loss += (nll.sum(dim=1) / count).tolist()
        example_correct += correct.all(dim=1).tolist()
    model.train(was_training)
    loss = sum(example_loss) / len(example_loss)
    if not math.isfinite(loss):
        raise ValueError("non-finite evaluation loss")
    return {
        "loss": loss,
        "accuracy": sum(example_correct) / len(example_correct),
        "example_loss": example_loss,
        "example_correct": [bool(c) for c in example_correct],
    }
