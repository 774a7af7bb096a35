"""mm-TEM and Hippoformer as transformers models (Li et al., ICLR 2026, OpenReview ``hxwV5EubAw``).

* :class:`MMTEMModel` -- path integration ``g_t = l2norm(relu(g_{t-1} W(a_t)))`` (``W(a)`` from an MLP of the action),
  a sensory encoder ``x_t = Enc(o_t)``, and a relational memory (the meta-MLP written at test time, or TEM's Hebbian
  memory for the TEM-style baseline) read generatively (``[g; 0]`` -> predicted observation) and inferentially
  (``[0; x]`` -> structure). Its ``logits[:, t]`` predict ``o_t`` from ``g_t`` and the memory of steps ``< t``.
* :class:`HippoformerForNextObservation` -- mm-TEM in parallel with a single-layer sliding-window Transformer
  (transformers' ``MistralModel``) over ``E_a(a_t) + E_o(o_{t-1})``, fused by a head; ``structural_memory="none"`` is
  the Transformer-only baseline.

Inputs of both: ``observations`` `(B, T)` ids in ``[0, V)`` and ``actions`` `(B, T)` ids in ``[0, num_actions]``
(``actions[:, t]`` is the move *into* step ``t``'s node; ``actions[:, 0]`` is conventionally the start id
``num_actions``). Every per-step equation is a reconstruction named in :mod:`.configuration_hippoformer`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers.utils import ModelOutput

from hfx.utils.artifacts import ModelArtifactMixin, register_module

from .configuration_hippoformer import HippoformerConfig, MMTEMConfig
from .fast_weights import HebbianMemory, MetaMLPMemory


@dataclass
class MMTEMOutput(ModelOutput):
    """Output of :class:`MMTEMModel` (``B`` walks, ``T`` steps, ``V`` observations).

    Attributes:
        loss (`torch.FloatTensor` of shape `()`, *optional*): weighted sum of the four losses (when ``labels`` given).
        logits (`torch.FloatTensor` of shape `(B, T, V)`): generative prediction of ``o_t`` (never sees ``o_t``).
        inference_logits (`torch.FloatTensor` of shape `(B, T, V)`): prediction from the corrected code ``g_corr``
            (sees ``o_t`` through the inference read; a training signal, not a forecast).
        structural_codes (`torch.FloatTensor` of shape `(B, T, d_g)`): path-integrated ``g_t`` (unit norm).
        corrected_structural_codes (`torch.FloatTensor` of shape `(B, T, d_g)`): ``g_corr`` (unit norm).
        memory_readout (`torch.FloatTensor` of shape `(B, T, r)`): the generative read (``r = memory_size``, or the
            Hebbian sensory readout size).
        generative_loss, relational_loss, consistency_loss, inference_loss (`torch.FloatTensor`, *optional*).
    """

    loss: torch.FloatTensor | None = None
    logits: torch.FloatTensor | None = None
    inference_logits: torch.FloatTensor | None = None
    structural_codes: torch.FloatTensor | None = None
    corrected_structural_codes: torch.FloatTensor | None = None
    memory_readout: torch.FloatTensor | None = None
    generative_loss: torch.FloatTensor | None = None
    relational_loss: torch.FloatTensor | None = None
    consistency_loss: torch.FloatTensor | None = None
    inference_loss: torch.FloatTensor | None = None


@dataclass
class HippoformerOutput(ModelOutput):
    """Output of :class:`HippoformerForNextObservation`.

    Attributes:
        loss (`torch.FloatTensor` of shape `()`, *optional*): ``CE(logits, o) + mmtem_loss_weight * mmtem.loss``.
        logits (`torch.FloatTensor` of shape `(B, T, V)`): fused prediction of ``o_t`` (sees ``o_{<t}``, ``a_{<=t}``).
        transformer_hidden_states (`torch.FloatTensor` of shape `(B, T, hidden_size)`).
        mmtem (`MMTEMOutput`, *optional*): the mm-TEM branch's output (`None` for the Transformer-only baseline).
    """

    loss: torch.FloatTensor | None = None
    logits: torch.FloatTensor | None = None
    transformer_hidden_states: torch.FloatTensor | None = None
    mmtem: MMTEMOutput | None = None


def _l2norm(x: torch.Tensor) -> torch.Tensor:
    return F.normalize(x, dim=-1, eps=1e-12)


def _check_inputs(observations, actions, vocab: int, num_actions: int):
    if not isinstance(observations, torch.Tensor) or not isinstance(actions, torch.Tensor):
        raise TypeError("`observations` and `actions` must be torch tensors of ids")
    if observations.dim() != 2 or observations.shape != actions.shape:
        raise ValueError(
            f"`observations` and `actions` must both have shape (batch_size, num_steps); got "
            f"{tuple(observations.shape)} and {tuple(actions.shape)}"
        )
    if observations.numel() and (observations.min() < 0 or observations.max() >= vocab):
        raise ValueError(
            f"`observations` must be ids in [0, {vocab}), got range [{observations.min()}, {observations.max()}]"
        )
    if actions.numel() and (actions.min() < 0 or actions.max() > num_actions):
        raise ValueError(
            f"`actions` must be ids in [0, {num_actions}] ({num_actions} = start), got range "
            f"[{actions.min()}, {actions.max()}]"
        )


def _init_hfx_module(module, std: float) -> None:
    """Initialise ``module`` (shared by both models; uses ``transformers.initialization`` so loaded weights are kept)."""
    from transformers import initialization as init

    if isinstance(module, nn.Linear):
        init.normal_(module.weight, mean=0.0, std=std)
        if module.bias is not None:
            init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        init.normal_(module.weight, mean=0.0, std=std)
    elif module.__class__.__name__.endswith("RMSNorm"):
        init.ones_(module.weight)
    elif isinstance(module, MMTEMModel):
        cfg = module.config
        d_g = cfg.structural_size
        last = module.transition[-1]
        # [reconstruction] W(a) starts near the identity, so early path integration keeps g
        init.copy_(last.bias, torch.eye(d_g, dtype=last.bias.dtype).flatten())
        init.normal_(module.initial_structural_code, mean=0.0, std=1.0)
        init.normal_(module.sensory_encoder.weight, mean=0.0, std=1.0)
        if cfg.memory_type == "meta_mlp":
            for weight in module.memory.weights:  # fan-in scaling so deltas reach every layer
                init.normal_(weight, mean=0.0, std=weight.shape[1] ** -0.5)
            for bias in module.memory.biases:
                init.zeros_(bias)
            gates = torch.tensor([cfg.lr_bias_init, cfg.momentum_bias_init, cfg.forget_bias_init])
            init.copy_(module.write_gates.bias, gates.to(module.write_gates.bias.dtype))
        ratio = torch.logit(torch.tensor(cfg.integration_ratio_init, dtype=module.integration_logit.dtype))
        init.copy_(module.integration_logit, ratio)


class MMTEMPreTrainedModel(ModelArtifactMixin, PreTrainedModel):
    config_class = MMTEMConfig
    accepts_loss_kwargs = False  # a mean loss: `Trainer` passes no `num_items_in_batch`, divides by accumulation steps
    base_model_prefix = "mmtem"
    main_input_name = "observations"

    def _init_weights(self, module):
        _init_hfx_module(module, self.config.initializer_range)


class MMTEMModel(MMTEMPreTrainedModel):
    r"""mm-TEM: path integration + sensory encoder + relational memory written at test time.

    ``memory_type="meta_mlp"`` is mm-TEM; ``"hebbian"`` the TEM-style baseline (same path integration, encoder,
    losses and API). Call with ``observations`` / ``actions`` `(B, T)`; ``labels`` (usually the observations) turns
    on the losses. Source: Hippoformer abstract (OpenReview ``hxwV5EubAw``) + Titans (arXiv 2501.00663, Sec. 3.1) for
    the write; TEM (Whittington et al. 2020) for the Hebbian baseline.
    """

    def __init__(self, config: MMTEMConfig):
        super().__init__(config)
        d_g, d_x, d_m = config.structural_size, config.sensory_size, config.memory_size
        self.action_embeddings = nn.Embedding(config.num_actions + 1, config.transition_hidden_size)
        self.transition = nn.Sequential(
            nn.GELU(),
            nn.Linear(config.transition_hidden_size, config.transition_hidden_size),
            nn.GELU(),
            nn.Linear(config.transition_hidden_size, d_g * d_g),
        )
        self.initial_structural_code = nn.Parameter(torch.empty(d_g))
        self.sensory_encoder = nn.Embedding(config.observation_vocab_size, d_x)
        self.integration_logit = nn.Parameter(torch.zeros(()), requires_grad=config.integration_ratio == "learned")
        if config.memory_type == "meta_mlp":
            self.key_projection = nn.Linear(d_g + d_x, d_m)
            self.value_projection = nn.Linear(d_g + d_x, d_m)
            self.generative_query = nn.Linear(d_g, d_m)  # Q_gen([g; 0])
            self.inference_query = nn.Linear(d_x, d_m)  # Q_inf([0; x])
            self.write_gates = nn.Linear(d_g + d_x, 3)  # lr, momentum, forget
            self.memory = MetaMLPMemory(d_m, config.memory_hidden_size, config.memory_depth, config.memory_activation)
            readout = d_m
            structure_readout = d_m
        else:
            hs, hx = config.hebbian_structural_size, config.hebbian_sensory_size
            self.hebbian_structural = nn.Linear(d_g, hs, bias=False)
            self.hebbian_sensory = nn.Linear(d_x, hx, bias=False)
            self.memory = HebbianMemory(
                hs * hx,
                config.hebbian_learning_rate,
                config.hebbian_decay,
                config.hebbian_attractor_steps,
                config.hebbian_kappa,
            )
            readout, structure_readout = hx, hs
        self.readout_size = readout
        self.observation_decoder = nn.Linear(readout, config.observation_vocab_size)
        self.structure_decoder = nn.Linear(structure_readout, d_g)
        self.post_init()

    # ------------------------------------------------------------------------------------------- path integration
    def transition_matrices(self) -> torch.Tensor:
        """``W(a)`` for every action id, shape `(num_actions + 1, d_g, d_g)`."""
        d_g = self.config.structural_size
        return self.transition(self.action_embeddings.weight).view(-1, d_g, d_g)

    def path_step(self, g_prev: torch.Tensor, transition: torch.Tensor) -> torch.Tensor:
        """``l2norm(relu(g_prev W) + eps / sqrt(d_g))``; ``g_prev`` `(B, d_g)`, ``transition`` `(B, d_g, d_g)`."""
        d_g = self.config.structural_size
        h = F.relu(torch.einsum("bi,bij->bj", g_prev, transition)) + self.config.path_integration_eps / d_g**0.5
        return _l2norm(h)

    def path_integrate(self, actions: torch.Tensor) -> torch.Tensor:
        """``g_t`` for all steps, `(B, T, d_g)`, from ``g_{-1} = l2norm(initial_structural_code)``."""
        transitions = self.transition_matrices()[actions]  # (B, T, d_g, d_g)
        g = _l2norm(self.initial_structural_code).expand(actions.shape[0], -1)
        codes = []
        for t in range(actions.shape[1]):
            g = self.path_step(g, transitions[:, t])
            codes.append(g)
        return torch.stack(codes, 1)

    def integration_ratio(self) -> torch.Tensor:
        """``rho = sigmoid(r)`` of the HPC -> MEC correction."""
        return torch.sigmoid(self.integration_logit)

    # ------------------------------------------------------------------------------------------------- meta-MLP
    def _meta_inputs(self, g, x):
        gx = torch.cat([g, x], -1)
        keys, q_gen, q_inf = self.key_projection(gx), self.generative_query(g), self.inference_query(x)
        if self.config.normalize_keys:
            keys, q_gen, q_inf = _l2norm(keys), _l2norm(q_gen), _l2norm(q_inf)
        gates = torch.sigmoid(self.write_gates(gx))
        lr = self.config.memory_lr_max * gates[..., 0]
        eta = gates[..., 1] if self.config.use_momentum else None
        alpha = gates[..., 2] if self.config.use_forget_gate else None
        return keys, self.value_projection(gx), q_gen, q_inf, lr, eta, alpha

    def _query_gen(self, g):
        q = self.generative_query(g)
        return _l2norm(q) if self.config.normalize_keys else q

    def _correct(self, g, structure_read):
        g_inf = self.structure_decoder(structure_read)
        return g_inf, _l2norm(g + self.integration_ratio() * (g_inf - g))

    def _run_meta_chunked(self, g, x):
        keys, values, q_gen, q_inf, lr, eta, alpha = self._meta_inputs(g, x)
        state = self.memory.initial_state(g.shape[0])
        readers, _ = self.memory.chunked_write(state, keys, values, lr, eta, alpha, self.config.memory_chunk_size)
        gen, inf, corr_read, g_inf, g_corr = [], [], [], [], []
        for start, end, reader in readers:
            reads = reader.read(torch.stack([q_gen[:, start:end], q_inf[:, start:end]], 2))
            gi, gc = self._correct(g[:, start:end], reads[:, :, 1])
            corr = reader.read(self._query_gen(gc)[:, :, None])[:, :, 0]
            gen.append(reads[:, :, 0])
            inf.append(reads[:, :, 1])
            corr_read.append(corr)
            g_inf.append(gi)
            g_corr.append(gc)
        return [torch.cat(z, 1) for z in (gen, inf, corr_read, g_inf, g_corr)] + [g]

    def _run_meta_recurrent(self, g, x, transitions=None):
        """The exact step-by-step reference. With ``transitions`` (consistency feedback), ``g`` is recomputed from
        ``g_corr`` of the previous step."""
        batch, steps = x.shape[:2]
        chunk = self.config.memory_chunk_size
        state = self.memory.initial_state(batch)
        anchor = state
        outs = {k: [] for k in ("gen", "inf", "corr", "g_inf", "g_corr", "g")}
        g_prev = _l2norm(self.initial_structural_code).expand(batch, -1)
        for t in range(steps):
            g_t = self.path_step(g_prev, transitions[:, t]) if transitions is not None else g[:, t]
            keys, values, q_gen, q_inf, lr, eta, alpha = self._meta_inputs(g_t, x[:, t])
            if t % chunk == 0:
                anchor = state
            reads = self.memory.read_state(state, torch.stack([q_gen, q_inf], 1))
            gi, gc = self._correct(g_t, reads[:, 1])
            corr = self.memory.read_state(state, self._query_gen(gc)[:, None])[:, 0]
            state = self.memory.write_step(state, anchor, keys, values, lr, eta, alpha)
            for k, v in zip(outs, (reads[:, 0], reads[:, 1], corr, gi, gc, g_t)):
                outs[k].append(v)
            g_prev = gc if transitions is not None else g_t
        return [torch.stack(outs[k], 1) for k in outs]

    # -------------------------------------------------------------------------------------------------- Hebbian
    def _run_hebbian(self, g, x):
        batch, steps = x.shape[:2]
        hs, hx = self.config.hebbian_structural_size, self.config.hebbian_sensory_size
        gs, xs = self.hebbian_structural(g), self.hebbian_sensory(x)  # (B, T, hs), (B, T, hx)
        memory = self.memory.initial_state(batch, device=g.device, dtype=g.dtype)
        ones_x = torch.ones(batch, hx, device=g.device, dtype=g.dtype)
        ones_g = torch.ones(batch, hs, device=g.device, dtype=g.dtype)

        def outer(a, b):
            return (a[:, :, None] * b[:, None, :]).flatten(1)

        outs = {k: [] for k in ("gen", "inf", "corr", "g_inf", "g_corr")}
        for t in range(steps):
            query_gen, query_inf = outer(gs[:, t], ones_x), outer(ones_g, xs[:, t])
            retrieved = self.memory.read_state(memory, torch.stack([query_gen, query_inf], 1))
            p_hat = retrieved[:, 0]
            sensory = p_hat.view(batch, hs, hx).sum(1)  # sensory readout
            structure = retrieved[:, 1].view(batch, hs, hx).sum(2)
            gi, gc = self._correct(g[:, t], structure)
            corr = self.memory.read_state(memory, outer(self.hebbian_structural(gc), ones_x)[:, None])[:, 0]
            memory = self.memory.write_step(memory, outer(gs[:, t], xs[:, t]), p_hat)
            for k, v in zip(outs, (sensory, structure, corr.view(batch, hs, hx).sum(1), gi, gc)):
                outs[k].append(v)
        return [torch.stack(outs[k], 1) for k in outs] + [g]

    # -------------------------------------------------------------------------------------------------- forward
    def forward(
        self,
        observations: torch.LongTensor,
        actions: torch.LongTensor,
        labels: torch.LongTensor | None = None,
        memory_scan: str | None = None,
        **kwargs,
    ) -> MMTEMOutput:
        r"""Run mm-TEM over walks.

        Args:
            observations (`torch.LongTensor` of shape `(B, T)`): sensory token ids in ``[0, V)``.
            actions (`torch.LongTensor` of shape `(B, T)`): action ids in ``[0, num_actions]``.
            labels (`torch.LongTensor` of shape `(B, T)`, *optional*): targets of the generative / inference losses
                (``-100`` = ignored); the relational / consistency losses use all steps.
            memory_scan (`str`, *optional*): override ``config.memory_scan`` (``"chunked"`` or ``"recurrent"``).

        Returns:
            :class:`MMTEMOutput`.

        Raises:
            ValueError / TypeError: for malformed inputs or an invalid ``memory_scan``.
        """
        cfg = self.config
        _check_inputs(observations, actions, cfg.observation_vocab_size, cfg.num_actions)
        scan = memory_scan or cfg.memory_scan
        if scan not in ("chunked", "recurrent"):
            raise ValueError(f"`memory_scan` must be one of ['chunked', 'recurrent'], but is {scan!r}")
        if scan == "chunked" and (cfg.memory_type == "hebbian" or cfg.consistency_feedback):
            raise ValueError('this configuration needs `memory_scan="recurrent"` (see MMTEMConfig)')
        x = self.sensory_encoder(observations)
        if cfg.memory_type == "hebbian":
            gen, _inf, corr, g_inf, g_corr, g = self._run_hebbian(self.path_integrate(actions), x)
        elif cfg.consistency_feedback:
            gen, _inf, corr, g_inf, g_corr, g = self._run_meta_recurrent(None, x, self.transition_matrices()[actions])
        elif scan == "chunked":
            gen, _inf, corr, g_inf, g_corr, g = self._run_meta_chunked(self.path_integrate(actions), x)
        else:
            gen, _inf, corr, g_inf, g_corr, g = self._run_meta_recurrent(self.path_integrate(actions), x)
        logits = self.observation_decoder(gen)
        inference_logits = self.observation_decoder(corr)
        out = MMTEMOutput(
            logits=logits,
            inference_logits=inference_logits,
            structural_codes=g,
            corrected_structural_codes=g_corr,
            memory_readout=gen,
        )
        if labels is not None:
            target = g.detach() if cfg.detach_structural_targets else g
            vocab = cfg.observation_vocab_size
            out.generative_loss = F.cross_entropy(logits.reshape(-1, vocab), labels.reshape(-1), ignore_index=-100)
            out.inference_loss = F.cross_entropy(
                inference_logits.reshape(-1, vocab), labels.reshape(-1), ignore_index=-100
            )
            relational = ((g_inf - target) ** 2).sum(-1).mean()  # structure from content, M(Q[0; x])
            if cfg.memory_type == "meta_mlp":  # structure from structure, M(Q[g; 0])
                relational = relational + ((self.structure_decoder(gen) - target) ** 2).sum(-1).mean()
            out.relational_loss = relational
            out.consistency_loss = ((g_corr - target) ** 2).sum(-1).mean()
            out.loss = (
                cfg.loss_weight_generative * out.generative_loss
                + cfg.loss_weight_relational * out.relational_loss
                + cfg.loss_weight_consistency * out.consistency_loss
                + cfg.loss_weight_inference * out.inference_loss
            )
        return out


class HippoformerPreTrainedModel(ModelArtifactMixin, PreTrainedModel):
    config_class = HippoformerConfig
    accepts_loss_kwargs = False  # a mean loss: `Trainer` passes no `num_items_in_batch`, divides by accumulation steps
    base_model_prefix = "hippoformer"
    main_input_name = "observations"
    _supports_sdpa = True

    def _init_weights(self, module):
        if isinstance(module, MMTEMModel):
            _init_hfx_module(module, module.config.initializer_range)
        else:
            _init_hfx_module(module, self.config.initializer_range)


class HippoformerForNextObservation(HippoformerPreTrainedModel):
    r"""Hippoformer: mm-TEM in parallel with a single-layer Transformer, fused by a head (``config.fusion``).

    The Transformer branch is transformers' ``MistralModel`` (causal, sliding window ``config.sliding_window``)
    fed with ``inputs_embeds = E_a(a_t) + E_o(o_{t-1})``; mm-TEM is an :class:`MMTEMModel` sub-module (its own
    weights under ``mmtem.``). ``structural_memory="none"`` drops mm-TEM (the Transformer-only baseline).
    """

    def __init__(self, config: HippoformerConfig):
        super().__init__(config)
        from transformers import MistralConfig, MistralModel

        tf_config = MistralConfig(
            vocab_size=1,
            hidden_size=config.hidden_size,
            intermediate_size=config.intermediate_size,
            num_hidden_layers=config.num_hidden_layers,
            num_attention_heads=config.num_attention_heads,
            num_key_value_heads=config.num_attention_heads,
            max_position_embeddings=4096,
            sliding_window=config.sliding_window,
            rope_theta=config.rope_theta,
            initializer_range=config.initializer_range,
            bos_token_id=None,
            eos_token_id=None,
            pad_token_id=None,
        )
        tf_config._attn_implementation = "sdpa"
        self.transformer = MistralModel(tf_config)
        self.action_embeddings = nn.Embedding(config.num_actions + 1, config.hidden_size)
        # id V is the start token o_{-1}
        self.observation_embeddings = nn.Embedding(config.observation_vocab_size + 1, config.hidden_size)
        vocab = config.observation_vocab_size
        self.mmtem = MMTEMModel(config.mmtem_config) if config.structural_memory == "mmtem" else None
        self.transformer_head = nn.Linear(config.hidden_size, vocab)
        if self.mmtem is not None:
            readout = self.mmtem.readout_size
            if config.fusion == "concat":
                d_g = config.mmtem_config.structural_size
                self.fusion_head = nn.Sequential(
                    nn.Linear(config.hidden_size + readout + d_g, config.fusion_hidden_size),
                    nn.GELU(),
                    nn.Linear(config.fusion_hidden_size, vocab),
                )
            elif config.fusion == "gate":
                self.fusion_gate = nn.Linear(config.hidden_size + readout, 1)
        self.post_init()

    def forward(
        self,
        observations: torch.LongTensor,
        actions: torch.LongTensor,
        labels: torch.LongTensor | None = None,
        **kwargs,
    ) -> HippoformerOutput:
        r"""Predict every ``o_t`` from ``o_{<t}`` and ``a_{<=t}``.

        Args:
            observations, actions (`torch.LongTensor` of shape `(B, T)`): as for :class:`MMTEMModel`.
            labels (`torch.LongTensor` of shape `(B, T)`, *optional*): targets (``-100`` ignored).

        Returns:
            :class:`HippoformerOutput`.
        """
        cfg = self.config
        _check_inputs(observations, actions, cfg.observation_vocab_size, cfg.num_actions)
        start = torch.full_like(observations[:, :1], cfg.observation_vocab_size)
        previous = torch.cat([start, observations[:, :-1]], 1)
        embeds = self.action_embeddings(actions) + self.observation_embeddings(previous)
        hidden = self.transformer(inputs_embeds=embeds, use_cache=False).last_hidden_state
        mmtem_out = None
        if self.mmtem is None:
            logits = self.transformer_head(hidden)
        else:
            mmtem_out = self.mmtem(observations, actions, labels=labels)
            if cfg.fusion == "concat":
                logits = self.fusion_head(
                    torch.cat([hidden, mmtem_out.memory_readout, mmtem_out.structural_codes], -1)
                )
            elif cfg.fusion == "sum":
                logits = self.transformer_head(hidden) + mmtem_out.logits
            else:
                s = torch.sigmoid(self.fusion_gate(torch.cat([hidden, mmtem_out.memory_readout], -1)))
                logits = s * self.transformer_head(hidden) + (1 - s) * mmtem_out.logits
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)
            if mmtem_out is not None:
                loss = loss + cfg.mmtem_loss_weight * mmtem_out.loss
        return HippoformerOutput(loss=loss, logits=logits, transformer_hidden_states=hidden, mmtem=mmtem_out)


def matched_transformer_config(reference, **overrides) -> HippoformerConfig:
    """A Transformer-only :class:`HippoformerConfig` (``structural_memory="none"``) whose parameter count matches
    ``reference`` (a model or config) as closely as possible by choosing ``hidden_size`` (a multiple of the heads;
    other fields as in ``overrides`` / the reference config)."""
    if isinstance(reference, PreTrainedModel):
        target = sum(p.numel() for p in reference.parameters())
        ref_cfg = reference.config
    else:
        ref_cfg = reference
        model_cls = HippoformerForNextObservation if isinstance(reference, HippoformerConfig) else MMTEMModel
        target = sum(p.numel() for p in model_cls(reference).parameters())
    base = {
        "observation_vocab_size": ref_cfg.observation_vocab_size,
        "num_actions": ref_cfg.num_actions,
        "structural_memory": "none",
    }
    base.update(overrides)
    heads = base.get("num_attention_heads", 4)
    best = None
    for hidden in range(heads * 2, 1025, heads * 2):  # even head_dim (RoPE)
        cfg = HippoformerConfig(
            **{**base, "hidden_size": hidden, "intermediate_size": base.get("intermediate_size", 2 * hidden)}
        )
        count = sum(p.numel() for p in HippoformerForNextObservation(cfg).parameters())
        if best is None or abs(count - target) < best[0]:
            best = (abs(count - target), cfg)
        if count > target:
            break
    return best[1]


register_module(__name__)  # AutoModel (see hfx.utils.artifacts.ARCHITECTURES)


__all__ = [
    "HippoformerForNextObservation",
    "HippoformerOutput",
    "HippoformerPreTrainedModel",
    "MMTEMModel",
    "MMTEMOutput",
    "MMTEMPreTrainedModel",
    "matched_transformer_config",
]
