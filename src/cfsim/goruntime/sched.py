"""Go scheduler rules (``src/runtime/proc.go``) and the CPU cost model of its slow paths.

Exact rules (golang/go ``src/runtime/proc.go``: ``findRunnable``, ``wakep``, ``injectglist``;
https://github.com/golang/go/blob/master/src/runtime/proc.go):

* ``findRunnable`` lets an M spin (steal) only if it is already spinning or
  ``2*nmspinning < gomaxprocs - npidle`` ("limit the number of spinning Ms to half the number of
  busy Ps");
* ``wakep`` starts an M only if there is an idle P and no M is spinning;
* ``injectglist`` (a netpoll batch of ``k`` goroutines) starts ``min(k, npidle)`` Ms.

Costs are parameters with priors (``[go]`` keys ``sched_*``; see the schema for ranges and
``docs/model-notes.md`` for the public measurements they rest on), not constants fitted to a
story. Each follows a code path of ``src/runtime/proc.go`` (Go 1.26):

* a futile search (``findRunnable`` -> ``stealWork``: ``stealTries = 4`` passes over all Ps,
  then, after ``releasep``, ``checkRunqsNoP``/``checkTimersNoP`` re-scan every P):
  ``spin_base + P x spin_per_p x xfer(n)``. ``spin_per_p`` is the probe of one other P's run
  queue head/tail and timer mask (~6 probes per busy P; idle Ps are skipped through ``idlepMask``;
  the lab's 2-CPU grids give 0.02-0.05 us per P); ``xfer(n) = 1 + xfer_growth x log2(n / 2)``
  with ``n = min(P, host CPUs)`` is how the cost of the cache-line transfer behind a probe grows
  with the number of CPUs the Ms are spread over (more cores, a longer on-chip mesh, a second
  socket: ~40-50 ns core to core on a small host, 100-200 ns across a large or two-socket one);
* a wake (``wakep`` -> ``startm`` -> ``notewakeup`` -> ``futexwakeup``, and the wakee's
  switch-in): ~2 us wake-to-run on bare metal (apache/brpc#1859), several times that in a VM
  where the wake-up IPI exits to the hypervisor;
* a park (``stopm`` -> ``mPark`` -> ``notesleep`` -> ``futexsleep``, plus the switch-out);
* a goroutine switch on a running M (``gopark``/``schedule`` fast path): ~0.2 us;
* ``sched.lock`` contention: ``wakep``, ``pidleput``/``pidleget``, ``globrunqget`` all take the
  one scheduler lock; every other M running the scheduler at the same time adds ``lock`` to a
  slow path (a contended ``lock2`` spins, yields and futex-sleeps; golang/go#28808: 56 Ps,
  ``runtime.lock`` 23 % of CPU). Contenders are the busy Ps on distinct CPUs: ``min(busy Ps,
  host CPUs) - 1``, so the term grows with the parallelism a host lets a process have.

Calibration path: pprof ``findRunnable``/``stealWork``/``runqgrab`` (spin), ``futexwakeup`` under
``wakep``/``startm`` (wake), ``stopm``/``futexsleep`` (park) at two GOMAXPROCS values; voluntary
context switches per request (``/proc/<pid>/task/*/status``) count the futex sleeps.

"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Final

from cfsim.kernel.wakeup import LINUX_TIMER_SLACK_NS

STEAL_TRIES: Final = 4
SYSMON_MIN_DELAY_US: Final = 20           # sysmon: "start with 20us sleep..."
SYSMON_IDLE_DOUBLE: Final = 50            # "... start doubling the sleep after 1ms..."
SYSMON_MAX_DELAY_US: Final = 10_000       # "... up to 10ms"
FORCE_PREEMPT_NS: Final = 10_000_000      # forcePreemptNS
DRAIN_CHECK_NS: Final = 100_000           # drainCheckThreshold ~ 100 us of scanning (idle-worker poll)


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


class Sysmon:
    """``sysmon`` (``src/runtime/proc.go``), the runtime's monitor thread, which runs without a P.

    Its loop: ``usleep(delay)`` with ``delay`` = 20 us while ``idle <= 50`` and doubling up to
    10 ms after that (``idle`` counts polls in a row where ``retake`` took nothing back; it never
    does in the workloads modelled, so ``idle`` only grows); then, if every P is idle
    (``sched.npidle == gomaxprocs``), it sleeps on ``sched.sysmonnote`` (futex) until a goroutine
    enters a system call (``reentersyscall`` -> ``entersyscall_sysmon`` -> ``notewakeup``), which
    resets ``idle = 0, delay = 20`` ("a bet that ... it may need to do it again shortly after the
    application starts work again"), or until the next timer (no reset). Every poll is a
    ``nanosleep`` round trip plus ``retake``'s pass over every P. On Linux a 20 us ``nanosleep``
    lasts 20 us plus up to the thread's timer slack (50 us by default): the hrtimer is armed
    with that range and fires at its end unless another interrupt comes first, and a virtual
    machine adds its own timer latency (``host.timer_latency_us``, passed in ``slack_ns``). A
    poll's cost (``go.sysmon_poll_us``) includes its sleep; with ``host.wakeup_us`` the runtime
    also charges the wake-up from the deep sleep the kernel's side of a sleep that long
    (``deep_since_ns``; :class:`cfsim.kernel.wakeup.WakeupCost`). The loop sleeps again only
    after the poll has run, so one turn lasts the delay, the slack, the wait for a CPU (all in
    ``slack_ns``) and the poll's own CPU (``run_ns``): the time asleep, runnable and running that
    the thread's ``/proc/<pid>/task/<tid>/schedstat`` splits a turn into.

    So a process that goes idle between requests pays, per busy spell of ``L`` ns, a futex wake
    of sysmon plus about ``L / (20 us + slack + run)`` polls (at most 51 before the doubling): a
    cost per wake-up of the process that a saturated process (one long busy spell) does not pay.

    The state is advanced lazily (:meth:`advance`) at the instants the process goes busy or
    idle, so polling costs no simulation events.

    >>> sm = Sysmon(slack_ns=50_000)
    >>> sm.wake(0)                      # a request arrives at an idle process
    >>> sm.advance(1_000_000, busy=True)  # 1 ms busy: polls at 70 us intervals
    14
    >>> sm.advance(1_100_000, busy=False)  # the next poll finds every P idle: deep sleep
    1
    >>> sm.deep, sm.advance(5_000_000, busy=False)
    (True, 0)
    >>> sm = Sysmon(slack_ns=50_000, run_ns=10_000)  # each poll runs 10 us: a turn of 80 us
    >>> sm.wake(0)
    >>> sm.advance(1_000_000, busy=True)
    12
    """

    __slots__ = ("slack_ns", "run_ns", "deep", "deep_since_ns", "next_ns", "idle", "delay_us")

    def __init__(self, slack_ns: int = LINUX_TIMER_SLACK_NS, run_ns: int = 0):
        self.slack_ns = int(slack_ns)
        self.run_ns = int(run_ns)   # the poll's own CPU: the loop sleeps again after it has run
        self.deep = True
        self.deep_since_ns = 0   # when the last deep sleep began (a longer sleep wakes colder)
        self.next_ns = 0
        self.idle = 0
        self.delay_us = SYSMON_MIN_DELAY_US

    def wake(self, now_ns: int) -> None:
        """A goroutine entered a system call while sysmon slept on ``sysmonnote``: it wakes
        with ``idle = 0, delay = 20 us``."""
        self.deep = False
        self.idle = 0
        self.delay_us = SYSMON_MIN_DELAY_US
        self.next_ns = now_ns + self._sleep_ns()

    def _sleep_ns(self) -> int:
        return self.delay_us * 1000 + self.slack_ns + self.run_ns

    def next_poll_ns(self, t_ns: int) -> int | None:
        """When the first poll at or after ``t_ns`` runs, with some P busy until then (None while
        sysmon sleeps on ``sysmonnote``); the state is left as it is."""
        if self.deep:
            return None
        if self.next_ns >= t_ns:
            return self.next_ns
        probe = copy.copy(self)
        probe.advance(t_ns - 1, busy=True)
        return probe.next_ns

    def preempt_at(self, t_sched_ns: int) -> int | None:
        """When ``retake`` preempts a goroutine that a P scheduled at ``t_sched_ns`` and that runs
        on: the first poll after it sees the P's new ``schedtick`` and records that poll's time
        (``schedwhen``); the first poll at least ``forcePreemptNS`` later preempts. With polls
        every 10 ms a CPU-bound goroutine therefore runs 10-20 ms, not 10.

        >>> sm = Sysmon(slack_ns=50_000)
        >>> sm.wake(0)
        >>> sm.advance(100_000_000, busy=True) > 0
        True
        >>> t = sm.next_ns + 1_000          # scheduled just after a 10 ms poll
        >>> round((sm.preempt_at(t) - t) / 1e6, 2)
        20.1
        """
        seen = self.next_poll_ns(t_sched_ns + 1)
        if seen is None:
            return None
        return self.next_poll_ns(seen + FORCE_PREEMPT_NS)

    def advance(self, now_ns: int, busy: bool) -> int:
        """Run the polls due by ``now_ns`` with the Ps ``busy`` (some P held) or all idle since
        the last call; returns how many polls ran. A poll that finds every P idle puts sysmon
        in deep sleep."""
        if self.deep:
            return 0
        n = 0
        while self.next_ns <= now_ns:
            if not busy:
                self.deep = True
                self.deep_since_ns = self.next_ns
                return n + 1
            if self.idle < SYSMON_IDLE_DOUBLE:
                # 20 us polls: all those due (up to the 50th) in one step
                step = self._sleep_ns()
                k = min((now_ns - self.next_ns) // step + 1, SYSMON_IDLE_DOUBLE - self.idle)
                n += int(k)
                self.idle += int(k)
                self.next_ns += int(k) * step
                continue
            n += 1
            self.idle += 1
            if self.idle > SYSMON_IDLE_DOUBLE:
                self.delay_us = min(SYSMON_MAX_DELAY_US, self.delay_us * 2)
                if self.delay_us == SYSMON_MAX_DELAY_US:
                    # steady 10 ms polling: jump over the rest in one step
                    step = self._sleep_ns()
                    k = (now_ns - self.next_ns) // step
                    n += int(k)
                    self.idle += int(k)
                    self.next_ns += int(k) * step
            self.next_ns += self._sleep_ns()
        return n


def xfer_factor(gomaxprocs: int, host_cpus: int, growth: float) -> float:
    """How much dearer a probe of another P is than on a 2-CPU host: ``1 + growth x log2(n/2)``
    with ``n = min(GOMAXPROCS, host CPUs)`` the CPUs the Ms are spread over (>= 1).

    >>> xfer_factor(8, 2, 0.15), xfer_factor(32, 32, 0.15), round(xfer_factor(64, 128, 0.15), 2)
    (1.0, 1.6, 1.75)
    """
    n = max(2, min(int(gomaxprocs), int(host_cpus)))
    return 1.0 + growth * math.log2(n / 2)


def lock_contenders(searching: int, park_wake_per_ns: float, park_wake_ns: float, host_cpus: int) -> float:
    """Other Ms contending for ``sched.lock`` with one on a scheduler slow path: the spinning or
    searching Ms besides it, and the Ms parking or being woken, counted by Little's law as their
    recent rate times the time each takes (the model charges a park or a wake-up as a cost, not as
    a running segment); a count of the host's CPUs or more is taken as CPUs - 1 (one below it is
    kept as it is). A P running a goroutine takes no scheduler lock; ``findRunnable``'s global
    queue and ``pidleput``, ``stopm``'s ``mput`` and ``startm``'s ``pidleget`` do
    (src/runtime/proc.go).

    >>> lock_contenders(0, 0.0, 0.0, 8), lock_contenders(30, 0.0, 0.0, 8), lock_contenders(3, 0.0, 0.0, 64)
    (0.0, 7.0, 3.0)
    >>> round(lock_contenders(1, 100_000 / 1e9, 9_000.0, 64), 3)  # 100,000 parks and wake-ups a second, 9 us each
    1.9
    """
    n: float = searching + park_wake_per_ns * park_wake_ns
    if n >= host_cpus:
        n = float(host_cpus - 1)
    return n if n > 0 else 0.0


def smt_inflation(running: int, host_cpus: int, threads_per_core: int, slowdown: float) -> float:
    """CPU per unit of work of a thread when ``running`` threads of the process run on a host of
    ``host_cpus`` hardware threads, ``threads_per_core`` per core: the kernel places threads on
    idle cores first (``select_idle_core`` in ``kernel/sched/fair.c``), so threads beyond one per
    core pair up; a paired thread needs ``1 + slowdown`` times the CPU for the same work. The
    result is the average over the running threads.

    >>> smt_inflation(3, 6, 2, 1.0), smt_inflation(6, 6, 2, 1.0), smt_inflation(4, 6, 2, 1.0)
    (1.0, 2.0, 1.5)
    """
    if threads_per_core <= 1 or running <= 0:
        return 1.0
    cores = max(1, host_cpus // threads_per_core)
    if running <= cores:
        return 1.0
    paired = min(running, threads_per_core * (running - cores) // (threads_per_core - 1))
    return 1.0 + slowdown * paired / running


@dataclass(frozen=True)
class SchedCosts:
    """CPU cost [ns] of scheduler slow paths; see the module docstring for the priors."""

    spin_base_ns: float = 3000.0
    spin_per_p_ns: float = 50.0
    wake_ns: float = 2000.0
    park_ns: float = 3000.0
    switch_ns: float = 200.0
    xfer_growth: float = 0.15
    lock_ns: float = 1000.0
    sysmon_poll_ns: float = 0.0
    sysmon_wait_ns: float = 0.0

    def spin(self, gomaxprocs: int, host_cpus: int = 2) -> int:
        """One futile ``findRunnable`` search: ``a + b x P x xfer(min(P, CPUs))``."""
        return int(self.spin_base_ns + self.spin_per_p_ns * gomaxprocs
                   * xfer_factor(gomaxprocs, host_cpus, self.xfer_growth))

    def steal(self, gomaxprocs: int, host_cpus: int = 2) -> int:
        """A search that finds work: the fixed part plus, on average, half of one of the
        ``STEAL_TRIES + 2`` passes over the Ps that a futile search makes."""
        return int(self.spin_base_ns + self.spin_per_p_ns * gomaxprocs
                   * xfer_factor(gomaxprocs, host_cpus, self.xfer_growth) / (2 * (STEAL_TRIES + 2)))

    def wake(self) -> int:
        return int(self.wake_ns)

    def park(self) -> int:
        return int(self.park_ns)

    def switch(self) -> int:
        return int(self.switch_ns)

    def sysmon_poll(self, gomaxprocs: int) -> int:
        """One sysmon poll: the ``nanosleep`` round trip plus ``retake``'s look at every P."""
        if not self.sysmon_poll_ns:
            return 0
        return int(self.sysmon_poll_ns + self.spin_per_p_ns * gomaxprocs)

    def lock(self) -> int:
        """``sched.lock`` cost per other M in the scheduler at the same time."""
        return int(self.lock_ns)

    @classmethod
    def from_go_section(cls, go: dict) -> "SchedCosts":
        return cls(spin_base_ns=go["sched_spin_base_us"] * 1e3, spin_per_p_ns=go["sched_spin_per_p_us"] * 1e3,
                   wake_ns=go["sched_wake_us"] * 1e3, park_ns=go["sched_park_us"] * 1e3,
                   switch_ns=go["sched_switch_us"] * 1e3, xfer_growth=go["sched_xfer_growth"],
                   lock_ns=go["sched_lock_us"] * 1e3, sysmon_poll_ns=go.get("sysmon_poll_us", 0.0) * 1e3,
                   sysmon_wait_ns=go.get("sysmon_wait_us", 0.0) * 1e3)
