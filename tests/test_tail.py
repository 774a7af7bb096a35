"""TAIL-style data (arXiv 2507.13332): every trace replays to the right answer for every task and length (property
tests), the three ablation toggles remove exactly what they should, the baseline formats, disjoint length splits,
determinism by seed, the `datasets` form, the verifier, the TRL reward contract, the Hub folder and the SFT recipe.
"""

import json
import random
import subprocess
import sys
import textwrap

import pytest


pytest.importorskip("hypothesis")  # a dev dependency (absent from the separate vLLM environment)

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hfx.data import tail
from hfx.data.tail import formats, trace
from hfx.data.tail.dataset import SPLITS, generate_example


TASKS = tail.list_tasks()


def _all_lengths(name):
    spec = tail.get_task(name)
    return [*spec.lengths("train"), *spec.lengths("ood_test")]


def _steps(text):
    return [ln for ln in text.splitlines() if not ln.startswith(("TASK", "ANSWER"))]


# --------------------------------------------------------------------------------------------------- registry
def test_registry_has_at_least_18_tasks_in_8_classes():
    assert len(TASKS) >= 18
    classes = {tail.get_task(n).algorithm_class for n in TASKS}
    assert len(classes) >= 8 and classes <= set(tail.ALGORITHM_CLASSES)
    assert "knapsack" in TASKS  # the paper's Figure 2 example
    assert tail.list_tasks("graph") == ["bfs", "components"]
    with pytest.raises(ValueError, match="`task` must be one of"):
        tail.get_task("nope")
    with pytest.raises(ValueError, match="algorithm_class"):
        tail.list_tasks("nope")


def _has_input(name, split, length):
    try:
        generate_example(name, split, 0, 1, lengths=[length], format="plain")
    except ValueError:
        return False
    return True


# ------------------------------------------------------------------------------------------ replay: every task, length
@pytest.mark.parametrize("name", TASKS)
def test_every_trace_replays_to_the_reference_answer_at_every_length(name):
    """Each task's traced program, replayed line by line from its own text, ends in memory that holds the answer of
    an independent reference solver; for every train and ood length, with each toggle."""
    spec = tail.get_task(name)
    for length in _all_lengths(name):
        splits = ["ood_test", "ood_validation"] if length >= spec.ood_lengths[0] else ["train", "validation", "test"]
        split = next(s for s in splits if _has_input(name, s, length))  # tiny lengths may have few inputs
        for toggles in ({}, {"fetch": False}, {"atomic": False}):
            ex = generate_example(name, split, index=length, seed=1, lengths=[length], **toggles)
            inp = json.loads(ex["metadata"]["input"])
            assert ex["metadata"]["length"] == length
            assert ex["answer"] == spec.solve(inp)
            report = tail.verify_trace(name, ex["trace"], ex)
            assert report.ok, (length, toggles, report.errors[:3])
            if not toggles:  # every atomic step was re-executed against OPS
                assert report.checked_ops == report.num_steps > 0 or spec.execute(inp).num_atomic_steps == 0
        ex = generate_example(name, split, index=length, seed=1, lengths=[length], linear=False)
        assert tail.verify_trace(name, ex["trace"], ex).answer_correct


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(TASKS), seed=st.integers(0, 2**31), data=st.data())
def test_property_program_memory_matches_reference_solver(name, seed, data):
    spec = tail.get_task(name)
    length = data.draw(st.sampled_from(_all_lengths(name)))
    inp = json.loads(json.dumps(spec.sample(random.Random(seed), length)))
    execution = spec.execute(inp)
    answer = spec.solve(inp)
    assert spec.read_answer(execution.memory, inp) == answer
    text = trace.render_tail(name, execution, answer)
    report = tail.verify_trace(name, text, inp=inp)
    assert report.ok, report.errors[:3]
    # the bare answer and the whole trace both score 1 (reasoning-gym contract)
    assert tail.score_answer(name, text, {"answer": answer}) == 1.0
    assert tail.score_answer(name, answer, {"answer": answer}) == 1.0


# ------------------------------------------------------------------------------------------------ verifier catches
def _gold(name="add", length=4, **kw):
    return generate_example(name, "train", 0, 0, lengths=[length], **kw)


def test_verifier_rejects_a_wrong_fetch_a_wrong_op_result_a_wrong_answer_and_a_wrong_tape():
    ex = _gold()
    lines = ex["trace"].splitlines()
    assert tail.verify_trace("add", ex["trace"], ex).ok

    bad_fetch = lines.copy()
    bad_fetch[2] = bad_fetch[2].replace("FETCH c=0", "FETCH c=1", 1)
    report = tail.verify_trace("add", "\n".join(bad_fetch), ex)
    assert not report.valid and any("FETCH c=1 but memory holds 0" in e for e in report.errors)

    bad_state = lines.copy()
    i = next(k for k, ln in enumerate(lines) if "OP split" in ln)
    cell, value = bad_state[i].split("STATE ")[1].split()[0].split("=")
    bad_state[i] = bad_state[i].replace(f"STATE {cell}={value}", f"STATE {cell}={(int(value) + 1) % 10}")
    report = tail.verify_trace("add", "\n".join(bad_state), ex)
    assert not report.valid and any("OP split" in e for e in report.errors)

    wrong_answer = "\n".join([*lines[:-1], "ANSWER 1"])
    report = tail.verify_trace("add", wrong_answer, ex)
    assert not report.answer_correct and not report.valid  # the replayed memory disagrees with the line too

    other = generate_example("add", "train", 1, 0, lengths=[4])
    swapped_tape = "\n".join([other["trace"].splitlines()[0], *lines[1:]])
    assert not tail.verify_trace("add", swapped_tape, ex).valid

    report = tail.verify_trace("add", "nonsense", ex)
    assert not report.valid and not report.answer_correct


# ------------------------------------------------------------------------------------------------------ the toggles
@pytest.mark.parametrize("name", ["add", "bubble_sort", "knapsack", "bfs", "tm_increment", "parens"])
def test_fetch_off_removes_every_fetch_and_nothing_else(name):
    full, nofetch = _gold(name, 4), _gold(name, 4, fetch=False)
    assert "FETCH" in full["trace"] and "FETCH" not in nofetch["trace"]
    a, b = full["trace"].splitlines(), nofetch["trace"].splitlines()
    assert len(a) == len(b) and a[0] == b[0] and a[-1] == b[-1]
    pa, pb = trace.parse_trace(full["trace"]), trace.parse_trace(nofetch["trace"])
    assert not pa.errors and not pb.errors and len(pa.steps) == len(pb.steps)
    for x, y in zip(pa.steps, pb.steps):
        # same op and writes; the fetched operands now appear as bare addresses after the op name
        assert (y.op, y.writes, y.fetches) == (x.op, x.writes, [])
        assert y.addresses == [cell for cell, _ in x.fetches] and x.addresses == []


@pytest.mark.parametrize("name", ["add", "mul", "bubble_sort", "lcs", "bfs", "dfa_mod3"])
def test_atomic_off_fuses_each_iteration_and_drops_only_temporaries(name):
    spec = tail.get_task(name)
    full, fused = _gold(name, 4), _gold(name, 4, atomic=False)
    inp = json.loads(full["metadata"]["input"])
    execution = spec.execute(inp)
    assert len(_steps(fused["trace"])) == len(execution.iterations) < len(_steps(full["trace"]))
    assert any(trace.is_fused(step.op) for step in trace.parse_trace(fused["trace"]).steps)
    for step in trace.parse_trace(fused["trace"]).steps:
        if trace.is_fused(step.op):  # a fused line writes no temporary and reads none
            assert not {c for c, _ in step.writes + step.fetches} & set(spec.temps), step
    # the memory after replay is the same, temporaries aside
    mem_full = trace.replay(trace.parse_trace(full["trace"])).memory
    mem_fused = trace.replay(trace.parse_trace(fused["trace"])).memory
    strip = lambda m: {k: v for k, v in m.items() if k not in spec.temps}  # noqa: E731
    assert strip(mem_full) == strip(mem_fused)


@pytest.mark.parametrize("name", ["add", "reverse", "bubble_sort", "lcs"])
def test_linear_off_skips_whole_iterations_and_keeps_the_rest_verbatim(name):
    full, skipped = _gold(name, 5), _gold(name, 5, linear=False)
    a, b = _steps(full["trace"]), _steps(skipped["trace"])
    assert 0 < len(b) < len(a)
    it = iter(a)  # b is a subsequence of a: same lines, same order, some left out
    assert all(line in it for line in b)
    assert full["trace"].splitlines()[-1] == skipped["trace"].splitlines()[-1]
    assert skipped["metadata"]["linear"] is False
    # a skipping trace cannot be replayed strictly, and the verifier knows it from the metadata
    assert not tail.verify_trace(name, skipped["trace"], strict=True, inp=json.loads(full["metadata"]["input"])).valid
    assert tail.verify_trace(name, skipped["trace"], skipped).answer_correct


def test_baseline_formats_and_toggle_validation():
    plain, cot = _gold("add", 3, format="plain"), _gold("add", 3, format="cot")
    hint, rev = _gold("add", 3, format="index_hint"), _gold("add", 3, format="reversed")
    answer = plain["answer"]
    assert plain["trace"] == f"ANSWER {answer}"
    assert "FETCH" not in cot["trace"] and "OP" not in cot["trace"] and cot["trace"].endswith(f"ANSWER {answer}")
    assert len(cot["trace"].splitlines()) == 4  # one sentence per column, then the answer
    assert hint["question"].count("#0:") == 2 and "#0:" not in plain["question"]
    assert rev["trace"] == f"REVERSED {answer[::-1]}"
    for ex in (plain, cot, hint, rev):
        assert tail.score_answer("add", ex["trace"], ex) == 1.0
    assert formats.hint_answer("371", "digits", from_right=True) == "#2:3 #1:7 #0:1"
    assert formats.reverse_answer("1,22,3", "list") == "3,22,1"
    with pytest.raises(ValueError, match="format='tail' only"):
        generate_example("add", format="plain", fetch=False)
    with pytest.raises(ValueError, match="`format` must be one of"):
        generate_example("add", format="nope")
    with pytest.raises(TypeError, match="`fetch` must be a bool"):
        generate_example("add", fetch=0)


# ------------------------------------------------------------------------------------------------------------ splits
def test_splits_never_share_an_input_and_ood_lengths_are_longer():
    questions = {}
    for split in SPLITS:
        rows = [generate_example("add", split, i, 0) for i in range(150)]
        questions[split] = {r["question"] for r in rows}
        spec = tail.get_task("add")
        lo, hi = spec.ood_lengths if split.startswith("ood") else spec.train_lengths
        assert all(lo <= r["metadata"]["length"] <= hi for r in rows)
    for a in SPLITS:
        for b in SPLITS:
            if a < b:
                assert not questions[a] & questions[b], (a, b)
    # the same holds across seeds: the split is a property of the input, not of the draw
    other_seed = {generate_example("add", "test", i, 7)["question"] for i in range(150)}
    assert not other_seed & questions["train"]
    with pytest.raises(ValueError, match="overlap the train lengths"):
        tail.load_dataset("add", "ood_test", 4, lengths=[3, 9])
    with pytest.raises(ValueError, match="`split` must be one of"):
        tail.load_dataset("add", "nope", 4)


# ---------------------------------------------------------------------------------------------- the datasets form
def test_load_dataset_features_determinism_prefix_and_streaming(tmp_path):
    ds = tail.load_dataset("add", "train", size=12, seed=3, cache_dir=str(tmp_path))
    assert ds.features == tail.features()
    assert ds.column_names == ["question", "answer", "trace", "messages", "prompt", "task", "metadata"]
    again = tail.load_dataset("add", "train", size=12, seed=3, cache_dir=str(tmp_path / "b"))
    assert ds.to_list() == again.to_list()
    other = tail.load_dataset("add", "train", size=12, seed=4, cache_dir=str(tmp_path))
    assert ds["question"] != other["question"]
    assert tail.load_dataset("add", "train", size=5, seed=3, cache_dir=str(tmp_path)).to_list() == ds.to_list()[:5]
    streamed = list(tail.load_dataset("add", "train", size=12, seed=3, streaming=True))
    assert streamed == ds.to_list()
    row = ds[0]
    assert row["messages"][-1] == {"role": "assistant", "content": row["trace"]}
    assert row["prompt"] == row["messages"][:-1] and row["prompt"][0]["content"].startswith(row["question"])
    assert row["metadata"]["num_steps"] == len(_steps(row["trace"]))
    mixed = tail.load_dataset(["add", "reverse"], "test", size=4, seed=0, format="plain", cache_dir=str(tmp_path))
    assert mixed["task"] == ["add", "reverse", "add", "reverse"]
    with pytest.raises(ValueError, match="`size` must be a positive int"):
        tail.load_dataset("add", size=0)


def test_reasoning_gym_style_create_dataset():
    ds = tail.create_dataset("reverse", size=5, seed=42)
    assert len(ds) == 5 and ds[4] == ds[-1]
    for entry in ds:
        assert ds.score_answer(entry["answer"], entry) == 1.0
        assert ds.score_answer(entry["answer"] + "x", entry) == 0.0
        assert ds.score_answer(None, entry) == 0.0
    with pytest.raises(IndexError):
        ds[5]


# --------------------------------------------------------------------------------------------------- score / reward
def test_score_answer_extraction_rules():
    ex = {"answer": "1,2,3"}
    assert tail.score_answer("bubble_sort", "blah\nANSWER: 1, 2, 3.", ex) == 1.0
    assert tail.score_answer("bubble_sort", "ANSWER 3,2,1\nANSWER 1,2,3", ex) == 1.0  # the last marker wins
    assert tail.score_answer("bubble_sort", "REVERSED 3,2,1", ex) == 1.0
    assert tail.score_answer("bubble_sort", "ANSWER #0:1,#1:2,#2:3", ex) == 1.0
    assert tail.score_answer("linear_search", "ANSWER # 0 : - # 1 : 1", {"answer": "-1"}) == 1.0  # decoded spacing
    assert tail.score_answer("bubble_sort", "The sum is \\boxed{1,2,3}", ex) == 1.0
    assert tail.score_answer("bubble_sort", "ANSWER 1,2", ex) == 0.0
    assert tail.score_answer("bubble_sort", "", ex) == 0.0
    assert tail.score_answer("parens", "Answer: Yes", {"answer": "yes"}) == 1.0
    # lenient: the last answer-like match of the task's pattern when there is no marker
    assert tail.score_answer("add", "8 + 8 = 16", {"answer": "16"}) == 0.0
    assert tail.score_answer("add", "8 + 8 = 16", {"answer": "16"}, lenient=True) == 1.0
    assert tail.score_answer("add", "16, no wait, 15", {"answer": "16"}, lenient=True) == 0.0
    assert tail.score_answer("parens", "I think no... yes.", {"answer": "yes"}, lenient=True) == 1.0
    assert tail.score_answer("bubble_sort", "Sorted: 1, 2, 3!", ex, lenient=True) == 1.0
    assert tail.score_answer("copy", "The copy is cafe.", {"answer": "cafe"}, lenient=True) == 1.0
    assert tail.score_answer("add", "ANSWER 15 (it is 16)", {"answer": "16"}, lenient=True) == 0.0  # marker wins
    with pytest.raises(ValueError, match="`answer` field"):
        tail.score_answer("add", "1", {})


def test_reward_function_follows_the_trl_contract():
    ds = [generate_example("add", "train", i, 0, lengths=[3]) for i in range(3)]
    reward = tail.reward_function()
    assert reward.__name__ == "tail_answer"
    assert tail.reward_function(lenient=True)(completions=["so 8+8=16"], task=["add"], answer=["16"]) == [1.0]
    columns = {
        "task": [r["task"] for r in ds],
        "answer": [r["answer"] for r in ds],
        "metadata": [r["metadata"] for r in ds],
    }
    completions = [ds[0]["trace"], [{"role": "assistant", "content": f"ANSWER {ds[1]['answer']}"}], "ANSWER 0"]
    scores = reward(prompts=[r["prompt"] for r in ds], completions=completions, trainer_state=None, **columns)
    assert scores == [1.0, 1.0, 0.0]
    # check_trace: a right answer behind a corrupted trace no longer earns the reward
    strict = tail.reward_function(check_trace=True)
    bad = ds[0]["trace"].replace("FETCH c=0", "FETCH c=5", 1)
    assert strict(completions=[ds[0]["trace"], bad, ds[2]["answer"]], **columns) == [1.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="`task` and `answer`"):
        reward(prompts=["p"], completions=["ANSWER 1"])
    with pytest.raises(ValueError, match="completions"):
        reward(completions=["a", "b"], task=["add"], answer=["1"])


@pytest.mark.slow
def test_grpo_trainer_accepts_the_reward_and_the_prompt_column(tmp_path, tiny_llama):
    from trl import GRPOConfig, GRPOTrainer

    model, tok = tiny_llama
    ds = tail.load_dataset("add", "train", size=4, seed=0, format="plain", lengths=[1], cache_dir=str(tmp_path))
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=4,
        max_steps=1,
        report_to="none",
        use_cpu=True,
        bf16=False,
        logging_steps=1,
    )
    trainer = GRPOTrainer(
        model=model, reward_funcs=tail.reward_function(), args=args, train_dataset=ds, processing_class=tok
    )
    trainer.train()
    assert any("rewards/tail_answer/mean" in h for h in trainer.state.log_history)


# ------------------------------------------------------------------------------------------------------- light import
def test_importing_and_generating_loads_no_datasets_or_torch():
    code = textwrap.dedent(
        """
        import sys
        from hfx.data.tail import list_tasks, generate_example, score_answer, verify_trace
        ex = generate_example("knapsack", "train", 0, 0)
        assert verify_trace("knapsack", ex["trace"], ex).ok and len(list_tasks()) >= 18
        print(",".join(m for m in ("datasets", "torch", "transformers") if m in sys.modules))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


# ------------------------------------------------------------------------------------------------------- hub folder
def test_publish_writes_parquet_per_task_and_split_with_a_dataset_card(tmp_path):
    import datasets
    from huggingface_hub import DatasetCard

    from hfx.hub import publish

    sizes = {"train": 6, "validation": 2, "test": 3, "ood_validation": 0, "ood_test": 4}
    out = publish("tail-data", tmp_path / "pub", tasks=["add", "parens"], sizes=sizes)
    card = DatasetCard.load(out / "README.md")
    assert "arxiv:2507.13332" in card.data.tags
    assert [c["config_name"] for c in card.data.configs] == ["add", "parens"]
    assert "| `parens` | stack |" in card.text
    loaded = datasets.load_dataset(str(out), "parens")
    assert {k: len(v) for k, v in loaded.items()} == {"train": 6, "validation": 2, "test": 3, "ood_test": 4}
    assert loaded["test"].to_list() == tail.load_dataset("parens", "test", 3).to_list()
    with pytest.raises(ValueError, match="`source` is not used"):
        publish("tail-data", tmp_path / "x", source="some/path")


# ---------------------------------------------------------------------------------------------------------- recipe
def test_wilson_interval_matches_hand_computed_values():
    from hfx.data.tail.recipe import wilson_interval

    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.27753, abs=1e-4)
    lo, hi = wilson_interval(5, 10)
    assert (lo, hi) == (pytest.approx(0.23659, abs=1e-4), pytest.approx(0.76341, abs=1e-4))
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_tokenizer_keeps_grammar_words_whole_and_digits_apart():
    from hfx.data.tail.recipe import build_tokenizer

    tok = build_tokenizer()
    ex = _gold("add", 3)
    ids = tok(ex["trace"])["input_ids"]
    assert tok.unk_token_id not in ids
    tokens = tok.convert_ids_to_tokens(ids)
    assert "FETCH" in tokens and "split" in tokens and "\n" in tokens
    assert tok.convert_ids_to_tokens(tok("a[12]=7")["input_ids"]) == ["a", "[", "1", "2", "]", "=", "7"]
    assert "".join(tok.decode(ids).split()) == "".join(ex["trace"].split())


@pytest.mark.slow
def test_sft_smoke_on_a_tiny_llama_and_exact_match_by_length(tmp_path):
    import torch
    from transformers import LlamaForCausalLM

    from hfx.data.tail.recipe import (
        build_tokenizer,
        evaluate_exact_match,
        tiny_llama_config,
        to_prompt_completion,
        train_sft,
    )

    tok = build_tokenizer()
    train = to_prompt_completion(tail.load_dataset("reverse", "train", 16, lengths=[1, 2], cache_dir=str(tmp_path)))
    model = LlamaForCausalLM(tiny_llama_config(tok, hidden_size=32, num_hidden_layers=1, intermediate_size=64))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trainer = train_sft(model, tok, train, str(tmp_path / "sft"), max_steps=2, batch_size=4)
    batch = trainer.data_collator([trainer.train_dataset[0], trainer.train_dataset[1]])
    prompt_len = len(tok(train[0]["prompt"])["input_ids"])
    assert (batch["labels"][0, :prompt_len] == -100).all()  # the prompt is masked: loss on the completion only
    assert (batch["labels"][0, prompt_len:] != -100).any()
    assert any(not torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())
    test = to_prompt_completion(tail.load_dataset("reverse", "test", 4, lengths=[2, 3], cache_dir=str(tmp_path)))
    ev = evaluate_exact_match(trainer.model, tok, test, batch_size=4, max_new_tokens=8)
    assert set(ev["by_length"]) == {2, 3} and sum(v["n"] for v in ev["by_length"].values()) == 4
    assert len(ev["completions"]) == 4 and all(isinstance(c, str) for c in ev["completions"])
