"""Full-batch gradient descent and SGD exactly as the training-dynamics analysis assumes (arXiv 2602.12499).

The analysis studies plain (S)GD on the empirical risk: ``θ_{t+1} = θ_t - η ∇ L̂(θ_t)`` with a constant step ``η``, no
momentum, no weight decay, no clipping, no schedule, every trainable parameter updated together, and (for SGD) a
fresh minibatch each step. This module is a **small loop of our own** rather than a ``transformers.Trainer``:

* the update rule is the one line above, auditable next to the theorem, with nothing to switch off (``Trainer``
  brings AdamW, a learning-rate schedule, gradient clipping at 1.0 and epoch-wise shuffling by default; all can be
  configured away, but each is a place where a run can silently stop being the analysed algorithm);
* the diagnostics the theory talks about (the full-batch loss at *every* iteration for "iterations to reach a loss
  threshold", the gate-pattern cosines over training) are read between updates at no extra cost;
* :func:`train_ensemble` trains many independent copies (seeds, sample sizes) in one vectorised pass
  (``torch.func.functional_call`` + ``vmap`` over stacked parameters), which is what makes the scaling sweeps of the
  experiments affordable on a CPU; each member follows exactly the single-model trajectory (tested).

Fixed weights (the MLP's output signs, an untrained ``W_in``) are buffers, so "every trainable parameter" is simply
``model.parameters()`` with ``requires_grad``.
"""

from __future__ import annotations

import copy
import math
from dataclasses import asdict, dataclass, field

import torch

from .diagnostics import cosine_alignment
from .modeling_selective_ssm import margin_loss


SGD_SAMPLINGS = ("with_replacement", "epoch")


@dataclass
class TrainingHistory:
    """What a training run recorded, every ``log_every`` iterations (and at the last one).

    Args:
        steps (`list[int]`): iteration of each record (the number of updates done before it).
        train_loss (`list[float]`): full-batch training loss at that iteration.
        train_accuracy, eval_accuracy, eval_loss (`list[float]`): accuracies / loss (eval lists empty without data).
        cos_plus, cos_minus, cos_irrelevant_mean, cos_irrelevant_max_abs (`list[float]`): gate-pattern cosines
            (:func:`~hfx.models.selective_ssm.cosine_alignment`; empty without ``patterns``).
        loss_threshold (`float`, *optional*): the threshold that was tracked.
        steps_to_threshold (`int`, *optional*): first iteration at which the full-batch training loss was ``<=`` the
            threshold (GD: checked at every iteration; SGD: at each record); `None` if never reached.
        num_steps (`int`): iterations (updates) performed.
    """

    steps: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    train_accuracy: list[float] = field(default_factory=list)
    eval_accuracy: list[float] = field(default_factory=list)
    eval_loss: list[float] = field(default_factory=list)
    cos_plus: list[float] = field(default_factory=list)
    cos_minus: list[float] = field(default_factory=list)
    cos_irrelevant_mean: list[float] = field(default_factory=list)
    cos_irrelevant_max_abs: list[float] = field(default_factory=list)
    loss_threshold: float | None = None
    steps_to_threshold: int | None = None
    num_steps: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


def _validate(learning_rate, max_steps, log_every, batch_size=None, num_examples=None, sampling=None):
    if not (isinstance(learning_rate, (int, float)) and learning_rate > 0 and math.isfinite(learning_rate)):
        raise ValueError(f"`learning_rate` must be a positive finite number, but is {learning_rate!r}")
    if not isinstance(max_steps, int) or max_steps < 0:
        raise ValueError(f"`max_steps` must be an int >= 0, but is {max_steps!r}")
    if not isinstance(log_every, int) or log_every < 1:
        raise ValueError(f"`log_every` must be an int >= 1, but is {log_every!r}")
    if batch_size is not None and not (isinstance(batch_size, int) and 1 <= batch_size <= num_examples):
        raise ValueError(f"`batch_size` must be an int in [1, {num_examples}], but is {batch_size!r}")
    if sampling is not None and sampling not in SGD_SAMPLINGS:
        raise ValueError(f"`sampling` must be one of {list(SGD_SAMPLINGS)}, but is {sampling!r}")


def _progress(iterable, enabled: bool, desc: str):
    if not enabled:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=desc)


class _BatchSampler:
    """Minibatch indices: i.i.d. uniform with replacement each step, or shuffled epochs without replacement."""

    def __init__(self, num_examples: int, batch_size: int, sampling: str, seed: int, device):
        self.n, self.b, self.sampling = num_examples, batch_size, sampling
        self.generator = torch.Generator().manual_seed(seed)
        self.device = device
        self._order, self._pos = None, num_examples

    def __call__(self) -> torch.Tensor:
        if self.sampling == "with_replacement":
            return torch.randint(0, self.n, (self.b,), generator=self.generator).to(self.device)
        if self._pos + self.b > self.n:
            self._order, self._pos = torch.randperm(self.n, generator=self.generator), 0
        batch = self._order[self._pos : self._pos + self.b]
        self._pos += self.b
        return batch.to(self.device)


@torch.no_grad()
def _record(history, step, model, x, y, loss, eval_x, eval_y, patterns):
    history.steps.append(step)
    history.train_loss.append(float(loss))
    logits = model(inputs_embeds=x).logits
    history.train_accuracy.append(float((logits.argmax(-1) == y).float().mean()))
    if eval_x is not None:
        out = model(inputs_embeds=eval_x, labels=eval_y)
        history.eval_accuracy.append(float((out.logits.argmax(-1) == eval_y).float().mean()))
        history.eval_loss.append(float(out.loss))
    if patterns is not None and hasattr(model, "gate_vector"):
        for key, value in cosine_alignment(model.gate_vector, patterns).items():
            if hasattr(history, key):
                getattr(history, key).append(float(value))


def train_gd(
    model,
    inputs_embeds: torch.Tensor,
    labels: torch.Tensor,
    *,
    learning_rate: float,
    max_steps: int,
    batch_size: int | None = None,
    sampling: str = "with_replacement",
    seed: int = 0,
    loss_threshold: float | None = None,
    stop_at_threshold: bool = False,
    eval_inputs_embeds: torch.Tensor | None = None,
    eval_labels: torch.Tensor | None = None,
    patterns: torch.Tensor | None = None,
    log_every: int = 10,
    optimizer=None,
    progress: bool = False,
) -> TrainingHistory:
    """Train ``model`` in place by full-batch GD (``batch_size=None``) or SGD, and record the diagnostics.

    Each iteration: the loss ``model(inputs_embeds=..., labels=...).loss`` on the full training set (GD) or on a
    minibatch (SGD), its gradient, then ``p <- p - learning_rate * grad`` for every parameter with ``requires_grad``.
    Works for any model returning ``loss`` and ``logits`` (also the transformers Mamba comparison model).

    Args:
        model: e.g. a [`SelectiveSSMForSequenceClassification`]; put in train mode during the call.
        inputs_embeds (`torch.FloatTensor` of shape `(N, L, d)`), labels (`torch.LongTensor` of shape `(N,)`).
        learning_rate (`float`): ``η`` (constant).
        max_steps (`int`): number of updates.
        batch_size (`int`, *optional*): SGD minibatch size; `None` = full-batch GD.
        sampling (`str`, *optional*, defaults to `"with_replacement"`): SGD only: ``"with_replacement"`` draws each
            minibatch i.i.d. uniformly (the usual SGD analysis); ``"epoch"`` shuffles once per pass.
        seed (`int`, *optional*, defaults to `0`): seeds the SGD minibatches.
        loss_threshold (`float`, *optional*): record the first iteration with full-batch training loss ``<=`` this.
        stop_at_threshold (`bool`, *optional*, defaults to `False`): stop there.
        eval_inputs_embeds, eval_labels (*optional*): a test set for ``eval_accuracy`` / ``eval_loss``.
        patterns (`torch.Tensor` of shape `(M + 2, d)`, *optional*): record the gate-pattern cosines.
        log_every (`int`, *optional*, defaults to `10`).
        optimizer (`callable`, *optional*): ``params -> torch.optim.Optimizer`` to use instead of the plain update
            (for the transformers Mamba comparison only; the theory model is meant to be trained by plain (S)GD).
        progress (`bool`, *optional*, defaults to `False`): a tqdm bar.

    Returns:
        [`TrainingHistory`].

    Raises:
        ValueError: for a non-positive ``learning_rate``, ``max_steps < 0``, ``log_every < 1``, a ``batch_size``
            outside ``[1, N]`` or an unknown ``sampling``.
    """
    num_examples = len(labels)
    _validate(learning_rate, max_steps, log_every, batch_size, num_examples, sampling)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = optimizer(params) if optimizer is not None else None
    sampler = _BatchSampler(num_examples, batch_size, sampling, seed, labels.device) if batch_size else None
    history = TrainingHistory(loss_threshold=loss_threshold)
    was_training = model.training
    model.train()
    step = 0
    for step in _progress(range(max_steps + 1), progress, "GD" if sampler is None else "SGD"):
        full_loss = None
        if sampler is None:
            loss = model(inputs_embeds=inputs_embeds, labels=labels).loss
            full_loss = loss.detach()
        logging_now = step % log_every == 0 or step == max_steps
        if sampler is not None and logging_now:  # SGD: the full-batch loss is evaluated at the records only
            with torch.no_grad():
                full_loss = model(inputs_embeds=inputs_embeds, labels=labels).loss
        reached = full_loss is not None and loss_threshold is not None and float(full_loss) <= loss_threshold
        if reached and history.steps_to_threshold is None:
            history.steps_to_threshold = step
        if logging_now:
            _record(history, step, model, inputs_embeds, labels, full_loss, eval_inputs_embeds, eval_labels, patterns)
        if step == max_steps or (stop_at_threshold and history.steps_to_threshold is not None):
            if not logging_now:
                _record(
                    history, step, model, inputs_embeds, labels, full_loss, eval_inputs_embeds, eval_labels, patterns
                )
            break
        if sampler is not None:
            index = sampler()
            loss = model(inputs_embeds=inputs_embeds[index], labels=labels[index]).loss
        grads = torch.autograd.grad(loss, params, allow_unused=True)  # unused: e.g. Mamba's token embedding table
        if opt is None:
            with torch.no_grad():
                for p, g in zip(params, grads):
                    if g is not None:
                        p.sub_(learning_rate * g)
        else:
            for p, g in zip(params, grads):
                p.grad = g
            opt.step()
            opt.zero_grad(set_to_none=True)
    history.num_steps = step
    model.train(was_training)
    return history


def train_sgd(model, inputs_embeds, labels, *, batch_size: int, **kwargs) -> TrainingHistory:
    """:func:`train_gd` with a minibatch of ``batch_size`` per iteration (SGD; see ``sampling`` and ``seed``)."""
    if batch_size is None:
        raise ValueError("`batch_size` must be an int for SGD (use `train_gd` for full-batch GD)")
    return train_gd(model, inputs_embeds, labels, batch_size=batch_size, **kwargs)


def train_ensemble(
    models: list,
    inputs_embeds: torch.Tensor,
    labels: torch.Tensor,
    *,
    learning_rate: float,
    max_steps: int,
    sample_weights: torch.Tensor | None = None,
    batch_size: int | None = None,
    sampling: str = "with_replacement",
    seed: int = 0,
    loss_threshold: float | None = None,
    stop_when_all_reached: bool = False,
    eval_inputs_embeds: torch.Tensor | None = None,
    eval_labels: torch.Tensor | None = None,
    patterns: torch.Tensor | None = None,
    log_every: int = 10,
    progress: bool = False,
) -> list[TrainingHistory]:
    """Train ``E`` independent [`SelectiveSSMForSequenceClassification`] models of one config in one vectorised loop.

    The parameters are stacked (``torch.func.stack_module_state``) and the forward is ``vmap`` of
    ``torch.func.functional_call``; model ``e`` sees only its own data and gets exactly the update it would get
    alone (the members' losses are summed, so their gradients do not mix). At the end the trained weights are copied
    back into ``models``.

    Args:
        models (`list` of [`SelectiveSSMForSequenceClassification`]): same config; their initial weights are used.
        inputs_embeds (`torch.FloatTensor` of shape `(E, N, L, d)` or `(N, L, d)`): per-member or shared data.
        labels (`torch.LongTensor` of shape `(E, N)` or `(N,)`).
        learning_rate (`float`), max_steps (`int`): as :func:`train_gd`.
        sample_weights (`torch.Tensor` of shape `(E, N)`, *optional*): non-negative weights of each member's
            examples, normalised per member: a 0/1 mask gives member ``e`` the training set of its nonzero rows (how
            the sample-size sweeps train several ``N`` at once). Default: uniform.
        batch_size (`int`, *optional*): SGD minibatch (per member, drawn among its nonzero-weight rows, uniformly);
            `None` = full-batch GD.
        sampling (`str`, *optional*): SGD only; only ``"with_replacement"`` is supported here.
        seed (`int`, *optional*): seeds the SGD minibatches.
        loss_threshold (`float`, *optional*): per-member first iteration with full-batch training loss ``<=`` it.
        stop_when_all_reached (`bool`, *optional*, defaults to `False`): stop once every member reached it.
        eval_inputs_embeds (`(Nt, L, d)` or `(E, Nt, L, d)`), eval_labels (`(Nt,)` or `(E, Nt)`), *optional*.
        patterns (`torch.Tensor`, *optional*): record the gate-pattern cosines.
        log_every (`int`, *optional*, defaults to `10`), progress (`bool`, *optional*).

    Returns:
        `list[TrainingHistory]`, one per member.

    Raises:
        ValueError: for mismatched shapes, differing configs, or invalid step settings.
    """
    from torch.func import functional_call, stack_module_state

    if not models:
        raise ValueError("`models` must not be empty")
    config = models[0].config
    if any(m.config.to_dict() != config.to_dict() for m in models[1:]):
        raise ValueError("every model of an ensemble must have the same config")
    size = len(models)
    x = inputs_embeds if inputs_embeds.dim() == 4 else inputs_embeds.expand(size, *inputs_embeds.shape)
    y = labels if labels.dim() == 2 else labels.expand(size, *labels.shape)
    if x.shape[0] != size or y.shape[:2] != x.shape[:2]:
        raise ValueError(
            f"`inputs_embeds` {tuple(inputs_embeds.shape)} and `labels` {tuple(labels.shape)} do not match "
            f"{size} models"
        )
    num_examples = x.shape[1]
    _validate(learning_rate, max_steps, log_every, batch_size, num_examples, None)
    if sampling != "with_replacement":
        raise ValueError(f"`train_ensemble` supports `sampling='with_replacement'` only, got {sampling!r}")
    if sample_weights is None:
        weights = torch.full((size, num_examples), 1.0 / num_examples)
    else:
        if sample_weights.shape != (size, num_examples) or (sample_weights < 0).any():
            raise ValueError(f"`sample_weights` must be non-negative of shape {(size, num_examples)}")
        weights = sample_weights / sample_weights.sum(1, keepdim=True)
    weights = weights.to(x.dtype).to(x.device)

    params, buffers = stack_module_state(models)
    trainable = {n for n, p in models[0].named_parameters() if p.requires_grad}
    params = {n: p.detach().clone().requires_grad_(n in trainable) for n, p in params.items()}
    base = copy.deepcopy(models[0]).to("meta")

    def margin_of(p, b, inputs):
        return functional_call(base, (p, b), (inputs,)).margin

    batched_margin = torch.func.vmap(margin_of, in_dims=(0, 0, 0))
    eval_x = eval_y = None
    if eval_inputs_embeds is not None:
        eval_x = (
            eval_inputs_embeds
            if eval_inputs_embeds.dim() == 4
            else eval_inputs_embeds.expand(size, *eval_inputs_embeds.shape)
        )
        eval_y = eval_labels if eval_labels.dim() == 2 else eval_labels.expand(size, *eval_labels.shape)
    generator = torch.Generator().manual_seed(seed)
    histories = [TrainingHistory(loss_threshold=loss_threshold) for _ in range(size)]
    reached = torch.full((size,), -1, dtype=torch.long)
    trainable_list = [n for n in params if n in trainable]
    step = 0
    for step in _progress(range(max_steps + 1), progress, "ensemble GD" if batch_size is None else "ensemble SGD"):
        margin = batched_margin(params, buffers, x)
        per_example = margin_loss(margin, y, config.loss_type, reduction="none")
        member_loss = (per_example * weights).sum(1)
        if loss_threshold is not None:
            newly = (reached < 0) & (member_loss.detach() <= loss_threshold)
            reached[newly] = step
        done = stop_when_all_reached and loss_threshold is not None and bool((reached >= 0).all())
        if step % log_every == 0 or step == max_steps or done:
            _record_ensemble(
                histories,
                step,
                params,
                buffers,
                batched_margin,
                member_loss,
                margin,
                y,
                weights,
                eval_x,
                eval_y,
                config,
                patterns,
            )
        if step == max_steps or done:
            break
        if batch_size is None:
            objective = member_loss.sum()
        else:
            index = torch.multinomial((weights > 0).float().cpu(), batch_size, replacement=True, generator=generator)
            index = index.to(x.device)
            xb = torch.gather(x, 1, index[:, :, None, None].expand(-1, -1, *x.shape[2:]))
            yb = torch.gather(y, 1, index)
            objective = margin_loss(batched_margin(params, buffers, xb), yb, config.loss_type, reduction="none")
            objective = objective.mean(1).sum()
        grads = torch.autograd.grad(objective, [params[n] for n in trainable_list])
        with torch.no_grad():
            for n, g in zip(trainable_list, grads):
                params[n].sub_(learning_rate * g)
    for e, history in enumerate(histories):
        history.num_steps = step
        history.steps_to_threshold = int(reached[e]) if reached[e] >= 0 else None
    with torch.no_grad():
        for e, model in enumerate(models):
            state = {n: p[e] for n, p in params.items()}
            state.update({n: b[e] for n, b in buffers.items()})
            model.load_state_dict(state)
    return histories


@torch.no_grad()
def _record_ensemble(
    histories, step, params, buffers, batched_margin, member_loss, margin, y, weights, eval_x, eval_y, config, patterns
):
    correct = ((margin > 0).long() == y).float()
    train_acc = (correct * (weights > 0)).sum(1) / (weights > 0).sum(1)
    if eval_x is not None:
        eval_margin = batched_margin(params, buffers, eval_x)
        eval_acc = ((eval_margin > 0).long() == eval_y).float().mean(1)
        eval_loss = margin_loss(eval_margin, eval_y, config.loss_type, reduction="none").mean(1)
    cosines = None
    if patterns is not None:
        cosines = cosine_alignment(params["model.mixer.gate.weight"][:, 0], patterns)
    for e, history in enumerate(histories):
        history.steps.append(step)
        history.train_loss.append(float(member_loss[e]))
        history.train_accuracy.append(float(train_acc[e]))
        if eval_x is not None:
            history.eval_accuracy.append(float(eval_acc[e]))
            history.eval_loss.append(float(eval_loss[e]))
        if cosines is not None:
            for key, value in cosines.items():
                if hasattr(history, key):
                    getattr(history, key).append(float(value[e]))


__all__ = ["TrainingHistory", "train_ensemble", "train_gd", "train_sgd"]
