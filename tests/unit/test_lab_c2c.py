"""The cache-line round-trip benchmark's reader and runner (cfsim.lab.c2c, lab/cmd/c2cbench)."""
from __future__ import annotations

import pytest

from cfsim.lab.c2c import C2cbenchError, c2c_summary, measure_c2c, read_c2cbench


def test_c2cbench_output_is_read_and_bad_lines_are_named():
    text = "\n".join('{"round": %d, "cpu_a": 0, "cpu_b": 1, "trips": 1000, "round_trip_ns": %s}' % (i, v)
                     for i, v in enumerate((400.0, 90.0, 120.0)))
    rows, meta = read_c2cbench(text, "c2c.jsonl")
    assert meta == {"source": "c2c.jsonl", "rounds": 3, "pairs": [(0, 1)]}
    assert c2c_summary(rows)["round_trip_ns_median"] == 120.0
    with pytest.raises(C2cbenchError, match="c2c.jsonl line 2: not JSON"):
        read_c2cbench(text.splitlines()[0] + "\n{oops", "c2c.jsonl")
    with pytest.raises(C2cbenchError, match="line 1: round_trip_ns must be > 0"):
        read_c2cbench('{"round": 0, "cpu_a": 0, "cpu_b": 1, "trips": 1, "round_trip_ns": 0}', "c2c.jsonl")


def test_a_c2cbench_that_cannot_run_is_recorded_not_raised(tmp_path):
    got = measure_c2c(tmp_path / "no-such-c2cbench")
    assert set(got) == {"error"} and "no-such-c2cbench" in got["error"]


def test_a_run_oom_killed_at_start_up_keeps_the_round_trip_measured_before_it(tmp_path):
    """Every run's manifest keeps host_c2c, the start-up OOM kill's too (it was measured before
    the workload started)."""
    from cfsim.io.manifest import read_manifest
    from cfsim.lab import cgroup, runner
    from cfsim.scenario import load_scenario

    sc = load_scenario("cpu-bound-threads", ["workload.kind=stream"])
    mem = cgroup.MemoryStat(usage_bytes=0, max_usage_bytes=64 << 20, limit_bytes=64 << 20, working_set_bytes=0,
                            rss_bytes=None, cache_bytes=None, failcnt=3, oom_kills=1, oom_events=1)
    c2c = {"round_trip_ns_median": 120.0, "rounds": 5}
    summ = runner._write_startup_oom(sc, tmp_path, "p000", ["workload"], None, mem,
                                     runner.WorkloadDied("killed", -9), c2c)
    assert (tmp_path / "manifest.json.gz").is_file() and not (tmp_path / "manifest.json").exists()
    manifest = read_manifest(tmp_path)
    assert manifest["host_c2c"] == c2c and manifest["status"] == "oom"
    assert summ["oom_kills"] == 1
