"""get_prometheus_range against a loopback stand-in server (the real one is in tests/integration)."""
from __future__ import annotations

import json
import socket
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pandas as pd
import pytest

from cfsim.io import CfsimParseError, Connection, PrometheusAPIError, connect, get_prometheus_range

FAST = Connection(retries=3, backoff_s=0.01)


class _Handler(BaseHTTPRequestHandler):
    requests: list[dict[str, str]] = []
    mode = "ok"

    def log_message(self, *args):  # keep test output clean
        pass

    def do_POST(self):  # noqa: N802
        n = int(self.headers.get("Content-Length", 0))
        params = dict(urllib.parse.parse_qsl(self.rfile.read(n).decode()))
        headers = {k.lower(): v for k, v in self.headers.items()}
        type(self).requests.append({"path": self.path, **params, "_headers": headers})
        if self.mode == "flaky" and len(type(self).requests) <= 2:
            return self._send(503, b"overloaded")
        if self.mode == "auth":
            return self._send(401, b"Unauthorized")
        if self.mode == "error":
            return self._send(400, {"status": "error", "errorType": "bad_data", "error": "parse error"})
        if self.mode == "html":
            return self._send(502, b"<html>bad gateway</html>")
        if self.mode == "garbage":
            return self._send(200, b"{not json")
        start_ms = round(float(params["start"]) * 1000)
        end_ms = round(float(params["end"]) * 1000)
        step_ms = round(float(params["step"]) * 1000)
        if (end_ms - start_ms) / step_ms > 11_000:
            return self._send(400, {"status": "error", "errorType": "bad_data",
                                    "error": "exceeded maximum resolution of 11,000 points per timeseries"})
        first = start_ms - step_ms if self.mode == "overlap" else start_ms  # a server that repeats a point
        grid = range(first, end_ms + 1, step_ms)
        result = [{"metric": {"pod": "a"}, "values": [[t / 1000, str(t / 1000)] for t in grid]},
                  {"metric": {"pod": "b"}, "values": [[t / 1000, "NaN"] for t in grid if t % 2000 == 0]}]
        self._send(200, {"status": "success", "data": {"resultType": "matrix", "result": result},
                         "warnings": ["stand-in"]})

    def _send(self, code, body):
        blob = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(blob)))
        self.end_headers()
        self.wfile.write(blob)


@pytest.fixture()
def server():
    _Handler.requests = []
    _Handler.mode = "ok"
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_get_prometheus_range_chunks_and_concatenates(server):
    start, step = 1_700_000_000, 1.0
    end = start + 25_000  # 25,001 grid points: three requests at the default limit
    data, meta = get_prometheus_range(server, 'rate(x_total{pod=~".+"}[1m])', start, end, step)
    assert meta["requests"] == 3 and len(_Handler.requests) == 3
    for r in _Handler.requests:
        assert r["path"] == "/api/v1/query_range"
        assert (float(r["end"]) - float(r["start"])) / float(r["step"]) + 1 <= 11_000
    a = data[data["labels"] == '{pod="a"}']
    assert len(a) == 25_001 and not a["timestamp"].duplicated().any()
    assert a["timestamp"].iloc[0] == pd.Timestamp(start, unit="s", tz="UTC")
    assert np.allclose(a["value"], a["timestamp"].astype("int64") / 1e9)
    assert set(data["metric"]) == {"rate(x_total[1m])"}
    assert meta["warnings"] == ["stand-in"] and meta["step"] == 1.0 and meta["series"] == 2


def test_get_prometheus_range_small_chunks_equal_one_request(server):
    kw = dict(query="x", start=pd.Timestamp("2023-11-14T22:13:20Z"), end="2023-11-14T22:20:00Z", step="7s")
    one, meta1 = get_prometheus_range(server, **kw)
    many, meta2 = get_prometheus_range(server + "/api/v1/query_range", **kw, max_points=4)
    assert meta1["requests"] == 1 and meta2["requests"] == 15
    pd.testing.assert_frame_equal(one, many)


def test_get_prometheus_range_drops_points_repeated_across_chunks(server):
    _Handler.mode = "overlap"
    data, meta = get_prometheus_range(server, "x", 1_700_000_000, 1_700_000_099, 1, max_points=10)
    a = data[data["labels"] == '{pod="a"}']
    assert meta["requests"] == 10 and len(a) == 101  # 100 grid points + the one before the start
    assert not a["timestamp"].duplicated().any() and a["timestamp"].is_monotonic_increasing


def test_get_prometheus_range_errors(server):
    _Handler.mode = "error"
    with pytest.raises(PrometheusAPIError, match="parse error") as info:
        get_prometheus_range(server, "x", 0, 10, 1)
    assert info.value.http_status == 400 and info.value.error_type == "bad_data"
    _Handler.mode = "html"
    with pytest.raises(PrometheusAPIError, match="bad gateway"):
        get_prometheus_range(server, "x", 0, 10, 1, connection=FAST)
    _Handler.mode = "garbage"
    with pytest.raises(CfsimParseError, match="not valid JSON"):
        get_prometheus_range(server, "x", 0, 10, 1)
    with pytest.raises(ValueError):
        get_prometheus_range(server, "x", 10, 0, 1)
    with pytest.raises(ValueError):
        get_prometheus_range(server, "x", 0, 10, 1, max_points=20_000)


def test_get_prometheus_range_unreachable_server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(PrometheusAPIError, match="cannot connect") as err:
        get_prometheus_range(f"http://127.0.0.1:{port}", "x", 0, 10, 1, timeout=5)
    assert err.value.error_type == "unreachable"


def test_retries_with_backoff_on_5xx_then_succeeds(server):
    _Handler.mode = "flaky"
    data, meta = get_prometheus_range(server, "x", 0, 10, 1, connection=FAST)
    assert len(_Handler.requests) == 3 and meta["requests"] == 1 and len(data) > 0


def test_gives_up_after_the_retries(server):
    _Handler.mode = "html"  # 502 every time
    with pytest.raises(PrometheusAPIError, match="HTTP 502"):
        get_prometheus_range(server, "x", 0, 10, 1, connection=Connection(retries=2, backoff_s=0.01))
    assert len(_Handler.requests) == 3


def test_401_is_not_retried_and_says_what_to_give(server):
    _Handler.mode = "auth"
    with pytest.raises(PrometheusAPIError, match="401 Unauthorized.*--prometheus-user") as info:
        get_prometheus_range(server, "x", 0, 10, 1, connection=FAST)
    assert info.value.error_type == "unauthorized" and len(_Handler.requests) == 1
    with pytest.raises(PrometheusAPIError, match="401 Unauthorized: the server refused the credentials given"):
        get_prometheus_range(server, "x", 0, 10, 1, connection=connect(username="u", password="wrong"))


def test_connect_sends_headers_and_the_bearer_token(server, tmp_path):
    token = tmp_path / "token"
    token.write_text("abc.def\n")
    conn = connect(headers=["X-Scope-OrgID: team-a"], bearer_token_file=token)
    get_prometheus_range(server, "x", 0, 10, 1, connection=conn)
    sent = _Handler.requests[0]["_headers"]
    assert sent["x-scope-orgid"] == "team-a" and sent["authorization"] == "Bearer abc.def"
    basic = connect(username="u", password="p")
    assert basic.headers["Authorization"] == "Basic dTpw"
    with pytest.raises(ValueError, match="expected 'Name: value'"):
        connect(headers=["no colon here"])
    with pytest.raises(ValueError, match="choose one"):
        connect(bearer_token_file=token, username="u", password="p")
    with pytest.raises(ValueError, match="bearer token file"):
        connect(bearer_token_file=tmp_path / "missing")
