"""HPA rules (kubernetes/kubernetes ``pkg/controller/podautoscaler/replica_calculator.go``,
``horizontal.go``): ratio, tolerance, int-percent utilisation relative to
requests, stabilisation windows, scale policies, min/max."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cfsim.autoscalers.hpa import (DEFAULT_SCALE_DOWN, DEFAULT_SCALE_UP, HpaState, PodMetric, ScalingPolicy,
                                   ScalingRules, Tolerance, desired_replicas, legacy_normalize, limit_rate,
                                   reconcile, stabilize, utilization_pct)

NOW = 10_000.0


def pods(n, usage_m, request_m):
    return [PodMetric(request_m=request_m, usage_m=usage_m, start_s=0.0, ready_transition_s=10.0,
                      metric_timestamp_s=NOW) for _ in range(n)]


def test_utilization_is_int_percent_of_requests():
    assert utilization_pct(1000, 1168) == 85           # 85.6 truncated
    assert utilization_pct(2000, 2336) == 85
    with pytest.raises(ValueError):
        utilization_pct(1000, 0)


def test_tolerance_keeps_count():
    # usage 1.0 of request 1.168: 85 % / 80 % = 1.0625 <= 1.1 -> no change (the trap's HPA)
    assert desired_replicas(pods(2, 1000, 1168), 80, 2, NOW) == (2, 85)
    # exactly at the edge: 88 / 80 = 1.1 -> within
    assert desired_replicas(pods(2, 880, 1000), 80, 2, NOW)[0] == 2
    # 89 / 80 = 1.1125 -> ceil(1.1125 * 2) = 3
    assert desired_replicas(pods(2, 890, 1000), 80, 2, NOW)[0] == 3


def test_ratio_scale_up_and_down():
    assert desired_replicas(pods(2, 1000, 1168), 70, 2, NOW)[0] == 3      # 85/70 * 2 = 2.43 -> 3
    assert desired_replicas(pods(4, 200, 1000), 80, 4, NOW)[0] == 1       # 20/80 * 4 = 1.0


def test_separate_tolerances():
    assert desired_replicas(pods(2, 850, 1000), 80, 2, NOW, Tolerance(down=0.1, up=0.05))[0] == 3


def test_missing_metrics_filled_pessimistically():
    ps = pods(2, 1000, 1000) + [PodMetric(request_m=1000, usage_m=None)]
    # ratio 100/50 = 2 > 1: missing pod counted at 0 -> util 66 % -> 1.32 -> ceil(3.96) = 4
    assert desired_replicas(ps, 50, 3, NOW)[0] == 4
    # scale-down: missing pod counted at its request -> 3 pods at (200+200+1000)/3000 = 46 % / 80 %
    ps = pods(2, 200, 1000) + [PodMetric(request_m=1000, usage_m=None)]
    assert desired_replicas(ps, 80, 3, NOW)[0] == 2        # ceil(0.575 * 3) = ceil(1.725) = 2


def test_unready_pods_ignored_on_scale_up():
    fresh = PodMetric(request_m=1000, usage_m=0, ready=False, start_s=NOW - 60, ready_transition_s=NOW - 60)
    ps = pods(2, 1000, 1000) + [fresh]
    # ready pods at 100 % / 50 % = 2 -> with the unready pod at 0: 66 % -> 1.32 -> ceil(3.96) = 4
    assert desired_replicas(ps, 50, 3, NOW)[0] == 4


def test_scale_down_stabilisation_window():
    st_ = HpaState()
    assert stabilize(st_, 0.0, 5, 5, DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN) == 5
    assert stabilize(st_, 100.0, 3, 5, DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN) == 5   # max over 300 s
    assert stabilize(st_, 301.0, 3, 5, DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN) == 3   # the 5 left the window


def test_scale_up_stabilisation_window():
    up = ScalingRules(60.0, DEFAULT_SCALE_UP.policies)
    st_ = HpaState()
    assert stabilize(st_, 0.0, 2, 2, up, DEFAULT_SCALE_DOWN) == 2
    assert stabilize(st_, 30.0, 6, 2, up, DEFAULT_SCALE_DOWN) == 2     # min over the last 60 s
    assert stabilize(st_, 61.0, 6, 2, up, DEFAULT_SCALE_DOWN) == 6


def test_scale_up_policies():
    st_ = HpaState()
    # from 2: Pods +4 -> 6, Percent 100 -> 4; selectPolicy Max -> 6
    assert limit_rate(st_, 0.0, 20, 2, 1, 100, DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN) == 6
    st_.scale_up_events.append((0.0, 4))
    # 10 s later, same 15 s period: period start 6 - 4 = 2 -> limit still 6
    assert limit_rate(st_, 10.0, 20, 6, 1, 100, DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN) == 6
    # Min policy: min(2 + 4, ceil(2 * 2)) = 4
    mn = ScalingRules(0.0, DEFAULT_SCALE_UP.policies, "Min")
    assert limit_rate(HpaState(), 0.0, 20, 2, 1, 100, mn, DEFAULT_SCALE_DOWN) == 4
    off = ScalingRules(0.0, DEFAULT_SCALE_UP.policies, "Disabled")
    assert limit_rate(HpaState(), 0.0, 20, 2, 1, 100, off, DEFAULT_SCALE_DOWN) == 2


def test_scale_down_policies_and_bounds():
    half = ScalingRules(0.0, (ScalingPolicy("Percent", 50, 60.0),))
    assert limit_rate(HpaState(), 0.0, 1, 9, 1, 100, DEFAULT_SCALE_UP, half) == 4      # int(9 * 0.5)
    assert limit_rate(HpaState(), 0.0, 1, 10, 3, 100, DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN) == 3  # minReplicas
    assert limit_rate(HpaState(), 0.0, 50, 10, 1, 12, DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN) == 12  # maxReplicas


def test_legacy_normalisation():
    st_ = HpaState()
    assert legacy_normalize(st_, 0.0, 50, 3, 1, 100) == 6            # max(2 * 3, 4)
    assert legacy_normalize(st_, 15.0, 2, 6, 1, 100) == 12           # max over 5 min is 50, limit 12
    assert legacy_normalize(HpaState(), 0.0, 50, 1, 1, 100) == 4


def test_reconcile_records_events():
    st_ = HpaState()
    n, util = reconcile(st_, 0.0, pods(2, 1000, 1000), 2, 50, 1, 10)
    assert (n, util) == (4, 100)        # ratio 2 -> ceil(4) = 4, within Pods +4 / Percent 100
    assert st_.scale_up_events == [(0.0, 2)]
    assert reconcile(st_, 15.0, pods(4, 1000, 1000), 12, 50, 1, 10)[0] == 10   # above max: clamp


@given(st.integers(1, 20), st.integers(0, 4000), st.integers(1, 4000), st.integers(1, 200))
def test_within_tolerance_keeps_current(n, usage, request, target):
    new, util = desired_replicas(pods(n, usage, request), target, n, NOW)
    if abs(1 - util / target) <= 0.1:
        assert new == n
    elif util > target:
        assert new >= n
    else:
        assert new <= n
