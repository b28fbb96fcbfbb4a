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


def test_csv_several_containers_refused_pods_of_one_container_kept(tmp_path):
    # a third column headed 'container' (or no header) names containers: each is its own VPA target
    two = tmp_path / "two.csv"
    two.write_text(f"timestamp,cpu_cores,container\n{T0},0.5,a\n{T0 + 60},0.6,b\n{T0 + 120},0.6,a\n")
    with pytest.raises(CfsimParseError, match=rf"^{two}:3: 2 containers \('a', 'b'; the second from this line\); "
                                              r"the VPA replays one workload container: keep only its rows.*'pod'"):
        read_usage(two)
    bare = tmp_path / "bare.csv"
    bare.write_text(f"{T0},0.5,a\n{T0 + 60},0.6,b\n")
    with pytest.raises(CfsimParseError, match=rf"^{bare}:2: 2 containers \('a', 'b';"):
        read_usage(bare)
    # headed 'pod': pods of one workload container feed one aggregate, as upstream's recommender does
    pods = tmp_path / "pods.csv"
    pods.write_text(f"timestamp,cpu_cores,pod\n{T0},0.5,a\n{T0 + 60},0.6,b\n{T0 + 120},0.6,a\n")
    series, meta = read_usage(pods)
    assert series == {"a": [(T0, 0.5), (T0 + 120, 0.6)], "b": [(T0 + 60, 0.6)]} and meta["samples"] == 3


def test_csv_duplicate_timestamp_refused(tmp_path):
    dup = tmp_path / "dup.csv"
    dup.write_text(f"timestamp,cpu_cores\n{T0},0.5\n{T0},3.0\n{T0},3.0\n")
    with pytest.raises(CfsimParseError, match=rf"^{dup}:3: duplicate timestamp {T0} \(first at line 2\)"):
        read_usage(dup)
    iso = tmp_path / "iso.csv"  # the same instant written two ways, for one pod
    iso.write_text(f"timestamp,cpu_cores,pod\n{T0},0.5,p-1\n{T0},0.7,p-2\n2026-01-01T00:00:00Z,0.6,p-1\n")
    with pytest.raises(CfsimParseError, match=rf"^{iso}:4: duplicate timestamp 2026-01-01T00:00:00Z for 'p-1' "
                                              r"\(first at line 2\)"):
        read_usage(iso)


def _export(path, name, labels_list, values):
    result = [{"metric": ({"__name__": name} if name else {}) | labels, "values": values} for labels in labels_list]
    path.write_text(json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}))
    return path


@pytest.mark.parametrize("metric", ["kube_pod_container_resource_limits", "container_cpu_cfs_periods_total",
                                    "go_sched_gomaxprocs_threads", "process_cpu_seconds_total"])
def test_prometheus_other_metrics_refused(tmp_path, metric):
    f = _export(tmp_path / f"{metric}.json", metric, [{"container": "app"}], [[T0, "1"], [T0 + 15, "2"]])
    with pytest.raises(CfsimParseError, match=rf"^{f}: data\.result: metric '{metric}' is not container CPU usage; "
                                              r"vpa replay reads container_cpu_usage_seconds_total"):
        read_usage(f)


def test_prometheus_one_workload_container(tmp_path):
    usage = "container_cpu_usage_seconds_total"
    values = [[T0, "0"], [T0 + 15, "15"], [T0 + 30, "30"]]
    pods = _export(tmp_path / "pods.json", usage, [{"namespace": "shop", "pod": f"api-{i}", "container": "app"}
                                                   for i in range(3)], values)
    series, meta = read_usage(pods)
    assert len(series) == 3 and meta["samples"] == 6  # pods of one container: one aggregate
    two = _export(tmp_path / "two.json", usage, [{"namespace": "shop", "pod": "api-0", "container": c}
                                                 for c in ("app", "sidecar")], values)
    with pytest.raises(CfsimParseError, match=rf"^{two}: data\.result: 2 containers \(shop/app, shop/sidecar\); "
                                              r"the VPA replays one workload container.*container=\"NAME\""):
        read_usage(two)
    dup = _export(tmp_path / "dup.json", None, [{"container": "app"}], [[T0, "1"], [T0, "2"], [T0 + 15, "1"]])
    with pytest.raises(CfsimParseError, match=rf"^{dup}: data\.result: .*more than one value at timestamp {T0}"):
        read_usage(dup)
