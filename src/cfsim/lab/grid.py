"""A grid of lab runs, one folder per point, plus calibration runs that measure how much the
machine drifted while the grid ran (other tenants, thermal state) and repeats that measure how
much a run differs from itself:

- ``calib-start`` and ``calib-end``: the workload unconstrained (no quota) at GOMAXPROCS 1; with
  ``--calibrate-every N`` also ``calib-01``, ``calib-02``, ... after every N points (a point's
  repeats stay beside it), so that each run has a calibration recorded shortly before it
  (``cfsim validate --calibration latest``) instead of only the grid's first one, hours earlier
  on a long grid;
- repeats run *right after* their point (same machine conditions as far as a shared host allows):
  ``repeat-<point>`` for the middle point of a plain grid, ``repeat2-<point>``, ``repeat3-...``
  for every point a design asks ``repeats`` of. A point that is (re)run also reruns its repeats,
  so a repeat never compares runs made hours apart (the first ``closed-menu`` grid's repeat ran at
  00:55 beside other tenants' 1.45 cores, while its point was re-run at 02:07 on a quiet host).

Points come from cartesian axes (``--grid section.key=a,b``) or from a design file
(``--design FILE.toml``): several cartesian designs, each with fixed ``set`` keys, ``axes``,
``repeats`` and an optional ``repeat_where`` filter::

    [[design]]
    name = "a"
    repeats = 2
    repeat_where = {"go.gomaxprocs" = [2]}
    [design.set]
    "go.live_heap_mb" = 16
    [design.axes]
    "go.gogc" = [50, 100, 200]
    "go.gomaxprocs" = [1, 2, 8]

``grid.json`` states the measured drift and the repeats' spread. Resumable: a point whose folder
has ``summary.json`` is skipped; a folder without one (an interrupted run) is redone. An
OOM-killed workload is a result (status ``oom``), not a failure.
"""
from __future__ import annotations

import datetime as dt
import itertools
import json
import shutil
import statistics
import sys
import time
import tomllib
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from cfsim.io.manifest import read_manifest
from cfsim.lab import runner
from cfsim.scenario import Scenario, ScenarioError, is_null, parse_value

DRIFT_KEYS = ("throughput_per_s", "cpu_usage_cores", "throttled_ratio", "latency_p50_s", "latency_p99_s",
              "gc_cycles")
SPREAD_KEYS = ("throughput_per_s", "cpu_usage_cores", "throttled_ratio", "latency_p50_s", "latency_p99_s",
               "latency_p999_s", "server_latency_p99_s", "gc_cycles", "gc_heap_goal_mean_bytes")
LOCK_GAP_S = 0.5
# two runs are comparable when the other tenants took about the same CPU during both
COMPARABLE_TENANTS_CORES = 0.25


def parse_axis(text: str) -> tuple[str, list[Any]]:
    """``"cgroup.cpu_limit=0.5,1,2"`` -> ("cgroup.cpu_limit", [0.5, 1, 2]); lists stay whole
    when given in brackets (``cgroup.limit_schedule=[[0,2.0],[8,1.2]]`` is one value)."""
    if "=" not in text:
        raise ScenarioError(text, "a grid axis must look like section.key=a,b,c")
    key, values = text.split("=", 1)
    key = key.strip()
    if key.count(".") != 1:
        raise ScenarioError(key, "a grid axis key must look like section.key")
    if values.strip().startswith("["):
        return key, [parse_value(values.strip(), key)]
    return key, [parse_value(v.strip(), key) for v in values.split(",") if v.strip()]


def point_name(index: int, assignment: dict[str, Any], prefix: str = "") -> str:
    parts = [f"{k.split('.', 1)[1]}={json.dumps(v) if isinstance(v, list) else v}" for k, v in assignment.items()]
    safe = "_".join(([prefix] if prefix else []) + parts).replace("/", "-").replace(" ", "").replace('"', "")
    return f"p{index:03d}_{safe}"[:120]


def grid_points(axes: list[tuple[str, list[Any]]]) -> list[dict[str, Any]]:
    keys = [k for k, _ in axes]
    return [dict(zip(keys, combo)) for combo in itertools.product(*(v for _, v in axes))]


@dataclass
class Design:
    """One cartesian design: fixed keys, axes, runs per point and which points repeat."""

    name: str
    axes: list[tuple[str, list[Any]]]
    set: dict[str, Any] = field(default_factory=dict)
    repeats: int = 1
    repeat_where: dict[str, list[Any]] = field(default_factory=dict)

    def points(self) -> list[tuple[dict[str, Any], dict[str, Any], int]]:
        """(axis assignment for the name, all overrides, runs) per point."""
        out = []
        for a in grid_points(self.axes) if self.axes else [{}]:
            overrides = {**self.set, **a}
            match = all(overrides.get(k) in v for k, v in self.repeat_where.items())
            out.append((a, overrides, self.repeats if match else 1))
        return out


def _check_key(where: str, key: str) -> str:
    if not isinstance(key, str) or key.count(".") != 1:
        raise ScenarioError(f"{where}: {key!r}", "keys must look like section.key")
    return key


def _design_value(value: Any) -> Any:
    """A design's value: TOML has no null, so the string ``"null"`` (or ``"none"``) unsets an
    optional key, as ``--set section.key=null`` does (:func:`cfsim.scenario.parse_value`), e.g.
    ``"cgroup.cpu_limit" = ["null", 1.0]`` for no quota beside a 1-core one."""
    return None if isinstance(value, str) and is_null(value) else value


def read_designs(path: Path) -> list[Design]:
    """``[[design]]`` tables of a TOML file (see the module docstring)."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(str(path), f"cannot read the design file: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(str(path), f"not valid TOML: {exc}") from None
    raw = data.get("design")
    if not isinstance(raw, list) or not raw:
        raise ScenarioError(str(path), "needs one or more [[design]] tables")
    out = []
    for i, d in enumerate(raw):
        where = f"{path}: design {i} ({d.get('name', '?')})"
        unknown = set(d) - {"name", "axes", "set", "repeats", "repeat_where"}
        if unknown:
            raise ScenarioError(where, f"unknown fields {sorted(unknown)}")
        axes = []
        for key, vals in (d.get("axes") or {}).items():
            if not isinstance(vals, list) or not vals:
                raise ScenarioError(f"{where}: axes.{key}", "must be a non-empty list of values")
            axes.append((_check_key(where, key), [_design_value(v) for v in vals]))
        reps = d.get("repeats", 1)
        if not isinstance(reps, int) or reps < 1:
            raise ScenarioError(f"{where}: repeats", f"must be an integer >= 1 (got {reps!r})")
        out.append(Design(str(d.get("name", f"d{i}")), axes,
                          {_check_key(where, k): _design_value(v) for k, v in (d.get("set") or {}).items()}, reps,
                          {_check_key(where, k): (v if isinstance(v, list) else [v])
                           for k, v in (d.get("repeat_where") or {}).items()}))
    return out


#: faultbench rounds before each calibration run: the host's price of a page release and of a TLB
#: shootdown moves with the VM's state, further than its CPU speed (2026-12-02: 1.6-2.4x the
#: 2026-11-26 figures while the loop ran 1.3x slower), and the twins take the grid's own
#: (cfsim.validation.normalise.GridNorm.memory_path)
CALIBRATION_MEMORY_PROBE_ROUNDS = 3


def calibration_overrides() -> list[tuple[str, Any]]:
    return [("cgroup.cpu_limit", None), ("cgroup.limit_schedule", None), ("cgroup.burst_us", 0),
            ("go.gomaxprocs", 1), ("lab.load_fraction", None), ("lab.profile_s", 0.0), ("lab.trace_s", 0.0),
            ("lab.tenant_threads", 0), ("lab.memory_probe_rounds", CALIBRATION_MEMORY_PROBE_ROUNDS)]


def relative_change(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or a == 0:
        return None
    return (b - a) / abs(a)


def _tenants(run: dict[str, Any]) -> float | None:
    return run.get("tenants_cores")


def compare_runs(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Relative changes b vs a of the drift keys and of the start-up loop calibration, and
    whether the two ran beside about the same load from other tenants."""
    sa, sb = a["summary"], b["summary"]
    res: dict[str, Any] = {k: {"first": sa.get(k), "second": sb.get(k), "relative_change": relative_change(sa.get(k), sb.get(k))}
                           for k in DRIFT_KEYS}
    ca, cb = a.get("calibration"), b.get("calibration")
    res["calibration_rounds_per_cpu_ms"] = {"first": ca, "second": cb, "relative_change": relative_change(ca, cb)}
    ta, tb = _tenants(a), _tenants(b)
    res["tenants_cores"] = {"first": ta, "second": tb}
    res["comparable"] = None if ta is None or tb is None else abs(ta - tb) <= COMPARABLE_TENANTS_CORES
    res["start_utc"] = {"first": a.get("start_utc"), "second": b.get("start_utc")}
    return res


def relative_spread(values: list[float]) -> float | None:
    """``(max - min) / |mean|`` of a point's runs: the repeat spread of ``grid.json`` (None for a
    zero mean)."""
    mean = statistics.fmean(values)
    return None if mean == 0 else (max(values) - min(values)) / abs(mean)


def point_of_repeat(name: str) -> str:
    """The point a repeat run repeats: ``repeat-<point>`` or ``repeat<k>-<point>``."""
    return name.split("-", 1)[1]


def spread_report(groups: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """For every point run more than once: (max - min) / mean of each key over its runs, and the
    median and largest of those over the points."""
    per_point: dict[str, Any] = {}
    for point, runs in groups.items():
        if len(runs) < 2:
            continue
        row: dict[str, Any] = {"runs": len(runs)}
        for k in SPREAD_KEYS:
            vals = [r["summary"].get(k) for r in runs]
            vals = [v for v in vals if isinstance(v, (int, float))]
            if len(vals) == len(runs) and (spread := relative_spread(vals)) is not None:
                row[k] = spread
        tens = [_tenants(r) for r in runs]
        row["tenants_cores"] = tens
        row["comparable"] = None if None in tens else max(tens) - min(tens) <= COMPARABLE_TENANTS_CORES
        per_point[point] = row
    overall: dict[str, Any] = {"points": len(per_point)}
    for k in SPREAD_KEYS:
        vals = [r[k] for r in per_point.values() if k in r]
        if vals:
            overall[k] = {"median": statistics.median(vals), "max": max(vals), "n": len(vals)}
    return {"per_point": per_point, "overall": overall,
            "definition": "(max - min) / mean over the runs of a point; comparable = other tenants' CPU "
                          f"within {COMPARABLE_TENANTS_CORES} cores across them"}


def drift_report(runs: dict[str, dict[str, Any]], repeat_of: str | None,
                 groups: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """Relative changes (end vs start) of the calibration runs, repeat vs original point, and
    the spread of every repeated point."""
    out: dict[str, Any] = {}
    out["calibration"] = compare_runs(runs["calib-start"], runs["calib-end"]) \
        if "calib-start" in runs and "calib-end" in runs else None
    if repeat_of:
        second = f"repeat-{repeat_of}"
        out["repeat"] = {"point": repeat_of, **(compare_runs(runs[repeat_of], runs[second])
                                                if repeat_of in runs and second in runs else {})}
    if groups:
        out["repeats"] = spread_report({p: [runs[n] for n in names if n in runs] for p, names in groups.items()})
    cal = out.get("calibration") or {}
    thr = (cal.get("throughput_per_s") or {}).get("relative_change")
    out["headline"] = ("calibration throughput changed by "
                       + (f"{100 * thr:+.1f} %" if thr is not None else "n/a")
                       + " between the start and the end of the grid")
    return out


def _load_run(folder: Path) -> dict[str, Any] | None:
    s = folder / "summary.json"
    if not s.exists():
        return None
    m = read_manifest(folder)
    host = m.get("host_cpu") or {}
    pre = host.get("pre_run") or {}
    # other tenants' CPU: measured before the run (pre_run), else during it; runs made before the
    # harness had its own cgroup only know "others" (tenants + harness)
    tenants = pre.get("tenants_cores", host.get("tenants_cores", host.get("others_cores")))
    return {"summary": json.loads(s.read_text()), "calibration": m.get("calibration_rounds_per_cpu_ms"),
            "start_utc": m["times"]["start_utc"], "status": m.get("status", "ok"), "tenants_cores": tenants}


@dataclass
class PlanEntry:
    name: str
    scenario: Scenario
    role: str  # calibration | point | repeat
    of: str | None = None  # the point a repeat repeats


def plan_runs(base: Scenario, designs: list[Design], calibration: bool = True,
              calibrate_every: int = 0) -> tuple[list[PlanEntry], str | None]:
    """Every run in order, and the point whose ``repeat-`` checks drift (plain grids);
    ``calibrate_every`` > 0: a calibration run after every that many points (and their repeats).

    >>> from cfsim.scenario import load_scenario
    >>> d = Design("g", [("cgroup.cpu_limit", [0.5, 1.0, 1.5, 2.0, 3.0])], repeats=1)
    >>> plan, _ = plan_runs(load_scenario("cpu-bound-threads"), [d], calibrate_every=2)
    >>> [e.name.split("_")[0] for e in plan]
    ['calib-start', 'p000', 'p001', 'calib-01', 'p002', 'repeat-p002', 'p003', 'calib-02', 'p004', 'calib-end']
    """
    if calibrate_every < 0:
        raise ScenarioError("--calibrate-every", f"must be >= 0 (got {calibrate_every})")
    named: list[tuple[str, Scenario, int]] = []
    seen: set[str] = set()
    multi = len(designs) > 1
    for d in designs:
        for assignment, overrides, reps in d.points():
            key = json.dumps(overrides, sort_keys=True, default=str)
            if key in seen:
                continue  # a point two designs share runs once
            seen.add(key)
            name = point_name(len(named), assignment, d.name if multi else "")
            named.append((name, base.with_overrides(list(overrides.items())), reps))
    any_repeats = any(reps > 1 for _, _, reps in named)
    repeat_of = named[len(named) // 2][0] if named and calibration and not any_repeats else None
    plan: list[PlanEntry] = []
    if calibration:
        plan.append(PlanEntry("calib-start", base.with_overrides(calibration_overrides()), "calibration"))
    for i, (name, sc, reps) in enumerate(named, 1):
        plan.append(PlanEntry(name, sc, "point"))
        if name == repeat_of:
            plan.append(PlanEntry(f"repeat-{name}", sc, "repeat", name))
        for k in range(2, reps + 1):
            plan.append(PlanEntry(f"repeat{k}-{name}", sc, "repeat", name))
        if calibration and calibrate_every and i % calibrate_every == 0 and i < len(named):
            plan.append(PlanEntry(f"calib-{i // calibrate_every:02d}", base.with_overrides(calibration_overrides()),
                                  "calibration"))
    if calibration:
        plan.append(PlanEntry("calib-end", base.with_overrides(calibration_overrides()), "calibration"))
    return plan, repeat_of


def run_grid(base: Scenario, axis_texts: list[str], out_dir: Path, resume: bool = False,
             calibration: bool = True, command: list[str] | None = None,
             run_one: Callable[..., dict[str, Any]] = runner.run,
             log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
             designs: list[Design] | None = None, repeats: int = 1,
             progress: Callable[[int, int], None] | None = None, calibrate_every: int = 0) -> dict[str, Any]:
    """Run every point (skipping finished ones with ``resume``); write and return ``grid.json``.
    ``progress(done, total)`` after each planned run (finished, skipped or failed);
    ``calibrate_every``: a calibration run after every that many points (:func:`plan_runs`)."""
    if designs is None:
        designs = [Design("grid", [parse_axis(t) for t in axis_texts], repeats=repeats)]
    elif axis_texts:
        raise ScenarioError("--grid", "give axes either with --grid or in the design file, not both")
    plan, repeat_of = plan_runs(base, designs, calibration, calibrate_every)
    groups: dict[str, list[str]] = {}
    for e in plan:
        if e.role == "point":
            groups[e.name] = [e.name]
        elif e.role == "repeat" and e.of:
            groups[e.of].append(e.name)

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "scenario.toml").write_text(base.to_toml())
    grid_path = out_dir / "grid.json"
    previous = json.loads(grid_path.read_text()) if grid_path.exists() else {}
    started = previous.get("started_utc") if resume else None
    state: dict[str, Any] = {
        "base_scenario_toml": base.to_toml(), "base_scenario_source": base.source, "overrides": base.overrides,
        "designs": [{"name": d.name, "axes": dict(d.axes), "set": d.set, "repeats": d.repeats,
                     "repeat_where": d.repeat_where} for d in designs],
        "axes": {k: v for d in designs for k, v in d.axes}, "command": command or sys.argv,
        "started_utc": started or dt.datetime.now(dt.timezone.utc).isoformat(),
        "order": [e.name for e in plan], "runs": {}, "failed": 0, "oom": 0,
    }
    runs: dict[str, dict[str, Any]] = {}
    rerun_points: set[str] = set()
    for i, e in enumerate(plan):
        if i:
            # the machine lock (flock) is not fair: pause so a measurement waiting for it (polling
            # every 0.2 s) gets its turn between two runs instead of waiting out the whole grid
            time.sleep(LOCK_GAP_S)
        folder = out_dir / e.name
        entry: dict[str, Any] = {"role": e.role, "dir": e.name, "overrides": e.scenario.overrides}
        if e.of:
            entry["repeat_of"] = e.of
        done = _load_run(folder)
        # a repeat must run beside its point: if the point was (re)run now, so is the repeat
        if done is not None and resume and not (e.role == "repeat" and e.of in rerun_points):
            log(f"skip {e.name} (finished)")
            entry["status"] = done["status"]
            runs[e.name] = done
        else:
            if folder.exists():
                shutil.rmtree(folder)  # an interrupted run, or a fresh grid without --resume
            if e.role == "point":
                rerun_points.add(e.name)
            log(f"run {e.name} ({i + 1}/{len(plan)})")
            try:
                discarded = _run_until_unstolen(e.scenario, folder, run_one, f"{out_dir.name}-{e.name}", command, log)
                if discarded:
                    entry["steal_retries"] = discarded
                runs[e.name] = _load_run(folder) or {"summary": {}, "status": "ok"}
                entry["status"] = runs[e.name]["status"]
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # one failed point must not stop a long unattended grid
                entry["status"] = "failed"
                entry["error"] = "".join(traceback.format_exception_only(type(exc), exc)).strip()
                folder.mkdir(parents=True, exist_ok=True)
                (folder / "error.txt").write_text(traceback.format_exc())
                log(f"FAILED {e.name}: {entry['error']}")
        state["runs"][e.name] = entry
        state["failed"] = sum(1 for r in state["runs"].values() if r["status"] == "failed")
        state["oom"] = sum(1 for r in state["runs"].values() if r["status"] == "oom")
        state["drift"] = drift_report(runs, repeat_of, groups)
        state["updated_utc"] = dt.datetime.now(dt.timezone.utc).isoformat()
        grid_path.write_text(json.dumps(state, indent=1, sort_keys=True, default=str) + "\n")
        if progress:
            progress(i + 1, len(plan))
    state["finished_utc"] = dt.datetime.now(dt.timezone.utc).isoformat()
    grid_path.write_text(json.dumps(state, indent=1, sort_keys=True, default=str) + "\n")
    if any((out_dir / n / "summary.json").exists() for n in state["order"]):
        from cfsim.lab import table

        table.write_csv(out_dir)
    return state


def _run_until_unstolen(sc: Scenario, folder: Path, run_one: Callable[..., Any], run_id: str,
                        command: list[str] | None, log: Callable[[str], None]) -> list[dict[str, Any]]:
    """Run ``sc`` into ``folder``; with ``lab.quiet_host_steal_cores`` and ``lab.steal_retries``, run it
    again while the hypervisor took more than that during the window (``host_cpu.steal_cores``), at
    most that many more times, and keep the last try. Returns what each discarded try measured.

    Steal accrues only while a virtual CPU wants to run and comes and goes within a minute on a
    shared host (docs/model-notes.md, "A grid recorded under the hypervisor's steal"), so the loaded
    probe before a run (``cfsim.lab.quiet``) bounds its start, not its window."""
    limit, retries = sc["lab.quiet_host_steal_cores"], sc["lab.steal_retries"]
    discarded: list[dict[str, Any]] = []
    while True:
        run_one(sc, folder, run_id=run_id, command=command)
        if limit is None or not retries or not (folder / "summary.json").exists():
            return discarded
        m = read_manifest(folder)
        steal = (m.get("host_cpu") or {}).get("steal_cores")
        if steal is None or steal <= limit or len(discarded) >= retries:
            return discarded
        discarded.append({"steal_cores": steal, "start_utc": (m.get("times") or {}).get("start_utc")})
        log(f"{folder.name}: the hypervisor took {steal:.2f} cores during the window (> "
            f"lab.quiet_host_steal_cores = {limit:g}): running it again ({len(discarded)} of {retries})")
        shutil.rmtree(folder)


def refresh_drift(grid_dir: Path) -> dict[str, Any]:
    """Recompute ``grid.json``'s drift from the run folders (after their summaries were re-derived);
    the plan (points, repeats) is the one ``grid.json`` recorded."""
    grid_path = Path(grid_dir) / "grid.json"
    state = json.loads(grid_path.read_text())
    runs = {name: r for name in state["order"] if (r := _load_run(Path(grid_dir) / name)) is not None}
    groups: dict[str, list[str]] = {}
    repeat_of = None
    for name, entry in state["runs"].items():
        if entry.get("role") == "point":
            groups.setdefault(name, [name])
    for name, entry in state["runs"].items():
        if entry.get("role") == "repeat":
            of = entry.get("repeat_of") or point_of_repeat(name)
            groups.setdefault(of, [of]).append(name)
            if name.startswith("repeat-"):
                repeat_of = of
    state["drift"] = drift_report(runs, repeat_of, groups)
    grid_path.write_text(json.dumps(state, indent=1, sort_keys=True, default=str) + "\n")
    return state
