"""GC cycles one by one: the summary keys of a per-cycle table, the same for the model's cycles
(``GoRuntime.gc_cycle_table``) and the real runtime's (``GODEBUG=gctrace=1,gcpacertrace=1``, read
by :func:`cfsim.io.gctrace.read_gctrace` and put in these columns by
:func:`cfsim.io.gctrace.cycle_table`).

Table columns (one row a cycle): ``run_t_s`` (when the cycle ended), ``mark_ms`` (the concurrent
mark's wall time), ``triggered_bytes`` (the heap when the mark began, ``startCycle``),
``heap_end_bytes`` (when it ended, ``endCycle``), ``marked_bytes``, ``goal_bytes``, and the mark's
P-time [ms] in ``assist_cpu_ms``, ``background_cpu_ms``, ``idle_cpu_ms``.

Why these: the next cycle's goal is computed from the heap marked in this one
(``src/runtime/mgcpacer.go``, ``(*gcControllerState).commit``), and allocate-black objects count
as marked (``mgcmark.go``, ``gcmarknewobject``), so what the mutators allocate while a mark runs
(``alloc_during_mark``) and how far past the goal the heap ends (``end_over_goal``) set the
marked heap, the goal and the cycle rate; the assist share says who did the marking. The share
of cycles ending 2 % or more past the goal and the largest overshoot are the tail that a memory
limit meets. The share of the window's wall time spent in cycles whose heap ended a quarter or
more past the goal tells the two ways a cycle near its goal runs apart: assists pace the heap to
at most 1.1 x its (extended) goal (``revise``'s ``maxOvershoot``), and only a mark the assists left
(the GC CPU limiter on: ``gcAssistAlloc`` returns at once) or a goal extended by GOGC runs far
beyond it. Where the GC CPU limiter's turn-ons are known cycle by cycle (the model's, and the
lab's runs whose workload read it after its cycles, :mod:`cfsim.io.gclimiter`), the share of the
cycles it turned on in says which of the two it was.

The mean wall time between one mark's end and the next one's start says what a cycle costs
beyond its mark where the heap is past the next trigger as soon as a mark ends (GOMEMLIMIT at
the live heap): ``gcStart`` sweeps every span the last cycle left unswept before it may stop the
world (``for trigger.test() && sweepone() != ^uintptr(0) {}``, then ``finishsweep_m`` in the
stop), and the other allocating goroutines wait on ``work.startSema`` meanwhile
(``src/runtime/mgc.go``). Its mean (not its median) is the statistic, because the lab's gctrace
prints a cycle's start to the millisecond (``@t``): each gap is off by up to a millisecond, their
mean is not.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

#: summary keys (all None when no cycle ended in the window)
CYCLE_KEYS = ("gc_cycle_count", "gc_cycle_marked_median_bytes", "gc_cycle_goal_median_bytes",
              "gc_cycle_alloc_during_mark_median_bytes", "gc_cycle_end_over_goal_median", "gc_cycle_mark_median_s",
              "gc_cycle_assist_share", "gc_cycle_past_goal_share", "gc_cycle_end_over_goal_max",
              "gc_cycle_unpaced_time_share", "gc_cycle_limiter_on_share", "gc_cycle_between_marks_mean_s")
#: a cycle whose heap ends this far past its goal counts as past it: the overshoots that raise the
#: next goal (by twice the overshoot) and, near a memory limit, decide an OOM kill; the runtime's
#: own pacing lands within about 1 % of the goal otherwise (gc-trace, gc-exectrace grids)
PAST_GOAL = 0.02
#: a cycle whose heap ends this far past its goal was not paced by assists, which hold it to
#: 1.1 x the goal (``revise``, ``src/runtime/mgcpacer.go``); a quarter leaves room for gctrace's
#: whole megabytes at a 16 MiB heap (18 -> 20 MB is a paced cycle). On `gc-near-limit`-like runs
#: the cycles fall on either side of it by 10 MiB or more, so the share moves little with it
UNPACED = 0.25


def cycle_keys(cycles: pd.DataFrame, t0_s: float, t1_s: float) -> dict[str, Any]:
    """Medians over the cycles that ended in ``(t0_s, t1_s]`` (see the module docstring); the
    assist share is the assists' part of the mark P-time summed over those cycles.

    >>> t = pd.DataFrame({"run_t_s": [0.5, 1.5, 2.5], "mark_ms": [10, 20, 30],
    ...                   "triggered_bytes": [90, 100, 110], "heap_end_bytes": [120, 130, 150],
    ...                   "marked_bytes": [40, 45, 50], "goal_bytes": [120, 125, 140],
    ...                   "assist_cpu_ms": [0, 10, 30], "background_cpu_ms": [20, 30, 30], "idle_cpu_ms": [0, 0, 0]})
    >>> k = cycle_keys(t, 1.0, 3.0)
    >>> k["gc_cycle_count"], k["gc_cycle_alloc_during_mark_median_bytes"], k["gc_cycle_mark_median_s"]
    (2, 35.0, 0.025)
    >>> round(k["gc_cycle_end_over_goal_median"], 4), k["gc_cycle_assist_share"]
    (1.0557, 0.4)
    >>> k["gc_cycle_past_goal_share"], round(k["gc_cycle_end_over_goal_max"], 4)
    (1.0, 1.0714)

    Between marks: the third mark starts 0.97 s after the second ends (the window holds both);
    over the whole table the first gap (0.98 s) counts too:

    >>> round(k["gc_cycle_between_marks_mean_s"], 4), round(cycle_keys(t, 0.0, 3.0)["gc_cycle_between_marks_mean_s"], 4)
    (0.97, 0.975)

    A cycle's wall time runs from the previous cycle's end to its own (the first one's: its mark):

    >>> t.loc[2, "heap_end_bytes"] = 180                     # 1.29 x its goal: the assists let go
    >>> round(cycle_keys(t, 0.0, 3.0)["gc_cycle_unpaced_time_share"], 4)   # 1 s of 0.01 + 1 + 1
    0.4975
    >>> cycle_keys(t, 1.0, 3.0)["gc_cycle_unpaced_time_share"]             # 1 s of 1 + 1
    0.5
    >>> t["limiter_turned_on"] = [1.0, float("nan"), 0.0]                    # the second not known
    >>> cycle_keys(t, 0.0, 3.0)["gc_cycle_limiter_on_share"]
    0.5
    """
    out: dict[str, Any] = dict.fromkeys(CYCLE_KEYS)
    if cycles is None or cycles.empty:
        out["gc_cycle_count"] = 0
        return out
    # each cycle's wall time from the previous one's end, before the window cuts the table
    span = cycles["run_t_s"].diff()
    span.iloc[0] = cycles["mark_ms"].iloc[0] / 1e3
    inside = (cycles["run_t_s"] > t0_s) & (cycles["run_t_s"] <= t1_s)
    c, span = cycles[inside], span[inside]
    out["gc_cycle_count"] = int(len(c))
    if c.empty:
        return out

    def med(x: pd.Series) -> float | None:
        x = x.dropna()
        return float(np.median(x)) if len(x) else None

    out["gc_cycle_marked_median_bytes"] = med(c["marked_bytes"])
    out["gc_cycle_goal_median_bytes"] = med(c["goal_bytes"])
    out["gc_cycle_alloc_during_mark_median_bytes"] = med(c["heap_end_bytes"] - c["triggered_bytes"])
    end_over = (c["heap_end_bytes"] / c["goal_bytes"]).dropna()
    out["gc_cycle_end_over_goal_median"] = med(end_over)
    out["gc_cycle_mark_median_s"] = med(c["mark_ms"] / 1e3)
    if len(end_over):
        out["gc_cycle_past_goal_share"] = float((end_over >= 1.0 + PAST_GOAL).mean())
        out["gc_cycle_end_over_goal_max"] = float(end_over.max())
        unpaced = (c["heap_end_bytes"] / c["goal_bytes"]) >= 1.0 + UNPACED
        total = float(span.sum())
        out["gc_cycle_unpaced_time_share"] = float(span[unpaced].sum()) / total if total > 0 else None
    if "limiter_turned_on" in c:
        # where it is known: the model knows every cycle, the lab's reads most (cfsim.io.gclimiter)
        out["gc_cycle_limiter_on_share"] = _mean(c["limiter_turned_on"])
    mark = float((c["assist_cpu_ms"] + c["background_cpu_ms"] + c["idle_cpu_ms"]).sum())
    out["gc_cycle_assist_share"] = float(c["assist_cpu_ms"].sum()) / mark if mark > 0 else None
    out["gc_cycle_between_marks_mean_s"] = _between_marks_mean_s(cycles, inside)
    return out


def _between_marks_mean_s(cycles: pd.DataFrame, inside: pd.Series) -> float | None:
    """Mean wall time [s] from a mark's end to the next mark's start, over the pairs of consecutive
    cycles that both ended inside the window (:func:`mark_spans`); None without such a pair."""
    start, end = mark_spans(cycles)
    if len(start) < 2:
        return None
    both = np.asarray(inside, dtype=bool)
    keep = both[:-1] & both[1:]
    if not keep.any():
        return None
    return float(np.mean((start[1:] - end[:-1])[keep]))


def _mean(x: pd.Series) -> float | None:
    x = pd.to_numeric(x, errors="coerce").dropna()
    return float(x.mean()) if len(x) else None


def mark_spans(cycles: pd.DataFrame | None) -> tuple[np.ndarray, np.ndarray]:
    """``(start, end)`` [s] of each cycle's concurrent mark (``run_t_s`` the cycle's end, back by
    ``mark_ms``), the model's table and the lab's alike; empty without cycles.

    >>> [a.tolist() for a in mark_spans(pd.DataFrame({"run_t_s": [1.03, 2.5], "mark_ms": [30.0, 100.0]}))]
    [[1.0, 2.4], [1.03, 2.5]]
    """
    if cycles is None or len(cycles) == 0 or "run_t_s" not in cycles or "mark_ms" not in cycles:
        return np.empty(0), np.empty(0)
    end = np.asarray(cycles["run_t_s"], dtype=float)
    return np.round(end - np.asarray(cycles["mark_ms"], dtype=float) / 1e3, 9), end


#: margins around a mark in which its CPU samples are counted [s]: the lab's gctrace puts a
#: cycle's start a few ms early (its clock starts at the process's launch), and the mark's
#: termination and the workers' exits follow its end
MARK_SAMPLE_MARGIN_S = (0.01, 0.02)


def gc_cpu_per_cycle_s(sample_t_s: np.ndarray, is_gc: np.ndarray, sample_s: float, mark_start: np.ndarray,
                       mark_end: np.ndarray, window: tuple[float, float]) -> float | None:
    """The GC's real CPU a cycle [s]: CPU samples (``sample_s`` each) on GC stacks that fall in a
    mark (with :data:`MARK_SAMPLE_MARGIN_S`), averaged over the marks that lie whole inside the
    sampled ``window``; None with fewer than two such marks. Where two marks' margins would
    overlap (tens of cycles a second), each takes the samples up to the midpoint of the gap
    between them, so no sample counts twice. The kernel's samples (``perf``) see what the
    runtime's ``/cpu/classes`` cannot: those count P-time, and with more Ps than CPUs a worker
    holds its P while its thread waits for one.

    >>> t = np.array([1.0, 1.005, 1.01, 2.0, 2.002, 5.0])
    >>> gc = np.array([True, True, False, True, True, True])
    >>> gc_cpu_per_cycle_s(t, gc, 0.002, np.array([0.99, 1.99, 4.99]), np.array([1.02, 2.01, 5.1]), (0.5, 5.0))
    0.004
    >>> # marks 25 ms apart: a sample between two counts for the nearer one only
    >>> t = np.array([1.005, 1.015, 1.027, 1.045])
    >>> gc_cpu_per_cycle_s(t, np.ones(4, bool), 0.002, np.array([1.0, 1.035]), np.array([1.01, 1.045]), (0.5, 5.0))
    0.004
    """
    lo, hi = MARK_SAMPLE_MARGIN_S
    t = np.asarray(sample_t_s, dtype=float)[np.asarray(is_gc, dtype=bool)]
    start, end = np.asarray(mark_start, dtype=float), np.asarray(mark_end, dtype=float)
    order = np.argsort(start, kind="stable")
    start, end = start[order], end[order]
    first, last = start - lo, end + hi
    if len(start) > 1:
        mid = (end[:-1] + start[1:]) / 2   # the middle of each gap between neighbouring marks
        first[1:] = np.maximum(first[1:], mid)
        last[:-1] = np.minimum(last[:-1], mid)
    per = [np.count_nonzero((t >= a) & (t < b)) * sample_s
           for a, b, a0, b0 in zip(first, last, start - lo, end + hi)
           if a0 >= window[0] and b0 <= window[1]]
    return float(np.mean(per)) if len(per) >= 2 else None
