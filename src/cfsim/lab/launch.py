"""Scenario -> command lines and environments of the workload and the load generator (the GOMAXPROCS
a policy gives is the model's rule, cfsim.goruntime.gomaxprocs). Pure functions (tested without running anything).
Which kinds the load generator drives, and which take ``lab.load_fraction``, is in :mod:`cfsim.lab.kinds`;
the load generator's flags of each such kind are :data:`LOADGEN_FLAGS`."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Mapping

from cfsim.io.gctrace import GODEBUG_GCTRACE, GODEBUG_GCTRACE_SCAN
from cfsim.lab.kinds import kinds_with, lab_kind
from cfsim.scenario import Scenario, ScenarioError
from cfsim.workloads.arrivals import parse_rate
from cfsim.workloads.kinds import workload_kind

# inherited settings that would silently change the Go runtime under test
GO_ENV_CLEARED = ("GOMAXPROCS", "GODEBUG", "GOGC", "GOMEMLIMIT", "GOTRACEBACK", "AUTOMEMLIMIT")
MIB = 1 << 20


def resolve_rate(rate: Any, duration_s: float) -> float | list[list[float]]:
    """A number or [[t_s, rate], ...] as given; 'diurnal:<mean>:<amp>:<period_s>' becomes 1 s steps;
    a CSV path (t_s,rate_per_s) becomes its steps (:func:`cfsim.workloads.arrivals.parse_rate`)."""
    return parse_rate(rate).as_steps(duration_s)


def gomaxprocs_env(policy: Any) -> tuple[dict[str, str], list[str]]:
    """(environment additions, workload flags) for a ``go.gomaxprocs`` policy."""
    if isinstance(policy, int):
        return {"GOMAXPROCS": str(policy)}, []
    if policy == "host":
        # the pre-1.25 behaviour: all CPUs, no cgroup awareness, no periodic update
        return {"GODEBUG": "containermaxprocs=0,updatemaxprocs=0"}, []
    if policy == "automaxprocs":
        return {}, ["-automaxprocs"]
    return {}, []  # go1.25: the runtime's container-aware default, updated by sysmon every second


def workload_command(binary: Path, sc: Scenario, listen: str, gc_limiter_log: Path | None = None) -> list[str]:
    """The workload's argv; ``gc_limiter_log``: where it writes the GC CPU limiter's reads
    (``lab.gctrace`` runs, :mod:`cfsim.io.gclimiter`)."""
    w, g = sc.section("workload"), sc.section("go")
    rate = resolve_rate(w["rate_per_s"], sc["run.duration_s"])
    argv = [str(binary), "-listen", listen, "-kind", w["kind"],
            "-threads", str(w["threads"]), "-burn-ms", f"{w['burn_ms']:g}", "-sleep-ms", f"{w['sleep_ms']:g}",
            "-jitter-ms", f"{w['jitter_ms']:g}", "-rate", json.dumps(rate), "-workers", str(w["workers"]),
            "-cpu-ms-per-item", f"{w['cpu_ms_per_item']:g}", "-alloc-kb-per-item", f"{w['alloc_kb_per_item']:g}",
            "-initial-backlog", str(w["initial_backlog"]), "-fanout", str(w["fanout"]),
            "-cpu-ms-per-request", f"{w['cpu_ms_per_request']:g}",
            "-alloc-kb-per-request", f"{w['alloc_kb_per_request']:g}",
            "-live-heap-mb", f"{g['live_heap_mb']:g}", "-warmup-s", f"{sc['run.warmup_s']:g}",
            "-seed", str(sc["run.seed"]), "-round", g["round"],
            "-read-header-timeout-s", f"{sc['lab.read_header_timeout_s']:g}"]
    if g["gomemlimit_policy"] == "automemlimit":
        argv += ["-automemlimit", "-automemlimit-ratio", f"{g['automemlimit_ratio']:g}"]
    if gc_limiter_log is not None:
        argv += ["-gc-limiter-log", str(gc_limiter_log)]
    return argv + gomaxprocs_env(g["gomaxprocs"])[1]


def memory_limit_bytes(sc: Scenario) -> int | None:
    """The container memory limit in bytes, as written to the cgroup (the kernel rounds it down
    to whole pages)."""
    mb = sc["cgroup.memory_limit_mb"]
    return None if mb is None else int(mb * MIB)


def expected_gomemlimit(sc: Scenario, page_bytes: int = 4096) -> int | None:
    """GOMEMLIMIT the policy should give at start-up [bytes]; None = no limit (math.MaxInt64).

    automemlimit (memlimit.ApplyRatio) takes ``uint64(float64(limit) * ratio)`` of the limit the
    kernel reports, i.e. the written limit rounded down to a page."""
    if sc["go.gomemlimit_policy"] == "automemlimit":
        lim = memory_limit_bytes(sc)
        return None if lim is None else int(float(lim // page_bytes * page_bytes) * sc["go.automemlimit_ratio"])
    mb = sc["go.gomemlimit_mb"]
    return None if mb is None else int(mb * MIB)


def resolve_lab_keys(sc: Scenario) -> Scenario:
    """Apply the lab's derived keys: ``lab.load_fraction`` sets the open-loop arrival rate to
    that fraction of the CPU limit's request capacity (limit / cpu_ms_per_request: the kind's CPU
    per item). Only kinds whose lab facts allow it (:attr:`cfsim.lab.kinds.LabKind.load_fraction`)."""
    frac = sc["lab.load_fraction"]
    if frac is None:
        return sc
    kind = sc["workload.kind"]
    if not lab_kind(kind).load_fraction:
        allowed = " or ".join(repr(k) for k in kinds_with(load_fraction=True))
        raise ScenarioError("lab.load_fraction", f"only for workload.kind = {allowed} (got {kind!r})")
    if sc["cgroup.cpu_limit"] is None:
        raise ScenarioError("lab.load_fraction", "needs cgroup.cpu_limit (a fraction of what?)")
    rate = frac * sc["cgroup.cpu_limit"] * 1000.0 / sc[f"workload.{workload_kind(kind).cpu_key}"]
    return sc.with_overrides([("workload.rate_per_s", round(rate, 3))])


def gctrace_godebug(sc: Scenario) -> str:
    """The GODEBUG settings of the runtime's GC trace a run asks for (``lab.gctrace``, with the
    scan split of ``lab.gctrace_scan``); empty without the trace."""
    if not sc["lab.gctrace"]:
        return ""
    return GODEBUG_GCTRACE_SCAN if sc["lab.gctrace_scan"] else GODEBUG_GCTRACE


def workload_env(sc: Scenario, base: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in GO_ENV_CLEARED}
    env.update(gomaxprocs_env(sc["go.gomaxprocs"])[0])
    env["GOGC"] = "off" if sc["go.gogc"] < 0 else str(sc["go.gogc"])
    extra = (gctrace_godebug(sc), sc["lab.godebug"])
    if any(extra):
        env["GODEBUG"] = ",".join(x for x in (env.get("GODEBUG"), *extra) if x)
    if sc["go.gomemlimit_policy"] == "explicit" and sc["go.gomemlimit_mb"] is not None:
        env["GOMEMLIMIT"] = f"{int(sc['go.gomemlimit_mb'] * MIB)}"
    return env


def _closed_loop_flags(sc: Scenario) -> list[str]:
    w = sc.section("workload")
    return ["-clients", str(w["clients"]), "-think-ms", f"{w['think_ms']:g}", "-max-conns", str(w["client_max_conns"])]


def _open_loop_flags(sc: Scenario) -> list[str]:
    w = sc.section("workload")
    return ["-rate", json.dumps(resolve_rate(w["rate_per_s"], sc["run.duration_s"])), "-arrivals", w["arrivals"],
            "-max-conns", str(w["client_max_conns"])]


#: the load generator's own flags (after its common ones) for each kind it drives
#: (:attr:`cfsim.lab.kinds.LabKind.loadgen`; ``-mode`` is the kind's name)
LOADGEN_FLAGS: dict[str, Callable[[Scenario], list[str]]] = {"closed": _closed_loop_flags, "open": _open_loop_flags}


def loadgen_command(binary: Path, sc: Scenario, target_url: str, listen: str) -> list[str] | None:
    """The load generator's command line, or None for kinds that produce their own load."""
    kind = sc["workload.kind"]
    if not lab_kind(kind).loadgen:
        return None
    argv = [str(binary), "-url", target_url, "-listen", listen, "-mode", kind,
            "-seed", str(sc["run.seed"]), "-duration-s", f"{sc['run.duration_s'] + 5:g}"]
    return argv + LOADGEN_FLAGS[kind](sc)
