"""One stop of the world, lab against twin, by GOMAXPROCS (cfsim.validation.gcpause): the GC pause
a second is split by the cycles a second into one stop's length, so a twin that runs the right
pause time with the wrong number of cycles is not counted right, and runs a cap decides are kept
apart (a throttled period inside a stop lengthens it)."""
from __future__ import annotations

from cfsim.validation.gcpause import pause_by_gomaxprocs, us_per_stop


def _run(g, lab_pause, lab_cycles, sim_pause, sim_cycles, regime="uncapped", via_inputs=False):
    observed = {"gc_pause_s_per_s": lab_pause, "gc_cycles_per_s": lab_cycles}
    run = {"regime": regime, "observed": observed,
           "simulated": {"gc_pause_s_per_s": sim_pause, "gc_cycles_per_s": sim_cycles}}
    if via_inputs:
        run["regime_inputs"] = {"gomaxprocs": g}
    else:
        observed["gomaxprocs"] = float(g)
    return run


def test_a_stop_is_the_pause_over_the_cycles_and_the_two_stops_of_a_cycle():
    assert us_per_stop(1e-4, 1.0) == 50.0
    assert us_per_stop(None, 1.0) is None and us_per_stop(1e-4, None) is None and us_per_stop(1e-4, 0) is None


def test_same_pause_a_second_with_twice_the_cycles_is_half_the_stop():
    """The twin matches the lab's pause a second (0 error on gc_pause_s_per_s) with twice the
    cycles: each of its stops is half the lab's, which the table shows."""
    rows = pause_by_gomaxprocs([_run(2, 4e-4, 2.0, 4e-4, 4.0)])
    assert rows == [{"gomaxprocs": "2", "capped": False, "runs": 1, "lab_us_per_stop": 100.0,
                     "model_us_per_stop": 50.0, "model_over_lab": 0.5}]


def test_bins_caps_and_runs_without_cycles():
    runs = [_run(1, 5e-5, 1.0, 5e-5, 1.0), _run(8, 8e-4, 1.0, 2e-4, 1.0), _run(6, 4e-4, 1.0, 2e-4, 1.0),
            _run(32, 2e-3, 1.0, 2e-4, 1.0, via_inputs=True),
            _run(2, 2e-3, 1.0, 4e-4, 1.0, regime="quota-capped"),
            _run(2, 1e-4, 0.0, 1e-4, 1.0),                   # the lab ran no cycle: left out
            {"regime": "uncapped", "observed": {"gomaxprocs": "automaxprocs", "gc_pause_s_per_s": 1e-4,
                                                "gc_cycles_per_s": 1.0},
             "simulated": {"gc_pause_s_per_s": 1e-4, "gc_cycles_per_s": 1.0}}]   # no number: left out
    rows = pause_by_gomaxprocs(runs)
    assert [(r["gomaxprocs"], r["capped"], r["runs"]) for r in rows] == [
        ("1", False, 1), ("3-8", False, 2), ("9-64", False, 1), ("2", True, 1)]
    mid = rows[1]
    assert mid["lab_us_per_stop"] == 300.0 and mid["model_us_per_stop"] == 100.0
    assert mid["model_over_lab"] == 0.375          # the median of the runs' ratios 0.25 and 0.5
    assert rows[3]["lab_us_per_stop"] == 1000.0 and rows[3]["model_over_lab"] == 0.2


def test_the_report_carries_and_prints_the_table():
    from cfsim.validation.gcmemory import gc_by_regime
    from cfsim.validation.report import ValidationReport, _gc_markdown

    run = _run(2, 4e-4, 2.0, 1e-4, 2.0)
    run.update({"role": "point", "held_out": True, "gc_regime": "gogc", "errors": {}, "scenario": {}})
    g = gc_by_regime([run])
    assert g["pause_by_gomaxprocs"] == [{"gomaxprocs": "2", "capped": False, "runs": 1, "lab_us_per_stop": 100.0,
                                         "model_us_per_stop": 25.0, "model_over_lab": 0.25}]
    text = "\n".join(_gc_markdown(ValidationReport(runs=[], errors={}, gc=g)))
    assert "One stop of the world, lab against twin" in text and "| 2 | no | 1 | 100 | 25 | 0.250 |" in text
