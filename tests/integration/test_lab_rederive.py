"""Every committed lab summary is what cfsim.lab.derive computes from its run folder (manifest
counters and samples, quota history, Prometheus exports): no number in data/lab is by hand."""
from __future__ import annotations

from pathlib import Path

import pytest

from cfsim.lab import derive

DATA = Path(__file__).resolve().parents[2] / "data" / "lab"
FOLDERS = derive.run_folders(DATA)


def test_there_are_runs():
    assert len(FOLDERS) >= 150


@pytest.mark.parametrize("folder", FOLDERS, ids=[f"{f.parent.name}/{f.name}" for f in FOLDERS])
def test_summary_rederives_exactly(folder):
    old, new = derive.rederive(folder)
    assert derive.diff(old, new) == {}


def test_vpa_in_the_loop_limit_is_the_time_average_of_the_moving_quota():
    old, _ = derive.rederive(DATA / "vpa-in-the-loop" / "run-automaxprocs")
    # the quota started at 0.5 core and the VPA raised it to 1.168 cores; the window's mean
    assert 1.0 < old["cpu_limit_cores"] < 1.05
