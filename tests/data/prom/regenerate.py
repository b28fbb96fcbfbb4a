"""Regenerate the real Prometheus fixtures in this folder (needs /usr/bin/promtool and prometheus).

Run ``python tests/data/prom/regenerate.py`` from the repository root.  It writes

* ``input.om``            OpenMetrics text, the single source of every other file here;
* ``prometheus_self.prom``  the server's own ``/metrics`` scrape (Prometheus text format; 2.42
  does not offer OpenMetrics there);
* ``client_python.om``  an OpenMetrics exposition written by prometheus_client (``_created``
  samples, exemplars, a label value with quotes, a comma and a backslash);
* ``dump.txt``            ``promtool tsdb dump`` of the TSDB built from ``input.om``;
* ``lab_run/``            a run folder shaped like ``cfsim.lab.runner`` writes it (manifest
  ``exports`` section, ``prom/raw.jsonl``, ``prom/rate.jsonl``, plus ``prom/samples.jsonl`` of raw
  samples), every line a real response body of the loopback server;
* ``api/*.json``          real ``/api/v1/query_range`` and ``/api/v1/query`` responses of a
  loopback ``prometheus`` serving that TSDB, plus ``api/index.json`` (query, start, end, step,
  HTTP status and Prometheus version of each response).

The series are small but exercise what the readers and ``cfsim.io.promql`` must get right:
jittered scrape times, a counter reset, a gap longer than the extrapolation threshold, a counter
starting near zero (the zero-point rule), label values with quotes, commas and backslashes, and
NaN / +Inf gauge values.
"""
from __future__ import annotations

import json
import math
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
T0 = 1_700_000_000  # 2023-11-14T22:13:20Z [s]


def _om_escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(pairs: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{_om_escape(v)}"' for k, v in pairs.items()) + "}"


def build_openmetrics() -> str:
    rng = random.Random(6)
    lines = ["# HELP cfsim_requests Requests served.", "# TYPE cfsim_requests counter"]

    def counter(labels, times, values):
        for t, v in zip(times, values):
            lines.append(f"cfsim_requests_total{_labels(labels)} {v!r} {t:.3f}")

    # A: 5 s scrapes with +-200 ms jitter, 3.5 req/s, a reset (restart) at t0+150 s.
    times = [T0 + 5 * i + rng.randint(-200, 200) / 1000 for i in range(61)]
    values, acc = [], 1000.0
    for i, t in enumerate(times):
        if i == 30:
            acc = 2.0
        elif i:
            acc += 3.5 * (t - times[i - 1]) + rng.choice([0.0, 1.0, 2.0])
        values.append(round(acc, 3))
    counter({"container": "api", "pod": "api-1"}, times, values)
    # B: starts late near zero (zero-point rule), 7 s scrapes, 60 s gap in the middle.
    times = [T0 + 42 + 7 * i for i in range(30) if not 12 <= i < 20]
    values = [round(0.5 + 1.25 * (t - times[0]), 3) for t in times]
    counter({"container": "api", "pod": "api-2"}, times, values)
    # C: awkward label values; 15 s scrapes.
    times = [T0 + 3 + 15 * i for i in range(21)]
    values = [float(10 * i * i) for i in range(21)]
    counter({"container": "side,car", "path": 'say "hi", C:\\tmp\\x'}, times, values)
    # D: a counter that is created at 0 and resets twice quickly.
    times = [T0 + 100 + 5 * i for i in range(30)]
    values, acc = [], 0.0
    for i in range(30):
        if i in (10, 11):
            acc = 0.0
        elif i:
            acc += 4 + i % 3
        values.append(acc)
    counter({"container": "db", "pod": "db-0"}, times, values)

    # E: created at t0+50 at 6.25 (zero point 5 s back, between 0.5x and 1.1x the 7 s spacing):
    # Prometheus < 2.51 and >= 2.51 extrapolate its first windows differently.
    times = [T0 + 50 + 7 * i for i in range(30)]
    counter({"container": "api", "pod": "api-3"}, times, [6.25 + 1.25 * (t - times[0]) for t in times])

    lines += ["# HELP cfsim_temperature A gauge with NaN and +Inf.", "# TYPE cfsim_temperature gauge"]
    for i in range(40):
        t = T0 + 10 * i
        v = "NaN" if i in (5, 6) else "+Inf" if i == 20 else "-Inf" if i == 21 else repr(20 + math.sin(i / 4))
        lines.append(f'cfsim_temperature{{room="lab"}} {v} {t:.3f}')

    lines += ["# HELP cfsim_latency_seconds Latency.", "# TYPE cfsim_latency_seconds histogram"]
    for i in range(20):
        t = T0 + 15 * i
        c1, c2, c3 = 3 * i, 5 * i, 6 * i
        for le, c in (("0.1", c1), ("0.5", c2), ("+Inf", c3)):
            lines.append(f'cfsim_latency_seconds_bucket{{le="{le}"}} {c} {t:.3f}')
        lines.append(f"cfsim_latency_seconds_count {c3} {t:.3f}")
        lines.append(f"cfsim_latency_seconds_sum {0.12 * c3!r} {t:.3f}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


# (file stem, endpoint, query, start offset [s], end offset [s], step [s])
QUERIES = [
    ("raw_requests", "query_range", "cfsim_requests_total", 0, 300, 5),
    ("rate_10s", "query_range", "rate(cfsim_requests_total[10s])", 0, 300, 5),
    ("rate_30s_step7", "query_range", "rate(cfsim_requests_total[30s])", 1, 300, 7),
    ("increase_1m_step3", "query_range", "increase(cfsim_requests_total[1m])", 2, 300, 3),
    ("rate_42s_step1", "query_range", "rate(cfsim_requests_total[42s])", 0, 300, 1),
    ("irate_20s", "query_range", "irate(cfsim_requests_total[20s])", 0, 300, 5),
    ("delta_temp_1m", "query_range", "delta(cfsim_temperature[1m])", 0, 400, 10),
    ("temperature", "query_range", "cfsim_temperature", 0, 400, 10),
    ("bucket_rate_1m", "query_range", "rate(cfsim_latency_seconds_bucket[1m])", 0, 300, 15),
    ("empty_range", "query_range", "does_not_exist_total", 0, 300, 5),
    ("instant_vector", "query", "cfsim_requests_total", 200, None, None),
    ("instant_scalar", "query", "scalar(sum(cfsim_requests_total))", 200, None, None),
    ("instant_string", "query", '"hello, world"', 200, None, None),
    ("error_bad_query", "query_range", "rate(cfsim_requests_total[10s]", 0, 300, 5),
    ("error_too_many_points", "query_range", "cfsim_requests_total", 0, 300, 0.01),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def client_python_exposition() -> bytes:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
    from prometheus_client.openmetrics.exposition import generate_latest

    reg = CollectorRegistry()
    c = Counter("cfsim_demo_requests", "Requests.", ["path"], registry=reg)
    c.labels('say "hi", C:\\tmp').inc(3)
    c.labels("/api").inc(1.5, exemplar={"trace_id": "abc123"})
    h = Histogram("cfsim_demo_latency_seconds", "Latency.", buckets=(0.1, 0.5), registry=reg)
    for x in (0.05, 0.2, 0.7, 0.3):
        h.observe(x)
    Gauge("cfsim_demo_temperature_celsius", "Temperature.", unit="celsius", registry=reg).set(21.5)
    Info("cfsim_demo_build", "Build.", registry=reg).info({"version": "1.2.3"})
    return generate_latest(reg)


LAB_RATES = {
    "requests_per_s": "rate(cfsim_requests_total[30s])",
    "requests_increase_1m": "increase(cfsim_requests_total[1m])",
    "mean_latency_inverse": "rate(cfsim_latency_seconds_count[1m]) / rate(cfsim_latency_seconds_sum[1m])",
    "latency_p99": "histogram_quantile(0.99, sum by (le) (rate(cfsim_latency_seconds_bucket[1m])))",
}


def build_lab_run(base: str, version_line: str) -> None:
    """A folder laid out like a ``cfsim.lab.runner`` run (prom/<kind>.jsonl, one response body per
    line, 0-based line numbers in manifest["exports"]), plus prom/samples.jsonl of raw samples."""
    root = HERE / "lab_run"
    shutil.rmtree(root, ignore_errors=True)
    (root / "prom").mkdir(parents=True)
    q0, q1, step = T0 - 2.0, T0 + 301.0, 1.0
    exports = {"start_s": q0, "end_s": q1, "step_s": step, "raw": {}, "rate": {}, "samples": {}, "empty": []}
    bodies: dict[str, list[bytes]] = {"raw": [], "rate": [], "samples": []}

    def get(endpoint: str, params: dict) -> bytes:
        status, body = _get(f"{base}/api/v1/{endpoint}?{urllib.parse.urlencode(params)}")
        assert status == 200 and b"\n" not in body, body
        return body

    def range_query(query: str) -> bytes:
        return get("query_range", {"query": query, "start": f"{q0:.3f}", "end": f"{q1:.3f}", "step": f"{step:g}"})

    def keep(kind: str, name: str, query: str, body: bytes) -> None:
        exports[kind][name] = {"line": len(bodies[kind]), "query": query}
        bodies[kind].append(body)

    for metric in ("cfsim_requests_total", "cfsim_latency_seconds_count", "cfsim_latency_seconds_sum",
                   "does_not_exist_total"):
        body = range_query(metric)
        if not json.loads(body)["data"]["result"]:
            exports["empty"].append(metric)
            continue
        keep("raw", metric, metric, body)
        selector = f"{metric}[{int(round((q1 - q0) * 1000)) + 1}ms]"
        keep("samples", metric, selector, get("query", {"query": selector, "time": f"{q1:.3f}"}))
    for name, query in LAB_RATES.items():
        keep("rate", name, query, range_query(query))
    for kind, lines in bodies.items():
        (root / "prom" / f"{kind}.jsonl").write_bytes(b"".join(body + b"\n" for body in lines))
    manifest = {"run_id": "fixture", "prometheus_version": version_line, "exports": exports, "status": "ok"}
    (root / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    (root / "summary.json").write_text(json.dumps({"throughput_per_s": None}, indent=1) + "\n")


def main() -> None:
    (HERE / "client_python.om").write_bytes(client_python_exposition())
    om = build_openmetrics()
    (HERE / "input.om").write_text(om)
    work = Path(tempfile.mkdtemp(prefix="cfsim-prom-"))
    proc = None
    try:
        subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(HERE / "input.om"),
                        str(work / "data")], check=True, capture_output=True)
        (work / "data" / "wal").mkdir(exist_ok=True)
        with open(HERE / "dump.txt", "wb") as out:
            subprocess.run(["promtool", "tsdb", "dump", str(work / "data")], check=True, stdout=out)
        port = _free_port()
        (work / "prometheus.yml").write_text("global: {}\n")
        proc = subprocess.Popen(
            ["prometheus", f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={work / 'data'}",
             "--storage.tsdb.retention.time=100y", f"--web.listen-address=127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                if _get(base + "/-/ready")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        (HERE / "prometheus_self.prom").write_bytes(_get(base + "/metrics")[1])
        version = json.loads(_get(base + "/api/v1/status/buildinfo")[1])["data"]["version"]
        (HERE / "api").mkdir(exist_ok=True)
        index = {}
        for stem, endpoint, query, s0, s1, step in QUERIES:
            params = {"query": query, "time" if endpoint == "query" else "start": T0 + s0}
            if endpoint == "query_range":
                params.update(end=T0 + s1, step=step)
            status, body = _get(f"{base}/api/v1/{endpoint}?{urllib.parse.urlencode(params)}")
            (HERE / "api" / f"{stem}.json").write_bytes(body)
            index[stem] = {"endpoint": endpoint, "http_status": status, "prometheus_version": version,
                           **params}
        (HERE / "api" / "index.json").write_text(json.dumps(index, indent=1) + "\n")
        version_line = subprocess.run(["prometheus", "--version"], capture_output=True, text=True,
                                      check=True).stdout.splitlines()[0].strip()
        build_lab_run(base, version_line)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
