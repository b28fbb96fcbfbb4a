"""``python -m cfsim scenarios``: list built-in scenarios, or print one resolved."""
from __future__ import annotations

from cfsim.scenario import builtin_names, load_scenario


def add_parser(sub) -> None:
    p = sub.add_parser("scenarios", help="list built-in scenarios or show one resolved")
    p.add_argument("name", nargs="?", help="a built-in name or a TOML path to print resolved")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.name is None:
        print("\n".join(builtin_names()))
        return 0
    print(load_scenario(args.name, args.set).to_toml(), end="")
    return 0
