"""The host's cost of returning memory and of the TLB flush it sends to another CPU
(lab/cmd/faultbench, cfsim.lab.tlb, `cfsim lab tlb`)."""
import json
import tomllib

import pytest

from cfsim.cli import main
from cfsim.lab.tlb import FaultbenchError, read_faultbench, tlb_params


def _line(round_, busy, release_us, flushes, lost, per_page=0.2):
    return json.dumps({"round": round_, "busy": busy, "fault_us_per_page": 1.8, "refault_us_per_page": 0.4,
                       "release_us_per_page": per_page, "release_us": release_us,
                       "flushes_per_release": flushes, "other_lost_us_per_release": lost})


def _output(busy_release=(14.0, 15.0, 16.0), flushes=0.9):
    lines = []
    for i, b in enumerate(busy_release):
        lines.append(_line(i, False, 3.0 + 0.1 * i, 0.0, 0.0))
        lines.append(_line(i, True, b, flushes, 7.2))
    return "\n".join(lines) + "\n"


def test_flush_cost_is_the_senders_wait_plus_the_receivers_loss_per_flush():
    rows, meta = read_faultbench(_output())
    assert meta["rounds"] == 3 and len(rows) == 6
    # (15 - 3.1) / 0.9 waited + 7.2 / 0.9 lost per flush
    assert tlb_params(rows) == {"go.page_release_us": 0.2, "host.tlb_shootdown_us": round(11.9 / 0.9 + 8.0, 1)}


def test_no_flush_counted_is_an_error_not_a_zero():
    rows, _ = read_faultbench(_output(busy_release=(3.0, 3.1, 3.2), flushes=0.0))
    with pytest.raises(FaultbenchError, match="no flush was counted"):
        tlb_params(rows)
    alone_only = [r for r in rows if not r["busy"]]
    with pytest.raises(FaultbenchError, match="both alone and with the other CPU busy"):
        tlb_params(alone_only)


def test_malformed_output_names_the_source_and_line():
    with pytest.raises(FaultbenchError, match="fb.jsonl line 2: not JSON"):
        read_faultbench(_line(0, False, 3, 0, 0) + "\n{oops\n", "fb.jsonl")
    with pytest.raises(FaultbenchError, match="line 1: busy must be true or false"):
        read_faultbench(_line(0, "yes", 3, 0, 0))
    with pytest.raises(FaultbenchError, match="no measurements"):
        read_faultbench("\n")


def test_lab_tlb_cli_writes_a_params_file_from_a_saved_output(tmp_path, capsys):
    saved = tmp_path / "fb.jsonl"
    saved.write_text(_output())
    out = tmp_path / "host.toml"
    assert main(["lab", "tlb", "--from", str(saved), "--out", str(out)]) == 0
    params = tomllib.loads(out.read_text())["params"]
    assert params["host.tlb_shootdown_us"] == pytest.approx(11.9 / 0.9 + 8.0, abs=0.05)
    assert main(["lab", "tlb", "--from", str(tmp_path / "missing.jsonl")]) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{}\n")
    assert main(["lab", "tlb", "--from", str(bad)]) == 2
    assert "bad.jsonl line 1: missing" in capsys.readouterr().err

