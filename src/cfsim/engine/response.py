"""Pod response functions for the long-horizon engine (:mod:`cfsim.engine.longrun`).

A pod's behaviour under its (CPU limit, GOMAXPROCS, offered demand)::

    response(limit_cores, gomaxprocs, demand_cores) -> (usage_cores, throughput_per_s, throttled_ratio)

* :class:`AnalyticResponse`, the documented fallback: ``usage = min(demand, limit, GOMAXPROCS,
  cpus)`` (and the worker count of a stream workload; OS threads of the ``threads`` workload are
  not bound by GOMAXPROCS), ``throughput = usage / cpu_s_per_item``, ``throttled_ratio = 1`` when
  demand and runnable parallelism both exceed the limit, else 0. No GC, no scheduling overhead.
* :class:`SurfaceResponse`: the response MEASURED with the event engine (a ``simulate_fn`` the
  caller passes, normally :func:`cfsim.simulation.simulate`) on a small grid over limit x
  GOMAXPROCS x demand, stored as correction factors over the analytic model (so the ``min()``
  kinks stay exact and only smooth overheads such as GC are interpolated: bilinear in limit and
  demand, exact integer GOMAXPROCS),
  cached on disk (``$CFSIM_CACHE_DIR/surfaces`` or ``~/.cache/cfsim/surfaces``) under a hash of the
  scenario keys that shape the response, the grid and the event engine's source.

:func:`response_for` picks one: ``"analytic"``, ``"surface"`` (measure if not cached, fail if the
event engine cannot), or ``"auto"`` (cached surface, else measure if the event engine runs the
workload, else the analytic fallback; ``.describe`` says which and why). This module does not
import the event engine: ``"surface"`` and ``"auto"`` take it as ``simulate_fn``.
"""
from __future__ import annotations

import bisect
import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

import numpy as np

from cfsim.goruntime.gomaxprocs import gomaxprocs_value
from cfsim.scenario import Scenario
from cfsim.workloads.kinds import WorkShape, workload_kind

#: Bump when the measurement protocol or the stored layout changes (invalidates caches).
SURFACE_FORMAT = 2


class ResponseFn(Protocol):
    describe: str

    def __call__(self, limit_cores: float | None, gomaxprocs: int, demand_cores: float
                 ) -> tuple[float, float, float]: ...


def work_shape(sc: Scenario) -> WorkShape:
    """The :class:`~cfsim.workloads.kinds.WorkShape` the scenario's workload kind declares."""
    return workload_kind(sc["workload.kind"]).shape(sc.section("workload"))


@dataclass(frozen=True)
class AnalyticResponse:
    """``usage = min(demand, limit, GOMAXPROCS, cpus[, parallelism])`` (see module doc)."""

    cpus: int
    shape: WorkShape
    describe: str = "analytic: usage = min(demand, limit, GOMAXPROCS, cpus, workers)"

    def parallel_cores(self, gomaxprocs: int) -> float:
        cap = float(self.cpus)
        if not self.shape.bypass_gomaxprocs:
            cap = min(cap, float(gomaxprocs))
        if self.shape.parallelism is not None:
            cap = min(cap, self.shape.parallelism)
        return cap

    def capacity_cores(self, limit_cores: float | None, gomaxprocs: int) -> float:
        cap = self.parallel_cores(gomaxprocs)
        return cap if limit_cores is None else min(cap, limit_cores)

    def __call__(self, limit_cores: float | None, gomaxprocs: int, demand_cores: float) -> tuple[float, float, float]:
        usage = min(max(demand_cores, 0.0), self.capacity_cores(limit_cores, gomaxprocs))
        tput = usage / self.shape.cpu_s_per_item
        throttled = 0.0
        if limit_cores is not None:
            lim = limit_cores * (1.0 + 1e-9)
            if demand_cores > lim and self.parallel_cores(gomaxprocs) > lim:
                throttled = 1.0
        return usage, tput, throttled


# --------------------------------------------------------------------------- surfaces

@dataclass(frozen=True)
class SurfaceGrid:
    limits_cores: tuple[float, ...]
    gomaxprocs: tuple[int, ...]
    demands_cores: tuple[float, ...]
    duration_s: float = 6.0
    warmup_s: float = 2.0

    def as_dict(self) -> dict[str, Any]:
        return {"limits_cores": list(self.limits_cores), "gomaxprocs": list(self.gomaxprocs),
                "demands_cores": list(self.demands_cores), "duration_s": self.duration_s,
                "warmup_s": self.warmup_s}


def default_grid(sc: Scenario, nominal_demand_cores: float) -> SurfaceGrid:
    """A small grid around the scenario: limits and demands up to ~2x the nominal demand.

    Limits: 0.5 .. top in half cores (plus 0.25 and the scenario's own limit), GOMAXPROCS 1 ..
    ceil(top) + 1, demands in 0.5-core steps up to top plus 1.5 x top (saturation) and the nominal
    demand. Each point runs the scenario's own ``run`` length (5-30 s) and warm-up.
    """
    top = float(max(2.0, math.ceil(2.0 * nominal_demand_cores)))
    limits = {0.25} | {0.5 * i for i in range(1, int(2 * top) + 1)}
    own = sc["cgroup.cpu_limit"]
    if own is not None:  # the scenario's own limit is always a grid point
        limits.add(float(own))
    gmax = min(int(sc["host.cpus"]), int(math.ceil(top)) + 1)
    demands = {0.25} | {0.5 * i for i in range(1, int(2 * top) + 1)} | {1.5 * top, round(nominal_demand_cores, 6)}
    duration = min(max(float(sc["run.duration_s"]), 5.0), 30.0)
    warmup = min(float(sc["run.warmup_s"]), duration / 2.0)
    return SurfaceGrid(tuple(sorted(limits)), tuple(range(1, gmax + 1)), tuple(sorted(demands)), duration, warmup)


def local_grid(sc: Scenario, nominal_demand_cores: float) -> SurfaceGrid:
    """A tiny grid around the scenario's own operating point: its limit (and 1.25x), the GOMAXPROCS
    its policy gives at that limit, and half, nominal and 1.5x nominal demand. Enough to reproduce
    an event-engine run of the scenario itself (and to interpolate a little around it)."""
    own = sc["cgroup.cpu_limit"]
    cpus = int(sc["host.cpus"])
    lim = float(own) if own is not None else float(cpus)
    g = gomaxprocs_value(sc["go.gomaxprocs"], own, cpus, sc["go.version"], sc["go.round"], sc["cgroup.period_us"])
    d = float(nominal_demand_cores)
    demands = tuple(sorted({round(0.5 * d, 6), round(d, 6), round(1.5 * d, 6)}))
    duration = min(max(float(sc["run.duration_s"]), 5.0), 30.0)
    return SurfaceGrid((lim, 1.25 * lim), (g,), demands, duration, min(float(sc["run.warmup_s"]), duration / 2.0))


@dataclass
class SurfaceResponse:
    """Event-engine-measured response as factors over :class:`AnalyticResponse`, interpolated."""

    base: AnalyticResponse
    grid: SurfaceGrid
    usage_factor: np.ndarray  # [G, L, D]
    tput_factor: np.ndarray
    throttled: np.ndarray
    describe: str = "surface"
    _memo: dict = field(default_factory=dict, repr=False)
    _lists: tuple | None = field(default=None, repr=False)

    def _weights(self, limit: float, demand: float) -> tuple[int, int, int, int, float, float]:
        """Bilinear cell and weights for (limit, demand), clamped to the grid."""
        i, i1, fx = _axis_cell(self.grid.limits_cores, limit)
        j, j1, fy = _axis_cell(self.grid.demands_cores, demand)
        return i, i1, j, j1, fx, fy

    @staticmethod
    def _bilinear(t, i: int, i1: int, j: int, j1: int, fx: float, fy: float) -> float:
        return ((1 - fx) * (1 - fy) * t[i][j] + fx * (1 - fy) * t[i1][j]
                + (1 - fx) * fy * t[i][j1] + fx * fy * t[i1][j1])

    def __call__(self, limit_cores: float | None, gomaxprocs: int, demand_cores: float) -> tuple[float, float, float]:
        key = (limit_cores, gomaxprocs, round(demand_cores, 6))
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        u0, t0, _ = self.base(limit_cores, gomaxprocs, demand_cores)
        G = self.grid.gomaxprocs
        gi = min(range(len(G)), key=lambda k: abs(G[k] - gomaxprocs))
        lim = float(self.base.cpus) if limit_cores is None else limit_cores
        if self._lists is None:
            self._lists = (self.usage_factor.tolist(), self.tput_factor.tolist(), self.throttled.tolist())
        fu_t, ft_t, th_t = self._lists
        w = self._weights(lim, demand_cores)
        fu = self._bilinear(fu_t[gi], *w)
        ft = self._bilinear(ft_t[gi], *w)
        thr = min(1.0, max(0.0, self._bilinear(th_t[gi], *w)))
        out = (u0 * fu, t0 * ft, thr)
        if len(self._memo) < 200_000:
            self._memo[key] = out
        return out


def _axis_cell(axis, value: float) -> tuple[int, int, float]:
    """Interval ``(k, k1)`` of a sorted grid axis holding ``value`` (clamped to the axis) and the
    interpolation weight of ``k1``; a one-point axis gives ``(0, 0, 0.0)``."""
    if len(axis) == 1:
        return 0, 0, 0.0
    v = min(max(value, axis[0]), axis[-1])
    k = min(max(bisect.bisect_right(axis, v) - 1, 0), len(axis) - 2)
    return k, k + 1, (v - axis[k]) / (axis[k + 1] - axis[k])


def _factor(measured: float, analytic: float) -> float:
    if analytic <= 1e-12:
        return 1.0
    return measured / analytic


def measure_surface(sc: Scenario, grid: SurfaceGrid, simulate_fn: Callable[[Scenario], Any],
                    progress: Callable[[int, int], None] | None = None) -> SurfaceResponse:
    """Run the event engine on every grid point; keep the factors over the analytic response.

    Each point is the scenario with ``cgroup.cpu_limit = L``, ``go.gomaxprocs = G`` (explicit), the
    arrival rate set so that the offered CPU is ``D`` cores, and a short ``run`` (grid.duration_s,
    grid.warmup_s). ``simulate_fn(scenario).summary`` must give ``cpu_usage_cores``,
    ``throughput_per_s`` and ``throttled_ratio``.
    """
    shape = work_shape(sc)
    base = AnalyticResponse(int(sc["host.cpus"]), shape)
    nG, nL, nD = len(grid.gomaxprocs), len(grid.limits_cores), len(grid.demands_cores)
    fu = np.ones((nG, nL, nD))
    ft = np.ones((nG, nL, nD))
    th = np.zeros((nG, nL, nD))
    total, done = nG * nL * nD, 0
    for a, g in enumerate(grid.gomaxprocs):
        for b, lim in enumerate(grid.limits_cores):
            for c, dem in enumerate(grid.demands_cores):
                point = sc.with_overrides(_point_overrides(sc, shape, lim, g, dem, grid))
                summary = simulate_fn(point).summary
                u0, t0, _ = base(lim, g, dem)
                fu[a, b, c] = _factor(float(summary["cpu_usage_cores"]), u0)
                ft[a, b, c] = _factor(float(summary["throughput_per_s"]), t0)
                th[a, b, c] = float(summary.get("throttled_ratio") or 0.0)
                done += 1
                if progress:
                    progress(done, total)
    return SurfaceResponse(base, grid, fu, ft, th, describe="surface (event engine, measured now)")


def _point_overrides(sc: Scenario, shape: WorkShape, limit: float, gomaxprocs: int, demand: float,
                     grid: SurfaceGrid) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = [("cgroup.cpu_limit", float(limit)), ("cgroup.limit_schedule", None),
                                  ("go.gomaxprocs", int(gomaxprocs)), ("run.duration_s", grid.duration_s),
                                  ("run.warmup_s", grid.warmup_s)]
    if shape.rate_driven:
        out.append(("workload.rate_per_s", demand / shape.cpu_s_per_item))
    for key in ("vpa.enabled", "hpa.enabled"):
        if sc.get(key) is not None:
            out.append((key, False))
    return out


# Sections/keys that do not shape a single pod's response (varied on the grid or irrelevant).
_EXCLUDED = {"vpa": None, "hpa": None, "run": None,
             "cgroup": {"cpu_limit", "limit_schedule"}, "go": {"gomaxprocs"},
             "workload": {"rate_per_s", "initial_backlog"}}


def _engine_fingerprint() -> str:
    """Hash of the event engine's sources (simulation, CFS engine, kernel rules, Go runtime, workloads)."""
    root = Path(__file__).resolve().parents[1]  # the cfsim package
    files = [root / "simulation.py", root / "engine" / "cfs.py"]
    for sub in ("kernel", "goruntime", "workloads"):
        files.extend(sorted((root / sub).glob("*.py")))
    h = hashlib.sha256()
    for path in files:
        if path.exists():
            h.update(path.name.encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def surface_key(sc: Scenario, grid: SurfaceGrid) -> str:
    """Hash of the response-shaping scenario keys, the grid and the event engine's source."""
    parts: dict[str, Any] = {}
    own = {"kind", *workload_kind(sc["workload.kind"]).keys}  # keys of other kinds do not matter
    for section, keys in sc.data.items():
        excl = _EXCLUDED.get(section, set())
        if section in _EXCLUDED and excl is None:
            continue
        parts[section] = {k: v for k, v in keys.items()
                          if k not in (excl or set()) and (section != "workload" or k in own)}
    blob = json.dumps({"scenario": parts, "grid": grid.as_dict(), "format": SURFACE_FORMAT,
                       "engine": _engine_fingerprint()}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def cache_dir() -> Path:
    """``$CFSIM_CACHE_DIR/surfaces`` or ``~/.cache/cfsim/surfaces``."""
    root = os.environ.get("CFSIM_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "cfsim")
    return Path(root) / "surfaces"


def save_surface(surface: SurfaceResponse, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez_compressed(tmp, usage_factor=surface.usage_factor, tput_factor=surface.tput_factor,
                        throttled=surface.throttled, grid=json.dumps(surface.grid.as_dict()))
    os.replace(tmp, path)


def load_surface(path: Path, base: AnalyticResponse) -> SurfaceResponse:
    with np.load(path) as z:
        g = json.loads(str(z["grid"]))
        grid = SurfaceGrid(tuple(g["limits_cores"]), tuple(int(x) for x in g["gomaxprocs"]),
                           tuple(g["demands_cores"]), g["duration_s"], g["warmup_s"])
        return SurfaceResponse(base, grid, z["usage_factor"].copy(), z["tput_factor"].copy(),
                               z["throttled"].copy(), describe=f"surface (event engine, cached {path.name})")


def _probe(sc: Scenario, grid: SurfaceGrid, simulate_fn: Callable[[Scenario], Any]) -> str | None:
    """None if the event engine can measure this workload, else the reason it cannot."""
    shape = work_shape(sc)
    try:
        point = sc.with_overrides(_point_overrides(sc, shape, grid.limits_cores[0], grid.gomaxprocs[0],
                                                   grid.demands_cores[0], grid))
        point = point.with_overrides([("run.duration_s", 1.0), ("run.warmup_s", 0.0)])
        summary = simulate_fn(point).summary
    except Exception as exc:  # noqa: BLE001
        return f"event engine failed on a probe point: {type(exc).__name__}: {exc}"
    missing = [k for k in ("cpu_usage_cores", "throughput_per_s", "throttled_ratio") if summary.get(k) is None]
    if missing:
        return f"event engine summary lacks {', '.join(missing)}"
    return None


def response_for(sc: Scenario, mode: str = "auto", nominal_demand_cores: float | None = None,
                 grid: SurfaceGrid | None = None, simulate_fn: Callable[[Scenario], Any] | None = None,
                 directory: Path | None = None, progress: Callable[[int, int], None] | None = None
                 ) -> ResponseFn:
    """The response function for a scenario (see module doc for the modes). ``simulate_fn`` is the
    event engine, ``scenario -> result with .summary`` (:func:`cfsim.simulation.simulate`); the
    ``"surface"`` and ``"auto"`` modes need it."""
    shape = work_shape(sc)
    base = AnalyticResponse(int(sc["host.cpus"]), shape)
    if mode == "analytic":
        return base
    if mode not in ("surface", "auto"):
        raise ValueError(f"response mode must be 'analytic', 'surface' or 'auto' (got {mode!r})")
    if simulate_fn is None:
        raise ValueError(f"response mode {mode!r} measures the pod on the event engine: pass "
                         f"simulate_fn=cfsim.simulation.simulate (or use mode 'analytic')")
    if nominal_demand_cores is None:
        nominal_demand_cores = 1.0
    grid = grid or default_grid(sc, nominal_demand_cores)
    if not shape.rate_driven and len(grid.demands_cores) != 1:
        # threads / closed: the offered demand is fixed by the workload, not by a rate; measure at it
        # (and OS threads ignore GOMAXPROCS: one value suffices)
        gmps = (1,) if shape.bypass_gomaxprocs else grid.gomaxprocs
        grid = SurfaceGrid(grid.limits_cores, gmps, (float(nominal_demand_cores),),
                           grid.duration_s, grid.warmup_s)
    path = (directory or cache_dir()) / f"{surface_key(sc, grid)}.npz"
    if path.exists():
        try:
            return load_surface(path, base)
        except Exception:  # noqa: BLE001 - a corrupt cache is re-measured
            path.unlink(missing_ok=True)
    reason = _probe(sc, grid, simulate_fn)
    if reason is not None:
        if mode == "surface":
            raise RuntimeError(f"cannot measure a response surface: {reason}")
        return AnalyticResponse(base.cpus, shape, base.describe + f" [fallback: {reason}]")
    surface = measure_surface(sc, grid, simulate_fn, progress)
    save_surface(surface, path)
    surface.describe = f"surface (event engine, measured into {path})"
    return surface
