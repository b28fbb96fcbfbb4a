"""VPA and krr peer rules on hand-made usage (cfsim.advice.peers)."""
import math

import numpy as np
import pandas as pd
import pytest

from cfsim.advice.peers import (KRR_CPU_MIN_CORES, krr_percentile, krr_simple, krr_simple_limit, usage_windows,
                                vpa_choice)
from cfsim.scenario import load_scenario


def _bucket_end(v, first=0.01, ratio=1.05):
    """End of the VPA CPU histogram bucket holding v (VPA ``pkg/recommender/util/histogram_options.go``),
    computed independently."""
    n = math.floor(math.log(v * (ratio - 1) / first + 1, ratio))
    return first * (ratio ** (n + 1) - 1) / (ratio - 1)


def _points(values, step=15.0):
    return [(1_767_225_600.0 + step * (i + 1), v) for i, v in enumerate(values)]


def test_krr_simple_is_p95_without_limit():
    usage = [0.1 * i for i in range(1, 21)]          # 0.1 .. 2.0
    req, lim = krr_simple(usage)
    assert lim is None
    assert req == pytest.approx(np.quantile(usage, 0.95), abs=1e-3)   # 1.905
    assert req == pytest.approx(1.905, abs=1e-3)


def test_krr_simple_limit_is_p66_p96():
    usage = [i / 100 for i in range(101)]             # 0.00 .. 1.00: quantile q = q
    req, lim = krr_simple_limit(usage)
    assert (req, lim) == (0.66, 0.96)


def test_krr_minimum_and_linear_quantile():
    assert krr_simple([0.0, 0.001, 0.002])[0] == KRR_CPU_MIN_CORES
    assert krr_percentile([1.0, 2.0], 0.5) == 1.5      # quantile_over_time interpolates linearly


def test_vpa_pinned_usage_gives_the_trap_target():
    """Usage pinned at 1.0 core (GOMAXPROCS 1): target = bucket end x 1.15 = 1.168 cores
    (docs/model-notes.md, the VPA and automaxprocs fixed point)."""
    sc = load_scenario({"vpa": {"limit_to_request_ratio": 1.0}})
    v = vpa_choice(_points([1.0] * 40), sc)
    p90_m = int(_bucket_end(1.0) * 1000)
    expected = p90_m + int(p90_m * 0.15)
    assert v["target_m"] == expected == 1168
    assert v["request_m"] == v["limit_m"] == 1168
    # automaxprocs at 1.168 cores floors to GOMAXPROCS 1 again: the fixed point
    assert math.floor(v["limit_m"] / 1000) == 1


def test_vpa_percentile_ratio_and_integer_cpu():
    usage = [0.5] * 30 + [1.5] * 10                    # P90 lands on 1.5
    sc = load_scenario({"vpa": {"limit_to_request_ratio": 2.0}})
    v = vpa_choice(_points(usage), sc)
    p90_m = int(_bucket_end(1.5) * 1000)
    assert v["target_m"] == p90_m + int(p90_m * 0.15)
    assert v["limit_m"] == 2 * v["request_m"]
    sc_int = load_scenario({"vpa": {"integer_cpu": True}})
    assert vpa_choice(_points(usage), sc_int)["request_m"] == 2000   # ceil to whole cores
    sc_none = load_scenario({"vpa": {"limit_to_request_ratio": None}})
    assert vpa_choice(_points(usage), sc_none)["limit_m"] is None


def test_usage_windows_from_cumulative_counter():
    t = np.arange(0, 31, 1.0)
    s = pd.DataFrame({"t_s": t, "container_cpu_usage_seconds_total": 1.5 * t})
    w = usage_windows(s, 10.0)
    assert [round(c, 9) for _, c in w] == [1.5, 1.5, 1.5]
    assert [e for e, _ in w] == [10.0, 20.0, 30.0]
    assert len(usage_windows(s, 10.0, t0_s=5.0)) == 2
