"""`FluentAlignmentConfig`: the three stages of fluent alignment (and its two baselines) as one recipe config."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from hfx.utils.validation import (
    check_bool,
    check_choice,
    check_float,
    check_int,
    check_optional,
    check_sequence,
    check_str,
)

from .provenance import PROVENANCES


ARMS = ("fluent", "sft_translated", "multilingual", "sft_only")
ON_POLICY_OPTIMIZERS = ("online_dpo", "grpo")
JUDGE_MODES = ("pairwise", "pointwise")
CONFIG_NAME = "fluent_alignment_config.json"


@dataclass
class FluentAlignmentConfig:
    r"""Configuration of :func:`run_fluent_alignment`: the fluent-alignment recipe of Samuel et al. (ICLR 2026,
    arXiv 2512.08777, https://huggingface.co/papers/2512.08777) and its baselines, as switches of one runner.

    Stages of ``arm="fluent"`` (the recipe):

    1. **base model** -- ``base_model`` (a path / Hub id), or the model passed to the runner;
    2. **short SFT** on a small *English* instruction set (the paper: LIMA, one epoch) with TRL's ``SFTTrainer``;
    3. **on-policy preference optimisation in the target language**: the policy samples its own responses to native
       target-language prompts and a [`ConstitutionJudge`] ranks them; ``on_policy_optimizer="online_dpo"``
       (default, [`FluentOnlineDPOTrainer`]) or ``"grpo"`` ([`FluentGRPOTrainer`]). The provenance guard refuses
       target-language training text that is not the policy's own samples.

    Baselines (:meth:`for_baseline`): ``"sft_translated"`` -- SFT on machine-translated target-language instruction
    data only; ``"multilingual"`` -- SFT on the English and the translated data mixed. ``"sft_only"`` stops after
    stage 2 (the reference the case study's helpfulness is measured against).

    Args:
        output_dir (`str`): where each stage is saved (``stage1_sft/``, ``stage2_online_dpo/`` or ``stage2_grpo/``)
            with the manifest ``fluent_alignment.json``.
        arm (`str`, *optional*, defaults to `"fluent"`): one of ``"fluent"``, ``"sft_translated"``,
            ``"multilingual"``, ``"sft_only"``.
        base_model (`str`, *optional*): the base model's path or Hub id (used when no model is passed).
        target_language (`str`, *optional*, defaults to `"nb"`): the target language's code (matched against a
            dataset's ``language`` column by the guard).
        target_language_name (`str`, *optional*, defaults to `"Norwegian Bokmål"`): its name, for the judge.
        sft_epochs (`int`, *optional*, defaults to `1`): epochs of the SFT stage (the paper: 1); ``0`` skips it.
        sft_learning_rate (`float`, *optional*, defaults to `2e-5`).
        sft_batch_size (`int`, *optional*, defaults to `8`): per-device batch size of the SFT stage.
        sft_max_length (`int`, *optional*, defaults to `1024`): token limit of an SFT example.
        on_policy_optimizer (`str`, *optional*, defaults to `"online_dpo"`): ``"online_dpo"`` or ``"grpo"`` (the
            paper's exact optimiser is not stated; both are offered).
        on_policy_steps (`int`, *optional*, defaults to `100`): optimizer steps of the on-policy stage.
        on_policy_learning_rate (`float`, *optional*, defaults to `5e-7`).
        on_policy_batch_size (`int`, *optional*, defaults to `8`): prompts per step (online DPO samples 2 each;
            GRPO's batch is ``on_policy_batch_size * num_generations`` completions).
        beta (`float`, *optional*, defaults to `0.1`): KL / DPO temperature towards the SFT model.
        max_new_tokens (`int`, *optional*, defaults to `256`): sampled completion length.
        temperature (`float`, *optional*, defaults to `0.9`): sampling temperature.
        num_generations (`int`, *optional*, defaults to `4`): completions per prompt under GRPO (``>= 2``).
        judge_mode (`str`, *optional*, defaults to `"pairwise"`): how the judge becomes a reward,
            see :meth:`ConstitutionJudge.as_reward_function`.
        allowed_prompt_provenance (`tuple[str, ...]`, *optional*, defaults to `("native",)`): provenances the guard
            accepts for target-language prompts.
        reward_columns (`tuple[str, ...]`, *optional*, defaults to `()`): prompt-dataset columns only the judge reads.
        use_lora (`bool`, *optional*, defaults to `False`): train LoRA adapters (PEFT) in both stages; each is merged
            into the model after its stage (the next stage's reference is the merged model).
        lora_r (`int`, *optional*, defaults to `16`): LoRA rank.
        lora_alpha (`int`, *optional*, defaults to `32`): LoRA scaling numerator.
        lora_dropout (`float`, *optional*, defaults to `0.0`): LoRA dropout.
        lora_target_modules (`str` or `tuple`, *optional*, defaults to `"all-linear"`): the ``LoraConfig`` targets.
        seed (`int`, *optional*, defaults to `0`).
        logging_steps (`int`, *optional*, defaults to `10`).
        max_minutes_per_stage (`float`, *optional*): wall-clock budget of each training stage; training stops at the
            first step boundary past it (the steps done are recorded).
        resume (`bool`, *optional*, defaults to `True`): reuse a stage already completed in ``output_dir``.
        sft_kwargs (`dict`, *optional*): extra ``trl.SFTConfig`` fields.
        on_policy_kwargs (`dict`, *optional*): extra ``OnlineDPOConfig`` / ``GRPOConfig`` fields.

    Raises:
        ValueError / TypeError: for a field of the wrong type or value, named in the message (checked at
            construction, before any work).
    """

    output_dir: str
    arm: str = "fluent"
    base_model: str | None = None
    target_language: str = "nb"
    target_language_name: str = "Norwegian Bokmål"
    # stage 2: short SFT
    sft_epochs: int = 1
    sft_learning_rate: float = 2e-5
    sft_batch_size: int = 8
    sft_max_length: int = 1024
    # stage 3: on-policy
    on_policy_optimizer: str = "online_dpo"
    on_policy_steps: int = 100
    on_policy_learning_rate: float = 5e-7
    on_policy_batch_size: int = 8
    beta: float = 0.1
    max_new_tokens: int = 256
    temperature: float = 0.9
    num_generations: int = 4
    judge_mode: str = "pairwise"
    allowed_prompt_provenance: tuple[str, ...] = ("native",)
    reward_columns: tuple[str, ...] = ()
    # LoRA
    use_lora: bool = False
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    lora_target_modules: Any = "all-linear"
    # shared
    seed: int = 0
    logging_steps: int = 10
    max_minutes_per_stage: float | None = None
    resume: bool = True
    sft_kwargs: dict = field(default_factory=dict)
    on_policy_kwargs: dict = field(default_factory=dict)

    def __post_init__(self):
        self.output_dir = str(check_str("output_dir", str(self.output_dir) if isinstance(self.output_dir, Path) else self.output_dir))
        self.arm = check_choice("arm", self.arm, ARMS)
        self.base_model = check_optional(check_str, "base_model", self.base_model)
        self.target_language = check_str("target_language", self.target_language)
        self.target_language_name = check_str("target_language_name", self.target_language_name)
        self.sft_epochs = check_int("sft_epochs", self.sft_epochs, minimum=0)
        self.sft_learning_rate = check_float("sft_learning_rate", self.sft_learning_rate, minimum=0, strict_minimum=True)
        self.sft_batch_size = check_int("sft_batch_size", self.sft_batch_size, minimum=1)
        self.sft_max_length = check_int("sft_max_length", self.sft_max_length, minimum=8)
        self.on_policy_optimizer = check_choice("on_policy_optimizer", self.on_policy_optimizer, ON_POLICY_OPTIMIZERS)
        self.on_policy_steps = check_int("on_policy_steps", self.on_policy_steps, minimum=1)
        self.on_policy_learning_rate = check_float(
            "on_policy_learning_rate", self.on_policy_learning_rate, minimum=0, strict_minimum=True
        )
        self.on_policy_batch_size = check_int("on_policy_batch_size", self.on_policy_batch_size, minimum=1)
        self.beta = check_float("beta", self.beta, minimum=0)
        self.max_new_tokens = check_int("max_new_tokens", self.max_new_tokens, minimum=1)
        self.temperature = check_float("temperature", self.temperature, minimum=0, strict_minimum=True)
        self.num_generations = check_int("num_generations", self.num_generations, minimum=2)
        self.judge_mode = check_choice("judge_mode", self.judge_mode, JUDGE_MODES)
        self.allowed_prompt_provenance = tuple(
            check_sequence(
                "allowed_prompt_provenance",
                self.allowed_prompt_provenance,
                item_check=lambda n, v: check_choice(n, v, PROVENANCES),
                min_length=1,
            )
        )
        self.reward_columns = tuple(check_sequence("reward_columns", self.reward_columns, item_check=check_str))
        self.use_lora = check_bool("use_lora", self.use_lora)
        self.lora_r = check_int("lora_r", self.lora_r, minimum=1)
        self.lora_alpha = check_int("lora_alpha", self.lora_alpha, minimum=1)
        self.lora_dropout = check_float("lora_dropout", self.lora_dropout, minimum=0, maximum=1, strict_maximum=True)
        if not isinstance(self.lora_target_modules, str):
            self.lora_target_modules = tuple(
                check_sequence("lora_target_modules", self.lora_target_modules, item_check=check_str, min_length=1)
            )
        self.seed = check_int("seed", self.seed, minimum=0)
        self.logging_steps = check_int("logging_steps", self.logging_steps, minimum=1)
        self.max_minutes_per_stage = check_optional(
            check_float, "max_minutes_per_stage", self.max_minutes_per_stage, minimum=0, strict_minimum=True
        )
        self.resume = check_bool("resume", self.resume)
        for name in ("sft_kwargs", "on_policy_kwargs"):
            value = getattr(self, name)
            if not isinstance(value, dict):
                raise TypeError(f"`{name}` has to be a dict of config fields, but is {type(value).__name__}")
        if self.arm == "fluent" and self.on_policy_optimizer == "grpo" and self.on_policy_kwargs.get(
            "generation_batch_size"
        ):
            raise ValueError("set GRPO's batch through `on_policy_batch_size` and `num_generations`, not `on_policy_kwargs`")

    # ------------------------------------------------------------------ arms
    @property
    def stages(self) -> list[str]:
        """The stages this arm runs, in order (``"sft"`` and, for ``arm="fluent"``, ``"online_dpo"`` / ``"grpo"``)."""
        stages = ["sft"] if self.sft_epochs > 0 else []
        if self.arm == "fluent":
            stages.append(self.on_policy_optimizer)
        return stages

    @classmethod
    def for_baseline(cls, name: str, output_dir: str, **kwargs) -> FluentAlignmentConfig:
        """The config of a baseline of the paper (or of the SFT-only reference), other fields as given.

        Args:
            name (`str`): ``"sft_translated"`` (SFT on machine-translated instruction data), ``"multilingual"``
                (SFT on English + translated data mixed) or ``"sft_only"`` (the recipe's stage 2 alone).
            output_dir (`str`): the run's folder.
            **kwargs: other fields.

        Returns:
            [`FluentAlignmentConfig`].
        """
        name = check_choice("name", name, ("sft_translated", "multilingual", "sft_only"))
        return cls(output_dir=output_dir, arm=name, **kwargs)

    # ------------------------------------------------------------------ io
    def to_dict(self) -> dict:
        """The config as a JSON-serialisable dict (tuples become lists).

        Returns:
            `dict`.
        """
        out = asdict(self)
        for key, value in out.items():
            if isinstance(value, tuple):
                out[key] = list(value)
        return out

    def save(self, folder: str | Path) -> Path:
        """Write ``fluent_alignment_config.json`` into ``folder``.

        Returns:
            `Path`: the file written.
        """
        path = Path(folder) / CONFIG_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True), encoding="utf-8")
        return path

    @classmethod
    def from_file(cls, path: str | Path) -> FluentAlignmentConfig:
        """Read a config written by :meth:`save` (a file, or the folder holding it).

        Returns:
            [`FluentAlignmentConfig`].

        Raises:
            FileNotFoundError: when there is no such file.
            ValueError: when it holds fields this class does not have.
        """
        path = Path(path)
        if path.is_dir():
            path = path / CONFIG_NAME
        if not path.is_file():
            raise FileNotFoundError(f"no fluent-alignment config at {str(path)!r}")
        data = json.loads(path.read_text(encoding="utf-8"))
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"{str(path)!r} holds fields that FluentAlignmentConfig does not have: {unknown}")
        return cls(**data)


__all__ = ["ARMS", "CONFIG_NAME", "ON_POLICY_OPTIMIZERS", "FluentAlignmentConfig"]
