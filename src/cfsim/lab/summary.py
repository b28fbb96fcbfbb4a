"""The run summary, in the keys of ``cfsim run --json``, computed from two snapshots taken at the
start and the end of the measured window (after ``run.warmup_s``). Pure functions only.

Sources: cgroup counters read directly (exact to the read instant), the workload's and the load
generator's ``/metrics`` read directly by the harness at the same instants. Null where the lab
cannot measure a quantity (``sched_cpu_fraction``: the scheduler's CPU share needs a profiler).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

from prometheus_client.parser import text_string_to_metric_families

from cfsim.monitoring.histogram import histogram_quantile
from cfsim.lab.cgroup import CpuStat, MemoryStat
from cfsim.lab.kinds import lab_kind

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
NO_LIMIT_BYTES = 2.0 ** 62  # GOMEMLIMIT and cgroup "unlimited" sentinels are at least this
# GC and memory (issue 19) and scheduler latency (issue 14): contract with the model and the
# validation, names kept
GC_MEMORY_KEYS = ("gc_heap_goal_mean_bytes", "gc_heap_live_bytes", "gc_pause_total_s", "gc_limiter_last_enabled_cycle",
                  "gogc_percent", "gomemlimit_bytes", "gc_alloc_bytes", "gc_scan_heap_bytes", "gc_scan_stack_bytes",
                  "gc_scan_globals_bytes", "go_memory_total_bytes",
                  "memory_limit_bytes", "memory_usage_bytes", "memory_usage_mean_bytes", "memory_max_usage_bytes",
                  "memory_working_set_bytes", "memory_failcnt", "process_rss_bytes", "process_rss_peak_bytes",
                  "oom_kills", "oom_time_s", "memory_at_oom_bytes",
                  "sched_latency_p50_s", "sched_latency_p99_s", "sched_latency_p999_s",
                  "gc_pause_p99_s", "go_cpu_classes_busy_cores", "go_cpu_classes_gc_cores",
                  "go_cpu_classes_user_cores", "go_cpu_classes_idle_cores", "cpu_classes_busy_over_usage",
                  "loadgen_cpu_cores", "loadgen_send_lag_p50_s", "loadgen_send_lag_p99_s", "loadgen_dropped",
                  "loadgen_errors", "loadgen_way_in_p50_s", "loadgen_way_in_p99_s", "loadgen_way_out_p50_s",
                  "loadgen_way_out_p99_s", "loadgen_new_connections")
# the samples the summary reads (kept in the manifest, so a summary can be recomputed)
WINDOW_PREFIXES = ("cfsim_", "go_cpu_classes_", "go_gc_cycles_total", "go_sched_gomaxprocs", "go_gc_heap_goal",
                   "process_cpu_seconds", "go_gc_duration_seconds", "go_gc_heap_live", "go_gc_gogc",
                   "go_gc_gomemlimit", "go_gc_limiter", "go_gc_heap_allocs_bytes", "go_gc_heap_allocs_objects",
                   "go_gc_scan_", "go_memory_classes_total", "go_memory_classes_heap_", "process_resident_memory",
                   "go_sched_latencies_seconds", "go_sched_pauses_total_gc_seconds", "go_goroutines")


def _window_buckets(start: Samples, end: Samples) -> set[str]:
    """Bucket series a window quantile can use: per histogram, from the last bucket with no new
    observation below the first that got one, up to the first bucket holding all of them, and
    +Inf. The others change no quantile of the window (:func:`histogram_quantile` never reaches
    them), so leaving them out keeps manifests small without changing any summary."""
    by_name: dict[str, list[tuple[float, str]]] = {}
    for k in end:
        if '_bucket{le="' in k:
            by_name.setdefault(k.split("{", 1)[0], []).append((float(k.split('le="', 1)[1][:-2]), k))
    keep: set[str] = set()
    for buckets in by_name.values():
        buckets.sort()
        deltas = [end[k] - start.get(k, 0.0) for _, k in buckets]
        keep.add(buckets[-1][1])  # +Inf: the total
        if deltas[-1] <= 0:
            continue
        first = next(i for i, d in enumerate(deltas) if d > 0)
        last = next(i for i, d in enumerate(deltas) if d >= deltas[-1])
        keep |= {k for _, k in buckets[max(0, first - 1):last + 1]}
    return keep


def window_samples(start: Samples, end: Samples) -> dict[str, Samples]:
    """The summary's inputs at both ends of the window: every series the summary reads, with
    each histogram cut to the buckets the window's observations touch (:func:`_window_buckets`)."""
    buckets = _window_buckets(start, end)
    keys = [k for k in end if k.startswith(WINDOW_PREFIXES) and ("{le=" not in k or k in buckets)]
    return {"start": {k: start[k] for k in keys if k in start}, "end": {k: end[k] for k in keys}}


def samples_from_vector(body: bytes | str | dict) -> Samples:
    """An /api/v1/query vector response (e.g. ``{job="workload"}`` at one scrape's timestamp) ->
    the flat samples :func:`parse_exposition` gives for the same scrape."""
    import json

    obj = json.loads(body) if isinstance(body, (bytes, str)) else body
    out: Samples = {}
    for r in obj["data"]["result"]:
        m = r["metric"]
        name = m["__name__"]
        if "le" in m:
            name = f'{name}{{le="{m["le"]}"}}'
        elif "quantile" in m:
            name = f'{name}{{quantile="{m["quantile"]}"}}'
        out[name] = float(r["value"][1])
    return out

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
    memory: MemoryStat | None = None  # the run's memory cgroup
    process: Mapping[str, int] = field(default_factory=dict)  # workload /proc/<pid>: VmRSS, VmHWM [bytes], minflt, majflt
    threads: Mapping[int, tuple[int, ...]] = field(default_factory=dict)  # per-thread schedstat, switches (lab.threads)
    tlb_flushes: int | None = None  # the host's TLB flushes of other CPUs so far (/proc/interrupts "TLB")


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
    family = lab_kind(kind).family
    if family == "items":
        done, hist = _delta("cfsim_records_consumed_total", w0, w1), bucket_deltas("cfsim_item_latency_seconds", w0, w1)
        out["backlog_final"] = w1.get("cfsim_backlog_records")
        out["lag_final_s"] = w1.get("cfsim_lag_seconds")
    elif family == "requests":
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
    if family == "items":
        arrived = _delta("cfsim_records_produced_total", w0, w1)
        out["arrival_rate_per_s"] = None if arrived is None else arrived / dt
        lat_sum, lat_n = _delta("cfsim_item_latency_seconds_sum", w0, w1), _delta("cfsim_item_latency_seconds_count", w0, w1)
    elif family == "requests":
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


def _last(name: str, s: Samples) -> float | None:
    return s.get(name)


def window_quantiles(name: str, s0: Samples, s1: Samples, qs=(0.5, 0.99, 0.999)) -> list[float | None]:
    """Quantiles of histogram ``name`` over a window, from its bucket samples at the two ends
    (``histogram_quantile``; None where it counted nothing)."""
    hist = bucket_deltas(name, s0, s1)
    return [histogram_quantile(q, hist) for q in qs]


def gc_memory(s0: Snapshot, s1: Snapshot, heap_goal_mean_bytes: float | None = None) -> dict:
    """GC, memory, scheduler-latency and load-generator keys over the window (None where the run
    did not record the input). Gauges are read at the window's end, counters as differences."""
    dt = s1.t_s - s0.t_s
    w0, w1, l0, l1 = s0.workload, s1.workload, s0.loadgen, s1.loadgen
    out: dict = dict.fromkeys(GC_MEMORY_KEYS)
    out["gc_heap_goal_mean_bytes"] = heap_goal_mean_bytes
    out["gc_heap_live_bytes"] = _last("go_gc_heap_live_bytes", w1)
    # STW pause total since the last window read (debug.ReadGCStats PauseTotal via client_golang)
    out["gc_pause_total_s"] = _delta("go_gc_duration_seconds_sum", w0, w1)
    lim = _last("go_gc_limiter_last_enabled_gc_cycle", w1)
    out["gc_limiter_last_enabled_cycle"] = None if lim is None else int(lim)
    gogc = _last("go_gc_gogc_percent", w1)
    out["gogc_percent"] = None if gogc is None else int(gogc)
    gml = _last("go_gc_gomemlimit_bytes", w1)
    # the runtime reports "no limit" as math.MaxInt64
    out["gomemlimit_bytes"] = None if gml is None or gml >= NO_LIMIT_BYTES else int(gml)
    alloc = _delta("go_gc_heap_allocs_bytes_total", w0, w1)
    out["gc_alloc_bytes"] = None if alloc is None else int(alloc)
    for part in ("heap", "stack", "globals"):
        v = _last(f"go_gc_scan_{part}_bytes", w1)
        out[f"gc_scan_{part}_bytes"] = None if v is None else int(v)
    tot = _last("go_memory_classes_total_bytes", w1)
    out["go_memory_total_bytes"] = None if tot is None else int(tot)
    p50, p99, p999 = window_quantiles("cfsim_go_sched_latencies_seconds", w0, w1)
    out.update(sched_latency_p50_s=p50, sched_latency_p99_s=p99, sched_latency_p999_s=p999)
    out["gc_pause_p99_s"] = window_quantiles("cfsim_go_sched_pauses_total_gc_seconds", w0, w1, (0.99,))[0]
    # runtime/metrics /cpu/classes are P-time (wall time x GOMAXPROCS, split by what each P did),
    # not CPU time: a P whose thread the kernel throttles keeps accruing its class
    total = _delta("go_cpu_classes_total_cpu_seconds_total", w0, w1)
    idle = _delta("go_cpu_classes_idle_cpu_seconds_total", w0, w1)
    if dt > 0:
        if total is not None and idle is not None:
            out["go_cpu_classes_busy_cores"] = (total - idle) / dt
            out["go_cpu_classes_idle_cores"] = idle / dt
            usage = (s1.stat.usage_ns - s0.stat.usage_ns) / 1e9 / dt
            out["cpu_classes_busy_over_usage"] = _ratio(out["go_cpu_classes_busy_cores"], usage)
        gc = _delta("go_cpu_classes_gc_total_cpu_seconds_total", w0, w1)
        user = _delta("go_cpu_classes_user_cpu_seconds_total", w0, w1)
        out["go_cpu_classes_gc_cores"] = None if gc is None else gc / dt
        out["go_cpu_classes_user_cores"] = None if user is None else user / dt
        lg = _delta("process_cpu_seconds_total", l0, l1)
        out["loadgen_cpu_cores"] = None if lg is None else lg / dt
    lag50, lag99 = window_quantiles("cfsim_loadgen_send_lag_seconds", l0, l1, (0.5, 0.99))
    out.update(loadgen_send_lag_p50_s=lag50, loadgen_send_lag_p99_s=lag99)
    # a request's way to the handler and back, from the workload's handler-times header (runs
    # recorded since 2026-11-29; None before): where a client-side tail is not the server's
    for way in ("in", "out"):
        q50, q99 = window_quantiles(f"cfsim_loadgen_way_{way}_seconds", l0, l1, (0.5, 0.99))
        out[f"loadgen_way_{way}_p50_s"], out[f"loadgen_way_{way}_p99_s"] = q50, q99
    for key, name in (("loadgen_dropped", "cfsim_loadgen_dropped_total"), ("loadgen_errors", "cfsim_loadgen_errors_total"),
                      ("loadgen_new_connections", "cfsim_loadgen_new_connections_total")):
        v = _delta(name, l0, l1)
        out[key] = None if v is None else int(v)
    m0, m1 = s0.memory, s1.memory
    if m1 is not None:
        out["memory_limit_bytes"] = m1.limit_bytes
        out["memory_usage_bytes"] = m1.usage_bytes
        out["memory_max_usage_bytes"] = m1.max_usage_bytes
        out["memory_working_set_bytes"] = m1.working_set_bytes
        out["memory_failcnt"] = None if m1.failcnt is None else m1.failcnt - ((m0.failcnt or 0) if m0 else 0)
        out["oom_kills"] = m1.oom_kills
    if s1.process:
        out["process_rss_bytes"] = s1.process.get("VmRSS")
        out["process_rss_peak_bytes"] = s1.process.get("VmHWM")
    if "minflt" in s0.process and "minflt" in s1.process:
        # the workload's minor faults: first touches of new or returned heap pages (and stacks)
        out["page_faults_per_s"] = (s1.process["minflt"] - s0.process["minflt"]) / dt
    if s0.tlb_flushes is not None and s1.tlb_flushes is not None:
        # host-wide: the workload's releases of memory and any other process's (the harness's)
        out["tlb_flushes_per_s"] = (s1.tlb_flushes - s0.tlb_flushes) / dt
    return out


def counters(stat: CpuStat) -> Mapping[str, int]:
    return {"usage_ns": stat.usage_ns, "nr_periods": stat.nr_periods, "nr_throttled": stat.nr_throttled,
            "throttled_ns": stat.throttled_ns, "nr_bursts": stat.nr_bursts, "burst_ns": stat.burst_ns}
