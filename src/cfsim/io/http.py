"""A live Prometheus over its HTTP API: range queries (``/api/v1/query_range``, chunked), raw
samples, series (``/api/v1/series``) and label values; auth, TLS and retries in a :class:`Connection`.

Prometheus refuses a range query whose ``(end - start) / step`` exceeds 11,000 ("exceeded maximum
resolution of 11,000 points per timeseries").  :func:`get_prometheus_range` splits the step grid
``start, start + step, ..., <= end`` into consecutive pieces of at most ``max_points`` grid points,
asks for each with a POST (no URL-length limit on long queries), and concatenates the pieces.
Because each piece starts on the grid, the result equals one big query; rows are de-duplicated on
(metric, labels, timestamp) all the same.

Every request goes through one :class:`Connection`: extra headers (a bearer token, a tenant
header), basic auth, TLS (a CA file, or no verification), a timeout, and retries with exponential
backoff on what may pass (HTTP 429 and 5xx, timeouts, reset connections). What will not pass
(401/403, a TLS failure, a refused connection, a bad query) raises :class:`PrometheusAPIError` at
once, its ``error_type`` saying which (``unauthorized``, ``forbidden``, ``tls``, ``unreachable``,
``timeout``, ``http``, or the server's own ``bad_data``/``execution``).
"""
from __future__ import annotations

import base64
import json
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from cfsim.io.errors import CfsimParseError, PrometheusAPIError
from cfsim.io.prometheus_json import parse_prometheus_response
from cfsim.io.promql import _times_ms, parse_duration
from cfsim.io.tidy import empty_frame

__all__ = ["get_prometheus_range", "get_prometheus_samples", "get_prometheus_series",
           "get_prometheus_label_values", "Connection", "connect", "MAX_POINTS"]

#: Prometheus' limit on points per series in one range query.
MAX_POINTS = 11_000
#: HTTP statuses worth another try (rate limited, overloaded or restarting server or proxy)
RETRY_STATUS = (429, 500, 502, 503, 504)


@dataclass(frozen=True)
class Connection:
    """How requests reach a Prometheus: headers (auth), TLS context, timeout [s], retries.

    ``retries`` more attempts follow a retryable failure, after ``backoff_s``, 2 x, 4 x ... that.
    """

    headers: Mapping[str, str] = field(default_factory=dict)
    ssl_context: ssl.SSLContext | None = None
    timeout_s: float = 60.0
    retries: int = 3
    backoff_s: float = 0.5


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep or not name.strip() or any(c.isspace() for c in name.strip()):
        raise ValueError(f"header {text!r}: expected 'Name: value'")
    return name.strip(), value.strip()


def connect(*, headers: Sequence[str] | Mapping[str, str] = (), bearer_token_file: str | Path | None = None,
            username: str | None = None, password: str | None = None, ca_file: str | Path | None = None,
            insecure_skip_tls_verify: bool = False, timeout_s: float = 60.0, retries: int = 3,
            backoff_s: float = 0.5) -> Connection:
    """Build a :class:`Connection` from what a user gives on a command line.

    Parameters
    ----------
    headers : ``["Name: value", ...]`` or a mapping
        Extra headers on every request (``X-Scope-OrgID: tenant``, ``Authorization: Bearer ...``).
    bearer_token_file : path, optional
        A file holding a token, sent as ``Authorization: Bearer <token>`` (a Kubernetes service
        account token, an OpenShift ``oc whoami -t``).
    username, password : str, optional
        HTTP basic auth.
    ca_file : path, optional
        PEM bundle of the CA(s) that signed the server's certificate.
    insecure_skip_tls_verify : bool
        Do not verify the server's certificate (testing only).
    timeout_s, retries, backoff_s
        Per-request timeout [s]; further attempts after a retryable failure; first pause [s].

    Raises
    ------
    ValueError
        A malformed header, an unreadable token or CA file, auth given twice.
    """
    hdrs: dict[str, str] = {}
    items = headers.items() if isinstance(headers, Mapping) else (_header(h) for h in headers)
    for name, value in items:
        hdrs[name] = value
    if bearer_token_file is not None:
        try:
            token = Path(bearer_token_file).read_text().strip()
        except OSError as exc:
            raise ValueError(f"bearer token file {bearer_token_file}: {exc.strerror or exc}") from None
        if not token:
            raise ValueError(f"bearer token file {bearer_token_file}: empty")
        hdrs["Authorization"] = f"Bearer {token}"
    if username is not None:
        if "Authorization" in hdrs:
            raise ValueError("basic auth and an Authorization header (or bearer token) are given together: choose one")
        cred = base64.b64encode(f"{username}:{password or ''}".encode()).decode()
        hdrs["Authorization"] = f"Basic {cred}"
    ctx = None
    if insecure_skip_tls_verify:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif ca_file is not None:
        try:
            ctx = ssl.create_default_context(cafile=str(ca_file))
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"CA file {ca_file}: {getattr(exc, 'strerror', None) or exc}") from None
    return Connection(hdrs, ctx, float(timeout_s), int(retries), float(backoff_s))


def _tls_reason(reason: BaseException) -> str:
    msg = getattr(reason, "verify_message", None) or getattr(reason, "reason", None) or str(reason)
    return f"TLS handshake failed: {msg} (give the server's CA with --prometheus-ca FILE, or " \
           f"--insecure-skip-tls-verify to test)"


def _api(url: str, path: str) -> str:
    base = url.rstrip("/")
    for suffix in ("/api/v1/query_range", "/api/v1/query"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return base + path


def _request(endpoint: str, params: Sequence[tuple[str, str]], conn: Connection, method: str = "POST"
             ) -> tuple[int, bytes]:
    """One API call with retries; returns (status, body) or raises :class:`PrometheusAPIError`."""
    encoded = urllib.parse.urlencode(list(params))
    hdrs = {"Accept": "application/json", **conn.headers}
    if method == "POST":
        url, data = endpoint, encoded.encode()
        hdrs["Content-Type"] = "application/x-www-form-urlencoded"
    else:
        url, data = (endpoint + "?" + encoded if encoded else endpoint), None
    attempt = 0
    while True:
        try:
            req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
        except ValueError as exc:
            raise PrometheusAPIError(endpoint, "bad_url", f"{exc} (expected e.g. http://prometheus:9090)") from None
        retry_why = None
        try:
            with urllib.request.urlopen(req, timeout=conn.timeout_s, context=conn.ssl_context) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as err:
            body = err.read()
            if err.code == 401:
                why = ("the server refused the credentials given (check the user and password, or the token)"
                       if any(k.lower() == "authorization" for k in conn.headers) else
                       "the server wants credentials (--prometheus-user with --prometheus-password-file, "
                       "--prometheus-bearer-token-file, or --prometheus-header)")
                raise PrometheusAPIError(endpoint, "unauthorized", f"HTTP 401 Unauthorized: {why}", 401) from None
            if err.code == 403:
                raise PrometheusAPIError(endpoint, "forbidden", "HTTP 403 Forbidden: the credentials are not "
                                         "allowed to query this server", 403) from None
            if err.code not in RETRY_STATUS or attempt >= conn.retries:
                return err.code, body
            retry_why = f"HTTP {err.code}"
        except urllib.error.URLError as err:
            reason = err.reason
            if isinstance(reason, (ssl.SSLError, ssl.CertificateError)):
                raise PrometheusAPIError(endpoint, "tls", _tls_reason(reason)) from None
            if isinstance(reason, (TimeoutError, socket.timeout, ConnectionResetError)) and attempt < conn.retries:
                retry_why = str(reason)
            elif isinstance(reason, (TimeoutError, socket.timeout)):
                raise PrometheusAPIError(endpoint, "timeout", f"no answer within {conn.timeout_s:g} s "
                                         f"({attempt + 1} attempts)") from None
            else:
                what = getattr(reason, "strerror", None) or str(reason)
                raise PrometheusAPIError(endpoint, "unreachable", f"cannot connect: {what}") from None
        except (TimeoutError, socket.timeout, ConnectionResetError) as exc:  # while reading the body
            if attempt >= conn.retries:
                raise PrometheusAPIError(endpoint, "timeout", f"{exc or type(exc).__name__} "
                                         f"({attempt + 1} attempts)") from None
            retry_why = str(exc) or type(exc).__name__
        except ssl.SSLError as exc:
            raise PrometheusAPIError(endpoint, "tls", _tls_reason(exc)) from None
        assert retry_why is not None
        time.sleep(conn.backoff_s * 2 ** attempt)
        attempt += 1


def _decode(status: int, body: bytes, where: str) -> Any:
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        if status >= 400:
            text = body[:200].decode("utf-8", "replace").strip()
            raise PrometheusAPIError(where, "http", text or "(empty body)", status) from None
        raise CfsimParseError(where, f"not valid JSON (is this a Prometheus API URL?): {exc}") from None


def _ask(endpoint: str, params: dict[str, str], where: str, conn: Connection,
         metric: str | None, query: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    status, body = _request(endpoint, list(params.items()), conn)
    obj = _decode(status, body, where)
    return parse_prometheus_response(obj, source=where, metric=metric, query=query, http_status=status)


def _connection(connection: Connection | None, timeout: float | None, headers: Mapping[str, str] | None
                ) -> Connection:
    conn = connection or Connection()
    if timeout is not None or headers:
        conn = Connection({**conn.headers, **(headers or {})}, conn.ssl_context,
                          conn.timeout_s if timeout is None else float(timeout), conn.retries, conn.backoff_s)
    return conn


def _data_list(obj: Any, where: str, status: int) -> list:
    if isinstance(obj, dict) and obj.get("status") == "error":
        raise PrometheusAPIError(where, str(obj.get("errorType", "")), str(obj.get("error", "")), status)
    if not isinstance(obj, dict) or obj.get("status") != "success" or not isinstance(obj.get("data"), list):
        raise CfsimParseError(where, 'expected {"status": "success", "data": [...]}', path="data")
    return obj["data"]


def get_prometheus_series(url: str, match: Sequence[str], start: Any, end: Any, *,
                          connection: Connection | None = None) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The series matching any of the selectors ``match`` in ``[start, end]`` (``/api/v1/series``).

    Returns
    -------
    data : DataFrame
        One row per series: ``metric`` and ``labels`` (canonical ``{k="v",...}`` without
        ``__name__``), sorted.
    meta : dict
        ``source``, ``format``, ``match``, ``start``, ``end``, ``series``.
    """
    from cfsim.io.labels import format_labels

    conn = connection or Connection()
    start_ms, end_ms = int(_times_ms(start)[0]), int(_times_ms(end)[0])
    endpoint = _api(url, "/api/v1/series")
    params = [("match[]", m) for m in match] + [("start", f"{start_ms / 1000:.3f}"), ("end", f"{end_ms / 1000:.3f}")]
    where = f"{endpoint} {' or '.join(match)}"
    status, body = _request(endpoint, params, conn)
    items = _data_list(_decode(status, body, where), where, status)
    rows = sorted({(str(d.get("__name__", "")), format_labels({k: v for k, v in d.items() if k != "__name__"}))
                   for d in items if isinstance(d, dict)})
    data = pd.DataFrame(rows, columns=["metric", "labels"])
    return data, {"source": endpoint, "format": "prometheus-api-series", "match": list(match),
                  "start": pd.Timestamp(start_ms, unit="ms", tz="UTC"),
                  "end": pd.Timestamp(end_ms, unit="ms", tz="UTC"),
                  "series": len(data)}


def get_prometheus_label_values(url: str, label: str, start: Any = None, end: Any = None, *,
                                connection: Connection | None = None) -> tuple[list[str], dict[str, Any]]:
    """All values of ``label`` (``"__name__"``: every metric name) seen in ``[start, end]``."""
    conn = connection or Connection()
    endpoint = _api(url, f"/api/v1/label/{urllib.parse.quote(label, safe='')}/values")
    params = []
    if start is not None:
        params.append(("start", f"{int(_times_ms(start)[0]) / 1000:.3f}"))
    if end is not None:
        params.append(("end", f"{int(_times_ms(end)[0]) / 1000:.3f}"))
    status, body = _request(endpoint, params, conn, method="GET")
    values = sorted(str(v) for v in _data_list(_decode(status, body, endpoint), endpoint, status))
    return values, {"source": endpoint, "format": "prometheus-api-label-values", "label": label,
                    "values": len(values)}


def _bounds_ms(start: Any, end: Any) -> tuple[int, int]:
    """A request's ``[start, end]`` in epoch ms (ValueError when end is before start)."""
    start_ms, end_ms = int(_times_ms(start)[0]), int(_times_ms(end)[0])
    if end_ms < start_ms:
        raise ValueError("end must not be before start")
    return start_ms, end_ms


def _merge_chunks(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """One tidy frame from the answers of a chunked query: a sample two chunks both returned
    counts once (the first), sorted by series and time."""
    nonempty = [f for f in frames if len(f)]
    if not nonempty:
        return empty_frame()
    data = pd.concat(nonempty, ignore_index=True).drop_duplicates(["metric", "labels", "timestamp"], keep="first")
    return data.sort_values(["metric", "labels", "timestamp"], kind="stable", ignore_index=True)


def get_prometheus_range(url: str, query: str, start: Any, end: Any, step: float | str, *,
                         metric: str | None = None, max_points: int = MAX_POINTS, timeout: float | None = None,
                         headers: Mapping[str, str] | None = None, connection: Connection | None = None
                         ) -> tuple[pd.DataFrame, dict[str, Any]]:
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
    timeout : float, optional
        Per-request timeout [s] (default the connection's, 60 s).
    headers : mapping, optional
        Extra HTTP headers (e.g. ``Authorization``), on top of the connection's.
    connection : Connection, optional
        Auth, TLS and retries (:func:`connect`).

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
    start_ms, end_ms = _bounds_ms(start, end)
    step_ms = parse_duration(step)
    endpoint = _api(url, "/api/v1/query_range")
    conn = _connection(connection, timeout, headers)
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
        frame, meta = _ask(endpoint, params, where, conn, metric, query)
        requests += 1
        frames.append(frame)
        warnings += [w for w in meta["warnings"] if w not in warnings]
        result_type = meta["result_type"]
        chunk_start = chunk_end + step_ms
    data = _merge_chunks(frames)
    meta_out = {"source": endpoint, "format": "prometheus-api-json", "query": query,
                "start": pd.Timestamp(start_ms, unit="ms", tz="UTC"), "end": pd.Timestamp(end_ms, unit="ms", tz="UTC"),
                "step": step_ms / 1000, "requests": requests, "result_type": result_type,
                "series": int(data.groupby(["metric", "labels"]).ngroups) if len(data) else 0,
                "samples": len(data), "warnings": warnings}
    return data, meta_out


def get_prometheus_samples(url: str, selector: str, start: Any, end: Any, *, chunk: float | str = "1h",
                           timeout: float | None = None, headers: Mapping[str, str] | None = None,
                           connection: Connection | None = None) -> tuple[pd.DataFrame, dict[str, Any]]:
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
    timeout : float, optional
        Per-request timeout [s].
    headers : mapping, optional
        Extra HTTP headers.
    connection : Connection, optional
        Auth, TLS and retries (:func:`connect`).

    Returns
    -------
    data, meta
        Tidy frame and ``source``, ``format``, ``query`` (the selector), ``start``, ``end``,
        ``requests``, ``series``, ``samples``, ``warnings``.
    """
    start_ms, end_ms = _bounds_ms(start, end)
    chunk_ms = parse_duration(chunk)
    endpoint = _api(url, "/api/v1/query")
    conn = _connection(connection, timeout, headers)
    frames, warnings, requests = [], [], 0
    upper = end_ms
    while upper >= start_ms:
        lower = max(start_ms, upper - chunk_ms)
        # +1 ms: a left-open window (Prometheus 3) must still include a sample exactly at `lower`
        span = upper - lower + 1
        params = {"query": f"{selector}[{span}ms]", "time": f"{upper / 1000:.3f}"}
        frame, meta = _ask(endpoint, params, f"{endpoint} {params['query']} @ {params['time']}", conn,
                           None, selector)
        requests += 1
        frames.append(frame[frame["timestamp"] >= pd.Timestamp(lower, unit="ms", tz="UTC")])
        warnings += [w for w in meta["warnings"] if w not in warnings]
        upper = lower - 1
    data = _merge_chunks(frames)
    return data, {"source": endpoint, "format": "prometheus-api-json", "query": selector,
                  "start": pd.Timestamp(start_ms, unit="ms", tz="UTC"),
                  "end": pd.Timestamp(end_ms, unit="ms", tz="UTC"),
                  "requests": requests, "series": int(data.groupby(["metric", "labels"]).ngroups) if len(data) else 0,
                  "samples": len(data), "warnings": warnings}
