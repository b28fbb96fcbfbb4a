"""A lab run's simulated twin: a prediction from what was known before the run, on the event engine.

A lab run folder holds ``scenario.toml`` (the resolved scenario the real run used),
``manifest.json.gz`` (how the run was made, plus what it measured; a plain ``manifest.json`` in
older folders, :mod:`cfsim.io.manifest`) and ``summary.json`` (what it measured). The twin is a
*prediction*, so :func:`twin_spec` - the one function that builds the twin's scenario - reads only:

* the run's ``scenario.toml``, but for the model's own priors (:data:`MODEL_PRIOR_KEYS`), which
  come from today's model: the file recorded the defaults of the day it was collected, and the
  lab never read them (:func:`run_scenario`);
* ``params``: calibrated parameters (``cfsim calibrate``) and what the grid's calibration runs
  (other runs; by default the one recorded last before the run, :data:`DEFAULT_CALIBRATION`)
  measured, :mod:`cfsim.validation.normalise`: the cost factor,
  the time a request spends outside the server (median and 99th percentile, at the run's pre-run
  neighbour load), the program's own live heap beyond the twin's, the GC pause's
  stop-the-world time and, for kinds the lab drives with its load generator on the same host,
  the load generator's CPU per request (the lab's curve by mode and rate,
  :mod:`cfsim.lab.loadgen_cost`, at the run's own mode and arrival rate, scaled by the calibration
  runs' measured cost; the twin then shares the CPUs with it in time slices:
  ``host.cpu_sharing = "slices"``, ``workload.client_cpu_us_per_request``; the rest of the
  harness counts at its pre-run CPU);
* the work of an item: the lab workload turns an item's CPU milliseconds into rounds of its loop
  at the rate it measured at start-up, before the window (``calibration_rounds_per_cpu_ms``);
  validation scales each twin's per-item CPU by that over its grid's calibration runs' rate
  (through ``params``: :func:`cfsim.validation.normalise.rounds_ratio`);
* machine facts the lab recorded in the manifest: ``host.hz``, ``host.affinity_cpus`` /
  ``host.host_cpus``, ``host.kernel``, ``host.kernel_version``, ``host.hostname`` (for runs without
  ``host.hz``: other manifests of the same data tree from the same kernel build on the same host,
  :func:`recorded_hz`; never the validating machine);
* what the lab set up before the run and recorded in the manifest: the Prometheus targets
  (``processes.prometheus.targets``: a scraped workload serves ``/metrics`` every
  ``lab.scrape_interval_s``, :func:`recorded_scrape_interval_s`);
* how the lab's workload started: it allocates its live heap (``buildLiveHeap``) and reports the
  nodes it built (``live_heap_nodes``, in its ready message before the load) so its pacer enters
  the run remembering that build's cons/mark (``go.heap_built_at_start``; docs/model-notes.md);
* the bucket layout of the lab binary's latency histograms (:data:`cfsim.lab.buckets.LAYOUTS`,
  told apart by the names of the buckets the run exported, never their counts): the lab's
  latency quantiles are PromQL ``histogram_quantile`` interpolations inside those buckets, not
  exact quantiles, so the twin reports its own through the same ones (``run.latency_buckets_s``,
  :func:`recorded_latency_buckets_s`);
* independent measurements of *other* processes, never derived from the workload's own usage:
  ``host_cpu.pre_run`` (measured before the workload started: the tenants, and the harness
  cgroup's own ``cpuacct`` without the load generator), and the CPU weights
  ``host_cpu.weights`` / ``cgroup.cpu_shares`` / ``cgroup.harness_shares``
  (:func:`neighbour_background_cores`); where such a run had the lab's load generator and its
  grid's calibration runs did not give its cost, its CPU is the lab's own curve at the run's rate
  (``lab:loadgen-cost``, :func:`predicted_client_cores`), a neighbour in the harness's cgroup.

A twin runs a request workload one goroutine per chunk (``run.request_batching = false``): the
validation's twins are the reference path that ``tests/unit/test_request_chunks.py`` holds the
faster chunked one to. Their grids derive small differences from them (a request's time outside
the server, the program's heap beyond the twin's) that a statistically equivalent path moves by
more than their own size.

It never reads ``summary.json``, the workload's measured usage, throughput or GOMAXPROCS, the
host's busy CPU during the run (``host_cpu.host_busy_cores``, ``others_cores``, ``workload_cores``,
``tenants_cores``), or the harness's (``host_cpu.harness_cores``: it holds the load generator's,
which follows the server's answers): those are what the twin is compared with. Runs recorded
before the lab measured its neighbours independently run with no contention input
(``contention = "unknown"``).

A hardware-in-the-loop run (``lab.vpa_in_the_loop``) is not given the quota writes it recorded:
the simulation runs cfsim's own recommender and updater on the simulated cgroup
(:func:`cfsim.simulation.simulate`), and the report compares the two resize trajectories.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, NamedTuple

import pandas as pd

from cfsim.goruntime.gc_cycles import cycle_keys, gc_cpu_per_cycle_s, mark_spans
from cfsim.io.gclimiter import LIMITER_LOG, limiter_turned_on, limiter_turned_on_in_window, read_gc_limiter
from cfsim.io.errors import CfsimParseError
from cfsim.io.gctrace import cycle_table
from cfsim.io.lab import read_lab_metrics
from cfsim.io.manifest import has_manifest, manifest_folders, manifest_path, read_manifest, read_json_file
from cfsim.io.tidy import expand_labels
from cfsim.kernel.cpu_windows import (CPU_WATCH_FILE, gc_interval_keys_from_samples, gc_window_keys_from_samples,
                                      window_keys)
from cfsim.kernel.limits import NICE_0_WEIGHT
from cfsim.lab.buckets import recorded_layout
from cfsim.lab.kinds import LAB_KINDS
from cfsim.lab.loadgen_cost import loadgen_cpu_us
from cfsim.lab.perf import PERF_SAMPLES_FILE, assist_cpu_share, read_perf_samples
from cfsim.lab.sleeps import thread_sleeps_per_item
from cfsim.lab.threads import thread_split_per_item
from cfsim.scenario import Scenario, ScenarioError, load_scenario
from cfsim.scenario.schema import SCHEMA
from cfsim.simulation import SimulationResult, simulate
from cfsim.workloads._request_workload import REQUEST_KINDS
from cfsim.workloads.latency_gc import latency_gc_keys_from_histograms


def is_run_folder(path: Path) -> bool:
    return has_manifest(path) and (path / "summary.json").is_file() and (path / "scenario.toml").is_file()


def find_runs(path: str | Path) -> list[Path]:
    """The run folders at or below ``path`` (a run folder itself, a grid, or a tree of grids)."""
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"{root}: no such run folder or grid")
    if is_run_folder(root):
        return [root]
    runs = [p for p in manifest_folders(root) if is_run_folder(p)]
    if not runs:
        raise FileNotFoundError(f"{root}: no lab run folders below it (a run folder holds manifest.json.gz "
                                f"or manifest.json, summary.json and scenario.toml)")
    return runs


#: the model's own parameters: what the runtime's slow paths, the GC's work, memory, the host and
#: the HTTP stack cost (``[go]``, ``[host]`` and ``[workload]`` priors, docs/model-notes.md). The
#: lab never reads them (:mod:`cfsim.lab.launch` configures the real process from the others), so
#: a run's ``scenario.toml`` holds only the defaults of the day it was collected: the grids of
#: 2026-11-23/24 recorded ``go.sched_spin_per_p_us = 0.3`` and ``go.sched_wake_us = 2.0``, priors
#: since refitted on the lab (0.05 and 6.0). A twin runs today's model, so :func:`run_scenario`
#: gives these keys today's defaults (``params`` may still set them).
MODEL_PRIOR_KEYS = (
    *(f"go.{k}" for k in ("mem_base_mb", "mem_metadata_fraction", "mem_frag_fraction", "mem_binary_mb",
                          "alloc_ns_per_kb", "page_fault_us", "page_release_us", "roots_mb", "gc_scan_mb_per_ms",
                          "process_heap_mb", "gc_parallel_cost", "gc_scan_miss_factor", "gc_stw_base_us",
                          "gc_stw_per_p_us", "gc_cycle_base_us", "gc_cycle_per_p_us", "gc_preempt_us",
                          "sched_spin_base_us", "sched_spin_per_p_us", "sched_wake_us", "sched_park_us",
                          "sched_switch_us", "sched_xfer_growth", "sched_lock_us", "sysmon_poll_us")),
    *(f"host.{k}" for k in ("context_switch_us", "thread_switch_us", "wakeup_us", "wakeup_cold_us", "wakeup_cold_ms",
                            "wakeup_latency_us", "stop_handshake_us", "timer_latency_us", "tlb_shootdown_us", "smt_slowdown",
                            "resume_cold_us", "resume_cold_ms")),
    *(f"workload.{k}" for k in ("server_cpu_us_per_request", "server_alloc_kb_per_request", "conn_heap_kb",
                                "conn_stack_kb", "cpu_cv", "cpu_drift_cv", "cpu_drift_tau_s", "scrape_cpu_ms",
                                "scrape_alloc_kb", "scrape_pool_kb", "client_rtt_ms", "client_rtt_p99_ms",
                                "client_send_late_ms", "client_send_late_p99_ms", "client_cpu_us_per_request")),
)


def validation_scope(path: str) -> tuple[str, list | None]:
    """What ``cfsim validate PATH`` validates: ``(root, only)`` for :func:`cfsim.validation.validate`.

    A single run folder of a grid that has calibration runs is validated as one run *of its grid*
    (``validate(grid, only=[run])``), so that its twin takes the grid's calibration runs exactly
    as when the whole grid is validated; alone it would have none and run uncalibrated, and the
    same run would get another answer by how it was named. Anything else stands as given."""
    run = Path(path)
    if not is_run_folder(run) or is_calibration_run(run):
        return path, None
    grid = run.parent
    if any(is_calibration_run(c) and is_run_folder(c) for c in grid.iterdir() if c != run):
        return str(grid), [grid / run.name]
    return path, None


def stale_priors(recorded: Scenario) -> dict[str, tuple[Any, Any]]:
    """The model priors a run's recorded scenario holds that differ from today's defaults:
    ``{key: (recorded, today)}``."""
    out = {}
    for key in MODEL_PRIOR_KEYS:
        section, name = key.split(".")
        today = SCHEMA[section][name].default
        if recorded[key] != today:
            out[key] = (recorded[key], today)
    return out


def _todays_priors(recorded: Scenario) -> tuple[Scenario, dict[str, tuple[Any, Any]]]:
    """``recorded`` with the model's priors at today's defaults, and the ones that moved."""
    stale = stale_priors(recorded)
    return (recorded.with_overrides([(k, today) for k, (_, today) in stale.items()]) if stale else recorded), stale


def run_scenario(run_dir: Path) -> Scenario:
    """The run's scenario (``scenario.toml``: the workload, limits and set-up the lab ran) with the
    model's own priors (:data:`MODEL_PRIOR_KEYS`) at today's defaults."""
    path = run_dir / "scenario.toml"
    try:
        recorded = load_scenario(path)
    except ScenarioError as exc:
        if str(path) in exc.key:   # the file's own error (not TOML, ...) names it already
            raise
        # a value of one run among many: say which run's file holds it
        raise ScenarioError(f"{path}: {exc.key}", exc.reason) from None
    return _todays_priors(recorded)[0]


#: the keys of a lab run's ``summary.json`` that are not numbers (:mod:`cfsim.lab.summary`)
SUMMARY_TEXT_KEYS = ("run_status", "derived_from_exports")


def read_summary(run_dir: Path) -> dict[str, Any]:
    """A run's ``summary.json`` as it was measured, refused with the file and key
    (:class:`~cfsim.io.errors.CfsimParseError`) when it is not JSON, not an object, or holds a
    value other than a number, true/false or null where the lab writes numbers (a string
    ``"0.9"`` would reach the error arithmetic deep inside the validation)."""
    path = Path(run_dir) / "summary.json"
    out = read_json_file(path)
    if not isinstance(out, dict):
        raise CfsimParseError(str(path), f"expected a JSON object (the run's summary), got {type(out).__name__}")
    for key, value in out.items():
        if key in SUMMARY_TEXT_KEYS or value is None or isinstance(value, (int, float)):
            continue
        raise CfsimParseError(str(path), f"expected a number or null, got {value!r:.40}", path=key)
    return out


def observed_summary(run_dir: Path) -> dict[str, Any]:
    """What the run measured (``summary.json``): compared with the twin, never given to it; with
    whether the GC CPU limiter turned on in the window where the manifest keeps the runtime's reads
    at its two ends (``gc_limiter_turned_on``, :func:`cfsim.io.gclimiter.limiter_turned_on_in_window`). A
    run that recorded the runtime's per-cycle GC trace (``gc_cycles.csv.gz``, ``lab.gctrace``)
    adds its per-cycle keys over the measured window (:func:`cfsim.goruntime.gc_cycles.cycle_keys`);
    one with the watcher's CPU samples (``cpu_watch.csv.gz``, runs since 2026-11-28) the spread of
    its CPU from one ~0.1 s to the next (:mod:`cfsim.kernel.cpu_windows`) and, where the runtime's
    cycle count was scraped too (``prom/samples``), whether its busiest and throttled windows lie in
    the seconds a cycle ended in (:func:`_gc_interval_observed`); one whose manifest
    keeps its threads' voluntary switches (runs since 2026-11-26) its Ms' sleeps per item
    and sysmon's sleeps and CPU per item (:func:`cfsim.lab.threads.thread_split_per_item`); one with both the watcher's samples and the
    trace, whether its busier and throttled windows are those a GC mark ran in
    (:func:`cfsim.kernel.cpu_windows.gc_window_keys`); one with both the trace and perf's samples
    (``lab.perf_s``, runs since 2026-12-01) the GC's real CPU a cycle (:func:`_gc_cpu_observed`);
    one with perf's samples, with or without the trace, the assists' share of the mark's real CPU
    (:func:`cfsim.lab.perf.assist_cpu_share`); one with ``lab.sleep_stacks_s`` its Ms' sleeps per item
    by cause (:func:`cfsim.lab.sleeps.thread_sleeps_per_item`)."""
    out = read_summary(run_dir)
    manifest = run_manifest(run_dir)
    if not out.get("oom_kills"):
        # whether the GC CPU limiter turned on in the window, from the runtime's own two reads
        ends = (manifest.get("window_samples") or {}).get("workload") or {}
        on = limiter_turned_on_in_window(ends.get("start") or {}, ends.get("end") or {})
        if on is not None:
            out["gc_limiter_turned_on"] = int(on)
    split = thread_split_per_item(manifest.get("threads") or {})
    if split is not None:
        out["os_thread_sleeps_per_item"] = split["m_sleeps"]
        out["sysmon_sleeps_per_item"] = split["sysmon_sleeps"]
        out["sysmon_cpu_us_per_item"] = split["sysmon_cpu_us"]
    out.update(thread_sleeps_per_item(manifest.get("thread_sleeps") or {}, out.get("throughput_per_s")))
    watch = run_dir / CPU_WATCH_FILE
    w = pd.read_csv(watch) if watch.is_file() else None
    if w is not None:
        out.update(window_keys(w["t_s"], w["usage_ns"] / 1e9))
        if not out.get("oom_kills"):
            out.update(_gc_interval_observed(run_dir, w))
    out.update(_latency_gc_observed(run_dir))
    perf_rec = None if out.get("oom_kills") else _perf_recording(run_dir)
    if perf_rec is not None:
        share = assist_cpu_share(perf_rec.samples, perf_rec.span)
        if share is not None:
            out["gc_assist_cpu_share"] = share
    trace = run_dir / "gc_cycles.csv.gz"
    if trace.is_file() and not out.get("oom_kills"):
        sc = run_scenario(run_dir)
        raw = pd.read_csv(trace)
        limiter = run_dir / "logs" / (LIMITER_LOG + ".gz")
        if limiter.is_file():
            # the cycles the GC CPU limiter turned on in, where a read right after tells
            raw["limiter_turned_on"] = limiter_turned_on(raw["cycle"], read_gc_limiter(limiter)[0])
        cycles = cycle_table(raw)
        out.update(cycle_keys(cycles, sc["run.warmup_s"], sc["run.duration_s"]))
        if perf_rec is not None:
            out.update(_gc_cpu_observed(perf_rec, cycles))
        if w is not None:
            # the watcher's t_s counts from the window's start; run_t_s from the run's
            start, end = mark_spans(cycles)
            out.update(gc_window_keys_from_samples(w["t_s"], w["usage_ns"] / 1e9, w["nr_throttled"],
                                                   start - sc["run.warmup_s"], end - sc["run.warmup_s"]))
    return out


#: profsplit's categories of the mark's own work (workers, assists, the phases' stop-the-world
#: work); sweeping and scavenging are the model's mutator costs (``go.alloc_ns_per_kb``)
GC_MARK_CATEGORIES = ("gc_mark_worker", "gc_assist", "gc_mark")


class PerfRecording(NamedTuple):
    """A run's perf samples (:func:`cfsim.lab.perf.read_perf_samples`), the recording's own span on
    the run's clock (the probe ends later, after ``perf script``) and the CPU a sample stands for [s]."""

    samples: pd.DataFrame
    span: tuple[float, float]
    sample_s: float


def _perf_recording(run_dir: Path) -> PerfRecording | None:
    """The run's perf samples with their span, or None for a run without them (or whose manifest
    does not say when and how long perf recorded)."""
    path = run_dir / PERF_SAMPLES_FILE
    if not path.is_file():
        return None
    block = run_manifest(run_dir).get("perf") or {}
    split = block.get("stack_split") or {}
    if not split or block.get("start_t_s") is None or not block.get("seconds"):
        return None
    samples, meta = read_perf_samples(path)
    start = float(block["start_t_s"])
    return PerfRecording(samples, (start, start + float(block["seconds"])), 1.0 / float(split.get("hz") or meta["hz"]))


def _gc_cpu_observed(rec: PerfRecording, cycles: pd.DataFrame) -> dict[str, Any]:
    """The GC's real CPU a cycle (``gc_cpu_per_cycle_s``) from the perf samples that fall in the
    run's gctrace marks (:func:`cfsim.goruntime.gc_cycles.gc_cpu_per_cycle_s`)."""
    start, end = mark_spans(cycles)
    v = gc_cpu_per_cycle_s(rec.samples["t_s"].to_numpy(), rec.samples["category"].isin(GC_MARK_CATEGORIES).to_numpy(),
                           rec.sample_s, start, end, rec.span)
    return {} if v is None else {"gc_cpu_per_cycle_s": v}


#: the load generator's latency histogram and the runtime's completed GC cycles, scraped each second
CLIENT_LATENCY_BUCKETS = "cfsim_loadgen_request_duration_seconds_bucket"
GC_CYCLES_TOTAL = "go_gc_cycles_total_gc_cycles_total"


def _window_series(run_dir: Path, names: list[str], kind: str = "raw"
                   ) -> tuple[dict[str, pd.DataFrame], float, float] | None:
    """The run's exports ``names`` (:func:`cfsim.io.lab.read_lab_metrics`) and its window's start
    and end [unix s]; None when one is missing."""
    frames, meta = read_lab_metrics(run_dir, names, kind=kind)
    times = meta["manifest"].get("times") or {}
    t0, t1 = times.get("window_start_unix_s"), times.get("window_end_unix_s")
    if meta["missing"] or t0 is None or t1 is None:
        return None
    return frames, t0, t1


def _latency_gc_observed(run_dir: Path) -> dict[str, Any]:
    """The run's client-side p99 in the scrape intervals a GC cycle ended in against the others
    (:mod:`cfsim.workloads.latency_gc`), over its window; nothing for a run without both series
    (streams, runs the OOM killer ended)."""
    got = _window_series(run_dir, [CLIENT_LATENCY_BUCKETS, GC_CYCLES_TOTAL])
    if got is None:
        return {}
    frames, t0, t1 = got
    b = expand_labels(frames[CLIENT_LATENCY_BUCKETS])
    counts = b.assign(le=b["le"].astype(float)).pivot_table(index="timestamp", columns="le", values="value",
                                                           aggfunc="sum")
    cyc = frames[GC_CYCLES_TOTAL].groupby("timestamp")["value"].sum()
    both = counts.join(cyc.rename("cycles"), how="inner").dropna()
    if len(both) < 2:
        return {}
    t_s = both.index.map(lambda ts: ts.timestamp()).to_numpy(dtype=float)
    bounds = list(counts.columns)
    return latency_gc_keys_from_histograms(t_s, bounds, both[bounds].to_numpy(), both["cycles"].to_numpy(), t0, t1)


def _gc_interval_observed(run_dir: Path, watch: pd.DataFrame) -> dict[str, Any]:
    """Whether the run's busiest and throttled ~0.1 s windows fall in the scrape intervals a GC
    cycle ended in (:func:`cfsim.kernel.cpu_windows.gc_interval_keys`): the watcher's samples
    against the cycle count at its scrapes' own times (``prom/samples``), both put on the
    window's clock; nothing for a run without those samples or the window's times."""
    # the raw samples at their scrape times: a range query's steps are up to a second later
    got = _window_series(run_dir, [GC_CYCLES_TOTAL], kind="samples")
    if got is None:
        return {}
    frames, t0, t1 = got
    cyc = frames[GC_CYCLES_TOTAL].groupby("timestamp")["value"].sum()
    t_s = cyc.index.map(lambda ts: ts.timestamp()).to_numpy(dtype=float)
    keep = (t_s >= t0 - 1e-6) & (t_s <= t1 + 1e-6)
    if keep.sum() < 2:
        return {}
    return gc_interval_keys_from_samples(watch["t_s"], watch["usage_ns"] / 1e9, watch["nr_throttled"],
                                         t_s[keep] - t0, cyc.to_numpy(dtype=float)[keep])


def run_manifest(run_dir: Path) -> dict[str, Any]:
    return read_manifest(run_dir)


def is_calibration_run(run_dir: Path) -> bool:
    """Grid calibration runs (unconstrained, GOMAXPROCS 1) are named ``calib-*`` by the lab."""
    return run_dir.name.startswith("calib")


#: how the lab orders a grid's calibration runs around its other runs (``cfsim.lab.grid``'s plan),
#: for runs whose manifest records no start time
_CALIBRATION_ORDER = {"calib-start": -1, "calib-end": 1}


def run_started_unix_s(run_dir: Path) -> float | None:
    """When the run's workload started (``times.start_unix_s`` of its manifest), or None."""
    try:
        times = run_manifest(run_dir).get("times") or {}
    except (OSError, ValueError):
        return None
    t = times.get("start_unix_s")
    return None if t is None else float(t)


def calibration_known_before(runs: list[Path]) -> list[Path]:
    """``runs`` without the calibration runs that no twin of the others could have known: per grid
    folder, a calibration run is kept only if it started before every other run of the grid (by
    the manifests' ``times.start_unix_s``; where a time is missing, by the lab's names: ``calib-start``
    before, ``calib-end`` after). The lab brackets each grid with a calibration run at its start and
    one at its end, hours apart on a long grid; the end one measured the host after every run it
    would calibrate. Order is kept.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> runs = [d / "g" / n for n in ("calib-start", "p000", "calib-end")]
    >>> [r.name for r in calibration_known_before(runs)]
    ['calib-start', 'p000']
    """
    first: dict[Path, float | None] = {}
    for run in runs:
        if is_calibration_run(run):
            continue
        t = run_started_unix_s(run)
        prev = first.get(run.parent, float("inf"))
        first[run.parent] = None if t is None or prev is None else min(prev, t)

    def known(run: Path) -> bool:
        if not is_calibration_run(run) or run.parent not in first:
            return True   # not a calibration run, or a grid with nothing else to calibrate
        t, before = run_started_unix_s(run), first[run.parent]
        if t is not None and before is not None:
            return t < before
        return _CALIBRATION_ORDER.get(run.name, 1) < 0
    return [run for run in runs if known(run)]


#: which calibration runs set a grid's factors and priors (``validate(calibration=...)``)
CALIBRATION_CHOICES = ("all", "before", "latest")

#: the default of ``validate``, ``calibrate`` and their commands: a twin is a prediction, so it takes
#: only the calibration run recorded last before its run (for a grid with calibration runs only at
#: its two ends, the opening one: the same as ``"before"``), never the closing run recorded after it
DEFAULT_CALIBRATION = "latest"


def runs_with_calibration(runs: list[Path], calibration: str) -> list[Path]:
    """``runs`` with the calibration runs ``calibration`` keeps: ``"all"`` of them, ``"before"``
    (:func:`calibration_known_before`), or for ``"latest"`` all of them (each run's twin then takes
    its own, :func:`calibration_runs_for`); any other choice is refused."""
    if calibration not in CALIBRATION_CHOICES:
        raise ValueError(f"calibration must be one of {', '.join(CALIBRATION_CHOICES)} (got {calibration!r})")
    return calibration_known_before(runs) if calibration == "before" else runs


def _calibration_start(run: Path) -> float | None:
    """When a calibration run started, for ordering: its manifest's time, else the lab's names
    (``calib-start`` before everything, ``calib-end`` after), else unknown."""
    t = run_started_unix_s(run)
    if t is not None:
        return t
    order = _CALIBRATION_ORDER.get(run.name)
    return None if order is None else order * float("inf")


def calibration_runs_for(run: Path, calib_runs: list[Path], calibration: str) -> list[Path]:
    """The calibration runs whose measurements the twin of ``run`` takes, among its grid's
    ``calib_runs`` (those :func:`runs_with_calibration` kept): every one for ``"all"`` and
    ``"before"``; for ``"latest"`` the one that started last before ``run`` (none when none did, or
    when the run's start is unknown and no ``calib-start`` is there), so that a grid with
    calibration runs between its points (``cfsim lab grid --calibrate-every N``) calibrates each
    run by the host's state just before it. A calibration run's own twin, under ``"latest"``,
    takes itself.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()) / "g"
    >>> cal = [d / n for n in ("calib-start", "calib-end")]
    >>> [r.name for r in calibration_runs_for(d / "p000", cal, "latest")]
    ['calib-start']
    >>> [r.name for r in calibration_runs_for(d / "p000", cal, "all")]
    ['calib-start', 'calib-end']
    """
    mine = [c for c in calib_runs if c.parent == run.parent]
    if calibration != "latest":
        return mine
    if is_calibration_run(run):
        return [run]
    t = run_started_unix_s(run)
    known = [(start, c) for c in mine if (start := _calibration_start(c)) is not None
             and (start < t if t is not None else start == float("-inf"))]
    return [max(known, key=lambda sc: sc[0])[1]] if known else []


# ------------------------------------------------------------------ machine facts: the tick rate

#: the tick rate a twin runs at when no record of the run's kernel states it: the scenario's own
#: ``host.hz`` (the schema default is 1000); flagged ``hz = "unknown"`` in the spec and the report
HZ_UNKNOWN_NOTE = "no record of the run's kernel tick rate: the scenario's host.hz is used (flagged unknown)"


def _kernel_id(host: Mapping[str, Any]) -> tuple | None:
    """The identity of a kernel build on a machine: release string, build string, hostname."""
    release, hostname = host.get("kernel"), host.get("hostname")
    if not release or not hostname:
        return None
    return (release, host.get("kernel_version"), hostname)


@functools.lru_cache(maxsize=32)
def _hz_evidence(root: str) -> dict[tuple, dict[int, list[str]]]:
    """Every manifest below ``root`` (and ``root/manifest.json``'s environment) that records
    ``host.hz``: kernel identity -> {hz: [manifest paths]}."""
    out: dict[tuple, dict[int, list[str]]] = {}
    base = Path(root)
    # sorted by file, as the evidence names the first one
    for path in sorted(p for p in map(manifest_path, manifest_folders(base)) if p is not None):
        try:
            doc = read_json_file(path)
        except (OSError, ValueError):  # unreadable or not JSON: no evidence
            continue
        if not isinstance(doc, dict):  # a damaged manifest elsewhere in the tree: no evidence
            continue
        host = doc.get("host") or (doc.get("environment") or {}).get("host") or {}
        if not isinstance(host, dict):
            continue
        kid, hz = _kernel_id(host), host.get("hz")
        if kid is None or not hz or isinstance(hz, bool) or not isinstance(hz, (int, float)):
            continue
        out.setdefault(kid, {}).setdefault(int(hz), []).append(str(path.relative_to(base)))
    return out


def evidence_root(run_dir: Path) -> Path:
    """The data tree a run belongs to: ``data/lab`` for ``data/lab/<grid>/<run>`` (the folder
    above the grid holds the lab's index manifest), else the folder that holds the run (its
    grid, or wherever it was copied: its siblings only). A run at ``/tmp/x/run`` must not send
    the search through all of ``/tmp``.

    >>> import tempfile, json
    >>> top = Path(tempfile.mkdtemp())
    >>> run = top / "grid" / "p000"; run.mkdir(parents=True)
    >>> evidence_root(run) == (top / "grid").resolve()
    True
    >>> _ = (top / "manifest.json").write_text(json.dumps({"grids": {}}))
    >>> evidence_root(run) == top.resolve()
    True
    """
    run = run_dir.resolve()
    return run.parent.parent if has_manifest(run.parent.parent) else run.parent


def recorded_hz(run_dir: Path, manifest: Mapping[str, Any] | None = None) -> tuple[int | None, str]:
    """The kernel tick rate of the run and where it comes from.

    ``(hz, "manifest:host.hz")`` when the lab recorded it; else ``(hz, "evidence:...")`` when
    every other manifest of the same data tree made on the same kernel build (release string and
    build string) on the same host records one and the same ``hz``; else ``(None, "unknown")``.
    Never the validating machine's own kernel.
    """
    manifest = run_manifest(run_dir) if manifest is None else manifest
    host = manifest.get("host") or {}
    if host.get("hz"):
        return int(host["hz"]), "manifest:host.hz"
    kid = _kernel_id(host)
    if kid is None:
        return None, "unknown"
    root = evidence_root(run_dir)
    found = _hz_evidence(str(root)).get(kid, {})
    if len(found) == 1:
        hz, paths = next(iter(found.items()))
        return hz, (f"evidence:host.hz of {len(paths)} manifest(s) in {root.name}/ from kernel {kid[0]} "
                    f"on host {kid[2]} (e.g. {paths[0]})")
    return None, "unknown"


# ------------------------------------------------------------------ neighbours on the host

#: the kernel's default CPU weight of a cgroup (``cpu.shares``), for tenants nobody configured
DEFAULT_SHARES = NICE_0_WEIGHT
#: the twin never takes more than this share of the host away from the workload
MAX_BACKGROUND_FRACTION = 0.9


class Neighbour(NamedTuple):
    """Another process on the host: the CPU it takes [cores], its CPU weight, and, where counted,
    over how many runnable tasks (then its demand is at least one core a task)."""

    demand_cores: float
    shares: float
    tasks: float | None = None


def neighbour_background_cores(cpus: int, workload_shares: float, workload_reach_cores: float,
                               neighbours: list[tuple[float, float]] | list[Neighbour],
                               workload_cpus: int | None = None) -> float:
    """CPU other processes take from the CPUs the workload runs on [cores], by CFS weight.

    ``neighbours`` are :class:`Neighbour` (or ``(demand_cores, shares)``) measured independently
    of the workload. Rule: neighbours first fill the CPUs the workload's own predicted usage leaves
    idle (``cpus - workload_reach_cores``, where the reach is the scenario's fluid prediction
    ``min(demand, limit, GOMAXPROCS, cpus)``, not a measurement); the rest of their demand competes
    with the workload on its CPUs, where CFS gives a neighbour of weight ``w_n`` against the
    workload's ``w_g`` the share ``w_n / (w_n + w_g)`` while both are runnable. A neighbour with
    competing demand ``d`` therefore slows the workload by about ``d * w_n / (w_n + w_g)`` cores,
    spread evenly over the host (the engine's ``host.background_cores``).

    A neighbour whose runnable tasks were counted (``tasks``) demands a core a task, not only the
    cores it got alone on the host, and competes CPU by CPU: its weight sits on the
    ``min(tasks, cpus)`` CPUs its tasks run on, the workload group's on the ``workload_cpus``
    (at most GOMAXPROCS threads run Go code; ``calc_group_shares`` in ``kernel/sched/fair.c``
    puts a group's weight where its load is), and the competing demand is at most the host.
    Eight busy root tasks (8 x 1024) against a group of 8192 leave it half of each CPU at
    GOMAXPROCS 2, and two thirds of its one CPU at GOMAXPROCS 1 (the lab's ``tenant-root``:
    0.90-0.92 and 0.71-0.78 cores).

    Limits: it assumes the neighbours' demand is steady and spread over the CPUs and the run
    (bursty tenants, pinning and the wake-up placement of short sleepers are not modelled);
    the free-CPU correction uses the fluid prediction, so a workload that really uses less than
    its cap (blocking, GC pauses) leaves more room than assumed; and weights act per CPU within
    the root runqueue only (no nested hierarchies, no autogroup).

    >>> neighbour_background_cores(2, 8192, 2.0, [(1.0, 1024)])   # a busy tenant, light weight
    0.1111
    >>> neighbour_background_cores(2, 8192, 1.0, [(1.0, 1024)])   # fits on the CPU left idle
    0.0
    >>> neighbour_background_cores(2, 8192, 2.0, [(0.2, 8192)])   # the harness at equal weight
    0.1
    >>> neighbour_background_cores(2, 8192, 1.1, [Neighbour(1.97, 8 * 1024, 8)], workload_cpus=2)
    1.0
    >>> neighbour_background_cores(2, 8192, 1.0, [Neighbour(1.97, 8 * 1024, 8)], workload_cpus=1)
    0.6667
    """
    items = [Neighbour(*n) for n in neighbours]
    demands = [max(n.demand_cores, n.tasks or 0.0) for n in items]
    total = sum(d for d in demands if d > 0)
    if total <= 0 or cpus <= 0:
        return 0.0
    free = max(0.0, cpus - max(0.0, workload_reach_cores))
    competing = max(0.0, total - free)
    if any(n.tasks for n in items):
        competing = min(competing, float(cpus))  # a core a task can ask for more than the host has
    if competing <= 0:
        return 0.0
    k = min(cpus, workload_cpus) if workload_cpus and workload_cpus > 0 else cpus
    bg = 0.0
    for n, demand in zip(items, demands):
        if demand <= 0:
            continue
        w_n = float(n.shares) if n.shares and n.shares > 0 else DEFAULT_SHARES
        w_g = float(workload_shares)
        if n.tasks:
            # per CPU: the neighbour's weight over the CPUs its tasks occupy, the group's over its own
            w_n, w_g = w_n / min(max(1.0, n.tasks), cpus), w_g / k
        bg += competing * (demand / total) * w_n / (w_n + w_g)
    return round(min(bg, MAX_BACKGROUND_FRACTION * cpus), 4)


def _scenario_gomaxprocs(sc: Scenario) -> int:
    from cfsim.goruntime.gomaxprocs import gomaxprocs_value

    return int(gomaxprocs_value(sc["go.gomaxprocs"], sc["cgroup.cpu_limit"], int(sc["host.cpus"]),
                                sc["go.version"], sc["go.round"], sc["cgroup.period_us"]))


def _predicted_reach_cores(sc: Scenario) -> float:
    """The fluid prediction of the workload's CPU from its scenario alone."""
    from cfsim.engine.longrun import nominal_demand_cores
    from cfsim.engine.response import AnalyticResponse, work_shape

    cpus = int(sc["host.cpus"])
    limits = [sc["cgroup.cpu_limit"]] + [lim for _, lim in sc["cgroup.limit_schedule"] or []]
    lim = None if any(v is None for v in limits) else max(limits)
    usage, _, _ = AnalyticResponse(cpus, work_shape(sc))(lim, _scenario_gomaxprocs(sc), nominal_demand_cores(sc))
    return float(usage)


def pre_run_tenants_cores(manifest: Mapping[str, Any]) -> float | None:
    """Other tenants' CPU measured before the run's workload started (``host_cpu.pre_run``) [cores]."""
    value = ((manifest.get("host_cpu") or {}).get("pre_run") or {}).get("tenants_cores")
    return None if value is None else float(value)


#: a twin takes the lab's count of the tenants' runnable tasks only from this many pre-run tenant
#: cores: below it a quiet host's blips stay one light neighbour, however many tasks were runnable
#: at the instants the lab counted them (not the report's quiet/busy split,
#: :data:`cfsim.validation.regimes.QUIET_TENANTS_CORES`)
COUNTED_TENANTS_MIN_CORES = 0.1


def tenant_tasks(manifest: Mapping[str, Any]) -> tuple[float, str] | None:
    """How many runnable tasks the host's other tenants ran on before the workload's load started,
    and where the count comes from; None when the run did not count them.

    CFS weighs a cgroup by its ``cpu.shares`` however many threads it runs, but each runnable task
    of a process in the root cgroup by its own nice-0 weight (:data:`NICE_0_WEIGHT`), so a tenant
    of ``n`` busy tasks outweighs the workload's group ``n`` times as much as one would. The count
    is the pre-run window's runnable tasks besides the reader (``host_cpu.pre_run.
    runnable_others_mean``, ``/proc/stat procs_running``), never fewer than the cores the tenants
    used (``tenants_cores``): a task uses one core at most. Runs recorded before the lab counted
    take that floor alone, the fewest tasks their tenants' cores allow (until 2026-12-02 they were
    one neighbour of a cgroup's weight however many cores it used, which let 1.98 cores of tenants
    take 0.2-0.3 from the workload where they took 0.5-0.9: docs/model-notes.md); the 1-minute load
    average they recorded is no count of busy tasks (it also holds the previous run's threads and
    tasks in uninterruptible sleep).

    >>> tenant_tasks({"host_cpu": {"pre_run": {"tenants_cores": 1.97, "runnable_others_mean": 8.05}}})
    (8.05, 'manifest:host_cpu.pre_run.runnable_others_mean')
    >>> tenant_tasks({"host_cpu": {"pre_run": {"tenants_cores": 1.0, "runnable_others_mean": 0.4}}})[0]
    1.0
    >>> tenant_tasks({"host_cpu": {"pre_run": {"tenants_cores": 1.98}}, "loadavg": {"start": [8.6, 8, 7]}})
    (1.98, 'manifest:host_cpu.pre_run.tenants_cores')
    >>> tenant_tasks({"host_cpu": {"pre_run": {"tenants_cores": 0.0}}}) is None
    True
    """
    pre = (manifest.get("host_cpu") or {}).get("pre_run") or {}
    floor = float(pre.get("tenants_cores") or 0.0)
    if pre.get("runnable_others_mean") is None:
        # no count: the fewest tasks the cores they used allow
        return (floor, "manifest:host_cpu.pre_run.tenants_cores") if floor > 0 else None
    return max(floor, float(pre["runnable_others_mean"])), "manifest:host_cpu.pre_run.runnable_others_mean"


def tenant_neighbours(manifest: Mapping[str, Any], tenants_cores: float, tasks: float | None,
                      group_shares: float) -> list[Neighbour]:
    """The tenants as :class:`Neighbour` s. Without a task count (a quiet host's blips,
    :data:`COUNTED_TENANTS_MIN_CORES`), one neighbour of ``group_shares``. With one: the lab's
    own tenant (``tenant``: its busy loops in a cgroup of ``group_shares``, or in the root cgroup
    at :data:`NICE_0_WEIGHT` each), up to a core a loop, and the rest of the tenants' cores on the
    rest of the ``tasks``, each at :data:`NICE_0_WEIGHT`.

    >>> tenant_neighbours({}, 1.98, None, 1024)
    [Neighbour(demand_cores=1.98, shares=1024, tasks=None)]
    >>> tenant_neighbours({}, 1.98, 6.0, 1024)
    [Neighbour(demand_cores=1.98, shares=6144.0, tasks=6.0)]
    >>> tenant_neighbours({"tenant": {"threads": 8, "cgroup": "root"}}, 1.9, 8.3, 1024)
    [Neighbour(demand_cores=1.9, shares=8192, tasks=8)]
    """
    if tasks is None:
        return [Neighbour(tenants_cores, group_shares)]
    lab = manifest.get("tenant") or {}
    lab_threads = int(lab.get("threads") or 0)
    lab_cores = min(tenants_cores, float(lab_threads))
    out = []
    if lab_cores > 0:
        weight = NICE_0_WEIGHT * lab_threads if lab.get("cgroup") == "root" else group_shares
        out.append(Neighbour(lab_cores, weight, lab_threads))
    rest_cores = round(tenants_cores - lab_cores, 4)
    if rest_cores > 0:
        rest_tasks = max(1.0, tasks - lab_threads, rest_cores)
        out.append(Neighbour(rest_cores, round(NICE_0_WEIGHT * rest_tasks, 1), rest_tasks))
    return out


def predicted_client_cores(scenario: Scenario) -> float | None:
    """The lab's load generator's CPU [cores] beside a run of ``scenario`` that the twin does not
    run itself (no ``workload.client_cpu_us_per_request``: the grid's calibration runs had no load
    generator, e.g. a stream's): the lab's own curve at the run's mode and arrival rate, both inputs
    (:mod:`cfsim.lab.loadgen_cost`, measured on the ``loadgen-cost`` grid, unscaled); None for a kind
    without a load generator, a twin that runs it, or where the curve says nothing (a closed loop,
    whose rate is an outcome; a rate schedule).

    >>> from cfsim.scenario import load_scenario
    >>> round(predicted_client_cores(load_scenario("cpu-bound-threads", ["workload.kind=open",
    ...     "workload.rate_per_s=750"])), 4)
    0.181
    >>> predicted_client_cores(load_scenario("cpu-bound-threads", ["workload.kind=stream"])) is None
    True
    """
    if scenario["workload.kind"] != "open" or scenario["workload.client_cpu_us_per_request"] > 0:
        return None
    rate = scenario["workload.rate_per_s"]
    us = loadgen_cpu_us("open", rate)   # None for a rate schedule
    return None if us is None else round(us * float(rate) * 1e-6, 4)


def neighbour_inputs(manifest: Mapping[str, Any], scenario: Scenario, client_cores: float | None = None
                     ) -> tuple[list[Neighbour], float, list[str]] | None:
    """The independently measured neighbours of a run: ``(neighbours, workload_shares, sources)``,
    or None when the run recorded none (contention unknown).

    Neighbours: the harness as it was before the workload started (``host_cpu.pre_run.
    harness_cores``: Prometheus and the lab's exporters, its own cgroup) and other tenants
    (``host_cpu.pre_run.tenants_cores``). Nothing measured during the run is used: not the
    tenants' or the host's busy CPU, and not the harness cgroup's CPU during the run
    (``host_cpu.harness_cores``), which holds the load generator's CPU, an outcome of the run (a
    closed loop sends as fast as the server answers). A twin that runs the load generator itself
    (its cost from the grid's calibration runs) counts only that; ``client_cores``: the generator's
    CPU predicted for a twin that does not (:func:`predicted_client_cores`), a neighbour in the
    harness's cgroup.
    """
    host = manifest.get("host_cpu") or {}
    pre = host.get("pre_run") or {}
    cg = manifest.get("cgroup") or {}
    w = host.get("weights") or {}
    sources: list[str] = []
    harness, tenants = pre.get("harness_cores"), pre_run_tenants_cores(manifest)
    if harness is not None:
        sources.append("manifest:host_cpu.pre_run.harness_cores")
        if client_cores:
            harness = round(harness + client_cores, 4)
            sources.append("lab:loadgen-cost")
    if tenants is not None:
        sources.append("manifest:host_cpu.pre_run.tenants_cores")
    if harness is None and tenants is None:
        return None

    def shares(key_w: str, key_cg: str | None, key_lab: str | None) -> float:
        if w.get(key_w):
            sources.append(f"manifest:host_cpu.weights.{key_w}")
            return float(w[key_w])
        if key_cg and cg.get(key_cg):
            sources.append(f"manifest:cgroup.{key_cg}")
            return float(cg[key_cg])
        if key_lab and scenario.get(key_lab):
            sources.append(f"scenario:{key_lab}")
            return float(scenario[key_lab])
        sources.append("default:cpu.shares=1024")
        return float(DEFAULT_SHARES)

    workload_shares = shares("workload_shares", "cpu_shares", "lab.cpu_shares")
    neighbours = []
    if harness is not None:
        neighbours.append(Neighbour(float(harness), shares("harness_shares", "harness_shares", "lab.harness_shares")))
    if tenants is not None:
        group = shares("tenant_shares", None, None)
        # a count only for tenants that were busy: a quiet host's blips stay one light neighbour
        tasks = tenant_tasks(manifest) if tenants >= COUNTED_TENANTS_MIN_CORES else None
        if tasks is not None and tasks[1] not in sources:
            sources.append(tasks[1])
        neighbours += tenant_neighbours(manifest, float(tenants), tasks[0] if tasks else None, group)
    return neighbours, workload_shares, sources


# ------------------------------------------------------------------ what the lab set up before the run


def recorded_scrape_interval_s(manifest: Mapping[str, Any], scenario: Scenario) -> float | None:
    """The interval at which the lab's Prometheus scraped the workload's own ``/metrics``, when
    the run's Prometheus had the workload among its targets (``processes.prometheus.targets``,
    configured before the run) and the workload kind models scrapes (``workload.scrape_interval_s``);
    else None. The scenario's ``lab.scrape_interval_s`` is that interval."""
    from cfsim.workloads.kinds import workload_kind

    targets = ((manifest.get("processes") or {}).get("prometheus") or {}).get("targets") or {}
    if "workload" not in targets or scenario["workload.scrape_interval_s"]:
        return None
    if "scrape_interval_s" not in workload_kind(scenario["workload.kind"]).keys:
        return None
    return float(scenario["lab.scrape_interval_s"])


# ------------------------------------------------------------------ the twin's scenario


#: the latency histograms the lab summary reads its p50/p99/p999 from (the item and request kinds')
LATENCY_HISTOGRAMS = tuple(dict.fromkeys(h for k in LAB_KINDS.values() if k.family in ("items", "requests")
                                         for h in k.latency_histograms))


def recorded_latency_buckets_s(manifest: Mapping[str, Any]) -> list[float] | None:
    """The upper bounds [s] of the run's latency histogram (+Inf left out): the lab layout
    (:data:`cfsim.lab.buckets.LAYOUTS`) that the bucket names of its window samples belong to
    (the manifest keeps only the buckets its window's quantiles reach); None if it kept none or
    they fit no known layout."""
    return recorded_layout(manifest.get("window_samples") or {}, LATENCY_HISTOGRAMS)


@dataclass(frozen=True)
class TwinInput:
    """One value the twin was given beyond its scenario file, and where it came from."""

    key: str
    value: Any
    source: str  # "params", "manifest:<field>", "evidence:...", "scenario:<key>", "default:..."


@dataclass
class TwinSpec:
    """Everything a twin simulates from: the scenario (overrides applied) and its inputs."""

    run_dir: Path
    scenario: Scenario
    inputs: tuple[TwinInput, ...]
    hz: str                 # "recorded" | "evidence" | "unknown"
    contention: str         # "modelled" (independent neighbour measurements) | "unknown"
    vpa_in_the_loop: bool   # cfsim's VPA acts on the simulated quota (nothing replayed)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"hz": self.hz, "host.hz": self.scenario["host.hz"], "contention": self.contention,
                "vpa_in_the_loop": self.vpa_in_the_loop,
                "inputs": [{"key": i.key, "value": i.value, "source": i.source} for i in self.inputs],
                "notes": list(self.notes)}


def twin_spec(run_dir: Path, params: Mapping[str, Any] | None = None) -> TwinSpec:
    """The twin's scenario for a run folder, from the inputs listed in the module docstring only.

    ``params`` (``{"section.key": value}``: calibrated parameters and the grid's cost factor) are
    applied first; machine facts and neighbours never replace a key ``params`` sets.
    """
    run_dir = Path(run_dir)
    scenario, stale = _todays_priors(load_scenario(run_dir / "scenario.toml"))
    manifest = run_manifest(run_dir)
    inputs = [TwinInput(k, v, "params") for k, v in (params or {}).items()]
    given = {i.key for i in inputs}
    notes: list[str] = []
    if stale:
        notes.append("model priors at today's defaults, not the run file's: "
                     + ", ".join(f"{k} {old} -> {new}" for k, (old, new) in stale.items()))

    def put(key: str, value: Any, source: str) -> None:
        if key not in given and value != scenario[key]:
            inputs.append(TwinInput(key, value, source))
            given.add(key)

    host = manifest.get("host") or {}
    cpus = host.get("affinity_cpus") or host.get("host_cpus")
    if cpus:
        put("host.cpus", int(cpus), "manifest:host.affinity_cpus" if host.get("affinity_cpus")
            else "manifest:host.host_cpus")
    hz, hz_source = recorded_hz(run_dir, manifest)
    if hz is None:
        hz_status = "unknown"
        notes.append(HZ_UNKNOWN_NOTE)
    else:
        hz_status = "recorded" if hz_source.startswith("manifest:") else "evidence"
        put("host.hz", hz, hz_source)

    if scenario["workload.kind"] in REQUEST_KINDS:
        put("run.request_batching", False, "model:reference-path")
    scrape = recorded_scrape_interval_s(manifest, scenario)
    if scrape is not None:
        put("workload.scrape_interval_s", scrape,
            "manifest:processes.prometheus.targets.workload,scenario:lab.scrape_interval_s")

    if (manifest.get("live_heap_nodes") or 0) > 0:
        # the lab's workload said, ready before its load, how many nodes of live heap it had built
        put("go.heap_built_at_start", True, "manifest:live_heap_nodes")
    buckets = recorded_latency_buckets_s(manifest)
    if buckets is not None:
        put("run.latency_buckets_s", buckets, "lab:latency-bucket-layout")

    contention = "unknown"
    if "host.background_cores" not in given:
        staged = scenario.with_overrides([(i.key, i.value) for i in inputs]) if inputs else scenario
        found = neighbour_inputs(manifest, staged, predicted_client_cores(staged))
        if found is not None:
            neighbours, workload_shares, sources = found
            cpus = int(staged["host.cpus"])
            bg = neighbour_background_cores(cpus, workload_shares, _predicted_reach_cores(staged), neighbours,
                                            workload_cpus=min(cpus, _scenario_gomaxprocs(staged)))
            contention = "modelled"
            put("host.background_cores", bg, "neighbours:" + ",".join(sources))
        else:
            notes.append("no independent measurement of other processes: no contention input")
    else:
        contention = "modelled"

    vpa_loop = bool(scenario["lab.vpa_in_the_loop"])
    if vpa_loop:
        notes.append("hardware in the loop: cfsim's recommender and updater act on the simulated quota; "
                     "the recorded quota writes are compared, not replayed")
    if inputs:
        scenario = scenario.with_overrides([(i.key, i.value) for i in inputs])
    return TwinSpec(run_dir, scenario, tuple(inputs), hz_status, contention, vpa_loop, notes)


def twin(run_dir: Path, params: Mapping[str, Any] | None = None) -> SimulationResult:
    """Simulate the run's twin (:func:`twin_spec`) with optional ``params`` (``section.key`` -> value)."""
    return simulate(twin_spec(run_dir, params).scenario)
