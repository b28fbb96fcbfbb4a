"""``python -m cfsim recommend SCENARIO --slo 'lag_final_s<=60' [--slo ...] [--format F] [--emit E]``,
``python -m cfsim recommend --from data/lab/<grid>/<run> --slo 'throughput_per_s>=4000'`` and
``python -m cfsim recommend --prometheus-url URL --namespace NS --slo 'throttled_ratio<=0.05'``.

The cheapest (CPU limit, GOMAXPROCS policy or value, optional CFS burst) meeting every SLO over
the scenario's load profile, re-checked at pessimistic parameters; the runner-up; the cost of each
SLO alone; and what the stock VPA and krr ``simple``/``simple_limit`` would choose for the same
usage, each simulated. With ``--prometheus-url`` the peers read the observed usage, and each
selected workload container gets its answer (on a proxy workload estimated from its series, or on
SCENARIO when one is given), with the VPA status block and a strategic-merge patch
(``--emit patch | vpa-status``).
"""
from __future__ import annotations

import math
import sys

from cfsim.commands import CommandError
from cfsim.commands._params import read_cli_params, set_keys
from cfsim.commands._prometheus import (add_prometheus_arguments, check_connection_numbers, check_emit_format,
                                        given_live_options, load_live)
from cfsim.output import Answer, add_format_argument, chosen_format, dump_yaml, dump_yaml_all, emit, json_safe


def add_parser(sub) -> None:
    p = sub.add_parser("recommend", help="cheapest CPU limit + GOMAXPROCS (+ burst) meeting SLOs; VPA/krr next to it")
    p.add_argument("scenario", nargs="?", help="a scenario TOML file or a built-in name")
    p.add_argument("--from", dest="from_run", metavar="RUN_DIR",
                   help="start from a lab run folder's scenario, with its grid's calibration")
    p.add_argument("--slo", action="append", default=[], metavar="KEY<=VALUE",
                   help="an objective over the run summary, e.g. 'lag_final_s<=60', 'latency_p99_s<=0.05', "
                        "'throughput_per_s>=4000' (repeat for several)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="override a scenario key")
    p.add_argument("--params", metavar="TOML", action="append", default=[],
                   help="parameters from a TOML file's [params] table and their sigma for the safety margin (a fit "
                        "from `cfsim calibrate --out`, a host measured with `cfsim lab wakeup|tlb|switch --out`); "
                        "repeat for several; --set wins over a file")
    p.add_argument("--gomaxprocs", metavar="LIST",
                   help="GOMAXPROCS choices to search, comma-separated (default: the scenario's, go1.25, "
                        "automaxprocs, ceil = explicit ceil(limit)); also floor or integers")
    p.add_argument("--no-burst", action="store_true", help="do not consider a CFS burst")
    p.add_argument("--coarse-step", type=float, default=0.25, help="coarse limit step [cores] (default 0.25)")
    p.add_argument("--fine-step", type=float, default=0.05, help="fine limit step [cores] (default 0.05)")
    p.add_argument("--max-limit", type=float, help="largest limit searched [cores] (default host.cpus)")
    p.add_argument("--duration", type=float, metavar="S",
                   help="simulate S seconds per candidate (default: the scenario's)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="processes for the simulations (default: all cores; 0: this process)")
    p.add_argument("--dask", metavar="ADDRESS", help="simulate on a Dask cluster (tcp://scheduler:8786, or 'local')")
    p.add_argument("--no-peers", action="store_true", help="skip VPA/krr")
    p.add_argument("--vpa-rounds", type=int, default=3, help="re-apply VPA to its own consequence up to N times")
    p.add_argument("--observed-usage", action="store_true",
                   help="with --from: the peers read the lab run's real usage instead of the simulated one")
    add_format_argument(p, "the recommendation (json/yaml: the whole report; csv/markdown/html: one row per "
                           "recommended container)")
    p.add_argument("--emit", choices=("report", "patch", "vpa-status"), default="report",
                   help="patch: a patch for `kubectl patch --type strategic` (yaml; json: one object per line); "
                        "vpa-status: the stock VPA's status block for the usage")
    p.add_argument("--workload", metavar="KIND/NAME",
                   help="the object the patch is for, e.g. deployment/api (live: from kube-state-metrics)")
    p.add_argument("--container", metavar="NAME", help="the container the patch is for (live: from cAdvisor)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_prometheus_arguments(p)
    p.set_defaults(func=run)


KINDS = {"deployment": "Deployment", "deploy": "Deployment", "statefulset": "StatefulSet", "sts": "StatefulSet",
         "daemonset": "DaemonSet", "ds": "DaemonSet", "pod": "Pod", "replicaset": "ReplicaSet", "rs": "ReplicaSet"}


def _workload(text: str | None) -> tuple[str, str] | None:
    if not text:
        return None
    kind, sep, name = text.partition("/")
    if not sep or kind.lower() not in KINDS or not name:
        raise CommandError(f"--workload {text!r}: expected KIND/NAME, e.g. deployment/api (kinds: "
                           f"{', '.join(sorted(set(KINDS.values())))})")
    return KINDS[kind.lower()], name


def _row(name: str, rep, k8s: dict | None) -> dict:
    w, cur = rep.result.winner, rep.current
    vpa = next((p for p in rep.peers if p.name == "vpa"), None)
    return {"target": name, "current_limit_cores": rep.scenario["cgroup.cpu_limit"],
            "current_gomaxprocs": cur.gomaxprocs,
            "current_meets_all": cur.met,
            "recommended_limit_cores": w.candidate.limit if w else None,
            "recommended_gomaxprocs": None if w is None else w.candidate.gomaxprocs,
            "effective_gomaxprocs": None if w is None else w.gomaxprocs,
            "burst_us": None if w is None else w.candidate.burst_us,
            "vpa_request_cores": None if vpa is None else vpa.request_cores,
            "vpa_meets_all": None if vpa is None else vpa.met,
            "patch_command": None if not k8s else k8s.get("command"), "simulations": rep.simulations}


def _k8s_text(k8s: dict) -> str:
    lines = []
    if k8s.get("patch") is not None:
        lines.append("patch (" + (k8s["command"] or "kubectl patch") + "):")
        lines += ["  # " + n for n in k8s.get("notes", [])]
        lines += ["  " + x for x in dump_yaml(k8s["patch"]).splitlines()]
    if k8s.get("vpa_status") is not None:
        recs = k8s["vpa_status"]["recommendation"]["containerRecommendations"][0]
        lines.append(f"the stock VPA would write: target {recs['target']['cpu']}, lower {recs['lowerBound']['cpu']}, "
                     f"upper {recs['upperBound']['cpu']}")
    return "\n".join(lines)


def run(args) -> int:
    from cfsim.advice.recommend import format_report, from_lab_run, kubernetes_answer, recommend
    from cfsim.advice.search import SearchOptions, read_uncertainty_files, uncertainty_for
    from cfsim.advice.slo import SLOError, parse_slos
    from cfsim.progress import Progress
    from cfsim.scenario import load_scenario

    fmt = chosen_format(args)
    try:
        slos = parse_slos(args.slo)
    except SLOError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for opt, v in (("--coarse-step", args.coarse_step), ("--fine-step", args.fine_step),
                   ("--max-limit", args.max_limit), ("--duration", args.duration)):
        if v is not None and not (math.isfinite(v) and v > 0):
            print(f"error: {opt} must be a number > 0 (got {v:g})", file=sys.stderr)
            return 2
    check_connection_numbers(args)
    if args.vpa_rounds < 1:   # one round is the VPA's own choice; each further one re-applies it
        print(f"error: --vpa-rounds must be >= 1 (got {args.vpa_rounds})", file=sys.stderr)
        return 2
    try:
        # a missing file, a key no scenario knows or a bad sigma, named before any search
        read_cli_params(args.params)
        read_uncertainty_files(args.params)
    except (OSError, ValueError) as exc:   # tomllib's decode error and ScenarioError are ValueErrors
        print(f"error: --params: {exc}", file=sys.stderr)
        return 2
    given = [x for x in (args.from_run, args.prometheus_url) if x]
    if len(given) > 1 or (not given and not args.scenario) or (args.from_run and args.scenario):
        print("error: give a scenario, --from RUN_DIR, or --prometheus-url URL (with or without a scenario)",
              file=sys.stderr)
        return 2
    check_emit_format(args.emit, fmt)
    if args.observed_usage and not args.from_run:
        print("error: --observed-usage needs --from RUN_DIR", file=sys.stderr)
        return 2
    live_only = [o for o in given_live_options(args) if o != "--namespace"]
    if live_only and not args.prometheus_url:
        print(f"error: {', '.join(live_only)} only apply with --prometheus-url", file=sys.stderr)
        return 2
    workload = _workload(args.workload)
    kinds = [k.strip() for k in args.gomaxprocs.split(",") if k.strip()] if args.gomaxprocs else None
    # (name, scenario, uncertainty, source, history, container, workload, namespace, request_now_m)
    jobs: list[tuple] = []
    if args.prometheus_url:
        from cfsim.advice.recommend import live_scenario, live_targets

        containers, meta = load_live(args)
        targets = live_targets(containers)
        if args.container:
            targets = [t for t in targets if t.container == args.container]
        if args.scenario and len(targets) != 1:
            print(f"error: a scenario describes one workload container; the selection has {len(targets)} "
                  f"({', '.join(t.name for t in targets[:6])}): narrow it with --namespace/--selector/--container",
                  file=sys.stderr)
            return 2
        if not targets:
            print("error: no container left to recommend for", file=sys.stderr)
            return 2
        for t in targets:
            if args.scenario:
                sc = load_scenario(args.scenario, args.set)
                how = str(args.scenario)
            else:
                sc, how = live_scenario(t, args.duration or 20.0)
                if args.set:
                    sc = sc.with_overrides(list(args.set))
            unc = uncertainty_for(sc, args.params, keep=set_keys(args.set))
            jobs.append((t.name, sc, unc, f"{meta['source']} {t.name}: {how}", t.history,
                         args.container or t.container, workload or t.workload, t.namespace, t.request_m))
    elif args.from_run:
        sc, unc, source = from_lab_run(args.from_run, args.params, args.set)
        history = None
        if args.observed_usage:
            from cfsim.advice.recommend import observed_history

            history = observed_history(args.from_run)
        jobs.append((source, sc, unc, source, history, args.container, workload, args.namespace, None))
    else:
        sc = load_scenario(args.scenario, args.set)
        unc = uncertainty_for(sc, args.params, keep=set_keys(args.set))
        jobs.append((str(args.scenario), sc, unc, str(args.scenario), None,
                     args.container, workload, args.namespace, None))

    from cfsim.overheads.accuracy import accuracy_lines
    from cfsim.overheads.report import band_lines, recommend_notes

    if args.workers is not None and args.workers < 0:
        print(f"error: --workers must be >= 0 (got {args.workers})", file=sys.stderr)
        return 2
    from cfsim.sweep import ExecutorUnavailable, make_executor

    answers, overheads = [], {}
    try:
        executor = make_executor(args.workers, args.dask)
        with executor:   # one pool for every search of this command
            for name, sc, unc, source, history, container, wl, ns, req_m in jobs:
                opts = SearchOptions(coarse_step=args.coarse_step, fine_step=args.fine_step,
                                     max_limit=args.max_limit, gomaxprocs=kinds, burst=not args.no_burst,
                                     duration_s=args.duration, executor=executor)
                try:
                    with Progress(None, f"recommend {name}" if len(jobs) > 1 else "recommend", "simulation",
                                  enabled=not args.no_progress, lines=True) as bar:
                        opts.progress = lambda n, bar=bar: bar.advance(n - bar.done)
                        rep = recommend(sc, slos, unc, opts, peers=not args.no_peers, vpa_rounds=args.vpa_rounds,
                                        source=source, history=history)
                except ValueError as exc:
                    if type(exc).__name__ == "ScenarioError":
                        raise
                    print(f"error: {exc}", file=sys.stderr)
                    return 2
                k8s = kubernetes_answer(rep, container, wl, ns, req_m) if (container or args.prometheus_url) else None
                answers.append((name, rep, k8s))
                overheads[name] = recommend_notes(sc, rep)   # the band and what lies outside our coverage
    except ExecutorUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    if args.emit != "report":
        if any(k is None for _, _, k in answers):
            print(f"error: --emit {args.emit} needs --container NAME (the container to patch) without "
                  f"--prometheus-url", file=sys.stderr)
            return 2
        key = "patch" if args.emit == "patch" else "vpa_status"
        docs = [(k[key] if key == "patch" else {"status": k[key]}) for _, _, k in answers if k[key] is not None]
        notes = ["\n".join([name, *(k["notes"] if key == "patch" else []),
                            k["command"] if key == "patch" else "apply with: kubectl patch vpa NAME --subresource "
                                                                "status --type merge --patch-file /dev/stdin"])
                 for name, _, k in answers if k[key] is not None]
        if fmt == "json":
            import json

            sys.stdout.write("".join(json.dumps(json_safe(d)) + "\n" for d in docs))
        else:
            sys.stdout.write(dump_yaml_all(docs, notes))
        return 0 if all(r.result.winner is not None for _, r, _ in answers) else 1

    def as_dict(name, rep, k8s) -> dict:
        d = json_safe({**rep.as_dict(), **overheads[name]})
        if k8s is not None:
            d["kubernetes"] = k8s
        return d

    def overheads_text(name, rep) -> str:
        win = rep.result.winner
        lines = band_lines(overheads[name]["band"], getattr(win, "summary", {}) or {})
        lines += [f"outside what we cover: {t}" for t in overheads[name]["coverage"]]
        lines += accuracy_lines(overheads[name].get("lab_accuracy"), getattr(win, "summary", None))
        return "".join("\n" + line for line in lines)

    if args.prometheus_url:
        data = {"targets": [{"name": n, **as_dict(n, r, k)} for n, r, k in answers]}
    else:
        data = as_dict(*answers[0])
    rows = [_row(n, r, k) for n, r, k in answers]
    text = (lambda: "\n\n".join(f"== {n}\n" * (len(answers) > 1 or bool(args.prometheus_url)) + format_report(r)
                                 + overheads_text(n, r) + ("\n" + _k8s_text(k) if k else "") for n, r, k in answers))
    emit(Answer(data, rows, text, "cfsim recommend"), fmt)
    return 0 if all(r.result.winner is not None for _, r, _ in answers) else 1
