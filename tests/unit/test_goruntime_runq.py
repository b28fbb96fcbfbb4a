"""The Go scheduler's run queues (cfsim.goruntime.runq), rule by rule of Go 1.26 src/runtime/proc.go."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cfsim.goruntime.runq import GLOBAL_CHECK_EVERY, SYSMON_POLL_NS, RunQueues


def test_runqput_next_takes_runnext_and_pushes_the_holder_to_the_local_tail():
    q = RunQueues()
    q.put_next(0, "a")
    q.put_next(0, "b")
    q.put_next(0, "c")
    # runnext = c; a, b went to the local tail in the order they were pushed out
    assert [q.take(0, 0, 1, 0) for _ in range(3)] == ["c", "a", "b"]
    assert q.take(0, 0, 1, 0) is None and not q.has_work()


def test_a_p_runs_its_own_queue_before_the_global_queue_and_the_network():
    q = RunQueues()
    q.put_next(0, "own")
    q.put_global("global")
    q.net_ready("net")
    q.ticks[0] = 1                          # past schedtick 0, when the global queue comes first
    assert q.take(0, 0, 2, 0) == "own"      # runnext inherits the time slice: schedtick stays 1
    assert q.take(0, 0, 2, 0) == "global"   # globrunqget
    assert q.take(0, 0, 2, 0) == "net"      # netpoll(0) before stealing


def test_every_61st_schedule_looks_at_the_global_queue_first():
    q = RunQueues()
    q.put_head(0, [f"l{i}" for i in range(100)])
    q.put_global("g")
    got = [q.take(0, 0, 1, 0) for _ in range(GLOBAL_CHECK_EVERY + 2)]
    # tick 0 takes the global goroutine at once; afterwards the local queue runs in order
    assert got[0] == "g" and got[1:] == [f"l{i}" for i in range(GLOBAL_CHECK_EVERY + 1)]
    q.put_global("g2")
    rest = [q.take(0, 0, 1, 0) for _ in range(GLOBAL_CHECK_EVERY)]
    assert "g2" in rest and rest.index("g2") < GLOBAL_CHECK_EVERY


def test_globrunqget_takes_its_share_into_the_local_queue():
    q = RunQueues()
    for i in range(9):
        q.put_global(i)
    q.put_head(0, [])
    q.ticks = [1]
    # 9 waiting, 3 Ps: 9 // 3 + 1 = 4, one to run and three into the local queue
    assert q.take(0, 0, 3, 0) == 0
    assert list(q.local[0]) == [1, 2, 3] and list(q.glob) == [4, 5, 6, 7, 8]


def test_netpoll_keeps_one_for_each_idle_p_on_the_global_queue_and_the_rest_local():
    q = RunQueues()
    for i in range(5):
        q.net_ready(i)
    assert q.take(0, 0, 4, npidle=2) == 0
    assert list(q.glob) == [1, 2] and list(q.local[0]) == [3, 4]


def test_sysmon_injects_the_network_onto_the_global_queue_after_10_ms():
    q = RunQueues()
    q.put_next(0, "busy")
    q.net_ready("n")
    q.take(0, 0, 1, 0)
    assert list(q.net) == ["n"]             # P 0 had its own work: nobody polled
    q.put_next(0, "busy2")
    q.ticks[0] = 1
    q.take(0, SYSMON_POLL_NS, 1, 0)
    assert list(q.glob) == ["n"] and not q.net


def test_a_dry_p_steals_half_of_another_ps_local_queue_from_its_head():
    q = RunQueues()
    q.put_head(0, list("abcde"))
    q.put_head(1, [])
    q.ticks = [1, 1]
    assert q.take(1, 0, 2, 0) == "a"        # (5 + 1) // 2 = 3 stolen: a runs, b, c queue on P 1
    assert list(q.local[1]) == ["b", "c"] and list(q.local[0]) == ["d", "e"]


def test_runnext_is_stolen_only_when_no_local_queue_has_any():
    q = RunQueues()
    q.put_next(0, "next0")
    q.put_head(2, ["local2"])
    q.ticks = [1, 1, 1]
    assert q.take(1, 0, 3, 0) == "local2"
    assert q.take(1, 0, 3, 0) == "next0"


def test_a_lower_gomaxprocs_moves_the_dropped_ps_queues_to_the_global_queue():
    q = RunQueues()
    q.put_next(2, "n2")
    q.put_next(2, "m2")                     # runnext m2, n2 in P 2's local queue
    q.ticks = [1, 1, 1]
    # GOMAXPROCS 3 -> 2: P 2's goroutines go to the global queue, which P 0 then serves
    assert q.take(0, 0, 2, 0) == "m2"
    assert q.peek_own(0) == "n2" and not q.glob       # globrunqget: 2 // 2 + 1 of them


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["next", "head", "global", "net", "take"]),
                          st.integers(0, 3), st.integers(0, 3)), max_size=80))
def test_no_goroutine_is_lost_or_duplicated(ops):
    q = RunQueues()
    put, got, k = [], [], 0
    for op, p, idle in ops:
        if op == "take":
            g = q.take(p, k * 1_000_000, 4, idle)
            if g is not None:
                got.append(g)
        else:
            k += 1
            put.append(k)
            {"next": lambda: q.put_next(p, k), "head": lambda: q.put_head(p, [k]),
             "global": lambda: q.put_global(k), "net": lambda: q.net_ready(k)}[op]()
        assert len(q) == len(put) - len(got)
    while (g := q.take(0, 10**12, 4, 0)) is not None:
        got.append(g)
    assert sorted(got) == put and not q.has_work()
