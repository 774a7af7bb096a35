"""Fluent alignment case study -- a SIMULATION at small scale (arXiv 2512.08777's mechanism, not its setting).

    OMP_NUM_THREADS=1 nice -n 10 python examples/fluent_alignment_case_study.py --max-minutes 80

(The defaults are sized for a 2-core machine shared by several jobs: 16 SFT examples, 4 on-policy steps, 20 held-out
prompts, 24-token outputs. Raise them where compute allows; every number is a flag.)

The paper aligns NorMistral-11B in Norwegian and asks native speakers about fluency. Neither exists here, so:

* **base model and "native" fluency reference**: the embedded SmolLM2-135M-Instruct (``hfx.models.load_default_model``);
* **target language**: English; **native text**: GSM8K questions and their human-written solutions
  (``../shared/data/gsm8k``; calculator annotations ``<<...>>`` removed, ``#### N`` -> ``The answer is N.``);
* **translationese** ("machine-translated" data): :func:`hfx.recipes.fluent.literal_translation`, a documented,
  deterministic literal-translation transform of the native text (calques, verb-second order, negation placement,
  dropped articles -- [reconstruction]), applied to questions and solutions;
* **judge**: a second, frozen copy of the same SmolLM2 with hfx's default constitution, pairwise, both orders,
  ``tie_rule="margin"`` with margin 0 (the sign of the debiased log-odds). Fixed on a dev probe (GSM8K test rows 0-7,
  never evaluated): this 135M judge's position bias is so strong that the two orders never agreed (``"inconsistent"``
  made all 24 probe pairs ties), while the debiased log-odds preferred the reference solution over "I don't know." on
  8 of 8 probe prompts.

**Arms** (same base, same seed, LoRA r=8 on all linear layers, merged after each stage; compute-matched SFT: every
SFT arm sees ``--sft-examples`` examples for one epoch):

* ``fluent``          -- the recipe: SFT on native English (``sft_only`` is this stage alone), then on-policy online
  DPO on native prompts judged by the constitution judge (``FluentOnlineDPOTrainer``; the provenance guard passes);
* ``sft_translated``  -- SFT on the translationese version of the same examples (the paper's MT baseline);
* ``multilingual``    -- SFT on half native, half translationese examples (the multilingual-mix baseline);
* ``sft_only``        -- the reference for helpfulness; ``base`` -- the untouched base model (fluency ceiling).

**Measures** on ``--eval-prompts`` held-out GSM8K *test* questions (native; greedy decoding, ``--max-new-tokens``):

* fluency (1): the base model's mean per-token log-likelihood of each output given its prompt (nats/token);
* fluency (2), independent of any neural model: the mean per-word log-probability under an interpolated Witten-Bell
  word trigram LM (``nltk.lm``) trained on native text only -- 250 CL-benchmark news/review/wiki texts per task plus
  1,000 GSM8K train questions and solutions *not* used for SFT or as prompts (``NgramFluencyModel``). It is count-based and never sees model output, and the
  transform's disfluencies (dropped articles, inverted order, calques) are unseen n-grams to it;
* helpfulness: the judge's verdict of each arm's output vs the ``sft_only`` output on the same prompt (1 win,
  0.5 tie, 0 loss; both orders, tie when they disagree); the win rate with a bootstrap interval over prompts.

**Primary test, fixed before the run** (recorded in the JSON): the paired difference over held-out prompts of
fluency (1) between ``fluent`` and ``sft_translated``, two-sided sign-flip test (``hfx.utils.stats``), alpha 0.05.
The paper's claim predicts ``fluent - sft_translated > 0``. Everything else is secondary and reported with 95 %
bootstrap intervals. Hyper-parameters were fixed before the run from common LoRA defaults (not tuned; no dev split
was used for a search, for lack of CPU time); the held-out prompts are disjoint from every training row.

Writes ``benchmarks/results/fluent_alignment_case_study.json`` (summary, rewritten after each arm) and
``benchmarks/results/fluent_alignment_case_study_items.jsonl`` (per prompt and arm: output, both fluency scores,
judge verdict). Stages are saved under ``--work-dir`` and resumed on a rerun.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
from datetime import datetime, timezone
from pathlib import Path


os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch


ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
if not DATA.is_dir():
    DATA = Path("/work/shared/data")
RESULTS = ROOT / "benchmarks" / "results"
DEV_PROBE_ROWS = 8
NGRAM_CL_ROWS = 250  # per CL-benchmark task
NGRAM_GSM8K_ROWS = 1000
PRIMARY = (
    "paired difference over held-out prompts of the base model's mean per-token log-likelihood of the outputs, "
    "arm `fluent` minus arm `sft_translated`; two-sided sign-flip test, alpha 0.05; predicted > 0"
)


def clean_solution(answer: str) -> str:
    body, _, final = answer.partition("####")
    body = re.sub(r"<<[^>]*>>", "", body).strip()
    return f"{body}\nThe answer is {final.strip()}."


def load_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@torch.no_grad()
def generate(model, tokenizer, prompts: list[str], max_new_tokens: int, batch_size: int = 10) -> list[str]:
    model.eval()
    tokenizer.padding_side = "left"
    outs = []
    for start in range(0, len(prompts), batch_size):
        texts = [
            tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
            for p in prompts[start : start + batch_size]
        ]
        enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        gen = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id)
        outs += tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    return [o.strip() for o in outs]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sft-examples", type=int, default=16)
    parser.add_argument("--on-policy-prompts", type=int, default=16)
    parser.add_argument("--on-policy-steps", type=int, default=4)
    parser.add_argument("--on-policy-batch", type=int, default=2)
    parser.add_argument("--eval-prompts", type=int, default=20)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--sft-lr", type=float, default=3e-4)
    parser.add_argument("--dpo-lr", type=float, default=5e-5)
    parser.add_argument("--beta", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-minutes", type=float, default=80.0, help="wall-clock budget of the whole run")
    parser.add_argument("--stage-minutes", type=float, default=15.0, help="wall-clock budget of each training stage")
    parser.add_argument("--work-dir", default="/tmp/hfx_fluent_case_study")
    parser.add_argument("--out", default=str(RESULTS / "fluent_alignment_case_study.json"))
    parser.add_argument("--smoke", action="store_true", help="tiny random models instead of SmolLM2 (checks the script)")
    args = parser.parse_args(argv)
    t_start = time.monotonic()
    deadline = t_start + 60 * args.max_minutes

    from datasets import Dataset

    from hfx.models import load_default_model as _load_default
    from hfx.recipes.fluent import (
        ConstitutionJudge,
        FluentAlignmentConfig,
        NgramFluencyModel,
        completion_log_likelihood,
        literal_translation,
        run_fluent_alignment,
        with_provenance,
    )
    from hfx.utils.stats import bootstrap_ci, paired_difference

    if args.smoke:
        from hfx.testing import tiny_llama

        def load_default_model():
            model, tok = tiny_llama()
            tok.chat_template = tok.chat_template  # the tiny template has no system role handling: fine for a smoke run
            return model, tok
    else:
        load_default_model = _load_default

    gsm_train = load_jsonl(DATA / "gsm8k" / "train.jsonl")
    gsm_test = load_jsonl(DATA / "gsm8k" / "test.jsonl")
    rng = random.Random(args.seed)
    order = list(range(len(gsm_train)))
    rng.shuffle(order)
    sft_rows = [gsm_train[i] for i in order[: args.sft_examples]]
    policy_rows = [gsm_train[i] for i in order[args.sft_examples : args.sft_examples + args.on_policy_prompts]]
    ngram_rows = [gsm_train[i] for i in order[args.sft_examples + args.on_policy_prompts :]]
    # GSM8K test rows 0-7 were the dev probe of the judge (which fixed `tie_rule="margin"`): never evaluated on
    test_order = list(range(DEV_PROBE_ROWS, len(gsm_test)))
    rng.shuffle(test_order)
    eval_rows = [gsm_test[i] for i in test_order[: args.eval_prompts]]
    eval_prompts = [r["question"] for r in eval_rows]

    def sft_dataset(rows, translate: bool):
        q = [literal_translation(r["question"]) if translate else r["question"] for r in rows]
        a = [literal_translation(clean_solution(r["answer"])) if translate else clean_solution(r["answer"]) for r in rows]
        ds = Dataset.from_dict(
            {"prompt": [[{"role": "user", "content": x}] for x in q], "completion": [[{"role": "assistant", "content": y}] for y in a]}
        )
        return with_provenance(ds, "machine_translated" if translate else "native", language="en")

    native_sft = sft_dataset(sft_rows, False)
    translated_sft = sft_dataset(sft_rows, True)
    half = args.sft_examples // 2
    mix_native, mix_translated = sft_dataset(sft_rows[:half], False), sft_dataset(sft_rows[half:], True)
    target_prompts = with_provenance(
        Dataset.from_dict({"prompt": [[{"role": "user", "content": r["question"]}] for r in policy_rows]}), "native", language="en"
    )

    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    summary = {
        "simulation": True,
        "what": "fluent alignment case study (simulation: English as target, translationese from a deterministic transform)",
        "paper": "arXiv:2512.08777",
        "primary_test": PRIMARY,
        "command": "OMP_NUM_THREADS=1 nice -n 10 python examples/fluent_alignment_case_study.py " + " ".join(argv or sys.argv[1:]),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "settings": vars(args),
        "data": {
            "sft_examples": len(sft_rows),
            "on_policy_prompts": len(policy_rows),
            "eval_prompts": len(eval_rows),
            "ngram_training_rows": "CL-benchmark train texts (agnews, amazon, dbpedia, yelp) + GSM8K train solutions not used for SFT / prompts",
            "translationese_example": {"native": clean_solution(sft_rows[0]["answer"]), "translated": literal_translation(clean_solution(sft_rows[0]["answer"]))},
        },
        "arms": {},
        "complete": False,
    }
    out_path = Path(args.out)
    items_path = out_path.with_name(out_path.stem + "_items.jsonl")

    def write_summary():
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")

    print("loading the judge (frozen SmolLM2 copy)", flush=True)
    judge_model, judge_tok = load_default_model()
    judge = ConstitutionJudge(
        judge_model, judge_tok, language="English", tie_rule="margin", batch_size=4, max_response_tokens=args.max_new_tokens
    )
    minutes_left = lambda: (deadline - time.monotonic()) / 60  # noqa: E731

    common = dict(
        target_language="en",
        target_language_name="English",
        sft_learning_rate=args.sft_lr,
        sft_batch_size=4,
        sft_max_length=160,
        on_policy_steps=args.on_policy_steps,
        on_policy_learning_rate=args.dpo_lr,
        on_policy_batch_size=args.on_policy_batch,
        beta=args.beta,
        max_new_tokens=args.max_new_tokens,
        temperature=0.9,
        use_lora=True,
        lora_r=8,
        lora_alpha=16,
        seed=args.seed,
        logging_steps=1,
        resume=True,
    )
    outputs_file = work / "outputs.json"
    outputs: dict[str, list[str]] = json.loads(outputs_file.read_text()) if outputs_file.is_file() else {}
    plan = [
        ("fluent", dict(english_sft_dataset=native_sft, target_prompts=target_prompts, judge=judge)),
        ("sft_translated", dict(translated_sft_dataset=translated_sft)),
        ("multilingual", dict(english_sft_dataset=mix_native, translated_sft_dataset=mix_translated)),
    ]
    for arm, data in plan:
        if arm in outputs and (arm != "fluent" or "sft_only" in outputs):
            continue
        if minutes_left() < 3:
            print(f"budget spent before arm {arm}", flush=True)
            break
        model, tok = load_default_model()
        config = FluentAlignmentConfig(
            output_dir=str(work / arm), arm=arm, max_minutes_per_stage=args.stage_minutes, **common
        )
        t0 = time.monotonic()
        print(f"arm {arm}: stages {config.stages}", flush=True)
        result = run_fluent_alignment(config, model=model, tokenizer=tok, **data)
        summary["arms"][arm] = {
            "stages": {k: {kk: vv for kk, vv in v.items() if kk != "log_history"} for k, v in result.records.items()},
            "train_seconds": time.monotonic() - t0,
        }
        if arm == "fluent":
            sft_model, sft_tok = load_default_model()
            from transformers import AutoModelForCausalLM

            sft_model = AutoModelForCausalLM.from_pretrained(result.stages["sft"])
            outputs["sft_only"] = generate(sft_model, sft_tok, eval_prompts, args.max_new_tokens)
            del sft_model
            dpo_logs = [h for h in result.records["online_dpo"]["log_history"] if "rewards/margins" in h]
            summary["arms"]["fluent"]["online_dpo_log"] = dpo_logs
        outputs[arm] = generate(result.model, result.tokenizer, eval_prompts, args.max_new_tokens)
        outputs_file.write_text(json.dumps(outputs), encoding="utf-8")
        write_summary()
        del result, model
    if "base" not in outputs and minutes_left() > 2:
        outputs["base"] = generate(judge_model, judge_tok, eval_prompts, args.max_new_tokens)
        outputs_file.write_text(json.dumps(outputs), encoding="utf-8")

    # ---------------------------------------------------------------- measures
    print("fluency (1): base-model log-likelihood", flush=True)
    arms = [a for a in ("base", "sft_only", "fluent", "sft_translated", "multilingual") if a in outputs]
    base_ll = {a: completion_log_likelihood(judge_model, judge_tok, eval_prompts, outputs[a], batch_size=8) for a in arms}
    print("fluency (2): native Witten-Bell trigram LM", flush=True)
    native_texts = [json.loads(line)["text"].replace("Text: ", "") for task in ("agnews", "amazon", "dbpedia", "yelp")
                    for line in (DATA / "cl_benchmark" / f"{task}.train.jsonl").read_text().splitlines()[:NGRAM_CL_ROWS] if line.strip()]
    native_texts += [clean_solution(r["answer"]) for r in ngram_rows[:NGRAM_GSM8K_ROWS]]
    native_texts += [r["question"] for r in ngram_rows[:NGRAM_GSM8K_ROWS]]
    ngram = NgramFluencyModel(native_texts, order=3)
    ng = {a: [ngram.per_token_logprob(o) for o in outputs[a]] for a in arms}
    summary["ngram_lm"] = {"order": 3, "smoothing": ngram.smoothing, "training_sentences": ngram.num_training_sentences, "training_tokens": ngram.num_training_tokens}
    # sanity of both measures on the transform itself (held-out native solutions vs their translationese)
    ref = [clean_solution(r["answer"]) for r in eval_rows]
    ref_tr = [literal_translation(x) for x in ref]
    ll_ref = completion_log_likelihood(judge_model, judge_tok, eval_prompts, ref, batch_size=8)
    ll_ref_tr = completion_log_likelihood(judge_model, judge_tok, eval_prompts, ref_tr, batch_size=8)
    ng_ref = [ngram.per_token_logprob(x)["mean_logprob"] for x in ref]
    ng_ref_tr = [ngram.per_token_logprob(x)["mean_logprob"] for x in ref_tr]
    summary["measure_validation"] = {
        "what": "each measure on the held-out native reference solutions vs their translationese (is the measure sensitive to the transform?)",
        "base_ll": paired_difference([x["mean_logprob"] for x in ll_ref], [x["mean_logprob"] for x in ll_ref_tr], test="sign_flip"),
        "ngram": paired_difference(ng_ref, ng_ref_tr, test="sign_flip"),
    }

    verdicts = {}
    if "sft_only" in outputs:
        for a in ("fluent", "sft_translated", "multilingual"):
            if a in outputs and minutes_left() > 1:
                print(f"helpfulness: judge {a} vs sft_only", flush=True)
                v = judge.judge(eval_prompts, list(zip(outputs[a], outputs["sft_only"])))
                verdicts[a] = [0.5 if x == -1 else (1.0 if x == 0 else 0.0) for x in v]

    def valid(a):
        return [i for i in range(len(eval_prompts)) if base_ll[a][i]["mean_logprob"] is not None and ng[a][i]["mean_logprob"] is not None]

    results = {}
    for a in arms:
        idx = valid(a)
        b = [base_ll[a][i]["mean_logprob"] for i in idx]
        n = [ng[a][i]["mean_logprob"] for i in idx]
        results[a] = {
            "n": len(idx),
            "base_ll_mean": sum(b) / len(b),
            "base_ll_ci": bootstrap_ci(b),
            "ngram_mean": sum(n) / len(n),
            "ngram_ci": bootstrap_ci(n),
            "mean_words": sum(ng[a][i]["num_tokens"] for i in idx) / len(idx),
            "identical_to_sft_only": sum(outputs[a][i] == outputs.get("sft_only", [None] * len(eval_prompts))[i] for i in range(len(eval_prompts))),
        }
        if a in verdicts:
            results[a]["win_rate_vs_sft_only"] = sum(verdicts[a]) / len(verdicts[a])
            results[a]["win_rate_ci"] = bootstrap_ci(verdicts[a])
            results[a]["ties"] = sum(x == 0.5 for x in verdicts[a])
    summary["results"] = results

    comparisons = {}
    for a, b in (("fluent", "sft_translated"), ("fluent", "multilingual"), ("fluent", "sft_only"), ("sft_only", "sft_translated")):
        if a in outputs and b in outputs:
            idx = sorted(set(valid(a)) & set(valid(b)))
            comparisons[f"{a}-{b}"] = {
                "base_ll": paired_difference([base_ll[a][i]["mean_logprob"] for i in idx], [base_ll[b][i]["mean_logprob"] for i in idx], test="sign_flip"),
                "ngram": paired_difference([ng[a][i]["mean_logprob"] for i in idx], [ng[b][i]["mean_logprob"] for i in idx], test="sign_flip"),
            }
    summary["comparisons"] = comparisons
    if "fluent-sft_translated" in comparisons:
        p = comparisons["fluent-sft_translated"]["base_ll"]
        summary["primary_result"] = {**p, "significant": p["p_value"] < 0.05, "direction_as_predicted": p["diff"] > 0}
    with items_path.open("w", encoding="utf-8") as f:
        for i, prompt in enumerate(eval_prompts):
            for a in arms:
                f.write(json.dumps({
                    "prompt_index": i, "prompt": prompt, "arm": a, "output": outputs[a][i],
                    "base_ll": base_ll[a][i]["mean_logprob"], "base_ll_tokens": base_ll[a][i]["num_tokens"],
                    "ngram_ll": ng[a][i]["mean_logprob"], "ngram_tokens": ng[a][i]["num_tokens"],
                    "judge_vs_sft_only": verdicts.get(a, [None] * len(eval_prompts))[i],
                }) + "\n")
    summary["judge_stats"] = {"forward_prompts": judge.stats.forward_prompts, "comparisons": judge.stats.comparisons, "ties": judge.stats.ties}
    summary["complete"] = all(a in outputs for a in ("sft_only", "fluent", "sft_translated", "multilingual")) and len(verdicts) == 3
    summary["wall_minutes"] = (time.monotonic() - t_start) / 60
    write_summary()
    print(json.dumps({"primary": summary.get("primary_result"), "results": results}, indent=2, default=str), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
