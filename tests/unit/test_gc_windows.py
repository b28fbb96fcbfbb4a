"""Where a group's busier and throttled ~0.1 s windows lie against its GC marks
(cfsim.kernel.cpu_windows.gc_window_keys), the same for the lab's watcher samples and the model's
periods."""
import numpy as np
import pandas as pd
import pytest

from cfsim.goruntime.gc_cycles import mark_spans
from cfsim.kernel.cpu_windows import gc_window_keys_from_periods, gc_window_keys_from_samples


def _cycles(ends_s, mark_ms):
    return pd.DataFrame({"run_t_s": ends_s, "mark_ms": mark_ms})


def test_a_mark_is_taken_back_from_its_end():
    start, end = mark_spans(_cycles([1.03, 2.5], [30.0, 100.0]))
    assert start.tolist() == pytest.approx([1.0, 2.4]) and end.tolist() == [1.03, 2.5]
    assert mark_spans(pd.DataFrame())[0].size == 0


def test_the_lab_samples_give_the_burst_and_where_the_throttling_falls():
    # 40 windows of 0.1 s at 0.5 cores; the marks at 1.0-1.03 s and 3.02-3.05 s add 0.2 cores
    # to their windows; two windows are throttled, one of them under a mark
    t = np.round(np.arange(41) * 0.1, 6)
    cores = np.full(40, 0.5)
    cores[[10, 30]] += 0.2
    usage = np.concatenate([[0.0], np.cumsum(cores * 0.1)])
    throttled = np.concatenate([[0], np.cumsum([1 if i in (10, 20) else 0 for i in range(40)])])
    k = gc_window_keys_from_samples(t, usage, throttled, *mark_spans(_cycles([1.03, 3.05], [30.0, 30.0])))
    assert k["cpu_window_gc_excess_cores"] == pytest.approx(0.2)
    assert k["throttled_window_gc_share"] == pytest.approx(0.5)


def test_the_model_periods_give_the_same_keys_inside_the_window_only():
    ends = np.round(np.arange(1, 61) * 0.1, 6)             # periods ending 0.1 .. 6.0 s
    usage = np.full(60, 0.05)
    usage[[29, 49]] = 0.08                                  # the periods (2.9, 3.0] and (4.9, 5.0]
    throttled = np.zeros(60, dtype=bool)
    throttled[49] = True
    cycles = _cycles([2.99, 4.95, 0.5], [20.0, 20.0, 20.0])  # the mark at 0.48 s is before the window
    k = gc_window_keys_from_periods(ends, usage, throttled, *mark_spans(cycles), 1.0, 6.0)
    assert k["cpu_window_gc_excess_cores"] == pytest.approx(0.3)
    assert k["throttled_window_gc_share"] == 1.0


def test_too_few_windows_or_no_mark_give_nothing():
    k = gc_window_keys_from_periods([0.1, 0.2, 0.3], [0.05] * 3, [False] * 3, *mark_spans(_cycles([0.25], [10.0])),
                                    0.0, 1.0)
    assert k == {"cpu_window_gc_excess_cores": None, "throttled_window_gc_share": None}
    ends = np.arange(1, 41) * 0.1
    k = gc_window_keys_from_periods(ends, np.full(40, 0.05), np.zeros(40, bool), *mark_spans(_cycles([], [])), 0.0, 4.0)
    assert k["cpu_window_gc_excess_cores"] is None and k["throttled_window_gc_share"] is None


def test_a_lab_run_puts_its_marks_on_the_watcher_clock():
    # open-pacer p005 (GOMAXPROCS 8, 60 % of a 1.0-core limit, gctrace on): the watcher's t_s counts
    # from the window's start, the cycles' run_t_s from the load's; misaligned by the 3 s warm-up,
    # the windows under a mark look like any other (excess ~0, no throttled window under a mark)
    from pathlib import Path

    from cfsim.validation.twin import observed_summary

    run = Path(__file__).resolve().parents[2] / "data/lab/open-pacer/p005_load_fraction=0.6_gomaxprocs=8"
    o = observed_summary(run)
    assert o["cpu_window_gc_excess_cores"] == pytest.approx(0.174, abs=0.002)
    assert o["throttled_window_gc_share"] == pytest.approx(4 / 7)
