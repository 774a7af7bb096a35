"""Configuration of the one-layer selective SSM of the Mamba training-dynamics theory (arXiv 2602.12499).

The paper analyses "a single-layer, single-head selective SSM with input-dependent gating, followed by a two-layer
MLP trained via gradient descent". Its exact parameterisation is not available to us (spec confidence: medium), so
the block is a **reconstruction** [reconstruction]; every reconstructed choice is a field of
:class:`SelectiveSSMConfig`, with the spec's reading as the default.
"""

from __future__ import annotations

from huggingface_hub.dataclasses import strict
from transformers import PreTrainedConfig

from hfx.utils.artifacts import ConfigArtifactMixin, register_module


RECURRENCES = ("zoh", "mamba_euler", "input_gate")
STATE_NORMALIZATIONS = ("none", "length")
INPUT_PROJECTIONS = ("linear", "identity")
MLP_OUTPUTS = ("fixed_sign", "trained")
LOSS_TYPES = ("hinge", "logistic")
MLP_ACTIVATIONS = ("relu", "linear")


@strict
class SelectiveSSMConfig(ConfigArtifactMixin, PreTrainedConfig):
    r"""Configuration of [`SelectiveSSMModel`] / [`SelectiveSSMForSequenceClassification`].

    The block reads a sequence of token vectors ``x_1 .. x_L`` (``inputs_embeds`` of shape
    `(batch_size, sequence_length, hidden_size)`) and computes, with ``z_l = w_g · x_l (+ b_g)``:

    ``h_l = exp(a(z_l)) · h_{l-1} + b(z_l) · W_in x_l``,  ``h_0 = 0``,  ``f(X) = Σ_i a_i · relu(v_i · h_L)``

    where ``a(z)`` (log decay) and ``b(z)`` (input coefficient) depend on ``recurrence``. The label is read at the last
    position (the decision point) [reconstruction]. Source: Shandirasegaran, Li, Zhang, Wang, Zhang, *A Theoretical
    Analysis of Mamba's Training Dynamics*, ICLR 2026, https://huggingface.co/papers/2602.12499 (model section);
    the parameterisation below is ours.

    Args:
        hidden_size (`int`, *optional*, defaults to `32`):
            ``d``, the dimension of each token vector.
        state_size (`int`, *optional*, defaults to `None`):
            ``n``, the dimension of the state ``h``. Defaults to ``hidden_size``; must equal it when
            ``input_projection="identity"``.
        recurrence (`str`, *optional*, defaults to `"zoh"`): how the gate enters the recurrence [reconstruction]:

            - ``"zoh"``: ``g = sigmoid(z)``, ``h_l = (1 - g_l) h_{l-1} + g_l W_in x_l`` -- the spec's block. It is
              exactly Mamba's zero-order-hold discretisation with ``A = -1`` and ``Δ = softplus(z)``
              (``exp(-Δ) = 1 - sigmoid(z)``). At ``w_g = 0`` every gate is 1/2, so a token at distance ``Δ`` from the
              decision point weighs ``(1/2)^(Δ+1)``: the ``(1/2)^ΔL`` of the paper's locality bound.
            - ``"mamba_euler"``: ``Δ = softplus(z)``, ``h_l = exp(-Δ_l) h_{l-1} + Δ_l W_in x_l`` -- the
              discretisation of Mamba's code (ZOH for ``A = -1``, Euler for ``B``).
            - ``"input_gate"``: ``g = sigmoid(z)``, ``h_l = state_decay · h_{l-1} + g_l W_in x_l`` -- the gate selects
              which tokens are written, the decay is fixed (with ``state_decay=1`` and
              ``state_normalization="length"``, ``h_L / L`` is a gated mean of the tokens).
        state_decay (`float`, *optional*, defaults to `1.0`):
            ``λ`` in ``(0, 1]``, the fixed decay of ``recurrence="input_gate"`` (ignored by the other recurrences,
            which must keep the default).
        state_normalization (`str`, *optional*, defaults to `"none"`):
            ``"none"`` reads ``h_L``; ``"length"`` reads ``h_L / L`` [reconstruction].
        gate_bias (`bool`, *optional*, defaults to `False`):
            Whether the gate has a bias ``b_g`` [reconstruction].
        gate_init_std (`float`, *optional*, defaults to `0.0`):
            Standard deviation of the initial gate vector ``w_g``; ``0.0`` starts every gate at ``sigmoid(0) = 1/2``
            [reconstruction].
        input_projection (`str`, *optional*, defaults to `"linear"`):
            ``"linear"``: a bias-free ``W_in`` of shape `(state_size, hidden_size)`, initialised to the identity when
            the sizes match (else ``N(0, 1/d)``); ``"identity"``: ``W_in = I`` (no parameter) [reconstruction].
        train_input_projection (`bool`, *optional*, defaults to `True`):
            Whether ``W_in`` is trained (when ``input_projection="linear"``).
        mlp_hidden_size (`int`, *optional*, defaults to `32`):
            ``m``, the width of the two-layer MLP.
        mlp_activation (`str`, *optional*, defaults to `"relu"`): ``"relu"`` or ``"linear"``.
        mlp_bias (`bool`, *optional*, defaults to `False`): whether the MLP's first layer has a bias.
        mlp_init_std (`float`, *optional*, defaults to `None`):
            Standard deviation of the first MLP layer ``V``; defaults to ``1 / sqrt(state_size)``.
        mlp_output (`str`, *optional*, defaults to `"fixed_sign"`):
            ``"fixed_sign"``: output weights ``a_i = ±1/sqrt(m)`` (alternating signs) kept fixed, the usual choice
            of this line of analyses; ``"trained"``: the same initialisation, trained [reconstruction].
        loss_type (`str`, *optional*, defaults to `"hinge"`):
            ``"hinge"``: ``max(0, 1 - y f(X))``; ``"logistic"``: ``log(1 + exp(-y f(X)))``, which equals the
            cross-entropy of the two-class logits ``(-f/2, f/2)`` [reconstruction].
        **kwargs: passed to [`~transformers.PreTrainedConfig`].

    Raises:
        ValueError: for a value outside the allowed sets or ranges listed above.

    Example:

    ```python
    >>> from hfx.models.selective_ssm import SelectiveSSMConfig, SelectiveSSMForSequenceClassification
    >>> config = SelectiveSSMConfig(hidden_size=16, recurrence="zoh")
    >>> model = SelectiveSSMForSequenceClassification(config)
    ```
    """

    model_type = "hfx_selective_ssm"

    hidden_size: int = 32
    state_size: int | None = None
    recurrence: str = "zoh"
    state_decay: float = 1.0
    state_normalization: str = "none"
    gate_bias: bool = False
    gate_init_std: float = 0.0
    input_projection: str = "linear"
    train_input_projection: bool = True
    mlp_hidden_size: int = 32
    mlp_activation: str = "relu"
    mlp_bias: bool = False
    mlp_init_std: float | None = None
    mlp_output: str = "fixed_sign"
    loss_type: str = "hinge"

    def __post_init__(self, **kwargs):
        kwargs.setdefault("num_labels", 2)
        super().__post_init__(**kwargs)
        if self.state_size is None:
            self.state_size = self.hidden_size
        for name, value in (("hidden_size", self.hidden_size), ("state_size", self.state_size)):
            if value < 1:
                raise ValueError(f"`{name}` must be >= 1, but is {value}")
        if self.mlp_hidden_size < 1:
            raise ValueError(f"`mlp_hidden_size` must be >= 1, but is {self.mlp_hidden_size}")
        choices = {
            "recurrence": RECURRENCES,
            "state_normalization": STATE_NORMALIZATIONS,
            "input_projection": INPUT_PROJECTIONS,
            "mlp_output": MLP_OUTPUTS,
            "loss_type": LOSS_TYPES,
            "mlp_activation": MLP_ACTIVATIONS,
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"`{name}` must be one of {list(allowed)}, but is {getattr(self, name)!r}")
        if not 0.0 < self.state_decay <= 1.0:
            raise ValueError(f"`state_decay` must be in (0, 1], but is {self.state_decay}")
        if self.recurrence != "input_gate" and self.state_decay != 1.0:
            raise ValueError(
                f"`state_decay` is only used by `recurrence='input_gate'`; with `recurrence={self.recurrence!r}` "
                f"leave it at 1.0 (got {self.state_decay})"
            )
        if self.input_projection == "identity" and self.state_size != self.hidden_size:
            raise ValueError(
                f"`input_projection='identity'` needs `state_size == hidden_size`, but they are "
                f"{self.state_size} and {self.hidden_size}"
            )
        if self.gate_init_std < 0:
            raise ValueError(f"`gate_init_std` must be >= 0, but is {self.gate_init_std}")
        if self.mlp_init_std is not None and self.mlp_init_std <= 0:
            raise ValueError(f"`mlp_init_std` must be > 0 or None, but is {self.mlp_init_std}")
        if self.num_labels != 2:
            raise ValueError(
                f"the theory model is a binary classifier: `num_labels` must be 2, but is {self.num_labels}"
            )


register_module(__name__)  # AutoConfig (see hfx.utils.artifacts.ARCHITECTURES)


__all__ = ["SelectiveSSMConfig"]
