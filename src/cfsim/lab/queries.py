"""What each run exports from Prometheus: raw series (``/api/v1/query_range`` of a metric name)
and the rate() queries a dashboard would draw. Only metrics the analysis needs, to keep the
committed data small; histograms' buckets only for the kind's own latency. What differs by
``[workload] kind`` (its own metrics, histograms, done counter) comes from :mod:`cfsim.lab.kinds`."""
from __future__ import annotations

from cfsim.lab.kinds import lab_kind

CADVISOR = ("container_cpu_usage_seconds_total", "container_cpu_cfs_periods_total",
            "container_cpu_cfs_throttled_periods_total", "container_cpu_cfs_throttled_seconds_total",
            "container_spec_cpu_quota", "container_spec_cpu_period",
            "container_memory_usage_bytes", "container_memory_working_set_bytes", "container_memory_rss",
            "container_memory_max_usage_bytes", "container_spec_memory_limit_bytes", "container_memory_failcnt",
            "container_oom_events_total")

GO_RUNTIME = ("go_sched_gomaxprocs_threads", "go_gc_cycles_total_gc_cycles_total", "go_gc_heap_live_bytes",
              "go_gc_heap_goal_bytes", "go_gc_heap_allocs_bytes_total", "go_gc_gogc_percent",
              "go_gc_gomemlimit_bytes", "go_goroutines", "go_threads", "process_cpu_seconds_total",
              "go_gc_duration_seconds", "go_gc_duration_seconds_count", "go_gc_duration_seconds_sum",
              "go_sched_latencies_seconds_count", "go_sched_latencies_seconds_sum",
              "go_gc_limiter_last_enabled_gc_cycle", "go_gc_scan_heap_bytes", "go_gc_scan_stack_bytes",
              "go_gc_scan_globals_bytes", "go_gc_scan_total_bytes", "go_memory_classes_total_bytes",
              "go_memory_classes_heap_objects_bytes", "go_memory_classes_heap_released_bytes",
              "go_memory_classes_heap_free_bytes", "go_gc_heap_objects_objects",
              "process_resident_memory_bytes", "go_sched_pauses_total_gc_seconds_count",
              "go_sched_pauses_total_gc_seconds_sum", "go_sched_goroutines_runnable_goroutines", "cfsim_go_sched_latencies_seconds_count",
              "go_sync_mutex_wait_total_seconds_total")

CPU_CLASSES = tuple(f"go_cpu_classes_{c}_cpu_seconds_total" for c in (
    "gc_mark_assist", "gc_mark_dedicated", "gc_mark_idle", "gc_pause", "gc_total", "idle",
    "scavenge_assist", "scavenge_background", "scavenge_total", "total", "user"))

SCRAPE = ("up", "scrape_duration_seconds")


def histogram(name: str) -> tuple[str, ...]:
    return (f"{name}_bucket", f"{name}_count", f"{name}_sum")


def latency_histograms(kind: str) -> tuple[str, ...]:
    return lab_kind(kind).latency_histograms


def raw_metrics(kind: str) -> list[str]:
    hist = tuple(m for h in latency_histograms(kind) for m in histogram(h))
    return [*CADVISOR, *lab_kind(kind).app_metrics, "cfsim_burn_calibration_rounds_per_cpu_ms", *hist, *GO_RUNTIME,
            *CPU_CLASSES, *SCRAPE]


def rate_queries(kind: str, window_s: float) -> dict[str, str]:
    """Dashboard queries (name -> PromQL)."""
    w = f"[{window_s:g}s]"
    q = {
        "cpu_usage_cores": f"rate(container_cpu_usage_seconds_total{w})",
        "cpu_limit_cores": "container_spec_cpu_quota / container_spec_cpu_period",
        "throttled_periods_ratio": f"rate(container_cpu_cfs_throttled_periods_total{w}) "
                                   f"/ rate(container_cpu_cfs_periods_total{w})",
        "throttled_seconds_per_s": f"rate(container_cpu_cfs_throttled_seconds_total{w})",
        "process_cpu_cores": f"rate(process_cpu_seconds_total{w})",
        "gc_cycles_per_s": f"rate(go_gc_cycles_total_gc_cycles_total{w})",
        "gc_cpu_cores_runtime_metrics": f"rate(go_cpu_classes_gc_total_cpu_seconds_total{w})",
        "user_cpu_cores_runtime_metrics": f"rate(go_cpu_classes_user_cpu_seconds_total{w})",
        "alloc_bytes_per_s": f"rate(go_gc_heap_allocs_bytes_total{w})",
        "memory_working_set_bytes": "container_memory_working_set_bytes",
        "gc_pause_seconds_per_s": f"rate(go_gc_duration_seconds_sum{w})",
    }
    q["throughput_per_s"] = f"rate({lab_kind(kind).done_metric}{w})"
    # quantiles only (their buckets are not exported: the summary reads them directly)
    extra = ("cfsim_go_sched_latencies_seconds",) + lab_kind(kind).quantile_histograms
    for h in latency_histograms(kind) + extra:
        for label, quant in (("p50", 0.5), ("p99", 0.99), ("p999", 0.999)):
            q[f"{h}_{label}"] = f"histogram_quantile({quant}, sum by (le) (rate({h}_bucket{w})))"
    return q


def sample_metrics(kind: str) -> list[str]:
    """Counters behind the rate() queries, exported also as raw samples with their scrape
    timestamps (an instant query of ``metric[range]``), so rate() can be re-derived exactly."""
    names = [n for n in ("container_cpu_usage_seconds_total", "container_cpu_cfs_periods_total",
                         "container_cpu_cfs_throttled_periods_total", "container_cpu_cfs_throttled_seconds_total",
                         "process_cpu_seconds_total", "go_gc_cycles_total_gc_cycles_total",
                         "go_cpu_classes_gc_total_cpu_seconds_total", "go_cpu_classes_user_cpu_seconds_total",
                         "go_gc_heap_allocs_bytes_total", "go_gc_duration_seconds_sum")]
    return names + [lab_kind(kind).done_metric]
