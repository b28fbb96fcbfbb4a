"""Go 1.26 starts the world with the mark workers placed: at the sweep termination ``procresize``
gives each idle P a waiting dedicated (or fractional) worker and an M
(``gcControllerState.assignWaitingGCWorker``, src/runtime/mgcpacer.go), and
``startTheWorldWithSema`` wakes those Ms one after another before it takes the pause's end time
(src/runtime/proc.go; golang/go#65694, CL 721002). On the lab's VM a woken M often takes its
waker's CPU (host.wake_affine_share, host.wake_preempt_share): the coordinator then makes its
remaining wake-ups, and ends the pause, only when it runs again. The kernel's trace of the lab's
service at GOMAXPROCS 32 shows it: the coordinator switched out by the first M it woke, back 7.4 ms
later, then its seven other wake-ups in 24 us and the pause's end (docs/model-notes.md)."""
from __future__ import annotations

import pytest

from cfsim.scenario import load_scenario
from cfsim.simulation import simulate

#: the lab's service at 60 % of one core on 2 CPUs: about 50 GC cycles in 30 s
SERVICE = ["host.cpus=2", "host.cpu_sharing=slices", "cgroup.cpu_limit=1", "workload.kind=open",
           "workload.rate_per_s=1500", "workload.cpu_ms_per_request=0.4", "workload.alloc_kb_per_request=16",
           "go.live_heap_mb=16", "run.duration_s=30", "run.warmup_s=1", "go.gomaxprocs=32"]
#: the lab VM's placement (docs/params/lab-host-wakeplace.toml)
PACKED = ["host.wake_affine_share=0.531", "host.wake_preempt_share=0.399"]


def _run(version: str, placement: list[str]) -> dict:
    return simulate(load_scenario("cpu-bound-threads", SERVICE + placement + [f'go.version="{version}"'])).summary


def test_go_1_26_wakes_the_mark_workers_inside_the_sweep_termination_pause():
    old, new = _run("1.25", PACKED), _run("1.26", PACKED)
    assert old["gc_cycles"] >= 40 and new["gc_cycles"] >= 40
    # Go 1.25: the workers start after the pause, through wakep; most pauses end at the
    # coordinator's own decision (tens of us). Go 1.26: eight dedicated workers woken inside it,
    # and most cycles see one of them take the coordinator's CPU for a turn (milliseconds)
    assert old["go_gc_duration_seconds_q0.5"] < 0.2e-3
    assert new["go_gc_duration_seconds_q0.5"] > 10 * old["go_gc_duration_seconds_q0.5"]
    # the world runs meanwhile (gcwaiting is cleared before the wake-ups): the same requests
    assert new["throughput_per_s"] == pytest.approx(old["throughput_per_s"], rel=0.01)


def test_without_a_woken_m_taking_its_wakers_cpu_the_order_changes_no_pause():
    off = ["host.wake_affine_share=0", "host.wake_preempt_share=0"]
    old, new = _run("1.25", off), _run("1.26", off)
    assert new["go_gc_duration_seconds_q0.5"] == pytest.approx(old["go_gc_duration_seconds_q0.5"], rel=0.05)
    assert new["gc_pause_total_s"] / new["gc_cycles"] == pytest.approx(
        old["gc_pause_total_s"] / old["gc_cycles"], rel=0.1)
