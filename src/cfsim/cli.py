"""``python -m cfsim``: a thin layer over the library. Each subcommand lives in
:mod:`cfsim.commands` and exposes ``add_parser(subparsers)`` and ``run(args) -> int``."""
from __future__ import annotations

import argparse
import importlib
import sys

from cfsim.commands import CommandError
from cfsim.scenario import ScenarioError

# subcommand name -> module under cfsim.commands; each module imports its heavy dependencies inside
# run(), so building the parser stays fast
COMMANDS = {
    "run": "run",
    "sweep": "sweep",
    "trap": "trap",
    "vpa": "vpa",
    "lab": "lab",
    "validate": "validate",
    "calibrate": "calibrate",
    "scenarios": "scenarios",
    "recommend": "recommend",
    "audit": "audit",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cfsim", description="Go services under Linux CFS CPU limits, GOMAXPROCS, the Go GC and Kubernetes "
                                  "autoscalers: simulate, audit, recommend, validate (also `python -m cfsim`).")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS.values():
        importlib.import_module(f"cfsim.commands.{module}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except CommandError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)  # one line, whatever the cause said
        return 2
    except ScenarioError as exc:
        print(f"error: invalid scenario: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        # malformed input files (a truncated export, a damaged manifest, ...): cfsim.io's readers
        # raise CfsimParseError naming the file and the position; anything else is a bug to show
        from cfsim.io.errors import CfsimParseError

        if not isinstance(exc, CfsimParseError):
            raise
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
