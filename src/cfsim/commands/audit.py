"""``python -m cfsim audit EXPORTS [EXPORTS ...] [--report out/audit/audit] [--json]``.

Reads a folder of Prometheus query_range JSON exports (cAdvisor CPU and CFS counters,
kube-state-metrics requests/limits, ``go_sched_gomaxprocs_threads``) or lab run folders, flags
each container (trapped, throttled, GOMAXPROCS far above the limit, headroom), simulates a fix
for each flag and writes a ranked table (CSV, markdown) and an HTML report with plots.
"""
from __future__ import annotations

import json
import sys


def add_parser(sub) -> None:
    p = sub.add_parser("audit", help="flag containers in Prometheus exports; simulate the fixes")
    p.add_argument("exports", nargs="+", help="folder(s) of query_range JSON exports, or lab run folders / grids")
    p.add_argument("--report", metavar="PREFIX", default="out/audit/audit",
                   help="write PREFIX.csv, PREFIX.md, PREFIX.html (default out/audit/audit)")
    p.add_argument("--no-simulate", action="store_true", help="flags and evidence only, no simulated fixes")
    p.add_argument("--duration", type=float, default=20.0, help="seconds simulated per fix (default 20)")
    p.add_argument("--include-calibration", action="store_true", help="audit lab calib-* runs too")
    p.add_argument("--json", action="store_true", help="print containers, flags and findings as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from cfsim.advice.audit import audit, load_containers, summary_json, write_report

    containers = []
    for path in args.exports:
        containers += load_containers(path, include_calibration=args.include_calibration)
    if not containers:
        print(f"error: {' '.join(args.exports)}: no container CPU usage series found", file=sys.stderr)
        return 2
    result = audit(containers=containers, simulate=not args.no_simulate, duration_s=args.duration)
    paths = write_report(result, args.report)
    if args.json:
        json.dump(summary_json(result), sys.stdout, default=str)
        sys.stdout.write("\n")
        return 0
    flags = result.flags_by_container()
    print(f"{len(containers)} containers, {len(result.findings)} findings")
    for rank, f in enumerate(result.findings, 1):
        print(f"{rank:>3}. {f.container.name}  [{f.flag}] {f.detail}")
        print(f"     evidence: {f.evidence}")
        if f.fix:
            print(f"     fix:      {f.fix}")
        if f.effect:
            print(f"     effect:   {f.effect}")
    ok = [name for name, fl in flags.items() if not fl]
    if ok:
        print("no findings: " + ", ".join(ok))
    print("report: " + ", ".join(str(p) for p in paths.values()))
    return 0
