"""Read a container CPU usage history for ``cfsim vpa replay``.

Formats:

* CSV ``timestamp,cpu_cores`` (header optional): one metrics-server reading per row, i.e. the mean
  usage over the window that ENDS at ``timestamp``. ``timestamp`` is Unix seconds or ISO 8601
  (``2026-01-01T00:00:00Z``); an optional third column names the container/pod (each name gets its
  own strictly-later sampler, all feed one aggregate histogram, as pods of one Deployment do).
* A Prometheus ``/api/v1/query_range`` JSON export of container CPU usage: either a rate in cores
  (``rate(container_cpu_usage_seconds_total[...])``) or the raw counter
  ``container_cpu_usage_seconds_total`` (turned into per-interval mean cores, counter resets
  skipped). One series per container. Read with :func:`cfsim.io.read_prometheus_json` when that
  module is present, else with a minimal reader here.

Malformed input raises :class:`UsageParseError` whose message starts with ``file:line:`` (CSV) or
``file: json.path:`` (JSON).
"""
from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path

Series = dict[str, list[tuple[float, float]]]  # container -> [(timestamp_s, cpu_cores)]

try:  # reuse the shared error type when cfsim.io exists, so callers can catch one thing
    from cfsim.io.errors import CfsimParseError as _BaseParseError
except Exception:  # noqa: BLE001
    _BaseParseError = ValueError  # type: ignore[misc,assignment]


class UsageParseError(ValueError):
    """Malformed usage history; the message names the file and the line (or JSON path)."""


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


def read_usage_csv(path: str | Path) -> Series:
    """``timestamp,cpu_cores[,container]`` rows -> series, sorted by time."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"usage file not found: {path}")
    out: Series = {}
    try:
        text = path.read_text()
    except UnicodeDecodeError as exc:
        raise UsageParseError(f"{path}: not UTF-8 text at byte {exc.start}") from None
    seen_data = False
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        cells = [c.strip() for c in line.split(",")]
        if not seen_data and cells[0].lower() in ("timestamp", "time", "t", "t_s", "ts"):
            continue  # header
        if len(cells) < 2:
            raise UsageParseError(f"{path}:{lineno}: expected 'timestamp,cpu_cores' (got {line!r})")
        try:
            ts = _parse_time(cells[0])
        except ValueError:
            raise UsageParseError(f"{path}:{lineno}: timestamp is neither Unix seconds nor ISO 8601: "
                                  f"{cells[0]!r}") from None
        try:
            cores = float(cells[1])
        except ValueError:
            raise UsageParseError(f"{path}:{lineno}: cpu_cores is not a number: {cells[1]!r}") from None
        if not math.isfinite(cores) or cores < 0:
            raise UsageParseError(f"{path}:{lineno}: cpu_cores must be a finite number >= 0 (got {cells[1]})")
        if not math.isfinite(ts):
            raise UsageParseError(f"{path}:{lineno}: timestamp must be finite (got {cells[0]})")
        name = cells[2] if len(cells) > 2 and cells[2] else "container"
        out.setdefault(name, []).append((ts, cores))
        seen_data = True
    if not out:
        raise UsageParseError(f"{path}: no usage rows (expected 'timestamp,cpu_cores')")
    return {k: sorted(v) for k, v in out.items()}


def _counter_to_cores(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out = []
    for (t0, v0), (t1, v1) in zip(points, points[1:]):
        if t1 <= t0 or v1 < v0:  # duplicate or counter reset
            continue
        out.append((t1, (v1 - v0) / (t1 - t0)))
    return out


def _minimal_prometheus(path: Path) -> list[tuple[str, dict, list[tuple[float, float]]]]:
    try:
        obj = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise UsageParseError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
    if not isinstance(obj, dict) or obj.get("status") != "success":
        raise UsageParseError(f"{path}: status: expected a successful Prometheus API response")
    data = obj.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
        raise UsageParseError(f"{path}: data: expected resultType 'matrix' (a query_range export)")
    out = []
    for i, item in enumerate(data["result"]):
        labels = item.get("metric", {}) if isinstance(item, dict) else None
        values = item.get("values") if isinstance(item, dict) else None
        if not isinstance(labels, dict) or not isinstance(values, list):
            raise UsageParseError(f"{path}: data.result[{i}]: expected {{\"metric\": ..., \"values\": [...]}}")
        pts = []
        for j, pair in enumerate(values):
            try:
                pts.append((float(pair[0]), float(pair[1])))
            except (TypeError, ValueError, IndexError):
                raise UsageParseError(f"{path}: data.result[{i}].values[{j}]: expected [timestamp, \"value\"]") from None
        name = labels.get("__name__", "")
        out.append((name, labels, pts))
    return out


def read_usage_prometheus(path: str | Path) -> Series:
    """A query_range export of container CPU usage -> series (cores)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"usage file not found: {path}")
    series: list[tuple[str, str, list[tuple[float, float]]]] = []
    try:
        from cfsim.io.prometheus_json import read_prometheus_json
    except Exception:  # noqa: BLE001 - cfsim.io not available: minimal reader
        for name, labels, pts in _minimal_prometheus(path):
            key = ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "__name__") or "container"
            series.append((name, key, pts))
    else:
        try:
            frame, meta = read_prometheus_json(path)
        except _BaseParseError as exc:
            raise UsageParseError(str(exc)) from None
        if meta.get("result_type") != "matrix":
            raise UsageParseError(f"{path}: data.resultType: expected 'matrix' (a query_range export), "
                                  f"got {meta.get('result_type')!r}")
        for (name, labels), grp in frame.groupby(["metric", "labels"], sort=True):
            ts = grp["timestamp"].astype("int64").to_numpy() / 1e9
            vals = grp["value"].to_numpy()
            series.append((str(name), str(labels) or "container", list(zip(ts.tolist(), vals.tolist()))))
    out: Series = {}
    for name, key, pts in series:
        pts = sorted((t, v) for t, v in pts if math.isfinite(v))
        if name.endswith("_total"):
            pts = _counter_to_cores(pts)
        if pts:
            out[key or "container"] = pts
    if not out:
        raise UsageParseError(f"{path}: data.result: no usable CPU usage samples")
    return out


def read_usage(path: str | Path) -> Series:
    """CSV or Prometheus JSON, by content (a JSON object starts with ``{``)."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"usage file not found: {p}")
    with open(p, "rb") as fh:
        head = fh.read(256).lstrip()
    if head.startswith(b"{"):
        return read_usage_prometheus(p)
    return read_usage_csv(p)
