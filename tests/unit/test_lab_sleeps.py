"""The workload's threads' sleeps by cause, as the lab records them (cfsim.lab.sleeps)."""
from collections import Counter

import pytest

from cfsim.lab import sleeps

KERNEL = ("\tffffffff82246e88 __schedule\n\tffffffff822477f3 schedule\n\tffffffff8144fcd6 futex_do_wait\n")


def block(tid: int, *go_frames: str) -> str:
    return f"{tid} \n" + KERNEL + "".join(f"\t{0x90000 + i:x} {f}\n" for i, f in enumerate(go_frames)) + "\n"


# one switch of each kind, with the call chains perf printed on the lab host (2026-12-07, the
# allocation-heavy stream at GOMAXPROCS 8 under a 1-core quota; Go 1.26)
SCRIPT = "".join([
    block(11, "runtime.futex.abi0", "runtime.futexsleep", "runtime.notesleep", "runtime.mPark", "runtime.stopm",
          "runtime.findRunnable", "runtime.schedule", "runtime.park_m", "runtime.mcall"),
    block(12, "runtime.futex.abi0", "runtime.futexsleep", "runtime.notesleep", "runtime.mPark", "runtime.stopm",
          "runtime.gcstopm", "runtime.schedule", "runtime.preemptPark", "runtime.newstack"),
    block(13, "runtime.futex.abi0", "runtime.notetsleep_internal", "runtime.notetsleep",
          "runtime.stopTheWorldWithSema", "runtime.gcStart.func3", "runtime.systemstack.abi0", "runtime.gcStart"),
    block(14, "runtime.futex.abi0", "runtime.notetsleep_internal", "runtime.notetsleep", "runtime.forEachPInternal",
          "runtime.gcMarkDone.forEachP.func5", "runtime.systemstack.abi0", "runtime.gcMarkDone"),
    block(15, "runtime.futex.abi0", "runtime.notetsleep_internal", "runtime.notetsleep", "runtime.forEachPInternal",
          "runtime.gcMarkTermination.forEachP.func7", "runtime.systemstack.abi0", "runtime.gcMarkTermination",
          "runtime.gcMarkDone"),
    block(16, "runtime.futex.abi0", "runtime.semasleep", "runtime.lock2", "runtime.(*mheap).allocSpan",
          "runtime.(*mheap).alloc.func1", "runtime.systemstack.abi0", "runtime.(*mheap).alloc"),
    # a contended lock inside stopm is the lock's sleep, not an idle M's
    block(17, "runtime.futex.abi0", "runtime.semasleep", "runtime.lock2", "runtime.stopm", "runtime.findRunnable"),
    block(18, "runtime.usleep.abi0", "runtime.runqgrab", "runtime.runqsteal", "runtime.stealWork",
          "runtime.findRunnable"),
    block(19, "internal/runtime/syscall/linux.Syscall6", "runtime.netpoll", "runtime.findRunnable",
          "runtime.schedule"),
    block(20, "runtime.usleep.abi0", "runtime.sysmon", "runtime.newm.func1", "runtime.mstart1"),
    block(21, "syscall.Syscall", "os.(*File).Read", "main.main"),
])


def test_each_switch_is_counted_under_the_runtime_function_that_slept():
    c = sleeps.parse_switch_script(SCRIPT)
    assert c == Counter({"idle": 1, "stw_stopped": 1, "stw_coordinator": 1, "ragged_barrier": 1, "cache_flush": 1,
                         "runtime_lock": 2, "steal_backoff": 1, "netpoll": 1, "sysmon": 1, "other": 1})
    assert set(c) <= set(sleeps.CAUSES)


def test_summary_is_per_second_with_every_cause_and_the_ms_sleeps_without_sysmons():
    s = sleeps.summarise_sleeps(sleeps.parse_switch_script(SCRIPT), 2.0)
    assert list(s["per_s"]) == list(sleeps.CAUSES)
    assert s["sleeps"] == 11 and s["per_s"]["runtime_lock"] == 1.0 and s["per_s"]["stw_stopped"] == 0.5
    assert s["m_sleeps_per_s"] == 5.0


def test_a_block_without_a_thread_id_names_the_line():
    with pytest.raises(ValueError, match=r"perf script line 1: expected a thread id"):
        sleeps.parse_switch_script("\truntime.stopm\n")


def test_the_grids_sleeps_a_record_grow_with_gomaxprocs_and_the_twin_reads_them():
    """data/lab/sleep-causes (the allocation-heavy stream under a 1-core quota at GOMAXPROCS 1, 2,
    4, 8): the report's rows and the validation's observed keys come from the manifests' blocks."""
    from pathlib import Path

    from cfsim.lab import report
    from cfsim.validation.twin import observed_summary
    grid = Path(__file__).resolve().parents[2] / "data" / "lab" / "sleep-causes"
    rows = {r["run"]: r for r in report.sleep_rows(grid)}
    assert set(rows) == {"p000_gomaxprocs=1", "p001_gomaxprocs=2", "p002_gomaxprocs=4", "p003_gomaxprocs=8",
                         "repeat2-p003_gomaxprocs=8"}
    m = [rows[f"p00{i}_gomaxprocs={g}"]["m_sleeps_per_item"] for i, g in enumerate((1, 2, 4, 8))]
    assert m == sorted(m) and m[0] < 0.001 < 0.05 < m[3]
    obs = observed_summary(grid / "p003_gomaxprocs=8")
    assert obs["os_thread_sleeps_idle_per_item"] == pytest.approx(rows["p003_gomaxprocs=8"]["idle_per_item"])
    assert all(f"os_thread_sleeps_{c}_per_item" in obs for c in sleeps.CAUSES)
