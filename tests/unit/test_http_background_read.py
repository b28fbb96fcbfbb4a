"""net/http's background read (workload.http_background_read): per request one goroutine more is
created and two more are readied, each with a wakep; the Ms it wakes grow with the idle Ps (a
spinning M that finds the reader wakes the next one), while the server's CPU and the response's
latency stay as they were (src/net/http/server.go: startBackgroundRead, abortPendingRead)."""
from __future__ import annotations

import pytest

from cfsim.scenario import load_scenario
from cfsim.simulation import simulate
from cfsim.validation.metrics import METRICS

#: an open service at a third of a 2-core host, a wake-up that takes 25 us to reach its CPU
OPEN = ["host.cpus=2", "workload.kind=open", "workload.rate_per_s=600", "workload.arrivals=fixed",
        "workload.cpu_ms_per_request=0.4", "workload.server_cpu_us_per_request=40", "cgroup.cpu_limit=2",
        "host.wakeup_latency_us=25", "run.duration_s=2", "run.warmup_s=0.5"]


def _run(gomaxprocs: int, background_read: bool) -> dict:
    return simulate(load_scenario("cpu-bound-threads", OPEN + [
        f"go.gomaxprocs={gomaxprocs}", f"workload.http_background_read={str(background_read).lower()}"])).summary


def _wakes_per_request(s: dict) -> float:
    """The Ms woken per request, as validate reads a twin's (os_thread_sleeps_per_item)."""
    return next(m for m in METRICS if m.name == "os_thread_sleeps_per_item").get(s)


def test_the_reader_wakes_more_ms_where_more_ps_are_idle():
    without = {g: _wakes_per_request(_run(g, False)) for g in (2, 8)}
    with_it = {g: _wakes_per_request(_run(g, True)) for g in (2, 8)}
    # without it the wake-ups do not see the idle Ps beyond the first; the lab's Ms sleep about
    # one time more a request at GOMAXPROCS 8 than at 2 (data/lab/open-spread, threads)
    assert with_it[8] - with_it[2] > 0.5
    assert abs(without[8] - without[2]) < 0.2
    # and it takes none away where one P is idle (within 1 %: which M a netpoll batch waits for
    # moves a few wake-ups either way)
    assert with_it[2] >= without[2] * 0.99


def test_one_p_wakes_no_more_and_the_server_cpu_and_latency_stay():
    off, on = _run(1, False), _run(1, True)
    assert _wakes_per_request(on) == pytest.approx(_wakes_per_request(off), abs=0.02)
    assert on["cpu_usage_cores"] == pytest.approx(off["cpu_usage_cores"], rel=0.01)
    assert on["latency_p50_s"] == pytest.approx(off["latency_p50_s"], rel=0.02)
    assert on["throughput_per_s"] == pytest.approx(off["throughput_per_s"], rel=0.001)


def test_off_by_default_and_deterministic():
    base = simulate(load_scenario("cpu-bound-threads", OPEN + ["go.gomaxprocs=8"])).summary
    assert base == _run(8, False)
    assert _run(8, True) == _run(8, True)
