"""Configurations of mm-TEM and Hippoformer (Li et al., *Hippoformer: Integrating Hippocampus-inspired Spatial Memory
with Transformers*, ICLR 2026, OpenReview ``hxwV5EubAw``; no arXiv id known).

The paper's abstract gives the structure; the per-step equations are **reconstructions** (the spec's confidence is
low) and every such choice is a field below, named as a reconstruction in its description:

* :class:`MMTEMConfig` -- path integration ``g_t = l2norm(relu(g_{t-1} W(a_t)))``, a sensory encoder, and a relational
  memory that is either the **meta-MLP** written at test time by a gradient step with data-dependent learning rate,
  momentum and forget gate (``memory_type="meta_mlp"``, mm-TEM) or **TEM's outer-product Hebbian memory** with
  attractor retrieval (``memory_type="hebbian"``, the TEM-style baseline).
* :class:`HippoformerConfig` -- mm-TEM in parallel with a single-layer (sliding-window) Transformer over the
  observation / action tokens, fused by a head. ``structural_memory="none"`` is the Transformer-only baseline.

This module imports only ``transformers.configuration_utils`` (no torch modelling code), so the Auto-class registration
that ``import hfx`` arranges stays light.
"""

from __future__ import annotations

from huggingface_hub.dataclasses import strict
from transformers.configuration_utils import PreTrainedConfig

from hfx.utils.artifacts import ConfigArtifactMixin, register_module


MEMORY_TYPES = ("meta_mlp", "hebbian")
MEMORY_SCANS = ("chunked", "recurrent")
ACTIVATIONS = ("relu", "gelu", "silu", "tanh")
INTEGRATION_RATIOS = ("learned", "fixed")
FUSIONS = ("concat", "sum", "gate")
STRUCTURAL_MEMORIES = ("mmtem", "none")


def _check_choice(name: str, value, allowed) -> None:
    if value not in allowed:
        raise ValueError(f"`{name}` must be one of {list(allowed)}, but is {value!r}")


def _check_positive(name: str, value, strict_positive: bool = True) -> None:
    if value is None or (value <= 0 if strict_positive else value < 0):
        raise ValueError(f"`{name}` must be {'> 0' if strict_positive else '>= 0'}, but is {value!r}")


@strict
class MMTEMConfig(ConfigArtifactMixin, PreTrainedConfig):
    r"""Configuration of :class:`~hfx.models.hippoformer.MMTEMModel` (``model_type = "mmtem"``).

    Shapes below use ``B`` walks, ``T`` steps, ``V = observation_vocab_size``, ``d_g = structural_size``,
    ``d_x = sensory_size``, ``d_m = memory_size``.

    Args:
        observation_vocab_size (`int`, *optional*, defaults to 16):
            Number of distinct sensory tokens ``V`` (observations are ids in ``[0, V)``).
        num_actions (`int`, *optional*, defaults to 4):
            Number of movement actions (ids in ``[0, num_actions)``); id ``num_actions`` is the *start* action of the
            first step. Square grids use 4 (N, E, S, W), hexagonal (triangular-lattice) graphs 6.
        structural_size (`int`, *optional*, defaults to 32): ``d_g``, size of the structural (MEC / grid) code g.
        sensory_size (`int`, *optional*, defaults to 16): ``d_x``, size of the encoded sensory code x.
        transition_hidden_size (`int`, *optional*, defaults to 64):
            Hidden width of the MLP mapping an action to its ``d_g x d_g`` transition matrix ``W(a)`` [paper: "the
            action passes through an MLP that outputs a transition matrix"; the width is a reconstruction].
        path_integration_eps (`float`, *optional*, defaults to 1e-6):
            [reconstruction] ``g_t = l2norm(relu(g_{t-1} W(a_t)) + eps / sqrt(d_g))``: the tiny floor keeps the norm
            defined (exactly 1) when every ReLU unit is off.
        memory_type (`str`, *optional*, defaults to `"meta_mlp"`):
            ``"meta_mlp"`` (mm-TEM: Titans-style fast-weight MLP written by gradient steps) or ``"hebbian"`` (the
            TEM-style baseline: outer-product Hebbian memory ``M <- lambda M + eta (p + p_hat)(p - p_hat)^T`` over
            the conjunctive code ``p = flatten(W_g g (x) W_x x)`` with attractor retrieval, Whittington et al. 2020).
        memory_scan (`str`, *optional*, defaults to `"chunked"`):
            ``"chunked"``: the meta-MLP is written and read for all steps of a chunk at once (closed-form
            associative scan of momentum and forget gate, reads in the "dual form" without materialising per-step
            weights). ``"recurrent"``: the exact step-by-step reference (explicit weights, ``torch.func.grad``),
            required by ``memory_type="hebbian"`` and by ``consistency_feedback=True``.
        memory_size (`int`, *optional*, defaults to 32):
            ``d_m``, size of keys, values and queries (projections of ``[g; x]``) of the meta-MLP.
        memory_hidden_size (`int`, *optional*, defaults to 64): hidden width of the meta-MLP.
        memory_depth (`int`, *optional*, defaults to 2): number of linear layers of the meta-MLP (1 = linear memory).
        memory_activation (`str`, *optional*, defaults to `"gelu"`): ``"relu"``, ``"gelu"``, ``"silu"`` or ``"tanh"``.
        memory_chunk_size (`int`, *optional*, defaults to 16):
            [reconstruction, Titans' mini-batch rule] within a chunk of this many steps, every write's gradient
            ``d/dtheta ||M_theta(k_t) - v_t||^2`` is taken at the parameters of the chunk's start; momentum and forget
            gate are still applied step by step. ``1`` is plain online gradient descent. Both scans implement the
            same rule, so they agree for every chunk size.
        normalize_keys (`bool`, *optional*, defaults to `True`): [reconstruction] l2-normalise keys and queries.
        memory_lr_max (`float`, *optional*, defaults to 0.2):
            [reconstruction] the write learning rate is ``lr_t = memory_lr_max * sigmoid(w_lr . [g_t; x_t] + b_lr)``
            (1.0 diverges at the default sizes: the effective step ``2 lr (|u|^2 + 1)`` of a layer exceeds 1).
        use_momentum (`bool`, *optional*, defaults to `True`):
            [reconstruction] momentum ``S_t = eta_t S_{t-1} - lr_t grad_t`` with ``eta_t = sigmoid(w_eta . [g; x] +
            b_eta)``; `False` sets ``eta_t = 0``.
        use_forget_gate (`bool`, *optional*, defaults to `True`):
            [reconstruction] ``theta_t = (1 - alpha_t) theta_{t-1} + S_t`` with ``alpha_t = sigmoid(w_a . [g; x] +
            b_a)``; `False` sets ``alpha_t = 0``.
        lr_bias_init (`float`, *optional*, defaults to 0.0): initial ``b_lr``.
        momentum_bias_init (`float`, *optional*, defaults to -2.0): initial ``b_eta`` (``eta ~ 0.12``).
        forget_bias_init (`float`, *optional*, defaults to -5.0): initial ``b_a`` (``alpha ~ 0.007``).
        integration_ratio (`str`, *optional*, defaults to `"learned"`):
            [reconstruction] the HPC -> MEC correction ``g_corr = l2norm(g + rho (g_inf - g))`` uses ``rho =
            sigmoid(r)`` with a learned scalar ``r`` (``"learned"``) or the constant ``integration_ratio_init``
            (``"fixed"``).
        integration_ratio_init (`float`, *optional*, defaults to 0.5): initial (or fixed) ``rho`` in ``(0, 1)``.
        consistency_feedback (`bool`, *optional*, defaults to `False`):
            [reconstruction] feed ``g_corr`` (instead of ``g``) into the next path-integration step, as TEM's
            posterior does. This makes each write depend on the previous reads, so it needs
            ``memory_scan="recurrent"``.
        detach_structural_targets (`bool`, *optional*, defaults to `True`):
            [reconstruction] stop the gradient of ``g`` where it is the *target* of the relational and consistency
            losses (the memory learns to reproduce g; g is not pulled towards the memory's output).
        loss_weight_generative (`float`, *optional*, defaults to 1.0):
            weight of ``CE(Dec(M(Q[g; 0])), o_t)`` -- the next-observation prediction (it never sees ``o_t``).
        loss_weight_relational (`float`, *optional*, defaults to 1.0):
            weight of ``||g_from_content - g||^2 + ||g_from_structure - g||^2`` (structure read back from
            ``M(Q[0; x])`` and ``M(Q[g; 0])``).
        loss_weight_consistency (`float`, *optional*, defaults to 1.0): weight of ``||g - g_corr||^2``.
        loss_weight_inference (`float`, *optional*, defaults to 1.0): weight of ``CE(Dec(M(Q[g_corr; 0])), o_t)``.
        hebbian_structural_size (`int`, *optional*, defaults to 16): TEM-style: size of ``W_g g`` in ``p``.
        hebbian_sensory_size (`int`, *optional*, defaults to 8): TEM-style: size of ``W_x x`` in ``p``.
        hebbian_learning_rate (`float`, *optional*, defaults to 0.5): TEM's Hebbian rate ``eta``.
        hebbian_decay (`float`, *optional*, defaults to 0.9999): TEM's memory decay ``lambda``.
        hebbian_attractor_steps (`int`, *optional*, defaults to 5): attractor iterations of a retrieval.
        hebbian_kappa (`float`, *optional*, defaults to 0.8): attractor self-excitation ``kappa``
            (``h <- f(kappa h + M h)``, ``f = clamp(leaky_relu(.), -1, 1)``).
        initializer_range (`float`, *optional*, defaults to 0.02): std of the normal init of linear layers.

    Raises:
        ValueError: for an unknown choice (the message lists the allowed values), a non-positive size, or an
            incompatible combination (``memory_type="hebbian"`` or ``consistency_feedback=True`` with
            ``memory_scan="chunked"``).
    """

    model_type = "mmtem"

    observation_vocab_size: int = 16
    num_actions: int = 4
    structural_size: int = 32
    sensory_size: int = 16
    transition_hidden_size: int = 64
    path_integration_eps: float = 1e-6
    memory_type: str = "meta_mlp"
    memory_scan: str = "chunked"
    memory_size: int = 32
    memory_hidden_size: int = 64
    memory_depth: int = 2
    memory_activation: str = "gelu"
    memory_chunk_size: int = 16
    normalize_keys: bool = True
    memory_lr_max: float = 0.2
    use_momentum: bool = True
    use_forget_gate: bool = True
    lr_bias_init: float = 0.0
    momentum_bias_init: float = -2.0
    forget_bias_init: float = -5.0
    integration_ratio: str = "learned"
    integration_ratio_init: float = 0.5
    consistency_feedback: bool = False
    detach_structural_targets: bool = True
    loss_weight_generative: float = 1.0
    loss_weight_relational: float = 1.0
    loss_weight_consistency: float = 1.0
    loss_weight_inference: float = 1.0
    hebbian_structural_size: int = 16
    hebbian_sensory_size: int = 8
    hebbian_learning_rate: float = 0.5
    hebbian_decay: float = 0.9999
    hebbian_attractor_steps: int = 5
    hebbian_kappa: float = 0.8
    initializer_range: float = 0.02

    def __post_init__(self, **kwargs):
        _check_choice("memory_type", self.memory_type, MEMORY_TYPES)
        _check_choice("memory_scan", self.memory_scan, MEMORY_SCANS)
        _check_choice("memory_activation", self.memory_activation, ACTIVATIONS)
        _check_choice("integration_ratio", self.integration_ratio, INTEGRATION_RATIOS)
        for name in (
            "observation_vocab_size",
            "num_actions",
            "structural_size",
            "sensory_size",
            "transition_hidden_size",
            "memory_size",
            "memory_hidden_size",
            "memory_depth",
            "memory_chunk_size",
            "memory_lr_max",
            "hebbian_structural_size",
            "hebbian_sensory_size",
            "hebbian_attractor_steps",
            "initializer_range",
        ):
            _check_positive(name, getattr(self, name))
        for name in ("path_integration_eps", "hebbian_learning_rate", "hebbian_kappa"):
            _check_positive(name, getattr(self, name), strict_positive=False)
        for name in ("loss_weight_generative", "loss_weight_relational", "loss_weight_consistency"):
            _check_positive(name, getattr(self, name), strict_positive=False)
        _check_positive("loss_weight_inference", self.loss_weight_inference, strict_positive=False)
        if not 0.0 < self.integration_ratio_init < 1.0:
            raise ValueError(f"`integration_ratio_init` must be in (0, 1), but is {self.integration_ratio_init!r}")
        if not 0.0 < self.hebbian_decay <= 1.0:
            raise ValueError(f"`hebbian_decay` must be in (0, 1], but is {self.hebbian_decay!r}")
        if self.memory_scan == "chunked" and self.memory_type == "hebbian":
            raise ValueError(
                '`memory_type="hebbian"` (TEM-style) writes with an error term read from the previous memory, so it '
                'has no chunked form: set `memory_scan="recurrent"` (or use `MMTEMConfig.tem_style(...)`).'
            )
        if self.memory_scan == "chunked" and self.consistency_feedback:
            raise ValueError(
                '`consistency_feedback=True` makes every write depend on the previous reads: set `memory_scan="recurrent"`.'
            )
        super().__post_init__(**kwargs)

    @classmethod
    def tem_style(cls, **kwargs) -> MMTEMConfig:
        """The TEM-style baseline: the same model with the outer-product Hebbian memory (``memory_type="hebbian"``,
        ``memory_scan="recurrent"``); other fields as given."""
        kwargs.setdefault("memory_type", "hebbian")
        kwargs.setdefault("memory_scan", "recurrent")
        return cls(**kwargs)


@strict
class HippoformerConfig(ConfigArtifactMixin, PreTrainedConfig):
    r"""Configuration of :class:`~hfx.models.hippoformer.HippoformerForNextObservation` (``model_type =
    "hippoformer"``): mm-TEM in parallel with a single-layer Transformer, fused by a head.

    Args:
        mmtem_config (`dict` or `MMTEMConfig`, *optional*):
            The structural-memory branch; defaults to ``MMTEMConfig(observation_vocab_size=..., num_actions=...)``.
            Its ``observation_vocab_size`` and ``num_actions`` must equal this config's.
        observation_vocab_size (`int`, *optional*, defaults to 16): ``V``.
        num_actions (`int`, *optional*, defaults to 4): movement actions; id ``num_actions`` is the start action.
        structural_memory (`str`, *optional*, defaults to `"mmtem"`):
            ``"mmtem"`` (Hippoformer) or ``"none"``: the Transformer-only baseline (no mm-TEM branch; give it more
            layers / width to match the parameter count, see :func:`~hfx.models.hippoformer.matched_transformer_config`).
        hidden_size (`int`, *optional*, defaults to 64): width of the Transformer branch.
        num_hidden_layers (`int`, *optional*, defaults to 1): Transformer layers (the paper's Hippoformer uses 1).
        num_attention_heads (`int`, *optional*, defaults to 4).
        intermediate_size (`int`, *optional*, defaults to 128): the layer's (SwiGLU) MLP width.
        sliding_window (`int`, *optional*, defaults to 32):
            [reconstruction] causal attention over the last ``sliding_window`` steps ("precise short-range memory");
            `None` = full causal attention. The branch is transformers' ``MistralModel`` (RoPE, RMSNorm) fed with
            ``inputs_embeds = E_a(a_t) + E_o(o_{t-1})`` (``o_{-1}`` = a start token), so it never sees ``o_t``.
        rope_theta (`float`, *optional*, defaults to 10000.0).
        fusion (`str`, *optional*, defaults to `"concat"`):
            [reconstruction] ``"concat"``: ``logits = MLP([h_tf; x_hat_gen; g])``; ``"sum"``: ``logits = W h_tf +
            logits_mmtem``; ``"gate"``: ``logits = s W h_tf + (1 - s) logits_mmtem`` with ``s = sigmoid(w . [h_tf;
            x_hat_gen])``. (``x_hat_gen`` is mm-TEM's generative read-out, ``g`` its structural code.)
        fusion_hidden_size (`int`, *optional*, defaults to 64): hidden width of the ``"concat"`` head.
        mmtem_loss_weight (`float`, *optional*, defaults to 1.0):
            the loss is ``CE(fused logits, o_t) + mmtem_loss_weight * mm-TEM's loss``.
        initializer_range (`float`, *optional*, defaults to 0.02).

    Raises:
        ValueError: for an unknown choice, a non-positive size, ``hidden_size`` not divisible by
            ``num_attention_heads``, or a sub-config whose vocabulary / actions differ from this config's.
    """

    model_type = "hippoformer"
    sub_configs_defaults = {"mmtem_config": MMTEMConfig}  # noqa: RUF012 -- transformers reads this class attribute

    mmtem_config: dict | PreTrainedConfig | None = None
    observation_vocab_size: int = 16
    num_actions: int = 4
    structural_memory: str = "mmtem"
    hidden_size: int = 64
    num_hidden_layers: int = 1
    num_attention_heads: int = 4
    intermediate_size: int = 128
    sliding_window: int | None = 32
    rope_theta: float = 10000.0
    fusion: str = "concat"
    fusion_hidden_size: int = 64
    mmtem_loss_weight: float = 1.0
    initializer_range: float = 0.02

    def __post_init__(self, **kwargs):
        _check_choice("structural_memory", self.structural_memory, STRUCTURAL_MEMORIES)
        _check_choice("fusion", self.fusion, FUSIONS)
        for name in (
            "observation_vocab_size",
            "num_actions",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "fusion_hidden_size",
            "initializer_range",
        ):
            _check_positive(name, getattr(self, name))
        _check_positive("mmtem_loss_weight", self.mmtem_loss_weight, strict_positive=False)
        if self.sliding_window is not None:
            _check_positive("sliding_window", self.sliding_window)
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"`hidden_size` ({self.hidden_size}) must be divisible by `num_attention_heads` "
                f"({self.num_attention_heads})"
            )
        if self.mmtem_config is None:
            self.mmtem_config = {
                "observation_vocab_size": self.observation_vocab_size,
                "num_actions": self.num_actions,
            }
        super().__post_init__(**kwargs)
        for name in ("observation_vocab_size", "num_actions"):
            if getattr(self.mmtem_config, name) != getattr(self, name):
                raise ValueError(
                    f"`mmtem_config.{name}` ({getattr(self.mmtem_config, name)}) must equal `{name}` "
                    f"({getattr(self, name)})"
                )


register_module(__name__)  # AutoConfig (see hfx.utils.artifacts.ARCHITECTURES)


__all__ = ["HippoformerConfig", "MMTEMConfig"]
