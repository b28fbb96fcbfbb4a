"""``workload.rate_per_s`` has one parser (cfsim.workloads.arrivals.parse_rate): the scenario schema,
the event engine's workloads and the long-horizon engine accept and reject the same values and read
the same rate from them."""
from __future__ import annotations

import copy
import math
import tempfile
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cfsim.engine.longrun import nominal_demand_cores
from cfsim.scenario import Scenario, ScenarioError, load_scenario
from cfsim.workloads.arrivals import RateFn, parse_rate

BASE = load_scenario("grab-sinktos3")  # a stream workload, long-horizon ready
TIMES = (0.0, 0.5, 1.0, 2.5, 7.0, 60.0)


def _schema(value):
    """Accepted by the scenario schema?"""
    try:
        load_scenario({"workload": {"kind": "stream", "rate_per_s": value}})
    except ScenarioError:
        return False
    return True


def _event_engine(value):
    """The rate the event engine's workloads tabulate (RateFn), or None if they reject the value."""
    try:
        fn = RateFn(value, 10.0)
    except ScenarioError:
        return None
    return [fn.rate(t) for t in TIMES]


def _long_horizon(value):
    """The long-horizon engine's sizing of the value (bypassing scenario validation), or None."""
    data = copy.deepcopy(BASE.data)
    data["workload"]["rate_per_s"] = value
    try:
        return nominal_demand_cores(Scenario(data))
    except ScenarioError:
        return None


def _check_agree(value):
    accepted = _schema(value)
    event = _event_engine(value)
    longrun = _long_horizon(value)
    assert accepted == (event is not None) == (longrun is not None), (value, accepted, event, longrun)
    if accepted:
        spec = parse_rate(value)
        assert event == [spec.rate(t) for t in TIMES]
        assert longrun == spec.nominal_rate_per_s() * (BASE["workload.cpu_ms_per_item"] / 1000.0)


numbers = st.one_of(st.integers(-5, 10_000), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                    st.none(), st.text(max_size=4))
steps = st.lists(st.one_of(st.lists(numbers, min_size=0, max_size=3), numbers), max_size=5)
diurnal = st.builds(lambda parts: "diurnal:" + ":".join(parts),
                    st.lists(st.one_of(st.floats(-10, 1e4, allow_nan=False).map(lambda x: f"{x:g}"),
                                       st.sampled_from(["", "x", "nan", "inf", "0"])), min_size=1, max_size=5))


@settings(max_examples=150, deadline=None)
@given(st.one_of(numbers, steps, diurnal))
@example("diurnal:0:0:2.22507e-309")   # a subnormal period: 2 pi t / period overflowed (CI 2026-11-28)
@example("diurnal:10:5:0.0009")
def test_values_accepted_and_read_alike(value):
    _check_agree(value)


csv_rows = st.lists(st.one_of(
    st.tuples(st.floats(-1, 100, allow_nan=False), st.floats(-1, 1e4, allow_nan=False)).map(
        lambda r: f"{r[0]:g},{r[1]:g}"),
    st.sampled_from(["", "# comment", "t_s,rate_per_s", "rate_per_s,t_s", "time,rate", "1", "x,2", "3,nan",
                     "1,2,extra"])), max_size=6)


@settings(max_examples=150, deadline=None)
@given(csv_rows)
def test_csv_files_accepted_and_read_alike(rows):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rate.csv"
        path.write_text("\n".join(rows) + "\n")
        _check_agree(str(path))


def test_headerless_and_header_csv_read_the_same(tmp_path):
    plain, header, swapped = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "c.csv"
    plain.write_text("0,100\n5,300\n")
    header.write_text("# from a trace\nt_s,rate_per_s\n0,100\n5,300\n")
    swapped.write_text("rate_per_s,t_s\n100,0\n300,5\n")
    steps = ((0.0, 100.0), (5.0, 300.0))
    assert parse_rate(str(plain)).steps == parse_rate(str(header)).steps == parse_rate(str(swapped)).steps == steps
    for path in (plain, header, swapped):
        _check_agree(str(path))


@pytest.mark.parametrize("value, message", [
    (-1.0, "must be >= 0"),
    ("diurnal:-5:1:60", "mean >= 0"),
    ("diurnal:5:1", "diurnal:<mean>:<amplitude>:<period_s>"),
    ([], "at least one"),
    ([[0, 1], [0, 2]], "two steps start at t_s = 0"),
    ([[0, -1]], "rate_per_s >= 0"),
    ("no-such-file.csv", "no CSV file 'no-such-file.csv'"),
    (1.7e308, "must be at most 1e+09 per second (got 1.7e+308)"),
    ([[0, 1], [5, 2e9]], "step 1: rate_per_s must be at most 1e+09"),
    ("diurnal:6e8:6e8:60", "diurnal: mean + |amplitude| must be at most 1e+09"),
])
def test_bad_values_fail_with_the_key(value, message):
    with pytest.raises(ScenarioError, match=r"^workload\.rate_per_s: .*" + __import__("re").escape(message)):
        load_scenario({"workload": {"kind": "open", "rate_per_s": value}})
    assert _event_engine(value) is None and _long_horizon(value) is None


def test_csv_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("t_s,rate_per_s\n0,10\n1,ten\n")
    with pytest.raises(ScenarioError, match=rf"workload\.rate_per_s: {bad}:3: must be"):
        parse_rate(str(bad))
    bad.write_text("t_s,rate_per_s\n0,10\n1,3e9\n")
    with pytest.raises(ScenarioError, match=rf"workload\.rate_per_s: {bad}:3: rate_per_s must be at most 1e\+09"):
        parse_rate(str(bad))
    binary = tmp_path / "rate.bin"
    binary.write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(ScenarioError, match="not a text CSV file"):
        parse_rate(str(binary))


def test_clipped_diurnal_integrates_the_clipped_rate():
    # amplitude > mean: the rate is clipped at 0 half the time; cum() must work on scalars too
    fn = RateFn("diurnal:50:100:10", 10.0)
    fine = [max(0.0, 50 + 100 * math.sin(2 * math.pi * (i + 0.5) / 1000)) / 100 for i in range(1000)]
    assert float(fn.cum(10.0)) == pytest.approx(sum(fine), rel=1e-3)
    assert fn.cum_scalar(10.0) == pytest.approx(float(fn.cum(10.0)))


# ------------------------------------------------------------- a client that sends late, in bunches
def test_late_sender_bunches_overdue_requests_and_keeps_order():
    import numpy as np
    from cfsim.workloads.arrivals import late_sender

    rng = np.random.default_rng(3)
    due = np.sort(rng.uniform(0, 10, 20_000))          # Poisson, 2,000/s
    sent = late_sender(due, 0.0004, 0.0015, np.random.default_rng(1))
    assert np.all(np.diff(sent) >= 0) and np.all(sent >= due)
    # never earlier, at most the lateness of the bunch's first request after its due time
    bunches = np.unique(sent).size
    assert bunches < 0.75 * due.size                   # one wake-up of the loop sends several
    assert late_sender(due, 0.0, 0.0, np.random.default_rng(1)) is due
    again = late_sender(due, 0.0004, 0.0015, np.random.default_rng(1))
    assert np.array_equal(sent, again)
    # the lateness is log-normal: its median and 99th percentile as asked (first request of a bunch)
    lone = np.concatenate([[True], sent[1:] != sent[:-1]])
    late = (sent - due)[lone]
    assert np.median(late) == pytest.approx(0.0004, rel=0.05)
    assert np.percentile(late, 99) == pytest.approx(0.0015, rel=0.15)


def test_late_sender_keys_are_checked():
    with pytest.raises(ScenarioError, match="workload.client_send_late_p99_ms"):
        load_scenario({"workload": {"kind": "open", "client_send_late_ms": 0.5, "client_send_late_p99_ms": 0.2}})
    with pytest.raises(ScenarioError, match="workload.client_send_late_ms"):
        load_scenario({"workload": {"kind": "open", "client_send_late_ms": -1}})
