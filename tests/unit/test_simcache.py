"""Reuse of identical simulations (cfsim.sweep.simcache): the key, and identical answers."""
import pickle

from cfsim import load_scenario, simulate
from cfsim.sweep.simcache import SimCache, code_fingerprint, scenario_key

SCENARIO = "data/lab/scenarios/cpu-stream.toml"
SHORT = ["run.duration_s=3", "run.warmup_s=1"]


def test_key_is_the_normalised_scenario():
    a = load_scenario(SCENARIO, SHORT + ["cgroup.cpu_limit=1.5", "go.gomaxprocs=2"])
    b = load_scenario(SCENARIO, ["go.gomaxprocs=2"] + SHORT + ["cgroup.cpu_limit=1.50"])   # order, spelling
    assert scenario_key(a) == scenario_key(b)
    assert scenario_key(a) == scenario_key(a.with_overrides([("host.hz", a["host.hz"])]))  # an explicit default
    for change in (["run.seed=2"], ["run.duration_s=4"], ["cgroup.cpu_limit=1.55"], ["go.gogc=50"]):
        assert scenario_key(a) != scenario_key(a.with_overrides(change)), change


def test_rate_file_content_is_part_of_the_key(tmp_path):
    csv = tmp_path / "rate.csv"
    csv.write_text("t_s,rate_per_s\n0,1000\n")
    sc = load_scenario(SCENARIO, SHORT + [f"workload.rate_per_s={csv}"])
    k1 = scenario_key(sc)
    csv.write_text("t_s,rate_per_s\n0,1200\n")
    assert scenario_key(sc) != k1


def test_reused_summary_is_identical_in_memory_and_on_disk(tmp_path):
    sc = load_scenario(SCENARIO, SHORT)
    fresh = dict(simulate(sc).summary)
    calls = []

    def run(s):
        calls.append(1)
        return simulate(s).summary

    disk = SimCache(tmp_path)
    assert disk.summary(sc, run) == fresh and len(calls) == 1
    assert disk.summary(sc, run) == fresh and len(calls) == 1          # memory
    other = SimCache(tmp_path)                                         # another worker, same folder
    again = other.summary(sc, run)
    assert len(calls) == 1 and other.stats()["reused_from_disk"] == 1
    assert pickle.dumps(again) == pickle.dumps(fresh)                  # bit for bit, key order too
    assert (tmp_path / code_fingerprint()).is_dir()                    # a changed model reads nothing stale
    off = SimCache(tmp_path, enabled=False)
    off.summary(sc, run)
    assert len(calls) == 2


def test_an_in_process_audit_gives_the_process_its_cache_back(tmp_path):
    """`audit(workers=0, cache_dir=...)` runs its containers in this process and points them at the
    audit's folder (the CLI's is temporary and deleted at the end): afterwards the process's own
    cache is the one it had, so later simulations do not write into the deleted folder."""
    import numpy as np

    from cfsim.advice.audit import audit, containers_from_frame
    from cfsim.io.tidy import make_frame
    from cfsim.sweep import simcache

    n = 40
    lab = '{namespace="a",pod="p",container="app"}'
    frame = make_frame(np.tile(1_767_225_600_000 + 15_000 * np.arange(n), 2),
                       ["container_cpu_usage_seconds_total"] * n + ["container_cpu_cfs_periods_total"] * n,
                       [lab] * (2 * n), np.concatenate([np.arange(n) * 7.5, np.arange(n) * 150.0]))
    before = simcache.default_cache()
    result = audit(containers=containers_from_frame(frame), simulate=False, workers=0, cache_dir=tmp_path / "audit")
    assert len(result.containers) == 1                                 # the container went through a task
    with simcache.kept_default_cache():
        simcache.set_default_cache(tmp_path / "elsewhere")
        assert simcache.default_cache() is not before
    assert simcache.default_cache() is before
