"""`RouterUpdateCallback`: the router's posterior update after each optimizer step, from per-pair DPO losses.

Source: Wu & Lu, arXiv 2510.02850 (ICLR 2026): router reward r = -L_DPO^i after the update (authors' code: the batch
advantage ``mean(L) - L_i``, quantile-normalised, ``utils5.py``); DPO beta = 1 and margin clamp +-50 [code].
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
import torch.nn.functional as F
from transformers import TrainerCallback

from hfx.utils.validation import check_choice

from .labeling import _completion_text
from .trl import RoutedRewardModel


def _sequence_logps(model, tokenizer, prompts, completions, max_length: int | None) -> torch.Tensor:
    """Sum of completion-token log-probs under ``model``, shape `(N,)`."""
    ids, masks = [], []
    for p, c in zip(prompts, completions):
        if isinstance(p, list):
            p = tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True)
        p_ids = tokenizer(p, add_special_tokens=False)["input_ids"]
        c_ids = tokenizer(_completion_text(c), add_special_tokens=False)["input_ids"]
        seq = (p_ids + c_ids)[-max_length:] if max_length else p_ids + c_ids
        n_c = min(len(c_ids), len(seq))
        ids.append(seq)
        masks.append([0] * (len(seq) - n_c) + [1] * n_c)
    width = max(len(s) for s in ids)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    device = next(model.parameters()).device
    input_ids = torch.tensor([s + [pad] * (width - len(s)) for s in ids], device=device)
    attn = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in ids], device=device)
    comp = torch.tensor([m + [0] * (width - len(m)) for m in masks], device=device)
    logits = model(input_ids=input_ids, attention_mask=attn).logits[:, :-1].float()
    logps = torch.gather(F.log_softmax(logits, -1), 2, input_ids[:, 1:, None])[..., 0]
    return (logps * comp[:, 1:]).sum(-1)


@torch.no_grad()
def dpo_pair_losses(
    model, tokenizer, prompts, chosen, rejected, ref_model=None, beta: float = 1.0, max_length: int | None = None
) -> torch.Tensor:
    r"""Per-pair DPO loss :math:`-\log\sigma(\beta\,\mathrm{clamp}((\log\pi_w - \log\pi^{ref}_w) - (\log\pi_l -
    \log\pi^{ref}_l), \pm 50))` [code: β = 1, clamp ±50], shape `(P,)`. Without ``ref_model`` the reference log-probs
    are 0. A PEFT model passed as its own ``ref_model`` is evaluated with its adapter disabled."""
    was_training = model.training
    model.eval()
    margin = _sequence_logps(model, tokenizer, prompts, chosen, max_length) - _sequence_logps(
        model, tokenizer, prompts, rejected, max_length
    )
    if ref_model is not None:
        if ref_model is model and hasattr(model, "disable_adapter"):
            with model.disable_adapter():
                ref = _sequence_logps(model, tokenizer, prompts, chosen, max_length) - _sequence_logps(
                    model, tokenizer, prompts, rejected, max_length
                )
        else:
            ref = _sequence_logps(ref_model, tokenizer, prompts, chosen, max_length) - _sequence_logps(
                ref_model, tokenizer, prompts, rejected, max_length
            )
        margin = margin - ref.to(margin.device)
    model.train(was_training)
    return -F.logsigmoid(beta * margin.clamp(-50, 50)).cpu()


class RouterUpdateCallback(TrainerCallback):
    """After each optimizer step, turn the routed pairs' DPO losses into router rewards and update the router.

    The per-pair loss is :func:`dpo_pair_losses` of the pairs labelled since the last update, under the policy after
    the step, against a frozen reference: ``reference="initial"`` (default) snapshots the policy at
    ``on_train_begin`` (a PEFT policy instead disables its adapter: no copy), ``"none"`` uses a zero reference,
    or pass ``ref_model``. This is the paper's r = -L_DPO (after the update) with the ``utils5.py`` advantage.

    Args:
        routed (`RoutedRewardModel`): the reward function / judge given to the trainer.
        tokenizer (*optional*): the policy tokenizer (defaults to the trainer's ``processing_class``).
        beta (`float`, *optional*, defaults to `1.0`): DPO beta [code].
        reference (`str`, *optional*, defaults to `"initial"`): ``"initial"`` or ``"none"``.
        ref_model (*optional*): an explicit frozen reference model (overrides ``reference``).
        loss_fn (`Callable`, *optional*): ``loss_fn(model, pending) -> Tensor (P,)`` replacing the DPO loss.
    """

    def __init__(
        self,
        routed: RoutedRewardModel,
        tokenizer=None,
        beta: float = 1.0,
        reference: str = "initial",
        ref_model=None,
        loss_fn: Callable | None = None,
        max_length: int | None = 1024,
    ):
        check_choice("reference", reference, ("initial", "none"))
        self.routed, self.tokenizer, self.beta = routed, tokenizer, float(beta)
        self.reference, self.ref_model, self.loss_fn, self.max_length = reference, ref_model, loss_fn, max_length
        self.num_updates = 0

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if self.ref_model is None and self.reference == "initial" and model is not None:
            if hasattr(model, "disable_adapter"):
                self.ref_model = model
            else:
                ref = copy.deepcopy(model).eval().requires_grad_(False)
                # TRL patches `model.forward` on the instance with a closure over the *live* policy's forward
                # (`trl.trainer.utils.add_fused_lm_head`); a deep copy would keep calling the policy: drop it.
                for module in ref.modules():
                    module.__dict__.pop("forward", None)
                self.ref_model = ref

    def on_step_end(self, args, state, control, model=None, processing_class=None, **kwargs):
        pending = self.routed.pending
        if not pending or model is None:
            return
        if self.loss_fn is not None:
            losses = self.loss_fn(model, pending)
        else:
            tokenizer = self.tokenizer or processing_class
            if tokenizer is None:
                raise ValueError("RouterUpdateCallback needs a tokenizer: pass `tokenizer=`")
            losses = dpo_pair_losses(
                model,
                tokenizer,
                [p["prompt"] for p in pending],
                [p["chosen"] for p in pending],
                [p["rejected"] for p in pending],
                ref_model=self.ref_model,
                beta=self.beta,
                max_length=self.max_length,
            )
        self.routed.feedback(losses)
        self.num_updates += 1
