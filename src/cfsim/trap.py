"""The T0-T3 VPA x GOMAXPROCS trap as a library: :func:`run_trap` (the trap, each fix, the T3
override), :func:`phases`, :func:`fix_overrides`, and the files :func:`write_csv` / :func:`plot`.
Used by ``python -m cfsim trap`` (:mod:`cfsim.commands.trap`), the notebooks and the tests.

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
from pathlib import Path
from typing import Any, Callable

from cfsim.output import json_safe

__all__ = ["run_trap", "fix_overrides", "phases", "write_csv", "plot", "DEFAULT_SCENARIO", "DEFAULT_DAYS",
           "ROW_FIELDS", "RUN_NAMES"]

DEFAULT_SCENARIO = "grab-sinktos3"
DEFAULT_DAYS = 7.0  # when the scenario has no vpa.days
ROW_FIELDS = ("t_s", "t_h", "replicas", "request_cores", "limit_cores", "gomaxprocs", "usage_cores",
              "throughput_per_s", "arrival_per_s", "lag_s", "backlog_items", "throttled_ratio",
              "vpa_target_cores", "vpa_lower_cores", "vpa_upper_cores", "updates")
#: the long-horizon runs of a trap report, in the order they run
RUN_NAMES = ("trap", "integer_cpu", "min_allowed_2", "go1.25", "limit_above_request", "t3_manual_override")
#: ``progress(stage, done, total)``: a stage is one of :data:`RUN_NAMES` or ``"surface"`` (event-engine
#: points of the pod response surface, measured once per configuration and cached)
ProgressFn = Callable[[str, int, int], None]


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


def run_trap(scenario: str = DEFAULT_SCENARIO, overrides: list[str] | None = None, response_mode: str = "auto",
             limit_ratio: float = 2.0, with_t3: bool = True, progress: ProgressFn | None = None) -> dict[str, Any]:
    """Run the trap, the four fixes and (optionally) the T3 override; return plain data + results.

    ``progress(stage, done, total)`` is told after each long-horizon run (``stage`` its name,
    ``total`` the runs planned) and while a response surface is measured (``stage == "surface"``).
    """
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

    fixes_planned = fix_overrides(sc, limit_ratio)
    planned = 1 + len(fixes_planned) + (1 if with_t3 else 0)
    done = 0

    def tell(stage: str) -> None:
        nonlocal done
        done += 1
        if progress:
            progress(stage, done, planned)

    def surface(points_done: int, points_total: int) -> None:
        if progress:
            progress("surface", points_done, points_total)

    def respond(s):  # the engine's response (a surface is measured with the event engine once, then cached)
        return response_for(s, response_mode, demand, simulate_fn=simulate, progress=surface)

    base = run_longrun(sc, respond(sc))
    tell("trap")
    out: dict[str, Any] = {
        "scenario": sc.source, "overrides": sc.overrides, "response": base.response,
        "demand_cores_per_replica": demand, "gomaxprocs_policy": sc["go.gomaxprocs"],
        "days": base.rows[-1]["t_s"] / 86400.0 if base.rows else 0.0,
        "timeline": base.timeline, "final": base.final, "events": base.events,
    }
    results = {"trap": base}
    fixes: dict[str, Any] = {}
    for name, ovr in fixes_planned.items():
        fsc = sc.with_overrides(ovr)
        res = run_longrun(fsc, respond(fsc))
        tell(name)
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
    if with_t3:
        tell("t3_manual_override")  # counted when skipped too (no VPA update early enough for it)
    out["phases"] = phases(base, results.get("t3_manual_override"), t3_at)
    out["wall_s"] = sum(r.wall_s for r in results.values())
    return {"data": json_safe(out), "results": results}


def write_csv(rows: list[dict], path: Path) -> None:
    """One long-horizon run's rows as CSV (:data:`ROW_FIELDS`; None as an empty cell)."""
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(ROW_FIELDS), extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in ROW_FIELDS})


def plot(results: dict[str, Any], path: Path, title: str) -> None:
    """Request, GOMAXPROCS, usage and lag of every run over the simulated days, as a PNG."""
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
            axes[0].plot(t, [r["vpa_target_cores"] for r in rows], color="grey", lw=0.8, ls=":",
                         label="trap: VPA target")
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
