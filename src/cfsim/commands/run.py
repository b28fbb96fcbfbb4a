"""``python -m cfsim run SCENARIO [--set section.key=value] [--json] [--out DIR]``."""
from __future__ import annotations

import json
import sys

from cfsim.scenario import load_scenario


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="simulate one scenario")
    p.add_argument("scenario", help="a scenario TOML file or a built-in name (see `scenarios`)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override any scenario key, e.g. --set cgroup.cpu_limit=1.94")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.add_argument("--out", metavar="DIR", help="write tables (Parquet) and the resolved scenario here")
    p.add_argument("--no-band", action="store_true",
                   help="skip the band of unpinned many-core parameters (two extra simulations when it applies)")
    p.set_defaults(func=run)


def run(args) -> int:
    from cfsim.overheads.report import annotate, band_lines
    from cfsim.simulation import simulate, write_result

    scenario = load_scenario(args.scenario, args.set)
    result = simulate(scenario)
    if args.out:
        write_result(result, args.out)
    notes = annotate(scenario, result.summary, with_band=not args.no_band)
    if args.json:
        json.dump({**result.summary, **notes}, sys.stdout, sort_keys=True)
        sys.stdout.write("\n")
    else:
        width = max(len(k) for k in result.summary)
        for key, value in result.summary.items():
            print(f"{key:<{width}}  {value}")
        for line in band_lines(notes["band"], result.summary):
            print(line)
        for text in notes["coverage"]:
            print(f"outside what we cover: {text}")
    return 0
