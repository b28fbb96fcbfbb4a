"""Which real run the kernel comparison keeps: a clean one, where neither other processes at
normal priority nor the hypervisor (steal) took the CPUs (``cfsim.validation.kernel_compare``)."""
from __future__ import annotations

from cfsim.validation import kernel_compare as kc


def _runs(monkeypatch, runs):
    it = iter(runs)
    calls = []

    def fake(case, seconds):
        calls.append(seconds)
        return next(it)
    monkeypatch.setattr(kc, "run_real", fake)
    return calls


def test_steal_makes_a_run_unclean(monkeypatch):
    stolen = {"others_unniced_cores": 0.0, "steal_cores": 0.6, "n": 1}
    clean = {"others_unniced_cores": 0.05, "steal_cores": 0.1, "n": 2}
    calls = _runs(monkeypatch, [stolen, clean, stolen])
    best, tried = kc.run_real_quiet(kc.CASES["cpu-bound"], 8.0, attempts=3)
    assert best["n"] == 2 and tried == [0.6, 0.15] and calls == [8.0, 8.0]


def test_never_quiet_keeps_the_least_disturbed(monkeypatch):
    runs = [{"others_unniced_cores": 0.5, "steal_cores": 0.0, "n": 1},
            {"others_unniced_cores": 0.0, "steal_cores": 0.3, "n": 2},
            {"others_unniced_cores": 0.2, "steal_cores": 0.2, "n": 3}]
    _runs(monkeypatch, runs)
    best, tried = kc.run_real_quiet(kc.CASES["slice-sleeps"], 20.0, attempts=3)
    assert best["n"] == 2 and tried == [0.5, 0.3, 0.4]
    assert kc.disturbance_cores(best) > kc.QUIET_OTHERS_CORES


def test_host_counters_read_steal():
    busy, user, steal = kc.host_busy_s()
    assert busy >= user >= 0 and busy >= steal >= 0
