"""Validate the model against lab runs: one run folder, a grid, or a tree of grids.

For each run the simulated twin (:func:`cfsim.validation.twin.twin_spec`: the resolved scenario,
the machine facts the lab recorded, independently measured neighbours; the grid's cost factor from
its own calibration runs; optional calibrated parameters) is compared with the observed
``summary.json`` metric by metric (:mod:`cfsim.validation.metrics`). Every run is classified by
regime (:mod:`cfsim.validation.regimes`) and the errors are reported per regime: the headline is
the *uncapped* and *contended* runs, where the model predicts; in the capped regimes a cap decides
the CPU. Per grid the measured noise is reported beside the errors: the drift of the calibration
runs and the spread over each repeated configuration's runs (:mod:`cfsim.validation.noise`). Hardware-in-the-loop
runs are also compared on the VPA's resize trajectory (:mod:`cfsim.validation.trajectory`).

"Held out" means no fit touched the run: calibration runs set the grid's cost factor, and runs a
``cfsim calibrate --train`` selection fitted parameters on (``train_runs``) are training runs.
"""
from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from cfsim.simulation import simulate
from cfsim.sweep.executors import map_in_order
from cfsim.validation.kernel_view import kernel_view
from cfsim.validation.noise import noise_summary, repeat_spreads
from cfsim.validation import metrics as vm
from cfsim.validation.ensemble import ensemble_mean, grid_seed_spread, replica_seeds, seed_spread
from cfsim.validation.gcmemory import GC_REGIME_METRICS, GC_SCENARIO_KEYS, gc_by_regime, gc_regime
from cfsim.validation.naive import NAIVE_DESCRIPTION, naive_comparison, naive_summary
from cfsim.validation.normalise import (GridNorm, calibration_overrides, calibration_twin_summary,
                                       factored_overrides, grid_norm, grid_priors)
from cfsim.lab.hostcpu import STEAL_WARN_CORES
from cfsim.validation.regimes import (HOST_STATES, OUT_OF_SCOPE, PREDICTED, QUIET_TENANTS_CORES, REGIMES,
                                      host_state, run_regime)
from cfsim.validation.trajectory import compare_trajectories
from cfsim.validation.twin import (DEFAULT_CALIBRATION, find_runs, is_calibration_run, observed_summary,
                                   pre_run_tenants_cores, run_manifest, run_scenario, runs_with_calibration,
                                   calibration_runs_for, twin_spec)

#: what each calibration choice (:data:`cfsim.validation.twin.CALIBRATION_CHOICES`) means, for the report
CALIBRATION_TEXT = {"all": "each grid's calibration runs, at its start and at its end (the closing one "
                           "recorded after the runs its twins predict)",
                    "before": "only the calibration runs recorded before every run of their grid "
                              "(none measured after the runs its twins predict)",
                    "latest": "for each run the calibration run recorded last before it (a grid with calibration "
                              "runs between its points calibrates each run by the host just before it)"}

#: scenario keys shown beside each run (what varies across the lab grids)
SCENARIO_COLUMNS = ("cgroup.cpu_limit", "go.gomaxprocs", "workload.kind")


@dataclass
class ValidationReport:
    runs: list[dict[str, Any]]
    errors: dict[str, dict[str, Any]]       # over every held-out run (all regimes)
    grids: dict[str, dict[str, Any]] = field(default_factory=dict)
    simulated: dict[str, Any] = field(default_factory=dict)  # run id -> SimulationResult
    by_regime: dict[str, dict[str, Any]] = field(default_factory=dict)  # regime -> {metric: ...}
    regime_counts: dict[str, int] = field(default_factory=dict)          # held-out runs per regime
    gc: dict[str, Any] = field(default_factory=dict)  # GC/memory errors per GC regime, OOM confusion
    params: dict[str, Any] = field(default_factory=dict)  # model parameters every twin took (--params)
    #: this validation against an earlier one (cfsim.validation.against.compare), with its file
    against: dict[str, Any] = field(default_factory=dict)
    #: which calibration runs set the grids' factors (:data:`cfsim.validation.twin.CALIBRATION_CHOICES`)
    calibration: str = DEFAULT_CALIBRATION

    @property
    def headline(self) -> dict[str, Any]:
        """The regimes where the model predicts (uncapped, contended): n and errors per metric."""
        return {r: {"n": self.regime_counts.get(r, 0), "errors": self.by_regime.get(r, {})} for r in PREDICTED}

    def table(self) -> pd.DataFrame:
        """One row per run and metric: observed, simulated, error, error kind, goal, regime."""
        rows = []
        for run in self.runs:
            for m in vm.METRICS:
                rows.append({"run": run["run"], "grid": run["grid"], "role": run["role"],
                             "regime": run["regime"], "held_out": run["held_out"],
                             **{k: run["scenario"].get(k) for k in SCENARIO_COLUMNS},
                             "metric": m.name, "kind": m.kind, "observed": run["observed"].get(m.name),
                             "simulated": run["simulated"].get(m.name), "error": run["errors"].get(m.name),
                             "naive": run.get("naive", {}).get(m.name),
                             "naive_error": run.get("naive_errors", {}).get(m.name), "goal": m.goal})
        return pd.DataFrame(rows)

    def tails(self, side: str = "model") -> dict[str, dict[str, Any]]:
        """Per grid whose held-out runs measured a client latency: the tails check of
        :func:`cfsim.overheads.labcheck.tails_summary` (median |error| of the throttled ratio, CPU
        and p50, the median p99 factor, per regime and over all, and whether the p99 ordering
        across GOMAXPROCS is kept wherever the repeats separate it); ``side="naive"``: the same
        check of the naive baseline on the same runs."""
        from cfsim.overheads.labcheck import tails_summary

        by_grid = {grid: [r for r in rows if r["latency_p99_s_lab"] and r["latency_p99_s_model"]]
                   for grid, rows in self._held_rows_by_grid().items()}
        return {grid: tails_summary(rows, side) for grid, rows in by_grid.items() if rows}

    def _held_rows_by_grid(self) -> dict[str, list[dict[str, Any]]]:
        """The held-out runs' :func:`cfsim.overheads.labcheck.tails_rows`, per grid."""
        from cfsim.overheads.labcheck import tails_rows

        held = {r["run"] for r in self.runs if r["held_out"]}
        by_grid: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in tails_rows(self):
            if row["run"] in held:
                by_grid[row["grid"]].append(row)
        return dict(by_grid)

    def gomaxprocs_growth(self, side: str = "model") -> dict[str, dict[str, Any]]:
        """Per grid with held-out runs at several GOMAXPROCS of one design point: CPU at each over
        CPU at the point's lowest, lab against ``side`` (:func:`cfsim.overheads.labcheck.gomaxprocs_growth`)."""
        from cfsim.overheads.labcheck import gomaxprocs_growth

        by_grid = self._held_rows_by_grid()
        out = {grid: gomaxprocs_growth(rows, side) for grid, rows in by_grid.items()}
        out = {grid: g for grid, g in out.items() if g["pairs"]}
        if len(out) > 1:   # every grid's pairs together: a design point is a grid's
            out["all"] = gomaxprocs_growth([{**r, "group": (grid, r["group"])} for grid in out
                                            for r in by_grid[grid]], side)
        return out

    def loop_share(self) -> dict[str, dict[str, Any]]:
        """Per grid, the share of an item's CPU that follows the lab workload's start-up loop rounds,
        for the lab and the twins (:func:`cfsim.validation.loopshare.loop_share_slopes`)."""
        from cfsim.validation.loopshare import loop_share_slopes

        return loop_share_slopes(self.runs)

    def by_host_state(self) -> dict[str, dict[str, Any]]:
        """Per host state before the run (:func:`cfsim.validation.regimes.host_state`): the number of
        held-out runs and their errors (:func:`summarise_errors`), out-of-scope runs left out."""
        by, counts = _summarise_by([r for r in self.runs if r["regime"] not in OUT_OF_SCOPE],
                                   "host_state", HOST_STATES)
        return {state: {"n": counts[state], "errors": errors} for state, errors in by.items()}

    def headline_without_steal(self) -> dict[str, dict[str, Any]]:
        """:attr:`headline` over the runs the hypervisor did not steal from during the run (host state
        other than ``"stolen"``, :func:`cfsim.validation.regimes.host_state`): a stolen run's CPU and
        latency carry what another guest took, which nothing before the run tells and no twin has."""
        by, counts = _summarise_by([r for r in self.runs if r.get("host_state") != "stolen"], "regime", PREDICTED)
        return {r: {"n": counts[r], "errors": by.get(r, {})} for r in PREDICTED}

    def to_json(self) -> dict[str, Any]:
        return {"headline": self.headline, "headline_without_steal": self.headline_without_steal(),
                "by_regime": self.by_regime, "regime_counts": self.regime_counts,
                "by_host_state": self.by_host_state(),
                "errors": self.errors, "grids": self.grids, "gc": self.gc, "tails": self.tails(),
                "tails_naive": self.tails("naive"), "throttled_below_limit": throttled_below_limit(self.runs),
                "loop_share": self.loop_share(), "gomaxprocs_growth": self.gomaxprocs_growth(),
                "gomaxprocs_growth_naive": self.gomaxprocs_growth("naive"),
                "params": self.params, "calibration": self.calibration,
                **({"against": self.against} if self.against else {}),
                "runs": [{k: v for k, v in r.items() if k != "path"} for r in self.runs]}


def _roles(grid_dir: Path) -> dict[str, str]:
    from cfsim.io.errors import CfsimParseError
    from cfsim.io.manifest import read_json_file

    meta = grid_dir / "grid.json"
    if not meta.is_file():
        return {}
    doc = read_json_file(meta)   # not JSON: CfsimParseError naming the file and the position
    runs = doc.get("runs", {}) if isinstance(doc, dict) else None
    if not isinstance(runs, dict) or not all(isinstance(spec, dict) for spec in runs.values()):
        raise CfsimParseError(str(meta), "expected a grid's record: an object whose 'runs' maps each run's name "
                                         "to an object (cfsim.lab.grid writes it)", path="runs")
    return {name: spec.get("role", "point") for name, spec in runs.items()}


def _role(run: Path, roles: Mapping[str, str]) -> str:
    if run.name in roles:
        return roles[run.name]
    if is_calibration_run(run):
        return "calibration"
    return "repeat" if run.name.startswith("repeat") else "point"


def _derived(summary: Mapping[str, Any]) -> dict[str, float | None]:
    return {m.name: m.get(summary) for m in vm.METRICS}


def _noise(grid_runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The grid's measured repeatability (:mod:`cfsim.validation.noise`): the spread of every
    metric over each repeated point's runs, and its median for throughput and CPU."""
    observed = {name: run["observed"] for name, run in grid_runs.items() if run["role"] in ("point", "repeat")}
    spreads = repeat_spreads(observed)
    summary = noise_summary(spreads)
    return {"repeat_spreads": spreads, "noise": summary,
            **{f"repeat_{m}": summary.get(m, {}).get("median") for m in ("throughput_per_s", "cpu_usage_cores")}}


def pooled_noise(grids: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, float | int]]:
    """The lab's repeatability over every repeated point of every grid (median, max, points)."""
    return noise_summary({f"{g}/{point}": row for g, grid in grids.items()
                          for point, row in grid.get("repeat_spreads", {}).items()})


def summarise_errors(runs: list[dict[str, Any]], roles: tuple[str, ...] = ("point", "repeat"),
                     held_out_only: bool = True) -> dict[str, Any]:
    """``{metric: {"median", "median_abs", "worst", "worst_run", "n", "goal"[, "naive"]}}`` over the
    runs (by default the held-out point and repeat runs; runs out of the model's scope,
    ``OUT_OF_SCOPE``, only when ``runs`` holds nothing else: their own regime's table); ``naive``:
    the model against the naive baseline on the same runs (:func:`cfsim.validation.naive.naive_comparison`)."""
    out: dict[str, Any] = {}
    if any(r.get("regime") not in OUT_OF_SCOPE for r in runs):
        runs = [r for r in runs if r.get("regime") not in OUT_OF_SCOPE]
    runs = [r for r in runs if r["role"] in roles and (r.get("held_out", True) or not held_out_only)]
    for m in vm.METRICS:
        vals = [(r["errors"][m.name], r["run"]) for r in runs if r["errors"].get(m.name) is not None]
        if not vals:
            continue
        errs = np.array([v for v, _ in vals], dtype=float)
        worst = int(np.argmax(np.abs(errs)))
        out[m.name] = {"median": float(np.median(errs)), "median_abs": float(np.median(np.abs(errs))),
                       "worst": float(errs[worst]), "worst_run": vals[worst][1], "n": len(vals),
                       "goal": m.goal, "kind": m.kind}
        naive = naive_comparison(runs, m.name)
        if naive:
            out[m.name]["naive"] = naive
    return out


def _summarise_by(runs: list[dict[str, Any]], key: str, values: tuple[str, ...],
                  roles: tuple[str, ...] = ("point", "repeat")) -> tuple[dict[str, dict[str, Any]], dict[str, int]]:
    """Per value of a run's ``key``: ``{value: {metric: summary}}`` and the number of held-out runs."""
    by: dict[str, dict[str, Any]] = {}
    counts: dict[str, int] = {}
    for value in values:
        sel = [r for r in runs if r.get(key) == value and r["role"] in roles and r.get("held_out", True)]
        counts[value] = len(sel)
        if sel:
            by[value] = summarise_errors(sel, roles)
    return by, counts


def summarise_by_regime(runs: list[dict[str, Any]], roles: tuple[str, ...] = ("point", "repeat")
                        ) -> tuple[dict[str, dict[str, Any]], dict[str, int]]:
    """Per regime: ``{regime: {metric: summary}}`` and the number of held-out runs in it."""
    return _summarise_by(runs, "regime", REGIMES, roles)


def _simulate_twin(run: Path, run_params: dict[str, Any]) -> tuple[Any, Any]:
    """One twin: its spec and its simulation (a process pool's unit of work)."""
    spec = twin_spec(run, run_params)
    return spec, simulate(spec.scenario)


def _replica_params(run: Path, run_params: dict[str, Any], seeds: int, seed_offset: int = 0) -> list[dict[str, Any]]:
    """The inputs of a run's ``seeds`` twins: its own, then the same at the next seeds; with a
    ``seed_offset`` the first twin's seed is the run's plus the offset."""
    if seeds == 1 and not seed_offset:
        return [run_params]
    base = int(run_params.get("run.seed", run_scenario(run)["run.seed"]))
    return [run_params if s == base else {**run_params, "run.seed": s} for s in replica_seeds(base + seed_offset, seeds)]


def _ensembles(twins: Any, seeds: int) -> Any:
    """``(spec, simulation, replica summaries)`` per run from its ``seeds`` consecutive twins: the
    first twin's spec and simulation (plots, kernel view, trajectory), every replica's summary."""
    it = iter(twins)
    for spec, sim in it:
        yield spec, sim, [sim.summary] + [s.summary for _, s in islice(it, seeds - 1)]


def validate(path: str | Path, params: Mapping[str, Any] | None = None, normalise: bool = True,
             include_calibration: bool = False, progress: bool | Callable[[str], None] = False,
             only: list[Path] | None = None, train_runs: list[str | Path] | None = None,
             workers: int | None = None, seeds: int = 1, seed_offset: int = 0,
             calibration: str = DEFAULT_CALIBRATION) -> ValidationReport:
    """Validate every run folder at or below ``path``.

    Parameters
    ----------
    path : run folder, grid folder or a folder of grids
    params : calibrated parameters ``{"section.key": value}`` applied to every twin
    normalise : scale the workload's per-item CPU by each grid's calibration-run cost factor
    include_calibration : also report the calibration runs themselves (they are used for the cost
        factor, so their errors are not validation)
    only : validate only these run folders (e.g. the runs held out of a calibration); the
        calibration runs simulated, and each grid's table, are then those their twins take
        (:func:`needed_calibration`)
    progress : True prints each run's errors as it goes; a callable is called with each run's id
    train_runs : run folders ``params`` were fitted on: reported, but as training, not held out
    workers : processes simulating the twins (default: every CPU, or this process for fewer than
        :data:`cfsim.sweep.executors.MIN_POOLED` twins; 1 = this process). The report is the same
        for any number (each twin is deterministic; rows keep the runs' order)
    seeds : twins per run, at the run's seed and the next ``seeds - 1``: the lab is compared with
        their mean, and each run's ``seed_spread`` (each grid's median in ``grids``) is how far the
        replicas' errors lie apart (:mod:`cfsim.validation.ensemble`)
    seed_offset : simulate the held-out and training runs' twins at their run's seed plus this (the
        calibration runs' twins, which set each grid's factors, keep theirs): the same model at
        other seeds, for how far a figure moves by the seed alone (:mod:`cfsim.validation.against`)
    calibration : which of each grid's calibration runs set its factors and priors: ``"latest"``
        (default: for each run the one recorded last before it,
        :func:`cfsim.validation.twin.calibration_runs_for`), ``"before"`` (only those recorded
        before every run they calibrate, :func:`cfsim.validation.twin.calibration_known_before`)
        or ``"all"`` (the lab's runs at the grid's start and end: the closing one was recorded
        after the runs, more than a user predicting them knows)
    """
    return validate_each([path], params, normalise, include_calibration, progress, only, train_runs,
                         workers, seeds, seed_offset, calibration)[0]


def validate_each(paths: list[str | Path], params: Mapping[str, Any] | None = None, normalise: bool = True,
                  include_calibration: bool = False, progress: bool | Callable[[str], None] = False,
                  only: list[Path] | None = None, train_runs: list[str | Path] | None = None,
                  workers: int | None = None, seeds: int = 1, seed_offset: int = 0,
                  calibration: str = DEFAULT_CALIBRATION) -> list[ValidationReport]:
    """:func:`validate` for each of ``paths`` (e.g. the grids of a lab tree, a few runs of each),
    one report per path, the twins of all of them simulated in one process pool."""
    roots = [Path(p) for p in paths]
    runs = [needed_calibration(runs_with_calibration(find_runs(root), calibration), only, include_calibration,
                               calibration) for root in roots]
    # the calibration runs' twins first (each grid's cost factor and priors need them), all in one pool
    calib_runs = list(dict.fromkeys(run for root_runs in runs for run in root_runs if is_calibration_run(run)))
    overrides = calibration_overrides(params)
    summaries = dict(zip(calib_runs, map_in_order(calibration_twin_summary, [(run, overrides) for run in calib_runs],
                                                   workers))) if normalise else {}
    # then at each grid's factors (the program's own heap and pause time beyond the twin's): the
    # factors of the calibration runs a twin calibrated by this one takes (calibration_runs_for)
    factored: dict[Path, Mapping[str, Any]] = {}
    if normalise and calib_runs:
        sets = {run: tuple(calibration_runs_for(run, calib_runs, calibration)) for run in calib_runs}
        norms = {cs: grid_norm(list(cs), params, summaries, gc_priors=False) for cs in dict.fromkeys(sets.values())}
        jobs = [(run, factored_overrides(run, params, norms[sets[run]])) for run in calib_runs]
        todo = [(run, o) for run, o in jobs if o != overrides]
        factored = {run: summaries[run] for run, o in jobs if o == overrides}
        factored.update(zip([run for run, _ in todo], map_in_order(calibration_twin_summary, todo, workers)))
    plans = [_plan(root, root_runs, params, normalise, include_calibration, only, summaries, factored, calibration)
             for root, root_runs in zip(roots, runs)]
    if seeds < 1:
        raise ValueError(f"seeds must be >= 1 (got {seeds})")
    twins = _ensembles(map_in_order(_simulate_twin, [(run, p) for plan in plans for _, run, _, run_params in plan.jobs
                                                     for p in _replica_params(run, run_params, seeds, seed_offset)],
                                    workers), seeds)
    reports = [_assemble(plan, twins, include_calibration, progress, train_runs, params) for plan in plans]
    for rep in reports:
        rep.calibration = calibration
    return reports


def needed_calibration(runs: list[Path], only: list[Path] | None, include_calibration: bool,
                       calibration: str) -> list[Path]:
    """``runs`` without the calibration runs no twin of a validation restricted to ``only`` takes
    (:func:`cfsim.validation.twin.calibration_runs_for`; a calibration run in ``only`` is its own
    twin's when ``include_calibration``): validating one run of a grid calibrated every few points
    simulates the one calibration run before it, not all of them, and the grid's table then
    reports the factors those twins took; a grid none of ``only`` is in is left out. Without
    ``only`` every kept calibration run stays (the grid table shows the speed's drift across the
    whole grid)."""
    if only is None:
        return runs
    wanted = set(only)
    calib = [r for r in runs if is_calibration_run(r)]
    needed: set[Path] = set()
    grids: set[Path] = set()
    for run in runs:
        if run not in wanted:
            continue
        grids.add(run.parent)
        if include_calibration or not is_calibration_run(run):
            needed.update(calibration_runs_for(run, calib, calibration))
    return [r for r in runs if r.parent in grids and (not is_calibration_run(r) or r in needed)]


@dataclass
class _Plan:
    """What a validation of ``root`` simulates: each grid's runs and calibration, the twins' inputs."""
    root: Path
    by_grid: dict[Path, list[Path]]
    norms: dict[Path, GridNorm]
    jobs: list[tuple[Path, Path, str, dict[str, Any]]]
    #: the calibration runs each twin took (:func:`cfsim.validation.twin.calibration_runs_for`)
    calibrated_by: dict[Path, list[str]] = field(default_factory=dict)


def _plan(root: Path, runs: list[Path], params: Mapping[str, Any] | None, normalise: bool,
          include_calibration: bool, only: list[Path] | None,
          calibration_summaries: Mapping[Path, Mapping[str, Any]],
          factored_summaries: Mapping[Path, Mapping[str, Any]] | None = None,
          calibration: str = DEFAULT_CALIBRATION) -> _Plan:
    from cfsim.validation.calibrate import apply_grid

    by_grid: dict[Path, list[Path]] = defaultdict(list)
    for run in runs:
        by_grid[run.parent].append(run)
    # what the calibration runs tell each grid (the grid table), then each twin's inputs from the
    # calibration runs it takes (every kept one, or with "latest" the last before it)
    norms: dict[Path, GridNorm] = {}
    by_set: dict[tuple[Path, ...], GridNorm] = {}
    calibrated_by: dict[Path, list[str]] = {}
    jobs: list[tuple[Path, Path, str, dict[str, Any]]] = []
    for grid_dir, grid_runs in by_grid.items():
        roles = _roles(grid_dir)
        calib = [r for r in grid_runs if is_calibration_run(r)]
        norms[grid_dir] = by_set[tuple(calib)] = \
            grid_norm(grid_runs, params, calibration_summaries, factored_summaries) if normalise else GridNorm()
        for run in grid_runs:
            role = _role(run, roles)
            if role == "calibration" and not include_calibration:
                continue
            if only is not None and run not in only:
                continue
            chosen = tuple(calibration_runs_for(run, calib, calibration))
            if chosen not in by_set:
                by_set[chosen] = grid_norm(list(chosen), params, calibration_summaries, factored_summaries) \
                    if normalise else GridNorm()
            norm = by_set[chosen]
            calibrated_by[run] = [c.name for c in chosen]
            tenants = pre_run_tenants_cores(run_manifest(run))
            run_params = {**grid_priors(run_scenario(run), norm, tenants),
                          **apply_grid(run, params or {}, norm)}
            jobs.append((grid_dir, run, role, run_params))
    return _Plan(root, by_grid, norms, jobs, calibrated_by)


def _assemble(plan: _Plan, twins: Any, include_calibration: bool, progress: bool | Callable[[str], None],
              train_runs: list[str | Path] | None, params: Mapping[str, Any] | None = None) -> ValidationReport:
    """The report of one plan; ``twins`` yields its (spec, simulation) pairs in its jobs' order;
    ``params``: the model parameters every twin took (recorded in the report)."""
    root, by_grid, norms, jobs = plan.root, plan.by_grid, plan.norms, plan.jobs
    trained = {Path(t).resolve() for t in (train_runs or [])}
    report_runs: list[dict[str, Any]] = []
    sims: dict[str, Any] = {}
    rows_by_grid: dict[Path, dict[str, dict[str, Any]]] = defaultdict(dict)
    for (grid_dir, run, role, run_params), (spec, sim, replicas) in zip(jobs, islice(twins, len(jobs))):
        scenario = spec.scenario
        obs_summary = observed_summary(run)
        observed = _derived(obs_summary)
        each = [_derived(s) for s in replicas]
        simulated = ensemble_mean(each)
        errors = {m.name: vm.error(m, observed[m.name], simulated[m.name]) for m in vm.METRICS}
        # the naive baseline from the same scenario: what the caps alone say
        naive_sum = naive_summary(scenario)
        naive = {m.name: m.get(naive_sum) for m in vm.METRICS if m.name in NAIVE_METRICS}
        naive_errors = {m.name: vm.error(m, observed[m.name], naive[m.name]) for m in vm.METRICS
                        if m.name in NAIVE_METRICS}
        if observed.get("oom_killed") or simulated.get("oom_killed"):
            # an OOM-killed run (either side) has no comparable window: only the kill is compared
            errors = {k: (v if k == "oom_killed" else None) for k, v in errors.items()}
            naive_errors = {k: v for k, v in naive_errors.items() if k == "oom_killed"}
        regime, regime_inputs = run_regime(run, obs_summary)
        held_out = role in ("point", "repeat") and run.resolve() not in trained
        if role in ("point", "repeat") and not held_out:
            role_note = "training"
        else:
            role_note = role
        run_id = str(run.relative_to(root.parent)) if run != root else run.name
        manifest = run_manifest(run)
        tenants = pre_run_tenants_cores(manifest)
        steal = (manifest.get("host_cpu") or {}).get("steal_cores")   # during the window: reports only
        row = {"run": run_id, "grid": grid_dir.name, "role": role, "fit": role_note, "held_out": held_out,
               "calibrated_by": plan.calibrated_by.get(run, []),
               "regime": regime, "regime_inputs": regime_inputs, "path": str(run),
               "pre_run_tenants_cores": tenants, "steal_cores": steal,
               "host_state": host_state(tenants, steal),
               "scenario": {k: scenario.get(k) for k in SCENARIO_COLUMNS} | {
                   "cgroup.limit_schedule": scenario.get("cgroup.limit_schedule"),
                   "cgroup.memory_limit_mb": scenario.get("cgroup.memory_limit_mb")}
                   | {k: scenario.get(k) for k in GC_SCENARIO_KEYS},
               "twin": spec.as_dict(), "params": run_params,
               "observed": observed, "simulated": simulated, "errors": errors,
               "naive": naive, "naive_errors": naive_errors, "gc_regime": gc_regime(scenario)}
        if len(each) > 1:
            row["seeds"] = len(each)
            row["seed_spread"] = seed_spread(observed, each)
        kv = kernel_view(manifest, sim.summary)
        if kv is not None:
            row["kernel"] = kv
        if spec.vpa_in_the_loop:
            recorded = (manifest.get("cgroup") or {}).get("quota_changes") or []
            row["trajectory"] = compare_trajectories(recorded, sim.quota_changes)
        sims[run_id] = sim
        report_runs.append(row)
        rows_by_grid[grid_dir][run.name] = row
        if callable(progress):
            progress(run_id)
        elif progress:
            print(f"  {run_id} [{regime}]: " + ", ".join(
                f"{k} {v:+.3f}" for k, v in errors.items() if v is not None and k in
                ("throughput_per_s", "cpu_usage_cores", "throttled_ratio")), flush=True)
    grids: dict[str, dict[str, Any]] = {}
    for grid_dir, grid_runs in by_grid.items():
        roles, norm = _roles(grid_dir), norms[grid_dir]
        grid_rows = rows_by_grid[grid_dir]
        for run in grid_runs:
            if _role(run, roles) == "calibration" and not include_calibration:
                grid_rows[run.name] = {"role": "calibration", "observed": _derived(observed_summary(run))}
        grids[grid_dir.name] = {"cost_factor": norm.factor, "calibration_factors": norm.factors,
                                "gc_factor": norm.gc_factor, "calibration_gc_factors": norm.gc_factors,
                                "total_cost_factor": norm.total_factor,
                                "calibration_rounds_per_cpu_ms": norm.rounds_per_cpu_ms,
                                "drift": norm.drift, "client_rtt_ms": norm.rtt_ms,
                                "client_rtt_p99_ms": norm.rtt_p99_ms, "extra_live_mb": norm.extra_live_mb,
                                "extra_stw_us": norm.extra_stw_us, "client_cpu_us": norm.client_cpu_us,
                                "client_cpu_scale": norm.client_cpu_scale,
                                "server_alloc_kb": norm.server_alloc_kb,
                                "memory_path": norm.memory_path, "sysmon": norm.sysmon,
                                "calibration_heap_mb": norm.calibration_heap_mb,
                                **_noise(grid_rows)}
        spread = grid_seed_spread([r for r in grid_rows.values() if r.get("held_out")])
        if spread:
            grids[grid_dir.name]["seed_spread"] = spread
    by_regime, counts = summarise_by_regime(report_runs)
    return ValidationReport(report_runs, summarise_errors(report_runs), grids, sims, by_regime, counts,
                            gc_by_regime(report_runs), params=dict(params or {}))


def _memory_path_cell(path: Mapping[str, Any] | None) -> str:
    if not path:
        return ""
    return f"{_fmt(path.get('go.page_release_us'))} / {_fmt(path.get('host.tlb_shootdown_us'))}"


def _spread_cell(spread: Mapping[str, Any] | None) -> str:
    """``median / max`` of a metric's repeat spread, or empty when no point was repeated."""
    return f"{spread['median']:.3g} / {spread['max']:.3g}" if spread else ""


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
    lines = ["", "## GC and memory by GC regime, held-out runs (median |error| (n); cfsim.validation.gcmemory)",
             "", "In brackets the naive baseline's median |error| on the runs where it has a value: the textbook "
             "GC (cfsim.validation.naive.textbook_gc: goal = live + (live + roots) x GOGC/100 capped by GOMEMLIMIT, a "
             "cycle every goal - live bytes at the naive throughput, memory the saw-tooth's mean, killed when the "
             "goal is above the container limit).", "",
             "| GC regime | runs | " + " | ".join(GC_REGIME_METRICS) + " |",
             "|---" * (len(GC_REGIME_METRICS) + 2) + "|"]
    for name, g in regimes.items():
        cells = [(f"{g[m]['median_abs']:.3f} ({g[m]['n']})"
                  + (f" [{g[m]['naive']['median_abs']:.3f}]" if g[m].get("naive") else "")) if m in g else ""
                 for m in GC_REGIME_METRICS]
        lines.append(f"| {name} | {g['runs']} | " + " | ".join(cells) + " |")
    oom = report.gc.get("oom") or {}
    if any(oom.values()):
        lines += ["", "OOM kills (lab, model): " + ", ".join(f"{k}: {v}" for k, v in oom.items())]
    limiter = report.gc.get("limiter") or {}
    if any(limiter.values()):
        lines += ["", "GC CPU limiter turned on in the window (lab: the runtime's /gc/limiter/last-enabled "
                  "and /gc/cycles/total at its two ends; model: the twin's limiter): "
                  + ", ".join(f"{k}: {v}" for k, v in limiter.items())]
    oom_naive = report.gc.get("oom_naive") or {}
    if any(oom_naive.values()):
        lines += ["", "OOM kills (lab, naive: the textbook goal above the container limit): "
                  + ", ".join(f"{k}: {v}" for k, v in oom_naive.items())]
    points = report.gc.get("oom_points") or []
    if points:
        lines += ["", "OOM kills of the points run more than once (lab: killed of runs; model: the twins' "
                  "outcomes, 'near' = peak within 10 % of the limit)", "",
                  "| point | runs | lab killed | model oom / near / ok |", "|---|---|---|---|"]
        lines += [f"| {p['point']} | {p['runs']} | {p['lab_killed']} | "
                  f"{p['model']['oom']} / {p['model']['near']} / {p['model']['ok']} |" for p in points]
    designs = report.gc.get("oom_designs") or []
    if designs:
        lines += ["", "OOM kills by design over every grid that ran it (the lab's kill rate across days; model: the "
                  "twins' outcomes, 'near' = peak within 10 % of the limit)", "",
                  "| workload | GOMAXPROCS | live heap [MiB] | GOGC | GOMEMLIMIT [MiB] (policy) | memory limit [MiB] "
                  "| grids | runs | lab killed | model oom / near / ok |", "|---" * 10 + "|"]
        lines += [f"| {d['kind']} | {_fmt(d['gomaxprocs'])} | {_fmt(d['live_heap_mb'])} | {_fmt(d['gogc'])} | "
                  f"{_fmt(d['gomemlimit_mb'])} ({d['gomemlimit_policy']}) | {_fmt(d['memory_limit_mb'])} | {d['grids']} | "
                  f"{d['runs']} | {d['lab_killed']} | {d['model']['oom']} / {d['model']['near']} / {d['model']['ok']} |"
                  for d in designs]
    pauses = report.gc.get("pause_by_gomaxprocs") or []
    if pauses:
        lines += ["", "One stop of the world, lab against twin (the GC pause a second over the cycles a second and "
                  "the two stops a cycle; medians over held-out runs; 'capped': a cap decides the run)", "",
                  "| GOMAXPROCS | capped | runs | lab [us a stop] | model [us a stop] | model / lab (median of runs) |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {p['gomaxprocs']} | {'yes' if p['capped'] else 'no'} | {p['runs']} | {p['lab_us_per_stop']:g} | "
                  f"{p['model_us_per_stop']:g} | {p['model_over_lab']:.3f} |" for p in pauses]
        if any(p.get("cycle_p50_runs") for p in pauses):
            lines += ["", "A GC cycle's stop-the-world time as a dashboard shows it (go_gc_duration_seconds' 0.5 and 1 "
                      "quantiles over the last 256 cycles: the typical cycle and the longest), lab against twin; "
                      "medians of the same runs, model / lab the median of the runs' ratios", "",
                      "| GOMAXPROCS | capped | runs | typical: lab [us] | model [us] | model / lab | longest: lab [us] "
                      "| model [us] | model / lab |", "|---" * 9 + "|"]
            lines += [f"| {p['gomaxprocs']} | {'yes' if p['capped'] else 'no'} | {p['cycle_p50_runs']} | "
                      f"{_fmt(p['lab_us_cycle_p50'])} | {_fmt(p['model_us_cycle_p50'])} | {_fmt(p['cycle_p50_model_over_lab'])} | "
                      f"{_fmt(p['lab_us_cycle_max'])} | {_fmt(p['model_us_cycle_max'])} | {_fmt(p['cycle_max_model_over_lab'])} |"
                      for p in pauses if p.get("cycle_p50_runs")]
    return (lines + _spiral_markdown(report.gc.get("spiral") or {})
            + _spiral_markdown(report.gc.get("spiral_pooled") or {}, pooled=True))


def _spiral_markdown(spiral: Mapping[str, Any], pooled: bool = False) -> list[str]:
    """The death spiral's throughput ratios, lab against model, per grid and design
    (:func:`cfsim.validation.gcmemory.spiral_ratios`) or, ``pooled``, per design over the grids
    that ran it beside the spread of the lab's own per-grid ratios
    (:func:`cfsim.validation.gcmemory.spiral_ratios_pooled`)."""
    pairs, summary = spiral.get("pairs") or [], spiral.get("summary") or {}
    if not pairs:
        return []
    if pooled:
        intro = ("Death spiral pooled over grids (each design's ratios above averaged over the grids that ran both "
                 "of its sides: one grid's lab ratio is one draw of that day's host, e.g. of a big heap's mark speed; "
                 "'lab per grid' is their range)")
        unit = "designs"
    else:
        intro = ("Death spiral (GOMEMLIMIT near the live heap; throughput over the same design's at GOGC 100 "
                 "without a limit, means of held-out runs)")
        unit = "pairs"
    cols = (["workload"] if pooled else ["grid", "workload"]) + [
        "CPU limit", "GOMAXPROCS", "live heap [MiB]", "GOGC", "GOMEMLIMIT / live"] + (["grids"] if pooled else []) + [
        "runs (ref)", "lab"] + (["lab per grid"] if pooled else []) + ["model", "model / lab"]
    lines = ["", f"{intro}: the model's ratio within {summary['tolerance']:.0%} of the lab's in {summary['within']} "
             f"of {summary['pairs']} {unit} (median |model/lab - 1| {summary['median_abs_model_over_lab']:.3f})", "",
             "| " + " | ".join(cols) + " |", "|---" * len(cols) + "|"]
    for p in pairs:
        ratio = "" if p["model_over_lab"] is None else f"{p['model_over_lab']:.3f}" + ("" if p["within"] else " (out)")
        spread = "" if not p.get("lab_ratio_range") else "{:.3f}-{:.3f}".format(*p["lab_ratio_range"])
        cells = ([] if pooled else [str(p["grid"])]) + [
            str(p["kind"]), _fmt(p["cpu_limit"]), _fmt(p["gomaxprocs"]), _fmt(p["live_heap_mb"]), _fmt(p["gogc"]),
            _fmt(p["gomemlimit_over_live"])] + ([str(p["grids"])] if pooled else []) + [
            f"{p['runs']} ({p['reference_runs']})", f"{p['lab_ratio']:.3f}"] + ([spread] if pooled else []) + [
            f"{p['model_ratio']:.3f}", ratio]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


#: the metrics the seed-spread table shows
SEED_TABLE_METRICS = ("throughput_per_s", "cpu_usage_cores", "throttled_ratio", "gc_cpu_share", "latency_p50_s",
                      "latency_p99_s", "gc_cycles_per_s", "gc_heap_goal_mean_bytes", "memory_usage_mean_bytes")


def _seed_markdown(report: ValidationReport) -> list[str]:
    """Per grid, how far apart the errors of a run's twins at different seeds lie (``--seeds``)."""
    grids = {name: g["seed_spread"] for name, g in report.grids.items() if g.get("seed_spread")}
    if not grids:
        return []
    seeds = max((r.get("seeds", 1) for r in report.runs), default=1)
    lines = ["", f"## The twins' own noise: {seeds} seeds a run (cfsim.validation.ensemble)", "",
             "Each run's twin was simulated at its seed and the next ones; the errors above are those of the "
             "replicas' mean. Here, per grid, the median / max over its held-out runs of the spread (max - min) "
             "of the replicas' errors: a change between two validations smaller than this can be the seed alone.",
             "", "| grid | " + " | ".join(SEED_TABLE_METRICS) + " |", "|---" * (len(SEED_TABLE_METRICS) + 1) + "|"]
    for name, spread in grids.items():
        cells = [f"{spread[m]['median']:.3g} / {spread[m]['max']:.3g}" if m in spread else ""
                 for m in SEED_TABLE_METRICS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def _tails_markdown(report: ValidationReport) -> list[str]:
    """The tails check per grid and regime against its goals (:data:`cfsim.overheads.labcheck.GOALS`)."""
    from cfsim.overheads.labcheck import GOALS

    tails = report.tails()
    if not tails:
        return []
    lines = ["", "## Tails, held-out runs with a client latency (cfsim.overheads.labcheck)", "",
             "Median |error| of the throttled-period ratio (absolute), CPU and p50 (relative), and the median "
             "p99 factor max(model / lab, lab / model), each with its goal; p99 order: of the pairs of "
             "GOMAXPROCS settings at one design point whose repeats' p99 ranges do not overlap, how many the "
             "model orders the same way. The goals are judged on 'predicted' (uncapped and contended runs, "
             "where the model predicts): in a quota-capped run the kernel decides the CPU and the throttled "
             "ratio, and an open loop's queue grows for as long as the run lasts, so 'all' mixes agreement "
             "the cap makes with errors the queue makes. 'predicted, quiet host' and 'predicted, busy host' "
             "split them by the other tenants' CPU before the run (under or over 0.25 cores): the twins "
             "know those cores, but the tenants' weight only where the lab counted their tasks; 'predicted, "
             "stolen host' holds the runs the hypervisor took more than the lab's warning level from during the "
             "run, which no twin sees. In brackets "
             "the naive baseline's figure on the same runs (cfsim.validation.naive: no throttling below the "
             "limit, the request's CPU as its latency): a goal it meets as well does not test the model; the "
             "throttled ratio's median is one where most runs are not throttled, so beside it: the runs the lab "
             "throttled in more than that share of the periods, how many of them the twins throttled too, and "
             "the runs only the twins throttled.", "",
             f"| grid | regime | n | throttled ratio ({GOALS['throttled']}) | throttled > {GOALS['throttled']:g}: lab / "
             f"caught / false | CPU ({GOALS['cpu']:.0%}) | "
             f"p50 ({GOALS['p50']:.0%}) | p99 factor ({GOALS['p99_factor']}) | p99 order kept / separated pairs |",
             "|---|---|---|---|---|---|---|---|---|"]
    orders = {"all": "p99_order", "predicted": "p99_order_predicted"}
    naive_tails = report.tails("naive")

    def cell(t: Mapping[str, Any], nt: Mapping[str, Any], key: str) -> str:
        return _fmt(t.get(key)) + (f" [{_fmt(nt.get(key))}]" if nt.get(key) is not None else "")

    for grid, summary in tails.items():
        for regime, t in summary.items():
            if regime.startswith("p99_order"):
                continue
            nt = naive_tails.get(grid, {}).get(regime, {})
            order = summary.get(orders.get(regime, ""))
            norder = naive_tails.get(grid, {}).get(orders.get(regime, ""))
            kept = f"{order['kept']} / {order['separated_pairs']}" if order else ""
            if order and norder:
                kept += f" [{norder['kept']}]"
            d = t.get("throttled_detection") or {}
            detect = f"{d['lab']} / {d['caught']} / {d['false']}" if d else ""
            lines.append(f"| {grid} | {regime} | {t['n']} | {cell(t, nt, 'throttled')} | {detect} | "
                         f"{cell(t, nt, 'cpu')} | {cell(t, nt, 'p50')} | {cell(t, nt, 'p99_factor')} | {kept} |")
    return lines + _reversed_markdown(tails)


def _design_point(group: Any) -> str:
    """A p99-order group (the values of :data:`cfsim.overheads.labcheck.GROUP_KEYS`) as the keys
    that are set."""
    from cfsim.overheads.labcheck import GROUP_KEYS

    if not isinstance(group, (tuple, list)) or len(group) != len(GROUP_KEYS):
        return str(group)
    return ", ".join(f"{k.split('.', 1)[1]} {v:g}" if isinstance(v, float) else f"{k.split('.', 1)[1]} {v}"
                     for k, v in zip(GROUP_KEYS, group) if v is not None)


def _reversed_markdown(tails: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The pairs of GOMAXPROCS settings whose p99 order the model reverses where it predicts: what
    the 'p99 order' column counts, named."""
    rows = [(grid, r) for grid, summary in tails.items()
            for r in (summary.get("p99_order_predicted") or {}).get("reversed") or []]
    if not rows:
        return []
    lines = ["", "Where the model reverses the p99 order (predicted runs; the lab's range over the repeats, the "
             "model's mean; ms):", "",
             "| grid | design point | GOMAXPROCS | lab p99 | model p99 |", "|---|---|---|---|---|"]

    def ms(x: float) -> str:
        return f"{x * 1e3:.3g}" if x < 0.1 else f"{x * 1e3:,.0f}"

    for grid, r in rows:
        (g1, g2), (l1, l2), (m1, m2) = r["gomaxprocs"], r["lab_p99_s"], r["model_p99_s"]
        lines.append(f"| {grid} | {_design_point(r['group'])} | {g1} / {g2} | "
                     f"{ms(l1[0])}-{ms(l1[1])} / {ms(l2[0])}-{ms(l2[1])} | {ms(m1)} / {ms(m2)} |")
    return lines


def _growth_markdown(report: ValidationReport) -> list[str]:
    growth = report.gomaxprocs_growth()
    if not growth:
        return []
    naive = report.gomaxprocs_growth("naive")
    lines = ["", "## What GOMAXPROCS itself costs: CPU over the design point's lowest setting (held out, where the "
             "model predicts; cfsim.overheads.labcheck.gomaxprocs_growth)", "",
             "Within each design point, CPU at every GOMAXPROCS over CPU at its lowest, each side's mean over its "
             "repeats, on uncapped and contended runs. A run's CPU error mixes the grid's cost calibration with "
             "the runtime's costs; the ratio cancels what the settings share and keeps what grows with the Ps. "
             "'growth': median |ratio - 1|; 'error': median |model ratio / lab ratio - 1| [naive: no cost of "
             "GOMAXPROCS, ratio 1]; 'inside': pairs whose model ratio lies inside the lab's range over the "
             "repeats at that setting, of the pairs with repeats there.", "",
             "| grid | pairs (points) | lab growth | model growth | error [naive] | inside / with repeats | largest misses "
             "(GOMAXPROCS: lab / model) |", "|---|---|---|---|---|---|---|"]
    for grid, g in sorted(growth.items(), key=lambda kv: (kv[0] == "all", kv[0])):
        ng = naive.get(grid, {})
        worst = "; ".join((f"{_design_point(w['group'])}, " if g["points"] > 1 and grid != "all" else "")
                          + (f"{w['group'][0]}: " if grid == "all" else "")
                          + f"{w['gomaxprocs'][0]} -> {w['gomaxprocs'][1]}: {w['lab_ratio']:.2f} / {w['side_ratio']:.2f}"
                          for w in g["worst"])
        lines.append(f"| {grid} | {g['pairs']} ({g['points']}) | {_fmt(g['lab_growth'])} | {_fmt(g['side_growth'])} | "
                     f"{_fmt(g['error'])}" + (f" [{_fmt(ng.get('error'))}]" if ng.get("error") is not None else "")
                     + f" | {g['inside_repeats']} / {g['with_repeats']} | {worst} |")
    return lines


def _loop_share_markdown(report: ValidationReport) -> list[str]:
    shares = report.loop_share()
    if not shares:
        return []
    lines = ["", "## The loop's share of an item's CPU, lab against twins (no model; cfsim.validation.loopshare)", "",
             "Within each repeated design point, the slope of log(CPU an item) on log(the workload's start-up loop "
             "rounds): the share of an item's CPU that follows the loop (the rest is the server, the runtime and "
             "the GC). The twins take the rounds as an input, so theirs is the model's share. A host whose speed "
             "at start-up lasts into the window raises the lab's slope; a noisy start-up count lowers it.", "",
             "| grid | runs | lab slope (correlation) | twins' slope | start-up rounds spread (sd of log) |",
             "|---|---|---|---|---|"]
    for grid, v in shares.items():
        lines.append(f"| {grid} | {v['runs']} | {v['lab_slope']:.2f} ({_fmt(v['lab_corr'])}) | {v['twin_slope']:.2f} | "
                     f"{v['rounds_sd_log']:.3f} |")
    return lines


#: metrics shown in the per-regime tables (the others are in errors.csv and the JSON)
REGIME_TABLE_METRICS = ("throughput_per_s", "cpu_usage_cores", "throttled_ratio", "gc_cpu_share",
                        "latency_p50_s", "latency_p99_s")


#: metrics the naive baseline predicts (:mod:`cfsim.validation.naive`)
NAIVE_METRICS = REGIME_TABLE_METRICS + ("gomaxprocs", "gc_cycles_per_s", "gc_heap_goal_mean_bytes",
                                        "gc_heap_live_bytes", "memory_usage_mean_bytes", "memory_max_usage_bytes",
                                        "oom_killed")


#: the host-state table's metrics: the regime table's and the GC's cycles
HOST_STATE_METRICS = REGIME_TABLE_METRICS + ("gc_cycles_per_s",)


def _host_state_markdown(report: ValidationReport) -> list[str]:
    states = report.by_host_state()
    if len(states) < 2:
        return []
    lines = ["", "## By the host's state before the run (held-out runs but the oom-killed)", "",
             f"quiet: other tenants took less than {QUIET_TENANTS_CORES:g} cores before the workload started "
             "(host_cpu.pre_run.tenants_cores), busy: more, unknown: not recorded; stolen: whatever the "
             f"tenants, the hypervisor took more than {STEAL_WARN_CORES:g} cores of the VM's CPUs during the run "
             "(host_cpu.steal_cores), which nothing before the run sees and no twin has. The twins know the "
             "pre-run tenants, but not what kind they were: an error far larger on busy hosts is the host's as "
             "much as the model's.", ""]
    return lines + _errors_table("host", [(state, v["n"], v["errors"]) for state, v in states.items()],
                                 HOST_STATE_METRICS)


def _errors_table(label: str, rows: list[tuple[str, int, Mapping[str, Any]]], metrics: tuple[str, ...]) -> list[str]:
    """Markdown rows ``label | n runs | per metric: runs with a value, median |error|`` (and in
    brackets the naive baseline's median |error| on the runs where it has one)."""
    lines = [f"| {label} | n runs | " + " | ".join(f"{m} (n, median abs [naive])" for m in metrics) + " |",
             "|---|---|" + "---|" * len(metrics)]
    for name, n, errs in rows:
        cells = [(f"{e['n']}, {e['median_abs']:.4f}" + (f" [{e['naive']['median_abs']:.4f}]" if e.get("naive") else ""))
                 if (e := errs.get(m)) else "-" for m in metrics]
        lines.append(f"| {name} | {n} | " + " | ".join(cells) + " |")
    return lines


def _naive_markdown(report: ValidationReport) -> list[str]:
    """Where the model predicts, per regime and metric: the model against the naive baseline on
    the same runs, and whether the model adds anything there."""
    lines = ["", "## The model against the naive baseline (cfsim.validation.naive)", "",
             f"Naive: {NAIVE_DESCRIPTION}. It takes the twin's own scenario, so the two differ only by what "
             "cfsim models beyond the caps; a figure the naive model meets as well does not test the mechanisms. "
             "Per regime where the model predicts, on the runs where both have a value: the median |error| of "
             "each; for rates also the median factor max(sim / obs, obs / sim), because a relative error caps a "
             "prediction too low at -1 and the naive model predicts too low (no runtime CPU, no queue); and in "
             "how many runs each is the closer one (by the factor for rates, ties in neither). 'no skill': the "
             "naive model is as close by the median or closer in as many runs.", "",
             "| regime | metric | n | model median abs | naive median abs | model median factor | "
             "naive median factor | model closer | naive closer | |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    rows = 0
    for regime in PREDICTED:
        for m in REGIME_TABLE_METRICS:
            c = report.by_regime.get(regime, {}).get(m, {}).get("naive")
            if not c:
                continue
            own, base = (c["model_median_factor"], c["naive_median_factor"]) if "model_median_factor" in c \
                else (c["model_median_abs"], c["median_abs"])
            skill = own < base and c["model_closer"] > c["naive_closer"]
            lines.append(f"| {regime} | {m} | {c['n']} | {c['model_median_abs']:.4f} | {c['median_abs']:.4f} | "
                         f"{_fmt(c.get('model_median_factor'))} | {_fmt(c.get('naive_median_factor'))} | "
                         f"{c['model_closer']} | {c['naive_closer']} | {'' if skill else 'no skill'} |")
            rows += 1
    return lines if rows else []


#: a run below every cap counts as throttled when the lab's ratio of throttled periods exceeds this
#: (issue 14's goal for the ratio's median |error|)
THROTTLED_BELOW_LIMIT = 0.03


def throttled_below_limit(runs: list[dict[str, Any]], threshold: float = THROTTLED_BELOW_LIMIT) -> dict[str, Any]:
    """"Throttled while usage is below the limit", the most common complaint about CPU limits, as a
    detection table over the held-out runs where the model predicts (uncapped, contended): runs the
    lab throttled in more than ``threshold`` of the periods and runs it did not, against whether the
    twin did; and on the lab's throttled runs the median |error| of the model and of the naive
    baseline (which never throttles below the limit). The median over all predicted runs cannot
    show this: most are not throttled, and a model that never throttles meets it.

    >>> rows = [{"held_out": True, "role": "point", "regime": "uncapped",
    ...          "observed": {"throttled_ratio": o}, "simulated": {"throttled_ratio": s},
    ...          "errors": {"throttled_ratio": s - o}, "naive_errors": {"throttled_ratio": -o}}
    ...         for o, s in ((0.2, 0.1), (0.1, 0.0), (0.0, 0.0), (0.0, 0.05))]
    >>> t = throttled_below_limit(rows)
    >>> t["lab throttled, model throttled"], t["lab throttled, model not"], t["lab not, model throttled"]
    (1, 1, 1)
    >>> round(t["model_median_abs_on_lab_throttled"], 6), round(t["naive_median_abs_on_lab_throttled"], 6)
    (0.1, 0.15)
    """
    out: dict[str, Any] = {"threshold": threshold, "lab throttled, model throttled": 0, "lab throttled, model not": 0,
                           "lab not, model throttled": 0, "lab not, model not": 0}
    on_lab: list[tuple[float, float]] = []
    for r in runs:
        if not r.get("held_out") or r.get("regime") not in PREDICTED or r.get("role") not in ("point", "repeat"):
            continue
        o, m = r["observed"].get("throttled_ratio"), r["simulated"].get("throttled_ratio")
        if o is None or m is None:
            continue
        lab, model = o > threshold, m > threshold
        out[f"lab {'throttled' if lab else 'not'}, model {'throttled' if model else 'not'}"] += 1
        naive = (r.get("naive_errors") or {}).get("throttled_ratio")
        if lab and naive is not None:
            on_lab.append((abs(r["errors"]["throttled_ratio"]), abs(naive)))
    if on_lab:
        out["model_median_abs_on_lab_throttled"] = float(np.median([a for a, _ in on_lab]))
        out["naive_median_abs_on_lab_throttled"] = float(np.median([b for _, b in on_lab]))
    return out


def _throttled_below_markdown(report: ValidationReport) -> list[str]:
    t = throttled_below_limit(report.runs)
    lab_n = t["lab throttled, model throttled"] + t["lab throttled, model not"]
    if not lab_n and not t["lab not, model throttled"]:
        return []
    lines = ["", f"### Throttled below the limit (more than {t['threshold']:g} of the periods, where the model "
             "predicts)", "",
             "Most predicted runs are not throttled, so the median above is met by a model that never throttles "
             "(the naive one). Here the runs the lab throttled, and those the twin throttled, apart.", "",
             "| | model throttled | model not |", "|---|---|---|",
             f"| lab throttled | {t['lab throttled, model throttled']} | {t['lab throttled, model not']} |",
             f"| lab not | {t['lab not, model throttled']} | {t['lab not, model not']} |"]
    if "model_median_abs_on_lab_throttled" in t:
        lines += ["", f"On the {lab_n} runs the lab throttled: median |error| of the throttled ratio "
                  f"{t['model_median_abs_on_lab_throttled']:.3f} (model), "
                  f"{t['naive_median_abs_on_lab_throttled']:.3f} (naive: the lab's own ratio)."]
    return lines


def _regime_table(report: ValidationReport, regimes: tuple[str, ...]) -> list[str]:
    return _errors_table("regime", [(r, report.regime_counts.get(r, 0), report.by_regime.get(r, {})) for r in regimes],
                         REGIME_TABLE_METRICS)


def _params_line(params: Mapping[str, Any]) -> str:
    """Which model parameters the twins took beyond today's defaults, so that a report says how
    to reproduce it (each grid's cost and GC factors then scale some of them: the grid table).

    >>> _params_line({})
    "Model parameters: today's defaults (no --params)."
    >>> _params_line({"go.gc_parallel_cost": 0.766337, "host.context_switch_us": 17.9})
    'Model parameters beyond the defaults (--params): `go.gc_parallel_cost = 0.766337`, `host.context_switch_us = 17.9`.'
    """
    if not params:
        return "Model parameters: today's defaults (no --params)."
    return "Model parameters beyond the defaults (--params): " + ", ".join(
        f"`{k} = {v:.6g}`" if isinstance(v, float) else f"`{k} = {v}`" for k, v in sorted(params.items())) + "."


def to_markdown(report: ValidationReport) -> str:
    held = sum(1 for r in report.runs if r["held_out"])
    training = sum(1 for r in report.runs if r["fit"] == "training")
    lines = ["# cfsim validation", "",
             f"{held} held-out runs (no fit touched them; calibration runs only set each grid's cost factor)"
             + (f", {training} training runs (reported apart)" if training else "") + ".", "",
             _params_line(report.params), "",
             f"Calibration runs: {CALIBRATION_TEXT.get(report.calibration, report.calibration)}.", "",
             "## Headline: where the model predicts", "",
             "Uncapped runs (no cap decided their CPU) and contended runs (other processes on a saturated "
             "host): n runs, and per metric the number of runs with a value and the median |error| "
             "(relative for rates, absolute for ratios); in brackets the naive baseline's (min(demand, caps), "
             "next section).", ""]
    lines += _regime_table(report, PREDICTED)
    clean = report.headline_without_steal()
    if any(clean[r]["n"] != report.regime_counts.get(r, 0) for r in PREDICTED):
        lines += ["", "The same without the runs the hypervisor stole from during the run (host state 'stolen', "
                  "more than the lab's warning level; their CPU and latency carry what another guest took, which "
                  "nothing before a run tells: the host-state table below has them apart):", ""]
        lines += _errors_table("regime", [(r, clean[r]["n"], clean[r]["errors"]) for r in PREDICTED],
                               REGIME_TABLE_METRICS)
    lines += _naive_markdown(report)
    lines += _throttled_below_markdown(report)
    lines += ["", "## Every regime", "",
              "In the capped regimes a cap (quota, GOMAXPROCS, host CPUs) decides the CPU: their agreement "
              "checks the cap, not the model's prediction. Runs the OOM killer ended in the lab (oom-killed) have "
              "no window to compare: listed, in no other table; whether their twins were killed too is in "
              "the GC and memory section's OOM count.", ""]
    lines += _regime_table(report, REGIMES)
    lines += ["", "## Errors over all held-out runs" + (" (but the oom-killed)" if report.regime_counts.get(
        "oom-killed") else ""), "",
              "The lab's own repeatability is beside each error: the spread between runs of one configuration "
              "((max - min) / mean, or max - min for ratios; median over the repeated points, their number in "
              "brackets). An error below it cannot be told from the lab's noise.", "",
              "| metric | kind | median | median abs | worst | worst run | n | goal | lab repeat spread (points) |",
              "|---|---|---|---|---|---|---|---|---|"]
    noise = pooled_noise(report.grids)
    for name, e in report.errors.items():
        nz = noise.get(name)
        nz_text = f"{nz['median']:.4f} ({nz['points']})" if nz else ""
        lines.append(f"| {name} | {e['kind']} | {e['median']:+.4f} | {e['median_abs']:.4f} | {e['worst']:+.4f} | "
                     f"{e['worst_run']} | {e['n']} | {_fmt(e['goal'])} | {nz_text} |")
    lines += _host_state_markdown(report)
    lines += _gc_markdown(report)
    lines += _tails_markdown(report)
    lines += _growth_markdown(report)
    lines += _loop_share_markdown(report)
    if report.against:
        from cfsim.validation.against import to_markdown as against_markdown

        lines += against_markdown(report.against, f"`{report.against.get('baseline', 'the earlier validation')}`")
    loops = [r for r in report.runs if r.get("trajectory")]
    if loops:
        lines += ["", "## Hardware in the loop: VPA resize trajectory (lab vs twin's own VPA)", "",
                  "| run | resizes lab / twin | median abs dt [s] | median abs limit error | final limit lab / twin |",
                  "|---|---|---|---|---|"]
        for r in loops:
            t = r["trajectory"]
            lines.append(f"| {r['run']} | {t['resizes_lab']} / {t['resizes_sim']} | {_fmt(t['median_abs_dt_s'])} | "
                         f"{_fmt(t['median_abs_limit_error'])} | {_fmt(t['final_limit_lab_cores'])} / "
                         f"{_fmt(t['final_limit_sim_cores'])} |")
    kernel = [r for r in report.runs if r.get("kernel")]
    if kernel:
        lines += ["", "## The kernel's side (runs recorded with lab.perf_s; a diagnostic, no goal)", "",
                  "perf counts every context switch of the workload's threads (voluntary and involuntary) and "
                  "the system calls an M sleeps in (futex, nanosleep, epoll_pwait). The twin's Ms wake and park "
                  "(startm/stopm); a twin on time-sliced CPUs (host.cpu_sharing = 'slices') also counts its "
                  "switches between threads, preemptions by the load generator included (a fluid twin has none).", "",
                  "| run | GOMAXPROCS | lab context switches/s | lab sleeping syscalls/s | lab kernel CPU share | "
                  "twin M wake-ups + parks/s | twin context switches/s |", "|---|---|---|---|---|---|---|"]
        for r in kernel:
            k = r["kernel"]
            lines.append(f"| {r['run']} | {_fmt(r['scenario'].get('go.gomaxprocs'))} | "
                         f"{_fmt(k['lab_context_switches_per_s'])} | {_fmt(k['lab_sleep_syscalls_per_s'])} | "
                         f"{_fmt(k['lab_kernel_fraction'])} | {_fmt(k['model_thread_switches_per_s'])} | "
                         f"{_fmt(k.get('model_context_switches_per_s'))} |")
    lines += ["", "## Grid noise (measured) and what the calibration runs gave the twins", ""]
    if report.calibration == "latest":
        lines += ["With `--calibration latest` each twin took the factors and priors of its own calibration run "
                  "(the runs' `calibrated_by` in report.json); the columns below are those of the grid's "
                  "calibration runs together (of all of them, or, when only some runs were validated, of those "
                  "their twins took).", ""]
    lines += [
              "Repeat spreads: median / max over the grid's repeated points (relative; throttled ratio absolute).", "",
              "Cost factor: the workload's CPU per item on the grid's host over its twin's (from the user "
              "class of /cpu/classes where the calibration runs recorded it); GC factor: the GC's mark CPU per "
              "cycle over its twin's (blank: the cost factor serves the GC too; where the calibration runs' heap "
              "outgrew the cache, the twins' scan is scaled so that their own twins mark at that speed, "
              "cfsim.validation.normalise.missed_heap_scale). Both at the workload's busy-loop "
              "rounds per CPU-ms its calibration runs measured at start-up (loop rounds); each run's twin scales "
              "the per-item CPU by its own start-up rounds over these (cfsim.validation.normalise.startup_rounds), "
              "and the drift is what is left between the calibration runs. Load generator: its CPU a request on "
              "the calibration runs (median) and that over the lab's curve at their mode and rate "
              "(cfsim.lab.loadgen_cost); each twin takes the curve at its own mode and rate times the latter. "
              "Request garbage: what serving a request allocates beside the handler on the calibration runs "
              "(workload.server_alloc_kb_per_request of the twins; cfsim.validation.normalise.server_alloc_kb). "
              "Memory path: a page released and a TLB shootdown [us] as faultbench measured them before the "
              "calibration runs (grids since 2026-12-02; the twins take both, a page fault's price stays as given: "
              "cfsim.validation.calibrate.memory_path_overrides); blank: the parameters stand.", "",
              "| grid | cost factor | GC factor | loop rounds [1/ms] | calibration drift | repeated points | throughput | CPU | "
              "throttled ratio | p99 latency | GC cycles/s | client rtt p50 / p99 [ms] | extra live heap [MiB] | "
              "extra STW [us] | load generator [us/request] / over its curve | request garbage [KiB] | "
              "memory path: release / shootdown [us] |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, g in report.grids.items():
        nz = g.get("noise", {})
        spreads = " | ".join(_spread_cell(nz.get(m)) for m in ("throughput_per_s", "cpu_usage_cores", "throttled_ratio",
                                                                 "latency_p99_s", "gc_cycles_per_s"))
        lines.append(f"| {name} | {_fmt(g['cost_factor'])} | {_fmt(g.get('gc_factor'))} | "
                     f"{_fmt(g.get('calibration_rounds_per_cpu_ms'))} | {_fmt(g['drift'])} | "
                     f"{len(g.get('repeat_spreads', {}))} | "
                     f"{spreads} | "
                     f"{_fmt(g.get('client_rtt_ms'))} / {_fmt(g.get('client_rtt_p99_ms'))} | "
                     f"{_fmt(g.get('extra_live_mb'))} | {_fmt(g.get('extra_stw_us'))} | "
                     f"{_fmt(g.get('client_cpu_us'))} / {_fmt(g.get('client_cpu_scale'))} | "
                     f"{_fmt(g.get('server_alloc_kb'))} | {_memory_path_cell(g.get('memory_path'))} |")
    lines += _seed_markdown(report)
    lines += ["", "## Runs", "", "| run | regime | limit | GOMAXPROCS | HZ | contention | throughput obs / sim | "
              "CPU obs / sim | throttled obs / sim |", "|---|---|---|---|---|---|---|---|---|"]
    for r in report.runs:
        o, s = r["observed"], r["simulated"]
        tw = r["twin"]
        hz = f"{tw['host.hz']}" + ("" if tw["hz"] == "recorded" else f" ({tw['hz']})")
        lines.append(f"| {r['run']} | {r['regime']}{'' if r['held_out'] else ' (' + r['fit'] + ')'} | "
                     f"{_fmt(r['scenario']['cgroup.cpu_limit'])} | "
                     f"{_fmt(r['scenario']['go.gomaxprocs'])} | {hz} | {tw['contention']} | "
                     f"{_fmt(o['throughput_per_s'])} / {_fmt(s['throughput_per_s'])} | "
                     f"{_fmt(o['cpu_usage_cores'])} / {_fmt(s['cpu_usage_cores'])} | "
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
