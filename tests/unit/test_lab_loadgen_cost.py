"""The lab load generator's CPU a request by mode and rate (cfsim.lab.loadgen_cost)."""
from __future__ import annotations

from pathlib import Path

import pytest

from cfsim.lab import loadgen_cost as lc

ROOT = Path(__file__).resolve().parents[2]
GRID = ROOT / "data" / "lab" / "loadgen-cost"


def test_open_loop_cost_falls_with_the_rate_as_wake_ups_serve_bunches():
    rates = [100.0, 190.0, 750.0, 2000.0, 10_000.0]
    costs = [lc.loadgen_cpu_us("open", r) for r in rates]
    assert all(a > b for a, b in zip(costs, costs[1:]))
    # one wake-up a request at low rates, 1 + r x window requests a wake-up above
    assert costs[0] == pytest.approx(lc.OPEN_US_AT_ZERO / (1 + 100 * lc.OPEN_BUNCH_WINDOW_S))
    assert lc.loadgen_cpu_us("open", 0.0) is None and lc.loadgen_cpu_us("open", float("nan")) is None
    assert lc.loadgen_cpu_us("open", True) is None
    assert lc.loadgen_cpu_us("stream", 1000.0) is None
    assert lc.loadgen_cpu_us("closed", 5.0) == lc.CLOSED_US


def test_fit_recovers_a_planted_curve_and_refuses_too_few_points():
    pts = [(r, lc.open_curve_us(r, 500.0, 2e-3)) for r in (100, 400, 900, 1600, 3000)]
    a, w = lc.fit_open_curve(pts)
    assert a == pytest.approx(500.0, rel=1e-4) and w == pytest.approx(2e-3, rel=1e-4)
    with pytest.raises(ValueError, match="at least 3"):
        lc.fit_open_curve(pts[:2])
    with pytest.raises(ValueError, match="at least one"):
        lc.closed_cost_us([])


def test_constants_are_the_fit_of_the_committed_loadgen_cost_grid():
    from cfsim.validation.normalise import client_cpu_per_request_us
    from cfsim.validation.twin import observed_summary, run_manifest, run_scenario

    opened, closed = [], []
    for run in sorted(p for p in GRID.iterdir() if p.is_dir()):
        sc = run_scenario(run)
        c = client_cpu_per_request_us(run_manifest(run), observed_summary(run))
        assert c is not None, run.name
        (opened.append((sc["workload.rate_per_s"], c)) if sc["workload.kind"] == "open" else closed.append(c))
    assert len(opened) == 10 and len(closed) == 2
    a, w = lc.fit_open_curve(opened)
    assert a == pytest.approx(lc.OPEN_US_AT_ZERO, rel=1e-3)
    assert w == pytest.approx(lc.OPEN_BUNCH_WINDOW_S, rel=1e-3)
    assert lc.closed_cost_us(closed) == pytest.approx(lc.CLOSED_US, rel=1e-3)
