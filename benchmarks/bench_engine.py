"""Engine speed: simulated seconds per wall second (median of repeats, one process).

Goals (issue 2): >= 1000x real time for 8 CPU-bound threads on a 24-CPU host with a 2-core
limit; >= 50x for 200 threads at 1 ms burn / 50 ms sleep (same host and limit).

    python benchmarks/bench_engine.py [--repeats 5]
"""
from __future__ import annotations

import argparse
import statistics
import time

from cfsim.simulation import simulate

CASES = {
    "8 CPU-bound threads, 24 CPUs, 2-core limit": (
        "cpu-bound-threads", ["run.duration_s=60"], 1000.0),
    "200 threads 1 ms burn / 50 ms sleep, 24 CPUs, 2-core limit": (
        "cpu-bound-threads", ["run.duration_s=20", "workload.threads=200", "workload.burn_ms=1",
                              "workload.sleep_ms=50", "workload.jitter_ms=50"], 50.0),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    for name, (scenario, overrides, goal) in CASES.items():
        speeds = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            res = simulate(scenario, overrides)
            wall = time.perf_counter() - t0
            speeds.append(res.summary["duration_s"] / wall)
        med = statistics.median(speeds)
        print(f"{name}: median {med:,.0f}x real time (min {min(speeds):,.0f}, max {max(speeds):,.0f}; "
              f"goal {goal:,.0f}x: {'met' if med >= goal else 'NOT met'})")


if __name__ == "__main__":
    main()
