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
    assert read_validation_runs(gz)[1] == {"path": str(gz), "runs": 1}
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
