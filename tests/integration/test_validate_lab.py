"""End to end: validate committed lab runs against their simulated twins, in every regime.

A regression guard: the bounds are the errors these runs reached when the check was written
(rounded up), so a change to the model that makes them worse fails here. The runs cover every
regime (``cfsim.validation.regimes``), not only the capped ones where any model that knows the cap
agrees: the uncapped and contended runs are where the model predicts, and their bounds are wide
because the model is off there (the first grids' contended twins get no contention input: none
was measured independently of the workload for those runs; the GC/memory and overprovisioned
grids' twins model their neighbours from ``pre_run.tenants_cores`` and ``pre_run.harness_cores``). Bounds
re-set on 2026-11-23 after the merge of the Go runtime overheads (request path, scheduler costs):
``sched-overhead`` p003's CPU error moved from 0.03 to 0.12.
"""
from pathlib import Path

import pytest

from cfsim.validation import validate

LAB = Path(__file__).resolve().parents[2] / "data" / "lab"

# (grid, run) -> (regime, {metric: bound on |error|}); relative errors for rates, absolute for ratios
CASES = {
    # uncapped: the model's own prediction
    # (overheads merge: sysmon polls and 6 us wake-ups, fitted on the profiles grid, raise this
    # GOMAXPROCS-8 point's CPU error from <= 13 % to +14.4 %: a worsening, reported as such)
    # (each twin calibrated only by the calibration run recorded before it, the default since
    # 2026-12-04: this run's CPU error +9.6 -> +19.7 %, its grid's closing calibration run no longer
    # averaged in: a worsening of the figure, not of the model, reported as such)
    ("sched-overhead", "p003_gomaxprocs=8"): ("uncapped", {
        "throughput_per_s": 0.02, "cpu_usage_cores": 0.21, "throttled_ratio": 0.01, "gomaxprocs": 0.0}),
    # (overheads merge: throttled ratio 0.000 -> 0.015 against 0.000 measured: a worsening;
    # gcmem: -5.3 % throughput since the allocation path's CPU (mallocgc per KiB, page faults) is charged)
    # (the scavenger paced by its measured CPU, 2026-11-26: throttled ratio 0.020 -> 0.025 against 0.000
    # measured, one more of 200 periods; p99 +4.0 -> +5.0 %; memory 10.0 -> 9.7 %)
    # (the GC's own speed from the grid's calibration runs, 2026-11-26: GC factor 0.60 against the
    # default scan prior, the records 0.88; p99 -1.5 -> -15.5 %, GC share +0.014 -> -0.015; with the
    # lab host's parameter files p99 -6.7 -> -11.8 %: a worsening)
    # (each twin's items at its run's start-up loop rounds, 2026-11-27: this run measured 0.91x its
    # calibration runs' rounds and the twin now does 0.91x the loop per request; the lab's CPU per
    # request did not follow: throughput -1.0 -> +2.8 %, p99 -11.8 -> -21.0 %: a worsening)
    # the twin runs its one P's thread at the whole 1-core quota (lab 0.93 cores), where whether a
    # period counts as throttled hinges on sub-millisecond timing: 0.02 of them before 2026-11-28,
    # 0.105 once a fractional worker leaves by the clock (docs/model-notes.md, "A thread the quota
    # froze"), which moves those timings; the lab 0
    ("overprovisioned", "p007_cpu_limit=1.0_gomaxprocs=1"): ("uncapped", {
        "throughput_per_s": 0.06, "cpu_usage_cores": 0.08, "throttled_ratio": 0.12, "gomaxprocs": 0.0,
        "gc_cpu_share": 0.05, "latency_p99_s": 0.23}),
    ("quota-steps-from-1.2", "p001_gomaxprocs=go1.25"): ("uncapped", {
        "throughput_per_s": 0.02, "cpu_usage_cores": 0.11, "throttled_ratio": 0.25, "gomaxprocs": 0.0}),
    # contended: other processes took CPU on a saturated host; the twin does not know how much
    ("cpu-stream", "p041_cpu_limit=2.0_gomaxprocs=2"): ("contended", {
        "throughput_per_s": 0.01, "cpu_usage_cores": 0.13, "throttled_ratio": 0.01, "gomaxprocs": 0.0}),
    # (gcmem + overheads together: throttled ratio +0.064, was within 0.06: a worsening)
    # (the scrape's pooled gzip writer on each of its 4 Ps, 2026-11-30: +0.064 -> +0.076, the twin
    # throttled in a few more of its periods against the lab's none: a worsening)
    ("alloc-stream", "p042_cpu_limit=2.0_gomaxprocs=4"): ("contended", {
        "throughput_per_s": 0.26, "cpu_usage_cores": 0.19, "throttled_ratio": 0.08, "gomaxprocs": 0.0,
        "gc_cpu_share": 0.04}),
    # contended, with the neighbours measured apart from the workload (pre-run tenants, harness)
    # with the default scan-rate prior (no cache-miss factor) +22 %, +34 % since a fractional mark worker
    # takes a P only at a scheduling point (2026-11-26: the prior's slow marking no longer takes the
    # mutator's time through a fractional worker at every chunk); with docs/params/gc-memory.toml +0.3 %
    # (gcmem + overheads together: CPU +2.1 %, was within 1 %, GC share +0.069, was within 0.06, p99 -17 %, was within 15 %: worsenings)
    # (the GC's own speed from the grid's calibration runs, 2026-11-26: they mark a 16 MiB heap 2x
    # faster than the default prior, and without a cache-miss factor (default off) that speed
    # carries to this 256 MiB heap: GC share +0.013 -> -0.133, throughput +32.6 -> +35.4 %; with
    # docs/params/gc-memory.toml share +0.043 -> +0.089, throughput +0.3 -> -6.5 %: a worsening)
    # (each twin's items at its run's start-up loop rounds, 2026-11-27: 1.055x the calibration runs'
    # here; throughput +35.4 -> +31.9 %, p99 -25.3 -> -23.0 %, GC share -0.133 -> -0.145: a worsening)
    ("gc-memory", "p027_a-cpu_cpu_limit=2.0_live_heap_mb=256"): ("contended", {
        "throughput_per_s": 0.37, "cpu_usage_cores": 0.11, "throttled_ratio": 0.01, "gomaxprocs": 0.0,
        "gc_cpu_share": 0.16, "latency_p99_s": 0.26}),   # p99 -17 -> -25 % on 2026-11-26 (same cause)
    # GC share -0.145 -> -0.153 on 2026-11-28: its fractional worker, sharing CPUs with the tenants,
    # leaves by the clock
    # (tenants without a task count weigh a task a core, 2026-12-02: its 1.98 cores of tenants take
    # more of the host from the twin; CPU +0.0 -> -10.1 %, 1.597 against the lab's 1.776 cores, while
    # throughput +9.1 -> -2.2 %: a worsening of the CPU, reported as such)
    # capped: the quota or GOMAXPROCS decides the CPU
    ("closed-menu", "p010_cpu_limit=0.5_gomaxprocs=1"): ("quota-capped", {
        "throughput_per_s": 0.03, "cpu_usage_cores": 0.01, "throttled_ratio": 0.01, "gomaxprocs": 0.0,
        "gc_cpu_share": 0.01, "latency_p50_s": 0.08, "latency_p99_s": 0.30}),
    # (each twin's items at its run's start-up loop rounds, 2026-11-27: 0.885x the calibration runs'
    # here; throughput -7.3 -> +3.1 %, and the p99 of its growing backlog -4.7 -> -19.3 %: the twin's
    # backlog now grows slower than the lab's, which fell behind faster than its rounds say)
    ("alloc-stream", "p021_cpu_limit=1.25_gomaxprocs=2"): ("quota-capped", {
        "throughput_per_s": 0.09, "cpu_usage_cores": 0.01, "throttled_ratio": 0.01, "gomaxprocs": 0.0,
        "gc_cpu_share": 0.06, "latency_p50_s": 0.15, "latency_p99_s": 0.21}),
    ("cpu-stream", "p035_cpu_limit=1.94_gomaxprocs=1"): ("gomaxprocs-capped", {  # the trapped point
        "throughput_per_s": 0.07, "cpu_usage_cores": 0.01, "throttled_ratio": 0.01, "gomaxprocs": 0.0,
        "latency_p50_s": 0.10, "latency_p99_s": 0.25, "lag_final_s": 0.10}),
}


@pytest.mark.parametrize("grid, run", list(CASES))
def test_committed_lab_run_stays_within_reached_errors(grid, run):
    folder = LAB / grid / run
    if not folder.is_dir():
        pytest.skip(f"{folder} is not in this checkout (data/lab comes from the lab)")
    report = validate(LAB / grid, only=[folder])
    assert len(report.runs) == 1
    row = report.runs[0]
    regime, bounds = CASES[(grid, run)]
    assert row["regime"] == regime
    neighbours_measured = grid in ("gc-memory", "overprovisioned", "profiles")
    assert row["held_out"] and row["twin"]["host.hz"] == 250
    assert row["twin"]["contention"] == ("modelled" if neighbours_measured else "unknown")
    errors = row["errors"]
    for metric, bound in bounds.items():
        assert errors[metric] is not None, f"{metric}: no value to compare"
        assert abs(errors[metric]) <= bound, f"{run} {metric}: error {errors[metric]:+.4f} beyond {bound}"
    # the grid's table reports the calibration runs the twin took, and only those (one run of a
    # grid validated simulates no other calibration run)
    assert sorted(report.grids[grid]["calibration_factors"]) == sorted(row["calibrated_by"]) != []
    # and the report is per regime, with n
    assert report.regime_counts[regime] == 1 and set(report.headline) == {"uncapped", "contended"}


def test_hardware_in_the_loop_twin_runs_its_own_vpa_and_follows_the_trajectory():
    """cfsim's VPA resized the real quota five times during this run. The twin is not given those
    writes: it runs the same recommender and updater on the simulated cgroup, and the two
    trajectories are compared (reached when written: 5 resizes each, the same final limit, each
    resize within 13 s and 7 % of the lab's; the twin resizes earlier and lower, its usage samples
    are the engine's)."""
    folder = LAB / "vpa-in-the-loop" / "run-automaxprocs"
    if not folder.is_dir():
        pytest.skip(f"{folder} is not in this checkout (data/lab comes from the lab)")
    row = validate(folder).runs[0]
    assert row["twin"]["vpa_in_the_loop"] and row["scenario"]["cgroup.limit_schedule"] is None
    assert not any(i["key"] == "cgroup.limit_schedule" for i in row["twin"]["inputs"])
    t = row["trajectory"]
    assert t["resizes_lab"] == t["resizes_sim"] == 5
    assert t["final_limit_sim_cores"] == pytest.approx(t["final_limit_lab_cores"], abs=0.002)
    for step in t["steps"]:
        assert abs(step["dt_s"]) <= 13.0
        assert abs(step["limit_error"]) <= 0.07
    errors = row["errors"]
    assert row["regime"] == "gomaxprocs-capped" and errors["gomaxprocs"] == 0.0
    assert abs(errors["cpu_usage_cores"]) <= 0.01
    assert abs(errors["throttled_ratio"]) <= 0.07


def test_oom_killed_runs_are_their_own_regime_outside_every_error_table():
    grid, run = "gc-memory", "p058_c16_memory_limit_mb=40_gomemlimit_policy=explicit"
    folder = LAB / grid / run
    if not folder.is_dir():
        pytest.skip(f"{folder} is not in this checkout (data/lab comes from the lab)")
    other = LAB / grid / "p027_a-cpu_cpu_limit=2.0_live_heap_mb=256"
    report = validate(LAB / grid, only=[folder, other])
    rows = {r["run"].rsplit("/", 1)[-1]: r for r in report.runs}
    assert rows[run]["regime"] == "oom-killed"  # killed 0.1 s in: its usage says when it died
    assert report.regime_counts["oom-killed"] == 1 and "oom-killed" not in report.headline
    # the overall error table holds the other run only
    assert all(e["n"] == 1 for e in report.errors.values())
    assert report.errors["cpu_usage_cores"]["worst_run"].endswith(other.name)
