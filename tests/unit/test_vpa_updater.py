"""VPA updater and admission rules (kubernetes/autoscaler ``vertical-pod-autoscaler/pkg/updater/``,
``pkg/utils/vpa/limit_and_request_scaling.go``), hand-computed vectors."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cfsim.autoscalers.vpa_admission import (REQUESTS_AND_LIMITS, REQUESTS_ONLY, Resources, admit,
                                             capped_recommendation, proportional_limit_m)
from cfsim.autoscalers.vpa_recommender import Recommendation
from cfsim.autoscalers.vpa_updater import (Priority, can_evict, candidate_order_key, eviction_tolerance_count,
                                           group_eligible, is_update_candidate, quick_oom, update_priority)

H = 3600.0
REC = Recommendation(target=1168, lower_bound=1100, upper_bound=2000, uncapped_target=1168)


# ---- admission: proportional limits, RequestsOnly ----------------------------------------------
@pytest.mark.parametrize("orig_req, orig_lim, new_req, expect", [
    (500, 1000, 700, 1400),          # ratio 2 kept
    (300, 1000, 1000, 3333),         # floor(1000 * 1000 / 300) = floor(3333.3)
    (1000, 1000, 1168, 1168),        # request == limit stays Guaranteed-style
    (None, 1000, 1168, 1168),        # no original request: limit = new request
    (500, None, 1168, None),         # no limit: none set
    (500, 1000, 0, None),            # zero request: no limit
    (3, 7, 5, 11),                   # floor(35 / 3) = 11
])
def test_proportional_limit(orig_req, orig_lim, new_req, expect):
    assert proportional_limit_m(orig_req, orig_lim, new_req) == expect


def test_admit_requests_and_limits():
    res = admit(REC, REQUESTS_AND_LIMITS, Resources(500, 1000))
    assert res == Resources(1168, 2336)
    res = admit(REC, REQUESTS_AND_LIMITS, Resources(500, 500), min_allowed_m=2000)
    assert res == Resources(2000, 2000)
    assert admit(None, REQUESTS_AND_LIMITS, Resources(500, 500)) == Resources(500, 500)


def test_admit_requests_only_caps_to_current_limit():
    res = admit(REC, REQUESTS_ONLY, Resources(500, 1000))
    assert res == Resources(1000, 1000)          # 1168 capped to the limit; limit untouched
    res = admit(REC, REQUESTS_ONLY, Resources(500, 4000))
    assert res == Resources(1168, 4000)
    capped = capped_recommendation(REC, REQUESTS_ONLY, 1000)
    assert (capped.target, capped.lower_bound, capped.upper_bound) == (1000, 1000, 1000)


@given(st.integers(1, 10 ** 6), st.integers(1, 10 ** 6), st.integers(1, 10 ** 6))
def test_proportional_limit_keeps_ratio_with_floor(req, lim, new):
    out = proportional_limit_m(req, lim, new)
    if req == lim:
        assert out == new
    else:
        assert out * req <= lim * new < (out + 1) * req


# ---- updater: priority and candidate rules -----------------------------------------------------
def test_priority_outside_and_diff():
    p = update_priority(1000, REC)
    assert p.outside_recommended_range and p.scale_up
    assert p.resource_diff == pytest.approx(0.168)
    p = update_priority(2500, REC)
    assert p.outside_recommended_range and not p.scale_up
    p = update_priority(1168, REC)
    assert not p.outside_recommended_range and p.resource_diff == 0


def test_in_bounds_needs_12h_and_10_percent():
    inside = Priority(False, False, 0.15)
    assert not is_update_candidate(inside, 11.99 * H)
    assert is_update_candidate(inside, 12 * H)
    assert not is_update_candidate(Priority(False, False, 0.0999), 13 * H)
    assert is_update_candidate(Priority(False, False, 0.10), 13 * H)
    assert not is_update_candidate(inside, None)


def test_out_of_bounds_is_immediate():
    assert is_update_candidate(Priority(True, True, 0.01), 0.0)


def test_quick_oom_rule():
    assert quick_oom(True, 300.0) and not quick_oom(True, 700.0) and not quick_oom(False, 1.0)
    assert is_update_candidate(Priority(False, True, 0.05), 60.0, quick_oomed=True)
    assert not is_update_candidate(Priority(False, False, 0.0), 60.0, quick_oomed=True)


def test_scale_ups_first_then_larger_diff():
    prios = [Priority(False, False, 0.5), Priority(True, True, 0.2), Priority(False, True, 0.3)]
    ordered = sorted(prios, key=candidate_order_key)
    assert ordered == [prios[2], prios[1], prios[0]]


# ---- min replicas and the disruption budget ----------------------------------------------------
def test_min_replicas():
    assert not group_eligible(1) and group_eligible(2)
    assert group_eligible(1, min_replicas=1)


@pytest.mark.parametrize("replicas, allowed", [(2, 1), (3, 1), (4, 2), (10, 5)])
def test_eviction_tolerance(replicas, allowed):
    assert eviction_tolerance_count(replicas) == replicas // 2
    n = 0
    while can_evict(replicas, replicas, n):
        n += 1
    assert n == allowed


def test_single_replica_never_evicted_by_default():
    assert not can_evict(1, 1, 0)
    assert can_evict(1, 1, 0, min_replicas=1)       # tolerance 0 and nothing evicted yet
    assert not can_evict(1, 1, 1, min_replicas=1)
    assert can_evict(2, 1, 0, pending=True)


# ---- the controller: recommender + updater + admission driven by any clock ---------------------
def test_controller_evicts_below_lower_bound_one_per_loop():
    from cfsim.autoscalers.vpa_controller import PodView, VpaController

    vpa = VpaController(template=Resources(500, 500))
    pods = [PodView("a", 500, 500, 0.0), PodView("b", 500, 500, 0.0)]
    t = 0.0
    for i in range(30):                        # 30 min of 1.0-core samples from both pods
        t = 60.0 * i
        vpa.recommender_loop(t, {"a": (t, 1.0), "b": (t, 1.0)})
    assert vpa.recommendation.target == 1168
    acts = vpa.updater_loop(t, pods, 2)
    assert [a.kind for a in acts] == ["evict"]             # the budget of 2 replicas: one per loop
    assert acts[0].reason == "below lower bound"
    assert acts[0].resources == Resources(1168, 1168)
    assert vpa.admit() == Resources(1168, 1168)
    assert vpa.updater_loop(t, pods[:1], 2) == []          # fewer live pods than minReplicas


def test_controller_in_place_and_strictly_later():
    from cfsim.autoscalers.vpa_controller import PodView, VpaController

    vpa = VpaController(template=Resources(500, 1000), update_mode="InPlaceOrRecreate", min_replicas=1)
    for i in range(30):
        vpa.recommender_loop(60.0 * i, {"a": (0.0, 1.0)})   # a stale point: kept once
    assert vpa.state.total_samples == 1
    vpa2 = VpaController(template=Resources(500, 1000), update_mode="InPlaceOrRecreate", min_replicas=1)
    for i in range(30):
        vpa2.recommender_loop(60.0 * i, {"a": (60.0 * i, 1.0)})
    acts = vpa2.updater_loop(1800.0, [PodView("a", 500, 1000, 0.0)], 1)
    assert acts[0].kind == "resize" and acts[0].resources == Resources(1168, 2336)
