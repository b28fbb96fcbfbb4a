"""Fleet answers (issue 15): ``audit`` of the lab and of a planted fleet, a ``recommend`` search,
and sweep memory in the number of points; before and after in one run.

    python benchmarks/bench_fleet.py                  # all sections (long: tens of minutes)
    python benchmarks/bench_fleet.py --quick          # a smoke run of the script itself
    python benchmarks/bench_fleet.py --skip lab,sweep # sections: lab, fleet, recommend, sweep

"Before" is the code of ``--before REF`` (default: the commit before the fleet work), exported
with ``git archive`` into a temporary folder and run in a subprocess, serially, as it always ran;
"after" is this checkout on every core (the sweep's local process pool) with a shared on-disk
simulation cache. Both run the same inputs and must give the same answer (checked: the audit
summaries and the recommendation compared as JSON).

1. lab: ``audit`` of the lab runs in ``data/lab`` (all of them after; before, every
   ``--lab-sample``-th container and after on the same sample too; goal: 150 containers < 3 min);
2. fleet: ``--containers`` planted exported containers (default 1,000; synthetic Prometheus
   exports in a temporary folder: ``--deployments`` configurations simulated once, their replicas'
   usage counters scaled by a few per cent each so that no two containers are identical) with
   the audit's 20 s per fix (before on every ``--fleet-sample``-th; goal: 1,000 < 10 min);
3. recommend: ``cfsim recommend`` on the lab's cpu-stream scenario (no peers) before/after;
4. sweep memory: peak RSS of a 100- and a 1,000-point sweep (``bench_sweep.memory_10k``).

The machine is shared: every timing is paired with a fixed pure-Python reference loop
(``_common.py``, as in ``bench_engine.py``) and printed with it; the medians of ``--repeats`` are
quoted.

Measured (2026-12-02, session 55, compiled build, both cores, a shared disk cache; "after" only,
the same audit driver as here): a search's candidate runs stop once an SLO on the kernel's
counters is decided (``SearchOptions.stop_early``; docs/model-notes.md). The issue's seven lab
grids, 138 containers, 1,371 simulations: 385 s (reference loop 14.2 ms) -> 237-238 s (19.8-21.1 ms),
same summary (goal 3 min: not met; ``overprovisioned``'s saturating closed loop is most of it: its
18 containers audited alone took 789 -> 436 s of the workers' time, now mostly the stopped runs'
5 s warm-ups and the two whole runs a container, before and after the fix).
The planted fleet of 1,000 containers (72 configurations): 282 s (19.1 ms) -> 238 s (12.7 ms),
6,001 simulations and 5,073 reused, same summary (goal 10 min: met).

2026-12-04 (session 62), the same seven grids' 138 containers, "after" only (this script's driver,
2 workers, a fresh disk cache): 185.1 s (load 21.1 s, audit 163.2 s; reference loop 23.2-26.2 ms)
with the engine's own event loop, then 177.4 s (load 13.0 s, audit 163.6 s; 22.0-33.1 ms) once a
lab run's Prometheus responses are put in order by whole series instead of a row sort; 1,559
simulations, 136 reused, the same summary (sha256 ccdebfdf...) both times. Goal 3 min: met at this
machine speed (session 59: 253 s + 22.7 s load at 24.7-38.7 ms).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
sys.path.insert(0, str(SRC))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import reference_loop_s  # noqa: E402

BEFORE_REF = "f7d851f"   # main before the fleet work (issue 15)

DRIVER = r'''
import json, sys, time, tempfile
from pathlib import Path
spec = json.loads(sys.argv[1])
from cfsim.advice.audit import audit, load_containers, summary_json
after = spec["after"]
t0 = time.perf_counter()
if after:
    from cfsim.sweep import make_executor
    ex = make_executor(spec["workers"])
    ex.__enter__()
    cs = []
    for p in spec["paths"]:
        cs += load_containers(p, executor=ex)
else:
    cs = []
    for p in spec["paths"]:
        cs += load_containers(p)
t1 = time.perf_counter()
kw = {}
if after:
    kw = dict(executor=ex, cache_dir=tempfile.mkdtemp(prefix="bench-fleet-cache-"))
res = audit(containers=cs, duration_s=spec["duration_s"], **kw)
t2 = time.perf_counter()
if after:
    ex.__exit__(None, None, None)
out = {"containers": len(cs), "findings": len(res.findings), "load_s": t1 - t0, "audit_s": t2 - t1,
       "sim_stats": getattr(res, "sim_stats", {}),
       "summary": json.dumps(summary_json(res), sort_keys=True, default=str)}
Path(spec["out"]).write_text(json.dumps(out))
'''


def export_before(ref: str, into: Path) -> Path:
    tar = into / "before.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(tar), ref, "src"], check=True)
    with tarfile.open(tar) as t:
        t.extractall(into / "before")
    return into / "before" / "src"


def run_driver(src: Path, spec: dict, tmp: Path) -> dict:
    out = tmp / f"driver-{time.monotonic_ns()}.json"
    spec = {**spec, "out": str(out)}
    env = {**os.environ, "PYTHONPATH": str(src)}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", DRIVER, json.dumps(spec)], env=env, check=True, cwd=ROOT)
    r = json.loads(out.read_text())
    r["wall_s"] = time.perf_counter() - t0
    return r


def paired(fn, repeats: int) -> tuple[list, list[float]]:
    results, refs = [], []
    for _ in range(repeats):
        refs.append(reference_loop_s())
        results.append(fn())
    return results, refs


def med(xs) -> float:
    return statistics.median(xs)


def _ref_text(refs: list[float]) -> str:
    return f"reference loop median {1e3 * med(refs):.1f} ms (fastest {1e3 * min(refs):.1f} ms)"


# ------------------------------------------------------------------------------------------------
# the planted fleet


_PLANTED: dict = {}


def plant_fleet(folder: Path, containers: int, deployments: int, span_s: float = 40.0) -> Path:
    """Synthetic exports of ``containers`` containers: ``deployments`` configurations (limits 0.5..4
    cores, GOMAXPROCS 1 / ceil(limit) / 8 host CPUs, demand 30 %..110 % of the limit: trapped,
    throttled, over-threaded, overprovisioned and healthy ones) simulated once each; each replica's
    CPU usage counter scaled by 0.95..1.05 (deterministic), so no two containers are identical."""
    import dataclasses
    import math

    import numpy as np

    from cfsim.advice.exports import write_simulated_exports
    from cfsim.scenario import load_scenario
    from cfsim.simulation import simulate

    rng = np.random.default_rng(15)
    configs = []
    for i in range(deployments):
        limit = [0.5, 1.0, 2.0, 4.0][i % 4]
        g = [1, max(1, math.ceil(limit)), 8][(i // 4) % 3]
        demand = limit * [0.3, 0.7, 1.1][(i // 12) % 3] * (1 + 0.05 * (i // 36))
        configs.append((limit, g, demand))
    results = {}
    for d, (limit, g, demand) in enumerate(configs):
        sc = load_scenario({"host": {"cpus": 8}, "cgroup": {"cpu_limit": limit},
                            "go": {"gomaxprocs": g, "live_heap_mb": 16.0},
                            "workload": {"kind": "stream", "rate_per_s": round(demand * 1000, 3), "cpu_ms_per_item": 1.0,
                                         "workers": 16, "alloc_kb_per_item": 4.0},
                            "run": {"duration_s": span_s, "warmup_s": 2.0, "seed": d}})
        key = (d, limit, g, demand, span_s)
        if key not in _PLANTED:
            _PLANTED[key] = simulate(sc)
        base = _PLANTED[key]
        n = containers // deployments + (1 if d < containers % deployments else 0)
        for r in range(n):
            s = base.series.copy()
            s["container_cpu_usage_seconds_total"] *= float(rng.uniform(0.95, 1.05))
            results[("fleet", f"svc{d:03d}-{r:04d}", "app")] = dataclasses.replace(base, series=s)
    return write_simulated_exports(results, folder)


# ------------------------------------------------------------------------------------------------


#: the lab grids of issue 15's "150 lab containers" (the grids added since are audited with --lab-grids all)
ISSUE_GRIDS = ("alloc-stream", "closed-menu", "cpu-stream", "overprovisioned", "quota-steps",
               "quota-steps-from-1.2", "vpa-in-the-loop")


def lab_grids(which: str) -> list[str]:
    lab = ROOT / "data" / "lab"
    if which == "all":
        return [str(lab)]
    names = ISSUE_GRIDS if which == "issue" else tuple(which.split(","))
    return [str(lab / n) for n in names if (lab / n).is_dir()]


def lab_sample(step: int, grids: list[str]) -> list[str]:
    from cfsim.validation.twin import find_runs, is_calibration_run

    runs = [r for g in grids for r in find_runs(g) if not is_calibration_run(r)]
    return [str(r) for r in runs[::step]]


def audit_section(name: str, before_src: Path, paths_all: list[str], paths_sample: list[str],
                  duration_s: float, repeats: int, workers: int, tmp: Path, skip_full: bool = False) -> None:
    here = SRC
    b, rb = paired(lambda: run_driver(before_src, {"after": False, "paths": paths_sample,
                                                   "duration_s": duration_s}, tmp), repeats)
    a, ra = paired(lambda: run_driver(here, {"after": True, "paths": paths_sample, "duration_s": duration_s,
                                             "workers": workers}, tmp), repeats)
    same = all(x["summary"] == b[0]["summary"] for x in a + b)
    n = b[0]["containers"]
    tb, ta = med([x["wall_s"] for x in b]), med([x["wall_s"] for x in a])
    print(f"[{name}] sample of {n} containers: before {tb:.1f} s (load {med([x['load_s'] for x in b]):.1f}, "
          f"audit {med([x['audit_s'] for x in b]):.1f}; {_ref_text(rb)}), after {ta:.1f} s (load "
          f"{med([x['load_s'] for x in a]):.1f}, audit {med([x['audit_s'] for x in a]):.1f}; {_ref_text(ra)}) "
          f"= {tb / ta:.1f}x; same answer: {same}; after: {a[0]['sim_stats']}", flush=True)
    if skip_full:
        return
    f, rf = paired(lambda: run_driver(here, {"after": True, "paths": paths_all, "duration_s": duration_s,
                                             "workers": workers}, tmp), 1)
    r = f[0]
    print(f"[{name}] all {r['containers']} containers, after: {r['wall_s']:.1f} s (load {r['load_s']:.1f}, "
          f"audit {r['audit_s']:.1f}; {_ref_text(rf)}); {r['findings']} findings; {r['sim_stats']}; "
          f"before, estimated from the sample: {tb * r['containers'] / n:.0f} s", flush=True)


def recommend_section(before_src: Path, repeats: int, workers: int, duration: float) -> None:
    cmd = ["-m", "cfsim", "recommend", str(ROOT / "data/lab/scenarios/cpu-stream.toml"), "--slo",
           "throughput_per_s>=1500", "--slo", "latency_p99_s<=0.05", "--no-peers", "--format", "json",
           "--no-progress", "--duration", str(duration)]

    def one(src: Path, extra: list[str]):
        env = {**os.environ, "PYTHONPATH": str(src)}
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, *cmd, *extra], env=env, cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        d = json.loads(p.stdout)
        sims = d.pop("simulations", None)
        d.pop("wall_s", None)
        return wall, sims, json.dumps(d, sort_keys=True)

    b, rb = paired(lambda: one(before_src, []), repeats)
    a, ra = paired(lambda: one(SRC, ["--workers", str(workers)]), repeats)
    tb, ta = med([x[0] for x in b]), med([x[0] for x in a])
    print(f"[recommend] cpu-stream, 2 SLOs, {duration:g} s per candidate: before {tb:.1f} s ({b[0][1]} "
          f"simulations; {_ref_text(rb)}), after {ta:.1f} s ({a[0][1]} simulations; {_ref_text(ra)}) = "
          f"{tb / ta:.1f}x; same answer: {all(x[2] == b[0][2] for x in a + b)}", flush=True)


def sweep_section(points: list[int]) -> None:
    from bench_sweep import memory_10k

    got = {}
    for n in points:
        ref = reference_loop_s()
        got[n] = memory_10k(n)
        m = got[n]
        print(f"[sweep] {m['runs']} points: peak RSS parent {m['peak_parent_mb']:.0f} MB, tree "
              f"{m['peak_tree_mb']:.0f} MB, wall {m['wall_s']:.1f} s (reference loop {1e3 * ref:.1f} ms)", flush=True)
    lo, hi = min(points), max(points)
    print(f"[sweep] peak RSS tree {hi} / {lo} points: {got[hi]['peak_tree_mb'] / got[lo]['peak_tree_mb']:.2f}x "
          f"(flat = 1.0)", flush=True)


def main() -> int:
    from cfsim.sweep import default_workers

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", default=BEFORE_REF, help="git ref of the code measured as 'before'")
    ap.add_argument("--repeats", type=int, default=1, help="repeats of each sample measurement")
    ap.add_argument("--lab-sample", type=int, default=8, help="before: every Nth lab container")
    ap.add_argument("--containers", type=int, default=1000)
    ap.add_argument("--deployments", type=int, default=72)
    ap.add_argument("--fleet-sample", type=int, default=10, help="before: every Nth planted deployment's replicas")
    ap.add_argument("--duration", type=float, default=20.0, help="seconds simulated per fix (the audit's default)")
    ap.add_argument("--recommend-duration", type=float, default=20.0)
    ap.add_argument("--skip", default="", help="comma list of sections to skip: lab,fleet,recommend,sweep")
    ap.add_argument("--lab-grids", default="issue",
                    help="'issue' (the grids of the issue's 150 containers), 'all', or a comma list of grids")
    ap.add_argument("--no-lab-full", action="store_true", help="lab: the sample only (not all containers)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes: check the script runs")
    args = ap.parse_args()
    if args.quick:
        args.lab_sample, args.containers, args.deployments, args.fleet_sample = 40, 24, 12, 6
        args.duration, args.recommend_duration = 4.0, 4.0
    skip = set(filter(None, args.skip.split(",")))
    workers = default_workers()
    print(f"bench_fleet: {workers} cores, load average {os.getloadavg()[0]:.1f} at start; before = {args.before}",
          flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp_s:
        tmp = Path(tmp_s)
        before_src = export_before(args.before, tmp)
        if "lab" not in skip:
            grids = lab_grids(args.lab_grids)
            sample = lab_sample(args.lab_sample, grids)
            audit_section("lab", before_src, grids, sample, args.duration, args.repeats,
                          workers, tmp, skip_full=args.quick or args.no_lab_full)
        if "fleet" not in skip:
            t0 = time.perf_counter()
            folder = plant_fleet(tmp / "fleet", args.containers, args.deployments)
            sub = plant_fleet(tmp / "fleet-sample", max(1, args.containers // args.fleet_sample),
                              args.deployments)
            print(f"[fleet] planted {args.containers} containers ({args.deployments} configurations) and a "
                  f"{max(1, args.containers // args.fleet_sample)}-container sample in {time.perf_counter() - t0:.0f} s",
                  flush=True)
            audit_section("fleet", before_src, [str(folder)], [str(sub)], args.duration, args.repeats, workers, tmp)
        if "recommend" not in skip:
            recommend_section(before_src, args.repeats, workers, args.recommend_duration)
        if "sweep" not in skip:
            sweep_section([100, 1000] if not args.quick else [50, 100])
    print(f"load average {os.getloadavg()[0]:.1f} at end", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
