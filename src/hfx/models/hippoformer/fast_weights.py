"""Relational memories of mm-TEM: the meta-MLP fast-weight memory (Titans-style test-time writes) and TEM's
outer-product Hebbian memory (the TEM-style baseline).

**Meta-MLP memory** [reconstruction of the Hippoformer abstract + Titans, arXiv 2501.00663, Sec. 3.1]. The memory is
an MLP ``M_theta`` (``depth`` linear layers, activation ``act`` between them) whose parameters ``theta`` start at
meta-learned values ``theta_0`` (trained by the outer loop) and are **written at test time**: for each step ``t`` with
key ``k_t``, value ``v_t`` and gates ``lr_t`` (learning rate), ``eta_t`` (momentum) and ``alpha_t`` (forget)::

    grad_t  = d/dtheta || M_theta(k_t) - v_t ||^2     evaluated at the parameters of the chunk's start
    S_t     = eta_t * S_{t-1} - lr_t * grad_t          (momentum, "surprise")
    theta_t = (1 - alpha_t) * theta_{t-1} + S_t        (forget gate)

A read at step ``t`` uses ``theta_{t-1}`` (the memory before step ``t``'s write). The gradient of a single example is a
sum of rank-1 outer products (one per layer: ``delta_l u_l^T`` for the weight, ``delta_l`` for the bias), so within a
chunk every ``theta_p`` is ``theta_0``, the momentum ``S_0`` and those rank-1 terms combined with scalar coefficients
(products of the gates). :class:`MetaMLPMemory` computes the coefficients of a whole chunk in closed form (a
cumulative-product "associative scan" of the momentum and forget recurrences), and reads every step of the chunk in
the *dual form* (as linear attention over the chunk's write examples), never materialising a per-step copy of the
weights: :meth:`MetaMLPMemory.chunked_write`. :meth:`MetaMLPMemory.write_step` is the exact step-by-step reference
(explicit weights, gradients from ``torch.func.grad``) that the tests compare with.

**Hebbian memory** (TEM, Whittington et al. 2020, *Cell*): a matrix ``M`` over the conjunctive code ``p``, written
``M <- lambda M + eta (p + p_hat)(p - p_hat)^T`` (``p_hat`` = what the memory retrieved for ``p``'s structural query)
and read by attractor iterations ``h <- f(kappa h + M h)``, ``f = clamp(leaky_relu(.), -1, 1)``:
:class:`HebbianMemory`. It needs the previous memory for each write, so it runs step by step.

Only torch is imported here (the folder can ship as Hub ``trust_remote_code`` files).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


# ------------------------------------------------------------------------------------------------------ activations
def activation_and_derivative(name: str, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(act(z), act'(z))`` for ``name`` in ``relu``, ``gelu`` (exact, erf), ``silu``, ``tanh``.

    Raises:
        ValueError: for another ``name``.
    """
    if name == "relu":
        return F.relu(z), (z > 0).to(z.dtype)
    if name == "gelu":
        cdf = 0.5 * (1.0 + torch.erf(z / math.sqrt(2.0)))
        pdf = torch.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
        return z * cdf, cdf + z * pdf
    if name == "silu":
        s = torch.sigmoid(z)
        return z * s, s * (1.0 + z * (1.0 - s))
    if name == "tanh":
        t = torch.tanh(z)
        return t, 1.0 - t * t
    raise ValueError(f"`activation` must be one of ['relu', 'gelu', 'silu', 'tanh'], but is {name!r}")


def activation(name: str, z: torch.Tensor) -> torch.Tensor:
    """``act(z)`` (same names as :func:`activation_and_derivative`)."""
    if name == "relu":
        return F.relu(z)
    if name == "gelu":
        return F.gelu(z)
    if name == "silu":
        return F.silu(z)
    if name == "tanh":
        return torch.tanh(z)
    raise ValueError(f"`activation` must be one of ['relu', 'gelu', 'silu', 'tanh'], but is {name!r}")


# ------------------------------------------------------------------------------------------------------- meta-MLP
@dataclass
class FastWeightState:
    """Per-walk fast weights of the meta-MLP and their momenta.

    Attributes:
        weights (`list[torch.Tensor]`): layer ``l``'s weight, shape ``(batch_size, out_l, in_l)``.
        biases (`list[torch.Tensor]`): shape ``(batch_size, out_l)``.
        weight_momenta (`list[torch.Tensor]`): ``S`` of each weight, same shapes.
        bias_momenta (`list[torch.Tensor]`): ``S`` of each bias, same shapes.
    """

    weights: list[torch.Tensor]
    biases: list[torch.Tensor]
    weight_momenta: list[torch.Tensor]
    bias_momenta: list[torch.Tensor]


def chunk_coefficients(
    lr: torch.Tensor, eta: torch.Tensor | None, alpha: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Closed-form coefficients of the momentum / forget recurrences over one chunk of ``C`` writes.

    With ``a_r = 1 - alpha_r`` and the states ``theta^(p)`` after ``p`` writes of the chunk (``p = 0..C``)::

        theta^(p) = decay[p] * theta_0 + momentum[p] * S_0 - sum_{q<p} mix[p, q] * lr_q * grad_q
        S^(C)     = eta_prod * S_0 - sum_q momentum_mix[q] * lr_q * grad_q

    where ``decay[p] = prod_{r<p} a_r``, ``mix[p, q] = sum_{q<=j<p} (prod_{j<r<p} a_r)(prod_{q<r<=j} eta_r)``,
    ``momentum[p] = sum_{j<p} (prod_{j<r<p} a_r)(prod_{r<=j} eta_r)``, ``momentum_mix[q] = prod_{q<r<C} eta_r`` and
    ``eta_prod = prod_r eta_r``. Computed with cumulative sums of logs (masked before ``exp``).

    Args:
        lr (`torch.Tensor` of shape `(batch_size, C)`): learning rates (only the shape and dtype are used here).
        eta (`torch.Tensor` of shape `(batch_size, C)`, *optional*): momentum gates in ``(0, 1)``; `None` = no momentum.
        alpha (`torch.Tensor` of shape `(batch_size, C)`, *optional*): forget gates in ``[0, 1)``; `None` = no forgetting.

    Returns:
        `tuple`: ``decay`` `(batch_size, C + 1)`, ``momentum`` `(batch_size, C + 1)`, ``mix`` `(batch_size, C + 1, C)`,
        ``momentum_mix`` `(batch_size, C)`, ``eta_prod`` `(batch_size,)`.
    """
    batch, chunk = lr.shape
    device, dtype = lr.device, lr.dtype
    rows = torch.arange(chunk + 1, device=device)[:, None]
    cols = torch.arange(chunk, device=device)[None, :]
    if alpha is None:
        log_keep = torch.zeros(batch, chunk + 1, device=device, dtype=dtype)
    else:
        log_keep = F.pad(torch.log1p(-alpha).cumsum(-1), (1, 0))  # [p] = sum_{r<p} log a_r
    neg_inf = torch.tensor(float("-inf"), device=device, dtype=dtype)
    # keep[p, j] = prod_{j<r<p} a_r for j < p
    keep = torch.exp(torch.where(cols < rows, log_keep[:, :, None] - log_keep[:, None, 1:], neg_inf))
    decay = torch.exp(log_keep)
    if eta is None:
        mix = keep
        momentum = torch.zeros(batch, chunk + 1, device=device, dtype=dtype)
        momentum_mix = torch.zeros(batch, chunk, device=device, dtype=dtype)
        momentum_mix[:, -1] = 1.0
        eta_prod = torch.zeros(batch, device=device, dtype=dtype)
        return decay, momentum, mix, momentum_mix, eta_prod
    log_eta = torch.log(eta.clamp_min(1e-30)).cumsum(-1)  # [j] = sum_{r<=j} log eta_r
    square_rows = torch.arange(chunk, device=device)[:, None]
    # carry[j, q] = prod_{q<r<=j} eta_r for q <= j
    carry = torch.exp(torch.where(cols <= square_rows, log_eta[:, :, None] - log_eta[:, None, :], neg_inf))
    eta_cum = torch.exp(log_eta)  # prod_{r<=j} eta_r
    mix = keep @ carry
    momentum = (keep @ eta_cum[:, :, None]).squeeze(-1)
    return decay, momentum, mix, carry[:, -1, :], eta_cum[:, -1]


class ChunkReader:
    """Reads the meta-MLP at every step of one chunk (state before that step's write), in the dual form.

    Created by :meth:`MetaMLPMemory.chunked_write`; :meth:`read` takes queries of shape
    `(batch_size, chunk_length, num_queries, memory_size)` and returns the memory outputs, same shape.
    """

    def __init__(self, activation_name, state, decay, momentum, mix, lr, inputs, deltas):
        self.activation_name = activation_name
        self.state = state
        self.decay, self.momentum, self.mix, self.lr = decay, momentum, mix, lr
        self.inputs, self.deltas = inputs, deltas

    def read(self, queries: torch.Tensor) -> torch.Tensor:
        length = queries.shape[1]
        decay = self.decay[:, :length, None, None]
        momentum = self.momentum[:, :length, None, None]
        coef = self.mix[:, :length, None, :] * self.lr[:, None, None, :]  # (B, P, 1, Q)
        h = queries
        num_layers = len(self.state.weights)
        for layer in range(num_layers):
            weight, bias = self.state.weights[layer], self.state.biases[layer]
            s_weight, s_bias = self.state.weight_momenta[layer], self.state.bias_momenta[layer]
            base = torch.einsum("bpnd,bod->bpno", h, weight) + bias[:, None, None, :]
            carried = torch.einsum("bpnd,bod->bpno", h, s_weight) + s_bias[:, None, None, :]
            scores = (torch.einsum("bpnd,bqd->bpnq", h, self.inputs[layer]) + 1.0) * coef
            h = decay * base + momentum * carried - torch.einsum("bpnq,bqo->bpno", scores, self.deltas[layer])
            if layer < num_layers - 1:
                h = activation(self.activation_name, h)
        return h


class MetaMLPMemory(nn.Module):
    """The meta-MLP relational memory (mm-TEM); its parameters are the meta-learned initial fast weights ``theta_0``.

    Args:
        memory_size (`int`): size of keys, values and queries.
        hidden_size (`int`): hidden width.
        depth (`int`): number of linear layers (``>= 1``; 1 = a linear memory, where a write is the delta rule).
        activation_name (`str`): ``relu``, ``gelu``, ``silu`` or ``tanh``.
    """

    def __init__(self, memory_size: int, hidden_size: int, depth: int, activation_name: str):
        super().__init__()
        if depth < 1:
            raise ValueError(f"`depth` must be >= 1, but is {depth}")
        activation(activation_name, torch.zeros(1))  # validates the name
        dims = [memory_size] + [hidden_size] * (depth - 1) + [memory_size]
        self.activation_name = activation_name
        self.weights = nn.ParameterList([nn.Parameter(torch.empty(o, i)) for i, o in itertools.pairwise(dims)])
        self.biases = nn.ParameterList([nn.Parameter(torch.zeros(o)) for o in dims[1:]])

    @property
    def depth(self) -> int:
        return len(self.weights)

    def initial_state(self, batch_size: int) -> FastWeightState:
        """``theta_0`` for every walk (differentiable w.r.t. the meta-parameters) and zero momenta."""
        weights = [w.unsqueeze(0).expand(batch_size, *w.shape) for w in self.weights]
        biases = [b.unsqueeze(0).expand(batch_size, *b.shape) for b in self.biases]
        return FastWeightState(
            weights, biases, [torch.zeros_like(w) for w in weights], [torch.zeros_like(b) for b in biases]
        )

    # ---------------------------------------------------------------------------------------------- explicit form
    def forward_with(self, weights, biases, x: torch.Tensor) -> torch.Tensor:
        """``M_theta(x)`` with explicit per-walk weights; ``x`` of shape `(batch_size, ..., memory_size)`."""
        lead = x.shape[1:-1]
        h = x.reshape(x.shape[0], -1, x.shape[-1])
        for layer, (weight, bias) in enumerate(zip(weights, biases)):
            h = torch.einsum("bnd,bod->bno", h, weight) + bias[:, None, :]
            if layer < len(weights) - 1:
                h = activation(self.activation_name, h)
        return h.reshape(x.shape[0], *lead, h.shape[-1])

    def read_state(self, state: FastWeightState, queries: torch.Tensor) -> torch.Tensor:
        """Read with the explicit state; ``queries`` `(batch_size, ..., memory_size)` -> same shape."""
        return self.forward_with(state.weights, state.biases, queries)

    def write_step(
        self,
        state: FastWeightState,
        anchor: FastWeightState,
        keys: torch.Tensor,
        values: torch.Tensor,
        lr: torch.Tensor,
        eta: torch.Tensor | None,
        alpha: torch.Tensor | None,
    ) -> FastWeightState:
        """One exact write (the step-by-step reference): the gradient of ``||M(k) - v||^2`` at ``anchor``'s weights
        (the chunk's start; ``anchor = state`` is online gradient descent), computed by ``torch.func.grad``.

        Args:
            state (`FastWeightState`): the current weights and momenta.
            anchor (`FastWeightState`): the weights the gradient is taken at.
            keys, values (`torch.Tensor` of shape `(batch_size, memory_size)`).
            lr, eta, alpha (`torch.Tensor` of shape `(batch_size,)`; `eta` / `alpha` may be `None`).

        Returns:
            `FastWeightState`: the state after the write.
        """
        from torch.func import grad, vmap

        def loss(params, key, value):
            weights, biases = params
            h = key
            for layer, (weight, bias) in enumerate(zip(weights, biases)):
                h = weight @ h + bias
                if layer < len(weights) - 1:
                    h = activation(self.activation_name, h)
            return ((h - value) ** 2).sum()

        grad_weights, grad_biases = vmap(grad(loss))((anchor.weights, anchor.biases), keys, values)

        def update(param, momentum, gradient):
            shape = (-1,) + (1,) * (param.dim() - 1)
            new_momentum = -lr.view(shape) * gradient
            if eta is not None:
                new_momentum = new_momentum + eta.view(shape) * momentum
            keep = 1.0 if alpha is None else (1.0 - alpha).view(shape)
            return keep * param + new_momentum, new_momentum

        weights, weight_momenta, biases, bias_momenta = [], [], [], []
        for w, s, g in zip(state.weights, state.weight_momenta, grad_weights):
            w, s = update(w, s, g)
            weights.append(w)
            weight_momenta.append(s)
        for b, s, g in zip(state.biases, state.bias_momenta, grad_biases):
            b, s = update(b, s, g)
            biases.append(b)
            bias_momenta.append(s)
        return FastWeightState(weights, biases, weight_momenta, bias_momenta)

    # ----------------------------------------------------------------------------------------------- chunked form
    def write_examples(self, state: FastWeightState, keys: torch.Tensor, values: torch.Tensor):
        """Per-example gradients of ``||M(k) - v||^2`` at ``state``'s weights, as rank-1 factors.

        Returns:
            `tuple[list, list]`: ``inputs[l]`` `(batch_size, C, in_l)` and ``deltas[l]`` `(batch_size, C, out_l)`
            with ``grad W_l = deltas[l] inputs[l]^T`` and ``grad b_l = deltas[l]`` for each example.
        """
        inputs, pre_activations = [], []
        h = keys
        num_layers = self.depth
        for layer in range(num_layers):
            inputs.append(h)
            z = torch.einsum("bcd,bod->bco", h, state.weights[layer]) + state.biases[layer][:, None, :]
            pre_activations.append(z)
            h = activation(self.activation_name, z) if layer < num_layers - 1 else z
        delta = 2.0 * (h - values)
        deltas = [None] * num_layers
        for layer in reversed(range(num_layers)):
            deltas[layer] = delta
            if layer > 0:
                _, derivative = activation_and_derivative(self.activation_name, pre_activations[layer - 1])
                delta = torch.einsum("bco,bod->bcd", delta, state.weights[layer]) * derivative
        return inputs, deltas

    def chunked_write(
        self,
        state: FastWeightState,
        keys: torch.Tensor,
        values: torch.Tensor,
        lr: torch.Tensor,
        eta: torch.Tensor | None,
        alpha: torch.Tensor | None,
        chunk_size: int,
    ) -> tuple[list[tuple[int, int, ChunkReader]], FastWeightState]:
        """Write a whole sequence chunk by chunk (vectorised over the steps of each chunk).

        Args:
            state (`FastWeightState`): the memory before the first write.
            keys, values (`torch.Tensor` of shape `(batch_size, T, memory_size)`).
            lr, eta, alpha (`torch.Tensor` of shape `(batch_size, T)`; `eta` / `alpha` may be `None`).
            chunk_size (`int`): steps per chunk (gradients of a chunk are taken at its start).

        Returns:
            `tuple`: a list of ``(start, end, reader)`` (``reader.read`` gives the reads of steps ``start..end-1``,
            each before its own write) and the state after the last write.
        """
        readers = []
        total = keys.shape[1]
        for start in range(0, total, chunk_size):
            end = min(start + chunk_size, total)
            lr_c = lr[:, start:end]
            eta_c = None if eta is None else eta[:, start:end]
            alpha_c = None if alpha is None else alpha[:, start:end]
            decay, momentum, mix, momentum_mix, eta_prod = chunk_coefficients(lr_c, eta_c, alpha_c)
            inputs, deltas = self.write_examples(state, keys[:, start:end], values[:, start:end])
            readers.append(
                (start, end, ChunkReader(self.activation_name, state, decay, momentum, mix, lr_c, inputs, deltas))
            )
            end_coef = mix[:, -1, :] * lr_c  # (B, C)
            mom_coef = momentum_mix * lr_c
            weights, biases, weight_momenta, bias_momenta = [], [], [], []
            for layer in range(self.depth):
                outer = torch.einsum("bq,bqo,bqd->bod", end_coef, deltas[layer], inputs[layer])
                outer_m = torch.einsum("bq,bqo,bqd->bod", mom_coef, deltas[layer], inputs[layer])
                d, m = decay[:, -1], momentum[:, -1]
                weights.append(
                    d[:, None, None] * state.weights[layer] + m[:, None, None] * state.weight_momenta[layer] - outer
                )
                biases.append(
                    d[:, None] * state.biases[layer]
                    + m[:, None] * state.bias_momenta[layer]
                    - torch.einsum("bq,bqo->bo", end_coef, deltas[layer])
                )
                weight_momenta.append(eta_prod[:, None, None] * state.weight_momenta[layer] - outer_m)
                bias_momenta.append(
                    eta_prod[:, None] * state.bias_momenta[layer] - torch.einsum("bq,bqo->bo", mom_coef, deltas[layer])
                )
            state = FastWeightState(weights, biases, weight_momenta, bias_momenta)
        return readers, state


# -------------------------------------------------------------------------------------------------------- Hebbian
def attractor_activation(x: torch.Tensor) -> torch.Tensor:
    """TEM's attractor non-linearity ``clamp(leaky_relu(x, 0.01), -1, 1)``."""
    return torch.clamp(F.leaky_relu(x, 0.01), -1.0, 1.0)


class HebbianMemory(nn.Module):
    """TEM's outer-product Hebbian memory over a conjunctive code of size ``size`` (no trainable parameters).

    Args:
        size (`int`): size of the conjunctive code ``p``.
        learning_rate (`float`): ``eta`` of ``M <- lambda M + eta (p + p_hat)(p - p_hat)^T``.
        decay (`float`): ``lambda``.
        attractor_steps (`int`): iterations of ``h <- f(kappa h + M h)``.
        kappa (`float`): self-excitation of the attractor.
    """

    def __init__(self, size: int, learning_rate: float, decay: float, attractor_steps: int, kappa: float):
        super().__init__()
        self.size, self.learning_rate, self.decay = size, learning_rate, decay
        self.attractor_steps, self.kappa = attractor_steps, kappa

    def initial_state(self, batch_size: int, device=None, dtype=None) -> torch.Tensor:
        """An empty memory, shape `(batch_size, size, size)`."""
        return torch.zeros(batch_size, self.size, self.size, device=device, dtype=dtype)

    def read_state(self, memory: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
        """Attractor retrieval; ``queries`` `(batch_size, ..., size)` -> same shape."""
        lead = queries.shape[1:-1]
        h = queries.reshape(queries.shape[0], -1, self.size)
        for _ in range(self.attractor_steps):
            h = attractor_activation(self.kappa * h + torch.einsum("bij,bnj->bni", memory, h))
        return h.reshape(queries.shape[0], *lead, self.size)

    def write_step(self, memory: torch.Tensor, p: torch.Tensor, p_hat: torch.Tensor) -> torch.Tensor:
        """``lambda M + eta (p + p_hat)(p - p_hat)^T``; ``p``, ``p_hat`` `(batch_size, size)`."""
        return self.decay * memory + self.learning_rate * torch.einsum("bi,bj->bij", p + p_hat, p - p_hat)


__all__ = [
    "ChunkReader",
    "FastWeightState",
    "HebbianMemory",
    "MetaMLPMemory",
    "activation",
    "activation_and_derivative",
    "attractor_activation",
    "chunk_coefficients",
]
