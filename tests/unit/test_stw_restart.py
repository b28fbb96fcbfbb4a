"""The world's restart as the runtime does it (go.stw_restart_chain): at a stop each other M
reaches its safe point and sleeps (gcstopm -> stopm), the coordinator sleeps on sched.stopnote
until the last one wakes it, and startTheWorldWithSema leaves idle every P with nothing in its own
queue (the preempted goroutines wait in the global queue: gopreempt_m), so the spinning chain
wakes the Ms again one at a time (src/runtime/proc.go). A twin that lets the stopped Ms go on at
once, unwoken, counts none of those sleeps; the lab's allocation-heavy stream at GOMAXPROCS 8
under one core sleeps 0.41-0.55 times a record (data/lab/gc-memory-quiet, threads)."""
from __future__ import annotations

from cfsim.scenario import load_scenario
from cfsim.simulation import simulate

#: the lab's allocation-heavy stream (64 KiB a record), GOGC off under a GOMEMLIMIT twice the
#: 16 MiB live heap: about 40 GC cycles a second, two stops each
STREAM = ["host.cpus=2", "cgroup.cpu_limit=1", "workload.kind=stream", "workload.workers=8",
          "workload.rate_per_s=20000", "workload.cpu_ms_per_item=0.05", "workload.alloc_kb_per_item=64",
          "go.live_heap_mb=16", "go.gogc=-1", "go.gomemlimit_mb=32", "run.duration_s=2", "run.warmup_s=0.5"]


def _run(gomaxprocs: int, chain: bool) -> dict:
    return simulate(load_scenario("cpu-bound-threads", STREAM + [
        f"go.gomaxprocs={gomaxprocs}", f"go.stw_restart_chain={str(chain).lower()}"])).summary


def _wakes_per_cycle(s: dict) -> float:
    return s["os_thread_wakes_per_s"] * 1.5 / s["gc_cycle_count"]


def test_each_stop_puts_the_other_ms_to_sleep_and_the_start_wakes_them():
    off, on = _run(8, False), _run(8, True)
    assert on["gc_cycle_count"] > 30
    # two stops a cycle, and after each the Ms that get the stopped work back are woken one at a
    # time (measured: 6.4 -> 14.1 a cycle); the unwoken restart adds none
    assert _wakes_per_cycle(on) - _wakes_per_cycle(off) > 5
    assert _wakes_per_cycle(on) > 1.8 * _wakes_per_cycle(off)
    # one P: no other M to stop, nothing changes
    assert _run(1, True) == _run(1, False)


def test_the_default_keeps_the_unwoken_restart():
    s = load_scenario("cpu-bound-threads", STREAM)
    assert s["go.stw_restart_chain"] is False


def test_the_ms_sleeps_are_counted_by_the_path_that_put_them_to_sleep():
    """``os_thread_sleeps_<cause>_per_s`` split the Ms' parks by the runtime path that put them to
    sleep, as the lab's ``lab.sleep_stacks_s`` does (cfsim.lab.sleeps): every park is an idle M's,
    the poller's, or a stop's (an M at its safe point, the coordinator); gcMarkDone's ragged
    barrier, where the coordinator waits holding its P, is counted apart."""
    from cfsim.goruntime.run_accounting import SLEEP_CAUSES
    for chain in (False, True):
        s = _run(8, chain)
        by = {c: s[f"os_thread_sleeps_{c}_per_s"] for c in SLEEP_CAUSES}
        parks = by["idle"] + by["netpoll"] + by["stw_stopped"] + by["stw_coordinator"]
        assert abs(parks - s["os_thread_parks_per_s"]) < 1e-6 * max(1.0, parks)
        # a stop puts the other Ms to sleep only where the restart is the runtime's
        assert (by["stw_stopped"] * 1.5 > s["gc_cycle_count"]) is chain   # 1.5 s window
        # eight Ps on two CPUs under a quota: some Ps flush late, so the barrier waits
        assert by["ragged_barrier"] > 0
