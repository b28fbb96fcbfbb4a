"""Container CPU usage histories, as the VPA recommender consumes them (``cfsim vpa replay``).

``read_usage(path) -> (series, meta)``: ``series`` maps a container (or pod) name to its
``[(timestamp_s, cpu_cores), ...]`` readings in time order; ``meta`` says where they came from
(``source``, ``format``, ``containers``, ``samples``). Formats, told apart by content:

* CSV ``timestamp,cpu_cores`` (header optional): one metrics-server reading per row, i.e. the mean
  usage over the window that ENDS at ``timestamp``. ``timestamp`` is Unix seconds or ISO 8601
  (``2026-01-01T00:00:00Z``); an optional third column names the container/pod (each name gets its
  own strictly-later sampler, all feed one aggregate histogram, as pods of one Deployment do).
* A Prometheus ``/api/v1/query_range`` JSON export of container CPU usage: either a rate in cores
  (``rate(container_cpu_usage_seconds_total[...])``) or the raw counter
  ``container_cpu_usage_seconds_total`` (turned into per-interval mean cores, counter resets
  skipped). One series per container; read with :func:`cfsim.io.read_prometheus_json`.

:func:`usage_series` turns any tidy frame of such series (a file's or a live query's) into
``series``. Malformed input raises :class:`UsageParseError` (a :class:`~cfsim.io.CfsimParseError`)
whose message starts with ``file:line:`` (CSV) or ``file: json.path:`` (JSON).
"""
from __future__ import annotations

import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from cfsim.io.errors import CfsimParseError, PrometheusAPIError
from cfsim.io.prometheus_json import read_prometheus_json

__all__ = ["Series", "UsageParseError", "read_usage", "usage_series"]

Series = dict[str, list[tuple[float, float]]]  # container -> [(timestamp_s, cpu_cores)]


class UsageParseError(CfsimParseError):
    """Malformed usage history; the message names the file and the line (or JSON path)."""


def read_usage(path: str | Path) -> tuple[Series, dict[str, Any]]:
    """A usage history file (CSV or Prometheus JSON, by content) -> ``(series, meta)``."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"usage file not found: {p}")
    with open(p, "rb") as fh:
        head = fh.read(256).lstrip()
    if head.startswith(b"{"):
        series, fmt = _read_prometheus(p), "prometheus-api-json"
    else:
        series, fmt = _read_csv(p), "csv"
    meta = {"source": str(p), "format": fmt, "containers": sorted(series),
            "samples": sum(len(v) for v in series.values())}
    return series, meta


def usage_series(frame: pd.DataFrame, source: str = "<frame>") -> Series:
    """A tidy frame (:mod:`cfsim.io.tidy`) of container CPU usage -> series in cores: one per
    ``(metric, labels)``; a counter (a metric named ``*_total``) becomes per-interval mean cores."""
    out: Series = {}
    for (name, labels), grp in frame.groupby(["metric", "labels"], sort=True):
        ts = grp["timestamp"].astype("int64").to_numpy() / 1e9
        pts = sorted((t, v) for t, v in zip(ts.tolist(), grp["value"].to_numpy().tolist()) if math.isfinite(v))
        if str(name).endswith("_total"):
            pts = _counter_to_cores(pts)
        if pts:
            out[str(labels) or "container"] = pts
    if not out:
        raise UsageParseError(source, "no usable CPU usage samples", path="data.result")
    return out


def _read_prometheus(path: Path) -> Series:
    try:
        frame, meta = read_prometheus_json(path)
    except PrometheusAPIError as exc:
        raise UsageParseError(str(path), f"a saved error response, not usage: {exc.error_type}: "
                                         f"{exc.error}") from None
    if meta.get("result_type") != "matrix":
        raise UsageParseError(str(path), f"expected 'matrix' (a query_range export), "
                                         f"got {meta.get('result_type')!r}", path="data.resultType")
    return usage_series(frame, str(path))


def _parse_time(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        pass
    t = text.strip()
    if t.endswith("Z"):
        t = t[:-1] + "+00:00"
    dt = datetime.fromisoformat(t)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def _read_csv(path: Path) -> Series:
    """``timestamp,cpu_cores[,container]`` rows -> series, sorted by time."""
    out: Series = {}
    try:
        text = path.read_text()
    except UnicodeDecodeError as exc:
        raise UsageParseError(str(path), f"not UTF-8 text at byte {exc.start}") from None
    seen_data = False
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        cells = [c.strip() for c in line.split(",")]
        if not seen_data and cells[0].lower() in ("timestamp", "time", "t", "t_s", "ts"):
            continue  # header
        if len(cells) < 2:
            raise UsageParseError(str(path), f"expected 'timestamp,cpu_cores' (got {line!r})", line=lineno)
        try:
            ts = _parse_time(cells[0])
        except ValueError:
            raise UsageParseError(str(path), f"timestamp is neither Unix seconds nor ISO 8601: {cells[0]!r}",
                                  line=lineno) from None
        try:
            cores = float(cells[1])
        except ValueError:
            raise UsageParseError(str(path), f"cpu_cores is not a number: {cells[1]!r}", line=lineno) from None
        if not math.isfinite(cores) or cores < 0:
            raise UsageParseError(str(path), f"cpu_cores must be a finite number >= 0 (got {cells[1]})",
                                  line=lineno)
        if not math.isfinite(ts):
            raise UsageParseError(str(path), f"timestamp must be finite (got {cells[0]})", line=lineno)
        name = cells[2] if len(cells) > 2 and cells[2] else "container"
        out.setdefault(name, []).append((ts, cores))
        seen_data = True
    if not out:
        raise UsageParseError(str(path), "no usage rows (expected 'timestamp,cpu_cores')")
    return {k: sorted(v) for k, v in out.items()}


def _counter_to_cores(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out = []
    for (t0, v0), (t1, v1) in zip(points, points[1:]):
        if t1 <= t0 or v1 < v0:  # duplicate or counter reset
            continue
        out.append((t1, (v1 - v0) / (t1 - t0)))
    return out
