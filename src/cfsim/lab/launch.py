"""Scenario -> command lines and environments of the workload and the load generator, and the
GOMAXPROCS each policy should give. Pure functions (tested without running anything)."""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Mapping

from cfsim.scenario import Scenario
from cfsim.workloads.arrivals import parse_rate

# inherited settings that would silently change the Go runtime under test
GO_ENV_CLEARED = ("GOMAXPROCS", "GODEBUG", "GOGC", "GOMEMLIMIT", "GOTRACEBACK")


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


def expected_gomaxprocs(policy: Any, cpu_limit_cores: float | None, ncpu: int, round_: str = "floor") -> int:
    """What the policy gives at start-up (Go >= 1.25 main module):
    go1.25: min(ncpu, max(2, ceil(limit))); automaxprocs: max(1, floor|ceil(limit)), no cap at ncpu,
    runtime default when unlimited; host: ncpu; integer: itself."""
    if isinstance(policy, int):
        return policy
    if policy == "host" or cpu_limit_cores is None:
        return ncpu
    if policy == "automaxprocs":
        f = math.ceil if round_ == "ceil" else math.floor
        # automaxprocs reads quota/period as floats; guard against 1.9999999 from float error
        return max(1, int(f(round(cpu_limit_cores, 9))))
    return min(ncpu, max(2, math.ceil(round(cpu_limit_cores, 9))))


def workload_command(binary: Path, sc: Scenario, listen: str) -> list[str]:
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
            "-seed", str(sc["run.seed"]), "-round", g["round"]]
    return argv + gomaxprocs_env(g["gomaxprocs"])[1]


def workload_env(sc: Scenario, base: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in GO_ENV_CLEARED}
    env.update(gomaxprocs_env(sc["go.gomaxprocs"])[0])
    env["GOGC"] = "off" if sc["go.gogc"] < 0 else str(sc["go.gogc"])
    if sc["go.gomemlimit_mb"] is not None:
        env["GOMEMLIMIT"] = f"{int(sc['go.gomemlimit_mb'] * 1024 * 1024)}"
    return env


def loadgen_command(binary: Path, sc: Scenario, target_url: str, listen: str) -> list[str] | None:
    """The load generator's command line, or None for kinds that produce their own load."""
    w = sc.section("workload")
    if w["kind"] not in ("closed", "open"):
        return None
    argv = [str(binary), "-url", target_url, "-listen", listen, "-mode", w["kind"],
            "-seed", str(sc["run.seed"]), "-duration-s", f"{sc['run.duration_s'] + 5:g}"]
    if w["kind"] == "closed":
        return argv + ["-clients", str(w["clients"]), "-think-ms", f"{w['think_ms']:g}"]
    rate = resolve_rate(w["rate_per_s"], sc["run.duration_s"])
    return argv + ["-rate", json.dumps(rate), "-arrivals", w["arrivals"]]
