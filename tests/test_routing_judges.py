"""Tests for hfx.routing.judges: the cheap offline judges of the real-judge router experiment (issue 15 item 3)."""

import math

import pytest
import torch

from hfx.routing import (
    DocstringExampleJudge,
    LengthJudge,
    MeanLogProbJudge,
    NumericAnswerJudge,
    RandomRouter,
    ReferenceSimilarityJudge,
    RoutedRewardModel,
)
from hfx.routing.judges import docstring_examples, extract_final_number, run_python


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Natalia sold 48/2 = <<48/2=24>>24 clips.\n#### 72", 72.0),
        ("so the total is \\boxed{1,024}", 1024.0),
        ("The answer is $1,250.", 1250.0),
        ("Answer: -3.5 degrees", -3.5),
        ("first 12, then 7, finally 30 apples.", 30.0),  # last number when nothing is marked
        ("#### 5\nsome trailing chatter with 9", 5.0),  # the marked answer wins over a later number
        ("no digits at all", None),
    ],
)
def test_extract_final_number(text, expected):
    assert extract_final_number(text) == expected


def test_numeric_answer_judge_scores_declines_and_checks_lengths():
    judge = NumericAnswerJudge()
    out = judge(
        prompts=["q"] * 4,
        completions=["So 18 eggs.\nThe answer is 18.", "#### 20", "nothing", "The answer is 3."],
        answer=["... #### 18", "... #### 18", "#### 18", None],
    )
    assert out == [1.0, 0.0, 0.0, None]  # no number = wrong; no reference = declined
    assert judge(prompts=["q"], completions=["#### 18"]) == [None]  # no answer column at all
    with pytest.raises(ValueError, match="`answer` holds 1 values for 2 completions"):
        judge(prompts=["q", "q"], completions=["1", "2"], answer=["#### 1"])
    with pytest.raises(ValueError, match="`tolerance`"):
        NumericAnswerJudge(tolerance=-1)


def test_length_judge_counts_words():
    assert LengthJudge()(prompts=["q"] * 3, completions=["one two  three", "", [{"content": "a b"}]]) == [
        3.0,
        0.0,
        2.0,
    ]


def test_reference_similarity_is_the_cosine_to_the_reference():
    table = {"x": [1.0, 0.0], "y": [0.0, 2.0], "xy": [1.0, 1.0]}
    judge = ReferenceSimilarityJudge(lambda texts: [table[t] for t in texts])
    out = judge(prompts=["q"] * 3, completions=["x", "xy", "x"], reference=["x", "y", None])
    assert out[0] == pytest.approx(1.0)
    assert out[1] == pytest.approx(1 / math.sqrt(2))  # cos((1,1), (0,2))
    assert out[2] is None


def test_docstring_examples_parses_doctest_and_inline_layouts():
    doctest_prompt = 'def add(a, b):\n    """Add.\n    >>> add(1, 2)\n    3\n    >>> add(0, 0)\n    0\n    """\n'
    assert docstring_examples(doctest_prompt) == [("add(1, 2)", "3"), ("add(0, 0)", "0")]
    inline = 'def f(x):\n    """Examples:\n    f(2) ==> 4\n    f(3) \u279e 9.\n    other(1) == 2\n    """\n'
    assert docstring_examples(inline) == [("f(2)", "4"), ("f(3)", "9")]  # calls to other functions are ignored
    assert docstring_examples('def g():\n    """No examples."""\n') == []


def test_docstring_judge_runs_only_the_examples_in_a_subprocess():
    prompt = 'def add(a, b):\n    """Add.\n    >>> add(1, 2)\n    3\n    >>> add(2, 2)\n    4\n    """\n'
    judge = DocstringExampleJudge(timeout=3.0)
    out = judge(
        prompts=[prompt] * 4 + ["What is 2 + 2?"],
        completions=[
            "    return a + b\n",
            "    return 3\n",  # passes one example of two
            "    return a +\n",  # syntax error
            "    while True:\n        pass\n",  # killed by the timeout
            "4",
        ],
    )
    assert out == [1.0, 0.5, 0.0, 0.0, None]
    # examples with a wrong docstring expectation: the cheap judge is fooled, it does not see the full tests
    sneaky = 'def sq(x):\n    """Square.\n    >>> sq(3)\n    10\n    """\n'
    assert judge(prompts=[sneaky], completions=["    return x * x\n"]) == [0.0]


def test_run_python_is_isolated_and_times_out(tmp_path):
    ok, out = run_python("import os; print(os.getcwd())", timeout=5.0)
    assert ok and str(tmp_path) not in out
    assert run_python("raise SystemExit(3)")[0] is False
    assert run_python("import time; time.sleep(10)", timeout=0.5) == (False, "")


def test_mean_logprob_matches_a_manual_computation_and_ignores_padding():
    from hfx.testing import tiny_llama

    model, tok = tiny_llama(seed=0)
    judge = MeanLogProbJudge(model, tok, batch_size=2)
    prompts, completions = ["hello there", "a much longer prompt about cats and dogs"], ["fine thanks", "ok"]
    batched = judge(prompts=prompts, completions=completions)
    single = [judge(prompts=[p], completions=[c])[0] for p, c in zip(prompts, completions)]
    assert batched == pytest.approx(single, abs=1e-5)
    # manual: chat-formatted prompt, completion tokens scored only
    head = tok.apply_chat_template(
        [{"role": "user", "content": prompts[0]}], tokenize=False, add_generation_prompt=True
    )
    p = tok(head, add_special_tokens=False)["input_ids"]
    c = tok(completions[0], add_special_tokens=False)["input_ids"]
    ids = torch.tensor([p + c])
    with torch.no_grad():
        logps = torch.log_softmax(model(ids).logits[0, :-1], -1).gather(-1, ids[0, 1:, None]).squeeze(-1)
    assert batched[0] == pytest.approx(logps[len(p) - 1 :].mean().item(), abs=1e-5)
    with pytest.raises(ValueError, match="`batch_size`"):
        MeanLogProbJudge(model, tok, batch_size=0)


def test_routed_reward_model_passes_columns_and_counts_declines():
    router = RandomRouter(2, 4, arm_names=["numeric", "length"])
    routed = RoutedRewardModel(
        router,
        {"numeric": NumericAnswerJudge(), "length": LengthJudge()},
        encoder=lambda p, a, b: torch.nn.functional.normalize(torch.ones(len(p), 4), dim=-1),
        tie_eps=0.0,
        seed=0,
    )
    out = routed.route_and_score(
        ["q1", "q2"],
        ["The answer is 4.", "The answer is 4."],
        ["The answer is 5 for sure.", "The answer is 5 for sure."],
        row_kwargs_a={"answer": ["#### 4", None]},
        row_kwargs_b={"answer": ["#### 4", None]},
    )
    for k, arm in enumerate(out["arms"].tolist()):
        if router.arm_names[arm] == "numeric":
            # pair 0 is verified (a right, b wrong); pair 1 has no reference, so the verifier declines it
            assert bool(out["unscored"][k]) == (k == 1)
            if k == 0:
                assert (out["scores_a"][k].item(), out["scores_b"][k].item()) == (1.0, 0.0)
        else:
            assert (out["scores_a"][k].item(), out["scores_b"][k].item()) == (4.0, 6.0)
