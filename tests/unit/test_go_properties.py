"""Properties of the Go process model that must hold for any parameters."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cfsim.scenario import load_scenario
from cfsim.simulation import simulate

CLASSES = ("user", "sched", "gc_assist", "gc_dedicated", "gc_idle", "gc_pause")


def _scenario(kind, cpus, limit, P, cost_ms, workers, alloc_kb, backlog, rate, dur=1.0):
    wl = {"kind": kind}
    if kind == "stream":
        wl.update(rate_per_s=rate, cpu_ms_per_item=cost_ms, workers=workers, alloc_kb_per_item=alloc_kb,
                  initial_backlog=backlog)
    elif kind == "closed":
        wl.update(clients=workers, fanout=max(1, workers // 2), cpu_ms_per_request=cost_ms * 4,
                  alloc_kb_per_request=alloc_kb * 4)
    else:
        wl.update(rate_per_s=rate / 10, fanout=max(1, workers // 3), cpu_ms_per_request=cost_ms * 4,
                  alloc_kb_per_request=alloc_kb * 4)
    raw = {"host": {"cpus": cpus}, "cgroup": {}, "go": {"gomaxprocs": P, "live_heap_mb": 2.0, "version": "1.22"},
           "workload": wl, "run": {"duration_s": dur, "seed": 1}}
    if limit is not None:
        raw["cgroup"]["cpu_limit"] = limit
    return load_scenario(raw)


params = dict(
    kind=st.sampled_from(["stream", "closed", "open"]),
    cpus=st.integers(1, 12),
    limit=st.one_of(st.none(), st.floats(0.1, 6.0).map(lambda x: round(x, 2))),
    P=st.integers(1, 16),
    cost_ms=st.floats(0.05, 2.0),
    workers=st.integers(1, 12),
    alloc_kb=st.floats(0.0, 64.0),
    backlog=st.integers(0, 3000),
    rate=st.floats(100.0, 4000.0),
)


@settings(max_examples=20, deadline=None)
@given(**params)
def test_cpu_time_is_conserved(kind, cpus, limit, P, cost_ms, workers, alloc_kb, backlog, rate):
    """P-time: user + GC + scavenger + idle = GOMAXPROCS x the wall time its published counters cover (the
    runtime's accounting, throttled time counted as running); real CPU: user + scheduler + GC = the cgroup's usage, up to the park
    and wake costs Ms still owe (charged at their next run)."""
    r = simulate(_scenario(kind, cpus, limit, P, cost_ms, workers, alloc_kb, backlog, rate))
    s = r.summary
    total = s["go_cpu_classes_total_cpu_seconds_total"]
    # over the span the runtime's published counters cover (mark terminations), at most the window
    assert 0.0 <= s["go_cpu_classes_span_s"] <= 1.0 + 1e-9
    assert total == pytest.approx(P * s["go_cpu_classes_span_s"], rel=1e-9, abs=1e-9)
    parts = (s["go_cpu_classes_user_cpu_seconds_total"] + s["go_cpu_classes_gc_total_cpu_seconds_total"]
             + s["go_cpu_classes_scavenge_total_cpu_seconds_total"] + s["go_cpu_classes_idle_cpu_seconds_total"])
    assert parts == pytest.approx(total, rel=1e-9)
    for k in ("user", "gc_total", "idle", "gc_mark_assist", "gc_mark_dedicated", "gc_mark_idle", "gc_pause",
              "scavenge_assist", "scavenge_background"):
        assert s[f"go_cpu_classes_{k}_cpu_seconds_total"] >= -1e-9
    real = sum(s[f"cpu_real_{k}_s"] for k in CLASSES)
    usage = s["cpu_usage_cores"] * s["duration_s"]
    assert real == pytest.approx(usage, rel=1e-3, abs=1e-4)
    # never more CPU than the limit, the host, or GOMAXPROCS x wall allows (+ one period's
    # slack for the CFS silo/burst rules)
    cap = min(cpus, (limit or cpus) + 0.2)
    assert s["cpu_usage_cores"] <= cap + 1e-6


@settings(max_examples=20, deadline=None)
@given(cpus=st.integers(1, 12), limit=st.one_of(st.none(), st.floats(0.2, 6.0).map(lambda x: round(x, 2))),
       P=st.integers(1, 16), cost_ms=st.floats(0.05, 1.0), workers=st.integers(1, 12))
def test_throughput_never_exceeds_capacity(cpus, limit, P, cost_ms, workers):
    """A saturated stream (a large backlog) consumes at most min(limit, P, cpus, workers) / cost."""
    dur = 1.0
    sc = _scenario("stream", cpus, limit, P, cost_ms, workers, 4.0, backlog=int(20 * dur / (cost_ms * 1e-3)),
                   rate=100.0, dur=dur)
    s = simulate(sc).summary
    par = min(limit if limit is not None else cpus, P, cpus, workers)
    # the first CFS period may run on a full quota plus the silo slack of each CPU
    slack = 0.0 if limit is None else 0.005 * min(cpus, P) / dur
    bound = (par + slack) / (cost_ms * 1e-3)
    assert s["throughput_per_s"] <= bound * 1.001 + 1
    # and a saturated stream is not far below it either (GC and scheduler overheads, throttling)
    assert s["throughput_per_s"] >= 0.5 * min(limit if limit is not None else cpus, P, cpus, workers) \
        / (cost_ms * 1e-3) - 1
