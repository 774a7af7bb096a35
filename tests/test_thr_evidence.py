"""The THR evidence example's task and statistics helpers (examples/thr_evidence.py): the held-out split must not
leak question pairs into training, the reward must read the first integer, and the paired statistics must count
the right discordant pairs."""

import sys
from pathlib import Path

import numpy as np
import pytest


sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
thr_evidence = pytest.importorskip("thr_evidence")


@pytest.mark.parametrize("task", ["add1", "add12", "add21"])
def test_split_is_disjoint_and_prompts_are_distinct(task):
    train, held = thr_evidence.split_pairs(task)
    assert not set(train) & set(held)
    assert len(train) + len(held) == len(thr_evidence.task_pairs(task))
    rows = thr_evidence.make_rows(held, 200, seed=7)
    assert len({r["prompt"] for r in rows}) == 200
    for r in rows:
        a, b = map(int, r["pair"].split("+"))
        assert (a, b) in set(held)
        assert r["prompt"].endswith(f"\n{a} + {b} =") and r["answer"] == str(a + b)


def test_reward_reads_the_first_integer():
    rewards = thr_evidence.answer_reward(None, [" 12\n3", " 1 2", "x", " 12"], ["12", "12", "12", "13"])
    assert rewards == [1.0, 0.0, 0.0, 0.0]


def test_paired_binary_counts_discordant_pairs():
    a, b = np.array([1, 1, 0, 1, 0]), np.array([0, 1, 0, 0, 1])
    out = thr_evidence.paired_binary(a, b, clusters=np.arange(5))
    assert (out["a_only"], out["b_only"]) == (2, 1)
    assert out["diff"] == pytest.approx(0.2)
    assert out["mcnemar_p"] == pytest.approx(1.0)  # two-sided binomial, 2 of 3


def test_cluster_bootstrap_of_a_constant_is_the_constant():
    lo, hi = thr_evidence.cluster_bootstrap(np.full(6, 0.5), np.array([0, 0, 1, 1, 2, 2]))
    assert lo == pytest.approx(0.5) and hi == pytest.approx(0.5)
