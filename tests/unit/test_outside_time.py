"""The time a calibration run's requests spend outside the server, as the twins take it
(:func:`cfsim.validation.normalise.outside_time_ms`, :mod:`cfsim.validation.outside`): the
log-normal that, added to the twin's latency, gives the run's client latency, its tail bounded by
the body so that one run's incidents do not become every twin's."""
from __future__ import annotations

import math

import numpy as np
import pytest

from cfsim.lab.buckets import LAYOUTS
from cfsim.monitoring.histogram import quantiles_through_buckets
from cfsim.validation.normalise import CLIENT_LATENCY, client_window_quantiles, outside_time_ms
from cfsim.validation.outside import fit_outside_time, quantile_function
from cfsim.workloads._go import latency_keys
from cfsim.workloads.arrivals import Z_99

BOUNDS = LAYOUTS["6-per-doubling"]


def _manifest(latencies_s: np.ndarray) -> dict:
    """A manifest whose load generator's histogram counted ``latencies_s`` over the window."""
    counts = np.searchsorted(np.sort(latencies_s), BOUNDS, side="right")
    end = {f'{CLIENT_LATENCY}_bucket{{le="{b}"}}': float(c) for b, c in zip(BOUNDS, counts)}
    end[f'{CLIENT_LATENCY}_bucket{{le="+Inf"}}'] = float(latencies_s.size)
    return {"window_samples": {"loadgen": {"start": {}, "end": end}}}


def _sample(n: int = 40_000, spread_s: float = 0.03e-3, incident_share: float = 0.0,
            seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Server time 0.45 ms plus an exponential spread; 0.15 ms outside at the median and 1.2 ms
    at the 99th percentile (log-normal); ``incident_share`` of the requests stalled 30 ms more."""
    rng = np.random.default_rng(seed)
    server = 0.45e-3 + rng.exponential(spread_s, n)
    outside = 0.15e-3 * np.exp(math.log(1.2 / 0.15) / Z_99 * rng.standard_normal(n))
    client = server + outside
    client[:int(incident_share * n)] += 30e-3
    return client, server


@pytest.mark.parametrize("spread_s", [0.03e-3, 0.3e-3])
def test_a_well_behaved_run_gives_its_own_round_trip(spread_s):
    client, server = _sample(spread_s=spread_s)
    median, p99 = outside_time_ms(_manifest(client), latency_keys(server, BOUNDS))
    assert median == pytest.approx(0.15, abs=0.02)
    assert p99 == pytest.approx(1.2, rel=0.3)


def test_a_spread_server_is_not_subtracted_quantile_by_quantile():
    # the difference of the medians overstates the median outside when the server's own latency is
    # spread (the median of a sum is not the sum of the medians); the fit adds, it does not subtract
    client, server = _sample(spread_s=0.3e-3)
    naive = (client_window_quantiles(_manifest(client), (0.5,))[0] - np.median(server)) * 1e3
    median, _ = outside_time_ms(_manifest(client), latency_keys(server, BOUNDS))
    assert naive > 0.19 and abs(median - 0.15) < 0.5 * abs(naive - 0.15)


def test_one_runs_incidents_do_not_become_every_twins_tail():
    client, server = _sample(incident_share=0.02)
    twin = latency_keys(server, BOUNDS)
    # the p99 difference alone would hand every twin the incident: ~30 ms outside the server
    assert client_window_quantiles(_manifest(client), (0.99,))[0] - twin["latency_p99_s"] > 20e-3
    median, p99 = outside_time_ms(_manifest(client), twin)
    assert median == pytest.approx(0.15, abs=0.02)
    assert p99 < 2.0          # the body's log-normal (its median and 90th percentile)


def test_no_histogram_no_body_or_no_time_outside_gives_none():
    client, server = _sample()
    twin = latency_keys(server, BOUNDS)
    assert outside_time_ms({"window_samples": {}}, twin) is None
    assert outside_time_ms(_manifest(server), latency_keys(server + 1e-3, BOUNDS)) is None  # twin slower
    assert outside_time_ms(_manifest(client), {"latency_p50_s": 1e-4, "latency_p99_s": 2e-4}) is None


def test_the_fit_is_deterministic_and_the_quantile_function_extends_to_its_ends():
    server = {0.1: 4e-4, 0.5: 5e-4, 0.9: 6e-4}
    client = {0.5: 8e-4, 0.9: 1.5e-3, 0.99: 4e-3}
    assert fit_outside_time(server, client) == fit_outside_time(server, client)
    us, xs = quantile_function(server)
    assert us[0] == 0.0 and us[-1] == 1.0 and xs[0] == pytest.approx(3.75e-4) and xs[-1] == 6e-4


def test_a_factors_only_grid_norm_still_gives_the_time_outside():
    # audit's and the calibration fit's grid norms skip the twins at the grid's factors
    # (gc_priors=False); their lab twins still need the time outside the server
    from pathlib import Path

    from cfsim.validation.normalise import grid_norm

    runs = sorted(p for p in (Path(__file__).resolve().parents[2] / "data/lab/tenant-ab").iterdir() if p.is_dir())
    norm = grid_norm(runs, gc_priors=False)
    assert norm.rtt_ms is not None and 0.0 < norm.rtt_ms < 1.0
    assert norm.rtt_p99_ms is not None and norm.rtt_p99_ms > norm.rtt_ms
    assert norm.extra_live_mb is None and norm.extra_stw_us is None   # the GC priors are not computed
