"""Runs that stop once an SLO is decided (cfsim.simulation.simulate's ``stop``; the search's
``stop_early``): a run the rule never stops is the whole run bit for bit, a stopped run fails what
the whole run fails, and the simulation cache keeps the two apart."""
import pickle

import pytest

from cfsim import load_scenario
from cfsim.advice.slo import parse_slos, stop_rule
from cfsim.simulation import simulate, window_bounds
from cfsim.sweep.simcache import SimCache, _full_summary

SCENARIO = "data/lab/scenarios/cpu-stream.toml"


def _never(bounds):
    return None


@pytest.mark.parametrize("overrides", [
    ["run.duration_s=4", "run.warmup_s=1.5"],
    ["run.duration_s=4", "run.warmup_s=1.5", "host.cpu_sharing=slices", "cgroup.cpu_limit=0.7", "go.gomaxprocs=4"],
    ["run.duration_s=4", "run.warmup_s=1.5", "workload.kind=closed", "workload.clients=16", "go.gomaxprocs=8"],
])
def test_a_rule_that_never_stops_changes_nothing(overrides):
    """The window runs in steps of one CFS period for the rule to look at: the summary, the
    periods and the series are those of the run without a rule."""
    sc = load_scenario(SCENARIO, overrides)
    a, b = simulate(sc), simulate(sc, stop=_never)
    assert pickle.dumps(a.summary) == pickle.dumps(b.summary)
    assert a.periods.equals(b.periods) and a.series.equals(b.series) and a.gc_cycles.equals(b.gc_cycles)


@pytest.mark.parametrize("slo", ["throttled_ratio<=0.3", "throttled_ratio<0.6", "throttled_time_s<=0.4",
                                 "cpu_usage_cores<=0.5", "throttled_ratio<=0.95"])
@pytest.mark.parametrize("limit", [0.6, 1.2])
def test_a_stopped_run_fails_what_the_whole_run_fails(slo, limit):
    """Sound, not approximate: wherever the rule stops a run, the whole run misses that SLO; where
    it does not, the run is the whole run."""
    sc = load_scenario(SCENARIO, ["run.duration_s=6", "run.warmup_s=1", f"cgroup.cpu_limit={limit}"])
    (parsed,) = parse_slos([slo])
    whole = simulate(sc).summary
    got = simulate(sc, stop=stop_rule([parsed])).summary
    if "stopped_because" in got:
        assert got["stopped_because"] == slo and not parsed.met(whole) and got["stopped_early_s"] < 6.0
    else:
        assert got == whole


def test_the_rule_stops_early_when_the_verdict_is_clear():
    """Demand 1.6 cores under a 0.6-core limit is throttled nearly every period: a 10 % throttling
    SLO of a 20 s window (200 periods) is decided at the 21st throttled period, checked at each
    period's end."""
    sc = load_scenario(SCENARIO, ["run.duration_s=21", "run.warmup_s=1", "cgroup.cpu_limit=0.6"])
    got = simulate(sc, stop=stop_rule(parse_slos(["throttled_ratio<=0.1"]))).summary
    assert got == {"stopped_early_s": 3.1, "stopped_because": "throttled_ratio<=0.1"}


def test_no_stop_under_a_limit_schedule():
    """A limit that changes restarts the period timer, so the periods' bound does not hold: no check."""
    sc = load_scenario(SCENARIO, ["run.duration_s=4", "run.warmup_s=1", "cgroup.cpu_limit=0.6",
                                  "cgroup.limit_schedule=[[2.0, 0.5]]"])
    assert "stopped_because" not in simulate(sc, stop=lambda b: "stop").summary


def test_bounds_are_what_the_summary_can_still_reach():
    b = window_bounds({"nr_periods": 3, "nr_throttled": 3, "throttled_time_ns": 0, "usage_ns": 5 * 10**8},
                      999_999_999, 100_000)
    assert b["throttled_ratio"][0] == 3 / 10      # at most 10 period ends in a window just under 1 s
    assert b["cpu_usage_cores"][0] == 5 * 10**8 / 1e9 / 0.999999999


def test_cache_keeps_stopped_verdicts_apart(tmp_path):
    sc = load_scenario(SCENARIO, ["run.duration_s=5", "run.warmup_s=1", "cgroup.cpu_limit=0.6"])
    rule = stop_rule(parse_slos(["throttled_ratio<=0.1"]))
    cache = SimCache(tmp_path)
    stopped = cache.summary(sc, _full_summary, rule)
    assert "stopped_because" in stopped
    whole = cache.summary(sc, _full_summary)                  # a whole run is never the verdict
    assert "stopped_because" not in whole and cache.stats()["simulated"] == 2
    assert cache.summary(sc, _full_summary, rule) == whole    # the whole run answers the rule too
    other = SimCache(tmp_path)                                # another worker: the verdict from disk
    assert other.summary(sc, _full_summary, stop_rule(parse_slos(["throttled_ratio<=0.2"]))) == whole
