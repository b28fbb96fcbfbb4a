"""``python -m cfsim recommend SCENARIO --slo 'lag_final_s<=60' [--slo ...] [--json]``
and ``python -m cfsim recommend --from data/lab/<grid>/<run> --slo 'throughput_per_s>=4000'``.

The cheapest (CPU limit, GOMAXPROCS policy or value, optional CFS burst) meeting every SLO over
the scenario's load profile, re-checked at pessimistic parameters; the runner-up; the cost of each
SLO alone; and what the stock VPA and krr ``simple``/``simple_limit`` would choose for the same
usage, each simulated.
"""
from __future__ import annotations

import json
import sys

from cfsim.output import json_safe


def add_parser(sub) -> None:
    p = sub.add_parser("recommend", help="cheapest CPU limit + GOMAXPROCS (+ burst) meeting SLOs; VPA/krr next to it")
    p.add_argument("scenario", nargs="?", help="a scenario TOML file or a built-in name")
    p.add_argument("--from", dest="from_run", metavar="RUN_DIR",
                   help="start from a lab run folder's scenario, with its grid's calibration")
    p.add_argument("--slo", action="append", default=[], metavar="KEY<=VALUE",
                   help="an objective over the run summary, e.g. 'lag_final_s<=60', 'latency_p99_s<=0.05', "
                        "'throughput_per_s>=4000' (repeat for several)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="override a scenario key")
    p.add_argument("--params", metavar="TOML", help="calibration file (cfsim calibrate --out): parameters and "
                                                     "their sigma for the safety margin")
    p.add_argument("--gomaxprocs", metavar="LIST",
                   help="GOMAXPROCS choices to search, comma-separated (default: the scenario's, go1.25, "
                        "automaxprocs, ceil = explicit ceil(limit)); also floor or integers")
    p.add_argument("--no-burst", action="store_true", help="do not consider a CFS burst")
    p.add_argument("--coarse-step", type=float, default=0.25, help="coarse limit step [cores] (default 0.25)")
    p.add_argument("--fine-step", type=float, default=0.05, help="fine limit step [cores] (default 0.05)")
    p.add_argument("--max-limit", type=float, help="largest limit searched [cores] (default host.cpus)")
    p.add_argument("--duration", type=float, metavar="S",
                   help="simulate S seconds per candidate (default: the scenario's)")
    p.add_argument("--workers", type=int, default=0, help="processes for the simulations (default 0: this one)")
    p.add_argument("--no-peers", action="store_true", help="skip VPA/krr")
    p.add_argument("--vpa-rounds", type=int, default=3, help="re-apply VPA to its own consequence up to N times")
    p.add_argument("--observed-usage", action="store_true",
                   help="with --from: the peers read the lab run's real usage instead of the simulated one")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args) -> int:
    from cfsim.advice.recommend import format_report, from_lab_run, recommend
    from cfsim.advice.search import SearchOptions, uncertainty_for
    from cfsim.advice.slo import SLOError, parse_slos
    from cfsim.scenario import load_scenario

    try:
        slos = parse_slos(args.slo)
    except SLOError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if bool(args.scenario) == bool(args.from_run):
        print("error: give a scenario or --from RUN_DIR (exactly one)", file=sys.stderr)
        return 2
    if args.from_run:
        sc, unc, source = from_lab_run(args.from_run, args.params, args.set)
    else:
        sc = load_scenario(args.scenario, args.set)
        unc, source = uncertainty_for(sc, args.params), str(args.scenario)
    kinds = [k.strip() for k in args.gomaxprocs.split(",") if k.strip()] if args.gomaxprocs else None
    opts = SearchOptions(coarse_step=args.coarse_step, fine_step=args.fine_step, max_limit=args.max_limit,
                         gomaxprocs=kinds, burst=not args.no_burst, duration_s=args.duration,
                         workers=args.workers)
    history = None
    if args.observed_usage:
        if not args.from_run:
            print("error: --observed-usage needs --from RUN_DIR", file=sys.stderr)
            return 2
        from cfsim.advice.recommend import observed_history

        history = observed_history(args.from_run)
    try:
        rep = recommend(sc, slos, unc, opts, peers=not args.no_peers, vpa_rounds=args.vpa_rounds, source=source,
                        history=history)
    except ValueError as exc:
        if type(exc).__name__ == "ScenarioError":
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        json.dump(json_safe(rep.as_dict()), sys.stdout, default=str)
        sys.stdout.write("\n")
    else:
        print(format_report(rep))
    return 0 if rep.result.winner is not None else 1
