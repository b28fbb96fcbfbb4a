"""``python -m cfsim calibrate PATH --train EXPR [--param KEY[=LO:HI]] --out params.toml [--format F]``."""
from __future__ import annotations

import math
import sys

from cfsim.output import Answer, add_format_argument, chosen_format, emit


def add_parser(sub) -> None:
    p = sub.add_parser("calibrate", help="fit unstated parameters on training runs, validate on the rest")
    p.add_argument("path", help="a lab grid folder or a folder of grids")
    p.add_argument("--train", required=True, metavar="EXPR",
                   help="which runs to fit on, e.g. 'cgroup.cpu_limit<=1' (the others are validation)")
    p.add_argument("--param", action="append", default=[], metavar="KEY[=LO:HI]",
                   help="a parameter to fit: cost_factor or any section.key (default: cost_factor, "
                        "go.gc_scan_mb_per_ms, go.sched_spin_per_p_us); KEY=VALUE holds it at VALUE "
                        "during the fit and writes it with the fitted ones")
    p.add_argument("--metric", action="append", default=[], metavar="NAME",
                   help="a validation metric whose errors the fit minimises (repeatable; default: throughput, "
                        "CPU, throttled ratio, GC share; 'gc' = cycles/s, mean heap goal, memory usage, throughput)")
    p.add_argument("--params", metavar="TOML", action="append", default=[],
                   help="parameters held fixed during the fit (measured ones, e.g. from `cfsim lab tlb`); "
                        "repeat to combine files; apply them beside the fit's --out")
    p.add_argument("--out", metavar="TOML", help="write the fitted parameters, uncertainty and errors here")
    p.add_argument("--report", metavar="DIR", help="write the held-out validation report here")
    p.add_argument("--workers", type=int, default=2,
                   help="processes simulating the twins, in the fit and the validation after it (default 2; "
                        "0 or 1: this process)")
    p.add_argument("--max-nfev", type=int, default=40,
                   help="budget of objective evaluations of the local fit (after the start search)")
    p.add_argument("--start-points", type=int, default=None, metavar="N",
                   help="points per parameter of the coarse search over the bounds that starts the local "
                        "fit (twice: the whole range, then around its best point; default 5 for up to two "
                        "parameters, 3 for three, none beyond; 0 starts at the scenario's value)")
    add_format_argument(p, "the fit (json/yaml: params, sigma_log, errors; csv/markdown/html: one row per parameter)")
    # twin.CALIBRATION_CHOICES and DEFAULT_CALIBRATION, spelled out so that the CLI starts without importing them
    p.add_argument("--calibration", choices=("all", "before", "latest"), default="latest",
                   help="which of each grid's calibration runs set its factors, in the fit and its validation: "
                        "latest (default: each run's the one recorded last before it), before (only those "
                        "recorded before the runs they calibrate) or all (also the closing one, recorded "
                        "after the runs)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def _param_specs(items: list[str]) -> tuple[list[str] | None, dict[str, tuple[float, float]], dict[str, float]]:
    """``--param`` items -> (names to fit or None for the defaults, their bounds, held values)."""
    names, bounds, held = [], {}, {}
    for item in items:
        key, _, rng = item.partition("=")
        try:
            if rng and ":" not in rng:
                held[key] = float(rng)
                continue
            names.append(key)
            if rng:
                lo, _, hi = rng.partition(":")
                bounds[key] = (float(lo), float(hi))
        except ValueError:
            raise ValueError(f"--param {item}: write KEY, KEY=LOW:HIGH or KEY=VALUE") from None
    return names or None, bounds, held


def run(args) -> int:
    from cfsim.validation import validate, write_report
    from cfsim.validation.calibrate import GC_MEMORY_RESIDUALS, MAX_SIGMA_LOG, calibrate, read_params_files
    from cfsim.validation.report import to_markdown
    from cfsim.validation.twin import validation_scope

    from cfsim.progress import Progress

    try:
        names, bounds, held = _param_specs(args.param)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from cfsim.commands._paths import check_out_dir, check_out_file, write_out_file

    check_out_dir(args.report, "--report")
    check_out_file(args.out, "--out")   # before the fit, not after it
    for opt, v, least in (("--max-nfev", args.max_nfev, 1), ("--start-points", args.start_points, 0),
                          ("--workers", args.workers, 0)):
        if v is not None and v < least:
            print(f"error: {opt} must be >= {least} (got {v})", file=sys.stderr)
            return 2
    try:
        fixed, _ = read_params_files(args.params) if args.params else ({}, [])
    except (OSError, ValueError) as exc:
        print(f"error: --params: {exc}", file=sys.stderr)
        return 2
    try:
        metrics = [m for item in args.metric for m in (GC_MEMORY_RESIDUALS if item == "gc" else [item])] or None
        with Progress(None, "calibrate", "evaluation", enabled=not args.no_progress) as bar:
            cal, train_runs, test_runs = calibrate(args.path, args.train, names, workers=args.workers,
                                                   max_nfev=args.max_nfev, bounds=bounds, progress=bar.advance_to,
                                                   metrics=metrics, fixed=fixed, held=held,
                                                   start_points=args.start_points, calibration=args.calibration)
    except ValueError as exc:  # a bad --train or --param: say which, no traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.out:   # the fit first, so a failure while validating does not lose it
        write_out_file(args.out, cal.to_toml({}))
    from cfsim.validation.report import summarise_errors

    with Progress(len(train_runs) + len(test_runs), "validate", "run", enabled=not args.no_progress) as bar:
        tick = (lambda run_id: bar.advance(1, run_id))
        # the runs the fit used are training, not held out: their errors are summarised apart
        applied = {**cal.fixed, **cal.held, **cal.params}   # the fit holds with the parameters it held
        workers = max(1, args.workers)   # as many processes as the fit had (0: this one, like 1)
        # a run folder of a grid is validated within its grid: its twin takes the grid's
        # calibration runs, as it did in the fit (cfsim.validation.twin.validation_scope)
        root = validation_scope(args.path)[0]
        train_report = validate(root, params=applied, only=train_runs, progress=tick, train_runs=train_runs,
                                calibration=args.calibration, workers=workers)
        test_report = validate(root, params=applied, only=test_runs, progress=tick,
                               calibration=args.calibration, workers=workers) if test_runs else None
    train_errors = summarise_errors(train_report.runs, held_out_only=False)
    if args.out:
        errors = {"train": train_errors, "validation": test_report.errors if test_report else {}}
        flat = {f"{part}.{metric}": v for part, e in errors.items() for metric, v in e.items()}
        write_out_file(args.out, cal.to_toml(flat))
    if args.report and test_report:
        write_report(test_report, args.report)
    sigma = {k: (v if v < MAX_SIGMA_LOG else None) for k, v in cal.sigma_log.items()}
    data = {"params": cal.params, "held": cal.held, "sigma_log": sigma, "train_runs": len(train_runs),
            "validation_runs": len(test_runs), "train_errors": train_errors,
            "validation_errors": test_report.errors if test_report else {}}
    rows = [{"param": k, "value": v, "sigma_log": sigma[k]} for k, v in cal.params.items()]

    def text() -> str:
        def spread(k: str) -> str:
            sig = cal.sigma_log[k]
            return f"x/÷ {math.exp(sig):.3f}" if sig < MAX_SIGMA_LOG else "not constrained by the training runs"
        lines = ["fitted: " + ", ".join(f"{k} = {v:.4g} ({spread(k)})" for k, v in cal.params.items())
                 + "".join(f"; held: {k} = {v:.4g}" for k, v in cal.held.items()),
                 f"trained on {len(train_runs)} runs; validated on {len(test_runs)} held-out runs"]
        if test_report:
            lines.append(to_markdown(test_report))
        return "\n".join(lines)

    emit(Answer(data, rows, text, "cfsim calibrate"), chosen_format(args))
    return 0
