"""Memory advice next to the CPU limit and GOMAXPROCS: GOGC, GOMEMLIMIT and the container's memory
request/limit, and the flags of a container near a memory-limit collapse or an OOM kill.

Rules (each from the runtime's or the kernel's own behaviour, :mod:`cfsim.goruntime.memory`):

* **OOM**: the kernel kills a container whose anonymous memory reaches its limit
  (``memory.limit_in_bytes``); a Go process without GOMEMLIMIT grows its heap to the GOGC goal
  (about ``(1 + GOGC/100) x live``) whatever the limit.
* **Collapse ("death spiral")**: with GOMEMLIMIT, the heap goal is the limit minus the runtime's
  non-heap memory and 3 % headroom (``memoryLimitHeapGoal``); once that is within a few tens of
  percent of the live heap the GC runs back to back, the GC CPU limiter caps it at 50 %
  (``mgclimit.go``), and throughput falls by half or more. Flagged when the heap goal under
  GOMEMLIMIT is below ``COLLAPSE_GOAL_OVER_LIVE`` x the live heap, or when the limiter engaged.
* **A soft limit above the hard one**: GOMEMLIMIT at or above ~95 % of the container limit cannot
  keep the container under it (the runtime's non-heap memory, the page cache and the overshoot
  while the limiter is on come on top).

The suggestion: keep GOGC, size the memory limit like the VPA (the working-set peak x 1.15,
``--recommendation-margin-fraction``) rounded up to whole MiB, set GOMEMLIMIT as automemlimit
does (0.9 x the limit) only where the heap goal then stays clear of the collapse band, and check
the whole configuration with the event engine (no OOM, throughput and GC share as before).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from cfsim.goruntime.memory import AUTOMEMLIMIT_DEFAULT_RATIO

MiB = 1 << 20
NEAR_OOM_FRACTION = 0.90        # peak usage >= 90 % of the container limit
COLLAPSE_GOAL_OVER_LIVE = 1.25  # heap goal < 1.25 x live heap: the GC runs nearly back to back
SOFT_ABOVE_HARD = 0.95          # GOMEMLIMIT >= 95 % of the container limit
VPA_MARGIN = 0.15               # the VPA's safety margin on the working-set peak


@dataclass
class MemoryFlag:
    flag: str
    detail: str
    evidence: str


def memory_flags(s: Mapping[str, Any]) -> list[MemoryFlag]:
    """Flags of one container from a run summary (lab, simulated, or the same keys from live
    metrics): ``oom_killed``, ``near_oom``, ``memory_limit_collapse``, ``gomemlimit_above_limit``.

    >>> [f.flag for f in memory_flags({"memory_limit_bytes": 100 * MiB, "memory_max_usage_bytes": 95 * MiB})]
    ['near_oom']
    >>> [f.flag for f in memory_flags({"gomemlimit_bytes": 90 * MiB, "gc_heap_goal_mean_bytes": 80 * MiB,
    ...                                 "gc_heap_live_bytes": 75 * MiB})]
    ['memory_limit_collapse']
    """
    out: list[MemoryFlag] = []
    lim = s.get("memory_limit_bytes")
    peak = s.get("memory_max_usage_bytes")
    soft = s.get("gomemlimit_bytes")
    live = s.get("gc_heap_live_bytes")
    goal = s.get("gc_heap_goal_mean_bytes") or s.get("gc_heap_goal_bytes")
    mib = (lambda b: f"{b / MiB:.0f} MiB")
    if s.get("oom_kills"):
        at = s.get("memory_at_oom_bytes") or peak or lim
        out.append(MemoryFlag("oom_killed", "OOM-killed by the kernel",
                              f"{int(s['oom_kills'])} OOM kill(s) at {mib(at) if at else '?'} of a "
                              f"{mib(lim) if lim else '?'} limit; GOMEMLIMIT {mib(soft) if soft else 'none'}"))
    elif lim and peak and peak >= NEAR_OOM_FRACTION * lim:
        out.append(MemoryFlag("near_oom", f"memory peak at {100 * peak / lim:.0f} % of its limit",
                              f"high-water mark {mib(peak)} of a {mib(lim)} limit; GOMEMLIMIT "
                              f"{mib(soft) if soft else 'none'}"))
    if soft and live and goal:
        # the limiter counts only when it is recent: on during the window (a simulation), or in the
        # last 10 cycles of the process (a live gauge next to go_gc_cycles_total)
        limiter = False
        if s.get("gc_limiter_enabled_s") is not None:
            limiter = s["gc_limiter_enabled_s"] > 0
        elif s.get("gc_cycles_total") is not None and s.get("gc_limiter_last_enabled_cycle"):
            limiter = s["gc_limiter_last_enabled_cycle"] >= s["gc_cycles_total"] - 10
        if goal < COLLAPSE_GOAL_OVER_LIVE * live or limiter:
            why = (f"heap goal {mib(goal)} is {goal / live:.2f} x the live heap {mib(live)}" if goal < COLLAPSE_GOAL_OVER_LIVE
                   * live else "the GC CPU limiter engaged (GC above 50 % of the CPU it sees)")
            out.append(MemoryFlag("memory_limit_collapse", "GOMEMLIMIT near the live heap: GC back to back",
                                  f"GOMEMLIMIT {mib(soft)}; {why}"))
    if soft and lim and soft >= SOFT_ABOVE_HARD * lim:
        out.append(MemoryFlag("gomemlimit_above_limit", "GOMEMLIMIT at or above the container limit",
                              f"GOMEMLIMIT {mib(soft)} vs memory limit {mib(lim)}: the runtime's non-heap "
                              f"memory and any overshoot go over it"))
    return out


@dataclass
class MemoryAdvice:
    """What to set: the container's memory request and limit, GOGC and GOMEMLIMIT, with why."""

    memory_request_mb: float
    memory_limit_mb: float
    gogc: int
    gomemlimit_policy: str
    gomemlimit_mb: float | None
    checked: dict[str, Any] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    flags_now: list[MemoryFlag] = field(default_factory=list)

    def overrides(self) -> list[tuple[str, Any]]:
        return [("cgroup.memory_request_mb", self.memory_request_mb), ("cgroup.memory_limit_mb", self.memory_limit_mb),
                ("go.gogc", self.gogc), ("go.gomemlimit_policy", self.gomemlimit_policy),
                ("go.gomemlimit_mb", None if self.gomemlimit_policy == "automemlimit" else self.gomemlimit_mb)]

    def as_dict(self) -> dict[str, Any]:
        return {"memory_request_mb": self.memory_request_mb, "memory_limit_mb": self.memory_limit_mb,
                "gogc": self.gogc, "gomemlimit_policy": self.gomemlimit_policy, "gomemlimit_mb": self.gomemlimit_mb,
                "checked": self.checked, "reasons": self.reasons,
                "flags_now": [f.__dict__ for f in self.flags_now]}


def _limit_for(peak_bytes: float, margin: float) -> float:
    """The working-set peak plus the margin, rounded up to whole MiB."""
    return float(math.ceil(peak_bytes * (1 + margin) / MiB))


def advise_memory(scenario, simulate_fn: Callable | None = None, margin: float = VPA_MARGIN) -> MemoryAdvice | None:
    """Suggest the memory side of a scenario (after its CPU limit and GOMAXPROCS are set).

    Simulates the scenario without a memory limit (the working set it needs), then the suggested
    configuration, and widens the limit (x 1.15 per try, at most 4 tries) until the check holds:
    no OOM kill, throughput at least 98 % of the unlimited run, GC share at most 2 points more.
    GOGC stays as given; GOMEMLIMIT is automemlimit's 0.9 x limit unless that puts the heap goal
    in the collapse band, then it is left off (the limit alone, sized from the GOGC peak).
    None where the unlimited run uses no memory: a workload kind that models none (``threads``,
    bare OS threads with no Go heap) gets no memory advice rather than a limit of 0 MiB.
    """
    if simulate_fn is None:
        from cfsim.simulation import simulate as simulate_fn
    current = simulate_fn(scenario).summary
    free = scenario.with_overrides([("cgroup.memory_limit_mb", None), ("cgroup.memory_request_mb", None),
                                    ("go.gomemlimit_policy", "explicit"), ("go.gomemlimit_mb", None)])
    base = simulate_fn(free).summary
    peak = float(base.get("memory_max_usage_bytes") or 0.0)
    if peak <= 0.0:
        return None
    live = float(base.get("gc_heap_live_bytes") or scenario["go.live_heap_mb"] * MiB)
    gogc = int(scenario["go.gogc"])
    reasons = [f"unlimited, the process peaks at {peak / MiB:.0f} MiB (live heap {live / MiB:.0f} MiB, GOGC "
               f"{'off' if gogc < 0 else gogc})"]
    if gogc < 0:
        reasons.append("GOGC=off grows the heap to GOMEMLIMIT: it needs a limit; sized from 2 x the live heap")
        peak = max(peak, 2 * live)
    limit_mb = _limit_for(peak, margin)
    tput0 = float(base.get("throughput_per_s") or 0.0)
    gc0 = float(base.get("gc_cpu_fraction") or 0.0)
    checked: dict[str, Any] = {}
    policy = "automemlimit"
    for _ in range(4):
        soft_b = AUTOMEMLIMIT_DEFAULT_RATIO * limit_mb * MiB
        policy = "automemlimit" if soft_b > COLLAPSE_GOAL_OVER_LIVE * 1.1 * live or gogc < 0 else "explicit"
        trial = scenario.with_overrides([("cgroup.memory_limit_mb", limit_mb), ("cgroup.memory_request_mb", limit_mb),
                                         ("go.gomemlimit_policy", policy), ("go.gomemlimit_mb", None)])
        s = simulate_fn(trial).summary
        ok = (not s.get("oom_kills") and float(s.get("throughput_per_s") or 0.0) >= 0.98 * tput0
              and float(s.get("gc_cpu_fraction") or 0.0) <= gc0 + 0.02)
        checked = {"memory_limit_mb": limit_mb, "oom_kills": s.get("oom_kills"),
                   "throughput_per_s": s.get("throughput_per_s"), "throughput_unlimited_per_s": tput0,
                   "gc_cpu_fraction": s.get("gc_cpu_fraction"), "gc_cpu_fraction_unlimited": gc0,
                   "memory_max_usage_mb": (s.get("memory_max_usage_bytes") or 0) / MiB, "ok": ok}
        if ok:
            break
        reasons.append(f"{limit_mb:.0f} MiB: " + ("OOM-killed" if s.get("oom_kills") else
                                                  f"throughput {s.get('throughput_per_s', 0):.0f}/s vs {tput0:.0f}/s, "
                                                  f"GC {100 * float(s.get('gc_cpu_fraction') or 0):.0f} %"
                                                  f" vs {100 * gc0:.0f} %") + "; widening")
        limit_mb = float(math.ceil(limit_mb * (1 + margin)))
    gomem = round(AUTOMEMLIMIT_DEFAULT_RATIO * limit_mb, 1) if policy == "automemlimit" else None
    reasons.append(f"limit = peak x {1 + margin:g} = {limit_mb:.0f} MiB (the VPA's margin); request = limit "
                   f"(memory is not compressible: a request below the limit only invites an OOM kill under node "
                   f"pressure)")
    if policy == "automemlimit":
        reasons.append(f"GOMEMLIMIT = {AUTOMEMLIMIT_DEFAULT_RATIO:g} x limit = {gomem:g} MiB (automemlimit): a soft "
                       f"ceiling that turns a load spike into more GC instead of an OOM kill")
    else:
        reasons.append("no GOMEMLIMIT: 0.9 x the limit would put the heap goal within "
                       f"{COLLAPSE_GOAL_OVER_LIVE:g} x of the live heap (GC back to back)")
    return MemoryAdvice(limit_mb, limit_mb, gogc, policy, gomem, checked, reasons, memory_flags(current))


#: Prometheus series (cAdvisor, kube-state-metrics, client_golang's Go collector) -> summary keys
SERIES_KEYS = {
    "container_memory_working_set_bytes": "memory_working_set_bytes",
    "container_memory_usage_bytes": "memory_usage_bytes",
    "container_spec_memory_limit_bytes": "memory_limit_bytes",
    "container_oom_events_total": "oom_kills",
    "go_gc_heap_goal_bytes": "gc_heap_goal_bytes",
    "go_gc_heap_live_bytes": "gc_heap_live_bytes",
    "go_gc_gomemlimit_bytes": "gomemlimit_bytes",
    "go_gc_limiter_last_enabled_gc_cycle": "gc_limiter_last_enabled_cycle",
    "go_gc_cycles_total_gc_cycles_total": "gc_cycles_total",
}
#: what the runtime reports for "no GOMEMLIMIT" (math.MaxInt64) and cAdvisor for "no limit"
NO_LIMIT_BYTES = 2 ** 62


def summary_from_series(series: Mapping[str, Any]) -> dict[str, Any]:
    """The keys :func:`memory_flags` reads, from one container's exported series (name -> values
    over the audited window): high-water marks and means of the gauges, the increase of the OOM
    counter, "no limit" values as None.

    >>> s = summary_from_series({"container_memory_working_set_bytes": [90, 120, 110],
    ...                          "container_spec_memory_limit_bytes": [128, 128, 128],
    ...                          "container_oom_events_total": [0, 0, 1]})
    >>> s["memory_max_usage_bytes"], s["memory_limit_bytes"], s["oom_kills"]
    (120.0, 128.0, 1)
    """
    import numpy as np

    out: dict[str, Any] = {}
    for name, key in SERIES_KEYS.items():
        v = series.get(name)
        if v is None:
            continue
        a = np.asarray(v, dtype=float)
        a = a[np.isfinite(a)]
        if a.size == 0:
            continue
        if key == "oom_kills":
            out[key] = int(max(0.0, a[-1] - a[0]))
        elif key in ("memory_limit_bytes", "gomemlimit_bytes"):
            last = float(a[-1])
            out[key] = None if last <= 0 or last >= NO_LIMIT_BYTES else last
        elif key in ("gc_limiter_last_enabled_cycle", "gc_cycles_total"):
            out[key] = int(a[-1])
        else:
            out[key] = float(a[-1])
            if key == "memory_working_set_bytes":
                out["memory_max_usage_bytes"] = float(a.max())
            if key == "gc_heap_goal_bytes":
                out["gc_heap_goal_mean_bytes"] = float(a.mean())
    return out


MEMORY_FLAGS = ("oom_killed", "near_oom", "memory_limit_collapse", "gomemlimit_above_limit")


def memory_fix(flag: str, s: Mapping[str, Any], margin: float = VPA_MARGIN) -> tuple[str, float]:
    """(fix, severity in [0, 1]) for a memory flag from the same summary keys: the limit the
    VPA's margin would give over the observed peak, automemlimit's GOMEMLIMIT, or a GOMEMLIMIT that
    keeps the heap goal at twice the live heap.

    >>> memory_fix("near_oom", {"memory_max_usage_bytes": 100 * MiB, "memory_limit_bytes": 104 * MiB})[0]
    'raise the memory limit to 115 MiB (the peak x 1.15) with GOMEMLIMIT = 0.9 x limit (automemlimit)'
    """
    lim, peak = s.get("memory_limit_bytes"), s.get("memory_max_usage_bytes") or s.get("memory_at_oom_bytes")
    live, soft = s.get("gc_heap_live_bytes"), s.get("gomemlimit_bytes")
    if flag in ("oom_killed", "near_oom"):
        base = max(peak or 0.0, lim or 0.0) if flag == "oom_killed" else (peak or lim or 0.0)
        new = _limit_for(base, margin) if flag == "near_oom" else _limit_for(base * 1.2, 0.0)
        why = f"the peak x {1 + margin:g}" if flag == "near_oom" else "the VPA's own OOM bump: x 1.2"
        return (f"raise the memory limit to {new:.0f} MiB ({why}) with GOMEMLIMIT = 0.9 x limit (automemlimit)",
                1.0 if flag == "oom_killed" else 0.5)
    if flag == "memory_limit_collapse" and live:
        want = math.ceil(2 * live / MiB + (soft - (s.get("gc_heap_goal_mean_bytes") or soft)) / MiB)
        return (f"GOMEMLIMIT >= {want} MiB (heap goal about twice the live heap {live / MiB:.0f} MiB), with the "
                f"container limit >= GOMEMLIMIT / 0.9; or GOGC instead of a tight GOMEMLIMIT", 0.8)
    if flag == "gomemlimit_above_limit" and lim:
        return (f"GOMEMLIMIT = 0.9 x the limit = {0.9 * lim / MiB:.0f} MiB (automemlimit)", 0.3)
    return "", 0.0
