"""A live heap built before the load, as the lab's workload builds it (``buildLiveHeap`` before
``/ready``, lab/cmd/workload/heap.go; ``go.heap_build = "before-load"``): a ``[]*node`` slice of
one pointer a node first (1/9 of the heap, one allocation), then the 64-byte nodes with their
pointers still nil, and the load only once the heap is built. The build's first GC cycle starts at
the slice's size, not at the 4 MiB heap minimum; its marks scan a heap whose pointers lead nowhere
yet, so none of it misses the cache; and no record arrives before the build is done. A twin that
builds beside its load (``"beside-load"``, the default) starts its cycles at 4 MiB and marks the
build at the linked heap's price while the records flow."""
from __future__ import annotations

import pytest

from cfsim.scenario import load_scenario
from cfsim.simulation import simulate
from cfsim.workloads._go import LAB_BUILD_SLICE_FRACTION

MiB = 1 << 20
LIVE_MB = 256.0

# gc-oom-edge's stream without its memory limit (not saturated here, so the records' arrivals
# show when the load starts): 64 KiB of garbage a record, a 1-core limit, GOMAXPROCS 2, GOGC 100, a
# 256 MiB heap built at start-up (beyond the host's 32 MiB cache, so the linked heap's scan misses)
STREAM = {"host": {"cpus": 2}, "cgroup": {"cpu_limit": 1.0},
          "go": {"gomaxprocs": 2, "live_heap_mb": LIVE_MB, "heap_built_at_start": True,
                 "gc_scan_miss_factor": 2.15},
          "workload": {"kind": "stream", "rate_per_s": 5000.0, "workers": 8, "cpu_ms_per_item": 0.05,
                       "alloc_kb_per_item": 64.0},
          "run": {"duration_s": 4.0, "warmup_s": 0.0, "seed": 1}}
RATE = STREAM["workload"]["rate_per_s"]


@pytest.fixture(scope="module")
def runs():
    return {mode: simulate(load_scenario(STREAM, [f"go.heap_build={mode}"])) for mode in ("beside-load", "before-load")}


def _build_cycles(res):
    c = res.gc_cycles
    return c[c["marked_bytes"] < 0.9 * LIVE_MB * MiB]


def test_the_first_cycle_starts_at_the_slice(runs):
    first = runs["before-load"].gc_cycles.iloc[0]
    slice_bytes = LIVE_MB * MiB * LAB_BUILD_SLICE_FRACTION
    assert first["triggered_bytes"] >= slice_bytes
    assert first["triggered_bytes"] < slice_bytes + 4 * MiB
    # beside the load the build climbs from the heap minimum
    assert runs["beside-load"].gc_cycles.iloc[0]["triggered_bytes"] < 8 * MiB


def test_no_record_arrives_before_the_heap_is_built(runs):
    def start_s(res):
        # when the records began to arrive, from how many had arrived by t = 1 s
        ws = res.workload_series.set_index("t_s")
        return 1.0 - ws.loc[1.0, "records_arrived_total"] / RATE
    build = _build_cycles(runs["before-load"])
    assert len(build) >= 2
    # after the build's last cycle began (the heap was still being built then)
    assert start_s(runs["before-load"]) > build["run_t_s"].iloc[-1] - build["mark_ms"].iloc[-1] / 1e3
    # beside the load the records arrive from t = 0 (fetched every 20 ms)
    assert start_s(runs["beside-load"]) == pytest.approx(0.0, abs=0.025)


def test_the_unlinked_build_marks_cheaper_a_byte(runs):
    # P-time of marking a MiB in the build's cycles: no cache misses and no load beside them
    def ms_per_mib(res):
        b = _build_cycles(res)
        b = b[b["marked_bytes"] > 20 * MiB]
        return ((b["assist_cpu_ms"] + b["background_cpu_ms"] + b["idle_cpu_ms"]).sum()
                / (b["marked_bytes"].sum() / MiB))
    assert ms_per_mib(runs["before-load"]) < 0.75 * ms_per_mib(runs["beside-load"])


def test_the_steady_state_is_the_same(runs):
    # once built and linked, both scan the same heap at the same price
    steady = {k: r.gc_cycles[r.gc_cycles["run_t_s"] > 1.5] for k, r in runs.items()}
    assert all(len(s) >= 2 for s in steady.values())
    a, b = (s["marked_bytes"].median() for s in steady.values())
    assert b == pytest.approx(a, rel=0.1)


def test_a_cycle_started_past_its_goal_keeps_the_minimum_runway(runs):
    # heapGoalInternal (src/runtime/mgcpacer.go): during a cycle the goal is at least the heap it
    # was triggered at plus minRunway, so the slice's cycle (GOGC goal: the 4 MiB heap minimum)
    # reports and paces to a goal above its 28 MiB trigger, as the lab's gctrace shows (29 MB goal)
    from cfsim.goruntime import gcpacer
    first = runs["before-load"].gc_cycles.iloc[0]
    assert first["goal_bytes"] >= first["triggered_bytes"] + gcpacer.MIN_RUNWAY
    assert first["goal_bytes"] > 6 * gcpacer.DEFAULT_HEAP_MINIMUM
    # its assists do not take the whole mark, as a goal behind the heap would make them
    assert first["assist_cpu_ms"] < 0.5 * first["mark_ms"]
