"""Fluent alignment case study -- a SIMULATION at small scale (arXiv 2512.08777's mechanism, not its setting).

    for arm in fluent sft_translated multilingual; do
        OMP_NUM_THREADS=1 nice -n 10 python examples/fluent_alignment_case_study.py --arm $arm &
    done; wait
    python examples/fluent_alignment_case_study.py --merge      # or `--arm all` for one process

(The defaults are sized for a 2-core machine shared by a dozen jobs: 8 SFT examples, 3 on-policy steps, 16 held-out
prompts, 24-token outputs, hence the high learning rates (LoRA, 1e-3 SFT / 1e-4 DPO, fixed before the run). Raise
them where compute allows; every number is a flag. Each arm runs in its own process; the merge step adds the
untouched base model's outputs and the statistics.)

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


ARMS = ("fluent", "sft_translated", "multilingual")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sft-examples", type=int, default=8)
    parser.add_argument("--sft-batch", type=int, default=2)
    parser.add_argument("--on-policy-prompts", type=int, default=16)
    parser.add_argument("--on-policy-steps", type=int, default=3)
    parser.add_argument("--on-policy-batch", type=int, default=2)
    parser.add_argument("--eval-prompts", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--sft-lr", type=float, default=1e-3)
    parser.add_argument("--dpo-lr", type=float, default=1e-4)
    parser.add_argument("--beta", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stage-minutes", type=float, default=30.0, help="wall-clock budget of each training stage")
    parser.add_argument("--arm", choices=(*ARMS, "all"), default="all",
                        help="run one arm (train, generate, measure) -- arms can run in parallel processes -- or all")
    parser.add_argument("--merge", action="store_true", help="only merge the per-arm measures into the results JSON")
    parser.add_argument("--work-dir", default="/tmp/hfx_fluent_case_study")
    parser.add_argument("--out", default=str(RESULTS / "fluent_alignment_case_study.json"))
    parser.add_argument("--smoke", action="store_true", help="tiny random models instead of SmolLM2 (checks the script)")
    args = parser.parse_args(argv)
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    if args.merge:
        return merge(args, work)
    for arm in ARMS if args.arm == "all" else (args.arm,):
        run_arm(arm, args, work)
    if args.arm == "all":
        return merge(args, work)
    return 0


def load_models(args):
    if args.smoke:
        from hfx.testing import tiny_llama

        return lambda: tiny_llama()
    from hfx.models import load_default_model

    return load_default_model


def build_data(args):
    from datasets import Dataset

    from hfx.recipes.fluent import literal_translation, with_provenance

    gsm_train = load_jsonl(DATA / "gsm8k" / "train.jsonl")
    gsm_test = load_jsonl(DATA / "gsm8k" / "test.jsonl")
    rng = random.Random(args.seed)
    order = list(range(len(gsm_train)))
    rng.shuffle(order)
    n_sft, n_pol = args.sft_examples, args.on_policy_prompts
    sft_rows = [gsm_train[i] for i in order[:n_sft]]
    policy_rows = [gsm_train[i] for i in order[n_sft : n_sft + n_pol]]
    ngram_rows = [gsm_train[i] for i in order[n_sft + n_pol :]]
    # GSM8K test rows 0-7 were the dev probe of the judge (which fixed `tie_rule="margin"`): never evaluated on
    test_order = list(range(DEV_PROBE_ROWS, len(gsm_test)))
    rng.shuffle(test_order)
    eval_rows = [gsm_test[i] for i in test_order[: args.eval_prompts]]

    def sft_dataset(rows, translate: bool):
        q = [literal_translation(r["question"]) if translate else r["question"] for r in rows]
        a = [literal_translation(clean_solution(r["answer"])) if translate else clean_solution(r["answer"]) for r in rows]
        ds = Dataset.from_dict(
            {"prompt": [[{"role": "user", "content": x}] for x in q], "completion": [[{"role": "assistant", "content": y}] for y in a]}
        )
        return with_provenance(ds, "machine_translated" if translate else "native", language="en")

    half = n_sft // 2
    target_prompts = with_provenance(
        Dataset.from_dict({"prompt": [[{"role": "user", "content": r["question"]}] for r in policy_rows]}), "native", language="en"
    )
    return {
        "sft_rows": sft_rows, "ngram_rows": ngram_rows, "eval_rows": eval_rows,
        "eval_prompts": [r["question"] for r in eval_rows],
        "native_sft": sft_dataset(sft_rows, False), "translated_sft": sft_dataset(sft_rows, True),
        "mix_native": sft_dataset(sft_rows[:half], False), "mix_translated": sft_dataset(sft_rows[half:], True),
        "target_prompts": target_prompts,
    }


def make_judge(model, tok, args):
    from hfx.recipes.fluent import ConstitutionJudge

    return ConstitutionJudge(model, tok, language="English", tie_rule="margin", batch_size=4,
                             max_response_tokens=args.max_new_tokens)


def ngram_model(data):
    from hfx.recipes.fluent import NgramFluencyModel

    texts = [json.loads(line)["text"].replace("Text: ", "") for task in ("agnews", "amazon", "dbpedia", "yelp")
             for line in (DATA / "cl_benchmark" / f"{task}.train.jsonl").read_text().splitlines()[:NGRAM_CL_ROWS] if line.strip()]
    texts += [clean_solution(r["answer"]) for r in data["ngram_rows"][:NGRAM_GSM8K_ROWS]]
    texts += [r["question"] for r in data["ngram_rows"][:NGRAM_GSM8K_ROWS]]
    return NgramFluencyModel(texts, order=3)


def measure(name, outputs, data, judge_model, judge_tok, ngram, work):
    from hfx.recipes.fluent import completion_log_likelihood

    prompts = data["eval_prompts"]
    ll = completion_log_likelihood(judge_model, judge_tok, prompts, outputs, batch_size=4)
    ng = [ngram.per_token_logprob(o) for o in outputs]
    record = {"outputs": outputs, "base_ll": ll, "ngram": ng}
    (work / f"measures_{name}.json").write_text(json.dumps(record), encoding="utf-8")
    return record


def run_arm(arm, args, work):
    from hfx.recipes.fluent import FluentAlignmentConfig, run_fluent_alignment

    load = load_models(args)
    data = build_data(args)
    prompts = data["eval_prompts"]
    judge_model, judge_tok = load()
    judge = make_judge(judge_model, judge_tok, args)
    common = dict(
        target_language="en", target_language_name="English", sft_learning_rate=args.sft_lr, sft_batch_size=args.sft_batch,
        sft_max_length=160, on_policy_steps=args.on_policy_steps, on_policy_learning_rate=args.dpo_lr,
        on_policy_batch_size=args.on_policy_batch, beta=args.beta, max_new_tokens=args.max_new_tokens, temperature=0.9,
        use_lora=True, lora_r=8, lora_alpha=16, seed=args.seed, logging_steps=1, resume=True,
        max_minutes_per_stage=args.stage_minutes,
    )
    inputs = {
        "fluent": dict(english_sft_dataset=data["native_sft"], target_prompts=data["target_prompts"], judge=judge),
        "sft_translated": dict(translated_sft_dataset=data["translated_sft"]),
        "multilingual": dict(english_sft_dataset=data["mix_native"], translated_sft_dataset=data["mix_translated"]),
    }[arm]
    model, tok = load()
    t0 = time.monotonic()
    print(f"arm {arm}: training", flush=True)
    result = run_fluent_alignment(FluentAlignmentConfig(output_dir=str(work / arm), arm=arm, **common), model=model,
                                  tokenizer=tok, **inputs)
    info = {"stages": {k: {kk: vv for kk, vv in v.items() if kk != "log_history"} for k, v in result.records.items()},
            "train_seconds": time.monotonic() - t0}
    if arm == "fluent":
        info["online_dpo_log"] = [h for h in result.records["online_dpo"]["log_history"] if "rewards/margins" in h]
    (work / f"train_{arm}.json").write_text(json.dumps(info, default=str), encoding="utf-8")
    print(f"arm {arm}: generating", flush=True)
    outputs = generate(result.model, result.tokenizer, prompts, args.max_new_tokens)
    del result, model
    ngram = ngram_model(data)
    if arm == "fluent":
        from transformers import AutoModelForCausalLM

        sft_model = AutoModelForCausalLM.from_pretrained(work / "fluent" / "stage1_sft")
        sft_outputs = generate(sft_model, judge_tok, prompts, args.max_new_tokens)
        del sft_model
        (work / "outputs_sft_only.json").write_text(json.dumps(sft_outputs), encoding="utf-8")
        measure("sft_only", sft_outputs, data, judge_model, judge_tok, ngram, work)
    print(f"arm {arm}: measuring", flush=True)
    record = measure(arm, outputs, data, judge_model, judge_tok, ngram, work)
    sft_file = work / "outputs_sft_only.json"
    while not sft_file.is_file():  # the fluent arm writes the SFT-only outputs
        time.sleep(20)
    sft_outputs = json.loads(sft_file.read_text(encoding="utf-8"))
    print(f"arm {arm}: judging vs sft_only", flush=True)
    verdicts = judge.judge(prompts, list(zip(outputs, sft_outputs)))
    record["judge_vs_sft_only"] = [0.5 if v == -1 else (1.0 if v == 0 else 0.0) for v in verdicts]
    record["judge_forward_prompts"] = judge.stats.forward_prompts
    (work / f"measures_{arm}.json").write_text(json.dumps(record), encoding="utf-8")
    print(f"arm {arm}: done", flush=True)


def merge(args, work) -> int:
    from hfx.recipes.fluent import completion_log_likelihood, literal_translation
    from hfx.utils.stats import bootstrap_ci, paired_difference

    data = build_data(args)
    prompts = data["eval_prompts"]
    load = load_models(args)
    base_model, base_tok = load()
    ngram = ngram_model(data)
    if not (work / "measures_base.json").is_file():
        measure("base", generate(base_model, base_tok, prompts, args.max_new_tokens), data, base_model, base_tok, ngram, work)
    m = {a: json.loads((work / f"measures_{a}.json").read_text()) for a in ("base", "sft_only", *ARMS)
         if (work / f"measures_{a}.json").is_file()}
    summary = {
        "simulation": True,
        "what": "fluent alignment case study (simulation: English as target, translationese from a deterministic transform)",
        "paper": "arXiv:2512.08777",
        "primary_test": PRIMARY,
        "command": ("for arm in fluent sft_translated multilingual; do OMP_NUM_THREADS=1 nice -n 10 python "
                    "examples/fluent_alignment_case_study.py --arm $arm & done; wait; python "
                    "examples/fluent_alignment_case_study.py --merge"),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "settings": {k: v for k, v in vars(args).items() if k not in ("merge", "arm")},
        "data": {
            "sft_examples": len(data["sft_rows"]), "eval_prompts": len(prompts),
            "ngram_training": f"{NGRAM_CL_ROWS} CL-benchmark train texts per task + {NGRAM_GSM8K_ROWS} GSM8K train questions and solutions not used for SFT / prompts",
            "translationese_example": {"native": clean_solution(data["sft_rows"][0]["answer"]),
                                       "translated": literal_translation(clean_solution(data["sft_rows"][0]["answer"]))},
        },
        "training": {a: json.loads((work / f"train_{a}.json").read_text()) for a in ARMS if (work / f"train_{a}.json").is_file()},
        "ngram_lm": {"order": 3, "smoothing": ngram.smoothing, "training_sentences": ngram.num_training_sentences,
                     "training_tokens": ngram.num_training_tokens},
    }
    # is each measure sensitive to the transform? held-out native reference solutions vs their translationese
    ref = [clean_solution(r["answer"]) for r in data["eval_rows"]]
    ref_tr = [literal_translation(x) for x in ref]
    ll_ref = completion_log_likelihood(base_model, base_tok, prompts, ref, batch_size=4)
    ll_tr = completion_log_likelihood(base_model, base_tok, prompts, ref_tr, batch_size=4)
    summary["measure_validation"] = {
        "what": "native reference solutions minus their translationese, per measure (paired over the held-out prompts)",
        "base_ll": paired_difference([x["mean_logprob"] for x in ll_ref], [x["mean_logprob"] for x in ll_tr], test="sign_flip"),
        "ngram": paired_difference([ngram.per_token_logprob(x)["mean_logprob"] for x in ref],
                                   [ngram.per_token_logprob(x)["mean_logprob"] for x in ref_tr], test="sign_flip"),
    }

    def valid(a):
        return [i for i in range(len(prompts)) if m[a]["base_ll"][i]["mean_logprob"] is not None
                and m[a]["ngram"][i]["mean_logprob"] is not None]

    results = {}
    for a in m:  # noqa: PLC0206 - valid(a) reads m too
        idx = valid(a)
        b = [m[a]["base_ll"][i]["mean_logprob"] for i in idx]
        n = [m[a]["ngram"][i]["mean_logprob"] for i in idx]
        results[a] = {
            "n": len(idx), "base_ll_mean": sum(b) / len(b), "base_ll_ci": bootstrap_ci(b),
            "ngram_mean": sum(n) / len(n), "ngram_ci": bootstrap_ci(n),
            "mean_output_words": sum(m[a]["ngram"][i]["num_tokens"] for i in idx) / len(idx),
        }
        if "sft_only" in m:
            results[a]["outputs_identical_to_sft_only"] = sum(x == y for x, y in zip(m[a]["outputs"], m["sft_only"]["outputs"]))
        if "judge_vs_sft_only" in m[a]:
            v = m[a]["judge_vs_sft_only"]
            results[a].update({"win_rate_vs_sft_only": sum(v) / len(v), "win_rate_ci": bootstrap_ci(v),
                               "wins": sum(x == 1.0 for x in v), "ties": sum(x == 0.5 for x in v),
                               "losses": sum(x == 0.0 for x in v)})
    summary["results"] = results
    comparisons = {}
    for a, b in (("fluent", "sft_translated"), ("fluent", "multilingual"), ("fluent", "sft_only"),
                 ("sft_only", "sft_translated"), ("sft_only", "multilingual")):
        if a in m and b in m:
            idx = sorted(set(valid(a)) & set(valid(b)))
            comparisons[f"{a} - {b}"] = {
                key: paired_difference([m[a][key][i]["mean_logprob"] for i in idx], [m[b][key][i]["mean_logprob"] for i in idx],
                                       test="sign_flip")
                for key in ("base_ll", "ngram")
            }
    summary["comparisons"] = comparisons
    if "fluent - sft_translated" in comparisons:
        p = comparisons["fluent - sft_translated"]["base_ll"]
        summary["primary_result"] = {**p, "significant": p["p_value"] < 0.05, "direction_as_predicted": p["diff"] > 0}
    summary["complete"] = all(a in m for a in ("sft_only", *ARMS)) and all("judge_vs_sft_only" in m[a] for a in ARMS)
    # the fields every benchmarks/results JSON carries: the primary comparison's difference (None until it has run)
    summary["metric"] = "primary test: fluent - sft_translated, base-model mean per-token log-likelihood (nats)"
    summary["value"] = summary["primary_result"]["diff"] if "primary_result" in summary else None
    summary["goal"] = "> 0 with sign-flip p < 0.05 (the paper's claim: on-policy keeps fluency)"
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    with out_path.with_name(out_path.stem + "_items.jsonl").open("w", encoding="utf-8") as f:
        for i, prompt in enumerate(prompts):
            for a in m:
                f.write(json.dumps({
                    "prompt_index": i, "prompt": prompt, "arm": a, "output": m[a]["outputs"][i],
                    "base_ll": m[a]["base_ll"][i]["mean_logprob"], "base_ll_tokens": m[a]["base_ll"][i]["num_tokens"],
                    "ngram_ll": m[a]["ngram"][i]["mean_logprob"], "ngram_tokens": m[a]["ngram"][i]["num_tokens"],
                    "judge_vs_sft_only": m[a].get("judge_vs_sft_only", [None] * len(prompts))[i],
                }) + "\n")
    print(json.dumps({"primary": summary.get("primary_result"), "results": results}, indent=2, default=str), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
