"""Who used the host's CPUs during a lab run: the workload, the harness (Prometheus, the load
generator, this runner and its exporter, all in the run's harness cgroup) and everything else
(other tenants of a shared machine), each measured on its own, never derived from the workload's
usage alone.

The counters are read at the snapshot instant itself, before any slow HTTP read of ``/metrics``
(a throttled workload may take a second to answer): reading ``/proc/stat`` after the HTTP read
stretched its interval past the window and put ``others_cores`` above the host's CPU count in
34 of the first 150 runs.

Sources: ``/proc/stat`` (``Documentation/filesystems/proc.rst``: USER_HZ ticks, the ``cpu`` line
is the sum over CPUs; steal is time a hypervisor gave to other guests), cgroup v1
``cpuacct.usage`` of the root (every task on the host, hierarchical) and of the run's cgroups
(ns), v2 ``cpu.stat`` ``usage_usec``.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cfsim.kernel.limits import NICE_0_WEIGHT
from cfsim.lab.cgroup import Mounts, parse_keyed

TENANT_SHARES = NICE_0_WEIGHT  # a process in the root cgroup weighs as cpu.shares 1024 (nice 0)


@dataclass(frozen=True)
class ProcStat:
    busy_s: float  # user+nice+system+irq+softirq+steal (as the first lab manifests counted it)
    total_s: float
    steal_s: float
    user_s: float = 0.0  # user time of processes that are not niced (the ``user`` column)


@dataclass(frozen=True)
class CpuReading:
    """CPU counters of the host and of the run's cgroups at one instant."""

    t_s: float
    host: ProcStat
    workload_ns: int
    harness_ns: int | None
    root_ns: int | None  # every task on the host (root cgroup), None if the interface lacks it


def parse_proc_stat(text: str, hz: int) -> ProcStat:
    """The aggregate ``cpu`` line of ``/proc/stat`` -> seconds (guest time is already in user)."""
    fields = [int(x) for x in text.splitlines()[0].split()[1:]]
    fields += [0] * (8 - len(fields))
    idle = fields[3] + fields[4]  # idle + iowait
    total = sum(fields[:8])
    return ProcStat((total - idle) / hz, total / hz, fields[7] / hz, fields[0] / hz)


#: steal above this during a run's window [cores] is worth a warning: the hypervisor ran other
#: guests on this VM's CPUs, which no priority or cgroup weight wins back. On this lab's VM
#: (2026-12-02) a CPU-bound group's throttled time under a 0.5-core quota fell 0.82 s/s per
#: stolen core (eight runs, 0.005-0.685 cores stolen; 1.498 s/s at none, cfsim's engine 1.500),
#: and a group of two 5 ms bursty threads under 0.9 cores used 0.64-0.71 instead of 0.89 beside
#: 0.74-0.97 stolen cores. At 0.05 stolen cores the throttled time moves 0.04 s/s.
STEAL_WARN_CORES = 0.05


def steal_warning(host_cpu: dict[str, Any]) -> str | None:
    """A manifest warning when the hypervisor took more than ``STEAL_WARN_CORES`` during the window
    (``host_cpu`` as :func:`neighbours` gives it), else None.

    >>> steal_warning({"steal_cores": 0.31}) is not None, steal_warning({"steal_cores": 0.01})
    (True, None)
    """
    steal = host_cpu.get("steal_cores")
    if steal is None or steal <= STEAL_WARN_CORES:
        return None
    return (f"the hypervisor took {steal:.2f} cores from this VM during the window (steal, /proc/stat): "
            "the workload's throughput, latency and throttling are not the kernel's and the runtime's alone")


_BUSY_LOOP = "import sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end: pass"


def loaded_steal_cores(seconds: float = 0.5) -> float:
    """The hypervisor's steal over ``seconds`` while a busy loop runs on every CPU [cores].

    Steal accrues only while a virtual CPU wants to run (``Documentation/filesystems/proc.rst``:
    "steal: involuntary wait"), so an idle VM shows none however contended its host is: on
    2026-12-02 idle readings here gave 0.00-0.06 cores just before runs that lost 0.2-0.9. The
    busy loops make the CPUs want to run, as a measurement will."""
    a, t0 = read_proc_stat(), time.monotonic()
    loops = [subprocess.Popen([sys.executable, "-c", _BUSY_LOOP, str(seconds)]) for _ in range(os.cpu_count() or 1)]
    for loop in loops:
        loop.wait()
    b, t1 = read_proc_stat(), time.monotonic()
    return (b.steal_s - a.steal_s) / max(t1 - t0, 1e-9)


def parse_tlb_shootdowns(text: str) -> int | None:
    """The TLB flushes of other CPUs' TLBs the host has done, summed over its CPUs (the ``TLB`` row
    of ``/proc/interrupts``, x86: ``arch/x86/kernel/irq.c: arch_show_interrupts``); None without it.

    >>> parse_tlb_shootdowns("           CPU0       CPU1\\n TLB:     528626     370159   TLB shootdowns\\n")
    898785
    >>> parse_tlb_shootdowns(" NMI: 0 0 Non-maskable interrupts\\n") is None
    True
    """
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "TLB:":
            total = 0
            for v in fields[1:]:
                if not v.isdigit():
                    break
                total += int(v)
            return total
    return None


def read_tlb_shootdowns(path: Path = Path("/proc/interrupts")) -> int | None:
    try:
        return parse_tlb_shootdowns(path.read_text())
    except OSError:
        return None


def parse_procs_running(text: str) -> int | None:
    """The tasks runnable on the host at the instant ``/proc/stat`` was read (``procs_running``:
    ``nr_running()`` summed over CPUs, ``fs/proc/stat.c``), the reader itself included; None
    without the line.

    >>> parse_procs_running("cpu  1 2 3 4\\nprocs_running 5\\nprocs_blocked 0\\n"), parse_procs_running("cpu 1\\n")
    (5, None)
    """
    for line in text.splitlines():
        if line.startswith("procs_running "):
            return int(line.split()[1])
    return None


def runnable_others(samples: list[int | None]) -> dict[str, Any]:
    """What the host's other tasks were while the run's workload still waited for its load: the
    runnable tasks besides the reader (``procs_running`` - 1) over ``samples`` read at regular
    instants, mean and 90th percentile. A busy tenant's cores (``tenants_cores``) say how much CPU
    it took, not over how many tasks; CFS weighs each task of a cgroup-less tenant at 1024 on its
    CPU (``kernel/sched/fair.c``), so the count is what a woken thread competes with.

    >>> runnable_others([3, 3, 5, 1, None])
    {'runnable_others_mean': 2.0, 'runnable_others_p90': 4.0, 'runnable_samples': 4}
    >>> runnable_others([None])
    {'runnable_others_mean': None, 'runnable_others_p90': None, 'runnable_samples': 0}
    """
    vals = sorted(max(0, v - 1) for v in samples if v is not None)
    if not vals:
        return {"runnable_others_mean": None, "runnable_others_p90": None, "runnable_samples": 0}
    p90 = np.percentile(vals, 90, method="nearest")
    return {"runnable_others_mean": round(sum(vals) / len(vals), 3), "runnable_others_p90": float(p90),
            "runnable_samples": len(vals)}


def read_procs_running(path: Path = Path("/proc/stat")) -> int | None:
    try:
        return parse_procs_running(path.read_text())
    except OSError:
        return None


def read_proc_stat(path: Path = Path("/proc/stat")) -> ProcStat:
    return parse_proc_stat(path.read_text(), os.sysconf("SC_CLK_TCK"))


def root_usage_path(mounts: Mounts) -> Path | None:
    """The root cgroup's cumulative CPU usage file (v1 cpuacct.usage, v2 cpu.stat)."""
    if mounts.v1_cpuacct is not None and (mounts.v1_cpuacct / "cpuacct.usage").exists():
        return mounts.v1_cpuacct / "cpuacct.usage"
    if mounts.v2 is not None and (mounts.v2 / "cpu.stat").exists():
        return mounts.v2 / "cpu.stat"
    return None


def read_usage_ns(path: Path | None) -> int | None:
    if path is None:
        return None
    text = path.read_text()
    if path.name == "cpu.stat":
        usec = parse_keyed(text).get("usage_usec")
        return None if usec is None else usec * 1000
    return int(text.strip())


def neighbours(a: CpuReading, b: CpuReading, ncpu: int) -> dict[str, Any]:
    """Cores used between two readings by the host, the workload, the harness and the tenants.

    ``others_cores`` (host busy minus workload, the first manifests' key) is kept; ``tenants_cores``
    is the root cgroup's usage minus the workload's and the harness's, from the same kind of
    counter (cgroup CPU accounting), so it does not depend on tick sampling; when the root's usage
    is unavailable it falls back to ``/proc/stat`` (``tenants_source`` says which).
    """
    wall = b.t_s - a.t_s
    if wall <= 0:
        raise ValueError(f"readings are not in time order ({a.t_s} -> {b.t_s})")
    busy = (b.host.busy_s - a.host.busy_s) / wall
    workload = (b.workload_ns - a.workload_ns) / 1e9 / wall
    harness = None if a.harness_ns is None or b.harness_ns is None else (b.harness_ns - a.harness_ns) / 1e9 / wall
    out: dict[str, Any] = {
        "window_s": round(wall, 4),
        "host_busy_cores": round(busy, 4),
        "steal_cores": round((b.host.steal_s - a.host.steal_s) / wall, 4),
        "workload_cores": round(workload, 4),
        "others_cores": round(busy - workload, 4),
        "harness_cores": None if harness is None else round(harness, 4),
        "host_cpus": ncpu,
    }
    if a.root_ns is not None and b.root_ns is not None:
        root = (b.root_ns - a.root_ns) / 1e9 / wall
        out["root_cgroup_cores"] = round(root, 4)
        tenants, source = root - workload - (harness or 0.0), "root cgroup cpuacct"
    else:
        tenants, source = busy - workload - (harness or 0.0), "/proc/stat"
    out["tenants_cores"] = round(tenants, 4)
    out["tenants_source"] = source
    return out
