"""A Go M woken beside the M that wakes it (host.wake_affine_share) and taking its CPU at once
(host.wake_preempt_share), as the lab's VM does with about half of them (cfsim.lab.wakeplace,
docs/params/lab-host-wakeplace.toml). At the end of the sweep-termination stop,
startTheWorldWithSema takes the pause's end only after it has woken the Ms of the Ps with work
(src/runtime/proc.go); a woken M that takes the coordinator's CPU holds the pause open until the
coordinator runs again, and gcStart's finishGCTransition counts that span as GC time on every P
(src/runtime/mgclimit.go). The lab's execution traces show it (cfsim.io.gotrace.StwPhases): the
restart takes 8-13 us when no woken M runs first, 70-670 us when one does (16 % of the
sweep-termination stops at GOMAXPROCS 2, 58-59 % at 8, 89-92 % at 32, lab/cmd/stwbench)."""
from __future__ import annotations

import pytest

from cfsim.scenario import load_scenario
from cfsim.simulation import simulate

#: the lab's service at 60 % of one core on 2 CPUs, with a GC cycle about every 0.4 s
SERVICE = ["host.cpus=2", "host.cpu_sharing=slices", "cgroup.cpu_limit=1", "workload.kind=open",
           "workload.rate_per_s=1500", "workload.cpu_ms_per_request=0.4", "workload.alloc_kb_per_request=16",
           "go.live_heap_mb=16", "run.duration_s=6", "run.warmup_s=1"]


def _run(gomaxprocs: int, affine: float, preempt: float) -> dict:
    return simulate(load_scenario("cpu-bound-threads", SERVICE + [
        f"go.gomaxprocs={gomaxprocs}", f"host.wake_affine_share={affine}",
        f"host.wake_preempt_share={preempt}"])).summary


def _pause_per_cycle_ms(s: dict) -> float:
    return s["gc_pause_total_s"] / s["gc_cycles"] * 1e3


def test_a_woken_m_that_takes_the_coordinators_cpu_holds_the_sweep_termination_pause_open():
    off, packed = _run(8, 0.0, 0.0), _run(8, 1.0, 1.0)
    assert off["gc_cycles"] >= 8 and packed["gc_cycles"] >= 8
    # the unpacked restart ends at the coordinator's decision (tens of us); packed and preempting,
    # the coordinator waits for the Ms it woke: a multiple of it
    assert _pause_per_cycle_ms(packed) > 2 * _pause_per_cycle_ms(off)
    # the woken Ms' switches cost CPU: the packed service uses more for the same requests
    assert packed["throughput_per_s"] == pytest.approx(off["throughput_per_s"], rel=0.01)
    assert packed["cpu_usage_cores"] > off["cpu_usage_cores"]


def test_one_p_has_no_m_to_wake_and_no_pause_to_hold():
    # at GOMAXPROCS 1 the coordinator wakes nobody at the restart: the pause is the same
    assert _pause_per_cycle_ms(_run(1, 1.0, 1.0)) == pytest.approx(_pause_per_cycle_ms(_run(1, 0.0, 0.0)), rel=0.05)
