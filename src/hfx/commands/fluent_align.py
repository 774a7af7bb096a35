"""`hfx fluent-align --sft-data SFT.jsonl --prompts PROMPTS.jsonl --out DIR`: the fluent-alignment recipe (or a baseline).

Data files are JSON lines. SFT rows: ``prompt`` and ``completion`` (strings or chat messages) or ``messages``;
prompt rows: ``prompt``. Each row may carry ``provenance`` (``native``, ``machine_translated``, ``judge_written``,
``model_generated``) and ``language``; rows without a ``provenance`` get the one of ``--sft-provenance`` /
``--prompt-provenance`` / ``--translated-provenance`` (the on-policy guard then checks them).
"""

from __future__ import annotations

import json
from pathlib import Path

from hfx.commands import _types


HELP = (
    "Fluent alignment (arXiv 2512.08777): short English SFT, then on-policy online DPO / GRPO in the target language "
    "on the policy's own samples ranked by a constitution judge; or a baseline (SFT on translated data, multilingual "
    "mix). Saves each stage under --out."
)

ARMS = ("fluent", "sft_translated", "multilingual", "sft_only")
PROVENANCES = ("native", "machine_translated", "judge_written", "model_generated")


def add_arguments(parser) -> None:
    parser.add_argument("--arm", default="fluent", choices=ARMS, help="the recipe (fluent, default) or a baseline")
    parser.add_argument("--out", required=True, help="output folder (stage folders + fluent_alignment.json)")
    parser.add_argument("--model", default=None, help="base model folder / cached Hub id; default: embedded SmolLM2")
    parser.add_argument("--judge", default=None, help="judge chat model folder / cached Hub id; default: --model")
    parser.add_argument("--sft-data", default=None, help="JSONL of English SFT rows (fluent, sft_only, multilingual)")
    parser.add_argument("--translated-data", default=None, help="JSONL of translated SFT rows (the baselines)")
    parser.add_argument("--prompts", default=None, help="JSONL of native target-language prompts (fluent)")
    parser.add_argument("--sft-provenance", default="native", choices=PROVENANCES)
    parser.add_argument("--translated-provenance", default="machine_translated", choices=PROVENANCES)
    parser.add_argument("--prompt-provenance", default="native", choices=PROVENANCES)
    parser.add_argument("--target-language", default="nb", help="target language code (default nb)")
    parser.add_argument("--target-language-name", default="Norwegian Bokmål", help="its name, for the judge")
    parser.add_argument("--optimizer", default="online_dpo", choices=("online_dpo", "grpo"))
    parser.add_argument("--sft-epochs", type=_types.int_range(0, 1000), default=1, help="SFT epochs (default 1)")
    parser.add_argument("--on-policy-steps", type=_types.int_range(1, 10_000_000), default=100)
    parser.add_argument("--batch-size", type=_types.int_range(1, 65_536), default=8, help="SFT and on-policy batch")
    parser.add_argument("--sft-lr", type=_types.positive_float, default=2e-5)
    parser.add_argument("--on-policy-lr", type=_types.positive_float, default=5e-7)
    parser.add_argument("--beta", type=_types.non_negative_float, default=0.1)
    parser.add_argument("--max-new-tokens", type=_types.int_range(1, 1_048_576), default=256)
    parser.add_argument("--num-generations", type=_types.int_range(2, 65_536), default=4, help="GRPO group size")
    parser.add_argument("--tie-rule", default="inconsistent", choices=("inconsistent", "margin"))
    parser.add_argument("--lora", action="store_true", help="train LoRA adapters (merged after each stage)")
    parser.add_argument("--max-minutes", type=_types.positive_float, default=None, help="budget per training stage")
    parser.add_argument("--seed", type=_types.seed, default=0)
    parser.add_argument("--overwrite", action="store_true", help="allow writing into a non-empty --out folder")


def _read_jsonl(path: str, flag: str, default_provenance: str, required: tuple[str, ...]):
    from datasets import Dataset

    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"`{flag}` {path!r} is not a file")
    rows = []
    for n, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"`{flag}` line {n} is not JSON: {err.msg}") from None
        if not isinstance(row, dict):
            raise TypeError(f"`{flag}` line {n} has to be a JSON object, but is {type(row).__name__}")
        rows.append(row)
    if not rows:
        raise ValueError(f"`{flag}` {path!r} holds no rows")
    for n, row in enumerate(rows, 1):
        if not any(k in row for k in required):
            raise ValueError(f"`{flag}` row {n} needs one of the fields {list(required)}, but has {sorted(row)}")
        row.setdefault("provenance", default_provenance)
        if row["provenance"] not in PROVENANCES:
            raise ValueError(f"`{flag}` row {n} has provenance {row['provenance']!r}, not one of {list(PROVENANCES)}")
    keys = sorted({k for row in rows for k in row})
    missing = [k for k in keys if any(k not in row for row in rows)]
    if missing:
        raise ValueError(f"`{flag}` rows have to share their fields, but {missing} are missing from some rows")
    return Dataset.from_list(rows)


def run(args) -> int:
    from hfx._artifacts import prepare_output_dir, resolve_model

    # every input and the output are checked before torch, trl or a model is loaded
    prepare_output_dir(args.out, overwrite=args.overwrite, arg="--out", create=False)
    needs = {
        "fluent": ("--sft-data", "--prompts") if args.sft_epochs > 0 else ("--prompts",),
        "sft_only": ("--sft-data",),
        "sft_translated": ("--translated-data",),
        "multilingual": ("--sft-data", "--translated-data"),
    }[args.arm]
    values = {"--sft-data": args.sft_data, "--translated-data": args.translated_data, "--prompts": args.prompts}
    for flag in needs:
        if values[flag] is None:
            raise ValueError(f"`--arm {args.arm}` needs `{flag}`")
    for flag, value in values.items():
        if value is not None and flag not in needs:
            raise ValueError(f"`{flag}` is not used by `--arm {args.arm}` (it needs {list(needs)})")
    sft = _read_jsonl(args.sft_data, "--sft-data", args.sft_provenance, ("completion", "messages")) if args.sft_data else None
    translated = (
        _read_jsonl(args.translated_data, "--translated-data", args.translated_provenance, ("completion", "messages"))
        if args.translated_data
        else None
    )
    prompts = _read_jsonl(args.prompts, "--prompts", args.prompt_provenance, ("prompt",)) if args.prompts else None
    allowed = ("transformers:",)
    model_path = resolve_model(args.model, arg="--model", allowed=allowed, what="a causal LM") if args.model else None
    judge_path = resolve_model(args.judge, arg="--judge", allowed=allowed, what="a causal LM") if args.judge else None

    from hfx.recipes.fluent import ConstitutionJudge, FluentAlignmentConfig, ProvenanceGuard, run_fluent_alignment

    config = FluentAlignmentConfig(
        output_dir=args.out,
        arm=args.arm,
        base_model=model_path,
        target_language=args.target_language,
        target_language_name=args.target_language_name,
        sft_epochs=args.sft_epochs,
        sft_learning_rate=args.sft_lr,
        sft_batch_size=args.batch_size,
        on_policy_optimizer=args.optimizer,
        on_policy_steps=args.on_policy_steps,
        on_policy_learning_rate=args.on_policy_lr,
        on_policy_batch_size=args.batch_size,
        beta=args.beta,
        max_new_tokens=args.max_new_tokens,
        num_generations=args.num_generations,
        use_lora=args.lora,
        max_minutes_per_stage=args.max_minutes,
        seed=args.seed,
        resume=False,
    )
    if prompts is not None:  # the guard, before any model loads
        ProvenanceGuard(target_language=args.target_language).check(prompts, arg="--prompts")

    if model_path is None:
        from hfx.models import load_default_model

        model, tokenizer = load_default_model()
    else:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model, tokenizer = AutoModelForCausalLM.from_pretrained(model_path), AutoTokenizer.from_pretrained(model_path)
    judge = None
    if args.arm == "fluent":
        if judge_path is None and model_path is None:
            from hfx.models import load_default_model

            judge_model, judge_tokenizer = load_default_model()
        else:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            source = judge_path or model_path
            judge_model, judge_tokenizer = AutoModelForCausalLM.from_pretrained(source), AutoTokenizer.from_pretrained(source)
        judge = ConstitutionJudge(judge_model.eval(), judge_tokenizer, language=args.target_language_name,
                                  tie_rule=args.tie_rule)
    prepare_output_dir(args.out, overwrite=args.overwrite, arg="--out")
    result = run_fluent_alignment(
        config, english_sft_dataset=sft, translated_sft_dataset=translated, target_prompts=prompts, judge=judge,
        model=model, tokenizer=tokenizer,
    )
    for name, folder in result.stages.items():
        record = result.records[name]
        extra = f", judge prompts {record['judge_forward_prompts']}" if "judge_forward_prompts" in record else ""
        print(f"stage {name}: {record['global_step']} steps in {record['seconds']:.0f} s{extra} -> {folder}")
    print(f"wrote {result.manifest}")
    return 0
