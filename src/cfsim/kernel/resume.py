"""What a process pays to resume after it has idled: its caches, TLB and branch predictors refilled.

A process that serves requests one at a time with gaps between them starts each request on a CPU
that ran something else meanwhile (another process, the kernel's softirqs, the idle loop, or, on
a virtual machine, another guest): its code, its data and its page-table walks miss where they hit
while it ran back to back. The longer it idled, the more was evicted, up to all of its working set.
That CPU is the program's own (the handler runs slower), charged to the process's cgroup, and it
depends on the host and the program together: small on a dedicated core, large on a shared
virtual machine.

:class:`ResumeCost` is that cost as a function of how long the whole process had no running
goroutine, ``cold x (1 - exp(-idle / tau))``, charged once per busy spell to the thread that
resumes it (:class:`cfsim.goruntime.runtime.GoRuntime`: the M that takes the first P of an idle
process; the runtime's CPU split counts it with the scheduler's overheads, ``sched_cpu_fraction``,
though on a real machine it is the program's own code running slower). It is apart from
:class:`cfsim.kernel.wakeup.WakeupCost`, the kernel's side of each
thread's sleep and wake-up: a Go process at GOMAXPROCS 8 wakes several Ms for one request, but
only the first finds everything cold; the spinning Ms that follow run a few microseconds of the
scheduler and park again. On the lab's 2-CPU virtual machine a request's CPU falls with the rate
at every GOMAXPROCS, by more than the runtime's own costs per busy spell explain (sysmon's polls,
the wake-ups and parks), and the extra Ms of GOMAXPROCS 8 cost little (docs/model-notes.md);
the ``idle-cost`` grid measures the curve, and ``docs/params/lab-host-resume.toml`` holds the
pair of values that fitted its GOMAXPROCS 1 and 2 runs best (a grid of pairs, each scored with
``cfsim validate``; docs/model-notes.md).

No public source gives its size for a Go service; it is off (0) by default.

>>> r = ResumeCost(cold_ns=80_000, tau_ns=500_000)
>>> r.cost_ns(0), r.cost_ns(250_000), r.cost_ns(5_000_000)
(0, 31477, 79996)
>>> ResumeCost().enabled, ResumeCost().cost_ns(10**9)
(False, 0)
"""
from __future__ import annotations

from dataclasses import dataclass

from cfsim.kernel.wakeup import cold_share


@dataclass(frozen=True)
class ResumeCost:
    """CPU [ns] a process pays when it resumes after ``idle_ns`` with nothing running."""

    cold_ns: float = 0.0            # after a long idle (approached with ``tau_ns``)
    tau_ns: float = 1_000_000.0     # idle time over which the process turns cold

    @property
    def enabled(self) -> bool:
        return self.cold_ns > 0

    def cost_ns(self, idle_ns: float) -> int:
        """CPU of resuming after ``idle_ns`` [ns] of idling."""
        if self.cold_ns <= 0 or idle_ns <= 0:
            return 0
        return int(self.cold_ns * cold_share(idle_ns, self.tau_ns))

    @classmethod
    def from_scenario(cls, sc) -> "ResumeCost":
        return cls(cold_ns=sc["host.resume_cold_us"] * 1e3, tau_ns=sc["host.resume_cold_ms"] * 1e6)
