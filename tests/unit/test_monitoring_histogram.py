"""cfsim.monitoring.histogram: Prometheus' bucket counting and histogram_quantile."""
from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st


def test_quantiles_through_buckets_interpolate_like_prometheus():
    from cfsim.monitoring.histogram import histogram_quantile, quantiles_through_buckets

    # a value equal to a bound is counted in that bucket (client_golang: v <= le)
    assert quantiles_through_buckets(np.array([1.0, 2.0]), [1.0, 2.0], [0.5]) == [1.0]
    # uniform values in (10, 11.9]: exact p99 ~11.88; one wide bucket (10.40, 13.11] spreads them
    # to its upper edge, the lab's stream p99 shape (cpu-stream p015: 12.93 s reported, 11.9 s lag)
    v = np.linspace(0.01, 11.9, 10_000)
    le = [0.1 * 2 ** (k / 3) for k in range(40)]
    p99 = quantiles_through_buckets(v, le, [0.99])[0]
    b_lo, b_hi = max(b for b in le if b < 11.8), min(b for b in le if b >= 11.9)
    assert b_lo < p99 < b_hi and p99 > float(np.percentile(v, 99)) + 0.5
    # beyond the last bound: the largest finite bound, as PromQL answers
    assert quantiles_through_buckets(np.array([5.0, 6.0]), [1.0, 2.0], [0.5]) == [2.0]
    assert quantiles_through_buckets(np.array([]), [1.0], [0.5]) == [None]
    assert histogram_quantile(0.5, [(1.0, 0.0), (math.inf, 0.0)]) is None


@given(st.lists(st.floats(1e-5, 100.0), min_size=1, max_size=200), st.floats(0.01, 0.999))
@settings(max_examples=200, deadline=None)
def test_quantile_through_buckets_stays_in_the_bucket_of_the_exact_one(values, q):
    """Interpolation never leaves the bucket that holds the rank: the reported quantile lies in
    the bucket of the exact order statistic (the lab's are 12 % or 26 % wide)."""
    from cfsim.monitoring.histogram import quantiles_through_buckets

    le = [1e-5 * 2 ** (k / 6) for k in range(150)]
    v = np.sort(np.asarray(values))
    got = quantiles_through_buckets(v, le, [q])[0]
    exact = v[max(0, math.ceil(q * v.size) - 1)]
    upper = min(b for b in le if b >= exact)
    lower = max((b for b in le if b < upper), default=0.0)  # the first bucket starts at 0
    assert lower * (1 - 1e-12) <= got <= upper * (1 + 1e-12)


def test_bucket_bounds_are_checked():
    from cfsim.monitoring.histogram import check_bucket_bounds

    assert check_bucket_bounds([0.1, 0.2]) is None
    assert "ascending" in check_bucket_bounds([0.2, 0.1])
    assert "> 0" in check_bucket_bounds([0.0, 0.1])
    assert "at least one" in check_bucket_bounds([])
