"""After ``kill -9`` of a lab run, the next run removes everything the dead one started: its
cgroups (workload CPU and memory, harness), the workload, Prometheus and the load generator
inside them, and Prometheus' temporary TSDB.

Real processes under real cgroups (about 20 s). Skips, with the reason, where the lab cannot run.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cfsim.lab import build, cgroup, preflight, prometheus, runner
from cfsim.lab.lock import machine_lock

pytestmark = pytest.mark.lab

SCENARIO = """
[cgroup]
cpu_limit = 0.5
memory_limit_mb = 512
[go]
gomaxprocs = 1
live_heap_mb = 4
[workload]
kind = "open"
rate_per_s = 50
cpu_ms_per_request = 0.2
[run]
duration_s = 120
warmup_s = 1
"""


def _pids(dirs: list[Path]) -> set[int]:
    out: set[int] = set()
    for d in dirs:
        try:
            out |= {int(x) for x in (d / "cgroup.procs").read_text().split()}
        except FileNotFoundError:
            pass
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_next_run_cleans_up_after_a_killed_one(tmp_path):
    try:
        tools = preflight.check()
        build.build()
    except (preflight.LabUnavailable, build.BuildError) as exc:
        pytest.skip(f"lab unavailable: {exc}")
    scenario = tmp_path / "s.toml"
    scenario.write_text(SCENARIO)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    proc = subprocess.Popen([sys.executable, "-m", "cfsim", "lab", "run", str(scenario), "--out", str(tmp_path / "run")],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    name = cgroup.run_name("run", pid=proc.pid)
    roots = [tools.mounts.v1_cpu or tools.mounts.v2, tools.mounts.v1_memory]
    workload_dirs = [r / name for r in roots if r is not None]
    harness_dirs = [(tools.mounts.v1_cpu or tools.mounts.v2) / f"{name}-harness"]
    tsdb_glob = f"{prometheus.TSDB_PREFIX}{proc.pid}-*"
    tmp_root = Path(os.environ.get("TMPDIR", "/tmp"))
    try:
        # wait (through the machine lock) until the workload, Prometheus and the load generator run
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            harness = _pids(harness_dirs) - {proc.pid}
            if _pids(workload_dirs) and len(harness) >= 2 and list(tmp_root.glob(tsdb_glob)):
                break
            assert proc.poll() is None, "the lab run ended before it could be killed"
            time.sleep(0.5)
        else:
            pytest.fail("the run never started its processes")
        time.sleep(2)
        left = _pids(workload_dirs) | (_pids(harness_dirs) - {proc.pid})
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        assert left and all(_alive(p) for p in left), "kill -9 left nothing behind to clean"
        with machine_lock("test: clean-up after a killed lab run"):
            removed = runner.cleanup_stale(tools.mounts)
        assert all(not d.exists() for d in workload_dirs + harness_dirs)
        assert {str(d) for d in workload_dirs + harness_dirs} <= set(removed["cgroups"])
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in left) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(p) for p in left), "a process of the killed run survived"
        assert not list(tmp_root.glob(tsdb_glob)) and removed["tsdb"]
    finally:
        if proc.poll() is None:
            proc.kill()
        with machine_lock("test: clean-up after a killed lab run"):
            runner.cleanup_stale(tools.mounts)
