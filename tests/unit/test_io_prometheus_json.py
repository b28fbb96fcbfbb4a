"""read_prometheus_json on real responses of Prometheus 2.42 and on generated edge cases."""
from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cfsim.io import CfsimParseError, PrometheusAPIError, check_tidy, read_prometheus_json
from cfsim.io.tidy import TIMESTAMP_DTYPE

DATA = Path(__file__).resolve().parents[1] / "data" / "prom" / "api"


def _buf(obj) -> io.StringIO:
    return io.StringIO(json.dumps(obj) if not isinstance(obj, str) else obj)


def _matrix(result, **extra):
    return {"status": "success", "data": {"resultType": "matrix", "result": result}, **extra}


def test_read_prometheus_json_real_matrix():
    data, meta = read_prometheus_json(DATA / "raw_requests.json")
    check_tidy(data)
    assert data["timestamp"].dtype == TIMESTAMP_DTYPE
    assert meta["result_type"] == "matrix" and meta["series"] == 5 and meta["samples"] == len(data)
    assert set(data["metric"]) == {"cfsim_requests_total"}
    assert '{container="side,car",path="say \\"hi\\", C:\\\\tmp\\\\x"}' in set(data["labels"])
    assert data["timestamp"].min() == pd.Timestamp("2023-11-14T22:13:25Z")
    assert data["timestamp"].max() == pd.Timestamp("2023-11-14T22:18:20Z")
    assert data.groupby(["metric", "labels"])["timestamp"].apply(lambda s: s.is_monotonic_increasing).all()


def test_read_prometheus_json_rate_results_are_named_from_the_query():
    data, meta = read_prometheus_json(DATA / "rate_10s.json", query="rate(cfsim_requests_total{pod!=''}[10s])")
    assert set(data["metric"]) == {"rate(cfsim_requests_total[10s])"}
    assert meta["query"].startswith("rate(") and not meta["warnings"]
    named, _ = read_prometheus_json(DATA / "rate_10s.json", metric="requests_per_second")
    assert set(named["metric"]) == {"requests_per_second"}
    bare, meta = read_prometheus_json(DATA / "rate_10s.json")
    assert set(bare["metric"]) == {""} and "no __name__" in meta["warnings"][0]


def test_read_prometheus_json_real_nan_and_infinities():
    data, _ = read_prometheus_json(DATA / "temperature.json")
    v = data["value"].to_numpy()
    assert np.isnan(v).sum() == 2 and np.isposinf(v).sum() == 1 and np.isneginf(v).sum() == 1


def test_read_prometheus_json_real_vector_scalar_string_and_empty():
    vec, meta = read_prometheus_json(DATA / "instant_vector.json")
    assert meta["result_type"] == "vector" and len(vec) == meta["series"] == 5
    assert (vec["timestamp"] == pd.Timestamp("2023-11-14T22:16:40Z")).all()
    sc, meta = read_prometheus_json(DATA / "instant_scalar.json", query="scalar(sum(cfsim_requests_total))")
    assert sc["value"].tolist() == [pytest.approx(float(json.loads((DATA / "instant_scalar.json").read_text())
                                                           ["data"]["result"][1]))]
    assert sc["metric"].tolist() == ["scalar(sum(cfsim_requests_total))"] and sc["labels"].tolist() == ["{}"]
    s, meta = read_prometheus_json(DATA / "instant_string.json")
    assert s.empty and meta["string"] == "hello, world"
    empty, meta = read_prometheus_json(DATA / "empty_range.json")
    check_tidy(empty)
    assert empty.empty and meta["series"] == 0


@pytest.mark.parametrize("stem, text", [("error_bad_query", "unclosed left parenthesis"),
                                        ("error_too_many_points", "11,000 points")])
def test_read_prometheus_json_real_error_envelopes(stem, text):
    with pytest.raises(PrometheusAPIError, match=text) as info:
        read_prometheus_json(DATA / f"{stem}.json")
    assert info.value.error_type == "bad_data" and stem in str(info.value)


def test_read_prometheus_json_truncated_file_names_line_and_column(tmp_path):
    body = (DATA / "raw_requests.json").read_text()
    path = tmp_path / "cut.json"
    path.write_text(body[: len(body) // 2])
    with pytest.raises(CfsimParseError) as info:
        read_prometheus_json(path)
    err = info.value
    assert isinstance(err, ValueError)
    assert str(path) in str(err) and err.line == 1 and err.column is not None and err.column > 100
    assert str(err).startswith(f"{path}:1:{err.column}: not valid JSON")


@pytest.mark.parametrize("values, where", [
    ([[1, "1"], [2, "x"]], "data.result[1].values[1][1]"),
    ([[1, "1"], [2]], "data.result[1].values[1]"),
    ([[1, "1"], [None, "2"]], "data.result[1].values[1][0]"),
    ([[1, "1"], [2, True]], "data.result[1].values[1][1]"),
    ("oops", "data.result[1].values"),
])
def test_read_prometheus_json_bad_points_name_the_json_path(values, where):
    good = {"metric": {"__name__": "a"}, "values": [[1, "1"]]}
    bad = {"metric": {"__name__": "b"}, "values": values}
    with pytest.raises(CfsimParseError) as info:
        read_prometheus_json(_buf(_matrix([good, bad])))
    assert info.value.path == where and f"<buffer>: {where}: " in str(info.value)


@pytest.mark.parametrize("obj, where", [
    ([], "$"),
    ({"status": "weird"}, "status"),
    ({"status": "success"}, "data"),
    ({"status": "success", "data": {"resultType": "table", "result": []}}, "data.resultType"),
    ({"status": "success", "data": {"resultType": "matrix", "result": {}}}, "data.result"),
    ({"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}}]}}, "data.result[0]"),
    ({"status": "success", "data": {"resultType": "vector", "result": [{"metric": {"a": 1}, "value": [1, "1"]}]}},
     "data.result[0].metric"),
    ({"status": "success", "data": {"resultType": "scalar", "result": [1]}}, "data.result"),
])
def test_read_prometheus_json_bad_shapes(obj, where):
    with pytest.raises(CfsimParseError) as info:
        read_prometheus_json(_buf(obj))
    assert info.value.path == where


def test_read_prometheus_json_generated_edge_cases():
    result = [
        {"metric": {"__name__": "m", "pod": 'q"uo,te\\'}, "values": [[1700000000.5, "NaN"], [1700000001, "+Inf"],
                                                                     [1700000002.25, "-Inf"], [1700000003, "1e-3"]]},
        {"metric": {"__name__": "m", "pod": "gap"}, "values": [[1700000000, "1"], [1700003600, "2"]]},
        {"metric": {"__name__": "m", "pod": "empty"}, "values": []},
        {"metric": {"__name__": "h"}, "histograms": [[1700000000, {"count": "1", "sum": "1"}]]},
    ]
    data, meta = read_prometheus_json(_buf(_matrix(result, warnings=["slow"], infos=["partial"])))
    assert meta["series"] == 4 and meta["samples"] == 6
    assert meta["warnings"][:2] == ["slow", "info: partial"] and "native-histogram" in meta["warnings"][2]
    quoted = data[data["labels"] == '{pod="q\\"uo,te\\\\"}']
    assert quoted["timestamp"].iloc[0] == pd.Timestamp(1700000000500, unit="ms", tz="UTC")
    v = quoted["value"].to_numpy()
    assert math.isnan(v[0]) and v[1] == math.inf and v[2] == -math.inf and v[3] == 1e-3
    gap = data[data["labels"] == '{pod="gap"}']["timestamp"].diff().iloc[1]
    assert gap == pd.Timedelta(hours=1)


def test_read_prometheus_json_rejects_duplicate_series():
    s = {"metric": {"__name__": "m"}, "values": [[1, "1"]]}
    with pytest.raises(CfsimParseError, match="duplicate series"):
        read_prometheus_json(_buf(_matrix([s, s])))


@pytest.mark.parametrize("shuffled_points", [False, True])
def test_read_prometheus_json_rows_in_tidy_order_however_the_series_come(shuffled_points):
    # the reader orders whole series when their points are in time order (the API's), and sorts
    # every row otherwise: either way the rows are those of a stable sort by metric, labels, time
    rng = np.random.default_rng(4)
    result = []
    for name in ("b_total", "a", "b_total", "a_total"):
        for pod in rng.permutation(["z", "y", "x"]):
            key = (name, pod)
            if any((r["metric"]["__name__"], r["metric"]["pod"]) == key for r in result):
                continue
            ts = [1700000000 + 15 * k for k in range(5)]
            if shuffled_points and (name, pod) == ("a", "y"):
                ts = ts[::-1]
            result.append({"metric": {"__name__": name, "pod": str(pod)},
                           "values": [[t, str(float(rng.integers(100)))] for t in ts]})
    data, _ = read_prometheus_json(_buf(_matrix(result)))
    check_tidy(data)
    expected = data.sort_values(["metric", "labels", "timestamp"], kind="stable", ignore_index=True)
    pd.testing.assert_frame_equal(data, expected)
    assert list(dict.fromkeys(data["metric"])) == ["a", "a_total", "b_total"]
    rows = {(r["metric"]["__name__"], r["metric"]["pod"], t): float(v) for r in result for t, v in r["values"]}
    got = {(m, lab.split('"')[1], ts.timestamp()): v for m, lab, ts, v in
           zip(data["metric"], data["labels"], data["timestamp"], data["value"])}
    assert got == rows
