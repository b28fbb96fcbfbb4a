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


# --- the same question at the scrapes' resolution (gc_interval_keys): runs without the gctrace

def _burst_series(burst_seconds, burst=0.3, base=0.5, seconds=10):
    """Cumulative CPU sampled every 0.1 s: ``base`` cores, and ``burst`` more in the window
    0.4-0.5 s into each of ``burst_seconds``."""
    t = np.round(np.arange(10 * seconds + 1) * 0.1, 6)
    cores = np.full(10 * seconds, base)
    for s in burst_seconds:
        cores[10 * s + 4] += burst
    return t, np.concatenate([[0.0], np.cumsum(cores * 0.1)]), cores


def test_a_burst_in_the_intervals_a_cycle_ended_in_is_their_peak_excess():
    from cfsim.kernel.cpu_windows import gc_interval_keys_from_samples

    t, usage, cores = _burst_series([1, 3, 5, 7])
    throttled = np.concatenate([[0], np.cumsum(cores > 0.7)])
    # scrapes at x.2 s: the cycle that ended at x.45 s counts at the next scrape, in (x.2, x+1.2]
    scrapes = np.arange(10) + 0.2
    count = np.searchsorted(np.array([1.45, 3.45, 5.45, 7.45]), scrapes)
    k = gc_interval_keys_from_samples(t, usage, throttled, scrapes, count)
    assert k["cpu_window_gc_interval_peak_excess_cores"] == pytest.approx(0.3)
    assert k["throttled_window_gc_interval_share"] == 1.0
    # read at the range query's steps instead (a second late): the burst lands outside its interval
    late = gc_interval_keys_from_samples(t, usage, throttled, scrapes + 1.0, count)
    assert late["cpu_window_gc_interval_peak_excess_cores"] < 0.05


def test_a_flat_group_or_a_burst_the_gc_does_not_make_shows_no_excess():
    # what min(demand, limit) or any model without a GC burst gives: nothing in the GC's intervals
    from cfsim.kernel.cpu_windows import gc_interval_keys_from_samples

    scrapes = np.arange(11, dtype=float)
    count = np.searchsorted(np.array([1.45, 3.45, 5.45, 7.45]), scrapes)
    t, usage, _ = _burst_series([])
    flat = gc_interval_keys_from_samples(t, usage, np.zeros(t.size), scrapes, count)
    assert flat["cpu_window_gc_interval_peak_excess_cores"] == pytest.approx(0.0)
    assert flat["throttled_window_gc_interval_share"] is None
    t, usage, _ = _burst_series([0, 2, 4, 6, 8])          # bursts in the intervals without a cycle
    other = gc_interval_keys_from_samples(t, usage, np.zeros(t.size), scrapes, count)
    assert other["cpu_window_gc_interval_peak_excess_cores"] == pytest.approx(-0.3)


def test_the_model_counts_its_cycles_as_a_scrape_each_second_would():
    from cfsim.kernel.cpu_windows import gc_interval_keys, gc_interval_keys_from_periods

    ends = np.round(np.arange(1, 101) * 0.1, 6)             # periods ending 0.1 .. 10.0 s
    usage = np.full(100, 0.05)
    usage[[14, 34, 54, 74]] = 0.08                          # the periods (1.4, 1.5], (3.4, 3.5], ...
    throttled = usage > 0.06
    k = gc_interval_keys_from_periods(ends, usage, throttled, [1.48, 3.48, 5.48, 7.48], 0.0, 10.0)
    assert k["cpu_window_gc_interval_peak_excess_cores"] == pytest.approx(0.3)
    assert k["throttled_window_gc_interval_share"] == 1.0
    with pytest.raises(ValueError, match="edges_s must increase"):
        gc_interval_keys([0.0] * 20, [0.1] * 20, [0.5] * 20, [False] * 20, [0.0, 1.0, 1.0], [0, 1, 1])
    with pytest.raises(ValueError, match="differ in length"):
        gc_interval_keys([0.0] * 20, [0.1] * 20, [0.5] * 20, [False] * 20, [0.0, 1.0], [0])


def test_a_lab_run_reads_its_cycle_count_at_the_scrapes_own_times():
    # open-latency-quiet p002 (GOMAXPROCS 8, 60 % of a 1.0-core limit, no gctrace): its busiest
    # windows and all 5 throttled ones fall in the seconds a cycle ended in, when the count is read
    # at its scrapes (x.203 s); the range query's steps (x.000, up to a second later) lose that
    from pathlib import Path

    from cfsim.io.lab import read_lab_metrics
    from cfsim.validation.twin import GC_CYCLES_TOTAL, observed_summary

    run = Path(__file__).resolve().parents[2] / "data/lab/open-latency-quiet/p002_cpu_limit=1.0_load_fraction=0.6_gomaxprocs=8"
    o = observed_summary(run)
    assert o["cpu_window_gc_interval_peak_excess_cores"] == pytest.approx(0.178, abs=0.002)
    assert o["throttled_window_gc_interval_share"] == 1.0
    frames, meta = read_lab_metrics(run, [GC_CYCLES_TOTAL], kind="samples")
    stamps = frames[GC_CYCLES_TOTAL]["timestamp"].map(lambda ts: ts.timestamp() % 1)
    assert not meta["missing"] and stamps.round(3).eq(0.203).all()
    with pytest.raises(ValueError, match="kind"):
        read_lab_metrics(run, [GC_CYCLES_TOTAL], kind="rate")
