"""Wait for a quiet host before a lab run measures anything.

A run made while other tenants keep the host's CPUs busy measures them as much as the workload:
``open-latency``'s points at 1.0 and 1.5 cores were recorded beside another tenant's 1.5-2
cores (``host_cpu.pre_run.tenants_cores``), and their repeats and twins disagree far more than
the same points on a quiet host. With ``lab.quiet_host_cores`` set, a run first waits, holding
the machine's measurement lock, until the whole host's busy CPU (``/proc/stat``: every process
but idle; the runner itself sleeps meanwhile) over a short window is at most that many cores,
and gives up after ``lab.quiet_host_timeout_s`` with :class:`HostBusy` (a grid records the point
as failed and ``--resume`` redoes it). The manifest keeps what it waited for (``host_quiet``).

On a virtual machine the hypervisor may run other guests on its CPUs (steal), which a reading
with the runner asleep cannot see: steal accrues only while a virtual CPU wants to run. With
``lab.quiet_host_steal_cores`` set, a quiet reading is followed by a second of busy loops on every
CPU (:func:`cfsim.lab.hostcpu.loaded_steal_cores`), and the run starts only if they lost at most
that many cores (this VM on 2026-12-02: 0.3-1.1 cores stolen for long stretches, where a run's
throughput and throttling are the hypervisor's as much as the kernel's).
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable

from cfsim.lab.hostcpu import ProcStat, loaded_steal_cores, read_proc_stat

#: the window over which the host's busy CPU is measured [s]
WINDOW_S = 2.0
#: the pause between two measurements while the host is busy [s]
RETRY_S = 5.0
#: how long the steal probe runs a busy loop on every CPU [s]
STEAL_PROBE_S = 1.0
#: how often a waiting run says so [s]
LOG_EVERY_S = 60.0


class HostBusy(RuntimeError):
    """Other processes kept the host busier than ``lab.quiet_host_cores`` for the whole timeout."""


def busy_cores(a: ProcStat, b: ProcStat, cpus: int) -> float:
    """The host's busy CPU between two ``/proc/stat`` readings [cores]: the aggregate line sums
    every CPU, so its total time grows by ``cpus`` x the seconds between them.

    >>> busy_cores(ProcStat(10.0, 100.0, 0.0), ProcStat(10.5, 104.0, 0.0), cpus=2)   # 2 s apart
    0.25
    """
    total = b.total_s - a.total_s
    if total <= 0:
        return 0.0
    return round((b.busy_s - a.busy_s) / total * cpus, 4)


def wait_for_quiet_host(max_cores: float, timeout_s: float, log: Callable[[str], None],
                        read: Callable[[], ProcStat] = read_proc_stat,
                        sleep: Callable[[float], None] = time.sleep,
                        clock: Callable[[], float] = time.monotonic,
                        window_s: float = WINDOW_S, retry_s: float = RETRY_S,
                        max_steal_cores: float | None = None,
                        steal_probe: Callable[[float], float] = loaded_steal_cores) -> dict[str, Any]:
    """Measure the host's busy CPU over ``window_s`` until it is at most ``max_cores`` and, with
    ``max_steal_cores``, a busy loop on every CPU loses at most that much to the hypervisor over
    ``STEAL_PROBE_S`` (``steal_probe``); return the manifest's ``host_quiet`` block (the limits,
    the seconds waited, the last readings, how many checks). Raises :class:`HostBusy` once
    ``timeout_s`` has passed."""
    cpus = os.cpu_count() or 1
    t0 = clock()
    last_log = t0
    checks = 0
    while True:
        a = read()
        sleep(window_s)
        b = read()
        checks += 1
        busy = busy_cores(a, b, cpus)
        steal = None
        if busy <= max_cores and max_steal_cores is not None:
            steal = round(steal_probe(STEAL_PROBE_S), 4)
        waited = clock() - t0
        if busy <= max_cores and (steal is None or steal <= max_steal_cores):
            out = {"max_cores": max_cores, "busy_cores": busy, "waited_s": round(waited, 1), "checks": checks,
                   "note": "the whole host's busy CPU (/proc/stat) over the last window before the run"}
            if steal is not None:
                out.update(max_steal_cores=max_steal_cores, steal_cores=steal,
                           steal_note=f"stolen from a busy loop on every CPU over {STEAL_PROBE_S:g} s")
            return out
        why = (f"{busy:.2f} cores busy > lab.quiet_host_cores = {max_cores:g} cores" if busy > max_cores else
               f"{steal:.2f} cores stolen by the hypervisor > lab.quiet_host_steal_cores = {max_steal_cores:g} cores")
        if waited >= timeout_s:
            raise HostBusy(f"the host stayed busy for {waited:.0f} s (last: {why}); "
                           "stop the other work or raise lab.quiet_host_timeout_s")
        if clock() - last_log >= LOG_EVERY_S or checks == 1:
            log(f"waiting for a quiet host: {why} ({waited:.0f} s so far)")
            last_log = clock()
        sleep(retry_s)
