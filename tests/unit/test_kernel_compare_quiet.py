"""Which real run the kernel comparison keeps: a clean one, where neither other processes at
normal priority nor the hypervisor (steal) took the CPUs (``cfsim.validation.kernel_compare``)."""
from __future__ import annotations

from cfsim.validation import kernel_compare as kc


def _host(monkeypatch, tmp_path, runs, probes):
    monkeypatch.setenv("CFSIM_LAB_LOCK", str(tmp_path / "lab.lock"))   # not the machine's lock
    runs, probes = iter(runs), iter(probes)
    calls = []

    def fake_run(case, seconds):
        calls.append(seconds)
        return next(runs)
    monkeypatch.setattr(kc, "run_real", fake_run)
    monkeypatch.setattr(kc, "probe_host", lambda seconds: next(probes))
    return calls


QUIET = {"others_unniced_cores": 0.0, "steal_cores": 0.0}


def test_steal_makes_a_run_unclean(monkeypatch, tmp_path):
    stolen = {"others_unniced_cores": 0.0, "steal_cores": 0.3, "n": 1}   # the CI's failed run's kind
    clean = {"others_unniced_cores": 0.15, "steal_cores": 0.04, "n": 2}
    calls = _host(monkeypatch, tmp_path, [stolen, clean], [QUIET, QUIET, QUIET])
    best, seen = kc.run_real_quiet(kc.CASES["cpu-bound"], 8.0, attempts=3)
    assert best["n"] == 2 and calls == [8.0, 8.0] and len(seen) == 2
    assert kc.is_quiet(clean) and not kc.is_quiet(stolen)


def test_a_busy_probe_saves_the_run(monkeypatch, tmp_path):
    busy = {"others_unniced_cores": 0.0, "steal_cores": 0.6}
    calls = _host(monkeypatch, tmp_path, [], [busy, busy, busy])
    best, seen = kc.run_real_quiet(kc.CASES["slice-sleeps"], 20.0, attempts=3)
    assert best is None and calls == [] and all(s.startswith("probe: ") and "0.60 stolen" in s for s in seen)


def test_never_quiet_keeps_the_least_disturbed(monkeypatch, tmp_path):
    runs = [{"others_unniced_cores": 0.5, "steal_cores": 0.0, "n": 1},
            {"others_unniced_cores": 0.0, "steal_cores": 0.3, "n": 2},
            {"others_unniced_cores": 0.2, "steal_cores": 0.2, "n": 3}]
    _host(monkeypatch, tmp_path, runs, [QUIET] * 3)
    best, seen = kc.run_real_quiet(kc.CASES["slice-sleeps"], 20.0, attempts=3)
    assert best["n"] == 2 and not kc.is_quiet(best) and len(seen) == 3


def test_host_counters_read_steal():
    busy, user, steal = kc.host_busy_s()
    assert busy >= user >= 0 and busy >= steal >= 0
    probe = kc.probe_host(0.1)   # a busy loop on every CPU for 0.05 s
    assert probe["others_unniced_cores"] >= 0 and probe["steal_cores"] >= 0
