"""The lab-accuracy table (cfsim.validation.accuracy) and what `run` shows from it
(cfsim.overheads.accuracy): errors of held-out lab runs by regime and GOMAXPROCS, looked up for a
simulated scenario by the regime its own summary puts it in."""
from __future__ import annotations

import json

import pytest

from cfsim.overheads.accuracy import TABLE, accuracy_lines, lab_accuracy, read_accuracy, scenario_regime
from cfsim.scenario import load_scenario
from cfsim.validation.accuracy import ALL, METRICS, accuracy_rows, accuracy_toml, main
from cfsim.validation.regimes import gomaxprocs_bin


def _run(regime, g, cpu_err, p99=(1e-3, 1e-3), held_out=True):
    return {"held_out": held_out, "regime": regime,
            "observed": {"gomaxprocs": g, "latency_p99_s": p99[0]}, "simulated": {"latency_p99_s": p99[1]},
            "errors": {"cpu_usage_cores": cpu_err, "latency_p99_s": p99[1] / p99[0] - 1}}


def test_rows_by_regime_and_gomaxprocs_with_a_pooled_row_and_thin_cells_left_out():
    runs = [_run("uncapped", 2, e) for e in (0.01, -0.03, 0.05)] + [_run("uncapped", 8, 0.2)] \
        + [_run("quota-capped", 2, 0.0)] + [_run("uncapped", 2, 9.9, held_out=False)]
    rows = accuracy_rows(runs, min_runs=3)
    cells = {(r["regime"], r["gomaxprocs"], r["metric"]): r for r in rows}
    assert set(cells) == {("uncapped", "2", "cpu_usage_cores"), ("uncapped", "2", "latency_p99_s"),
                          ("uncapped", ALL, "cpu_usage_cores"), ("uncapped", ALL, "latency_p99_s")}
    two = cells[("uncapped", "2", "cpu_usage_cores")]
    assert two["runs"] == 3 and two["median_abs"] == 0.03 and two["median"] == 0.01   # the training run left out
    pooled = cells[("uncapped", ALL, "cpu_usage_cores")]
    assert pooled["runs"] == 4 and pooled["median_abs"] == pytest.approx(0.04)


def test_latency_rows_carry_the_factor_either_way():
    runs = [_run("uncapped", 1, 0.0, p99=(2e-3, 1e-3)), _run("uncapped", 1, 0.0, p99=(1e-3, 3e-3))]
    row = next(r for r in accuracy_rows(runs, min_runs=1) if r["metric"] == "latency_p99_s" and r["gomaxprocs"] == "1")
    assert row["median_factor"] == 2.5        # 2 (half the lab's) and 3 (three times)


def test_bins():
    assert [gomaxprocs_bin(g) for g in (1, 2, 3, 8, 9, 64, 65, None)] == ["1", "2", "3-8", "3-8", "9-64", "9-64",
                                                                          None, None]


def _table(tmp_path, rows):
    path = tmp_path / "acc.toml"
    path.write_text(accuracy_toml(rows, {"made": "2026-12-07", "commit": "abc", "runs": len(rows),
                                         "lab_host_cpus": 2, "params_files": ["a.toml"],
                                         "params": {"go.x": 1.5}}))
    return path


def test_the_toml_reads_back_and_a_bad_file_names_itself(tmp_path):
    rows = accuracy_rows([_run("uncapped", 2, 0.02)], min_runs=1)
    cells, source = read_accuracy(_table(tmp_path, rows))
    assert cells == rows and source["params_files"] == ["a.toml"] and source["params"] == {"go.x": 1.5}
    bad = tmp_path / "bad.toml"
    bad.write_text("cells = 3\n")
    with pytest.raises(ValueError, match="bad.toml"):
        read_accuracy(bad)


def test_the_command_writes_the_table_from_a_report(tmp_path, capsys):
    (tmp_path / "rep").mkdir()
    (tmp_path / "rep" / "report.json").write_text(json.dumps(
        {"runs": [_run("uncapped", 2, e) for e in (0.01, 0.02, 0.03, 0.04, 0.05)], "params": {"go.y": 2.0}}))
    out = tmp_path / "acc.toml"
    assert main([str(tmp_path / "rep"), "--out", str(out), "--params-file", "docs/params/x.toml"]) == 0
    cells, source = read_accuracy(out)
    assert {c["gomaxprocs"] for c in cells} == {"2", ALL} and source["runs"] == 5
    assert source["params_files"] == ["docs/params/x.toml"] and source["params"] == {"go.y": 2.0}
    with pytest.raises(SystemExit):
        main([str(tmp_path / "nowhere"), "--out", str(out)])


def _scenario(**over):
    return load_scenario("grab-sinktos3", [f"{k}={v}" for k, v in over.items()])


def test_a_scenario_is_put_in_a_regime_by_its_own_summary():
    sc = _scenario(**{"cgroup.cpu_limit": 1.0, "go.gomaxprocs": 2, "host.cpus": 2})
    assert scenario_regime(sc, {"cpu_usage_cores": 0.995}) == "quota-capped"
    assert scenario_regime(sc, {"cpu_usage_cores": 0.5}) == "uncapped"
    assert scenario_regime(sc, {"cpu_usage_cores": 0.5, "oom_killed": 1}) == "oom-killed"
    busy = _scenario(**{"cgroup.cpu_limit": 2.0, "go.gomaxprocs": 2, "host.cpus": 2, "host.background_cores": 0.6})
    assert scenario_regime(busy, {"cpu_usage_cores": 1.3}) == "contended"


def test_the_lookup_takes_the_bin_else_the_pooled_row_and_says_what_the_lab_did_not_cover(tmp_path):
    runs = [_run("uncapped", 2, 0.01)] * 5 + [_run("uncapped", 8, 0.1)] * 2
    path = _table(tmp_path, accuracy_rows(runs, min_runs=5))
    sc = _scenario(**{"cgroup.cpu_limit": 2.0, "go.gomaxprocs": 2, "host.cpus": 2})
    acc = lab_accuracy(sc, {"cpu_usage_cores": 0.5}, path=path)
    assert acc["regime"] == "uncapped" and acc["gomaxprocs"] == "2" and not acc["notes"]
    assert acc["metrics"]["cpu_usage_cores"]["gomaxprocs"] == "2"
    thin = lab_accuracy(_scenario(**{"cgroup.cpu_limit": 2.0, "go.gomaxprocs": 8, "host.cpus": 24}),
                        {"cpu_usage_cores": 0.5}, path=path)
    assert thin["gomaxprocs"] == "3-8" and thin["metrics"]["cpu_usage_cores"]["gomaxprocs"] == ALL
    assert thin["notes"] == ["measured on a 2-CPU host; this scenario has 24"]
    text = "\n".join(accuracy_lines(thin, {"cpu_usage_cores": 0.5}))
    assert "uncapped, at GOMAXPROCS 3-8" in text and "every GOMAXPROCS" in text and "24" in text
    assert lab_accuracy(sc, {"cpu_usage_cores": 1.99}, path=path) is None        # no quota-capped rows
    threads = load_scenario("fluentd-single-thread")
    assert lab_accuracy(threads, {"cpu_usage_cores": 0.5}, path=path) is None    # not a Go process


def test_the_committed_table_is_whole_and_says_how_it_was_made():
    cells, source = read_accuracy(TABLE)
    assert source["runs"] > 1000 and source["lab_host_cpus"] == 2 and source["params_files"]
    have = {(c["regime"], c["gomaxprocs"], c["metric"]) for c in cells}
    for regime in ("uncapped", "quota-capped"):
        for g in ("1", "2", "3-8", "9-64", ALL):
            assert (regime, g, "cpu_usage_cores") in have
    assert {c["metric"] for c in cells} <= set(METRICS)


def test_run_prints_the_lab_accuracy(capsys):
    from cfsim.cli import main as cli

    assert cli(["run", "grab-sinktos3", "--no-band", "--set", "run.duration_s=2", "--set", "run.warmup_s=0"]) == 0
    out = capsys.readouterr().out
    assert "lab accuracy (held-out lab runs in the same regime" in out and "cpu_usage_cores" in out


def test_recommend_carries_the_lab_accuracy_of_the_configuration_it_chose():
    from types import SimpleNamespace

    from cfsim.overheads.report import recommend_notes

    sc = _scenario(**{"host.cpus": 2, "cgroup.cpu_limit": 2.0, "go.gomaxprocs": 2})
    cand = SimpleNamespace(overrides=lambda s: [("cgroup.cpu_limit", 1.0), ("go.gomaxprocs", 1)])
    win = SimpleNamespace(candidate=cand, summary={"cpu_usage_cores": 0.995, "throughput_per_s": 10.0})
    notes = recommend_notes(sc, SimpleNamespace(result=SimpleNamespace(winner=win)))
    acc = notes["lab_accuracy"]
    assert acc["regime"] == "quota-capped" and acc["gomaxprocs"] == "1"
    assert "cpu_usage_cores" in acc["metrics"]
    assert recommend_notes(sc, SimpleNamespace(result=SimpleNamespace(winner=None)))["lab_accuracy"] is None


def test_the_committed_table_comes_from_the_validation_the_readme_quotes():
    """Remake the table whenever the README's validation figures are remade: both count the same
    held-out runs (README: "In one table: the whole lab (N runs, M held out")."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    m = re.search(r"In one table: the whole lab \(([\d,]+) runs, ([\d,]+) held out", readme)
    assert m, "the README's validation sentence moved; update this test"
    _, source = read_accuracy(TABLE)
    assert source["runs"] == int(m.group(2).replace(",", ""))


def test_audit_says_how_far_the_model_was_off_on_lab_runs_like_the_container():
    from cfsim.overheads.accuracy import accuracy_phrase
    from cfsim.overheads.report import audit_note

    sc = _scenario(**{"host.cpus": 2, "cgroup.cpu_limit": 1.0, "go.gomaxprocs": 1})
    note = audit_note(sc, {"cpu_usage_cores": 0.995, "throughput_per_s": 10.0})
    assert "lab runs like it (quota-capped, GOMAXPROCS 1): cpu |error|" in note and "p99 factor" in note
    assert accuracy_phrase(None) == "" and accuracy_phrase({"regime": "uncapped", "gomaxprocs": "2", "metrics": {}}) == ""


def test_a_sweep_point_carries_the_lab_accuracy_as_columns(tmp_path):
    """`sweep --band` (cfsim.overheads.report.summary_with_band): flat columns a table and a plot
    can use, None where no row applies; the same columns from the sweep command's output."""
    from cfsim.cli import main as cli
    from cfsim.overheads.accuracy import COLUMN_METRICS, accuracy_columns

    empty = accuracy_columns(None)
    assert empty["lab_regime"] is None and set(empty) == {"lab_regime", "lab_gomaxprocs_bin"} | {
        f"lab_{m}_factor" if m.startswith("latency_") else f"lab_{m}_abs_error" for m in COLUMN_METRICS}
    out = tmp_path / "sw"
    assert cli(["sweep", "grab-sinktos3", "--band", "--grid", "cgroup.cpu_limit=1,4", "--set", "run.duration_s=2",
                "--set", "run.warmup_s=0", "--set", "host.cpus=2", "--set", "go.gomaxprocs=2", "--out", str(out),
                "--workers", "0", "--no-progress"]) == 0
    import pandas as pd

    df = pd.read_parquet(out / "runs").sort_values("cgroup.cpu_limit")
    assert list(df["lab_regime"]) == ["quota-capped", "uncapped"]     # 1.03 cores at 1; 1.72 of 2 at 4
    assert df["lab_cpu_usage_cores_abs_error"].notna().all() and (df["lab_gomaxprocs_bin"] == "2").all()
