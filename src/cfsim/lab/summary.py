"""The run summary, in the keys of ``cfsim run --json``, computed from two snapshots taken at the
start and the end of the measured window (after ``run.warmup_s``). Pure functions only.

Sources: cgroup counters read directly (exact to the read instant), the workload's and the load
generator's ``/metrics`` read directly by the harness at the same instants. Null where the lab
cannot measure a quantity (``sched_cpu_fraction``: the scheduler's CPU share needs a profiler).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from prometheus_client.parser import text_string_to_metric_families

from cfsim.lab.cgroup import CpuStat

SUMMARY_KEYS = ("cpu_limit_cores", "cpu_usage_cores", "nr_periods", "nr_throttled", "throttled_ratio",
                "throttled_time_s", "gomaxprocs", "throughput_per_s", "latency_p50_s", "latency_p99_s",
                "latency_p999_s", "backlog_final", "lag_final_s", "gc_cycles", "gc_cpu_fraction",
                "sched_cpu_fraction", "burn_p50_s", "burn_p99_s", "burn_max_s")
CPU_CLASSES = ("gc_mark_assist", "gc_mark_dedicated", "gc_mark_idle", "gc_pause", "gc_total", "idle",
               "scavenge_total", "total", "user")
# further keys the simulator's ``run --json`` also has, under the same names
EXTRA_KEYS = ("nr_bursts", "burst_time_s", "duration_s", "records_completed", "arrival_rate_per_s",
              "latency_mean_s", "latency_max_s", "gc_heap_goal_bytes", "gc_pause_p50_s", "gc_pause_max_s",
              "go_cpu_seconds", "go_cpu_cores", "go_sched_gomaxprocs_threads", "user_cpu_fraction",
              *(f"go_cpu_classes_{c}_cpu_seconds_total" for c in CPU_CLASSES),
              "calibration_rounds_per_cpu_ms")
# request workloads (closed, open): the handler's own latency, without the load generator's
# HTTP client, loopback and parsing; this is what the simulator's request latency models
SERVER_LATENCY_KEYS = ("server_latency_p50_s", "server_latency_p99_s", "server_latency_p999_s")
# the samples the summary reads (kept in the manifest, so a summary can be recomputed)
WINDOW_PREFIXES = ("cfsim_", "go_cpu_classes_", "go_gc_cycles_total", "go_sched_gomaxprocs", "go_gc_heap_goal",
                   "process_cpu_seconds", "go_gc_duration_seconds")


def window_samples(start: Samples, end: Samples) -> dict[str, Samples]:
    """The summary's inputs at both ends of the window; series that stayed 0 are left out
    (unused histograms' buckets), since a missing sample reads as 0 in :func:`summarize`."""
    keys = [k for k in end if k.startswith(WINDOW_PREFIXES) and (end[k] != 0 or start.get(k, 0) != 0)]
    return {"start": {k: start[k] for k in keys if k in start}, "end": {k: end[k] for k in keys}}

Samples = dict[str, float]  # 'name' or 'name{le="0.1"}' -> value


def parse_exposition(text: str) -> Samples:
    """Prometheus text format -> flat samples; only ``le``/``quantile`` labels are kept (single target)."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if "le" in s.labels:
                key = f'{s.name}{{le="{s.labels["le"]}"}}'
            elif "quantile" in s.labels:
                key = f'{s.name}{{quantile="{s.labels["quantile"]}"}}'
            else:
                key = s.name
            out[key] = float(s.value)
    return out


@dataclass(frozen=True)
class Snapshot:
    t_s: float  # unix time of the read
    stat: CpuStat
    workload: Samples = field(default_factory=dict)
    loadgen: Samples = field(default_factory=dict)


def histogram_quantile(q: float, buckets: Iterable[tuple[float, float]]) -> float | None:
    """Prometheus' ``histogram_quantile`` on cumulative (le, count) pairs: linear interpolation
    inside the bucket holding rank q*total; the +Inf bucket returns the largest finite bound."""
    b = sorted(buckets)
    if not b or b[-1][1] <= 0:
        return None
    rank = q * b[-1][1]
    prev_le, prev_count = 0.0, 0.0
    for le, count in b:
        if count >= rank:
            if math.isinf(le):
                return prev_le
            if count == prev_count:
                return le
            return prev_le + (le - prev_le) * (rank - prev_count) / (count - prev_count)
        prev_le, prev_count = le, count
    return b[-1][0]


def bucket_deltas(name: str, s0: Samples, s1: Samples) -> list[tuple[float, float]]:
    prefix = f'{name}_bucket{{le="'
    out = []
    for key, v1 in s1.items():
        if key.startswith(prefix):
            le = float(key[len(prefix):-2])
            out.append((le, v1 - s0.get(key, 0.0)))
    return out


def server_latency(s0: Samples, s1: Samples) -> dict[str, float | None]:
    """Server-side request latency quantiles over a window, from the workload's
    ``cfsim_request_duration_seconds`` histogram samples at the window's ends."""
    hist = bucket_deltas("cfsim_request_duration_seconds", s0, s1)
    return {key: histogram_quantile(q, hist) for key, q in zip(SERVER_LATENCY_KEYS, (0.5, 0.99, 0.999))}


def _delta(name: str, s0: Samples, s1: Samples) -> float | None:
    if name not in s1:
        return None
    return s1[name] - s0.get(name, 0.0)


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return num / den


def mean_limit_cores(initial: float | None, schedule: list | None, t0_s: float, t1_s: float) -> float | None:
    """Time-averaged CPU limit over [t0, t1] (run-relative seconds); None if unlimited at any time."""
    steps = [(0.0, initial)] + [(float(t), lim) for t, lim in (schedule or []) if t > 0]
    for t, lim in (schedule or []):
        if t <= 0:
            steps[0] = (0.0, lim)
    total = 0.0
    for i, (t, lim) in enumerate(steps):
        end = steps[i + 1][0] if i + 1 < len(steps) else math.inf
        overlap = max(0.0, min(end, t1_s) - max(t, t0_s))
        if overlap > 0:
            if lim is None:
                return None
            total += lim * overlap
    return total / (t1_s - t0_s)


def summarize(kind: str, s0: Snapshot, s1: Snapshot, cpu_limit_cores: float | None) -> dict:
    """Every key of :data:`SUMMARY_KEYS` (None where not measurable for this kind)."""
    dt = s1.t_s - s0.t_s
    w0, w1, l0, l1 = s0.workload, s1.workload, s0.loadgen, s1.loadgen
    periods = s1.stat.nr_periods - s0.stat.nr_periods
    throttled = s1.stat.nr_throttled - s0.stat.nr_throttled
    out: dict = dict.fromkeys(SUMMARY_KEYS + EXTRA_KEYS)
    out.update(
        nr_bursts=s1.stat.nr_bursts - s0.stat.nr_bursts,
        burst_time_s=(s1.stat.burst_ns - s0.stat.burst_ns) / 1e9,
        duration_s=dt,
        cpu_limit_cores=cpu_limit_cores,
        cpu_usage_cores=(s1.stat.usage_ns - s0.stat.usage_ns) / 1e9 / dt,
        nr_periods=periods,
        nr_throttled=throttled,
        throttled_ratio=throttled / periods if periods > 0 else 0.0,
        throttled_time_s=(s1.stat.throttled_ns - s0.stat.throttled_ns) / 1e9,
        gomaxprocs=int(w1["go_sched_gomaxprocs_threads"]) if "go_sched_gomaxprocs_threads" in w1 else None,
    )
    if kind in ("stream", "single-thread"):
        done, hist = _delta("cfsim_records_consumed_total", w0, w1), bucket_deltas("cfsim_item_latency_seconds", w0, w1)
        out["backlog_final"] = w1.get("cfsim_backlog_records")
        out["lag_final_s"] = w1.get("cfsim_lag_seconds")
    elif kind in ("closed", "open"):
        # client-side view, as a load tester (k6) reports it; the server side beside it
        done = _delta("cfsim_loadgen_requests_total", l0, l1)
        hist = bucket_deltas("cfsim_loadgen_request_duration_seconds", l0, l1)
        out.update(server_latency(w0, w1))
    else:  # threads
        done, hist = _delta("cfsim_burns_total", w0, w1), []
        burns = bucket_deltas("cfsim_burn_duration_seconds", w0, w1)
        out["burn_p50_s"] = histogram_quantile(0.5, burns)
        out["burn_p99_s"] = histogram_quantile(0.99, burns)
        out["burn_max_s"] = w1.get("cfsim_burn_max_seconds")
    if kind in ("stream", "single-thread"):
        arrived = _delta("cfsim_records_produced_total", w0, w1)
        out["arrival_rate_per_s"] = None if arrived is None else arrived / dt
        lat_sum, lat_n = _delta("cfsim_item_latency_seconds_sum", w0, w1), _delta("cfsim_item_latency_seconds_count", w0, w1)
    elif kind in ("closed", "open"):
        lat_sum = _delta("cfsim_loadgen_request_duration_seconds_sum", l0, l1)
        lat_n = _delta("cfsim_loadgen_request_duration_seconds_count", l0, l1)
    else:
        lat_sum = lat_n = None
    out["latency_mean_s"] = _ratio(lat_sum, lat_n)
    out["records_completed"] = None if done is None else int(done)
    out["throughput_per_s"] = None if done is None else done / dt
    out["latency_p50_s"] = histogram_quantile(0.5, hist)
    out["latency_p99_s"] = histogram_quantile(0.99, hist)
    out["latency_p999_s"] = histogram_quantile(0.999, hist)
    cycles = _delta("go_gc_cycles_total_gc_cycles_total", w0, w1)
    out["gc_cycles"] = None if cycles is None else int(cycles)
    # GC share of the Ps' busy time (runtime/metrics CPU classes, which are wall-clock based and
    # only accumulated at GC boundaries: an estimate, see go-runtime notes)
    gc = _delta("go_cpu_classes_gc_total_cpu_seconds_total", w0, w1)
    total = _delta("go_cpu_classes_total_cpu_seconds_total", w0, w1)
    idle = _delta("go_cpu_classes_idle_cpu_seconds_total", w0, w1)
    busy = None if total is None or idle is None else total - idle
    out["gc_cpu_fraction"] = _ratio(gc, busy)
    out["user_cpu_fraction"] = _ratio(_delta("go_cpu_classes_user_cpu_seconds_total", w0, w1), busy)
    for c in CPU_CLASSES:
        out[f"go_cpu_classes_{c}_cpu_seconds_total"] = _delta(f"go_cpu_classes_{c}_cpu_seconds_total", w0, w1)
    cpu_s = _delta("process_cpu_seconds_total", w0, w1)
    out["go_cpu_seconds"] = cpu_s
    out["go_cpu_cores"] = None if cpu_s is None else cpu_s / dt
    out["go_sched_gomaxprocs_threads"] = out["gomaxprocs"]
    out["gc_heap_goal_bytes"] = w1.get("go_gc_heap_goal_bytes")
    # STW pause quantiles since process start (client_golang's summary has no window)
    out["gc_pause_p50_s"] = w1.get('go_gc_duration_seconds{quantile="0.5"}')
    out["gc_pause_max_s"] = w1.get('go_gc_duration_seconds{quantile="1"}')
    out["calibration_rounds_per_cpu_ms"] = w1.get("cfsim_burn_calibration_rounds_per_cpu_ms")
    return out


def counters(stat: CpuStat) -> Mapping[str, int]:
    return {"usage_ns": stat.usage_ns, "nr_periods": stat.nr_periods, "nr_throttled": stat.nr_throttled,
            "throttled_ns": stat.throttled_ns, "nr_bursts": stat.nr_bursts, "burst_ns": stat.burst_ns}
