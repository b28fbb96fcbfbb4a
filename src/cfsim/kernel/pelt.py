"""Recent utilization as the kernel's per-entity load tracking (PELT) keeps it: a geometric average
of the time a task (or a CPU) was running, in which each 1024 us period weighs ``y`` times the one
after it, with ``y**32 = 1/2`` (``kernel/sched/pelt.c``: ``decay_load``, ``___update_load_sum``,
``___update_load_avg``; the half-life is 32 periods, about 33 ms).

The engines know how much CPU a task or a CPU ran between two instants, not when inside them, so
:func:`util_after` spreads that time evenly over the span. Over spans short against the half-life
that is what PELT gives; over long ones it weighs the span's start as much as its end.
"""
from __future__ import annotations

#: the half-life of PELT's average [ns]: 32 periods of 1024 us (``LOAD_AVG_PERIOD`` in pelt.c)
HALF_LIFE_NS = 32 * 1024 * 1000


def util_after(util: float, busy_ns: float, span_ns: float) -> float:
    """The utilization (0 to 1 of one CPU) ``span_ns`` after it was ``util``, for ``busy_ns`` of
    running within that span.

    >>> util_after(0.0, 1e9, 1e9) > 0.999, util_after(1.0, 0.0, 1e9) < 0.001
    (True, True)
    >>> round(util_after(0.0, HALF_LIFE_NS, HALF_LIFE_NS), 3)   # busy one half-life from idle
    0.5
    >>> round(util_after(0.6, 0.0, HALF_LIFE_NS), 3)             # idle one half-life
    0.3
    >>> util_after(0.4, 0.0, 0.0)
    0.4
    """
    if span_ns <= 0.0:
        return util
    kept = 0.5 ** (span_ns / HALF_LIFE_NS)
    frac = busy_ns / span_ns
    if frac > 1.0:
        frac = 1.0
    elif frac < 0.0:
        frac = 0.0
    return util * kept + frac * (1.0 - kept)
