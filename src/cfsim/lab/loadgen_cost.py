"""The lab's load generator's own CPU a request, by mode and rate: what the harness knows of itself.

The load generator (``lab/cmd/loadgen``) shares the lab's two CPUs with the server, so a twin of a
run it drives charges its CPU to the host (``workload.client_cpu_us_per_request``). Its cost a
request is not one number. In an open loop one sending loop sleeps until each request is due; at
low rates every request costs a wake-up of that loop (its timer, the switch-in, the connection's
goroutines), while at higher rates the loop wakes late and sends what is overdue at once, so one
wake-up serves a bunch. The lab's ``loadgen-cost`` grid (``data/lab/loadgen-cost``, 2026-11-29,
open loop at 190 to 2,600 requests/s with the server far under its limit, closed loop of 64
clients at about 10,000/s) measured it with the harness cgroup's CPU during a run minus before it:
open 321 / 348 / 267 / 217 / 138 / 110 / 112 us at 190 / 375 / 750 / 1,125 / 1,500 / 2,000 /
2,600 per second, closed 53 and 68 us. :func:`fit_open_curve` fits those open runs with
``a / (1 + rate x window)`` (wake-ups a request ``1 / (1 + r tau)`` when a wake-up sends what came
due during a window ``tau``; a constant term fitted to zero), the closed loop's cost is the median
of its runs.

These are the shape, not the level: this VM's speed drifts between runs, so a grid's twins scale
the curve by the grid's own calibration runs (measured cost over the curve at their mode and rate,
:mod:`cfsim.validation.normalise`). Across the lab's open-loop grids the curve, so scaled, predicts
each run's measured load-generator CPU with a median error of 3-6 % on ``profiles``,
``open-spread`` and ``wakeups`` and 28 % on ``open-latency`` (38-41 % with the calibration runs'
one number), ``tenant-ab`` 18 % either way.

>>> round(loadgen_cpu_us("open", 190.0))
359
>>> round(loadgen_cpu_us("open", 2000.0))
139
>>> loadgen_cpu_us("closed", None) == CLOSED_US
True
>>> loadgen_cpu_us("open", [[0, 100], [5, 200]]) is None
True
"""
from __future__ import annotations

import math
import statistics
from typing import Any, Iterable

#: the open loop's CPU a request as the rate goes to 0 [us] (one wake-up of the sending loop each)
OPEN_US_AT_ZERO = 430.7
#: the window whose due requests one wake-up of the sending loop sends together [s]
OPEN_BUNCH_WINDOW_S = 1.0467e-3
#: the closed loop's CPU a request [us] (64 clients, about 10,000 requests/s)
CLOSED_US = 60.5


def loadgen_cpu_us(kind: str, rate_per_s: Any) -> float | None:
    """The load generator's CPU a request [us] for a run of workload ``kind`` at the arrival rate
    ``rate_per_s`` (open loop; a number), or None where the curve says nothing (other kinds, a
    rate schedule)."""
    if kind == "closed":
        return CLOSED_US
    if kind != "open" or isinstance(rate_per_s, bool) or not isinstance(rate_per_s, (int, float)) \
            or not math.isfinite(rate_per_s) or rate_per_s <= 0:
        return None
    return open_curve_us(float(rate_per_s), OPEN_US_AT_ZERO, OPEN_BUNCH_WINDOW_S)


def open_curve_us(rate_per_s: float, at_zero_us: float, window_s: float) -> float:
    """``at_zero_us / (1 + rate x window)``: one wake-up sends the requests due within the window."""
    return at_zero_us / (1.0 + rate_per_s * window_s)


def fit_open_curve(points: Iterable[tuple[float, float]]) -> tuple[float, float]:
    """``(at_zero_us, window_s)`` fitted by least squares on ``(rate_per_s, cpu_us)`` points of
    open-loop runs (``scipy.optimize.curve_fit``, the constants above from ``loadgen-cost``)."""
    import numpy as np
    from scipy.optimize import curve_fit

    pts = list(points)
    if len(pts) < 3:
        raise ValueError(f"fit_open_curve needs at least 3 open-loop runs, got {len(pts)}")
    r, c = np.array([p[0] for p in pts], float), np.array([p[1] for p in pts], float)
    (a, w), _ = curve_fit(open_curve_us, r, c, p0=[float(c.max()), 1e-3],
                          bounds=([0.0, 0.0], [1e5, 1.0]))
    return float(a), float(w)


def closed_cost_us(costs: Iterable[float]) -> float:
    """The closed loop's CPU a request: the median of its runs' measured costs."""
    vals = list(costs)
    if not vals:
        raise ValueError("closed_cost_us needs at least one closed-loop run")
    return float(statistics.median(vals))
