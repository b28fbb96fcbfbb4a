"""Validate the model against lab runs: one run folder, a grid, or a tree of grids.

For each run the simulated twin (same resolved scenario; the grid's cost factor from its own
calibration runs; optional calibrated parameters) is compared with the observed ``summary.json``
metric by metric (:mod:`cfsim.validation.metrics`). Per grid the measured noise is reported beside
the errors: the drift of the calibration runs and the difference between the repeated
configuration and its original.
"""
from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from cfsim.validation import metrics as vm
from cfsim.validation.gcmemory import GC_REGIME_METRICS, gc_by_regime, gc_regime
from cfsim.validation.normalise import GridNorm, grid_norm
from cfsim.validation.twin import find_runs, is_calibration_run, observed_summary, run_scenario, twin

#: scenario keys shown beside each run (what varies across the lab grids)
SCENARIO_COLUMNS = ("cgroup.cpu_limit", "go.gomaxprocs", "workload.kind")


@dataclass
class ValidationReport:
    runs: list[dict[str, Any]]
    errors: dict[str, dict[str, Any]]
    grids: dict[str, dict[str, Any]] = field(default_factory=dict)
    simulated: dict[str, Any] = field(default_factory=dict)  # run id -> SimulationResult
    gc: dict[str, Any] = field(default_factory=dict)  # GC/memory errors per GC regime, OOM confusion

    def table(self) -> pd.DataFrame:
        """One row per run and metric: observed, simulated, error, error kind, goal."""
        rows = []
        for run in self.runs:
            for m in vm.METRICS:
                rows.append({"run": run["run"], "grid": run["grid"], "role": run["role"],
                             **{k: run["scenario"].get(k) for k in SCENARIO_COLUMNS},
                             "metric": m.name, "kind": m.kind, "observed": run["observed"].get(m.name),
                             "simulated": run["simulated"].get(m.name), "error": run["errors"].get(m.name),
                             "goal": m.goal})
        return pd.DataFrame(rows)

    def to_json(self) -> dict[str, Any]:
        return {"runs": [{k: v for k, v in r.items() if k != "path"} for r in self.runs],
                "errors": self.errors, "grids": self.grids, "gc": self.gc}


def _roles(grid_dir: Path) -> dict[str, str]:
    meta = grid_dir / "grid.json"
    if not meta.is_file():
        return {}
    runs = json.loads(meta.read_text()).get("runs", {})
    return {name: spec.get("role", "point") for name, spec in runs.items()}


def _role(run: Path, roles: Mapping[str, str]) -> str:
    if run.name in roles:
        return roles[run.name]
    if is_calibration_run(run):
        return "calibration"
    return "repeat" if run.name.startswith("repeat") else "point"


def _derived(summary: Mapping[str, Any]) -> dict[str, float | None]:
    return {m.name: m.get(summary) for m in vm.METRICS}


def _noise(grid_runs: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    """Observed difference between a repeated configuration and its original (relative)."""
    out: dict[str, float | None] = {}
    for name, run in grid_runs.items():
        if run["role"] != "repeat":
            continue
        original = grid_runs.get(name.removeprefix("repeat-"))
        if original is None:
            continue
        for metric in ("throughput_per_s", "cpu_usage_cores"):
            a, b = original["observed"].get(metric), run["observed"].get(metric)
            if a and b:
                out[f"repeat_{metric}"] = (b - a) / a
    return out


def summarise_errors(runs: list[dict[str, Any]], roles: tuple[str, ...] = ("point", "repeat")) -> dict[str, Any]:
    """``{metric: {"median", "median_abs", "worst", "worst_run", "n", "goal"}}`` over the runs."""
    out: dict[str, Any] = {}
    for m in vm.METRICS:
        vals = [(r["errors"][m.name], r["run"]) for r in runs
                if r["role"] in roles and r["errors"].get(m.name) is not None]
        if not vals:
            continue
        errs = np.array([v for v, _ in vals], dtype=float)
        worst = int(np.argmax(np.abs(errs)))
        out[m.name] = {"median": float(np.median(errs)), "median_abs": float(np.median(np.abs(errs))),
                       "worst": float(errs[worst]), "worst_run": vals[worst][1], "n": len(vals),
                       "goal": m.goal, "kind": m.kind}
    return out


def validate(path: str | Path, params: Mapping[str, Any] | None = None, normalise: bool = True,
             include_calibration: bool = False, progress: bool | Callable[[str], None] = False,
             only: list[Path] | None = None) -> ValidationReport:
    """Validate every run folder at or below ``path``.

    Parameters
    ----------
    path : run folder, grid folder or a folder of grids
    params : calibrated parameters ``{"section.key": value}`` applied to every twin
    normalise : scale the workload's per-item CPU by each grid's calibration-run cost factor
    include_calibration : also report the calibration runs themselves (they are used for the cost
        factor, so their errors are not validation)
    only : validate only these run folders (e.g. the runs held out of a calibration)
    progress : True prints each run's errors as it goes; a callable is called with each run's id
    """
    from cfsim.validation.calibrate import apply_params

    root = Path(path)
    runs = find_runs(root)
    by_grid: dict[Path, list[Path]] = defaultdict(list)
    for run in runs:
        by_grid[run.parent].append(run)
    report_runs: list[dict[str, Any]] = []
    grids: dict[str, dict[str, Any]] = {}
    sims: dict[str, Any] = {}
    for grid_dir, grid_runs in by_grid.items():
        roles = _roles(grid_dir)
        norm = grid_norm(grid_runs, params) if normalise else GridNorm()
        grid_rows: dict[str, dict[str, Any]] = {}
        for run in grid_runs:
            role = _role(run, roles)
            if role == "calibration" and not include_calibration:
                grid_rows[run.name] = {"role": role, "observed": _derived(observed_summary(run))}
                continue
            if only is not None and run not in only:
                continue
            scenario = run_scenario(run)
            run_params = apply_params(run, params or {}, norm.factor)
            sim = twin(run, run_params)
            observed = _derived(observed_summary(run))
            simulated = _derived(sim.summary)
            errors = {m.name: vm.error(m, observed[m.name], simulated[m.name]) for m in vm.METRICS}
            if observed.get("oom_killed") or simulated.get("oom_killed"):
                # an OOM-killed run (either side) has no comparable window: only the kill is compared
                errors = {k: (v if k == "oom_killed" else None) for k, v in errors.items()}
            run_id = str(run.relative_to(root.parent)) if run != root else run.name
            row = {"run": run_id, "grid": grid_dir.name, "role": role, "path": str(run),
                   "scenario": {k: scenario.get(k) for k in SCENARIO_COLUMNS} | {
                       "cgroup.limit_schedule": scenario.get("cgroup.limit_schedule")},
                   "params": run_params, "observed": observed, "simulated": simulated, "errors": errors,
                   "gc_regime": gc_regime(scenario)}
            sims[run_id] = sim
            report_runs.append(row)
            grid_rows[run.name] = row
            if callable(progress):
                progress(run_id)
            elif progress:
                print(f"  {run_id}: " + ", ".join(
                    f"{k} {v:+.3f}" for k, v in errors.items() if v is not None and k in
                    ("throughput_per_s", "cpu_usage_cores", "throttled_ratio")), flush=True)
        grids[grid_dir.name] = {"cost_factor": norm.factor, "calibration_factors": norm.factors,
                                "drift": norm.drift, **_noise(grid_rows)}
    return ValidationReport(report_runs, summarise_errors(report_runs), grids, sims, gc_by_regime(report_runs))


def _fmt(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _gc_markdown(report: ValidationReport) -> list[str]:
    """GC/memory errors per GC regime (median |error|, n) and the OOM confusion table."""
    regimes = (report.gc or {}).get("regimes") or {}
    if not regimes:
        return []
    lines = ["", "## GC and memory by GC regime (median |error|, n; cfsim.validation.gcmemory)", "",
             "| regime | runs | " + " | ".join(GC_REGIME_METRICS) + " |", "|---" * (len(GC_REGIME_METRICS) + 2) + "|"]
    for name, g in regimes.items():
        cells = [f"{g[m]['median_abs']:.3f} ({g[m]['n']})" if m in g else "" for m in GC_REGIME_METRICS]
        lines.append(f"| {name} | {g['runs']} | " + " | ".join(cells) + " |")
    oom = report.gc.get("oom") or {}
    if any(oom.values()):
        lines += ["", "OOM kills (lab, model): " + ", ".join(f"{k}: {v}" for k, v in oom.items())]
    return lines


def to_markdown(report: ValidationReport) -> str:
    lines = ["# cfsim validation", "", "## Errors over held-out runs", "",
             "| metric | kind | median | median abs | worst | worst run | n | goal |",
             "|---|---|---|---|---|---|---|---|"]
    for name, e in report.errors.items():
        lines.append(f"| {name} | {e['kind']} | {e['median']:+.4f} | {e['median_abs']:.4f} | {e['worst']:+.4f} | "
                     f"{e['worst_run']} | {e['n']} | {_fmt(e['goal'])} |")
    lines += _gc_markdown(report)
    lines += ["", "## Grid noise (measured)", "", "| grid | cost factor | calibration drift | repeat throughput | "
              "repeat CPU |", "|---|---|---|---|---|"]
    for name, g in report.grids.items():
        lines.append(f"| {name} | {_fmt(g['cost_factor'])} | {_fmt(g['drift'])} | "
                     f"{_fmt(g.get('repeat_throughput_per_s'))} | {_fmt(g.get('repeat_cpu_usage_cores'))} |")
    lines += ["", "## Runs", "", "| run | limit | GOMAXPROCS | throughput obs / sim | CPU obs / sim | "
              "throttled obs / sim |", "|---|---|---|---|---|---|"]
    for r in report.runs:
        o, s = r["observed"], r["simulated"]
        lines.append(f"| {r['run']} | {_fmt(r['scenario']['cgroup.cpu_limit'])} | "
                     f"{_fmt(r['scenario']['go.gomaxprocs'])} | {_fmt(o['throughput_per_s'])} / "
                     f"{_fmt(s['throughput_per_s'])} | {_fmt(o['cpu_usage_cores'])} / {_fmt(s['cpu_usage_cores'])} | "
                     f"{_fmt(o['throttled_ratio'])} / {_fmt(s['throttled_ratio'])} |")
    return "\n".join(lines) + "\n"


def write_report(report: ValidationReport, out_dir: str | Path) -> Path:
    """``errors.csv`` (one row per run and metric), ``report.md``, ``report.json`` and plots."""
    from cfsim.validation import plots

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report.table().to_csv(out / "errors.csv", index=False)
    (out / "report.md").write_text(to_markdown(report))
    (out / "report.json").write_text(json.dumps(report.to_json(), indent=1, default=str) + "\n")
    plots.allocation_curves(report, out)
    plots.time_series(report, out)
    return out
