"""Run one scenario on the event engine: ``simulate(scenario) -> SimulationResult``.

The result carries the ``run --json`` summary (kernel counters over the post-warmup window plus
the workload's own keys), the per-period table, and 1-second cumulative series under cAdvisor's
Prometheus names, so a simulated run can be compared with a scraped one sample by sample.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np
import pandas as pd

from cfsim.engine.cfs import Bandwidth, CfsEngine, CpuStat
from cfsim.engine.slices import SlicedCfsEngine
from cfsim.goruntime.gc_cycles import mark_spans
from cfsim.kernel import limits
from cfsim.kernel.cpu_windows import (gc_interval_keys_from_periods, gc_window_keys_from_periods,
                                      window_keys_from_periods)
from cfsim.kernel.wakeup import WakeupCost
from cfsim.scenario import Scenario, load_scenario
from cfsim.workloads import get_builder

SCRAPE_INTERVAL_NS = 1_000_000_000


@dataclass
class SimulationResult:
    scenario: Scenario
    summary: dict[str, Any]
    periods: pd.DataFrame
    series: pd.DataFrame
    workload_series: pd.DataFrame = field(default_factory=pd.DataFrame)
    wall_s: float = 0.0
    #: quota changes cfsim's own VPA made during the run (``lab.vpa_in_the_loop``), as the lab
    #: records them in the run's manifest, ``cgroup.quota_changes``
    quota_changes: list[dict[str, Any]] = field(default_factory=list)
    #: one row a GC cycle of a Go workload (``GoRuntime.gc_cycle_table``, the fields of the runtime's
    #: gctrace); empty for workloads without a Go runtime
    gc_cycles: pd.DataFrame = field(default_factory=pd.DataFrame)


def bandwidth_for(scenario: Scenario, cpu_limit_cores: float | None = None) -> Bandwidth | None:
    """The engine's bandwidth for the scenario's cgroup (or another limit on the same cgroup)."""
    lim = scenario["cgroup.cpu_limit"] if cpu_limit_cores is None else cpu_limit_cores
    if lim is None:
        return None
    period_us = scenario["cgroup.period_us"]
    quota_us = limits.quota_us_exact(lim, period_us)
    return Bandwidth(quota_us=quota_us, period_us=period_us,
                     burst_us=min(scenario["cgroup.burst_us"], quota_us),
                     slice_us=scenario["cgroup.slice_us"], kernel=scenario["cgroup.kernel"])


def _stat_delta(a: CpuStat, b: CpuStat) -> dict[str, float]:
    return {k: getattr(b, k) - getattr(a, k) for k in CpuStat.__dataclass_fields__}


def kernel_summary(scenario: Scenario, start: CpuStat, end: CpuStat, t0_ns: int, t1_ns: int) -> dict[str, Any]:
    """The ``cpu.stat`` keys of ``run --json`` over ``(t0, t1]``."""
    d = _stat_delta(start, end)
    span_s = (t1_ns - t0_ns) / 1e9
    lim = scenario["cgroup.cpu_limit"]
    return {
        "cpu_limit_cores": lim,
        "cpu_usage_cores": d["usage_ns"] / 1e9 / span_s,
        "nr_periods": int(d["nr_periods"]),
        "nr_throttled": int(d["nr_throttled"]),
        "throttled_ratio": d["nr_throttled"] / d["nr_periods"] if d["nr_periods"] else 0.0,
        "throttled_time_s": d["throttled_time_ns"] / 1e9,
        "nr_bursts": int(d["nr_bursts"]),
        "burst_time_s": d["burst_time_ns"] / 1e9,
        "duration_s": span_s,
    }


#: The summary keys :func:`window_bounds` bounds while a run goes on.
WINDOW_BOUND_KEYS = ("throttled_ratio", "throttled_time_s", "cpu_usage_cores")


def window_bounds(delta: Mapping[str, int], window_ns: int, period_us: int) -> dict[str, tuple[float, float]]:
    """What the window's ``cpu.stat`` keys can still end at, given the counters' growth ``delta``
    (``CpuStat`` fields, ns) since the window opened: ``{key: (lowest, highest)}`` over every way
    the rest of a ``window_ns`` window could go, for a static period of ``period_us``.

    The counters only grow, and the period timer fires on a fixed grid
    (``start_cfs_bandwidth`` / ``do_sched_cfs_period_timer``, kernel/sched/fair.c), at most
    ``window // period + 1`` times in the window, so ``nr_throttled / nr_periods`` ends at least
    at ``nr_throttled / that``. Each lowest value is computed with the very expression the summary
    uses (:func:`kernel_summary`), so a float comparison against it errs on no side. Highest
    values: 1 for the ratio, unbounded (infinity) for the others.

    >>> b = window_bounds({"nr_periods": 10, "nr_throttled": 5, "throttled_time_ns": 3 * 10**8,
    ...                    "usage_ns": 10**9}, 10 * 10**9, 100_000)
    >>> b["throttled_ratio"][0], b["throttled_time_s"][0], b["cpu_usage_cores"][0]
    (0.04950495049504951, 0.3, 0.1)
    """
    span_s = window_ns / 1e9
    most_periods = window_ns // (period_us * 1000) + 1
    inf = float("inf")
    return {
        "throttled_ratio": (delta["nr_throttled"] / most_periods, 1.0),
        "throttled_time_s": (delta["throttled_time_ns"] / 1e9, inf),
        "cpu_usage_cores": (delta["usage_ns"] / 1e9 / span_s, inf),
    }


#: What a stop rule is asked at each check: the reachable range of the window's summary keys
#: (:func:`window_bounds`); it answers why the run may stop (a non-empty text) or None to go on.
StopRule = Callable[[dict[str, tuple[float, float]]], "str | None"]


def new_engine(scenario: Scenario, seed: int) -> CfsEngine:
    """The host + bandwidth engine of a scenario: CPUs shared fluidly or in time slices."""
    kw = dict(cpus=scenario["host.cpus"], hz=scenario["host.hz"], bandwidth=bandwidth_for(scenario),
              seed=seed, background_cores=scenario["host.background_cores"],
              wakeup=WakeupCost.from_scenario(scenario))
    if scenario["host.cpu_sharing"] == "slices":
        thread_us = scenario["host.thread_switch_us"]
        engine: CfsEngine = SlicedCfsEngine(**kw, switch_ns=int(round(scenario["host.context_switch_us"] * 1000)),
                                            neighbours=scenario["workload.client_cpu_us_per_request"] > 0,
                                            thread_switch_ns=None if thread_us is None else int(round(thread_us * 1000)))
    else:
        engine = CfsEngine(**kw)
    if scenario["host.wake_affine_share"] > 0 or scenario["host.wake_preempt_share"] > 0 \
            or (scenario["host.wake_affine_share_away"] or 0) > 0:
        engine.set_wake_placement(scenario["host.wake_affine_share"], scenario["host.wake_preempt_share"],
                                  scenario["host.wake_affine_share_away"])
    if scenario["host.neighbour_wake_share"] > 0 and isinstance(engine, SlicedCfsEngine):
        engine.set_neighbour_wake_share(scenario["host.neighbour_wake_share"])
    return engine


def _switches(engine: CfsEngine) -> tuple[int, int, int] | None:
    """Thread switches the sliced engine counted so far (the fluid engine has no turns)."""
    if isinstance(engine, SlicedCfsEngine):
        return engine.switches_voluntary, engine.switches_involuntary, engine.neighbour_preemptions
    return None


def simulate(scenario: Scenario | str | Path, overrides: Iterable[str] = (),
             stop: StopRule | None = None) -> SimulationResult:
    """Simulate a scenario (object, file or built-in name) and return its result.

    ``stop``: asked at each CFS period's end during the measured window with what the window's
    kernel keys can still end at (:func:`window_bounds`); when it answers, the run ends there and
    the summary is only ``{"stopped_early_s": when, "stopped_because": its answer}`` (no series
    or tables): a search that needs only a verdict stops a run its verdict is already decided on.
    Checked only for a static limit (no ``cgroup.limit_schedule``, no VPA in the loop), where the
    bounds hold; a run the rule never stops is the run without it, bit for bit.

    >>> r = simulate("cpu-bound-threads", ["run.duration_s=2"])
    >>> r.summary["cpu_limit_cores"], round(r.summary["cpu_usage_cores"], 1)
    (2.0, 2.0)
    """
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario, overrides)
    elif overrides:
        scenario = scenario.with_overrides(overrides)
    wall0 = time.perf_counter()
    seeds = np.random.SeedSequence(scenario["run.seed"]).spawn(2)
    engine = new_engine(scenario, int(seeds[0].generate_state(1)[0]))
    workload = get_builder(scenario["workload.kind"])(engine, scenario, np.random.default_rng(seeds[1]))
    rt = getattr(workload, "rt", None)
    if rt is not None and rt.build_pending() and scenario["lab.quota_at"] == "run" and engine.bandwidth is not None:
        # the lab sets the quota once the workload is ready (lab.quota_at = "run"): a heap built
        # before the load is built without it
        bw0 = engine.bandwidth
        engine.set_bandwidth(None)
        rt.after_build(lambda: engine.set_bandwidth(bw0))

    for t_s, lim in scenario["cgroup.limit_schedule"] or []:
        bw = bandwidth_for(scenario, lim) if lim is not None else None
        engine.call_at(int(round(t_s * 1e9)), lambda bw=bw: engine.set_bandwidth(bw))
    quota_changes = _vpa_in_the_loop(engine, scenario) if scenario["lab.vpa_in_the_loop"] else []

    samples: list[tuple] = []

    def scrape(again: bool = True) -> None:
        st = engine.cpu_stat()
        bw = engine.bandwidth
        samples.append((engine.now / 1e9, st.usage_ns / 1e9, st.nr_periods, st.nr_throttled,
                        st.throttled_time_ns / 1e9, bw.quota_us if bw else -1,
                        bw.period_us if bw else scenario["cgroup.period_us"]))
        if again:
            engine.call_later(SCRAPE_INTERVAL_NS, scrape)

    t1 = int(round(scenario["run.duration_s"] * 1e9))
    t0 = int(round(scenario["run.warmup_s"] * 1e9))
    marks: dict[str, CpuStat] = {}
    engine.call_at(0, scrape)
    workload.start()
    if t0 > 0:
        engine.run_until(t0)
    marks["start"] = engine.cpu_stat()
    switches0 = _switches(engine)
    if stop is not None and scenario["cgroup.cpu_limit"] is not None and not scenario["cgroup.limit_schedule"] \
            and not scenario["lab.vpa_in_the_loop"]:
        why = _run_checked(engine, scenario, stop, marks["start"], t0, t1)
        if why is not None:
            return SimulationResult(scenario, {"stopped_early_s": engine.now / 1e9, "stopped_because": why},
                                    pd.DataFrame(), pd.DataFrame(), wall_s=time.perf_counter() - wall0)
    engine.run_until(t1)
    marks["end"] = engine.cpu_stat()
    switches1 = _switches(engine)
    if samples[-1][0] < t1 / 1e9:
        scrape(again=False)  # the scrape due exactly at the end of the run
    sample_now = getattr(workload, "sample_now", None)
    if sample_now is not None:
        sample_now()   # the workload's own counters at the end too (its sampling event is due there)

    summary = kernel_summary(scenario, marks["start"], marks["end"], t0, t1)
    summary.update(workload.summary(t0, t1))
    if switches0 is not None:
        span_s = (t1 - t0) / 1e9
        summary["context_switches_voluntary_per_s"] = (switches1[0] - switches0[0]) / span_s
        summary["context_switches_involuntary_per_s"] = (switches1[1] - switches0[1]) / span_s
        summary["neighbour_preemptions_per_s"] = (switches1[2] - switches0[2]) / span_s
    series = pd.DataFrame(samples, columns=[
        "t_s", "container_cpu_usage_seconds_total", "container_cpu_cfs_periods_total",
        "container_cpu_cfs_throttled_periods_total", "container_cpu_cfs_throttled_seconds_total",
        "container_spec_cpu_quota", "container_spec_cpu_period"])
    wall = time.perf_counter() - wall0
    if scenario["lab.vpa_in_the_loop"]:
        summary["vpa_resizes"] = len(quota_changes)
    rt = getattr(workload, "rt", None)
    gc_cycles = rt.gc_cycle_table() if rt is not None else pd.DataFrame()
    periods = engine.periods_frame()
    summary.update(window_keys_from_periods(periods["end_s"], periods["usage_s"], t0 / 1e9, t1 / 1e9))
    if not gc_cycles.empty:
        summary.update(gc_window_keys_from_periods(periods["end_s"], periods["usage_s"], periods["throttled"],
                                                   *mark_spans(gc_cycles), t0 / 1e9, t1 / 1e9))
        # the same at the lab's scrape resolution, where the lab has no gctrace to time its marks
        summary.update(gc_interval_keys_from_periods(periods["end_s"], periods["usage_s"], periods["throttled"],
                                                     gc_cycles["run_t_s"], t0 / 1e9, t1 / 1e9,
                                                     SCRAPE_INTERVAL_NS / 1e9))
    return SimulationResult(scenario, summary, periods, series,
                            workload.series(SCRAPE_INTERVAL_NS), wall, quota_changes, gc_cycles)


def _run_checked(engine: CfsEngine, scenario: Scenario, stop: StopRule, start: CpuStat, t0: int,
                 t1: int) -> str | None:
    """Run the window to ``t1`` in steps of one CFS period, asking ``stop`` after each; its answer
    when it stops the run, else None (the run is at t1). A throttled run stops once the period that
    decides its verdict has ended; a run the rule never stops is the run without it, bit for bit
    (tests/unit/test_stop_early.py, fluid and sliced engines)."""
    period_us = scenario["cgroup.period_us"]
    step = period_us * 1000
    t = (t0 // step + 1) * step
    while t < t1:
        engine.run_until(t)
        why = stop(window_bounds(_stat_delta(start, engine.cpu_stat()), t1 - t0, period_us))
        if why:
            return why
        t += step
    return None


def _vpa_in_the_loop(engine: CfsEngine, scenario: Scenario) -> list[dict[str, Any]]:
    """cfsim's VPA acting on the simulated cgroup while the run goes on, as the lab's hardware in
    the loop does on a real one (:class:`cfsim.lab.vpa_loop.LabVpa`, the same object: samples of
    the cgroup's usage, the recommender, the updater, in-place resizes of the quota).

    Returns the list the resizes are appended to as they happen."""
    from cfsim.lab.vpa_loop import LabVpa

    changes: list[dict[str, Any]] = []

    def apply_limit(lim: float) -> None:
        engine.set_bandwidth(bandwidth_for(scenario, lim))

    start = scenario["cgroup.cpu_limit"]
    for t_s, lim in scenario["cgroup.limit_schedule"] or []:
        if t_s <= 0:
            start = lim
    vpa = LabVpa(scenario, lambda: engine.cpu_stat().usage_ns, apply_limit, start)

    def tick(t_s: float) -> None:
        change = vpa.tick(t_s)
        if change:
            changes.append({**change, "applied_t_s": t_s})

    for t_s in vpa.tick_times(scenario["run.duration_s"]):
        engine.call_at(int(round(t_s * 1e9)), tick, t_s)
    return changes


def write_result(result: SimulationResult, out_dir: str | Path) -> Path:
    """Write ``summary.json``, ``scenario.toml`` and the tables as Parquet into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(result.summary, indent=2, sort_keys=True) + "\n")
    (out / "scenario.toml").write_text(result.scenario.to_toml())
    result.periods.to_parquet(out / "periods.parquet", index=False)
    result.series.to_parquet(out / "series.parquet", index=False)
    if not result.workload_series.empty:
        result.workload_series.to_parquet(out / "workload_series.parquet", index=False)
    if not result.gc_cycles.empty:
        result.gc_cycles.to_parquet(out / "gc_cycles.parquet", index=False)
    return out
