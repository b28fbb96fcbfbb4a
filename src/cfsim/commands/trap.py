"""``python -m cfsim trap [SCENARIO] [--set k=v] [--json] [--out DIR]``: the T0-T3 VPA/GOMAXPROCS trap.

Runs the long-horizon engine (:mod:`cfsim.engine.longrun`) on a pipeline with the VPA on (default
the built-in ``grab-sinktos3``: needs about 1.7 cores per replica, automaxprocs), then the same run
with each fix: the integer-CPU post-processor, ``minAllowed = 2`` cores, the go1.25 GOMAXPROCS
policy, and a CPU limit above the request. Nothing is tuned to the story: the request the VPA
settles at comes out of the upstream recommender rules.

Phases (cfsim's names for the rows of Grab's table; the story's post has no formal definition):
T0 the start (VPA's low initial allocation), T1 the first VPA update that reaches one core, T2 the
last VPA update (the settled allocation), T3 a manual ``minAllowed = 2`` override (the story's
"2 core (manual override)") applied one day after T2 in a separate run.
"""
from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path
from typing import Any

from cfsim.commands._jsonsafe import json_safe

DEFAULT_SCENARIO = "grab-sinktos3"
DEFAULT_DAYS = 7.0  # when the scenario has no vpa.days
ROW_FIELDS = ("t_s", "t_h", "replicas", "request_cores", "limit_cores", "gomaxprocs", "usage_cores",
              "throughput_per_s", "arrival_per_s", "lag_s", "backlog_items", "throttled_ratio",
              "vpa_target_cores", "vpa_lower_cores", "vpa_upper_cores", "updates")


def add_parser(sub) -> None:
    p = sub.add_parser("trap", help="reproduce the T0-T3 VPA x GOMAXPROCS trap and its fixes over days")
    p.add_argument("scenario", nargs="?", default=DEFAULT_SCENARIO,
                   help=f"a scenario TOML file or built-in name with a [vpa] section (default {DEFAULT_SCENARIO})")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override any scenario key, e.g. --set vpa.integer_cpu=true --set vpa.days=3")
    p.add_argument("--json", action="store_true",
                   help='print {"timeline", "final", "phases", "fixes": {name: {"timeline", "final"}}, ...}')
    p.add_argument("--out", metavar="DIR", default="out/trap",
                   help="write trap.png, trap.csv, trap_<fix>.csv and trap.json here (default out/trap)")
    p.add_argument("--no-files", action="store_true", help="write no files")
    p.add_argument("--response", choices=("auto", "analytic", "surface"), default="auto",
                   help="pod response: event-engine surface (cached) or the analytic fallback (default auto)")
    p.add_argument("--limit-ratio", type=float, default=2.0,
                   help="limit/request of the 'limit above the request' fix (default 2)")
    p.add_argument("--no-t3", action="store_true", help="skip the T3 manual-override run")
    p.add_argument("--table-every-h", type=float, default=12.0, help="table row interval [h] (default 12)")
    p.set_defaults(func=run)


def fix_overrides(sc, limit_ratio: float = 2.0) -> dict[str, list[tuple[str, Any]]]:
    """The four fixes as scenario overrides on top of ``sc``."""
    go = [("go.gomaxprocs", "go1.25")]
    major, minor = (int(x) for x in str(sc["go.version"]).split(".")[:2])
    if (major, minor) < (1, 25):
        go.append(("go.version", "1.25"))  # containermaxprocs needs go.mod >= 1.25
    return {
        "integer_cpu": [("vpa.integer_cpu", True)],
        "min_allowed_2": [("vpa.min_allowed_cores", 2.0)],
        "go1.25": go,
        "limit_above_request": [("vpa.limit_to_request_ratio", float(limit_ratio))],
    }


def _row_at(rows: list[dict], t_s: float) -> dict:
    for r in rows:
        if r["t_s"] >= t_s - 1e-9:
            return r
    return rows[-1]


def phases(result, t3_result=None, t3_at_s: float | None = None) -> dict[str, dict]:
    """T0..T2 (and T3 when given): when each began and the state inside it.

    The state is taken one hour into the phase, or just before the next VPA update if that comes
    sooner (so T0 shows the initial allocation before the first update).
    """
    rows = result.rows
    ev = [e for e in result.events if e["kind"] in ("evict", "resize")]
    out: dict[str, dict] = {}

    def snap(name: str, t: float, what: str, src_rows: list[dict], src_ev: list[dict]) -> None:
        # the next rollout: an update more than 10 min later (the other replicas of the same
        # rollout follow within minutes and belong to this phase)
        nxt = next((e["t_s"] for e in src_ev if e["t_s"] > t + 600.0), math.inf)
        at = min(t + 3600.0, nxt - 60.0)
        cand = [r for r in src_rows if r["t_s"] <= at + 1e-9]
        r = cand[-1] if cand else src_rows[0]
        util = (r["usage_cores"] / r["request_cores"]) if r["request_cores"] else None
        out[name] = {"t_s": t, "t_h": t / 3600.0, "what": what, "state_at_s": r["t_s"],
                     "request_cores": r["request_cores"], "limit_cores": r["limit_cores"],
                     "gomaxprocs": r["gomaxprocs"], "usage_cores": r["usage_cores"],
                     "utilization_of_request": util, "throughput_per_s": r["throughput_per_s"],
                     "lag_s": r["lag_s"], "vpa_target_cores": r["vpa_target_cores"]}

    if not rows:
        return out
    snap("T0", 0.0, "start: the VPA's initial allocation", rows, ev)
    t1 = next((e for e in ev if e["to"][0] is not None and e["to"][0] >= 1000), None)
    if t1 is not None:
        snap("T1", t1["t_s"], "first VPA update reaching one core", rows, ev)
    if ev:
        snap("T2", ev[-1]["t_s"], "last VPA update: the settled allocation", rows, ev)
    if t3_result is not None and t3_at_s is not None:
        ev3 = [e for e in t3_result.events if e["kind"] in ("evict", "resize", "intervention")]
        # T3's state: one hour after the override's last re-creation (both replicas updated)
        after = [e["t_s"] for e in ev3 if e["t_s"] >= t3_at_s]
        snap("T3", t3_at_s, "manual override: minAllowed = 2 cores", t3_result.rows,
             [e for e in ev3 if e["t_s"] > max(after or [t3_at_s]) + 1e-9])
    return out


def _progress(done: int, total: int) -> None:
    """One stderr line per 10 % while a response surface is measured with the event engine."""
    step = max(1, total // 10)
    if done == 1 or done % step == 0 or done == total:
        print(f"measuring the pod response surface with the event engine: {done}/{total} points "
              f"(cached afterwards)", file=sys.stderr, flush=True)


def run_trap(scenario: str = DEFAULT_SCENARIO, overrides: list[str] | None = None, response_mode: str = "auto",
             limit_ratio: float = 2.0, with_t3: bool = True) -> dict[str, Any]:
    """Run the trap, the four fixes and (optionally) the T3 override; return plain data + results."""
    from cfsim.engine.longrun import nominal_demand_cores, run_longrun
    from cfsim.engine.response import response_for
    from cfsim.scenario import load_scenario
    from cfsim.simulation import simulate

    sc = load_scenario(scenario, list(overrides or []))
    if not sc["vpa.enabled"]:
        sc = sc.with_overrides([("vpa.enabled", True)])
    if sc["vpa.days"] is None:  # run.duration_s is the event engine's seconds; the trap needs days
        sc = sc.with_overrides([("vpa.days", DEFAULT_DAYS)])
    demand = nominal_demand_cores(sc)

    def respond(s):  # the engine's response, with a progress line on stderr while a surface is measured
        return response_for(s, response_mode, demand, simulate_fn=simulate, progress=_progress)

    base = run_longrun(sc, respond(sc))
    out: dict[str, Any] = {
        "scenario": sc.source, "overrides": sc.overrides, "response": base.response,
        "demand_cores_per_replica": demand, "gomaxprocs_policy": sc["go.gomaxprocs"], "days": base.rows[-1]["t_s"] / 86400.0 if base.rows else 0.0,
        "timeline": base.timeline, "final": base.final, "events": base.events,
    }
    results = {"trap": base}
    fixes: dict[str, Any] = {}
    for name, ovr in fix_overrides(sc, limit_ratio).items():
        fsc = sc.with_overrides(ovr)
        res = run_longrun(fsc, respond(fsc))
        results[name] = res
        fixes[name] = {"overrides": [f"{k}={json.dumps(v)}" for k, v in ovr], "response": res.response,
                       "timeline": res.timeline, "final": res.final, "events": res.events}
    out["fixes"] = fixes
    t3_at = None
    updates = [e for e in base.events if e["kind"] in ("evict", "resize")]
    if with_t3 and updates and base.rows:
        cand = updates[-1]["t_s"] + 86400.0
        if cand < 0.75 * base.rows[-1]["t_s"]:
            t3_at = cand
            res = run_longrun(sc, respond(sc), interventions=[(t3_at, "vpa.min_allowed_cores", 2.0)])
            results["t3_manual_override"] = res
            out["t3_manual_override"] = {"at_s": t3_at, "timeline": res.timeline, "final": res.final,
                                         "events": res.events}
    out["phases"] = phases(base, results.get("t3_manual_override"), t3_at)
    out["wall_s"] = sum(r.wall_s for r in results.values())
    return {"data": json_safe(out), "results": results}


# ----------------------------------------------------------------------------- output

def _fmt_lag(s: float | None) -> str:
    if s is None or not math.isfinite(s):
        return "-"
    if s < 120:
        return f"{s:.0f}s"
    if s < 7200:
        return f"{s / 60:.0f}m"
    if s < 172800:
        return f"{s / 3600:.1f}h"
    return f"{s / 86400:.1f}d"


def _fmt_t(t_s: float) -> str:
    d, rem = divmod(int(round(t_s)), 86400)
    h, rem = divmod(rem, 3600)
    return f"{d}d{h:02d}h{rem // 60:02d}"


def _fmt_c(x: float | None) -> str:
    if x is None:
        return "-"
    if x >= 1e6:
        return "inf"
    return f"{x:.3f}"


def table(rows: list[dict], every_s: float, marks: dict[float, str] | None = None) -> str:
    marks = marks or {}
    head = (f"{'phase':<5} {'time':>9} {'request':>8} {'limit':>7} {'GMP':>4} {'usage':>6} {'util':>5} "
            f"{'tput/s':>8} {'lag':>7} {'target':>7} {'lower':>7} {'upper':>7}")
    lines = [head, "-" * len(head)]
    picked: list[tuple[dict, str]] = []
    next_t = 0.0
    mark_times = sorted(marks)
    for r in rows:
        label = ""
        while mark_times and r["t_s"] >= mark_times[0] - 1e-9:
            label = marks[mark_times.pop(0)]
        if label or r["t_s"] + 1e-9 >= next_t or r is rows[-1]:
            picked.append((r, label))
            if r["t_s"] + 1e-9 >= next_t:
                next_t = (math.floor(r["t_s"] / every_s + 1e-9) + 1) * every_s
    for r, label in picked:
        util = f"{100 * r['usage_cores'] / r['request_cores']:.0f}%" if r["request_cores"] else "-"
        lines.append(f"{label:<5} {_fmt_t(r['t_s']):>9} {_fmt_c(r['request_cores']):>8} {_fmt_c(r['limit_cores']):>7} "
                     f"{r['gomaxprocs']:>4} {r['usage_cores']:>6.3f} {util:>5} {r['throughput_per_s']:>8.0f} "
                     f"{_fmt_lag(r['lag_s']):>7} {_fmt_c(r['vpa_target_cores']):>7} {_fmt_c(r['vpa_lower_cores']):>7} "
                     f"{_fmt_c(r['vpa_upper_cores']):>7}")
    return "\n".join(lines)


def _final_line(name: str, f: dict) -> str:
    return (f"{name:<22} request {_fmt_c(f['request_cores'])}  limit {_fmt_c(f['limit_cores'])}  "
            f"GOMAXPROCS {f['gomaxprocs']}  usage {f['usage_cores']:.3f}  tput {f['throughput_per_s']:.0f}/s  "
            f"lag {_fmt_lag(f['lag_s'])} ({'growing' if f['lag_growing'] else 'not growing'})")


def write_csv(rows: list[dict], path: Path) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(ROW_FIELDS), extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in ROW_FIELDS})


def plot(results: dict[str, Any], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(4, 1, figsize=(11, 12), sharex=True)
    colours = {"trap": "black", "integer_cpu": "tab:blue", "min_allowed_2": "tab:green", "go1.25": "tab:orange",
               "limit_above_request": "tab:purple", "t3_manual_override": "tab:red"}
    for name, res in results.items():
        rows = res.rows
        t = [r["t_s"] / 86400.0 for r in rows]
        kw = {"color": colours.get(name, None), "lw": 2.2 if name == "trap" else 1.2, "label": name,
              "ls": "--" if name == "t3_manual_override" else "-"}
        axes[0].plot(t, [r["request_cores"] for r in rows], **kw)
        if name == "trap":
            axes[0].plot(t, [r["vpa_target_cores"] for r in rows], color="grey", lw=0.8, ls=":", label="trap: VPA target")
            axes[0].plot(t, [r["limit_cores"] for r in rows], color="grey", lw=0.8, ls="-.", label="trap: limit")
        axes[1].step(t, [r["gomaxprocs"] for r in rows], where="post", **kw)
        axes[2].plot(t, [r["usage_cores"] for r in rows], **kw)
        axes[3].plot(t, [r["lag_s"] / 3600.0 if math.isfinite(r["lag_s"]) else float("nan") for r in rows], **kw)
    axes[0].set_ylabel("CPU request [cores]")
    axes[1].set_ylabel("GOMAXPROCS (min over pods)")
    axes[2].set_ylabel("usage per pod [cores]")
    axes[3].set_ylabel("consumer lag [h]")
    axes[3].set_xlabel("simulated time [days]")
    axes[0].legend(fontsize=8, ncol=3)
    axes[0].set_title(title)
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(args) -> int:
    report = run_trap(args.scenario, args.set, args.response, args.limit_ratio, with_t3=not args.no_t3)
    data, results = report["data"], report["results"]
    files: dict[str, str] = {}
    if not args.no_files and args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        write_csv(results["trap"].rows, out / "trap.csv")
        files["csv"] = str(out / "trap.csv")
        for name, res in results.items():
            if name != "trap":
                write_csv(res.rows, out / f"trap_{name}.csv")
        plot(results, out / "trap.png", f"{data['scenario']}: VPA x GOMAXPROCS trap and fixes")
        files["png"] = str(out / "trap.png")
        data["files"] = files
        (out / "trap.json").write_text(json.dumps(data, indent=1) + "\n")
        files["json"] = str(out / "trap.json")
    if args.json:
        json.dump(data, sys.stdout)
        sys.stdout.write("\n")
        return 0
    print(f"scenario {data['scenario']}  demand {data['demand_cores_per_replica']:.3f} cores/replica  "
          f"{data['days']:.2f} days  GOMAXPROCS {data['gomaxprocs_policy']}  response: {data['response']}")
    marks = {p["state_at_s"]: name for name, p in data["phases"].items() if name != "T3"}
    print(table(results["trap"].rows, args.table_every_h * 3600.0, marks))
    print("\nphases (state one hour in, or just before the next rollout):")
    for name, p in data["phases"].items():
        util = p["utilization_of_request"]
        print(f"  {name} at {_fmt_t(p['t_s'])}: request {_fmt_c(p['request_cores'])}, GOMAXPROCS {p['gomaxprocs']}, "
              f"usage {p['usage_cores']:.3f} ({'-' if util is None else f'{100 * util:.0f}%'} of request), "
              f"lag {_fmt_lag(p['lag_s'])}  - {p['what']}")
    print("\nfinal state:")
    print("  " + _final_line("trap", data["final"]))
    for name, fx in data["fixes"].items():
        print("  " + _final_line(name, fx["final"]) + f"   [{', '.join(fx['overrides'])}]")
    if "t3_manual_override" in data:
        print("  " + _final_line("T3 manual override", data["t3_manual_override"]["final"]))
    for name, res in results.items():
        if name not in ("trap", "t3_manual_override"):
            print(f"\n{name}:")
            print(table(res.rows, 24 * 3600.0))
    if files:
        print("\nwrote " + ", ".join(files.values()))
    return 0
