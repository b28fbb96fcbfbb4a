"""The store: atomic single-run files, compaction, dedupe, errors recorded as rows, xarray."""
from __future__ import annotations

import sys

import pandas as pd
import pyarrow as pa
import pytest

from cfsim.sweep import Grid, SweepResults, parse_axis, run_sweep
from cfsim.sweep.executors import DaskExecutor, ExecutorUnavailable
from cfsim.sweep.store import META_COLUMNS, RunStore, StoreError

FAST = ["run.duration_s=0.5", "workload.jitter_ms=5"]


def _grid(*specs):
    return Grid(parse_axis(s) for s in specs)


def test_rows_are_tidy_and_to_xarray_has_grid_dims(tmp_path):
    grid = _grid("cgroup.cpu_limit=0.5:1.5:0.5", "go.gomaxprocs=host,2")
    report = run_sweep("cpu-bound-threads", grid, out=tmp_path, seeds=2, overrides=FAST,
                       workers=0, progress=False)
    assert (report.total, report.computed, report.ok) == (12, 12, 12)
    res = SweepResults.open(tmp_path)
    df = res.frame
    assert len(df) == 12 and df["run_id"].is_unique
    for col in ("point_id", "seed", "status", "error", "scenario_toml", "cgroup.cpu_limit",
                "go.gomaxprocs", "run.duration_s", "run.seed", "throttled_ratio", "cpu_usage_cores"):
        assert col in df.columns
    assert list(df["seed"][:4]) == [0, 1, 0, 1]
    assert set(df["go.gomaxprocs"]) == {"host", "2"}  # a mixed-type axis is stored as text
    assert (df["run.duration_s"] == 0.5).all()
    ds = res.to_xarray()
    assert dict(ds.sizes) == {"cgroup.cpu_limit": 3, "go.gomaxprocs": 2, "seed": 2}
    assert list(ds["go.gomaxprocs"].values) == ["host", "2"]
    row = df.iloc[7]
    cell = ds["cpu_usage_cores"].sel({"cgroup.cpu_limit": row["cgroup.cpu_limit"],
                                      "go.gomaxprocs": row["go.gomaxprocs"], "seed": row["seed"]})
    assert float(cell) == row["cpu_usage_cores"]
    manifest = res.manifest
    assert manifest["root_seed"] == 1 and manifest["counts"] == {"ok": 12}
    assert manifest["versions"]["numpy"] and manifest["versions"]["pyarrow"]
    assert manifest["grid"][0] == {"key": "cgroup.cpu_limit", "values": [0.5, 1.0, 1.5]}


def test_a_failing_point_is_recorded_with_its_scenario_and_the_sweep_goes_on(tmp_path):
    # burst > quota is invalid only in combination: 0.5 cores x 100 ms = 50 ms < 60 ms burst
    grid = _grid("cgroup.cpu_limit=0.5,1.5", "cgroup.burst_us=0,60000")
    report = run_sweep("cpu-bound-threads", grid, out=tmp_path, overrides=FAST, workers=0,
                       progress=False)
    assert (report.ok, report.errors) == (3, 1)
    err = SweepResults.open(tmp_path).errors
    assert len(err) == 1
    row = err.iloc[0]
    assert "cgroup.burst_us" in row["error"] and row["status"] == "error"
    assert "burst_us = 60000" in row["scenario_toml"] and "cpu_limit = 0.5" in row["scenario_toml"]


def test_point_function_exceptions_become_error_rows(tmp_path):
    grid = _grid("cgroup.cpu_limit=0.25,1")
    report = run_sweep("cpu-bound-threads", grid, out=tmp_path, workers=1, progress=False,
                       point_fn="cfsim.testing:failing_point")
    assert (report.ok, report.errors) == (1, 1)
    assert "RuntimeError: toy failure" in report.first_errors[0]


def test_existing_output_needs_resume_and_the_same_study(tmp_path):
    grid = _grid("cgroup.cpu_limit=1,2")
    run_sweep("cpu-bound-threads", grid, out=tmp_path, overrides=FAST, workers=0, progress=False)
    with pytest.raises(StoreError, match="--resume"):
        run_sweep("cpu-bound-threads", grid, out=tmp_path, overrides=FAST, workers=0, progress=False)
    with pytest.raises(StoreError, match="grid differs"):
        run_sweep("cpu-bound-threads", _grid("cgroup.cpu_limit=1,3"), out=tmp_path, overrides=FAST,
                  workers=0, progress=False, resume=True)
    again = run_sweep("cpu-bound-threads", grid, out=tmp_path, overrides=FAST, workers=0,
                      progress=False, resume=True)
    assert (again.skipped, again.computed) == (2, 0)


def test_compaction_leftovers_and_tmp_files_never_duplicate_rows(tmp_path):
    run_sweep("cpu-bound-threads", _grid("cgroup.cpu_limit=0.5:2:0.5"), out=tmp_path, seeds=2,
              overrides=FAST, workers=0, progress=False, compact=False)
    journal = sorted(tmp_path.rglob("run-*.json"))
    assert len(journal) == 8 and not list(tmp_path.rglob("*.parquet"))
    res = SweepResults.open(tmp_path)  # readable before any Parquet exists
    assert len(res.frame) == 8
    store = res.store
    # a kill between writing a part and deleting its journal leaves both on disk
    kept = {p: p.read_bytes() for p in journal[:3]}
    store.compact()
    assert len(list(tmp_path.rglob("*.parquet"))) == 1 and not list(tmp_path.rglob("run-*.json"))
    for path, data in kept.items():
        path.write_bytes(data)
        (path.parent / f".{path.name}.dead.tmp").write_bytes(b"half a fi")
    assert store.read_table().num_rows == 8
    assert len(store.done_run_ids()) == 8
    store.clean()
    assert not list(tmp_path.rglob("*.tmp"))
    store.compact()
    assert [p.name[:5] for p in tmp_path.rglob("runs/*/*")] == ["part-"]
    assert store.read_table().num_rows == 8
    df = pd.read_parquet(tmp_path / "runs")  # plain Hive-partitioned Parquet once finished
    assert len(df) == 8 and "bucket" in df.columns


def test_journal_is_folded_into_parquet_parts_while_running(tmp_path):
    store = RunStore(str(tmp_path))
    store.prepare(1)
    store.configure(META_COLUMNS, flush_every=4)
    for i in range(10):
        store.write_run({"run_id": f"r{i}", "point_index": i, "seed": 0, "status": "ok", "x": i * 0.5}, 0)
    assert len(list(tmp_path.rglob("*.parquet"))) == 2 and len(list(tmp_path.rglob("run-*.json"))) == 2
    table = store.read_table()
    assert sorted(table.column("run_id").to_pylist()) == sorted(f"r{i}" for i in range(10))
    assert table.schema.field("x").type == pa.float64()


def test_urls_need_fsspec_and_a_backend(tmp_path, monkeypatch):
    pytest.importorskip("fsspec")
    url = f"memory://cfsim-test/{tmp_path.name}"
    report = run_sweep("cpu-bound-threads", _grid("cgroup.cpu_limit=1,2"), out=url,
                       overrides=FAST, workers=0, progress=False)
    assert report.ok == 2
    assert len(SweepResults.open(url).frame) == 2
    try:
        import s3fs  # noqa: F401
    except ImportError:
        with pytest.raises(StoreError, match="not supported here"):
            RunStore("s3://bucket/prefix")
    monkeypatch.setitem(sys.modules, "fsspec", None)
    with pytest.raises(StoreError, match="needs fsspec"):
        RunStore("s3://bucket/prefix")


def test_dask_missing_gives_a_clear_message(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ExecutorUnavailable, match=r"pip install 'cfsim\[dask\]'"):
        DaskExecutor("local")


def test_to_xarray_of_a_partial_sweep_leaves_missing_runs_empty(tmp_path):
    run_sweep("cpu-bound-threads", _grid("cgroup.cpu_limit=1,2", "go.gomaxprocs=host,2"), out=tmp_path,
              overrides=FAST, workers=0, progress=False, compact=False)
    victim = sorted(tmp_path.rglob("run-*.json"))[0]
    victim.unlink()  # as if the sweep had been killed before this run finished
    res = SweepResults.open(tmp_path)
    ds = res.to_xarray()
    assert dict(ds.sizes) == {"cgroup.cpu_limit": 2, "go.gomaxprocs": 2, "seed": 1}
    assert int(ds["cpu_usage_cores"].isnull().sum()) == 1
    assert int((ds["status"] == "ok").sum()) == 3


def test_overwrite_starts_again(tmp_path, capsys):
    from cfsim.cli import main

    args = ["sweep", "cpu-bound-threads", "--grid", "cgroup.cpu_limit=1,2", "--set", "run.duration_s=0.5",
            "--out", str(tmp_path), "--workers", "0", "--no-progress", "--json"]
    assert main(args) == 0
    assert main(args) == 2 and "--overwrite" in capsys.readouterr().err
    assert main(args + ["--overwrite"]) == 0
    assert len(SweepResults.open(tmp_path).frame) == 2


def test_a_run_that_kills_its_worker_is_lost_alone_and_retried_on_resume(tmp_path):
    grid = _grid("cgroup.cpu_limit=0.25,1,1.5,2,2.5,3")
    report = run_sweep("cpu-bound-threads", grid, out=tmp_path, workers=2, progress=False,
                       point_fn="cfsim.testing:crashing_point")
    assert (report.ok, report.errors, report.lost) == (5, 0, 1)
    assert "lost: BrokenProcessPool" in report.first_errors[0]
    assert len(SweepResults.open(tmp_path).frame) == 5
    again = run_sweep(None, out=tmp_path, resume=True, workers=1, progress=False)
    assert (again.skipped, again.computed, again.lost) == (5, 0, 1)
