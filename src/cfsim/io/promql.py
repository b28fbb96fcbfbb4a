"""PromQL's ``rate``, ``increase``, ``delta`` and ``irate`` on tidy frames — the one place where
counters become rates.

The semantics are Prometheus' own (``extrapolatedRate`` and ``instantValue`` in
``promql/functions.go``, described in the querying/functions docs), re-implemented on numpy:

* **Window.**  At evaluation time ``T`` the range selector ``x[w]`` takes the samples with
  ``T - w < t <= T`` (left-open, Prometheus >= 3.0) or ``T - w <= t <= T`` (closed, Prometheus
  2.x); see ``compat``.  Fewer than two samples: no output row.
* **Counter resets.**  Whenever a sample is lower than the one before, the earlier value is added
  (the counter is assumed to have restarted from zero).
* **Extrapolation.**  The raw increase ``last - first (+ resets)`` covers ``sampled`` seconds
  between first and last sample.  It is stretched towards each window edge by the gap to that
  edge if the gap is below 1.1 x the average sample spacing, else by half an average spacing
  (the series is assumed to start or end inside the window).
* **Zero point.**  A counter is never extrapolated below zero: if the line through the samples
  hits zero closer to the first sample than the start extension, the extension stops there
  (``compat`` >= 2.51 applies this after the 1.1 rule, older versions before it).
* ``rate = increase / w`` [unit/s]; ``delta`` is ``increase`` without reset handling and zero
  point (for gauges); ``irate`` uses the last two samples in the window only.

Timestamps are handled in integer milliseconds, as Prometheus does, so results agree with a real
server to floating-point rounding (checked in ``tests/unit/test_io_promql.py`` against responses
of Prometheus 2.42).

Output rows are named like the query would be: ``rate(<metric>[<w>])`` with the same labels,
which is also the name :func:`cfsim.io.read_prometheus_json` derives from that query.
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from cfsim.io.tidy import empty_frame, format_duration, make_frame, series_arrays

__all__ = ["rate", "increase", "delta", "irate", "counter_to_rate", "parse_duration", "DEFAULT_COMPAT"]

DEFAULT_COMPAT = "3.0"
_DURATION = re.compile(r"(\d+)(ms|y|w|d|h|m|s)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000,
            "y": 31_536_000_000}


def parse_duration(window: float | str | pd.Timedelta) -> int:
    """A window as integer milliseconds; accepts seconds [s], ``"1m30s"`` strings or Timedelta.

    >>> parse_duration(10), parse_duration("1m30s"), parse_duration(pd.Timedelta("250ms"))
    (10000, 90000, 250)
    """
    if isinstance(window, str):
        s = window.strip()
        pos, total = 0, 0
        for m in _DURATION.finditer(s):
            if m.start() != pos:
                break
            total += int(m.group(1)) * _UNIT_MS[m.group(2)]
            pos = m.end()
        if pos != len(s) or not s:
            raise ValueError(f"not a Prometheus duration: {window!r}")
        ms = total
    elif isinstance(window, pd.Timedelta) or hasattr(window, "total_seconds"):
        ms = int(round(pd.Timedelta(window).total_seconds() * 1000))
    else:
        ms = int(round(float(window) * 1000))
    if ms <= 0:
        raise ValueError(f"window must be positive, got {window!r}")
    return ms


def _compat(compat: str) -> tuple[bool, bool]:
    """(left_open window, zero point applied after the 1.1 rule) for a Prometheus version."""
    parts = str(compat).lstrip("v").split(".")
    try:
        major = int(parts[0])
        minor = int(re.match(r"\d+", parts[1]).group()) if len(parts) > 1 else 0  # type: ignore[union-attr]
    except (ValueError, AttributeError):
        raise ValueError(f"compat must be a Prometheus version such as '2.42' or '3.0', got {compat!r}") from None
    return major >= 3, (major, minor) >= (2, 51)


def _times_ms(at: Any) -> np.ndarray:
    """Evaluation times as int64 ms: datetimes (naive = UTC), ISO strings or epoch seconds."""
    arr = at if isinstance(at, (list, tuple, np.ndarray, pd.Index, pd.Series)) else [at]
    if len(arr) == 0:
        return np.empty(0, np.int64)
    sample = arr.iloc[0] if isinstance(arr, pd.Series) else arr[0]
    if isinstance(sample, (int, float, np.integer, np.floating)) and not isinstance(sample, bool):
        return np.rint(np.asarray(arr, dtype=np.float64) * 1000).astype(np.int64)
    idx = pd.DatetimeIndex(pd.to_datetime(arr, utc=True))
    return idx.as_unit("ms").asi8.astype(np.int64)


_NAT = np.iinfo(np.int64).min


def _prepare(t: np.ndarray, v: np.ndarray, skip_nan: bool) -> tuple[np.ndarray, np.ndarray]:
    if t.size and t[0] == _NAT:  # samples without a time (NaT sorts first) cannot be in a window
        keep = t != _NAT
        t, v = t[keep], v[keep]
    if skip_nan:
        keep = ~np.isnan(v)
        t, v = t[keep], v[keep]
    if len(t) > 1 and np.any(t[1:] == t[:-1]):  # a TSDB holds one sample per ms; keep the last
        last = np.append(t[1:] != t[:-1], True)
        t, v = t[last], v[last]
    return t, v


def _window(t: np.ndarray, at: np.ndarray, range_ms: int, left_open: bool) -> tuple[np.ndarray, np.ndarray]:
    lo = np.searchsorted(t, at - range_ms, side="right" if left_open else "left")
    hi = np.searchsorted(t, at, side="right")
    return lo, hi


def _extrapolated(t: np.ndarray, v: np.ndarray, at: np.ndarray, range_ms: int, *, is_counter: bool,
                  is_rate: bool, left_open: bool, zero_after: bool) -> tuple[np.ndarray, np.ndarray]:
    """Return (mask over ``at`` where a result exists, results) for one series."""
    lo, hi = _window(t, at, range_ms, left_open)
    ok = hi - lo >= 2
    first, last, when = lo[ok], hi[ok] - 1, at[ok]
    result = v[last] - v[first]
    if is_counter and len(result):
        resets = np.nonzero(v[1:] < v[:-1])[0] + 1  # j with v[j] < v[j-1]
        if len(resets):
            a = np.searchsorted(resets, first, side="right")
            b = np.searchsorted(resets, last, side="right")
            for k in np.nonzero(b > a)[0]:
                acc = result[k]
                for j in resets[a[k]:b[k]]:  # same order of additions as Prometheus
                    acc += v[j - 1]
                result[k] = acc
    start = when - range_ms
    to_start = (t[first] - start).astype(np.float64) / 1000
    to_end = (when - t[last]).astype(np.float64) / 1000
    sampled = (t[last] - t[first]).astype(np.float64) / 1000
    average = sampled / (last - first).astype(np.float64)
    threshold = average * 1.1
    zero_ok = (result > 0) & (v[first] >= 0) if is_counter else np.zeros(len(result), bool)
    # a tiny increase over a large first value overflows to +Inf, as Go's float64 division does
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        to_zero = np.where(zero_ok, sampled * (v[first] / result), np.inf)
    if zero_after:
        to_start = np.where(to_start >= threshold, average / 2, to_start)
        to_start = np.where(to_zero < to_start, to_zero, to_start)
    else:
        to_start = np.where(to_zero < to_start, to_zero, to_start)
        to_start = np.where(to_start < threshold, to_start, average / 2)
    to_end = np.where(to_end < threshold, to_end, average / 2)
    factor = (sampled + to_start + to_end) / sampled
    if is_rate:
        factor = factor / (range_ms / 1000)
    return ok, result * factor


def _instant(t: np.ndarray, v: np.ndarray, at: np.ndarray, range_ms: int, *, is_rate: bool,
             left_open: bool) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = _window(t, at, range_ms, left_open)
    ok = hi - lo >= 2
    last = hi[ok] - 1
    prev = last - 1
    result = np.where(v[last] < v[prev], v[last], v[last] - v[prev]) if is_rate else v[last] - v[prev]
    interval = t[last] - t[prev]
    if is_rate:
        result = result / (interval.astype(np.float64) / 1000)
    good = interval > 0
    ok[np.nonzero(ok)[0][~good]] = False
    return ok, result[good]


def _apply(frame: pd.DataFrame, window: float | str, at: Any, func: str, compat: str,
           skip_nan: bool) -> pd.DataFrame:
    range_ms = parse_duration(window)
    left_open, zero_after = _compat(compat)
    at_ms = None if at is None else np.sort(np.unique(_times_ms(at)))
    name_suffix = f"[{format_duration(range_ms / 1000)}])"
    ts_out, names, labels_out, vals = [], [], [], []
    for metric, labels, t, v in series_arrays(frame):
        t, v = _prepare(t, v, skip_nan)
        when = t if at_ms is None else at_ms
        if func == "irate":
            ok, res = _instant(t, v, when, range_ms, is_rate=True, left_open=left_open)
        else:
            ok, res = _extrapolated(t, v, when, range_ms, is_counter=func != "delta",
                                    is_rate=func == "rate", left_open=left_open, zero_after=zero_after)
        if len(res):
            ts_out.append(when[ok])
            vals.append(res)
            names.append(np.full(len(res), f"{func}({metric}{name_suffix}", dtype=object))
            labels_out.append(np.full(len(res), labels, dtype=object))
    if not ts_out:
        return empty_frame()
    return make_frame(np.concatenate(ts_out), np.concatenate(names), np.concatenate(labels_out),
                      np.concatenate(vals))


_DOC_PARAMS = """
    Parameters
    ----------
    frame : DataFrame
        Tidy frame of raw samples (see :mod:`cfsim.io.tidy`); every series is treated separately.
    window_s : float or str
        Range of the selector, ``x[window]`` [s], or a Prometheus duration such as ``"5m"``.
    at : array-like, optional
        Evaluation times: datetimes (naive means UTC), ISO strings or epoch seconds [s].  By
        default each series is evaluated at its own sample times.
    compat : str
        Prometheus version whose rules to follow: ``"3.0"`` (default; left-open window) or a 2.x
        version such as ``"2.42"`` (closed window; before ``"2.51"`` the zero-point limit is
        applied before the 1.1 rule).
    skip_nan : bool
        Drop NaN samples first, as Prometheus drops staleness markers (dumps and API responses
        print those as plain NaN).

    Returns
    -------
    DataFrame
        Tidy frame named ``{func}(<metric>[<window>])``, one row per series and evaluation time
        with at least two samples in the window.
"""


def increase(frame: pd.DataFrame, window_s: float | str, at: Any = None, *, compat: str = DEFAULT_COMPAT,
             skip_nan: bool = True) -> pd.DataFrame:
    """PromQL ``increase(x[window])``: counter increase over the window, extrapolated [unit].
    """
    return _apply(frame, window_s, at, "increase", compat, skip_nan)


def rate(frame: pd.DataFrame, window_s: float | str, at: Any = None, *, compat: str = DEFAULT_COMPAT,
         skip_nan: bool = True) -> pd.DataFrame:
    """PromQL ``rate(x[window])``: per-second average increase of a counter [unit/s].
    """
    return _apply(frame, window_s, at, "rate", compat, skip_nan)


def delta(frame: pd.DataFrame, window_s: float | str, at: Any = None, *, compat: str = DEFAULT_COMPAT,
          skip_nan: bool = False) -> pd.DataFrame:
    """PromQL ``delta(x[window])`` for gauges: no reset handling, no zero point [unit].
    """
    return _apply(frame, window_s, at, "delta", compat, skip_nan)


def irate(frame: pd.DataFrame, window_s: float | str, at: Any = None, *, compat: str = DEFAULT_COMPAT,
          skip_nan: bool = True) -> pd.DataFrame:
    """PromQL ``irate(x[window])``: rate between the last two samples in the window [unit/s].
    """
    return _apply(frame, window_s, at, "irate", compat, skip_nan)


_RATE_EXAMPLE = """
    Examples
    --------
    Samples every 10 s; at t = 30 s the window (10 s, 30 s] holds two of them, 5 apart over
    10 s; the window's start is within 1.1 x the spacing, so the rate covers all 20 s:

    >>> ms = np.array([0, 10_000, 20_000, 30_000])  # sample times [ms]
    >>> f = make_frame(ms, ["c_total"] * 4, ["{}"] * 4, np.array([0., 5., 10., 15.]))
    >>> out = rate(f, "20s", at=[30])
    >>> out["metric"].tolist(), out["value"].tolist()
    (['rate(c_total[20s])'], [0.5])
"""

for _f in (increase, rate, delta, irate):
    _f.__doc__ = ((_f.__doc__ or "").rstrip() + "\n" + _DOC_PARAMS.replace("{func}", _f.__name__)
                  + (_RATE_EXAMPLE if _f is rate else ""))


def counter_to_rate(frame: pd.DataFrame, window_s: float | str, step_s: float | str, start: Any = None,
                    end: Any = None, *, func: str = "rate", compat: str = DEFAULT_COMPAT) -> pd.DataFrame:
    """Evaluate ``rate`` (or ``increase``/``irate``/``delta``) on a step grid, like a range query.

    Parameters
    ----------
    frame : DataFrame
        Tidy frame of raw counter samples.
    window_s : float or str
        Range of the selector [s] or a Prometheus duration.
    step_s : float or str
        Grid step [s] or a Prometheus duration.
    start, end : datetime, str or float, optional
        Grid bounds (epoch seconds [s] or datetimes); default the first and last sample time.
        The grid is ``start, start + step, ...`` up to and including ``end``, as ``query_range``.
    func : {"rate", "increase", "irate", "delta"}
    compat : str
        See :func:`rate`.

    Returns
    -------
    DataFrame
        Tidy frame, named ``{func}(<metric>[<window>])``.
    """
    funcs = {"rate": rate, "increase": increase, "irate": irate, "delta": delta}
    if func not in funcs:
        raise ValueError(f"func must be one of {sorted(funcs)}, got {func!r}")
    step_ms = parse_duration(step_s)
    if not len(frame) and (start is None or end is None):
        return empty_frame()
    ts = frame["timestamp"]
    start_ms = int(_times_ms(start)[0]) if start is not None else int(ts.min().value // 1_000_000)
    end_ms = int(_times_ms(end)[0]) if end is not None else int(ts.max().value // 1_000_000)
    if end_ms < start_ms:
        raise ValueError("end must not be before start")
    grid = np.arange(start_ms, end_ms + 1, step_ms, dtype=np.int64)
    return funcs[func](frame, window_s, grid / 1000, compat=compat)
