"""``python -m cfsim run SCENARIO [--set section.key=value] [--params F.toml ...] [--format F] [--out DIR] [--no-band]``."""
from __future__ import annotations

from cfsim.commands._params import add_params_argument, scenario_overrides
from cfsim.commands._paths import check_out_dir
from cfsim.output import Answer, add_format_argument, chosen_format, emit
from cfsim.scenario import load_scenario


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="simulate one scenario")
    p.add_argument("scenario", help="a scenario TOML file or a built-in name (see `scenarios`)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override any scenario key, e.g. --set cgroup.cpu_limit=1.94")
    add_params_argument(p)
    add_format_argument(p, "the summary (csv/markdown/html: one row)")
    p.add_argument("--out", metavar="DIR", help="write tables (Parquet) and the resolved scenario here")
    p.add_argument("--no-band", action="store_true",
                   help="skip the band of unpinned many-core parameters (two extra simulations when it applies)")
    p.set_defaults(func=run)


def run(args) -> int:
    from cfsim.overheads.accuracy import accuracy_lines
    from cfsim.overheads.report import annotate, band_columns, band_lines
    from cfsim.simulation import simulate, write_result

    check_out_dir(args.out, "--out")
    scenario = load_scenario(args.scenario, scenario_overrides(args.scenario, args.set, args.params))
    result = simulate(scenario)
    if args.out:
        write_result(result, args.out)
    summary = result.summary
    notes = annotate(scenario, summary, with_band=not args.no_band)
    width = max(len(k) for k in summary)
    lines = [f"{key:<{width}}  {value}" for key, value in summary.items()]
    lines += band_lines(notes["band"], summary)
    lines += [f"outside what we cover: {t}" for t in notes["coverage"]]
    lines += accuracy_lines(notes["lab_accuracy"], summary)
    row = {**summary, **band_columns(notes["band"]), "coverage": "; ".join(notes["coverage"])}
    emit(Answer(dict(sorted({**summary, **notes}.items())), [row], "\n".join(lines), "cfsim run"),
         chosen_format(args))
    return 0
