"""The lab's per-kind facts (cfsim.lab.kinds): one row per workload kind, a clear error for an
unknown one, and the queries, launch and notes built from them unchanged."""
from __future__ import annotations

import doctest
from pathlib import Path

import pytest

from cfsim.lab import kinds, launch, queries
from cfsim.lab.kinds import LAB_KINDS, lab_kind
from cfsim.scenario import load_scenario
from cfsim.workloads.kinds import kind_names


def test_the_table_covers_exactly_the_workload_kinds():
    missing = set(kind_names()) - set(LAB_KINDS)
    unknown = set(LAB_KINDS) - set(kind_names())
    assert not missing, f"workload kinds without their lab facts: add them to LAB_KINDS in cfsim/lab/kinds.py: {missing}"
    assert not unknown, f"LAB_KINDS in cfsim/lab/kinds.py names kinds cfsim.workloads.kinds does not: {unknown}"


def test_an_unknown_kind_names_the_known_ones():
    with pytest.raises(ValueError, match="the lab has no Go workload for kind 'batch'; "
                                         "it runs stream, single-thread, closed, open, threads"):
        lab_kind("batch")
    with pytest.raises(ValueError, match="no Go workload for kind 'batch'"):
        queries.raw_metrics("batch")


def test_the_facts_are_consistent():
    for name, k in LAB_KINDS.items():
        assert k.family in ("items", "requests", "bursts"), name
        assert k.done_metric in k.app_metrics, name
        assert set(k.always_exposed) <= set(k.app_metrics), name
        assert k.loadgen == (k.family == "requests"), name
    # the load generator has flags for exactly the kinds it drives
    assert set(launch.LOADGEN_FLAGS) == set(kinds.kinds_with(loadgen=True))
    assert kinds.kinds_with(load_fraction=True) == ("open",)


def test_module_doctests():
    assert doctest.testmod(kinds).failed == 0


# the per-kind tuples queries.py had before the table (copied as the expected values)
_APP = {
    "stream": ("cfsim_records_consumed_total", "cfsim_records_produced_total", "cfsim_backlog_records",
               "cfsim_lag_seconds"),
    "closed": ("cfsim_requests_total", "cfsim_loadgen_requests_total", "cfsim_loadgen_errors_total",
               "cfsim_loadgen_in_flight_requests"),
    "threads": ("cfsim_burns_total", "cfsim_burn_max_seconds"),
}
_APP["single-thread"] = _APP["stream"]
_APP["open"] = _APP["closed"] + ("cfsim_loadgen_dropped_total",)
_FAMILIES = {"stream": "items", "single-thread": "items", "closed": "requests", "open": "requests",
             "threads": "bursts"}
_HIST = {"items": ("cfsim_item_latency_seconds",),
         "requests": ("cfsim_loadgen_request_duration_seconds", "cfsim_request_duration_seconds"),
         "bursts": ("cfsim_burn_duration_seconds",)}
_DONE = {"stream": "cfsim_records_consumed_total", "single-thread": "cfsim_records_consumed_total",
         "closed": "cfsim_loadgen_requests_total", "open": "cfsim_loadgen_requests_total",
         "threads": "cfsim_burns_total"}
_NOTES = {"stream": "record arrival to end of processing", "single-thread": "same as stream",
          "closed": "client side (loadgen)", "open": "client side (loadgen)", "threads": "none; see burn_*"}
_SAMPLES = ["container_cpu_usage_seconds_total", "container_cpu_cfs_periods_total",
            "container_cpu_cfs_throttled_periods_total", "container_cpu_cfs_throttled_seconds_total",
            "process_cpu_seconds_total", "go_gc_cycles_total_gc_cycles_total",
            "go_cpu_classes_gc_total_cpu_seconds_total", "go_cpu_classes_user_cpu_seconds_total",
            "go_gc_heap_allocs_bytes_total", "go_gc_duration_seconds_sum"]


@pytest.mark.parametrize("kind", kind_names())
def test_queries_give_the_same_metric_names_as_before(kind):
    family = _FAMILIES[kind]
    k = lab_kind(kind)
    assert (k.family, k.app_metrics, k.latency_histograms, k.done_metric, k.latency_note) == (
        family, _APP[kind], _HIST[family], _DONE[kind], _NOTES[kind])
    assert queries.latency_histograms(kind) == _HIST[family]
    hist = tuple(m for h in _HIST[family] for m in (f"{h}_bucket", f"{h}_count", f"{h}_sum"))
    assert queries.raw_metrics(kind) == [*queries.CADVISOR, *_APP[kind], "cfsim_burn_calibration_rounds_per_cpu_ms",
                                         *hist, *queries.GO_RUNTIME, *queries.CPU_CLASSES, *queries.SCRAPE]
    assert queries.sample_metrics(kind) == _SAMPLES + [_DONE[kind]]
    rates = queries.rate_queries(kind, 5)
    assert rates["throughput_per_s"] == f"rate({_DONE[kind]}[5s])"
    quantiles = _HIST[family] + ("cfsim_go_sched_latencies_seconds",) + (
        ("cfsim_loadgen_send_lag_seconds",) if kind == "open" else ())
    names = list(rates)
    assert names[:names.index("throughput_per_s") + 1] == [
        "cpu_usage_cores", "cpu_limit_cores", "throttled_periods_ratio", "throttled_seconds_per_s",
        "process_cpu_cores", "gc_cycles_per_s", "gc_cpu_cores_runtime_metrics", "user_cpu_cores_runtime_metrics",
        "alloc_bytes_per_s", "memory_working_set_bytes", "gc_pause_seconds_per_s", "throughput_per_s"]
    assert names[names.index("throughput_per_s") + 1:] == [f"{h}_{p}" for h in quantiles for p in ("p50", "p99", "p999")]
    assert rates[f"{quantiles[-1]}_p99"] == f"histogram_quantile(0.99, sum by (le) (rate({quantiles[-1]}_bucket[5s])))"


@pytest.mark.parametrize("kind", kind_names())
def test_launch_asks_the_table(kind):
    sc = load_scenario({"workload": {"kind": kind, "rate_per_s": 20, "clients": 3, "think_ms": 7},
                        "run": {"seed": 5, "duration_s": 10}})
    argv = launch.loadgen_command(Path("/lg"), sc, "http://x/work", "127.0.0.1:2")
    common = ["/lg", "-url", "http://x/work", "-listen", "127.0.0.1:2", "-mode", kind, "-seed", "5", "-duration-s", "15"]
    expected = {"closed": common + ["-clients", "3", "-think-ms", "7", "-max-conns", "1024"],
                "open": common + ["-rate", "20.0", "-arrivals", sc["workload.arrivals"], "-max-conns", "1024"]}
    assert argv == expected.get(kind)
