"""The VPA recommender's memory path (``model/container.go``, ``logic/recommender.go``)."""
from __future__ import annotations

import pytest

from cfsim.autoscalers.vpa_histogram import MEMORY_HISTOGRAM_OPTIONS
from cfsim.autoscalers.vpa_memory import (DAY_S, MemoryAggregate, MemoryContainer, MemoryRecommenderConfig,
                                          pod_min_memory_bytes, recommend_memory)

MiB = 1 << 20


def fresh():
    cfg = MemoryRecommenderConfig()
    return cfg, MemoryAggregate.new(cfg), MemoryContainer(cfg)


def test_memory_histogram_bucket_scheme():
    o = MEMORY_HISTOGRAM_OPTIONS
    assert o.first_bucket_size == 1e7 and o.max_value == 1e12 and o.ratio == 1.05
    assert o.find_bucket(5e6) == 0 and o.find_bucket(1e13) == o.num_buckets - 1


def test_one_peak_per_interval_and_a_higher_sample_replaces_it():
    cfg, agg, c = fresh()
    assert c.add_sample(agg, 100.0, 300 * MiB)
    assert c.window_end_s == 100.0 + DAY_S            # the first sample opens an interval ending 24 h later
    total = agg.peaks.hist.total_weight
    assert c.add_sample(agg, 200.0, 200 * MiB)         # lower: no change
    assert agg.peaks.hist.total_weight == pytest.approx(total)
    assert c.add_sample(agg, 300.0, 500 * MiB)         # higher: replaces the peak (one sample in all)
    assert agg.peaks.hist.total_weight == pytest.approx(total)
    assert agg.peaks.percentile(0.5) >= 500 * MiB > agg.peaks.percentile(0.5) / 1.06
    assert not c.add_sample(agg, 250.0, 900 * MiB)     # older than the last sample: dropped
    # the next interval: a second peak
    assert c.add_sample(agg, 100.0 + DAY_S + 5, 100 * MiB)
    assert c.window_end_s == 100.0 + 2 * DAY_S and c.memory_peak == 100 * MiB
    # a sample 3.5 days later jumps over the empty intervals
    assert c.add_sample(agg, 100.0 + 5.5 * DAY_S, 100 * MiB)
    assert c.window_end_s == 100.0 + 6 * DAY_S


def test_oom_bump_is_max_of_100_mib_and_20_percent_of_request_or_peak():
    cfg, agg, c = fresh()
    c.add_sample(agg, 0.0, 200 * MiB)
    assert c.record_oom(agg, 60.0, request_bytes=256 * MiB)
    assert c.oom_peak == 356 * MiB                       # 256 + 100 MiB > 256 x 1.2
    cfg2, agg2, c2 = fresh()
    c2.add_sample(agg2, 0.0, 2000 * MiB)
    c2.record_oom(agg2, 60.0, request_bytes=1024 * MiB)
    assert c2.oom_peak == int(2000 * MiB * 1.2)          # the interval's peak x 1.2
    # an OOM older than the current interval is discarded
    assert not c2.record_oom(agg2, 60.0 - 2 * DAY_S, request_bytes=MiB)


def test_recommendation_p90_margin_minimum_and_bounds():
    cfg, agg, c = fresh()
    assert recommend_memory(agg, cfg, None, None, 0).target == pod_min_memory_bytes(250.0) == 250 * MiB
    for day, peak in enumerate((400, 420, 380, 1200, 390, 400, 405, 410)):
        c.add_sample(agg, day * DAY_S + 10, peak * MiB)
    r = recommend_memory(agg, cfg, 0.0, 8 * DAY_S, 8 * 1440)
    # P90 of the eight daily peaks, each day weighing twice the one before (24 h half-life): the
    # 1.2 GiB spike four days ago carries 8/255 of the weight and does not set it; +15 %
    assert 420 * MiB * 1.15 <= r.target < 440 * MiB * 1.15
    c.add_sample(agg, 8 * DAY_S + 10, 1200 * MiB)        # the same spike today does
    assert recommend_memory(agg, cfg, 0.0, 9 * DAY_S, 9 * 1440).target > 1200 * MiB * 1.15
    assert r.lower_bound <= r.target <= r.upper_bound
    # a split pod minimum and the policy cap
    assert pod_min_memory_bytes(250.0, 2) == 125 * MiB
    capped = recommend_memory(agg, MemoryRecommenderConfig(max_allowed_bytes=512 * MiB), 0.0, 8 * DAY_S, 8 * 1440)
    r = recommend_memory(agg, cfg, 0.0, 8 * DAY_S, 8 * 1440)
    assert capped.target == 512 * MiB and capped.uncapped_target == r.target
