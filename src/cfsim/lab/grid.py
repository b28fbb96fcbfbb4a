"""A cartesian grid of lab runs, one folder per point, plus calibration runs that measure how
much the machine drifted while the grid ran (other tenants, thermal state):

- ``calib-start`` and ``calib-end``: the workload unconstrained (no quota) at GOMAXPROCS 1;
- ``repeat-<point>``: the middle grid point run again after all points.

``grid.json`` states the measured drift. Resumable: a point whose folder has ``summary.json`` is
skipped; a folder without one (an interrupted run) is redone.
"""
from __future__ import annotations

import datetime as dt
import itertools
import json
import shutil
import sys
import traceback
from pathlib import Path
from typing import Any, Callable

from cfsim.lab import runner
from cfsim.scenario import Scenario, ScenarioError, parse_value

DRIFT_KEYS = ("throughput_per_s", "cpu_usage_cores", "throttled_ratio", "latency_p50_s", "latency_p99_s",
              "gc_cycles")


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
        return key, [parse_value(values.strip())]
    return key, [parse_value(v.strip()) for v in values.split(",") if v.strip()]


def point_name(index: int, assignment: dict[str, Any]) -> str:
    parts = [f"{k.split('.', 1)[1]}={json.dumps(v) if isinstance(v, list) else v}" for k, v in assignment.items()]
    safe = "_".join(parts).replace("/", "-").replace(" ", "").replace('"', "")
    return f"p{index:03d}_{safe}"[:120]


def grid_points(axes: list[tuple[str, list[Any]]]) -> list[dict[str, Any]]:
    keys = [k for k, _ in axes]
    return [dict(zip(keys, combo)) for combo in itertools.product(*(v for _, v in axes))]


def calibration_overrides() -> list[tuple[str, Any]]:
    return [("cgroup.cpu_limit", None), ("cgroup.limit_schedule", None), ("cgroup.burst_us", 0),
            ("go.gomaxprocs", 1)]


def relative_change(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or a == 0:
        return None
    return (b - a) / abs(a)


def drift_report(runs: dict[str, dict[str, Any]], repeat_of: str | None) -> dict[str, Any]:
    """Relative changes (end vs start) of the calibration runs, and repeat vs original point."""
    out: dict[str, Any] = {}

    def compare(a: str, b: str) -> dict[str, Any] | None:
        if a not in runs or b not in runs:
            return None
        sa, sb = runs[a]["summary"], runs[b]["summary"]
        res = {k: {"first": sa.get(k), "second": sb.get(k), "relative_change": relative_change(sa.get(k), sb.get(k))}
               for k in DRIFT_KEYS}
        ca, cb = runs[a].get("calibration"), runs[b].get("calibration")
        res["calibration_rounds_per_cpu_ms"] = {"first": ca, "second": cb, "relative_change": relative_change(ca, cb)}
        return res

    out["calibration"] = compare("calib-start", "calib-end")
    if repeat_of:
        out["repeat"] = {"point": repeat_of, **(compare(repeat_of, f"repeat-{repeat_of}") or {})}
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
    m = json.loads((folder / "manifest.json").read_text())
    return {"summary": json.loads(s.read_text()), "calibration": m.get("calibration_rounds_per_cpu_ms"),
            "start_utc": m["times"]["start_utc"]}


def run_grid(base: Scenario, axis_texts: list[str], out_dir: Path, resume: bool = False,
             calibration: bool = True, command: list[str] | None = None,
             run_one: Callable[..., dict[str, Any]] = runner.run,
             log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
             progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Run every point (skipping finished ones with ``resume``); write and return ``grid.json``.
    ``progress(done, total)`` after each planned run (finished, skipped or failed)."""
    axes = [parse_axis(t) for t in axis_texts]
    points = grid_points(axes)
    plan: list[tuple[str, Scenario, str]] = []  # (folder name, scenario, role)
    named = [(point_name(i, a), base.with_overrides(list(a.items()))) for i, a in enumerate(points)]
    repeat_of = named[len(named) // 2][0] if named and calibration else None
    if calibration:
        plan.append(("calib-start", base.with_overrides(calibration_overrides()), "calibration"))
    plan += [(n, s, "point") for n, s in named]
    if calibration:
        plan.append((f"repeat-{repeat_of}", dict(named)[repeat_of], "repeat"))
        plan.append(("calib-end", base.with_overrides(calibration_overrides()), "calibration"))

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "scenario.toml").write_text(base.to_toml())
    grid_path = out_dir / "grid.json"
    previous = json.loads(grid_path.read_text()) if grid_path.exists() else {}
    started = previous.get("started_utc") if resume else None
    state: dict[str, Any] = {
        "base_scenario_toml": base.to_toml(), "base_scenario_source": base.source, "overrides": base.overrides,
        "axes": {k: v for k, v in axes}, "command": command or sys.argv,
        "started_utc": started or dt.datetime.now(dt.timezone.utc).isoformat(),
        "order": [n for n, _, _ in plan], "runs": {}, "failed": 0,
    }
    runs: dict[str, dict[str, Any]] = {}
    for i, (name, sc, role) in enumerate(plan):
        folder = out_dir / name
        entry: dict[str, Any] = {"role": role, "dir": name, "overrides": sc.overrides}
        done = _load_run(folder)
        if done is not None and resume:
            log(f"skip {name} (finished)")
            entry["status"] = "ok"
            runs[name] = done
        else:
            if folder.exists():
                shutil.rmtree(folder)  # an interrupted run, or a fresh grid without --resume
            log(f"run {name} ({i + 1}/{len(plan)})")
            try:
                run_one(sc, folder, run_id=f"{out_dir.name}-{name}", command=command)
                runs[name] = _load_run(folder) or {}
                entry["status"] = "ok"
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # one failed point must not stop a long unattended grid
                entry["status"] = "failed"
                entry["error"] = "".join(traceback.format_exception_only(type(exc), exc)).strip()
                folder.mkdir(parents=True, exist_ok=True)
                (folder / "error.txt").write_text(traceback.format_exc())
                state["failed"] += 1
                log(f"FAILED {name}: {entry['error']}")
        state["runs"][name] = entry
        state["drift"] = drift_report(runs, repeat_of)
        state["updated_utc"] = dt.datetime.now(dt.timezone.utc).isoformat()
        grid_path.write_text(json.dumps(state, indent=1, sort_keys=True, default=str) + "\n")
        if progress:
            progress(i + 1, len(plan))
    state["finished_utc"] = dt.datetime.now(dt.timezone.utc).isoformat()
    grid_path.write_text(json.dumps(state, indent=1, sort_keys=True, default=str) + "\n")
    return state
