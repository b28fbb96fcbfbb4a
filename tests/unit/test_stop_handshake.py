"""A stop of the world waits for the Ps other Ms hold: preemptall's signal and the futex wake-up of
the coordinator asleep on sched.stopnote (stopTheWorldWithSema, src/runtime/proc.go), priced by
``host.stop_handshake_us`` (measured by ``cfsim lab stopping`` from lab/cmd/stwbench)."""
from __future__ import annotations

import json
import tomllib

import pytest

from cfsim.cli import main
from cfsim.lab.stopping import StwbenchError, params_toml, read_stwbench, run_stwbench, stopping_params
from cfsim.scenario import load_scenario
from cfsim.simulation import simulate

_BUSY = ["workload.kind=closed", "workload.clients=8", "workload.cpu_ms_per_request=0.2",
         "workload.alloc_kb_per_request=64", "go.live_heap_mb=16", "cgroup.cpu_limit=null", "host.cpus=2",
         "run.duration_s=3", "run.warmup_s=1"]


def _run(gomaxprocs: int, handshake_us: float, extra: list[str] = ()):
    sc = load_scenario("cpu-bound-threads", [*_BUSY, f"go.gomaxprocs={gomaxprocs}",
                                             f"host.stop_handshake_us={handshake_us}", *extra])
    return simulate(sc)


def test_a_stop_waits_the_handshake_when_another_p_runs():
    before, after = _run(2, 0.0), _run(2, 45.0)
    for stop in ("sweepterm_ms", "markterm_ms"):
        b, a = before.gc_cycles[stop].median() * 1e3, after.gc_cycles[stop].median() * 1e3
        # both Ps run goroutines at every stop: the world is stopped 45 us after the request at
        # the soonest, and the coordinator's own few microseconds come after its wake-up
        assert b < 20 and 45 <= a <= 45 + b + 15, (stop, b, a)
    # a wait, not work: the CPU and the requests served move by a few per mille at most
    assert after.summary["cpu_usage_cores"] == pytest.approx(before.summary["cpu_usage_cores"], rel=0.01)
    assert after.summary["throughput_per_s"] == pytest.approx(before.summary["throughput_per_s"], rel=0.02)


def test_one_p_has_no_one_to_wait_for():
    a, b = _run(1, 0.0), _run(1, 45.0)
    assert a.summary == b.summary


def test_idle_ps_are_stopped_at_once():
    # a light open loop: at most stops the other P is idle (no M holds it), and nothing waits
    light = ["workload.kind=open", "workload.rate_per_s=100", "workload.cpu_ms_per_request=0.2"]
    a, b = _run(2, 0.0, light), _run(2, 45.0, light)
    waited = (b.gc_cycles["sweepterm_ms"] - a.gc_cycles["sweepterm_ms"] > 0.03).mean()
    assert waited < 0.5, waited


def _output(g2=(40.0, 46.0, 52.0), pauses=8000) -> str:
    lines = []
    for rnd, v in enumerate(g2):
        for procs, stop in ((1, 0.1), (2, v)):
            lines.append(json.dumps({"round": rnd, "gomaxprocs": procs, "cpus": 2, "workers": 8, "busy": 1,
                                     "dur_s": 4, "gc_cycles": pauses // 2, "stw_pauses": pauses,
                                     "stopping_mean_us": stop, "total_mean_us": stop + 20}))
    return "\n".join(lines) + "\n"


def test_the_handshake_is_the_median_round_above_one_p():
    rows, meta = read_stwbench(_output())
    assert meta["rounds"] == 3
    params = stopping_params(rows)
    assert params == {"host.stop_handshake_us": 45.9}
    doc = tomllib.loads(params_toml(params, rows, "python -m cfsim lab stopping"))
    assert doc["params"] == params and doc["measurement"]["rounds"] == 3
    with pytest.raises(StwbenchError, match="too few stops"):
        stopping_params(read_stwbench(_output(pauses=50))[0])
    with pytest.raises(StwbenchError, match="GOMAXPROCS 1 and 2"):
        stopping_params([r for r in rows if r["gomaxprocs"] == 2])
    with pytest.raises(StwbenchError, match="line 1: missing"):
        read_stwbench('{"round": 0}\n', "x.jsonl")


def test_lab_stopping_cli_writes_a_params_file_from_a_saved_output(tmp_path, capsys):
    saved = tmp_path / "stw.jsonl"
    saved.write_text(_output())
    out = tmp_path / "host.toml"
    assert main(["lab", "stopping", "--from", str(saved), "--out", str(out)]) == 0
    assert tomllib.loads(out.read_text())["params"] == {"host.stop_handshake_us": 45.9}
    assert main(["lab", "stopping", "--from", str(tmp_path / "missing.jsonl")]) == 2
    with pytest.raises(StwbenchError, match="no-such-stwbench cannot run"):
        run_stwbench(tmp_path / "no-such-stwbench", rounds=1)
    with pytest.raises(StwbenchError, match="--rounds must be >= 1"):
        run_stwbench(tmp_path / "x", rounds=0)


def test_the_lab_hosts_file_holds_a_measured_handshake():
    from pathlib import Path

    doc = tomllib.loads((Path(__file__).resolve().parents[2] / "docs/params/lab-host-stopping.toml").read_text())
    assert 5 <= doc["params"]["host.stop_handshake_us"] <= 200
    assert doc["measurement"]["rounds"] >= 3
