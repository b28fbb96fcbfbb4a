"""Pure parts of cfsim.lab: GOMAXPROCS policies, command lines, summary maths, grid planning."""
from __future__ import annotations

import json
import math

import pytest

from cfsim.lab import cgroup, grid, launch, queries, summary
from cfsim.scenario import load_scenario


@pytest.mark.parametrize("policy,limit,ncpu,round_,want", [
    (3, 0.5, 2, "floor", 3),
    ("host", 0.5, 8, "floor", 8),
    ("go1.25", 0.25, 8, "floor", 2),     # golang/go#74283: minimum 2
    ("go1.25", 8.5, 16, "floor", 9),     # golang/go#76835: ceil
    ("go1.25", 8.5, 4, "floor", 4),      # capped at the CPUs
    ("go1.25", None, 4, "floor", 4),
    ("automaxprocs", 1.94, 2, "floor", 1),
    ("automaxprocs", 1.94, 2, "ceil", 2),
    ("automaxprocs", 0.25, 2, "floor", 1),  # minimum 1
    ("automaxprocs", 8.0, 4, "floor", 8),   # no cap at the CPU count
])
def test_expected_gomaxprocs(policy, limit, ncpu, round_, want):
    assert launch.expected_gomaxprocs(policy, limit, ncpu, round_) == want


def test_gomaxprocs_env_per_policy():
    assert launch.gomaxprocs_env(4) == ({"GOMAXPROCS": "4"}, [])
    assert launch.gomaxprocs_env("host") == ({"GODEBUG": "containermaxprocs=0,updatemaxprocs=0"}, [])
    assert launch.gomaxprocs_env("automaxprocs") == ({}, ["-automaxprocs"])
    assert launch.gomaxprocs_env("go1.25") == ({}, [])


def test_workload_env_clears_inherited_go_settings():
    sc = load_scenario({"go": {"gomaxprocs": "go1.25", "gogc": -1, "gomemlimit_mb": 64}})
    env = launch.workload_env(sc, base={"GOMAXPROCS": "7", "GODEBUG": "x=1", "PATH": "/bin"})
    assert "GOMAXPROCS" not in env and "GODEBUG" not in env and env["PATH"] == "/bin"
    assert env["GOGC"] == "off" and env["GOMEMLIMIT"] == str(64 * 1024 * 1024)


def test_commands_carry_the_knobs(tmp_path):
    sc = load_scenario({"workload": {"kind": "closed", "clients": 3, "fanout": 8, "think_ms": 5},
                        "go": {"gomaxprocs": "automaxprocs", "round": "ceil"}})
    w = launch.workload_command(tmp_path / "workload", sc, "127.0.0.1:1")
    assert w[w.index("-fanout") + 1] == "8" and "-automaxprocs" in w and w[w.index("-round") + 1] == "ceil"
    lg = launch.loadgen_command(tmp_path / "loadgen", sc, "http://x/work", "127.0.0.1:2")
    assert lg[lg.index("-clients") + 1] == "3" and lg[lg.index("-mode") + 1] == "closed"
    assert launch.loadgen_command(tmp_path / "l", load_scenario({"workload": {"kind": "stream"}}), "u", "a") is None


def test_resolve_rate_forms(tmp_path):
    assert launch.resolve_rate(100, 10) == 100.0
    assert launch.resolve_rate([[0, 1], [5, 2]], 10) == [[0.0, 1.0], [5.0, 2.0]]
    steps = launch.resolve_rate("diurnal:100:50:4", 4)
    assert len(steps) == 5 and steps[1][1] == pytest.approx(150)
    csv = tmp_path / "r.csv"
    csv.write_text("t_s,rate_per_s\n0,10\n30,20\n")
    assert launch.resolve_rate(str(csv), 60) == [[0.0, 10.0], [30.0, 20.0]]


def test_histogram_quantile_matches_prometheus_rules():
    b = [(0.1, 10.0), (0.2, 30.0), (0.4, 40.0), (math.inf, 40.0)]
    assert summary.histogram_quantile(0.5, b) == pytest.approx(0.15)
    assert summary.histogram_quantile(0.25, b) == pytest.approx(0.1 + 0.1 * 0.0)  # rank 10 -> first bucket end
    assert summary.histogram_quantile(1.0, [(0.1, 1.0), (math.inf, 2.0)]) == 0.1  # +Inf -> largest bound
    assert summary.histogram_quantile(0.5, []) is None


def test_mean_limit_over_a_schedule():
    sched = [[0, 2.0], [8, 1.94], [16, 1.2], [24, 2.0]]
    got = summary.mean_limit_cores(2.0, sched, 0, 32)
    assert got == pytest.approx((2.0 * 8 + 1.94 * 8 + 1.2 * 8 + 2.0 * 8) / 32)
    assert summary.mean_limit_cores(None, None, 0, 10) is None
    assert summary.mean_limit_cores(1.0, [[5, None]], 0, 10) is None


EXPO_0 = """# TYPE cfsim_records_consumed_total counter
cfsim_records_consumed_total 100
# TYPE cfsim_item_latency_seconds histogram
cfsim_item_latency_seconds_bucket{le="0.001"} 50
cfsim_item_latency_seconds_bucket{le="0.01"} 100
cfsim_item_latency_seconds_bucket{le="+Inf"} 100
cfsim_item_latency_seconds_sum 0.5
cfsim_item_latency_seconds_count 100
# TYPE go_gc_cycles_total_gc_cycles_total counter
go_gc_cycles_total_gc_cycles_total 3
"""
EXPO_1 = EXPO_0.replace("consumed_total 100", "consumed_total 1100").replace('"0.001"} 50', '"0.001"} 550') \
    .replace('"0.01"} 100', '"0.01"} 1100').replace('"+Inf"} 100', '"+Inf"} 1100') \
    .replace("cycles_total 3", "cycles_total 8") + """# TYPE go_sched_gomaxprocs_threads gauge
go_sched_gomaxprocs_threads 2
# TYPE cfsim_backlog_records gauge
cfsim_backlog_records 7
"""


def test_summarize_stream_window():
    s0 = summary.Snapshot(100.0, cgroup.CpuStat(1_000_000_000, 10, 2, 5_000_000), summary.parse_exposition(EXPO_0))
    s1 = summary.Snapshot(110.0, cgroup.CpuStat(6_000_000_000, 110, 52, 2_005_000_000), summary.parse_exposition(EXPO_1))
    out = summary.summarize("stream", s0, s1, 0.5)
    assert set(summary.SUMMARY_KEYS) <= set(out)
    assert out["records_completed"] == 1000 and out["latency_mean_s"] is None  # no _sum in EXPO_1 delta
    assert out["cpu_usage_cores"] == pytest.approx(0.5) and out["throughput_per_s"] == pytest.approx(100)
    assert (out["nr_periods"], out["nr_throttled"], out["throttled_ratio"]) == (100, 50, 0.5)
    assert out["throttled_time_s"] == pytest.approx(2.0)
    assert out["latency_p50_s"] == pytest.approx(0.001)  # 500 of 1000 new records within 1 ms
    assert out["gc_cycles"] == 5 and out["gomaxprocs"] == 2 and out["backlog_final"] == 7
    assert out["sched_cpu_fraction"] is None and out["burn_p50_s"] is None


def test_parse_axis_and_points():
    assert grid.parse_axis("cgroup.cpu_limit=0.5,1,1.94") == ("cgroup.cpu_limit", [0.5, 1, 1.94])
    assert grid.parse_axis("go.gomaxprocs=automaxprocs,go1.25,2") == ("go.gomaxprocs", ["automaxprocs", "go1.25", 2])
    key, vals = grid.parse_axis("cgroup.limit_schedule=[[0, 2.0], [8, 1.2]]")
    assert vals == [[[0, 2.0], [8, 1.2]]]
    pts = grid.grid_points([("a.x", [1, 2]), ("b.y", ["p", "q", "r"])])
    assert len(pts) == 6 and pts[0] == {"a.x": 1, "b.y": "p"}
    with pytest.raises(Exception, match="section.key"):
        grid.parse_axis("nokey")


def test_grid_plan_resume_and_drift(tmp_path):
    """run_grid with a fake runner: calibration + points + repeat, skip finished points on resume."""
    calls: list[str] = []

    def fake_run(sc, folder, run_id=None, command=None):
        calls.append(folder.name)
        folder.mkdir(parents=True, exist_ok=True)
        thr = 100.0 if folder.name != "calib-end" else 90.0
        (folder / "manifest.json").write_text(json.dumps({"calibration_rounds_per_cpu_ms": 1000.0,
                                                          "times": {"start_utc": "x"}}))
        (folder / "summary.json").write_text(json.dumps({"throughput_per_s": thr, "cpu_usage_cores": 1.0}))
        if sc["go.gomaxprocs"] == 1 and sc["cgroup.cpu_limit"] is None:
            assert folder.name.startswith("calib")
        return {}

    base = load_scenario({"cgroup": {"cpu_limit": 1.0}})
    axes = ["cgroup.cpu_limit=0.5,1", "go.gomaxprocs=1,2"]
    state = grid.run_grid(base, axes, tmp_path / "g", run_one=fake_run, log=lambda s: None)
    assert calls[0] == "calib-start" and calls[-1] == "calib-end" and calls[-2].startswith("repeat-")
    assert len(calls) == 4 + 3 and state["failed"] == 0
    assert state["drift"]["calibration"]["throughput_per_s"]["relative_change"] == pytest.approx(-0.1)
    calls.clear()
    (tmp_path / "g" / "calib-end" / "summary.json").unlink()  # interrupted run: redone
    grid.run_grid(base, axes, tmp_path / "g", resume=True, run_one=fake_run, log=lambda s: None)
    assert calls == ["calib-end"]


def test_queries_cover_kind_histograms_only():
    stream = queries.raw_metrics("stream")
    assert "cfsim_item_latency_seconds_bucket" in stream and "cfsim_loadgen_request_duration_seconds_bucket" not in stream
    assert "go_sched_gomaxprocs_threads" in stream and "container_cpu_cfs_throttled_periods_total" in stream
    rates = queries.rate_queries("closed", 5)
    assert rates["cpu_usage_cores"] == "rate(container_cpu_usage_seconds_total[5s])"
    assert "cfsim_loadgen_request_duration_seconds_p99" in rates


def test_scrape_config_is_one_job_per_target():
    from cfsim.lab import prometheus

    cfg = json.loads(prometheus.scrape_config({"workload": "127.0.0.1:1", "cadvisor": "127.0.0.1:2"}, 1.0))
    assert cfg["global"]["scrape_interval"] == "1000ms" and cfg["global"]["scrape_timeout"] == "1000ms"
    assert [j["job_name"] for j in cfg["scrape_configs"]] == ["cadvisor", "workload"]


def test_observed_gomaxprocs_from_a_query_range_body():
    from cfsim.lab import runner

    body = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"job": "workload"}, "values": [[100, "2"], [101, "2"], [102, "1"], [103, "1"]]}]}}).encode()
    got = runner.observed_gomaxprocs(body, 100.5)
    assert got == {"changes_t_s": [[-0.5, 2], [1.5, 1]], "values": [1, 2], "final": 1}


def test_initial_limit_and_bandwidth():
    from cfsim.lab import runner

    sc = load_scenario({"cgroup": {"cpu_limit": 1.0, "limit_schedule": [[0, 2.0], [8, 1.2]], "burst_us": 5000}})
    assert runner.initial_limit(sc) == 2.0
    bw = runner.bandwidth_for(sc, 1.94)
    assert (bw.quota_us, bw.period_us, bw.burst_us) == (194000, 100000, 5000)
    assert runner.bandwidth_for(sc, None).quota_us is None


def test_check_scenario_refuses_a_hidden_quota():
    from cfsim.lab import runner
    from cfsim.scenario import ScenarioError

    with pytest.raises(ScenarioError, match="lab.quota_at"):
        runner.check_scenario(load_scenario({"go": {"gomaxprocs": "automaxprocs"}, "lab": {"quota_at": "run"}}))
    runner.check_scenario(load_scenario({"go": {"gomaxprocs": 4}, "lab": {"quota_at": "run"}}))


def test_summarize_request_window_has_client_and_server_latency():
    def hist(name, fast, total):
        return (f'{name}_bucket{{le="0.001"}} {fast}\n{name}_bucket{{le="0.01"}} {total}\n'
                f'{name}_bucket{{le="+Inf"}} {total}\n')
    wl0 = summary.parse_exposition(hist("cfsim_request_duration_seconds", 0, 0))
    wl1 = summary.parse_exposition(hist("cfsim_request_duration_seconds", 900, 1000))  # handler: fast
    lg0 = summary.parse_exposition("cfsim_loadgen_requests_total 0\n" +
                                   hist("cfsim_loadgen_request_duration_seconds", 0, 0))
    lg1 = summary.parse_exposition("cfsim_loadgen_requests_total 1000\n" +
                                   hist("cfsim_loadgen_request_duration_seconds", 100, 1000))  # client: slower
    s0 = summary.Snapshot(0.0, cgroup.CpuStat(0, 0, 0, 0), wl0, lg0)
    s1 = summary.Snapshot(10.0, cgroup.CpuStat(1_000_000_000, 100, 0, 0), wl1, lg1)
    out = summary.summarize("open", s0, s1, None)
    assert out["throughput_per_s"] == pytest.approx(100)
    assert out["latency_p50_s"] == pytest.approx(0.001 + 0.009 * 400 / 900)   # the client's view
    assert out["server_latency_p50_s"] == pytest.approx(0.001 * 500 / 900)    # the handler's
    assert out["server_latency_p99_s"] > out["server_latency_p50_s"]
