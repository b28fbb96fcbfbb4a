"""cfsim.lab.wakeplace: the kernel's placement of a process's own wake-ups, from its scheduler
trace, into host.wake_affine_share and host.wake_preempt_share."""
from __future__ import annotations

import gzip
import json

import pytest

from cfsim.lab import wakeplace as wp

SW = "{task}-{pid} [{cpu:03d}] d..2. {t:.6f}: sched_switch: prev_comm={task} prev_pid={prev} prev_prio=120 " \
     "prev_state={state} ==> next_comm=workload next_pid={nxt} next_prio=120"
WK = "{task}-{pid} [{cpu:03d}] d..2. {t:.6f}: sched_waking: comm={comm} pid={wakee} prio=120 target_cpu={target:03d}"


def test_counts_tell_a_wakee_beside_its_waker_from_one_on_the_idle_cpu_and_another_process():
    lines = [SW.format(task="swapper/0", pid=0, cpu=0, t=1.0, prev=0, state="R", nxt=11),
             # 11 runs on CPU 0, CPU 1 idle: wakes 12 onto its own CPU, and 12 switches it out
             WK.format(task="workload", pid=11, cpu=0, t=1.00001, comm="workload", wakee=12, target=0),
             SW.format(task="workload", pid=11, cpu=0, t=1.00002, prev=11, state="R", nxt=12),
             # 12 wakes 13 onto the idle CPU 1
             WK.format(task="workload", pid=12, cpu=0, t=1.00003, comm="workload", wakee=13, target=1),
             SW.format(task="swapper/1", pid=0, cpu=1, t=1.00004, prev=0, state="R", nxt=13),
             # both CPUs busy: 13 wakes 11 onto CPU 1, which waits (12 is not switched out for it)
             WK.format(task="workload", pid=13, cpu=1, t=1.00005, comm="workload", wakee=11, target=1),
             # a wake-up of another process's task, and one by a task that is not running: neither counts
             WK.format(task="workload", pid=13, cpu=1, t=1.00006, comm="loadgen", wakee=99, target=1),
             WK.format(task="workload", pid=14, cpu=0, t=1.00007, comm="workload", wakee=15, target=0),
             SW.format(task="workload", pid=13, cpu=1, t=1.0001, prev=13, state="S", nxt=11)]
    c = wp.count_placements(lines, "workload", 2)
    assert c == {"wakes_other_idle": 2, "wakes_other_idle_to_waker": 1, "wakes_other_busy": 1,
                 "wakes_other_busy_to_waker": 1, "wakes_to_waker": 2, "wakes_to_waker_preempting": 1,
                 "neighbour_wakes_other_idle": 0, "neighbour_wakes_other_idle_took_waker": 0,
                 "preempted_by_other": 0, "wakes_other_idle_here": 0, "wakes_other_idle_here_to_waker": 0}
    assert wp.shares(c) == {"wake_affine_share": 0.5, "wake_preempt_share": 0.5, "wake_affine_share_here": None,
                            "wake_affine_share_away": 0.5, "neighbour_wake_share": None}
    with pytest.raises(wp.WakeplaceError, match="CPU 3 on a host of 2"):
        wp.count_placements([SW.format(task="x", pid=1, cpu=3, t=1.0, prev=0, state="R", nxt=1)], "workload", 2)


def test_a_load_generator_woken_beside_an_idle_cpu_that_takes_the_servers_cpu_is_counted_apart():
    """host.neighbour_wake_share's measurement: another process's task woken by the server's
    running thread while the other CPU idles, which switches the server out at once (counted), one
    that goes to the idle CPU (not), and the server's switches out while runnable for another
    process's task (preempted_by_other)."""
    raw = "{task}-{pid} [{cpu:03d}] d..2. {t:.6f}: sched_switch: prev_comm={task} prev_pid={prev} prev_prio=120 " \
          "prev_state={state} ==> next_comm={nc} next_pid={nxt} next_prio=120"
    lines = [raw.format(task="swapper/0", pid=0, cpu=0, t=1.0, prev=0, state="R", nc="workload", nxt=11),
             WK.format(task="workload", pid=11, cpu=0, t=1.00001, comm="loadgen", wakee=50, target=0),
             raw.format(task="workload", pid=11, cpu=0, t=1.00002, prev=11, state="R", nc="loadgen", nxt=50),
             raw.format(task="loadgen", pid=50, cpu=0, t=1.00008, prev=50, state="S", nc="workload", nxt=11),
             WK.format(task="workload", pid=11, cpu=0, t=1.0001, comm="loadgen", wakee=51, target=1),
             raw.format(task="swapper/1", pid=0, cpu=1, t=1.00011, prev=0, state="R", nc="loadgen", nxt=51)]
    c = wp.count_placements(lines, "workload", 2)
    assert (c["neighbour_wakes_other_idle"], c["neighbour_wakes_other_idle_took_waker"], c["preempted_by_other"]) \
        == (2, 1, 1)
    assert c["wakes_other_idle"] == 0 and wp.shares(c)["neighbour_wake_share"] == 0.5


def _row(**kw):
    row = {"round": 0, "gomaxprocs": 8, "wakes_other_idle": 600, "wakes_other_idle_to_waker": 300,
           "wakes_other_busy": 400, "wakes_other_busy_to_waker": 250, "wakes_to_waker": 550,
           "wakes_to_waker_preempting": 220}
    return {**row, **kw}


def test_bad_counts_name_the_line_and_too_few_wakes_are_refused():
    with pytest.raises(wp.WakeplaceError, match=r"wp.jsonl line 2: counts that cannot be"):
        wp.read_wakeplace(json.dumps(_row()) + "\n" + json.dumps(_row(wakes_to_waker_preempting=600)), "wp.jsonl")
    with pytest.raises(wp.WakeplaceError, match="wp.jsonl line 1: a field that is not a whole number"):
        wp.read_wakeplace(json.dumps(_row(wakes_to_waker="many")), "wp.jsonl")
    with pytest.raises(wp.WakeplaceError, match="too few wake-ups"):
        wp.wakeplace_params([_row(wakes_other_idle=50, wakes_other_idle_to_waker=10)])
    assert wp.wakeplace_params([_row(), _row(round=1, gomaxprocs=2)]) == {
        "host.wake_affine_share": 0.5, "host.wake_preempt_share": 0.4}


def test_rows_come_from_the_runs_manifests_and_a_run_without_them_is_named(tmp_path):
    def run(name, block):
        d = tmp_path / name
        d.mkdir()
        with gzip.open(d / "manifest.json.gz", "wt") as f:
            json.dump({"gomaxprocs": {"at_ready": 8}, "wake_placement": block}, f)
        return d
    good = run("p000", {k: v for k, v in _row().items() if k.startswith("wakes")})
    rows, meta = wp.read_wakeplace(wp.rows_from_runs([good]))
    assert rows[0]["gomaxprocs"] == 8 and rows[0]["wakes_to_waker"] == 550 and meta["rounds"] == 1
    failed = run("p001", {"error": "OSError: [Errno 22] Invalid argument"})
    with pytest.raises(wp.WakeplaceError, match="p001: OSError"):
        wp.rows_from_runs([good, failed])
    toml = wp.params_toml(wp.wakeplace_params(rows), rows, "cmd", [str(good)])
    assert '"host.wake_affine_share" = 0.5' in toml and f'"{good}",' in toml


def test_the_cli_writes_a_params_file_whose_runs_validate_counts_as_training(tmp_path, capsys):
    from cfsim.cli import main
    from cfsim.validation.calibrate import read_train_runs

    runs = []
    for i in range(2):
        d = tmp_path / f"p00{i}"
        d.mkdir()
        with gzip.open(d / "manifest.json.gz", "wt") as f:
            json.dump({"gomaxprocs": {"at_ready": 2 + 6 * i},
                       "wake_placement": {k: v for k, v in _row().items() if k.startswith("wakes")}}, f)
        runs.append(str(d))
    out = tmp_path / "wp.toml"
    assert main(["lab", "wakeplace", *runs, "--out", str(out)]) == 0
    assert "host.wake_affine_share = 0.5" in capsys.readouterr().out
    assert read_train_runs(out) == runs
    assert main(["lab", "wakeplace", str(tmp_path / "missing")]) == 2
    assert "no such run folder" in capsys.readouterr().err


def test_the_trace_window_leaves_the_kernels_trace_off_and_empty(tmp_path, monkeypatch):
    fs = tmp_path / "tracing"
    (fs / "options").mkdir(parents=True)
    for name in ("tracing_on", "set_event", "set_event_pid", "trace"):
        (fs / name).write_text("")
    (fs / "buffer_size_kb").write_text("1408\n")
    line = WK.format(task="workload", pid=11, cpu=0, t=1.0, comm="workload", wakee=12, target=0)

    def sleep(_s):
        # what the kernel writes while tracing is on
        assert (fs / "tracing_on").read_text() == "1"
        assert (fs / "set_event").read_text() == "sched:sched_waking\nsched:sched_switch\n"
        (fs / "trace").write_text(line + "\n")
    monkeypatch.setattr(wp.time, "sleep", sleep)
    assert wp.trace_window(0.1, tracefs=fs) == line + "\n"
    assert [(fs / n).read_text() for n in ("tracing_on", "set_event", "trace", "buffer_size_kb")] == ["0", "", "", "1408"]
    with pytest.raises(wp.WakeplaceError, match="not writable"):
        wp.trace_window(0.1, tracefs=tmp_path / "none")


def test_tracefs_is_mounted_where_it_is_missing(tmp_path, monkeypatch):
    fs = tmp_path / "tracing"
    fs.mkdir()
    calls = []

    def mount(argv, **_kw):
        # what the kernel's mount makes appear
        calls.append(argv)
        (fs / "set_event").write_text("")
    monkeypatch.setattr(wp.subprocess, "run", mount)
    monkeypatch.setattr(wp.os, "geteuid", lambda: 1000)
    assert not wp.mount_tracefs(fs) and calls == []          # not root: nothing tried
    monkeypatch.setattr(wp.os, "geteuid", lambda: 0)
    assert wp.mount_tracefs(fs) and calls == [["mount", "-t", "tracefs", "nodev", str(fs)]]
    assert wp.mount_tracefs(fs) and len(calls) == 1          # mounted: not again
    with pytest.raises(wp.WakeplaceError, match="mount -t tracefs"):
        wp.trace_window(0.1, tracefs=tmp_path / "none")      # no such directory to mount on


def test_the_placement_is_read_from_the_switch_in_and_split_by_the_wakees_previous_cpu():
    """sched_waking's target_cpu is the wakee's previous CPU (the kernel traces it before it
    chooses): a wakee last run on the waker's CPU that the kernel sends to the idle CPU counts as
    placed there, and one last run on the idle CPU that joins its waker counts as joining."""
    lines = [SW.format(task="swapper/0", pid=0, cpu=0, t=1.0, prev=0, state="R", nxt=12),
             SW.format(task="workload", pid=12, cpu=0, t=1.00001, prev=12, state="S", nxt=11),
             # 12 last ran on CPU 0; 11 wakes it there (target_cpu 0) but it runs on the idle CPU 1
             WK.format(task="workload", pid=11, cpu=0, t=1.00002, comm="workload", wakee=12, target=0),
             SW.format(task="swapper/1", pid=0, cpu=1, t=1.00003, prev=0, state="R", nxt=12),
             SW.format(task="workload", pid=12, cpu=1, t=1.00004, prev=12, state="S", nxt=0),
             # 12 last ran on CPU 1 (idle now); 11 wakes it and it joins 11 on CPU 0 after 11 blocks
             WK.format(task="workload", pid=11, cpu=0, t=1.00005, comm="workload", wakee=12, target=1),
             SW.format(task="workload", pid=11, cpu=0, t=1.00006, prev=11, state="S", nxt=12)]
    c = wp.count_placements(lines, "workload", 2)
    assert (c["wakes_other_idle"], c["wakes_other_idle_to_waker"]) == (2, 1)
    assert (c["wakes_other_idle_here"], c["wakes_other_idle_here_to_waker"]) == (1, 0)
    assert c["wakes_to_waker_preempting"] == 0      # 11 blocked: it was not switched out runnable
    split = [_row(wakes_other_idle_here=300, wakes_other_idle_here_to_waker=240)]
    params = wp.wakeplace_params(split)
    assert params["host.wake_affine_share"] == 0.8 and params["host.wake_affine_share_away"] == 0.2
    with pytest.raises(wp.WakeplaceError, match="split by the previous CPU"):
        wp.wakeplace_params([_row(wakes_other_idle_here=590, wakes_other_idle_here_to_waker=290)])
