"""``python -m cfsim lab run|grid``: real runs of a scenario under a real CFS quota.

    python -m cfsim lab run SCENARIO --out data/lab/<run-id> [--set section.key=value]
    python -m cfsim lab grid SCENARIO --grid cgroup.cpu_limit=0.5,1,2 --grid go.gomaxprocs=1,2,8 \\
        --out data/lab/<name> [--resume] [--repeats N]
    python -m cfsim lab grid SCENARIO --design DESIGNS.toml --out data/lab/<name> [--resume]
    python -m cfsim lab wakeup --out docs/params/lab-host-wakeup.toml [--rounds 3]
    python -m cfsim lab tlb --out docs/params/lab-host-memory.toml [--rounds 3]
    python -m cfsim lab switch --out docs/params/lab-host-thread-switch.toml [--rounds 3]
    python -m cfsim lab scav --out docs/params/lab-host-scavenge.toml [--rounds 3]
    python -m cfsim lab stopping --out docs/params/lab-host-stopping.toml [--rounds 3]
    python -m cfsim lab wakepack --out docs/params/lab-host-wakepack.toml [--rounds 2]
"""
from __future__ import annotations

import faulthandler
import signal
import sys
from functools import partial
from pathlib import Path

from cfsim.output import Answer, add_format_argument, chosen_format, emit


def add_parser(sub) -> None:
    p = sub.add_parser("lab", help="real runs under real CFS quotas, scraped by Prometheus (root)")
    lab_sub = p.add_subparsers(dest="lab_command", metavar="{run,grid,wakeup,tlb,switch,scav,stopping,wakeplace,wakepack}")
    r = lab_sub.add_parser("run", help="one real run of a scenario")
    r.add_argument("scenario", help="a scenario TOML file or a built-in name")
    r.add_argument("--out", required=True, metavar="DIR", help="run folder, e.g. data/lab/<run-id>")
    r.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="override a key")
    add_format_argument(r, "the run's summary (csv/markdown/html: one row)")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.set_defaults(func=run)
    g = lab_sub.add_parser("grid", help="a cartesian grid of real runs with calibration runs")
    g.add_argument("scenario", help="a scenario TOML file or a built-in name")
    g.add_argument("--grid", action="append", default=[], metavar="SECTION.KEY=A,B,C", help="one axis")
    g.add_argument("--design", metavar="FILE.toml", help="[[design]] tables: several cartesian designs with "
                                                          "fixed keys and repeats (see cfsim.lab.grid)")
    g.add_argument("--repeats", type=int, default=1, metavar="N", help="runs per point, back to back (--grid)")
    g.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="override a key")
    g.add_argument("--out", required=True, metavar="DIR", help="grid folder, one sub-folder per run")
    g.add_argument("--resume", action="store_true",
                   help="skip runs that already have summary.json; a point that runs again (its folder "
                        "missing or unfinished) reruns its repeats too, which must run beside it")
    g.add_argument("--no-calibration", action="store_true", help="skip calibration and repeat runs")
    g.add_argument("--calibrate-every", type=int, default=0, metavar="N",
                   help="also a calibration run after every N points (validate --calibration latest then "
                        "calibrates each run by the one just before it; default 0: only at the start and end)")
    add_format_argument(g, "the grid's result (json/yaml: runs, failures, drift; csv/markdown/html: one row per run)")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    g.set_defaults(func=run)
    _add_host_bench(lab_sub, "wakeup", "wakebench", run_wakeup,
                    "this host's CPU per sleep and wake-up of a thread and its timer latency (lab/cmd/wakebench), "
                    "written as host.* parameters", "rounds over the sleep lengths (~20 s each)")
    _add_host_bench(lab_sub, "tlb", "faultbench", run_tlb,
                    "this host's CPU for returning memory to the OS and for the TLB flush it sends to another CPU "
                    "running the process (lab/cmd/faultbench), written as go.page_release_us and "
                    "host.tlb_shootdown_us", "rounds, each alone and with the other CPU busy (a few seconds each)")
    _add_host_bench(lab_sub, "switch", "switchbench", run_switch,
                    "this host's CPU for a context switch between two threads of one process on one CPU, and "
                    "between two processes (lab/cmd/switchbench), written as host.thread_switch_us",
                    "rounds, each alone, two threads and two processes yielding on one CPU (3 s each)")
    _add_host_bench(lab_sub, "scav", "scavbench", run_scav,
                    "this host's CPU for the Go runtime's give-back-and-fault-again cycle near a memory limit "
                    "(lab/cmd/scavbench, with lab/cmd/faultbench for the bare madvise), written as "
                    "go.page_fault_us and go.scavenge_page_us",
                    "rounds, each at GOGC 100 and near GOMEMLIMIT (about 10 s each)")
    _add_host_bench(lab_sub, "stopping", "stwbench", run_stopping,
                    "how long a Go stop-the-world waits on this host for a P that another M runs (the "
                    "preemption signal and the coordinator's futex wake-up; lab/cmd/stwbench), written as "
                    "host.stop_handshake_us", "rounds, each at GOMAXPROCS 1 and 2 (4 s each)")
    _add_host_bench(lab_sub, "wakepack", "packbench", run_wakepack,
                    "up to which utilization a thread and the thread it wakes settle on one CPU on this host "
                    "although another is idle (lab/cmd/packbench): a measurement, written as pair_pack_util "
                    "under [measurement] (no model parameter)",
                    "rounds over 21 settings of a waker and its wakee (about 25 s each)", default_rounds=2)
    w = lab_sub.add_parser("wakeplace", help="where this host's kernel puts a thread that a running thread of its "
                                             "process wakes, and whether it takes the waker's CPU, from lab runs "
                                             "that recorded lab.sched_trace_s; written as host.wake_affine_share "
                                             "and host.wake_preempt_share (and host.wake_affine_share_away from "
                                             "runs that counted the wakee's previous CPU)")
    w.add_argument("runs", nargs="+", metavar="RUN", help="lab run folders with a wake_placement in their manifest")
    w.add_argument("--out", metavar="FILE.toml", help="write a --params file (default: print it)")
    w.set_defaults(func=run_wakeplace)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _add_host_bench(lab_sub, name: str, binary: str, func, help_text: str, rounds_help: str,
                    default_rounds: int = 3) -> None:
    """``cfsim lab NAME``: a host benchmark (lab/cmd/BINARY) written as a ``--params`` file."""
    b = lab_sub.add_parser(name, help=help_text)
    b.add_argument("--out", metavar="FILE.toml", help="write a --params file (default: print it)")
    b.add_argument("--rounds", type=int, default=default_rounds, metavar="N",
                   help=f"{rounds_help} (default {default_rounds})")
    b.add_argument("--from", dest="from_file", metavar="FILE.jsonl",
                   help=f"fit a saved {binary} output instead of running it")
    # the reproduce line in the written file names --rounds only where it is not the default
    b.set_defaults(func=func, default_rounds=default_rounds)


def _sigterm_as_interrupt() -> None:
    # SIGTERM (e.g. `kill PID` of a nohup'd grid) takes the same clean-up path as Ctrl-C
    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, handler)
    # `kill -USR1 PID` prints where every thread of a lab run or grid is (to its stderr) and lets
    # it go on: what a run that seems stuck is waiting for
    faulthandler.register(signal.SIGUSR1, all_threads=True, chain=False)


def run(args) -> int:
    from cfsim.commands._paths import check_out_dir
    from cfsim.lab import build, preflight
    from cfsim.scenario import load_scenario

    # the arguments first: a typo is refused at once, before the machine is checked or Go builds
    check_out_dir(args.out, "--out")
    sc = load_scenario(args.scenario, args.set)
    designs = None
    if args.lab_command == "grid":
        from cfsim.lab import grid

        if args.repeats < 1:
            print(f"error: --repeats must be >= 1 (got {args.repeats})", file=sys.stderr)
            return 2
        if args.calibrate_every < 0:
            print(f"error: --calibrate-every must be >= 0 (got {args.calibrate_every})", file=sys.stderr)
            return 2
        if args.design and args.grid:
            print("error: give axes either with --grid or in the --design file, not both", file=sys.stderr)
            return 2
        designs = grid.read_designs(Path(args.design)) if args.design else None
        # the plan checks the axes (keys, values) against the scenario without running anything
        grid.plan_runs(sc, designs or [grid.Design("grid", [grid.parse_axis(t) for t in args.grid],
                                                   repeats=args.repeats)],
                       not args.no_calibration, args.calibrate_every)
    _sigterm_as_interrupt()
    try:
        preflight.check()
        build.build()
    except (preflight.LabUnavailable, build.BuildError) as exc:
        print(f"error: the lab cannot run here: {exc}", file=sys.stderr)
        return 3
    command = [sys.executable, "-m", "cfsim", *sys.argv[1:]] if sys.argv else None
    fmt = chosen_format(args)
    try:
        if args.lab_command == "run":
            from cfsim.lab import runner
            from cfsim.progress import TimedProgress

            expected_s = float(sc["run.duration_s"]) + float(sc["run.warmup_s"] or 0.0)
            with TimedProgress(expected_s, "lab run", enabled=not args.no_progress) as bar:
                summ = runner.run(sc, Path(args.out), command=command, log=bar.write)
            width = max(len(k) for k in summ)
            text = "\n".join(f"{key:<{width}}  {value}" for key, value in summ.items())
            emit(Answer(dict(sorted(summ.items())), [summ], text, "cfsim lab run"), fmt)
            return 0
        from cfsim.lab import grid, runner
        from cfsim.progress import Progress

        with Progress(None, "lab grid", "run", enabled=not args.no_progress) as bar:
            result = grid.run_grid(sc, args.grid, Path(args.out), resume=args.resume,
                                   calibration=not args.no_calibration, command=command,
                                   run_one=partial(runner.run, log=bar.write), log=bar.write, progress=bar,
                                   designs=designs, repeats=args.repeats, calibrate_every=args.calibrate_every)
        runs = [{"run": name, **{k: v for k, v in entry.items() if k != "overrides"},
                 "overrides": _overrides_text(entry.get("overrides", []))}
                for name, entry in result.get("runs", {}).items()]
        data = {"out": str(args.out), "failed": result.get("failed", 0), "oom": result.get("oom", 0),
                "runs": result.get("runs", {}),
                "drift": result.get("drift", {})}
        import json

        emit(Answer(data, runs, json.dumps(result.get("drift", {}), indent=1, sort_keys=True), "cfsim lab grid"), fmt)
        return 0 if result.get("failed", 0) == 0 else 1
    except KeyboardInterrupt:
        print("interrupted: processes stopped and cgroups removed", file=sys.stderr)
        return 130


def _emit_params(out: str | None, params: dict, toml: str) -> int:
    """Write a ``--params`` file to ``out`` (saying what it holds) or print it."""
    from cfsim.commands._paths import write_out_file

    if out:
        write_out_file(out, toml)
        print(f"wrote {out}: " + ", ".join(f"{k} = {v}" for k, v in params.items()))
    else:
        print(toml, end="")
    return 0


def _host_params(args, name: str, binary: str, run_bench, fit, error: type[Exception]) -> int:
    """``cfsim lab wakeup``, ``tlb``, ``switch``, ``scav`` and ``wakepack``: run a host benchmark (or
    read its saved output, ``--from``), fit ``fit(text, source, command) -> (params, toml)`` and
    print or write the ``--params`` file. Exit 2 for bad input, 3 where the lab cannot run."""
    from cfsim.commands._paths import check_out_file
    from cfsim.lab import build

    check_out_file(args.out, "--out")   # before the benchmark runs, not after
    rounds_given = args.rounds != getattr(args, "default_rounds", 3)
    command = f"python -m cfsim lab {name}" + (f" --rounds {args.rounds}" if rounds_given else "") + \
        (f" --out {args.out}" if args.out else "")
    try:
        if args.from_file:
            path = Path(args.from_file)
            if not path.is_file():
                print(f"error: --from {path}: no such file", file=sys.stderr)
                return 2
            text, source = path.read_text(), str(path)
        else:
            bins = build.build()
            text, source = run_bench(bins[binary], rounds=args.rounds), binary
        params, toml = fit(text, source, command)
    except build.BuildError as exc:
        print(f"error: the lab cannot run here: {exc}", file=sys.stderr)
        return 3
    except error as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return _emit_params(args.out, params, toml)


def run_wakeup(args) -> int:
    from cfsim.lab import wakeup as lw

    def fit(text: str, source: str, command: str):
        rows, meta = lw.read_wakebench(text, source)
        params = lw.wakeup_params(rows, meta["futex_wake"])
        return params, lw.params_toml(params, rows, command, meta["futex_wake"])
    return _host_params(args, "wakeup", "wakebench", lw.run_wakebench, fit, lw.WakebenchError)


def _rows_fit(read, params_of, to_toml):
    """``fit(text, source, command)`` for a benchmark whose parameters come from its rows alone."""
    def fit(text: str, source: str, command: str):
        rows, _meta = read(text, source)
        params = params_of(rows)
        return params, to_toml(params, rows, command)
    return fit


def run_tlb(args) -> int:
    from cfsim.lab import tlb

    return _host_params(args, "tlb", "faultbench", tlb.run_faultbench,
                        _rows_fit(tlb.read_faultbench, tlb.tlb_params, tlb.params_toml), tlb.FaultbenchError)


def run_switch(args) -> int:
    from cfsim.lab import threadswitch as ts

    return _host_params(args, "switch", "switchbench", ts.run_switchbench,
                        _rows_fit(ts.read_switchbench, ts.switch_params, ts.params_toml), ts.SwitchbenchError)


def run_scav(args) -> int:
    from cfsim.lab import scav

    def fit(text: str, source: str, command: str):
        rows, meta = scav.read_scavbench(text, source)
        params = scav.scav_params(rows, meta["bare_release_us"])
        return params, scav.params_toml(params, rows, meta["bare_release_us"], command)
    return _host_params(args, "scav", "scavbench", scav.run_scavbench, fit, scav.ScavbenchError)


def run_stopping(args) -> int:
    from cfsim.lab import stopping as st

    return _host_params(args, "stopping", "stwbench", st.run_stwbench,
                        _rows_fit(st.read_stwbench, st.stopping_params, st.params_toml), st.StwbenchError)


def run_wakepack(args) -> int:
    from cfsim.lab import wakepack as wk

    def fit(text: str, source: str, command: str):
        rows, _meta = wk.read_packbench(text, source)
        found = wk.pack_params(rows)
        params: dict = {}   # a measurement of the host's scheduler, no model parameter
        print(f"pair_pack_util {found['pair_pack_util']}: packed up to util_sum {found['band'][0]}, "
              f"spread from {found['band'][1]}; "
              f"{found['misclassified']} of {found['points']} settings misplaced, {found['excluded']} left out",
              file=sys.stderr)
        return params, wk.params_toml(found, rows, command, wk.vcpu_pack_sysctl())
    return _host_params(args, "wakepack", "packbench", wk.run_packbench, fit, wk.PackbenchError)


def run_wakeplace(args) -> int:
    """``cfsim lab wakeplace RUN...``: pool the runs' wake placement into a ``--params`` file.
    Exit 2 for a run without one or too few wake-ups."""
    from cfsim.commands._paths import check_out_file
    from cfsim.lab import wakeplace as wp

    check_out_file(args.out, "--out")
    command = "python -m cfsim lab wakeplace " + " ".join(args.runs) + (f" --out {args.out}" if args.out else "")
    try:
        for run in args.runs:
            if not Path(run).is_dir():
                raise wp.WakeplaceError(f"{run}: no such run folder")
        rows, _meta = wp.read_wakeplace(wp.rows_from_runs(Path(r) for r in args.runs), "the runs' manifests")
        params = wp.wakeplace_params(rows)
    except (wp.WakeplaceError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    toml = wp.params_toml(params, rows, command, [str(Path(r)).rstrip("/") for r in args.runs])
    return _emit_params(args.out, params, toml)


def _overrides_text(overrides: list) -> str:
    """A run's overrides as ``key=value`` words: grid.json keeps them as ``"key=value"`` strings
    (older grids: ``[key, value]`` pairs).

    >>> _overrides_text(["go.gomaxprocs=1", ["cgroup.cpu_limit", 0.5]])
    'go.gomaxprocs=1 cgroup.cpu_limit=0.5'
    """
    return " ".join(o if isinstance(o, str) else f"{o[0]}={o[1]}" for o in overrides)

