"""cfsim.io.read_usage: container CPU usage histories for the VPA recommender, as (series, meta)."""
from __future__ import annotations

import json

import pytest

from cfsim.io import CfsimParseError, read_prometheus_json, read_usage, usage_series

T0 = 1767225600


def test_csv_with_and_without_header_and_containers(tmp_path):
    plain = tmp_path / "u.csv"
    plain.write_text(f"{T0 + 60},1.5\n{T0},0.5\n")
    series, meta = read_usage(plain)
    assert series == {"container": [(T0, 0.5), (T0 + 60, 1.5)]}
    assert meta == {"source": str(plain), "format": "csv", "containers": ["container"], "samples": 2}
    named = tmp_path / "n.csv"
    named.write_text("# two pods\ntimestamp,cpu_cores,pod\n2026-01-01T00:00:00Z,1.0,a\n2026-01-01T00:01:00Z,2.0,b\n")
    series, meta = read_usage(named)
    assert series == {"a": [(T0, 1.0)], "b": [(T0 + 60, 2.0)]} and meta["containers"] == ["a", "b"]


def _matrix(metric, values):
    return {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"container": "app", **metric}, "values": values}]}}


def test_prometheus_rate_and_counter(tmp_path):
    rate = tmp_path / "rate.json"
    rate.write_text(json.dumps(_matrix({}, [[T0, "1.25"], [T0 + 15, "NaN"], [T0 + 30, "1.5"]])))
    series, meta = read_usage(rate)
    assert meta["format"] == "prometheus-api-json" and meta["samples"] == 2
    assert list(series.values()) == [[(T0, 1.25), (T0 + 30, 1.5)]]
    counter = tmp_path / "counter.json"
    counter.write_text(json.dumps(_matrix({"__name__": "container_cpu_usage_seconds_total"},
                                          [[T0, "100"], [T0 + 10, "115"], [T0 + 20, "3"], [T0 + 30, "23"]])))
    series, _ = read_usage(counter)
    assert list(series.values()) == [[(T0 + 10, 1.5), (T0 + 30, 2.0)]]  # the reset at T0 + 20 is skipped
    frame, _ = read_prometheus_json(counter)
    assert usage_series(frame) == series  # the same conversion for a frame from anywhere (a live query)


def test_errors_name_file_and_position(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("timestamp,cpu_cores\n1767225600,0.5\n1767225660,-1\n")
    with pytest.raises(CfsimParseError, match=rf"^{bad}:3: cpu_cores must be a finite number >= 0"):
        read_usage(bad)
    error = tmp_path / "error.json"
    error.write_text(json.dumps({"status": "error", "errorType": "bad_data", "error": "parse error"}))
    with pytest.raises(CfsimParseError, match="a saved error response, not usage: bad_data: parse error"):
        read_usage(error)
    vector = tmp_path / "vector.json"
    vector.write_text(json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}))
    with pytest.raises(CfsimParseError, match=r"data\.resultType: expected 'matrix'"):
        read_usage(vector)
    with pytest.raises(FileNotFoundError, match="usage file not found"):
        read_usage(tmp_path / "missing.csv")
