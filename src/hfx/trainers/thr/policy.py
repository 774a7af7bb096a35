"""The rollout policy ``pi_old`` as the model itself computes it: hidden states in, final logits out.

THR needs ``pi_old(. | x, y_<k)`` at every completion position, from the final-layer hidden states ``h`` it captures
during the rollout (or recomputes). Architectures form their logits differently after the backbone: Granite and
MiniCPM3 divide by ``logits_scaling`` (MiniCPM3 before the LM head), HyperCLOVA X multiplies by it, Falcon-H1
multiplies by ``lm_head_multiplier``, Cohere by ``logit_scale``, Gemma 2/3/4 and others apply a final tanh softcap,
some slice a padded vocabulary. Rather than a list of known attributes, :func:`output_logits` runs the model class's
own ``forward`` with the backbone's output replaced by the given hidden states, so whatever that ``forward`` does
after its backbone is applied exactly, in the model's own dtype and order of operations.

Mechanism: ``type(model).forward`` is called with ``self`` bound to a read-only *view* of the model whose backbone
attribute (``model.base_model_prefix``, also ``base_model``) is a stand-in that returns the given hidden states and
forwards every other attribute to the real backbone (Falcon-H1 reads ``self.model.lm_head_multiplier``). Every other
attribute (``lm_head``, ``config``, ``logit_scale``, ...) is the real one, so the real LM head module runs, with its
hooks (PEFT adapters on the head, DeepSpeed ZeRO-3's parameter gathering). Nothing is patched or mutated: the view
exists for the duration of one call.

Sharded parameters: :func:`gathered_output_head` materialises the head's parameters for the call (DeepSpeed ZeRO-3:
``GatheredParameters`` on the LM head; FSDP2: ``unshard()`` of the FSDP modules owning them; FSDP1:
``summon_full_params(recurse=False)`` of the wrapped root).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator

import torch


def policy_model(model):
    """The `PreTrainedModel` under a PEFT wrapper (``get_base_model()``), else ``model`` itself."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) and hasattr(model, "peft_config") else model


def backbone_of(model) -> torch.nn.Module:
    """The backbone whose ``last_hidden_state`` feeds the output head (``model.base_model``).

    Raises:
        ValueError: if the model has no separate backbone or no output embedding (not a causal LM with a head).
    """
    model = policy_model(model)
    prefix = getattr(model, "base_model_prefix", "")
    backbone = getattr(model, prefix, None) if prefix else None
    if backbone is None or backbone is model or model.get_output_embeddings() is None:
        raise ValueError(
            f"THR needs a causal LM with a backbone (`base_model_prefix`) and an output embedding, but "
            f"{type(model).__name__} has none; use `thr_mode='off'` for this model."
        )
    return backbone


class _HiddenStatesOutput(dict):
    """Backbone output stand-in: ``last_hidden_state`` (also ``[0]``), ``None`` for every other field."""

    def __init__(self, hidden_states: torch.Tensor):
        super().__init__(last_hidden_state=hidden_states)
        self.last_hidden_state = hidden_states

    def __getitem__(self, key):
        if isinstance(key, int):
            if key == 0:
                return self.last_hidden_state
            raise IndexError(key)
        return super().__getitem__(key)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)

    def to_tuple(self):
        return (self.last_hidden_state,)


class _BackboneStandIn:
    """Returns fixed hidden states when called; every attribute is the real backbone's."""

    def __init__(self, backbone: torch.nn.Module, hidden_states: torch.Tensor):
        object.__setattr__(self, "_backbone", backbone)
        object.__setattr__(self, "_hidden_states", hidden_states)

    def __call__(self, *args, **kwargs):
        return _HiddenStatesOutput(self._hidden_states)

    def __getattr__(self, name):
        return getattr(self._backbone, name)

    def __setattr__(self, name, value):
        raise AttributeError(f"the THR backbone stand-in is read-only (tried to set {name!r})")


class _ModelView:
    """``model`` with its backbone attribute replaced by a stand-in (and, optionally, its output head); read-only."""

    def __init__(self, model, prefix: str, stand_in: _BackboneStandIn, head=None, head_name: str | None = None):
        object.__setattr__(self, "_model", model)
        object.__setattr__(self, "_prefix", prefix)
        object.__setattr__(self, "_stand_in", stand_in)
        object.__setattr__(self, "_head", head)
        object.__setattr__(self, "_head_name", head_name)

    def __getattr__(self, name):
        if name in (self._prefix, "base_model"):
            return self._stand_in
        if self._head is not None:
            if name == self._head_name:
                return self._head
            if name == "get_output_embeddings":
                return lambda: self._head
        return getattr(self._model, name)

    def __setattr__(self, name, value):
        raise AttributeError(f"the THR model view is read-only (tried to set {name!r})")


def _forward_kwargs(forward) -> dict:
    params = inspect.signature(forward).parameters
    kwargs = {}
    if "logits_to_keep" in params:
        kwargs["logits_to_keep"] = 0  # every position
    if "use_cache" in params:
        kwargs["use_cache"] = False
    if "output_router_logits" in params:
        kwargs["output_router_logits"] = False
    return kwargs


class PlainLinearHead:
    """A hook-free linear head over already-gathered parameters (``F.linear(h, weight, bias)``).

    Used by :func:`gathered_output_head` when the head's parameters are sharded: calling the real module would run
    the sharding framework's per-module hooks (a collective gather, then a release) on every call, and the number of
    calls differs between processes (it depends on each one's data), which would hang the collectives.
    """

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None):
        self.weight, self.bias = weight, bias

    def __call__(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(hidden_states, self.weight, self.bias)


def _head_attribute(model) -> str | None:
    head = model.get_output_embeddings()
    return next((name for name, child in model.named_children() if child is head), None)


@torch.no_grad()
def output_logits(model, hidden_states: torch.Tensor, head=None) -> torch.Tensor:
    """The model's final logits for given backbone outputs, computed by the model's own ``forward``.

    Equals ``model(input_ids, ...).logits`` for the input whose backbone output is ``hidden_states`` (every
    architecture-specific rescaling, softcapping or vocabulary slicing included); see the module docstring for how.

    Args:
        model (`PreTrainedModel` or PEFT model): a causal LM (the unwrapped policy).
        hidden_states (`torch.Tensor` of shape `(b, n, d)`): the backbone's ``last_hidden_state`` at ``n`` positions
            (in the model's dtype).
        head (*optional*): a replacement for the output head module during this call (what
            :func:`gathered_output_head` yields for sharded parameters); ``None`` uses the model's own.

    Returns:
        `torch.Tensor` of shape `(b, n, V)` in the dtype the model's forward produces.

    Raises:
        ValueError: if ``hidden_states`` is not 3-D, or the model has no backbone / output head.
    """
    if hidden_states.dim() != 3:
        raise ValueError(
            f"`hidden_states` must have shape (batch, positions, hidden), got {tuple(hidden_states.shape)}"
        )
    model = policy_model(model)
    backbone = backbone_of(model)
    forward = type(model).forward
    head_name = _head_attribute(model) if head is not None else None
    view = _ModelView(
        model, model.base_model_prefix, _BackboneStandIn(backbone, hidden_states), head=head, head_name=head_name
    )
    dummy_ids = torch.zeros(hidden_states.shape[:2], dtype=torch.long, device=hidden_states.device)
    out = forward(view, input_ids=dummy_ids, **_forward_kwargs(forward))
    logits = out.logits if hasattr(out, "logits") else out[0]
    if logits.shape[:2] != hidden_states.shape[:2]:
        raise ValueError(
            f"{type(model).__name__}.forward returned logits of shape {tuple(logits.shape)} for hidden states of shape "
            f"{tuple(hidden_states.shape)}; THR cannot derive pi_old from this model (use `thr_mode='off'`)."
        )
    return logits


@contextlib.contextmanager
def capture_last_hidden_states(backbone: torch.nn.Module) -> Iterator[list[torch.Tensor]]:
    """Record, at every call of ``backbone``, its output's last position (``last_hidden_state[:, -1]``, detached).

    During ``generate`` each decoding step calls the backbone once, and the last position is the one whose hidden
    state predicts the next token, so the list ends up with one `(B, d)` tensor per generated token. The forward hook
    exists only inside the ``with`` block.

    Yields:
        `list[torch.Tensor]`: filled in place, one `(B, d)` tensor per backbone call (model dtype).
    """
    steps: list[torch.Tensor] = []

    def record_last_hidden_state(module, args, output):
        hidden = output[0] if isinstance(output, (tuple, list)) else output.last_hidden_state
        steps.append(hidden[:, -1].detach())

    handle = backbone.register_forward_hook(record_last_hidden_state)
    try:
        yield steps
    finally:
        handle.remove()


@contextlib.contextmanager
def capture_hidden_states(backbone: torch.nn.Module) -> Iterator[list[torch.Tensor]]:
    """Record the whole ``last_hidden_state`` (detached) of every call of ``backbone`` inside the ``with`` block.

    Used on the training model's own no-grad forward of prompt + completion that TRL runs for the old log-probs
    (vLLM importance-sampling correction, or generation not aligned with optimizer steps): chunk ``c`` of that forward
    adds one `(b_c, L, d)` tensor; position ``k`` predicts token ``k + 1``. The forward hook exists only inside the
    ``with`` block.

    Yields:
        `list[torch.Tensor]`: filled in place, one `(b, L, d)` tensor per backbone call (model dtype).
    """
    calls: list[torch.Tensor] = []

    def record_hidden_states(module, args, output):
        hidden = output[0] if isinstance(output, (tuple, list)) else output.last_hidden_state
        calls.append(hidden.detach())

    handle = backbone.register_forward_hook(record_hidden_states)
    try:
        yield calls
    finally:
        handle.remove()


def _fsdp2_owners(model, head: torch.nn.Module) -> list:
    """FSDP2 (``fully_shard``) modules among (head, model): the head's own unit and / or the root's."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # pragma: no cover - old torch
        return []
    return [m for m in (head, model) if isinstance(m, FSDPModule)]


def _is_sharded(params) -> bool:
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # pragma: no cover - old torch
        return False
    return any(isinstance(p, DTensor) for p in params)


def _is_fsdp1(wrapped) -> bool:
    return wrapped is not None and type(wrapped).__name__ == "FullyShardedDataParallel"


@contextlib.contextmanager
def gathered_output_head(model, wrapped=None) -> Iterator[PlainLinearHead | None]:
    """Materialise the output head's parameters once when they are sharded; yields the head to use, or ``None``.

    * DeepSpeed ZeRO-3 (parameters carry ``ds_id``): ``deepspeed.zero.GatheredParameters`` on the head's weight and
      bias (TRL's ``maybe_gather_lm_head_ctx``).
    * FSDP2 (``fully_shard`` on the head or the root): ``unshard()`` of those FSDP modules, ``reshard()`` on exit
      if the head was sharded on entry.
    * FSDP1 (``wrapped`` is a ``FullyShardedDataParallel``): ``summon_full_params(wrapped, recurse=False)``.

    In these cases a :class:`PlainLinearHead` over the gathered parameters is yielded, for :func:`output_logits` to
    use instead of the module, so the head's sharding hooks (a collective per call) never run: every process enters
    this context exactly once per THR computation, however many head calls its data needs. Raises ``ValueError`` if
    the sharded head is not a plain linear layer (e.g. a PEFT adapter on ``lm_head``). Otherwise yields ``None``
    (the model's own head module is called).

    Args:
        model: the unwrapped policy (PEFT allowed). wrapped (*optional*): the distributed wrapper (``model_wrapped``).
    """
    base = policy_model(model)
    head = base.get_output_embeddings()
    params = [p for p in (getattr(head, "weight", None), getattr(head, "bias", None)) if p is not None]
    zero3 = any(hasattr(p, "ds_id") for p in params)
    owners = _fsdp2_owners(base, head)
    fsdp1 = _is_fsdp1(wrapped)
    if not (zero3 or owners or fsdp1):
        yield None
        return
    if not isinstance(head, torch.nn.Linear):  # FSDP2 subclasses it (FSDPLinear); PEFT layers are not Linear
        raise ValueError(  # noqa: TRY004 (a configuration problem, reported like the other THR refusals)
            f"THR computes pi_old with the output head over gathered parameters when they are sharded, which needs "
            f"a plain `torch.nn.Linear` head, but the head is a {type(head).__name__} (e.g. a PEFT adapter on the LM "
            "head); leave the head out of the adapter's target modules or use `thr_mode='off'`."
        )
    with contextlib.ExitStack() as stack:
        if zero3:
            from trl.trainer.utils import maybe_gather_lm_head_ctx

            stack.enter_context(maybe_gather_lm_head_ctx(*params))
        if owners:
            was_sharded = _is_sharded(params)
            for owner in owners:
                owner.unshard()  # a no-op when already unsharded (e.g. right after generation)
                if was_sharded:
                    stack.callback(owner.reshard)
        if fsdp1:
            from torch.distributed.fsdp import FullyShardedDataParallel

            stack.enter_context(FullyShardedDataParallel.summon_full_params(wrapped, recurse=False))
        yield PlainLinearHead(head.weight, head.bias)


@torch.no_grad()
def old_policy_probs(
    model,
    hidden_states: torch.Tensor,
    vocab_subset: torch.Tensor | None = None,
    temperature: float = 1.0,
    chunk_size: int = 1024,
) -> torch.Tensor:
    """``softmax(model logits / temperature)`` at the given backbone outputs, sliced to ``vocab_subset``.

    The probabilities THR's prediction errors ``g = e_y - pi_old`` use; equal to
    ``softmax(model(...).logits / temperature)[..., vocab_subset]`` (not renormalised).

    Args:
        model: the causal LM (PEFT allowed). hidden_states (`torch.Tensor` of shape `(..., d)`).
        vocab_subset (`torch.LongTensor` of shape `(|V*|,)`, *optional*): ``None`` keeps every column.
        temperature (`float`, *optional*, defaults to `1.0`). chunk_size (`int`, *optional*, defaults to `1024`).

    Returns:
        `torch.Tensor` of shape `(..., |V*|)` in fp32.
    """
    from .token_rewards import sliced_token_probs

    return sliced_token_probs(
        hidden_states,
        lambda h: output_logits(model, h),
        vocab_subset,
        temperature=temperature,
        chunk_size=chunk_size,
    )


__all__ = [
    "PlainLinearHead",
    "backbone_of",
    "capture_hidden_states",
    "capture_last_hidden_states",
    "gathered_output_head",
    "old_policy_probs",
    "output_logits",
    "policy_model",
]
