"""``python -m cfsim run SCENARIO [--set section.key=value] [--format F] [--out DIR]``."""
from __future__ import annotations

from cfsim.output import Answer, add_format_argument, chosen_format, emit
from cfsim.scenario import load_scenario


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="simulate one scenario")
    p.add_argument("scenario", help="a scenario TOML file or a built-in name (see `scenarios`)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override any scenario key, e.g. --set cgroup.cpu_limit=1.94")
    add_format_argument(p, "the summary (csv/markdown/html: one row)")
    p.add_argument("--out", metavar="DIR", help="write tables (Parquet) and the resolved scenario here")
    p.set_defaults(func=run)


def run(args) -> int:
    from cfsim.simulation import simulate, write_result

    scenario = load_scenario(args.scenario, args.set)
    result = simulate(scenario)
    if args.out:
        write_result(result, args.out)
    summary = result.summary
    width = max(len(k) for k in summary)
    text = "\n".join(f"{key:<{width}}  {value}" for key, value in summary.items())
    emit(Answer(dict(sorted(summary.items())), [summary], text, "cfsim run"), chosen_format(args))
    return 0
