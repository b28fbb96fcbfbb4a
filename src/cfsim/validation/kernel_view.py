"""The kernel's side of a lab run beside its twin: thread switches the model does not charge.

A lab run recorded with ``lab.perf_s`` (:mod:`cfsim.lab.perf`) counts every context switch of the
workload's threads and the system calls an M sleeps in. The model's runtime parks Ms (``stopm`` ->
``futexsleep``) and wakes them (``startm`` -> ``futexwakeup``); a twin on time-sliced CPUs
(:mod:`cfsim.engine.slices`) also counts the switches between its threads on a CPU, voluntary and
involuntary, a load generator's preemptions included, while the fluid engine shares a CPU without
switches. This table puts them side by side, so a report says how much switching the twin leaves
out. It is a diagnostic without a goal.
"""
from __future__ import annotations

from typing import Any, Mapping

#: system calls in which an M can sleep (park, sysmon's usleep, netpoll), as perf counts them
SLEEP_SYSCALLS = ("syscalls:sys_enter_futex", "syscalls:sys_enter_nanosleep", "syscalls:sys_enter_epoll_pwait")


def kernel_view(manifest: Mapping[str, Any], simulated_summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """``None`` for a run without perf counters; else the lab's switches, sleeping system calls
    and kernel CPU share per second beside the twin's M wake-ups and parks per second.

    >>> kernel_view({"perf": {"per_s": {"context-switches": 14000.0, "syscalls:sys_enter_futex": 80.0,
    ...              "syscalls:sys_enter_nanosleep": 200.0, "syscalls:sys_enter_epoll_pwait": 190.0},
    ...              "kernel_fraction": 0.33}}, {"os_thread_wakes_per_s": 0.0, "os_thread_parks_per_s": 0.0})
    {'lab_context_switches_per_s': 14000.0, 'lab_sleep_syscalls_per_s': 470.0, 'lab_kernel_fraction': 0.33, 'model_thread_switches_per_s': 0.0}
    """
    perf = manifest.get("perf") or {}
    rate = perf.get("per_s") or {}
    if rate.get("context-switches") is None:
        return None
    sleeps = [rate.get(k) for k in SLEEP_SYSCALLS]
    wakes, parks = simulated_summary.get("os_thread_wakes_per_s"), simulated_summary.get("os_thread_parks_per_s")
    vol = simulated_summary.get("context_switches_voluntary_per_s")
    invol = simulated_summary.get("context_switches_involuntary_per_s")
    out = {"lab_context_switches_per_s": rate["context-switches"],
           "lab_sleep_syscalls_per_s": None if any(v is None for v in sleeps) else float(sum(sleeps)),
           "lab_kernel_fraction": perf.get("kernel_fraction"),
           "model_thread_switches_per_s": None if wakes is None or parks is None else wakes + parks}
    if vol is not None and invol is not None:
        out["model_context_switches_per_s"] = vol + invol
    return out
