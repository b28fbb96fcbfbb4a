"""A pod's memory response for the long-horizon engine: what a container memory limit does to a
Go process, measured with the event engine.

    mem(memory_limit_bytes, demand_cores) -> MemoryPoint(usage_factor, tput_factor,
                                                         working_set_bytes, peak_bytes, oom)

The GOMEMLIMIT the process runs with follows the scenario's policy (``go.gomemlimit_policy``:
automemlimit reads the container limit once at start-up), so a smaller container limit means a
lower heap goal, more GC cycles and more GC CPU (:mod:`cfsim.goruntime`), or an OOM kill when
the heap cannot be held under it (:mod:`cfsim.kernel.memory`). Measured on a grid over the
memory limit (fractions of the working-set peak the process reaches without a limit) and the
offered demand (0.5, 1, 1.5 x nominal), at the scenario's own CPU limit and GOMAXPROCS; stored
as factors over the same run without a memory limit, so the long-horizon engine multiplies them
onto its CPU response (the CPU limit's effect on GC is assumed separable from the memory
limit's: stated, not measured). Interpolated linearly in the limit and the demand; cached on
disk beside the CPU surfaces.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from cfsim.engine.response import _axis_cell, _engine_fingerprint, _point_overrides, cache_dir, work_shape
from cfsim.scenario import Scenario
from cfsim.workloads.kinds import workload_kind

MiB = 1 << 20
MEMRESPONSE_FORMAT = 2
#: memory limits as fractions of the unlimited working-set peak
DEFAULT_FRACTIONS = (0.5, 0.7, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0)
SMALL_FRACTIONS = (0.6, 0.85, 1.0, 1.2, 1.6)


@dataclass(frozen=True)
class MemoryPoint:
    usage_factor: float      # CPU usage over the same point without a memory limit
    tput_factor: float       # throughput over the same point without a memory limit
    working_set_bytes: float  # mean cgroup working set over the window (what metrics-server reads)
    peak_bytes: float        # high-water mark over the window
    oom: bool                # OOM-killed within the run


@dataclass
class MemoryResponse:
    """Measured memory response (see the module doc); ``None`` limit = unlimited."""

    natural_peak_bytes: float
    demands_cores: tuple[float, ...]
    limits_bytes: tuple[float, ...]
    usage_factor: np.ndarray   # [M, D]
    tput_factor: np.ndarray
    working_set: np.ndarray
    peak: np.ndarray
    oom: np.ndarray            # 1.0 where the run was OOM-killed
    unlimited_ws: np.ndarray   # [D]: working set without a limit
    unlimited_peak: np.ndarray
    describe: str = "memory response"
    _memo: dict = field(default_factory=dict, repr=False)

    def __call__(self, limit_bytes: float | None, demand_cores: float) -> MemoryPoint:
        key = (None if limit_bytes is None else int(limit_bytes) >> 16, round(demand_cores, 4))
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        j, j1, fy = _axis_cell(self.demands_cores, demand_cores)
        if limit_bytes is None or limit_bytes >= self.limits_bytes[-1]:
            ws = (1 - fy) * self.unlimited_ws[j] + fy * self.unlimited_ws[j1]
            pk = (1 - fy) * self.unlimited_peak[j] + fy * self.unlimited_peak[j1]
            out = MemoryPoint(1.0, 1.0, float(ws), float(pk), False)
        else:
            i, i1, fx = _axis_cell(self.limits_bytes, float(limit_bytes))

            def lerp(t: np.ndarray) -> float:
                return float((1 - fx) * (1 - fy) * t[i, j] + fx * (1 - fy) * t[i1, j]
                             + (1 - fx) * fy * t[i, j1] + fx * fy * t[i1, j1])

            # an OOM anywhere in the cell's lower corner at this demand: below the smallest
            # limit that survived, the pod dies
            oom = lerp(self.oom) >= 0.5 or (limit_bytes < self.limits_bytes[0] and bool(self.oom[0, j]))
            out = MemoryPoint(lerp(self.usage_factor), lerp(self.tput_factor), lerp(self.working_set),
                              lerp(self.peak), bool(oom))
        if len(self._memo) < 100_000:
            self._memo[key] = out
        return out


def _summary_point(summary: dict, base: dict | None) -> tuple[float, float, float, float, bool]:
    oom = bool(summary.get("oom_kills"))
    ws = float(summary.get("memory_usage_mean_bytes") or summary.get("memory_usage_bytes") or 0.0)
    peak = float(summary.get("memory_max_usage_bytes") or 0.0)
    if base is None:
        return 1.0, 1.0, ws, peak, oom
    fu = summary["cpu_usage_cores"] / base["cpu_usage_cores"] if base["cpu_usage_cores"] else 1.0
    ft = summary["throughput_per_s"] / base["throughput_per_s"] if base["throughput_per_s"] else 1.0
    if oom:
        fu = ft = 0.0
    return fu, ft, ws, peak, oom


def _alloc_rate_bytes_per_s(sc: Scenario, demand_cores: float) -> float:
    alloc_key = workload_kind(sc["workload.kind"]).alloc_key
    if alloc_key is None:
        return 0.0
    return demand_cores / work_shape(sc).cpu_s_per_item * sc[f"workload.{alloc_key}"] * 1024.0


def fill_time_s(sc: Scenario, demand_cores: float, heap_bytes: float) -> float:
    """How long the heap takes to grow from the live heap to ``heap_bytes`` at a demand's
    allocation rate (the warm-up a run needs before its memory is in steady state)."""
    rate = _alloc_rate_bytes_per_s(sc, demand_cores)
    grow = max(0.0, heap_bytes - sc["go.live_heap_mb"] * MiB)
    return grow / rate if rate > 0 else 0.0


def measure_memory_response(sc: Scenario, demands_cores: tuple[float, ...], fractions: tuple[float, ...],
                            simulate_fn: Callable[[Scenario], Any], duration_s: float = 8.0,
                            warmup_s: float = 2.0) -> MemoryResponse:
    """Run the event engine: first each demand without a memory limit (the reference and the
    natural peak), then each memory limit (fraction of the reference) x demand. The reference
    is the largest natural peak with GOGC on; with GOGC off the heap has no natural peak (it
    grows to GOMEMLIMIT), so the pod template's memory limit is the reference. Each run warms
    up until its heap has had time to fill twice (``fill_time_s``, at most 60 s)."""
    from cfsim.engine.response import SurfaceGrid

    shape = work_shape(sc)
    limit = sc["cgroup.cpu_limit"]
    from cfsim.goruntime.gomaxprocs import gomaxprocs_value
    gmp = gomaxprocs_value(sc["go.gomaxprocs"], limit, int(sc["host.cpus"]), sc["go.version"], sc["go.round"],
                           sc["cgroup.period_us"])
    grid = SurfaceGrid((float(limit or sc["host.cpus"]),), (gmp,), tuple(demands_cores), duration_s, warmup_s)

    template_b = None if sc["cgroup.memory_limit_mb"] is None else sc["cgroup.memory_limit_mb"] * MiB
    gogc_off = sc["go.gogc"] < 0

    def point(dem: float, mem_b: float | None) -> dict:
        heap = mem_b if mem_b is not None else (template_b if gogc_off else 2 * sc["go.live_heap_mb"] * MiB)
        warm = min(60.0, max(warmup_s, 2.0 * fill_time_s(sc, dem, heap or 0.0)))
        g = SurfaceGrid(grid.limits_cores, grid.gomaxprocs, grid.demands_cores, warm + duration_s, warm)
        ov = _point_overrides(sc, shape, grid.limits_cores[0], gmp, dem, g)
        ov.append(("cgroup.memory_limit_mb", None if mem_b is None else mem_b / MiB))
        if limit is None:
            ov = [(k, v) for k, v in ov if k != "cgroup.cpu_limit"] + [("cgroup.cpu_limit", None)]
        return simulate_fn(sc.with_overrides(ov)).summary

    if gogc_off and template_b is None:
        raise ValueError("a memory response with GOGC=off needs cgroup.memory_limit_mb (the heap grows until "
                         "GOMEMLIMIT or the limit stops it)")
    if gogc_off:
        # the unlimited reference: the template limit itself (GOGC off has no natural peak)
        bases = [point(d, template_b) for d in demands_cores]
        natural = float(template_b)
    else:
        bases = [point(d, None) for d in demands_cores]
        natural = max(float(b.get("memory_max_usage_bytes") or 0.0) for b in bases)
    limits = tuple(sorted(f * natural for f in fractions))
    nM, nD = len(limits), len(demands_cores)
    fu, ft, ws, pk, oom = (np.zeros((nM, nD)) for _ in range(5))
    for a, lim_b in enumerate(limits):
        for b, dem in enumerate(demands_cores):
            s = point(dem, lim_b)
            fu[a, b], ft[a, b], ws[a, b], pk[a, b], o = _summary_point(s, bases[b])
            oom[a, b] = float(o)
    u_ws = np.array([_summary_point(b, None)[2] for b in bases])
    u_pk = np.array([_summary_point(b, None)[3] for b in bases])
    return MemoryResponse(natural, tuple(demands_cores), limits, fu, ft, ws, pk, oom, u_ws, u_pk,
                          describe="memory response (event engine, measured now)")


def memory_response_key(sc: Scenario, demands: tuple[float, ...], fractions: tuple[float, ...],
                        duration_s: float) -> str:
    parts = {s: {k: v for k, v in keys.items()} for s, keys in sc.data.items() if s not in ("vpa", "hpa", "run")}
    parts.get("cgroup", {}).pop("memory_limit_mb", None)
    parts.get("cgroup", {}).pop("memory_request_mb", None)
    parts.get("workload", {}).pop("rate_per_s", None)
    own = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]
    blob = json.dumps({"scenario": parts, "demands": demands, "fractions": fractions, "duration_s": duration_s,
                       "format": MEMRESPONSE_FORMAT, "engine": _engine_fingerprint(), "self": own},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def _save(r: MemoryResponse, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez_compressed(tmp, usage_factor=r.usage_factor, tput_factor=r.tput_factor, working_set=r.working_set,
                        peak=r.peak, oom=r.oom, unlimited_ws=r.unlimited_ws, unlimited_peak=r.unlimited_peak,
                        meta=json.dumps({"natural": r.natural_peak_bytes, "demands": list(r.demands_cores),
                                         "limits": list(r.limits_bytes)}))
    os.replace(tmp, path)


def _load(path: Path) -> MemoryResponse:
    with np.load(path) as z:
        meta = json.loads(str(z["meta"]))
        return MemoryResponse(meta["natural"], tuple(meta["demands"]), tuple(meta["limits"]),
                              z["usage_factor"].copy(), z["tput_factor"].copy(), z["working_set"].copy(),
                              z["peak"].copy(), z["oom"].copy(), z["unlimited_ws"].copy(), z["unlimited_peak"].copy(),
                              describe=f"memory response (event engine, cached {path.name})")


def memory_response_for(sc: Scenario, nominal_demand_cores: float, simulate_fn: Callable[[Scenario], Any],
                        small: bool = False, directory: Path | None = None) -> MemoryResponse:
    """The scenario's memory response: cached, else measured with ``simulate_fn`` (the event
    engine, :func:`cfsim.simulation.simulate`, passed in by the caller: the engines sit below it)."""
    d = float(nominal_demand_cores)
    demands = (round(0.5 * d, 6), round(d, 6), round(1.5 * d, 6))
    fractions = SMALL_FRACTIONS if small else DEFAULT_FRACTIONS
    duration = 4.0 if small else 8.0
    path = (directory or cache_dir()) / f"mem-{memory_response_key(sc, demands, fractions, duration)}.npz"
    if path.exists():
        try:
            return _load(path)
        except Exception:  # noqa: BLE001 - a corrupt cache is measured again
            path.unlink(missing_ok=True)
    r = measure_memory_response(sc, demands, fractions, simulate_fn, duration, min(2.0, duration / 4))
    _save(r, path)
    r.describe = f"memory response (event engine, measured into {path})"
    return r
