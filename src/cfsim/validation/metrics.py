"""What validation compares, and how each error is measured.

Rates (throughput, CPU, latency, lag) get a signed relative error ``(sim - obs) / obs``; ratios
(throttled-period ratio, GC CPU share) an absolute error ``sim - obs``; GOMAXPROCS must be exact.
Each metric is derived the same way from a lab ``summary.json`` and a simulated summary, so both
sides use one definition (e.g. the GC share in the runtime's own ``/cpu/classes`` P-time).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping


@dataclass(frozen=True)
class Metric:
    name: str
    kind: str  # "relative" | "absolute" | "exact"
    get: Callable[[Mapping[str, Any]], float | None]
    goal: float | None  # the goal on held-out runs (median |error|), None if none
    help: str


def _key(name: str) -> Callable[[Mapping[str, Any]], float | None]:
    def get(summary: Mapping[str, Any]) -> float | None:
        v = summary.get(name)
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
    return get


def _gc_share(summary: Mapping[str, Any]) -> float | None:
    """GC share of busy P-time from the ``/cpu/classes`` counters (what a dashboard shows)."""
    gc = summary.get("go_cpu_classes_gc_total_cpu_seconds_total")
    total = summary.get("go_cpu_classes_total_cpu_seconds_total")
    idle = summary.get("go_cpu_classes_idle_cpu_seconds_total")
    if gc is None or total is None or idle is None or total - idle <= 0:
        return None
    return gc / (total - idle)


def _throttled_per_s(summary: Mapping[str, Any]) -> float | None:
    t, d = summary.get("throttled_time_s"), summary.get("duration_s")
    if t is None:
        return None
    if d is None:
        return float(t)
    return t / d if d else None


METRICS: tuple[Metric, ...] = (
    Metric("throughput_per_s", "relative", _key("throughput_per_s"), 0.05, "records or requests per second"),
    Metric("cpu_usage_cores", "relative", _key("cpu_usage_cores"), 0.05, "container CPU usage [cores]"),
    Metric("throttled_ratio", "absolute", _key("throttled_ratio"), 0.05, "nr_throttled / nr_periods"),
    Metric("throttled_s_per_s", "relative", _throttled_per_s, None,
           "throttled time summed over CPUs per second of run"),
    Metric("gomaxprocs", "exact", _key("gomaxprocs"), 0.0, "GOMAXPROCS at the end of the window"),
    Metric("gc_cpu_share", "absolute", _gc_share, 0.05, "GC share of busy P-time (/cpu/classes)"),
    Metric("latency_p50_s", "relative", _key("latency_p50_s"), 0.15, "median latency [s]"),
    Metric("latency_p99_s", "relative", _key("latency_p99_s"), 0.30, "p99 latency [s]"),
    Metric("backlog_final", "relative", _key("backlog_final"), None, "records waiting at the end"),
    Metric("lag_final_s", "relative", _key("lag_final_s"), None, "age of the oldest waiting record [s]"),
)

#: below this the observed value is too small for a relative error to mean anything
_RELATIVE_FLOOR = {"throttled_s_per_s": 0.01, "backlog_final": 10.0, "lag_final_s": 0.05,
                   "latency_p50_s": 1e-4, "latency_p99_s": 1e-4}


def error(metric: Metric, observed: float | None, simulated: float | None) -> float | None:
    """Signed error of ``simulated`` against ``observed`` (None when either is missing).

    >>> m = METRICS[0]
    >>> error(m, 100.0, 95.0)
    -0.05
    >>> error(METRICS[2], 0.9, 0.95)
    0.05
    """
    if observed is None or simulated is None:
        return None
    if metric.kind == "exact":
        return float(simulated - observed)
    if metric.kind == "absolute":
        return round(simulated - observed, 12)
    floor = _RELATIVE_FLOOR.get(metric.name, 0.0)
    if abs(observed) <= floor:
        return None if abs(simulated) > floor else 0.0
    return round((simulated - observed) / observed, 12)
