"""The VPA decaying exponential histogram, against vectors computed by hand from the rules
(kubernetes/autoscaler ``vertical-pod-autoscaler/pkg/recommender/util/histogram.go``,
``decaying_histogram.go``)."""
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cfsim.autoscalers.vpa_histogram import (CPU_HISTOGRAM_OPTIONS, DecayingHistogram, Histogram,
                                             HistogramOptions, round_to_multiple_s)

O = CPU_HISTOGRAM_OPTIONS
DAY = 86400.0
MIDNIGHT = 1767225600.0  # 2026-01-01T00:00:00Z


def start(n):  # by hand: first * (1.05**n - 1) / 0.05
    return 0.0 if n == 0 else 0.01 * (1.05 ** n - 1) / 0.05


def test_bucket_count_is_176():
    # ceil(log_1.05(1000 * 0.05 / 0.01 + 1)) + 1 = ceil(log(5001)/log(1.05)) + 1 = ceil(174.58) + 1
    assert O.num_buckets == 176
    assert math.ceil(math.log(5001) / math.log(1.05)) + 1 == 176


@pytest.mark.parametrize("n, edge", [(0, 0.0), (1, 0.01), (2, 0.0205), (3, 0.031525)])
def test_bucket_edges_small(n, edge):
    assert O.bucket_start(n) == pytest.approx(edge, rel=1e-12)


def test_bucket_edges_large():
    assert O.bucket_start(37) == pytest.approx(0.2 * (1.05 ** 37 - 1), rel=1e-12)
    assert O.bucket_start(37) == pytest.approx(1.01628, abs=1e-5)
    assert O.bucket_start(175) == pytest.approx(0.2 * (1.05 ** 175 - 1), rel=1e-12)
    assert O.bucket_start(175) > 1000.0 > O.bucket_start(174)


@pytest.mark.parametrize("value, bucket", [(0.0, 0), (0.0099, 0), (0.01, 1), (0.5, 25), (1.0, 36), (1.7, 46),
                                           (2.0, 49), (999.0, 174), (1e6, 175)])
def test_find_bucket(value, bucket):
    assert O.find_bucket(value) == bucket
    if bucket < 175:
        assert O.bucket_start(bucket) <= value < O.bucket_start(bucket + 1) or value < 0.01


def test_percentile_is_bucket_upper_edge():
    h = Histogram()
    h.add(1.0, 0.1)
    for p in (0.0, 0.5, 0.9, 0.95, 1.0):
        assert h.percentile(p) == pytest.approx(start(37))


def test_percentile_walk_by_weight():
    h = Histogram()
    for _ in range(3):
        h.add(0.5, 0.1)     # bucket 25
    h.add(1.0, 0.1)         # bucket 36
    # running weight reaches 0.3 >= 0.5 * 0.4 in bucket 25
    assert h.percentile(0.5) == pytest.approx(start(26))
    assert h.percentile(0.75) == pytest.approx(start(26))   # 0.3 >= 0.3
    assert h.percentile(0.76) == pytest.approx(start(37))
    assert h.percentile(0.9) == pytest.approx(start(37))


def test_last_bucket_returns_its_start():
    h = Histogram()
    h.add(5000.0, 1.0)
    assert h.percentile(0.5) == pytest.approx(start(175))


def test_empty_histogram_percentile_zero():
    assert Histogram().percentile(0.9) == 0.0
    assert Histogram().is_empty()


def test_epsilon_threshold():
    h = Histogram()
    h.add(1.0, 5e-5)            # below epsilon 1e-4: does not count
    assert h.is_empty() and h.percentile(0.5) == 0.0
    h.add(1.0, 5e-5)            # now 1e-4 >= epsilon
    assert not h.is_empty()
    assert h.percentile(0.5) == pytest.approx(start(37))


def test_round_to_multiple_halves_up():
    assert round_to_multiple_s(MIDNIGHT + 11 * 3600, DAY) == MIDNIGHT
    assert round_to_multiple_s(MIDNIGHT + 12 * 3600, DAY) == MIDNIGHT + DAY
    assert round_to_multiple_s(MIDNIGHT + 13 * 3600, DAY) == MIDNIGHT + DAY


def test_first_sample_sets_reference_to_nearest_midnight():
    h = DecayingHistogram()
    h.add(1.0, 0.1, MIDNIGHT + 13 * 3600)
    assert h.reference_s == MIDNIGHT + DAY
    # weight stored = 0.1 * 2**((t - ref) / 24h) = 0.1 * 2**(-11/24)
    assert h.hist.total_weight == pytest.approx(0.1 * 2 ** (-11 / 24))


def test_decay_newer_samples_weigh_more():
    h = DecayingHistogram()
    h.add(1.0, 0.1, MIDNIGHT)
    h.add(2.0, 0.1, MIDNIGHT + DAY)      # twice the weight of the first
    # weights 0.1 (bucket 36) and 0.2 (bucket 49): P30 -> bucket 36, P50 -> bucket 49
    assert h.percentile(0.3) == pytest.approx(start(37))
    assert h.percentile(0.34) == pytest.approx(start(50))


def test_renormalisation_after_100_half_lives():
    h = DecayingHistogram()
    h.add(1.0, 0.1, MIDNIGHT)
    t2 = MIDNIGHT + 101 * DAY
    h.add(2.0, 0.1, t2)
    assert h.reference_s == t2                       # moved to the new sample's midnight
    assert h.hist.weights[36] == pytest.approx(0.1 * 2.0 ** -101)   # old weight scaled by 2^(old-new)
    assert h.hist.min_bucket == 49                   # the old bucket fell below epsilon
    assert h.percentile(0.01) == pytest.approx(start(50))


def test_merge_aligns_reference():
    a, b = DecayingHistogram(), DecayingHistogram()
    a.add(1.0, 0.1, MIDNIGHT)
    b.add(2.0, 0.1, MIDNIGHT + 200 * DAY)
    a.merge(b)
    assert a.reference_s == MIDNIGHT + 200 * DAY
    assert a.percentile(0.5) == pytest.approx(start(50))


def test_custom_options():
    o = HistogramOptions(max_value=10.0, first_bucket_size=1.0, ratio=2.0, epsilon=1e-3)
    # ceil(log2(10 * 1 / 1 + 1)) + 1 = ceil(3.46) + 1 = 5
    assert o.num_buckets == 5
    assert [o.bucket_start(i) for i in range(5)] == [0.0, 1.0, 3.0, 7.0, 15.0]


values = st.lists(st.tuples(st.floats(0.0, 50.0), st.floats(0.01, 10.0)), min_size=1, max_size=40)


@given(values, st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_percentile_monotone_in_p(samples, p1, p2):
    h = Histogram()
    for v, w in samples:
        h.add(v, w)
    lo, hi = sorted((p1, p2))
    assert h.percentile(lo) <= h.percentile(hi)


@given(values)
def test_percentile_is_an_upper_edge_above_the_minimum(samples):
    h = Histogram()
    for v, w in samples:
        h.add(v, w)
    edges = {O.bucket_start(i) for i in range(O.num_buckets)}
    p = h.percentile(0.5)
    assert p in edges
    assert p > min(v for v, _ in samples) or p == O.bucket_start(O.num_buckets - 1)
