"""Long-horizon engine speed: 7 simulated days of the trap scenario with a 1-minute VPA loop.

Goal (issue 5): under 10 s wall. Two responses are timed:

* ``analytic``: the documented fallback ``usage = min(demand, limit, GOMAXPROCS, cpus)``;
* ``surface``: the response surface measured with the event engine (measured once and cached on
  disk; the one-off measurement is reported separately and is not part of the 7-day run).

    python benchmarks/bench_longrun.py [--repeats 3] [--days 7] [--json]

The machine may be shared: the best of ``--repeats`` runs is the figure; the median is shown too.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

from cfsim.engine.longrun import nominal_demand_cores, run_longrun
from cfsim.engine.response import response_for
from cfsim.simulation import simulate
from cfsim.scenario import load_scenario

GOAL_S = 10.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--days", type=float, default=7.0)
    ap.add_argument("--scenario", default="grab-sinktos3")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    sc = load_scenario(args.scenario, [f"vpa.days={args.days}", "vpa.sample_interval_s=60"])
    demand = nominal_demand_cores(sc)
    results = {}
    for mode in ("analytic", "surface"):
        t0 = time.perf_counter()
        try:
            resp = response_for(sc, mode, demand, simulate_fn=simulate)
        except RuntimeError as exc:
            results[mode] = {"skipped": str(exc)}
            continue
        prep = time.perf_counter() - t0
        walls = []
        for _ in range(args.repeats):
            t1 = time.perf_counter()
            r = run_longrun(sc, resp)
            walls.append(time.perf_counter() - t1)
        results[mode] = {"best_s": min(walls), "median_s": statistics.median(walls), "prepare_s": prep,
                         "response": r.response, "steps": len(r.rows) * 4, "vpa_loops": len(r.rows),
                         "final_request_cores": r.final["request_cores"], "final_gomaxprocs": r.final["gomaxprocs"],
                         "goal_met": min(walls) < GOAL_S}
    if args.json:
        print(json.dumps({"days": args.days, "goal_s": GOAL_S, "results": results}, indent=1))
        return
    for mode, res in results.items():
        if "skipped" in res:
            print(f"{mode}: skipped ({res['skipped']})")
            continue
        print(f"{mode}: {args.days:g} simulated days, {res['vpa_loops']} VPA loops: best {res['best_s']:.2f} s wall "
              f"(median {res['median_s']:.2f} s; response ready in {res['prepare_s']:.2f} s) - goal < {GOAL_S:g} s "
              f"{'met' if res['goal_met'] else 'NOT met'}  [{res['response']}]")


if __name__ == "__main__":
    main()
