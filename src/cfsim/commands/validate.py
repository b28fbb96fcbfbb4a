"""``python -m cfsim validate PATH [--report DIR] [--params params.toml ...] [--format F]``."""
from __future__ import annotations

import sys

from cfsim.output import Answer, add_format_argument, chosen_format, emit


def _positive_int(text: str) -> int:
    import argparse

    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1 (got {text!r})")
    return n


def uncalibrated_grids(runs: list) -> list[str]:
    """The grids among ``runs`` (run folders) that hold no calibration run: their twins take the
    scenario's per-item cost as it stands, not the lab host's."""
    from cfsim.validation.twin import is_calibration_run

    grids: dict = {}
    for run in runs:
        grids.setdefault(run.parent, []).append(is_calibration_run(run))
    return [str(g) for g, calib in grids.items() if not any(calib)]


def add_parser(sub) -> None:
    p = sub.add_parser("validate", help="compare simulated twins with lab run exports")
    p.add_argument("path", help="a lab run folder, a grid folder, or a folder of grids")
    p.add_argument("--report", metavar="DIR", help="write errors.csv, report.md, report.json and plots here")
    p.add_argument("--params", metavar="TOML", action="append", default=[],
                   help="calibrated or measured parameters (from `cfsim calibrate`, `cfsim lab wakeup`); "
                        "repeat to combine files")
    p.add_argument("--no-normalise", action="store_true",
                   help="do not scale per-item CPU by the grid's calibration runs")
    # twin.CALIBRATION_CHOICES and DEFAULT_CALIBRATION, spelled out so that the CLI starts without importing them
    p.add_argument("--calibration", choices=("all", "before", "latest"), default="latest",
                   help="which of each grid's calibration runs set its factors and priors: latest (default: "
                        "each run's twin takes the calibration run recorded last before it, so a grid run "
                        "with `cfsim lab grid --calibrate-every N` is calibrated by the host just before each "
                        "run, and one with calibration runs at its ends by the opening one), before (only "
                        "those recorded before every run they calibrate) or all (the lab's runs at the "
                        "grid's start and end: the closing one was recorded after the runs, which a user "
                        "predicting them would not have)")
    add_format_argument(p, "the validation (json/yaml: {headline, by_regime, regime_counts, errors, grids, runs}; "
                           "csv/markdown/html: one row per run and metric, with its regime)")
    p.add_argument("--against", metavar="REPORT.json",
                   help="an earlier validation (--format json, or --report's report.json): per grid and "
                        "metric, which median errors got worse or better")
    p.add_argument("--workers", type=_positive_int, default=None, metavar="N",
                   help="processes simulating the twins (default: every CPU; 1 = no pool)")
    p.add_argument("--seeds", type=_positive_int, default=1, metavar="N",
                   help="simulate each run's twin at its seed and the next N-1, compare the lab with their mean "
                        "and report how far apart their errors lie (the twins' own noise; N times the time)")
    p.add_argument("--seed-offset", type=int, default=0, metavar="K",
                   help="simulate each run's twin at its seed + K (the calibration runs' twins keep theirs): the "
                        "same model at other seeds, to pass to --against-noise")
    p.add_argument("--against-noise", metavar="REPORT.json", action="append", default=[],
                   help="with --against: this model's validation at other seeds (--seed-offset); a figure then "
                        "counts as worse or better only beyond how far it moves between them. Repeatable")
    p.add_argument("--against-baseline-noise", metavar="REPORT.json", action="append", default=[],
                   help="with --against: the earlier model's validation at other seeds (its own code and data, "
                        "each twin's seed shifted); its seed noise is added to this model's as independent "
                        "errors add. Repeatable")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args) -> int:
    from cfsim.commands._paths import check_out_dir
    from cfsim.progress import Progress
    from cfsim.validation import validate, write_report
    from cfsim.validation.calibrate import read_params_files
    from cfsim.validation.report import to_markdown
    from cfsim.validation.twin import find_runs

    check_out_dir(args.report, "--report")
    if args.seed_offset < 0:
        print(f"error: --seed-offset must be >= 0 (got {args.seed_offset})", file=sys.stderr)
        return 2
    try:
        params, train = read_params_files(args.params) if args.params else ({}, [])  # train: fitted on
    except (OSError, ValueError) as exc:
        print(f"error: --params: {exc}", file=sys.stderr)
        return 2
    baseline = None
    noise: list = []
    baseline_noise: list = []
    for flag, given in (("--against-noise", args.against_noise),
                        ("--against-baseline-noise", args.against_baseline_noise)):
        if given and not args.against:
            print(f"error: {flag} needs --against (the earlier validation to compare with)", file=sys.stderr)
            return 2
    if args.against:
        from cfsim.validation.against import read_validation_runs

        for flag, path, into in ([("--against", args.against, None)]
                                 + [("--against-noise", n, noise) for n in args.against_noise]
                                 + [("--against-baseline-noise", n, baseline_noise)
                                    for n in args.against_baseline_noise]):
            try:
                runs, meta = read_validation_runs(path)
            except (OSError, ValueError) as exc:
                print(f"error: {flag}: {exc}", file=sys.stderr)
                return 2
            if meta["calibration"] != args.calibration:
                # said before the twins run: a comparison across calibrations mixes two causes
                print(f"warning: {flag} {path} took --calibration {meta['calibration']}, this validation "
                      f"--calibration {args.calibration}: its figures move with the calibration as well as with "
                      f"the model; pass --calibration {meta['calibration']} to compare like with like",
                      file=sys.stderr)
            if into is None:
                baseline, baseline_calibration = runs, meta["calibration"]
            else:
                into.append(runs)
    from cfsim.validation.twin import validation_scope

    root, only = validation_scope(args.path)
    found = find_runs(root)
    if not args.no_normalise:
        for grid in uncalibrated_grids(found):
            print(f"note: {grid} holds no calibration run (calib-*): its twins take the scenario's per-item cost "
                  f"as it stands (cost factor 1), not the lab host's", file=sys.stderr)
    with Progress(len(only) if only else len(found), "validate", "run", enabled=not args.no_progress) as bar:
        report = validate(root, params=params or None, normalise=not args.no_normalise,
                          progress=lambda run_id: bar.advance(1, run_id), train_runs=train or None,
                          workers=args.workers, seeds=args.seeds, seed_offset=args.seed_offset,
                          calibration=args.calibration, only=only)
    if not report.runs:
        print(f"note: {args.path} holds only calibration runs (calib-*): they set their grid's factors and are not "
              f"validated themselves; give the grid folder", file=sys.stderr)
    if baseline is not None:
        from cfsim.validation.against import compare

        report.against = {"baseline": str(args.against), "baseline_calibration": baseline_calibration,
                          "noise_from": list(args.against_noise),
                          "baseline_noise_from": list(args.against_baseline_noise),
                          **compare(baseline, report.runs, noise=noise, baseline_noise=baseline_noise)}
        c = report.against["counts"]
        beyond = ""
        if noise or baseline_noise:
            w = report.against["counts_without_noise"]
            whose = " and ".join(([f"this model's ({len(noise)} other validation(s))"] if noise else [])
                                 + ([f"the earlier model's ({len(baseline_noise)})"] if baseline_noise else []))
            beyond = (f"; beyond the seed noise of {whose}, "
                      f"{w['worse']} worse and {w['better']} better without that allowance")
        print(f"against {args.against}: {c['worse']} grid-metric figures worse, {c['better']} better, "
              f"{c['same']} the same{beyond} (the report's 'against' section lists them)", file=sys.stderr)
    if args.report:
        write_report(report, args.report)
    rows = report.table().to_dict("records")
    emit(Answer(report.to_json(), rows, lambda: to_markdown(report), "cfsim validate"), chosen_format(args))
    return 0
