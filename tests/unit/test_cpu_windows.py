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
