"""`cfsim recommend --from` a real lab run (skipped, with the reason, while data/lab lacks it)."""
from pathlib import Path

import pytest

from cfsim.advice.recommend import from_lab_run, observed_history, recommend
from cfsim.advice.search import SearchOptions
from cfsim.advice.slo import parse_slos

ROOT = Path(__file__).resolve().parents[2]


def _trapped_run():
    from cfsim.validation.twin import find_runs, run_scenario

    grid = ROOT / "data/lab/cpu-stream"
    try:
        runs = find_runs(grid) if grid.is_dir() else []
    except FileNotFoundError:
        runs = []
    for r in runs:
        sc = run_scenario(r)
        if sc["go.gomaxprocs"] == 1 and sc["cgroup.cpu_limit"] == 1.5:
            return r
    return None


def test_recommend_from_trapped_lab_run():
    run = _trapped_run()
    if run is None:
        pytest.skip("data/lab/cpu-stream has no GOMAXPROCS=1 / 1.5-core run yet (bash data/lab/collect.sh)")
    sc, unc, source = from_lab_run(run, overrides=["run.duration_s=8", "run.warmup_s=2"])
    assert "calibration run" in unc.description or "cost factor 1" in unc.description
    slos = parse_slos(["throughput_per_s>=1500"])
    rep = recommend(sc, slos, unc, SearchOptions(burst=False, gomaxprocs=[1, "ceil", "automaxprocs"],
                                                 coarse_step=0.5, fine_step=0.1),
                    vpa_rounds=2, source=source, history=observed_history(run))
    w = rep.result.winner
    assert not rep.current.met                        # GOMAXPROCS 1 caps it at ~1 core
    assert w is not None and w.robust and w.gomaxprocs >= 2
    # the peers read the real, capped usage and keep the run's GOMAXPROCS=1: none meets the SLO
    assert {p.name for p in rep.peers} == {"vpa", "krr-simple", "krr-simple_limit"}
    assert all(not p.met for p in rep.peers)
    vpa = rep.peers[0]
    assert vpa.request_cores < 1.5                    # pinned usage reads as ~1 core of demand
