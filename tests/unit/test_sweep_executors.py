"""map_in_order: the order of its arguments on any number of workers, in this process when small."""
from __future__ import annotations

import os

import pytest

from cfsim.sweep.executors import map_in_order


def _pid_and_square(x: int) -> tuple[int, int]:
    return os.getpid(), x * x


def _fail_on_three(x: int) -> int:
    if x == 3:
        raise ValueError("three")
    return x


def test_results_keep_the_order_of_the_arguments_in_a_pool():
    got = list(map_in_order(_pid_and_square, [(x,) for x in range(12)], workers=2))
    assert [sq for _, sq in got] == [x * x for x in range(12)]
    assert os.getpid() not in {pid for pid, _ in got}          # the pool did the work


def test_few_calls_stay_in_this_process_unless_workers_ask():
    got = list(map_in_order(_pid_and_square, [(x,) for x in range(3)]))
    assert {pid for pid, _ in got} == {os.getpid()}
    assert list(map_in_order(_pid_and_square, [], workers=2)) == []


def test_the_first_exception_is_raised():
    with pytest.raises(ValueError, match="three"):
        list(map_in_order(_fail_on_three, [(x,) for x in range(6)], workers=2))
