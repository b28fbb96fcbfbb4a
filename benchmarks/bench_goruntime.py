"""Benchmark of the Go runtime model (issue 3).

The grab-sinktos3 stream at 5,000 records/s, 0.3 ms of CPU per record, a 2-core limit,
GOMAXPROCS 8, 60 s simulated. Goal: at least 100x real time and under 500 MB peak memory.

    python benchmarks/bench_goruntime.py [--repeat 3] [--json]

Speed is the best of ``--repeat`` runs (the machine is shared); peak memory is the maximum
resident set size of a fresh child process that imports cfsim and runs the scenario once.

Where it went since 2026-11-25 (ae7dc67; measured 2026-12-01 in the VM's slow state, process CPU of
20 s simulated, best of 5 per tree): 0.225 s -> 0.253 s (+12.7 %; this script: 77x real time for 60
s, goal 100x). By commit: the time-sliced engine's hooks on the fluid path (f9e3217) +3.3 %, the
GC's place at a goroutine's scheduling points (bd3112c) +4.3 %, the rest a few tenths of a per cent
each over the GC and memory rules of 26-30 November. Bit-identical shortcuts on the per-record path
(a cached source method, inlined guards around the sweep, the memory high-water mark and the
sweep-done test) changed nothing measurable (0.250 s against 0.251 s, interleaved): what is left is
the rules' own work, for issue 15's means (fewer events a record, compiled hot modules), not for
micro-tuning.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

OVERRIDES = [
    "vpa.enabled=false",
    "cgroup.cpu_limit=2.0",
    "go.gomaxprocs=8",
    "workload.rate_per_s=5000",
    "workload.cpu_ms_per_item=0.3",
    "run.duration_s=60",
    "run.warmup_s=5",
]
SIM_S = 60.0


def once() -> tuple[float, float, dict]:
    """One run: (wall seconds, this process's CPU seconds, summary)."""
    from cfsim.simulation import simulate

    t0, c0 = time.perf_counter(), time.process_time()
    r = simulate("grab-sinktos3", OVERRIDES)
    return time.perf_counter() - t0, time.process_time() - c0, r.summary


def child_peak_mb() -> float:
    code = ("import resource, benchmarks.bench_goruntime as b; b.once(); "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=__file__.rsplit("/benchmarks/", 1)[0])
    return int(out.stdout.strip().splitlines()[-1]) / 1024.0  # ru_maxrss is KiB on Linux


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    walls, cpus = [], []
    summary: dict = {}
    for _ in range(args.repeat):
        w, c, summary = once()
        walls.append(w)
        cpus.append(c)
    best = min(walls)
    peak = child_peak_mb()
    out = {
        "simulated_s": SIM_S,
        "wall_s_best": best,
        "wall_s_all": walls,
        "speedup_x_real_time": SIM_S / best,
        "cpu_s_best": min(cpus),   # robust to other load on a shared machine
        "speedup_x_per_cpu_s": SIM_S / min(cpus),
        "peak_rss_mb": peak,
        "goal_speedup_met": SIM_S / best >= 100.0,
        "goal_memory_met": peak < 500.0,
        "throughput_per_s": summary["throughput_per_s"],
        "cpu_usage_cores": summary["cpu_usage_cores"],
        "throttled_ratio": summary["throttled_ratio"],
        "gc_cycles": summary["gc_cycles"],
        "latency_p99_s": summary["latency_p99_s"],
    }
    if args.json:
        print(json.dumps(out, sort_keys=True))
    else:
        for k, v in out.items():
            print(f"{k:<22} {v}")
    return 0 if out["goal_speedup_met"] and out["goal_memory_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
