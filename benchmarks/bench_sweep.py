"""Benchmark of ``python -m cfsim sweep`` (issue 7): prints medians and ratios from one run.

    python benchmarks/bench_sweep.py            # the figures of the issue (several minutes)
    python benchmarks/bench_sweep.py --quick    # a smoke run of the script itself

1. the standard grid: grab-sinktos3, GOMAXPROCS automaxprocs/go1.25/host/2 x 80 CPU limits
   (0.05..4.0 cores), 60 s simulated each, on the local pool with all cores: wall time
   (target < 60 s on the 2-core machine);
2. peak memory of a 10,000-point sweep (a cheap point function, so the sweep machinery is what
   is measured): peak RSS of the parent process and of the whole process tree (target < 1 GB);
3. speed-up from 1 to 2 local workers on a sub-grid of the standard grid (every 4th limit,
   80 runs; target near 2x);
4. the standard grid on a Dask LocalCluster (one worker process per core, 1 thread each;
   cluster start-up included) vs the local pool (target within 1.3x).

The machine may be shared: each figure comes with the CPU seconds the sweep used and how busy
the whole machine was, and [1] with the wall time the same CPU seconds would take on idle cores.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))

from cfsim.scenario import builtin_names  # noqa: E402
from cfsim.sweep import DaskExecutor, Grid, LocalExecutor, SweepResults, parse_axis, run_sweep  # noqa: E402,I001

POLICIES = "go.gomaxprocs=automaxprocs,go1.25,host,2"
LIMITS = "cgroup.cpu_limit=0.05:4:0.05"          # 80 limits
SUB_LIMITS = "cgroup.cpu_limit=0.2:4:0.2"        # every 4th: 20 limits x 4 policies = 80 runs


def _cpu_seconds() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _sweep(scenario: str, grid: list[str], duration: float, executor) -> dict[str, float]:
    """One whole sweep (executor start-up, runs, writing, compaction): its wall time, the cores
    it used (CPU seconds of this process and its exited workers / wall), how busy the whole
    machine was (other users included), and the time spent inside the point function."""
    import psutil

    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as out:
        psutil.cpu_percent()
        cpu0, t0 = _cpu_seconds(), time.perf_counter()
        report = run_sweep(scenario, Grid(parse_axis(g) for g in grid), out=out,
                           overrides=[f"run.duration_s={duration}"], executor=executor,
                           progress=False)
        wall = time.perf_counter() - t0
        used = (_cpu_seconds() - cpu0) / wall
        busy = psutil.cpu_percent() / 100 * psutil.cpu_count()
        inside = float(SweepResults.open(out).frame["wall_s"].sum())
        if report.errors:
            print(f"  note: {report.errors} runs failed, e.g. {report.first_errors[0]}")
    return {"wall": wall, "used": used, "busy": busy, "inside": inside}


def _median(xs: list[float]) -> float:
    return statistics.median(xs)


def _fmt(runs: list[dict[str, float]]) -> str:
    walls = [r["wall"] for r in runs]
    return (f"median {_median(walls):.2f} s  (each: {', '.join(f'{x:.2f}' for x in walls)}; "
            f"CPU {_median([r['used'] * r['wall'] for r in runs]):.1f} s, "
            f"cores used by the sweep {_median([r['used'] for r in runs]):.2f}, "
            f"machine busy {_median([r['busy'] for r in runs]):.2f} of {os.cpu_count()} cores)")


def _idle_estimate(runs: list[dict[str, float]], cores: int) -> float:
    """Wall time if the sweep had had ``cores`` idle cores: its CPU seconds / cores."""
    return _median([r["used"] * r["wall"] for r in runs]) / cores


def _wall(runs: list[dict[str, float]]) -> float:
    return _median([r["wall"] for r in runs])


def memory_10k(points: int) -> dict[str, float]:
    """Run a sweep in a subprocess (CLI, toy point function) and sample its RSS."""
    import psutil

    per_axis = max(1, points // 25)
    grid = [f"cgroup.cpu_limit=0.01:{per_axis / 100:.2f}:0.01", "go.gomaxprocs=1:25:1"]
    with tempfile.TemporaryDirectory(prefix="bench-sweep-mem-") as out:
        cmd = [sys.executable, "-m", "cfsim", "sweep", "cpu-bound-threads", "--grid", grid[0],
               "--grid", grid[1], "--out", out, "--no-progress", "--json",
               "--point-fn", "cfsim.testing:toy_point"]
        env = {**os.environ, "PYTHONPATH": str(SRC)}
        t0 = time.perf_counter()
        proc = psutil.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        peak_parent = peak_tree = 0
        while proc.poll() is None:
            try:
                rss = proc.memory_info().rss
                tree = rss + sum(c.memory_info().rss for c in proc.children(recursive=True))
            except psutil.Error:
                break
            peak_parent, peak_tree = max(peak_parent, rss), max(peak_tree, tree)
            time.sleep(0.05)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"memory sweep failed: {proc.stderr.read().decode()[-2000:]}")
        t1 = time.perf_counter()
        res = SweepResults.open(out)
        rows = len(res.frame)
        ds = res.to_xarray()
        read_s = time.perf_counter() - t1
        size = sum(p.stat().st_size for p in Path(out).rglob("*") if p.is_file())
    return {"runs": rows, "wall_s": wall, "peak_parent_mb": peak_parent / 2**20,
            "peak_tree_mb": peak_tree / 2**20, "read_s": read_s, "disk_mb": size / 2**20,
            "dims": dict(ds.sizes)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenario", default="grab-sinktos3" if "grab-sinktos3" in builtin_names()
                    else "cpu-bound-threads")
    ap.add_argument("--duration", type=float, default=60.0, help="simulated seconds per run")
    ap.add_argument("--repeats", type=int, default=3, help="repeats of the 1 vs 2 worker sub-grid")
    ap.add_argument("--full-repeats", type=int, default=2,
                    help="repeats of the standard grid (each on the local pool and on Dask)")
    ap.add_argument("--points", type=int, default=10_000, help="points of the memory sweep")
    ap.add_argument("--quick", action="store_true", help="tiny sizes: check the script runs")
    ap.add_argument("--skip", default="", help="comma list of sections to skip: full,memory,speedup,dask")
    args = ap.parse_args()
    if args.quick:
        args.duration, args.repeats, args.full_repeats, args.points = 5.0, 1, 1, 500
    skip = set(filter(None, args.skip.split(",")))
    cores = len(os.sched_getaffinity(0))
    print(f"bench_sweep: scenario {args.scenario}, {args.duration:g} s simulated per run, "
          f"{cores} cores, load average {os.getloadavg()[0]:.1f} at start")
    if args.scenario != "grab-sinktos3":
        print("  NOTE: grab-sinktos3 is not a built-in here; figures are for", args.scenario)

    full = [LIMITS, POLICIES]
    if "full" not in skip:
        # the standard grid on the local pool and on a Dask LocalCluster, interleaved so that
        # changes in the machine's load hit both alike
        walls, dask = [], []
        for _ in range(args.full_repeats):
            walls.append(_sweep(args.scenario, full, args.duration, LocalExecutor(cores)))
            if "dask" not in skip:
                dask.append(_sweep(args.scenario, full, args.duration,
                                   DaskExecutor("local", workers=cores)))
        inside = _median([r["inside"] for r in walls])
        print(f"[1] standard grid (4 policies x 80 limits = 320 runs), local pool x{cores}: "
              f"{_fmt(walls)}; {320 / _wall(walls):.1f} runs/s; target < 60 s: "
              f"{'MET' if _wall(walls) < 60 else 'NOT MET'}")
        print(f"    on {cores} idle cores (CPU seconds / {cores}) it would take "
              f"{_idle_estimate(walls, cores):.1f} s")
        print(f"    time inside the point function (simulate), summed over runs: {inside:.1f} s "
              f"= {inside / cores:.1f} s on {cores} cores; the sweep machinery and imbalance add "
              f"{_wall(walls) - inside / cores:.1f} s")
        if dask:
            ratio = _wall(dask) / _wall(walls)
            print(f"[4] standard grid on a Dask LocalCluster {cores}x1 (start-up included): {_fmt(dask)}")
            print(f"    Dask / local pool: {ratio:.2f}x wall (target <= 1.30x: "
                  f"{'MET' if ratio <= 1.3 else 'NOT MET'}); "
                  f"{_idle_estimate(dask, cores) / _idle_estimate(walls, cores):.2f}x CPU seconds")

    if "memory" not in skip:
        m = memory_10k(args.points)
        print(f"[2] {m['runs']}-run sweep (toy point function), local pool x{cores}: wall "
              f"{m['wall_s']:.1f} s ({m['runs'] / m['wall_s']:.0f} runs/s); peak RSS parent "
              f"{m['peak_parent_mb']:.0f} MB, whole tree {m['peak_tree_mb']:.0f} MB (target < 1024 MB: "
              f"{'MET' if m['peak_tree_mb'] < 1024 else 'NOT MET'}); on disk {m['disk_mb']:.1f} MB; "
              f"read back (frame + to_xarray {m['dims']}) {m['read_s']:.1f} s")

    sub = [SUB_LIMITS, POLICIES]
    if "speedup" not in skip:
        one, two = [], []
        for _ in range(args.repeats):  # interleaved, so load changes hit both alike
            one.append(_sweep(args.scenario, sub, args.duration, LocalExecutor(1)))
            two.append(_sweep(args.scenario, sub, args.duration, LocalExecutor(2)))
        ratio = _wall(one) / _wall(two)
        print(f"[3] sub-grid 80 runs: 1 worker {_fmt(one)}")
        print(f"    sub-grid 80 runs: 2 workers {_fmt(two)}")
        print(f"    speed-up 1 -> 2 workers: {ratio:.2f}x (ideal 2.00x); CPU-bound estimate "
              f"{_idle_estimate(one, 1) / _idle_estimate(two, 2):.2f}x (same CPU seconds on 2 cores)")

    print(f"load average {os.getloadavg()[0]:.1f} at end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
