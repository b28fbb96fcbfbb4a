"""The host + CFS bandwidth engine with time slices: each CPU runs one of its queued threads at a
time, in turns of the fair scheduler's base slice, instead of sharing itself among them.

:class:`cfsim.engine.cfs.CfsEngine` shares a CPU equally among its runnable threads at every
instant (processor sharing). That is exact for the CPU a group gets, but not for *when* each
thread runs: on a real CPU one thread runs while the others wait for their turn
(:mod:`cfsim.kernel.eevdf`: a slice of ``sysctl_sched_base_slice``, noticed at the tick; a
woken thread waits for the running one's slice to end, ``RUN_TO_PARITY``). With more runnable
threads than CPUs - GOMAXPROCS above the CPUs, say - this decides what the Go scheduler sees: a
P whose M is waiting for a CPU still holds its goroutines while the running Ms finish theirs,
run dry, steal, spin and park, so OS-thread wake-ups and parks happen that processor sharing
never shows.

Every switch between two threads on a CPU is counted (``switches_voluntary``: the running
thread blocked; ``switches_involuntary``: its slice ended with others waiting), and costs the
thread switched in CPU (``__schedule``, ``finish_task_switch``, cache and TLB refills: kernel time
charged to the group), so the group's usage and quota include it. With ``thread_switch_ns`` unset
every change of thread on a CPU costs ``switch_ns``. With it set, the switches are told apart as
``context_switch`` in ``kernel/sched/core.c`` tells them: a switch straight from one of the group's
threads to another keeps the address space (``switch_mm_irqs_off`` finds the same mm) and costs
``thread_switch_ns``; a thread switched in on a CPU the group had left (idle, or running only
another process's short task) pays nothing here, because the wake-up rule (:class:`cfsim.kernel.wakeup.WakeupCost`) prices the sleep, the wake-up and the switch
from the idle task together; a thread switched back in after another process's task pays
``switch_ns``.

Another process's short task on the host (a load generator handling a response:
:meth:`SlicedCfsEngine.neighbour_burst`) runs on a CPU where no thread of the group runs if there
is one; otherwise it preempts a running thread of the group (the woken task of a group that
mostly sleeps is eligible with an earlier deadline than the long-running group's: EEVDF wake-up
preemption between groups, ``check_preempt_wakeup_fair``), which waits for the burst, pays
``switch_ns`` to be switched back in, and counts an involuntary switch. That is how a load
generator on the same host slows a process whose threads hold every CPU, and not one that
leaves a CPU idle (GOMAXPROCS below the CPUs). Bursts that arrive while the other process runs
queue behind it; while a thread of the group waits on that CPU the two take turns of one base
slice each (equal weights, as the lab's cgroups have: EEVDF gives two runnable entities of equal
weight equal shares, ``pick_eevdf`` in ``kernel/sched/fair.c``), so a process that wants more
than the host has slows the group's thread to half its CPU and never stops it; what it cannot
run yet is its backlog (``_nb_owed``), which takes the whole CPU whenever the group leaves it.

Bandwidth, placement and balancing are the base engine's: only the sharing of a CPU differs.
"""
from __future__ import annotations

from collections import deque
from typing import Callable

import simpy

from cfsim.engine.cfs import _EPS, Bandwidth, CfsEngine
from cfsim.kernel import eevdf
from cfsim.kernel.wakeup import WakeupCost


class SlicedCfsEngine(CfsEngine):
    """:class:`CfsEngine` with one running thread per CPU at a time (see the module docstring).

    >>> eng = SlicedCfsEngine(cpus=1, hz=1000, seed=1)
    >>> done = []
    >>> for t in [eng.new_thread() for _ in range(2)]:
    ...     eng.run(t, 3_000_000, lambda tid: done.append((tid, eng.now)))
    >>> eng.run_until(10**9)
    >>> done   # 1 ms ticks, 0.75 ms slices: turns of 1 ms each
    [(0, 5000000), (1, 6000000)]
    >>> eng.switches_involuntary, eng.switches_voluntary
    (4, 1)
    """

    __slots__ = ("_rq", "_t_left", "_slice_left", "_base_slice", "_switch_ns", "_nb_until", "_nb_next",
                 "_nb_owed", "_nb_cap", "_nb_wake_share", "_last_ran", "_thread_switch_ns", "_idle_switch_ns",
                 "_on_switch_in", "switches_voluntary",
                 "switches_involuntary", "neighbour_preemptions")

    def __init__(self, cpus: int, hz: int = 1000, bandwidth: Bandwidth | None = None, seed: int = 0,
                 env: simpy.Environment | None = None,
                 prefetch: bool = True, background_cores: float = 0.0, switch_ns: int = 0,
                 slice_ns: int | None = None, neighbours: bool = False, wakeup: WakeupCost | None = None,
                 thread_switch_ns: int | None = None):
        # neighbour bursts pause a CPU's silo consumption, which the prefetch arithmetic
        # (slices taken ahead at a steady pace) does not allow for
        super().__init__(cpus, hz, bandwidth, seed, env, prefetch and not neighbours, background_cores, wakeup)
        if switch_ns < 0:
            raise ValueError(f"host.context_switch_us: must be >= 0 (got {switch_ns / 1000})")
        self._rq: list[deque[int]] = [deque() for _ in range(cpus)]
        self._slice_left = [0.0] * cpus     # CPU left in the running thread's slice [ns]
        self._nb_until = [0] * cpus         # another process's task has the CPU until then
        self._nb_cap = [0] * cpus           # where its turn ends while a thread of the group waits
        self._nb_owed = [0] * cpus          # its backlog behind that turn
        self._nb_next = 0                   # where the search for a CPU to preempt starts
        self._nb_wake_share = 0.0           # set_neighbour_wake_share: off, no draw
        self._last_ran = [-1] * cpus        # the thread that ran last on each CPU
        self._on_switch_in: dict[int, Callable[[], None]] = {}   # when_running's waiters, by thread
        self._base_slice = eevdf.base_slice_ns(cpus) if slice_ns is None else int(slice_ns)
        self._switch_ns = int(switch_ns)
        if thread_switch_ns is not None and thread_switch_ns < 0:
            raise ValueError(f"host.thread_switch_us: must be >= 0 (got {thread_switch_ns / 1000})")
        # unset: one price for every change of thread on a CPU (the rule the earlier fits were made with)
        self._thread_switch_ns = self._switch_ns if thread_switch_ns is None else int(thread_switch_ns)
        self._idle_switch_ns = self._switch_ns if thread_switch_ns is None else 0
        self._t_left: list[float] = []
        self.switches_voluntary = 0
        self.switches_involuntary = 0
        self.neighbour_preemptions = 0

    def set_wake_placement(self, affine_share: float, preempt_share: float, affine_away: float | None = None) -> None:
        super().set_wake_placement(affine_share, preempt_share, affine_away)
        self.wakes_preempting_enabled = preempt_share > 0.0

    def set_neighbour_wake_share(self, share: float) -> None:
        """The share of another process's wake-ups by the group's running thread, made while a
        CPU is idle, that take the waker's CPU instead (``host.neighbour_wake_share``;
        :meth:`_nb_beside_waker`)."""
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"host.neighbour_wake_share: must be in [0, 1] (got {share})")
        self._nb_wake_share = float(share)

    def when_running(self, tid: int, fn: Callable[[], None]) -> None:
        c = self._t_cpu[tid]
        if c < 0 or self._rq[c][0] == tid:
            fn()
        else:
            self._on_switch_in[tid] = fn

    def _switched_in(self, tid: int) -> None:
        fn = self._on_switch_in.pop(tid, None)
        if fn is not None:
            fn()

    def new_thread(self, name: str = "", wakeup_cost: bool = True) -> int:
        tid = super().new_thread(name, wakeup_cost)
        self._t_left.append(0.0)
        return tid

    # ------------------------------------------------------------------ per-thread progress
    def _left_ns(self, c: int, tid: int) -> int:
        left = self._t_left[tid]
        return int(round(left)) if left > 0 else 0

    def _bank(self, c: int, tid: int) -> None:
        pass   # _advance banks the running thread's CPU as it goes

    def thread_cpu_ns(self, tid: int) -> int:
        c = self._t_cpu[tid]
        if c >= 0:
            self._advance(c, self.now)
        return int(round(self._t_base[tid]))

    def neighbour_burst(self, burst_ns: int, waker: int = -1) -> None:
        """Another process's task wakes for ``burst_ns`` of CPU (see the module docstring).
        ``waker``: the group's running thread whose write woke it (a server's response to a
        load generator on the same host), or -1."""
        if burst_ns <= 0:
            return
        now = self.now
        nb, nq, thr = self._nb_until, self._queued, self._throttled
        n = self.ncpus
        if waker >= 0 and self._nb_wake_share > 0.0 and self._nb_beside_waker(waker, now, burst_ns):
            return
        for c in range(n):
            if nb[c] <= now and (nq[c] == 0 or thr[c]):
                nb[c] = now + burst_ns   # a CPU the group leaves idle
                return
        busy = [c for c in range(n) if nb[c] > now]
        if busy:
            # the other process is running already: it takes the work without a wake-up, within
            # its turn while a thread of the group waits there, as backlog beyond it
            owed = self._nb_owed
            c = min(busy, key=lambda d: (nb[d] + owed[d], d))
            self._advance(c, now)
            if nq[c] and not thr[c]:
                end = nb[c] + burst_ns
                cap = max(self._nb_cap[c], nb[c])
                if end > cap:
                    owed[c] += end - cap
                    end = cap
                nb[c] = end
                self._schedule_cpu(c)
            else:
                nb[c] += burst_ns
            return
        start = self._nb_next
        self._nb_next = (start + 1) % n
        owed = self._nb_owed
        for i in range(n):
            c = (start + i) % n
            if not owed[c]:
                # wake-up preemption of the group's running thread (where the other process
                # waits for its turn with a backlog it is queued already: no wake-up there)
                self._advance(c, now)
                self._nb_turn(c, now, burst_ns)
                head = self._rq[c][0]
                self._t_left[head] += self._switch_ns
                self.switches_involuntary += 1
                self.neighbour_preemptions += 1
                self._schedule_cpu(c)
                return
        # it waits for its turn on every CPU: the work joins the smallest backlog
        c = min(range(n), key=lambda d: (owed[d], d))
        owed[c] += burst_ns

    def _nb_beside_waker(self, waker: int, now: int, burst_ns: int) -> bool:
        """The other process's task woken by the group's running thread ``waker`` while a CPU is
        idle (so the engine would put it there) and that process runs nowhere (so a thread of it
        must wake): with the share :meth:`set_neighbour_wake_share` set, the kernel puts it on the
        waker's CPU instead (``select_task_rq_fair``'s wake-affine choice; this VM packs wakees
        beside their waker, see :meth:`set_wake_placement`) and runs it at once (EEVDF's wake-up
        preemption), and the waker waits for its turn, pays the switch back in and counts an
        involuntary switch. True when it took the waker's CPU."""
        wc = self._t_cpu[waker]
        if wc < 0 or self._throttled[wc] or self._rq[wc][0] != waker or self._nb_until[wc] > now:
            return False
        nb, nq = self._nb_until, self._queued
        idle = False
        for c in range(self.ncpus):
            if nb[c] > now:
                return False   # it runs already: the response is its work, no wake-up
            if nq[c] == 0 or self._throttled[c]:
                idle = True
        if not idle:
            return False
        if self._wake_rng.random() >= self._nb_wake_share:
            return False
        self._advance(wc, now)
        self._nb_turn(wc, now, burst_ns)
        self._t_left[waker] += self._switch_ns
        self.switches_involuntary += 1
        self.neighbour_preemptions += 1
        self._schedule_cpu(wc)
        return True

    def _turn_end(self, t: int) -> int:
        """Where a turn of one base slice begun at ``t`` ends: the tick that notices it."""
        return eevdf.slice_end_ns(t, self._base_slice, self.tick_ns)

    def _nb_turn(self, c: int, now: int, work_ns: int) -> None:
        """The other process takes CPU c from the group's thread for one turn with ``work_ns`` to
        do; what the turn does not run waits as its backlog."""
        end = self._nb_cap[c] = self._turn_end(now)
        end = min(end, now + work_ns)
        self._nb_until[c] = end
        self._nb_owed[c] += work_ns - (end - now)

    def _nb_share(self, c: int, now: int) -> None:
        """A thread of the group became runnable on CPU c while the other process runs there:
        that process finishes its turn, the rest of its work waits as backlog."""
        nbu = self._nb_until[c]
        if nbu > now:
            end = self._nb_cap[c] = self._turn_end(now)
            if nbu > end:
                self._nb_owed[c] += nbu - end
                self._nb_until[c] = end

    def _nb_take_all(self, c: int, now: int) -> None:
        """The group left CPU c (blocked or throttled): the other process's backlog runs now."""
        owed = self._nb_owed[c]
        if owed:
            self._nb_until[c] = max(self._nb_until[c], now) + owed
            self._nb_owed[c] = 0

    def _throttle(self, c: int, now: int) -> None:
        super()._throttle(c, now)
        self._nb_take_all(c, now)

    def _unthrottle(self, c: int, now: int) -> None:
        if self._queued[c]:
            self._nb_share(c, now)
        super()._unthrottle(c, now)

    # ------------------------------------------------------------------ one CPU
    def _advance(self, c: int, t: int) -> None:
        u = self._updated_ns[c]
        if t <= u:
            return
        self._updated_ns[c] = t
        nbu = self._nb_until[c]
        if nbu > u:
            if nbu >= t:
                return   # the whole span went to another process's task
            u = nbu
        dt = t - u
        if self._queued[c] and not self._throttled[c]:
            if self._speed != 1.0:
                dt = round(dt * self._speed)  # the rest went to other processes on the host
            head = self._rq[c][0]
            self._t_left[head] -= dt
            self._t_base[head] += dt
            self._slice_left[c] -= dt
            self._usage[c] += dt
            if self._bandwidth is not None:
                self._runtime_remaining_ns[c] -= dt

    def _switch_in(self, c: int, after_idle: bool = False) -> None:
        """The head of CPU c's queue starts a turn: a fresh slice, and the switch's cost if
        another thread ran there last (straight before it, or before the CPU went idle)."""
        rq = self._rq[c]
        if not rq:
            return
        head = rq[0]
        self._slice_left[c] = float(self._base_slice)
        if self._last_ran[c] != head:
            if self._last_ran[c] >= 0:
                self._t_left[head] += self._idle_switch_ns if after_idle else self._thread_switch_ns
            self._last_ran[c] = head
        if self._on_switch_in:
            self._switched_in(head)

    def _place(self, c: int, tid: int, work: float) -> None:
        self._t_left[tid] = work
        rq = self._rq[c]
        rq.append(tid)
        if len(rq) == 1:
            self._switch_in(c, True)
            if not self._throttled[c]:
                self._nb_share(c, self.now)
        elif self._preempt_by >= 0 and rq[0] == self._preempt_by:
            # wake-up preemption (set_wake_placement): the woken thread runs now, its waker
            # waits for its turn next in line and pays the switch back in
            rq.pop()
            rq.appendleft(tid)
            self.switches_involuntary += 1
            self.wakes_preempting += 1
            self._switch_in(c)

    def _rework(self, c: int, tid: int, work: float) -> None:
        """The thread keeps its place in the queue (running or waiting for its turn)."""
        self._t_left[tid] = work

    def _dequeue(self, c: int, tid: int, now: int) -> None:
        rq = self._rq[c]
        was_head = rq[0] == tid
        if self._on_switch_in and not was_head:
            self._switched_in(tid)   # it blocks or moves without running here: what waited on it runs now
        if was_head:
            rq.popleft()
        else:
            rq.remove(tid)
        super()._dequeue(c, tid, now)
        if was_head and rq:
            self.switches_voluntary += 1
            self._switch_in(c)
        elif not rq:
            self._nb_take_all(c, now)

    def _migrant(self, c: int) -> tuple[int, float]:
        """A waiting thread (the running one cannot migrate: ``can_migrate_task``), the one that
        would run last."""
        tid = self._rq[c][-1]
        return tid, self._t_left[tid]

    def _next_event_ns(self, c: int) -> int | None:
        """The running thread's completion, the tick that ends its turn while others wait, or
        the tick that notices the silo dry, whichever is first (after another process's burst)."""
        k = self._queued[c]
        if not k or self._throttled[c]:
            return None
        head = self._rq[c][0]
        t0 = self._updated_ns[c]
        if self._nb_until[c] > t0:
            t0 = self._nb_until[c]
        left = self._t_left[head]
        speed = self._speed
        if left <= 0:
            t_next = t0
        else:
            t_next = t0 + (-int(-left // 1) if speed == 1.0 else -int(-left // speed))
        if k > 1 or self._nb_owed[c]:
            t_turn = eevdf.slice_end_ns(t0, max(self._slice_left[c], 0.0), self.tick_ns, speed)
            if t_turn < t_next:
                t_next = t_turn
        if self._bandwidth is not None:
            t_next = self._refill_due(c, t0, t_next)
        return t_next

    def _run_due(self, c: int, now: int) -> bool:
        """The running thread finished its work (its callback continues or blocks it), or its
        turn ended at a tick; True also at the switch back in after another process's burst."""
        rq = self._rq[c]
        t_cpu = self._t_cpu
        blocked = False
        while rq and not self._throttled[c]:
            tid = rq[0]
            if self._t_left[tid] > _EPS:
                break
            cb = self._t_cb[tid]
            more = cb(tid) if cb is not None else None
            if t_cpu[tid] != c:
                blocked = True  # the callback moved or stopped it
            elif more and more > 0:
                self._t_left[tid] += float(more)
            else:
                self._dequeue(c, tid, now)
                blocked = True
        if rq and not self._throttled[c] and self._slice_left[c] <= _EPS and now % self.tick_ns == 0:
            owed = self._nb_owed[c]
            if owed and self._nb_until[c] <= now:
                # the tick notices the slice is consumed: the other process's turn, then the next
                # thread of the group's, after the switch back
                self._nb_owed[c] = 0
                self._nb_turn(c, now, owed)
                if len(rq) > 1:
                    rq.rotate(-1)
                head = rq[0]
                self._slice_left[c] = float(self._base_slice)
                self._t_left[head] += self._switch_ns
                self._last_ran[c] = head
                self.switches_involuntary += 1
                self.neighbour_preemptions += 1
                if self._on_switch_in:
                    self._switched_in(head)
                return True
            if len(rq) > 1:
                # the tick notices the slice is consumed: the next thread's turn
                rq.rotate(-1)
                self.switches_involuntary += 1
                self._switch_in(c)
        # besides the tick and a dequeue, the switch back in after another process's task charges the silo
        return blocked or now == self._nb_until[c]
