"""What a thread pays the kernel each time it sleeps and is woken again, and how late it wakes.

A thread that blocks (``futex`` wait, ``nanosleep``, ``epoll_wait``) goes through ``__schedule``
to another task or the idle loop; when its timer fires or another thread wakes it
(``try_to_wake_up``), it is switched back in (``finish_task_switch``) and returns to user space.
The CPU of that path on the thread's side is charged to the thread, so to its cgroup's usage and
quota, and none of it is the program's own work. It depends on the host far more than on the
program: a few microseconds on bare metal, tens on a virtual machine (the timer and the halt of
an idle virtual CPU exit to the hypervisor), and more after a long sleep (the thread comes back
to caches and TLBs that other tasks, or the hypervisor, have refilled).

:class:`WakeupCost` is that cost as a function of the sleep's length,
``base + cold x (1 - exp(-sleep / tau))``, with the host's numbers measured by the lab's
``lab/cmd/wakebench`` (one OS thread alternating a fixed busy loop with ``nanosleep``; its CPU
outside the loop per cycle; :func:`fit_wakeup_curve` fits the curve). A saturated process never
sleeps and never pays it; a service that idles between requests pays it on every request, once
per OS thread woken onto an idle CPU (the Go runtime's M that takes the request, sysmon's wake-up
from its deep sleep). The engine (:class:`cfsim.engine.cfs.CfsEngine`) charges it to a thread woken
onto a CPU where none of the group's threads was queued, by how long that CPU had been idle: a
thread woken onto a busy CPU does not halt-and-exit it and pays only the switch.

A thread woken by another (``futex_wake``, a network interrupt) onto an idle CPU starts
running only after an inter-processor interrupt and the CPU's exit from idle
(``latency_ns``, ``host.wakeup_latency_us``): meanwhile a woken Go M holds its P and its
``nmspinning`` count, so the runtime's ``wakep`` starts no other M (``proc.go: wakep``).

A sleeping thread also wakes late: ``hrtimer_nanosleep`` arms the timer with the thread's timer
slack (50 us by default, ``init_task.timer_slack_ns``) and it fires at the end of that range,
plus the host's own interrupt latency (``timer_latency_ns``). The Go runtime's ``sysmon`` polls
with 20 us sleeps, so the latency sets how often it polls.

>>> w = WakeupCost(base_ns=20_000, cold_ns=70_000, cold_tau_ns=8_000_000)
>>> w.cycle_ns(50_000), w.cycle_ns(1_000_000), w.cycle_ns(20_000_000)
(20436, 28225, 84254)
>>> WakeupCost().cycle_ns(10**9), WakeupCost().enabled
(0, False)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

LINUX_TIMER_SLACK_NS = 50_000   # init_task.timer_slack_ns (include/linux/init_task.h)


def cold_share(idle_ns: float, tau_ns: float) -> float:
    """How far towards cold caches a CPU (or a process) has gone after ``idle_ns`` away:
    ``1 - exp(-idle / tau)``, the share of the whole cold cost a return then pays.

    >>> round(cold_share(8_000_000, 8_000_000), 4), round(cold_share(40_000_000, 8_000_000), 4)
    (0.6321, 0.9933)
    """
    return -math.expm1(-idle_ns / tau_ns)


@dataclass(frozen=True)
class WakeupCost:
    """CPU [ns] charged to a thread for one block-and-wake cycle after a sleep of ``sleep_ns``."""

    base_ns: float = 0.0          # a short sleep (tens of microseconds)
    cold_ns: float = 0.0          # extra after a long sleep (approached with ``cold_tau_ns``)
    cold_tau_ns: float = 10_000_000.0
    timer_latency_ns: float = 0.0  # how late a timer wakes a thread beyond its slack
    latency_ns: float = 0.0        # from a wake-up (futex, network) to running on an idle CPU

    @property
    def enabled(self) -> bool:
        return self.base_ns > 0 or self.cold_ns > 0

    def cycle_ns(self, sleep_ns: float) -> int:
        """CPU of one cycle after sleeping ``sleep_ns`` [ns]."""
        if self.cold_ns <= 0 or sleep_ns <= 0:
            return int(self.base_ns)
        return int(self.base_ns + self.cold_ns * cold_share(sleep_ns, self.cold_tau_ns))

    @classmethod
    def from_scenario(cls, sc) -> "WakeupCost":
        return cls(base_ns=sc["host.wakeup_us"] * 1e3, cold_ns=sc["host.wakeup_cold_us"] * 1e3,
                   cold_tau_ns=sc["host.wakeup_cold_ms"] * 1e6, timer_latency_ns=sc["host.timer_latency_us"] * 1e3,
                   latency_ns=sc["host.wakeup_latency_us"] * 1e3)


def fit_wakeup_curve(points: Iterable[tuple[float, float]]) -> tuple[float, float, float]:
    """Least-squares ``(base_us, cold_us, tau_ms)`` of ``base + cold x (1 - exp(-sleep / tau))``
    through ``(sleep_us, cycle_cpu_us)`` points (wakebench's output): a grid over ``tau``
    (0.2-200 ms, log-spaced), linear least squares for the other two at each, both kept >= 0.

    >>> pts = [(s, 20 + 70 * (1 - math.exp(-s / 8000))) for s in (50, 200, 1000, 5000, 20000, 50000)]
    >>> [round(v, 1) for v in fit_wakeup_curve(pts)]
    [20.0, 70.0, 8.0]
    """
    import numpy as np

    pts = [(float(s), float(c)) for s, c in points]
    if len(pts) < 3:
        raise ValueError(f"fit_wakeup_curve: need at least 3 (sleep, cpu) points, got {len(pts)}")
    s = np.array([p[0] for p in pts])
    c = np.array([p[1] for p in pts])

    def solve(tau_us: float) -> tuple[float, float, float]:
        x = -np.expm1(-s / tau_us)
        a = np.column_stack([np.ones_like(x), x])
        (base, cold), *_ = np.linalg.lstsq(a, c, rcond=None)
        if cold < 0:
            base, cold = float(np.mean(c)), 0.0
        if base < 0:
            base, cold = 0.0, max(0.0, float(np.dot(x, c) / np.dot(x, x)))
        return float(np.sum((base + cold * x - c) ** 2)), float(base), float(cold)

    # a coarse log grid over tau, then a fine one around its best point
    grid = np.geomspace(200.0, 200_000.0, 301)
    i = int(np.argmin([solve(t)[0] for t in grid]))
    fine = np.geomspace(grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)], 401)
    tau_us = float(fine[int(np.argmin([solve(t)[0] for t in fine]))])
    _, base, cold = solve(tau_us)
    return base, cold, tau_us / 1e3


def timer_latency_us(points: Iterable[tuple[float, float]], slack_us: float = LINUX_TIMER_SLACK_NS / 1e3) -> float:
    """The host's timer latency beyond the slack [us]: the median over ``(sleep_us, late_us)``
    points of the short sleeps (<= 1 ms; longer ones also count the ms rounding of other
    timers) of how late each woke, minus the slack, not below 0.

    >>> timer_latency_us([(50, 84.0), (200, 80.0), (500, 90.0), (20000, 200.0)])
    34.0
    """
    import statistics

    late = [lt for s, lt in points if s <= 1000]
    if not late:
        raise ValueError("timer_latency_us: no sleep of 1 ms or less among the points")
    return max(0.0, float(statistics.median(late)) - slack_us)
