"""Whether a service's slow requests are its GC's (cfsim.workloads.latency_gc): the client's p99 in
the 1 s intervals a GC cycle ended in against the others, from the model's requests and from the
lab's scraped histogram, which must agree on the same requests."""
import math
from pathlib import Path

import numpy as np
import pytest

from cfsim.simulation import simulate
from cfsim.validation.metrics import METRICS
from cfsim.validation.twin import observed_summary
from cfsim.workloads.latency_gc import MIN_REQUESTS, latency_gc_keys, latency_gc_keys_from_histograms

LAB = Path(__file__).resolve().parents[2] / "data" / "lab"
BOUNDS = [0.0005 * 2 ** (i / 3) for i in range(30)]


def _requests(seed=0, slow_in_gc=0.05, slow_elsewhere=0.0, seconds=12, rate=800):
    """Requests finishing evenly at ``rate`` a second; GC cycles end at x.3 s of every odd second;
    a share of the requests in those seconds (and elsewhere) take 8 ms, the rest ~1 ms."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0.0, seconds, seconds * rate))
    gc_second = (np.ceil(t) - 1).astype(int) % 2 == 1
    slow = rng.random(t.size) < np.where(gc_second, slow_in_gc, slow_elsewhere)
    lat = np.where(slow, 0.008, rng.uniform(0.0008, 0.0012, t.size))
    ends = [k + 0.3 for k in range(1, seconds, 2)]
    return t, lat, ends


def test_a_tail_made_in_the_gc_seconds_shows_and_a_spread_one_does_not():
    t, lat, ends = _requests()
    k = latency_gc_keys(t, lat, ends, 0.0, 12.0)
    assert k["latency_p99_gc_ratio"] > 5
    assert k["latency_gc_interval_share"] == pytest.approx(0.5, abs=0.03)
    t, lat, ends = _requests(slow_in_gc=0.03, slow_elsewhere=0.03)
    assert latency_gc_keys(t, lat, ends, 0.0, 12.0)["latency_p99_gc_ratio"] == pytest.approx(1.0, abs=0.02)


def test_only_whole_intervals_inside_the_window_count():
    t, lat, ends = _requests()
    # from 1 s on: the intervals (1, 2], (2, 3] ...; a cycle ending at 11.3 s falls outside (1, 11]
    k = latency_gc_keys(t, lat, ends, 1.0, 11.5)
    n_in = ((t > 1.0) & (t <= 11.0)).sum()
    in_gc = ((t > 1.0) & (t <= 11.0) & ((np.ceil(t) - 1).astype(int) % 2 == 1)).sum()
    assert k["latency_gc_interval_share"] == pytest.approx(in_gc / n_in)


def test_the_lab_histogram_and_the_model_requests_give_the_same_keys():
    t, lat, ends = _requests(slow_in_gc=0.04, slow_elsewhere=0.002)
    le = np.array(BOUNDS + [math.inf])
    scrapes = np.arange(0, 13)
    counts = np.array([[np.sum((t <= s) & (lat <= b)) for b in le] for s in scrapes], dtype=float)
    cycles = np.array([sum(1 for e in ends if e <= s) for s in scrapes], dtype=float)
    lab = latency_gc_keys_from_histograms(scrapes, le, counts, cycles, 0.0, 12.0)
    model = latency_gc_keys(t, lat, ends, 0.0, 12.0, buckets_s=BOUNDS)
    assert lab["latency_p99_gc_ratio"] == pytest.approx(model["latency_p99_gc_ratio"], rel=1e-9)
    assert lab["latency_gc_interval_share"] == pytest.approx(model["latency_gc_interval_share"], rel=1e-9)
    # read through the buckets (2^(1/3) wide) the ratio stays near the exact one
    exact = latency_gc_keys(t, lat, ends, 0.0, 12.0)["latency_p99_gc_ratio"]
    assert exact > 4 and model["latency_p99_gc_ratio"] == pytest.approx(exact, rel=0.26)


def test_too_few_requests_on_either_side_give_nothing_and_bad_input_is_named():
    t, lat, ends = _requests(seconds=2, rate=MIN_REQUESTS // 2)
    assert latency_gc_keys(t, lat, ends, 0.0, 2.0) == {"latency_p99_gc_ratio": None,
                                                       "latency_gc_interval_share": None}
    assert latency_gc_keys(t, lat, [], 0.0, 2.0)["latency_p99_gc_ratio"] is None
    with pytest.raises(ValueError, match="differ in length"):
        latency_gc_keys(t, lat[:-1], ends, 0.0, 2.0)
    with pytest.raises(ValueError, match="must end with \\+Inf"):
        latency_gc_keys_from_histograms([0, 1], [0.001, 0.002], np.zeros((2, 2)), [0, 1], 0, 1)
    with pytest.raises(ValueError, match="do not match"):
        latency_gc_keys_from_histograms([0, 1], [0.001, math.inf], np.zeros((3, 2)), [0, 1], 0, 1)


def test_a_lab_service_run_has_the_keys_and_a_stream_run_not():
    service = next((LAB / "open-pacer").glob("p004_*"))
    k = observed_summary(service)
    assert 0.2 < k["latency_p99_gc_ratio"] < 5 and 0.2 < k["latency_gc_interval_share"] < 0.8
    stream = next((LAB / "cpu-stream").glob("p0*"))
    assert "latency_p99_gc_ratio" not in observed_summary(stream)
    assert any(m.name == "latency_p99_gc_ratio" for m in METRICS)


def test_the_model_service_reports_them():
    r = simulate("menu-gke", ["workload.kind=open", "workload.rate_per_s=400", "workload.cpu_ms_per_request=0.4",
                              "go.live_heap_mb=16", "workload.alloc_kb_per_request=16", "cgroup.cpu_limit=1.0",
                              "run.duration_s=12", "run.warmup_s=1"])
    s = r.summary
    ends = r.gc_cycles["run_t_s"].to_numpy()
    ends = ends[(ends > 1.0) & (ends <= 12.0)]
    assert s["gc_cycles"] == len(ends)
    # the pacer's spacing (mgcpacer.go): 400 requests/s x (16 KiB of the handler + 4 KiB of the
    # server path, workload.server_alloc_kb_per_request) = 7.81 MiB/s; the marked heap ~16.6 MiB
    # (16 live + 0.5 of the program's + connections), so the goal is 16.6 + 17.1 MiB and the
    # trigger 61/64 of that runway: a cycle every 16.3 / 7.81 = 2.09 s (starting at the goal:
    # 17.1 / 7.81 = 2.19 s; a textbook GC on the handler's allocation alone: 17.1 / 6.25 = 2.7 s)
    assert len(ends) >= 4
    assert (ends[-1] - ends[0]) / (len(ends) - 1) == pytest.approx(2.09, rel=0.03)
    # the share is that of the requests in the 1 s intervals (k, k + 1] of (1, 12] a cycle ended
    # in; Poisson arrivals at a steady rate put about (such intervals) / 11 of them there
    gc_seconds = len(set(np.ceil(ends).astype(int)))
    assert s["latency_gc_interval_share"] == pytest.approx(gc_seconds / 11, abs=0.04)
    # at 0.16 cores of a 1-core limit (no throttling) a few-ms mark on idle Ps makes no tail
    assert s["latency_p99_gc_ratio"] == pytest.approx(1.0, abs=0.2)
