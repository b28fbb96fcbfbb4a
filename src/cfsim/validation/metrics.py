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

from cfsim.goruntime.run_accounting import SLEEP_CAUSES


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


def _busy_share(cls: str) -> Callable[[Mapping[str, Any]], float | None]:
    """A ``/cpu/classes`` class's share of busy P-time (``total - idle``; what a dashboard shows)."""
    def get(summary: Mapping[str, Any]) -> float | None:
        part = summary.get(f"go_cpu_classes_{cls}_cpu_seconds_total")
        total = summary.get("go_cpu_classes_total_cpu_seconds_total")
        idle = summary.get("go_cpu_classes_idle_cpu_seconds_total")
        if part is None or total is None or idle is None or total - idle <= 0:
            return None
        return part / (total - idle)
    return get


#: the GC's share of busy P-time
_gc_share = _busy_share("gc_total")
#: the scavenger's (allocSpan's scavenge assists and the background scavenger, each timed by the
#: runtime: ``/cpu/classes/scavenge/total``)
_scavenge_share = _busy_share("scavenge_total")


def _throttled_per_s(summary: Mapping[str, Any]) -> float | None:
    t, d = summary.get("throttled_time_s"), summary.get("duration_s")
    if t is None:
        return None
    if d is None:
        return float(t)
    return t / d if d else None


def _per_s(name: str) -> Callable[[Mapping[str, Any]], float | None]:
    """A counter's change over the window per second of window (``duration_s``)."""
    def get(summary: Mapping[str, Any]) -> float | None:
        v, d = summary.get(name), summary.get("duration_s")
        if v is None or not d:
            return None
        return float(v) / float(d)
    return get


def _oom(summary: Mapping[str, Any]) -> float | None:
    """OOM kills of the run: the memory cgroup's ``oom_kill`` count (lab) or the model's."""
    v = summary.get("oom_kills")
    return None if v is None else float(v > 0)


def _cycle_pause(quantile: str, lab_key: str) -> Callable[[Mapping[str, Any]], float | None]:
    """A quantile of ``go_gc_duration_seconds``: one GC cycle's stop-the-world time (its two stops
    together) over the last 256 cycles, as ``debug.ReadGCStats`` gives it to client_golang. The
    lab's summary keeps it as ``lab_key`` (:mod:`cfsim.lab.summary`), the model's as
    ``go_gc_duration_seconds_q<quantile>`` (its own ``gc_pause_p50_s`` and ``gc_pause_max_s`` are
    one stop's, as the lab's ``gc_pause_p99_s`` is).

    >>> p50 = _cycle_pause("0.5", "gc_pause_p50_s")
    >>> p50({"gc_pause_p50_s": 2e-4}), p50({"gc_pause_p50_s": 1e-4, "go_gc_duration_seconds_q0.5": 3e-4})
    (0.0002, 0.0003)
    """
    model_key = f"go_gc_duration_seconds_q{quantile}"

    def get(summary: Mapping[str, Any]) -> float | None:
        return _key(model_key if model_key in summary else lab_key)(summary)
    return get


#: GC and memory (issue 19): what the runtime's /gc/... metrics and the memory cgroup show
GC_MEMORY_METRICS: tuple[Metric, ...] = (
    Metric("gc_cycles_per_s", "relative", _per_s("gc_cycles"), 0.10, "GC cycles per second of window"),
    Metric("gc_heap_goal_mean_bytes", "relative", _key("gc_heap_goal_mean_bytes"), 0.05,
           "heap goal averaged over the window (/gc/heap/goal:bytes)"),
    Metric("gc_heap_goal_bytes", "relative", _key("gc_heap_goal_bytes"), None,
           "heap goal at the end of the window (one point of a saw-tooth)"),
    Metric("gc_heap_live_bytes", "relative", _key("gc_heap_live_bytes"), None,
           "heap marked live by the last cycle (/gc/heap/live:bytes)"),
    Metric("gc_pause_s_per_s", "relative", _per_s("gc_pause_total_s"), None,
           "stop-the-world GC pause time per second (/sched/pauses/total/gc:seconds)"),
    Metric("gc_cycle_pause_p50_s", "relative", _cycle_pause("0.5", "gc_pause_p50_s"), None,
           "a typical GC cycle's stop-the-world time, both stops (go_gc_duration_seconds' 0.5 quantile over "
           "the last 256 cycles: what a dashboard shows)"),
    Metric("gc_cycle_pause_max_s", "relative", _cycle_pause("1", "gc_pause_max_s"), None,
           "the longest GC cycle's stop-the-world time of the last 256 (go_gc_duration_seconds' quantile 1)"),
    Metric("memory_usage_mean_bytes", "relative", _key("memory_usage_mean_bytes"), 0.10,
           "memory cgroup usage averaged over the window (the heap's saw-tooth: 26-70 MiB within one "
           "second at 16 MiB live)"),
    Metric("memory_usage_bytes", "relative", _key("memory_usage_bytes"), None,
           "memory cgroup usage at the end of the window (one point of the saw-tooth)"),
    Metric("memory_max_usage_bytes", "relative", _key("memory_max_usage_bytes"), None,
           "memory cgroup high-water mark over the window"),
    Metric("oom_killed", "exact", _oom, 0.0, "1 if the kernel OOM-killed the process, else 0"),
    Metric("scavenge_cpu_share", "absolute", _scavenge_share, None,
           "the scavenger's share of busy P-time (/cpu/classes/scavenge/total: returning memory to the "
           "OS to stay under GOMEMLIMIT or near the heap goal)"),
    Metric("tlb_flushes_per_s", "relative", _key("tlb_flushes_per_s"), None,
           "TLB flushes of other CPUs when memory is returned (lab: the host's /proc/interrupts 'TLB', every "
           "process)"),
    Metric("page_faults_per_s", "relative", _key("page_faults_per_s"), None,
           "minor page faults of the workload process (lab: /proc/<pid>/stat minflt, runs since "
           "2026-11-28; model: heap pages first touched, grown or taken back after the scavenger "
           "returned them)"),
)

#: the GC cycle by cycle (runs with the runtime's per-cycle trace, ``lab.gctrace``): medians over
#: the window's cycles (:mod:`cfsim.goruntime.gc_cycles`); no issue sets goals for them yet
GC_CYCLE_METRICS: tuple[Metric, ...] = (
    Metric("gc_cycle_marked_median_bytes", "relative", _key("gc_cycle_marked_median_bytes"), None,
           "heap marked per cycle, median (gctrace: the third heap size)"),
    Metric("gc_cycle_goal_median_bytes", "relative", _key("gc_cycle_goal_median_bytes"), None,
           "heap goal per cycle, median (the pacer line: heap at the cycle's end minus ∆goal)"),
    Metric("gc_cycle_alloc_during_mark_median_bytes", "relative", _key("gc_cycle_alloc_during_mark_median_bytes"),
           None, "allocated while the mark ran, median (gcpacertrace: heap at the mark's end - at its start)"),
    Metric("gc_cycle_end_over_goal_median", "absolute", _key("gc_cycle_end_over_goal_median"), None,
           "heap when the mark ended over the goal, median (> 1: overshoot)"),
    Metric("gc_cycle_mark_median_s", "relative", _key("gc_cycle_mark_median_s"), None,
           "wall time of the concurrent mark, median (gctrace: the second clock time)"),
    Metric("gc_cycle_assist_share", "absolute", _key("gc_cycle_assist_share"), None,
           "assists' share of the mark P-time over the window's cycles (assist / (assist + background + idle))"),
    Metric("gc_cycle_past_goal_share", "absolute", _key("gc_cycle_past_goal_share"), None,
           "share of the window's cycles whose heap ended 2 % or more past the goal"),
    Metric("gc_cycle_end_over_goal_max", "absolute", _key("gc_cycle_end_over_goal_max"), None,
           "heap when the mark ended over the goal, largest of the window's cycles"),
    Metric("gc_cycle_unpaced_time_share", "absolute", _key("gc_cycle_unpaced_time_share"), None,
           "share of the window's wall time in cycles whose heap ended 25 % or more past the goal: marks "
           "the assists did not pace (the GC CPU limiter on, or a goal GOGC extended)"),
    Metric("gc_cycle_limiter_on_share", "absolute", _key("gc_cycle_limiter_on_share"), None,
           "share of the window's cycles the GC CPU limiter turned on in, of those where it is known (lab: "
           "/gc/limiter/last-enabled read after each cycle, runs since 2026-11-30)"),
    Metric("gc_cycle_between_marks_mean_s", "relative", _key("gc_cycle_between_marks_mean_s"), None,
           "wall time from one mark's end to the next one's start, mean over the window's cycles (gctrace: "
           "the next cycle's @t less this one's @t and three clock times; near a GOMEMLIMIT at the live heap, "
           "gcStart's sweep of what the last cycle left)"),
    Metric("gc_limiter_turned_on", "exact", _key("gc_limiter_turned_on"), None,
           "1 if the GC CPU limiter turned on in the window, else 0 (lab: /gc/limiter/last-enabled and "
           "/gc/cycles/total read at the window's two ends, every run)"),
)


def _m_gc_cpu_per_cycle(summary: Mapping[str, Any]) -> float | None:
    """The GC's real CPU a cycle: the lab's from perf (``gc_cpu_per_cycle_s``), the model's from
    its mark workers', assists' and pauses' CPU over its cycles."""
    v = summary.get("gc_cpu_per_cycle_s")
    if v is not None:
        return float(v)
    parts = [summary.get(f"cpu_real_gc_{k}_s") for k in ("dedicated", "idle", "assist", "pause")]
    cycles = summary.get("gc_cycles")
    if any(p is None for p in parts) or not cycles:
        return None
    return float(sum(parts)) / float(cycles)


def _m_gc_assist_cpu_share(summary: Mapping[str, Any]) -> float | None:
    """The assists' share of the concurrent mark's real CPU: the lab's from perf's stacks
    (``gc_assist_cpu_share``), the model's from its assists' and mark workers' CPU."""
    v = summary.get("gc_assist_cpu_share")
    if v is not None:
        return float(v)
    parts = [summary.get(f"cpu_real_gc_{k}_s") for k in ("assist", "dedicated", "idle")]
    if any(p is None for p in parts):
        return None
    total = sum(float(p) for p in parts)
    return float(parts[0]) / total if total > 0 else None


#: where in time the CPU and the tail lie: the CPU from one ~0.1 s to the next (runs with the
#: watcher's samples, ``cpu_watch.csv.gz``; model: its periods) and the client's p99 in the seconds
#: with a GC cycle; no issue sets goals for them yet
CPU_WINDOW_METRICS: tuple[Metric, ...] = (
    Metric("cpu_window_spread_cores", "relative", _key("cpu_window_spread_cores"), None,
           "90th minus 10th percentile of the CPU in ~0.1 s windows [cores] (lab: watcher samples; model: "
           "its periods): the spread that throttles a group below its limit"),
    Metric("cpu_window_autocorr", "absolute", _key("cpu_window_autocorr"), None,
           "correlation of neighbouring ~0.1 s windows' CPU (a spread that drifts throttles in runs of periods)"),
    Metric("cpu_window_gc_excess_cores", "absolute", _key("cpu_window_gc_excess_cores"), None,
           "mean CPU of the ~0.1 s windows a GC mark overlaps minus the other windows' [cores] (runs with the "
           "runtime's gctrace): the burst a cycle adds where the quota meets it"),
    Metric("throttled_window_gc_share", "absolute", _key("throttled_window_gc_share"), None,
           "share of the throttled ~0.1 s windows that a GC mark overlaps (runs with the gctrace and a "
           "throttled window)"),
    Metric("cpu_window_gc_interval_peak_excess_cores", "absolute", _key("cpu_window_gc_interval_peak_excess_cores"),
           None, "busiest ~0.1 s window of the 1 s scrape intervals a GC cycle ended in minus the other intervals' "
           "[cores], median over each kind (runs that scrape the runtime's cycle count; "
           "cfsim.kernel.cpu_windows.gc_interval_keys): the burst a cycle adds, without the gctrace"),
    Metric("throttled_window_gc_interval_share", "absolute", _key("throttled_window_gc_interval_share"), None,
           "share of the throttled ~0.1 s windows that lie in a 1 s scrape interval a GC cycle ended in "
           "(runs that scrape the cycle count and were throttled)"),
    Metric("gc_cpu_per_cycle_s", "relative", _m_gc_cpu_per_cycle, None,
           "the GC's real CPU a cycle [s] (lab: perf's samples on mark workers', assists' and the phases' "
           "stacks inside the gctrace's marks, lab.perf_s; model: its GC segments' CPU): P-time apart"),
    Metric("gc_assist_cpu_share", "absolute", _m_gc_assist_cpu_share, None,
           "the assists' share of the concurrent mark's real CPU (lab: perf's samples on assist stacks over "
           "those on assists' and mark workers', lab.perf_s, 50 samples or more; model: its assists' CPU over "
           "its assists' and workers'): who does the mark's work, which the P-time share "
           "(gc_cycle_assist_share) misreads at more Ps than CPUs"),
    Metric("latency_p99_gc_ratio", "relative", _key("latency_p99_gc_ratio"), None,
           "client-side p99 over the 1 s intervals a GC cycle ended in, divided by the other intervals' "
           "(request services; cfsim.workloads.latency_gc): 1 when the tail is not the GC's"),
)


def _m_sleeps_per_item(summary: Mapping[str, Any]) -> float | None:
    """The Ms' sleeps per item: the lab's from its threads' voluntary switches (sysmon apart,
    :func:`cfsim.lab.threads.m_sleeps_per_item`), the model's Ms woken per completed item."""
    v = summary.get("os_thread_sleeps_per_item")
    if v is not None:
        return float(v)
    wakes, items = summary.get("os_thread_wakes_per_s"), summary.get("throughput_per_s")
    return float(wakes) / float(items) if wakes is not None and items else None


def _per_item(lab_key: str, model_key: str, scale: float = 1.0):
    """A per-item value: the lab's own (``lab_key``), or the model's rate ``model_key`` over its
    throughput, times ``scale``."""
    def f(summary: Mapping[str, Any]) -> float | None:
        v = summary.get(lab_key)
        if v is not None:
            return float(v)
        rate, items = summary.get(model_key), summary.get("throughput_per_s")
        return float(rate) * scale / float(items) if rate is not None and items else None
    return f


#: the runtime's threads (runs whose manifest keeps each thread's voluntary switches, since
#: 2026-11-26); no issue sets goals for them yet
THREAD_METRICS: tuple[Metric, ...] = (
    Metric("os_thread_sleeps_per_item", "relative", _m_sleeps_per_item, None,
           "times the Ms (every thread but sysmon) slept and were woken, per request or record (lab: "
           "voluntary context switches; model: Ms woken): the wake-ups the scheduler pays for"),
    Metric("sysmon_sleeps_per_item", "relative", _per_item("sysmon_sleeps_per_item", "sysmon_sleeps_per_s"), None,
           "times sysmon slept per request or record (its polls' usleeps and its deep sleeps; lab: its "
           "thread's voluntary switches): how long the process's busy spells keep it polling"),
    Metric("sysmon_cpu_us_per_item", "relative", _per_item("sysmon_cpu_us_per_item", "sysmon_cpu_cores", 1e6), None,
           "sysmon's CPU per request or record [us] (lab: its thread's schedstat; model: its polls at "
           "go.sysmon_poll_us and its wake-ups from the deep sleep)"),
    *(Metric(f"os_thread_sleeps_{cause}_per_item", "relative",
             _per_item(f"os_thread_sleeps_{cause}_per_item", f"os_thread_sleeps_{cause}_per_s"), None,
             f"the Ms' sleeps per request or record that the runtime path '{cause}' put them in (lab: "
             "lab.sleep_stacks_s, each voluntary switch by the function that slept, cfsim.lab.sleeps; "
             "model: the same path's sleeps). The lab's other paths (the forEachP of mark termination, "
             "contended runtime locks, runqgrab's back-off) the model does not have")
      for cause in SLEEP_CAUSES),
)

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
    *GC_MEMORY_METRICS,
    *GC_CYCLE_METRICS,
    *CPU_WINDOW_METRICS,
    *THREAD_METRICS,
)

#: below this the observed value is too small for a relative error to mean anything
_RELATIVE_FLOOR = {"throttled_s_per_s": 0.01, "backlog_final": 10.0, "lag_final_s": 0.05,
                   "latency_p50_s": 1e-4, "latency_p99_s": 1e-4, "gc_pause_s_per_s": 1e-5,
                   "gc_cycle_pause_p50_s": 1e-6, "gc_cycle_pause_max_s": 1e-6,
                   "cpu_window_spread_cores": 1e-3}


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


#: every metric by its name
BY_NAME: dict[str, Metric] = {m.name: m for m in METRICS}
