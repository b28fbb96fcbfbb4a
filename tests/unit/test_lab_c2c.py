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
