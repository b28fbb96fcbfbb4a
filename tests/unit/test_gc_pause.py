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


_NO_CYCLE_QUANTILES = {f"{k}{stem}{tail}": None for stem in ("cycle_p50", "cycle_max")
                       for k, tail in (("lab_us_", ""), ("model_us_", ""), ("", "_model_over_lab"))}
_NO_CYCLE_QUANTILES.update({"cycle_p50_runs": 0, "cycle_max_runs": 0})


def test_a_stop_is_the_pause_over_the_cycles_and_the_two_stops_of_a_cycle():
    assert us_per_stop(1e-4, 1.0) == 50.0
    assert us_per_stop(None, 1.0) is None and us_per_stop(1e-4, None) is None and us_per_stop(1e-4, 0) is None


def test_same_pause_a_second_with_twice_the_cycles_is_half_the_stop():
    """The twin matches the lab's pause a second (0 error on gc_pause_s_per_s) with twice the
    cycles: each of its stops is half the lab's, which the table shows."""
    rows = pause_by_gomaxprocs([_run(2, 4e-4, 2.0, 4e-4, 4.0)])
    assert rows == [{"gomaxprocs": "2", "capped": False, "runs": 1, "lab_us_per_stop": 100.0,
                     "model_us_per_stop": 50.0, "model_over_lab": 0.5, **_NO_CYCLE_QUANTILES}]


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
                                         "model_us_per_stop": 25.0, "model_over_lab": 0.25, **_NO_CYCLE_QUANTILES}]
    text = "\n".join(_gc_markdown(ValidationReport(runs=[], errors={}, gc=g)))
    assert "One stop of the world, lab against twin" in text and "| 2 | no | 1 | 100 | 25 | 0.250 |" in text


def test_a_cycles_typical_and_longest_stop_beside_the_mean():
    """Two runs whose one stop's mean agrees with the lab's (ratio 1): the twins' typical cycle is
    twice the lab's and their longest half of it, which only the quantiles' columns show; a run
    without the quantiles counts for the mean and not for them."""
    def with_cycles(run, lab, model):
        run["observed"].update(zip(("gc_cycle_pause_p50_s", "gc_cycle_pause_max_s"), lab))
        run["simulated"].update(zip(("gc_cycle_pause_p50_s", "gc_cycle_pause_max_s"), model))
        return run
    runs = [with_cycles(_run(16, 1e-3, 1.0, 1e-3, 1.0), (2e-4, 4e-3), (4e-4, 2e-3)),
            with_cycles(_run(32, 2e-3, 1.0, 2e-3, 1.0), (4e-4, 8e-3), (8e-4, 4e-3)),
            _run(64, 2e-3, 1.0, 2e-3, 1.0)]
    row, = pause_by_gomaxprocs(runs)
    assert row["runs"] == 3 and row["model_over_lab"] == 1.0
    assert row["cycle_p50_runs"] == 2 and row["lab_us_cycle_p50"] == 300.0 and row["model_us_cycle_p50"] == 600.0
    assert row["cycle_p50_model_over_lab"] == 2.0 and row["cycle_max_model_over_lab"] == 0.5


def test_a_cycle_quantile_reads_the_labs_key_and_the_models_own():
    """The lab's summary keeps go_gc_duration_seconds' quantiles as gc_pause_p50_s / gc_pause_max_s;
    the model's gc_pause_p50_s is one stop, so its go_gc_duration_seconds_q0.5 is the one read."""
    from cfsim.validation.metrics import BY_NAME
    p50, top = BY_NAME["gc_cycle_pause_p50_s"], BY_NAME["gc_cycle_pause_max_s"]
    lab = {"gc_pause_p50_s": 2e-4, "gc_pause_max_s": 1e-3}
    model = {"gc_pause_p50_s": 5e-5, "gc_pause_max_s": 9e-4, "go_gc_duration_seconds_q0.5": 1.5e-4,
             "go_gc_duration_seconds_q1": 1.2e-3}
    assert (p50.get(lab), top.get(lab)) == (2e-4, 1e-3)
    assert (p50.get(model), top.get(model)) == (1.5e-4, 1.2e-3)


def test_the_models_go_gc_duration_quantiles_cover_the_cycles_before_the_window():
    """debug.ReadGCStats's quantiles are over the last 256 cycles the runtime keeps, the window's
    and those before it, by index (src/runtime/debug/garbage.go); count and sum are the window's."""
    from cfsim.goruntime.run_accounting import PAUSE_HISTORY, _gc_duration_quantiles
    before = [(t, 1_000) for t in range(1, 11)]                 # ten short cycles before the window
    inside = [(100 + t, 9_000) for t in range(1, 5)]            # four long ones in it
    q = _gc_duration_quantiles(before + inside, 100, 200)
    assert q["go_gc_duration_seconds_count"] == 4 and q["go_gc_duration_seconds_sum"] == 4 * 9e-6
    assert q["go_gc_duration_seconds_q0.5"] == 1e-6            # sorted[14 * 2 // 4] = sorted[7]: a short one
    assert q["go_gc_duration_seconds_q0.75"] == 9e-6 and q["go_gc_duration_seconds_q1"] == 9e-6
    many = [(t, 1_000) for t in range(1, 301)] + [(400 + t, 5_000) for t in range(1, PAUSE_HISTORY - 100 + 1)]
    q = _gc_duration_quantiles(many, 400, 10_000)
    # the ring holds the newest 256: 156 of 5 us and 100 of 1 us, so the median is 5 us
    assert q["go_gc_duration_seconds_q0.5"] == 5e-6 and q["go_gc_duration_seconds_q0"] == 1e-6
    assert _gc_duration_quantiles([], 0, 1)["go_gc_duration_seconds_q0.5"] == 0.0
