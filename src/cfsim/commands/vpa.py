"""``python -m cfsim vpa replay USAGE [--set vpa.key=value] [--json] [--every N]``.

Feeds a CPU usage history (CSV ``timestamp,cpu_cores`` or a Prometheus query_range JSON export)
through the VPA recommender exactly as upstream computes it and prints target, lower and upper
bound over time, in integer millicores as the recommender writes them to the VPA status.
"""
from __future__ import annotations

import json
import sys
from datetime import datetime, timezone


def add_parser(sub) -> None:
    p = sub.add_parser("vpa", help="VPA tools: replay a usage history through the recommender")
    vsub = p.add_subparsers(dest="vpa_command", metavar="VPA_COMMAND")
    r = vsub.add_parser("replay", help="what VPA would recommend for a usage history")
    r.add_argument("usage", help="CSV (timestamp,cpu_cores[,container]) or Prometheus query_range JSON")
    r.add_argument("--set", action="append", default=[], metavar="vpa.KEY=VALUE",
                   help="recommender settings from the [vpa] section, e.g. --set vpa.integer_cpu=true, "
                        "vpa.round_cpu_millicores=50, vpa.min_allowed_cores=2, vpa.half_life_s=3600, "
                        "vpa.sample_interval_s=60 (the loop)")
    r.add_argument("--json", action="store_true",
                   help='print {"recommendations": [...], "final": {"target", "lower_bound", "upper_bound"}}')
    r.add_argument("--metrics-window", type=float, default=None, metavar="S",
                   help="treat the input as a fine usage trace and average it into metrics-server windows of S "
                        "seconds (15 or 60) first; default: every row already is a metrics-server reading")
    r.add_argument("--every", type=int, default=0, metavar="N",
                   help="table: print every N-th loop (default: about 48 rows)")
    r.set_defaults(func=run)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def run(args) -> int:
    from cfsim.io.usage import UsageParseError, read_usage
    from cfsim.autoscalers.vpa_recommender import config_from_scenario, metrics_server_points, replay
    from cfsim.scenario import ScenarioError, load_scenario

    for item in args.set:
        if not item.strip().startswith("vpa."):
            raise ScenarioError(item.split("=")[0], "vpa replay only takes [vpa] keys (vpa.KEY=VALUE)")
    sc = load_scenario({}, args.set)
    cfg = config_from_scenario(sc.section("vpa"))
    try:
        series, _meta = read_usage(args.usage)
    except UsageParseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:  # cfsim.io errors (CfsimParseError) name file and position too
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.metrics_window:
        series = {k: metrics_server_points(v, args.metrics_window) for k, v in series.items()}
    recs = replay(series, cfg, sc["vpa.sample_interval_s"])
    final = {k: recs[-1][k] for k in ("target", "lower_bound", "upper_bound")}
    if args.json:
        out = {"recommendations": [{"timestamp": _iso(r["timestamp_s"]), **r} for r in recs], "final": final,
               "containers": sorted(series), "unit": "millicores"}
        json.dump(out, sys.stdout)
        sys.stdout.write("\n")
        return 0
    every = args.every if args.every > 0 else max(1, len(recs) // 48)
    print(f"{'time (UTC)':<21} {'samples':>8} {'target':>9} {'lower':>9} {'upper':>15}   [millicores]")
    for i, r in enumerate(recs):
        if i % every == 0 or i == len(recs) - 1:
            up = r["upper_bound"]
            up_s = "1e14 (no conf.)" if up >= 10 ** 14 else str(up)
            print(f"{_iso(r['timestamp_s']):<21} {r['samples']:>8} {r['target']:>9} {r['lower_bound']:>9} {up_s:>15}")
    print(f"final: target {final['target']}m, lower {final['lower_bound']}m, upper {final['upper_bound']}m "
          f"({len(series)} container(s), {recs[-1]['samples']} samples)")
    return 0
