"""GOMAXPROCS policies: what value a Go process runs with, and when it changes.

Rules (uber-go/automaxprocs v1.6.0 ``maxprocs.Set``, https://github.com/uber-go/automaxprocs; golang/go
``src/runtime/cgroup_linux.go`` and ``proc.go``; "Container-aware GOMAXPROCS", The Go Blog, 2025,
https://go.dev/blog/container-aware-gomaxprocs):

* ``"host"``: Go <= 1.24 without automaxprocs (or ``GODEBUG=containermaxprocs=0``): the
  number of logical CPUs (affinity mask) of the node.
* ``"automaxprocs"``: uber-go/automaxprocs v1.6 ``maxprocs.Set``: ``max(1, round(quota/period))``
  with ``round`` = floor (``DefaultRoundFunc``) or ceil (``RoundQuotaFunc``); evaluated once at
  process start, never updated; **no cap at the CPU count**; an unlimited quota leaves the
  runtime default (the CPU count) alone.
* ``"go1.25"``: ``runtime/cgroup_linux.go`` ``adjustCgroupGOMAXPROCS``:
  ``min(cpus, max(2, ceil(quota/period)))``, re-read by sysmon at most once per second
  (``sysmonUpdateGOMAXPROCS``). Only binaries whose go.mod says go >= 1.25 get it
  (``containermaxprocs``/``updatemaxprocs`` GODEBUGs changed in 25, old value 0); for an older
  ``go.version`` the process behaves like ``"host"``.
* an integer: explicit ``GOMAXPROCS``: fixed, disables the automatic policies.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

SYSMON_UPDATE_NS = 1_000_000_000  # "at most once per second" (proc.go sysmon)


def version_tuple(version: str) -> tuple[int, int]:
    """``"1.25"`` -> ``(1, 25)``."""
    major, minor = str(version).split(".")[:2]
    return int(major), int(minor)


def container_aware(policy, version: str) -> bool:
    """True when the Go 1.25 container-aware default (and its periodic update) is in effect."""
    return policy == "go1.25" and version_tuple(version) >= (1, 25)


def _quota_period(limit_cores: float | None, period_us: int) -> tuple[int, int] | None:
    if limit_cores is None:
        return None
    return int(round(limit_cores * period_us)), int(period_us)


def automaxprocs_value(limit_cores: float | None, cpus: int, round_: str = "floor",
                       period_us: int = 100_000, min_value: int = 1) -> int:
    """uber-go/automaxprocs: ``max(min_value, round(quota/period))``; unlimited -> ``cpus``.

    >>> automaxprocs_value(1.94, 24), automaxprocs_value(1.5, 24), automaxprocs_value(0.5, 24)
    (1, 1, 1)
    >>> automaxprocs_value(8, 4), automaxprocs_value(1.5, 24, "ceil")
    (8, 2)
    """
    qp = _quota_period(limit_cores, period_us)
    if qp is None:
        return int(cpus)
    q, p = qp
    if round_ == "floor":
        v = q // p
    elif round_ == "ceil":
        v = -(-q // p)
    else:
        raise ValueError(f"round must be 'floor' or 'ceil' (got {round_!r})")
    return max(int(min_value), int(v))


def go125_value(limit_cores: float | None, cpus: int, period_us: int = 100_000) -> int:
    """Go 1.25 ``defaultGOMAXPROCS``: ``min(cpus, max(2, ceil(quota/period)))``.

    >>> go125_value(0.25, 24), go125_value(8.5, 24), go125_value(0.1, 1), go125_value(None, 6)
    (2, 9, 1, 6)
    """
    qp = _quota_period(limit_cores, period_us)
    procs = int(cpus)
    if qp is None:
        return procs
    q, p = qp
    limit = max(2, -(-q // p))
    return min(procs, limit)


def gomaxprocs_value(policy, limit_cores: float | None, cpus: int, version: str = "1.26",
                     round_: str = "floor", period_us: int = 100_000) -> int:
    """The GOMAXPROCS a process computes for ``policy`` when it reads ``limit_cores``."""
    if isinstance(policy, bool):
        raise ValueError(f"bad GOMAXPROCS policy {policy!r}")
    if isinstance(policy, int):
        if policy < 1:
            raise ValueError(f"explicit GOMAXPROCS must be >= 1 (got {policy})")
        return policy
    if policy == "host":
        return int(cpus)
    if policy == "automaxprocs":
        return automaxprocs_value(limit_cores, cpus, round_, period_us)
    if policy == "go1.25":
        if version_tuple(version) < (1, 25):
            return int(cpus)  # go.mod < 1.25: containermaxprocs=0
        return go125_value(limit_cores, cpus, period_us)
    raise ValueError(f"unknown GOMAXPROCS policy {policy!r}")


def limit_at(t_s: float, base_limit: float | None,
             schedule: Sequence[Sequence] | None) -> float | None:
    """The CPU limit in force at ``t_s`` given ``cgroup.cpu_limit`` and ``cgroup.limit_schedule``."""
    lim = base_limit
    for t, v in schedule or ():
        if t <= t_s:
            lim = v
        else:
            break
    return lim


@dataclass(frozen=True)
class GomaxprocsTimeline:
    """GOMAXPROCS change points ``[(t_s, value), ...]`` over a run (first at t=0)."""

    points: tuple[tuple[float, int], ...]

    def at(self, t_s: float) -> int:
        v = self.points[0][1]
        for t, val in self.points:
            if t <= t_s:
                v = val
            else:
                break
        return v


def gomaxprocs_timeline(policy, cpus: int, duration_s: float, base_limit: float | None,
                        schedule: Sequence[Sequence] | None = None, version: str = "1.26",
                        round_: str = "floor", period_us: int = 100_000,
                        restarts_s: Sequence[float] = (), start_s: float = 0.0) -> GomaxprocsTimeline:
    """What value a process has at each time, given a limit schedule (in-place resizes) and
    process restarts (e.g. a VPA recreate).

    * a (re)start reads the limit in force at that instant, for every policy;
    * automaxprocs, host and explicit values never change between restarts;
    * go1.25 (Go >= 1.25) re-reads every second after the (re)start, so an in-place resize at
      ``t`` takes effect at the first sysmon check at or after ``t`` (within 1 s).

    >>> gomaxprocs_timeline("go1.25", 24, 5, 4.0, [[2.5, 1.5]]).points
    ((0.0, 4), (3.0, 2))
    >>> gomaxprocs_timeline("automaxprocs", 24, 5, 4.0, [[2.5, 1.5]]).points
    ((0.0, 4),)
    >>> gomaxprocs_timeline("automaxprocs", 24, 5, 4.0, [[2.5, 1.5]], restarts_s=[4.0]).points
    ((0.0, 4), (4.0, 1))
    """
    def val(t: float) -> int:
        return gomaxprocs_value(policy, limit_at(t, base_limit, schedule), cpus, version, round_, period_us)

    starts = sorted({float(start_s), *(float(r) for r in restarts_s if start_s < r < duration_s)})
    points: list[tuple[float, int]] = []

    def push(t: float, v: int) -> None:
        if not points or points[-1][1] != v:
            points.append((t, v))

    updates = container_aware(policy, version)
    for i, t0 in enumerate(starts):
        t1 = starts[i + 1] if i + 1 < len(starts) else float(duration_s)
        push(t0, val(t0))
        if updates:
            # sysmon checks at t0 + k s; only limit changes matter, so jump between them.
            change_times = sorted(float(t) for t, _ in (schedule or ()) if t0 < t < t1)
            for tc in change_times:
                k = math.ceil((tc - t0) / 1.0 - 1e-12)
                tcheck = t0 + k * 1.0
                if tcheck < t1:
                    push(tcheck, val(tcheck))
    return GomaxprocsTimeline(tuple(points))
