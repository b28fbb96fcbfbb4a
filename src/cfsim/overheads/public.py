"""Public measurements of Go with GOMAXPROCS above its CPU limit, and of the runtime's costs on
many-core hosts, beside the model.

The lab has 2 CPUs; costs that only many-core hosts show come from these measurements. Each one is
turned into two scenarios (the over-provisioned setting and its reference) built from what the
source states plus choices stated in ``assumed`` (never tuned to the source's numbers; what a
source leaves open about its host is read centrally as :data:`LOGICAL_CPUS` and spanned by the
band), and a headline ratio the model computes the same way as the source. Two of them are
*training*: each pins one parameter no other measurement pins (:func:`fit`); all the others are
*held out* and compared with the fitted model, with the band the priors of
:data:`cfsim.overheads.band.UNPINNED` span. ``kind = "direction"`` marks sources that publish
only a direction (flame graphs, anecdotes).

Sources (cited by URL; numbers as published):

* ghouscht, "CPU limits & Go" (Bärner Go Talks 2024), https://github.com/ghouscht/cpu-limits-and-go
* golang/go#28808 "runtime: scheduler work stealing slow for high GOMAXPROCS",
  https://github.com/golang/go/issues/28808
* golang/go#18237 "runtime: scheduler is slow when goroutines are frequently woken",
  https://github.com/golang/go/issues/18237
* grpc/grpc-go#1014, https://github.com/grpc/grpc-go/issues/1014
* golang/go#20457 (CockroachDB, idle GC workers), https://github.com/golang/go/issues/20457
* elastic/apm-server#8278 and #8175, https://github.com/elastic/apm-server/pull/8278,
  https://github.com/elastic/apm-server/pull/8175
* "Golang Performance Penalty in Kubernetes", blog.esc.sh,
  https://blog.esc.sh/golang-performance-penalty-in-kubernetes/
* VictoriaMetrics#5867, https://github.com/VictoriaMetrics/VictoriaMetrics/issues/5867
* golang/go#68399, https://github.com/golang/go/issues/68399
* River Phillips, "Go, Containers, and the Linux Scheduler", https://www.riverphillips.dev/blog/go-cfs/
* 58 Tech, "Diagnosing and Optimizing High CPU Usage of a Go Service Migrated to Kubernetes Using
  Flame Graphs" (built-in scenario ``push-58tech``)
* menu (Qiita, 2025), "GoのGOMAXPROCSを過剰に設定することによるCPUスロットリングによるパフォーマンス低下"
  (built-in scenario ``menu-gke``)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from cfsim.overheads.band import UNPINNED, corner_overrides
from cfsim.scenario import Scenario, load_scenario

Summary = Mapping[str, Any]

#: How the model reads a host's CPU count that a source gives without saying whether its CPUs are
#: cores or hardware threads. Go's default GOMAXPROCS is ``runtime.NumCPU``, "the number of logical
#: CPUs usable by the current process" (Go ``src/runtime/debug.go``), and x86 servers and cloud
#: machines expose two hardware threads per core unless SMT is switched off (Amazon EC2 API,
#: ``CpuOptionsRequest.ThreadsPerCore``: 1 disables multithreading, 2 is the default,
#: https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CpuOptionsRequest.html; Google
#: Compute Engine ``AdvancedMachineFeatures.threadsPerCore``: unset means the most the processor
#: supports). So the central model takes two threads a core for such hosts, as the training
#: measurement ghouscht does, and the band still spans one and two
#: (:data:`cfsim.overheads.band.UNPINNED`). Where a source names the processor, its thread count is
#: a fact and goes into the scenarios themselves (docs/model-notes.md, "A host's CPU count is read
#: as hardware threads").
LOGICAL_CPUS: tuple[str, ...] = ("host.threads_per_core=2",)


def _ratio(key: str) -> Callable[[Summary, Summary], float | None]:
    def f(a: Summary, b: Summary) -> float | None:
        x, y = a.get(key), b.get(key)
        return None if x is None or y is None or not y else x / y
    return f


def _per_throttle(a: Summary, b: Summary) -> float | None:
    def depth(s):
        return s["throttled_time_s"] / s["nr_throttled"] if s.get("nr_throttled") else None
    x, y = depth(a), depth(b)
    return None if x is None or y is None or not y else x / y


def _cpu_share_of_difference(a: Summary, b: Summary) -> float | None:
    """The share of ``a``'s CPU that ``b`` (the same without one cost) does not spend."""
    x, y = a.get("cpu_usage_cores"), b.get("cpu_usage_cores")
    return None if not x or y is None else (x - y) / x


def _sched_share(a: Summary, b: Summary) -> float | None:
    return a.get("sched_cpu_fraction")


def _idle_share_of_gc(a: Summary, b: Summary) -> float | None:
    gc = sum(a.get(f"cpu_real_gc_{k}_s", 0.0) for k in ("assist", "dedicated", "idle", "pause"))
    return a.get("cpu_real_gc_idle_s", 0.0) / gc if gc else None


@dataclass(frozen=True)
class Measurement:
    """One public measurement: two scenarios (``a``: the over-provisioned or bigger setting,
    ``b``: the reference) and how the headline compares them."""

    name: str
    url: str
    source: str                     # what the source states (setup and the numbers)
    assumed: str                    # what the model had to choose
    base: Mapping[str, Mapping[str, Any]] | str
    a: tuple[str, ...]
    b: tuple[str, ...]
    headline: str                   # what the ratio is
    observed: float
    metric: Callable[[Summary, Summary], float | None]
    kind: str = "ratio"             # "ratio" | "direction" | "at_least"
    role: str = "held-out"          # "train" | "held-out"
    fits: str | None = None         # the parameter a training measurement pins
    fit_grid: tuple[float, ...] = ()
    alternative: float | None = None  # a second reading of an ambiguous headline
    duration_s: float = 6.0
    b_last: tuple[str, ...] = ()    # overrides of ``b`` applied after the fitted parameters
    central: tuple[str, ...] = ()   # the likeliest reading of what the source leaves open: the
    #                                 central model takes it, the band's corners span it

    def stated(self) -> set[str]:
        """``section.key`` the measurement's own scenarios set: facts of the source, which the
        band's corners leave alone."""
        return {o.split("=", 1)[0].strip() for o in self.a + self.b + self.b_last}

    def scenarios(self, extra: tuple[str, ...] = (), duration_s: float | None = None) -> tuple[Scenario, Scenario]:
        dur = duration_s or self.duration_s
        common = (f"run.duration_s={dur}", f"run.warmup_s={min(1.0, dur / 5):g}") + extra
        return (load_scenario(self.base if isinstance(self.base, str) else dict(self.base), self.a + common),
                load_scenario(self.base if isinstance(self.base, str) else dict(self.base),
                              self.b + common + self.b_last))


def _closed(cpus, limit, clients, cpu_ms, alloc_kb, heap_mb, **kw) -> dict:
    go = {"live_heap_mb": heap_mb, "version": kw.pop("version", "1.22")}
    wl = {"kind": "closed", "clients": clients, "cpu_ms_per_request": cpu_ms, "alloc_kb_per_request": alloc_kb}
    wl.update(kw)
    out = {"host": {"cpus": cpus}, "go": go, "workload": wl}
    if limit is not None:
        out["cgroup"] = {"cpu_limit": limit}
    return out


def _open(cpus, limit, rate, cpu_ms, alloc_kb, heap_mb, **kw) -> dict:
    out = _closed(cpus, limit, 1, cpu_ms, alloc_kb, heap_mb, **kw)
    out["workload"].update({"kind": "open", "rate_per_s": rate})
    out["workload"].pop("clients")
    return out


MEASUREMENTS: tuple[Measurement, ...] = (
    Measurement(
        "ghouscht", "https://github.com/ghouscht/cpu-limits-and-go",
        "6-CPU host, docker --cpus 1, HTTP isPrime handler under hey (50 connections, 200 requests): "
        "134 requests/s at GOMAXPROCS 6, 276 at 3, 262 at 1; p99 809 / 513 / 205 ms",
        "3.8 ms of CPU per request (1 core / 262 per s), Go 1.22, 4 MiB live heap; 6 CPUs = 3 cores x 2 "
        "hardware threads (a 6-CPU Docker host; the source does not say)",
        _closed(6, 1.0, 50, 3.8, 2, 4, ), ("go.gomaxprocs=6", "host.threads_per_core=2"),
        ("go.gomaxprocs=1", "host.threads_per_core=2"),
        "requests/s at GOMAXPROCS 6 / at 1", 134.372 / 262.112, _ratio("throughput_per_s"),
        role="train", fits="host.smt_slowdown", fit_grid=(0.2, 0.4, 0.6, 0.8, 0.9, 1.0), duration_s=5.0),
    Measurement(
        "golang/go#28808", "https://github.com/golang/go/issues/28808",
        "56 logical CPUs, Go 1.11, no quota, GOMAXPROCS 56, 2,500 goroutines that mostly block and wake; "
        "968 % CPU; findrunnable 41 % cumulative, futex 34 % flat, runtime.lock 23 % cumulative",
        "the goroutines as an open stream of 40,000 wake-ups/s of 50 us CPU each (2 cores of work), "
        "no server path (in-process wake-ups), 64 MiB live heap; runtime.lock's share is the CPU that "
        "the same run without sched.lock contention does not spend; two E5-2660 v4 have 14 cores and "
        "28 hardware threads each (Intel's specification), so 56 CPUs are 28 cores x 2",
        _open(56, None, 40000, 0.05, 1, 64, server_cpu_us_per_request=0.0, server_alloc_kb_per_request=0.0),
        ("go.gomaxprocs=56", "host.threads_per_core=2"), ("go.gomaxprocs=56", "host.threads_per_core=2"),
        "share of CPU in runtime.lock (sched.lock contention) at GOMAXPROCS 56", 0.23, _cpu_share_of_difference,
        role="train", fits="go.sched_lock_us", fit_grid=(0.1, 0.5, 1.0, 1.5, 2.0, 2.25, 2.5, 2.75, 3.0, 3.5, 4.0, 5.0, 6.0), duration_s=1.0,
        b_last=("go.sched_lock_us=0.0",)),
    Measurement(
        "golang/go#18237", "https://github.com/golang/go/issues/18237",
        "2 x 6 cores (no HT), Go 1.7, HTTP front end with 40 clients: findrunnable 35 % cumulative, futex "
        "11 % flat",
        "each request 0.1 ms of CPU in the front end and 1 ms waiting on the storage back end (as round "
        "trip), 16 MiB live heap",
        _closed(12, None, 40, 0.1, 8, 16, client_rtt_ms=1.0), ("go.gomaxprocs=12", "host.threads_per_core=1"),
        ("go.gomaxprocs=12", "host.threads_per_core=1"),
        "share of CPU in the scheduler's slow paths at GOMAXPROCS 12", 0.35, _sched_share, duration_s=2.0),
    Measurement(
        "grpc/grpc-go#1014", "https://github.com/grpc/grpc-go/issues/1014",
        "32-core client and server, no quota, ping-pong: p50 204 us at GOMAXPROCS 32, 177 us at 1 (noise ~5 %)",
        "one client, 40 us of server CPU per call, 100 us round trip outside the server, 8 MiB live heap; "
        "32 logical CPUs (GOMAXPROCS 32 by default), read as 16 cores x 2",
        _closed(32, None, 1, 0.04, 2, 8, client_rtt_ms=0.1, server_cpu_us_per_request=0.0),
        ("go.gomaxprocs=32",), ("go.gomaxprocs=1",),
        "p50 latency at GOMAXPROCS 32 / at 1", 204 / 177, _ratio("latency_p50_s"), duration_s=3.0,
        central=LOGICAL_CPUS),
    Measurement(
        "blog.esc.sh", "https://blog.esc.sh/golang-performance-penalty-in-kubernetes/",
        "32-core node, 1-core limit, CPU-heavy HTTP handler under wrk: GOMAXPROCS 32 'about 65 % slower' than 1",
        "wrk -c 100 (the source does not give the connections), 5 ms of CPU per request, 8 MiB live heap; the node's 32 CPUs "
        "(GOMAXPROCS 32 by default) read as 16 cores x 2 (band: 1 or 2 a core); "
        "'slower' read as 1.65x the time (requests/s x 0.61), or as -65 % requests/s (x 0.35)",
        _closed(32, 1.0, 100, 5.0, 8, 8), ("go.gomaxprocs=32",), ("go.gomaxprocs=1",),
        "requests/s at GOMAXPROCS 32 / at 1", 1 / 1.65, _ratio("throughput_per_s"), alternative=0.35,
        duration_s=5.0, central=LOGICAL_CPUS),
    Measurement(
        "elastic/apm-server#8278", "https://github.com/elastic/apm-server/pull/8278",
        "Elastic Cloud 8 GB instance (1.35 vCPU quota, bursting allowed), 384 agents, AgentGo benchmark: "
        "5.65k events/s with GOMAXPROCS = host CPUs, 11.64k with automaxprocs (2-3 runs, other changes too)",
        "a 32-CPU host (cloud vCPUs: 16 cores x 2; band: 1 or 2 a core), 384 closed-loop agents, 1 ms of CPU and 128 KiB of garbage per "
        "request, 64 MiB live heap; before = GOMAXPROCS 32 (Go 1.18), after = automaxprocs (floor: 1)",
        _closed(32, 1.35, 384, 1.0, 128, 64, version="1.20"),
        ("go.gomaxprocs=\"automaxprocs\"",), ("go.gomaxprocs=32",),
        "events/s after (automaxprocs) / before (host CPUs)", 11.64 / 5.65, _ratio("throughput_per_s"),
        kind="direction", duration_s=4.0, central=LOGICAL_CPUS),
    Measurement(
        "58 Tech push service", "built-in scenario push-58tech",
        "32-CPU host, 8-core limit, GOMAXPROCS 32 (host) vs 8: peak CPU 69 % vs 19 % of the limit; "
        "~60 % of CPU in gcBgMarkWorker, schedule, findrunnable",
        "see the built-in scenario (8000 pushes/s of 0.2 ms, one goroutine each, 32 KiB each, 256 MiB live "
        "heap); the 32 CPUs read as 16 cores x 2 (band: 1 or 2 a core). The ratio over the goroutines a push "
        "readies, which the story does not give: cfsim.overheads.unstated (notebook 09)",
        "push-58tech", ("go.gomaxprocs=32",), ("go.gomaxprocs=8",),
        "CPU at GOMAXPROCS 32 / at 8", 69 / 19, _ratio("cpu_usage_cores"), duration_s=4.0, central=LOGICAL_CPUS),
    Measurement(
        "menu (GKE)", "built-in scenario menu-gke",
        "6-CPU minikube node, 100m limit, 2 k6 users, 8 goroutines per request: CPU throttling ratio above "
        "75 % at GOMAXPROCS 6 and 8; GOMAXPROCS 1 had the best requests/s",
        "see the built-in scenario (40 ms of CPU per request); the node's 6 CPUs read as 3 cores x 2 (band: 1 or 2)",
        "menu-gke", ("go.gomaxprocs=6",), ("go.gomaxprocs=1",),
        "throttled-period ratio at GOMAXPROCS 6", 0.75, lambda a, b: a.get("throttled_ratio"),
        kind="at_least", duration_s=20.0, central=LOGICAL_CPUS),
    Measurement(
        "golang/go#20457", "https://github.com/golang/go/issues/20457",
        "8 Ps, a 9.5 ms concurrent mark: gctrace CPU 0.21 ms assist / 18 ms background / 56 ms idle: idle "
        "mark workers on every idle P did 75 % of the GC's CPU",
        "8 CPUs (4 cores x 2; band: 1 or 2 a core), no quota, 1,000 requests/s of 0.5 ms (half a core of work), "
        "64 KiB per request, 64 MiB live heap",
        _open(8, None, 1000, 0.5, 64, 64), ("go.gomaxprocs=8",), ("go.gomaxprocs=8",),
        "idle-worker share of the GC's CPU at 8 Ps", 56 / (0.21 + 18 + 56), _idle_share_of_gc, duration_s=4.0,
        central=LOGICAL_CPUS),
    Measurement(
        "VictoriaMetrics#5867", "https://github.com/VictoriaMetrics/VictoriaMetrics/issues/5867",
        "vmagent at a 1-CPU limit, GOMAXPROCS = host CPUs: ~90 ms of throttled time per throttled period on "
        "a 128-thread EPYC host vs ~15 ms on a 20-thread desktop (read from screenshots)",
        "bursty ingestion: 300 batches/s (Poisson) of 3 ms split over 16 goroutines (0.9 core), 32 MiB "
        "live heap; both hosts have two hardware threads a core (an EPYC 7763 is 64 cores / 128 threads, "
        "AMD's specification; the desktop's 20 are threads)",
        _open(128, 1.0, 300, 3.0, 64, 32, fanout=16), ("go.gomaxprocs=128", "host.threads_per_core=2"),
        ("go.gomaxprocs=20", "host.cpus=20", "host.threads_per_core=2"),
        "throttled time per throttled period, 128 vs 20 host CPUs", 90 / 15, _per_throttle,
        kind="direction", duration_s=4.0),
    Measurement(
        "golang/go#68399", "https://github.com/golang/go/issues/68399",
        "arm64 gRPC server, same load, 32 -> 64 cores (GOMAXPROCS = cores): p99.9 and findRunnableGCWorker "
        "CPU rose; GOMAXPROCS 32 on 64 cores restored the 32-core behaviour (flame graphs only)",
        "no quota, 20,000 requests/s of 0.1 ms with 16 KiB each, 64 MiB live heap; arm64 server cores run one "
        "thread each (band: 1 or 2)",
        _open(64, None, 20000, 0.1, 16, 64), ("go.gomaxprocs=64",), ("go.gomaxprocs=32", "host.cpus=32"),
        "p99.9 latency, 64 vs 32 cores", 1.0, _ratio("latency_p999_s"), kind="direction", duration_s=2.0),
    Measurement(
        "riverphillips.dev", "https://www.riverphillips.dev/blog/go-cfs/",
        "docker --cpus=4, allocation-heavy web app: with the host-default GOMAXPROCS a GC cycle took just "
        "under 2.5 ms with ~10 % stop-the-world; with GOMAXPROCS 4 under 1 ms with a 26 us stop-the-world",
        "a 16-CPU host (8 cores x 2; band: 1 or 2 a core), 2,000 requests/s of 1 ms with 256 KiB each, "
        "32 MiB live heap",
        _open(16, 4.0, 2000, 1.0, 256, 32), ("go.gomaxprocs=16",), ("go.gomaxprocs=4",),
        "GC stop-the-world time per cycle, host default / GOMAXPROCS 4", 250 / 26,
        _ratio("go_gc_duration_seconds_q0.5"), kind="direction", duration_s=4.0, central=LOGICAL_CPUS),
)


def by_name(name: str) -> Measurement:
    for m in MEASUREMENTS:
        if m.name == name:
            return m
    raise KeyError(f"no public measurement named {name!r}; known: {', '.join(m.name for m in MEASUREMENTS)}")


def model_ratio(m: Measurement, params: Mapping[str, Any] | None = None, corner: int | None = None,
                duration_s: float | None = None, simulate_fn=None) -> float | None:
    """The model's headline for ``m`` with ``params`` (``section.key`` -> value) and, optionally,
    the unpinned parameters at their low (0) or high (1) prior."""
    if simulate_fn is None:
        from cfsim.simulation import simulate as simulate_fn
    extra = tuple(f"{k}={_toml(v)}" for k, v in (params or {}).items())
    sa, sb = m.scenarios((m.central if corner is None else ()) + extra, duration_s)
    if corner is not None:
        sa = sa.with_overrides(corner_overrides(sa, corner, m.stated()))
        sb = sb.with_overrides(corner_overrides(sb, corner, m.stated()))
    a = simulate_fn(sa).summary
    b = a if (m.b == m.a and not m.b_last) else simulate_fn(sb).summary
    return m.metric(a, b)


def _toml(v: Any) -> str:
    return f'"{v}"' if isinstance(v, str) else repr(v)


def _ratio_by_name(name: str, params: Mapping[str, Any], corner: int | None, duration_s: float | None) -> float | None:
    return model_ratio(by_name(name), params, corner, duration_s)


def _ratios(tasks: list[tuple[str, Mapping[str, Any], int | None, float | None]],
            workers: int | None) -> list[float | None]:
    """:func:`model_ratio` of each ``(measurement name, params, corner, duration_s)``, in order, on
    every CPU (each is an independent pair of simulations; a measurement's headline function is a
    closure, so workers look it up by name)."""
    from cfsim.sweep.executors import map_in_order

    return list(map_in_order(_ratio_by_name, tasks, workers, min_pooled=2))


def fit(m: Measurement, duration_s: float | None = None, workers: int | None = None,
        params: Mapping[str, Any] | None = None) -> tuple[float, dict[float, float | None]]:
    """Pin ``m.fits`` on a training measurement: the grid value whose headline is closest (in log
    ratio) to the observed one, with ``params`` (what earlier training measurements pinned) held.
    Returns (value, headline by grid value). ``workers``: processes (default every CPU; 1 = this
    process)."""
    if m.role != "train" or not m.fits:
        raise ValueError(f"{m.name} is not a training measurement")
    held = {k: v for k, v in (params or {}).items() if k != m.fits}
    got = dict(zip(m.fit_grid, _ratios([(m.name, {**held, m.fits: v}, None, duration_s) for v in m.fit_grid],
                                       workers)))
    scored = [(abs(math.log(r / m.observed)), v) for v, r in got.items() if r and r > 0]
    return min(scored)[1], got


@dataclass
class Comparison:
    name: str
    role: str
    kind: str
    headline: str
    observed: float
    model: float | None
    low: float | None
    high: float | None
    url: str
    alternative: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float | None:
        return None if self.model is None else self.model / self.observed

    @property
    def in_band(self) -> bool:
        if self.low is None or self.high is None:
            return False
        lo, hi = min(self.low, self.high, self.model or self.low), max(self.low, self.high, self.model or self.high)
        return any(lo * 0.999 <= o <= hi * 1.001 for o in self._observed())

    def _observed(self) -> list[float]:
        return [self.observed] + ([self.alternative] if self.alternative is not None else [])

    @property
    def direction_ok(self) -> bool:
        if self.model is None:
            return False
        if self.kind == "at_least":
            return self.model >= self.observed
        return (self.model - 1.0) * (self.observed - 1.0) > 0 or (self.observed == 1.0 and self.model > 1.0)

    @property
    def within_25(self) -> bool:
        return self.model is not None and any(abs(self.model / o - 1) <= 0.25 for o in self._observed())

    @property
    def verdict(self) -> str:
        if self.kind == "at_least":
            return "reproduced" if self.direction_ok else "not reproduced"
        if self.kind == "direction":
            return "direction reproduced" if self.direction_ok else "direction NOT reproduced"
        if not self.direction_ok:
            return "direction NOT reproduced"
        if self.within_25:
            return "within 25 %"
        return "inside the band" if self.in_band else "outside the band"


def compare(params: Mapping[str, Any] | None = None, duration_scale: float = 1.0,
            names: list[str] | None = None, workers: int | None = None) -> list[Comparison]:
    """Every measurement (or ``names``) beside the model with ``params`` (the fitted values), its
    band from the unpinned priors (parameters in ``params`` stay fixed). ``workers``: processes
    (default every CPU; 1 = this process)."""
    chosen = [m for m in MEASUREMENTS if not names or m.name in names]
    p = dict(params or {})
    # the central model, then the unpinned parameters at their low and high prior
    ratios = iter(_ratios([(m.name, p, corner, m.duration_s * duration_scale)
                           for m in chosen for corner in (None, 0, 1)], workers))
    out = []
    for m in chosen:
        central, lo, hi = next(ratios), next(ratios), next(ratios)
        vals = [v for v in (lo, hi, central) if v is not None]
        out.append(Comparison(m.name, m.role, m.kind, m.headline, m.observed, central,
                              min(vals) if vals else None, max(vals) if vals else None, m.url, m.alternative))
    return out


__all__ = ["MEASUREMENTS", "Measurement", "Comparison", "by_name", "model_ratio", "fit", "compare", "UNPINNED"]
