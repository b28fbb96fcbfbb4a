"""Prometheus HTTP API responses (``/api/v1/query_range`` and ``/api/v1/query``) as tidy frames.

The envelope is ``{"status": "success"|"error", "data": {"resultType": ..., "result": ...},
"warnings": [...], "infos": [...]}``.  Result types:

* ``matrix`` (range queries): ``[{"metric": {...}, "values": [[ts, "v"], ...]}, ...]``
* ``vector`` (instant queries): ``[{"metric": {...}, "value": [ts, "v"]}, ...]``
* ``scalar``: ``[ts, "v"]``;  ``string``: ``[ts, "text"]``

Timestamps are float seconds (millisecond resolution), values are strings such as ``"3.5"``,
``"NaN"``, ``"+Inf"``, ``"-Inf"``.  Native-histogram points (``"histograms"``) are skipped with
a warning in ``meta``.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd

from cfsim.io.errors import CfsimParseError, PrometheusAPIError
from cfsim.io.labels import format_labels
from cfsim.io.tidy import empty_frame, make_frame, metric_from_query

__all__ = ["read_prometheus_json", "parse_prometheus_response"]

FORMAT = "prometheus-api-json"


def read_prometheus_json(filename: str | os.PathLike | IO[str], *, metric: str | None = None,
                         query: str | None = None, step: float | None = None
                         ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a saved Prometheus API response (range or instant query).

    Parameters
    ----------
    filename : path or text file object
        The JSON body as returned by the server.
    metric : str, optional
        Name for series without ``__name__`` (``rate()``, ``sum()`` ... drop it).  Series that
        keep ``__name__`` keep their own name.
    query : str, optional
        The PromQL query that produced the response; recorded in ``meta`` and, when ``metric``
        is not given, used to name nameless series (:func:`cfsim.io.tidy.metric_from_query`).
    step : float, optional
        The range query's step [s], recorded in ``meta`` (a saved response does not say).

    Returns
    -------
    data : DataFrame
        Tidy frame (see :mod:`cfsim.io.tidy`).
    meta : dict
        ``source``, ``format``, ``result_type``, ``query``, ``step``, ``metric``, ``series``,
        ``samples``,
        ``warnings`` (server warnings and infos plus the reader's own notes) and, for string
        results, ``string``.

    Raises
    ------
    CfsimParseError
        Not JSON (with line and column) or not the API shape (with the JSON path, e.g.
        ``data.result[3].values[17]``).
    PrometheusAPIError
        The file holds an error response (``"status": "error"``).
    """
    source = getattr(filename, "name", None) if hasattr(filename, "read") else os.fspath(filename)
    source = str(source or "<buffer>")
    try:
        if hasattr(filename, "read"):
            obj = json.load(filename)  # type: ignore[arg-type]
        else:
            with open(Path(filename), "rb") as fh:
                obj = json.load(fh)
    except json.JSONDecodeError as exc:
        raise CfsimParseError(source, f"not valid JSON: {exc.msg}", line=exc.lineno, column=exc.colno) from None
    except UnicodeDecodeError as exc:
        raise CfsimParseError(source, f"not UTF-8 text at byte {exc.start}") from None
    data, meta = parse_prometheus_response(obj, source=source, metric=metric, query=query)
    meta["step"] = step
    return data, meta


def _fail(source: str, path: str, message: str) -> CfsimParseError:
    return CfsimParseError(source, message, path=path)


#: the latest Unix time [s] a ``datetime64[ns]`` holds (2262-04-11): a larger "second" is a millisecond
MAX_UNIX_S = 9_223_372_036.0


def _timestamp_ms(source: str, path: str, ts: Any) -> int:
    if isinstance(ts, bool) or not isinstance(ts, (int, float)):
        if isinstance(ts, str):
            try:
                ts = float(ts)
            except ValueError:
                raise _fail(source, path, f"timestamp must be a number [s], got {ts!r}") from None
        else:
            raise _fail(source, path, f"timestamp must be a number [s], got {ts!r}")
    if not math.isfinite(ts):
        raise _fail(source, path, f"timestamp must be finite, got {ts!r}")
    if abs(ts) > MAX_UNIX_S:
        # milliseconds (or nanoseconds) where the API gives seconds: the frame's datetime64[ns]
        # would wrap around to a wrong date without a word
        raise _fail(source, path, f"timestamp {ts!r} is not Unix seconds (beyond the year 2262; milliseconds? "
                                  f"the Prometheus API gives seconds)")
    return int(round(ts * 1000))


def _value(source: str, path: str, v: Any) -> float:
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            raise _fail(source, path, f"value is not a number: {v!r}") from None
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    raise _fail(source, path, f"value must be a string such as \"1.5\", \"NaN\" or \"+Inf\", got {v!r}")


def _point(source: str, path: str, p: Any) -> tuple[int, float]:
    if not isinstance(p, list) or len(p) != 2:
        raise _fail(source, path, f"expected a [timestamp, \"value\"] pair, got {json.dumps(p)[:80]}")
    return _timestamp_ms(source, path + "[0]", p[0]), _value(source, path + "[1]", p[1])


def _series_labels(source: str, path: str, item: Any) -> dict[str, str]:
    if not isinstance(item, dict):
        raise _fail(source, path, f"expected an object with \"metric\", got {type(item).__name__}")
    labels = item.get("metric", {})
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise _fail(source, path + ".metric", "expected an object of string label values")
    return labels


def parse_prometheus_response(obj: Any, *, source: str = "<response>", metric: str | None = None,
                              query: str | None = None, http_status: int | None = None
                              ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Turn a decoded API response into ``(data, meta)``; see :func:`read_prometheus_json`."""
    if not isinstance(obj, dict):
        raise _fail(source, "$", f"expected a JSON object (the API envelope), got {type(obj).__name__}")
    status = obj.get("status")
    if status == "error":
        raise PrometheusAPIError(source, str(obj.get("errorType", "")), str(obj.get("error", "")), http_status)
    if status != "success":
        raise _fail(source, "status", f"expected \"success\" or \"error\", got {status!r}")
    data = obj.get("data")
    if not isinstance(data, dict):
        raise _fail(source, "data", "missing or not an object")
    rtype = data.get("resultType")
    result = data.get("result")
    warnings = [str(w) for w in obj.get("warnings", []) or []] + [f"info: {w}" for w in obj.get("infos", []) or []]
    fallback = metric if metric is not None else (metric_from_query(query) if query else None)
    meta: dict[str, Any] = {"source": source, "format": FORMAT, "result_type": rtype, "query": query,
                            "metric": fallback, "warnings": warnings}
    unnamed = 0

    def name_of(labels: dict[str, str]) -> str:
        nonlocal unnamed
        if "__name__" in labels:
            return labels["__name__"]
        unnamed += 1
        return fallback if fallback is not None else ""

    ts_parts: list[np.ndarray] = []
    val_parts: list[np.ndarray] = []
    metrics: list[str] = []
    labelsets: list[str] = []
    counts: list[int] = []
    if rtype in ("matrix", "vector"):
        if not isinstance(result, list):
            raise _fail(source, "data.result", f"expected a list for resultType {rtype!r}")
        seen: set[tuple[str, str]] = set()
        for i, item in enumerate(result):
            path = f"data.result[{i}]"
            labels = _series_labels(source, path, item)
            if rtype == "matrix":
                points = item.get("values", [])
                if not isinstance(points, list):
                    raise _fail(source, path + ".values", "expected a list of [timestamp, \"value\"] pairs")
                pairs = [_point(source, f"{path}.values[{j}]", p) for j, p in enumerate(points)]
                if "histograms" in item:
                    warnings.append(f"{path}: {len(item['histograms'])} native-histogram points skipped")
            else:
                if "value" in item:
                    pairs = [_point(source, path + ".value", item["value"])]
                elif "histogram" in item:
                    warnings.append(f"{path}: native-histogram sample skipped")
                    pairs = []
                else:
                    raise _fail(source, path, "vector element has no \"value\"")
            name, canon = name_of(labels), format_labels(labels)
            if (name, canon) in seen:
                raise _fail(source, path, f"duplicate series {name}{canon}")
            seen.add((name, canon))
            if pairs:
                t, v = zip(*pairs)
                ts_parts.append(np.fromiter(t, np.int64, len(t)))
                val_parts.append(np.fromiter(v, np.float64, len(v)))
                metrics.append(name)
                labelsets.append(canon)
                counts.append(len(t))
        meta["series"] = len(result)
    elif rtype in ("scalar", "string"):
        if not isinstance(result, list) or len(result) != 2:
            raise _fail(source, "data.result", f"expected [timestamp, value] for resultType {rtype!r}")
        t = _timestamp_ms(source, "data.result[0]", result[0])
        if rtype == "string":
            if not isinstance(result[1], str):
                raise _fail(source, "data.result[1]", "expected a string")
            meta["string"] = result[1]
            meta["series"] = 0
            warnings.append("string result: the text is in meta['string'], data has no rows")
        else:
            ts_parts.append(np.array([t], np.int64))
            val_parts.append(np.array([_value(source, "data.result[1]", result[1])]))
            metrics.append(fallback if fallback is not None else "scalar")
            labelsets.append("{}")
            counts.append(1)
            meta["series"] = 1
    else:
        raise _fail(source, "data.resultType", f"expected matrix, vector, scalar or string, got {rtype!r}")
    if unnamed and fallback is None:
        warnings.append(f"{unnamed} series have no __name__ and neither metric= nor query= was given; "
                        "their metric is ''")
    if ts_parts:
        # The tidy order (metric, labels, timestamp) by series: a response holds each series once
        # and the API returns its points in time order, so ordering the series gives the rows'
        # order without sorting every row (most of a lab run's reading time); a series whose
        # points are not in time order sends the whole frame through make_frame's row sort.
        in_time = all(t.size < 2 or bool(np.all(t[1:] >= t[:-1])) for t in ts_parts)
        order = sorted(range(len(metrics)), key=lambda i: (metrics[i], labelsets[i])) if in_time \
            else range(len(metrics))
        n = np.asarray([counts[i] for i in order])
        frame = make_frame(np.concatenate([ts_parts[i] for i in order]),
                           np.repeat(np.asarray([metrics[i] for i in order], object), n),
                           np.repeat(np.asarray([labelsets[i] for i in order], object), n),
                           np.concatenate([val_parts[i] for i in order]), sort=not in_time)
    else:
        frame = empty_frame()
    meta["samples"] = len(frame)
    return frame, meta
