"""The program's heap beyond its twin's, from a grid's calibration runs (cfsim.validation.normalise)."""
from __future__ import annotations

import pytest

from cfsim.scenario import load_scenario
from cfsim.validation.normalise import extra_marked_mb

MiB = 1 << 20


def _scenario(**go):
    return load_scenario({"go": {"gogc": 100, **go}})


def test_the_mean_goal_not_the_last_cycle_gives_the_extra_heap():
    # the last cycle's marked heap swings with what the mutators allocated during that mark;
    # the mean goal over the run is marked x (1 + GOGC/100) on average
    obs = {"gc_heap_goal_mean_bytes": 46 * MiB, "gc_heap_live_bytes": 24 * MiB}
    sim = {"gc_heap_goal_mean_bytes": 44 * MiB, "gc_heap_live_bytes": 18 * MiB}
    assert extra_marked_mb(obs, sim, _scenario()) == pytest.approx(1.0)
    assert extra_marked_mb(obs, sim, _scenario(gogc=200)) == pytest.approx(2 / 3)


def test_without_a_gogc_goal_the_last_live_heap_is_the_fallback():
    obs = {"gc_heap_goal_mean_bytes": 30 * MiB, "gc_heap_live_bytes": 20 * MiB}
    sim = {"gc_heap_goal_mean_bytes": 28 * MiB, "gc_heap_live_bytes": 17 * MiB}
    assert extra_marked_mb(obs, sim, _scenario(gogc=-1, gomemlimit_mb=32)) == pytest.approx(3.0)
    assert extra_marked_mb(obs, sim, _scenario(gomemlimit_mb=32)) == pytest.approx(3.0)
    assert extra_marked_mb({}, sim, _scenario()) is None
    assert extra_marked_mb({"gc_heap_live_bytes": 20 * MiB}, {"gc_heap_live_bytes": None}, _scenario()) is None
