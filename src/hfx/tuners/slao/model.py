"""The SLAO tuner: a PEFT ``LoraModel`` whose layers keep a constant-size continual-merging state.

arXiv:2512.23017, Algorithm 1 (Qiao & Mahdavi, ICLR 2026). https://huggingface.co/papers/2512.23017
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from peft.tuners.lora import LoraModel
from peft.tuners.tuners_utils import BaseTunerLayer
from torch import nn

from .layer import LEGACY_BUFFER_NAMES, SLAOLinear


class SLAOModel(LoraModel):
    """Creates an SLAO adapter (single-LoRA continual learning with orthogonal init and time-aware merging).

    Built by ``peft.get_peft_model(model, SLAOConfig(...))`` once hfx registered the ``"SLAO"`` type (``import hfx``
    then ``import peft``, or ``import hfx.tuners.slao``). The adapted layers are [`SLAOLinear`], i.e. PEFT LoRA
    ``Linear`` layers (``lora_A``, ``lora_B``, ``scaling``, ``merge``/``unmerge``) plus the SLAO state. All of
    ``LoraModel``'s API works (``merge_and_unload``, ``disable_adapter``, ``save_pretrained`` through ``PeftModel``);
    ``PeftModel`` forwards :meth:`start_task` / :meth:`finish_task` here, so ``peft_model.start_task()`` works.

    Only ``torch.nn.Linear`` modules may be targeted; W0 is never modified (no PiSSA/OLoRA-style init).

    Continual protocol (per adapter, Algorithm 1)::

        for task in tasks:
            model.start_task()    # task 1: standard LoRA init; i >= 2: A <- Q^T (QR of A_ft,i-1), B <- B_ft,i-1
            train(model, task)    # both lora_A and lora_B are trainable
            model.finish_task()   # A_merge <- A_ft,i; B_merge <- B_merge + lambda(i) (B_ft,i - B_merge)
            evaluate(model)       # the live LoRA weights now hold (A_merge, B_merge)
    """

    def _create_and_replace(self, lora_config, adapter_name, target, target_name, parent, current_key, **kwargs):
        base = target.get_base_layer() if isinstance(target, BaseTunerLayer) else target
        if isinstance(target, BaseTunerLayer) and not isinstance(target, SLAOLinear):
            raise TypeError(
                f"`target_modules` matched {current_key!r}, which already carries a {type(target).__name__} adapter; "
                "SLAO adapters cannot be stacked on other PEFT layers."
            )
        if not isinstance(base, nn.Linear) or kwargs.get("parameter_name") is not None:
            raise TypeError(
                f"SLAO adapts `torch.nn.Linear` layers only, but `target_modules` matched {current_key!r} of type "
                f"{type(base).__name__}. Remove it from `target_modules` (e.g. use ['q_proj', 'v_proj'])."
            )
        return super()._create_and_replace(
            lora_config, adapter_name, target, target_name, parent, current_key, **kwargs
        )

    @staticmethod
    def _create_new_module(lora_config, adapter_name, target, **kwargs):
        kwargs.pop("parameter_name", None)
        for key in ("loaded_in_8bit", "loaded_in_4bit"):
            if kwargs.get(key, False):
                raise TypeError("SLAO does not support 8-bit/4-bit quantised base layers (merge math on W0).")
        return SLAOLinear(target, adapter_name, config=lora_config, **kwargs)

    @classmethod
    def _remap_adapter_state_dict_for_load(cls, model, config, adapter_name, state_dict):
        """Also load adapters saved by earlier hfx versions, whose SLAO state keys lacked the ``lora_`` prefix."""
        state_dict = {_upgrade_legacy_key(key): value for key, value in state_dict.items()}
        return super()._remap_adapter_state_dict_for_load(model, config, adapter_name, state_dict)

    # --------------------------------------------------------------------------------------------- continual API
    def slao_layers(self) -> list[tuple[str, SLAOLinear]]:
        """``(module name, layer)`` for every SLAO-adapted layer of the model."""
        return [(name, module) for name, module in self.model.named_modules() if isinstance(module, SLAOLinear)]

    def _resolve_adapter(self, adapter_name: str | None) -> str:
        if adapter_name is None:
            if len(self.active_adapters) != 1:
                raise ValueError(
                    f"`adapter_name` is required when several adapters are active ({self.active_adapters})."
                )
            adapter_name = self.active_adapters[0]
        if adapter_name not in self.peft_config:
            raise ValueError(f"`adapter_name` must be one of {sorted(self.peft_config)}, but is {adapter_name!r}")
        return adapter_name

    def _layers_for(self, adapter_name: str) -> list[SLAOLinear]:
        layers = [module for _, module in self.slao_layers() if adapter_name in module.lora_A]
        if not layers:
            raise ValueError(f"No SLAO layer carries adapter {adapter_name!r}.")
        return layers

    def start_task(self, adapter_name: str | None = None) -> int:
        """Start the next task of the sequence: initialise every layer's ``lora_A`` / ``lora_B`` (Algorithm 1).

        Args:
            adapter_name (`str`, *optional*): defaults to the single active adapter.

        Returns:
            `int`: the index i (1-based) of the task that starts.

        Raises:
            RuntimeError: if a task is already in progress (``start_task`` twice), the adapter is merged, or none of
                its LoRA parameters is trainable (an adapter loaded without ``is_trainable=True``).
            ValueError: for an unknown ``adapter_name``, or a rank r > in_features with an init strategy that needs
                the QR of A (checked at every task, task 1 included).
        """
        adapter_name = self._resolve_adapter(adapter_name)
        config = self.peft_config[adapter_name]
        layers = self._layers_for(adapter_name)
        trainable = [
            p for layer in layers for p in (layer.lora_A[adapter_name].weight, layer.lora_B[adapter_name].weight)
        ]
        frozen = adapter_name in self.active_adapters and not any(p.requires_grad for p in trainable)
        if config.inference_mode or frozen:
            raise RuntimeError(
                f"start_task(): adapter {adapter_name!r} has no trainable LoRA parameter (0 of "
                f"{sum(p.numel() for p in trainable):,}"
                + ("; it was loaded for inference, `inference_mode=True`" if config.inference_mode else "")
                + "), so the task would train nothing. Load it with `PeftModel.from_pretrained(base, path, "
                "is_trainable=True)` (or `model.load_adapter(path, adapter_name, is_trainable=True)`)."
            )
        for layer in layers:  # before touching any layer: task 1 must not be trained if task 2 cannot start
            layer.slao_check_rank(adapter_name, config)
        indices = {layer.slao_start_task(adapter_name, config) for layer in layers}
        if len(indices) != 1:
            raise RuntimeError(f"SLAO layers disagree on the task index ({sorted(indices)}); the state is corrupt.")
        return indices.pop()

    def finish_task(self, adapter_name: str | None = None) -> float:
        """Finish the current task: store (A_ft, B_ft), merge, and load (A_merge, B_merge) into the LoRA weights.

        Args:
            adapter_name (`str`, *optional*): defaults to the single active adapter.

        Returns:
            `float`: lambda(i) used to merge B (1.0 for task 1).

        Raises:
            RuntimeError: if no task was started (``finish_task`` before ``start_task``) or the adapter is merged.
        """
        adapter_name = self._resolve_adapter(adapter_name)
        config = self.peft_config[adapter_name]
        layers = self._layers_for(adapter_name)
        if not layers[0].slao_in_task(adapter_name):
            raise RuntimeError(
                f"finish_task() called before start_task() for adapter {adapter_name!r} "
                f"({layers[0].slao_tasks_finished(adapter_name)} task(s) finished, none in progress)."
            )
        coefficients = [layer.slao_finish_task(adapter_name, config) for layer in layers]
        return coefficients[0]

    def num_tasks_finished(self, adapter_name: str | None = None) -> int:
        """How many tasks were finished (merged) so far."""
        adapter_name = self._resolve_adapter(adapter_name)
        return self._layers_for(adapter_name)[0].slao_tasks_finished(adapter_name)

    def in_task(self, adapter_name: str | None = None) -> bool:
        """Whether a task is in progress (started, not finished)."""
        adapter_name = self._resolve_adapter(adapter_name)
        return self._layers_for(adapter_name)[0].slao_in_task(adapter_name)

    def export_lora(self, save_directory: str | Path, adapter_name: str | None = None, **kwargs: Any) -> Path:
        """Save the merged pair as a plain PEFT LoRA adapter; see :func:`hfx.tuners.slao.continual.export_lora`."""
        from .continual import export_lora  # at call time: continual.py imports SLAOModel at module level

        return export_lora(self, save_directory, adapter_name=adapter_name, **kwargs)


def _upgrade_legacy_key(key: str) -> str:
    """``<module>.slao_A_merge`` (hfx < issue 12) -> ``<module>.lora_slao_A_merge``; other keys unchanged."""
    head, dot, last = key.rpartition(".")
    if dot and last in LEGACY_BUFFER_NAMES:
        return f"{head}.{LEGACY_BUFFER_NAMES[last]}"
    return key
