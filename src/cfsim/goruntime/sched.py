"""Go scheduler rules (``src/runtime/proc.go``) and the CPU cost model of its slow paths.

Exact rules (golang/go ``src/runtime/proc.go``: ``findRunnable``, ``wakep``, ``injectglist``;
https://github.com/golang/go/blob/master/src/runtime/proc.go):

* ``findRunnable`` lets an M spin (steal) only if it is already spinning or
  ``2*nmspinning < gomaxprocs - npidle`` ("limit the number of spinning Ms to half the number of
  busy Ps");
* ``wakep`` starts an M only if there is an idle P and no M is spinning;
* ``injectglist`` (a netpoll batch of ``k`` goroutines) starts ``min(k, npidle)`` Ms.

Costs are parameters with priors (``[go]`` keys ``sched_*``; see the schema for ranges and
``docs/model-notes.md`` for the public measurements they rest on), not constants fitted to a story:

* a failed search (spin): ``a + b x P``: 4 ``stealWork`` passes over all Ps plus the
  ``checkRunqsNoP``/``checkTimersNoP`` re-scans are O(P) remote cache-line probes (~50-100 ns
  each, so ~0.3 us per P) on top of a fixed part (locks, ``netpoll(0)``, timers: ~3 us);
* a wake: ``futex_wake`` plus the wakee's switch-in (~2 us wake-to-run, apache/brpc#1859);
* a park: ``stopm`` -> ``futexsleep`` plus the switch-out (a few us);
* a goroutine switch on a running M (``gopark``/``schedule`` fast path): ~0.2 us.

Calibration path: pprof ``findRunnable``/``stealWork``/``runqgrab`` (spin), ``futexwakeup`` under
``wakep``/``startm`` (wake), ``stopm``/``futexsleep`` (park) at two GOMAXPROCS values.
"""
from __future__ import annotations

from dataclasses import dataclass

STEAL_TRIES = 4
FORCE_PREEMPT_NS = 10_000_000      # forcePreemptNS
DRAIN_CHECK_NS = 100_000           # drainCheckThreshold ~ 100 us of scanning (idle-worker poll)


def may_spin(already_spinning: bool, nmspinning: int, gomaxprocs: int, npidle: int) -> bool:
    """``findRunnable``: ``mp.spinning || 2*nmspinning < gomaxprocs - npidle``.

    >>> may_spin(False, 0, 8, 7), may_spin(False, 1, 8, 7), may_spin(False, 1, 8, 5)
    (True, False, True)
    """
    return already_spinning or 2 * nmspinning < gomaxprocs - npidle


def should_wakep(npidle: int, nmspinning: int) -> bool:
    """``wakep``: only with an idle P and no spinning M.

    >>> should_wakep(3, 0), should_wakep(3, 1), should_wakep(0, 0)
    (True, False, False)
    """
    return npidle > 0 and nmspinning == 0


def netpoll_wakeups(k: int, npidle: int) -> int:
    """``injectglist``: a batch of ``k`` ready goroutines starts ``min(k, npidle)`` Ms.

    >>> netpoll_wakeups(5, 30), netpoll_wakeups(40, 30), netpoll_wakeups(3, 0)
    (5, 30, 0)
    """
    return max(0, min(k, npidle))


@dataclass(frozen=True)
class SchedCosts:
    """CPU cost [ns] of scheduler slow paths; see the module docstring for the priors."""

    spin_base_ns: float = 3000.0
    spin_per_p_ns: float = 300.0
    wake_ns: float = 2000.0
    park_ns: float = 3000.0
    switch_ns: float = 200.0

    def spin(self, gomaxprocs: int) -> int:
        """One futile ``findRunnable`` search: ``a + b x P``."""
        return int(self.spin_base_ns + self.spin_per_p_ns * gomaxprocs)

    def steal(self, gomaxprocs: int) -> int:
        """A search that finds work: the fixed part plus, on average, half of one of the
        ``STEAL_TRIES + 2`` passes over the Ps that a futile search makes."""
        return int(self.spin_base_ns + self.spin_per_p_ns * gomaxprocs / (2 * (STEAL_TRIES + 2)))

    def wake(self) -> int:
        return int(self.wake_ns)

    def park(self) -> int:
        return int(self.park_ns)

    def switch(self) -> int:
        return int(self.switch_ns)

    @classmethod
    def from_go_section(cls, go: dict) -> "SchedCosts":
        return cls(spin_base_ns=go["sched_spin_base_us"] * 1e3, spin_per_p_ns=go["sched_spin_per_p_us"] * 1e3,
                   wake_ns=go["sched_wake_us"] * 1e3, park_ns=go["sched_park_us"] * 1e3,
                   switch_ns=go["sched_switch_us"] * 1e3)
