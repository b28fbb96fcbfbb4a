"""The host's cost of the Go runtime's give-back-and-fault-again cycle near a memory limit
(lab/cmd/scavbench, cfsim.lab.scav, `cfsim lab scav`), and where the model charges it."""
import json
import tomllib

import pytest

from cfsim.cli import main
from cfsim.lab.scav import ScavbenchError, read_scavbench, round_prices, scav_params
from cfsim.scenario import load_scenario
from cfsim.simulation import simulate


def _sb(round_, mode, faults, stime, scav):
    return json.dumps({"round": round_, "mode": mode, "records": 1000, "faults_per_record": faults,
                       "stime_us_per_record": stime, "scavenge_us_per_record": scav, "user_us_per_record": 14.0,
                       "gc_us_per_record": 12.0, "gc_cycles_per_1000_records": 2.0})


def _fb(round_, busy, per_page):
    return json.dumps({"round": round_, "busy": busy, "fault_us_per_page": 0.4, "refault_us_per_page": 0.37,
                       "release_us_per_page": per_page, "release_us": per_page * 16,
                       "flushes_per_release": 1.0 if busy else 0.0, "other_lost_us_per_release": 7.0 if busy else 0})


def _output(limit_stime=(28.0, 29.0, 30.0), limit_faults=16.5):
    lines = []
    for i in range(3):
        lines += [_fb(i, False, 0.2), _fb(i, True, 0.75)]
    for i, st in enumerate(limit_stime):
        lines += [_sb(i, "reference", 1.5, 3.0, 0.5), _sb(i, "limit", limit_faults, st, 4.7)]
    return "\n".join(lines) + "\n"


def test_a_page_costs_the_extra_kernel_and_scavenger_time_per_extra_fault_less_the_bare_madvise():
    rows, meta = read_scavbench(_output())
    assert meta["rounds"] == 3 and meta["bare_release_us"] == 0.2 and len(rows) == 6
    prices = round_prices(rows, meta["bare_release_us"])
    # round 1: (29 - 3) / 15 - 0.2 a fault; (4.7 - 0.5) / 15 - 0.2 a page given back
    assert prices[1]["fault_us"] == pytest.approx(26 / 15 - 0.2, abs=1e-3)
    assert scav_params(rows, meta["bare_release_us"]) == {"go.page_fault_us": round(26 / 15 - 0.2, 3),
                                                          "go.scavenge_page_us": round(4.2 / 15 - 0.2, 3)}


def test_a_limit_that_gives_nothing_back_or_no_bare_price_is_an_error_not_a_price():
    rows, meta = read_scavbench(_output(limit_faults=1.6))
    with pytest.raises(ScavbenchError, match="gave nothing back"):
        scav_params(rows, meta["bare_release_us"])
    rows, meta = read_scavbench("\n".join(_sb(0, m, f, 3, 0.5) for m, f in (("reference", 1.5), ("limit", 16))))
    with pytest.raises(ScavbenchError, match="bare madvise"):
        scav_params(rows, meta["bare_release_us"])
    with pytest.raises(ScavbenchError, match="no round with both"):
        round_prices([r for r in rows if r["mode"] == "limit"], 0.2)


def test_malformed_output_names_the_source_and_line():
    with pytest.raises(ScavbenchError, match="sb.jsonl line 2: not JSON"):
        read_scavbench(_sb(0, "limit", 16, 29, 4.7) + "\n{oops\n", "sb.jsonl")
    with pytest.raises(ScavbenchError, match="line 1: mode must be one of reference, limit"):
        read_scavbench(_sb(0, "tight", 16, 29, 4.7))
    with pytest.raises(ScavbenchError, match="no scavbench measurements"):
        read_scavbench(_fb(0, False, 0.2))


def test_lab_scav_cli_writes_a_params_file_from_a_saved_output(tmp_path, capsys):
    saved = tmp_path / "sb.jsonl"
    saved.write_text(_output())
    out = tmp_path / "host.toml"
    assert main(["lab", "scav", "--from", str(saved), "--out", str(out)]) == 0
    params = tomllib.loads(out.read_text())["params"]
    assert params["go.page_fault_us"] == pytest.approx(26 / 15 - 0.2, abs=1e-3)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{}\n")
    assert main(["lab", "scav", "--from", str(bad)]) == 2
    assert "bad.jsonl line 1: missing" in capsys.readouterr().err


def _near_limit_stream(**go):
    sc = load_scenario({
        "host": {"cpus": 2}, "cgroup": {"cpu_limit": 1.0},
        "go": {"gomaxprocs": 1, "gogc": -1, "gomemlimit_mb": 17.6, "live_heap_mb": 16.0, **go},
        "workload": {"kind": "stream", "rate_per_s": 40000, "workers": 8, "cpu_ms_per_item": 0.05,
                     "alloc_kb_per_item": 64.0},
        "run": {"duration_s": 3.0, "warmup_s": 0.5, "seed": 1}})
    return simulate(sc)


def test_the_runtimes_own_work_per_page_given_back_slows_a_stream_near_its_limit():
    base = _near_limit_stream()
    dear = _near_limit_stream(scavenge_page_us=2.0)
    # each record gives back and faults in again about 15 pages: 2 us more a page is 30 us a record
    assert dear.summary["throughput_per_s"] < 0.9 * base.summary["throughput_per_s"]
