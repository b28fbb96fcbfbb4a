"""The lab's repeatability as validation reports it (cfsim.validation.noise)."""
import pytest

from cfsim.validation.noise import noise_summary, repeat_point, repeat_spreads, spread


def test_repeat_names_of_both_grid_generations():
    assert repeat_point("repeat-p010_cpu_limit=0.5") == "p010_cpu_limit=0.5"
    assert repeat_point("repeat2-p002_a_gogc=50") == "p002_a_gogc=50"
    assert repeat_point("repeat3-p002_a_gogc=50") == "p002_a_gogc=50"
    assert repeat_point("p002_a_gogc=50") is None
    assert repeat_point("calib-start") is None


def test_spread_units_follow_the_error_kind():
    assert spread([90.0, 110.0], "relative") == pytest.approx(0.2)
    assert spread([0.2, 0.5, 0.3], "absolute") == pytest.approx(0.3)
    assert spread([1.0], "relative") is None
    assert spread([1.0, 2.0], "exact") is None


def test_a_point_is_compared_with_its_repeats_not_with_itself():
    # the old report compared 'repeat2-p' with itself (removeprefix('repeat-') left the name as it
    # was) and so printed a spread of 0 for every design grid
    observed = {
        "p001": {"throughput_per_s": 100.0, "throttled_ratio": 0.50},
        "repeat2-p001": {"throughput_per_s": 120.0, "throttled_ratio": 0.60},
        "repeat3-p001": {"throughput_per_s": 110.0, "throttled_ratio": 0.55},
        "p002": {"throughput_per_s": 50.0, "throttled_ratio": 1.0},
        "repeat-p002": {"throughput_per_s": 52.0, "throttled_ratio": 1.0},
        "p003": {"throughput_per_s": 10.0},          # not repeated
        "repeat2-p999": {"throughput_per_s": 10.0},  # its point is missing
    }
    s = repeat_spreads(observed)
    assert set(s) == {"p001", "p002"}
    assert s["p001"]["throughput_per_s"] == pytest.approx(20.0 / 110.0)
    assert s["p001"]["throttled_ratio"] == pytest.approx(0.10)
    assert s["p002"]["throughput_per_s"] == pytest.approx(2.0 / 51.0)
    summary = noise_summary(s)
    assert summary["throughput_per_s"]["points"] == 2
    assert summary["throughput_per_s"]["max"] == pytest.approx(20.0 / 110.0)
    assert summary["throughput_per_s"]["median"] == pytest.approx((20.0 / 110.0 + 2.0 / 51.0) / 2)
