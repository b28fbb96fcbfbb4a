"""The host's CPU for a context switch between two threads of one process on one CPU
(lab/cmd/switchbench, cfsim.lab.threadswitch, `cfsim lab switch`)."""
import json
import os
import subprocess
import tomllib

import pytest

from cfsim.cli import main
from cfsim.lab import build
from cfsim.lab.threadswitch import (SwitchbenchError, params_toml, per_round, process_switch_us, read_switchbench,
                                    run_switchbench, switch_params)


def _line(round_, mode, us_per_yield, switches_per_yield, yields=100_000):
    switches = round(switches_per_yield * yields)
    return json.dumps({"round": round_, "mode": mode, "cpu": 1, "yielders": 1 if mode == "alone" else 2,
                       "dur_s": 1.0, "yields": yields, "cpu_ns": round(us_per_yield * yields * 1e3),
                       "switches_voluntary": 2 if switches else 0, "switches_involuntary": max(switches - 2, 0),
                       "us_per_yield": us_per_yield, "switches_per_yield": switches_per_yield})


def _output(threads=(1.9, 2.0, 2.2), processes=(2.1, 2.3, 2.4), alone=0.7, threads_spy=1.0):
    lines = []
    for i, (t, p) in enumerate(zip(threads, processes)):
        lines += [_line(i, "alone", alone, 0.0), _line(i, "threads", t, threads_spy), _line(i, "processes", p, 1.0)]
    return "\n".join(lines) + "\n"


def test_a_switch_is_the_threads_cpu_per_yield_beyond_alone_per_switch():
    rows, meta = read_switchbench(_output(), "sb.jsonl")
    assert meta == {"source": "sb.jsonl", "rounds": 3, "cpu": 1} and len(rows) == 9
    # per round (threads - alone) / switches per yield: 1.2, 1.3, 1.5 -> median 1.3
    assert switch_params(rows) == {"host.thread_switch_us": 1.3}
    assert process_switch_us(rows) == 1.6
    assert [round(r["thread_switch_us"], 6) for r in per_round(rows)] == [1.2, 1.3, 1.5]


def test_fewer_switches_than_yields_are_divided_out():
    rows, _ = read_switchbench(_output(threads=(1.6, 1.6, 1.6), threads_spy=0.9))
    assert rows[1]["switches_per_yield"] == 0.9
    assert switch_params(rows) == {"host.thread_switch_us": 1.0}   # (1.6 - 0.7) / 0.9


def test_threads_that_did_not_switch_on_most_yields_are_refused():
    rows, _ = read_switchbench(_output(threads_spy=0.5))
    with pytest.raises(SwitchbenchError, match=r"fewer than 0.8 of their yields \(round 0: 0.500"):
        switch_params(rows)
    only_threads = [r for r in rows if r["mode"] == "threads"]
    with pytest.raises(SwitchbenchError, match="both the alone and the threads mode"):
        switch_params(only_threads)
    # a processes mode that did not switch gives no figure rather than a wrong one
    rows, _ = read_switchbench("\n".join([_line(0, "alone", 0.7, 0.0), _line(0, "processes", 0.8, 0.1)]))
    assert process_switch_us(rows) is None


def test_malformed_output_names_the_source_and_line():
    good = _line(0, "alone", 0.7, 0.0)
    with pytest.raises(SwitchbenchError, match="sb.jsonl line 2: not JSON"):
        read_switchbench(good + "\n{oops\n", "sb.jsonl")
    with pytest.raises(SwitchbenchError, match="sb.jsonl line 3: missing cpu_ns, us_per_yield"):
        read_switchbench(good + "\n\n" + json.dumps({"round": 0, "mode": "threads", "yields": 10,
                                                     "switches_voluntary": 0, "switches_involuntary": 10}),
                         "sb.jsonl")
    with pytest.raises(SwitchbenchError, match="line 1: mode must be one of alone, threads, processes"):
        read_switchbench(good.replace('"alone"', '"spin"'))
    with pytest.raises(SwitchbenchError, match="line 1: no yields"):
        read_switchbench(good.replace('"yields": 100000', '"yields": 0'))
    with pytest.raises(SwitchbenchError, match="line 1: a field that is not a number"):
        read_switchbench(good.replace('"yields": 100000', '"yields": "many"'))
    with pytest.raises(SwitchbenchError, match="no measurements"):
        read_switchbench("\n")


def test_params_file_round_trips_through_tomllib():
    rows, _ = read_switchbench(_output())
    params = switch_params(rows)
    text = params_toml(params, rows, "python -m cfsim lab switch")
    doc = tomllib.loads(text)
    assert doc["params"] == {"host.thread_switch_us": 1.3}
    assert doc["measurement"]["rounds"] == 3 and doc["measurement"]["cpu"] == 1
    assert doc["measurement"]["process_switch_us"] == 1.6
    assert doc["measurement"]["threads_switches_per_yield_median"] == 1.0
    assert "# Reproduce: python -m cfsim lab switch" in text and "kernel/sched/core.c" in text


def test_lab_switch_cli_writes_a_params_file_from_a_saved_output(tmp_path, capsys):
    saved = tmp_path / "sb.jsonl"
    saved.write_text(_output())
    out = tmp_path / "host.toml"
    assert main(["lab", "switch", "--from", str(saved), "--out", str(out)]) == 0
    assert tomllib.loads(out.read_text())["params"] == {"host.thread_switch_us": 1.3}
    assert "host.thread_switch_us = 1.3" in capsys.readouterr().out
    assert main(["lab", "switch", "--from", str(tmp_path / "missing.jsonl")]) == 2
    low = tmp_path / "low.jsonl"
    low.write_text(_output(threads_spy=0.3))
    assert main(["lab", "switch", "--from", str(low)]) == 2
    assert "fewer than 0.8" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{}\n")
    assert main(["lab", "switch", "--from", str(bad)]) == 2
    assert "bad.jsonl line 1: missing" in capsys.readouterr().err


def test_a_binary_that_cannot_run_is_a_clear_error(tmp_path):
    with pytest.raises(SwitchbenchError, match="no-such-switchbench cannot run"):
        run_switchbench(tmp_path / "no-such-switchbench", rounds=1)
    with pytest.raises(SwitchbenchError, match="--rounds must be >= 1"):
        run_switchbench(tmp_path / "x", rounds=0)


def _one_cpu() -> int | None:
    try:
        return max(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


@pytest.mark.lab
def test_the_real_bench_switches_once_per_yield(tmp_path):
    """Builds lab/cmd/switchbench and runs it for one short round on this machine."""
    go = build.go_binary()
    if go is None:
        pytest.skip("Go is not installed (needed to build lab/cmd/switchbench)")
    cpu = _one_cpu()
    if cpu is None:
        pytest.skip("no CPU affinity here (os.sched_getaffinity)")
    try:
        os.sched_setaffinity(0, os.sched_getaffinity(0))
    except OSError as exc:
        pytest.skip(f"sched_setaffinity is not allowed here: {exc}")
    binary = tmp_path / "switchbench"
    res = subprocess.run([go, "build", "-o", str(binary), "./cmd/switchbench"], cwd=build.lab_dir(),
                         capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        pytest.skip(f"lab/cmd/switchbench does not build here: {res.stderr.strip()[-500:]}")
    text = run_switchbench(binary, rounds=1, dur_s=0.2)
    rows, meta = read_switchbench(text, binary.name)
    assert meta["rounds"] == 1 and meta["cpu"] == cpu
    by = {r["mode"]: r for r in rows}
    assert set(by) == {"alone", "threads", "processes"}
    # alone, a yield switches only to other processes on that CPU (none on a quiet host)
    assert by["alone"]["switches_per_yield"] < by["threads"]["switches_per_yield"]
    assert by["threads"]["switches_per_yield"] > 0.8 and by["processes"]["switches_per_yield"] > 0.8
    # the yielders ran (how much of the CPU they got depends on what else the host runs)
    assert 0 < by["threads"]["cpu_ns"] <= 1.05 * 0.2e9
    assert switch_params(rows)["host.thread_switch_us"] > 0
