"""The pacer expects a cycle to scan what the last one scanned (``revise`` in
``src/runtime/mgcpacer.go``: ``scanWorkExpected = lastHeapScan + lastStackScan + globalsScan``).
A cycle that scans more, because the heap was still being built when the last cycle ended,
extrapolates its goal from that expectation to the scannable heap (``extHeapGoal``, capped at the
hard goal ``(1 + GOGC/100) x goal``) and lets the heap run past the goal before the assists catch
up; objects allocated during the mark count as marked, so the next goal is higher too. This is how
the lab's 256 MiB stream is OOM-killed under an 800 MiB limit in its first seconds (`gc-oom-edge`:
a goal of 331 MiB, a heap of 462 MiB at the mark's end, 438 MiB marked, the next goal 876 MiB).
A pacer that knows each cycle's own scan work (``go.revise_last_scan = false``, the model's rule
before 2026-12-07) ends every cycle within revise's 10 % overshoot of its goal."""
from __future__ import annotations

import pytest

from cfsim.scenario import load_scenario
from cfsim.simulation import simulate

MiB = 1 << 20

# gc-oom-edge's stream: 64 KiB of garbage a record, a 1-core limit, GOMAXPROCS 2, GOGC 100, the
# live heap built at start-up (smaller here, so the test is quick)
STREAM = {"host": {"cpus": 2}, "cgroup": {"cpu_limit": 1.0},
          "go": {"gomaxprocs": 2, "live_heap_mb": 64.0, "heap_built_at_start": True},
          "workload": {"kind": "stream", "workers": 8, "cpu_ms_per_item": 0.05, "alloc_kb_per_item": 64.0},
          "run": {"duration_s": 4.0, "warmup_s": 0.0, "seed": 1}}


@pytest.fixture(scope="module")
def cycles():
    return {on: simulate(load_scenario(STREAM, [f"go.revise_last_scan={str(on).lower()}"])).gc_cycles
            for on in (False, True)}


def _over_goal(c):
    return c["heap_end_bytes"] / c["goal_bytes"]


def test_a_cycle_that_scans_more_than_the_last_runs_past_its_goal(cycles):
    on = cycles[True]
    grew = on["marked_bytes"] > 1.5 * on["marked_bytes"].shift(1)
    # the build's cycles, each scanning more than the one before, overshoot beyond revise's 10 %
    assert _over_goal(on[grew]).max() > 1.15
    # so each build cycle marks more than twice the last one's heap (GOGC 100's doubling plus
    # the objects allocated black), where a pacer that knows its work about doubles it
    growth = {k: (c["marked_bytes"] / c["marked_bytes"].shift(1))[c["marked_bytes"] < 60 * MiB].iloc[1:]
              for k, c in cycles.items()}
    assert growth[True].median() > 2.2
    assert growth[False].median() < 2.15


def test_a_pacer_that_knows_its_scan_work_stays_within_the_overshoot(cycles):
    assert _over_goal(cycles[False]).max() <= 1.1 + 0.02


def test_in_the_steady_state_both_pace_to_the_goal(cycles):
    for c in cycles.values():
        steady = c[c["run_t_s"] > 1.0]
        assert len(steady) >= 3
        assert _over_goal(steady).max() <= 1.1 + 0.02
