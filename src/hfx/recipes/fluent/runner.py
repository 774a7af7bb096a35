"""`run_fluent_alignment`: run the stages of a [`FluentAlignmentConfig`] with TRL and save each one."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .configuration import FluentAlignmentConfig
from .judge import ConstitutionJudge
from .provenance import LANGUAGE_COLUMN, PROVENANCE_COLUMN, ProvenanceError, ProvenanceGuard, provenance_of


logger = logging.getLogger(__name__)

MANIFEST_NAME = "fluent_alignment.json"
STAGE_DONE = "stage.json"
_SFT_TEXT_COLUMNS = ("prompt", "completion", "messages", "text")


@dataclass
class FluentAlignmentResult:
    """What :func:`run_fluent_alignment` returns.

    Attributes:
        config ([`FluentAlignmentConfig`]): the config run.
        stages (`dict[str, str]`): stage name (``"sft"``, ``"online_dpo"`` / ``"grpo"``) -> saved folder (a full
            ``transformers`` model + tokenizer; LoRA adapters are merged).
        records (`dict[str, dict]`): per stage: ``global_step``, ``epochs``, ``seconds``, ``stopped_by_budget``,
            ``resumed``, ``log_history``, and for the on-policy stage the ``provenance`` report and judge counters.
        model (`transformers.PreTrainedModel`): the final model (in memory).
        tokenizer: its tokenizer.
        manifest (`str`): path of ``fluent_alignment.json``.
    """

    config: FluentAlignmentConfig
    stages: dict[str, str] = field(default_factory=dict)
    records: dict[str, dict] = field(default_factory=dict)
    model: Any = None
    tokenizer: Any = None
    manifest: str = ""


def _budget_callback(max_minutes: float | None):
    from transformers import TrainerCallback

    class _Budget(TrainerCallback):
        def __init__(self):
            self.start = time.monotonic()
            self.stopped = False

        def on_step_end(self, args, state, control, **kwargs):
            if max_minutes is not None and time.monotonic() - self.start > 60 * max_minutes:
                self.stopped = True
                control.should_training_stop = True
            return control

    return _Budget()


def _check_dataset(name: str, dataset, required_any: tuple[str, ...]) -> None:
    columns = getattr(dataset, "column_names", None)
    if columns is None or isinstance(columns, dict):
        raise TypeError(f"`{name}` has to be a `datasets.Dataset`, but is {type(dataset).__name__}")
    if len(dataset) == 0:
        raise ValueError(f"`{name}` is empty")
    if not any(c in columns for c in required_any):
        raise ValueError(f"`{name}` needs one of the columns {list(required_any)}, but has {columns}")


def check_recipe_sft_dataset(dataset, target_language: str, arg: str = "english_sft_dataset") -> None:
    """The recipe arm's SFT data must not hold translated or judge-written target-language text.

    Rows whose ``language`` is ``target_language`` (or every row, without a ``language`` column) must be ``native``
    or ``model_generated`` in every text column; other languages (the English SFT set) are not restricted.

    Raises:
        ProvenanceError: naming the column and the offending provenance.
    """
    columns = [c for c in _SFT_TEXT_COLUMNS if c in dataset.column_names]
    languages = list(dataset[LANGUAGE_COLUMN]) if LANGUAGE_COLUMN in dataset.column_names else [None] * len(dataset)
    for column in columns:
        provenance = provenance_of(dataset, column)
        bad = [
            i
            for i, (lang, prov) in enumerate(zip(languages, provenance))
            if (lang is None or lang == target_language) and prov in ("machine_translated", "judge_written")
        ]
        if bad:
            raise ProvenanceError(
                f"`{arg}` column `{column}` has target-language ({target_language!r}) text with provenance "
                f"`{provenance[bad[0]]}` ({len(bad)} of {len(dataset)} rows, first at row {bad[0]}); the fluent recipe "
                "never trains on translated or judge-written target-language text. Use that data in a baseline "
                "(`FluentAlignmentConfig.for_baseline('sft_translated')` or `'multilingual'`)."
            )


def _sft_view(dataset):
    keep = [c for c in dataset.column_names if c in _SFT_TEXT_COLUMNS]
    return dataset.select_columns(keep)


def _lora_config(config: FluentAlignmentConfig):
    from peft import LoraConfig

    target = config.lora_target_modules
    return LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=target if isinstance(target, str) else list(target),
        task_type="CAUSAL_LM",
    )


def _merged(model):
    if hasattr(model, "merge_and_unload") and hasattr(model, "peft_config"):
        return model.merge_and_unload()
    return model


def _save_stage(folder: Path, model, tokenizer, record: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / STAGE_DONE).write_text(json.dumps(record, indent=2, default=str), encoding="utf-8")


def _load_stage(folder: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)


def _common_args(config: FluentAlignmentConfig, out: Path) -> dict:
    import torch

    return dict(
        output_dir=str(out),
        seed=config.seed,
        logging_steps=config.logging_steps,
        save_strategy="no",
        report_to=[],
        use_cpu=not torch.cuda.is_available(),
        bf16=False,
        disable_tqdm=False,
    )


def _run_sft(config, model, tokenizer, dataset, out: Path) -> tuple[Any, dict]:
    from trl import SFTConfig, SFTTrainer

    args = SFTConfig(
        **_common_args(config, out / "sft_trainer"),
        num_train_epochs=config.sft_epochs,
        learning_rate=config.sft_learning_rate,
        per_device_train_batch_size=config.sft_batch_size,
        max_length=config.sft_max_length,
        **config.sft_kwargs,
    )
    budget = _budget_callback(config.max_minutes_per_stage)
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=_sft_view(dataset),
        processing_class=tokenizer,
        peft_config=_lora_config(config) if config.use_lora else None,
        callbacks=[budget],
    )
    start = time.monotonic()
    trainer.train()
    record = {
        "global_step": trainer.state.global_step,
        "max_steps": trainer.state.max_steps,
        "epochs": trainer.state.epoch,
        "num_train_epochs": config.sft_epochs,
        "num_examples": len(dataset),
        "seconds": time.monotonic() - start,
        "stopped_by_budget": budget.stopped,
        "log_history": trainer.state.log_history,
    }
    return _merged(trainer.model), record


def _run_on_policy(config, model_or_path, tokenizer, prompts, judge: ConstitutionJudge, out: Path):
    from .trainers import FluentGRPOTrainer, FluentOnlineDPOTrainer

    guard = ProvenanceGuard(
        target_language=config.target_language,
        allowed_prompt_provenance=config.allowed_prompt_provenance,
        reward_columns=config.reward_columns,
    )
    common = _common_args(config, out / f"{config.on_policy_optimizer}_trainer")
    budget = _budget_callback(config.max_minutes_per_stage)
    peft_config = _lora_config(config) if config.use_lora else None
    if config.on_policy_optimizer == "online_dpo":
        from trl.experimental.online_dpo import OnlineDPOConfig

        args = OnlineDPOConfig(
            **common,
            max_steps=config.on_policy_steps,
            learning_rate=config.on_policy_learning_rate,
            per_device_train_batch_size=config.on_policy_batch_size,
            beta=[config.beta],
            max_new_tokens=config.max_new_tokens,
            temperature=config.temperature,
            **config.on_policy_kwargs,
        )
        trainer = FluentOnlineDPOTrainer(
            model=model_or_path,
            judge=judge,
            judge_mode=config.judge_mode,
            args=args,
            train_dataset=prompts,
            processing_class=tokenizer,
            peft_config=peft_config,
            callbacks=[budget],
            provenance_guard=guard,
        )
    else:
        from trl import GRPOConfig

        args = GRPOConfig(
            **common,
            max_steps=config.on_policy_steps,
            learning_rate=config.on_policy_learning_rate,
            per_device_train_batch_size=config.on_policy_batch_size * config.num_generations,
            num_generations=config.num_generations,
            beta=config.beta,
            max_completion_length=config.max_new_tokens,
            temperature=config.temperature,
            **config.on_policy_kwargs,
        )
        trainer = FluentGRPOTrainer(
            model=model_or_path,
            judge=judge,
            judge_mode=config.judge_mode,
            args=args,
            train_dataset=prompts,
            processing_class=tokenizer,
            peft_config=peft_config,
            callbacks=[budget],
            provenance_guard=guard,
        )
    before = judge.stats.forward_prompts, judge.stats.comparisons, judge.stats.ties
    start = time.monotonic()
    trainer.train()
    record = {
        "global_step": trainer.state.global_step,
        "max_steps": config.on_policy_steps,
        "seconds": time.monotonic() - start,
        "stopped_by_budget": budget.stopped,
        "provenance": {k: dict(v) for k, v in (trainer.provenance_report or {}).items()},
        "judge_forward_prompts": judge.stats.forward_prompts - before[0],
        "judge_comparisons": judge.stats.comparisons - before[1],
        "judge_ties": judge.stats.ties - before[2],
        "log_history": trainer.state.log_history,
    }
    return _merged(trainer.model), record


def run_fluent_alignment(
    config: FluentAlignmentConfig,
    *,
    english_sft_dataset=None,
    translated_sft_dataset=None,
    target_prompts=None,
    judge: ConstitutionJudge | None = None,
    model=None,
    tokenizer=None,
) -> FluentAlignmentResult:
    """Run the stages of ``config`` (fluent alignment, arXiv 2512.08777) and save each one under ``output_dir``.

    ``arm="fluent"``: SFT (``sft_epochs``, ``SFTTrainer``) on ``english_sft_dataset`` -> on-policy online DPO / GRPO
    on ``target_prompts`` judged by ``judge``; ``"sft_translated"``: SFT on ``translated_sft_dataset``;
    ``"multilingual"``: SFT on both mixed (concatenated, shuffled with ``seed``); ``"sft_only"``: SFT on
    ``english_sft_dataset``. Every input is checked before a model is loaded: the datasets' columns, the recipe's
    provenance rules (the English SFT set of the recipe holds no translated / judge-written target-language text; the
    on-policy prompts pass [`ProvenanceGuard`]), and that ``judge`` is given when the arm needs it.

    Args:
        config ([`FluentAlignmentConfig`]): the recipe.
        english_sft_dataset (`datasets.Dataset`, *optional*): ``prompt`` / ``completion`` (or ``messages``) rows.
        translated_sft_dataset (`datasets.Dataset`, *optional*): the machine-translated instruction data (baselines).
        target_prompts (`datasets.Dataset`, *optional*): native target-language prompts (``prompt`` column, with
            provenance) for the on-policy stage.
        judge ([`ConstitutionJudge`], *optional*): ranks the policy's samples (``arm="fluent"``).
        model (`transformers.PreTrainedModel`, *optional*): the base model (else ``config.base_model`` is loaded).
        tokenizer (*optional*): its tokenizer (required with ``model``).

    Returns:
        [`FluentAlignmentResult`]; ``output_dir`` holds ``stage1_sft/``, ``stage2_<optimizer>/`` (full models +
        tokenizers + ``stage.json``), ``fluent_alignment_config.json`` and the manifest ``fluent_alignment.json``.
        A completed stage found in ``output_dir`` is loaded instead of retrained when ``config.resume``.

    Raises:
        TypeError / ValueError: for a missing or malformed input (named), before any model work.
        ProvenanceError: (a `ValueError`) when a dataset breaks the recipe's provenance rule.
    """
    if not isinstance(config, FluentAlignmentConfig):
        raise TypeError(f"`config` has to be a `FluentAlignmentConfig`, but is {type(config).__name__}")
    arm = config.arm
    needs_english = arm in ("fluent", "sft_only", "multilingual") and config.sft_epochs > 0
    needs_translated = arm in ("sft_translated", "multilingual")
    if needs_english:
        if english_sft_dataset is None:
            raise ValueError(f"arm {arm!r} needs `english_sft_dataset`")
        _check_dataset("english_sft_dataset", english_sft_dataset, ("completion", "messages", "text"))
    if needs_translated:
        if translated_sft_dataset is None:
            raise ValueError(f"arm {arm!r} needs `translated_sft_dataset` (the machine-translated instruction data)")
        _check_dataset("translated_sft_dataset", translated_sft_dataset, ("completion", "messages", "text"))
    if arm == "sft_translated" and config.sft_epochs == 0:
        raise ValueError("arm 'sft_translated' is an SFT baseline: `sft_epochs` has to be >= 1")
    if arm == "fluent":
        if config.sft_epochs > 0:
            check_recipe_sft_dataset(english_sft_dataset, config.target_language)
        if target_prompts is None:
            raise ValueError("arm 'fluent' needs `target_prompts` (native target-language prompts)")
        if judge is None or not isinstance(judge, ConstitutionJudge):
            raise TypeError(f"arm 'fluent' needs `judge`, a `ConstitutionJudge`, but got {type(judge).__name__}")
        ProvenanceGuard(
            target_language=config.target_language,
            allowed_prompt_provenance=config.allowed_prompt_provenance,
            reward_columns=config.reward_columns,
        ).check(target_prompts, arg="target_prompts")
    if (model is None) != (tokenizer is None):
        raise ValueError("pass `model` and `tokenizer` together (or neither, to load `config.base_model`)")
    if model is None and config.base_model is None:
        raise ValueError("pass `model` and `tokenizer`, or set `config.base_model`")

    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    config.save(out)
    if model is None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model = AutoModelForCausalLM.from_pretrained(config.base_model)
        tokenizer = AutoTokenizer.from_pretrained(config.base_model)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token

    result = FluentAlignmentResult(config=config)
    if config.sft_epochs > 0:
        folder = out / "stage1_sft"
        if config.resume and (folder / STAGE_DONE).is_file():
            model, tokenizer = _load_stage(folder)
            record = {**json.loads((folder / STAGE_DONE).read_text(encoding="utf-8")), "resumed": True}
        else:
            if arm == "sft_translated":
                data = translated_sft_dataset
            elif arm == "multilingual":
                from datasets import concatenate_datasets

                data = concatenate_datasets([_sft_view(english_sft_dataset), _sft_view(translated_sft_dataset)])
                data = data.shuffle(seed=config.seed)
            else:
                data = english_sft_dataset
            model, record = _run_sft(config, model, tokenizer, data, out)
            record["resumed"] = False
            record["provenance"] = dict(
                __import__("collections").Counter(str(p) for p in provenance_of(data, "completion"))
            ) if PROVENANCE_COLUMN in data.column_names or "completion_provenance" in data.column_names else {}
            _save_stage(folder, model, tokenizer, record)
        result.stages["sft"] = str(folder)
        result.records["sft"] = record
    if arm == "fluent":
        name = config.on_policy_optimizer
        folder = out / f"stage2_{name}"
        if config.resume and (folder / STAGE_DONE).is_file():
            model, tokenizer = _load_stage(folder)
            record = {**json.loads((folder / STAGE_DONE).read_text(encoding="utf-8")), "resumed": True}
        else:
            # GRPO with beta > 0 and no PEFT reloads its reference from `config._name_or_path`: give it the saved SFT
            source = model
            if name == "grpo" and config.beta > 0 and not config.use_lora:
                source = result.stages.get("sft") or getattr(model.config, "_name_or_path", "") or None
                if not source:
                    raise ValueError(
                        "GRPO with `beta > 0` and without LoRA needs the policy on disk (its reference is reloaded "
                        "from there): set `sft_epochs >= 1` or pass a model loaded from a folder"
                    )
            model, record = _run_on_policy(config, source, tokenizer, target_prompts, judge, out)
            record["resumed"] = False
            _save_stage(folder, model, tokenizer, record)
        result.stages[name] = str(folder)
        result.records[name] = record
    result.model, result.tokenizer = model, tokenizer
    manifest = {
        "method": "fluent-alignment",
        "paper": "arXiv:2512.08777",
        "arm": arm,
        "config": config.to_dict(),
        "stages": result.stages,
        "records": {k: {kk: vv for kk, vv in v.items() if kk != "log_history"} for k, v in result.records.items()},
    }
    path = out / MANIFEST_NAME
    path.write_text(json.dumps(manifest, indent=2, default=str), encoding="utf-8")
    result.manifest = str(path)
    return result


__all__ = ["FluentAlignmentResult", "check_recipe_sft_dataset", "run_fluent_alignment"]
