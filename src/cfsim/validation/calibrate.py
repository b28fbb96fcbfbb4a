"""Fit the parameters the stories do not state, on training runs only, with uncertainty.

The fitted parameters are a per-item CPU factor (``cost_factor``: the workload's real cost per
record or request, beyond the nominal busy loop: channel operations, allocation, metrics) and any
``section.key`` of the Go runtime's cost parameters (GC scan rate, per-cycle cost, scheduler costs
per P and per wake-up). Residuals are the validation errors of throughput, CPU usage, throttled
ratio and GC share on the training runs; scipy's ``least_squares`` fits them in log space within
bounds, starting from the best point of a coarse search over the bounds (the twins' errors move
in steps, a GC cycle or a throttled period at a time, and finite differences see no slope inside
a step), and the Jacobian at the optimum gives a 1-sigma multiplicative uncertainty. Runs
selected for validation are never used in the fit.
"""
from __future__ import annotations

import itertools
import math
import operator
import re
import tomllib
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import tomli_w
from scipy.optimize import least_squares

from cfsim.goruntime.runtime import cache_missed_share
from cfsim.scenario import Scenario, parse_value
from cfsim.scenario.schema import SCHEMA
from cfsim.validation import metrics as vm
from cfsim.validation.normalise import (cache_held_share, calibration_overrides, grid_norm, grid_priors,
                                       missed_heap_scale)
from cfsim.validation.twin import (DEFAULT_CALIBRATION, find_runs, is_calibration_run, observed_summary,
                                   pre_run_tenants_cores, run_manifest, run_scenario, runs_with_calibration,
                                   calibration_runs_for, twin)

#: parameter -> (lower, upper) bounds; the defaults calibrated when none are named
DEFAULT_PARAMS: dict[str, tuple[float, float]] = {
    "cost_factor": (0.5, 2.0),
    "go.gc_scan_mb_per_ms": (0.05, 20.0),
    "go.sched_spin_per_p_us": (0.01, 20.0),
}
#: bounds of other parameters a user may name with --param (not fitted unless named)
PARAM_BOUNDS: dict[str, tuple[float, float]] = {
    "go.gc_parallel_cost": (0.01, 5.0),
    "go.gc_cycle_per_p_us": (0.1, 2000.0),
    "go.gc_cycle_base_us": (0.1, 20000.0),
    "go.roots_mb": (0.01, 64.0),
    "go.mem_base_mb": (0.1, 100.0),
    "go.mem_metadata_fraction": (0.001, 0.3),
    "go.mem_frag_fraction": (0.001, 1.0),
    "go.page_release_us": (0.01, 100.0),
    "host.tlb_shootdown_us": (0.0, 1000.0),
}
#: above this 1-sigma (log) the data say nothing about a parameter (a factor of e^5 ~ 150)
MAX_SIGMA_LOG = 5.0
RESIDUAL_METRICS = ("throughput_per_s", "cpu_usage_cores", "throttled_ratio", "gc_cpu_share")
#: residuals for the GC and memory parameters (issue 19): what the gc-memory grid measures
GC_MEMORY_RESIDUALS = ("throughput_per_s", "gc_cycles_per_s", "gc_heap_goal_mean_bytes", "memory_usage_mean_bytes")
#: metrics that count discrete events: a shortened twin's window holds too few of them (a 256 MiB heap
#: at GOGC 200 runs ~0.6 cycles/s, so 8 s of window count 4 or 5 and one cycle more or less is
#: 20 %), so a fit on any of them simulates each training run for its whole duration
WHOLE_RUN_METRICS = ("gc_cycles_per_s",)
_OPS = {"<=": operator.le, ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
        "<": operator.lt, ">": operator.gt}
_CLAUSE = re.compile(r"^\s*([a-z_]+\.[a-z_0-9]+)\s*(<=|>=|==|!=|<|>)\s*(.+?)\s*$")


def parse_selector(expr: str):
    """``'cgroup.cpu_limit<=1 and go.gomaxprocs==2'`` -> predicate on a scenario.

    >>> pred = parse_selector("cgroup.cpu_limit<=1")
    >>> pred({"cgroup.cpu_limit": 0.5}), pred({"cgroup.cpu_limit": 1.5}), pred({"cgroup.cpu_limit": None})
    (True, False, False)
    """
    clauses = []
    for part in re.split(r"\s+and\s+", expr.strip()):
        m = _CLAUSE.match(part)
        if not m:
            raise ValueError(f"--train: cannot read {part!r}; write e.g. 'cgroup.cpu_limit<=1' "
                             f"(operators <= >= == != < >, joined with 'and')")
        key, op, raw = m.groups()
        clauses.append((key, _OPS[op], parse_value(raw, key)))

    def predicate(values: Mapping[str, Any]) -> bool:
        for key, op, want in clauses:
            have = values.get(key)
            try:
                if have is None or not op(have, want):
                    return False
            except TypeError:
                return False
        return True
    return predicate


@dataclass
class Calibration:
    params: dict[str, float]
    sigma_log: dict[str, float]
    train_runs: list[str]
    cost: float
    nfev: int
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: parameters held at given values during the fit (measured ones, e.g. ``cfsim lab tlb``)
    fixed: dict[str, float] = field(default_factory=dict)
    #: parameters held at given values and written with the fit (``--param KEY=VALUE``): part of it
    held: dict[str, float] = field(default_factory=dict)
    #: objective evaluations of the coarse search that chose the local fit's starting point
    start_evaluations: int = 0

    def to_toml(self, validation: Mapping[str, Any] | None = None) -> str:
        doc: dict[str, Any] = {
            "params": {**self.held, **self.params},
            "uncertainty": {k: ({"sigma_log": v, "low_1sigma": self.params[k] * math.exp(-v),
                                 "high_1sigma": self.params[k] * math.exp(v)} if v < MAX_SIGMA_LOG else
                                {"identified": False,
                                 "note": "the training runs do not constrain this parameter"})
                            for k, v in self.sigma_log.items()},
            "fit": {"train_runs": self.train_runs, "cost": self.cost, "nfev": self.nfev,
                    "start_evaluations": self.start_evaluations,
                    "bounds": {k: list(v) for k, v in self.bounds.items()}},
        }
        if self.held:  # written in [params] above: applying the file applies them
            doc["fit"]["held"] = dict(self.held)
        if self.fixed:  # the fit holds only with these: apply them beside this file
            doc["fit"]["fixed"] = dict(self.fixed)
        if validation:
            doc["validation"] = {k: {kk: vv for kk, vv in v.items() if vv is not None}
                                 for k, v in validation.items()}
        return ("# Fitted by `python -m cfsim calibrate`; apply with `cfsim validate --params`.\n"
                + tomli_w.dumps(doc))


def read_params(path: str | Path) -> dict[str, Any]:
    """The ``[params]`` table of a file written by :func:`calibrate` (numbers as floats; a switch
    such as ``workload.http_background_read`` stays a bool, a choice such as ``host.cpu_sharing``
    a string)."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except tomllib.TOMLDecodeError as exc:   # its message gives the line and column, not the file
        raise ValueError(f"{path}: {exc}") from None
    if "params" not in data:
        raise ValueError(f"{path}: no [params] table (write it with `cfsim calibrate --out`)")
    bad = [k for k, v in data["params"].items() if not isinstance(v, (bool, str, int, float))]
    if bad:
        raise ValueError(f"{path}: [params] {bad[0]} must be a number, true/false or a word "
                         f"(got {data['params'][bad[0]]!r})")
    cost = data["params"].get("cost_factor")
    if cost is not None and (isinstance(cost, (bool, str)) or not math.isfinite(cost) or cost <= 0):
        # the machine's speed over the nominal: it multiplies and divides CPU costs
        raise ValueError(f"{path}: [params] cost_factor must be a finite number > 0 (got {cost!r})")
    return {k: v if isinstance(v, (bool, str)) else float(v) for k, v in data["params"].items()}


def read_params_files(paths: Sequence[str | Path]) -> tuple[dict[str, Any], list[str]]:
    r"""Several ``--params`` files at once (e.g. a fit of the model and a measurement of the host):
    their ``[params]`` merged and their training runs together. A key two files set to
    different values is an error naming both.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "a.toml").write_text('[params]\n"host.wakeup_us" = 20.0\n')
    >>> _ = (d / "b.toml").write_text('[params]\n"host.context_switch_us" = 17.9\n"host.wakeup_us" = 21.0\n')
    >>> read_params_files([d / "a.toml"])
    ({'host.wakeup_us': 20.0}, [])
    >>> _ = (d / "c.toml").write_text('[params]\n"workload.http_background_read" = true\n"host.cpu_sharing" = "slices"\n')
    >>> read_params_files([d / "c.toml"])
    ({'workload.http_background_read': True, 'host.cpu_sharing': 'slices'}, [])
    >>> read_params_files([d / "a.toml", d / "b.toml"])
    Traceback (most recent call last):
    ...
    ValueError: host.wakeup_us is 20.0 in a.toml but 21.0 in b.toml
    """
    params: dict[str, Any] = {}
    where: dict[str, Path] = {}
    train: list[str] = []
    for path in map(Path, paths):
        for k, v in read_params(path).items():
            if k in params and params[k] != v:
                raise ValueError(f"{k} is {params[k]} in {where[k].name} but {v} in {path.name}")
            params[k], where[k] = v, path
        train += [r for r in read_train_runs(path) if r not in train]
    return params, train


def read_train_runs(path: str | Path) -> list[str]:
    """The training runs recorded in a file written by :func:`calibrate` (``[fit] train_runs``):
    a validation with these parameters reports those runs as training, not held out."""
    data = tomllib.loads(Path(path).read_text())
    return [str(r) for r in (data.get("fit") or {}).get("train_runs", [])]


def gc_speed(params: Mapping[str, float], base_factor: float, gc_factor: float | None = None) -> float:
    """The factor a lab grid's GC scan rate is divided by: the grid's GC factor, or its cost factor
    when it has none, times the file's ``cost_factor``."""
    return (base_factor if gc_factor is None else gc_factor) * params.get("cost_factor", 1.0)


def memory_path_overrides(memory_path: Mapping[str, float] | None) -> dict[str, float]:
    """The kernel's memory-path prices a grid's calibration runs measured just before they ran
    (:attr:`cfsim.validation.normalise.GridNorm.memory_path`): a release per page and a TLB
    shootdown as measured. They move with the VM's state further than its CPU speed (2026-12-02:
    a release 0.26-0.27 us and a shootdown 43-48 us before `gc-memory-path`'s calibration runs,
    against 0.139 and 19 on 2026-11-26, while the workload's loop ran 1.3x slower). A page fault's
    price stays as given: faultbench's refault (0.52-0.58 us against 0.35) is not the fault in
    place, and near the limit at GOMAXPROCS 1, where no shootdown is sent, the lab paid about 1.06
    us a fault beyond its GOGC-100 user CPU that night, the prior's 1.0 (scaling it with the
    release, 1.92, made that twin 11 % slow): faultbench's refault is never taken for it. Calibration
    runs since 2026-12-05 also run the runtime's own cycle (``lab/cmd/scavbench``,
    :func:`cfsim.lab.scav.measure_page_cycle`): where they did, its fault and the runtime's work a
    page given back (``go.page_fault_us``, ``go.scavenge_page_us``) are taken as measured too.
    Empty without a probe.

    >>> memory_path_overrides({"go.page_release_us": 0.3, "host.tlb_shootdown_us": 40.0})
    {'go.page_release_us': 0.3, 'host.tlb_shootdown_us': 40.0}
    >>> memory_path_overrides({"go.page_release_us": 0.3, "host.tlb_shootdown_us": 40.0, "go.page_fault_us": 1.7,
    ...                        "go.scavenge_page_us": 0.1})
    {'go.page_release_us': 0.3, 'host.tlb_shootdown_us': 40.0, 'go.page_fault_us': 1.7, 'go.scavenge_page_us': 0.1}
    >>> memory_path_overrides({"go.page_release_us": 0.3, "host.tlb_shootdown_us": None}), memory_path_overrides(None)
    ({'go.page_release_us': 0.3}, {})
    """
    if not memory_path or not memory_path.get("go.page_release_us"):
        return {}
    out = {"go.page_release_us": float(memory_path["go.page_release_us"])}
    for key in ("host.tlb_shootdown_us", "go.page_fault_us", "go.scavenge_page_us"):
        if memory_path.get(key) is not None:
            out[key] = float(memory_path[key])
    return out


def grid_overrides(scenario: Scenario, params: Mapping[str, float], base_factor: float,
                   gc_factor: float | None = None, rounds_ratio: float = 1.0,
                   memory_path: Mapping[str, float] | None = None,
                   calibration_heap_mb: float | None = None,
                   sysmon: Mapping[str, float] | None = None) -> dict[str, Any]:
    """Scenario overrides for a workload measured on a lab grid's host: ``params``, and the
    per-item CPU and the allocation's CPU per KiB scaled by the machine's speed (the grid's cost
    factor x ``cost_factor``), the GC's scan rate by the GC's speed (the grid's ``gc_factor`` x
    ``cost_factor``; the cost factor when the grid has none, :class:`cfsim.validation.normalise.
    GridNorm`). ``rounds_ratio``: the run's workload loop rounds per item over the calibration
    runs' (:func:`cfsim.validation.normalise.rounds_ratio`), which scales the per-item CPU only
    (the loop's work, not mallocgc's). ``memory_path``: the kernel's prices the grid's calibration
    runs measured (:func:`memory_path_overrides`). Where the GC was slower than the code (GC factor over cost
    factor ``g`` > 1, read as cached lines that missed: :func:`cfsim.validation.normalise.
    cache_held_share`), the cost of lines the marking CPUs pass between them applies to the share
    the cache still held. The miss factor of a heap beyond the cache is divided by ``g`` either way
    (never below 1): a byte that misses anyway costs its miss at the machine's speed, whether the
    calibration runs' cached scan was slower than their code or faster. ``calibration_heap_mb``:
    the heap those runs marked (:attr:`cfsim.validation.normalise.GridNorm.calibration_heap_mb`);
    where it outgrew the cache their GC factor measured misses too, and the scan rate is divided
    by :func:`cfsim.validation.normalise.missed_heap_scale` as well, so that their twins mark at
    the speed they measured. ``sysmon``: sysmon's price and wait the calibration runs measured on
    their own sysmon thread (:attr:`cfsim.validation.normalise.GridNorm.sysmon`), unless ``params``
    set them.

    The one rule for every simulation of a lab host's workload: the validation's twins
    (:func:`apply_params`), the audit's fixes of lab runs and the search's nominal parameters
    (:func:`cfsim.advice.search.uncertainty_for`)."""
    factor = base_factor * params.get("cost_factor", 1.0)
    gc = gc_speed(params, base_factor, gc_factor)
    from cfsim.validation.normalise import COST_KEYS

    key = COST_KEYS.get(scenario["workload.kind"])
    out: dict[str, Any] = calibration_overrides(params)
    if key is not None and (factor != 1.0 or gc != 1.0 or rounds_ratio != 1.0):
        # the factors are the machine's speed during the grid: mallocgc runs on the same CPUs at
        # the same speed as the workload's code; the GC's marking at the speed its calibration
        # runs measured for it
        out.setdefault(key, scenario[key] * factor * rounds_ratio)
        miss = out.get("go.gc_scan_miss_factor", scenario["go.gc_scan_miss_factor"])
        scale = 1.0
        if calibration_heap_mb and miss > 1.0 and gc != factor:
            missed = cache_missed_share(calibration_heap_mb, out.get("host.llc_mb", scenario["host.llc_mb"]))
            scale = missed_heap_scale(gc / factor, miss, missed)
        out["go.gc_scan_mb_per_ms"] = out.get("go.gc_scan_mb_per_ms", scenario["go.gc_scan_mb_per_ms"]) / (gc * scale)
        out["go.alloc_ns_per_kb"] = out.get("go.alloc_ns_per_kb", scenario["go.alloc_ns_per_kb"]) * factor
        if gc > factor:
            # the calibration runs' GC was slower than their code because lines their cache
            # should have held missed (cache_held_share): only the lines it held pay the sharing
            # cost
            sharing = out.get("go.gc_parallel_cost", scenario["go.gc_parallel_cost"])
            if sharing:
                out["go.gc_parallel_cost"] = sharing * cache_held_share(gc / factor, miss)
        if miss > 1.0 and gc != factor:
            # a byte beyond the cache misses whatever the calibration runs' cached scan did and
            # costs its miss at the machine's speed, neither the slower scan's nor the faster
            # one's: the lab's 256 MiB mark costs the same CPU a cycle in the VM's slow and fast
            # states (185-209 against 204 ms at GOMAXPROCS 1, 233-241 against 239 at 8) while
            # the 16 MiB calibration runs' GC moves 1.57x between them
            out["go.gc_scan_miss_factor"] = max(1.0, miss * factor / gc)
    # the kernel's side is not the CPU's speed: its own probe where the grid measured one
    out.update(memory_path_overrides(memory_path))
    for k, v in (sysmon or {}).items():
        out.setdefault(k, v)
    return out


def params_settings(scenario: Scenario, params: Mapping[str, Any], keep: Sequence[str] = ()) -> list[str]:
    """``--params`` files applied to a user's scenario as the validation's twins take them:
    :func:`grid_overrides` at a grid cost factor of 1 (the files' keys as they are; a fitted
    ``cost_factor`` scales the per-item CPU and the allocation's CPU per KiB, the GC's scan rate
    by its speed), as ``section.key=value`` overrides. A key in ``keep`` (what the user set with
    ``--set``) is never replaced: an explicit setting wins over a file; a cost factor still scales
    the value the scenario ends with.

    >>> from cfsim.scenario import load_scenario
    >>> sc = load_scenario("cpu-bound-threads", ["host.wakeup_us=5"])
    >>> params_settings(sc, {"host.wakeup_us": 20.0, "host.cpu_sharing": "slices"}, keep=["host.wakeup_us"])
    ['host.cpu_sharing="slices"']
    >>> sc = load_scenario("cpu-bound-threads", ["workload.kind=open"])
    >>> params_settings(sc, {"cost_factor": 1.5})[:2]
    ['workload.cpu_ms_per_request=15.0', 'go.gc_scan_mb_per_ms=0.6666666666666666']
    """
    import json

    kept = set(keep)
    mine = {k: v for k, v in params.items() if k not in kept}
    return [f"{k}={json.dumps(v)}" for k, v in grid_overrides(scenario, mine, 1.0).items()]


def apply_params(run: Path, params: Mapping[str, float], base_factor: float,
                 gc_factor: float | None = None, rounds_ratio: float = 1.0,
                 memory_path: Mapping[str, float] | None = None,
                 calibration_heap_mb: float | None = None,
                 sysmon: Mapping[str, float] | None = None) -> dict[str, Any]:
    """Scenario overrides for one lab run's twin: :func:`grid_overrides` of the run's scenario."""
    return grid_overrides(run_scenario(run), params, base_factor, gc_factor, rounds_ratio, memory_path,
                          calibration_heap_mb, sysmon)


def apply_grid(run: Path, params: Mapping[str, float], norm: Any) -> dict[str, Any]:
    """:func:`apply_params` for ``run`` at its grid's :class:`cfsim.validation.normalise.GridNorm`:
    the cost and GC factors, and the run's own loop rounds over the calibration runs'
    (:func:`cfsim.validation.normalise.rounds_ratio`)."""
    from cfsim.validation.normalise import rounds_ratio

    return apply_params(run, params, norm.factor, norm.gc_factor, rounds_ratio(run, norm.rounds_per_cpu_ms),
                        norm.memory_path, norm.calibration_heap_mb, norm.sysmon)


def _residuals_for_run(args: tuple) -> list[float]:
    run_s, overrides, duration_s = args[:3]
    metrics = args[3] if len(args) > 3 else RESIDUAL_METRICS
    run = Path(run_s)
    if duration_s is not None:
        sc = run_scenario(run)
        if sc["run.duration_s"] > duration_s:
            overrides = {**overrides, "run.duration_s": duration_s,
                         "run.warmup_s": min(sc["run.warmup_s"], duration_s / 3)}
    sim = twin(run, overrides).summary
    obs = observed_summary(run)
    out = []
    oom = bool(obs.get("oom_kills")) or bool(sim.get("oom_kills"))
    for m in vm.METRICS:
        if m.name not in metrics:
            continue
        if oom and m.name != "oom_killed":
            # an OOM-killed run (either side) has no comparable window: only the kill itself counts
            out.append(0.0)
            continue
        e = vm.error(m, m.get(obs), m.get(sim))
        out.append(0.0 if e is None else float(np.clip(e, -3, 3)))
    return out


def calibrate(path: str | Path, train: str, params: Sequence[str] | None = None,
              workers: int = 1, max_nfev: int = 40, duration_s: float | None = 12.0,
              bounds: Mapping[str, tuple[float, float]] | None = None,
              progress: Callable[[int], None] | None = None,
              metrics: Sequence[str] | None = None,
              fixed: Mapping[str, float] | None = None,
              held: Mapping[str, float] | None = None,
              start_points: int | None = None,
              calibration: str = DEFAULT_CALIBRATION) -> tuple[Calibration, list[Path], list[Path]]:
    """Fit ``params`` on the runs selected by ``train``; return the fit, training and held-out runs.

    ``duration_s`` shortens the twins during the fit (steady state is reached in seconds);
    ``progress(n)`` is told the number of objective evaluations done (each simulates every training run).
    ``metrics``: the validation metrics whose errors are the residuals (default
    :data:`RESIDUAL_METRICS`; :data:`GC_MEMORY_RESIDUALS` for the GC and memory parameters).
    ``fixed``: parameters held at these values (measured elsewhere) while the others are fitted.
    ``held``: the same, but part of the fit's file (``--param KEY=VALUE``: a value measured on the
    training runs' host that the fitted ones need, e.g. the scan rate a GC factor normalises away).
    ``start_points``: the points per parameter of a coarse log-spaced search over the bounds whose
    best point starts the local fit (default: 5 for up to two parameters, 3 for three, none
    beyond). The twins are discrete-event simulations, so the objective is piecewise constant at
    fine scales (a GC cycle more or less): ``least_squares``' finite differences then see no
    slope and stay where they start, wherever that is.
    ``calibration``: which of each grid's calibration runs set its factors, as
    :func:`cfsim.validation.validate` takes it (``"before"``: only those recorded before its runs).
    """
    runs_with_calibration([], calibration)   # refuse an unknown choice before any work
    metrics = tuple(metrics or RESIDUAL_METRICS)
    known = {m.name for m in vm.METRICS}
    bad = [m for m in metrics if m not in known]
    if bad:
        raise ValueError(f"--metric {', '.join(bad)}: not a validation metric (known: {', '.join(sorted(known))})")
    fixed = dict(fixed or {})
    held = dict(held or {})
    # the default set less what the user holds: holding one of them is not also fitting it
    names = list(params or [k for k in DEFAULT_PARAMS if k not in held])
    for k in dict.fromkeys([*names, *held]):
        section, _, key = k.partition(".")
        spec = SCHEMA.get(section, {}).get(key) if k != "cost_factor" else None
        if k != "cost_factor" and spec is None:
            raise ValueError(f"--param {k}: neither cost_factor nor a scenario key (section.key; "
                             f"`cfsim scenarios NAME` lists them)")
        if spec is not None and spec.kind not in ("float", "int"):
            raise ValueError(f"--param {k}: its values are not only numbers; only number keys can be fitted "
                             f"or held")
    both = sorted(set(names) & set(fixed))
    if both:
        raise ValueError(f"--param {', '.join(both)}: also set by --params; fit it or hold it, not both")
    both = sorted(set(held) & (set(names) | set(fixed)))
    if both:
        raise ValueError(f"--param {', '.join(both)}: held at a value and also fitted or set by --params")
    if any(m in WHOLE_RUN_METRICS for m in metrics):
        duration_s = None
    bnd = {k: (bounds or {}).get(k) or DEFAULT_PARAMS.get(k) or PARAM_BOUNDS.get(k) for k in names}
    for k, b in bnd.items():
        if b is None:
            raise ValueError(f"--param {k}: give bounds as {k}=LOW:HIGH (no default for it)")
        if not 0 < b[0] < b[1]:
            # the fit and its start search work on log(value / LOW): a zero or negative bound has no log
            raise ValueError(f"--param {k}={b[0]:g}:{b[1]:g}: the bounds must satisfy 0 < LOW < HIGH "
                             f"(the fit searches log-spaced values)")
    runs = [r for r in find_runs(path) if not is_calibration_run(r)]
    pred = parse_selector(train)
    train_runs = [r for r in runs if pred(run_scenario(r).flat())]
    test_runs = [r for r in runs if r not in train_runs]
    if not train_runs:
        raise ValueError(f"--train {train!r} selects no run among {len(runs)} runs below {path}")
    grids = sorted({r.parent for r in runs})
    calib = [c for grid in grids for c in runs_with_calibration(find_runs(grid), calibration) if is_calibration_run(c)]
    # each training run's twin takes the calibration runs the choice gives it (one rule with validate)
    sets = {r: tuple(calibration_runs_for(r, calib, calibration)) for r in train_runs}
    norms = {cs: grid_norm(list(cs), {**fixed, **held} or None) for cs in dict.fromkeys(sets.values())}
    priors = {r: grid_priors(run_scenario(r), norms[sets[r]], pre_run_tenants_cores(run_manifest(r)))
              for r in train_runs}
    model_params = [k for k in names if k != "cost_factor"]
    x0 = []
    for k in names:
        lo, hi = bnd[k]
        if k == "cost_factor":
            start = 1.0
        else:
            start = run_scenario(train_runs[0])[k]
        if not lo < start < hi:
            # a default outside the bounds (a cost that is 0 unless set) starts in their geometric
            # middle: from the lower bound, the relative finite-difference step is too small to move
            # a discrete-event simulation at all
            start = math.sqrt(lo * hi)
        x0.append(math.log(min(max(start, lo * 1.01), hi * 0.99) / lo))
    # x = log(value / lower bound) > 0: least_squares' finite-difference step is relative to x,
    # so x must stay away from 0
    base = np.array([bnd[k][0] for k in names])
    lo = np.zeros(len(names))
    hi = np.log(np.array([bnd[k][1] for k in names]) / base)
    pool = ProcessPoolExecutor(workers) if workers > 1 else None

    evaluations: list[int] = []

    def values(x: np.ndarray) -> np.ndarray:
        return base * np.exp(x)

    def residuals(x: np.ndarray) -> np.ndarray:
        p = {**fixed, **held, **{k: float(v) for k, v in zip(names, values(x))}}
        # the grid's cost factor divides its calibration runs' CPU by the model with these parameters
        # (a calibration run's CPU includes its GC): recomputed when a model parameter is fitted
        now = {cs: grid_norm(list(cs), p, gc_priors=False) for cs in norms} if model_params else norms
        jobs = [(str(r), {**priors[r], **apply_grid(r, p, now[sets[r]])}, duration_s, metrics)
                for r in train_runs]
        results = list(pool.map(_residuals_for_run, jobs)) if pool else [_residuals_for_run(j) for j in jobs]
        evaluations.append(1)
        if progress:
            progress(len(evaluations))
        return np.concatenate(results)

    try:
        start = np.array(x0)
        points = start_points if start_points is not None else {1: 5, 2: 5, 3: 3}.get(len(names), 0)
        if points > 1:
            start = _coarse_start(residuals, lo, hi, points)
        searched = len(evaluations)
        fit = least_squares(residuals, start, bounds=(lo, hi), diff_step=0.05, max_nfev=max_nfev,
                            x_scale="jac")
    finally:
        if pool:
            pool.shutdown()
    m, n = fit.fun.size, len(names)
    sigma = {k: math.inf for k in names}
    if m > n:
        s2 = float(fit.fun @ fit.fun) / (m - n)
        try:
            cov = np.linalg.inv(fit.jac.T @ fit.jac) * s2
            sigma = {k: float(math.sqrt(max(cov[i, i], 0.0))) for i, k in enumerate(names)}
        except np.linalg.LinAlgError:
            pass
    cal = Calibration({k: float(v) for k, v in zip(names, values(fit.x))}, sigma,
                      [str(r) for r in train_runs], float(fit.cost), int(fit.nfev), dict(bnd), fixed, held,
                      searched)
    return cal, train_runs, test_runs


def _coarse_start(residuals: Callable[[np.ndarray], np.ndarray], lo: np.ndarray, hi: np.ndarray,
                  points: int, levels: int = 2) -> np.ndarray:
    """The best point of a full grid of ``points`` per parameter, evenly spaced in the log of the
    value strictly inside the bounds (their ends are where a fit stops, not where it starts), then
    of a grid as fine again spanning one step either side of it, ``levels`` grids in all."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    best, best_cost = None, math.inf
    for _ in range(levels):
        step = (hi - lo) / (points + 1)
        axes = [np.linspace(a + d, b - d, points) for a, b, d in zip(lo, hi, step)]
        for combo in itertools.product(*axes):
            x = np.array(combo)
            f = residuals(x)
            cost = float(f @ f)
            if cost < best_cost:
                best, best_cost = x, cost
        lo, hi = np.maximum(lo, best - step), np.minimum(hi, best + step)
    return best
