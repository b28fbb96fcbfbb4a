"""A process that allocates its live heap at start-up enters its run remembering that build: the
pacer's cons/mark is the maximum of its last five measurements (``mgcpacer.go``, ``endCycle``), the
build's cycles measure a high one, and the next four cycles start at the trigger's lower bound
(45/64 of the way from the marked heap to the goal, ``trigger``) before the steady state's.
A fluid model of the GC, or a twin that starts in its steady state, has every cycle at one
trigger."""
from __future__ import annotations

import pytest

from cfsim.goruntime import gcpacer
from cfsim.scenario import load_scenario
from cfsim.simulation import simulate

MiB = 1 << 20

# a light open service: 1,000 requests/s x 0.2 ms, 6 KiB a request, a 16 MiB live heap
SERVICE = {"host": {"cpus": 2}, "go": {"gomaxprocs": 2, "live_heap_mb": 16.0},
           "workload": {"kind": "open", "arrivals": "fixed", "rate_per_s": 1000.0, "cpu_ms_per_request": 0.2},
           "run": {"duration_s": 20.0, "warmup_s": 0.0, "seed": 3}}


def _trigger_fractions(cycles):
    """Each cycle's trigger as a fraction of its runway: (triggered - last marked) / (goal - last marked)."""
    prev = cycles["marked_bytes"].shift(1)
    return ((cycles["triggered_bytes"] - prev) / (cycles["goal_bytes"] - prev)).iloc[1:]


@pytest.fixture(scope="module")
def runs():
    return {built: simulate(load_scenario(SERVICE, [f"go.heap_built_at_start={str(built).lower()}"]))
            for built in (False, True)}


def test_the_build_runs_its_own_cycles_from_the_heap_minimum(runs):
    built = runs[True].gc_cycles
    first = built.iloc[0]
    # the first goal is the heap minimum (4 MiB at GOGC 100), reached within the build's first ms
    assert first["goal_bytes"] == gcpacer.DEFAULT_HEAP_MINIMUM
    assert first["run_t_s"] < 0.01
    during = built[built["goal_bytes"] < 30 * MiB]
    assert len(during) >= 2
    # from then on every cycle marks the whole live heap
    after = built[built["run_t_s"] > 0.5]
    assert (after["marked_bytes"] >= 16 * MiB).all()
    # a steady-state start has no such cycles: its first goal is twice the live heap
    assert runs[False].gc_cycles.iloc[0]["goal_bytes"] > 32 * MiB


def test_four_cycles_after_the_build_start_at_the_lower_bound_then_the_steady_state_returns(runs):
    built = runs[True].gc_cycles
    fractions = _trigger_fractions(built[built["marked_bytes"].shift(1) >= 16 * MiB])
    lower = gcpacer.MIN_TRIGGER_RATIO_NUM / gcpacer.TRIGGER_RATIO_DEN
    upper = gcpacer.MAX_TRIGGER_RATIO_NUM / gcpacer.TRIGGER_RATIO_DEN
    assert len(fractions) >= 7
    # the build's measurement is still in the history: lower bound
    head = fractions.iloc[:3]
    assert head.tolist() == pytest.approx([lower] * 3, abs=0.01)
    # once it has left the history the service's own light allocation puts the trigger near the top
    assert fractions.iloc[-2:].min() > upper - 0.03
    steady = _trigger_fractions(runs[False].gc_cycles)
    assert steady.min() > upper - 0.03
    # and so the built process runs more cycles in the same 20 s
    assert len(built[built["run_t_s"] > 0.5]) > len(runs[False].gc_cycles)
