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
