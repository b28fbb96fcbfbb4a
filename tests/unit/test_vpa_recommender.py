"""The VPA recommender's CPU path against hand-computed vectors (kubernetes/autoscaler
``vertical-pod-autoscaler/pkg/recommender/logic/recommender.go``, ``estimator.go``, integer CPU and
``--round-cpu-millicores``)."""
import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cfsim.autoscalers.vpa_recommender import (AggregateState, ContainerSampler, RecommenderConfig,
                                               amount_from_float, confidence, cores_to_millicores, integer_cpu,
                                               lower_multiplier, metrics_server_points, post_process, raw_estimate, recommend, replay,
                                               replay_points, round_up_to_scale, upper_multiplier, with_margin)

MIDNIGHT = 1767225600.0
H = 3600.0


def steady(usage_cores, minutes, t0=MIDNIGHT):
    a = AggregateState.new()
    for i in range(minutes):
        a.add_cpu_sample(usage_cores, t0 + 60.0 * i)
    return a


# ---- confidence multipliers (the code comments' table) ---------------------------------------
@pytest.mark.parametrize("hours, mult", [(12, 3.0), (24, 2.0), (168, 1 + 1 / 7)])
def test_upper_multiplier(hours, mult):
    conf = confidence(0.0, hours * H, 10 ** 9)          # lifespan-limited
    assert conf == pytest.approx(hours / 24)
    assert upper_multiplier(conf) == pytest.approx(mult)


@pytest.mark.parametrize("minutes, mult", [(5, (1 + 1.44 / 5) ** -2), (30, (1 + 1.44 / 30) ** -2),
                                           (60, (1 + 1.44 / 60) ** -2)])
def test_lower_multiplier(minutes, mult):
    conf = confidence(0.0, minutes * 60.0, 10 ** 9)
    assert lower_multiplier(conf) == pytest.approx(mult)
    # the table in the code comments: 5 min x0.6, 30 min x0.9, 60 min x0.95
    assert round(lower_multiplier(conf), 2) == {5: 0.6, 30: 0.91, 60: 0.95}[minutes]


def test_confidence_is_min_of_lifespan_and_samples():
    # 60 samples over 24 h: samples term 60/1440 wins
    assert confidence(0.0, 24 * H, 60) == pytest.approx(60 / 1440)
    assert confidence(None, None, 0) == 0.0
    assert upper_multiplier(0.0) == math.inf and lower_multiplier(0.0) == 0.0


# ---- amounts: truncation, margin, minimum ------------------------------------------------------
def test_amount_truncates_and_clamps():
    assert amount_from_float(1016.28) == 1016
    assert amount_from_float(-3.0) == 0
    assert amount_from_float(math.inf) == 10 ** 14
    assert amount_from_float(float("nan")) == 0


def test_margin_truncates():
    assert with_margin(1016, 0.15) == 1016 + 152          # 152.4 -> 152
    assert with_margin(511, 0.15) == 587                  # 76.65 -> 76


def test_pinned_usage_one_core_after_a_week():
    # 10080 samples of 1.0 core, one a minute. P = end of bucket 36 = 1.01628 -> 1016m -> +152 = 1168m.
    a = steady(1.0, 7 * 1440)
    conf = min((7 * 1440 - 1) / 1440, 7 * 1440 / 1440)
    tgt, lo, up = raw_estimate(a, RecommenderConfig())
    assert tgt == 1168
    assert lo == int(1168 * (1 + 0.001 / conf) ** -2) == 1167
    assert up == int(1168 * (1 + 1 / conf)) == 1334


def test_first_sample_bounds():
    a = steady(1.0, 1)
    tgt, lo, up = raw_estimate(a, RecommenderConfig())
    assert (tgt, lo, up) == (1168, 25, 10 ** 14)


def test_minimum_25m_and_empty_state():
    a = steady(0.001, 60)                  # bucket 0 -> end 0.01 core = 10m -> +1 = 11m -> 25m
    assert raw_estimate(a, RecommenderConfig())[0] == 25
    assert raw_estimate(AggregateState.new(), RecommenderConfig()) == (25, 25, 25)
    # two containers in the VPA: 25m / 2 = 12m each (truncated)
    assert raw_estimate(AggregateState.new(), RecommenderConfig(), n_containers=2) == (12, 12, 12)


# ---- post-processing order: round -> integer CPU -> capping ------------------------------------
def test_round_cpu_millicores():
    assert round_up_to_scale(79, 50) == 100 and round_up_to_scale(34, 50) == 50
    assert round_up_to_scale(1168, 1) == 1168
    rec = post_process(1168, 1167, 1334, RecommenderConfig(round_cpu_millicores=50))
    assert (rec.target, rec.lower_bound, rec.upper_bound, rec.uncapped_target) == (1200, 1200, 1350, 1200)


def test_integer_cpu_ceil_then_capping():
    assert integer_cpu(1168) == 2000 and integer_cpu(2000) == 2000 and integer_cpu(1) == 1000
    rec = post_process(1168, 1167, 1334, RecommenderConfig(integer_cpu=True))
    assert (rec.target, rec.lower_bound, rec.upper_bound) == (2000, 2000, 2000)
    # capping runs after integer rounding: a fractional maxAllowed undoes it
    rec = post_process(1168, 1167, 1334, RecommenderConfig(integer_cpu=True, max_allowed_millicores=1500))
    assert (rec.target, rec.lower_bound, rec.upper_bound, rec.uncapped_target) == (1500, 1500, 1500, 2000)
    rec = post_process(1168, 1167, 1334, RecommenderConfig(min_allowed_millicores=2000))
    assert (rec.target, rec.lower_bound, rec.upper_bound, rec.uncapped_target) == (2000, 2000, 2000, 1168)


def test_round_before_integer():
    rec = post_process(900, 700, 1100, RecommenderConfig(round_cpu_millicores=300, integer_cpu=True))
    # 900 -> 900, 700 -> 900, 1100 -> 1200; then ceil to cores
    assert (rec.target, rec.lower_bound, rec.upper_bound) == (1000, 1000, 2000)


def test_cores_to_millicores():
    assert cores_to_millicores(1.94) == 1940 and cores_to_millicores(2.0) == 2000
    assert cores_to_millicores(0.0005) == 1     # sub-milli rounds up like Quantity.MilliValue


# ---- samples: strictly-later rule, replay ------------------------------------------------------
def test_strictly_later_rule():
    s = ContainerSampler()
    assert s.accept(100.0)
    assert not s.accept(100.0)      # metrics-server has not refreshed: duplicate
    assert not s.accept(90.0)
    assert s.accept(100.001)


def test_replay_60s_window_no_duplicates():
    # metrics-server at 60 s resolution and the loop at 60 s: one sample per point
    pts = [(MIDNIGHT + 60.0 * i, 0.5) for i in range(10)]
    recs = replay_points(pts, loop_interval_s=60.0)
    assert [r["samples"] for r in recs] == list(range(1, 11))
    # a loop twice as fast sees every point twice but keeps it once
    recs = replay_points(pts, loop_interval_s=30.0)
    assert recs[-1]["samples"] == 10


def test_replay_15s_points_one_sample_per_minute():
    pts = [(MIDNIGHT + 15.0 * i, 1.0) for i in range(4 * 60)]  # one hour of 15 s points
    recs = replay_points(pts)
    # loops at t0, t0+60 s, ..., t0+3600 s (the first at or after the last point, t0+3585 s):
    # 61 loops, each keeping the newest 15 s point: one sample per loop, not four
    assert len(recs) == 61 and recs[-1]["samples"] == 61
    assert recs[-1]["target"] == 1168


def test_metrics_server_windows():
    # 1 s readings alternating 0 and 2 cores: 15 s windows average them and stamp the window end
    fine = [(MIDNIGHT + i, 2.0 * (i % 2)) for i in range(1, 61)]
    pts = metrics_server_points(fine, 15.0, offset_s=MIDNIGHT)
    assert [t - MIDNIGHT for t, _ in pts] == [15.0, 30.0, 45.0, 60.0]
    assert [round(v, 6) for _, v in pts] == [round(16 / 15, 6), round(14 / 15, 6), round(16 / 15, 6), round(14 / 15, 6)]
    # a burst inside one window of a minute is diluted over the window
    fine = [(MIDNIGHT + i, 4.0 if i <= 6 else 0.0) for i in range(1, 61)]
    assert metrics_server_points(fine, 60.0, offset_s=MIDNIGHT) == [(MIDNIGHT + 60.0, 0.4)]


def test_replay_multiple_containers_share_one_histogram():
    pts = [(MIDNIGHT + 60.0 * i, 1.0) for i in range(30)]
    recs = replay({"a": pts, "b": pts})
    assert recs[-1]["samples"] == 60


def _cli(capsys, *argv):
    from cfsim.cli import main

    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_vpa_replay_cli(tmp_path, capsys):
    csv = tmp_path / "usage.csv"
    csv.write_text("timestamp,cpu_cores\n" + "".join(f"{MIDNIGHT + 60 * i},1.0\n" for i in range(7 * 1440)))
    rc, out, _ = _cli(capsys, "vpa", "replay", str(csv), "--json")
    data = json.loads(out)
    assert rc == 0
    assert data["final"] == {"target": 1168, "lower_bound": 1167, "upper_bound": 1334}
    assert len(data["recommendations"]) == 7 * 1440
    rc, out, _ = _cli(capsys, "vpa", "replay", str(csv), "--json", "--set", "vpa.integer_cpu=true")
    assert json.loads(out)["final"]["target"] == 2000
    rc, out, _ = _cli(capsys, "vpa", "replay", str(csv))
    assert "final: target 1168m, lower 1167m, upper 1334m" in out


def test_vpa_replay_cli_errors_name_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("timestamp,cpu_cores\n1767225600,0.5\n1767225660,abc\n")
    rc, _, err = _cli(capsys, "vpa", "replay", str(bad))
    assert rc == 2
    assert f"{bad}:3:" in err and "abc" in err
    rc, _, err = _cli(capsys, "vpa", "replay", str(tmp_path / "missing.csv"))
    assert rc == 2 and "missing.csv" in err
    broken = tmp_path / "broken.json"
    broken.write_text('{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, '
                      '"values": [[1767225600, "x"]]}]}}')
    rc, _, err = _cli(capsys, "vpa", "replay", str(broken))
    assert rc == 2 and str(broken) in err and "values[0]" in err


def test_vpa_replay_prometheus_counter(tmp_path, capsys):
    # the raw counter at 15 s steps, 1.5 cores: rate() done by the reader
    values = [[MIDNIGHT + 15 * i, str(1.5 * 15 * i)] for i in range(4 * 60)]
    body = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "container_cpu_usage_seconds_total", "container": "app", "pod": "p-1"},
         "values": values}]}}
    f = tmp_path / "prom.json"
    f.write_text(json.dumps(body))
    rc, out, _ = _cli(capsys, "vpa", "replay", str(f), "--json")
    data = json.loads(out)
    # 1.5 -> bucket floor(log_1.05(8.5)) = 43, end 0.2 * (1.05**44 - 1) = 1.5114 -> 1511m + 226 = 1737m
    assert data["final"]["target"] == 1511 + 226


# ---- properties --------------------------------------------------------------------------------
usage_lists = st.lists(st.floats(0.0, 64.0, allow_nan=False), min_size=1, max_size=60)


@given(usage_lists, st.integers(1, 1000), st.booleans(), st.sampled_from([1, 10, 50, 1000]))
def test_bounds_ordered_and_target_at_least_25m(usages, gap_s, integer, rounding):
    a = AggregateState.new()
    for i, u in enumerate(usages):
        a.add_cpu_sample(u, MIDNIGHT + i * gap_s)
    rec = recommend(a, RecommenderConfig(integer_cpu=integer, round_cpu_millicores=rounding))
    assert rec.target >= 25
    assert rec.lower_bound <= rec.target <= rec.upper_bound


@given(usage_lists)
def test_target_covers_p90_usage(usages):
    a = AggregateState.new()
    for i, u in enumerate(usages):
        a.add_cpu_sample(u, MIDNIGHT + 60 * i)
    tgt = recommend(a, RecommenderConfig()).target
    srt = sorted(usages)
    # the bucket holding the weighted P90 value ends above it; margin only adds
    p90 = srt[max(0, math.ceil(0.9 * len(srt)) - 1)]
    assert tgt >= min(int(p90 * 1000), 10 ** 14) or tgt >= 25


@pytest.mark.parametrize("window", ["-15", "0", "7", "nan", "inf"])
def test_vpa_replay_cli_metrics_window_refused(tmp_path, capsys, window):
    # metrics-server refuses a --metric-resolution below 10 s; 0 used to be taken as "not given"
    csv = tmp_path / "usage.csv"
    csv.write_text("timestamp,cpu_cores\n" + "".join(f"{MIDNIGHT + 5 * i},1.0\n" for i in range(60)))
    rc, out, err = _cli(capsys, "vpa", "replay", str(csv), f"--metrics-window={window}")
    assert rc == 2 and out == ""
    assert err.startswith(f"error: --metrics-window {window}: ") and err.count("\n") == 1
    rc, out, _ = _cli(capsys, "vpa", "replay", str(csv), "--metrics-window", "15", "--json")
    assert rc == 0 and json.loads(out)["recommendations"][-1]["samples"] == 6  # one window a loop, T0 to T0 + 300 s


def test_vpa_replay_cli_refuses_other_metrics_and_containers(tmp_path, capsys):
    def export(name, containers):
        result = [{"metric": {"__name__": name, "namespace": "a", "pod": "p-1", "container": c},
                   "values": [[MIDNIGHT + 15 * i, str(15.0 * i)] for i in range(8)]} for c in containers]
        f = tmp_path / f"{name}-{len(containers)}.json"
        f.write_text(json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}))
        return f

    f = export("container_cpu_cfs_periods_total", ["app"])
    rc, _, err = _cli(capsys, "vpa", "replay", str(f))
    assert rc == 2 and err.count("\n") == 1
    assert err.startswith(f"error: {f}: ") and "'container_cpu_cfs_periods_total'" in err
    assert "container_cpu_usage_seconds_total" in err
    f = export("container_cpu_usage_seconds_total", ["app", "sidecar"])
    rc, _, err = _cli(capsys, "vpa", "replay", str(f))
    assert rc == 2 and err.startswith(f"error: {f}: ") and "a/app, a/sidecar" in err
    csv = tmp_path / "two.csv"
    csv.write_text(f"timestamp,cpu_cores,container\n{MIDNIGHT},0.5,a\n{MIDNIGHT + 60},0.6,b\n")
    rc, _, err = _cli(capsys, "vpa", "replay", str(csv))
    assert rc == 2 and err.startswith(f"error: {csv}:3: 2 containers ('a', 'b';") and err.count("\n") == 1
