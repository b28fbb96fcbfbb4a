"""cfsim.io.promql against stored responses of a real Prometheus, a reference loop, and properties."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cfsim.io import (counter_to_rate, delta, increase, irate, make_frame, rate, read_prometheus_json,
                      read_promtool_dump)
from cfsim.io.promql import _compat, parse_duration

DATA = Path(__file__).resolve().parents[1] / "data" / "prom"
INDEX = json.loads((DATA / "api" / "index.json").read_text())
FUNCS = {"rate": rate, "increase": increase, "irate": irate, "delta": delta}
QUERY = re.compile(r"^(rate|increase|irate|delta)\((\w+)\[(\w+)\]\)$")
STORED = sorted(k for k, v in INDEX.items() if v["http_status"] == 200 and QUERY.match(v["query"]))


@pytest.fixture(scope="module")
def raw():
    return read_promtool_dump(DATA / "dump.txt")[0]


def _compare(expected: pd.DataFrame, got: pd.DataFrame, rtol: float = 1e-9) -> None:
    keys = ["metric", "labels", "timestamp"]
    merged = expected.merge(got, on=keys, how="outer", indicator=True)
    only = merged[merged["_merge"] != "both"]
    assert only.empty, f"rows only on one side:\n{only.head(10)}"
    x, y = merged["value_x"].to_numpy(), merged["value_y"].to_numpy()
    assert np.array_equal(np.isnan(x), np.isnan(y))
    ok = ~np.isnan(x)
    np.testing.assert_allclose(y[ok], x[ok], rtol=rtol, atol=0)


@pytest.mark.parametrize("stem", STORED)
def test_counter_to_rate_matches_stored_prometheus_response(raw, stem):
    entry = INDEX[stem]
    func, metric, window = QUERY.match(entry["query"]).groups()
    expected, _ = read_prometheus_json(DATA / "api" / f"{stem}.json", query=entry["query"])
    assert len(expected) > 10
    got = counter_to_rate(raw[raw["metric"] == metric], window, entry["step"], entry["start"], entry["end"],
                          func=func, compat=entry["prometheus_version"])
    _compare(expected, got)


def test_stored_responses_cover_resets_gaps_and_the_zero_point(raw):
    """The fixture must keep discriminating: 3.x windows and the 2.51 zero-point rule differ from 2.42."""
    entry = INDEX["rate_10s"]
    expected, _ = read_prometheus_json(DATA / "api" / "rate_10s.json", query=entry["query"])
    v3 = counter_to_rate(raw[raw["metric"] == "cfsim_requests_total"], "10s", 5, entry["start"], entry["end"])
    assert len(v3) != len(expected)  # left-open windows drop samples on the lower edge
    entry = INDEX["increase_1m_step3"]
    expected, _ = read_prometheus_json(DATA / "api" / "increase_1m_step3.json", query=entry["query"])
    v251 = counter_to_rate(raw[raw["metric"] == "cfsim_requests_total"], "1m", 3, entry["start"], entry["end"],
                           func="increase", compat="2.51")
    merged = expected.merge(v251, on=["metric", "labels", "timestamp"])
    assert not np.allclose(merged["value_x"], merged["value_y"], rtol=1e-9)


# --- a plain per-window loop written straight from the documented rules ---------------------------

def _reference(t_ms, v, at_ms, range_ms, func, compat):
    left_open, zero_after = _compat(compat)
    out = {}
    for T in at_ms:
        lo = T - range_ms
        idx = [i for i, t in enumerate(t_ms) if (t > lo if left_open else t >= lo) and t <= T]
        if len(idx) < 2:
            continue
        ts = [t_ms[i] for i in idx]
        vs = [v[i] for i in idx]
        if func == "irate":
            d = vs[-1] if vs[-1] < vs[-2] else vs[-1] - vs[-2]
            out[T] = d / ((ts[-1] - ts[-2]) / 1000)
            continue
        counter = func != "delta"
        inc = vs[-1] - vs[0]
        if counter:
            for a, b in zip(vs, vs[1:]):
                if b < a:
                    inc += a
        to_start, to_end = (ts[0] - lo) / 1000, (T - ts[-1]) / 1000
        sampled = (ts[-1] - ts[0]) / 1000
        avg = sampled / (len(ts) - 1)
        zero = sampled * (vs[0] / inc) if counter and inc > 0 and vs[0] >= 0 else float("inf")
        if zero_after:
            if to_start >= 1.1 * avg:
                to_start = avg / 2
            to_start = min(to_start, zero)
        else:
            to_start = min(to_start, zero)
            if to_start >= 1.1 * avg:
                to_start = avg / 2
        if to_end >= 1.1 * avg:
            to_end = avg / 2
        factor = (sampled + to_start + to_end) / sampled
        if func == "rate":
            factor /= range_ms / 1000
        out[T] = inc * factor
    return out


def _frame(t_ms, v, name="c_total"):
    return make_frame(np.asarray(t_ms, np.int64), [name] * len(t_ms), ['{pod="a"}'] * len(t_ms),
                      np.asarray(v, np.float64))


series_st = st.lists(st.tuples(st.integers(1, 30_000), st.floats(0, 1e6, allow_nan=False),
                               st.booleans()), min_size=0, max_size=40)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=series_st, range_s=st.integers(1, 120), func=st.sampled_from(sorted(FUNCS)),
       compat=st.sampled_from(["2.42", "2.51", "3.0"]), at_offsets=st.lists(st.integers(-5_000, 200_000), max_size=15))
def test_vectorised_equals_reference_loop(steps, range_s, func, compat, at_offsets):
    t, v, acc, now = [], [], 50.0, 1_700_000_000_000
    for gap, inc, reset in steps:
        now += gap
        acc = inc / 3 if reset else acc + inc
        t.append(now)
        v.append(acc)
    at = sorted({1_700_000_000_000 + o for o in at_offsets} | set(t[::3]))
    got = FUNCS[func](_frame(t, v), range_s, [a / 1000 for a in at], compat=compat)
    ref = _reference(t, v, at, range_s * 1000, func, compat)
    got_map = dict(zip(got["timestamp"].to_numpy("datetime64[ms]").astype(np.int64), got["value"]))
    assert set(got_map) == set(ref)
    for k in ref:
        assert got_map[k] == pytest.approx(ref[k], rel=1e-12, abs=1e-12)


@settings(deadline=None)
@given(interval_ms=st.integers(200, 60_000), slope=st.floats(1e-3, 1e6), windows=st.integers(2, 20),
       phase=st.floats(0, 1), n_extra=st.integers(0, 30), compat=st.sampled_from(["2.42", "3.0"]))
def test_rate_of_linear_counter_is_its_slope(interval_ms, slope, windows, phase, n_extra, compat):
    range_ms = windows * interval_ms + int(phase * interval_ms)
    n = windows + 3 + n_extra
    t = 1_700_000_000_000 + interval_ms * np.arange(n)
    v = slope * range_ms / 1000 * 2 + slope * (t - t[0]) / 1000  # far from zero: no zero-point cut
    at = t[(t - t[0] >= range_ms + interval_ms) & (t <= t[-1])]
    assume(len(at))
    at = np.unique(np.concatenate([at, at - int(phase * interval_ms)]))
    at = at[at - range_ms - interval_ms >= t[0]]
    assume(len(at))
    got = rate(_frame(t, v), range_ms / 1000, at / 1000, compat=compat)
    assert len(got) == len(at)
    np.testing.assert_allclose(got["value"], slope, rtol=1e-9)
    inc = increase(_frame(t, v), range_ms / 1000, at / 1000, compat=compat)
    np.testing.assert_allclose(inc["value"], slope * range_ms / 1000, rtol=1e-9)


@settings(deadline=None)
@given(incs=st.lists(st.floats(0, 1e4, allow_nan=False), min_size=2, max_size=40),
       gaps=st.lists(st.integers(500, 20_000), min_size=40, max_size=40),
       reset_at=st.sets(st.integers(1, 39)), start=st.floats(0, 1e5), compat=st.sampled_from(["2.42", "3.0"]))
def test_increase_is_invariant_under_counter_resets(incs, gaps, reset_at, start, compat):
    """An exporter restart (counter restarting from zero) does not change increase()."""
    t = 1_700_000_000_000 + np.cumsum(gaps[:len(incs)])
    true = start + np.cumsum(incs)
    seen, offset = true.copy(), 0.0
    for j in range(1, len(true)):
        if j in reset_at and true[j] - true[j - 1] < true[j - 1] - offset:
            offset = true[j - 1]  # restarted right after sample j-1
        seen[j] = true[j] - offset
    window_s = (t[-1] - t[0]) / 1000 + 1
    a = increase(_frame(t, true), window_s, t / 1000, compat=compat)
    b = increase(_frame(t, seen), window_s, t / 1000, compat=compat)
    np.testing.assert_allclose(b["value"], a["value"], rtol=1e-9, atol=1e-6)


@settings(deadline=None)
@given(values=st.lists(st.floats(0, 1e9, allow_nan=False), min_size=2, max_size=50),
       gaps=st.lists(st.integers(1, 90_000), min_size=50, max_size=50), range_s=st.integers(1, 600),
       compat=st.sampled_from(["2.42", "2.51", "3.0"]))
def test_counter_rates_are_never_negative(values, gaps, range_s, compat):
    t = 1_700_000_000_000 + np.cumsum(gaps[:len(values)])
    f = _frame(t, values)
    at = np.arange(t[0], t[-1] + range_s * 1000, max(1, range_s * 250)) / 1000
    for func in (rate, increase, irate):
        assert (func(f, range_s, at, compat=compat)["value"] >= 0).all()


def test_rate_needs_two_samples_and_names_the_output():
    f = _frame([0, 10_000, 20_000], [1.0, 2.0, 4.0])
    # left-open: at t=10 s the window (0, 10] holds one sample; at 20 s (10, 20] holds one too
    assert rate(f, "10s", [5, 10, 20]).empty
    closed = rate(f, "10s", [5, 10, 20], compat="2.42")  # [0, 10] and [10, 20] hold two
    assert closed["timestamp"].tolist() == list(pd.to_datetime([10, 20], unit="s", utc=True))
    assert closed["metric"].unique().tolist() == ["rate(c_total[10s])"]
    assert closed["labels"].unique().tolist() == ['{pod="a"}']
    assert rate(f, 90, [20])["metric"].tolist() == ["rate(c_total[1m30s])"]


def test_rate_skips_nan_staleness_markers_but_delta_propagates_nan():
    t = [0, 5_000, 10_000, 15_000]
    f = _frame(t, [0.0, 5.0, np.nan, 15.0])
    # samples 0, 5, 15 in (-5 s, 15 s]: 15 over 15 s, no extension before the zero point -> 15 / 20 s
    assert rate(f, 20, [15])["value"].tolist() == pytest.approx([0.75])
    # kept, a NaN in the middle is harmless (as in Prometheus: comparisons with NaN are false) ...
    assert rate(f, 20, [15], skip_nan=False)["value"].tolist() == pytest.approx([0.75])
    # ... but a NaN at the end of the window makes the result NaN
    assert np.isnan(rate(_frame(t, [0.0, 5.0, 10.0, np.nan]), 20, [15], skip_nan=False)["value"]).all()
    g = _frame(t, [0.0, np.nan, 1.0, np.nan], "g")
    assert np.isnan(delta(g, 20, [15])["value"].iloc[0])


def test_counter_reset_adds_the_previous_value():
    f = _frame([0, 10_000, 20_000, 30_000], [100.0, 110.0, 5.0, 15.0])
    # raw increase 15 - 100 + 110 = 25 over 30 s, window [0, 30] closed -> extrapolated to 30 s
    assert increase(f, 30, [30], compat="2.42")["value"].tolist() == pytest.approx([25.0])


def test_zero_point_limits_extrapolation_of_a_young_counter():
    f = _frame([60_000, 70_000, 80_000], [1.0, 11.0, 21.0])  # started ~1 s before the first sample
    got = increase(f, 60, [80])["value"].iloc[0]
    assert got == pytest.approx(20 * (20 + 1 + 0) / 20)


def test_irate_uses_the_last_two_samples_and_handles_resets():
    f = _frame([0, 10_000, 20_000, 25_000], [0.0, 100.0, 200.0, 3.0])
    assert irate(f, 30, [25])["value"].tolist() == pytest.approx([3.0 / 5])
    assert irate(f, 30, [20])["value"].tolist() == pytest.approx([10.0])


def test_counter_to_rate_grid_defaults_to_the_data_span_and_handles_empty():
    f = _frame(np.arange(0, 100_001, 5_000) + 1_700_000_000_000, 1000 + np.arange(21) * 5.0)
    out = counter_to_rate(f, "30s", "10s")
    assert out["timestamp"].iloc[0] == pd.Timestamp(1_700_000_010_000, unit="ms", tz="UTC")
    assert out["timestamp"].iloc[-1] == pd.Timestamp(1_700_000_100_000, unit="ms", tz="UTC")
    # windows reaching before the first sample extend by half an interval only
    assert out["value"].iloc[0] == pytest.approx(10 * (10 + 2.5) / 10 / 30)
    assert out["value"].iloc[2:].to_numpy() == pytest.approx(1.0)
    assert counter_to_rate(f.iloc[:0], 30, 10).empty


def test_parse_duration_and_compat_errors():
    assert parse_duration("1h2m3s4ms") == 3_723_004
    with pytest.raises(ValueError):
        parse_duration("5 minutes")
    with pytest.raises(ValueError):
        parse_duration(0)
    with pytest.raises(ValueError):
        rate(_frame([0], [1.0]), 10, compat="latest")
