"""case_grid: a folded grid runs every case and a failure names each failing case."""

from __future__ import annotations

import pytest
from case_grid import MAX_LISTED, check_each, grid


def test_grid_is_the_product_last_axis_fastest():
    assert list(grid(a=[1, 2], b="xy")) == [
        {"a": 1, "b": "x"},
        {"a": 1, "b": "y"},
        {"a": 2, "b": "x"},
        {"a": 2, "b": "y"},
    ]
    assert list(grid(a=[1], b=[])) == []


def test_every_case_runs_and_the_count_comes_back():
    seen = []
    assert check_each(lambda a, b: seen.append((a, b)), grid(a=[1, 2, 3], b=[0, 1])) == 6
    assert seen == [(a, b) for a in (1, 2, 3) for b in (0, 1)]


def _check(world_size: int, numel: int) -> None:
    assert numel % world_size == 0, "not divisible"


def test_a_failure_names_each_failing_case_and_keeps_the_assertion_text():
    with pytest.raises(AssertionError) as caught:
        check_each(_check, grid(world_size=[2, 3], numel=[4, 7]))
    message = str(caught.value)
    assert message.startswith("3 of 4 cases failed:\n")
    assert "world_size=2, numel=7: AssertionError: not divisible\n    assert (7 % 2) == 0\n" in message
    assert "world_size=3, numel=7: " in message and "world_size=2, numel=4" not in message
    assert isinstance(caught.value.__cause__, AssertionError)


def test_did_not_raise_and_other_exceptions_are_failures_too():
    def check(n: int) -> None:
        if n == 0:
            with pytest.raises(ValueError):
                pass
        else:
            raise KeyError(n)

    with pytest.raises(AssertionError, match=r"n=0: Failed: DID NOT RAISE .*\nn=1: KeyError: 1"):
        check_each(check, grid(n=[0, 1]))


def test_long_failure_lists_are_cut():
    with pytest.raises(AssertionError, match=rf"and {25 - MAX_LISTED} more$"):
        check_each(_check, grid(world_size=[2], numel=range(1, 50, 2)))


def test_a_skip_inside_a_case_is_not_swallowed():
    def check(n: int) -> None:
        pytest.skip("no GPU")

    with pytest.raises(pytest.skip.Exception):
        check_each(check, grid(n=[1]))
