"""read_openmetrics on real expositions (Prometheus 2.42's own /metrics, prometheus_client output,
the promtool backfill input) and on generated edge cases."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cfsim.io import CfsimParseError, check_tidy, read_openmetrics

DATA = Path(__file__).resolve().parents[1] / "data" / "prom"


def test_read_openmetrics_real_prometheus_text_scrape():
    data, meta = read_openmetrics(DATA / "prometheus_self.prom", scrape_time="2023-11-14T22:13:20Z")
    check_tidy(data)
    assert meta["format"] == "prometheus" and meta["samples"] == len(data) > 200 and not meta["warnings"]
    assert (data["timestamp"] == pd.Timestamp("2023-11-14T22:13:20Z")).all()
    assert meta["types"]["go_gc_duration_seconds_count"] == "summary"
    assert meta["types"]["prometheus_http_requests_total"] == "counter"
    buckets = data[data["metric"] == "prometheus_http_request_duration_seconds_bucket"]
    assert buckets["labels"].str.contains('le="\\+Inf"').any()


def test_read_openmetrics_real_client_python_exposition():
    data, meta = read_openmetrics(DATA / "client_python.om")
    assert meta["format"] == "openmetrics" and meta["exemplars"] == 1
    assert meta["units"] == {"cfsim_demo_temperature_celsius": "celsius"}
    assert data["timestamp"].isna().all() and "no timestamp" in meta["warnings"][0]
    rows = data[data["metric"] == "cfsim_demo_requests_total"].set_index("labels")["value"]
    assert rows['{path="say \\"hi\\", C:\\\\tmp"}'] == 3.0 and rows['{path="/api"}'] == 1.5
    assert meta["types"]["cfsim_demo_latency_seconds_bucket"] == "histogram"
    assert "cfsim_demo_requests_created" in set(data["metric"])


def test_read_openmetrics_backfill_file_keeps_every_histogram_point():
    data, meta = read_openmetrics(DATA / "input.om")
    inf = data[(data["metric"] == "cfsim_latency_seconds_bucket") & (data["labels"] == '{le="+Inf"}')]
    assert len(inf) == 20 and inf["value"].tolist() == [6.0 * i for i in range(20)]
    assert not data["labels"].str.contains("cfsim_om_point").any()
    temp = data[data["metric"] == "cfsim_temperature"]["value"].to_numpy()
    assert np.isnan(temp).sum() == 2 and np.isposinf(temp).sum() == 1 and np.isneginf(temp).sum() == 1
    assert data["timestamp"].min() == pd.Timestamp("2023-11-14T22:13:20Z")


def test_read_openmetrics_text_format_millisecond_timestamps_and_scrape_time_seconds():
    text = "# TYPE x_total counter\nx_total{a=\"1\"} 3 1700000000123\nx_total{a=\"2\"} 4\n"
    data, meta = read_openmetrics(io.StringIO(text), fmt="prometheus", scrape_time=1700000001)
    ts = data.set_index("labels")["timestamp"]
    assert ts['{a="1"}'] == pd.Timestamp(1700000000123, unit="ms", tz="UTC")
    assert ts['{a="2"}'] == pd.Timestamp("2023-11-14T22:13:21Z")


def test_read_openmetrics_auto_detects_by_eof_marker():
    text = "# TYPE x gauge\nx 1 1700000000.5\n# EOF\n"
    data, meta = read_openmetrics(io.StringIO(text))
    assert meta["format"] == "openmetrics"
    assert data["timestamp"].iloc[0] == pd.Timestamp(1700000000500, unit="ms", tz="UTC")


@pytest.mark.parametrize("text, fmt, lineno, what", [
    ('# TYPE a counter\na_total{x="1} 3\n# EOF\n', "openmetrics", 2, "Invalid labels"),
    ("# TYPE a gauge\na 1\na{b=\"2\"} xx\n", "prometheus", 3, "could not convert"),
    ("# TYPE a counter\na_total 1\n", "openmetrics", 2, "Missing # EOF"),
    ("# TYPE a gauge\na 1\n# EOF\nb 2\n", "openmetrics", 4, "after # EOF"),
])
def test_read_openmetrics_errors_name_the_line(text, fmt, lineno, what):
    with pytest.raises(CfsimParseError, match=what) as info:
        read_openmetrics(io.StringIO(text), fmt=fmt)
    assert info.value.line == lineno and str(info.value).startswith(f"<buffer>:{lineno}:1: ")


def test_read_openmetrics_empty_and_bad_fmt():
    data, meta = read_openmetrics(io.StringIO(""), fmt="prometheus")
    check_tidy(data)
    assert data.empty and meta["series"] == 0
    with pytest.raises(ValueError):
        read_openmetrics(io.StringIO(""), fmt="json")


def test_read_openmetrics_crlf_file_and_nat_samples_are_ignored_by_rate(tmp_path):
    from cfsim.io import rate

    path = tmp_path / "scrape.om"
    path.write_bytes(b"# TYPE c counter\r\nc_total 1 1700000000\r\nc_total 3 1700000001\r\n# EOF\r\n")
    data, meta = read_openmetrics(path)
    assert meta["format"] == "openmetrics" and data["value"].tolist() == [1.0, 3.0]
    scrape, _ = read_openmetrics(io.StringIO("# TYPE c counter\nc_total 1\n# EOF\n"))
    assert rate(scrape, 10).empty
