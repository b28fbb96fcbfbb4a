"""Per-thread schedstat of the lab workload: reading, parsing, the window's differences."""
import os
import threading
import time

import pytest

from cfsim.lab.threads import parse_schedstat, read_thread_schedstat, thread_window


def test_reads_this_process_threads_and_a_busy_thread_gains_cpu():
    busy_done, release = threading.Event(), threading.Event()

    def busy():
        start = time.thread_time()           # this thread's own CPU: a loaded host only slows it
        while time.thread_time() - start < 0.15:
            pass
        busy_done.set()
        release.wait(10)          # alive while the second reading is taken

    before = read_thread_schedstat(os.getpid())
    t = threading.Thread(target=busy)
    t.start()
    busy_done.wait(10)
    after = read_thread_schedstat(os.getpid())
    release.set()
    t.join()
    if not before:
        pytest.skip("no /proc/<pid>/task/<tid>/schedstat on this kernel")
    w = thread_window(before, after, 0.2)
    assert w["threads"][0]["tid"] not in before   # the busy thread, new: counted from zero, first by CPU
    assert w["threads"][0]["cpu_s"] >= 0.1
    assert os.getpid() in after                   # the main thread's tid is the pid


def test_missing_process_and_malformed_lines(tmp_path):
    assert read_thread_schedstat(2**22 + 12345, proc=tmp_path) == {}
    task = tmp_path / "7" / "task"
    (task / "7").mkdir(parents=True)
    (task / "7" / "schedstat").write_text("100 20 3\n")
    (task / "8").mkdir()
    (task / "8" / "schedstat").write_text("garbage\n")      # left out, not an error
    assert read_thread_schedstat(7, proc=tmp_path) == {7: (100, 20, 3)}
    with pytest.raises(ValueError, match="three integers"):
        parse_schedstat("1 2")


def test_window_counts_new_threads_from_zero_and_skips_per_item_without_items():
    w = thread_window({}, {5: (3_000_000, 0, 7)}, span_s=2.0)
    assert w["totals"] == {"cpu_s": 0.003, "switch_ins": 7, "threads": 1} and "per_item" not in w


def test_a_sleeping_thread_counts_voluntary_switches():
    slept, read = threading.Event(), threading.Event()

    def sleeper():
        for _ in range(20):
            time.sleep(0.002)
        slept.set()
        read.wait(10)       # stay alive until its counts are read (a loaded host ran it out before)

    t = threading.Thread(target=sleeper)
    before = read_thread_schedstat(os.getpid())
    t.start()
    tid = t.native_id
    slept.wait(10)
    after = read_thread_schedstat(os.getpid())
    read.set()
    t.join()
    if tid not in after or len(after[tid]) < 5:
        pytest.skip("no per-thread voluntary/involuntary switch counts on this kernel")
    w = thread_window(before, after, 0.05)
    row = next(r for r in w["threads"] if r["tid"] == tid)
    assert row["sleeps"] >= 5 and row["sleeps"] <= row["switch_ins"]


def test_status_switches_are_read_beside_schedstat(tmp_path):
    task = tmp_path / "7" / "task" / "7"
    task.mkdir(parents=True)
    (task / "schedstat").write_text("100 20 3\n")
    (task / "status").write_text("Name:\tx\nvoluntary_ctxt_switches:\t2\nnonvoluntary_ctxt_switches:\t1\n")
    assert read_thread_schedstat(7, proc=tmp_path) == {7: (100, 20, 3, 2, 1)}
