"""Bad input gets a one-line error naming the field, file or option (exit 2), never a traceback, and
loses nothing: found by trying every command as a new user would (2026-12-04)."""
from __future__ import annotations

import json
import pickle

import pandas as pd
import pytest

from cfsim.advice.search import SearchOptions, Searcher
from cfsim.advice.slo import SLOError, parse_slo
from cfsim.cli import main
from cfsim.io.errors import CfsimParseError, MissingMetricsError, PrometheusAPIError
from cfsim.scenario import ScenarioError, load_scenario
from cfsim.sweep.grid import GridError


def _err(argv: list[str], capsys) -> str:
    assert main(argv) == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("setting, says", [
    ("cgroup.cpu_limit=inf", "cgroup.cpu_limit: must be a finite number"),
    ("host.cpus=nan", "host.cpus: must be a finite number"),
    ("workload.cpu_ms_per_request=inf", "workload.cpu_ms_per_request: must be a finite number"),
    # kernel/sched/core.c: max_cfs_runtime, 2^44 - 1 us
    ("cgroup.cpu_limit=1e300", "the kernel's max_cfs_runtime"),
    ("run.seed=99999999999999999999999", "run.seed: must be in [0, 9223372036854775807]"),
])
def test_numbers_no_kernel_or_run_accepts_are_named(capsys, setting, says):
    assert says in _err(["run", "cpu-bound-threads", "--set", setting], capsys)


@pytest.mark.parametrize("schedule, says", [
    ('[[0, 1], [1, "x"]]', "step 1: cpu_limit_cores must be a finite number"),
    ('[["a", 1]]', "step 0: t_s must be a finite number"),
])
def test_a_limit_schedule_of_words_is_named(tmp_path, capsys, schedule, says):
    f = tmp_path / "s.toml"
    f.write_text(f"[cgroup]\nlimit_schedule = {schedule}\n")
    assert says in _err(["run", str(f)], capsys)


@pytest.mark.parametrize("value", ["0", "-1", '"x"', "nan"])
def test_a_cost_factor_that_is_no_speed_is_refused(tmp_path, capsys, value):
    f = tmp_path / "fit.toml"
    f.write_text(f"[params]\ncost_factor = {value}\n")
    err = _err(["run", "menu-gke", "--set", "run.duration_s=1", "--params", str(f)], capsys)
    assert "fit.toml: [params] cost_factor must be a finite number > 0" in err


def test_errors_cross_process_boundaries_whole():
    # a sweep's or a search's worker passes its error back pickled: the class and the text survive
    for e in (ScenarioError("a.b", "bad"), GridError("g", "bad"), CfsimParseError("f", "m", line=3, column=4),
              MissingMetricsError({"m": ["an analysis"]}, ["x"]), PrometheusAPIError("s", "bad_data", "oops", 400)):
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and str(back) == str(e)


def test_the_search_starts_at_the_kernels_smallest_quota_for_the_period():
    # 1 ms of quota a period: 10 millicores at 100 ms, 100 at 10 ms (a 0.05-core candidate would be
    # refused by the kernel, and the worker's error killed the process pool)
    for period_us, floor_m in ((100_000, 50), (10_000, 100), (1_000_000, 50)):
        sc = load_scenario("fibtest-80cpu", [f"cgroup.period_us={period_us}", "cgroup.cpu_limit=0.5"])
        assert Searcher(sc, options=SearchOptions()).lo_m == floor_m
    with pytest.raises(ValueError, match="fine_step must be a number > 0"):
        Searcher(load_scenario("fibtest-80cpu"), options=SearchOptions(fine_step=-1))


@pytest.mark.parametrize("argv, says", [
    (["--fine-step", "-1"], "--fine-step must be a number > 0"),
    (["--max-limit", "0"], "--max-limit must be a number > 0"),
    (["--slo", "throttled_ratio>=2"], "is a fraction in [0, 1], so no run can meet it"),
    (["--slo", "throughput_per_s>=-5"], "is never negative, so every run meets it"),
])
def test_recommend_refuses_options_and_slos_no_search_can_use(capsys, argv, says):
    slo = [] if "--slo" in argv else ["--slo", "throughput_per_s>=1"]
    assert says in _err(["recommend", "cpu-bound-threads", *slo, *argv], capsys)


def test_slos_within_their_range_still_parse():
    assert str(parse_slo("throttled_ratio<=0")) == "throttled_ratio<=0"
    assert str(parse_slo("lag_final_s<=0")) == "lag_final_s<=0"
    with pytest.raises(SLOError, match="every run meets it"):
        parse_slo("throttled_ratio<=1")


def test_recommend_refuses_a_sigma_that_removes_the_margin(tmp_path, capsys):
    f = tmp_path / "fit.toml"
    for sigma in ('"abc"', "-5.0"):
        f.write_text(f'[params]\n"go.gc_scan_mb_per_ms" = 2.0\n[uncertainty."go.gc_scan_mb_per_ms"]\nsigma_log = {sigma}\n')
        err = _err(["recommend", "cpu-bound-threads", "--slo", "throughput_per_s>=1", "--params", str(f)], capsys)
        assert "sigma_log must be a number >= 0" in err


def test_a_file_where_an_output_folder_goes_is_named_before_any_work(tmp_path, capsys):
    f = tmp_path / "afile"
    f.write_text("")
    for argv in (["run", "cpu-bound-threads", "--out", str(f)],
                 ["sweep", "cpu-bound-threads", "--grid", "cgroup.cpu_limit=1,2", "--out", str(f / "x")],
                 ["trap", "--out", str(f)],
                 ["validate", str(tmp_path), "--report", str(f)]):
        assert "is a file, not a folder" in _err(argv, capsys)


def test_sweep_options_are_checked_before_anything_is_written(tmp_path, capsys):
    out = tmp_path / "sw"
    assert "--root-seed must be >= 0" in _err(["sweep", "cpu-bound-threads", "--grid", "cgroup.cpu_limit=1,2",
                                                "--root-seed", "-5", "--out", str(out)], capsys)
    assert not out.exists()
    study = tmp_path / "study.toml"
    study.write_text('scenario = "cpu-bound-threads"\nworkers = 0\n[grid]\n"cgroup.cpu_limit" = [1, 2]\n'
                     '[set]\n"run.duration_s" = 0.2\n')
    assert main(["sweep", "--file", str(study), "--out", str(out), "--no-progress"]) == 0   # 0: in this process


def test_an_interrupted_sweep_keeps_whole_parquet_and_says_how_to_resume(tmp_path, capsys):
    out = tmp_path / "sw"
    argv = ["sweep", "cpu-bound-threads", "--grid", "cgroup.cpu_limit=1,2,3,4", "--out", str(out),
            "--workers", "0", "--no-progress"]
    assert main(argv + ["--point-fn", "cfsim.testing:interrupted_point"]) == 130
    assert "--resume --out" in capsys.readouterr().err
    done = pd.read_parquet(out / "runs")           # any Parquet reader: no journal left in the folder
    assert sorted(done["cgroup.cpu_limit"]) == [1.0, 2.0]
    assert main(["sweep", "--resume", "--out", str(out), "--workers", "0", "--no-progress"]) == 0
    assert sorted(pd.read_parquet(out / "runs")["cgroup.cpu_limit"]) == [1.0, 2.0, 3.0, 4.0]


def test_trap_and_validate_options(capsys):
    assert "--table-every-h must be a number of hours > 0" in _err(["trap", "--table-every-h", "0", "--no-files"],
                                                                     capsys)
    assert "--seed-offset must be >= 0" in _err(["validate", ".", "--seed-offset", "-1"], capsys)


@pytest.mark.parametrize("param, says", [
    ("bogus.key=1:2", "--param bogus.key: neither cost_factor nor a scenario key"),
    ("go.gomaxprocs=1:4", "--param go.gomaxprocs: its values are not only numbers"),
    ("cost_factor=a:b", "--param cost_factor=a:b: write KEY, KEY=LOW:HIGH or KEY=VALUE"),
])
def test_calibrate_names_a_parameter_it_cannot_fit(tmp_path, capsys, param, says):
    assert says in _err(["calibrate", str(tmp_path), "--train", "go.gomaxprocs==1", "--param", param], capsys)


def test_workload_series_has_the_sample_at_the_end(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["run", "grab-sinktos3", "--set", "run.duration_s=3", "--set", "run.warmup_s=0", "--out", str(out),
                 "--no-band", "--json"]) == 0
    capsys.readouterr()
    kernel = pd.read_parquet(out / "series.parquet")["t_s"].tolist()
    workload = pd.read_parquet(out / "workload_series.parquet")["t_s"].tolist()
    assert kernel[-1] == workload[-1] == 3.0
    json.dumps(workload)


@pytest.mark.parametrize("command", [["recommend", "cpu-bound-threads", "--slo", "throughput_per_s>=1"],
                                     ["audit", "."]])
def test_connection_numbers_are_named_before_any_connection(capsys, command):
    assert "--prometheus-timeout must be a finite number of seconds > 0" in _err(
        [*command, "--prometheus-timeout", "0"], capsys)
    assert "--prometheus-retries must be >= 0" in _err([*command, "--prometheus-retries", "-1"], capsys)
