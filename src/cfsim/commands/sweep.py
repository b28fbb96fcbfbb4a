"""``python -m cfsim sweep``: what-if grids on this machine or a Dask cluster.

    python -m cfsim sweep SCENARIO --grid KEY=a,b,c --grid KEY=start:stop:step [--seeds N]
                          [--set KEY=VALUE] [--params F.toml ...] --out DIR [--workers N | --dask ADDRESS|local] [--resume]
    python -m cfsim sweep --file study.toml [--out DIR] [--resume]
    python -m cfsim sweep --resume --out DIR          # finish a killed sweep from its manifest
    python -m cfsim sweep --plot DIR                  # PNG + SVG curves vs allocation
"""
from __future__ import annotations

import argparse
import sys

from cfsim.commands._params import HELP, add_params_argument
from cfsim.commands._paths import out_dir_error
from cfsim.output import Answer, add_format_argument, chosen_format, emit


def add_parser(sub) -> None:
    p = sub.add_parser(
        "sweep", help="run a grid of what-if scenarios (local processes or Dask), or plot one",
        description="Run every combination of --grid values x --seeds on a base scenario and write\n"
                    "one tidy row per run (Hive-partitioned Parquet + manifest.json) to --out.\n"
                    "A killed sweep resumes with --resume, recomputing nothing that finished.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  python -m cfsim sweep grab-sinktos3 --grid cgroup.cpu_limit=0.25:4:0.05 \\\n"
               "      --grid go.gomaxprocs=automaxprocs,go1.25,host,2 --seeds 3 --out out/limits\n"
               "  python -m cfsim sweep my-service.toml --grid ... --dask tcp://scheduler:8786 --out DIR\n"
               "  python -m cfsim sweep --plot out/limits")
    p.add_argument("scenario", nargs="?", help="a scenario TOML file or a built-in name")
    p.add_argument("--grid", action="append", default=[], metavar="SECTION.KEY=VALUES",
                   help="an axis: a,b,c (TOML literals or bare words) or start:stop:step (stop "
                        "included); repeat for more axes (cartesian product)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="a fixed override for every run, e.g. --set run.duration_s=60")
    add_params_argument(p, HELP + "; written into the sweep's overrides, so --resume needs the same files")
    p.add_argument("--seeds", type=int, default=None, metavar="N",
                   help="replicates per grid point, each with its own seed (default 1)")
    p.add_argument("--root-seed", type=int, default=None, metavar="INT",
                   help="root of all run seeds (default: the scenario's run.seed)")
    p.add_argument("--out", metavar="DIR", help="output directory (or a URL, with fsspec)")
    p.add_argument("--file", metavar="STUDY.toml", help="a sweep file holding scenario, grid, seeds, ...")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="local worker processes, or with --dask local the cluster's (default: all cores; "
                        "0 = in this process, without --dask)")
    p.add_argument("--dask", metavar="ADDRESS",
                   help="run on a Dask cluster: a scheduler address, or 'local' for a LocalCluster")
    p.add_argument("--resume", action="store_true",
                   help="finish the sweep already in --out, computing only the missing runs")
    p.add_argument("--overwrite", action="store_true",
                   help="delete a sweep already in --out and start again")
    p.add_argument("--plot", metavar="DIR", help="plot the sweep in DIR (PNG and SVG) and exit")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_format_argument(p, "the final report (json/yaml: counts, wall time, errors; csv/markdown/html: every "
                           "run's row)")
    p.add_argument("--band", action="store_true",
                   help="add band_low_*/band_high_* columns (unpinned many-core parameters at their low / high "
                        "priors: two extra simulations per point where they apply) and a coverage column")
    p.add_argument("--point-fn", default=None, help=argparse.SUPPRESS)  # module:function, for tests
    p.set_defaults(func=run)


def _fail(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return 2


def run(args) -> int:
    from cfsim.sweep import ExecutorUnavailable, Grid, GridError, StoreError, parse_axis
    from cfsim.sweep.grid import Study, load_study

    if args.plot:
        if args.scenario or args.grid or args.file:
            return _fail("--plot DIR only plots an existing sweep; run the sweep first")
        from cfsim.sweep.plot import plot_sweep

        try:
            paths = plot_sweep(args.plot)
        except (StoreError, ValueError) as exc:
            return _fail(str(exc))
        for path in paths:
            print(path)
        return 0

    try:
        study = load_study(args.file) if args.file else Study()
        if args.scenario:
            study.scenario = args.scenario
        if args.grid:
            if args.file:
                return _fail("give the grid either in --file or with --grid, not both")
            study.grid = Grid(parse_axis(spec) for spec in args.grid)
        study.overrides = list(study.overrides) + list(args.set)
        for name in ("seeds", "root_seed", "out", "workers", "dask"):
            value = getattr(args, name)
            if value is not None:
                setattr(study, name, value)
    except GridError as exc:
        return _fail(f"invalid grid: {exc}")
    if not study.out:
        return _fail("--out DIR is required (where the Parquet rows and manifest go)")
    bad_out = out_dir_error(study.out, "--out")
    if bad_out:
        return _fail(bad_out)
    if study.scenario is None and not args.resume:
        return _fail("give a SCENARIO (a TOML file or a built-in name), --file STUDY.toml, "
                     "or --resume --out DIR")
    if args.resume and args.overwrite:
        return _fail("--resume keeps what is in --out, --overwrite deletes it: choose one")
    if args.params:
        if study.scenario is None:
            return _fail("--params applies to a new sweep's scenario; --resume --out DIR alone keeps the "
                         "manifest's overrides (give the scenario, --set and --params again, or neither)")
        try:
            study.overrides = _with_params(study, args.params)
        except (OSError, ValueError) as exc:
            return _fail(f"--params: {exc}")
    if study.root_seed is not None and study.root_seed < 0:
        return _fail(f"--root-seed must be >= 0 (got {study.root_seed})")
    if study.seeds is not None and study.seeds < 1:
        return _fail(f"--seeds must be >= 1 (got {study.seeds})")
    if study.workers is not None and study.workers < 0:
        return _fail(f"--workers must be >= 0 (got {study.workers})")
    if study.dask and study.workers == 0:
        # 0 means "in this process", which a Dask cluster cannot do: say so instead of starting
        # the default number of workers
        return _fail("--workers 0 runs the sweep in this process, not on Dask: with --dask give the local "
                     "cluster's workers (>= 1) or leave --workers out (all cores)")

    from cfsim.sweep.runner import run_sweep
    from cfsim.sweep.results import SweepResults

    if args.band:
        if args.point_fn:
            return _fail("--band chooses the point function: drop --point-fn")
        args.point_fn = "cfsim.overheads.report:summary_with_band"
    from cfsim.sweep.progress import summary_table

    try:
        report = run_sweep(study.scenario, study.grid if study.scenario else None, out=study.out,
                           seeds=study.seeds or 1, root_seed=study.root_seed,
                           overrides=study.overrides, workers=study.workers, dask=study.dask,
                           point_fn=args.point_fn, resume=args.resume, overwrite=args.overwrite,
                           progress=not args.no_progress)
    except GridError as exc:
        return _fail(f"invalid grid: {exc}")
    except (StoreError, ExecutorUnavailable) as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:
        print(f"\ninterrupted: the runs that finished are kept in {study.out}; finish the sweep with "
              f"`python -m cfsim sweep --resume --out {study.out}`", file=sys.stderr)
        return 130

    def text() -> str:
        res = SweepResults.open(study.out)
        rate = report.computed / report.wall_s if report.wall_s > 0 else 0.0
        lines = [f"sweep: {report.total} runs ({report.skipped} already done, {report.computed} computed: "
                 f"{report.ok} ok, {report.errors} errors) in {report.wall_s:.1f} s "
                 f"({rate:.1f} runs/s) on {report.executor} x{report.workers}",
                 summary_table(res.frame, res.axes)]
        lines += [f"error: {line}" for line in report.first_errors]
        if report.lost:
            lines.append(f"{report.lost} runs were lost with their worker process; "
                         f"run again with --resume --out {study.out} to retry them")
        lines += _coverage_lines(study)
        lines.append(f"wrote {study.out} (read it with cfsim.sweep.SweepResults.open)")
        return "\n".join(lines)

    fmt = chosen_format(args)
    rows = SweepResults.open(study.out).frame.to_dict("records") if fmt in ("csv", "markdown", "html") else None
    emit(Answer(dict(sorted(report.as_dict().items())), rows, text, "cfsim sweep"), fmt)
    if report.lost:
        return 1
    return 0 if report.ok or not report.computed else 1


def _with_params(study, paths: list[str]) -> list[str]:
    """The study's overrides with the files' settings before them (an explicit --set and a grid
    axis win over a file); a fitted cost factor cannot scale a key the grid varies."""
    from cfsim.commands._params import read_cli_params, set_keys, settings

    axes = study.grid.keys
    over = settings(study.scenario, study.overrides, read_cli_params(paths), keep=axes)
    files = [o for o in over if o not in study.overrides]   # the files' settings (and what they scaled)
    clash = sorted(set(set_keys(files)) & set(axes))
    if clash:
        raise ValueError(f"the files' cost_factor scales {', '.join(clash)}, which --grid varies: give that "
                         f"axis in this host's values and drop cost_factor, or sweep another key")
    return over


def _coverage_lines(study) -> list[str]:
    """The base scenario's coverage notes (each point's are in the ``coverage`` column with --band)."""
    from cfsim.overheads.report import notes_text
    from cfsim.scenario import load_scenario

    if study.scenario is None:
        return []
    try:
        base = load_scenario(study.scenario, study.overrides)
    except (ValueError, FileNotFoundError):
        return []
    return [f"outside what we cover (base scenario): {text}" for text in notes_text(base)]
