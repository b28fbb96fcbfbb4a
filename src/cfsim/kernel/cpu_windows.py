"""How a group's CPU use spreads from one CFS period to the next.

A group whose mean use is below its quota is throttled in the periods that use more than the
quota (``sched/fair.c``: each period's runtime is refilled by the period timer,
``sched_cfs_period_timer`` -> ``do_sched_cfs_period_timer``), so how often it is throttled depends
on the spread of its use per period as much as on the mean. These keys summarise that spread over
a run's window, the same way for the lab (the group's ``cpuacct.usage`` sampled every 0.1 s by the
lab's watcher, ``cpu_watch.csv.gz``) and for the model (its per-period usage,
:meth:`cfsim.engine.cfs.CfsEngine.periods_frame`): the 10th and 90th percentiles of the CPU
[cores] in the ~0.1 s windows, their difference, and the correlation of neighbouring windows (a
spread that drifts over several periods throttles in runs of periods).

The lab's windows are the watcher's sampling intervals, not aligned to the periods: a throttled
period's CPU can fall into two windows, which narrows the spread a little against the model's
per-period figure.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

__all__ = ["CPU_WINDOW_KEYS", "CPU_WATCH_FILE", "CPU_WATCH_COLUMNS", "GC_WINDOW_KEYS", "window_keys",
           "window_keys_from_periods", "gc_window_keys", "gc_window_keys_from_periods",
           "gc_window_keys_from_samples", "GC_INTERVAL_KEYS", "gc_interval_keys", "gc_interval_keys_from_samples",
           "gc_interval_keys_from_periods"]

#: a lab run's watcher samples of the group's CPU counters over the window, one row a sample
#: (``t_s`` from the window's start)
CPU_WATCH_FILE = "cpu_watch.csv.gz"
CPU_WATCH_COLUMNS = ("t_s", "usage_ns", "nr_periods", "nr_throttled", "throttled_ns")

#: summary keys (None with fewer than :data:`MIN_WINDOWS` windows)
CPU_WINDOW_KEYS = ("cpu_window_p10_cores", "cpu_window_p90_cores", "cpu_window_spread_cores",
                   "cpu_window_autocorr")
#: fewer windows give no spread worth comparing
MIN_WINDOWS = 20
#: where in time the spread lies: the mean CPU of the windows a GC mark overlaps minus the others'
#: [cores], and the share of the throttled windows that a mark overlaps (None without a window of
#: each kind, or without a throttled window)
GC_WINDOW_KEYS = ("cpu_window_gc_excess_cores", "throttled_window_gc_share")
#: the same question at a scrape's resolution, for runs without the gctrace (every run that scrapes
#: the runtime's ``/gc/cycles/total:gc-cycles``): the busiest ~0.1 s window of each scrape interval
#: a GC cycle ended in against the other intervals' busiest [cores], and the share of the throttled
#: windows inside intervals with a cycle (None with fewer than :data:`MIN_INTERVALS` intervals of
#: either kind, or without a throttled window)
GC_INTERVAL_KEYS = ("cpu_window_gc_interval_peak_excess_cores", "throttled_window_gc_interval_share")
#: fewer intervals of one kind give no median worth comparing
MIN_INTERVALS = 3


def window_keys(t_s: Sequence[float], usage_s: Sequence[float]) -> dict[str, Any]:
    """The keys from cumulative CPU ``usage_s`` [s] read at times ``t_s`` [s] (increasing).

    >>> t = [i * 0.1 for i in range(41)]
    >>> u = np.cumsum([0.0] + [0.04 if i % 2 else 0.05 for i in range(40)])
    >>> k = window_keys(t, u)
    >>> round(k["cpu_window_p10_cores"], 3), round(k["cpu_window_p90_cores"], 3), round(k["cpu_window_autocorr"], 2)
    (0.4, 0.5, -0.98)
    """
    _, _, _, cores = _sample_windows(t_s, usage_s)
    return _keys(cores, dict.fromkeys(CPU_WINDOW_KEYS))


def _sample_windows(t_s: Sequence[float], usage_s: Sequence[float]
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The windows between successive samples of cumulative CPU: ``(kept, start, end, cores)``,
    ``kept`` selecting the sample gaps of positive length."""
    t = np.asarray(t_s, dtype=float)
    u = np.asarray(usage_s, dtype=float)
    if t.shape != u.shape:
        raise ValueError(f"t_s and usage_s differ in length ({t.size} and {u.size})")
    if t.size < 2:
        return np.zeros(0, dtype=bool), np.empty(0), np.empty(0), np.empty(0)
    dt = np.diff(t)
    ok = dt > 0
    return ok, t[:-1][ok], t[1:][ok], np.diff(u)[ok] / dt[ok]


def _period_windows(end_s: Sequence[float], usage_s: Sequence[float], t0_s: float, t1_s: float
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A model's periods that ended inside ``(t0_s, t1_s]`` as windows: ``(kept, start, end,
    cores)``, each period's CPU over its length (the gap between period ends); ``kept`` selects
    from the periods after the first."""
    e = np.asarray(end_s, dtype=float)
    u = np.asarray(usage_s, dtype=float)
    if e.size < 2:
        return np.zeros(0, dtype=bool), np.empty(0), np.empty(0), np.empty(0)
    length = np.diff(e)
    sel = (e[1:] > t0_s) & (e[1:] <= t1_s) & (length > 0)
    return sel, e[:-1][sel], e[1:][sel], u[1:][sel] / length[sel]


def _throttled_sample_windows(t_s: Sequence[float], usage_s: Sequence[float], nr_throttled: Sequence[float]
                              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The watcher's windows (:func:`_sample_windows`) as ``(start, end, cores, throttled)``, a
    window throttled where the group's throttled-period count rose over it."""
    ok, start, end, cores = _sample_windows(t_s, usage_s)
    throttled = np.diff(np.asarray(nr_throttled, dtype=float))[ok] > 0 if ok.size else np.zeros(0, dtype=bool)
    return start, end, cores, throttled


def _throttled_period_windows(end_s: Sequence[float], usage_s: Sequence[float], throttled: Sequence[bool],
                              t0_s: float, t1_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A model's periods as windows (:func:`_period_windows`), ``(start, end, cores, throttled)``."""
    sel, start, end, cores = _period_windows(end_s, usage_s, t0_s, t1_s)
    th = np.asarray(throttled, dtype=bool)[1:][sel] if sel.size else np.zeros(0, dtype=bool)
    return start, end, cores, th


def window_keys_from_periods(end_s: Sequence[float], usage_s: Sequence[float], t0_s: float,
                             t1_s: float) -> dict[str, Any]:
    """The keys from a model's periods (each period's end [s] and CPU [s]) that ended inside
    ``(t0_s, t1_s]``, each period's CPU over its length (the gap between period ends).

    >>> k = window_keys_from_periods([0.1 * i for i in range(1, 31)], [0.045] * 30, 0.0, 3.0)
    >>> round(k["cpu_window_spread_cores"], 6), k["cpu_window_autocorr"]
    (0.0, None)
    """
    _, _, _, cores = _period_windows(end_s, usage_s, t0_s, t1_s)
    return _keys(cores, dict.fromkeys(CPU_WINDOW_KEYS))


def _keys(cores: np.ndarray, out: dict[str, Any]) -> dict[str, Any]:
    if cores.size < MIN_WINDOWS:
        return out
    p10, p90 = np.percentile(cores, [10, 90])
    out["cpu_window_p10_cores"] = float(p10)
    out["cpu_window_p90_cores"] = float(p90)
    out["cpu_window_spread_cores"] = float(p90 - p10)
    x = cores - cores.mean()
    den = float((x * x).sum())
    # a constant series has no correlation to speak of
    out["cpu_window_autocorr"] = float((x[1:] * x[:-1]).sum() / den) if den > 1e-18 else None
    return out


def gc_window_keys(start_s: Sequence[float], end_s: Sequence[float], cores: Sequence[float],
                   throttled: Sequence[bool], mark_start_s: Sequence[float],
                   mark_end_s: Sequence[float]) -> dict[str, Any]:
    """Whether a group's busier windows and its throttled ones are those a GC mark ran in: the
    question behind "throttled at 40 % usage" when a runtime's GC is suspected (its idle mark
    workers take every idle P: ``findRunnableGCWorker``, ``src/runtime/mgcpacer.go``). Windows
    ``[start, end)`` with their CPU ``cores`` and whether each was ``throttled``; marks
    ``[mark_start, mark_end)``.

    >>> k = gc_window_keys([0.1 * i for i in range(30)], [0.1 * i + 0.1 for i in range(30)],
    ...                    [0.6 if i in (5, 15) else 0.4 for i in range(30)],
    ...                    [i in (5, 9) for i in range(30)], [0.52, 1.51], [0.55, 1.56])
    >>> round(k["cpu_window_gc_excess_cores"], 3), k["throttled_window_gc_share"]
    (0.2, 0.5)
    """
    out: dict[str, Any] = dict.fromkeys(GC_WINDOW_KEYS)
    a, b = np.asarray(start_s, dtype=float), np.asarray(end_s, dtype=float)
    c, th = np.asarray(cores, dtype=float), np.asarray(throttled, dtype=bool)
    ms, me = np.asarray(mark_start_s, dtype=float), np.asarray(mark_end_s, dtype=float)
    if c.size < MIN_WINDOWS:
        return out
    gc = (ms[None, :] < b[:, None]) & (me[None, :] > a[:, None])
    gc = gc.any(axis=1) if ms.size else np.zeros(c.size, dtype=bool)
    if gc.any() and (~gc).any():
        out["cpu_window_gc_excess_cores"] = float(c[gc].mean() - c[~gc].mean())
    if th.any():
        out["throttled_window_gc_share"] = float((th & gc).sum() / th.sum())
    return out


def gc_window_keys_from_samples(t_s: Sequence[float], usage_s: Sequence[float], nr_throttled: Sequence[float],
                                mark_start_s: Sequence[float], mark_end_s: Sequence[float]) -> dict[str, Any]:
    """:func:`gc_window_keys` for the lab: the watcher's samples (cumulative CPU [s] and throttled
    periods at ``t_s``) and the run's marks on the same clock."""
    return gc_window_keys(*_throttled_sample_windows(t_s, usage_s, nr_throttled), mark_start_s, mark_end_s)


def gc_window_keys_from_periods(end_s: Sequence[float], usage_s: Sequence[float], throttled: Sequence[bool],
                                mark_start_s: Sequence[float], mark_end_s: Sequence[float], t0_s: float,
                                t1_s: float) -> dict[str, Any]:
    """:func:`gc_window_keys` for the model: its periods that ended inside ``(t0_s, t1_s]`` and
    its marks."""
    return gc_window_keys(*_throttled_period_windows(end_s, usage_s, throttled, t0_s, t1_s), mark_start_s,
                          mark_end_s)


def gc_interval_keys(start_s: Sequence[float], end_s: Sequence[float], cores: Sequence[float],
                     throttled: Sequence[bool], edges_s: Sequence[float],
                     cycles_total: Sequence[float]) -> dict[str, Any]:
    """Whether the busiest moments of a group are its GC's, at the resolution of the scrapes that
    count the runtime's completed cycles. ``edges_s`` are scrape times (increasing) and
    ``cycles_total`` the cycle count read at each; an interval ``(edges[k], edges[k + 1]]`` has a
    cycle where the count rose over it. Each ~0.1 s window ``[start, end)`` (its CPU ``cores``,
    whether it was ``throttled``) belongs to the interval holding its midpoint. A cycle's mark
    lasts tens of milliseconds, so a 1 s interval's mean hides it; its busiest window does not:
    ``cpu_window_gc_interval_peak_excess_cores`` is the median over the intervals with a cycle of
    their busiest window minus the same median over the others (the spread of windows that have
    nothing to do with the GC cancels), ``throttled_window_gc_interval_share`` the share of the
    throttled windows in intervals with a cycle (against the share of all windows there when
    throttling ignores the GC).

    >>> edges = [float(k) for k in range(11)]
    >>> cycles = [0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]             # a cycle in every other second
    >>> start = [0.1 * i for i in range(100)]
    >>> cores = [0.9 if i % 20 == 5 else 0.5 + 0.01 * (i % 3) for i in range(100)]
    >>> k = gc_interval_keys(start, [a + 0.1 for a in start], cores, [c > 0.8 for c in cores], edges, cycles)
    >>> round(k["cpu_window_gc_interval_peak_excess_cores"], 3), k["throttled_window_gc_interval_share"]
    (0.38, 1.0)
    """
    out: dict[str, Any] = dict.fromkeys(GC_INTERVAL_KEYS)
    a, b = np.asarray(start_s, dtype=float), np.asarray(end_s, dtype=float)
    c, th = np.asarray(cores, dtype=float), np.asarray(throttled, dtype=bool)
    e, n = np.asarray(edges_s, dtype=float), np.asarray(cycles_total, dtype=float)
    if not (a.shape == b.shape == c.shape == th.shape):
        raise ValueError("start_s, end_s, cores and throttled differ in length")
    if e.shape != n.shape:
        raise ValueError(f"edges_s and cycles_total differ in length ({e.size} and {n.size})")
    if e.size < 2 or c.size < MIN_WINDOWS:
        return out
    if np.any(np.diff(e) <= 0):
        raise ValueError("edges_s must increase")
    with_gc = np.diff(n) > 0
    # (edges[k], edges[k + 1]] holds a midpoint m when searchsorted(edges, m, "left") == k + 1
    k = np.searchsorted(e, (a + b) / 2, side="left") - 1
    inside = (k >= 0) & (k < with_gc.size)
    k, c, th = k[inside], c[inside], th[inside]
    peaks = np.full(with_gc.size, -np.inf)
    np.maximum.at(peaks, k, c)
    seen = np.isfinite(peaks)
    gc_peaks, other_peaks = peaks[seen & with_gc], peaks[seen & ~with_gc]
    if gc_peaks.size >= MIN_INTERVALS and other_peaks.size >= MIN_INTERVALS:
        out["cpu_window_gc_interval_peak_excess_cores"] = float(np.median(gc_peaks) - np.median(other_peaks))
    if th.any():
        out["throttled_window_gc_interval_share"] = float(with_gc[k[th]].sum() / th.sum())
    return out


def gc_interval_keys_from_samples(t_s: Sequence[float], usage_s: Sequence[float], nr_throttled: Sequence[float],
                                  scrape_t_s: Sequence[float], cycles_total: Sequence[float]) -> dict[str, Any]:
    """:func:`gc_interval_keys` for the lab: the watcher's samples (cumulative CPU [s] and throttled
    periods at ``t_s``) and the scraped cycle count at ``scrape_t_s``, on the same clock. The
    count is the one the workload's last scrape read, up to one scrape interval before its
    timestamp, so a cycle that ended early in an interval can count in the one before: that blurs
    the lab's contrast, never sharpens it."""
    return gc_interval_keys(*_throttled_sample_windows(t_s, usage_s, nr_throttled), scrape_t_s, cycles_total)


def gc_interval_keys_from_periods(end_s: Sequence[float], usage_s: Sequence[float], throttled: Sequence[bool],
                                  cycle_end_s: Sequence[float], t0_s: float, t1_s: float,
                                  interval_s: float = 1.0) -> dict[str, Any]:
    """:func:`gc_interval_keys` for the model: its periods that ended inside ``(t0_s, t1_s]``, and
    its cycles' ends counted as a scrape every ``interval_s`` from ``t0_s`` would count them."""
    windows = _throttled_period_windows(end_s, usage_s, throttled, t0_s, t1_s)
    steps = int(np.floor((t1_s - t0_s) / interval_s + 1e-9))
    edges = t0_s + interval_s * np.arange(steps + 1)
    ends = np.sort(np.asarray(cycle_end_s, dtype=float))
    return gc_interval_keys(*windows, edges, np.searchsorted(ends, edges, side="right"))
