"""The ThinkMerge arithmetic example's question generator (examples/thinkmerge_arithmetic.py): answers are right,
questions are distinct and exclude the dev split, and a task with too few distinct questions raises instead of
looping forever."""

import re
import sys
from pathlib import Path

import pytest


sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
thinkmerge_arithmetic = pytest.importorskip("thinkmerge_arithmetic")
make_questions = thinkmerge_arithmetic.make_questions


@pytest.mark.parametrize("task", ["add1", "add21", "add2", "add3", "mul1", "sub1"])
def test_answers_are_the_arithmetic_and_questions_avoid_the_dev_split(task):
    dev = make_questions(task, 32, seed=123)
    test = make_questions(task, 40, seed=2026, exclude={q for q, _ in dev})
    assert not {q for q, _ in dev} & {q for q, _ in test}
    assert len({q for q, _ in test}) == 40
    for question, answer in dev + test:
        expression = re.fullmatch(r"What is (.+)\?", question).group(1)
        assert int(answer) == eval(expression)  # our own generated "a op b" strings


def test_a_task_with_too_few_distinct_questions_raises():
    dev = make_questions("sub1", 32, seed=123)
    with pytest.raises(ValueError, match="41.*40 distinct sub1"):
        make_questions("sub1", 41, seed=2026, exclude={q for q, _ in dev})
    with pytest.raises(ValueError, match="`task`"):
        make_questions("div1", 1, seed=0)
