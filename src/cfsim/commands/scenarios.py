"""``python -m cfsim scenarios [NAME] [--format F]``: list built-in scenarios, or print one resolved."""
from __future__ import annotations

from cfsim.output import Answer, add_format_argument, chosen_format, emit
from cfsim.scenario import builtin_names, load_scenario


def add_parser(sub) -> None:
    p = sub.add_parser("scenarios", help="list built-in scenarios or show one resolved")
    p.add_argument("name", nargs="?", help="a built-in name or a TOML path to print resolved")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    add_format_argument(p, "the list, or the resolved scenario (table: TOML; csv/markdown/html: key, value)")
    p.set_defaults(func=run)


def run(args) -> int:
    fmt = chosen_format(args)
    if args.name is None:
        names = builtin_names()
        emit(Answer(names, [{"name": n} for n in names], "\n".join(names), "cfsim scenarios"), fmt)
        return 0
    sc = load_scenario(args.name, args.set)
    # json/yaml carry every key, an unset optional one as null (no limit, no schedule, ...); only
    # TOML, which has no null, leaves them out
    resolved: dict = {}
    for dotted, value in sc.flat().items():
        section, key = dotted.split(".", 1)
        resolved.setdefault(section, {})[key] = value
    emit(Answer(resolved, [{"key": k, "value": v} for k, v in sc.flat().items()], sc.to_toml(), sc.source), fmt)
    return 0
