"""Normalise a grid by its own calibration runs.

This machine's speed drifts by 10–20% between runs minutes apart, so each lab grid records
calibration runs (the workload unconstrained at GOMAXPROCS 1, at the start and the end). The CPU
cost of one record or request they measure (CPU seconds per completed item), divided by what the
simulated twin of the same calibration run spends, gives the grid's cost factor. Validation runs
then simulate with the workload's per-item CPU scaled by that factor, and the spread of the factor
between the grid's calibration runs is reported as the grid's measured drift.

The mutator and the garbage collector do not slow down alike from one host to the next: the GC
chases pointers through a heap larger than the caches, the workload's code mostly does not. On
two lab hosts of this project (both "AMD EPYC", one with AVX-512, one without) the workload's own
CPU per record differed by 1.2x and the GC's mark CPU per cycle by 2.6x. Where a calibration run
recorded the runtime's ``/cpu/classes`` (``runtime/metrics``), its cgroup CPU is split in those
P-time proportions (one P, unconstrained: P-time is CPU time there) and the grid gets two factors:
the per-item CPU from the user class per completed item, and the GC's speed from the mark classes
(assist, dedicated, idle) per GC cycle. Without those classes, one factor from the total serves
both (:func:`cpu_split`).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from cfsim.lab.loadgen_cost import loadgen_cpu_us
from cfsim.lab.summary import window_quantiles
from cfsim.lab.threads import sysmon_thread
from cfsim.scenario import Scenario
from cfsim.validation.outside import fit_outside_time
from cfsim.validation.twin import (is_calibration_run, observed_summary, pre_run_tenants_cores,
                                   recorded_latency_buckets_s, run_manifest, run_scenario, twin_spec)
from cfsim.workloads import kind_names, workload_kind
from cfsim.workloads._go import LATENCY_QUANTILES
from cfsim.workloads.arrivals import lognormal_median_from_mean

#: the scenario key of each workload kind's CPU per item (as the kind declares it)
COST_KEYS = {name: f"workload.{workload_kind(name).cpu_key}" for name in kind_names()}


@dataclass
class GridNorm:
    """The cost factor of one grid and where it came from."""

    factor: float = 1.0
    factors: dict[str, float] = field(default_factory=dict)  # calibration run -> factor
    drift: float | None = None  # (max - min) / mean of the factors
    #: the GC's mark CPU per cycle on this grid's host over its twin's (None: the cost factor
    #: serves the GC too); divides ``go.gc_scan_mb_per_ms`` (:func:`cfsim.validation.calibrate.apply_params`)
    gc_factor: float | None = None
    gc_factors: dict[str, float] = field(default_factory=dict)  # calibration run -> GC factor
    #: the factor of the whole CPU per item (user and GC together), reported beside the split ones
    total_factor: float | None = None
    #: the lab workload's busy-loop rounds per CPU millisecond, measured at its start-up, mean over
    #: the calibration runs (None unless every one recorded it): the factors above are at this
    #: many rounds per millisecond of the workload's CPU (:func:`startup_rounds`)
    rounds_per_cpu_ms: float | None = None
    #: the median time a request spends outside the server process [ms] (network, the load
    #: generator's own client), measured on the calibration runs: the log-normal that, added to
    #: their twin's latency, gives their client latency (:func:`outside_time_ms`). Not identified
    #: where a calibration run is a saturated closed loop: its latency is clients / throughput
    #: whatever the round trip
    rtt_ms: float | None = None
    #: the 99th percentile of that time [ms], from the same runs and the same fit (a load generator
    #: that shares the host's CPUs with the server is itself scheduled late)
    rtt_p99_ms: float | None = None
    #: ``(pre-run tenants [cores], rtt_ms, rtt_p99_ms)`` of each calibration run that measured
    #: its neighbours before it started: the load generator waits longer on a busier host, so a
    #: run's twin takes the time outside the process at its own pre-run neighbour load
    rtt_by_tenants: list[tuple[float, float, float | None]] = field(default_factory=list)
    #: the program's own live heap beyond what its twin marks [MiB] (HTTP server, metrics
    #: registry, buffers), the median over the calibration runs of :func:`extra_marked_mb`
    extra_live_mb: float | None = None
    #: the STW work per pause beyond the twin's [us] (stopping the world on this machine: signals,
    #: futex wake-ups, the pause's own bookkeeping): /sched/pauses/total/gc per pause (two per
    #: cycle) on the calibration runs minus their twin's
    extra_stw_us: float | None = None
    #: CPU the load generator spends per request on the host [us]: its cgroup's CPU during a
    #: calibration run beyond the harness's own before the run (Prometheus, the runner), per
    #: completed request. The twins of runs with a load generator share the host's CPUs with it
    #: (``host.cpu_sharing = "slices"``, ``workload.client_cpu_us_per_request``)
    client_cpu_us: float | None = None
    #: the same runs' measured cost over the lab's load-generator curve at their mode and rate
    #: (:func:`cfsim.lab.loadgen_cost.loadgen_cpu_us`), the median: a run's twin takes the curve at
    #: its own mode and rate times this (the load generator's cost a request falls with the rate;
    #: the curve's level moves with this VM's speed)
    client_cpu_scale: float | None = None
    #: the heap garbage of serving one request outside the handler [KiB] (net/http's request,
    #: headers and buffers; ``workload.server_alloc_kb_per_request``), the median over the
    #: calibration runs of :func:`server_alloc_kb`: the lab's net/http server allocates about
    #: 1.7-2.0 KiB a request where the schema's prior says 4
    server_alloc_kb: float | None = None
    #: what the kernel charged for the memory path on this grid's host, measured by faultbench
    #: just before its calibration runs (manifest ``host_memory_path``, runs since 2026-12-02;
    #: :func:`cfsim.lab.tlb.memory_path_summary`), the median over those that recorded it: a
    #: release per 4 KiB page alone and a TLB shootdown [us] (``go.page_release_us``,
    #: ``host.tlb_shootdown_us``); None for older grids (the parameters stand as given)
    memory_path: dict[str, float] | None = None
    #: the live heap the calibration runs marked [MiB] (their scenario's ``go.live_heap_mb`` plus
    #: ``go.process_heap_mb``, the mean): where it outgrew the cache, their GC factor measured the
    #: misses as well, and the twins' scan takes that into account (:func:`missed_heap_scale`)
    calibration_heap_mb: float | None = None
    #: sysmon's price and pace on this grid's host, measured on its calibration runs' own sysmon
    #: thread (:func:`sysmon_measured`): CPU per sleep and the wait for a CPU after each
    #: (``go.sysmon_poll_us``, ``go.sysmon_wait_us``), the medians; None where none measured them
    sysmon: dict[str, float] | None = None

    def params_for(self, scenario: Scenario) -> dict[str, Any]:
        key = COST_KEYS.get(scenario["workload.kind"])
        if key is None or self.factor == 1.0:
            return {}
        return {key: scenario[key] * self.factor}


#: the load generator's latency histogram (client side: sent to response read)
CLIENT_LATENCY = "cfsim_loadgen_request_duration_seconds"


def client_window_quantiles(manifest: Mapping[str, Any], qs: tuple[float, ...]) -> list[float | None]:
    """The load generator's latency quantiles over a run's window [s], read through its histogram
    as the run's summary reads them, from the bucket counts the manifest keeps at the window's two
    ends (None each where it kept none)."""
    ends = (manifest.get("window_samples") or {}).get("loadgen") or {}
    return window_quantiles(CLIENT_LATENCY, ends.get("start") or {}, ends.get("end") or {}, qs)


def outside_time_ms(manifest: Mapping[str, Any], sim: Mapping[str, Any]) -> tuple[float, float] | None:
    """The time a calibration run's requests spent outside the server ``(median, p99)`` [ms]: the
    log-normal that, added to its twin's latency (the twin spends no time outside), gives the
    run's client latency at the median and at the 90th or 99th percentile, whichever needs the
    narrower tail (:func:`cfsim.validation.outside.fit_outside_time`, which says why), both sides
    read through the run's histogram buckets. None where the run kept no histogram, its twin
    reports no quantile body (``latency_p10_s`` ... ``latency_p999_s``), or the run's median is
    not above its twin's."""
    q = client_window_quantiles(manifest, (0.5, 0.9, 0.99))
    server = {u: sim.get(f"latency_{name}_s") for name, u in LATENCY_QUANTILES.items()}
    if q[0] is None or q[1] is None or any(v is None for v in server.values()):
        return None
    if sim.get("latency_max_s") is not None:
        server[1.0] = sim["latency_max_s"]
    got = fit_outside_time(server, {0.5: q[0], 0.9: q[1], 0.99: q[2]}, recorded_latency_buckets_s(manifest))
    return None if got is None else (got[0] * 1e3, got[1] * 1e3)


def outside_sample_ms(run: Path, obs: Mapping[str, Any], sim: Mapping[str, Any]) -> tuple[float, float | None] | None:
    """One calibration run's time outside the server ``(median, p99)`` [ms] against its twin's
    summary ``sim`` (the log-normal the twins draw, ``workload.client_rtt_ms`` and
    ``client_rtt_p99_ms``); None for a kind without it or a run that does not identify it.
    Fitted by :func:`outside_time_ms` only where arrivals do not wait for answers: a closed loop's
    clients hold the server's queue short by the very time outside, so the two do not add (and at
    saturation its latency is clients / throughput, the time outside not identified at all).
    Closed loops, and runs without the histogram's window samples, take the spread from the p99s
    and the median from the means (exact on both sides, ``_sum / _count``)."""
    kind = run_scenario(run)["workload.kind"]
    if "client_rtt_ms" not in workload_kind(kind).keys:
        return None
    body = outside_time_ms(run_manifest(run), sim) if kind == "open" else None
    if body is not None:
        return body
    if not obs.get("latency_mean_s") or sim.get("latency_mean_s") is None:
        return None
    p99 = None
    if obs.get("latency_p99_s") and sim.get("latency_p99_s") is not None:
        p99 = max(0.0, obs["latency_p99_s"] - sim["latency_p99_s"]) * 1e3
    mean = max(0.0, obs["latency_mean_s"] - sim["latency_mean_s"]) * 1e3
    return lognormal_median_from_mean(mean, p99), p99


def rtt_at(norm: "GridNorm", tenants_cores: float | None) -> tuple[float | None, float | None]:
    """The grid's time outside the process ``(median, p99)`` [ms] for a run whose neighbours took
    ``tenants_cores`` before it started: linear in the calibration runs' own pre-run neighbour
    load, held at the ends (``numpy.interp``); the median over the calibration runs when the run
    or fewer than two calibration runs at different loads measured it."""
    pts = sorted(norm.rtt_by_tenants)
    if tenants_cores is None or len({t for t, _, _ in pts}) < 2:
        return norm.rtt_ms, norm.rtt_p99_ms
    xs = [t for t, _, _ in pts]
    med = float(np.interp(tenants_cores, xs, [m for _, m, _ in pts]))
    p99s = [q for _, _, q in pts]
    p99 = None if None in p99s else float(np.interp(tenants_cores, xs, p99s))
    return round(med, 4), None if p99 is None else round(p99, 4)


def grid_priors(scenario: Scenario, norm: "GridNorm", tenants_cores: float | None = None) -> dict[str, Any]:
    """What a grid's calibration runs tell its other runs' twins before those ran, beyond the
    cost factor: the client round trip, its median and 99th percentile at the run's pre-run
    neighbour load ``tenants_cores`` (:func:`rtt_at`; for kinds with ``client_rtt_ms`` that the
    scenario leaves at 0), and the program's own live heap beyond the
    twin's (``go.process_heap_mb`` raised by it; never lowered), and the time a GC pause takes
    beyond the twin's (``go.gc_stw_base_us`` moved by it, not below 0), and the request path's
    garbage (``workload.server_alloc_kb_per_request``, :func:`server_alloc_kb`)."""
    out: dict[str, Any] = {}
    kind = workload_kind(scenario["workload.kind"])
    rtt, rtt_p99 = rtt_at(norm, tenants_cores)
    if rtt is not None and "client_rtt_ms" in kind.keys and not scenario["workload.client_rtt_ms"]:
        out["workload.client_rtt_ms"] = rtt
        if rtt > 0 and rtt_p99 is not None and rtt_p99 > rtt and not scenario["workload.client_rtt_p99_ms"]:
            out["workload.client_rtt_p99_ms"] = rtt_p99
    if norm.extra_live_mb is not None and norm.extra_live_mb > 0:
        # only a heap the program holds beyond the twin's: a twin that marks more than the real
        # runtime (allocation during the mark) is the model's error, not the program's heap, and
        # stays visible in the validation
        out["go.process_heap_mb"] = round(scenario["go.process_heap_mb"] + norm.extra_live_mb, 4)
    if norm.extra_stw_us is not None:
        out["go.gc_stw_base_us"] = round(max(0.0, scenario["go.gc_stw_base_us"] + norm.extra_stw_us), 3)
    if norm.server_alloc_kb is not None and "server_alloc_kb_per_request" in kind.keys:
        out["workload.server_alloc_kb_per_request"] = norm.server_alloc_kb
    if norm.client_cpu_us is not None and has_loadgen(scenario) \
            and not scenario["workload.client_cpu_us_per_request"]:
        out["host.cpu_sharing"] = "slices"
        out["workload.client_cpu_us_per_request"] = client_cpu_at(norm, scenario)
    return out


def client_cpu_at(norm: "GridNorm", scenario: Scenario) -> float | None:
    """The load generator's CPU a request [us] for a run of ``scenario``: the lab's curve at the
    run's mode and arrival rate (inputs of the run) scaled by the grid's calibration runs
    (``client_cpu_scale``); the calibration runs' median where the curve says nothing."""
    curve = loadgen_cpu_us(scenario["workload.kind"], scenario["workload.rate_per_s"])
    if norm.client_cpu_scale is None or curve is None:
        return norm.client_cpu_us
    return round(norm.client_cpu_scale * curve, 3)


def has_loadgen(scenario: Scenario) -> bool:
    """Whether the lab drives this kind with its load generator on the same host."""
    from cfsim.lab.kinds import LAB_KINDS

    kind = LAB_KINDS.get(scenario["workload.kind"])
    return bool(kind and kind.loadgen)


def client_cpu_per_request_us(manifest: Mapping[str, Any], summary: Mapping[str, Any]) -> float | None:
    """The load generator's CPU per completed request [us]: the harness cgroup's CPU during the
    run minus its CPU before the run (the harness without the load generator), over the
    throughput. None when the run recorded either one."""
    host = manifest.get("host_cpu") or {}
    during, before = host.get("harness_cores"), (host.get("pre_run") or {}).get("harness_cores")
    thr = summary.get("throughput_per_s")
    if during is None or before is None or not thr:
        return None
    return round(max(0.0, during - before) / thr * 1e6, 3)


def startup_rounds(run: Path) -> float | None:
    """The busy-loop rounds per CPU millisecond the lab workload measured at its start-up, before
    the run's window (``calibration_rounds_per_cpu_ms`` in the manifest; ``lab/cmd/workload``
    ``calibrate``), or None.

    The workload turns each item's CPU milliseconds into that many rounds of its loop, so an item
    does work in proportion to it: measured in a fast moment of this VM (its speed drifts and
    alternates between two states about 1.55x apart) the loop is then run more rounds per item
    than the window's speed turns into the nominal CPU. Across the lab's grids a run's CPU per
    item follows its start-up rounds with a slope near 1 where the loop is most of the work
    (cpu-stream: correlation 0.98 over 31 quota-capped runs; closed-menu 0.94), and the two
    calibration runs of ``gc-memory`` differ by 1.18x in rounds and 1.21x in CPU per record. The
    count is fixed before the window opens: an input of the run, not one of its outputs."""
    value = run_manifest(run).get("calibration_rounds_per_cpu_ms")
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def rounds_ratio(run: Path, calibration_rounds_per_cpu_ms: float | None) -> float:
    """How many times the loop rounds per item of its grid's calibration runs
    (``GridNorm.rounds_per_cpu_ms``) ``run``'s workload does (:func:`startup_rounds`); 1.0 when
    either is unknown."""
    rounds = startup_rounds(run)
    if rounds is None or not calibration_rounds_per_cpu_ms:
        return 1.0
    return rounds / calibration_rounds_per_cpu_ms


def server_alloc_kb(observed: Mapping[str, Any], simulated: Mapping[str, Any],
                    twin_server_alloc_kb: float) -> float | None:
    """The request path's heap garbage per request [KiB] that makes a calibration run's twin
    allocate what the run did: the twin's ``twin_server_alloc_kb`` plus the difference of the two
    allocations per completed request over the window (``gc_alloc_bytes``: the runtime's
    ``/gc/heap/allocs:bytes`` in the lab, exact in the twin), not below 0. Whatever else the twin
    allocates (the handler's ``alloc_kb_per_request``, the scrapes) it allocates on both sides, so
    the difference is the part no input states: what net/http and the runtime allocate to serve a
    request. The difference of the scrapes' garbage (the lab's ~0.4-0.6 MiB/s against the twin's
    ``scrape_alloc_kb`` a scrape) lands in it at the calibration runs' rate. None without both
    allocations and throughputs.

    >>> obs = {"gc_alloc_bytes": 17 * 1000 * 4096, "throughput_per_s": 1000.0, "duration_s": 17.0}
    >>> sim = {"gc_alloc_bytes": 17 * 1000 * 6144, "throughput_per_s": 1000.0, "duration_s": 17.0}
    >>> server_alloc_kb(obs, sim, 4.0)
    2.0
    """
    def per_request_kb(s: Mapping[str, Any]) -> float | None:
        # the window's allocation over the requests it completed (throughput x window)
        a, thr, window = s.get("gc_alloc_bytes"), s.get("throughput_per_s"), s.get("duration_s")
        return None if a is None or not thr or not window else a / (thr * window) / 1024

    kb_obs, kb_sim = per_request_kb(observed), per_request_kb(simulated)
    if not kb_obs or kb_sim is None:
        return None
    return max(0.0, twin_server_alloc_kb + kb_obs - kb_sim)


def cost_per_item_s(summary: dict[str, Any]) -> float | None:
    usage, thr = summary.get("cpu_usage_cores"), summary.get("throughput_per_s")
    if not usage or not thr:
        return None
    return usage / thr


#: fewer GC cycles than this in a calibration run (or its twin) give no GC speed of their own. The
#: lab's open-loop services run 5-9 cycles in a calibration window (1,000 requests/s, 16 MiB live
#: heap) and their two calibration runs still agree on the GC's speed: ``open-pacer`` 2.41 / 2.42,
#: ``open-spread`` 1.00 / 1.04, ``wakeups`` 1.47 / 1.48, ``profiles`` 1.09 / 1.14 (mark CPU a cycle
#: over the twin's), where one factor for both kept the twins' marks of that heap 2.4 times too
#: cheap on the grids whose host marked slowly (docs/model-notes.md, session 32); four cycles or
#: fewer (``closed-menu``'s saturated loop) keep one factor
MIN_CYCLES_FOR_GC_FACTOR = 5


def cpu_split(summary: Mapping[str, Any]) -> tuple[float, float] | None:
    """``(user CPU per completed item [s], GC mark CPU per GC cycle [s])`` of a run: its cgroup CPU
    split in the proportions of the runtime's own ``/cpu/classes`` P-time (``user``; ``gc/mark/
    assist`` + ``dedicated`` + ``idle``; both over the P-time not ``idle``). At one P and no quota,
    as in a calibration run, P-time is CPU time; the cgroup's CPU keeps the split on the same
    clock as the cost factor. None without the classes, CPU, throughput or at least
    :data:`MIN_CYCLES_FOR_GC_FACTOR` cycles.

    >>> s = {"cpu_usage_cores": 1.0, "throughput_per_s": 1000.0, "gc_cycles": 40, "duration_s": 20.0,
    ...      "go_cpu_classes_total_cpu_seconds_total": 20.0, "go_cpu_classes_idle_cpu_seconds_total": 0.0,
    ...      "go_cpu_classes_user_cpu_seconds_total": 16.0, "go_cpu_classes_gc_mark_assist_cpu_seconds_total": 3.0,
    ...      "go_cpu_classes_gc_mark_dedicated_cpu_seconds_total": 1.0}
    >>> [round(x, 6) for x in cpu_split(s)]
    [0.0008, 0.1]
    >>> cpu_split({**s, "gc_cycles": 5}) is None, cpu_split({**s, "gc_cycles": 4}) is None
    (False, True)
    """
    def cls(name: str) -> float | None:
        v = summary.get(f"go_cpu_classes_{name}_cpu_seconds_total")
        return None if v is None else float(v)

    usage, thr = summary.get("cpu_usage_cores"), summary.get("throughput_per_s")
    cycles, duration = summary.get("gc_cycles"), summary.get("duration_s")
    total, user = cls("total"), cls("user")
    if not usage or not thr or not duration or total is None or user is None or \
            not cycles or cycles < MIN_CYCLES_FOR_GC_FACTOR:
        return None
    mark = sum(cls(c) or 0.0 for c in ("gc_mark_assist", "gc_mark_dedicated", "gc_mark_idle"))
    busy = total - (cls("idle") or 0.0)
    if busy <= 0 or user <= 0 or mark <= 0:
        return None
    return usage * user / busy / thr, usage * mark / busy * duration / cycles


def _pause_per_stw_us(summary: Mapping[str, Any]) -> float | None:
    """Mean time of one GC stop-the-world pause [us] (a cycle has two: sweep termination and
    mark termination), or None without cycles or pause time."""
    total, cycles = summary.get("gc_pause_total_s"), summary.get("gc_cycles")
    if not total or not cycles:
        return None
    return total / (2 * cycles) * 1e6


def calibration_overrides(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The parameters a calibration run's twin is simulated with: ``params`` but the cost factor."""
    return {k: v for k, v in (params or {}).items() if k != "cost_factor"}


#: sysmon slept at least this often a second: it polled at its 20 us delay through the process's
#: busy spells (a request service that idles between requests), so its price and wait are those
#: of short sleeps; a saturated process's sysmon sleeps 10 ms at a time (~100 a second), colder
SYSMON_POLLING_SLEEPS_PER_S = 1000.0


def sysmon_measured(run: Path) -> dict[str, float] | None:
    """sysmon's price and pace in ``run``, from its own thread (manifest ``threads``, runs since
    2026-11-26; :func:`cfsim.lab.threads.sysmon_thread` tells it apart): CPU per sleep as
    ``go.sysmon_poll_us`` (its whole poll: the usleep round trip, retake, the timer's wake-up) and
    the run-queue wait per switch-in as ``go.sysmon_wait_us`` (how long a woken sysmon waits for
    a CPU: it lengthens every poll interval). None unless it polled at its short delay
    (:data:`SYSMON_POLLING_SLEEPS_PER_S`)."""
    window = run_manifest(run).get("threads") or {}
    sysmon = sysmon_thread(window)
    if sysmon is None or not window.get("span_s") or not sysmon.get("switch_ins") \
            or sysmon["sleeps"] / window["span_s"] < SYSMON_POLLING_SLEEPS_PER_S:
        return None
    return {"go.sysmon_poll_us": round(sysmon["cpu_s"] / sysmon["sleeps"] * 1e6, 3),
            "go.sysmon_wait_us": round(sysmon["wait_s"] / sysmon["switch_ins"] * 1e6, 3)}


def grid_sysmon(calibration_runs: list[Path]) -> dict[str, float] | None:
    """The medians of :func:`sysmon_measured` over the calibration runs that measured it
    (:attr:`GridNorm.sysmon`), None when none did."""
    found = [m for run in calibration_runs if (m := sysmon_measured(run))]
    if not found:
        return None
    return {k: round(statistics.median(m[k] for m in found), 3) for k in found[0]}


def calibration_twin_summary(run: Path, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The summary of a calibration run's twin (a process pool's unit of work), reused when the
    same twin scenario was simulated before: in this process, and across processes through the
    on-disk simulation cache that ``CFSIM_SIM_CACHE`` names (:mod:`cfsim.sweep.simcache`, keyed
    by the whole scenario and the model's source; identical summaries either way). Every grid's
    validation, calibration fit and audit starts from its calibration runs' twins, so they are
    the simulations most often asked for twice."""
    from cfsim.sweep.simcache import summary_of

    # its own sysmon as measured (the factor it gives must not absorb a sysmon priced otherwise
    # than in the twins it calibrates); what ``overrides`` set explicitly wins
    return summary_of(twin_spec(run, {**(sysmon_measured(run) or {}), **overrides}).scenario)


def cache_held_share(gc_over_cost: float, miss_factor: float) -> float:
    """The share of a grid's scan CPU spent on lines its host's cache held, read from its
    calibration runs: their GC marked ``g = gc_over_cost`` times slower than the twin's prior
    relative to the workload's own code (GC factor over cost factor, both measured at GOMAXPROCS 1).
    The model's one per-byte cause of a slower scan is a line missed to DRAM (``miss_factor`` per
    byte against 1 for a hit, :func:`cfsim.goruntime.runtime.scan_slowdown`), so a share
    ``m = (g - 1) / (miss_factor - 1)`` of the bytes missed and the hits' CPU is ``(1 - m) / g`` of
    the scan's. A missed line costs its miss whoever wrote it last, so only that share pays
    ``go.gc_parallel_cost`` when CPUs mark at once; a grid whose GC is no slower than its code keeps
    all of it. The lab's gc-trace grid, collected on a slow host, marked 2.15x slower than its
    mutator says (GC factor 2.60, cost factor 1.21) and its GOMAXPROCS 2 runs showed none of the
    sharing cost (docs/model-notes.md, "A scan that missed the cache pays no sharing cost").

    >>> cache_held_share(0.8, 2.35), round(cache_held_share(1.126, 2.35), 4), cache_held_share(2.6, 2.35)
    (1.0, 0.8052, 0.0)
    """
    if miss_factor <= 1.0 or gc_over_cost <= 1.0:
        return 1.0
    missed = min(1.0, (gc_over_cost - 1.0) / (miss_factor - 1.0))
    return (1.0 - missed) / gc_over_cost


def missed_heap_scale(gc_over_cost: float, miss_factor: float, missed_share: float) -> float:
    """What a grid's GC speed is multiplied by so that its calibration runs' twins, factored,
    mark at the speed those runs measured, when part of the heap they marked missed the cache.

    The twins' rule for a lab grid (:func:`cfsim.validation.calibrate.grid_overrides`) reads the
    GC factor as the speed of the lines the cache held and prices a missed line at the machine's
    speed (the cost factor): per byte, relative to the prior at one P, ``(1 - m) g + m max(g, M)``
    with ``g = gc_over_cost`` and ``M`` the miss factor (:func:`cfsim.goruntime.runtime.
    scan_slowdown`, ``m`` the share of the heap beyond the cache). A GC factor is measured as
    ``g ((1 - m_c) + m_c M)`` on the calibration runs' own heap, so the two agree only where
    their heap fitted the cache (``m_c = 0``, the lab's 16 MiB runs). Where it did not (the
    ``alloc-stream`` grid calibrates at 256 MiB, seven eighths beyond a 32 MiB L3; ``quota-steps``
    and ``overprovisioned`` at 64 MiB) the measured speed covered the misses too; the scale keeps
    the rule's split between the two prices and restores the measured total, and is 1 where the
    calibration heap fitted.

    >>> missed_heap_scale(1.5, 2.15, 0.0), missed_heap_scale(1.0, 2.15, 0.875)
    (1.0, 1.0)
    >>> round(missed_heap_scale(1.17, 2.15, 0.875), 4)   # alloc-stream: GC factor 1.262, cost 1.079
    1.1577
    """
    if missed_share <= 0.0 or gc_over_cost <= 0.0:
        return 1.0
    m, g, miss = min(1.0, missed_share), gc_over_cost, max(1.0, miss_factor)
    measured = g * ((1.0 - m) + m * miss)
    factored = (1.0 - m) * g + m * max(g, miss)
    return measured / factored


def factored_overrides(run: Path, params: Mapping[str, Any] | None, norm: GridNorm) -> dict[str, Any]:
    """The parameters of a calibration run's twin at the grid's own speed: ``params`` with the
    per-item CPU and the GC's scan rate scaled by the grid's factors (what the validation runs'
    twins get, :func:`cfsim.validation.calibrate.apply_params`)."""
    from cfsim.validation.calibrate import apply_grid

    return {**calibration_overrides(params), **apply_grid(run, calibration_overrides(params), norm)}


def _set_outside(norm: GridNorm, samples: list[tuple[Path, tuple[float, float | None] | None]]) -> None:
    """The grid's time outside the server from its calibration runs' (:func:`outside_sample_ms`):
    the medians, and each run's own with its pre-run neighbour load (:func:`rtt_at`)."""
    rtts, rtt_p99s = [], []
    for run, got in samples:
        if got is None:
            continue
        median, p99 = got
        rtts.append(median)
        if p99 is not None:
            rtt_p99s.append(p99)
        tenants = pre_run_tenants_cores(run_manifest(run))
        if tenants is not None:
            norm.rtt_by_tenants.append((tenants, median, p99))
    if rtts:
        norm.rtt_ms = round(statistics.median(rtts), 4)
    if rtt_p99s:
        norm.rtt_p99_ms = round(statistics.median(rtt_p99s), 4)


def grid_norm(grid_runs: list[Path], params: Mapping[str, Any] | None = None,
              twin_summaries: Mapping[Path, Mapping[str, Any]] | None = None,
              factored_summaries: Mapping[Path, Mapping[str, Any]] | None = None,
              gc_priors: bool = True) -> GridNorm:
    """Cost factor from the calibration runs among ``grid_runs`` (1.0 if there are none).

    ``params``: the model parameters the grid's runs are simulated with (``section.key`` ->
    value; ``cost_factor`` ignored). The calibration runs' twins use them too: a calibration run
    spends part of its CPU in the GC, so the factor that turns its measured CPU per item into the
    workload's own CPU depends on the GC model it is divided by. ``twin_summaries``: those twins'
    summaries already simulated (:func:`calibration_twin_summary` with
    :func:`calibration_overrides`), by run folder; the others are simulated here.

    The program's heap beyond its twin's, the time a GC pause takes beyond the twin's and the time
    a request spends outside the server compare each calibration run with its twin *at the grid's
    factors* (``factored_summaries``, by run
    folder, from :func:`factored_overrides`; simulated here when missing): a twin whose GC marks
    2.6x faster than the host's allocates less during each mark and marks a smaller heap, and
    that difference is the speed's, not the program's heap (the lab's gc-trace grid: 2.08 MiB of
    "program heap" against the unscaled twins, -0.002 against the scaled ones).
    ``gc_priors=False``: the factors, and the time outside the server against the calibration
    twins as simulated (what a lab run's twin needs besides the factors), nothing else."""
    norm = GridNorm()
    overrides = calibration_overrides(params)
    extra_live, extra_stw, client_cpu, client_scale = [], [], [], []
    outside: list[tuple[Path, tuple[float, float | None] | None]] = []
    first: dict[Path, tuple[Mapping[str, Any], Mapping[str, Any]]] = {}   # calibration run -> (observed, twin)
    server_alloc: list[float] = []
    heaps: list[float] = []   # the heap each calibration run marked [MiB]
    splits: dict[str, tuple[float, float]] = {}
    rounds: dict[str, tuple[float | None, float, float]] = {}  # run -> (rounds, loop share total, user)
    for run in grid_runs:
        if not is_calibration_run(run):
            continue
        obs = observed_summary(run)
        sim = (twin_summaries or {}).get(run) or calibration_twin_summary(run, overrides)
        first[run] = (obs, sim)
        observed = cost_per_item_s(obs)
        simulated = cost_per_item_s(sim)
        if observed and simulated:
            norm.factors[run.name] = observed / simulated
            split_obs, split_sim = cpu_split(obs), cpu_split(sim)
            loop_s = _loop_cpu_per_item_s(run)
            rounds[run.name] = (startup_rounds(run), min(1.0, loop_s / simulated),
                                min(1.0, loop_s / split_sim[0]) if split_sim else 0.0)
            if split_obs and split_sim:
                splits[run.name] = (split_obs[0] / split_sim[0], split_obs[1] / split_sim[1])
        sc = run_scenario(run)
        heaps.append(sc["go.live_heap_mb"] + sc["go.process_heap_mb"])
        alloc_kb = server_alloc_kb(obs, sim, overrides.get("workload.server_alloc_kb_per_request",
                                                            sc["workload.server_alloc_kb_per_request"])) \
            if "server_alloc_kb_per_request" in workload_kind(sc["workload.kind"]).keys else None
        if alloc_kb is not None:
            server_alloc.append(alloc_kb)
        if has_loadgen(sc):
            c = client_cpu_per_request_us(run_manifest(run), obs)
            if c is not None:
                client_cpu.append(c)
                curve = loadgen_cpu_us(sc["workload.kind"], sc["workload.rate_per_s"])
                if curve:
                    client_scale.append(c / curve)
    if client_cpu:
        norm.client_cpu_us = round(statistics.median(client_cpu), 3)
    if client_scale:
        norm.client_cpu_scale = round(statistics.median(client_scale), 4)
    if server_alloc:
        norm.server_alloc_kb = round(statistics.median(server_alloc), 4)
    if norm.factors:
        _set_factors(norm, splits, rounds)
    norm.memory_path = grid_memory_path([r for r in grid_runs if is_calibration_run(r)])
    norm.sysmon = grid_sysmon([r for r in grid_runs if is_calibration_run(r)])
    if heaps:
        norm.calibration_heap_mb = statistics.fmean(heaps)
    if not gc_priors:
        # factors only: the time outside the server against the calibration twins as simulated
        # above (no twin at the grid's factors is simulated), which a lab run's twin still needs
        _set_outside(norm, [(run, outside_sample_ms(run, obs, sim)) for run, (obs, sim) in first.items()])
        return norm
    for run, (obs, _) in first.items():
        factored = factored_overrides(run, params, norm)
        sim = (factored_summaries or {}).get(run) or (
            (twin_summaries or {}).get(run) if factored == overrides else None) or \
            calibration_twin_summary(run, factored)
        extra = extra_marked_mb(obs, sim, run_scenario(run))
        if extra is not None:
            extra_live.append(extra)
        # the time outside the server against the twin at the grid's factors: the server a
        # run's twin simulates, which the time outside is added to
        outside.append((run, outside_sample_ms(run, obs, sim)))
        per_pause = [_pause_per_stw_us(x) for x in (obs, sim)]
        if None not in per_pause:
            extra_stw.append(per_pause[0] - per_pause[1])
    _set_outside(norm, outside)
    if extra_stw:
        norm.extra_stw_us = round(statistics.median(extra_stw), 3)
    if extra_live:
        norm.extra_live_mb = round(statistics.median(extra_live), 4)
    return norm


def grid_memory_path(calibration_runs: list[Path]) -> dict[str, float] | None:
    """The medians of the memory-path probes the calibration runs recorded before they started
    (``host_memory_path``; :attr:`GridNorm.memory_path`), None when none did."""
    probes = [p for run in calibration_runs
              if isinstance(p := run_manifest(run).get("host_memory_path"), dict) and not p.get("error")]
    out: dict[str, float] = {}
    for key in ("go.page_release_us", "host.tlb_shootdown_us", "go.page_fault_us", "go.scavenge_page_us"):
        values = [float(p[key]) for p in probes if p.get(key) is not None]
        if values:
            out[key] = round(statistics.median(values), 4)
    return out if "go.page_release_us" in out else None


def extra_marked_mb(observed: Mapping[str, Any], simulated: Mapping[str, Any], scenario: Scenario) -> float | None:
    """The heap a run's program marks beyond its twin [MiB]. With GOGC on and no memory limit the
    goal is ``marked x (1 + GOGC/100)`` plus the roots' share (``gcControllerState.commit``), so
    the difference of the mean heap goals over ``1 + GOGC/100`` is the difference of the marked
    heaps averaged over every cycle of the run. ``/gc/heap/live`` is one cycle's marked heap, the
    last before the scrape, and a cycle marks what the mutators allocated during its mark
    (allocate-black), so it swings by megabytes from cycle to cycle: gc-memory-quiet's
    calibration runs read 23.6-23.9 MiB against 18.4 MiB for their twin, whose mean goal is
    within 4 % of theirs; the twins took that swing as 6 MiB of program heap and their 16 MiB
    runs' goals came out 25-40 % high. The last live heap stays the fallback where the goal is
    not GOGC's (GOGC off, a memory limit)."""
    gogc = scenario["go.gogc"]
    limited = scenario["go.gomemlimit_mb"] is not None or scenario["go.gomemlimit_policy"] != "explicit"
    g_obs, g_sim = observed.get("gc_heap_goal_mean_bytes"), simulated.get("gc_heap_goal_mean_bytes")
    if gogc > 0 and not limited and g_obs and g_sim is not None:
        return (g_obs - g_sim) / (1 + gogc / 100) / 2**20
    if observed.get("gc_heap_live_bytes") and simulated.get("gc_heap_live_bytes") is not None:
        return (observed["gc_heap_live_bytes"] - simulated["gc_heap_live_bytes"]) / 2**20
    return None


def _loop_cpu_per_item_s(run: Path) -> float:
    """The CPU per item of the workload's own loop in ``run``'s scenario [s] (its kind's CPU key)."""
    scenario = run_scenario(run)
    key = COST_KEYS.get(scenario["workload.kind"])
    return 0.0 if key is None else float(scenario[key]) / 1e3


def _set_factors(norm: GridNorm, splits: Mapping[str, tuple[float, float]],
                 rounds: Mapping[str, tuple[float | None, float, float]] | None = None) -> None:
    """The grid's factors from its calibration runs' (``norm.factors``: total CPU per item) and,
    where every one split its CPU, their user and GC factors (``splits``).

    ``rounds``: per calibration run, the workload's start-up loop rounds (:func:`startup_rounds`)
    and the loop's share of the twin's CPU per item (of the total, of the user class). Where every
    calibration run recorded its rounds, each one's factor is taken at their mean
    (``norm.rounds_per_cpu_ms``): a run whose loop did 1.2x the mean rounds per item, its loop
    being half of the item's CPU, measured 1.1x the CPU per item for that, not a slower host."""
    if norm.factors:
        values = list(norm.factors.values())
        norm.total_factor = norm.factor = statistics.fmean(values)
        split = bool(splits) and len(splits) == len(norm.factors)
        if split:
            # every calibration run split its CPU: the workload's per-item CPU and the GC's speed
            # each get their own factor (a mixed grid keeps the one factor for both)
            norm.gc_factors = {name: g for name, (_, g) in splits.items()}
            norm.gc_factor = statistics.fmean(norm.gc_factors.values())
            norm.factors = {name: u for name, (u, _) in splits.items()}
        known = {name: r for name, r in (rounds or {}).items() if r[0]}
        if known and set(known) == set(norm.factors):
            norm.rounds_per_cpu_ms = statistics.fmean(r[0] for r in known.values())
            for name, (r, share_total, share_user) in known.items():
                share = share_user if split else share_total
                norm.factors[name] /= share * r / norm.rounds_per_cpu_ms + 1.0 - share
        values = list(norm.factors.values())
        norm.factor = statistics.fmean(values)
        norm.drift = (max(values) - min(values)) / norm.factor if len(values) > 1 else None

