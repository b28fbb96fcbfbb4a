"""Whether a service's slow requests are its garbage collector's.

A GC cycle takes CPU from the requests while it marks (its workers on the Ps, assists on the
allocating goroutines, the stops at its start and end: ``src/runtime/mgc.go``), so requests that
finish while a cycle runs can be slower than the others; a tail that is the GC's is one that
GOGC, GOMEMLIMIT or the heap's size moves, and one that is not must come from elsewhere (the
quota, the host, the client). These keys split a run's requests by the 1 s interval they
finished in, the intervals in which a GC cycle ended against the others, the same way for the lab
(the load generator's latency histogram and the runtime's ``/gc/cycles/total:gc-cycles``, both
scraped every second) and for the model (its requests' own latencies and its cycle table):

* ``latency_p99_gc_ratio``: the 99th percentile of the client-side latency over the intervals with
  a cycle, divided by the one over the intervals without (1: the GC adds nothing to the tail);
* ``latency_gc_interval_share``: the share of the requests that finished in intervals with a cycle.

With a histogram's bounds the quantiles are read as Prometheus reads them
(:func:`cfsim.monitoring.histogram.histogram_quantile`). Both keys are None with fewer than
:data:`MIN_REQUESTS` requests in either kind of interval.

>>> t = np.arange(0.0005, 10.0, 0.001)                  # 1,000 requests a second for 10 s
>>> lat = np.where((t % 2.0) < 0.02, 0.005, 0.001)      # the first 20 ms of every other second slow
>>> k = latency_gc_keys(t, lat, cycle_end_s=[0.03, 2.03, 4.03, 6.03, 8.03], t0_s=0.0, t1_s=10.0)
>>> round(k["latency_p99_gc_ratio"], 2), round(k["latency_gc_interval_share"], 2)
(5.0, 0.5)
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from cfsim.monitoring.histogram import histogram_quantile

__all__ = ["LATENCY_GC_KEYS", "MIN_REQUESTS", "latency_gc_keys", "latency_gc_keys_from_histograms"]

LATENCY_GC_KEYS = ("latency_p99_gc_ratio", "latency_gc_interval_share")
#: fewer requests in one kind of interval give no 99th percentile worth comparing
MIN_REQUESTS = 200


def latency_gc_keys(t_done_s: Sequence[float], latency_s: Sequence[float], cycle_end_s: Sequence[float],
                    t0_s: float, t1_s: float, buckets_s: Sequence[float] | None = None,
                    interval_s: float = 1.0) -> dict[str, Any]:
    """The keys from each request's completion time [s] and latency [s], and the times [s] GC
    cycles ended, over the whole intervals of ``interval_s`` from ``t0_s`` up to ``t1_s``;
    ``buckets_s``: read the quantiles through a histogram with these upper bounds, as the lab's
    are (``run.latency_buckets_s``)."""
    t = np.asarray(t_done_s, dtype=float)
    lat = np.asarray(latency_s, dtype=float)
    if t.shape != lat.shape:
        raise ValueError(f"t_done_s and latency_s differ in length ({t.size} and {lat.size})")
    n = int(math.floor((t1_s - t0_s) / interval_s + 1e-9))
    sel = (t > t0_s) & (t <= t0_s + n * interval_s)
    # (t0 + k, t0 + k + 1]: the interval a scrape at its end would count the request in
    idx = np.ceil((t[sel] - t0_s) / interval_s).astype(int) - 1
    ends = np.asarray(cycle_end_s, dtype=float)
    ends = ends[(ends > t0_s) & (ends <= t0_s + n * interval_s)]
    with_gc = np.zeros(n, dtype=bool)
    with_gc[np.ceil((ends - t0_s) / interval_s).astype(int) - 1] = True
    in_gc = with_gc[idx]
    gc_lat, other_lat = lat[sel][in_gc], lat[sel][~in_gc]
    if gc_lat.size < MIN_REQUESTS or other_lat.size < MIN_REQUESTS:
        return dict.fromkeys(LATENCY_GC_KEYS)
    if buckets_s:
        le = np.asarray(sorted(float(b) for b in buckets_s if not math.isinf(float(b))), dtype=float)
        return _keys(_cumulative(gc_lat, le), _cumulative(other_lat, le), le, gc_lat.size, other_lat.size)
    p_gc, p_other = np.percentile(gc_lat, 99), np.percentile(other_lat, 99)
    return {"latency_p99_gc_ratio": float(p_gc / p_other) if p_other > 0 else None,
            "latency_gc_interval_share": float(gc_lat.size / (gc_lat.size + other_lat.size))}


def latency_gc_keys_from_histograms(t_s: Sequence[float], bounds_s: Sequence[float],
                                    cumulative_counts: np.ndarray, cycles_total: Sequence[float],
                                    t0_s: float, t1_s: float) -> dict[str, Any]:
    """The keys from scraped counters: at each scrape time ``t_s`` [s] (increasing) the histogram's
    cumulative bucket counts (one row a scrape, one column per upper bound in ``bounds_s``, +Inf
    last) and the count of completed GC cycles. An interval between two scrapes inside
    ``[t0_s, t1_s]`` has a cycle when the cycle count rose over it.

    >>> le = [0.002, 0.004, math.inf]
    >>> rows = [[0, 0, 0]]
    >>> for k in range(10):                                # 1,000 a second; 20 at 3 ms in even seconds
    ...     rows.append([rows[-1][0] + (980 if k % 2 == 0 else 1000), rows[-1][1] + 1000, rows[-1][2] + 1000])
    >>> k = latency_gc_keys_from_histograms(range(11), le, np.array(rows), [0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5], 0, 10)
    >>> round(k["latency_p99_gc_ratio"], 3), k["latency_gc_interval_share"]
    (1.515, 0.5)
    """
    t = np.asarray(t_s, dtype=float)
    le = np.asarray([float(b) for b in bounds_s], dtype=float)
    c = np.asarray(cumulative_counts, dtype=float)
    cyc = np.asarray(cycles_total, dtype=float)
    if c.shape != (t.size, le.size) or cyc.shape != t.shape:
        raise ValueError(f"counts {c.shape} and cycles {cyc.shape} do not match {t.size} scrapes x {le.size} bounds")
    if le.size == 0 or not math.isinf(le[-1]):
        raise ValueError("bounds_s must end with +Inf")
    keep = (t[:-1] >= t0_s - 1e-9) & (t[1:] <= t1_s + 1e-9)
    d = np.diff(c, axis=0)[keep]
    gc = (np.diff(cyc) > 0)[keep]
    gc_counts, other_counts = d[gc].sum(axis=0), d[~gc].sum(axis=0)
    if gc_counts[-1] < MIN_REQUESTS or other_counts[-1] < MIN_REQUESTS:
        return dict.fromkeys(LATENCY_GC_KEYS)
    return _keys(gc_counts[:-1], other_counts[:-1], le[:-1], gc_counts[-1], other_counts[-1])


def _cumulative(lat: np.ndarray, le: np.ndarray) -> np.ndarray:
    """Cumulative counts of ``lat`` under each bound (``v <= le``, as ``client_golang`` counts)."""
    return np.searchsorted(np.sort(lat), le, side="right").astype(float)


def _keys(gc_counts: np.ndarray, other_counts: np.ndarray, le: np.ndarray, gc_total: float,
          other_total: float) -> dict[str, Any]:
    """The keys from two histograms' cumulative counts under the finite bounds ``le`` and their
    totals (the +Inf bucket)."""
    gc_total, other_total = float(gc_total), float(other_total)
    p_gc = histogram_quantile(0.99, list(zip(le.tolist(), gc_counts.tolist())) + [(math.inf, gc_total)])
    p_other = histogram_quantile(0.99, list(zip(le.tolist(), other_counts.tolist())) + [(math.inf, other_total)])
    ratio = float(p_gc / p_other) if p_gc is not None and p_other else None
    return {"latency_p99_gc_ratio": ratio,
            "latency_gc_interval_share": gc_total / (gc_total + other_total)}
