"""The cheapest (CPU limit, GOMAXPROCS policy or value, optional CFS burst) that meets every SLO.

Cost is the CPU limit [cores]; at equal limits no burst beats a burst, then the larger margins
win (relative slacks over the SLOs at the pessimistic parameters, smallest first), then the order of
the GOMAXPROCS choices: the scenario's own policy, ``go1.25``, ``automaxprocs``, explicit values.

The search, per *series* (one GOMAXPROCS choice with or without burst), on a lattice of limits
that are multiples of ``fine_step`` (default 0.05 cores) up to the node's CPUs:

1. coarse: every multiple of ``coarse_step`` (default 0.25 cores) is simulated;
2. the first coarse limit that meets the SLOs *robustly* is found (walking up from the first
   nominal pass): robust = met at the nominal parameters AND at the pessimistic ones (the
   per-item CPU cost x exp(sigma) from a calibration file, or x 1.10 without one; see
   :class:`Uncertainty`);
3. fine: every lattice limit between the coarse limit below it and that one is simulated; the
   cheapest robust one is the series' answer.

The winner is the cheapest series answer; the runner-up is the cheapest other series answer with
another limit or effective GOMAXPROCS (or, failing that, the winner's with or without burst). Every candidate runs with
the scenario's own seed (common random numbers: candidates differ only by their configuration),
so the search is deterministic and independent of the worker count; identical configurations are
simulated once. A tighter SLO can never get a cheaper answer: its robust-pass set is a subset of
the looser one's, and the coarse interval it refines is never below.

Candidates replace ``cgroup.limit_schedule`` by a static limit (a recommendation is one limit).

A candidate's run ends as soon as it can no longer meet an SLO on the kernel's counters
(``throttled_ratio``, ``throttled_time_s``, ``cpu_usage_cores`` at most some value:
:func:`cfsim.advice.slo.stop_rule`, ``SearchOptions.stop_early``): only its verdict is needed, and
the verdict is the whole run's, so the answer is unchanged.
"""
from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from cfsim.advice.slo import SLO, all_met
from cfsim.goruntime.gomaxprocs import gomaxprocs_value, version_tuple
from cfsim.kernel import limits
from cfsim.scenario import Scenario
from cfsim.validation.normalise import COST_KEYS

__all__ = ["Candidate", "Evaluation", "Uncertainty", "SearchOptions", "SearchResult", "Searcher",
           "search", "uncertainty_for", "read_uncertainty_files", "policy_kinds", "DEFAULT_REL_UNCERTAINTY"]

#: Pessimistic per-item cost without a calibration file: +10 %.
DEFAULT_REL_UNCERTAINTY = 0.10
#: Most coarse limits per series (the coarse step grows on big nodes).
MAX_COARSE = 40
#: Runtime parameters whose *smaller* value costs more CPU (rates); all others cost more when larger.
_SMALLER_IS_WORSE = ("go.gc_scan_mb_per_ms",)
_GO125 = "1.25"


# --------------------------------------------------------------------------------------------
# Candidates


@dataclass(frozen=True)
class Candidate:
    """One configuration: a CPU limit [cores], a GOMAXPROCS policy or explicit value, a burst [us]."""

    limit_m: int
    gomaxprocs: str | int
    burst_us: int = 0

    @property
    def limit(self) -> float:
        return self.limit_m / 1000.0

    def overrides(self, scenario: Scenario) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = [("cgroup.cpu_limit", self.limit), ("cgroup.limit_schedule", None),
                                      ("cgroup.burst_us", int(self.burst_us)), ("go.gomaxprocs", self.gomaxprocs)]
        if self.gomaxprocs == "go1.25" and version_tuple(scenario["go.version"]) < version_tuple(_GO125):
            out.append(("go.version", _GO125))  # the container-aware default needs go.mod >= 1.25
        return out

    def describe(self) -> str:
        g = self.gomaxprocs if isinstance(self.gomaxprocs, str) else f"GOMAXPROCS={self.gomaxprocs}"
        b = f", burst {self.burst_us / 1000:g} ms" if self.burst_us else ""
        return f"limit {self.limit:g} cores, {g}{b}"


def policy_kinds(scenario: Scenario, requested: Sequence[str | int] | None = None) -> list[str | int]:
    """The GOMAXPROCS choices searched, in order of preference.

    Default: the scenario's own policy, ``go1.25``, ``automaxprocs`` and ``"ceil"`` (an explicit
    ``GOMAXPROCS = ceil(limit)``). ``requested`` may name policies, ``"ceil"``, ``"floor"`` or integers.
    """
    kinds: list[str | int] = list(requested) if requested else [scenario["go.gomaxprocs"], "go1.25",
                                                                  "automaxprocs", "ceil"]
    out: list[str | int] = []
    for k in kinds:
        if isinstance(k, str) and k.strip().lstrip("-").isdigit():
            k = int(k)
        if isinstance(k, str) and k not in ("host", "automaxprocs", "go1.25", "ceil", "floor"):
            raise ValueError(f"--gomaxprocs: unknown choice {k!r}; use host, automaxprocs, go1.25, ceil, "
                             f"floor or an integer >= 1")
        if isinstance(k, int) and k < 1:
            raise ValueError(f"--gomaxprocs: an explicit value must be >= 1 (got {k})")
        if k not in out:
            out.append(k)
    return out


def _resolve(kind: str | int, limit_m: int) -> str | int:
    if kind == "ceil":
        return max(1, -(-limit_m // 1000))
    if kind == "floor":
        return max(1, limit_m // 1000)
    return kind


def effective_gomaxprocs(scenario: Scenario, gomaxprocs: str | int, limit: float | None) -> int:
    """The value a process runs with for a policy at a static limit (go1.25 with go.mod >= 1.25)."""
    version = scenario["go.version"]
    if gomaxprocs == "go1.25" and version_tuple(version) < version_tuple(_GO125):
        version = _GO125
    return gomaxprocs_value(gomaxprocs, limit, scenario["host.cpus"], version, scenario["go.round"],
                            scenario["cgroup.period_us"])


# --------------------------------------------------------------------------------------------
# Parameter uncertainty


@dataclass(frozen=True)
class Uncertainty:
    """Scenario overrides at the nominal and at the pessimistic parameters."""

    nominal: tuple[tuple[str, Any], ...] = ()
    pessimistic: tuple[tuple[str, Any], ...] = ()
    description: str = ""


def read_uncertainty_files(paths: Sequence[str | Path]) -> tuple[dict[str, Any], dict[str, float]]:
    """The merged ``[params]`` of ``paths`` (:func:`cfsim.validation.calibrate.read_params_files`:
    a choice stays a string, a switch a bool) and each fitted key's ``sigma_log`` (the largest
    where two files give one)."""
    from cfsim.validation.calibrate import read_params_files

    params, _ = read_params_files(paths)
    sig: dict[str, float] = {}
    for path in paths:
        for k, v in (tomllib.loads(Path(path).read_text()).get("uncertainty") or {}).items():
            if isinstance(v, Mapping) and "sigma_log" in v:
                s = v["sigma_log"]
                if isinstance(s, bool) or not isinstance(s, (int, float)) or s < 0:
                    # a negative or non-numeric sigma would silently remove the safety margin
                    raise ValueError(f"{path}: [uncertainty.\"{k}\"] sigma_log must be a number >= 0 (got {s!r})")
                if math.isfinite(s):
                    sig[k] = max(float(s), sig.get(k, 0.0))
    return params, sig


def uncertainty_for(scenario: Scenario, params_path: str | Path | Sequence[str | Path] | None = None,
                    base_factor: float = 1.0, default_rel: float = DEFAULT_REL_UNCERTAINTY,
                    gc_factor: float | None = None, memory_path: Mapping[str, float] | None = None,
                    calibration_heap_mb: float | None = None, keep: Sequence[str] = (),
                    sysmon: Mapping[str, float] | None = None) -> Uncertainty:
    """Nominal and pessimistic overrides for ``scenario``.

    The nominal side is what the validation's twins take on a lab grid's host
    (:func:`cfsim.validation.calibrate.grid_overrides`): ``base_factor`` (a grid's calibration
    factor, see :func:`cfsim.validation.normalise.grid_norm`) scales the workload's per-item CPU
    and the allocation's CPU per KiB; ``gc_factor``, a grid's GC speed from the same runs, divides
    the GC's scan rate (the file's, else the scenario's; the cost factor does when it is None), and
    where it is slower than the code the miss and sharing costs follow the twins' rules;
    ``memory_path``, the kernel's prices of releasing a page and of a TLB flush that the grid's
    calibration runs measured (:attr:`cfsim.validation.normalise.GridNorm.memory_path`), replaces the
    files' as it does for the twins; ``calibration_heap_mb``, the heap those runs marked, scales
    the scan as it does for the twins where it outgrew the cache; ``sysmon``, sysmon's price and
    wait those runs measured (:attr:`cfsim.validation.normalise.GridNorm.sysmon`), likewise. A params
    file (``cfsim calibrate --out``) adds its ``cost_factor`` and runtime keys; the pessimistic side
    moves each by ``exp(sigma_log)`` in its costly direction (the per-item cost up, scan rates down,
    runtime CPU costs up). Without a file, or for a parameter without a finite sigma, the cost moves
    by ``default_rel`` (10 %).
    """
    from cfsim.validation.calibrate import grid_overrides

    cost_key = COST_KEYS.get(scenario["workload.kind"])
    paths = [] if params_path is None else [params_path] if isinstance(params_path, (str, Path)) else list(params_path)
    params: dict[str, Any] = {}
    sigma: dict[str, float] = {}
    if paths:
        params, sigma = read_uncertainty_files(paths)
        kept = set(keep)
        params = {k: v for k, v in params.items() if k not in kept}
    factor = base_factor * params.get("cost_factor", 1.0)
    cost_sigma = sigma.get("cost_factor", math.log1p(default_rel))
    # the nominal side is what the validation's twins take on the grid's host (one rule)
    nominal_map = grid_overrides(scenario, params, base_factor, gc_factor, memory_path=memory_path,
                                 calibration_heap_mb=calibration_heap_mb, sysmon=sysmon)
    pess_map = dict(nominal_map)
    if cost_key is not None:
        nominal_map.setdefault(cost_key, scenario[cost_key] * factor)
        pess_map[cost_key] = nominal_map[cost_key] * math.exp(cost_sigma)
    for k in params:
        s = sigma.get(k, 0.0)
        if k != "cost_factor" and s:
            pess_map[k] = nominal_map[k] * (math.exp(-s) if k in _SMALLER_IS_WORSE else math.exp(s))
    nominal = list(nominal_map.items())
    pess = list(pess_map.items())
    # what grid_overrides divided the scan rate by (the GC's speed, and where the grid's calibration
    # heap outgrew the cache, the scale that keeps the misses it measured)
    scan = nominal_map.get("go.gc_scan_mb_per_ms")
    gc = params.get("go.gc_scan_mb_per_ms", scenario["go.gc_scan_mb_per_ms"]) / scan if scan else 1.0
    gc = gc if cost_key is not None and abs(gc - 1.0) > 1e-12 else None
    if paths:
        desc = (f"params {', '.join(map(str, paths))}: cost x{factor:.3g}; pessimistic cost x{math.exp(cost_sigma):.3g}"
                + (f" (sigma_log {cost_sigma:.3g})" if "cost_factor" in sigma else " (default)")
                + "".join(f", {k} {'/' if k in _SMALLER_IS_WORSE else 'x'}{math.exp(s):.3g}"
                          for k, s in sigma.items() if k != "cost_factor" and k in params))
    else:
        desc = (f"cost x{factor:.3g} (grid calibration)" if base_factor != 1.0 else "nominal parameters") \
            + (f", GC scan /{gc:.3g}" if gc is not None else "") \
            + f"; pessimistic: per-item CPU +{(math.exp(cost_sigma) - 1) * 100:.0f} %"
    return Uncertainty(tuple(nominal), tuple(pess), desc)


# --------------------------------------------------------------------------------------------
# Evaluation


@dataclass
class Evaluation:
    """A candidate simulated at the nominal (and, once needed, the pessimistic) parameters."""

    candidate: Candidate
    gomaxprocs: int                       # effective value
    summary: dict[str, Any]               # nominal
    met: bool                             # nominal meets every SLO
    pessimistic: dict[str, Any] | None = None
    robust: bool | None = None            # met at nominal and pessimistic (None: not checked)

    def as_dict(self, slos: Sequence[SLO] = ()) -> dict[str, Any]:
        c = self.candidate
        keys = ("cpu_usage_cores", "throttled_ratio", "throughput_per_s", "latency_p50_s", "latency_p99_s",
                "latency_p999_s", "lag_final_s", "backlog_final")
        keys += tuple(dict.fromkeys(s.key for s in slos if s.key not in keys))   # what each SLO is judged on
        out = {"cpu_limit_cores": c.limit, "gomaxprocs_policy": c.gomaxprocs, "gomaxprocs": self.gomaxprocs,
               "burst_us": c.burst_us, "description": c.describe(),
               "summary": {k: self.summary.get(k) for k in keys if k in self.summary},
               "slos_met": {s.text: s.met(self.summary) for s in slos}, "robust": self.robust}
        if self.pessimistic is not None:
            out["pessimistic_summary"] = {k: self.pessimistic.get(k) for k in keys if k in self.pessimistic}
        return out


def _clean_summary(summary: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in summary.items() if v is None or isinstance(v, (int, float, str, bool))}


def simulate_point(task: tuple) -> dict[str, Any]:
    """Picklable point function: the summary of ``scenario`` with ``overrides`` (reused when an
    identical scenario was simulated before in this process; :mod:`cfsim.sweep.simcache`).
    ``task`` is ``(scenario, overrides, stop)``; with a stop rule (:func:`cfsim.advice.slo.stop_rule`,
    else None) the summary may be only a stopped run's verdict, ``{"stopped_early_s", "stopped_because"}``."""
    from cfsim.sweep.simcache import summary_of

    scenario, overrides, stop = task
    return _clean_summary(summary_of(scenario.with_overrides(list(overrides)), stop=stop))


@dataclass
class SearchOptions:
    coarse_step: float = 0.25
    fine_step: float = 0.05
    min_limit: float | None = None        # default: fine_step
    max_limit: float | None = None        # default: host.cpus
    gomaxprocs: Sequence[str | int] | None = None
    burst: bool = True
    duration_s: float | None = None       # shorten every simulation (run.duration_s)
    workers: int = 0                      # 0 = in this process; n = a local process pool
    executor: Any = None                  # an open executor (cfsim.sweep.make_executor) to run on instead
    screen: bool = True                   # skip limits that provably miss a throughput SLO (Searcher._possible)
    stop_early: bool = True               # end a candidate's run once it can no longer meet an SLO
    progress: Callable[[int], None] | None = None   # told after each simulation: the number done so far


@dataclass
class SearchResult:
    slos: list[SLO]
    winner: Evaluation | None
    runner_up: Evaluation | None
    series: dict[str, Evaluation | None] = field(default_factory=dict)
    simulations: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"slos": [s.text for s in self.slos],
                "recommendation": self.winner.as_dict(self.slos) if self.winner else None,
                "runner_up": self.runner_up.as_dict(self.slos) if self.runner_up else None,
                "simulations": self.simulations}


class Searcher:
    """Holds the base scenario, the uncertainty and a cache of simulated configurations, so that
    several searches (all SLOs, each SLO alone, peers) share simulations."""

    def __init__(self, scenario: Scenario, uncertainty: Uncertainty | None = None,
                 options: SearchOptions | None = None):
        self.options = options or SearchOptions()
        o = self.options
        base = scenario
        if o.duration_s is not None:
            base = base.with_overrides([("run.duration_s", float(o.duration_s)),
                                        ("run.warmup_s", min(base["run.warmup_s"], float(o.duration_s) / 3))])
        self.scenario = base
        self.uncertainty = uncertainty or uncertainty_for(base)
        self.kinds = policy_kinds(base, o.gomaxprocs)
        for name in ("coarse_step", "fine_step", "max_limit", "min_limit"):
            v = getattr(o, name)
            if v is not None and not (math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a number > 0 (got {v})")
        if o.min_limit is not None and o.max_limit is not None and o.min_limit > o.max_limit:
            raise ValueError(f"min_limit {o.min_limit} is above max_limit {o.max_limit}")
        self.fine_m = max(1, int(round(o.fine_step * 1000)))
        coarse_m = max(self.fine_m, int(round(o.coarse_step * 1000)))
        self.coarse_m = coarse_m - coarse_m % self.fine_m or self.fine_m
        cpus_m = int(base["host.cpus"]) * 1000
        hi = int(round((o.max_limit if o.max_limit is not None else base["host.cpus"]) * 1000))
        lo = int(round((o.min_limit if o.min_limit is not None else o.fine_step) * 1000))
        self.hi_m = max(self.fine_m, min(hi, cpus_m) // self.fine_m * self.fine_m)
        # the kernel's smallest quota (1 ms, tg_set_cfs_bandwidth) at this period, in millicores
        floor_m = -(-limits.MIN_QUOTA_US * 1000 // int(base["cgroup.period_us"]))
        self.lo_m = max(self.fine_m, -(-lo // self.fine_m) * self.fine_m, -(-floor_m // self.fine_m) * self.fine_m)
        if self.hi_m // self.coarse_m > MAX_COARSE:  # big nodes: at most MAX_COARSE coarse points
            self.coarse_m = -(-self.hi_m // MAX_COARSE // self.fine_m) * self.fine_m
        self.cache: dict[tuple, dict[str, Any]] = {}
        self.simulations = 0
        self.executor = o.executor
        self.block = o.executor.workers if o.executor is not None else max(1, o.workers or 1)
        self._screen_shape = _screen_shape(base, self.uncertainty.nominal)
        self._robust_shape = _screen_shape(base, self.uncertainty.pessimistic)

    # -- simulation --------------------------------------------------------------------------
    def _key(self, cand: Candidate, variant: str) -> tuple:
        return (cand.limit_m, effective_gomaxprocs(self.scenario, cand.gomaxprocs, cand.limit),
                cand.burst_us, variant)

    def _run(self, pairs: Iterable[tuple[Candidate, str]], slos: Sequence[SLO] = ()) -> None:
        """Simulate the pairs not simulated yet. With ``options.stop_early`` a run ends once it
        can no longer meet one of ``slos`` (:func:`cfsim.advice.slo.stop_rule`): only its verdict
        is kept, which answers a later search only if that search has the SLO it failed (else
        the candidate runs again)."""
        from cfsim.advice.slo import stop_rule

        stop = stop_rule(slos) if self.options.stop_early else None
        texts = {s.text for s in slos}
        todo: dict[tuple, tuple] = {}
        for cand, variant in pairs:
            key = self._key(cand, variant)
            if key in todo or self._answers(key, texts):
                continue
            unc = self.uncertainty.nominal if variant == "nominal" else self.uncertainty.pessimistic
            todo[key] = (self.scenario, tuple(cand.overrides(self.scenario)) + tuple(unc), stop)
        if not todo:
            return
        keys = sorted(todo)
        if (self.executor is not None or self.options.workers) and len(keys) > 1:
            from contextlib import nullcontext

            from cfsim.sweep import make_executor

            by_task = {id(todo[k]): k for k in keys}
            with (nullcontext(self.executor) if self.executor is not None
                  else make_executor(self.options.workers)) as ex:
                for task, result, exc in ex.imap_unordered(simulate_point, [todo[k] for k in keys]):
                    if exc is not None:
                        raise exc
                    self.cache[by_task[id(task)]] = result
                    self._done()
        else:
            for k in keys:
                self.cache[k] = simulate_point(todo[k])
                self._done()

    def _answers(self, key: tuple, slo_texts: set[str]) -> bool:
        """Whether the cache holds a summary for ``key`` that can judge these SLOs: a whole run's,
        or a stopped run's that failed one of them."""
        got = self.cache.get(key)
        return got is not None and ("stopped_because" not in got or got["stopped_because"] in slo_texts)

    def _done(self) -> None:
        self.simulations += 1
        if self.options.progress:
            self.options.progress(self.simulations)

    def evaluate(self, cands: Sequence[Candidate], slos: Sequence[SLO], robust: bool = False) -> list[Evaluation]:
        self._run(((c, "nominal") for c in cands), slos)
        evs = []
        for c in cands:
            s = self.cache[self._key(c, "nominal")]
            evs.append(Evaluation(c, effective_gomaxprocs(self.scenario, c.gomaxprocs, c.limit), s, all_met(slos, s)))
        if robust:
            self._check_robust([e for e in evs if e.met], slos)
        return evs

    def _check_robust(self, evs: Sequence[Evaluation], slos: Sequence[SLO]) -> None:
        self._run(((e.candidate, "pessimistic") for e in evs), slos)
        for e in evs:
            e.pessimistic = self.cache[self._key(e.candidate, "pessimistic")]
            e.robust = e.met and all_met(slos, e.pessimistic)

    def current(self, slos: Sequence[SLO]) -> Evaluation:
        """The scenario as given (its own limit, schedule, policy, burst) at the nominal parameters."""
        key = ("current", "nominal")
        if key not in self.cache:
            self.cache[key] = simulate_point((self.scenario, tuple(self.uncertainty.nominal), None))
            self._done()
        s = self.cache[key]
        lim = self.scenario["cgroup.cpu_limit"]
        cand = Candidate(int(round(lim * 1000)) if lim is not None else 0, self.scenario["go.gomaxprocs"],
                         self.scenario["cgroup.burst_us"])
        return Evaluation(cand, int(s.get("gomaxprocs") or effective_gomaxprocs(self.scenario, cand.gomaxprocs, lim)),
                          s, all_met(slos, s))

    def run_full(self, overrides: Sequence[tuple[str, Any]] = ()) -> dict[str, Any]:
        """Simulate the scenario with ``overrides`` at the nominal parameters; the summary with the
        1 s cAdvisor series under ``"_series"`` (for usage histories)."""
        from cfsim.simulation import simulate

        res = simulate(self.scenario.with_overrides(list(overrides) + list(self.uncertainty.nominal)))
        self._done()
        return {**_clean_summary(res.summary), "_series": res.series}

    # -- the search ---------------------------------------------------------------------------
    def _cand(self, kind: str | int, limit_m: int, burst: bool) -> Candidate:
        quota_us = limit_m * self.scenario["cgroup.period_us"] // 1000
        return Candidate(limit_m, _resolve(kind, limit_m), quota_us if burst else 0)

    def _possible(self, limit_m: int, slos: Sequence[SLO], robust: bool = False) -> bool:
        """False when no simulation at this limit can meet a throughput SLO (checked without
        burst only). Every item (record, request) costs at least the scenario's per-item CPU
        ``c`` (exactly, with ``workload.cpu_cv`` 0; GC, scheduling, server CPU and fan-out only
        add to it); the cgroup runs at most ``limit x (W + 2 periods) + cpus x slice`` CPU seconds
        in a measured window of ``W`` seconds (quota per period; runtime handed out in slices);
        and the items in flight when the window opens (at most ``workers`` records or ``clients``
        requests) bring at most ``c`` each of work done before it. So the window's throughput is
        at most ``(that CPU + in flight x c) / (c x W)``; a limit is screened out only when this
        bound, raised by a further ``SCREEN_MARGIN``, is below the SLO. ``robust``: with the
        pessimistic per-item CPU (a robust candidate must meet the SLOs there too)."""
        shape = self._robust_shape if robust else self._screen_shape
        if shape is None or not self.options.screen:
            return True
        cost_s, in_flight = shape
        sc = self.scenario
        window_s = sc["run.duration_s"] - sc["run.warmup_s"]
        cpu_s = (limit_m / 1000.0 * (window_s + 2 * sc["cgroup.period_us"] / 1e6)
                 + sc["host.cpus"] * sc["cgroup.slice_us"] / 1e6)
        bound = (cpu_s / cost_s + in_flight) / window_s * (1.0 + SCREEN_MARGIN)
        return not any(sl.key == "throughput_per_s" and sl.op in (">=", ">") and bound < sl.threshold for sl in slos)

    def _walk(self, kind: str | int, burst: bool, limits_m: Sequence[int], slos: Sequence[SLO]):
        """The first limit (ascending) whose candidate meets ``slos`` robustly, simulating only
        as far as needed: blocks of as many limits as the executor has workers (one at a time in
        this process). Limits that cannot be robust (:meth:`_possible` at the pessimistic cost)
        are not simulated: only a robust candidate is ever an answer. The answer is the one
        evaluating every limit would give; only the simulations not needed are saved.

        A generator: it yields the ``(candidate, variant)`` pairs it needs next and returns the
        evaluation (or None), so that :meth:`search` runs the walks of all series side by side,
        their next simulations in one batch on the executor."""
        block = max(1, self.block)
        todo = [m for m in limits_m if burst or self._possible(m, slos, robust=True)]
        for i in range(0, len(todo), block):
            cands = [self._cand(kind, m, burst) for m in todo[i:i + block]]
            yield [(c, "nominal") for c in cands]
            for e in self.evaluate(cands, slos):
                if not e.met:
                    continue
                yield [(e.candidate, "pessimistic")]
                self._check_robust([e], slos)
                if e.robust:
                    return e
        return None

    def _series_best(self, kind: str | int, burst: bool, slos: Sequence[SLO]):
        """A generator (see :meth:`_walk`) returning the series' cheapest robust candidate."""
        coarse = list(range(self.coarse_m, self.hi_m + 1, self.coarse_m))
        if not coarse or coarse[-1] != self.hi_m:
            coarse.append(self.hi_m)
        coarse = [m for m in coarse if m >= self.lo_m] or [self.hi_m]
        found = yield from self._walk(kind, burst, coarse, slos)
        if found is None:
            return None
        first = coarse.index(found.candidate.limit_m)
        below = coarse[first - 1] if first > 0 else self.lo_m - self.fine_m
        fine = [m for m in range(below + self.fine_m, coarse[first], self.fine_m) if m >= self.lo_m]
        better = yield from self._walk(kind, burst, fine, slos)
        return better or found

    def search(self, slos: Sequence[SLO]) -> SearchResult:
        slos = list(slos)
        found: dict[str, Evaluation | None] = {}
        ranked: list[tuple[tuple, Evaluation]] = []
        walks = {}
        for rank, kind in enumerate(self.kinds):
            for burst in ((False, True) if self.options.burst else (False,)):
                walks[f"{kind}{'+burst' if burst else ''}"] = (rank, burst, self._series_best(kind, burst, slos))
        done: dict[str, Evaluation | None] = {}
        active = dict(walks)
        while active:   # every series' next simulations in one batch
            batch: list[tuple[Candidate, str]] = []
            for name in list(active):
                try:
                    batch.extend(next(active[name][2]))
                except StopIteration as stop:
                    done[name] = stop.value
                    del active[name]
            self._run(batch, slos)
        for name, (rank, burst, _) in walks.items():
            best = found[name] = done[name]
            if best is not None:
                ranked.append(((best.candidate.limit_m, burst, _margins(slos, best), rank), best))
        ranked.sort(key=lambda t: t[0])
        winner = ranked[0][1] if ranked else None
        runner = None
        if winner is not None:
            def config(e: Evaluation, with_burst: bool) -> tuple:
                return (e.candidate.limit_m, e.gomaxprocs) + ((e.candidate.burst_us > 0,) if with_burst else ())

            for with_burst in (False, True):  # prefer another limit or GOMAXPROCS over "the same + burst"
                runner = next((e for _, e in ranked[1:] if config(e, with_burst) != config(winner, with_burst)), None)
                if runner is not None:
                    break
        return SearchResult(slos, winner, runner, found, self.simulations)


#: Relative margin kept by the throughput screen (:meth:`Searcher._possible`).
SCREEN_MARGIN = 0.05


def _screen_shape(scenario: Scenario, *variants: Sequence[tuple[str, Any]]) -> tuple[float, int] | None:
    """(the CPU of one item [s] in every variant (nominal, pessimistic): the smallest, the most
    items in flight) for workloads whose every item costs at least that much and whose
    concurrency is bounded; None for the others."""
    kind = scenario["workload.kind"]
    key = COST_KEYS.get(kind)
    if key is None or kind not in SCREENED_KINDS or scenario.get("workload.cpu_cv", 0.0):
        return None
    cost_ms = min(float(dict(variant).get(key, scenario[key])) for variant in variants)
    if not cost_ms > 0:
        return None
    return cost_ms / 1000.0, int(scenario["workload.workers" if kind == "stream" else "workload.clients"])


#: Workloads whose throughput counts items that each cost ``COST_KEYS[kind]`` ms of CPU or more,
#: with a bounded number in flight (an open workload's backlog is not bounded).
SCREENED_KINDS = ("stream", "closed")


def _margins(slos: Sequence[SLO], e: Evaluation) -> tuple[float, ...]:
    """Sort key for equal limits: the relative slacks over the SLOs at the pessimistic parameters,
    smallest first, negated (larger margins sort first; rounded to 0.1 % so that noise does not
    reorder equal configurations)."""
    summary = e.pessimistic if e.pessimistic is not None else e.summary
    vals = sorted(-1e9 if v is None else v for v in (sl.slack(summary) for sl in slos))
    return tuple(-round(v, 3) for v in vals)


def search(scenario: Scenario, slos: Sequence[SLO], uncertainty: Uncertainty | None = None,
           options: SearchOptions | None = None) -> SearchResult:
    """The cheapest configuration meeting every SLO robustly; see the module docstring."""
    return Searcher(scenario, uncertainty, options).search(slos)
