"""``python -m cfsim validate PATH [--report DIR] [--params params.toml] [--json]``."""
from __future__ import annotations

import json
import sys


def add_parser(sub) -> None:
    p = sub.add_parser("validate", help="compare simulated twins with lab run exports")
    p.add_argument("path", help="a lab run folder, a grid folder, or a folder of grids")
    p.add_argument("--report", metavar="DIR", help="write errors.csv, report.md, report.json and plots here")
    p.add_argument("--params", metavar="TOML", help="calibrated parameters (from `cfsim calibrate`)")
    p.add_argument("--no-normalise", action="store_true",
                   help="do not scale per-item CPU by the grid's calibration runs")
    p.add_argument("--json", action="store_true",
                   help="print {headline, by_regime, regime_counts, errors, grids, runs} as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from cfsim.validation import validate, write_report
    from cfsim.validation.calibrate import read_params, read_train_runs
    from cfsim.validation.report import to_markdown

    params = read_params(args.params) if args.params else None
    train = read_train_runs(args.params) if args.params else None
    report = validate(args.path, params=params, normalise=not args.no_normalise, progress=not args.json,
                      train_runs=train)
    if args.report:
        write_report(report, args.report)
    if args.json:
        json.dump(report.to_json(), sys.stdout, default=str)
        sys.stdout.write("\n")
    else:
        print(to_markdown(report))
    return 0
