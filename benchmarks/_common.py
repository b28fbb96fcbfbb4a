"""What the speed benchmarks share: a reference loop that tells how fast this (shared) machine
runs right now, and speeds measured in repeats paired with it.

The virtual machine this project runs on alternates between two speeds (another tenant on the
host, presumably): the same pure-Python loop takes either about 13 ms or about 21 ms. Each
repeat is therefore paired with a timing of that loop; a repeat is "quiet" when its loop ran
within 10 % of the fastest one seen.

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
    median, min and max, the median of the quiet repeats, and the reference loop's times; and
    whether the compiled modules ran (``compiled``: cfsim._native; ``CFSIM_PURE_PYTHON=1`` runs the
    source, for a before/after in one session)."""
    speeds, cpu_speeds, refs = [], [], []
    for _ in range(repeats):
        refs.append(reference_loop_s())
        t0, c0 = time.perf_counter(), time.process_time()
        run()
        speeds.append(span_s / (time.perf_counter() - t0))
        cpu_speeds.append(span_s / (time.process_time() - c0))
    fastest = min(refs)
    quiet = [s for s, ref in zip(speeds, refs) if ref <= 1.10 * fastest]
    from cfsim._native import compiled

    return {"compiled": compiled(), "median_x": statistics.median(speeds), "cpu_median_x": statistics.median(cpu_speeds),
            "min_x": min(speeds), "max_x": max(speeds),
            "quiet_median_x": statistics.median(quiet), "quiet_repeats": len(quiet), "repeats": repeats,
            "reference_loop_ms_median": 1e3 * statistics.median(refs),
            "reference_loop_ms_fastest": 1e3 * fastest}
