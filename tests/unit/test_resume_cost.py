"""A process's cost of resuming after idling (host.resume_cold_us, cfsim.kernel.resume): charged once
per busy spell, to the M that takes the first P of an idle process, by how long nothing of the process
ran; so a request costs more the longer the gap before it, and no more at GOMAXPROCS 8 than at 1
although more Ms wake there (the kernel's per-thread wake-up cost, host.wakeup_cold_us, grows with
them instead)."""
from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cfsim.kernel.resume import ResumeCost
from cfsim.scenario import load_scenario
from cfsim.simulation import simulate
from cfsim.validation.metrics import METRICS

COLD_US, TAU_MS = 80.0, 0.5
#: the open service on a 2-core host, well under its limit, fixed spacing
OPEN = ["host.cpus=2", "workload.kind=open", "workload.arrivals=fixed", "workload.cpu_ms_per_request=0.4",
        "workload.server_cpu_us_per_request=40", "cgroup.cpu_limit=2", "run.duration_s=3", "run.warmup_s=0.5"]


def _run(gomaxprocs: int, rate: int, *extra: str) -> dict:
    return simulate(load_scenario("cpu-bound-threads", OPEN + [
        f"go.gomaxprocs={gomaxprocs}", f"workload.rate_per_s={rate}", *extra])).summary


def _extra_us_per_request(gomaxprocs: int, rate: int, *cost: str) -> float:
    off, on = _run(gomaxprocs, rate), _run(gomaxprocs, rate, *cost)
    assert on["throughput_per_s"] == pytest.approx(off["throughput_per_s"], rel=0.01)
    return (on["cpu_usage_cores"] - off["cpu_usage_cores"]) / off["throughput_per_s"] * 1e6


RESUME = (f"host.resume_cold_us={COLD_US}", f"host.resume_cold_ms={TAU_MS}")


@given(st.floats(0, 1e9), st.floats(0, 1e9), st.floats(1, 1e6), st.floats(1e3, 1e8))
def test_the_cost_grows_with_the_idle_time_and_never_beyond_cold(a, b, cold, tau):
    r = ResumeCost(cold_ns=cold, tau_ns=tau)
    lo, hi = sorted((a, b))
    assert 0 <= r.cost_ns(lo) <= r.cost_ns(hi) <= cold


def test_a_request_after_a_long_gap_pays_the_whole_cost_and_one_after_a_short_gap_less():
    slow = _extra_us_per_request(1, 200, *RESUME)     # ~4.5 ms idle before each request
    fast = _extra_us_per_request(1, 1600, *RESUME)    # ~0.15 ms
    assert slow == pytest.approx(COLD_US, rel=0.15)
    gap_ms = 1000 / 1600 - 0.45
    assert fast < 0.6 * slow
    assert fast == pytest.approx(COLD_US * -math.expm1(-gap_ms / TAU_MS), rel=0.5)


def test_once_per_busy_spell_however_many_ms_wake():
    sleeps = next(m for m in METRICS if m.name == "os_thread_sleeps_per_item")
    wakes = {g: sleeps.get(_run(g, 200)) for g in (1, 8)}
    assert wakes[8] > 2 * wakes[1]
    resume = {g: _extra_us_per_request(g, 200, *RESUME) for g in (1, 8)}
    assert resume[8] == pytest.approx(resume[1], rel=0.2)
    # the kernel's per-thread cold wake-up with the same curve: every M woken onto an idle CPU pays
    per_wake = {g: _extra_us_per_request(g, 200, f"host.wakeup_cold_us={COLD_US}", f"host.wakeup_cold_ms={TAU_MS}")
                for g in (1, 8)}
    assert per_wake[8] > 1.3 * per_wake[1]


def test_off_by_default_and_deterministic():
    assert _run(2, 400) == _run(2, 400, "host.resume_cold_us=0")
    assert _run(2, 400, *RESUME) == _run(2, 400, *RESUME)
