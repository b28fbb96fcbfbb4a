"""The naive baseline every validation figure stands beside: what ``min(demand, caps)`` predicts.

A validation figure that a model without the mechanisms also meets does not test them. The naive
model here is the one the long-horizon engine already documents as its fallback
(:class:`cfsim.engine.response.AnalyticResponse`): the workload's declared CPU per item times its
rate (or the demand its clients or threads offer), cut by the CPU limit, GOMAXPROCS, the host's
CPUs left by its neighbours and the workload's own parallelism; throttled in every period when the
demand exceeds the limit and never otherwise; no GC, no scheduler, no page faults, no queueing
below saturation. It takes exactly the twin's scenario (the grid's calibrated per-item cost, the
neighbours' cores measured before the run, the scheduled limits), so the two answers differ only by
what cfsim models beyond the caps.

Latencies: an open loop below saturation answers its per-request CPU (no queue), and none above it
(the queue grows for as long as the run lasts); a closed loop answers Little's law over its clients,
``clients / throughput - think``; other workloads have no naive latency. The GC share of busy P-time
is 0 for Go work (the naive model's CPU has no GC).

GC and memory, the textbook reading of GOGC and GOMEMLIMIT (the Go GC guide, go.dev/doc/gc-guide):
the heap goal is the guide's ``live + (live + GC roots) x GOGC/100`` (live: ``go.live_heap_mb`` and
the program's own ``go.process_heap_mb``; roots: ``go.roots_mb``), capped by GOMEMLIMIT (explicit, or
automemlimit's ratio of the container limit) as if the heap were all the memory; a cycle every
``goal - live`` bytes allocated at the naive throughput; memory
usage the saw-tooth's mean ``(live + goal) / 2`` and its peak the goal; an OOM kill when the goal
is above the container's memory limit. No overshoot, no allocation during the mark, no non-heap
memory, no scavenger, no CPU limiter.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from cfsim.scenario import Scenario
from cfsim.validation import metrics as vm

__all__ = ["naive_summary", "textbook_gc", "naive_comparison", "NAIVE_DESCRIPTION"]

NAIVE_DESCRIPTION = ("usage = min(demand, limit, GOMAXPROCS, host CPUs left by the neighbours, workers); "
                     "throughput = usage / CPU per item; throttled in every period iff demand > limit; no GC, "
                     "no scheduler, no queue below saturation (cfsim.engine.response.AnalyticResponse)")


def naive_summary(scenario: Scenario) -> dict[str, float | None]:
    """The naive model's summary of ``scenario`` over its measurement window (the keys the
    validation metrics read; see the module docstring).

    >>> from cfsim.scenario import load_scenario
    >>> sc = load_scenario({"host": {"cpus": 2}, "cgroup": {"cpu_limit": 0.5},
    ...                     "go": {"gomaxprocs": 2},
    ...                     "workload": {"kind": "open", "rate_per_s": 300, "cpu_ms_per_request": 1.0},
    ...                     "run": {"duration_s": 10, "warmup_s": 2}})
    >>> s = naive_summary(sc)
    >>> s["cpu_usage_cores"], s["throughput_per_s"], s["throttled_ratio"], s["latency_p99_s"]
    (0.3, 300.0, 0.0, 0.001)
    >>> s = naive_summary(sc.with_overrides([("workload.rate_per_s", 800)]))
    >>> s["cpu_usage_cores"], s["throughput_per_s"], s["throttled_ratio"], s["latency_p99_s"]
    (0.5, 500.0, 1.0, None)
    """
    from cfsim.engine.longrun import nominal_demand_cores
    from cfsim.engine.response import AnalyticResponse, work_shape
    from cfsim.goruntime.gomaxprocs import gomaxprocs_value
    from cfsim.validation.regimes import limit_segments

    shape = work_shape(scenario)
    cpus = int(scenario["host.cpus"])
    free_cores = max(0.0, cpus - float(scenario.get("host.background_cores") or 0.0))
    demand = float(nominal_demand_cores(scenario))
    warm, dur = float(scenario["run.warmup_s"]), float(scenario["run.duration_s"])
    limits = limit_segments(scenario, {}, (warm, dur))
    segments = [(1.0, limits)] if limits is None or isinstance(limits, (int, float)) else limits
    response = AnalyticResponse(cpus, shape)
    total_w = sum(w for w, _ in segments) or 1.0
    usage = tput = throttled = 0.0
    saturated = False
    first_gmp = None
    for w, lim in segments:
        gmp = int(gomaxprocs_value(scenario["go.gomaxprocs"], lim, cpus, scenario["go.version"],
                                   scenario["go.round"], scenario["cgroup.period_us"]))
        first_gmp = gmp if first_gmp is None else first_gmp
        u, _, th = response(lim, gmp, demand)
        u = min(u, free_cores)
        saturated = saturated or u < demand * (1.0 - 1e-9)
        usage += w * u
        tput += w * u / shape.cpu_s_per_item
        throttled += w * th
    usage, tput, throttled = usage / total_w, tput / total_w, throttled / total_w
    out: dict[str, float | None] = {"cpu_usage_cores": usage, "throughput_per_s": tput, "throttled_ratio": throttled,
                                    "gomaxprocs": float(first_gmp) if first_gmp is not None else None,
                                    "latency_p50_s": None, "latency_p99_s": None}
    kind = scenario["workload.kind"]
    if kind == "open" and not saturated:
        out["latency_p50_s"] = out["latency_p99_s"] = shape.cpu_s_per_item
    elif kind == "closed" and tput > 0:
        response_s = max(shape.cpu_s_per_item, float(scenario["workload.clients"]) / tput
                         - float(scenario["workload.think_ms"]) / 1000.0)
        out["latency_p50_s"] = out["latency_p99_s"] = response_s
    if kind != "threads":
        # the GC share the metrics read from /cpu/classes: none of the busy P-time
        busy = max(usage, 1e-12) * (dur - warm)
        out.update({"go_cpu_classes_gc_total_cpu_seconds_total": 0.0,
                    "go_cpu_classes_total_cpu_seconds_total": busy,
                    "go_cpu_classes_idle_cpu_seconds_total": 0.0})
        out.update(textbook_gc(scenario, tput, dur - warm))
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in out.items()}


def textbook_gc(scenario: Scenario, throughput_per_s: float, window_s: float) -> dict[str, float | None]:
    """The textbook GC of the module docstring over a window of ``window_s`` at ``throughput_per_s``.

    >>> from cfsim.scenario import load_scenario
    >>> sc = load_scenario({"go": {"live_heap_mb": 16, "process_heap_mb": 0, "roots_mb": 0, "gogc": 100},
    ...                     "workload": {"kind": "stream", "alloc_kb_per_item": 64}})
    >>> g = textbook_gc(sc, 1000.0, 10.0)     # 62.5 MiB/s over 16 MiB of headroom
    >>> g["gc_cycles"] / 10.0, g["gc_heap_goal_mean_bytes"] / 2**20, g["oom_kills"]
    (3.90625, 32.0, 0.0)
    >>> g = textbook_gc(sc.with_overrides([("go.gogc", -1), ("cgroup.memory_limit_mb", 40),
    ...                                    ("go.gomemlimit_policy", "automemlimit")]), 1000.0, 10.0)
    >>> round(g["gc_heap_goal_mean_bytes"] / 2**20, 3), g["oom_kills"]   # 0.9 x 40 MiB
    (36.0, 0.0)
    """
    from cfsim.validation.gcmemory import gomemlimit_mb
    from cfsim.workloads.kinds import workload_kind

    mib = float(1 << 20)
    live = (float(scenario.get("go.live_heap_mb") or 0.0) + float(scenario.get("go.process_heap_mb") or 0.0)) * mib
    roots = float(scenario.get("go.roots_mb") or 0.0) * mib
    gogc = scenario.get("go.gogc", 100)
    goals = [live + (live + roots) * gogc / 100.0] if gogc is not None and gogc >= 0 else []
    gml = gomemlimit_mb(scenario)
    if gml is not None:
        goals.append(gml * mib)
    if not goals or live <= 0:
        return {}
    goal = max(min(goals), live)
    alloc_key = workload_kind(scenario["workload.kind"]).alloc_key
    alloc_per_s = throughput_per_s * float(scenario.get(f"workload.{alloc_key}") or 0.0) * 1024.0 if alloc_key else 0.0
    cycles_per_s = alloc_per_s / (goal - live) if goal > live else (math.inf if alloc_per_s > 0 else 0.0)
    limit_mb = scenario.get("cgroup.memory_limit_mb")
    return {"gc_cycles": cycles_per_s * window_s, "duration_s": window_s, "gc_heap_goal_mean_bytes": goal,
            "gc_heap_live_bytes": live, "memory_usage_mean_bytes": 0.5 * (live + goal),
            "memory_max_usage_bytes": goal,
            "oom_kills": float(bool(limit_mb) and goal > float(limit_mb) * mib)}


def error_factor(e: float) -> float:
    """A relative error ``sim / obs - 1`` as the factor ``max(sim / obs, obs / sim)`` (inf at 0)."""
    r = 1.0 + e
    return math.inf if r <= 0 else max(r, 1.0 / r)


def naive_comparison(runs: Sequence[Mapping[str, Any]], metric: str) -> dict[str, Any] | None:
    """The model against the naive baseline (:mod:`cfsim.validation.naive`) on the runs where both
    have an error for ``metric``: their number, both median |error|s, and in how many runs each is the
    closer one (ties, e.g. both exact at a cap, in neither). For a relative metric closeness is the
    factor ``max(sim / obs, obs / sim)`` (a relative error caps a prediction too low at -1, and the
    naive model predicts too low: its latency has no queue, its CPU no runtime), and both median
    factors are given too. None when no run has both.

    >>> runs = [{"errors": {"cpu_usage_cores": e}, "naive_errors": {"cpu_usage_cores": n}}
    ...         for e, n in ((0.01, 0.10), (-0.02, 0.05), (0.0, 0.0), (0.2, None))]
    >>> c = naive_comparison(runs, "cpu_usage_cores")
    >>> c["n"], c["median_abs"], c["model_median_abs"], c["model_closer"], c["naive_closer"]
    (3, 0.05, 0.01, 2, 0)
    >>> runs = [{"errors": {"latency_p99_s": 1.5}, "naive_errors": {"latency_p99_s": -0.9}}]
    >>> c = naive_comparison(runs, "latency_p99_s")   # 2.5x too high is closer than 10x too low
    >>> c["model_closer"], c["median_abs"] < c["model_median_abs"], round(c["naive_median_factor"], 3)
    (1, True, 10.0)
    """
    pairs = [(r["errors"][metric], r["naive_errors"][metric]) for r in runs
             if r.get("errors", {}).get(metric) is not None and (r.get("naive_errors") or {}).get(metric) is not None]
    if not pairs:
        return None
    model = np.array([a for a, _ in pairs], dtype=float)
    naive = np.array([b for _, b in pairs], dtype=float)
    out: dict[str, Any] = {"n": len(pairs), "median_abs": float(np.median(np.abs(naive))),
                           "model_median_abs": float(np.median(np.abs(model)))}
    if vm.BY_NAME[metric].kind == "relative":
        model, naive = np.array([error_factor(e) for e in model]), np.array([error_factor(e) for e in naive])
        out.update(model_median_factor=float(np.median(model)), naive_median_factor=float(np.median(naive)))
    else:
        model, naive = np.abs(model), np.abs(naive)
    out.update(model_closer=int(np.sum(model < naive)), naive_closer=int(np.sum(naive < model)))
    return out
