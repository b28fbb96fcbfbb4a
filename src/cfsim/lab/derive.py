"""A run's ``summary.json`` from what its folder records: the manifest's counters and /metrics
samples at the window's ends, its quota history, its memory watch, and the Prometheus exports.

The runner computes every summary with :func:`summarize_manifest` after writing the manifest's
inputs, so any committed summary can be re-derived from the folder alone
(``python -m cfsim.lab.derive data/lab`` rewrites them; ``--check`` only reports differences).

For runs recorded before a key existed, gauges the window samples lack are read from the raw
Prometheus export at the window's end and ``gc_alloc_bytes`` is interpolated from the raw
samples (``derived_from_exports`` lists such keys: they are approximate to a scrape).
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any, Mapping

from cfsim.io.manifest import manifest_folders
from cfsim.lab import summary
from cfsim.lab.cgroup import CpuStat, MemoryStat
from cfsim.lab.kinds import lab_kind

SUMMARY_NOTES = {
    "window": "summary uses direct reads at t_start+warmup_s and t_start+duration_s (an OOM kill ends the "
              "window at the workload's last successful scrape)",
    "cpu_limit_cores": "time-averaged limit over the window, from the quota actually written (start-up quota "
                       "and every recorded change, scheduled or made by the VPA in the loop)",
    "gc_cpu_fraction": "runtime/metrics /cpu/classes/gc/total over (total - idle): P-time, see go_cpu_classes_*",
    "go_cpu_classes_busy_cores": "runtime/metrics /cpu/classes are P-time estimates (wall time x GOMAXPROCS "
                                 "split by what each P did), not CPU time: under a CFS quota a P whose thread is "
                                 "throttled keeps accruing time, so they exceed cpu_usage_cores "
                                 "(cpu_classes_busy_over_usage > 1); they are updated only at GC STW points",
    "sched_latency_p50_s": "runtime/metrics /sched/latencies (time goroutines spent runnable) with the "
                           "runtime's own buckets (cfsim_go_sched_latencies_seconds), over the window",
    "gc_pause_total_s": "STW pause time in the window (debug.ReadGCStats PauseTotal, go_gc_duration_seconds_sum)",
    "gc_heap_goal_mean_bytes": "time-mean of the Prometheus export of go_gc_heap_goal_bytes over the window "
                               "(1 s steps)",
    "memory_usage_mean_bytes": "time-mean of the memory cgroup's usage, sampled every 0.1 s",
    "memory_max_usage_bytes": "cgroup v1 memory.max_usage_in_bytes restarted at the window's start "
                              "(v2 memory.peak: since the cgroup's creation)",
    "oom_time_s": "run time at which the watcher (0.1 s) saw the workload gone after an OOM kill",
    "sched_cpu_fraction": "null; a pprof CPU profile (lab.profile_s) gives the scheduler's share in "
                          "manifest.profile.split",
}


def _body(b: Any) -> dict:
    return json.loads(b) if isinstance(b, (bytes, str)) else b


def _workload_series(body: Any, job: str = "workload") -> list[tuple[float, float]]:
    for s in _body(body)["data"]["result"]:
        if s["metric"].get("job", job) == job:
            return [(float(t), float(v)) for t, v in s["values"]]
    return []


def export_mean(body: Any, t0: float, t1: float) -> float | None:
    """Mean of a raw range export's steps inside [t0, t1] (None without a step there)."""
    vals = [v for t, v in _workload_series(body) if t0 <= t <= t1 and not math.isnan(v)]
    return sum(vals) / len(vals) if vals else None


def export_at(body: Any, t: float) -> float | None:
    """The raw range export's value at its last step at or before ``t``."""
    pts = [(tt, v) for tt, v in _workload_series(body) if tt <= t]
    return pts[-1][1] if pts else None


def samples_at(body: Any, t: float, job: str = "workload") -> float | None:
    """A counter at time ``t`` from raw samples (``metric[range]`` at their scrape times), linearly
    interpolated between the two scrapes around ``t``."""
    pts = _workload_series(body, job)
    before = [(tt, v) for tt, v in pts if tt <= t]
    after = [(tt, v) for tt, v in pts if tt >= t]
    if not before or not after:
        return None
    (ta, va), (tb, vb) = before[-1], after[0]
    return va if tb == ta else va + (vb - va) * (t - ta) / (tb - ta)


def scrape_health(raw_bodies: Mapping[str, Any], t0: float, t1: float) -> dict[str, Any]:
    """Per scrape job over [t0, t1]: steps, steps with ``up == 0``, the longest scrape."""
    out: dict[str, Any] = {}
    up, dur = raw_bodies.get("up"), raw_bodies.get("scrape_duration_seconds")
    if up is None:
        return out
    for s in _body(up)["data"]["result"]:
        vals = [float(v) for t, v in s["values"] if t0 <= float(t) <= t1]
        out[s["metric"].get("job", "?")] = {"steps": len(vals), "down": sum(1 for v in vals if v == 0)}
    if dur is not None:
        for s in _body(dur)["data"]["result"]:
            vals = [float(v) for t, v in s["values"] if t0 <= float(t) <= t1]
            job = s["metric"].get("job", "?")
            if vals and job in out:
                out[job]["max_scrape_duration_s"] = max(vals)
    return out


def mean_limit(manifest: Mapping[str, Any], r0_s: float, r1_s: float) -> float | None:
    """Time-average CPU limit over run time [r0, r1] from the quota actually written: the start-up
    bandwidth and every recorded change at the instant it was applied."""
    cg = manifest.get("cgroup") or {}
    bw = cg.get("initial_bandwidth") or {}
    q, period = bw.get("quota_us"), bw.get("period_us") or 100_000
    initial = None if q is None else q / period
    changes = []
    for c in cg.get("quota_changes") or []:
        lim = c.get("cpu_limit_cores")
        if lim is None and "vpa_action" in c:
            continue  # a VPA action that left the limit alone
        changes.append([float(c.get("applied_t_s", c["t_s"])), lim])
    changes.sort(key=lambda c: c[0])
    dedup: list[list[Any]] = []
    for t, lim in changes:  # strictly increasing times for mean_limit_cores
        if dedup and t <= dedup[-1][0]:
            dedup[-1][1] = lim
        else:
            dedup.append([t, lim])
    # the start-up quota was in force before t=0 too (a window may start there after an early OOM)
    shift = min(0.0, r0_s)
    return summary.mean_limit_cores(initial, [[t - shift, lim] for t, lim in dedup], r0_s - shift, r1_s - shift)


def _cpu(d: Mapping[str, int]) -> CpuStat:
    return CpuStat(**{k: int(d.get(k, 0)) for k in ("usage_ns", "nr_periods", "nr_throttled", "throttled_ns",
                                                    "nr_bursts", "burst_ns")})


def _mem(d: Mapping[str, Any] | None) -> MemoryStat | None:
    return None if not d else MemoryStat(**d)


# Manifests written before the GC/memory keys left out every series that was 0 at both ends;
# these series are always exposed, so a missing one was 0
_ALWAYS_EXPOSED = tuple(f"go_cpu_classes_{c}_cpu_seconds_total" for c in summary.CPU_CLASSES)


def snapshots(manifest: Mapping[str, Any]) -> tuple[summary.Snapshot, summary.Snapshot]:
    """The two window snapshots as the manifest records them."""
    times, cc, ws = manifest["times"], manifest["cgroup_counters"], manifest["window_samples"]
    mc = manifest.get("memory_counters") or {}
    pm = manifest.get("process_memory") or {}
    tlb = (manifest.get("host_interrupts") or {}).get("tlb") or {}
    workload = {end: dict(ws["workload"][end]) for end in ("start", "end")}
    if "memory_counters" not in manifest and workload["end"]:
        zeros = _ALWAYS_EXPOSED + lab_kind(manifest["scenario"]["workload"]["kind"]).always_exposed
        for end in ("start", "end"):
            for name in zeros:
                workload[end].setdefault(name, 0.0)
    snaps = []
    for end, t in (("start", times["window_start_unix_s"]), ("end", times["window_end_unix_s"])):
        snaps.append(summary.Snapshot(float(t), _cpu(cc[f"window_{end}"]), workload[end],
                                      dict(ws["loadgen"][end]), _mem(mc.get(f"window_{end}")),
                                      dict(pm.get(f"window_{end}") or {}), tlb_flushes=tlb.get(f"window_{end}")))
    return snaps[0], snaps[1]


def observed_gomaxprocs(raw_body: Any, t_start: float) -> dict[str, Any]:
    """Distinct values of go_sched_gomaxprocs_threads over time from a query_range body."""
    changes: list[list[float]] = []
    for t, v in _workload_series(raw_body):
        val = int(v)
        if not changes or changes[-1][1] != val:
            changes.append([round(t - t_start, 3), val])
    return {"changes_t_s": changes, "values": sorted({c[1] for c in changes}),
            "final": changes[-1][1] if changes else None}


GAUGES_FROM_EXPORTS = {"gc_heap_live_bytes": "go_gc_heap_live_bytes", "gogc_percent": "go_gc_gogc_percent",
                       "gomemlimit_bytes": "go_gc_gomemlimit_bytes",
                       "gc_limiter_last_enabled_cycle": "go_gc_limiter_last_enabled_gc_cycle"}


def summarize_manifest(manifest: Mapping[str, Any], raw_bodies: Mapping[str, Any] | None = None,
                       samples_bodies: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every summary key from a run's manifest (and its raw/sample exports, where given)."""
    raw_bodies = raw_bodies or {}
    kind = manifest["scenario"]["workload"]["kind"]
    s0, s1 = snapshots(manifest)
    t_start = manifest["times"]["start_unix_s"]
    limit = mean_limit(manifest, s0.t_s - t_start, s1.t_s - t_start)
    out = summary.summarize(kind, s0, s1, limit)
    gmp = raw_bodies.get("go_sched_gomaxprocs_threads")
    if gmp is not None:
        changes = observed_gomaxprocs(gmp, t_start)["changes_t_s"]
        r0, r1 = s0.t_s - t_start, s1.t_s - t_start
        out["gomaxprocs_changes"] = len([v for t, v in changes if r0 < t <= r1])
    goal = raw_bodies.get("go_gc_heap_goal_bytes")
    out.update(summary.gc_memory(s0, s1, export_mean(goal, s0.t_s, s1.t_s) if goal is not None else None))
    from_exports = []
    for key, metric in GAUGES_FROM_EXPORTS.items():
        if out[key] is None and metric in raw_bodies:
            v = export_at(raw_bodies[metric], s1.t_s)
            if v is not None and not (key == "gomemlimit_bytes" and v >= summary.NO_LIMIT_BYTES):
                out[key] = int(v)
                from_exports.append(key)
    alloc = (samples_bodies or {}).get("go_gc_heap_allocs_bytes_total")
    if out["gc_alloc_bytes"] is None and alloc is not None:
        a0, a1 = samples_at(alloc, s0.t_s), samples_at(alloc, s1.t_s)
        if a0 is not None and a1 is not None:
            out["gc_alloc_bytes"] = int(a1 - a0)
            from_exports.append("gc_alloc_bytes")
    watch = (manifest.get("memory_counters") or {}).get("watch") or {}
    out["memory_usage_mean_bytes"] = watch.get("mean_usage_bytes")
    oom = manifest.get("oom")
    if oom:
        out["oom_time_s"] = oom.get("detected_t_s")
        after = oom.get("memory_after_kill") or {}
        at = oom.get("memory_at_kill") or {}
        out["memory_at_oom_bytes"] = after.get("max_usage_bytes") or at.get("usage_bytes")
        out["oom_kills"] = oom.get("oom_kills", out["oom_kills"])
    out["run_status"] = manifest.get("status", "ok")
    if from_exports:
        out["derived_from_exports"] = from_exports
    return out


def rederive(folder: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(old summary, new summary) of a run folder."""
    from cfsim.io.lab import load_lab_run

    run = load_lab_run(folder)
    new = summarize_manifest(run["manifest"], run.get("raw", {}), run.get("samples", {}))
    return run["summary"], new


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-12 * max(abs(a), abs(b))
    return a == b


def diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    return {k: (old.get(k), new.get(k)) for k in sorted(set(old) | set(new)) if not _same(old.get(k), new.get(k))}


def run_folders(root: Path) -> list[Path]:
    return [p for p in manifest_folders(root) if (p / "summary.json").exists() and (p / "prom").is_dir()]


def main(argv: list[str] | None = None) -> int:
    """``python -m cfsim.lab.derive [--check] DIR...``: re-derive every run's summary.json."""
    args = list(sys.argv[1:] if argv is None else argv)
    check = "--check" in args
    roots = [Path(a) for a in args if a != "--check"]
    changed: dict[str, int] = {}
    for root in roots:
        for folder in run_folders(root):
            old, new = rederive(folder)
            d = diff(old, new)
            for k in d:
                changed[k] = changed.get(k, 0) + 1
            if d and not check:
                (folder / "summary.json").write_text(json.dumps(new, indent=1, sort_keys=True) + "\n")
    if not check:
        from cfsim.lab import grid, table

        for root in roots:
            for grid_json in sorted(Path(root).rglob("grid.json")):
                grid.refresh_drift(grid_json.parent)
                table.write_csv(grid_json.parent)
    for k, n in sorted(changed.items()):
        print(f"{k}: {n} runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
