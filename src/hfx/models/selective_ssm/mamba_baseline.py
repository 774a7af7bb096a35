"""transformers' Mamba as the "real Mamba" comparison for the theory kit: a tiny ``MambaModel`` + classification head.

transformers 5.24 has ``MambaModel`` / ``MambaForCausalLM`` but no sequence-classification head. This module adds
one the transformers way: :class:`MambaForSequenceClassification` is a ``MambaPreTrainedModel`` whose ``backbone`` is
the stock ``MambaModel`` (the same attribute name as in ``MambaForCausalLM``, so the backbone of a saved causal-LM
checkpoint loads into it) and whose ``score`` head reads the last position, the decision point of the synthetic
tasks. Inputs are the synthetic token vectors (``inputs_embeds``); the token embedding table is unused.

Without the ``mamba-ssm`` / ``causal-conv1d`` CUDA kernels (always the case on CPU) the mixer runs transformers'
pure-torch sequential scan (the "slow path"). :func:`mamba_time_steps` reads the per-token step sizes ``Δ`` (Mamba's
input-dependent gate) from the mixers with forward hooks, for the same per-token plots as the theory model.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import MambaConfig
from transformers.modeling_outputs import SequenceClassifierOutput
from transformers.models.mamba.modeling_mamba import MambaModel, MambaPreTrainedModel


class MambaForSequenceClassification(MambaPreTrainedModel):
    """A stock transformers ``MambaModel`` with a linear two-class head on the last position's hidden state.

    Args:
        config (`transformers.MambaConfig`): ``num_labels`` sets the head's width (2 for the theory tasks).

    Example:

    ```python
    >>> import torch
    >>> from hfx.models.selective_ssm import tiny_mamba_classifier
    >>> model = tiny_mamba_classifier(hidden_size=8)
    >>> out = model(inputs_embeds=torch.randn(2, 5, 8), labels=torch.tensor([0, 1]))
    >>> out.logits.shape
    torch.Size([2, 2])
    ```
    """

    def __init__(self, config: MambaConfig):
        super().__init__(config)
        self.backbone = MambaModel(config)
        self.score = nn.Linear(config.hidden_size, config.num_labels, bias=True)
        self.post_init()

    def forward(
        self,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        input_ids: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool = True,
        **kwargs,
    ) -> SequenceClassifierOutput | tuple:
        """Classify from the hidden state at the last position.

        Args:
            inputs_embeds (`torch.FloatTensor` of shape `(batch_size, sequence_length, hidden_size)`).
            labels (`torch.LongTensor` of shape `(batch_size,)`, *optional*): class ids; cross-entropy loss.
            input_ids (`torch.LongTensor`, *optional*): token ids instead of ``inputs_embeds``.
            output_hidden_states (`bool`, *optional*).

        Returns:
            `transformers.modeling_outputs.SequenceClassifierOutput` (``logits`` of shape `(batch_size, num_labels)`).
        """
        out = self.backbone(
            input_ids=input_ids,
            inputs_embeds=inputs_embeds,
            use_cache=False,
            output_hidden_states=output_hidden_states,
            return_dict=True,
        )
        logits = self.score(out.last_hidden_state[:, -1])
        loss = None if labels is None else F.cross_entropy(logits, labels.to(logits.device))
        result = SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=out.hidden_states)
        return result if return_dict else result.to_tuple()


def tiny_mamba_config(
    hidden_size: int = 32, num_hidden_layers: int = 1, state_size: int = 8, expand: int = 2, **kwargs
) -> MambaConfig:
    """A tiny ``MambaConfig`` for the synthetic tasks (vocabulary of 4: the embedding table is unused).

    ``use_mambapy=False`` and ``use_associative_scan=False`` keep the sequential pure-torch scan.
    """
    values = dict(
        vocab_size=4,
        hidden_size=hidden_size,
        num_hidden_layers=num_hidden_layers,
        state_size=state_size,
        expand=expand,
        conv_kernel=4,
        num_labels=2,
        use_mambapy=False,
        use_associative_scan=False,
        pad_token_id=0,
        bos_token_id=0,
        eos_token_id=0,
    )
    values.update(kwargs)
    return MambaConfig(**values)


def tiny_mamba_classifier(hidden_size: int = 32, seed: int = 0, **kwargs) -> MambaForSequenceClassification:
    """A randomly initialised :class:`MambaForSequenceClassification` from :func:`tiny_mamba_config` (seeded)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return MambaForSequenceClassification(tiny_mamba_config(hidden_size=hidden_size, **kwargs))


@torch.no_grad()
def mamba_time_steps(model, inputs_embeds: torch.Tensor) -> torch.Tensor:
    """Mamba's per-token, per-channel step sizes ``Δ = softplus(dt_proj(x_proj(u))_dt + bias)`` of every layer.

    Read with forward hooks on each mixer's ``x_proj`` (the part of its output that feeds ``dt_proj``); the model's
    own computation is unchanged. ``Δ`` plays the role of the theory model's gate: large ``Δ`` writes the token and
    forgets the state.

    Args:
        model: a :class:`MambaForSequenceClassification` (or ``MambaForCausalLM`` / ``MambaModel``).
        inputs_embeds (`torch.FloatTensor` of shape `(batch_size, sequence_length, hidden_size)`).

    Returns:
        `torch.FloatTensor` of shape `(num_layers, batch_size, sequence_length, intermediate_size)`.
    """
    backbone = getattr(model, "backbone", model)
    captured, handles = [], []
    for layer in backbone.layers:
        mixer = layer.mixer

        def hook(module, inputs, output, mixer=mixer):
            time_step = output[..., : mixer.time_step_rank]
            dt = time_step @ mixer.dt_proj.weight.T + mixer.dt_proj.bias
            captured.append(F.softplus(dt.float()))

        handles.append(mixer.x_proj.register_forward_hook(hook))
    try:
        backbone(inputs_embeds=inputs_embeds, use_cache=False)
    finally:
        for handle in handles:
            handle.remove()
    return torch.stack(captured)


__all__ = ["MambaForSequenceClassification", "mamba_time_steps", "tiny_mamba_classifier", "tiny_mamba_config"]
