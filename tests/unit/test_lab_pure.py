"""Pure parts of cfsim.lab: GOMAXPROCS policies, command lines, summary maths, grid planning."""
from __future__ import annotations

import json
import math

import pytest

from cfsim.goruntime.gomaxprocs import gomaxprocs_value
from cfsim.lab import cgroup, derive, grid, launch, queries, runner, summary
from cfsim.scenario import ScenarioError, load_scenario


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
def test_lab_expects_the_runtime_rule(policy, limit, ncpu, round_, want):
    # the lab predicts a run's GOMAXPROCS with the model's own rule (one home for the policy)
    assert gomaxprocs_value(policy, limit, ncpu, version="1.25", round_=round_) == want


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


def test_lab_godebug_adds_settings_after_the_policy_and_the_trace():
    sc = load_scenario({"lab": {"godebug": "asyncpreemptoff=1", "gctrace": True}, "go": {"gomaxprocs": "host"}})
    env = launch.workload_env(sc, base={"GODEBUG": "x=1"})
    assert env["GODEBUG"] == "containermaxprocs=0,updatemaxprocs=0,gctrace=1,gcpacertrace=1,asyncpreemptoff=1"
    env = launch.workload_env(load_scenario({"lab": {"godebug": "asyncpreemptoff=1"}, "go": {"gomaxprocs": 2}}),
                              base={})
    assert env["GODEBUG"] == "asyncpreemptoff=1"


@pytest.mark.parametrize("bad", ["asyncpreemptoff", "asyncpreemptoff=", "=1", "a=1,,b=2", "a=1, b=2"])
def test_lab_godebug_syntax_is_checked_naming_the_key(bad):
    with pytest.raises(ScenarioError, match="lab.godebug"):
        load_scenario({"lab": {"godebug": bad}})


def test_commands_carry_the_knobs(tmp_path):
    sc = load_scenario({"workload": {"kind": "closed", "clients": 3, "fanout": 8, "think_ms": 5},
                        "go": {"gomaxprocs": "automaxprocs", "round": "ceil"}})
    w = launch.workload_command(tmp_path / "workload", sc, "127.0.0.1:1")
    assert w[w.index("-fanout") + 1] == "8" and "-automaxprocs" in w and w[w.index("-round") + 1] == "ceil"
    assert w[w.index("-read-header-timeout-s") + 1] == "30"     # the server's ReadHeaderTimeout, as always
    w0 = launch.workload_command(tmp_path / "workload", load_scenario({"lab": {"read_header_timeout_s": 0}}), "a")
    assert w0[w0.index("-read-header-timeout-s") + 1] == "0"
    lg = launch.loadgen_command(tmp_path / "loadgen", sc, "http://x/work", "127.0.0.1:2")
    assert lg[lg.index("-clients") + 1] == "3" and lg[lg.index("-mode") + 1] == "closed"
    assert lg[lg.index("-max-conns") + 1] == "1024"   # the connection cap the twin assumes
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


@pytest.fixture(autouse=True)
def _no_lock_gap(monkeypatch):
    monkeypatch.setattr(grid, "LOCK_GAP_S", 0.0)


def _fake_runner(calls: list[str], status=lambda name: "ok", tenants=lambda name: 0.1):
    def fake_run(sc, folder, run_id=None, command=None):
        calls.append(folder.name)
        folder.mkdir(parents=True, exist_ok=True)
        thr = 100.0 if folder.name != "calib-end" else 90.0
        (folder / "manifest.json").write_text(json.dumps({
            "calibration_rounds_per_cpu_ms": 1000.0, "times": {"start_utc": "x"}, "status": status(folder.name),
            "host_cpu": {"pre_run": {"tenants_cores": tenants(folder.name)}}}))
        (folder / "summary.json").write_text(json.dumps({"throughput_per_s": thr + len(calls), "cpu_usage_cores": 1.0}))
        if sc["go.gomaxprocs"] == 1 and sc["cgroup.cpu_limit"] is None:
            assert folder.name.startswith("calib")
        return {}
    return fake_run


def test_grid_plan_resume_and_drift(tmp_path):
    """run_grid with a fake runner: calibration + points + repeat, skip finished points on resume."""
    calls: list[str] = []
    fake_run = _fake_runner(calls)
    base = load_scenario({"cgroup": {"cpu_limit": 1.0}})
    axes = ["cgroup.cpu_limit=0.5,1", "go.gomaxprocs=1,2"]
    state = grid.run_grid(base, axes, tmp_path / "g", run_one=fake_run, log=lambda s: None)
    assert calls[0] == "calib-start" and calls[-1] == "calib-end" and len(calls) == 4 + 3
    # the repeat runs right after its point, beside the same machine load
    rep = calls.index(next(c for c in calls if c.startswith("repeat-")))
    assert calls[rep] == f"repeat-{calls[rep - 1]}" and state["failed"] == 0
    assert state["drift"]["calibration"]["throughput_per_s"]["relative_change"] == pytest.approx((97 - 101) / 101)
    assert state["drift"]["repeat"]["comparable"] is True
    calls.clear()
    (tmp_path / "g" / "calib-end" / "summary.json").unlink()  # interrupted run: redone
    grid.run_grid(base, axes, tmp_path / "g", resume=True, run_one=fake_run, log=lambda s: None)
    assert calls == ["calib-end"]
    # a point that is redone takes its repeat with it (no repeat compares runs hours apart)
    point = state["drift"]["repeat"]["point"]
    (tmp_path / "g" / point / "summary.json").unlink()
    calls.clear()
    grid.run_grid(base, axes, tmp_path / "g", resume=True, run_one=fake_run, log=lambda s: None)
    assert calls == [point, f"repeat-{point}"]


def test_grid_calibrates_between_points_and_resumes_them(tmp_path):
    """--calibrate-every 2: a calibration run (unconstrained, GOMAXPROCS 1: the fake runner checks)
    after every two points and their repeats, recorded as calibration in grid.json, redone on resume
    like any run whose summary is missing."""
    calls: list[str] = []
    fake_run = _fake_runner(calls)
    base = load_scenario({"cgroup": {"cpu_limit": 1.0}})
    axes = ["cgroup.cpu_limit=0.5,1", "go.gomaxprocs=1,2"]
    state = grid.run_grid(base, axes, tmp_path / "g", run_one=fake_run, log=lambda s: None, calibrate_every=2)
    assert [c for c in calls if c.startswith("calib")] == ["calib-start", "calib-01", "calib-end"]
    mid = calls.index("calib-01")
    assert len([c for c in calls[:mid] if c.startswith("p")]) == 2 and not calls[mid + 1].startswith("repeat")
    assert state["runs"]["calib-01"]["role"] == "calibration"
    (tmp_path / "g" / "calib-01" / "summary.json").unlink()
    calls.clear()
    grid.run_grid(base, axes, tmp_path / "g", resume=True, run_one=fake_run, log=lambda s: None, calibrate_every=2)
    assert calls == ["calib-01"]


def test_grid_runs_a_run_again_while_the_hypervisor_stole_more_than_allowed(tmp_path):
    """lab.steal_retries with lab.quiet_host_steal_cores: a run whose window lost more than that to
    the hypervisor is discarded and run again, at most steal_retries more times; grid.json keeps what
    each discarded try measured, the folder holds the last try; without the keys nothing is redone."""
    steals = {"calib-start": [0.4, 0.02], "calib-end": [0.3, 0.5, 0.6]}
    calls: list[str] = []

    def fake_run(sc, folder, run_id=None, command=None):
        calls.append(folder.name)
        folder.mkdir(parents=True, exist_ok=True)
        left = steals.get(folder.name) or [0.0]
        steal = left.pop(0) if len(left) > 1 else left[0]
        (folder / "manifest.json").write_text(json.dumps({
            "calibration_rounds_per_cpu_ms": 1000.0, "times": {"start_utc": f"t{len(calls)}"},
            "host_cpu": {"steal_cores": steal, "pre_run": {"tenants_cores": 0.0}}}))
        (folder / "summary.json").write_text(json.dumps({"throughput_per_s": 100.0, "cpu_usage_cores": 1.0}))
        return {}

    base = load_scenario({"cgroup": {"cpu_limit": 1.0}, "lab": {"quiet_host_steal_cores": 0.05, "steal_retries": 2}})
    state = grid.run_grid(base, ["go.gomaxprocs=2"], tmp_path / "g", run_one=fake_run, log=lambda s: None)
    assert calls == ["calib-start", "calib-start", "p000_gomaxprocs=2", "repeat-p000_gomaxprocs=2",
                     "calib-end", "calib-end", "calib-end"]
    assert state["runs"]["calib-start"]["steal_retries"] == [{"steal_cores": 0.4, "start_utc": "t1"}]
    # two retries used up: the last try is kept, stolen or not
    assert [d["steal_cores"] for d in state["runs"]["calib-end"]["steal_retries"]] == [0.3, 0.5]
    kept = json.loads((tmp_path / "g" / "calib-end" / "manifest.json").read_text())
    assert kept["host_cpu"]["steal_cores"] == 0.6 and "steal_retries" not in state["runs"]["p000_gomaxprocs=2"]
    calls.clear()
    steals.update({"calib-start": [0.4, 0.02]})
    grid.run_grid(load_scenario({"cgroup": {"cpu_limit": 1.0}}), ["go.gomaxprocs=2"], tmp_path / "h",
                  run_one=fake_run, log=lambda s: None)
    assert calls == ["calib-start", "p000_gomaxprocs=2", "repeat-p000_gomaxprocs=2", "calib-end"]


def test_grid_designs_repeats_and_oom(tmp_path):
    designs_file = tmp_path / "d.toml"
    designs_file.write_text('''
[[design]]
name = "a"
repeats = 3
repeat_where = {"go.gomaxprocs" = [2]}
[design.set]
"go.live_heap_mb" = 16
[design.axes]
"go.gogc" = [50, 100]
"go.gomaxprocs" = [1, 2]

[[design]]
name = "b"
[design.set]
"go.live_heap_mb" = 16
"go.gogc" = 50
"go.gomaxprocs" = 1
''')
    designs = grid.read_designs(designs_file)
    calls: list[str] = []
    base = load_scenario({"cgroup": {"cpu_limit": 1.0}, "workload": {"kind": "stream"}})
    state = grid.run_grid(base, [], tmp_path / "g", designs=designs, log=lambda s: None,
                          run_one=_fake_runner(calls, status=lambda n: "oom" if "gogc=50_gomaxprocs=1" in n else "ok",
                                               tenants=lambda n: 1.0 if n.startswith("repeat3") else 0.1))
    # 4 points (design b's point equals one of a's and runs once), 2 of them 3 times, back to back
    points = [c for c in calls if c.startswith("p")]
    assert len(points) == 4 and all(p.startswith(("p000_a_", "p001_a_", "p002_a_", "p003_a_")) for p in points)
    i = calls.index("p001_a_gogc=50_gomaxprocs=2")
    assert calls[i:i + 3] == ["p001_a_gogc=50_gomaxprocs=2", "repeat2-p001_a_gogc=50_gomaxprocs=2",
                              "repeat3-p001_a_gogc=50_gomaxprocs=2"]
    assert len(calls) == 2 + 4 + 4 and state["oom"] == 1 and state["failed"] == 0
    spread = state["drift"]["repeats"]
    assert spread["overall"]["points"] == 2
    row = spread["per_point"]["p001_a_gogc=50_gomaxprocs=2"]
    assert row["runs"] == 3 and row["throughput_per_s"] > 0 and row["comparable"] is False
    with pytest.raises(ScenarioError, match="repeats"):
        bad = tmp_path / "bad.toml"
        bad.write_text("[[design]]\nrepeats = 0\n")
        grid.read_designs(bad)
    with pytest.raises(ScenarioError, match="section.key"):
        bad.write_text("[[design]]\n[design.axes]\ngogc = [1]\n")
        grid.read_designs(bad)


def test_a_design_unsets_an_optional_key_with_null(tmp_path):
    """TOML has no null: ``"null"`` in a design's axes or set unsets the key, as ``--set key=null``."""
    designs_file = tmp_path / "d.toml"
    designs_file.write_text('''
[[design]]
name = "q"
[design.set]
"go.gomemlimit_mb" = "none"
[design.axes]
"cgroup.cpu_limit" = ["null", 1.0]
''')
    (d,) = grid.read_designs(designs_file)
    assert d.axes == [("cgroup.cpu_limit", [None, 1.0])] and d.set == {"go.gomemlimit_mb": None}
    base = load_scenario({"cgroup": {"cpu_limit": 0.5}, "go": {"gomemlimit_mb": 64}, "workload": {"kind": "stream"}})
    runs = [base.with_overrides(list(o.items())) for _, o, _ in d.points()]
    assert [r["cgroup.cpu_limit"] for r in runs] == [None, 1.0]
    assert all(r["go.gomemlimit_mb"] is None for r in runs)


def test_memory_policies_and_load_fraction(tmp_path):
    sc = load_scenario({"cgroup": {"cpu_limit": 0.5, "memory_limit_mb": 400},
                        "go": {"gomemlimit_policy": "automemlimit", "automemlimit_ratio": 0.8},
                        "workload": {"kind": "open", "cpu_ms_per_request": 0.4}, "lab": {"load_fraction": 0.6}})
    argv = launch.workload_command(tmp_path / "w", sc, "127.0.0.1:1")
    assert "-automemlimit" in argv and argv[argv.index("-automemlimit-ratio") + 1] == "0.8"
    assert "GOMEMLIMIT" not in launch.workload_env(sc, base={"GOMEMLIMIT": "1", "AUTOMEMLIMIT": "off"})
    assert "AUTOMEMLIMIT" not in launch.workload_env(sc, base={"AUTOMEMLIMIT": "off"})
    assert launch.memory_limit_bytes(sc) == 400 << 20
    assert launch.expected_gomemlimit(sc) == int((400 << 20) * 0.8)
    assert launch.expected_gomemlimit(load_scenario({"go": {"gomemlimit_policy": "automemlimit"}})) is None
    assert launch.expected_gomemlimit(load_scenario({"go": {"gomemlimit_mb": 64}})) == 64 << 20
    assert launch.resolve_lab_keys(sc)["workload.rate_per_s"] == pytest.approx(750.0)  # 60 % of 0.5 core / 0.4 ms
    with pytest.raises(ScenarioError, match="lab.load_fraction"):
        launch.resolve_lab_keys(load_scenario({"workload": {"kind": "stream"}, "lab": {"load_fraction": 0.5}}))
    with pytest.raises(ScenarioError, match="gomemlimit_mb"):
        runner.check_scenario(load_scenario({"go": {"gomemlimit_policy": "automemlimit", "gomemlimit_mb": 64}}))
    with pytest.raises(ScenarioError, match="profile_s"):
        runner.check_scenario(load_scenario({"run": {"duration_s": 10, "warmup_s": 5}, "lab": {"profile_s": 6}}))
    with pytest.raises(ScenarioError, match="trace_s"):
        runner.check_scenario(load_scenario({"run": {"duration_s": 10, "warmup_s": 5}, "lab": {"trace_s": 6}}))


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


GC_EXPO_0 = """go_gc_heap_allocs_bytes_total 1000
go_gc_duration_seconds_sum 0.5
go_cpu_classes_total_cpu_seconds_total 10
go_cpu_classes_idle_cpu_seconds_total 4
go_cpu_classes_gc_total_cpu_seconds_total 1
go_cpu_classes_user_cpu_seconds_total 5
cfsim_go_sched_latencies_seconds_bucket{le="1e-06"} 10
cfsim_go_sched_latencies_seconds_bucket{le="0.001"} 10
cfsim_go_sched_latencies_seconds_bucket{le="+Inf"} 10
"""
GC_EXPO_1 = GC_EXPO_0.replace("allocs_bytes_total 1000", "allocs_bytes_total 5000").replace(
    "sum 0.5", "sum 0.75").replace("total_cpu_seconds_total 10", "total_cpu_seconds_total 30").replace(
    "idle_cpu_seconds_total 4", "idle_cpu_seconds_total 8").replace(
    'le="1e-06"} 10', 'le="1e-06"} 60').replace('le="0.001"} 10', 'le="0.001"} 110').replace(
    'le="+Inf"} 10', 'le="+Inf"} 110') + """go_gc_heap_live_bytes 16777216
go_gc_gogc_percent 100
go_gc_gomemlimit_bytes 9.223372036854776e+18
go_gc_limiter_last_enabled_gc_cycle 7
"""


def test_gc_memory_keys_from_two_snapshots():
    mem0 = cgroup.MemoryStat(100, 150, 1 << 30, 90, 80, 10, 1, 0, 0)
    mem1 = cgroup.MemoryStat(200, 250, 1 << 30, 180, 170, 10, 4, 0, 0)
    s0 = summary.Snapshot(0.0, cgroup.CpuStat(0, 0, 0, 0), summary.parse_exposition(GC_EXPO_0), {}, mem0, {})
    s1 = summary.Snapshot(10.0, cgroup.CpuStat(8_000_000_000, 0, 0, 0), summary.parse_exposition(GC_EXPO_1),
                          summary.parse_exposition("process_cpu_seconds_total 3\n"), mem1,
                          {"VmRSS": 300, "VmHWM": 400})
    out = summary.gc_memory(s0, s1, heap_goal_mean_bytes=3.0e7)
    assert set(out) == set(summary.GC_MEMORY_KEYS)
    assert out["gc_alloc_bytes"] == 4000 and out["gc_pause_total_s"] == pytest.approx(0.25)
    assert out["gc_heap_live_bytes"] == 16777216 and out["gogc_percent"] == 100
    assert out["gomemlimit_bytes"] is None  # math.MaxInt64: no limit
    assert out["gc_limiter_last_enabled_cycle"] == 7 and out["gc_heap_goal_mean_bytes"] == 3.0e7
    # 50 of 100 new transitions within 1 us; P-time 16 s busy over 10 s against 0.8 cores of CPU
    assert out["sched_latency_p50_s"] == pytest.approx(1e-6)
    assert out["go_cpu_classes_busy_cores"] == pytest.approx(1.6) and out["cpu_classes_busy_over_usage"] == pytest.approx(2.0)
    assert out["memory_usage_bytes"] == 200 and out["memory_working_set_bytes"] == 180 and out["memory_failcnt"] == 3
    assert out["process_rss_bytes"] == 300 and out["process_rss_peak_bytes"] == 400 and out["oom_kills"] == 0
    assert out["loadgen_cpu_cores"] == pytest.approx(0.3)


def test_samples_from_a_prometheus_vector_match_the_exposition():
    body = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"__name__": "cfsim_records_consumed_total", "job": "workload"}, "value": [1.0, "1100"]},
        {"metric": {"__name__": "cfsim_item_latency_seconds_bucket", "le": "0.001", "job": "workload"},
         "value": [1.0, "550"]},
        {"metric": {"__name__": "go_gc_duration_seconds", "quantile": "0.5"}, "value": [1.0, "0.001"]}]}}
    got = summary.samples_from_vector(json.dumps(body))
    want = summary.parse_exposition(EXPO_1)
    assert got["cfsim_records_consumed_total"] == want["cfsim_records_consumed_total"]
    assert got['cfsim_item_latency_seconds_bucket{le="0.001"}'] == want['cfsim_item_latency_seconds_bucket{le="0.001"}']
    assert got['go_gc_duration_seconds{quantile="0.5"}'] == 0.001


def test_mean_limit_follows_the_quota_actually_written():
    """The VPA in the loop moved the quota from 0.5 to 1.168 cores: the mean is not the start value."""
    man = {"cgroup": {"initial_bandwidth": {"quota_us": 50000, "period_us": 100000},
                      "quota_changes": [{"t_s": 5.5, "applied_t_s": 6.0, "cpu_limit_cores": 1.0, "vpa_action": "resize"},
                                        {"t_s": 8.0, "applied_t_s": 8.0, "cpu_limit_cores": None, "vpa_action": "x"}]}}
    assert derive.mean_limit(man, 2.0, 10.0) == pytest.approx((0.5 * 4 + 1.0 * 4) / 8)
    assert derive.mean_limit(man, -1.0, 2.0) == pytest.approx(0.5)  # the start-up quota held before t=0
    man["cgroup"]["quota_changes"].append({"t_s": 9.0, "applied_t_s": 9.0, "cpu_limit_cores": None})
    assert derive.mean_limit(man, 2.0, 10.0) is None  # unlimited for a while: no mean limit


def test_window_samples_keep_every_bucket_a_window_quantile_uses():
    """Trimming the histograms to the buckets the window touched changes no quantile."""
    import random

    rng = random.Random(3)
    les = [round(1e-4 * 2 ** (i / 6), 9) for i in range(60)] + [math.inf]
    def expo(counts):
        return {f'cfsim_request_duration_seconds_bucket{{le="{"+Inf" if math.isinf(le) else le}"}}': c
                for le, c in zip(les, counts)}
    for _ in range(50):
        obs0 = sorted(rng.randrange(0, 61) for _ in range(rng.randrange(0, 40)))
        new = sorted(rng.randrange(10, 30) for _ in range(rng.randrange(0, 40)))
        c0 = [sum(1 for o in obs0 if o <= i) for i in range(61)]
        c1 = [c + sum(1 for o in new if o <= i) for i, c in enumerate(c0)]
        s0, s1 = expo(c0), expo(c1)
        kept = summary.window_samples(s0, s1)
        assert len(kept["end"]) <= 61
        for q in (0.5, 0.9, 0.99, 0.999, 1.0):
            full = summary.histogram_quantile(q, summary.bucket_deltas("cfsim_request_duration_seconds", s0, s1))
            cut = summary.histogram_quantile(q, summary.bucket_deltas("cfsim_request_duration_seconds",
                                                                      kept["start"], kept["end"]))
            assert cut == full


def test_scrape_health_counts_failed_scrapes_per_job():
    def body(values_by_job):
        return {"data": {"result": [{"metric": {"job": j}, "values": [[t, str(v)] for t, v in vals]}
                                    for j, vals in values_by_job.items()]}}
    up = body({"workload": [(9, 1), (10, 0), (11, 0), (12, 1), (13, 0)], "cadvisor": [(10, 1), (11, 1), (12, 1)]})
    dur = body({"workload": [(10, 1.0), (11, 1.0), (12, 0.3)], "cadvisor": [(10, 0.01)]})
    h = derive.scrape_health({"up": up, "scrape_duration_seconds": dur}, 10, 12)
    assert h["workload"] == {"steps": 3, "down": 2, "max_scrape_duration_s": 1.0}
    assert h["cadvisor"]["down"] == 0


def test_async_preempt_leaf_is_summed_wherever_profsplit_lists_it():
    from cfsim.lab.report import async_preempt_leaf_s
    split = {"top_scheduler_leaf": [{"function": "runtime.asyncPreempt", "cpu_s": 3.47},
                                    {"function": "runtime.futex", "cpu_s": 0.2}],
             "top_gc_leaf": [{"function": "runtime.asyncPreempt", "cpu_s": 0.03}]}
    assert async_preempt_leaf_s(split) == pytest.approx(3.5)
    assert async_preempt_leaf_s({"top_gc_leaf": [{"function": "runtime.scanObject", "cpu_s": 1.0}]}) == 0


def test_lab_report_names_bad_input(tmp_path, capsys):
    from cfsim.lab.report import main

    assert main(["--help"]) == 0 and "python -m cfsim.lab.report" in capsys.readouterr().out
    assert main([]) == 2
    with pytest.raises(SystemExit, match="not a lab grid folder"):
        main([str(tmp_path)])
    with pytest.raises(SystemExit, match="not a lab grid folder"):
        main(["--manifest", str(tmp_path), "nosuchgrid"])
    with pytest.raises(SystemExit, match="--manifest needs"):
        main(["--manifest", str(tmp_path)])
    (tmp_path / "grid.json").write_text('{"order": [], "runs": {}}')
    with pytest.raises(SystemExit, match="--rows needs 1 value"):
        main([str(tmp_path), "--rows"])


def test_host_facts_record_the_scan_path_the_workload_runs_with():
    # the manifest's vector-scan flag is the workload's: its GODEBUG can switch a feature off
    with_scan = runner.host_facts()["go_vector_span_scan"]
    off = runner.host_facts("gctrace=1,cpu.avx512bw=off")["go_vector_span_scan"]
    assert off is (None if with_scan is None else False)


def test_proc_stat_faults_are_counted_after_the_command_name():
    """``/proc/<pid>/stat``'s command name may hold spaces and parentheses; minflt and majflt are
    fields 10 and 12 counted from its closing parenthesis (proc(5)). A line cut short raises, and
    the runner then records no fault counts rather than wrong ones."""
    from cfsim.lab.runner import parse_proc_stat_faults
    assert parse_proc_stat_faults("7 (work (x) y) R 1 7 7 0 -1 4194304 15 0 2 0") == {"minflt": 15, "majflt": 2}
    with pytest.raises(IndexError):
        parse_proc_stat_faults("7 (w) R 1 7")
