"""The one-layer selective SSM of the Mamba training-dynamics theory, as transformers models (arXiv 2602.12499).

*A Theoretical Analysis of Mamba's Training Dynamics: Filtering Relevant Features for Generalization in State Space
Models* (Shandirasegaran, Li, Zhang, Wang, Zhang; ICLR 2026, https://huggingface.co/papers/2602.12499) analyses "a
single-layer, single-head selective SSM with input-dependent gating, followed by a two-layer MLP". The exact block
of the paper is not available here: this is a **reconstruction** (spec ``mamba_theory.md``), and every reconstructed
choice is a field of :class:`~hfx.models.selective_ssm.SelectiveSSMConfig`.

* :class:`SelectiveSSMModel` -- the block: gate logits ``z_l = w_g · x_l``, log decays ``a_l`` and input coefficients
  ``b_l`` from ``config.recurrence``, the recurrence ``h_l = exp(a_l) h_{l-1} + b_l W_in x_l`` and its closed form
  ``h_L = Σ_j c_j W_in x_j`` with ``c_j = b_j exp(Σ_{k>j} a_k)`` (:func:`token_weights`, the "attention" of the
  decision point on each token).
* :class:`SelectiveSSMForSequenceClassification` -- the block + the two-layer MLP ``f(X) = Σ_i a_i act(v_i · h_L)``,
  with the theory's hinge (or logistic) loss on ``y f(X)``, ``y = 2 · label - 1``.

``model_type="hfx_selective_ssm"`` is registered with ``AutoConfig``, ``AutoModel`` and
``AutoModelForSequenceClassification`` after ``import hfx`` (new types only, ``exist_ok=True``), and a saved folder
carries this code and an ``auto_map``, so it also loads with plain transformers and ``trust_remote_code=True``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.utils import ModelOutput

from hfx.utils.artifacts import ModelArtifactMixin, register_module

from .configuration_selective_ssm import SelectiveSSMConfig


PAPER_URL = "https://huggingface.co/papers/2602.12499"


# ------------------------------------------------------------------------------------------------------ functional core
def gate_coefficients(gate_logits: torch.Tensor, config: SelectiveSSMConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """Input coefficients ``b_l`` and log decays ``a_l`` of the recurrence from the gate logits ``z_l``.

    Args:
        gate_logits (`torch.Tensor` of shape `(..., sequence_length)`): ``z_l = w_g · x_l (+ b_g)``.
        config ([`SelectiveSSMConfig`]): reads ``recurrence`` and ``state_decay``.

    Returns:
        `tuple(torch.Tensor, torch.Tensor)`: ``(b, a)``, both shaped like ``gate_logits``: ``zoh``:
        ``(sigmoid(z), log(1 - sigmoid(z)))``; ``mamba_euler``: ``(softplus(z), -softplus(z))``; ``input_gate``:
        ``(sigmoid(z), log(state_decay))``. ``a`` is computed in log space (``logsigmoid``), so it never underflows.
    """
    if config.recurrence == "zoh":
        return torch.sigmoid(gate_logits), F.logsigmoid(-gate_logits)
    if config.recurrence == "mamba_euler":
        delta = F.softplus(gate_logits)
        return delta, -delta
    if config.recurrence == "input_gate":
        return torch.sigmoid(gate_logits), torch.full_like(gate_logits, math.log(config.state_decay))
    raise ValueError(f"`recurrence` must be one of ['zoh', 'mamba_euler', 'input_gate'], but is {config.recurrence!r}")


def token_weights(input_coefficients: torch.Tensor, log_decays: torch.Tensor) -> torch.Tensor:
    """Weight of each token in the last state: ``c_j = b_j · exp(Σ_{k>j} a_k)``, so ``h_L = Σ_j c_j W_in x_j``.

    The sum over later tokens is an exclusive reverse cumulative sum (no subtraction of large partial sums).

    Args:
        input_coefficients (`torch.Tensor` of shape `(..., sequence_length)`): ``b``.
        log_decays (`torch.Tensor` of shape `(..., sequence_length)`): ``a`` (``<= 0``).

    Returns:
        `torch.Tensor` of shape `(..., sequence_length)`.
    """
    later = torch.flip(torch.cumsum(torch.flip(log_decays, [-1]), -1), [-1])  # Σ_{k>=j} a_k
    later = torch.cat([later[..., 1:], torch.zeros_like(later[..., :1])], -1)  # Σ_{k>j} a_k
    return input_coefficients * torch.exp(later)


def all_states(values: torch.Tensor, input_coefficients: torch.Tensor, log_decays: torch.Tensor) -> torch.Tensor:
    """Every state ``h_1 .. h_L`` from the parallel ("dual", attention-like) form ``h_l = Σ_{j<=l} M_lj u_j``.

    ``M_lj = b_j exp(Σ_{j<k<=l} a_k)`` for ``j <= l`` (``0`` above the diagonal); memory ``O(L²)`` per sequence.

    Args:
        values (`torch.Tensor` of shape `(..., sequence_length, state_size)`): ``u_j = W_in x_j``.
        input_coefficients, log_decays (`torch.Tensor` of shape `(..., sequence_length)`): ``b``, ``a``.

    Returns:
        `torch.Tensor` of shape `(..., sequence_length, state_size)`.
    """
    length = log_decays.shape[-1]
    cumulative = torch.cumsum(log_decays, -1)
    exponent = cumulative[..., :, None] - cumulative[..., None, :]  # (…, l, j): Σ_{j<k<=l} a_k for j <= l
    causal = torch.ones(length, length, dtype=torch.bool, device=log_decays.device).tril()
    exponent = exponent.masked_fill(~causal, float("-inf"))
    mixing = input_coefficients[..., None, :] * torch.exp(exponent)
    return mixing @ values


# ------------------------------------------------------------------------------------------------------------ outputs
@dataclass
class SelectiveSSMOutput(ModelOutput):
    """Output of [`SelectiveSSMModel`].

    Args:
        last_state (`torch.FloatTensor` of shape `(batch_size, state_size)`):
            ``h_L`` (divided by ``L`` when ``config.state_normalization="length"``): what the MLP reads.
        gate_logits (`torch.FloatTensor` of shape `(batch_size, sequence_length)`): ``z_l = w_g · x_l (+ b_g)``.
        gates (`torch.FloatTensor` of shape `(batch_size, sequence_length)`):
            the input coefficients ``b_l`` (``sigmoid(z_l)`` for ``zoh`` / ``input_gate``, ``Δ_l`` for
            ``mamba_euler``): the per-token gate values.
        decays (`torch.FloatTensor` of shape `(batch_size, sequence_length)`): ``exp(a_l)``, the state's decay.
        token_weights (`torch.FloatTensor` of shape `(batch_size, sequence_length)`):
            ``c_j``, the weight of token ``j`` in ``h_L`` (before the length normalisation).
        states (`torch.FloatTensor` of shape `(batch_size, sequence_length, state_size)`, *optional*):
            every ``h_l``, when ``output_hidden_states=True``.
    """

    last_state: torch.FloatTensor | None = None
    gate_logits: torch.FloatTensor | None = None
    gates: torch.FloatTensor | None = None
    decays: torch.FloatTensor | None = None
    token_weights: torch.FloatTensor | None = None
    states: torch.FloatTensor | None = None


@dataclass
class SelectiveSSMClassifierOutput(ModelOutput):
    """Output of [`SelectiveSSMForSequenceClassification`].

    Args:
        loss (`torch.FloatTensor` of shape `()`, *optional*): mean hinge / logistic loss, when ``labels`` are given.
        logits (`torch.FloatTensor` of shape `(batch_size, 2)`):
            ``(-f/2, f/2)``: softmax of these is ``(1 - sigmoid(f), sigmoid(f))``, so argmax is ``sign(f)`` and the
            cross-entropy equals the logistic loss on ``f``.
        margin (`torch.FloatTensor` of shape `(batch_size,)`): ``f(X)``, the theory's real-valued output.
        last_state, gate_logits, gates, decays, token_weights, states: as in [`SelectiveSSMOutput`].
    """

    loss: torch.FloatTensor | None = None
    logits: torch.FloatTensor | None = None
    margin: torch.FloatTensor | None = None
    last_state: torch.FloatTensor | None = None
    gate_logits: torch.FloatTensor | None = None
    gates: torch.FloatTensor | None = None
    decays: torch.FloatTensor | None = None
    token_weights: torch.FloatTensor | None = None
    states: torch.FloatTensor | None = None


# ------------------------------------------------------------------------------------------------------------ modules
class SelectiveSSMMixer(nn.Module):
    """The gate ``w_g`` (``gate``: an ``nn.Linear(d, 1)``) and the input projection ``W_in``.

    ``W_in`` is the trained ``in_proj`` (``nn.Linear(d, n, bias=False)``), or the fixed buffer ``in_proj_weight``
    when ``train_input_projection=False``, or absent for ``input_projection="identity"``. Fixed weights are buffers, so
    no optimizer can move them and they still round-trip through ``save_pretrained`` / ``from_pretrained``.
    """

    def __init__(self, config: SelectiveSSMConfig):
        super().__init__()
        self.gate = nn.Linear(config.hidden_size, 1, bias=config.gate_bias)
        self.gate._hfx_role = "gate"
        self.in_proj = None
        if config.input_projection == "linear":
            if config.train_input_projection:
                self.in_proj = nn.Linear(config.hidden_size, config.state_size, bias=False)
                self.in_proj._hfx_role = "in_proj"
            else:
                self.register_buffer("in_proj_weight", torch.empty(config.state_size, config.hidden_size))

    def input_projection_weight(self) -> torch.Tensor | None:
        """``W_in`` of shape `(state_size, hidden_size)`, or `None` for the identity."""
        if self.in_proj is not None:
            return self.in_proj.weight
        return getattr(self, "in_proj_weight", None)

    def values(self, inputs_embeds: torch.Tensor) -> torch.Tensor:
        """``u_l = W_in x_l``, shape `(..., sequence_length, state_size)`."""
        weight = self.input_projection_weight()
        return inputs_embeds if weight is None else inputs_embeds @ weight.T


class SelectiveSSMMLP(nn.Module):
    """The two-layer MLP ``f(h) = Σ_i a_i act(v_i · h (+ β_i))``.

    ``V`` is ``fc1``; the output weights ``a`` are the trained ``fc2`` (``mlp_output="trained"``) or the fixed buffer
    ``output_weight`` of shape `(1, mlp_hidden_size)` (``"fixed_sign"``).
    """

    def __init__(self, config: SelectiveSSMConfig):
        super().__init__()
        self.fc1 = nn.Linear(config.state_size, config.mlp_hidden_size, bias=config.mlp_bias)
        self.fc1._hfx_role = "fc1"
        if config.mlp_output == "trained":
            self.fc2 = nn.Linear(config.mlp_hidden_size, 1, bias=False)
            self.fc2._hfx_role = "fc2"
        else:
            self.fc2 = None
            self.register_buffer("output_weight", torch.empty(1, config.mlp_hidden_size))
        self.activation = config.mlp_activation

    def output_weights(self) -> torch.Tensor:
        """``a``, shape `(1, mlp_hidden_size)`."""
        return self.fc2.weight if self.fc2 is not None else self.output_weight

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        hidden = self.fc1(state)
        if self.activation == "relu":
            hidden = torch.relu(hidden)
        return (hidden @ self.output_weights().T).squeeze(-1)


class SelectiveSSMPreTrainedModel(ModelArtifactMixin, PreTrainedModel):
    """Weight initialisation and loading for the selective-SSM theory models (identity checks on load / save:
    :class:`~hfx.utils.artifacts.ModelArtifactMixin`)."""

    config: SelectiveSSMConfig
    config_class = SelectiveSSMConfig
    accepts_loss_kwargs = False  # a mean loss: `Trainer` passes no `num_items_in_batch`, divides by accumulation steps
    base_model_prefix = "model"
    main_input_name = "inputs_embeds"
    _no_split_modules: list[str] = []  # noqa: RUF012 (transformers' class attribute)

    def _init_weights(self, module):
        # Containers without parameters of their own are skipped by transformers' initialisation of custom code, so
        # each Linear carries its role (`_hfx_role`) and the fixed weights are buffers of their container.
        config = self.config
        role = getattr(module, "_hfx_role", None)
        if role == "gate":
            if config.gate_init_std > 0:
                init.normal_(module.weight, mean=0.0, std=config.gate_init_std)
            else:
                init.zeros_(module.weight)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif role == "in_proj":
            init.copy_(module.weight, _input_projection_init(config))
        elif role == "fc1":
            std = config.mlp_init_std if config.mlp_init_std is not None else config.state_size**-0.5
            init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif role == "fc2":
            init.copy_(module.weight, _output_weights_init(config))
        elif isinstance(module, SelectiveSSMMixer) and hasattr(module, "in_proj_weight"):
            init.copy_(module.in_proj_weight, _input_projection_init(config))
        elif isinstance(module, SelectiveSSMMLP) and module.fc2 is None:
            init.copy_(module.output_weight, _output_weights_init(config))


def _input_projection_init(config: SelectiveSSMConfig) -> torch.Tensor:
    """Identity when ``state_size == hidden_size``, else ``N(0, 1/d)`` (drawn from the global torch RNG)."""
    if config.state_size == config.hidden_size:
        return torch.eye(config.state_size)
    return torch.randn(config.state_size, config.hidden_size) * config.hidden_size**-0.5


def _output_weights_init(config: SelectiveSSMConfig) -> torch.Tensor:
    """``a_i = +1/sqrt(m)`` for even ``i`` and ``-1/sqrt(m)`` for odd ``i``, shape `(1, m)`."""
    m = config.mlp_hidden_size
    return (torch.tensor([1.0 if i % 2 == 0 else -1.0 for i in range(m)]) / math.sqrt(m))[None, :]


def _check_inputs_embeds(inputs_embeds, hidden_size: int) -> None:
    if not isinstance(inputs_embeds, torch.Tensor):
        raise TypeError(f"`inputs_embeds` must be a torch.Tensor, but is {type(inputs_embeds).__name__}")
    if inputs_embeds.dim() != 3 or inputs_embeds.shape[-1] != hidden_size:
        raise ValueError(
            f"`inputs_embeds` must have shape (batch_size, sequence_length, hidden_size={hidden_size}), "
            f"but has shape {tuple(inputs_embeds.shape)}"
        )
    if inputs_embeds.shape[1] < 1:
        raise ValueError("`inputs_embeds` must contain at least one token per sequence")


class SelectiveSSMModel(SelectiveSSMPreTrainedModel):
    """The selective-SSM block alone: gates, recurrence, last state (no MLP). See the module docstring.

    Args:
        config ([`SelectiveSSMConfig`]).
    """

    def __init__(self, config: SelectiveSSMConfig):
        super().__init__(config)
        self.mixer = SelectiveSSMMixer(config)
        self.post_init()

    @property
    def gate_vector(self) -> torch.Tensor:
        """``w_g``, shape `(hidden_size,)` (a view of the gate weight)."""
        return self.mixer.gate.weight[0]

    def forward(
        self, inputs_embeds: torch.Tensor, output_hidden_states: bool = False, return_dict: bool = True, **kwargs
    ) -> SelectiveSSMOutput | tuple:
        """Run the block on token vectors.

        Args:
            inputs_embeds (`torch.FloatTensor` of shape `(batch_size, sequence_length, hidden_size)`): ``x_1 .. x_L``.
            output_hidden_states (`bool`, *optional*, defaults to `False`): also return every state ``h_l``.
            return_dict (`bool`, *optional*, defaults to `True`).

        Returns:
            [`SelectiveSSMOutput`] (or its tuple).

        Raises:
            TypeError / ValueError: if ``inputs_embeds`` is not a 3-D tensor with ``hidden_size`` features.
        """
        if kwargs:
            raise TypeError(f"unexpected keyword arguments {sorted(kwargs)}")
        _check_inputs_embeds(inputs_embeds, self.config.hidden_size)
        mixer = self.mixer
        gate_logits = mixer.gate(inputs_embeds).squeeze(-1)
        coefficients, log_decays = gate_coefficients(gate_logits, self.config)
        weights = token_weights(coefficients, log_decays)
        # W_in is linear: project the weighted sum of the tokens (L times cheaper than projecting every token)
        last_state = mixer.values(torch.einsum("...l,...ld->...d", weights, inputs_embeds))
        if self.config.state_normalization == "length":
            last_state = last_state / inputs_embeds.shape[-2]
        states = all_states(mixer.values(inputs_embeds), coefficients, log_decays) if output_hidden_states else None
        out = SelectiveSSMOutput(
            last_state=last_state,
            gate_logits=gate_logits,
            gates=coefficients,
            decays=torch.exp(log_decays),
            token_weights=weights,
            states=states,
        )
        return out if return_dict else out.to_tuple()


def margin_loss(margin: torch.Tensor, labels: torch.Tensor, loss_type: str, reduction: str = "mean") -> torch.Tensor:
    """The theory's loss on ``y f(X)`` with ``y = 2 · label - 1``: hinge ``max(0, 1 - y f)`` or logistic.

    Args:
        margin (`torch.Tensor` of shape `(...,)`): ``f(X)``.
        labels (`torch.LongTensor` of shape `(...,)`): in ``{0, 1}``.
        loss_type (`str`): ``"hinge"`` or ``"logistic"``.
        reduction (`str`, *optional*, defaults to `"mean"`): ``"mean"`` or ``"none"``.

    Raises:
        ValueError: for another ``loss_type`` / ``reduction``, or labels outside ``{0, 1}``.
    """
    if labels.dtype.is_floating_point:
        raise ValueError(f"`labels` must be integer class ids in {{0, 1}}, but have dtype {labels.dtype}")
    if labels.numel() and (labels.min() < 0 or labels.max() > 1):
        raise ValueError("`labels` must be in {0, 1} (label 1 means y = +1, label 0 means y = -1)")
    signed = (2 * labels - 1).to(margin.dtype) * margin
    if loss_type == "hinge":
        per_example = torch.clamp(1 - signed, min=0)
    elif loss_type == "logistic":
        per_example = F.softplus(-signed)
    else:
        raise ValueError(f"`loss_type` must be 'hinge' or 'logistic', but is {loss_type!r}")
    if reduction == "mean":
        return per_example.mean()
    if reduction == "none":
        return per_example
    raise ValueError(f"`reduction` must be 'mean' or 'none', but is {reduction!r}")


class SelectiveSSMForSequenceClassification(SelectiveSSMPreTrainedModel):
    """The selective-SSM block + two-layer MLP: the binary classifier of the theory (a reconstruction).

    Example:

    ```python
    >>> import torch
    >>> from hfx.models.selective_ssm import SelectiveSSMConfig, SelectiveSSMForSequenceClassification
    >>> model = SelectiveSSMForSequenceClassification(SelectiveSSMConfig(hidden_size=8))
    >>> out = model(inputs_embeds=torch.randn(4, 10, 8), labels=torch.tensor([0, 1, 1, 0]))
    >>> out.logits.shape, out.margin.shape, out.gates.shape
    (torch.Size([4, 2]), torch.Size([4]), torch.Size([4, 10]))
    ```

    Args:
        config ([`SelectiveSSMConfig`]).
    """

    def __init__(self, config: SelectiveSSMConfig):
        super().__init__(config)
        self.model = SelectiveSSMModel(config)
        self.mlp = SelectiveSSMMLP(config)
        self.post_init()

    @property
    def gate_vector(self) -> torch.Tensor:
        """``w_g``, shape `(hidden_size,)`."""
        return self.model.gate_vector

    def forward(
        self,
        inputs_embeds: torch.Tensor,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        return_dict: bool = True,
        **kwargs,
    ) -> SelectiveSSMClassifierOutput | tuple:
        """Classify token sequences.

        Args:
            inputs_embeds (`torch.FloatTensor` of shape `(batch_size, sequence_length, hidden_size)`).
            labels (`torch.LongTensor` of shape `(batch_size,)`, *optional*): ``{0, 1}`` (``y = 2 · label - 1``).
            output_hidden_states (`bool`, *optional*, defaults to `False`): also return every state ``h_l``.
            return_dict (`bool`, *optional*, defaults to `True`).

        Returns:
            [`SelectiveSSMClassifierOutput`] (or its tuple).

        Raises:
            ValueError: for labels outside ``{0, 1}`` or a wrongly shaped input.
        """
        block = self.model(inputs_embeds, output_hidden_states=output_hidden_states, **kwargs)
        margin = self.mlp(block.last_state)
        loss = None if labels is None else margin_loss(margin, labels, self.config.loss_type)
        out = SelectiveSSMClassifierOutput(
            loss=loss,
            logits=torch.stack([-margin / 2, margin / 2], -1),
            margin=margin,
            last_state=block.last_state,
            gate_logits=block.gate_logits,
            gates=block.gates,
            decays=block.decays,
            token_weights=block.token_weights,
            states=block.states,
        )
        return out if return_dict else out.to_tuple()


def register_auto_classes() -> None:
    """Register ``hfx_selective_ssm`` with ``AutoConfig`` / ``AutoModel`` / ``AutoModelForSequenceClassification``.

    Only a new model type is added (``exist_ok=True``, so calling this again is harmless). ``import hfx`` already
    does it when transformers' Auto modules load (:data:`hfx.utils.artifacts.ARCHITECTURES`), and this module does it
    as its last statement.
    """
    register_module(__name__)


register_auto_classes()

__all__ = [
    "SelectiveSSMClassifierOutput",
    "SelectiveSSMForSequenceClassification",
    "SelectiveSSMModel",
    "SelectiveSSMOutput",
    "SelectiveSSMPreTrainedModel",
    "all_states",
    "gate_coefficients",
    "margin_loss",
    "register_auto_classes",
    "token_weights",
]
