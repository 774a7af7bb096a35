"""`THRGRPOTrainer`: `trl.GRPOTrainer` with per-token advantages from Token Hidden Reward."""

from __future__ import annotations

import json
import os
from typing import Any, ClassVar

import torch
from accelerate.logging import get_logger
from accelerate.utils import is_peft_model
from trl import GRPOConfig, GRPOTrainer
from trl.models.utils import disable_gradient_checkpointing

from .config import THRGRPOConfig
from .token_rewards import BatchTHR, batch_token_hidden_reward


logger = get_logger(__name__)

THR_CONFIG_NAME = "thr_config.json"

_MULTIMODAL_KEYS = ("pixel_values", "image_grid_thw", "image_sizes", "pixel_attention_mask", "token_type_ids")


class THRGRPOTrainer(GRPOTrainer):
    r"""[`~trl.GRPOTrainer`] whose advantages are reweighted per token by Token Hidden Reward (THR).

    THR (Deng et al., arXiv 2510.03669, https://huggingface.co/papers/2510.03669) measures each generated token's
    influence on the likelihood of the group's correct responses, ``THR_jt = A_j g_jt^T (G+^T H+) h_jt``, from the
    rollout (old-policy) forward pass: ``h`` are final-layer hidden states, ``g = e_y - pi_old`` prediction errors
    over ``V*`` (the token ids in the group's completions). Dominant tokens (``|THR| > tau``) then get their
    advantage scaled by ``1 + p sign(THR)`` (``thr_mode="reweight"``) or are the only ones kept
    (``thr_mode="thr_only"``); ``thr_mode="nthr"`` applies the NTHR rule (arXiv 2505.18830) instead. The math is in
    :mod:`hfx.trainers.thr.token_rewards`; which choices are [reconstruction] is listed in [`THRGRPOConfig`].

    Drop-in for [`~trl.GRPOTrainer`]: same constructor and reward functions; ``args`` must be a [`THRGRPOConfig`]
    (``None`` builds a default one). The only override is ``_generate_and_score_completions``: after the parent
    computed the response advantages ``(B,)``, THR is computed without gradient (fp32, prompt and padding masked,
    all-correct / all-wrong groups skipped without any forward pass) and ``advantages`` of shape ``(B, T)`` are
    returned. The parent's loss code is untouched, so every ``loss_type`` of the installed TRL works unchanged and
    ``thr_mode="off"`` is exactly [`~trl.GRPOTrainer`]. THR is applied in training only (evaluation batches keep
    the parent's advantages).

    **GSPO** (``importance_sampling_level="sequence"``): TRL multiplies the sequence ratio ``s_i`` (shape
    ``(B, 1)``) by the per-token advantages, ``-min(s_i A'_it, clip(s_i) A'_it)``, and aggregates with the chosen
    ``loss_type``. The value equals the GSPO-token objective (whose ``s_it = sg[s_i] pi_t / sg[pi_t]`` has the value
    ``s_i``), and clipping is decided per token from ``sign(A'_it)``; but the gradient of ``s_i`` is
    ``s_i * mean_t grad log pi_t``, so with TRL's sequence ratio every token of response ``i`` receives the
    response's *mean* token advantage, not its own. Reweighting therefore acts per response under GSPO in this TRL
    version; the token-resolved GSPO-token gradient needs a GSPO-token surrogate (not shipped by TRL 1.16).

    Requirements: text-only causal LMs (a multimodal batch raises ``ValueError`` unless ``thr_mode="off"``), a single
    process (GRPO groups are split across processes, THR needs a whole group), ``num_iterations >= 1`` (THR uses the
    rollout policy ``pi_old``, computed once per generation batch).

    Attributes:
        last_thr (`dict[str, torch.Tensor]` or `None`): after each training generation batch when ``thr_log_stats``:
            ``completion_ids``, ``completion_mask``, ``thr``, ``scores``, ``dominant``, ``advantages`` (CPU tensors,
            shape ``(B, T)``) and ``skipped`` (``(B // G,)``), for :func:`plot_token_thr`.
    """

    _tag_names: ClassVar[list[str]] = ["trl", "grpo", "hfx", "thr"]
    _name = "THR-GRPO"

    def __init__(self, model, reward_funcs=None, args: THRGRPOConfig | None = None, *pargs, **kwargs):
        if args is None:
            name = model if isinstance(model, str) else (getattr(model.config, "_name_or_path", "") or "model")
            args = THRGRPOConfig(f"{str(name).rstrip('/').split('/')[-1]}-THR-GRPO")
        if not isinstance(args, THRGRPOConfig):
            kind = "trl.GRPOConfig" if isinstance(args, GRPOConfig) else type(args).__name__
            raise TypeError(
                f"`args` must be a `THRGRPOConfig` (it adds the `thr_*` fields), but is a {kind}. Build it as "
                "`THRGRPOConfig(..., thr_mode=...)` with the same arguments."
            )
        super().__init__(model, reward_funcs, args, *pargs, **kwargs)
        if self.args.thr_mode != "off" and self.accelerator.num_processes > 1:
            raise ValueError(
                f"`thr_mode`={self.args.thr_mode!r} needs whole GRPO groups on one process, but training runs on "
                f"{self.accelerator.num_processes} processes; use `thr_mode='off'` or a single process."
            )
        self.last_thr: dict[str, torch.Tensor] | None = None
        self._thr_captured: list[torch.Tensor] | None = None

    # ------------------------------------------------------------------ THR
    def _thr_modules(self):
        """The backbone producing final-layer hidden states and the LM head of the (unwrapped, maybe PEFT) policy."""
        unwrapped = self.accelerator.unwrap_model(self.model)
        base = unwrapped.get_base_model() if is_peft_model(unwrapped) else unwrapped
        backbone = base.base_model
        head = base.get_output_embeddings()
        if backbone is base or head is None:
            raise ValueError(
                f"THR needs a causal LM with a backbone (`base_model`) and an output embedding, but "
                f"{type(base).__name__} has none; use `thr_mode='off'` for this model."
            )
        return backbone, head

    @torch.no_grad()
    def _thr_hidden_states(self, prompt_completion_ids, attention_mask, logits_to_keep, batch_size):
        """Final-layer hidden states predicting each completion token, shape `(n, T, d)` (no grad, rollout policy)."""
        backbone, _ = self._thr_modules()
        chunks = []
        with disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs):
            for start in range(0, prompt_completion_ids.size(0), batch_size):
                end = start + batch_size
                with self.accelerator.autocast():
                    hidden = backbone(
                        input_ids=prompt_completion_ids[start:end], attention_mask=attention_mask[start:end]
                    ).last_hidden_state
                chunks.append(hidden[:, -logits_to_keep - 1 : -1].float())
        return torch.cat(chunks, dim=0)

    @torch.no_grad()
    def compute_token_hidden_reward(
        self, output: dict[str, Any], hidden_states: torch.Tensor | None = None
    ) -> BatchTHR:
        """THR of a `_generate_and_score_completions` output (response advantages of shape `(B,)`).

        Args:
            output (`dict`): the parent's output (``prompt_ids``, ``prompt_mask``, ``completion_ids``,
                ``completion_mask``, ``advantages`` of shape `(B,)`).
            hidden_states (`torch.Tensor` of shape `(B, T, d)`, *optional*): the rollout's final hidden states
                predicting each completion token (see ``thr_hidden_states``); ``None`` runs a no-grad forward pass
                of prompt + completion for the rows of non-skipped groups only.

        Returns:
            [`~hfx.trainers.thr.token_rewards.BatchTHR`]; ``token_advantages`` has shape `(B, T)`.

        Raises:
            ValueError: for multimodal batches, or a batch that is not whole groups of ``num_generations``.
        """
        present = [k for k in _MULTIMODAL_KEYS if k in output]
        if present:
            raise ValueError(
                f"THR supports text-only batches, but the batch has {present}; use `thr_mode='off'` for this model."
            )
        args = self.args
        completion_ids, completion_mask = output["completion_ids"], output["completion_mask"]
        mask = completion_mask if "tool_mask" not in output else completion_mask * output["tool_mask"]
        prompt_completion_ids = torch.cat([output["prompt_ids"], completion_ids], dim=1)
        attention_mask = torch.cat([output["prompt_mask"], completion_mask], dim=1)
        T = completion_ids.size(1)
        batch_size = args.per_device_train_batch_size
        _, head = self._thr_modules()
        text_config = self.accelerator.unwrap_model(self.model).config.get_text_config()
        logit_scale = getattr(text_config, "logit_scale", None)

        def forward_hidden_states(rows: slice) -> torch.Tensor:
            return self._thr_hidden_states(prompt_completion_ids[rows], attention_mask[rows], T, batch_size)

        return batch_token_hidden_reward(
            forward_hidden_states if hidden_states is None else hidden_states,
            completion_ids,
            mask,
            output["advantages"].float(),
            self.num_generations,
            head.weight,
            getattr(head, "bias", None),
            mode=args.thr_mode,
            p=args.thr_p,
            tau_beta=args.thr_tau_beta,
            tau=args.thr_tau,
            normalization=args.thr_normalization,
            include_self=args.thr_include_self,
            vocab_subset=args.thr_vocab_subset,
            temperature=self.temperature,
            logit_scale=1.0 if logit_scale is None else float(logit_scale),
            final_logit_softcapping=getattr(text_config, "final_logit_softcapping", None),
        )

    def _log_thr(self, result: BatchTHR, mask: torch.Tensor, mode: str) -> None:
        processed = (~result.skipped).repeat_interleave(self.num_generations).to(mask.device)
        valid = mask.bool() & processed.unsqueeze(1)
        metrics = self._metrics[mode]
        metrics["thr/skipped_group_frac"].append(result.skipped.float().mean().item())
        n = int(valid.sum())
        if n == 0:
            return
        thr = result.thr[valid]
        metrics["thr/dominant_frac"].append(result.dominant[valid].float().mean().item())
        metrics["thr/abs_mean"].append(thr.abs().mean().item())
        metrics["thr/positive_frac"].append((thr > 0).float().mean().item())
        metrics["thr/negative_frac"].append((thr < 0).float().mean().item())
        top = thr.abs().topk(min(self.args.thr_top_k, n)).values
        metrics["thr/top_abs_mean"].append(top.mean().item())

    def _thr_capture_supported(self) -> bool:
        """Whether the rollout is one transformers ``generate`` call whose LM-head inputs can be captured."""
        return not (
            self.use_vllm
            or getattr(self, "use_transformers_continuous_batching", False)
            or self.tools
            or getattr(self, "rollout_func", None) is not None
            or getattr(self, "environment_factories", None) is not None
        )

    def _generate(self, prompts: list):
        """The parent's rollout; with ``thr_hidden_states="generation"`` a forward pre-hook on the LM head records,
        at every decoding step, the hidden state of the last position (the one predicting the next token). The hook
        exists only while the parent's ``_generate`` runs and is removed in a ``finally`` block."""
        self._thr_captured = None
        capture = (
            self.args.thr_mode != "off"
            and self.args.thr_hidden_states == "generation"
            and self.model.training
            and self._thr_capture_supported()
        )
        if not capture:
            return super()._generate(prompts)
        _, head = self._thr_modules()
        steps: list[torch.Tensor] = []

        def record_lm_head_input(module, args):
            steps.append(args[0][:, -1].detach().float())

        handle = head.register_forward_pre_hook(record_lm_head_input)
        try:
            result = super()._generate(prompts)
        finally:
            handle.remove()
        self._thr_captured = steps
        return result

    def _captured_hidden_states(self, output: dict[str, Any]) -> torch.Tensor | None:
        """The captured `(B, T, d)` hidden states, or ``None`` (with a warning) when they do not match the batch."""
        steps, self._thr_captured = getattr(self, "_thr_captured", None), None
        if self.args.thr_hidden_states != "generation":
            return None
        B, T = output["completion_ids"].shape
        if not steps or len(steps) < T or any(step.size(0) != B for step in steps[:T]):
            logger.warning(
                "THR could not use the hidden states captured during generation (%s decoding steps for completions of "
                "shape %s); running an extra forward pass instead (`thr_hidden_states='forward'`).",
                len(steps or []),
                (B, T),
            )
            return None
        return torch.stack(steps[:T], dim=1)

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        if self.args.thr_mode == "off" or not self.model.training:
            self._thr_captured = None
            return output
        result = self.compute_token_hidden_reward(output, hidden_states=self._captured_hidden_states(output))
        advantages = output["advantages"]
        output["advantages"] = result.token_advantages.to(device=advantages.device, dtype=advantages.dtype)
        if self.args.thr_log_stats:
            mask = output["completion_mask"]
            self._log_thr(result, mask, "train")
            self.last_thr = {
                "completion_ids": output["completion_ids"].detach().cpu(),
                "completion_mask": mask.detach().cpu(),
                "thr": result.thr.cpu(),
                "scores": result.scores.cpu(),
                "dominant": result.dominant.cpu(),
                "advantages": output["advantages"].detach().cpu(),
                "skipped": result.skipped.cpu(),
            }
        return output

    # ------------------------------------------------------------------ saving
    def _save(self, output_dir: str | None = None, state_dict=None) -> None:
        super()._save(output_dir, state_dict=state_dict)
        output_dir = output_dir if output_dir is not None else self.args.output_dir
        with open(os.path.join(output_dir, THR_CONFIG_NAME), "w", encoding="utf-8") as f:
            json.dump(self.args.thr_kwargs(), f, indent=2, sort_keys=True)


__all__ = ["THR_CONFIG_NAME", "THRGRPOTrainer"]
