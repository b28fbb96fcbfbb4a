"""Range queries against a live Prometheus (``/api/v1/query_range``), chunked.

Prometheus refuses a range query whose ``(end - start) / step`` exceeds 11,000 ("exceeded maximum
resolution of 11,000 points per timeseries").  :func:`get_prometheus_range` splits the step grid
``start, start + step, ..., <= end`` into consecutive pieces of at most ``max_points`` grid points,
asks for each with a POST (no URL-length limit on long queries), and concatenates the pieces.
Because each piece starts on the grid, the result equals one big query; rows are de-duplicated on
(metric, labels, timestamp) all the same.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Mapping

import pandas as pd

from cfsim.io.errors import CfsimParseError, PrometheusAPIError
from cfsim.io.prometheus_json import parse_prometheus_response
from cfsim.io.promql import _times_ms, parse_duration
from cfsim.io.tidy import empty_frame

__all__ = ["get_prometheus_range", "get_prometheus_samples", "MAX_POINTS"]

#: Prometheus' limit on points per series in one range query.
MAX_POINTS = 11_000


def _api(url: str, path: str) -> str:
    base = url.rstrip("/")
    for suffix in ("/api/v1/query_range", "/api/v1/query"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return base + path


def _post(endpoint: str, params: dict[str, str], timeout: float, headers: Mapping[str, str]) -> tuple[int, bytes]:
    body = urllib.parse.urlencode(params).encode()
    req = urllib.request.Request(endpoint, data=body, method="POST", headers={
        "Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()
    except urllib.error.URLError as err:
        raise PrometheusAPIError(endpoint, "connection", str(err.reason)) from None


def _ask(endpoint: str, params: dict[str, str], where: str, timeout: float, headers: Mapping[str, str] | None,
         metric: str | None, query: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    status, body = _post(endpoint, params, timeout, headers or {})
    try:
        obj = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        if status >= 400:
            raise PrometheusAPIError(where, "http", body[:200].decode("utf-8", "replace"), status) from None
        raise CfsimParseError(where, f"not valid JSON: {exc}") from None
    return parse_prometheus_response(obj, source=where, metric=metric, query=query, http_status=status)


def get_prometheus_range(url: str, query: str, start: Any, end: Any, step: float | str, *,
                         metric: str | None = None, max_points: int = MAX_POINTS, timeout: float = 60.0,
                         headers: Mapping[str, str] | None = None) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Run a PromQL range query on a live server and return ``(data, meta)``.

    Parameters
    ----------
    url : str
        Server base URL (``http://127.0.0.1:9090``) or the full ``.../api/v1/query_range`` URL.
    query : str
        PromQL expression.
    start, end : datetime, str or float
        Range bounds (naive datetimes are UTC; numbers are epoch seconds [s]).
    step : float or str
        Resolution [s] or a Prometheus duration (``"15s"``).
    metric : str, optional
        Name for series without ``__name__``; default derived from ``query``.
    max_points : int
        Most grid points asked for per request [-]; at most Prometheus' 11,000.
    timeout : float
        Per-request timeout [s].
    headers : mapping, optional
        Extra HTTP headers (e.g. ``Authorization``).

    Returns
    -------
    data : DataFrame
        Tidy frame (see :mod:`cfsim.io.tidy`).
    meta : dict
        ``source`` (endpoint), ``format``, ``query``, ``start``/``end`` (UTC Timestamps),
        ``step`` [s], ``requests``, ``result_type``, ``series``, ``samples``, ``warnings``.

    Raises
    ------
    PrometheusAPIError
        The server answered with an error (message, ``errorType`` and HTTP status) or could not be
        reached.
    CfsimParseError
        The server's answer is not a Prometheus API response.
    """
    if not 1 <= max_points <= MAX_POINTS:
        raise ValueError(f"max_points must be in [1, {MAX_POINTS}], got {max_points}")
    start_ms = int(_times_ms(start)[0])
    end_ms = int(_times_ms(end)[0])
    step_ms = parse_duration(step)
    if end_ms < start_ms:
        raise ValueError("end must not be before start")
    endpoint = _api(url, "/api/v1/query_range")
    frames = []
    warnings: list[str] = []
    result_type = "matrix"
    requests = 0
    chunk_start = start_ms
    while chunk_start <= end_ms:
        chunk_end = min(end_ms, chunk_start + (max_points - 1) * step_ms)
        params = {"query": query, "start": f"{chunk_start / 1000:.3f}", "end": f"{chunk_end / 1000:.3f}",
                  "step": f"{step_ms / 1000:.3f}"}
        where = f"{endpoint} [{params['start']}, {params['end']}]"
        frame, meta = _ask(endpoint, params, where, timeout, headers, metric, query)
        requests += 1
        frames.append(frame)
        warnings += [w for w in meta["warnings"] if w not in warnings]
        result_type = meta["result_type"]
        chunk_start = chunk_end + step_ms
    nonempty = [f for f in frames if len(f)]
    if nonempty:
        data = pd.concat(nonempty, ignore_index=True)
        data = data.drop_duplicates(["metric", "labels", "timestamp"], keep="first")
        data = data.sort_values(["metric", "labels", "timestamp"], kind="stable", ignore_index=True)
    else:
        data = empty_frame()
    meta_out = {"source": endpoint, "format": "prometheus-api-json", "query": query,
                "start": pd.Timestamp(start_ms, unit="ms", tz="UTC"), "end": pd.Timestamp(end_ms, unit="ms", tz="UTC"),
                "step": step_ms / 1000, "requests": requests, "result_type": result_type,
                "series": int(data.groupby(["metric", "labels"]).ngroups) if len(data) else 0,
                "samples": len(data), "warnings": warnings}
    return data, meta_out


def get_prometheus_samples(url: str, selector: str, start: Any, end: Any, *, chunk: float | str = "1h",
                           timeout: float = 60.0, headers: Mapping[str, str] | None = None
                           ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The raw samples of ``selector`` in ``[start, end]``, with their own scrape timestamps.

    Asks ``/api/v1/query`` for the range selector ``selector[<chunk>]`` at the end of each chunk
    (an instant query of a range vector returns the stored samples, not step-aligned points), so
    :func:`cfsim.io.rate` on the result reproduces the server's ``rate()`` exactly.

    Parameters
    ----------
    url : str
        Server base URL.
    selector : str
        A series selector such as ``container_cpu_usage_seconds_total{pod="api-1"}``.
    start, end : datetime, str or float
        Bounds, both included (epoch seconds [s] or datetimes; naive means UTC).
    chunk : float or str
        Length of the range asked for per request [s] or a duration; bounds the response size.
    timeout : float
        Per-request timeout [s].
    headers : mapping, optional
        Extra HTTP headers.

    Returns
    -------
    data, meta
        Tidy frame and ``source``, ``format``, ``query`` (the selector), ``start``, ``end``,
        ``requests``, ``series``, ``samples``, ``warnings``.
    """
    start_ms = int(_times_ms(start)[0])
    end_ms = int(_times_ms(end)[0])
    chunk_ms = parse_duration(chunk)
    if end_ms < start_ms:
        raise ValueError("end must not be before start")
    endpoint = _api(url, "/api/v1/query")
    frames, warnings, requests = [], [], 0
    upper = end_ms
    while upper >= start_ms:
        lower = max(start_ms, upper - chunk_ms)
        # +1 ms: a left-open window (Prometheus 3) must still include a sample exactly at `lower`
        span = upper - lower + 1
        params = {"query": f"{selector}[{span}ms]", "time": f"{upper / 1000:.3f}"}
        frame, meta = _ask(endpoint, params, f"{endpoint} {params['query']} @ {params['time']}", timeout,
                           headers, None, selector)
        requests += 1
        frames.append(frame[frame["timestamp"] >= pd.Timestamp(lower, unit="ms", tz="UTC")])
        warnings += [w for w in meta["warnings"] if w not in warnings]
        upper = lower - 1
    nonempty = [f for f in frames if len(f)]
    if nonempty:
        data = pd.concat(nonempty, ignore_index=True).drop_duplicates(["metric", "labels", "timestamp"])
        data = data.sort_values(["metric", "labels", "timestamp"], kind="stable", ignore_index=True)
    else:
        data = empty_frame()
    return data, {"source": endpoint, "format": "prometheus-api-json", "query": selector,
                  "start": pd.Timestamp(start_ms, unit="ms", tz="UTC"), "end": pd.Timestamp(end_ms, unit="ms", tz="UTC"),
                  "requests": requests, "series": int(data.groupby(["metric", "labels"]).ngroups) if len(data) else 0,
                  "samples": len(data), "warnings": warnings}
