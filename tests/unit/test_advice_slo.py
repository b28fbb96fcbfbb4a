"""SLO parsing and checking (cfsim.advice.slo)."""
import pytest

from cfsim.advice.slo import KNOWN_KEYS, SLO, SLOError, parse_slo, parse_slos, tighter


@pytest.mark.parametrize("text,key,op,thr", [
    ("lag_final_s<=60", "lag_final_s", "<=", 60.0),
    ("latency_p99_s <= 0.05", "latency_p99_s", "<=", 0.05),
    ("throughput_per_s>=4000", "throughput_per_s", ">=", 4000.0),
    ("throttled_ratio<0.1", "throttled_ratio", "<", 0.1),
    (" backlog_final > 1e3 ", "backlog_final", ">", 1000.0),
])
def test_parse(text, key, op, thr):
    s = parse_slo(text)
    assert (s.key, s.op, s.threshold) == (key, op, thr)


@pytest.mark.parametrize("text,fragment", [
    ("throughput>=4000", "unknown key 'throughput'; known keys: throughput_per_s"),
    ("lag_final_s", "no comparison"),
    ("lag_final_s==60", "operator '==' is not allowed"),
    ("lag_final_s<=sixty", "threshold 'sixty' is not a number"),
    ("lag_final_s<=inf", "finite"),
    ("", "empty"),
    ("<=3", "cannot read"),
])
def test_parse_errors_name_the_slo(text, fragment):
    with pytest.raises(SLOError) as exc:
        parse_slo(text)
    msg = str(exc.value)
    assert fragment in msg
    assert repr(text) in msg  # the SLO itself is quoted


def test_unknown_key_lists_every_known_key():
    with pytest.raises(SLOError) as exc:
        parse_slo("p99<=1")
    for key in KNOWN_KEYS:
        assert key in str(exc.value)


def test_no_slo_is_an_error():
    with pytest.raises(SLOError, match="no SLO given"):
        parse_slos([])


def test_met_and_missing_values():
    s = SLO("throughput_per_s", ">=", 100.0)
    assert s.met({"throughput_per_s": 100.0})
    assert not s.met({"throughput_per_s": 99.9})
    assert not s.met({})                               # not measured = not met
    assert not s.met({"throughput_per_s": float("nan")})
    assert s.slack({"throughput_per_s": 150.0}) == pytest.approx(0.5)
    assert tighter(s, 2.0).threshold == 200.0
    assert tighter(SLO("lag_final_s", "<=", 60.0), 2.0).threshold == 30.0
