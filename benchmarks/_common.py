"""What the speed benchmarks share: a reference loop that tells how fast this (shared) machine
runs right now, and speeds measured in repeats paired with it.

The virtual machine this project runs on alternates between speeds: the same pure-Python loop
took either about 13 ms or about 21 ms in most sessions. Each repeat is therefore paired with a
timing of that loop; a repeat is "quiet" when its loop ran within 10 % of the fastest one seen.
One cause is measured: the hypervisor running other guests on this VM's CPUs (steal,
``/proc/stat``). On 2026-12-02, with a busy loop on the other CPU, a 3,000,000-round loop took
379-602 ms of wall time beside 0.05-1.01 stolen cores and 378-416 ms of CPU time throughout: the
process's CPU time leaves stolen time out, its wall time does not. So each repeat also records the
steal during it (``steal_cores``), and the speeds per second of CPU time (``cpu_median_x``) are the
ones that compare across stolen and unstolen spells. Steal is not the only cause: the same day the
reference loop took 38-40 ms of CPU time with no steal at all (13-23 ms in earlier sessions), and
every benchmark ran about that much slower (8 CPU-bound threads 857x against 2,712x), a slower
host that no counter in the VM names; only the reference loop tells.

The scripts import this module by name (``from _common import ...``): run as
``python benchmarks/bench_*.py`` their folder is first on ``sys.path``.
"""
from __future__ import annotations

import statistics
import time
from typing import Callable


def reference_loop_s() -> float:
    """Wall time of a fixed pure-Python loop: how fast the interpreter runs right now."""
    t0 = time.perf_counter()
    acc = 0
    for i in range(300_000):
        acc += i * i % 7
    return time.perf_counter() - t0


def paired_speeds(run: Callable[[], object], span_s: float, repeats: int) -> dict:
    """Simulated seconds per wall second (and per second of this process's CPU time) of ``run``,
    which simulates ``span_s`` seconds, over ``repeats`` runs each after a reference loop: the
    median, min and max, the median of the quiet repeats, the reference loop's times, the
    hypervisor's steal during each repeat [cores]; and
    whether the compiled modules ran (``compiled``: cfsim._native; ``CFSIM_PURE_PYTHON=1`` runs the
    source, for a before/after in one session)."""
    from cfsim.lab.hostcpu import read_proc_stat

    speeds, cpu_speeds, refs, steal = [], [], [], []
    for _ in range(repeats):
        refs.append(reference_loop_s())
        a, t0, c0 = read_proc_stat(), time.perf_counter(), time.process_time()
        run()
        t1 = time.perf_counter()
        speeds.append(span_s / (t1 - t0))
        cpu_speeds.append(span_s / (time.process_time() - c0))
        steal.append((read_proc_stat().steal_s - a.steal_s) / (t1 - t0))
    fastest = min(refs)
    quiet = [s for s, ref in zip(speeds, refs) if ref <= 1.10 * fastest]
    from cfsim._native import compiled

    return {"compiled": compiled(), "median_x": statistics.median(speeds), "cpu_median_x": statistics.median(cpu_speeds),
            "min_x": min(speeds), "max_x": max(speeds),
            "quiet_median_x": statistics.median(quiet), "quiet_repeats": len(quiet), "repeats": repeats,
            "reference_loop_ms_median": 1e3 * statistics.median(refs),
            "reference_loop_ms_fastest": 1e3 * fastest,
            "steal_cores": [round(x, 3) for x in steal], "steal_cores_median": statistics.median(steal)}
