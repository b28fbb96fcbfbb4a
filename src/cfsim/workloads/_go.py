"""Shared pieces of the Go workloads: building the runtime from a scenario, latency arrays,
and merging the runtime's summary and series with the workload's."""
from __future__ import annotations

import math
from typing import Any, Final, Sequence

import numpy as np
import pandas as pd

from cfsim.goruntime.runtime import (ALLOC_QUANTUM_MIN, SAMPLE_NS_DEFAULT, Claim, GoParams, GoRuntime, MiB,
                                     WorkSource)
from cfsim.goruntime.syncpool import PerPPool
from cfsim.monitoring.histogram import quantiles_through_buckets

SAMPLE_NS = SAMPLE_NS_DEFAULT
MAX_SAMPLES = 200_000


def sample_interval_ns(scenario) -> int:
    """Series sampling interval: 100 ms, coarser (a multiple of 100 ms) for runs so long that
    more than 200,000 samples would be kept."""
    n = math.ceil(scenario["run.duration_s"] * 1e9 / (SAMPLE_NS * MAX_SAMPLES))
    return SAMPLE_NS * max(1, n)


def make_runtime(engine, scenario) -> GoRuntime:
    return GoRuntime(engine, GoParams.from_scenario(scenario), cpus=scenario["host.cpus"],
                     base_limit=scenario["cgroup.cpu_limit"], limit_schedule=scenario["cgroup.limit_schedule"],
                     period_us=scenario["cgroup.period_us"], sample_ns=sample_interval_ns(scenario))


def count_at(samples: list[tuple], t_ns: int, col: int, now_ns: int, now_value: float) -> float:
    """A cumulative counter at ``t_ns`` from ``(t, ...)`` samples (linear between samples; the
    live value at ``now``)."""
    if t_ns >= now_ns:
        return float(now_value)
    if not samples or t_ns <= 0:
        return 0.0
    arr = np.asarray([(r[0], r[col]) for r in samples], dtype=float)
    return float(np.interp(t_ns, np.append(arr[:, 0], now_ns), np.append(arr[:, 1], now_value)))


#: the latency quantiles a summary reports, by name (``latency_p50_s`` ...): the tail the SLOs read,
#: and the body, which is what a twin's time outside the server is fitted to
#: (:func:`cfsim.validation.normalise.outside_time_ms`)
LATENCY_QUANTILES: Final = {"p10": 0.1, "p25": 0.25, "p50": 0.5, "p75": 0.75, "p90": 0.9, "p99": 0.99, "p999": 0.999}


def latency_keys(lat_s: np.ndarray, buckets_s: Sequence[float] | None = None) -> dict[str, Any]:
    """Quantiles, mean and maximum of latencies [s]. With ``buckets_s`` (``run.latency_buckets_s``)
    the quantiles are the ones a Prometheus histogram with those bounds reports
    (:func:`cfsim.monitoring.histogram.quantiles_through_buckets`); the mean stays exact, as ``_sum / _count``."""
    if lat_s.size == 0:
        return {**{f"latency_{name}_s": None for name in LATENCY_QUANTILES}, "latency_max_s": None,
                "latency_mean_s": None}
    qs = tuple(LATENCY_QUANTILES.values())
    if buckets_s:
        got = quantiles_through_buckets(lat_s, buckets_s, qs)
    else:
        got = list(np.percentile(lat_s, [100 * q for q in qs]))
    return {**{f"latency_{name}_s": float(v) for name, v in zip(LATENCY_QUANTILES, got)},  # type: ignore[arg-type]
            "latency_max_s": float(lat_s.max()), "latency_mean_s": float(lat_s.mean())}


def merge_series(rt_df: pd.DataFrame, wl_df: pd.DataFrame) -> pd.DataFrame:
    if rt_df is None or rt_df.empty:
        return wl_df
    if wl_df is None or wl_df.empty:
        return rt_df
    return pd.merge_asof(wl_df.sort_values("t_s"), rt_df.sort_values("t_s"), on="t_s",
                         direction="nearest", tolerance=1e-6)


class _SideG:
    """A goroutine of side work (a /metrics scrape, the start-up's heap build): its remaining CPU
    and its allocation; ``keeps``: what it allocates stays reachable (:meth:`GoRuntime.keep_live`);
    ``pool``: the ``sync.Pool`` it takes one object from when it starts and puts it back to when
    it ends, on the P it ends on (:class:`~cfsim.goruntime.syncpool.PerPPool`)."""

    __slots__ = ("left", "alloc_per_ns", "keeps", "pool", "got")

    def __init__(self, work_ns: int, alloc_bytes: float, keeps: bool = False, pool: PerPPool | None = None):
        self.left = int(work_ns)
        self.alloc_per_ns = alloc_bytes / max(1, work_ns)
        self.keeps = keeps
        self.pool = pool
        self.got = False


class WithSideWork(WorkSource):
    """A work source that serves side goroutines (scrapes) before the workload's own work,
    delegating everything else to ``main``. Set as the runtime's source only when side work is
    configured, so workloads without it pay nothing."""

    def __init__(self, main: WorkSource, rt: GoRuntime | None = None):
        self.main = main
        self.rt = rt   # told what a side goroutine that keeps its objects allocated
        self.side: list[_SideG] = []
        self.building = 0   # build goroutines the load waits for (GoRuntime.link_heap)

    def inject(self, g: _SideG) -> None:
        self.side.append(g)

    def has_work(self) -> bool:
        return bool(self.side) or self.main.has_work()

    def claim(self, max_ns: int, p: int = -1) -> Claim | None:
        if self.side:
            g = self.side.pop(0)
            work = min(g.left, max_ns)
            if g.keeps:
                # a build allocates nothing but its objects: the runtime checks the trigger at
                # each span it takes, so each chunk allocates at most the runtime's smallest
                # allocation quantum (the first chunk comes before it has seen any allocation)
                work = max(1, min(work, int(ALLOC_QUANTUM_MIN / g.alloc_per_ns)))
            alloc = int(work * g.alloc_per_ns)
            if g.pool is not None and not g.got:
                g.got = True
                if g.pool.get(max(p, 0)):   # New: the pool had nothing for this P
                    alloc += g.pool.obj_bytes
            return Claim(work, alloc, g, p=p)
        return self.main.claim(max_ns, p)

    def done(self, claim, t0: int, t1: int) -> None:
        g = claim.token
        if isinstance(g, _SideG):
            g.left -= claim.work
            if g.keeps and self.rt is not None:
                self.rt.keep_live(claim.alloc)
            if g.left > 0:
                self.side.append(g)
            elif g.pool is not None:
                g.pool.put(max(claim.p, 0))
            if self.building and g.keeps and g.left <= 0:
                # a build goroutine is done; the last one to finish lets the load start
                self.building -= 1
                if self.building == 0 and self.rt is not None:
                    self.rt.link_heap()
            return
        self.main.done(claim, t0, t1)

    def hold_polled(self) -> int:
        return self.main.hold_polled()

    def release_polled(self, p: int) -> int:
        return self.main.release_polled(p)

    def has_local(self, p: int) -> bool:
        return self.main.has_local(p)

    def continues(self, claim) -> bool:
        """A side goroutine ends at its chunk's end (or waits for its next turn); the workload's
        own goroutines go on as ``main`` says, unless a side goroutine is waiting to run."""
        if isinstance(claim.token, _SideG) or self.side:
            return False
        return self.main.continues(claim)

    def requeue(self, claim, left_ns: int, t0: int, t1: int) -> None:
        g = claim.token
        if isinstance(g, _SideG):
            g.left -= claim.work - left_ns
            if g.keeps and self.rt is not None and claim.work > 0:
                # the part done before the stop, as the runtime counts it (_save_partial)
                self.rt.keep_live(int(claim.alloc * (1 - left_ns / claim.work)))
            self.side.insert(0, g)
            return
        self.main.requeue(claim, left_ns, t0, t1)


class Scrapes:
    """A Prometheus scrape of the process every ``scrape_interval_s``: the HTTP request arrives
    through the netpoller and a goroutine serves ``/metrics`` (``scrape_cpu_ms`` of CPU,
    ``scrape_alloc_kb`` of garbage), compressing it with a writer from a ``sync.Pool`` of
    ``pool_bytes`` objects (client_golang's ``gzipPool``; 0: no pool). The first scrape falls at
    a random phase of the interval."""

    def __init__(self, engine, rt: GoRuntime, side: WithSideWork, interval_ns: int, cpu_ns: int,
                 alloc_bytes: float, phase_ns: int, pool_bytes: int = 0):
        self.engine, self.rt, self.side = engine, rt, side
        self.interval_ns, self.cpu_ns, self.alloc = interval_ns, cpu_ns, alloc_bytes
        self.phase_ns = phase_ns
        self.pool = rt.new_pool(pool_bytes) if pool_bytes > 0 else None

    def start(self) -> None:
        self.engine.call_at(self.phase_ns, self._scrape)

    def _scrape(self) -> None:
        self.side.inject(_SideG(self.cpu_ns, self.alloc, pool=self.pool))
        self.rt.ready(1)
        self.engine.call_later(self.interval_ns, self._scrape)


#: the lab workload's build (``buildLiveHeap``, lab/cmd/workload/heap.go): a ``[]*node`` slice of one
#: 8-byte pointer a node, then the 64-byte nodes, so the slice is 8 of every 72 bytes
LAB_BUILD_SLICE_FRACTION: Final = 8 / 72
#: CPU a KiB of the lab workload's nodes takes to build: 1.06 MiB a millisecond at the median
#: (quartiles 0.79-1.09) between the build's GC cycles in the lab's 256 MiB runs' gctraces
#: (docs/model-notes.md, "How the lab's workload builds its live heap")
LAB_BUILD_NS_PER_KB: Final = 921.0


def heap_build(scenario) -> list[_SideG]:
    """The goroutines that allocate the live heap at the start (``go.heap_built_at_start``; none
    without it): ``go.live_heap_mb`` of objects that stay reachable.

    * ``go.heap_build = "beside-load"``: one goroutine at the allocator's CPU a byte
      (``go.alloc_ns_per_kb``), beside the load from t = 0. The pacer's response to the build
      does not depend on its speed once the cons/mark it measures puts the trigger at its lower
      bound (a cons/mark above ~0.1 does; the lab's builds measured 0.05-2.3).
    * ``"before-load"``: as the lab's workload, the slice first (one allocation), then the nodes at
      the lab's pace; the runtime holds the load until the build is done
      (:meth:`GoRuntime.build_before_load`)."""
    live = scenario["go.live_heap_mb"] * MiB
    if not scenario["go.heap_built_at_start"] or live <= 0:
        return []
    if scenario["go.heap_build"] == "beside-load":
        return [_SideG(max(1, int(round(live / 1024 * scenario["go.alloc_ns_per_kb"]))), live, keeps=True)]
    slice_bytes = live * LAB_BUILD_SLICE_FRACTION
    nodes = live - slice_bytes
    return [_SideG(1, slice_bytes, keeps=True),
            _SideG(max(1, int(round(nodes / 1024 * LAB_BUILD_NS_PER_KB))), nodes, keeps=True)]


def with_side_work(engine, rt: GoRuntime, source, scenario) -> Scrapes | None:
    """Set ``rt``'s source: ``source`` with the work that runs beside it, the start-up's heap build
    ahead of it (:func:`heap_build`) and the scrapes of ``/metrics`` (the plain source when
    neither runs); returns the scrape driver, None when the scenario is not scraped."""
    interval = scenario["workload.scrape_interval_s"]
    cpu_ms = scenario["workload.scrape_cpu_ms"]
    alloc_kb = scenario["workload.scrape_alloc_kb"]
    pool_bytes = int(round(scenario["workload.scrape_pool_kb"] * 1024))
    build = heap_build(scenario)
    scraped = bool(interval) and cpu_ms > 0
    if not scraped and not build:
        rt.source = source
        return None
    side = WithSideWork(source, rt)
    rt.source = side
    for g in build:
        side.inject(g)
    if build and scenario["go.heap_build"] == "before-load":
        side.building = len(build)
        rt.build_before_load()
    if not scraped:
        return None
    interval_ns = int(round(interval * 1e9))
    phase = int(np.random.default_rng([scenario["run.seed"], 0x5C4A9E]).integers(0, interval_ns))
    return Scrapes(engine, rt, side, interval_ns, max(1, int(round(cpu_ms * 1e6))),
                   alloc_kb * 1024, phase, pool_bytes)
