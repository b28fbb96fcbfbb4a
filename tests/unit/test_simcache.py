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
