"""Plan a sweep, run it on an executor and store every run as it finishes.

>>> from cfsim.sweep import Grid, parse_axis, run_sweep
>>> import tempfile
>>> out = tempfile.mkdtemp()
>>> report = run_sweep("cpu-bound-threads", Grid([parse_axis("cgroup.cpu_limit=1:2:0.5")]),
...                    out=out, seeds=2, workers=0, point_fn="cfsim.testing:toy_point",
...                    progress=False)
>>> report.computed, report.ok, report.errors
(6, 6, 0)
"""
from __future__ import annotations

import functools
import importlib
import json
import subprocess
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from cfsim.scenario import Scenario, load_scenario
from cfsim.scenario.schema import SCHEMA
from cfsim.sweep.executors import Executor, ExecutorUnavailable, make_executor
from cfsim.sweep.grid import Grid, GridError
from cfsim.sweep.progress import Progress
from cfsim.sweep.seeds import point_id, run_seed
from cfsim.sweep.store import (RunStore, StoreError, bucket_of, dependency_versions, n_buckets_for,
                               rows_schema)

__all__ = ["RunTask", "SweepReport", "plan_runs", "execute_run", "run_sweep", "resolve_point_fn",
           "DEFAULT_POINT_FN", "FORMAT"]

FORMAT = "cfsim-sweep/1"
DEFAULT_POINT_FN = "cfsim.sweep.runner:simulate_summary"
PointFn = Callable[[Scenario], Mapping[str, Any]]


def simulate_summary(scenario: Scenario) -> Mapping[str, Any]:
    """The default point function: ``cfsim.simulation.simulate(scenario).summary``."""
    from cfsim.simulation import simulate

    return simulate(scenario).summary


def resolve_point_fn(spec: str | PointFn | None) -> tuple[PointFn, str]:
    """A point function and its ``module:name`` (recorded in the manifest)."""
    if spec is None:
        spec = DEFAULT_POINT_FN
    if spec == DEFAULT_POINT_FN:
        # import the engine here, before workers fork, so no worker pays for the import
        importlib.import_module("cfsim.simulation")
    if callable(spec):
        return spec, f"{spec.__module__}:{spec.__qualname__}"
    module, _, name = spec.partition(":")
    if not name:
        raise ValueError(f"a point function must be given as module:function (got {spec!r})")
    fn = getattr(importlib.import_module(module), name)
    return fn, spec


@dataclass(frozen=True)
class RunTask:
    """One run: a grid point with one replicate seed. Small and picklable."""

    run_id: str
    point_id: str
    point_index: int
    replicate: int
    seed: int
    point: tuple[tuple[str, Any], ...]
    bucket: int


def plan_runs(grid: Grid, seeds: int, root_seed: int, n_buckets: int) -> list[RunTask]:
    """Every run of the study in grid order (point-major, then replicate)."""
    tasks = []
    for index, point in enumerate(grid.points()):
        pid = point_id(point)
        for rep in range(seeds):
            tasks.append(RunTask(f"{pid}-{rep}", pid, index, rep, run_seed(root_seed, point, rep),
                                 tuple(point.items()), bucket_of(pid, n_buckets)))
    return tasks


def _any_kinds(base: Scenario, grid: Grid) -> dict[str, str]:
    """Column kind of each ``any``-typed key: numeric if every value in the sweep is a number."""
    out = {}
    axes = {a.key: a.values for a in grid.axes}
    for section, keys in SCHEMA.items():
        for name, spec in keys.items():
            if spec.kind != "any":
                continue
            key = f"{section}.{name}"
            values = list(axes.get(key, ())) + [base.get(key)]
            values = [v for v in values if v is not None]
            if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
                out[key] = "int"
            elif values and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
                out[key] = "float"
            else:
                out[key] = "str"
    return out


def _cell(key: str, value: Any, any_kinds: Mapping[str, str]) -> Any:
    """A scenario value normalised to its column type (see :func:`cfsim.sweep.store.column_type`)."""
    if value is None:
        return None
    section, name = key.split(".", 1)
    kind = SCHEMA[section][name].kind
    if kind == "any":
        kind = any_kinds.get(key, "str")
    try:
        if kind == "float" and not isinstance(value, bool):
            return float(value)
        if kind == "int" and not isinstance(value, bool):
            return int(value)
        if kind == "bool" and isinstance(value, bool):
            return value
    except (TypeError, ValueError):
        pass
    if kind in ("float", "int", "bool"):
        return None  # an invalid value: the error column says what it was
    return value if isinstance(value, str) else json.dumps(value)


def _result_cell(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    return json.dumps(value, default=str)


@dataclass(frozen=True)
class _Context:
    base: Scenario
    point_fn: PointFn
    any_kinds: Mapping[str, str]
    scenario_keys: tuple[str, ...]


def execute_run(task: RunTask, ctx: _Context) -> dict[str, Any]:
    """Run one task and return its row. Never raises for a bad point: the row says what failed."""
    t0 = time.perf_counter()
    overrides = list(task.point) + [("run.seed", task.seed)]
    row: dict[str, Any] = {"run_id": task.run_id, "point_id": task.point_id,
                           "point_index": task.point_index, "seed": task.replicate,
                           "status": "ok", "error": None, "scenario_toml": None, "wall_s": None}
    scenario: Scenario | None = None
    summary: Mapping[str, Any] = {}
    try:
        scenario = ctx.base.with_overrides(overrides)
        summary = ctx.point_fn(scenario)
    except Exception as exc:  # noqa: BLE001 - recorded in the row, the sweep goes on
        row["status"] = "error"
        tb = traceback.extract_tb(exc.__traceback__)
        where = f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
        row["error"] = f"{type(exc).__name__}: {exc}{where}"
        if scenario is not None:
            row["scenario_toml"] = scenario.to_toml()
        else:  # the combination itself is invalid: keep what was asked for
            raw = ctx.base.to_dict()
            for key, value in overrides:
                section, name = key.split(".")
                raw.setdefault(section, {})[name] = value
            import tomli_w

            row["scenario_toml"] = tomli_w.dumps(raw)
    flat = scenario.flat() if scenario is not None else {**ctx.base.flat(), **dict(overrides)}
    for key in ctx.scenario_keys:
        row[key] = _cell(key, flat.get(key), ctx.any_kinds)
    for key, value in summary.items():
        name = key if key not in row else f"result.{key}"
        row[name] = _result_cell(value)
    row["wall_s"] = time.perf_counter() - t0
    return row


@dataclass
class SweepReport:
    out: str
    total: int = 0
    skipped: int = 0      # already on disk (resume)
    computed: int = 0
    ok: int = 0
    errors: int = 0
    lost: int = 0         # runs the executor lost (a worker died); no row, --resume retries them
    wall_s: float = 0.0
    executor: str = ""
    workers: int = 0
    first_errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _git_hash() -> str | None:
    try:
        root = Path(__file__).resolve().parents[3]
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5)
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _study_manifest(base: Scenario, grid: Grid, seeds: int, root_seed: int, n_buckets: int,
                    any_kinds: Mapping[str, str], scenario_keys: Sequence[str], fn_name: str,
                    n_runs: int) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "scenario": {"source": base.source, "overrides": list(base.overrides), "toml": base.to_toml()},
        "grid": grid.to_json(),
        "seeds": seeds,
        "root_seed": root_seed,
        "n_points": len(grid),
        "n_runs": n_runs,
        "n_buckets": n_buckets,
        "point_fn": fn_name,
        "any_kinds": dict(any_kinds),
        "scenario_columns": list(scenario_keys),
        "versions": dependency_versions(),
        "git": _git_hash(),
        "created_utc": _now(),
        "completed_utc": None,
        "counts": None,
    }


_IDENTITY = ("grid", "seeds", "root_seed", "point_fn")


def _check_same_study(old: Mapping[str, Any], new: Mapping[str, Any], out: str) -> None:
    for key in _IDENTITY:
        if json.dumps(old.get(key), sort_keys=True) != json.dumps(new.get(key), sort_keys=True):
            raise StoreError(f"{out} holds a different sweep ({key} differs: {old.get(key)!r} there, "
                             f"{new.get(key)!r} now); use a new --out, or --resume without changing it")
    if old["scenario"]["toml"] != new["scenario"]["toml"]:
        raise StoreError(f"{out} holds a sweep of a different base scenario; use a new --out, "
                         f"or --resume with the same scenario, --set overrides and --params files")


def run_sweep(scenario: str | Path | Scenario | Mapping[str, Any] | None, grid: Grid | None = None, *,
              out: str | Path, seeds: int = 1, root_seed: int | None = None,
              overrides: Iterable[str | tuple[str, Any]] = (), workers: int | None = None,
              dask: str | None = None, executor: Executor | None = None,
              point_fn: str | PointFn | None = None, resume: bool = False, overwrite: bool = False,
              progress: bool = True, compact: bool = True) -> SweepReport:
    """Run (or resume) a sweep and write it to ``out``.

    ``scenario`` may be None with ``resume=True``: the study is read back from the manifest.
    The root seed defaults to the base scenario's ``run.seed``, so the same command gives the
    same results; pass ``root_seed`` for independent repetitions.
    """
    fn, fn_name = resolve_point_fn(point_fn)  # imports cfsim.simulation (and its keys) first
    out = str(out)
    store = RunStore(out)
    if overwrite and not resume and store.has_manifest():
        store.delete()
    old = store.read_manifest() if store.has_manifest() else None
    if old is not None and not resume:
        raise StoreError(f"{out} already holds a sweep; add --resume to finish it, --overwrite to start "
                         f"again, or choose a new --out")
    if old is not None and old.get("format") != FORMAT:
        raise StoreError(f"{out}: unknown sweep format {old.get('format')!r}")
    if scenario is None:
        if old is None:
            raise StoreError(f"{out}: nothing to resume (no manifest.json); give a scenario and a grid")
        import tomllib

        base = load_scenario(tomllib.loads(old["scenario"]["toml"]))
        base.source = old["scenario"]["source"]
        base.overrides = list(old["scenario"]["overrides"])
        grid = Grid.from_json(old["grid"])
        seeds = int(old["seeds"])
        root_seed = int(old["root_seed"])
        if point_fn is None:
            fn, fn_name = resolve_point_fn(old["point_fn"])
    else:
        overrides = list(overrides)
        if isinstance(scenario, Scenario):
            base = scenario.with_overrides(overrides) if overrides else scenario
        else:
            base = load_scenario(scenario, overrides)
        if grid is None:
            grid = Grid()
        if old is not None and root_seed is None:
            root_seed = int(old["root_seed"])
    if seeds < 1:
        raise GridError("seeds", f"must be >= 1 (got {seeds})")
    if "run.seed" in grid.keys:
        raise GridError("run.seed", "is set per run from the root seed; use --seeds N (and --root-seed)")
    grid.validate_against(base)
    if root_seed is None:
        root_seed = int(base["run.seed"])

    ex = executor or make_executor(workers, dask)  # a missing Dask fails before anything is written
    n_runs = len(grid) * seeds
    n_buckets = int(old["n_buckets"]) if old is not None else n_buckets_for(n_runs)
    any_kinds = _any_kinds(base, grid)
    scenario_keys = tuple(sorted(base.flat()))
    manifest = _study_manifest(base, grid, seeds, root_seed, n_buckets, any_kinds, scenario_keys,
                               fn_name, n_runs)
    if old is not None:
        _check_same_study(old, manifest, out)
        manifest = {**old, "versions_resumed": manifest["versions"], "resumed_utc": _now()}
        any_kinds = old["any_kinds"]
        scenario_keys = tuple(old["scenario_columns"])
    else:
        store.write_manifest(manifest)
    store.prepare(n_buckets)
    store.clean()
    store.configure(rows_schema(scenario_keys, any_kinds))

    tasks = plan_runs(grid, seeds, root_seed, n_buckets)
    done = store.done_run_ids() if old is not None else set()
    todo = [t for t in tasks if t.run_id not in done]
    report = SweepReport(out=out, total=len(tasks), skipped=len(tasks) - len(todo))
    ctx = _Context(base, fn, dict(any_kinds), scenario_keys)
    runner = functools.partial(execute_run, ctx=ctx)

    t0 = time.perf_counter()
    try:
        ex.__enter__()
    except ExecutorUnavailable:
        if old is None:  # nothing ran: leave no half-made sweep behind
            store.delete()
        raise
    try:
        with ex, Progress(total=len(tasks), initial=report.skipped, enabled=progress) as bar:
            report.executor, report.workers = ex.name, ex.workers
            for task, row, exc in ex.imap_unordered(runner, todo):
                if exc is not None:  # the executor lost the run (a worker died): no row, --resume retries
                    report.lost += 1
                    if len(report.first_errors) < 5:
                        report.first_errors.append(f"{dict(task.point)} seed {task.replicate}: lost: "
                                                   f"{type(exc).__name__}: {exc}")
                    continue
                store.write_run(row, task.bucket)
                report.computed += 1
                if row["status"] == "ok":
                    report.ok += 1
                else:
                    report.errors += 1
                    if len(report.first_errors) < 5:
                        report.first_errors.append(f"{dict(task.point)} seed {task.replicate}: {row['error']}")
                bar.update(row)
    except KeyboardInterrupt:
        # Ctrl-C: what finished is on disk; fold its journal into Parquet so that any reader
        # opens the runs folder, and let --resume compute the rest
        if compact:
            store.compact()
        raise
    report.wall_s = time.perf_counter() - t0
    if compact:
        store.compact()
    table = store.read_table()
    counts = {str(k): int(v) for k, v in zip(*_value_counts(table.column("status").to_pylist()))}
    manifest.update(completed_utc=_now(), counts=counts)
    store.write_manifest(manifest)
    return report


def _value_counts(values: list[Any]) -> tuple[list[Any], list[int]]:
    counts: dict[Any, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return list(counts), list(counts.values())
