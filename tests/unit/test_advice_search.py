"""The recommendation search (cfsim.advice.search) and `cfsim recommend`."""
import json
import math

import pytest

from cfsim import load_scenario, simulate
from cfsim.advice.search import (Candidate, SearchOptions, Searcher, policy_kinds, search, uncertainty_for)
from cfsim.advice.slo import parse_slos
from cfsim.validation.normalise import missed_heap_scale
from cfsim.cli import main

# demand 1.6 cores of 1 ms records on a 2-CPU node; short runs keep the tests fast
SCENARIO = "data/lab/scenarios/cpu-stream.toml"
SHORT = ["run.duration_s=4", "run.warmup_s=1"]
FAST = dict(burst=False, gomaxprocs=["ceil", "automaxprocs"], coarse_step=0.5, fine_step=0.1)


@pytest.fixture(scope="module")
def scenario():
    return load_scenario(SCENARIO, SHORT)


@pytest.fixture(scope="module")
def searcher(scenario):
    return Searcher(scenario, options=SearchOptions(**FAST))


def _resimulate(scenario, cand: Candidate, overrides):
    return simulate(scenario.with_overrides(cand.overrides(scenario) + list(overrides))).summary


@pytest.mark.parametrize("slos", [["throughput_per_s>=1500"], ["latency_p99_s<=0.05", "lag_final_s<=0.5"]])
def test_recommendation_resimulated_meets_its_slos(scenario, searcher, slos):
    parsed = parse_slos(slos)
    res = searcher.search(parsed)
    assert res.winner is not None and res.winner.robust
    unc = searcher.uncertainty
    for overrides in (unc.nominal, unc.pessimistic):          # nominal and the safety margin
        summary = _resimulate(scenario, res.winner.candidate, overrides)
        for s in parsed:
            assert s.met(summary), (s.text, summary.get(s.key))
    # usage capped by the limit: a configuration that meets throughput >= 1500 needs >= 1.5 cores
    assert res.winner.candidate.limit >= 1.5
    if res.runner_up is not None:
        assert res.runner_up.robust
        assert (res.runner_up.candidate.limit_m, res.runner_up.gomaxprocs) != \
            (res.winner.candidate.limit_m, res.winner.gomaxprocs)


def test_tighter_slo_never_cheaper(searcher):
    limits = []
    for thr in (600, 1000, 1300, 1500, 1580):
        w = searcher.search(parse_slos([f"throughput_per_s>={thr}"])).winner
        limits.append(math.inf if w is None else w.candidate.limit)
    assert limits == sorted(limits), limits
    lat = []
    for thr in (1.0, 0.1, 0.04):
        w = searcher.search(parse_slos([f"latency_p99_s<={thr}"])).winner
        lat.append(math.inf if w is None else w.candidate.limit)
    assert lat == sorted(lat), lat


def test_unreachable_slo_gives_no_answer(searcher):
    res = searcher.search(parse_slos(["throughput_per_s>=5000"]))   # arrivals are 1600/s
    assert res.winner is None and res.runner_up is None


def test_deterministic_and_worker_independent(scenario):
    slos = parse_slos(["throughput_per_s>=1400"])
    a = search(scenario, slos, options=SearchOptions(**FAST))
    b = search(scenario, slos, options=SearchOptions(**FAST, workers=2))
    assert a.winner.candidate == b.winner.candidate
    assert a.winner.summary == b.winner.summary


def test_trap_is_avoided_not_recommended(scenario):
    """automaxprocs floors 1.6-1.95 cores to GOMAXPROCS 1: its answer is 2 cores; ceil does better."""
    s = Searcher(scenario, options=SearchOptions(burst=False, gomaxprocs=["automaxprocs", "ceil"],
                                                 coarse_step=0.5, fine_step=0.1))
    res = s.search(parse_slos(["throughput_per_s>=1500"]))
    assert res.series["automaxprocs"].candidate.limit == 2.0
    assert res.winner.candidate.gomaxprocs == 2 and res.winner.candidate.limit < 2.0


def test_uncertainty_from_params_file(tmp_path, scenario):
    p = tmp_path / "params.toml"
    p.write_text("[params]\ncost_factor = 1.2\n\"go.gc_scan_mb_per_ms\" = 2.0\n"
                 "[uncertainty.cost_factor]\nsigma_log = 0.2\n"
                 "[uncertainty.\"go.gc_scan_mb_per_ms\"]\nsigma_log = 0.5\n")
    u = uncertainty_for(scenario, p, base_factor=0.5)
    nom, pes = dict(u.nominal), dict(u.pessimistic)
    assert nom["workload.cpu_ms_per_item"] == pytest.approx(1.0 * 0.5 * 1.2)
    assert pes["workload.cpu_ms_per_item"] == pytest.approx(0.6 * math.exp(0.2))
    # without a grid GC factor the GC runs at the machine's speed (the cost factor), as for the
    # validation's twins (cfsim.validation.calibrate.grid_overrides); a slower scan = costlier
    assert nom["go.gc_scan_mb_per_ms"] == pytest.approx(2.0 / (0.5 * 1.2))
    assert pes["go.gc_scan_mb_per_ms"] == pytest.approx(2.0 / (0.5 * 1.2) * math.exp(-0.5))
    # the allocation's CPU per KiB runs at the machine's speed too
    assert nom["go.alloc_ns_per_kb"] == pytest.approx(scenario["go.alloc_ns_per_kb"] * 0.5 * 1.2)
    default = uncertainty_for(scenario)
    assert dict(default.pessimistic)["workload.cpu_ms_per_item"] == pytest.approx(1.1)
    # a grid's GC factor divides the scan rate, the file's (x its cost factor) or the scenario's
    gc = uncertainty_for(scenario, p, base_factor=0.5, gc_factor=2.5)
    assert dict(gc.nominal)["go.gc_scan_mb_per_ms"] == pytest.approx(2.0 / (2.5 * 1.2))
    bare = dict(uncertainty_for(scenario, base_factor=0.5, gc_factor=2.5).nominal)
    assert bare["go.gc_scan_mb_per_ms"] == pytest.approx(scenario["go.gc_scan_mb_per_ms"] / 2.5)
    assert "go.gc_scan_mb_per_ms" not in dict(default.nominal)
    # a grid calibrated on a heap beyond the cache (cfsim.validation.normalise.missed_heap_scale):
    # the scan is divided by the scale as well, as for the twins, and the note says by how much
    big = scenario.with_overrides([("go.gc_scan_miss_factor", 2.15)])
    scale = missed_heap_scale(2.5 / 0.5, 2.15, 1.0 - big["host.llc_mb"] / 256.5)
    held = uncertainty_for(big, base_factor=0.5, gc_factor=2.5, calibration_heap_mb=256.5)
    assert scale > 1.0
    assert dict(held.nominal)["go.gc_scan_mb_per_ms"] == pytest.approx(big["go.gc_scan_mb_per_ms"] / (2.5 * scale))
    assert f"GC scan /{2.5 * scale:.3g}" in held.description


def test_policy_kinds_validation(scenario):
    assert policy_kinds(scenario)[0] == scenario["go.gomaxprocs"]
    assert policy_kinds(scenario, ["3", "go1.25"]) == [3, "go1.25"]
    with pytest.raises(ValueError, match="unknown choice 'nproc'"):
        policy_kinds(scenario, ["nproc"])


def test_cli_json(capsys):
    rc = main(["recommend", SCENARIO, "--set", "run.duration_s=4", "--set", "run.warmup_s=1",
               "--slo", "throughput_per_s>=1500", "--slo", "latency_p99_s<=0.1", "--no-burst",
               "--coarse-step", "0.5", "--fine-step", "0.1", "--gomaxprocs", "ceil,automaxprocs",
               "--vpa-rounds", "1", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    rec = out["recommendation"]
    assert rec["slos_met"] == {"throughput_per_s>=1500": True, "latency_p99_s<=0.1": True}
    assert set(out["slo_costs"]) == {"throughput_per_s>=1500", "latency_p99_s<=0.1"}
    for cost in out["slo_costs"].values():      # each SLO alone is never dearer than all of them
        assert cost["cpu_limit_cores"] <= rec["cpu_limit_cores"]
    assert [p["name"] for p in out["peers"]] == ["vpa", "krr-simple", "krr-simple_limit"]
    assert out["peers"][1]["limit_cores"] is None


def test_cli_slo_error(capsys):
    rc = main(["recommend", SCENARIO, "--slo", "p99<=1"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "SLO 'p99<=1': unknown key 'p99'" in err and "latency_p99_s" in err


def _answer(res):
    d = res.as_dict()
    d.pop("simulations")
    return json.dumps(d, sort_keys=True, default=str)


@pytest.mark.parametrize("slos", [["throughput_per_s>=1500"], ["throughput_per_s>=1200", "latency_p99_s<=0.05"]])
def test_lazy_walk_and_screen_give_the_exhaustive_answer(scenario, slos):
    """The limit walk simulates only as far as the first robust limit, and the throughput screen
    skips limits below ``throughput / per-item CPU``: the answer is the one of simulating every
    coarse limit (a block as long as the lattice) without the screen."""
    parsed = parse_slos(slos)
    ref = Searcher(scenario, options=SearchOptions(**FAST, screen=False, stop_early=False))
    ref.block = 10_000
    fast = Searcher(scenario, options=SearchOptions(**FAST))
    assert _answer(fast.search(parsed)) == _answer(ref.search(parsed))
    assert fast.simulations < ref.simulations


def test_throughput_screen_is_an_upper_bound(scenario):
    """Simulated throughput never exceeds the screen's bound (limit x window CPU over the per-item
    CPU, plus the window's edges), here with GC and scheduling costs on, at limits below and above
    the demand, GOMAXPROCS 1 and 4."""
    s = Searcher(scenario, options=SearchOptions(**FAST))
    cost_s, in_flight = s._screen_shape
    assert cost_s == pytest.approx(scenario["workload.cpu_ms_per_item"] / 1000) and in_flight == 8
    for limit_m in (300, 800, 1200, 1500):
        for g in (1, 4):
            thr = simulate(scenario.with_overrides(Candidate(limit_m, g).overrides(scenario))).summary[
                "throughput_per_s"]
            assert s._possible(limit_m, parse_slos([f"throughput_per_s>={thr}"]))
        # 30 % above what the limit allows in steady state (the window's edges add ~9 % in 3 s)
        assert not s._possible(limit_m, parse_slos([f"throughput_per_s>={1.3 * limit_m / 1000 / cost_s}"]))


@pytest.mark.parametrize("slos", [["throttled_ratio<=0.1"], ["throttled_ratio<=0.1", "throughput_per_s>=1200"],
                                  ["cpu_usage_cores<=1.1", "latency_p99_s<=0.05"]])
def test_stopping_decided_runs_gives_the_same_answer(scenario, slos):
    """A candidate's run ends once it can no longer meet an SLO (``stop_early``): the search's
    answer (winner, runner-up, their summaries, every series' best) is the one of running every
    candidate whole, for fewer simulated seconds."""
    from cfsim.sweep import simcache

    parsed = parse_slos(slos)
    longer = scenario.with_overrides([("run.duration_s", 8.0)])
    got = {}
    for stop in (False, True):
        with simcache.kept_default_cache():
            simcache.set_default_cache(None)       # nothing reused between the two
            s = Searcher(longer, options=SearchOptions(**FAST, stop_early=stop))
            got[stop] = (_answer(s.search(parsed)),
                         [v["stopped_early_s"] for v in s.cache.values() if "stopped_early_s" in v])
    assert got[True][0] == got[False][0]
    assert not got[False][1] and got[True][1] and max(got[True][1]) < 8.0   # simulated less, same answer


def test_a_stopped_verdict_answers_only_a_search_with_the_slo_it_failed(scenario):
    """One searcher, two SLO sets: candidates stopped on the throttling SLO are run again whole for
    a search without it, which then gets the answer of a fresh searcher."""
    from cfsim.sweep import simcache

    with simcache.kept_default_cache():
        simcache.set_default_cache(None)           # no whole run of an earlier test answers
        s = Searcher(scenario, options=SearchOptions(**FAST))
        s.search(parse_slos(["throttled_ratio<=0.05", "throughput_per_s>=1000"]))
        assert any("stopped_because" in v for v in s.cache.values())
        alone = parse_slos(["throughput_per_s>=1000"])
        assert _answer(s.search(alone)) == _answer(Searcher(scenario, options=SearchOptions(**FAST)).search(alone))
