"""``python -m cfsim audit EXPORTS... | --prometheus-url URL [--report PREFIX] [--params TOML ...] [--format F] [--emit E]``.

Reads Prometheus query_range JSON exports, lab run folders, or a live Prometheus (cAdvisor CPU and
CFS counters, kube-state-metrics requests/limits/owners/VPA, the Go runtime's GOMAXPROCS, GOGC,
GOMEMLIMIT), flags each container (trapped, throttled, GOMAXPROCS far above the limit, headroom),
simulates a fix for each flag, writes a ranked table (CSV, markdown) and an HTML report with plots,
and prints the findings (``--emit patch``: a strategic-merge patch per workload container;
``--emit vpa-status``: the stock VPA's status block for its observed usage).
"""
from __future__ import annotations

import sys

from cfsim.commands import CommandError
from cfsim.commands._prometheus import (add_prometheus_arguments, check_connection_numbers, check_emit_format,
                                        load_live, refuse_mixed_sources)
from cfsim.output import Answer, add_format_argument, chosen_format, dump_yaml_all, emit


def add_parser(sub) -> None:
    p = sub.add_parser("audit", help="flag containers in Prometheus exports or a live Prometheus; simulate the fixes")
    p.add_argument("exports", nargs="*", help="folder(s) of query_range JSON exports, or lab run folders / grids "
                                              "(or --prometheus-url)")
    p.add_argument("--report", metavar="PREFIX", default="out/audit/audit",
                   help="write PREFIX.csv, PREFIX.md, PREFIX.html (default out/audit/audit)")
    p.add_argument("--no-report", action="store_true", help="write no report files")
    p.add_argument("--no-simulate", action="store_true", help="flags and evidence only, no simulated fixes")
    p.add_argument("--duration", type=float, default=20.0, help="seconds simulated per fix (default 20)")
    p.add_argument("--include-calibration", action="store_true", help="audit lab calib-* runs too")
    p.add_argument("--params", metavar="TOML", action="append", default=[],
                   help="model parameters for every simulated fix (cfsim calibrate --out; a host's measured costs), "
                        "as validate takes them; repeat for several files")
    add_format_argument(p, "the findings (json/yaml: containers, flags, statistics, unknowns and findings; "
                           "csv/markdown/html: the ranked findings)")
    p.add_argument("--emit", choices=("report", "patch", "vpa-status"), default="report",
                   help="patch: per workload container, a patch for `kubectl patch --type strategic` (yaml, one "
                        "document each; json: one object per line); vpa-status: the VPA status block")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="processes simulating containers (default: all cores; 0: this process)")
    p.add_argument("--dask", metavar="ADDRESS", help="run on a Dask cluster (tcp://scheduler:8786, or 'local')")
    p.add_argument("--cache", metavar="DIR", help="keep simulated summaries in DIR and reuse them in later audits "
                                                   "(default: a temporary folder the workers share during this run)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_prometheus_arguments(p)
    p.set_defaults(func=run)


def _text(result, paths) -> str:
    flags = result.flags_by_container()
    lines = [f"{len(result.containers)} containers, {len(result.findings)} findings"]
    for rank, f in enumerate(result.findings, 1):
        lines.append(f"{rank:>3}. {f.container.name}  [{f.flag}] {f.detail}")
        lines.append(f"     evidence: {f.evidence}")
        if f.fix:
            lines.append(f"     fix:      {f.fix}")
        if f.effect:
            lines.append(f"     effect:   {f.effect}")
    ok = [name for name, fl in flags.items() if not fl]
    if ok:
        lines.append("no findings: " + ", ".join(ok))
    unknown = {}
    for c in result.containers:
        for what, how in c.missing.items():
            unknown.setdefault((what, how), []).append(c.name)
    for (what, how), names in sorted(unknown.items()):
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        lines.append(f"{what} {how} [{shown}]")
    if paths:
        lines.append("report: " + ", ".join(str(p) for p in paths.values()))
    return "\n".join(lines)


def _objects(result, what: str) -> tuple[list[dict], list[str]]:
    from cfsim.advice.kubernetes import patch_command, strategic_patch

    docs, comments = [], []
    for w in result.workloads():
        head = f"{w.name}: flags {', '.join(w.flags) or 'none'}; pods {', '.join(w.pods)}"
        if w.workload_source:
            head += f"\nworkload from {w.workload_source}"
        if what == "vpa-status":
            if w.vpa_status is None:
                continue
            if w.vpa_now:
                now = ", ".join(f"{k[:-2]} {v}m" for k, v in w.vpa_now.items() if k.endswith("_m"))
                head += f"\nthe VPA {w.vpa_now.get('name', '')} writes today (kube-state-metrics): {now}"
            docs.append({"status": w.vpa_status})
            comments.append(head + "\nthe stock VPA recommender on the observed usage; apply with: kubectl patch vpa "
                                   "NAME --subresource status --type merge --patch-file /dev/stdin")
            continue
        if w.change.empty():
            continue
        docs.append(strategic_patch(w.workload, w.namespace, [w.change]))
        comments.append("\n".join([head, *w.change.notes, patch_command(w.workload, w.namespace)]))
    return docs, comments


def _check_numbers(args) -> None:
    """The numeric options, refused at once (one line naming the option, exit 2) rather than when a
    scenario or a connection first takes them."""
    import math

    from cfsim.scenario.schema import SCHEMA

    d = args.duration
    if not math.isfinite(d):
        raise CommandError(f"--duration must be a finite number > 0 (got {d:g})")
    if d <= 0:
        raise CommandError(f"--duration must be > 0 (got {d:g})")
    # the proxy scenarios' run.duration_s is the bound past that (a 1 ms floor, 30 days), said of the option
    why = SCHEMA["run"]["duration_s"].check(float(d))
    if why:
        raise CommandError(f"--duration {why}")
    if args.workers is not None and args.workers < 0:
        raise CommandError(f"--workers must be >= 0 (got {args.workers})")
    check_connection_numbers(args)


def run(args) -> int:
    import contextlib
    import json
    import tempfile

    from cfsim.advice.audit import audit, load_containers, summary_json, write_report
    from cfsim.io.errors import CfsimParseError, PrometheusAPIError
    from cfsim.progress import Progress

    fmt = chosen_format(args)
    refuse_mixed_sources(args, args.exports, "export folders")
    check_emit_format(args.emit, fmt)
    _check_numbers(args)
    if args.emit == "patch" and args.no_simulate:
        # the patch carries the limit and GOMAXPROCS the simulated fixes chose: without them there is none
        raise CommandError("--emit patch needs the simulated fixes (the patch carries the limit and GOMAXPROCS "
                           "they choose): drop --no-simulate")
    from cfsim.scenario import ScenarioError, load_scenario
    from cfsim.validation.calibrate import read_params_files
    from cfsim.validation.normalise import calibration_overrides

    try:
        params = read_params_files(args.params)[0] if args.params else {}
        # a key the scenarios do not know fails here, named, before any container is read
        load_scenario("cpu-bound-threads").with_overrides(list(calibration_overrides(params).items()))
    except (OSError, ValueError, ScenarioError) as exc:   # tomllib's decode error is a ValueError
        print(f"error: --params: {exc}", file=sys.stderr)
        return 2
    from cfsim.sweep import ExecutorUnavailable, make_executor

    meta: dict = {}
    try:
        with make_executor(args.workers, args.dask) as executor, contextlib.ExitStack() as stack:
            if args.prometheus_url:
                containers, meta = load_live(args)
            else:
                containers = []
                for path in args.exports:
                    try:
                        containers += load_containers(path, include_calibration=args.include_calibration,
                                                      executor=executor)
                    except (CfsimParseError, PrometheusAPIError) as exc:   # they name the file and position
                        raise CommandError(str(exc)) from None
            if not containers:
                where = args.prometheus_url or " ".join(args.exports)
                print(f"error: {where}: no container CPU usage series found", file=sys.stderr)
                return 2
            cache = args.cache or stack.enter_context(tempfile.TemporaryDirectory(prefix="cfsim-audit-cache-"))
            with Progress(len(containers), "audit", "container", enabled=not args.no_progress, lines=True) as bar:
                result = audit(containers=containers, simulate=not args.no_simulate, duration_s=args.duration,
                               progress=bar, meta=meta, executor=executor, cache_dir=cache, params=params)
    except ExecutorUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    st = result.sim_stats
    if not args.no_progress and st.get("simulated") is not None:
        print(f"audit: {int(st['simulated'])} simulations run, {int(st['reused'])} reused, on "
              f"{st['executor']} x{st['workers']}", file=sys.stderr)
    paths = {} if args.no_report else write_report(result, args.report)
    if args.emit != "report":
        docs, comments = _objects(result, args.emit)
        if not docs:   # an empty stdout alone would not say whether anything was wrong
            print(f"audit: no {args.emit}: " + ("no finding's fix changes a workload's pod spec" if args.emit == "patch"
                                                 else "no container has usage samples for the VPA recommender"),
                  file=sys.stderr)
        if fmt == "json":
            sys.stdout.write("".join(json.dumps(d) + "\n" for d in docs))
        else:
            sys.stdout.write(dump_yaml_all(docs, comments))
        return 0
    data = summary_json(result)
    if paths:
        data["report"] = {k: str(v) for k, v in paths.items()}
    emit(Answer(data, data["findings"], lambda: _text(result, paths), "cfsim audit"), fmt)
    return 0
