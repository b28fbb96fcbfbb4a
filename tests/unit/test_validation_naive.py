"""The naive baseline beside every validation figure: min(demand, caps), the textbook GC."""
import json

import pandas as pd
import pytest

from cfsim.scenario import load_scenario
from cfsim.simulation import simulate
from cfsim.validation import validate, write_report
from cfsim.validation.naive import naive_comparison, naive_summary, textbook_gc


def _sc(data, overrides=()):
    return load_scenario(data, list(overrides))


def test_a_closed_loop_answers_littles_law_at_the_cap():
    data = {"host": {"cpus": 2}, "cgroup": {"cpu_limit": 1.0}, "go": {"gomaxprocs": 2},
            "workload": {"kind": "closed", "clients": 4, "think_ms": 9.0, "cpu_ms_per_request": 1.0},
            "run": {"duration_s": 10, "warmup_s": 2}}
    free = naive_summary(_sc(data))   # 4 clients x 1 / (1 + 9) ms = 0.4 cores, below the limit
    assert free["cpu_usage_cores"] == pytest.approx(0.4)
    assert free["throughput_per_s"] == pytest.approx(400.0)
    assert free["throttled_ratio"] == 0.0
    assert free["latency_p99_s"] == pytest.approx(0.001)
    capped = naive_summary(_sc(data, ["cgroup.cpu_limit=0.2"]))
    assert capped["throughput_per_s"] == pytest.approx(200.0)
    assert capped["throttled_ratio"] == 1.0
    assert capped["latency_p50_s"] == pytest.approx(4 / 200.0 - 0.009)   # clients / throughput - think


def test_a_stream_is_capped_by_its_workers_and_the_cpus_its_neighbours_leave():
    data = {"host": {"cpus": 2}, "cgroup": {"cpu_limit": 2.0}, "go": {"gomaxprocs": 4},
            "workload": {"kind": "stream", "rate_per_s": 3000, "cpu_ms_per_item": 1.0, "workers": 1},
            "run": {"duration_s": 10, "warmup_s": 2}}
    one = naive_summary(_sc(data))
    assert one["cpu_usage_cores"] == pytest.approx(1.0)
    assert one["throttled_ratio"] == 0.0   # one worker cannot exceed a 2-core limit
    crowded = naive_summary(_sc(data, ["workload.workers=8", "host.background_cores=1.5"]))
    assert crowded["cpu_usage_cores"] == pytest.approx(0.5)
    assert crowded["latency_p99_s"] is None   # a stream has no naive latency


def test_a_scheduled_limit_is_averaged_over_the_window():
    data = {"host": {"cpus": 4}, "cgroup": {"cpu_limit": 0.5, "limit_schedule": [[6.0, 2.0]]},
            "go": {"gomaxprocs": 4},
            "workload": {"kind": "stream", "rate_per_s": 1000, "cpu_ms_per_item": 1.0, "workers": 8},
            "run": {"duration_s": 10, "warmup_s": 2}}
    s = naive_summary(_sc(data))   # 4 s at 0.5 core (throttled), 4 s at 1.0 core of 2 (not)
    assert s["cpu_usage_cores"] == pytest.approx(0.75)
    assert s["throttled_ratio"] == pytest.approx(0.5)


def test_the_textbook_gc_caps_the_goal_by_gomemlimit_and_kills_above_the_container_limit():
    data = {"go": {"live_heap_mb": 62, "process_heap_mb": 2, "roots_mb": 0, "gogc": 100},
            "workload": {"kind": "open", "rate_per_s": 100, "cpu_ms_per_request": 1.0, "alloc_kb_per_request": 64}}
    g = textbook_gc(_sc(data), 1024.0, 10.0)   # 64 MiB/s over 64 MiB of headroom: one cycle a second
    assert g["gc_cycles"] == pytest.approx(10.0)
    assert g["memory_usage_mean_bytes"] == pytest.approx(96 * 2**20)
    limited = textbook_gc(_sc(data, ["go.gomemlimit_mb=80"]), 1024.0, 10.0)
    assert limited["gc_heap_goal_mean_bytes"] == pytest.approx(80 * 2**20)
    assert limited["gc_cycles"] == pytest.approx(40.0)   # 16 MiB of headroom
    assert textbook_gc(_sc(data, ["cgroup.memory_limit_mb=100"]), 1024.0, 10.0)["oom_kills"] == 1.0
    assert textbook_gc(_sc(data, ["cgroup.memory_limit_mb=200"]), 1024.0, 10.0)["oom_kills"] == 0.0
    rooted = textbook_gc(_sc(data, ["go.roots_mb=16"]), 1024.0, 10.0)   # the guide: live + (live + roots) x GOGC/100
    assert rooted["gc_heap_goal_mean_bytes"] == pytest.approx(144 * 2**20)


def test_closeness_of_rates_is_a_factor_so_a_low_naive_answer_does_not_win_by_the_cap_at_minus_one():
    runs = [{"errors": {"latency_p99_s": e}, "naive_errors": {"latency_p99_s": n}}
            for e, n in ((1.5, -0.9), (1.2, -0.8), (-0.1, -0.95))]
    c = naive_comparison(runs, "latency_p99_s")
    assert c["median_abs"] < c["model_median_abs"]           # the relative errors favour the naive side
    assert (c["model_closer"], c["naive_closer"]) == (3, 0)   # the factors do not
    assert c["model_median_factor"] < c["naive_median_factor"]


OPEN = {"host": {"cpus": 2}, "cgroup": {"cpu_limit": 1.0}, "go": {"gomaxprocs": 2, "live_heap_mb": 16},
        "workload": {"kind": "open", "rate_per_s": 400, "cpu_ms_per_request": 0.5, "alloc_kb_per_request": 16},
        "run": {"duration_s": 3.0, "warmup_s": 1.0, "seed": 5}}


def test_the_report_sets_the_naive_baseline_beside_the_model(tmp_path):
    # runs whose 'measurement' is the model itself: the twin is exact, the naive model misses the
    # runtime's CPU and the queue, so it must come out behind on CPU and p50 but not on throughput
    root = tmp_path / "lab" / "open"
    for rate in (300, 400, 500):
        sc = _sc(OPEN, [f"workload.rate_per_s={rate}"])
        run = root / f"p_rate={rate}"
        run.mkdir(parents=True)
        (run / "scenario.toml").write_text(sc.to_toml())
        (run / "summary.json").write_text(json.dumps(simulate(sc).summary))
        (run / "manifest.json").write_text(json.dumps({"run_id": run.name, "note": "generated by a test"}))
    rep = validate(root, normalise=False, workers=1)
    cpu = rep.by_regime["uncapped"]["cpu_usage_cores"]["naive"]
    assert cpu["n"] == 3 and cpu["model_closer"] == 3 and cpu["model_median_abs"] < cpu["median_abs"]
    thr = rep.by_regime["uncapped"]["throughput_per_s"]["naive"]
    assert thr["median_abs"] < 0.05   # an open loop's throughput is its arrival rate: the naive model has it too
    p50 = rep.by_regime["uncapped"]["latency_p50_s"]["naive"]
    assert p50["model_closer"] == 3
    gc = rep.gc["regimes"]["gogc"]["gc_cycles_per_s"]
    assert gc["naive"]["n"] == 3
    out = write_report(rep, tmp_path / "report")
    md = (out / "report.md").read_text()
    assert "## The model against the naive baseline" in md and "| uncapped | throughput_per_s | 3 |" in md
    table = pd.read_csv(out / "errors.csv")
    row = table[(table.metric == "cpu_usage_cores")].iloc[0]
    assert row["naive"] == pytest.approx(row["observed"] * (1 + row["naive_error"]))
    js = json.loads((out / "report.json").read_text())
    assert "tails_naive" in js and js["throttled_below_limit"]["lab not, model not"] == 3


def test_the_report_measures_the_loops_share_from_repeats(tmp_path):
    """Repeats whose 'measured' CPU an item follows their start-up loop rounds to the power 0.6: the
    report's loop-share slope recovers 0.6 from the lab side alone."""
    root = tmp_path / "lab" / "open"
    for point, rate in (("p0", 300), ("p1", 500)):
        for name, rounds in ((point, 1000.0), (f"repeat2-{point}", 1100.0), (f"repeat3-{point}", 930.0)):
            sc = _sc(OPEN, [f"workload.rate_per_s={rate}"])
            summary = simulate(sc).summary
            summary["cpu_usage_cores"] *= (rounds / 1000.0) ** 0.6
            run = root / name
            run.mkdir(parents=True)
            (run / "scenario.toml").write_text(sc.to_toml())
            (run / "summary.json").write_text(json.dumps(summary))
            (run / "manifest.json").write_text(json.dumps({"run_id": name, "calibration_rounds_per_cpu_ms": rounds}))
    rep = validate(root, normalise=False, workers=1)
    share = rep.loop_share()["open"]
    assert share["runs"] == 6 and share["lab_slope"] == pytest.approx(0.6, abs=1e-6)
    from cfsim.validation.report import to_markdown
    assert "## The loop's share of an item's CPU" in to_markdown(rep)
