"""The tidy frame every :mod:`cfsim.io` reader returns, and helpers around it.

One row per sample, four columns, always in this order and with these dtypes:

============  ========================  =====================================================
column        dtype                     meaning
============  ========================  =====================================================
timestamp     ``datetime64[ns, UTC]``   sample time (Prometheus' millisecond resolution) [UTC]
metric        ``str``                   ``__name__``; for results that drop it (``rate()``
                                        ...) the name given with ``metric=`` or derived
                                        from the query, e.g. ``rate(x_total[5m])``
labels        ``str``                   canonical label set without ``__name__``,
                                        ``{k="v",...}`` sorted (see :mod:`cfsim.io.labels`)
value         ``float64``               sample value, NaN and +-Inf kept [unit of the metric]
============  ========================  =====================================================

Rows are sorted by ``metric``, ``labels``, ``timestamp``; a series is a (metric, labels) pair.
Label columns are not part of the frame (so frames from different sources always concatenate);
:func:`expand_labels` adds one column per label name when a wide view is wanted.
"""
from __future__ import annotations

import math
import re
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from cfsim.io.errors import MissingMetricsError
from cfsim.io.labels import parse_labels

__all__ = ["TIDY_COLUMNS", "TIMESTAMP_DTYPE", "empty_frame", "make_frame", "check_tidy",
           "expand_labels", "missing_metrics", "metric_from_query", "format_duration",
           "series_arrays"]

TIDY_COLUMNS = ("timestamp", "metric", "labels", "value")
TIMESTAMP_DTYPE = pd.DatetimeTZDtype("ns", "UTC")


def empty_frame() -> pd.DataFrame:
    """A tidy frame with no rows (the right columns and dtypes)."""
    return make_frame(np.empty(0, np.int64), [], [], np.empty(0, np.float64))


def make_frame(ts_ms: np.ndarray, metric: Sequence[str] | np.ndarray, labels: Sequence[str] | np.ndarray,
               value: np.ndarray, *, sort: bool = True) -> pd.DataFrame:
    """Build a tidy frame from parallel arrays.

    Parameters
    ----------
    ts_ms : ndarray of int64
        Timestamps [ms since the Unix epoch, UTC].
    metric, labels : sequence of str
        Metric name and canonical label string per row.
    value : ndarray of float
        Sample values.
    sort : bool
        Sort rows by metric, labels, timestamp (stable).
    """
    ts = np.asarray(ts_ms, dtype=np.int64).astype("datetime64[ms]").astype("datetime64[ns]")
    frame = pd.DataFrame({
        "timestamp": pd.Series(ts, dtype="datetime64[ns]").dt.tz_localize("UTC"),
        "metric": pd.Series(np.asarray(metric, dtype=object), dtype=str),
        "labels": pd.Series(np.asarray(labels, dtype=object), dtype=str),
        "value": np.asarray(value, dtype=np.float64),
    })
    if sort and len(frame):
        frame = frame.sort_values(["metric", "labels", "timestamp"], kind="stable", ignore_index=True)
    return frame


def check_tidy(frame: pd.DataFrame) -> None:
    """Raise ``ValueError`` unless ``frame`` has the tidy columns and dtypes."""
    if tuple(frame.columns[:4]) != TIDY_COLUMNS:
        raise ValueError(f"not a cfsim tidy frame: columns {list(frame.columns)}, expected {list(TIDY_COLUMNS)}")
    if frame["timestamp"].dtype != TIMESTAMP_DTYPE:
        raise ValueError(f"timestamp column must be {TIMESTAMP_DTYPE}, got {frame['timestamp'].dtype}")
    if frame["value"].dtype != np.float64:
        raise ValueError(f"value column must be float64, got {frame['value'].dtype}")


def expand_labels(frame: pd.DataFrame) -> pd.DataFrame:
    """Return a copy of ``frame`` with one extra column per label name (missing labels are NA).

    >>> f = make_frame(np.array([0]), ["up"], ['{job="a"}'], np.array([1.0]))
    >>> list(expand_labels(f).columns)
    ['timestamp', 'metric', 'labels', 'value', 'job']
    """
    parsed = {s: parse_labels(s) for s in frame["labels"].unique()}
    names = sorted({k for d in parsed.values() for k in d} - set(TIDY_COLUMNS))
    out = frame.copy()
    for name in names:
        out[name] = pd.Series(frame["labels"].map({s: d.get(name) for s, d in parsed.items()}), dtype="str")
    return out


def series_arrays(frame: pd.DataFrame) -> Iterable[tuple[str, str, np.ndarray, np.ndarray]]:
    """Yield ``(metric, labels, ts_ms, values)`` per series, timestamps ascending [ms]."""
    if not len(frame):
        return
    ts = frame["timestamp"].to_numpy(dtype="datetime64[ns]").astype("datetime64[ms]").astype(np.int64)
    values = frame["value"].to_numpy(dtype=np.float64)
    keys = frame["metric"].astype(str) + "\x00" + frame["labels"].astype(str)
    for key, idx in keys.groupby(keys, sort=True).indices.items():
        metric, labels = key.split("\x00", 1)
        t, v = ts[idx], values[idx]
        order = np.argsort(t, kind="stable")
        yield metric, labels, t[order], v[order]


def missing_metrics(frame: pd.DataFrame, needed: Mapping[str, Iterable[str]]) -> None:
    """Raise :class:`MissingMetricsError` if analyses need metrics that ``frame`` lacks.

    Parameters
    ----------
    frame : DataFrame
        A tidy frame (only its ``metric`` column is read); a mapping ``{metric: frame}`` such as
        :func:`cfsim.io.read_lab_run` returns is accepted too.
    needed : mapping of str to list of str
        Analysis name to the metric names it needs, e.g.
        ``{"throttling ratio": ["container_cpu_cfs_periods_total",
        "container_cpu_cfs_throttled_periods_total"]}``.

    Raises
    ------
    MissingMetricsError
        Naming each missing metric with every analysis that needs it, and the metrics present.

    >>> f = make_frame(np.array([0]), ["up"], ["{}"], np.array([1.0]))
    >>> missing_metrics(f, {"availability": ["up"]})
    >>> missing_metrics(f, {"throttling": ["cfs_periods_total"], "cpu": ["cfs_periods_total", "up"]})
    Traceback (most recent call last):
    ...
    cfsim.io.errors.MissingMetricsError: 1 metric(s) missing from the data:
      cfs_periods_total: needed by throttling, cpu
    available metrics: up
    """
    if isinstance(frame, Mapping):
        present = {str(k) for k, v in frame.items() if v is not None and len(v)}
    else:
        present = set(frame["metric"].astype(str).unique()) if len(frame) else set()
    missing: dict[str, list[str]] = {}
    for analysis, metrics in needed.items():
        for m in metrics:
            if m not in present:
                missing.setdefault(m, []).append(analysis)
    if missing:
        raise MissingMetricsError(missing, sorted(present))


_MATCHERS = re.compile(r'\{(?:[^{}"]|"(?:[^"\\]|\\.)*")*\}')


def metric_from_query(query: str) -> str:
    """A metric name for query results that carry no ``__name__``: the query without matchers.

    >>> metric_from_query('rate(container_cpu_usage_seconds_total{pod=~"api-.*"}[5m])')
    'rate(container_cpu_usage_seconds_total[5m])'
    >>> metric_from_query('sum by (pod) ( rate(x_total[1m]) )')
    'sum by (pod) (rate(x_total[1m]))'
    """
    q = _MATCHERS.sub("", query)
    q = re.sub(r"\s+", " ", q).strip()
    q = re.sub(r"\(\s+", "(", q)
    return re.sub(r"\s+\)", ")", q)


def format_duration(seconds: float) -> str:
    """Prometheus duration string for ``seconds`` [s].

    >>> format_duration(90), format_duration(300), format_duration(0.5), format_duration(3600)
    ('1m30s', '5m', '500ms', '1h')
    """
    ms = int(round(seconds * 1000))
    if ms <= 0 or not math.isfinite(seconds):
        raise ValueError(f"duration must be positive, got {seconds!r} s")
    out = []
    for unit, size in (("y", 365 * 86_400_000), ("w", 7 * 86_400_000), ("d", 86_400_000),
                       ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        if ms >= size:
            out.append(f"{ms // size}{unit}")
            ms %= size
    return "".join(out)
