"""read_lab_run and check_lab_rates on a lab-run-shaped folder of real Prometheus 2.42 responses."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from cfsim.io import CfsimParseError, check_lab_rates, check_tidy, missing_metrics, read_lab_run
from cfsim.io.lab import prometheus_compat

RUN = Path(__file__).resolve().parents[1] / "data" / "prom" / "lab_run"


def test_read_lab_run_reads_every_export():
    frames, meta = read_lab_run(RUN)
    assert meta["compat"] == "2.42" and meta["step"] == 1.0 and meta["run_id"] == "fixture"
    assert meta["empty"] == ["does_not_exist_total"] and not meta["warnings"]
    assert meta["start"].tz is not None and meta["end"] > meta["start"]
    for name, frame in frames.items():
        check_tidy(frame)
        assert len(frame), name
    assert set(frames["requests_per_s"]["metric"]) == {"requests_per_s"}
    assert set(frames["cfsim_requests_total"]["metric"]) == {"cfsim_requests_total"}
    assert meta["exports"]["requests_per_s"]["query"] == "rate(cfsim_requests_total[30s])"
    assert meta["exports"]["samples:cfsim_requests_total"]["kind"] == "samples"
    missing_metrics(frames, {"throughput": ["cfsim_requests_total"]})


def test_check_lab_rates_agrees_exactly_with_prometheus_on_raw_samples():
    report = check_lab_rates(RUN).set_index("export")
    checked = report[report["skipped"] == ""]
    assert set(checked.index) == {"requests_per_s", "requests_increase_1m", "mean_latency_inverse"}
    assert (checked["input"] == "samples").all()
    assert (checked["points"] > 250).all()
    assert (checked[["only_prometheus", "only_ours"]] == 0).all().all()
    assert (checked["max_rel_err"] <= 1e-9).all()
    assert "not f(m[w])" in report.loc["latency_p99", "skipped"]


def test_check_lab_rates_from_step_aligned_points_is_only_approximate():
    report = check_lab_rates(read_lab_run(RUN), use_samples=False).set_index("export")
    row = report.loc["requests_per_s"]
    assert row["input"] == "range-query points" and row["points"] > 250
    assert row["max_rel_err"] > 1e-3  # step-aligned timestamps shift the extrapolation


def _per_file_copy(dest: Path, with_exports: bool = True) -> Path:
    """The same run in the one-file-per-export layout (``prom/<kind>/<name>.json``)."""
    manifest = json.loads((RUN / "manifest.json").read_text())
    for kind in ("raw", "rate", "samples"):
        lines = (RUN / "prom" / f"{kind}.jsonl").read_bytes().splitlines()
        (dest / "prom" / kind).mkdir(parents=True)
        for name, spec in manifest["exports"][kind].items():
            (dest / "prom" / kind / f"{name}.json").write_bytes(lines[spec.pop("line")])
            spec["file"] = f"prom/{kind}/{name}.json"
    if not with_exports:
        del manifest["exports"]
    (dest / "manifest.json").write_text(json.dumps(manifest))
    return dest


def test_read_lab_run_per_file_layout_equals_jsonl_layout(tmp_path):
    frames, meta = read_lab_run(_per_file_copy(tmp_path))
    expected, _ = read_lab_run(RUN)
    assert frames.keys() == expected.keys()
    for key in frames:
        assert frames[key].equals(expected[key]), key
    assert (check_lab_rates((frames, meta))["max_rel_err"].dropna() <= 1e-9).all()


def test_read_lab_run_without_manifest_exports_falls_back_to_files(tmp_path):
    frames, meta = read_lab_run(_per_file_copy(tmp_path, with_exports=False))
    assert "cfsim_requests_total" in frames and "requests_per_s" in frames
    assert any("manifest lists no raw exports" in w for w in meta["warnings"])
    report = check_lab_rates((frames, meta))
    assert (report["skipped"] != "").all()


def test_read_lab_run_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no manifest.json"):
        read_lab_run(tmp_path)
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    lines = (run / "prom" / "rate.jsonl").read_bytes().splitlines(keepends=True)
    line = json.loads((run / "manifest.json").read_text())["exports"]["rate"]["requests_per_s"]["line"]
    lines[line] = lines[line][:-40] + b"\n"
    (run / "prom" / "rate.jsonl").write_bytes(b"".join(lines))
    with pytest.raises(CfsimParseError, match=f"rate.jsonl:{line + 1}:"):
        read_lab_run(run)
    (run / "prom" / "rate.jsonl").write_bytes(b"".join(lines[:line]))
    with pytest.raises(CfsimParseError, match="fewer lines"):
        read_lab_run(run)
    (run / "prom" / "rate.jsonl").unlink()
    frames, meta = read_lab_run(run)
    assert any("rate.jsonl is missing" in w for w in meta["warnings"]) and "requests_per_s" not in frames


def test_prometheus_compat_parses_version_strings():
    assert prometheus_compat("prometheus, version 2.42.0+ds (branch: debian/sid)") == "2.42"
    assert prometheus_compat("3.1.0") == "3.1" and prometheus_compat(None) is None
    assert np.isnan(check_lab_rates(RUN).set_index("export").loc["latency_p99", "max_rel_err"])


def test_gzip_exports_read_the_same(tmp_path):
    import gzip

    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    for kind in ("raw", "rate", "samples"):
        p = run / "prom" / f"{kind}.jsonl"
        (run / "prom" / f"{kind}.jsonl.gz").write_bytes(gzip.compress(p.read_bytes()))
        p.unlink()
    frames, meta = read_lab_run(run)
    expected, _ = read_lab_run(RUN)
    assert frames.keys() == expected.keys()
    for k in frames:
        assert frames[k].equals(expected[k]), k
    from cfsim.io import load_lab_run
    from cfsim.lab.export import load_run

    assert load_lab_run(run)["raw"] == load_run(RUN)["raw"]
    (run / "prom" / "rate.jsonl.gz").write_bytes(b"\x1f\x8b\x08\x00broken")
    with pytest.raises(CfsimParseError, match="rate.jsonl.gz"):
        read_lab_run(run)
