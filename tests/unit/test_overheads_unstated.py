"""What a story leaves unstated (cfsim.overheads.unstated): the reference level solved, the headline
as a curve over a free unknown, and the mechanism that curve shows for 58 Tech's push service."""
from __future__ import annotations

import pandas as pd
import pytest

from cfsim.overheads.unstated import crossing, runtime_share, solve_for_level, unstated_sweep
from cfsim.scenario import load_scenario


def small_open(**over):
    base = {"host": {"cpus": 4}, "cgroup": {"cpu_limit": 2.0},
            "go": {"gomaxprocs": 2, "live_heap_mb": 16.0},
            "workload": {"kind": "open", "arrivals": "fixed", "rate_per_s": 1000.0, "cpu_ms_per_request": 0.2,
                         "alloc_kb_per_request": 2.0},
            "run": {"duration_s": 1.0, "warmup_s": 0.2}}
    return load_scenario(base, list(over.items()))


def test_solve_for_level_reaches_the_stated_level_and_refuses_an_unreachable_one():
    sc = small_open()
    rate, s = solve_for_level(sc, 0.5)
    assert s["cpu_usage_cores"] == pytest.approx(0.5, rel=0.01)
    # the runtime's and the server path's costs come on top of 0.2 ms a request: fewer than 2,500/s
    assert 1500.0 < rate < 2500.0
    with pytest.raises(ValueError, match="level must be > 0"):
        solve_for_level(sc, 0.0)
    # at and above the 2-core limit usage saturates: no rate gives 2.5 cores
    with pytest.raises(ValueError, match="did not reach"):
        solve_for_level(sc, 2.5, max_iter=4)


def test_solve_for_level_brackets_a_metric_that_swings_the_fixed_point(monkeypatch):
    """A metric that grows faster than its key sends the fixed-point steps around the level and
    away (1000 -> 2000 -> 500 -> 8000 ...); the steps after them interpolate within the bracket
    those steps found."""
    import cfsim.overheads.unstated as unstated

    def cubic(sc):
        return {"cpu_usage_cores": 0.5 * (sc["workload.rate_per_s"] / 1000.0) ** 3}

    monkeypatch.setattr(unstated, "_simulate", cubic)
    rate, s = solve_for_level(small_open(), 1.0)
    assert s["cpu_usage_cores"] == pytest.approx(1.0, rel=0.01)
    assert rate == pytest.approx(1000.0 * 2 ** (1 / 3), rel=0.005)


def test_crossing_interpolates_and_says_none_outside_the_samples():
    df = pd.DataFrame({"x": [1, 8, 16, 32], "y": [1.0, 1.4, 2.8, 5.2]})
    assert crossing(df, "x", "y", 2.1) == pytest.approx(12.0)
    assert crossing(df, "x", "y", 9.0) is None
    assert runtime_share({"user_cpu_fraction": 0.25}) == pytest.approx(0.75)
    assert runtime_share({}) is None


def test_58tech_ratio_grows_with_the_goroutines_a_push_readies():
    # GOMAXPROCS 8 pinned at the story's 19 % of the 8-core limit (the rate solved), GOMAXPROCS 32
    # at that rate: with one goroutine a push the runtime adds a few per cent, with sixteen
    # (a push written to sixteen subscribers' connections) every readied goroutine wakes an M that
    # searches 32 Ps (proc.go wakep, findRunnable, stealWork) and the CPU multiplies. A model of
    # usage as min(demand, limit) gives 1.0 at both, and so does any model whose runtime cost
    # does not grow with the Ps searched per wake-up.
    df = unstated_sweep("push-58tech", ["go.gomaxprocs=8"], ["go.gomaxprocs=32"], 0.19 * 8,
                        "workload.fanout", [1, 16], overrides=["run.duration_s=1.0", "run.warmup_s=0.25"])
    one, sixteen = df.iloc[0], df.iloc[1]
    assert one["reference_cpu_cores"] == pytest.approx(1.52, rel=0.01)
    assert sixteen["reference_cpu_cores"] == pytest.approx(1.52, rel=0.01)
    assert one["cpu_ratio"] < 1.2
    # 1.78 at the defaults (2026-12-06: sched.lock's contenders the Ms in the scheduler; above 2 when
    # they were the busy Ps), against a naive model's 1.0 and one goroutine a push's < 1.2
    assert sixteen["cpu_ratio"] > 1.5
    assert sixteen["other_runtime_share"] > sixteen["reference_runtime_share"] + 0.2
    assert sixteen["other_thread_wakes_per_s"] > 1.8 * sixteen["reference_thread_wakes_per_s"]
    # the same work is done at both settings: the limit (8 cores) does not bind at GOMAXPROCS 32 here
    assert sixteen["other_throughput_per_s"] == pytest.approx(sixteen["reference_throughput_per_s"], rel=0.02)
