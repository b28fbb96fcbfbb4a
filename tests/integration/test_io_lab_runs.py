"""Real lab runs under data/lab/: all exports parse, and our rate() agrees with the rate()
Prometheus computed during the run (exactly where the run exported raw samples).

By default three runs (first, middle, last by path) keep this quick; set CFSIM_IO_ALL_LAB_RUNS=1
to check every run (about half a second each).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cfsim.io import check_lab_rates, check_tidy, read_lab_run
from cfsim.io.manifest import has_manifest, manifest_folders, read_manifest

LAB = Path(__file__).resolve().parents[2] / "data" / "lab"
ALL_RUNS = [p for p in manifest_folders(LAB) if (p / "summary.json").is_file()] if LAB.is_dir() else []
RUNS = ALL_RUNS if os.environ.get("CFSIM_IO_ALL_LAB_RUNS") or len(ALL_RUNS) <= 3 else \
    [ALL_RUNS[0], ALL_RUNS[len(ALL_RUNS) // 2], ALL_RUNS[-1]]


@pytest.mark.parametrize("run", RUNS or [None], ids=[str(r.relative_to(LAB)) for r in RUNS] or ["none"])
def test_lab_run_parses_and_rates_agree(run):
    if run is None:
        pytest.skip(f"no lab run folders (with a manifest) under {LAB} yet")
    frames, meta = read_lab_run(run)
    assert not [w for w in meta["warnings"] if "is missing" in w], meta["warnings"]
    for frame in frames.values():
        check_tidy(frame)
    report = check_lab_rates((frames, meta))
    checked = report[report["skipped"] == ""]
    assert len(checked), f"no rate export could be checked:\n{report[['export', 'skipped']]}"
    assert (checked["points"] > 0).all(), checked
    exact = checked[checked["input"] == "samples"]
    assert (exact["max_rel_err"] <= 1e-9).all(), exact
    assert (exact[["only_prometheus", "only_ours"]] == 0).all().all(), exact


def test_every_grid_is_in_the_lab_index():
    """data/lab/manifest.json (the index a user reads first) names every grid folder with the
    counts its runs give (``python -m cfsim.lab.report --manifest data/lab GRID`` writes it);
    an entry without a grid folder is a folder of single runs (``cfsim lab run``)."""
    if not (LAB / "manifest.json").is_file():
        pytest.skip(f"no lab index under {LAB} yet")
    from cfsim.lab.report import manifest_entry

    index = json.loads((LAB / "manifest.json").read_text())["grids"]
    grids = sorted(p.parent for p in LAB.glob("*/grid.json"))
    assert not {g.name for g in grids} - set(index), "grids missing from data/lab/manifest.json"
    for name in set(index) - {g.name for g in grids}:
        assert [p for p in (LAB / name).iterdir() if has_manifest(p)], name
    for g in grids:
        entry = manifest_entry(g)
        assert {k: index[g.name][k] for k in ("runs", "failed", "oom")} == \
            {k: entry[k] for k in ("runs", "failed", "oom")}, g.name


def test_every_latency_histogram_fits_a_lab_bucket_layout():
    """The twins report their latency quantiles through the lab's own buckets
    (cfsim.validation.twin.recorded_latency_buckets_s): every run's kept bucket bounds belong to one
    of the layouts the lab's binaries have used (cfsim.lab.buckets.LAYOUTS), and both layouts
    occur (3 per doubling before 2026-11-23, 6 after), so neither table is dead."""
    if not ALL_RUNS:
        pytest.skip(f"no lab run folders under {LAB} yet")
    from cfsim.lab.buckets import LAYOUTS
    from cfsim.validation.twin import LATENCY_HISTOGRAMS, recorded_latency_buckets_s

    seen = set()
    for run in ALL_RUNS:
        manifest = read_manifest(run)
        samples = manifest.get("window_samples") or {}
        kept = [k for src in ("loadgen", "workload") for k in ((samples.get(src) or {}).get("end") or {})
                if any(k.startswith(f"{name}_bucket") for name in LATENCY_HISTOGRAMS) and "+Inf" not in k]
        if not kept:
            continue
        layout = recorded_latency_buckets_s(manifest)
        assert layout is not None, (run, kept[:3])
        seen.add(next(n for n, b in LAYOUTS.items() if b == layout))
    assert seen == set(LAYOUTS), seen
