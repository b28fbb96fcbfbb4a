"""cfsim.io against a real Prometheus on loopback: TSDB built by promtool from tests/data/prom/input.om.

Skips (with the reason) when ``promtool`` or ``prometheus`` is not installed
(Debian: ``apt-get install prometheus``).
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from cfsim.io import (counter_to_rate, get_prometheus_range, get_prometheus_samples, read_prometheus_json,
                      read_promtool_dump)

DATA = Path(__file__).resolve().parents[1] / "data" / "prom"
INDEX = json.loads((DATA / "api" / "index.json").read_text())
QUERY = re.compile(r"^(rate|increase|irate|delta)\((\w+)\[(\w+)\]\)$")

pytestmark = pytest.mark.skipif(
    not (shutil.which("promtool") and shutil.which("prometheus")),
    reason="needs promtool and prometheus on PATH (Debian: apt-get install prometheus)")


@pytest.fixture(scope="module")
def live(tmp_path_factory, start_prometheus):
    work = tmp_path_factory.mktemp("prom")
    tsdb = work / "data"
    subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(DATA / "input.om"), str(tsdb)],
                   check=True, capture_output=True, timeout=60)
    (tsdb / "wal").mkdir(exist_ok=True)  # promtool tsdb dump needs it on a blocks-only directory
    dump = work / "dump.txt"
    with open(dump, "wb") as out:
        subprocess.run(["promtool", "tsdb", "dump", str(tsdb)], check=True, stdout=out, timeout=60)
    with start_prometheus(work, tsdb) as base:
        with urllib.request.urlopen(base + "/api/v1/status/buildinfo", timeout=5) as resp:
            version = json.load(resp)["data"]["version"]
        yield base, version, dump


def test_promtool_dump_of_the_rebuilt_tsdb_equals_the_stored_dump(live):
    _, _, dump = live
    fresh, _ = read_promtool_dump(dump)
    stored, _ = read_promtool_dump(DATA / "dump.txt")
    assert fresh.equals(stored)


@pytest.mark.parametrize("stem", sorted(k for k, v in INDEX.items()
                                        if v["endpoint"] == "query_range" and v["http_status"] == 200))
def test_chunked_live_range_query_equals_the_stored_response(live, stem):
    base, version, _ = live
    entry = INDEX[stem]
    got, meta = get_prometheus_range(base, entry["query"], entry["start"], entry["end"], entry["step"],
                                     max_points=13)
    assert meta["requests"] > 1
    if version != entry["prometheus_version"]:
        pytest.skip(f"stored responses come from Prometheus {entry['prometheus_version']}, server is {version}")
    stored, _ = read_prometheus_json(DATA / "api" / f"{stem}.json", query=entry["query"])
    assert got.equals(stored)


@pytest.mark.parametrize("query, step", [("rate(cfsim_requests_total[10s])", 5),
                                         ("rate(cfsim_requests_total[10s])", 2.5),
                                         ("increase(cfsim_requests_total[45s])", 4),
                                         ("irate(cfsim_requests_total[20s])", 3)])
def test_our_promql_agrees_with_the_live_server(live, query, step):
    base, version, dump = live
    start, end = 1_700_000_000 - 30, 1_700_000_000 + 330
    expected, _ = get_prometheus_range(base, query, start, end, step)
    func, metric, window = QUERY.match(query).groups()
    raw, _ = read_promtool_dump(dump, metrics=[metric])
    got = counter_to_rate(raw, window, step, start, end, func=func, compat=version.split("+")[0])
    merged = expected.merge(got, on=["metric", "labels", "timestamp"], how="outer", indicator=True)
    assert (merged["_merge"] == "both").all(), merged[merged["_merge"] != "both"].head()
    assert len(merged) > 100
    np.testing.assert_allclose(merged["value_y"], merged["value_x"], rtol=1e-9, atol=0)


@pytest.mark.parametrize("chunk", ["1h", "37s"])
def test_get_prometheus_samples_returns_the_stored_samples(live, chunk):
    base, _, dump = live
    got, meta = get_prometheus_samples(base, "cfsim_requests_total", 1_700_000_000 - 60, 1_700_000_000 + 400,
                                       chunk=chunk)
    raw, _ = read_promtool_dump(dump, metrics=["cfsim_requests_total"])
    assert got.equals(raw)
    assert meta["requests"] == (1 if chunk == "1h" else 13)
