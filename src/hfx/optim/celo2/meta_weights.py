"""The meta-learned part of Celo2: a tiny per-element MLP and the accumulator decays that define its features."""

from __future__ import annotations

import itertools
import math

import torch
from huggingface_hub import PyTorchModelHubMixin
from torch import nn

from hfx.utils.artifacts import ArtifactMixin

from .functional import FEATURE_NAMES, MLPWeights, feature_widths, make_mlp_weights


PAPER_URL = "https://huggingface.co/papers/2602.19142"
ACTIVATIONS = ("relu", "tanh")
INITS = ("random", "adam_like")
MOMENTUM_DECAYS = (0.9, 0.99, 0.999)  # [code]
RMS_DECAYS = (0.95,)
ADAFACTOR_DECAYS = (0.9, 0.99, 0.999)


class Celo2MetaWeights(
    ArtifactMixin,
    nn.Module,
    PyTorchModelHubMixin,
    library_name="hfx",
    tags=["hfx", "celo2", "learned-optimizer", "arxiv:2602.19142"],
    license="apache-2.0",
    paper_url=PAPER_URL,
    repo_url="https://github.com/hfx-org/hfx",
):
    r"""Celo2's meta-MLP (arXiv 2602.19142, "Update rule"; the optax reference's ``Celo2Transformation``).

    A per-element MLP ``C -> hidden -> ... -> hidden -> 3`` (``hidden_layers`` ReLU layers of ``hidden_size``
    units, as ``[ff_hidden_size] * ff_hidden_layers + [3]`` in the reference) over the normalised features of
    :mod:`hfx.optim.celo2.functional`. ``C`` is the sum of the widths of ``features`` (30 with the defaults: g, clip(g),
    p, 3 momenta, rms, 3 m*rsqrt(rms), rsqrt(rms), 3 Adafactor-normalised g, g*rsqrt(rms), 3 row, 3 column, 3+3 rsqrt
    row/column, 3 factored momenta). Output 0 is the step direction, output 1 the log-magnitude (unused when the
    optimizer's ``exp_mult`` is 0, as in Celo2), output 2 is unused [code].

    The first layer is one :class:`torch.nn.Linear` whose input columns follow ``features`` in order; the reference's
    per-group first-layer matrices ``w0__i`` are its column blocks (:mod:`hfx.optim.celo2.convert` maps them).

    It is a :class:`huggingface_hub.PyTorchModelHubMixin` model: ``save_pretrained`` writes ``config.json`` (these
    ``__init__`` arguments) and ``model.safetensors`` (~1.5 kB); ``from_pretrained`` loads a folder or a Hub repo.

    Args:
        hidden_size (`int`, *optional*, defaults to `8`): units per hidden layer [code].
        hidden_layers (`int`, *optional*, defaults to `2`): hidden layers [code].
        output_size (`int`, *optional*, defaults to `3`): MLP outputs (>= 1; >= 2 for ``exp_mult != 0``) [code].
        activation (`str`, *optional*, defaults to `"relu"`): ``"relu"`` or ``"tanh"`` [code].
        momentum_decays (`tuple[float, ...]`, defaults to `(0.9, 0.99, 0.999)`) [code].
        rms_decays (`tuple[float, ...]`, defaults to `(0.95,)`) [code]: one decay, or as many as momentum decays.
        adafactor_decays (`tuple[float, ...]`, defaults to `(0.9, 0.99, 0.999)`) [code].
        features (`tuple[str, ...]`, *optional*): a sub-sequence of
            :data:`~hfx.optim.celo2.functional.FEATURE_NAMES` (the reference's ``with_*`` switches); defaults to all.
        init (`str`, *optional*, defaults to `"random"`): ``"random"`` is the reference's truncated normal
            (std ``1/sqrt(fan_in)``, cut at 2 std; zero biases) [code]; ``"adam_like"`` [reconstruction] starts from
            a rule whose direction is the ``m * rsqrt(rms)`` feature for the first momentum decay (an Adam/Muon-like
            step after Newton-Schulz) plus small noise: the meta-trainer's default start on a CPU budget.
        seed (`int`, *optional*, defaults to `0`): seed of the initialisation.

    Raises:
        ValueError: for an unknown activation / init / feature name, a feature order that differs from the
            reference's, non-positive sizes, decays outside ``[0, 1)``, or decay counts that do not broadcast.
            ``from_pretrained`` / ``save_pretrained`` refuse another artifact's folder, a corrupt file or a
            ``config.json`` missing one of these arguments (:class:`~hfx.utils.artifacts.ArtifactMixin`).
    """

    _hfx_artifact = "hfx_celo2"

    def __init__(
        self,
        hidden_size: int = 8,
        hidden_layers: int = 2,
        output_size: int = 3,
        activation: str = "relu",
        momentum_decays=MOMENTUM_DECAYS,
        rms_decays=RMS_DECAYS,
        adafactor_decays=ADAFACTOR_DECAYS,
        features=FEATURE_NAMES,
        init: str = "random",
        seed: int = 0,
    ):
        super().__init__()
        if int(hidden_size) < 1 or int(hidden_layers) < 1 or int(output_size) < 1:
            raise ValueError(
                "`hidden_size`, `hidden_layers` and `output_size` must be >= 1, but are "
                f"{hidden_size}, {hidden_layers}, {output_size}"
            )
        if activation not in ACTIVATIONS:
            raise ValueError(f"`activation` must be one of {ACTIVATIONS}, but is {activation!r}")
        if init not in INITS:
            raise ValueError(f"`init` must be one of {INITS}, but is {init!r}")
        features = tuple(features)
        unknown = [f for f in features if f not in FEATURE_NAMES]
        if unknown or not features:
            raise ValueError(f"`features` must be a non-empty sub-sequence of {FEATURE_NAMES}, got unknown {unknown}")
        if list(features) != [f for f in FEATURE_NAMES if f in features]:
            raise ValueError(f"`features` must keep the reference order {FEATURE_NAMES}, but is {features}")
        decays = {"momentum_decays": momentum_decays, "rms_decays": rms_decays, "adafactor_decays": adafactor_decays}
        for name, value in decays.items():
            value = tuple(float(v) for v in value)
            if not value or any(not 0.0 <= v < 1.0 for v in value):
                raise ValueError(f"`{name}` must be a non-empty tuple of decays in [0, 1), but is {value}")
            decays[name] = value
        nm, nr, nf = (len(decays[k]) for k in ("momentum_decays", "rms_decays", "adafactor_decays"))
        if nr not in (1, nm) or nm not in (1, nf) and nf != 1:
            raise ValueError(
                f"decay counts must broadcast: len(rms_decays) in (1, {nm}) and len(momentum_decays) == "
                f"len(adafactor_decays) or one of them 1; got {nm}, {nr}, {nf}"
            )
        self.hidden_size, self.hidden_layers, self.output_size = int(hidden_size), int(hidden_layers), int(output_size)
        self.activation, self.features, self.init_name = activation, features, init
        self.momentum_decays = decays["momentum_decays"]
        self.rms_decays = decays["rms_decays"]
        self.adafactor_decays = decays["adafactor_decays"]
        self.widths = feature_widths(features, self.momentum_decays, self.rms_decays, self.adafactor_decays)
        self.input_size = sum(self.widths.values())
        sizes = [self.input_size] + [self.hidden_size] * self.hidden_layers + [self.output_size]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(sizes))
        self.reset_parameters(init, seed)

    # ------------------------------------------------------------------------------------------------------ init
    @torch.no_grad()
    def reset_parameters(self, init: str = "random", seed: int = 0) -> None:
        """Re-initialise (see the class docstring for ``init``)."""
        gen = torch.Generator().manual_seed(int(seed))
        for layer in self.layers:
            std = 1.0 / math.sqrt(layer.in_features)
            w = torch.randn(layer.weight.shape, generator=gen).clamp_(-2.0, 2.0) * std  # hk.TruncatedNormal-like
            layer.weight.copy_(w)
            layer.bias.zero_()
        if init == "adam_like":
            self._adam_like_(gen)

    @torch.no_grad()
    def _adam_like_(self, gen: torch.Generator, noise: float = 0.01) -> None:
        # d = relu(x) - relu(-x) with x the first `m_rsqrt_rms` channel, carried through the hidden layers by the
        # first two units (relu(relu(x)) = relu(x)); every other weight is small noise [reconstruction].
        if "m_rsqrt_rms" not in self.features or self.hidden_size < 2:
            raise ValueError("`init='adam_like'` needs the `m_rsqrt_rms` feature and `hidden_size >= 2`")
        col = self.feature_slices()["m_rsqrt_rms"].start
        for layer in self.layers:
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=gen) * noise)
            layer.bias.zero_()
        first, *hidden, last = self.layers
        first.weight[0, col], first.weight[1, col] = 1.0, -1.0
        for layer in hidden:
            layer.weight[0, 0], layer.weight[1, 1] = 1.0, 1.0
        last.weight[0, 0], last.weight[0, 1] = 1.0, -1.0

    # ---------------------------------------------------------------------------------------------------- access
    def feature_slices(self) -> dict[str, slice]:
        """Input-column slice of each feature group of the first layer."""
        out, start = {}, 0
        for name in self.features:
            out[name] = slice(start, start + self.widths[name])
            start += self.widths[name]
        return out

    def layer_tensors(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """``[(W, b), ...]`` with ``W`` in ``(in, out)`` layout (views of the parameters, transposed)."""
        return [(layer.weight.T, layer.bias) for layer in self.layers]

    def mlp_weights(self, dtype: torch.dtype | None = None, device=None) -> MLPWeights:
        """The weights split for :func:`~hfx.optim.celo2.functional.celo2_step_direction`, cast and detached."""
        layers = [
            (w.detach().to(dtype=dtype, device=device).contiguous(), b.detach().to(dtype=dtype, device=device))
            for w, b in self.layer_tensors()
        ]
        return make_mlp_weights(layers, self.features, self.widths, self.activation)

    def rule_config(self) -> dict:
        """The decays the accumulators use (they are part of the learned optimizer, not of the optimizer call)."""
        return {
            "momentum_decays": self.momentum_decays,
            "rms_decays": self.rms_decays,
            "adafactor_decays": self.adafactor_decays,
        }

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def flat_parameters(self) -> torch.Tensor:
        """All meta-parameters as one vector (the meta-trainer's search space), in ``state_dict`` order."""
        return torch.cat([p.detach().reshape(-1) for p in self.parameters()])

    @torch.no_grad()
    def load_flat_parameters_(self, flat: torch.Tensor) -> Celo2MetaWeights:
        """Inverse of :meth:`flat_parameters`."""
        if flat.numel() != self.num_parameters():
            raise ValueError(f"`flat` must have {self.num_parameters()} elements, but has {flat.numel()}")
        start = 0
        for p in self.parameters():
            p.copy_(flat[start : start + p.numel()].view_as(p))
            start += p.numel()
        return self

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """Plain MLP on already-normalised, concatenated features ``(..., input_size)`` -> ``(..., output_size)``.

        The optimizer uses the equivalent broadcast-aware path in :mod:`~hfx.optim.celo2.functional`; this is the
        reference's dense formulation (used for checks and plots).
        """
        if features.shape[-1] != self.input_size:
            raise ValueError(
                f"`features` must end in {self.input_size} channels, but has shape {tuple(features.shape)}"
            )
        x = features
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = torch.relu(x) if self.activation == "relu" else torch.tanh(x)
        return x


def batched_mlp_weights(meta: Celo2MetaWeights, flat: torch.Tensor) -> MLPWeights:
    """Per-member :class:`MLPWeights` from a population of flat meta-parameter vectors ``(M, P)`` (meta-training)."""
    M, start, layers = flat.shape[0], 0, []
    for layer in meta.layers:
        out_f, in_f = layer.weight.shape
        w = flat[:, start : start + out_f * in_f].view(M, out_f, in_f).transpose(1, 2).contiguous()
        start += out_f * in_f
        b = flat[:, start : start + out_f]
        start += out_f
        layers.append((w, b))
    if start != flat.shape[1]:
        raise ValueError(f"`flat` must have {start} columns, but has {flat.shape[1]}")
    return make_mlp_weights(layers, meta.features, meta.widths, meta.activation, batched=True)


__all__ = ["Celo2MetaWeights", "batched_mlp_weights"]
