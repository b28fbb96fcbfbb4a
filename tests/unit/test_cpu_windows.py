"""The CPU's spread from one ~0.1 s to the next, read the same way from lab samples and model periods."""
from __future__ import annotations

import numpy as np
import pytest

from cfsim.kernel.cpu_windows import CPU_WINDOW_KEYS, window_keys, window_keys_from_periods


def test_lab_samples_and_model_periods_give_the_same_keys_for_the_same_cpu():
    rng = np.random.default_rng(3)
    per_period_s = 0.045 + 0.004 * rng.standard_normal(60)
    ends = 0.1 * np.arange(1, 61)
    # the lab reads cumulative usage at the window's ticks; the model lists each period's usage
    lab = window_keys(np.concatenate([[0.0], ends]), np.concatenate([[0.0], np.cumsum(per_period_s)]))
    # (a period's length is the gap to the one before: the model passes the period that ended at t0 too)
    model = window_keys_from_periods(np.concatenate([[0.0], ends]), np.concatenate([[0.0], per_period_s]), 0.0, 6.0)
    for k in CPU_WINDOW_KEYS:
        assert lab[k] == pytest.approx(model[k]), k
    assert lab["cpu_window_spread_cores"] == pytest.approx(
        np.percentile(per_period_s / 0.1, 90) - np.percentile(per_period_s / 0.1, 10))


def test_a_drifting_cpu_is_correlated_from_window_to_window_and_a_jittering_one_is_not():
    rng = np.random.default_rng(7)
    x = np.zeros(400)
    for i in range(1, 400):
        x[i] = 0.8 * x[i - 1] + rng.standard_normal()
    t = 0.1 * np.arange(401)
    drift = window_keys(t, np.concatenate([[0.0], np.cumsum(0.045 + 0.001 * x)]))
    jitter = window_keys(t, np.concatenate([[0.0], np.cumsum(0.045 + 0.001 * rng.standard_normal(400))]))
    assert drift["cpu_window_autocorr"] > 0.6 and abs(jitter["cpu_window_autocorr"]) < 0.15


def test_too_few_windows_or_mismatched_columns():
    assert all(v is None for v in window_keys([0.0, 0.1, 0.2], [0.0, 0.04, 0.09]).values())
    assert all(v is None for v in window_keys_from_periods([], [], 0.0, 1.0).values())
    with pytest.raises(ValueError, match="differ in length"):
        window_keys([0.0, 0.1], [0.0])


def test_a_drifting_request_cost_spreads_and_correlates_the_periods_and_throttles_more_below_the_limit():
    """workload.cpu_drift_cv: with every request costing the same, fixed arrivals use the same CPU in
    every period and a group at ~95 % of its quota is throttled only where a GC cycle or
    a scrape adds to a period; a common factor that drifts
    (as the lab's requests do, open-spread) spreads the periods, correlates neighbours, and throttles
    the periods it pushes over the quota. A model of the mean (min(demand, limit)) has no periods."""
    from cfsim.simulation import simulate

    raw = {"host": {"cpus": 2}, "cgroup": {"cpu_limit": 0.5},
           "go": {"gomaxprocs": 1, "live_heap_mb": 16},
           "workload": {"kind": "open", "rate_per_s": 950, "arrivals": "fixed", "cpu_ms_per_request": 0.4,
                        "alloc_kb_per_request": 2},
           "run": {"duration_s": 12, "warmup_s": 2, "seed": 4}}
    flat = simulate(raw).summary
    drift = simulate(raw, ["workload.cpu_drift_cv=0.05", "workload.cpu_drift_tau_s=0.3"]).summary
    again = simulate(raw, ["workload.cpu_drift_cv=0.05", "workload.cpu_drift_tau_s=0.3"]).summary
    assert drift == again                                    # deterministic
    assert drift["cpu_usage_cores"] == pytest.approx(flat["cpu_usage_cores"], rel=0.03)
    # (measured: spread 0.025 -> 0.050 cores, correlation 0.50 -> 0.69, throttled 0.10 -> 0.14)
    assert drift["cpu_window_spread_cores"] > 1.6 * flat["cpu_window_spread_cores"]
    assert drift["cpu_window_autocorr"] > flat["cpu_window_autocorr"] + 0.1
    assert drift["throttled_ratio"] > flat["throttled_ratio"] + 0.02
