"""The cache-missing load benchmark's reader and runner (cfsim.lab.chase, lab/cmd/chasebench)."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from cfsim.lab.chase import ChasebenchError, measure_memory_latency, memory_latency_summary, read_chasebench


def test_chasebench_output_is_read_and_bad_lines_are_named():
    text = "\n".join('{"round": %d, "mb": 256, "loads": 1000, "ns_per_load": %s}' % (i, v)
                     for i, v in enumerate((417.0, 176.0, 181.0)))
    rows, meta = read_chasebench(text, "chase.jsonl")
    assert meta == {"source": "chase.jsonl", "rounds": 3, "mb": 256}
    # the median: a round that met the hypervisor's steal does not move it
    assert memory_latency_summary(rows)["ns_per_load_median"] == 181.0
    with pytest.raises(ChasebenchError, match="chase.jsonl line 2: not JSON"):
        read_chasebench(text.splitlines()[0] + "\n{oops", "chase.jsonl")
    with pytest.raises(ChasebenchError, match="line 1: ns_per_load must be > 0"):
        read_chasebench('{"round": 0, "mb": 256, "loads": 1, "ns_per_load": 0}', "chase.jsonl")
    with pytest.raises(ChasebenchError, match="no measurements"):
        read_chasebench("", "chase.jsonl")


def test_a_chasebench_that_cannot_run_is_recorded_not_raised(tmp_path):
    got = measure_memory_latency(tmp_path / "no-such-chasebench")
    assert set(got) == {"error"} and "no-such-chasebench" in got["error"]


@pytest.mark.skipif(shutil.which("go") is None, reason="needs Go to build lab/cmd/chasebench")
def test_the_real_chasebench_times_loads_beyond_the_cache(tmp_path):
    """Built from lab/, a small run: every round times its loads, and a buffer eight times a
    last-level cache costs more a load than one that a private cache holds."""
    from cfsim.lab.build import lab_dir

    exe = tmp_path / "chasebench"
    subprocess.run(["go", "build", "-o", str(exe), "./cmd/chasebench"], cwd=lab_dir(), check=True,
                   capture_output=True, timeout=600)
    big = measure_memory_latency(exe, mb=256, loads=200_000, rounds=3)
    small = measure_memory_latency(exe, mb=1, loads=200_000, rounds=3)
    assert big["n"] == 3 and big["mb"] == 256 and small["mb"] == 1
    assert big["ns_per_load_median"] > 2 * small["ns_per_load_median"] > 0


def test_a_grid_table_row_carries_the_probes_taken_before_the_run(tmp_path):
    """``python -m cfsim.lab.report GRID --rows run,memory_latency_ns,heap_walk_ns_per_hop`` reads
    them from each run's manifest; a run that predates them has them blank."""
    import gzip
    import json

    from cfsim.lab.table import grid_table

    for name, extra in (("p000", {"host_c2c": {"round_trip_ns_median": 52.1},
                                  "host_memory_latency": {"ns_per_load_median": 203.9},
                                  "heap_walk_ns_per_hop": 459.3}),
                        ("p001", {})):
        run = tmp_path / name
        run.mkdir()
        (run / "summary.json").write_text(json.dumps({"throughput_per_s": 3785.8}))
        with gzip.open(run / "manifest.json.gz", "wt") as f:
            json.dump({"run_id": name, "scenario": {"go": {"gomaxprocs": 1}}, **extra}, f)
    t = grid_table(tmp_path).set_index("run")
    assert t.loc["p000", ["c2c_round_trip_ns", "memory_latency_ns", "heap_walk_ns_per_hop"]].tolist() == \
        [52.1, 203.9, 459.3]
    assert t.loc["p001", ["memory_latency_ns", "heap_walk_ns_per_hop"]].isna().all()
    assert t.loc["p000", "throughput_per_s"] == 3785.8
