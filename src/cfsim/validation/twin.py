"""A lab run's simulated twin: the same resolved scenario, run on the event engine.

A lab run folder holds ``scenario.toml`` (the resolved scenario the real run used) and
``manifest.json``. The twin simulates that scenario, optionally with calibrated parameters
(``{"section.key": value}``) and with the workload's measured cost per item from the grid's
calibration runs (the machine's speed drifts between runs: comparisons normalise by it).
"""
from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import Any, Mapping

from cfsim.kernel.hostinfo import kernel_hz
from cfsim.scenario import Scenario, load_scenario
from cfsim.simulation import SimulationResult, simulate


def is_run_folder(path: Path) -> bool:
    return (path / "manifest.json").is_file() and (path / "summary.json").is_file() \
        and (path / "scenario.toml").is_file()


def find_runs(path: str | Path) -> list[Path]:
    """The run folders at or below ``path`` (a run folder itself, a grid, or a tree of grids)."""
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"{root}: no such run folder or grid")
    if is_run_folder(root):
        return [root]
    runs = sorted(p.parent for p in root.rglob("manifest.json") if is_run_folder(p.parent))
    if not runs:
        raise FileNotFoundError(f"{root}: no lab run folders below it (a run folder holds manifest.json, "
                                f"summary.json and scenario.toml)")
    return runs


def run_scenario(run_dir: Path) -> Scenario:
    return load_scenario(run_dir / "scenario.toml")


def observed_summary(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "summary.json").read_text())


def run_manifest(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "manifest.json").read_text())


def is_calibration_run(run_dir: Path) -> bool:
    """Grid calibration runs (unconstrained, GOMAXPROCS 1) are named ``calib-*`` by the lab."""
    return run_dir.name.startswith("calib")


#: the host counts as saturated (other processes took CPU the workload could have used) when
#: it was this busy on average during the run
SATURATED_FRACTION = 0.9


def host_contention_cores(run_dir: Path, scenario: Scenario) -> float:
    """CPU other processes took from the workload on a saturated host [cores], else 0.

    The lab records the host's busy CPU and the part outside the workload's cgroup (other
    tenants, the harness, the load generator, Prometheus). Only when the host was saturated,
    and only beyond the CPUs the workload's limit left free, did that CPU come out of what the
    workload could get; the twin then runs with ``host.background_cores`` set to it.
    """
    cpus = scenario["host.cpus"]
    host = run_manifest(run_dir).get("host_cpu") or {}
    busy, others = host.get("host_busy_cores"), host.get("others_cores")
    if busy is None or others is None or busy < SATURATED_FRACTION * cpus:
        return 0.0
    limits = [scenario["cgroup.cpu_limit"]] + [lim for _, lim in scenario["cgroup.limit_schedule"] or []]
    reach = cpus if any(lim is None for lim in limits) else min(cpus, max(limits))
    gomaxprocs = observed_summary(run_dir).get("gomaxprocs")
    if isinstance(gomaxprocs, (int, float)) and gomaxprocs > 0 and scenario["workload.kind"] != "threads":
        reach = min(reach, gomaxprocs)  # a Go process runs user code on at most GOMAXPROCS CPUs
    stolen = max(0.0, others - (cpus - reach))
    return float(min(stolen, 0.9 * cpus))


def run_hz(run_dir: Path) -> int | None:
    """The tick rate of the kernel the run used: recorded by the lab, or (for runs recorded
    before it was) read from this machine when the run was made on this same kernel."""
    host = run_manifest(run_dir).get("host") or {}
    if host.get("hz"):
        return int(host["hz"])
    if host.get("kernel") == platform.release():
        return kernel_hz()
    return None


def recorded_limit_schedule(run_dir: Path, scenario: Scenario) -> list[list[float]] | None:
    """The quota changes a run received from outside its scenario, as ``cgroup.limit_schedule``.

    In a hardware-in-the-loop run (``lab.vpa_in_the_loop``) cfsim's VPA resized the real quota
    while the run went on; the manifest records each write (``cgroup.quota_changes``, with the
    instant it was applied). The twin must replay them, or it compares a resized container with
    one that kept its first limit."""
    if not scenario["lab.vpa_in_the_loop"]:
        return None
    changes = (run_manifest(run_dir).get("cgroup") or {}).get("quota_changes") or []
    steps = [[float(c.get("applied_t_s", c["t_s"])), float(c["cpu_limit_cores"])] for c in changes]
    return steps or None


def twin(run_dir: Path, params: Mapping[str, Any] | None = None, contention: bool = True) -> SimulationResult:
    """Simulate the run's scenario with optional parameter overrides (``section.key`` -> value),
    and (``contention``) with the CPU other processes took on a saturated host."""
    scenario = run_scenario(run_dir)
    overrides = dict(params or {})
    schedule = recorded_limit_schedule(run_dir, scenario)
    if schedule and "cgroup.limit_schedule" not in overrides:
        overrides["cgroup.limit_schedule"] = schedule
    hz = run_hz(run_dir)
    if hz and hz != scenario["host.hz"] and "host.hz" not in overrides:
        overrides["host.hz"] = hz  # the real kernel's tick, not the scenario's default
    if contention and "host.background_cores" not in overrides:
        background = host_contention_cores(run_dir, scenario)
        if background:
            overrides["host.background_cores"] = background
    if overrides:
        scenario = scenario.with_overrides(list(overrides.items()))
    return simulate(scenario)
