"""`THRGRPOTrainer`: `trl.GRPOTrainer` with per-token advantages from Token Hidden Reward."""

from __future__ import annotations

import json
import os
from functools import partial
from typing import Any, ClassVar

import torch
from accelerate.logging import get_logger
from trl import GRPOConfig, GRPOTrainer
from trl.models.utils import disable_gradient_checkpointing

from .config import THRGRPOConfig
from .distributed import Collectives, distributed_token_hidden_reward
from .policy import (
    backbone_of,
    capture_hidden_states,
    capture_last_hidden_states,
    gathered_output_head,
    output_logits,
)
from .token_rewards import BatchTHR, batch_token_hidden_reward


logger = get_logger(__name__)

THR_CONFIG_NAME = "thr_config.json"

_MULTIMODAL_KEYS = ("pixel_values", "image_grid_thw", "image_sizes", "pixel_attention_mask", "token_type_ids")
_MULTIMODAL_COLUMNS = ("image", "images")


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
    (``None`` builds a default one). The only overrides are ``_generate`` (captures the hidden states) and
    ``_generate_and_score_completions``: after the parent computed the response advantages ``(B,)``, THR is
    computed without gradient (fp32, prompt, padding and tool-output tokens masked, all-correct / all-wrong groups
    skipped without any forward pass) and ``advantages`` of shape ``(B, T)`` are returned. The parent's loss code is
    untouched, so every ``loss_type`` of the installed TRL works unchanged and ``thr_mode="off"`` is exactly
    [`~trl.GRPOTrainer`]. THR is applied in training only (evaluation batches keep the parent's advantages). An
    object whose ``args`` lack the ``thr_*`` fields (e.g. built with ``object.__new__`` as TRL's own tests do)
    behaves as the parent.

    ``pi_old`` is computed exactly as the model's own ``forward`` computes its logits from the backbone output
    (:func:`hfx.trainers.thr.policy.output_logits`), so architectures that rescale or softcap their logits (Granite,
    MiniCPM3, Falcon-H1, Cohere, Gemma 2/3/4, ...) are handled without a list of attributes; then divided by the
    sampling ``temperature``.

    **Several processes** (accelerate / torchrun; DDP, DeepSpeed, FSDP): groups whole on a process are computed
    locally; groups split across processes are assembled with accelerate's all-gathers (hidden states of the correct
    responses or partial Gram factors, whichever moves fewer bytes: ``thr_exchange``), and every process computes
    its own rows -- the result equals a single-process run on the same global batch. Sharded LM heads (ZeRO-3, FSDP)
    are gathered once per THR computation. See :mod:`hfx.trainers.thr.distributed`.

    **GSPO** (``importance_sampling_level="sequence"``): TRL multiplies the sequence ratio ``s_i`` (shape
    ``(B, 1)``) by the per-token advantages, ``-min(s_i A'_it, clip(s_i) A'_it)``, and aggregates with the chosen
    ``loss_type``. The value equals the GSPO-token objective (whose ``s_it = sg[s_i] pi_t / sg[pi_t]`` has the value
    ``s_i``), and clipping is decided per token from ``sign(A'_it)``; but the gradient of ``s_i`` is
    ``s_i * mean_t grad log pi_t``, so with TRL's sequence ratio every token of response ``i`` receives the
    response's *mean* token advantage, not its own. Reweighting therefore acts per response under GSPO in this TRL
    version; the token-resolved GSPO-token gradient needs a GSPO-token surrogate (not shipped by TRL 1.16).

    Requirements: causal LMs with a backbone and an output head, text-only batches (a dataset with an ``image`` /
    ``images`` column is refused before the model loads unless ``thr_mode="off"``; a multimodal batch raises
    ``ValueError``), ``num_iterations >= 1`` (THR uses the rollout policy ``pi_old``, computed once per generation
    batch).

    **Where the hidden states come from** (``last_thr_hidden_source``): ``"generation"`` (captured during a
    transformers ``generate`` rollout); ``"old_logps_forward"`` (captured from the training model's no-grad forward
    that TRL runs for the old log-probs: always with vLLM rollouts and ``vllm_importance_sampling_correction=True``,
    TRL's default, and when generation is not aligned with optimizer steps, e.g. ``num_iterations=2``); ``"forward"``
    (one extra no-grad forward of prompt + completion, when neither exists: vLLM without importance-sampling
    correction, a ``rollout_func``, tools, continuous batching). The fallback is logged once per reason, not per
    batch. vLLM's colocate and server modes are the same for THR: only the rollout tokens come from vLLM.

    Attributes:
        last_thr (`dict[str, torch.Tensor]` or `None`): after each training generation batch when ``thr_log_stats``:
            ``completion_ids``, ``completion_mask``, ``thr``, ``scores``, ``dominant``, ``advantages`` (CPU tensors,
            shape ``(B, T)``, this process's rows) and ``skipped`` (one entry per group with rows on this process),
            for :func:`plot_token_thr`.
        last_thr_exchange ([`~hfx.trainers.thr.distributed.ExchangeStats`] or `None`): what the last THR
            computation moved between processes (``None`` on one process).
        last_thr_hidden_source (`str` or `None`): where the last training batch's hidden states came from:
            ``"generation"``, ``"old_logps_forward"`` or ``"forward"`` (see above).
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
        train_dataset = kwargs.get("train_dataset", pargs[0] if pargs else None)
        self._thr_check_before_model_load(args, train_dataset)
        super().__init__(model, reward_funcs, args, *pargs, **kwargs)
        self.last_thr: dict[str, torch.Tensor] | None = None
        self.last_thr_exchange = None
        self.last_thr_hidden_source: str | None = None
        self._thr_captured: list[torch.Tensor] | None = None
        self._thr_old_forward: torch.Tensor | None = None
        self._thr_old_forward_armed = False
        self._thr_notes_logged: set[str] = set()

    @staticmethod
    def _thr_check_before_model_load(args: THRGRPOConfig, train_dataset) -> None:
        """What cannot work, refused before the parent loads the model (the config validated its own fields)."""
        if args.thr_mode == "off" or train_dataset is None:
            return
        columns = getattr(train_dataset, "column_names", None) or []
        image_columns = [c for c in _MULTIMODAL_COLUMNS if c in columns]
        if image_columns:
            raise ValueError(
                f"THR supports text-only training, but `train_dataset` has the image column(s) {image_columns}; use "
                "`thr_mode='off'` for multimodal training."
            )

    # ------------------------------------------------------------------ THR
    @property
    def _thr_mode(self) -> str:
        """``args.thr_mode``, or ``"off"`` when ``args`` has no THR fields (the parent's behaviour)."""
        return getattr(self.args, "thr_mode", "off")

    def _thr_policy(self):
        """The unwrapped (maybe PEFT) policy model."""
        return self.accelerator.unwrap_model(self.model)

    @torch.no_grad()
    def _thr_hidden_states(self, prompt_completion_ids, attention_mask, logits_to_keep, batch_size):
        """Final-layer hidden states predicting each completion token, shape `(n, T, d)` (no grad, rollout policy).

        The backbone runs in chunks of ``batch_size`` rows (the same number of calls on every process, which sharded
        parameters need), in the model's dtype without autocast, like the rollout itself."""
        backbone = backbone_of(self._thr_policy())
        chunks = []
        with disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs):
            for start in range(0, prompt_completion_ids.size(0), batch_size):
                end = start + batch_size
                hidden = backbone(
                    input_ids=prompt_completion_ids[start:end],
                    attention_mask=attention_mask[start:end],
                    use_cache=False,
                ).last_hidden_state
                chunks.append(hidden[:, -logits_to_keep - 1 : -1])
        return torch.cat(chunks, dim=0)

    @torch.no_grad()
    def compute_token_hidden_reward(
        self, output: dict[str, Any], hidden_states: torch.Tensor | None = None
    ) -> BatchTHR:
        """THR of a `_generate_and_score_completions` output (response advantages of shape `(B,)`).

        Args:
            output (`dict`): the parent's output (``prompt_ids``, ``prompt_mask``, ``completion_ids``,
                ``completion_mask``, ``advantages`` of shape `(B,)`, optionally ``tool_mask``: tool-output tokens
                are masked out of THR like padding).
            hidden_states (`torch.Tensor` of shape `(B, T, d)`, *optional*): the rollout's final hidden states
                predicting each completion token (captured during generation); ``None`` runs a no-grad forward pass
                of prompt + completion (on one process only for the rows of non-skipped groups).

        Returns:
            [`~hfx.trainers.thr.token_rewards.BatchTHR`]; ``token_advantages`` has shape `(B, T)`. On several
            processes it covers this process's rows (groups split across processes are assembled with collectives,
            so every process must call this at the same step).

        Raises:
            ValueError: for multimodal batches, or a global batch that is not whole groups of ``num_generations``.
        """
        present = [k for k in _MULTIMODAL_KEYS if k in output]
        if present:
            raise ValueError(
                f"THR supports text-only batches, but the batch has {present}; use `thr_mode='off'` for this model."
            )
        args = self.args
        completion_ids, completion_mask = output["completion_ids"], output["completion_mask"]
        mask = completion_mask if output.get("tool_mask") is None else completion_mask * output["tool_mask"]
        prompt_completion_ids = torch.cat([output["prompt_ids"], completion_ids], dim=1)
        attention_mask = torch.cat([output["prompt_mask"], completion_mask], dim=1)
        T = completion_ids.size(1)
        batch_size = args.per_device_train_batch_size
        model = self._thr_policy()
        kwargs = dict(
            mode=args.thr_mode,
            p=args.thr_p,
            tau_beta=args.thr_tau_beta,
            tau=args.thr_tau,
            normalization=args.thr_normalization,
            include_self=args.thr_include_self,
            vocab_subset=args.thr_vocab_subset,
            temperature=self.temperature,
        )
        distributed = self.accelerator.num_processes > 1
        if hidden_states is None and distributed:
            # every process runs the same number of backbone calls (sharded parameters gather per call)
            hidden_states = self._thr_hidden_states(prompt_completion_ids, attention_mask, T, batch_size)

        def forward_hidden_states(rows: slice) -> torch.Tensor:
            return self._thr_hidden_states(prompt_completion_ids[rows], attention_mask[rows], T, batch_size)

        hidden = forward_hidden_states if hidden_states is None else hidden_states
        with gathered_output_head(model, self.model_wrapped) as head:
            lm_head = partial(output_logits, model, head=head)
            if not distributed:
                self.last_thr_exchange = None
                return batch_token_hidden_reward(
                    hidden, completion_ids, mask, output["advantages"].float(), self.num_generations, lm_head, **kwargs
                )
            result, self.last_thr_exchange = distributed_token_hidden_reward(
                hidden,
                completion_ids,
                mask,
                output["advantages"].float(),
                self.num_generations,
                lm_head,
                Collectives.from_accelerator(self.accelerator),
                hidden_size=hidden.size(-1),
                hidden_dtype=hidden.dtype,
                exchange=getattr(args, "thr_exchange", "auto"),
                **kwargs,
            )
            return result

    def _log_thr(self, result: BatchTHR, mask: torch.Tensor, mode: str) -> None:
        """THR statistics of the whole global batch (summed over processes, so they equal a one-process run)."""
        valid = mask.bool() & self._thr_processed_rows(result, mask).unsqueeze(1)
        thr = result.thr[valid]
        k = self.args.thr_top_k
        first = self._thr_first_owned(result)
        local = torch.tensor(
            [
                valid.sum().item(),
                result.dominant[valid].sum().item(),
                thr.abs().sum().item(),
                (thr > 0).sum().item(),
                (thr < 0).sum().item(),
                first.sum().item(),
                (first & result.skipped.cpu()).sum().item(),
            ],
            dtype=torch.float64,
        )
        top = torch.full((k,), float("nan"), dtype=torch.float64)
        top_local = thr.abs().topk(min(k, thr.numel())).values.double().cpu()
        top[: top_local.numel()] = top_local
        if self.accelerator.num_processes > 1:
            device = self.accelerator.device
            local = self.accelerator.gather(local.to(device)).view(-1, local.numel()).sum(0).cpu()
            top = self.accelerator.gather(top.to(device)).cpu()
        n, n_dom, abs_sum, n_pos, n_neg, n_groups, n_skipped = local.tolist()
        metrics = self._metrics[mode]
        metrics["thr/skipped_group_frac"].append(n_skipped / max(n_groups, 1.0))
        if n == 0:
            return
        metrics["thr/dominant_frac"].append(n_dom / n)
        metrics["thr/abs_mean"].append(abs_sum / n)
        metrics["thr/positive_frac"].append(n_pos / n)
        metrics["thr/negative_frac"].append(n_neg / n)
        top = top[~torch.isnan(top)].topk(min(k, int(n))).values
        metrics["thr/top_abs_mean"].append(top.mean().item())

    def _thr_groups_of_rows(self, n_rows: int) -> torch.Tensor:
        """Global group id of each of this process's rows (TRL gives process r rows ``[r B, (r+1) B)``)."""
        start = self.accelerator.process_index * n_rows
        return torch.arange(start, start + n_rows) // self.num_generations

    def _thr_first_owned(self, result: BatchTHR) -> torch.Tensor:
        """For each group listed in ``result.skipped``: whether its first row lives on this process (counted once)."""
        listed = torch.unique(self._thr_groups_of_rows(result.thr.size(0)))
        return listed * self.num_generations >= self.accelerator.process_index * result.thr.size(0)

    def _thr_processed_rows(self, result: BatchTHR, mask: torch.Tensor) -> torch.Tensor:
        groups = self._thr_groups_of_rows(mask.size(0))
        listed = torch.unique(groups)
        skipped_of_group = dict(zip(listed.tolist(), result.skipped.cpu().tolist()))
        return torch.tensor([not skipped_of_group[g] for g in groups.tolist()], device=mask.device)

    def _thr_capture_supported(self) -> bool:
        """Whether the rollout is one transformers ``generate`` call whose backbone outputs can be captured."""
        return not (
            getattr(self, "use_vllm", False)
            or getattr(self, "use_transformers_continuous_batching", False)
            or getattr(self, "tools", None)
            or getattr(self, "rollout_func", None) is not None
            or getattr(self, "environment_factories", None) is not None
        )

    def _thr_generation_capture(self) -> bool:
        """Whether this training batch's hidden states are captured during ``generate``."""
        return (
            self._thr_mode != "off"
            and getattr(self.args, "thr_hidden_states", "forward") == "generation"
            and self.model.training
            and self._thr_capture_supported()
        )

    def _generate(self, prompts: list):
        """The parent's rollout; with ``thr_hidden_states="generation"`` a forward hook on the backbone records, at
        every decoding step, the hidden state of the last position (the one predicting the next token). The hook
        exists only while the parent's ``_generate`` runs and is removed in a ``finally`` block."""
        self._thr_captured = None
        if not self._thr_generation_capture():
            return super()._generate(prompts)
        with capture_last_hidden_states(backbone_of(self._thr_policy())) as steps:
            result = super()._generate(prompts)
        self._thr_captured = steps
        return result

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        """The parent's log-prob forward; when armed (a THR training batch whose rollout could not be captured), the
        first call on the policy -- TRL's no-grad old-log-prob forward -- also records the backbone's hidden states
        predicting each completion token, `(B, T, d)`, so THR needs no forward pass of its own. Whether that call
        really was the old-log-prob forward is checked afterwards (``old_per_token_logps`` in the parent's output)."""
        if not getattr(self, "_thr_old_forward_armed", False) or model is not self.model:
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, *args, **kwargs
            )
        self._thr_old_forward_armed = False
        with capture_hidden_states(backbone_of(self._thr_policy())) as calls:
            result = super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, *args, **kwargs
            )
        rows = sum(call.size(0) for call in calls)
        if rows == input_ids.size(0) and all(call.size(1) == input_ids.size(1) for call in calls):
            self._thr_old_forward = torch.cat([call[:, -logits_to_keep - 1 : -1] for call in calls], dim=0)
        return result

    def _thr_note_once(self, key: str, message: str, *args, warning: bool = True) -> None:
        """Log ``message`` the first time ``key`` occurs on this trainer (not once per batch)."""
        if key in self._thr_notes_logged:
            return
        self._thr_notes_logged.add(key)
        (logger.warning if warning else logger.info)(message, *args)

    def _captured_hidden_states(self, output: dict[str, Any]) -> torch.Tensor | None:
        """The rollout's `(B, T, d)` hidden states, from the ``generate`` capture or from TRL's old-log-prob forward,
        or ``None`` (an extra forward pass follows; logged once per reason). Sets ``last_thr_hidden_source``. On
        several processes ``None`` everywhere as soon as one process has none (sharded parameters need every process
        to run the same forward calls)."""
        steps, self._thr_captured = getattr(self, "_thr_captured", None), None
        old, self._thr_old_forward = getattr(self, "_thr_old_forward", None), None
        self._thr_old_forward_armed = False
        B, T = output["completion_ids"].shape
        hidden, source = None, "forward"
        wants_generation = getattr(self.args, "thr_hidden_states", "forward") == "generation"
        if wants_generation and steps is not None:
            if len(steps) >= T and all(step.size(0) == B for step in steps[:T]):
                hidden, source = torch.stack(steps[:T], dim=1), "generation"
            else:
                self._thr_note_once(
                    "capture_mismatch",
                    "THR could not use the hidden states captured during generation (%s decoding steps for "
                    "completions of shape %s); running an extra forward pass instead. Logged once.",
                    len(steps),
                    (B, T),
                )
        if (
            hidden is None
            and old is not None
            and output.get("old_per_token_logps") is not None
            and old.shape[:2] == (B, T)
        ):
            hidden, source = old, "old_logps_forward"
        if self.accelerator.num_processes > 1:
            flags = self.accelerator.gather(torch.tensor([float(hidden is not None)], device=self.accelerator.device))
            if hidden is not None and bool(flags.min() == 0):
                self._thr_note_once(
                    "other_process",
                    "THR: another process has no hidden states for this batch; every process runs the extra forward "
                    "pass. Logged once.",
                )
                hidden, source = None, "forward"
        if hidden is None:
            self._note_forward_fallback()
        elif source == "old_logps_forward":
            self._thr_note_once(
                "old_logps_forward",
                "THR takes the hidden states and pi_old from the training model's old-log-prob forward that TRL "
                "already runs%s (no extra forward pass).",
                " for vLLM's importance-sampling correction" if getattr(self, "use_vllm", False) else "",
                warning=False,
            )
        self.last_thr_hidden_source = source
        return hidden

    def _note_forward_fallback(self) -> None:
        if getattr(self, "use_vllm", False):
            key, why = (
                "vllm_forward",
                ("vLLM rollouts with `vllm_importance_sampling_correction=False`: TRL runs no old-log-prob forward"),
            )
        elif not self._thr_capture_supported():
            key, why = "unsupported_forward", "the rollout is not one transformers `generate` call"
        elif getattr(self.args, "thr_hidden_states", "forward") == "forward":
            key, why = "forward_requested", "`thr_hidden_states='forward'` and TRL runs no old-log-prob forward"
        else:
            key, why = "capture_forward", "the generation capture was not usable"
        self._thr_note_once(
            key,
            "THR runs one extra no-grad forward pass per generation batch for the hidden states: %s.",
            why,
            warning=key not in ("forward_requested",),
        )

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        active = self._thr_mode != "off" and self.model.training
        # TRL's old-log-prob forward (when it runs) comes after the rollout: arm its capture only when the rollout
        # itself will not be captured
        self._thr_old_forward, self._thr_old_forward_armed = None, active and not self._thr_generation_capture()
        try:
            output = super()._generate_and_score_completions(inputs)
        finally:
            self._thr_old_forward_armed = False
        if not active:
            self._thr_captured, self._thr_old_forward = None, None
            return output
        result = self.compute_token_hidden_reward(output, hidden_states=self._captured_hidden_states(output))
        advantages = output["advantages"]
        output["advantages"] = result.token_advantages.to(device=advantages.device, dtype=advantages.dtype)
        if self.last_thr_exchange is not None:
            self._metrics["train"]["thr/exchange_bytes"].append(float(self.last_thr_exchange.bytes_received))
        if self.args.thr_log_stats:
            mask = output["completion_mask"]
            if output.get("tool_mask") is not None:
                mask = mask * output["tool_mask"]
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
        from hfx.utils.artifacts import check_save_target, model_artifact_type

        output_dir = output_dir if output_dir is not None else self.args.output_dir
        # a folder holding another artifact (an SC-GNN, a router, ...) is refused before anything is written
        check_save_target(output_dir, model_artifact_type(self.model), who="THRGRPOTrainer.save_model", arg="output_dir")
        super()._save(output_dir, state_dict=state_dict)
        if hasattr(self.args, "thr_kwargs"):
            with open(os.path.join(output_dir, THR_CONFIG_NAME), "w", encoding="utf-8") as f:
                json.dump(self.args.thr_kwargs(), f, indent=2, sort_keys=True)


__all__ = ["THR_CONFIG_NAME", "THRGRPOTrainer"]
