"""cfsim.io.gotrace: GC marks from the text of ``go tool trace -d=parsed``."""
from __future__ import annotations

import pytest

from cfsim.io.errors import CfsimParseError
from cfsim.io.gotrace import COLUMNS, mark_table

MS = 1_000_000


def ev(t_ms: float, kind: str, rest: str, g: int = 31) -> str:
    return f"M=7 P=0 G={g} {kind} Time={int(1_000 * MS + t_ms * MS)} {rest}"


def metric(t_ms: float, name: str, v: int) -> str:
    return ev(t_ms, "Metric", f'Name="{name}" Value=Value{{Uint64({v})}}')


HEAP = "/memory/classes/heap/objects:bytes"
GOAL = "/gc/heap/goal:bytes"


def trace_text() -> list[str]:
    """A mark missed at its start, then one full mark: goroutine 31 assists twice, a fractional
    worker (goroutine 22) runs 2 ms, then goroutine 31 allocates 6 MB with no assist and the heap
    ends 10 % past its 50 MB goal; a third mark is still open when the trace ends."""
    lines = [ev(0.0, "Sync", ""),
             ev(0.5, "RangeEnd", 'Name="GC concurrent mark phase" Scope=None Attributes=[]'),   # start missed
             metric(1.0, GOAL, 50_000_000),
             metric(1.5, HEAP, 42_000_000),
             ev(2.0, "RangeBegin", 'Name="GC concurrent mark phase" Scope=None'),
             ev(2.1, "RangeBegin", 'Name="GC mark assist" Scope=Goroutine(31)'),
             ev(2.3, "RangeEnd", 'Name="GC mark assist" Scope=Goroutine(31) Attributes=[]'),
             metric(2.5, HEAP, 43_000_000),
             ev(2.6, "RangeBegin", 'Name="GC mark assist" Scope=Goroutine(31)'),
             ev(2.9, "RangeEnd", 'Name="GC mark assist" Scope=Goroutine(31) Attributes=[]'),
             "Stack=",                                                     # stack lines are skipped
             "\truntime.gcBgMarkWorker @ 0x4242",
             ev(3.0, "StateTransition", 'GoID=22 Runnable->Running Reason=""', g=-1),
             ev(3.0, "Label", 'Label="GC (fractional)" Resource=Goroutine(22)', g=22),
             ev(5.0, "StateTransition", 'GoID=22 Running->Waiting Reason="system goroutine wait"', g=22),
             metric(6.0, HEAP, 46_000_000),
             metric(9.0, HEAP, 49_000_000),
             metric(12.0, HEAP, 55_000_000),
             ev(12.5, "RangeBegin", 'Name="stop-the-world (GC mark termination)" Scope=Goroutine(31)'),
             metric(12.6, HEAP, 30_000_000),                              # after termination
             ev(12.7, "RangeEnd", 'Name="GC concurrent mark phase" Scope=None Attributes=[]'),
             metric(20.0, GOAL, 60_000_000),
             ev(21.0, "RangeBegin", 'Name="GC concurrent mark phase" Scope=None')]   # never ends
    return lines


def test_a_mark_the_trace_holds_whole_is_one_row():
    t = mark_table(trace_text())
    assert list(t.columns) == list(COLUMNS)
    assert len(t) == 1
    r = t.iloc[0]
    assert r["t_s"] == pytest.approx(0.002)
    assert r["wall_ms"] == pytest.approx(10.7)
    assert r["goal_bytes"] == 50_000_000
    assert r["heap_start_bytes"] == 42_000_000
    # the heap when mark termination stopped the world, not after it
    assert r["heap_end_bytes"] == 55_000_000 and r["heap_max_bytes"] == 55_000_000
    assert r["end_over_goal"] == pytest.approx(0.10)
    assert (r["assists"], r["assist_goroutines"]) == (2, 1)
    assert r["assist_ms"] == pytest.approx(0.5)
    assert (r["fractional_worker_runs"], r["dedicated_worker_runs"]) == (1, 0)
    assert r["fractional_worker_ms"] == pytest.approx(2.0)
    assert r["first_worker_ms"] == pytest.approx(1.0)
    # 43 MB when the last assist ended, 55 MB at the peak: 12 MB allocated on credit
    assert r["unassisted_growth_bytes"] == 12_000_000


def test_a_worker_that_ends_the_mark_counts_up_to_its_end():
    lines = [metric(0.0, GOAL, 10_000_000), metric(0.1, HEAP, 8_000_000),
             ev(1.0, "RangeBegin", 'Name="GC concurrent mark phase" Scope=None'),
             ev(4.0, "Label", 'Label="GC (dedicated)" Resource=Goroutine(9)', g=9),
             ev(7.0, "RangeEnd", 'Name="GC concurrent mark phase" Scope=None Attributes=[]'),
             ev(7.2, "StateTransition", 'GoID=9 Running->Waiting Reason=""', g=9)]
    r = mark_table(lines).iloc[0]
    assert r["dedicated_worker_ms"] == pytest.approx(3.0)
    assert r["end_over_goal"] == pytest.approx(-0.2)


def test_time_that_runs_backwards_names_the_line():
    lines = [ev(5_000.0, "Sync", ""), ev(1.0, "Sync", "")]
    with pytest.raises(CfsimParseError, match=r"<buffer>:2: .*runs backwards"):
        mark_table(lines)


def test_sched_counts_tell_a_p_run_that_ran_nothing_from_one_that_ran_a_goroutine():
    from cfsim.io.gotrace import SchedCounts

    def proc(t_ms, m, pid, old, new):
        return f"M={m} P=-1 G=-1 StateTransition Time={int(1_000 * MS + t_ms * MS)} ProcID={pid} {old}->{new} Reason=\"\""

    def go(t_ms, m, p, gid, old, new, reason=""):
        return f"M={m} P={p} G={gid} StateTransition Time={int(1_000 * MS + t_ms * MS)} GoID={gid} {old}->{new} Reason=\"{reason}\""

    lines = [proc(0, 1, 0, "Idle", "Running"), go(0.1, 1, 0, 9, "NotExist", "Runnable"),
             go(0.2, 1, 0, 9, "Runnable", "Running"), go(0.3, 1, 0, 9, "Running", "Syscall"),
             go(0.4, 1, 0, 9, "Syscall", "Running"),            # back from a syscall: not a new run
             go(0.5, 1, 0, 9, "Running", "Waiting", "sync"), proc(0.6, 1, 0, "Running", "Idle"),
             proc(1.0, 2, 1, "Idle", "Running"), proc(1.5, 2, 1, "Running", "Idle"),   # a futile spin
             proc(2.0, 3, 1, "Idle", "Running"), "Stack=", "\truntime.schedule @ 0x1",
             go(2.5, 3, 1, 9, "Waiting", "Runnable"), go(2.6, 3, 1, 9, "Runnable", "Running"),
             proc(3.0, 3, 1, "Running", "Idle")]
    c = SchedCounts()
    assert list(c.feed(lines)) == lines        # every line passes through for mark_table
    s = c.summary()
    assert (s["p_starts"], s["p_starts_idle"]) == (3, 1)
    assert (s["goroutines_created"], s["goroutine_runs"], s["ms_starting_ps"]) == (1, 2, 3)
    assert s["waits"] == {"sync": 1}
    assert s["span_s"] == pytest.approx(0.003)


def test_stw_phases_split_the_stop_from_a_restart_the_woken_ms_delay():
    """Two sweep-termination pauses and a mark-termination one: in the first the coordinator (M 1)
    records the end 8 us after procresize with nobody else running; in the second two Ms take Ps
    before it does, and its end comes 300 us later: the coordinator had lost its CPU to them. A P
    that stops before procresize counts for the stopping; one that goes idle after it does not."""
    from cfsim.io.gotrace import StwPhases

    def at(us):
        return int(1_000 * MS + us * 1_000)

    def stw(us, kind, reason, m=1):
        return f'M={m} P=0 G=5 {kind} Time={at(us)} Name="stop-the-world ({reason})" Scope=Goroutine(5)'

    def proc(us, m, pid, old, new):
        return f'M={m} P=-1 G=-1 StateTransition Time={at(us)} ProcID={pid} {old}->{new} Reason=""'

    def resize(us, m=1):
        return f'M={m} P=0 G=5 Metric Time={at(us)} Name="/sched/gomaxprocs:threads" Value=Value{{Uint64(8)}}'

    sweep = "GC sweep termination"
    lines = [stw(0, "RangeBegin", sweep), proc(20, 2, 1, "Running", "Idle"), resize(40), stw(48, "RangeEnd", sweep),
             stw(1_000, "RangeBegin", sweep), proc(1_010, 2, 1, "Running", "Idle"), proc(1_030, 3, 2, "Running", "Idle"),
             resize(1_050), proc(1_060, 2, 1, "Idle", "Running"), proc(1_065, 3, 2, "Idle", "Running"),
             proc(1_070, 1, 3, "Idle", "Running"),          # the coordinator's own M: not another M
             proc(1_200, 2, 1, "Running", "Idle"),          # after procresize: not a stop
             stw(1_350, "RangeEnd", sweep),
             stw(2_000, "RangeBegin", "GC mark termination"), stw(2_010, "RangeEnd", "GC mark termination"),
             proc(2_020, 4, 4, "Idle", "Running")]          # outside any pause
    c = StwPhases()
    assert list(c.feed(lines)) == lines
    assert c.rows[0][1:] == (at(0), 48.0, 20.0, 8.0, 0)
    assert c.rows[1][1:] == (at(1_000), 350.0, 30.0, 300.0, 2)
    assert c.rows[2] == ("GC mark termination", at(2_000), 10.0, 0.0, None, 0)
    s = c.summary()
    assert s[sweep]["pauses"] == 2 and s[sweep]["ms_ran_first_share"] == 0.5
    assert (s[sweep]["restart_us_p50_ms_ran_first"], s[sweep]["restart_us_p50_alone"]) == (300.0, 8.0)
    assert "restart_us" not in s["GC mark termination"]
