"""Where a scenario lies outside what the measurements behind the model cover.

The lab (``data/lab``) runs on a 2-CPU host: it pins the costs a 2-CPU host shows (wake-ups,
parks, the request path, GC bursts under a quota, throttling) but not those that only many-core
hosts show: steal probes whose cache-line transfers cross a large chip or a second socket
(``go.sched_xfer_growth``), ``sched.lock`` contention among many Ms in the scheduler at once
(``go.sched_lock_us``), threads sharing a core's SMT siblings (``host.threads_per_core``,
``host.smt_slowdown``). For those the model relies on the public measurements
(:mod:`cfsim.overheads.public`), which span hosts of 6 to 128 CPUs, and shows a band.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from cfsim.goruntime import gomaxprocs as gmp
from cfsim.scenario import Scenario
from cfsim.workloads._request_workload import REQUEST_KINDS

#: what the lab grids cover (data/lab: sched-overhead*, open-latency, overprovisioned, closed-menu,
#: cpu-stream, alloc-stream)
LAB_HOST_CPUS = 2
LAB_MAX_GOMAXPROCS = 64
LAB_REQUEST_MS = (0.01, 40.0)      # goroutine / request CPU from sched-overhead-fanout8 to menu's
LAB_ITEM_MS = (0.01, 1.0)          # stream record CPU
#: what the public measurements cover (cfsim.overheads.public): hosts of 6 to 128 CPUs
PUBLIC_HOST_CPUS = (6, 128)
PUBLIC_MAX_GOMAXPROCS = 128


@dataclass(frozen=True)
class Note:
    key: str       # the scenario key (or quantity) the note is about
    text: str


def effective_gomaxprocs(sc: Scenario) -> int:
    """GOMAXPROCS at start-up as the runtime would set it."""
    return gmp.gomaxprocs_value(sc["go.gomaxprocs"], sc["cgroup.cpu_limit"], sc["host.cpus"], sc["go.version"],
                                sc["go.round"], sc["cgroup.period_us"])


def is_go(sc: Scenario) -> bool:
    return sc["workload.kind"] in ("stream", "closed", "open")


def depends_on_unpinned(sc: Scenario) -> bool:
    """Whether the answer depends on parameters no measurement pins down: a Go process whose
    Ms can run on more CPUs than the lab's 2, or whose GOMAXPROCS exceeds its CPU limit (then
    bursts of up to GOMAXPROCS threads meet the quota and the many-core costs apply)."""
    if not is_go(sc):
        return False
    procs = effective_gomaxprocs(sc)
    parallel = min(procs, sc["host.cpus"])
    lim = sc["cgroup.cpu_limit"]
    over = lim is not None and procs > math.ceil(lim - 1e-9)
    return parallel > LAB_HOST_CPUS or over


def coverage_notes(sc: Scenario) -> list[Note]:
    """One note per way the scenario lies outside what the lab and the public measurements cover."""
    if not is_go(sc):
        return []
    notes: list[Note] = []
    cpus = sc["host.cpus"]
    procs = effective_gomaxprocs(sc)
    if cpus > LAB_HOST_CPUS and min(procs, cpus) > LAB_HOST_CPUS:
        if cpus > PUBLIC_HOST_CPUS[1]:
            notes.append(Note("host.cpus", f"{cpus} host CPUs: beyond every measurement behind the model (lab: "
                                           f"{LAB_HOST_CPUS}; public measurements: up to {PUBLIC_HOST_CPUS[1]}); "
                                           f"the many-core costs are extrapolated"))
        else:
            notes.append(Note("host.cpus", f"{cpus} host CPUs: the lab has {LAB_HOST_CPUS}; costs that grow with the host "
                                           f"(steal probes, sched.lock, SMT siblings) rest on public measurements "
                                           f"only -- see the band"))
    if procs > LAB_MAX_GOMAXPROCS:
        where = "and the public measurements" if procs > PUBLIC_MAX_GOMAXPROCS else "(public measurements reach " \
                f"{PUBLIC_MAX_GOMAXPROCS})"
        notes.append(Note("go.gomaxprocs", f"GOMAXPROCS {procs}: beyond the lab's grids (up to {LAB_MAX_GOMAXPROCS}) "
                                           f"{where}"))
    kind = sc["workload.kind"]
    if kind in REQUEST_KINDS:
        per_g = sc["workload.cpu_ms_per_request"] / sc["workload.fanout"]
        lo, hi = LAB_REQUEST_MS
        if not lo <= per_g <= hi:
            notes.append(Note("workload.cpu_ms_per_request", f"{per_g:g} ms of CPU per goroutine: the lab measured "
                                                            f"{lo:g} to {hi:g} ms"))
    elif kind == "stream":
        lo, hi = LAB_ITEM_MS
        if not lo <= sc["workload.cpu_ms_per_item"] <= hi:
            notes.append(Note("workload.cpu_ms_per_item", f"{sc['workload.cpu_ms_per_item']:g} ms per record: the lab "
                                                         f"measured {lo:g} to {hi:g} ms"))
    lim = sc["cgroup.cpu_limit"]
    if lim is not None and procs > math.ceil(lim - 1e-9) and min(procs, cpus) > LAB_HOST_CPUS:
        notes.append(Note("go.gomaxprocs", f"GOMAXPROCS {procs} above a {lim:g}-core limit on a {cpus}-CPU host: "
                                           f"bursts of up to {min(procs, cpus)} threads meet the quota; the loss "
                                           f"depends on SMT and the host's coherence costs (band)"))
    return notes
