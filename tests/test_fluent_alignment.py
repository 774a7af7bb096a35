"""Fluent alignment (arXiv 2512.08777): the constitution judge (both orders, tie rules, TRL adapters), the provenance
guard, online DPO with a mock judge, the SFT stage's epochs, parity of the Fluent trainers with TRL's, the runner's
baselines and resume, the translationese transform and the fluency measures.

Everything runs on the tiny random Llama of `hfx.testing`; judges whose verdicts a test needs to know are
`ConstitutionJudge` subclasses with hand-set label logits (the prompt rendering and all the arithmetic stay real).
"""

import copy
import math
import re

import pytest
import torch
from datasets import Dataset

from hfx.recipes.fluent import (
    ConstitutionJudge,
    FluentAlignmentConfig,
    FluentGRPOTrainer,
    FluentOnlineDPOTrainer,
    NgramFluencyModel,
    ProvenanceError,
    ProvenanceGuard,
    check_on_policy_dataset,
    completion_log_likelihood,
    literal_translation,
    run_fluent_alignment,
    with_provenance,
)
from hfx.testing import tiny_llama


PROMPTS = ["hello world", "two plus two ?", "a photo of a cat", "describe the image"]


@pytest.fixture(scope="module")
def tiny():
    return tiny_llama(seed=3)


class LengthJudge(ConstitutionJudge):
    """Label logits from the rendered judge prompt: logit(A) = bias + len(response A), logit(B) = len(response B)."""

    bias = 0.0

    def _label_logits(self, texts, label_ids):
        rows = []
        for text in texts:
            if "[Response A]" in text:
                a = re.search(r"\[Response A\]\n(.*?)\n\n\[Response B\]", text, re.DOTALL).group(1)
                b = re.search(r"\[Response B\]\n(.*?)\n\nWhich", text, re.DOTALL).group(1)
                rows.append([self.bias + len(a), float(len(b))])
            else:  # pointwise: a fixed distribution over the rating labels
                rows.append([0.0] * (len(label_ids) - 1) + [math.log(3.0)])
        self.stats.forward_prompts += len(texts)
        return torch.tensor(rows, dtype=torch.float32)


class FirstJudge(ConstitutionJudge):
    """Always prefers the first completion of a pair (the spec's mock judge)."""

    def judge(self, prompts, completions, shuffle_order=True):
        self.stats.comparisons += len(prompts)
        return [0] * len(prompts)


class SecondJudge(ConstitutionJudge):
    def judge(self, prompts, completions, shuffle_order=True):
        return [1] * len(prompts)


def _prompts(provenance="native", n=4, **kw):
    ds = Dataset.from_dict({"prompt": (PROMPTS * 4)[:n]})
    return with_provenance(ds, provenance, **kw)


# ------------------------------------------------------------------------------------------------------- judge
def test_order_swap_gives_mirrored_verdict_and_symmetric_inputs_tie(tiny):
    model, tok = tiny
    judge = ConstitutionJudge(model, tok, language="English", tie_rule="margin")
    pairs = [("four", "the answer is four"), ("hello there", "go away"), ("a cat", "a cat on a mat")]
    prompts = ["what is two plus two ?", "hello world", "describe the image"]
    d = judge.preference_log_odds(prompts, pairs)[:, 0]
    d_swapped = judge.preference_log_odds(prompts, [(b, a) for a, b in pairs])[:, 0]
    torch.testing.assert_close(d_swapped, -d, rtol=0, atol=1e-5)  # antisymmetric by construction
    v, v_swapped = judge.judge(prompts, pairs), judge.judge(prompts, [(b, a) for a, b in pairs])
    assert all(x in (0, 1) for x in v)
    assert v_swapped == [1 - x for x in v]
    # symmetric inputs: the same verdict (a tie) whichever way round, under both tie rules
    for rule in ("margin", "inconsistent"):
        j = ConstitutionJudge(model, tok, tie_rule=rule)
        assert j.judge(prompts, [(a, a) for a, _ in pairs]) == [-1, -1, -1]
    assert judge.stats.forward_prompts == 4 * 3 * 2  # 4 calls x 3 pairs x both orders


def test_position_bias_cancels_with_both_orders(tiny):
    model, tok = tiny
    judge = LengthJudge(model, tok, tie_rule="margin")
    judge.bias = 100.0  # the judge "always says A" in a single order
    pairs = [("short", "a much longer answer"), ("a much longer answer", "short")]
    scores = judge.preference_log_odds(["q", "q"], pairs)
    # d = ((bias + |y1| - |y2|) - (bias + |y2| - |y1|)) / 2 = |y1| - |y2|: the bias is gone
    assert scores[:, 0].tolist() == pytest.approx([5 - 20, 20 - 5])
    assert scores[:, 1].tolist() == pytest.approx([100 + 5 - 20, 100 + 20 - 5])  # first order, biased
    assert judge.judge(["q", "q"], pairs) == [1, 0]
    # the inconsistent rule calls both pairs ties: the biased orders disagree
    consistent = LengthJudge(model, tok, tie_rule="inconsistent")
    consistent.bias = 100.0
    assert consistent.judge(["q", "q"], pairs) == [-1, -1]
    consistent.bias = 0.0
    assert consistent.judge(["q", "q"], pairs) == [1, 0]
    # one order only: the bias decides
    single = LengthJudge(model, tok, both_orders=False, tie_rule="margin")
    single.bias = 100.0
    assert single.judge(["q", "q"], pairs, shuffle_order=False) == [0, 0]


def test_margin_tie_rule_and_group_rewards(tiny):
    model, tok = tiny
    judge = LengthJudge(model, tok, tie_rule="margin", tie_margin=2.0)
    # |d| = 1 <= 2 -> tie; |d| = 4 > 2 -> verdict
    assert judge.judge(["q", "q"], [("ab", "abc"), ("abcdef", "ab")]) == [-1, 0]
    # a group of 3 completions of one prompt + a pair of another: rewards are win rates within each prompt
    rewards = judge.group_rewards(["p", "p", "p", "r", "r"], ["aaaaaaa", "aaaaaa", "a", "xx", "xxxxxxxx"])
    # p: 7 vs 6 tie (|d| = 1), 7 vs 1 win, 6 vs 1 win -> [0.75, 0.75, 0.0]; r: 2 vs 8 loss -> [0, 1]
    assert rewards == pytest.approx([0.75, 0.75, 0.0, 0.0, 1.0])
    assert judge.group_rewards(["only"], ["x"]) == [0.5]  # nothing to compare with: no judge call
    reward = judge.as_reward_function()
    assert reward.__name__ == "constitution_judge_pairwise" and reward.judge is judge
    logged = {}
    assert reward(prompts=["q", "q"], completions=["abcdef", "a"], log_metric=logged.__setitem__) == [1.0, 0.0]
    assert logged == {"judge/forward_prompts": 2.0, "judge/tie_fraction": 0.0}


def test_pointwise_score_is_expected_rating(tiny):
    model, tok = tiny
    judge = LengthJudge(model, tok)
    # logits (0, 0, 0, 0, log 3): p = (1, 1, 1, 1, 3) / 7, E[k] = (1 + 2 + 3 + 4 + 15) / 7 = 25 / 7
    expected = (25 / 7 - 1) / 4
    assert judge.score(["q", "q"], ["a", "b"]) == pytest.approx([expected, expected])
    assert judge.as_reward_function("pointwise")(prompts=["q"], completions=["a"]) == pytest.approx([expected])


def test_conversational_inputs_are_rendered(tiny):
    model, tok = tiny
    judge = ConstitutionJudge(model, tok)
    text = judge.pairwise_prompt([{"role": "user", "content": "hello world"}], [{"role": "assistant", "content": "hi"}], "yo")
    assert "[Request]\nhello world" in text and "[Response A]\nhi" in text and "[Response B]\nyo" in text
    assert "the target language" in text  # the constitution is in the system turn


def test_judge_refuses_bad_input(tiny):
    model, tok = tiny
    judge = ConstitutionJudge(model, tok)
    with pytest.raises(ValueError, match="same length"):
        judge.judge(["a", "b"], [("x", "y")])
    with pytest.raises(ValueError, match=r"completions\[0\]"):
        judge.judge(["a"], [("x", "y", "z")])
    with pytest.raises(TypeError, match="prompts"):
        judge.judge("a", [("x", "y")])
    with pytest.raises(ValueError, match="both_orders"):
        ConstitutionJudge(model, tok, both_orders=False, tie_rule="inconsistent")
    with pytest.raises(ValueError, match="distinct tokens"):
        ConstitutionJudge(model, tok, labels=("A", "A"))
    with pytest.raises(ValueError, match="tie_rule"):
        ConstitutionJudge(model, tok, tie_rule="coin")
    with pytest.raises(ValueError, match="tie_margin"):
        ConstitutionJudge(model, tok, tie_rule="margin", tie_margin=float("nan"))
    with pytest.raises(TypeError, match="model"):
        ConstitutionJudge("gpt", tok)
    with pytest.raises(ValueError, match="mode"):
        judge.as_reward_function("listwise")
    assert judge.judge([], []) == []


# ------------------------------------------------------------------------------------------------ provenance guard
def test_guard_accepts_native_prompts_and_reports_counts():
    report = check_on_policy_dataset(_prompts("native"))
    assert dict(report["prompt"]) == {"native": 4}


@pytest.mark.parametrize("bad", ["machine_translated", "judge_written"])
def test_guard_refuses_translated_or_judge_written_prompts(bad):
    with pytest.raises(ProvenanceError, match=rf"column `prompt` .*provenance `{bad}`.*4 of 4 rows, first at row 0"):
        check_on_policy_dataset(_prompts(bad))


def test_guard_refuses_off_policy_completion_column_and_names_it():
    ds = _prompts("native").add_column("completion", ["hi", "four", "cat", "image"])
    ds = ds.add_column("completion_provenance", ["model_generated", "judge_written", "judge_written", "model_generated"])
    with pytest.raises(ProvenanceError, match=r"column `completion` .*`judge_written` \(2 of 4 rows, first at row 1"):
        check_on_policy_dataset(ds)
    # the policy's own samples pass; a reward-only column is not checked
    ok = ds.remove_columns("completion_provenance").add_column("completion_provenance", ["model_generated"] * 4)
    assert dict(check_on_policy_dataset(ok)["completion"]) == {"model_generated": 4}
    assert "completion" not in check_on_policy_dataset(ds, reward_columns=["completion"])


def test_guard_language_filter_missing_and_unknown_provenance():
    mixed = Dataset.from_dict(
        {"prompt": ["a", "b", "c"], "provenance": ["machine_translated", "native", "native"], "language": ["en", "nb", "nb"]}
    )
    assert dict(check_on_policy_dataset(mixed, target_language="nb")["prompt"]) == {"native": 2}
    with pytest.raises(ProvenanceError, match="language 'en'"):
        check_on_policy_dataset(mixed, target_language="en")
    with pytest.raises(ProvenanceError, match="carries no provenance"):
        check_on_policy_dataset(Dataset.from_dict({"prompt": ["a"]}))
    with pytest.raises(ProvenanceError, match="'translated' at row 0"):
        check_on_policy_dataset(Dataset.from_dict({"prompt": ["a"], "provenance": ["translated"]}))
    with pytest.raises(ValueError, match="no prompt column"):
        check_on_policy_dataset(Dataset.from_dict({"question": ["a"], "provenance": ["native"]}))
    with pytest.raises(TypeError, match="datasets.Dataset"):
        check_on_policy_dataset([{"prompt": "a"}])
    with pytest.raises(ValueError, match="provenance"):
        with_provenance(Dataset.from_dict({"prompt": ["a"]}), "human")
    # a column-specific provenance overrides the row-level one
    ds = Dataset.from_dict({"prompt": ["a"], "provenance": ["machine_translated"], "prompt_provenance": ["native"]})
    assert dict(check_on_policy_dataset(ds)["prompt"]) == {"native": 1}
    assert dict(ProvenanceGuard(allowed_prompt_provenance=("native", "model_generated")).check(ds)["prompt"]) == {"native": 1}


def test_trainers_refuse_translated_prompts_before_any_model_work(tmp_path):
    from trl import GRPOConfig
    from trl.experimental.online_dpo import OnlineDPOConfig

    bad = _prompts("machine_translated")
    cpu = dict(use_cpu=True, bf16=False, report_to=[])
    # `model` is a path that does not exist: the guard must fire before the parent tries to load it
    with pytest.raises(ProvenanceError, match="column `prompt`.*machine_translated"):
        FluentOnlineDPOTrainer(
            model=str(tmp_path / "missing"), reward_funcs=lambda **k: [0.0], args=OnlineDPOConfig(str(tmp_path), **cpu),
            train_dataset=bad, processing_class=None,
        )
    with pytest.raises(ProvenanceError, match="column `prompt`.*machine_translated"):
        FluentGRPOTrainer(
            model=str(tmp_path / "missing"), reward_funcs=lambda **k: [0.0], args=GRPOConfig(str(tmp_path), **cpu),
            train_dataset=bad,
        )
    with pytest.raises(TypeError, match="provenance_guard"):
        FluentGRPOTrainer(model="x", reward_funcs=lambda **k: [0.0], args=GRPOConfig(str(tmp_path), **cpu),
                          provenance_guard="on")


# ------------------------------------------------------------------------------------------ online DPO, mock judge
class _RecordingDPO(FluentOnlineDPOTrainer):
    def _generate(self, model, prompts, images=None):
        out = super()._generate(model, prompts, images)
        self.generated = [t.detach().clone() if torch.is_tensor(t) else t for t in out]
        return out


def _dpo_args(tmp_path, **kw):
    from trl.experimental.online_dpo import OnlineDPOConfig

    base = dict(
        output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2, max_new_tokens=6, learning_rate=0.5,
        optim="sgd", use_cpu=True, bf16=False, save_strategy="no", report_to=[], logging_steps=1, seed=0,
        lr_scheduler_type="constant", beta=[0.1], disable_tqdm=True,
    )
    base.update(kw)
    return OnlineDPOConfig(**base)


def _margin(trainer, model):
    prompt_ids, prompt_mask, completion_ids, completion_mask, _ = trainer.generated
    with torch.no_grad():
        logps = trainer._forward(model, prompt_ids, prompt_mask, completion_ids, completion_mask)
    seq = (logps * completion_mask).sum(1)
    first, second = seq.split(prompt_ids.size(0) // 2)
    return first - second  # (B,) log-prob margin of the first sample over the second


@pytest.mark.parametrize("judge_cls, sign", [(FirstJudge, 1), (SecondJudge, -1)])
def test_online_dpo_with_mock_judge_moves_the_preferred_sample_margin(tmp_path, judge_cls, sign):
    model, tok = tiny_llama(seed=0)
    judge_model, judge_tok = tiny_llama(seed=1)
    judge = judge_cls(judge_model, judge_tok)
    trainer = _RecordingDPO(
        model=model, judge=judge, args=_dpo_args(tmp_path), train_dataset=_prompts(n=2), processing_class=tok
    )
    initial = copy.deepcopy(trainer.model).eval()
    trainer.train()
    before, after = _margin(trainer, initial), _margin(trainer, trainer.model.eval())
    change = (after - before) * sign
    assert (change > 0).all(), f"margin change {change.tolist()}"
    history = [h for h in trainer.state.log_history if "judge/forward_prompts" in h]
    assert history and history[0]["rewards/margins"] >= 0


def test_fluent_online_dpo_matches_parent_when_the_recipe_adds_nothing(tmp_path):
    from trl.experimental.online_dpo import OnlineDPOTrainer

    def reward(prompts, completions, **kwargs):
        return [float(len(c)) for c in completions]

    params = []
    for i, cls in enumerate((OnlineDPOTrainer, FluentOnlineDPOTrainer)):
        model, tok = tiny_llama(seed=0)
        kwargs = {"provenance_guard": ProvenanceGuard()} if cls is FluentOnlineDPOTrainer else {}
        trainer = cls(
            model=model, reward_funcs=reward, args=_dpo_args(tmp_path / str(i), max_steps=2, learning_rate=0.05),
            train_dataset=_prompts(n=4), processing_class=tok, **kwargs,
        )
        trainer.train()
        params.append({n: p.detach().clone() for n, p in trainer.model.named_parameters()})
    changed = False
    for name, p in params[0].items():
        torch.testing.assert_close(params[1][name], p, rtol=0, atol=0, msg=name)
        changed = changed or not torch.equal(p, tiny_llama(seed=0)[0].state_dict()[name])
    assert changed


def _grpo_args(tmp_path, **kw):
    from trl import GRPOConfig

    base = dict(
        output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4, num_generations=2, max_completion_length=6,
        learning_rate=0.05, use_cpu=True, bf16=False, save_strategy="no", report_to=[], logging_steps=1, seed=0,
        disable_tqdm=True,
    )
    base.update(kw)
    return GRPOConfig(**base)


def test_fluent_grpo_matches_parent_and_logs_judge(tmp_path, tiny):
    from trl import GRPOTrainer

    def reward(prompts, completions, **kwargs):
        return [float(len(c)) for c in completions]

    params = []
    for i, cls in enumerate((GRPOTrainer, FluentGRPOTrainer)):
        model, tok = tiny_llama(seed=0)
        trainer = cls(model=model, reward_funcs=reward, args=_grpo_args(tmp_path / str(i)), train_dataset=_prompts(n=4),
                      processing_class=tok)
        trainer.train()
        params.append({n: p.detach().clone() for n, p in trainer.model.named_parameters()})
    for name, p in params[0].items():
        torch.testing.assert_close(params[1][name], p, rtol=0, atol=0, msg=name)
    # with the judge: the pairwise reward reaches GRPO and its counters are logged
    model, tok = tiny_llama(seed=0)
    judge = LengthJudge(*tiny, tie_rule="margin")
    trainer = FluentGRPOTrainer(model=model, judge=judge, args=_grpo_args(tmp_path / "j"), train_dataset=_prompts(n=4),
                                processing_class=tok)
    trainer.train()
    logged = trainer.state.log_history[0]
    assert logged["judge/forward_prompts"] == 4.0  # 2 groups x 1 pair x 2 orders
    assert "judge/tie_fraction" in logged and "rewards/constitution_judge_pairwise/mean" in logged


def test_thr_grpo_trainer_accepts_the_judge_reward(tmp_path, tiny):
    from hfx.trainers.thr import THRGRPOConfig, THRGRPOTrainer

    model, tok = tiny_llama(seed=0)
    judge = LengthJudge(*tiny, tie_rule="margin")
    args = THRGRPOConfig(
        output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4, num_generations=2, max_completion_length=6,
        learning_rate=0.05, use_cpu=True, bf16=False, save_strategy="no", report_to=[], logging_steps=1, disable_tqdm=True,
    )
    trainer = THRGRPOTrainer(model=model, reward_funcs=judge.as_reward_function(), args=args,
                             train_dataset=_prompts(n=4), processing_class=tok)
    trainer.train()
    assert judge.stats.forward_prompts == 4 and trainer.state.global_step == 1
    assert "rewards/constitution_judge_pairwise/mean" in trainer.state.log_history[0]


# ---------------------------------------------------------------------------------------------- runner and stages
def _sft_data(n=6, provenance="native"):
    ds = Dataset.from_dict({
        "prompt": [[{"role": "user", "content": "what is two plus two ?"}]] * n,
        "completion": [[{"role": "assistant", "content": "the answer is four"}]] * n,
    })
    return with_provenance(ds, provenance, language="en")


@pytest.mark.parametrize("epochs", [1, 2])
def test_sft_stage_runs_exactly_the_configured_epochs(tmp_path, epochs):
    model, tok = tiny_llama(seed=0)
    config = FluentAlignmentConfig(output_dir=str(tmp_path), arm="sft_only", sft_epochs=epochs, sft_batch_size=2,
                                   target_language="en", resume=False)
    result = run_fluent_alignment(config, english_sft_dataset=_sft_data(6), model=model, tokenizer=tok)
    record = result.records["sft"]
    assert record["global_step"] == 3 * epochs  # ceil(6 / 2) steps per epoch
    assert record["epochs"] == pytest.approx(epochs)
    assert list(result.stages) == ["sft"]
    assert FluentAlignmentConfig(output_dir="x").sft_epochs == 1  # the paper's default: one epoch


def test_full_recipe_saves_each_stage_and_resumes(tmp_path, tiny):
    from transformers import AutoModelForCausalLM

    model, tok = tiny_llama(seed=0)
    judge = LengthJudge(*tiny, tie_rule="margin")
    config = FluentAlignmentConfig(output_dir=str(tmp_path), target_language="en", sft_batch_size=3, on_policy_steps=1,
                                   on_policy_batch_size=2, max_new_tokens=6, use_lora=True, logging_steps=1)
    result = run_fluent_alignment(config, english_sft_dataset=_sft_data(6), target_prompts=_prompts(n=4), judge=judge,
                                  model=model, tokenizer=tok)
    assert list(result.stages) == ["sft", "online_dpo"]
    assert result.records["online_dpo"]["judge_forward_prompts"] == 4  # 2 pairs x 2 orders
    assert result.records["online_dpo"]["provenance"] == {"prompt": {"native": 4}}
    reloaded = AutoModelForCausalLM.from_pretrained(result.stages["online_dpo"])  # a plain, merged model
    for name, p in reloaded.state_dict().items():
        torch.testing.assert_close(p, result.model.state_dict()[name], rtol=0, atol=0)
    calls = judge.stats.forward_prompts
    again = run_fluent_alignment(config, english_sft_dataset=_sft_data(6), target_prompts=_prompts(n=4), judge=judge,
                                 model=tiny_llama(seed=0)[0], tokenizer=tok)
    assert again.records["sft"]["resumed"] and again.records["online_dpo"]["resumed"]
    assert judge.stats.forward_prompts == calls  # nothing retrained


def test_runner_baselines_and_input_checks(tmp_path, tiny):
    judge = LengthJudge(*tiny)
    english, translated = _sft_data(4), _sft_data(4, "machine_translated")
    # the recipe never trains on translated target-language text, in any stage
    with pytest.raises(ProvenanceError, match="english_sft_dataset.*machine_translated"):
        run_fluent_alignment(FluentAlignmentConfig(output_dir=str(tmp_path), target_language="en"),
                             english_sft_dataset=translated, target_prompts=_prompts(), judge=judge, model=tiny[0],
                             tokenizer=tiny[1])
    with pytest.raises(ProvenanceError, match="target_prompts.*machine_translated"):
        run_fluent_alignment(FluentAlignmentConfig(output_dir=str(tmp_path), target_language="en"),
                             english_sft_dataset=english, target_prompts=_prompts("machine_translated"), judge=judge,
                             model=tiny[0], tokenizer=tiny[1])
    with pytest.raises(TypeError, match="judge"):
        run_fluent_alignment(FluentAlignmentConfig(output_dir=str(tmp_path)), english_sft_dataset=english,
                             target_prompts=_prompts(), model=tiny[0], tokenizer=tiny[1])
    with pytest.raises(ValueError, match="translated_sft_dataset"):
        run_fluent_alignment(FluentAlignmentConfig.for_baseline("multilingual", str(tmp_path)),
                             english_sft_dataset=english, model=tiny[0], tokenizer=tiny[1])
    # the multilingual baseline trains on both sets (8 rows: 4 steps of 2), the translated one on its own
    model, tok = tiny_llama(seed=0)
    config = FluentAlignmentConfig.for_baseline("multilingual", str(tmp_path / "mix"), sft_batch_size=2, resume=False)
    result = run_fluent_alignment(config, english_sft_dataset=english, translated_sft_dataset=translated, model=model,
                                  tokenizer=tok)
    assert result.records["sft"]["num_examples"] == 8 and result.records["sft"]["global_step"] == 4
    config = FluentAlignmentConfig.for_baseline("sft_translated", str(tmp_path / "tr"), sft_batch_size=2)
    result = run_fluent_alignment(config, translated_sft_dataset=translated, model=tiny_llama(seed=0)[0], tokenizer=tok)
    assert result.records["sft"]["provenance"] == {"machine_translated": 4} and list(result.stages) == ["sft"]


def test_config_validation_and_round_trip(tmp_path):
    with pytest.raises(ValueError, match="arm"):
        FluentAlignmentConfig(output_dir="x", arm="rlhf")
    with pytest.raises(ValueError, match="sft_epochs"):
        FluentAlignmentConfig(output_dir="x", sft_epochs=-1)
    with pytest.raises(TypeError, match="sft_epochs"):
        FluentAlignmentConfig(output_dir="x", sft_epochs=1.5)
    with pytest.raises(ValueError, match="num_generations"):
        FluentAlignmentConfig(output_dir="x", num_generations=1)
    with pytest.raises(ValueError, match="allowed_prompt_provenance"):
        FluentAlignmentConfig(output_dir="x", allowed_prompt_provenance=("translated",))
    with pytest.raises(ValueError, match="temperature"):
        FluentAlignmentConfig(output_dir="x", temperature=0.0)
    with pytest.raises(ValueError, match="name"):
        FluentAlignmentConfig.for_baseline("fluent", "x")
    config = FluentAlignmentConfig(output_dir=str(tmp_path), on_policy_optimizer="grpo", lora_target_modules=["q_proj"])
    assert config.stages == ["sft", "grpo"]
    assert FluentAlignmentConfig.from_file(config.save(tmp_path)) == config
    assert FluentAlignmentConfig.for_baseline("sft_translated", "x").stages == ["sft"]


# ---------------------------------------------------------------------------------- translationese and fluency
def test_literal_translation_rules_are_deterministic():
    text = "There are 5 apples in the basket. She does not want to spend the money. Then they look at the sky."
    out = literal_translation(text)
    assert out == literal_translation(text)
    assert out == "It is 5 apples in basket. She wills not use money. Then look they on sky."
    assert literal_translation("The cat does not eat.", rules=["negation_shift"]) == "The cat eats not."
    assert literal_translation("The cat sat on a mat.", rules=["drop_articles"]) == "Cat sat on mat."
    assert literal_translation("Now we wait for the bus.", rules=["v2_inversion"]) == "Now wait we for the bus."
    assert literal_translation("plain words", rules=[]) == "plain words"
    with pytest.raises(ValueError, match="rules"):
        literal_translation("x", rules=["passive_voice"])
    with pytest.raises(TypeError, match="text"):
        literal_translation(None)


def test_completion_log_likelihood_matches_the_models_own_loss(tiny):
    model, tok = tiny
    prompt, completion = "what is two plus two ?", " the answer is four"
    [item] = completion_log_likelihood(model, tok, [prompt], [completion])
    prefix = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
    p_ids = tok(prefix, add_special_tokens=False)["input_ids"]
    c_ids = tok(completion, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([p_ids + c_ids])
    labels = ids.clone()
    labels[0, : len(p_ids)] = -100
    with torch.no_grad():
        loss = model(input_ids=ids, labels=labels).loss  # mean NLL over the completion tokens
    assert item["num_tokens"] == len(c_ids)
    assert item["mean_logprob"] == pytest.approx(-loss.item(), abs=1e-5)
    # batching with padding gives the same numbers; an empty completion is None, not a number from nothing
    batch = completion_log_likelihood(model, tok, [prompt, "hi", prompt], [completion, "", "four"], batch_size=3)
    assert batch[0]["mean_logprob"] == pytest.approx(item["mean_logprob"], abs=1e-5)
    assert batch[1]["mean_logprob"] is None and batch[1]["num_tokens"] == 0
    with pytest.raises(ValueError, match="same length"):
        completion_log_likelihood(model, tok, [prompt], [])


def test_ngram_fluency_prefers_native_order():
    corpus = ["the cat sat on the mat .", "the dog sat on the rug .", "a cat ate the fish ."] * 5
    lm = NgramFluencyModel(corpus, order=3, unk_cutoff=1)
    native = lm.per_token_logprob("the cat sat on the mat .")
    shuffled = lm.per_token_logprob("mat the on sat cat the .")
    assert native["mean_logprob"] > shuffled["mean_logprob"]
    assert native["num_tokens"] == 8 and native["oov_rate"] == 0
    assert lm.per_token_logprob("")["mean_logprob"] is None
    with pytest.raises(ValueError, match="texts"):
        NgramFluencyModel(["", "  "])


# --------------------------------------------------------------------------------------------------- CLI, publish
def _write_jsonl(path, rows):
    import json

    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def test_cli_refuses_bad_inputs_in_one_line_before_any_model(tmp_path, capsys):
    from hfx import cli

    sft = _write_jsonl(tmp_path / "sft.jsonl", [{"prompt": "q", "completion": "a"}])
    translated = _write_jsonl(tmp_path / "p.jsonl", [{"prompt": "hei", "provenance": "machine_translated"}])
    cases = [
        (["fluent-align", "--out", str(tmp_path / "o1"), "--sft-data", sft], "needs `--prompts`"),
        (["fluent-align", "--out", str(tmp_path / "o2"), "--sft-data", sft, "--prompts", translated],
         "column `prompt`.*machine_translated"),
        (["fluent-align", "--arm", "sft_only", "--out", str(tmp_path / "o3"), "--sft-data", sft, "--prompts", translated],
         "not used by `--arm sft_only`"),
        (["fluent-align", "--arm", "sft_only", "--out", str(tmp_path / "o4"), "--sft-data", str(tmp_path / "none")],
         "is not a file"),
        (["fluent-align", "--arm", "sft_only", "--out", str(tmp_path / "o5"), "--sft-data", translated],
         "needs one of the fields"),
    ]
    for argv, message in cases:
        assert cli.main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and err.startswith("hfx fluent-align: error:")
        assert re.search(message, err), err
        assert not (tmp_path / argv[argv.index("--out") + 1]).exists()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("keep")
    assert cli.main(["fluent-align", "--arm", "sft_only", "--out", str(tmp_path / "full"), "--sft-data", sft]) == 2
    assert "--overwrite" in capsys.readouterr().err


def test_cli_runs_the_recipe_and_publish_renders_the_card(tmp_path, capsys):
    from transformers import AutoModelForCausalLM

    from hfx import cli
    from hfx.hub import publish

    model, tok = tiny_llama(seed=0)
    model.save_pretrained(tmp_path / "base")
    tok.save_pretrained(tmp_path / "base")
    sft = _write_jsonl(tmp_path / "sft.jsonl", [{"prompt": "what is two plus two ?", "completion": "four"}] * 4)
    prompts = _write_jsonl(tmp_path / "p.jsonl", [{"prompt": p, "language": "en"} for p in PROMPTS])
    argv = ["fluent-align", "--out", str(tmp_path / "run"), "--model", str(tmp_path / "base"), "--sft-data", sft,
            "--prompts", prompts, "--target-language", "en", "--on-policy-steps", "1", "--batch-size", "2",
            "--max-new-tokens", "4", "--lora"]
    assert cli.main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "stage sft: 2 steps" in out and "stage online_dpo: 1 steps" in out and "judge prompts 4" in out
    card_dir = publish("fluent-alignment", tmp_path / "card", source=str(tmp_path / "run" / "stage2_online_dpo"))
    card = (card_dir / "README.md").read_text()
    assert "arXiv:2512.08777" in card and "`online_dpo`" in card and "untrained demo" not in card
    assert "language:\n- en" in card
    AutoModelForCausalLM.from_pretrained(card_dir)  # a plain transformers folder
    demo = (publish("fluent-alignment", tmp_path / "demo") / "README.md").read_text()
    assert "untrained demo" in demo
    with pytest.raises(ValueError, match="source"):
        publish("fluent-alignment", tmp_path / "bad", source=str(tmp_path))
