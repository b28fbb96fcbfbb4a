"""``python -m cfsim vpa replay USAGE | --prometheus-url URL [--set vpa.key=value] [--format F] [--emit E]``.

Feeds one workload container's CPU usage history (CSV ``timestamp,cpu_cores[,pod]``, a Prometheus query_range JSON
export, or a live Prometheus: cAdvisor's ``container_cpu_usage_seconds_total`` of the selected
containers, one metrics-server-like reading per ``--step``) through the VPA recommender exactly as
upstream computes it and prints target, lower and upper bound over time, in integer millicores as
the recommender writes them to the VPA status (``--emit vpa-status``: the status block itself).
"""
from __future__ import annotations

import math
import sys
from datetime import datetime, timezone

from cfsim.commands import CommandError
from cfsim.commands._prometheus import (add_prometheus_arguments, check_connection_numbers, live_source,
                                        one_line_errors, refuse_mixed_sources)
from cfsim.output import Answer, add_format_argument, chosen_format, dump_yaml_all, emit


def add_parser(sub) -> None:
    p = sub.add_parser("vpa", help="VPA tools: replay a usage history through the recommender")
    vsub = p.add_subparsers(dest="vpa_command", metavar="VPA_COMMAND")
    r = vsub.add_parser("replay", help="what VPA would recommend for a usage history (a file or a live Prometheus)")
    r.add_argument("usage", nargs="?",
                   help="one workload container's usage: CSV (timestamp,cpu_cores[,pod]) or a Prometheus query_range "
                        "JSON of container_cpu_usage_seconds_total (or a rate of it); or --prometheus-url")
    r.add_argument("--set", action="append", default=[], metavar="vpa.KEY=VALUE",
                   help="recommender settings from the [vpa] section, e.g. --set vpa.integer_cpu=true, "
                        "vpa.round_cpu_millicores=50, vpa.min_allowed_cores=2, vpa.half_life_s=3600, "
                        "vpa.sample_interval_s=60 (the loop)")
    add_format_argument(r, 'the replay (json/yaml: {"recommendations": [...], "final": {...}}; csv/markdown/html: '
                           'the recommendations)')
    r.add_argument("--emit", choices=("report", "vpa-status"), default="report",
                   help="vpa-status: only the VPA's status block for the final recommendation (yaml or json)")
    r.add_argument("--container-name", metavar="NAME",
                   help="containerName in the status block (default: the live container's name, else 'container')")
    r.add_argument("--metrics-window", type=float, default=None, metavar="S",
                   help="treat the input as a fine usage trace and average it into metrics-server windows of S "
                        "seconds first (metrics-server's --metric-resolution: 15 in the standard manifests, 60 "
                        "its default, at least 10); default: every row already is a metrics-server reading")
    r.add_argument("--every", type=int, default=0, metavar="N",
                   help="table: print every N-th loop (default: about 48 rows)")
    r.add_argument("--no-progress", action="store_true", help="no progress bar while querying Prometheus")
    add_prometheus_arguments(r)
    r.set_defaults(func=run)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _live_series(args) -> tuple[dict[str, list[tuple[float, float]]], str]:
    """Usage of the selected containers, one workload container (namespace, container name) only."""
    from cfsim.io.live import USAGE, get_container_metrics, usage_by_container

    from cfsim.progress import Progress

    src = live_source(args)
    with Progress(None, "prometheus", "query", enabled=not args.no_progress) as bar:
        frame, meta = get_container_metrics(src.url, src.start_s, src.end_s, src.step, selection=src.selection,
                                            connection=src.connection, families=["cadvisor"], metrics=[USAGE],
                                            progress=bar)
    by_key = usage_by_container(frame, meta["step"])
    groups = sorted({(ns, c) for ns, _pod, c in by_key})
    if len(groups) > 1:
        raise CommandError(f"{meta['selector']} matches {len(groups)} containers "
                           f"({', '.join('/'.join(g) for g in groups[:6])}{' ...' if len(groups) > 6 else ''}); "
                           f"the VPA "
                           f"replays one workload container: narrow it with --namespace and --selector "
                           f"'container=\"NAME\"' (and 'pod=~\"WORKLOAD-.*\"')")
    series = {f"{ns}/{pod}/{c}": pts for (ns, pod, c), pts in by_key.items() if pts}
    if not series:
        raise CommandError(f"{meta['selector']}: fewer than two samples per series between {_iso(src.start_s)} "
                           f"and {_iso(src.end_s)}: widen the range or shorten --step")
    return series, groups[0][1]


#: metrics-server refuses a --metric-resolution below 10 s (Options.Validate in kubernetes-sigs/
#: metrics-server cmd/metrics-server/app/options/options.go), so no VPA ever reads a shorter window.
MIN_METRICS_WINDOW_S = 10.0


def _metrics_window_error(window: float | None) -> str | None:
    """Why ``--metrics-window`` cannot be a metrics-server window, or None (also when absent)."""
    if window is None:
        return None
    if not math.isfinite(window) or window < MIN_METRICS_WINDOW_S:
        return (f"--metrics-window {window:g}: must be a metrics-server --metric-resolution in seconds, at least "
                f"{MIN_METRICS_WINDOW_S:g} as metrics-server requires (15 in its standard manifests, 60 its default)")
    return None


def _beyond_histogram_warning(series: dict[str, list[tuple[float, float]]]) -> str | None:
    """A warning when usage samples lie beyond the recommender's CPU histogram (1000 cores, its last
    bucket's end in ``pkg/recommender/model/aggregations_config.go``): the VPA files them all in that
    bucket, as upstream does, and recommends about 1,170 cores however large they are. Usage that
    large is most often a unit mistake (millicores or nanocores in a ``cpu_cores`` column)."""
    from cfsim.autoscalers.vpa_histogram import CPU_HISTOGRAM_OPTIONS

    top = CPU_HISTOGRAM_OPTIONS.max_value
    over = [(v, t, k) for k, pts in series.items() for t, v in pts if v > top]
    if not over:
        return None
    value, t, key = max(over)
    return (f"{len(over)} usage sample(s) above {top:g} cores, the end of the VPA's CPU histogram (the largest "
            f"{value:g} cores at {_iso(t)}{' in ' + key if key else ''}): the VPA files them in its last "
            f"bucket; is the usage in millicores or nanocores instead of cores?")


def run(args) -> int:
    from cfsim.autoscalers.vpa_recommender import (Recommendation, config_from_scenario, metrics_server_points,
                                                   replay)
    from cfsim.io.usage import read_usage
    from cfsim.scenario import ScenarioError, load_scenario

    fmt = chosen_format(args)
    why = _metrics_window_error(args.metrics_window)   # before anything is read or queried
    if why:
        print(f"error: {why}", file=sys.stderr)
        return 2
    for item in args.set:
        if not item.strip().startswith("vpa."):
            raise ScenarioError(item.split("=")[0], "vpa replay only takes [vpa] keys (vpa.KEY=VALUE)")
    sc = load_scenario({}, args.set)
    cfg = config_from_scenario(sc.section("vpa"))
    refuse_mixed_sources(args, args.usage, "a usage file")
    check_connection_numbers(args)
    name = "container"
    if args.prometheus_url:
        with one_line_errors():
            series, name = _live_series(args)
    else:
        try:
            series, _meta = read_usage(args.usage)
        except ValueError as exc:  # UsageParseError and cfsim.io's CfsimParseError name file and position
            print(f"error: {exc}", file=sys.stderr)
            return 2
    beyond = _beyond_histogram_warning(series)
    if beyond:
        print(f"warning: {beyond}", file=sys.stderr)
    if args.metrics_window is not None:
        series = {k: metrics_server_points(v, args.metrics_window) for k, v in series.items()}
    recs = replay(series, cfg, sc["vpa.sample_interval_s"])
    final = {k: recs[-1][k] for k in ("target", "lower_bound", "upper_bound")}
    last = recs[-1]
    if args.emit == "vpa-status":
        from cfsim.advice.kubernetes import vpa_status

        status = {"status": vpa_status({args.container_name or name: Recommendation(
            last["target"], last["lower_bound"], last["upper_bound"], last["uncapped_target"])})}
        if fmt == "json":
            emit(Answer(status), "json")
        elif fmt in ("yaml", "table"):
            sys.stdout.write(dump_yaml_all([status], [f"the VPA status after {last['samples']} samples; apply with "
                                                      f"kubectl patch vpa NAME --subresource status --type merge "
                                                      f"--patch-file /dev/stdin"]))
        else:
            print(f"error: --emit vpa-status prints yaml or json, not {fmt}", file=sys.stderr)
            return 2
        return 0
    rows = [{"timestamp": _iso(r["timestamp_s"]), **r} for r in recs]
    data = {"recommendations": rows, "final": final, "containers": sorted(series), "unit": "millicores"}

    def text() -> str:
        every = args.every if args.every > 0 else max(1, len(recs) // 48)
        lines = [f"{'time (UTC)':<21} {'samples':>8} {'target':>9} {'lower':>9} {'upper':>15}   [millicores]"]
        for i, r in enumerate(recs):
            if i % every == 0 or i == len(recs) - 1:
                up = r["upper_bound"]
                up_s = "1e14 (no conf.)" if up >= 10 ** 14 else str(up)
                lines.append(f"{_iso(r['timestamp_s']):<21} {r['samples']:>8} {r['target']:>9} "
                             f"{r['lower_bound']:>9} {up_s:>15}")
        lines.append(f"final: target {final['target']}m, lower {final['lower_bound']}m, upper {final['upper_bound']}m "
                     f"({len(series)} pod(s), {last['samples']} samples)")
        return "\n".join(lines)

    emit(Answer(data, rows, text, "cfsim vpa replay"), fmt)
    return 0
