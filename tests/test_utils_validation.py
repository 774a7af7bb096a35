"""hfx.utils.validation: the one argument-check module (transformers' message template)."""

import math

import numpy as np
import pytest
import torch

from hfx.utils.validation import (
    check_bool,
    check_choice,
    check_finite_tensor,
    check_float,
    check_int,
    check_sequence,
    check_size_fits,
    check_str,
    check_token_ids,
)


def test_check_int_accepts_integer_likes_and_refuses_bools_and_fractions():
    assert check_int("n", 3) == 3
    assert check_int("n", np.int64(4)) == 4 and type(check_int("n", np.int64(4))) is int
    assert check_int("n", torch.tensor(5)) == 5
    assert check_int("n", 6.0) == 6
    for bad in (True, 2.5, "3", None, float("nan"), [1]):
        with pytest.raises(TypeError, match="`n` has to be an integer"):
            check_int("n", bad)
    with pytest.raises(ValueError, match=r"`size` has to be an integer >= 1 and <= 9, but is 0"):
        check_int("size", 0, minimum=1, maximum=9)
    with pytest.raises(ValueError, match="but is 10"):
        check_int("size", 10, minimum=1, maximum=9)


def test_check_float_template_nan_inf_and_bounds():
    with pytest.raises(ValueError, match=r"`top_p` has to be a finite float > 0 and <= 1, but is 2.0"):
        check_float("top_p", 2.0, minimum=0, maximum=1, strict_minimum=True)
    with pytest.raises(ValueError, match="`top_p`"):
        check_float("top_p", 0.0, minimum=0, maximum=1, strict_minimum=True)
    assert check_float("top_p", 1.0, minimum=0, maximum=1, strict_minimum=True) == 1.0
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(ValueError, match="`w`"):
            check_float("w", bad)
    assert check_float("w", float("inf"), finite=False) == math.inf
    with pytest.raises(ValueError):
        check_float("w", float("nan"), finite=False)
    assert check_float("w", np.float32(0.5)) == 0.5
    assert check_float("w", torch.tensor(0.25)) == 0.25
    assert check_float("w", 3) == 3.0
    for bad in (True, "0.5", None, [0.5], torch.ones(2)):
        with pytest.raises(TypeError, match="`w` has to be a finite float"):
            check_float("w", bad)
    with pytest.raises(ValueError, match="< 1"):
        check_float("p", 1.0, maximum=1, strict_maximum=True)


def test_check_bool_str_choice_sequence():
    assert check_bool("flag", np.bool_(True)) is True
    for bad in (0, 1, "yes", None):
        with pytest.raises(TypeError, match="`flag` has to be a bool"):
            check_bool("flag", bad)
    assert check_str("task", "add") == "add"
    with pytest.raises(TypeError, match="`task` has to be a string"):
        check_str("task", 123)
    with pytest.raises(ValueError, match="non-empty"):
        check_str("task", "  ")
    assert check_str("task", "", allow_empty=True) == ""
    assert check_choice("mode", "a", ("a", "b")) == "a"
    with pytest.raises(ValueError, match=r"`mode` has to be one of \['a', 'b'\], but is 'c'"):
        check_choice("mode", "c", ("a", "b"))
    with pytest.raises(ValueError):  # True is not taken for 1
        check_choice("k", True, (1, 2))
    with pytest.raises(ValueError):
        check_choice("k", torch.ones(3), (1, 2))
    assert check_sequence("xs", (1, 2), item_check=check_int, minimum=0) == [1, 2]
    with pytest.raises(TypeError, match=r"`xs\[1\]`"):
        check_sequence("xs", [1, "a"], item_check=check_int)
    with pytest.raises(TypeError, match="`xs` has to be a list"):
        check_sequence("xs", "ab")
    with pytest.raises(ValueError, match="at least 1"):
        check_sequence("xs", [], min_length=1)


def test_check_token_ids_and_finite_tensor_and_size():
    assert check_token_ids("ids", torch.tensor([1, 2]), 10) == [1, 2]
    assert check_token_ids("ids", 3, 10) == [3]
    with pytest.raises(ValueError, match=r"outside the vocabulary \[0, 10\): \[10\]"):
        check_token_ids("ids", [1, 10], 10)
    with pytest.raises(ValueError, match="outside"):
        check_token_ids("ids", [-1], None)
    with pytest.raises(ValueError, match="empty"):
        check_token_ids("ids", [], 10)
    x = torch.zeros(3)
    assert check_finite_tensor("x", x) is x
    x[1] = float("nan")
    with pytest.raises(ValueError, match="`x` has to hold finite values, but 1 of 3"):
        check_finite_tensor("x", x)
    with pytest.raises(ValueError, match="`a`"):
        check_finite_tensor("a", np.array([np.inf]))
    check_finite_tensor("ids", torch.tensor([1, 2]))
    assert check_size_fits("hidden_size", 10, limit_bytes=100) == 10
    with pytest.raises(ValueError, match="`hidden_size` asks for"):
        check_size_fits("hidden_size", 10**14)
