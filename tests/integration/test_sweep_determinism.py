"""The same study gives identical rows whatever the executor or worker count (real simulate)."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from cfsim.cli import main
from cfsim.sweep import DaskExecutor, Grid, SweepResults, parse_axis, run_sweep

GRID = ["cgroup.cpu_limit=0.5:2:0.5", "go.gomaxprocs=host,2"]
FAST = ["run.duration_s=0.5", "workload.jitter_ms=5"]
VOLATILE = ["wall_s"]


def _frame(path):
    df = SweepResults.open(path).frame.drop(columns=VOLATILE)
    return df.sort_values("run_id").reset_index(drop=True)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("ref")
    run_sweep("cpu-bound-threads", Grid(parse_axis(g) for g in GRID), out=out, seeds=2,
              overrides=FAST, workers=0, progress=False)
    return _frame(out)


def test_seeds_matter_in_this_study(reference):
    # otherwise the comparisons below could not catch a run given another run's seed
    per_seed = reference.groupby("point_id")["throttled_time_s"].nunique()
    assert (per_seed > 1).any()
    assert reference["status"].eq("ok").all() and len(reference) == 16


@pytest.mark.parametrize("workers", [1, 2])
def test_local_pool_matches_in_process(tmp_path, reference, workers):
    report = run_sweep("cpu-bound-threads", Grid(parse_axis(g) for g in GRID), out=tmp_path,
                       seeds=2, overrides=FAST, workers=workers, progress=False)
    assert (report.executor, report.workers) == ("local", workers)
    pd.testing.assert_frame_equal(_frame(tmp_path), reference)


def test_dask_local_cluster_matches_local_pool(tmp_path, reference):
    pytest.importorskip("distributed")
    executor = DaskExecutor("local", workers=2, processes=False)
    report = run_sweep("cpu-bound-threads", Grid(parse_axis(g) for g in GRID), out=tmp_path,
                       seeds=2, overrides=FAST, executor=executor, progress=False)
    assert (report.executor, report.workers, report.ok) == ("dask", 2, 16)
    pd.testing.assert_frame_equal(_frame(tmp_path), reference)


def test_dask_scheduler_address_matches_local_pool(tmp_path, reference):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        report = run_sweep("cpu-bound-threads", Grid(parse_axis(g) for g in GRID), out=tmp_path,
                           seeds=2, overrides=FAST, dask=cluster.scheduler_address, progress=False)
    assert (report.executor, report.workers, report.ok) == ("dask", 2, 16)
    pd.testing.assert_frame_equal(_frame(tmp_path), reference)


def test_cli_sweep_file_then_plot(tmp_path, reference, capsys):
    study = tmp_path / "study.toml"
    study.write_text(f'''scenario = "cpu-bound-threads"
seeds = 2
out = "{tmp_path / 'out'}"
[set]
"run.duration_s" = 0.5
"workload.jitter_ms" = 5
[grid]
"cgroup.cpu_limit" = "0.5:2:0.5"
"go.gomaxprocs" = ["host", 2]
''')
    assert main(["sweep", "--file", str(study), "--workers", "2", "--no-progress", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] == 16
    pd.testing.assert_frame_equal(_frame(tmp_path / "out"), reference)
    assert main(["sweep", "--plot", str(tmp_path / "out")]) == 0
    written = capsys.readouterr().out.split()
    assert [p.rsplit(".", 1)[1] for p in written] == ["png", "svg"]
    assert all((tmp_path / "out" / f"sweep.{ext}").stat().st_size > 1000 for ext in ("png", "svg"))


def test_cli_errors_are_one_line(tmp_path, capsys):
    assert main(["sweep", "cpu-bound-threads", "--grid", "cgroup.cpu_limt=1,2", "--out", str(tmp_path)]) == 2
    assert "invalid grid: cgroup.cpu_limt: unknown key" in capsys.readouterr().err
    assert main(["sweep", "cpu-bound-threads", "--grid", "cgroup.cpu_limit=1,2"]) == 2
    assert "--out DIR is required" in capsys.readouterr().err
