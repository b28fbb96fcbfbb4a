"""Prometheus histograms: how a client library counts an observation into buckets and how PromQL
turns buckets back into a quantile. Pure rules, as for the kernel and the runtime.

* ``client_golang``'s ``Histogram.Observe`` counts a value in the first bucket whose upper bound
  ``le`` it does not exceed (``v <= le``); the exposition is cumulative.
* PromQL's ``histogram_quantile`` (``bucketQuantile`` in ``promql/quantile.go``) finds the bucket
  holding rank ``q x total`` and interpolates linearly inside it, from 0 for the first bucket; a
  rank in the +Inf bucket returns the largest finite bound.

So a quantile read from a histogram is not the exact one: inside a bucket it is placed as if the
bucket's values were spread evenly over it, up to the bucket's width away. A latency that grows
through a window (a stream's lag) fills its last bucket only partly, and the reported p99 lands
above every value observed (:func:`quantiles_through_buckets`).
"""
from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np

__all__ = ["histogram_quantile", "quantiles_through_buckets", "check_bucket_bounds"]


def histogram_quantile(q: float, buckets: Iterable[tuple[float, float]]) -> float | None:
    """Prometheus' ``histogram_quantile`` on cumulative ``(le, count)`` pairs (``bucketQuantile``
    in ``promql/quantile.go``): linear interpolation inside the bucket holding rank ``q x total``,
    from 0 for the first bucket; a rank in the +Inf bucket returns the largest finite bound.

    >>> round(histogram_quantile(0.5, [(0.1, 10.0), (0.2, 30.0), (math.inf, 40.0)]), 9)
    0.15
    """
    b = sorted(buckets)
    if not b or b[-1][1] <= 0:
        return None
    rank = q * b[-1][1]
    prev_le, prev_count = 0.0, 0.0
    for le, count in b:
        if count >= rank:
            if math.isinf(le):
                return prev_le
            if count == prev_count:
                return le
            return prev_le + (le - prev_le) * (rank - prev_count) / (count - prev_count)
        prev_le, prev_count = le, count
    return b[-1][0]


def check_bucket_bounds(bounds: Sequence[float]) -> str | None:
    """Why ``bounds`` cannot be a histogram's ``le`` list (finite, > 0, strictly ascending), or None."""
    if len(bounds) == 0:
        return "must list at least one bucket bound"
    try:
        v = [float(x) for x in bounds]
    except (TypeError, ValueError):
        return f"must be numbers [s] (got {list(bounds)!r})"
    if not all(math.isfinite(x) and x > 0 for x in v):
        return "every bound must be finite and > 0 (+Inf is implied)"
    if any(b <= a for a, b in zip(v, v[1:])):
        return "bounds must be strictly ascending"
    return None


def quantiles_through_buckets(values: np.ndarray, bounds: Sequence[float], qs: Sequence[float]) -> list[float | None]:
    """The quantiles ``qs`` of ``values`` as Prometheus reports them from a histogram with upper
    bounds ``bounds`` (+Inf implied): each value counted in every bucket whose ``le`` it does not
    exceed (``client_golang``'s ``Histogram.Observe``: ``v <= le``), then :func:`histogram_quantile`.
    A quantile inside a bucket is interpolated as if the bucket's values were spread evenly over
    it, so it can differ from the exact quantile by up to the bucket's width.

    >>> [round(x, 9) for x in quantiles_through_buckets(np.array([1.0, 1.0, 1.0, 3.0]), [2.0, 4.0], [0.5, 0.99])]
    [1.333333333, 3.92]
    """
    v = np.asarray(values, dtype=float)
    le = np.asarray([float(b) for b in bounds], dtype=float)
    counts = np.searchsorted(np.sort(v), le, side="right").astype(float)
    pairs = list(zip(le.tolist(), counts.tolist())) + [(math.inf, float(v.size))]
    return [histogram_quantile(q, pairs) for q in qs]
