"""The time a request spends outside the server, recovered from a calibration run and its twin.

A lab run's client latency is the server's latency plus the time outside it (the network, the
load generator's own client). A twin draws that time per request from a log-normal
(``workload.client_rtt_ms``, ``client_rtt_p99_ms``), independent of the server's, and adds it.
So the log-normal a grid's twins should take is the one that, added to the calibration run's
twin (which spends no time outside), gives the calibration run's own client latency:
a deconvolution, solved here by quadrature on the twin's quantile function. That holds for an
open loop, whose arrivals do not wait for answers; a closed loop's clients keep its queue short
by the very time they spend outside, so there the two do not add.

Which quantiles it matches: the median, and the 90th or the 99th percentile, whichever gives the
narrower tail. A calibration run's client p99 is one sample of a tail that a few incidents of the
host can decide (``open-tail-split``'s opening run: 33 ms, its closing one 2.7 ms, the handler's
own p99 0.5-0.7 ms in both), while its 90th percentile stays at 0.9-1.3 ms on every quiet run; a
run's own incidents are not a time every request of other runs spends outside the server, and
a run without them gives the p99 its body implies or less. Quantiles, not means: the mean carries
the same incidents (1.59 against 0.73 ms there), and the difference of two medians is not the
median of the difference when the server's own latency is spread (a server median of 0.2 ms
with a p90 of 0.6, as GOMAXPROCS 2 with idle mark workers gives): hence the sum is computed, not
the quantiles subtracted.

>>> server = {0.1: 4e-4, 0.25: 4.2e-4, 0.5: 4.5e-4, 0.75: 4.8e-4, 0.9: 5e-4, 0.99: 6e-4, 0.999: 7e-4, 1.0: 9e-4}
>>> fit_outside_time(server, {0.5: 6e-4, 0.9: 1.0e-3, 0.99: 2.0e-3}) is not None
True
>>> fit_outside_time(server, {0.5: 4e-4, 0.9: 1.0e-3, 0.99: 2.0e-3}) is None   # no time outside
True
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
from scipy.stats import norm

from cfsim.monitoring.histogram import quantiles_through_buckets
from cfsim.workloads.arrivals import Z_99

#: quadrature points of each distribution (stratified, so the fit is deterministic)
POINTS = 8000
#: the widest log-normal the fit considers (sigma; p99 / median = exp(2.33 sigma) = 1,000 at 3)
SIGMA_MAX = 3.0


def quantile_function(points: Mapping[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """``(u, x)`` knots of a piecewise-linear quantile function through ``{quantile: value}``,
    extended to 0 along its two lowest knots (not below 0) and to 1 at the highest value."""
    us = sorted(u for u, v in points.items() if v is not None)
    if len(us) < 2:
        raise ValueError("quantile_function: need at least two quantiles")
    xs = [float(points[u]) for u in us]
    xs = list(np.maximum.accumulate(xs))        # bucket interpolation can tie, never fall
    if us[0] > 0:
        slope = (xs[1] - xs[0]) / (us[1] - us[0])
        us, xs = [0.0] + us, [min(xs[0], max(0.0, xs[0] - slope * us[0]))] + xs
    if us[-1] < 1:
        us, xs = us + [1.0], xs + [xs[-1]]
    return np.asarray(us, dtype=float), np.asarray(xs, dtype=float)


def fit_outside_time(server_q: Mapping[float, float], client_q: Mapping[float, float],
                     bounds: Sequence[float] | None = None, points: int = POINTS) -> tuple[float, float] | None:
    """The ``(median, p99)`` [s] of the log-normal time outside the server that, added to a server
    latency with quantiles ``server_q`` (the calibration twin's, ``{quantile: s}``), gives the client
    quantiles ``client_q`` at 0.5 and at 0.9 or 0.99, whichever needs less spread (module
    docstring); quantiles read through a histogram with upper ``bounds`` where given, as the lab's
    are. None where the client's median is not above the server's alone."""
    c50, c90, c99 = (client_q.get(q) for q in (0.5, 0.9, 0.99))
    if c50 is None or c90 is None:
        return None
    us, xs = quantile_function(server_q)
    u = (np.arange(points) + 0.5) / points
    x = np.interp(u, us, xs)
    # the outside time's standard normal scores, stratified and paired with the server's at random
    z = np.random.default_rng(0).permutation(norm.ppf(u))

    def quantiles(m: float, sigma: float, qs: tuple[float, ...]) -> list[float]:
        s = x + m * np.exp(sigma * z)
        if bounds:
            return [float(v) for v in quantiles_through_buckets(s, bounds, qs)]  # type: ignore[arg-type]
        return [float(v) for v in np.quantile(s, qs)]

    if quantiles(0.0, 0.0, (0.5,))[0] >= c50:
        return None

    def median_for(sigma: float) -> float:
        lo, hi = 0.0, c50
        for _ in range(30):
            mid = 0.5 * (lo + hi)
            if quantiles(mid, sigma, (0.5,))[0] < c50:
                lo = mid
            else:
                hi = mid
        return 0.5 * (lo + hi)

    def sigma_for(q: float, target: float) -> float:
        def short(sigma: float) -> bool:
            return quantiles(median_for(sigma), sigma, (q,))[0] < target
        if not short(0.0):
            return 0.0
        if short(SIGMA_MAX):
            return SIGMA_MAX
        lo, hi = 0.0, SIGMA_MAX
        for _ in range(16):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if short(mid) else (lo, mid)
        return 0.5 * (lo + hi)

    sigma = sigma_for(0.9, c90)
    if c99 is not None:
        sigma = min(sigma, sigma_for(0.99, c99))
    m = median_for(sigma)
    return m, m * math.exp(Z_99 * sigma)
