"""GC and memory validation by regime (issue 19): which memory rule decides a run, errors of the
GC/memory metrics per regime, the OOM confusion table and the death-spiral ratio.

The regime is read from the scenario alone (what a user knows before the run), with the runtime's
own rules (``src/runtime/mgcpacer.go``):

- ``gogc``: no GOMEMLIMIT and no container memory limit near the heap: the GOGC goal
  (``(*gcControllerState).heapGoalInternal``: marked heap x (1 + GOGC/100)) paces the GC;
- ``gomemlimit``: a GOMEMLIMIT (explicit, or automemlimit's ratio of the cgroup limit) below the
  GOGC goal of the live heap (or GOGC off): ``memoryLimitHeapGoal`` paces it;
- ``gomemlimit-near-live``: that GOMEMLIMIT within 1.5 x the live heap, the death-spiral band
  (the goal is barely above the marked heap, the GC CPU limiter of ``mgclimit.go`` engages);
- ``memory-limit``: a container memory limit below twice the heap's expected peak (goal), where
  the kernel's OOM kill or automemlimit's GOMEMLIMIT decides the run.
"""
from __future__ import annotations

import statistics
from typing import Any, Mapping

from cfsim.advice.memory import NEAR_OOM_FRACTION, MiB
from cfsim.lab.grid import point_of_repeat
from cfsim.validation import metrics as vm
from cfsim.validation.gcpause import pause_by_gomaxprocs

#: a GOMEMLIMIT at most this multiple of the live heap is in the death-spiral band
NEAR_LIVE = 1.5
#: a container memory limit below this multiple of the GOGC goal may bind (OOM or automemlimit)
LIMIT_BINDS = 2.0
#: the metrics reported per GC regime (the issue's goals: cycles 10 %, goal 5 %, throughput 5 %, memory 10 %)
GC_REGIME_METRICS = ("gc_cycles_per_s", "gc_heap_goal_mean_bytes", "throughput_per_s", "memory_usage_mean_bytes",
                     "gc_heap_live_bytes", "memory_max_usage_bytes", "gc_cpu_share", "gc_pause_s_per_s")
#: the scenario keys a report row keeps for the GC comparisons (the regime's inputs)
GC_SCENARIO_KEYS = ("go.live_heap_mb", "go.gogc", "go.gomemlimit_mb", "go.gomemlimit_policy", "go.automemlimit_ratio")
#: issue 19's goal for the death spiral: the model's throughput ratio within this fraction of the lab's
SPIRAL_TOLERANCE = 0.20


def gomemlimit_mb(scenario: Mapping[str, Any]) -> float | None:
    """The GOMEMLIMIT the process starts with [MiB]: explicit, or automemlimit's ratio of the limit."""
    explicit = scenario.get("go.gomemlimit_mb")
    if explicit:
        return float(explicit)
    limit = scenario.get("cgroup.memory_limit_mb")
    if scenario.get("go.gomemlimit_policy") == "automemlimit" and limit:
        return float(limit) * float(scenario.get("go.automemlimit_ratio") or 0.9)
    return None


def gc_regime(scenario: Mapping[str, Any]) -> str:
    """The memory rule that paces the run's GC, from its scenario (see the module doc)."""
    live = float(scenario.get("go.live_heap_mb") or 0.0) + float(scenario.get("go.roots_mb") or 0.0)
    gogc = scenario.get("go.gogc", 100)
    gogc_goal = None if gogc is None or gogc < 0 else live * (1.0 + gogc / 100.0)
    limit = scenario.get("cgroup.memory_limit_mb")
    gml = gomemlimit_mb(scenario)
    peak = min(x for x in (gogc_goal, gml) if x is not None) if (gogc_goal or gml) else None
    if limit and (peak is None or limit < LIMIT_BINDS * peak):
        return "memory-limit"
    if gml is not None and (gogc_goal is None or gml < gogc_goal):
        return "gomemlimit-near-live" if live and gml <= NEAR_LIVE * live else "gomemlimit"
    return "gogc"


def model_oom_outcome(run: Mapping[str, Any]) -> str | None:
    """The twin's OOM outcome: ``"oom"`` (killed), ``"near"`` (survived with its memory peak at
    or above :data:`~cfsim.advice.memory.NEAR_OOM_FRACTION` of the container limit, the band
    ``audit`` flags as near an OOM kill) or ``"ok"``; None when the run records no outcome."""
    s = run["simulated"]
    killed = s.get("oom_killed")
    if killed is None:
        return None
    if killed:
        return "oom"
    limit_mb = (run.get("scenario") or {}).get("cgroup.memory_limit_mb")
    peak = s.get("memory_max_usage_bytes")
    if limit_mb and peak is not None and peak >= NEAR_OOM_FRACTION * limit_mb * MiB:
        return "near"
    return "ok"


def oom_confusion(runs: list[Mapping[str, Any]]) -> dict[str, int]:
    """Counts of (lab, model) OOM outcomes over the runs that record one. The model's outcome has
    three values (:func:`model_oom_outcome`): within 10 % of the limit the kill turns on one
    cycle's overshoot, and the lab's own repeats of such points disagree (one killed, one not), so
    the table keeps those runs apart instead of calling them either way."""
    out = {f"lab {o}, model {s}": 0 for o in ("oom", "ok") for s in ("oom", "near", "ok")}
    for r in runs:
        o, s = r["observed"].get("oom_killed"), model_oom_outcome(r)
        if o is None or s is None:
            continue
        out[f"lab {'oom' if o else 'ok'}, model {s}"] += 1
    return out


def _point(run: Mapping[str, Any]) -> str | None:
    """The grid point a run measures: a repeat's point (``repeat<k>-<point>``), else the run itself
    (None for a row without a run id)."""
    if not run.get("run"):
        return None
    grid, name = run.get("grid") or "", str(run["run"]).rsplit("/", 1)[-1]
    if run.get("role") == "repeat" and "-" in name:
        name = point_of_repeat(name)
    return f"{grid}/{name}" if grid else name


def oom_by_point(runs: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The OOM outcome per grid point run more than once: the lab's kills of its runs (a rate, since
    the runs of one point can disagree) beside the twins' outcomes (:func:`model_oom_outcome`; each
    twin has its run's seed, so they can disagree as well). Points where neither side ever came
    near a kill are left out."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for r in runs:
        point = _point(r)
        if point and r["observed"].get("oom_killed") is not None and model_oom_outcome(r) is not None:
            groups.setdefault(point, []).append(r)
    out = []
    for point, rs in groups.items():
        outcomes = _oom_outcomes(rs)
        if len(rs) >= 2 and outcomes is not None:
            out.append({"point": point, "runs": len(rs), **outcomes})
    return out


def _oom_outcomes(runs: list[Mapping[str, Any]]) -> dict[str, Any] | None:
    """``{"lab_killed": n, "model": {"oom", "near", "ok": counts}}`` of a group of runs, None when
    neither side came near a kill in any of them."""
    model = [model_oom_outcome(r) for r in runs]
    lab_kills = sum(1 for r in runs if r["observed"]["oom_killed"])
    if not lab_kills and all(m == "ok" for m in model):
        return None
    return {"lab_killed": lab_kills, "model": {k: model.count(k) for k in ("oom", "near", "ok")}}


def oom_by_design(runs: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """:func:`oom_by_point` with each design pooled over every grid that ran it (workload, CPU
    limit, GOMAXPROCS, live heap, GOGC, the GOMEMLIMIT it starts with, container memory limit):
    the lab's kills of all its runs beside the twins' outcomes. A kill near the limit turns on
    one cycle's overshoot, and a design run on several days gives the lab's kill *rate*, which a
    single grid's two or three runs only hint at. Designs that neither side came near killing are
    left out.

    >>> def run(grid, killed, model, peak):
    ...     sc = {"workload.kind": "stream", "cgroup.cpu_limit": 1.0, "go.gomaxprocs": 2, "go.live_heap_mb": 16.0,
    ...           "go.gogc": 100, "go.gomemlimit_policy": "automemlimit", "cgroup.memory_limit_mb": 56.0}
    ...     return {"grid": grid, "scenario": sc, "observed": {"oom_killed": killed},
    ...             "simulated": {"oom_killed": model, "memory_max_usage_bytes": peak * 2**20}}
    >>> rows = oom_by_design([run("a", 1.0, 0.0, 52.0), run("b", 0.0, 0.0, 52.0), run("b", 0.0, 0.0, 30.0)])
    >>> rows[0]["grids"], rows[0]["runs"], rows[0]["lab_killed"], rows[0]["model"]
    (2, 3, 1, {'oom': 0, 'near': 2, 'ok': 1})
    """
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for r in runs:
        sc = r.get("scenario") or {}
        if r["observed"].get("oom_killed") is None or model_oom_outcome(r) is None:
            continue
        gml = gomemlimit_mb(sc)
        key = (sc.get("workload.kind"), sc.get("cgroup.cpu_limit"), sc.get("go.gomaxprocs"), sc.get("go.live_heap_mb"),
               sc.get("go.gogc"), None if gml is None else round(gml, 3), sc.get("go.gomemlimit_policy"),
               sc.get("cgroup.memory_limit_mb"))
        groups.setdefault(key, []).append(r)
    out = []
    for key, rs in sorted(groups.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        outcomes = _oom_outcomes(rs)
        if outcomes is None:
            continue
        kind, cpu_limit, gomaxprocs, live, gogc, gml, policy, mem_limit = key
        out.append({"kind": kind, "cpu_limit": cpu_limit, "gomaxprocs": gomaxprocs, "live_heap_mb": live,
                    "gogc": gogc, "gomemlimit_mb": gml, "gomemlimit_policy": policy, "memory_limit_mb": mem_limit,
                    "grids": len({r.get("grid") for r in rs}), "runs": len(rs), **outcomes})
    return out


def limiter_confusion(runs: list[Mapping[str, Any]]) -> dict[str, int]:
    """Counts of (lab, model) answers to "did the GC CPU limiter turn on in the window"
    (``gc_limiter_turned_on``) over the runs where both say (neither OOM-killed): the limiter decides whether the
    assists pace a heap near its memory limit (``src/runtime/mgcmark.go``, ``gcAssistAlloc``), so
    a twin that turns it on where the runtime never did (or the reverse) runs that heap under the
    other rule.

    >>> limiter_confusion([{"observed": {"gc_limiter_turned_on": 1}, "simulated": {"gc_limiter_turned_on": 0}},
    ...                    {"observed": {"gc_limiter_turned_on": 0}, "simulated": {"gc_limiter_turned_on": 0}},
    ...                    {"observed": {}, "simulated": {"gc_limiter_turned_on": 1}}])
    {'lab on, model on': 0, 'lab on, model off': 1, 'lab off, model on': 0, 'lab off, model off': 1}
    """
    out = {f"lab {o}, model {s}": 0 for o in ("on", "off") for s in ("on", "off")}
    for r in runs:
        o, s = r["observed"].get("gc_limiter_turned_on"), r["simulated"].get("gc_limiter_turned_on")
        if o is None or s is None or r["observed"].get("oom_killed") or r["simulated"].get("oom_killed"):
            continue
        out[f"lab {'on' if o else 'off'}, model {'on' if s else 'off'}"] += 1
    return out


def naive_oom_confusion(runs: list[Mapping[str, Any]]) -> dict[str, int]:
    """Counts of (lab, naive) OOM outcomes: the naive baseline kills a run whose textbook heap goal
    is above its container limit (:func:`cfsim.validation.naive.textbook_gc`)."""
    out = {f"lab {o}, naive {s}": 0 for o in ("oom", "ok") for s in ("oom", "ok")}
    for r in runs:
        o, s = r["observed"].get("oom_killed"), (r.get("naive") or {}).get("oom_killed")
        if o is None or s is None:
            continue
        out[f"lab {'oom' if o else 'ok'}, naive {'oom' if s else 'ok'}"] += 1
    return out


def _summary(runs: list[Mapping[str, Any]], names: tuple[str, ...]) -> dict[str, Any]:
    from cfsim.validation.naive import naive_comparison

    out = {}
    for name in names:
        vals = [r["errors"][name] for r in runs if r["errors"].get(name) is not None]
        if vals:
            out[name] = {"median_abs": float(statistics.median(abs(v) for v in vals)),
                         "median": float(statistics.median(vals)), "n": len(vals),
                         "goal": vm.BY_NAME[name].goal}
            naive = naive_comparison(runs, name)
            if naive:
                out[name]["naive"] = naive
    return out


def _spiral_design(run: Mapping[str, Any]) -> tuple | None:
    """What a death-spiral pair shares: the grid (its host and calibration) and the design a
    memory setting is varied on (workload, CPU limit, GOMAXPROCS, live heap)."""
    sc = run.get("scenario") or {}
    if sc.get("go.live_heap_mb") is None:
        return None
    return (run.get("grid"), sc.get("workload.kind"), sc.get("cgroup.cpu_limit"), sc.get("go.gomaxprocs"),
            float(sc["go.live_heap_mb"]))


def spiral_ratios(runs: list[Mapping[str, Any]], tolerance: float = SPIRAL_TOLERANCE) -> dict[str, Any]:
    """The death spiral's cost in throughput, lab against model (issue 19: "the throughput drop
    from GOGC 100 to a GOMEMLIMIT near the live heap within +-20 % of the real ratio"): per grid
    and design (:func:`_spiral_design`), the mean throughput of its runs with a GOMEMLIMIT near the
    live heap (the ``gomemlimit-near-live`` regime; each GOGC and GOMEMLIMIT setting apart) over
    the mean of its runs at GOGC 100 with no GOMEMLIMIT and no memory limit that binds (regime
    ``gogc``), on each side; a pair is *within* when the model's ratio is within ``tolerance`` of
    the lab's (relative). Over the runs given (:func:`gc_by_regime` passes the held-out ones)
    that neither side OOM-killed, means over repeats (the twins' ratio is taken the same way, from
    the same runs).

    >>> def run(grid, gogc, gml, lab, model):
    ...     sc = {"workload.kind": "stream", "cgroup.cpu_limit": 1.0, "go.gomaxprocs": 2, "go.live_heap_mb": 16.0,
    ...           "go.gogc": gogc, "go.gomemlimit_mb": gml}
    ...     return {"grid": grid, "role": "point", "held_out": True, "scenario": sc,
    ...             "gc_regime": "gogc" if gml is None else "gomemlimit-near-live",
    ...             "observed": {"throughput_per_s": lab}, "simulated": {"throughput_per_s": model}}
    >>> out = spiral_ratios([run("g", 100, None, 1000.0, 1000.0), run("g", -1, 17.6, 410.0, 540.0)])
    >>> p = out["pairs"][0]
    >>> p["gomemlimit_over_live"], round(p["lab_ratio"], 3), round(p["model_ratio"], 3), p["within"]
    (1.1, 0.41, 0.54, False)
    >>> out["summary"]["within"], out["summary"]["pairs"]
    (0, 1)
    """
    refs: dict[tuple, list[Mapping[str, Any]]] = {}
    tight: dict[tuple, list[Mapping[str, Any]]] = {}
    for r in runs:
        design = _spiral_design(r)
        obs, sim = r.get("observed") or {}, r.get("simulated") or {}
        if design is None or obs.get("oom_killed") or sim.get("oom_killed") \
                or obs.get("throughput_per_s") is None or sim.get("throughput_per_s") is None:
            continue
        sc = r["scenario"]
        if r.get("gc_regime") == "gogc" and sc.get("go.gogc") == 100 and gomemlimit_mb(sc) is None:
            refs.setdefault(design, []).append(r)
        elif r.get("gc_regime") == "gomemlimit-near-live":
            setting = (sc.get("go.gogc"), round(float(gomemlimit_mb(sc) or 0.0), 3), sc.get("cgroup.memory_limit_mb"))
            tight.setdefault(design + setting, []).append(r)

    def mean(rs: list[Mapping[str, Any]], side: str) -> float:
        return statistics.fmean(float(r[side]["throughput_per_s"]) for r in rs)

    pairs = []
    for key, rs in sorted(tight.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        design, (gogc, gml, mem_limit) = key[:5], key[5:]
        ref = refs.get(design)
        if not ref or not mean(ref, "observed") or not mean(ref, "simulated"):
            continue
        lab = mean(rs, "observed") / mean(ref, "observed")
        model = mean(rs, "simulated") / mean(ref, "simulated")
        grid, kind, cpu_limit, gomaxprocs, live = design
        pairs.append({"grid": grid, "kind": kind, "cpu_limit": cpu_limit, "gomaxprocs": gomaxprocs,
                      "live_heap_mb": live, "gogc": gogc, "gomemlimit_mb": gml,
                      "gomemlimit_over_live": round(gml / live, 3) if live else None,
                      "memory_limit_mb": mem_limit, "runs": len(rs), "reference_runs": len(ref),
                      "lab_ratio": lab, "model_ratio": model,
                      "model_over_lab": model / lab if lab else None,
                      "within": bool(lab) and abs(model / lab - 1.0) <= tolerance})
    return {"pairs": pairs, "summary": _spiral_summary(pairs, tolerance)}


def _spiral_summary(pairs: list[Mapping[str, Any]], tolerance: float) -> dict[str, Any]:
    """How many spiral pairs are within ``tolerance``, and the median |model / lab - 1|."""
    off = [abs(p["model_over_lab"] - 1.0) for p in pairs if p["model_over_lab"] is not None]
    return {"pairs": len(pairs), "within": sum(1 for p in pairs if p["within"]), "tolerance": tolerance,
            "median_abs_model_over_lab": float(statistics.median(off)) if off else None}


#: the grid of a spiral pair pooled over grids (:func:`spiral_ratios_pooled`)
ALL_GRIDS = "all grids"


def spiral_ratios_pooled(runs: list[Mapping[str, Any]], tolerance: float = SPIRAL_TOLERANCE) -> dict[str, Any]:
    """:func:`spiral_ratios` with each design and setting pooled over the grids that ran both of
    its sides: the lab's ratio is the mean of its per-grid ratios, the model's the mean of its
    per-grid ratios, and the pair is *within* as there. One grid's pair is a single draw of the
    lab's host state on that day (a 256 MiB heap's mark speed on this VM moves 20-50 % between
    runs minutes apart: docs/model-notes.md, "The death spiral's own spread at a 256 MiB heap"),
    so a ratio measured on several days says more about the design than any one of them. Each
    ratio is taken within its grid before pooling, so a grid that ran only one side cannot tilt it.
    A pooled pair carries ``grids`` and ``lab_ratio_range`` (the lowest and highest per-grid lab
    ratio: the lab's own spread).

    >>> def pair(grid, lab, model):
    ...     return {"grid": grid, "kind": "stream", "cpu_limit": 1.0, "gomaxprocs": 8, "live_heap_mb": 256.0,
    ...             "gogc": -1, "gomemlimit_mb": 281.6, "gomemlimit_over_live": 1.1, "memory_limit_mb": 4096.0,
    ...             "runs": 1, "reference_runs": 1, "lab_ratio": lab, "model_ratio": model}
    >>> out = _pool_spiral_pairs([pair("a", 0.40, 0.29), pair("b", 0.30, 0.30), pair("c", 0.32, 0.28)], 0.2)
    >>> p = out["pairs"][0]
    >>> p["grids"], round(p["lab_ratio"], 3), round(p["model_ratio"], 3), p["lab_ratio_range"], p["within"]
    (3, 0.34, 0.29, (0.3, 0.4), True)
    """
    return _pool_spiral_pairs(spiral_ratios(runs, tolerance)["pairs"], tolerance)


def _pool_spiral_pairs(pairs: list[Mapping[str, Any]], tolerance: float) -> dict[str, Any]:
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for p in pairs:
        key = (p["kind"], p["cpu_limit"], p["gomaxprocs"], p["live_heap_mb"], p["gogc"], p["gomemlimit_mb"],
               p["memory_limit_mb"])
        groups.setdefault(key, []).append(p)
    pooled = []
    for _, ps in sorted(groups.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        lab = statistics.fmean(p["lab_ratio"] for p in ps)
        model = statistics.fmean(p["model_ratio"] for p in ps)
        first = ps[0]
        pooled.append({**{k: first[k] for k in ("kind", "cpu_limit", "gomaxprocs", "live_heap_mb", "gogc",
                                                 "gomemlimit_mb", "gomemlimit_over_live", "memory_limit_mb")},
                       "grid": ALL_GRIDS, "grids": len(ps), "runs": sum(p["runs"] for p in ps),
                       "reference_runs": sum(p["reference_runs"] for p in ps),
                       "lab_ratio": lab, "model_ratio": model,
                       "lab_ratio_range": (min(p["lab_ratio"] for p in ps), max(p["lab_ratio"] for p in ps)),
                       "model_over_lab": model / lab if lab else None,
                       "within": bool(lab) and abs(model / lab - 1.0) <= tolerance})
    return {"pairs": pooled, "summary": _spiral_summary(pooled, tolerance)}


def gc_by_regime(runs: list[Mapping[str, Any]], roles: tuple[str, ...] = ("point", "repeat")) -> dict[str, Any]:
    """``{"regimes": {regime: {metric: {median_abs, median, n, goal}}}, "oom": confusion,
    "oom_points": per repeated point, "limiter": the limiter's turn-ons (:func:`limiter_confusion`),
    "spiral": the death spiral's throughput ratios per grid (:func:`spiral_ratios`), "spiral_pooled": the
    same pooled over grids (:func:`spiral_ratios_pooled`), "oom_designs": OOM outcomes by design over
    every grid (:func:`oom_by_design`), "pause_by_gomaxprocs": one stop's length, lab and twin, by
    GOMAXPROCS (:func:`cfsim.validation.gcpause.pause_by_gomaxprocs`)}`` over the
    held-out runs (no fit used them) that record GC metrics (runs without any are left out).
    OOM-killed runs count in the confusion table and, for the other metrics, nowhere (their
    errors are None: no comparable window)."""
    held = [r for r in runs if r.get("held_out", r["role"] in roles) and r.get("gc_regime")]
    # a run killed within a second records no GC metrics but still counts in the OOM table
    sel = [r for r in held if r["observed"].get("oom_killed")
           or any(r["observed"].get(m) is not None for m in ("gc_cycles_per_s", "gc_heap_goal_mean_bytes",
                                                             "memory_usage_mean_bytes"))]
    regimes: dict[str, list] = {}
    for r in sel:
        regimes.setdefault(r["gc_regime"], []).append(r)
    out = {name: _summary(rs, GC_REGIME_METRICS) | {"runs": len(rs)} for name, rs in sorted(regimes.items())}
    if sel:
        out["all"] = _summary(sel, GC_REGIME_METRICS) | {"runs": len(sel)}
    return {"regimes": out, "oom": oom_confusion(sel), "oom_naive": naive_oom_confusion(sel),
            "oom_points": oom_by_point(sel), "limiter": limiter_confusion(sel), "spiral": spiral_ratios(sel),
            "spiral_pooled": spiral_ratios_pooled(sel), "oom_designs": oom_by_design(sel),
            "pause_by_gomaxprocs": pause_by_gomaxprocs(sel)}
