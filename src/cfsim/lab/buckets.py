"""The lab's latency histogram buckets, as its binaries lay them out (``lab/internal/metricsx``).

The lab's latency quantiles are PromQL ``histogram_quantile`` interpolations inside these buckets,
not exact quantiles, so a twin that is to be compared with them reports its own through the same
bounds (``run.latency_buckets_s``). A run's manifest keeps only the buckets its window's quantiles
could reach (the window trimming of :mod:`cfsim.lab.summary`), so :func:`full_layout` finds the whole
layout that the kept bounds belong to.

>>> len(LAYOUTS["3-per-doubling"]), LAYOUTS["3-per-doubling"][:2]
(59, [0.0001, 0.000126])
>>> full_layout([0.00050397, 0.00056569, 0.00063496])[:2]
[5e-05, 5.612e-05]
>>> full_layout([0.0015, 0.003]) is None
True
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from cfsim.lab.summary import bucket_deltas


def _layout(start_s: float, step: float, below_s: float, decimals: int) -> list[float]:
    out, v = [], start_s
    while v < below_s:
        out.append(round(v, decimals))
        v *= step
    return out


#: the layouts the lab's binaries have used, by name: 3 per doubling from 0.1 ms to >= 60 s (until
#: 2026-11-23), then 6 per doubling from 50 us to >= 80 s (``LatencyBuckets`` in
#: ``lab/internal/metricsx/buckets.go``)
LAYOUTS: dict[str, list[float]] = {
    "3-per-doubling": _layout(1e-4, 2 ** (1 / 3), 60 * 1.26, 7),
    "6-per-doubling": _layout(5e-5, 2 ** (1 / 6), 80 * 2 ** (1 / 6), 8),
}


def full_layout(kept_s: Sequence[float]) -> list[float] | None:
    """The lab layout every one of ``kept_s`` (bucket bounds [s], +Inf left out) belongs to, or None."""
    if not kept_s:
        return None
    for bounds in LAYOUTS.values():
        if all(any(math.isclose(k, b, rel_tol=1e-6) for b in bounds) for k in kept_s):
            return list(bounds)
    return None


def recorded_layout(window_samples: Mapping[str, Any], names: Sequence[str]) -> list[float] | None:
    """The layout of a run's latency histograms: the first of ``names`` whose buckets the run's
    window samples (``manifest["window_samples"]``, the load generator's or the workload's at the
    window's end) kept, by their bounds alone; None if none was kept or they fit no layout."""
    for name in names:
        for source in ("loadgen", "workload"):
            end = (window_samples.get(source) or {}).get("end") or {}
            kept = sorted(le for le, _ in bucket_deltas(name, {}, end) if not math.isinf(le))
            if kept:
                return full_layout(kept)
    return None
