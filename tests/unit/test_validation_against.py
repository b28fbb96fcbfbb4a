"""A validation against an earlier one (cfsim.validation.against, `cfsim validate --against`)."""
from __future__ import annotations

import gzip
import json

import pytest

from cfsim.cli import main
from cfsim.validation.against import compare, read_validation_runs


def _row(grid, errors, role="point", regime="uncapped", held_out=True):
    return {"run": f"lab/{grid}/x", "grid": grid, "role": role, "regime": regime, "held_out": held_out,
            "errors": errors}


def test_worse_and_better_are_judged_per_grid_on_held_out_runs_where_the_model_predicts():
    before = [_row("a", {"throughput_per_s": 0.04, "latency_p99_s": 0.30, "cpu_usage_cores": 0.02}),
              _row("a", {"throughput_per_s": -0.04, "latency_p99_s": -0.30, "cpu_usage_cores": 0.02}),
              _row("b", {"throughput_per_s": 0.10}),
              _row("gone", {"throughput_per_s": 0.10})]
    after = [_row("a", {"throughput_per_s": 0.06, "latency_p99_s": 0.20, "cpu_usage_cores": 0.021}),
             _row("a", {"throughput_per_s": -0.06, "latency_p99_s": 0.20, "cpu_usage_cores": 0.021}),
             # a run a fit used, a calibration run, and a CPU a quota decided do not count
             _row("a", {"throughput_per_s": 0.90}, held_out=False),
             _row("a", {"throughput_per_s": 0.90}, role="calibration"),
             _row("a", {"cpu_usage_cores": 0.50}, regime="quota-capped"),
             _row("b", {"throughput_per_s": None}),
             _row("new", {"throughput_per_s": 0.10})]
    r = compare(before, after)
    got = {(x["grid"], x["metric"]): (x["before"], x["after"], x["change"]) for x in r["rows"]}
    assert got == {("a", "throughput_per_s"): (0.04, 0.06, "worse"),
                   ("a", "latency_p99_s"): (0.30, 0.20, "better"),
                   ("a", "cpu_usage_cores"): (0.02, 0.021, "same")}
    assert r["counts"] == {"worse": 1, "better": 1, "same": 1}
    assert r["only_before"] == ["b", "gone"] and r["only_after"] == ["new"]   # b: no figure now


def test_a_file_that_is_no_validation_is_named_with_the_place(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"runs": [\n  {"grid": "a",\n')
    with pytest.raises(ValueError, match=r"bad\.json: not JSON \(line 3"):
        read_validation_runs(bad)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"headline": {}}))
    with pytest.raises(ValueError, match="no 'runs' list"):
        read_validation_runs(other)
    other.write_text(json.dumps({"runs": [{"grid": "a", "errors": {}}, {"errors": {}}]}))
    with pytest.raises(ValueError, match=r"runs\[1\] has no 'grid'"):
        read_validation_runs(other)
    gz = tmp_path / "ok.json.gz"
    gz.write_bytes(gzip.compress(json.dumps({"runs": [_row("a", {"throughput_per_s": 0.1})]}).encode()))
    # written before the calibration choice existed: every twin took all of its grid's calibration runs
    assert read_validation_runs(gz)[1] == {"path": str(gz), "runs": 1, "calibration": "all"}
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"calibration": "later", "runs": [_row("a", {"throughput_per_s": 0.1})]}))
    with pytest.raises(ValueError, match=r"odd\.json: 'calibration' is 'later', not one of all, before, latest"):
        read_validation_runs(odd)
    gz.write_bytes(b"\x1f\x8b broken")
    with pytest.raises(ValueError, match="broken gzip"):
        read_validation_runs(gz)
    # the command stops before simulating anything, exit status 2
    assert main(["validate", str(tmp_path), "--against", str(bad), "--no-progress"]) == 2


def test_a_change_within_the_models_own_seed_noise_is_the_same():
    before = [_row("a", {"throughput_per_s": 0.040, "latency_p99_s": 0.30}), _row("b", {"throughput_per_s": 0.04})]
    after = [_row("a", {"throughput_per_s": 0.050, "latency_p99_s": 0.40}), _row("b", {"throughput_per_s": 0.06})]
    # the same model at two other seeds: a's throughput moves 0.012 by the seed alone, its p99 0.02
    seed1 = [_row("a", {"throughput_per_s": 0.062, "latency_p99_s": 0.41}), _row("b", {"throughput_per_s": 0.061})]
    seed2 = [_row("a", {"throughput_per_s": 0.045, "latency_p99_s": 0.38})]
    plain = compare(before, after)
    assert plain["counts"] == {"worse": 3, "better": 0, "same": 0} and "counts_without_noise" not in plain
    r = compare(before, after, noise=[seed1, seed2])
    got = {(x["grid"], x["metric"]): (x["seed_noise"], x["change"]) for x in r["rows"]}
    assert got[("a", "throughput_per_s")] == (pytest.approx(0.012), "same")
    assert got[("a", "latency_p99_s")] == (pytest.approx(0.02), "worse")
    # b's figure is missing at one of the seeds: judged without an allowance
    assert got[("b", "throughput_per_s")] == (None, "worse")
    assert r["counts"] == {"worse": 2, "better": 0, "same": 1}
    assert r["counts_without_noise"] == plain["counts"] and r["noise_validations"] == 2
    from cfsim.validation.against import to_markdown

    text = "\n".join(to_markdown(r))
    assert "seed noise" in text and "without that allowance: 3 worse" in text


def test_the_command_wants_a_baseline_for_its_noise(tmp_path):
    other = tmp_path / "seed1.json"
    other.write_text(json.dumps({"runs": [_row("a", {"throughput_per_s": 0.1})]}))
    assert main(["validate", str(tmp_path), "--against-noise", str(other), "--no-progress"]) == 2


def test_the_earlier_models_own_seed_noise_adds_to_this_ones_as_independent_errors():
    before = [_row("a", {"throughput_per_s": 0.040, "latency_p99_s": 0.30}), _row("b", {"gc_cycles_per_s": 0.0})]
    after = [_row("a", {"throughput_per_s": 0.050, "latency_p99_s": 0.40}), _row("b", {"gc_cycles_per_s": 0.11})]
    now_seed1 = [_row("a", {"throughput_per_s": 0.056, "latency_p99_s": 0.41}), _row("b", {"gc_cycles_per_s": 0.11})]
    # the earlier model at another seed: one cycle more in b's one run moves its figure 0.11 as well
    before_seed1 = [_row("a", {"throughput_per_s": 0.031, "latency_p99_s": 0.30}),
                    _row("b", {"gc_cycles_per_s": 0.11})]
    alone = compare(before, after, noise=[now_seed1])
    assert alone["counts"] == {"worse": 3, "better": 0, "same": 0}
    r = compare(before, after, noise=[now_seed1], baseline_noise=[before_seed1])
    got = {(x["grid"], x["metric"]): (x["seed_noise"], x["baseline_seed_noise"], x["noise"], x["change"])
           for x in r["rows"]}
    # a's throughput: sqrt(0.006^2 + 0.009^2) = 0.0108 covers its 0.010 move, which either noise alone
    # does not; its p99 moved 0.10, beyond its 0.01
    assert got[("a", "throughput_per_s")] == (pytest.approx(0.006), pytest.approx(0.009),
                                              pytest.approx(0.0108167, rel=1e-5), "same")
    assert got[("a", "latency_p99_s")][3] == "worse"
    assert got[("b", "gc_cycles_per_s")] == (0.0, pytest.approx(0.11), pytest.approx(0.11), "same")
    assert r["counts"] == {"worse": 1, "better": 0, "same": 2}
    assert r["counts_without_noise"] == {"worse": 3, "better": 0, "same": 0}
    assert r["baseline_noise_validations"] == 1
    # the earlier model's noise alone is an allowance too
    only = compare(before, after, baseline_noise=[before_seed1])
    assert {(x["grid"], x["metric"]): x["change"] for x in only["rows"]}[("b", "gc_cycles_per_s")] == "same"
    from cfsim.validation.against import to_markdown

    text = "\n".join(to_markdown(r))
    assert "earlier model's seed noise" in text and "sum of squares" in text
    assert "without that allowance: 3 worse" in text


def test_the_command_wants_a_baseline_for_the_earlier_models_noise(tmp_path):
    other = tmp_path / "old-seed1.json"
    other.write_text(json.dumps({"runs": [_row("a", {"throughput_per_s": 0.1})]}))
    assert main(["validate", str(tmp_path), "--against-baseline-noise", str(other), "--no-progress"]) == 2


def test_the_command_reads_both_models_seeds_on_a_real_run(tmp_path, capsys):
    """One lab run (vpa-in-the-loop's, about 2 s) against the stored first honest validation and
    the earlier model at its next seed: the report's rows carry both noises, and the stored
    baseline's figure for that grid is read from the files, not made up."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    run = root / "data" / "lab" / "vpa-in-the-loop"
    base = root / "docs" / "validation" / "2026-11-25-ae7dc67.json.gz"
    seed1 = root / "docs" / "validation" / "2026-11-25-ae7dc67-seed1.json.gz"
    out = tmp_path / "report"
    # the baseline itself stands in for this model's other seed: only the wiring is under test here;
    # the stored validations predate the calibration choice (every twin took all calibration runs)
    argv = ["validate", str(run), "--against", str(base), "--against-baseline-noise", str(seed1),
            "--against-noise", str(base), "--report", str(out), "--no-progress", "--workers", "1",
            "--format", "json"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert f"warning: --against {base} took --calibration all, this validation --calibration latest" in err
    assert "pass --calibration all to compare like with like" in err
    assert main([*argv, "--calibration", "all"]) == 0
    assert "warning" not in capsys.readouterr().err
    against = json.loads((out / "report.json").read_text())["against"]
    assert against["baseline_calibration"] == "all"
    assert against["baseline_noise_validations"] == 1 and against["noise_validations"] == 1
    assert against["baseline_noise_from"] == [str(seed1)]
    rows = {r["metric"]: r for r in against["rows"] if r["grid"] == "vpa-in-the-loop"}
    # the earlier model's GC cycles on this run: -6.05e-07 at both seeds (read from the two files)
    cycles = rows["gc_cycles_per_s"]
    assert cycles["before"] == pytest.approx(6.05376e-07) and cycles["baseline_seed_noise"] == pytest.approx(0.0)
    assert cycles["noise"] == pytest.approx(cycles["seed_noise"])
    assert sum(against["counts"].values()) == len(against["rows"])
