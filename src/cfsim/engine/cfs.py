"""The host + CFS bandwidth engine: event-driven on simpy, time in integer nanoseconds.

A group (one container's cgroup) owns threads. The host has ``cpus`` CPUs; each CPU shares its
time equally among the group's runnable threads queued on it (processor sharing). Between events
every running thread progresses analytically, so the cost grows with the number of state changes
(wake-ups, completions, slice refills, throttles, period and slack timers), not with simulated
time divided by a tick.

Bandwidth follows ``kernel/sched/fair.c`` through the pure steps of
:mod:`cfsim.kernel.bandwidth`: a per-group pool refilled at each period boundary (with burst);
per-CPU runtime ("silo") taken in slices; exhaustion noticed at the next tick or scheduling event
on that CPU, with the overrun repaid from the next take; per-CPU throttling queued FIFO;
distribution at the period timer; return of all but 1 ms when a CPU's last thread leaves, or, when
that thread leaves an exhausted silo the pool cannot refill, the throttle of the now empty per-CPU
runqueue (``put_prev_entity`` -> ``check_cfs_rq_runtime``: counted in ``nr_throttled``, no throttled
time while empty, later wake-ups on that CPU wait for distribution); the slack timer; a period
timer that stops after an idle period, on a grid with a random phase.

Thread placement mimics the wake-up path: the previous CPU if it looks idle, else the next idle
CPU (a CPU whose group runqueue is throttled looks idle to the host, so wake-ups do land there),
else the least loaded one; a CPU that goes idle pulls a waiting thread (new-idle balance).
"""
from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import dataclass
from heapq import heappop, heappush
from typing import Callable, Final

import numpy as np
import pandas as pd
import simpy
from simpy.events import NORMAL, URGENT

from cfsim.kernel import bandwidth as bwr
from cfsim.kernel import limits
from cfsim.kernel.wakeup import WakeupCost

OnDone = Callable[[int], "int | None"]
_EPS: Final = 1e-6
#: how soon an idle CPU pulls a waiting thread from an overloaded one (periodic balancing)
BALANCE_INTERVAL_NS: Final = 4_000_000


@dataclass(frozen=True)
class Bandwidth:
    """A cgroup's CPU bandwidth: ``cpu.cfs_quota_us``/``cpu.max`` and friends."""

    quota_us: int
    period_us: int = limits.DEFAULT_PERIOD_US
    burst_us: int = 0
    slice_us: int = limits.DEFAULT_SLICE_US
    kernel: str = "modern"  # or "legacy-expiry" (4.18-5.3 slice expiry)

    def __post_init__(self) -> None:
        errors = limits.check_bandwidth(self.quota_us, self.period_us, self.burst_us)
        if errors:
            key, msg = errors[0]
            raise ValueError(f"{key}: {msg}")
        if self.kernel not in ("modern", "legacy-expiry"):
            raise ValueError(f"cgroup.kernel: must be 'modern' or 'legacy-expiry' (got {self.kernel!r})")
        if self.kernel == "legacy-expiry" and self.burst_us:
            raise ValueError("cgroup.burst_us: burst exists only on Linux >= 5.14, not with legacy-expiry")

    @property
    def cpu_limit_cores(self) -> float:
        return self.quota_us / self.period_us


@dataclass
class CpuStat:
    """``cpu.stat`` (v1 names, times in ns) plus group usage (``cpuacct.usage``)."""

    nr_periods: int = 0
    nr_throttled: int = 0
    throttled_time_ns: int = 0
    nr_bursts: int = 0
    burst_time_ns: int = 0
    usage_ns: int = 0


@dataclass
class _Period:
    end_ns: int
    usage_ns: int
    throttled: bool
    throttled_cpus: int
    pool_after_refill_ns: int
    burst_ns: int
    quota_us: int


class _Timer:
    """A cancellable callback ``fn(*args)`` on the simulation's clock, one per wake-up of a
    workload (on the hot path: no closure, no simpy event). It sits on simpy's queue as an
    ``env.timeout`` would (same time, priority ``NORMAL`` and event id), and :meth:`CfsEngine.run_until`
    calls it."""

    __slots__ = ("fn", "args")

    def __init__(self, fn: Callable[..., None] | None, args: tuple) -> None:
        self.fn = fn
        self.args = args

    def cancel(self) -> None:
        self.fn = None


class _CpuEvent:
    """A CPU's next completion or refill; stale once the CPU's version moved on.

    CPU events at the same instant (ticks are aligned across CPUs) run in the order of the CPU's
    ``rank`` (which CPU's tick handler wins the race for the pool), after other events, so ties
    resolve identically however the events were scheduled. They are the engine's most frequent
    object, so the engine recycles them once :meth:`CfsEngine.run_until` has run one."""

    __slots__ = ("engine", "cpu", "ver")

    def __init__(self, engine: CfsEngine) -> None:
        self.engine = engine
        self.cpu = 0
        self.ver = 0


class CfsEngine:
    """Host CPUs plus one CFS-bandwidth cgroup. See the module docstring for the rules.

    >>> eng = CfsEngine(cpus=4, hz=1000, bandwidth=Bandwidth(quota_us=100_000), seed=1)
    >>> tids = [eng.new_thread() for _ in range(2)]
    >>> for t in tids:
    ...     eng.run(t, 10**12, lambda tid: None)      # CPU-bound: far more work than time
    >>> eng.run_until(10 * 10**9)
    >>> st = eng.cpu_stat()
    >>> abs(st.usage_ns / 10e9 - 1.0) < 0.02, st.nr_throttled >= st.nr_periods - 1
    (True, True)
    """

    # Slots, not a __dict__: the engine's state is read and written on every event, and slot
    # access is markedly cheaper (about 8 % of the 200-thread benchmark's instructions).
    __slots__ = (
        "env", "now", "_queue", "_eid", "ncpus", "tick_ns", "rng", "_speed", "_prefetch_on",
        # per CPU
        "_queued", "_heap", "_work_done_ns", "_runtime_remaining_ns", "_updated_ns", "_throttled", "_thr_clock", "_ver", "_event_at_ns", "_rank",
        "_usage", "_pf_t1", "_pf_t2", "_pf_tk", "_epoch_end", "_overloaded", "_balance_pending",
        "_free_events", "_idle_since", "_thr_from", "_gap_from", "_gap_to",
        # per thread
        "_t_cpu", "_t_last", "_t_start_v", "_t_end_v", "_t_gen", "_t_cb", "_t_base", "_t_name", "_t_wake",
        "_wakeup", "wakeups_from_idle", "_wake_affine", "_wake_affine_away", "_wake_preempt", "_wake_rng", "_preempt_by",
        "wakes_affine", "wakes_preempting", "wakes_preempting_enabled",
        "_seq",
        # group bandwidth
        "_bandwidth", "_quota", "_period", "_burst", "_slice", "_slice_eff", "_legacy", "_phase_ns",
        "_fifo", "_stat", "_periods", "_timer_active", "_timer_ver", "_next_fire", "_idle",
        "_slack_pending", "_pool", "_snap", "_usage_at_period",
    )

    def __init__(self, cpus: int, hz: int = 1000, bandwidth: Bandwidth | None = None,
                 seed: int = 0, env: simpy.Environment | None = None, prefetch: bool = True,
                 background_cores: float = 0.0, wakeup: WakeupCost | None = None):
        if cpus < 1:
            raise ValueError(f"host.cpus: must be >= 1 (got {cpus})")
        if not 0 <= background_cores < cpus:
            raise ValueError(f"host.background_cores: must be in [0, cpus={cpus}) (got {background_cores})")
        # other processes on the host take this share of every CPU the group runs on
        self._speed = 1.0 - background_cores / cpus
        self.env = env or simpy.Environment()
        if getattr(self.env, "_cfsim_engine", None) is not None:
            # run_until moves this engine's clock only: a second engine's would stand still
            raise ValueError("env: already drives another CfsEngine (one engine per simpy Environment)")
        setattr(self.env, "_cfsim_engine", self)
        # the clock [ns], kept with simpy's by run_until (which alone moves it): read on every
        # event, and a native attribute is cheaper than the environment's instance dict
        self.now: int = int(self.env._now)
        # simpy's queue and event counter, shared with the environment (simpy never replaces them)
        self._queue: list = self.env._queue
        self._eid = self.env._eid
        self.ncpus = cpus
        self.tick_ns = 10**9 // hz
        self.rng = np.random.default_rng(seed)
        # per-CPU state (lists: faster than arrays for scalar access)
        self._queued = [0] * cpus             # group threads queued (runnable, incl. while throttled)
        self._heap: list[list[tuple[float, int, int]]] = [[] for _ in range(cpus)]
        self._work_done_ns = [0.0] * cpus           # work delivered to each queued thread so far [ns]
        self._runtime_remaining_ns = [0] * cpus             # cfs_rq->runtime_remaining [ns]
        self._updated_ns = [0] * cpus            # time rr/vt/usage were last brought up to date
        self._throttled = [False] * cpus
        self._thr_clock = [-1] * cpus     # throttled_clock, -1 when not counting
        # each CPU's throttled spells: the one under way since _thr_from (-1: none), the latest
        # ended one [_gap_from, _gap_to): where a thread that ran across it made no progress
        # (throttled_gap)
        self._thr_from = [-1] * cpus
        self._gap_from = [-1] * cpus
        self._gap_to = [-1] * cpus
        self._ver = [0] * cpus            # invalidates stale CPU events
        self._event_at_ns = [-1] * cpus           # time of the pending valid CPU event, -1 if none
        # which CPU's tick handler wins a race for the pool at the same instant: redrawn each
        # period (the kernel gives no order), so no CPU is favoured period after period
        self._rank = list(range(cpus))
        self._balance_pending = False
        self._free_events: list[_CpuEvent] = []
        self._usage = [0] * cpus
        self._pf_t1 = [0] * cpus          # prefetch bookkeeping (see _prefetch)
        self._pf_t2 = [0] * cpus
        self._pf_tk = [0] * cpus
        self._epoch_end = 0
        # False: take every slice one by one (for checking); the prefetch arithmetic assumes
        # the group has its CPUs to itself
        self._prefetch_on = prefetch and self._speed == 1.0
        self._overloaded: set[int] = set()  # unthrottled CPUs with >= 2 queued threads
        # the host's CPU per sleep and wake-up of a thread (cfsim.kernel.wakeup), charged to a
        # thread woken onto a CPU where none of the group's threads was queued, growing with how
        # long that CPU had been idle
        self._wakeup = wakeup if wakeup is not None and wakeup.enabled else None
        self._idle_since = [0] * cpus     # when the group's last thread left each CPU
        self.wakeups_from_idle = 0
        # where a thread woken by a running thread of the group goes (set_wake_placement): off
        # unless set, so every draw below is skipped and no other random stream moves
        self._wake_affine = 0.0
        self._wake_affine_away = -1.0     # unset: the same share whatever the wakee's last CPU
        self._wake_preempt = 0.0
        self._wake_rng = random.Random(seed)
        self._preempt_by = -1             # the waker a wake-up being placed now preempts (slices)
        self.wakes_affine = 0             # wake-ups placed on the waker's CPU
        self.wakes_preempting = 0         # ...that took it from the waker at once
        self.wakes_preempting_enabled = False
        # per-thread state
        self._t_cpu: list[int] = []       # -1 when blocked
        self._t_last: list[int] = []
        self._t_start_v: list[float] = []
        self._t_end_v: list[float] = []
        self._t_gen: list[int] = []
        self._t_cb: list[OnDone | None] = []
        self._t_base: list[float] = []    # CPU consumed in finished runs [ns]
        self._t_name: list[str] = []
        self._t_wake: list[bool] = []     # whether the wake-up rule charges the thread
        self._seq = 0
        # group bandwidth state
        self._fifo: deque[int] = deque()
        self._stat = CpuStat()
        self._periods: list[_Period] = []
        self._timer_active = False
        self._timer_ver = 0
        self._next_fire = 0
        self._idle = False
        self._slack_pending = False
        self._pool = 0
        self._snap = 0
        self._usage_at_period = 0
        self._bandwidth: Bandwidth | None = None
        self._phase_ns = 0
        if bandwidth is not None:
            self._configure(bandwidth, initial=True)

    # ------------------------------------------------------------------ public API
    @property
    def bandwidth(self) -> Bandwidth | None:
        return self._bandwidth

    def new_thread(self, name: str = "", wakeup_cost: bool = True) -> int:
        """A blocked thread of the group. ``wakeup_cost=False``: its wake-ups are not charged
        the host's wake-up cost (a thread whose owner accounts for its sleeps itself)."""
        if self._bandwidth is not None:
            self._end_epoch(self.now)  # one more thread could draw from the pool
        tid = len(self._t_cpu)
        self._t_cpu.append(-1)
        self._t_last.append(-1)
        self._t_start_v.append(0.0)
        self._t_end_v.append(0.0)
        self._t_gen.append(0)
        self._t_cb.append(None)
        self._t_base.append(0.0)
        self._t_name.append(name or f"t{tid}")
        self._t_wake.append(wakeup_cost)
        return tid

    def run(self, tid: int, work_ns: int, on_done: OnDone, waker: int = -1) -> None:
        """Wake a blocked thread with ``work_ns`` of CPU to do; ``on_done(tid)`` when done.

        ``on_done`` returns more work to keep running without blocking, or None/0 to block.
        ``waker``: the running thread of the group that wakes it (a Go M's ``futexwakeup`` of
        another), which the host's wake-up placement may put it beside
        (:meth:`set_wake_placement`); -1 for a wake-up from outside (a timer, the network).
        """
        if self._t_cpu[tid] >= 0:
            raise RuntimeError(f"thread {self._t_name[tid]} is already runnable")
        if work_ns <= 0:
            raise ValueError(f"work_ns must be > 0 (got {work_ns})")
        self._t_cb[tid] = on_done
        c = self._select_cpu(tid)
        if waker >= 0 and (self._wake_affine > 0.0 or self._wake_affine_away > 0.0):
            c = self._beside_waker(waker, c, tid)
        if self._wakeup is not None and self._queued[c] == 0 and self._t_wake[tid]:
            # the kernel's side of the sleep that ends here: the CPU was idle (for the group)
            work_ns += self._wakeup.cycle_ns(self.now - self._idle_since[c])
            self.wakeups_from_idle += 1
        self._enqueue(c, tid, float(work_ns))
        self._preempt_by = -1

    def when_running(self, tid: int, fn: Callable[[], None]) -> None:
        """Call ``fn()`` once ``tid`` runs: here at once (a runnable thread always progresses on
        its fluid share); the sliced engine waits for a thread that waits its turn to be switched
        in, and calls it at once for one that is blocked or running."""
        fn()

    def set_wake_placement(self, affine_share: float, preempt_share: float, affine_away: float | None = None) -> None:
        """How this host's kernel places a thread that a running thread of the group wakes: on
        the waker's CPU with ``affine_share`` (else where :meth:`_select_cpu` puts it, an idle
        CPU first), and there it takes the CPU from the waker at once with ``preempt_share``
        (EEVDF's wake-up preemption, ``check_preempt_wakeup_fair`` in ``kernel/sched/fair.c``: a
        wakee placed with positive lag makes the running task ineligible, so ``RUN_TO_PARITY`` no
        longer protects it), else it waits for the waker's turn to end. Mainline Linux puts a
        wakee on an idle CPU that shares the cache (``select_idle_sibling``); the lab's virtual
        machine puts about half of them beside their waker even so (``host.wake_affine_share``,
        measured by ``cfsim lab wakeplace``). Only the sliced engine has turns to take (it sets
        ``wakes_preempting_enabled``); here the placement alone applies.

        ``affine_away`` set, the kernel's stickiness to a wakee's previous CPU is kept apart:
        ``affine_share`` is then the share of wakees whose previous CPU is the waker's that stay
        there, ``affine_away`` the share of those last run elsewhere that join the waker (the lab's
        scheduler traces: most stay where they last ran, ``select_idle_sibling`` taking an idle
        previous CPU first)."""
        if not (0.0 <= affine_share <= 1.0 and 0.0 <= preempt_share <= 1.0):
            raise ValueError(f"wake placement shares must be in [0, 1] (got {affine_share}, {preempt_share})")
        if affine_away is not None and not 0.0 <= affine_away <= 1.0:
            raise ValueError(f"host.wake_affine_share_away: must be in [0, 1] (got {affine_away})")
        self._wake_affine = float(affine_share)
        self._wake_affine_away = -1.0 if affine_away is None else float(affine_away)
        self._wake_preempt = float(preempt_share)

    def group_idle_ns(self, tid: int) -> int:
        """How long the CPU that a wake-up of ``tid`` takes has been without a thread of the group
        [ns]: its last CPU if none runs there, else the next such CPU (:meth:`_select_cpu`'s
        order; from CPU 0 for a thread that never ran, where that method draws a random start);
        -1 when every CPU holds one (the thread then waits for its own group's turns, not for
        another process's task). Reads the state only: no random draw."""
        nq = self._queued
        prev = self._t_last[tid]
        n = self.ncpus
        start = prev if prev >= 0 else 0
        for i in range(n):
            c = (start + i) % n
            if nq[c] == 0:
                return self.now - self._idle_since[c]
        return -1

    def _beside_waker(self, waker: int, c: int, tid: int) -> int:
        wc = self._t_cpu[waker]
        if wc < 0 or self._throttled[wc]:
            return c
        rng = self._wake_rng
        if wc != c:
            share = self._wake_affine
            if self._wake_affine_away >= 0.0 and self._t_last[tid] != wc:
                share = self._wake_affine_away
            if rng.random() >= share:
                return c
            self.wakes_affine += 1
        if rng.random() < self._wake_preempt:
            self._preempt_by = waker
        return wc

    def stop(self, tid: int) -> int:
        """Block a runnable thread now; return its unfinished work [ns]."""
        c = self._t_cpu[tid]
        if c < 0:
            return 0
        now = self.now
        left = self._settle(c, tid)
        self._dequeue(c, tid, now)
        self._after_change(c, now)
        return left

    def redirect(self, tid: int, work_ns: int, on_done: OnDone) -> int:
        """Give a runnable thread ``work_ns`` of new work in place of what it had left, where it
        is: a signal it handles when it next runs (the Go runtime's preemption request), not a
        sleep and a wake-up, so it keeps its CPU and its place there (no wake-up placement, no
        wake-up cost). Returns the unfinished work [ns] it had."""
        c = self._t_cpu[tid]
        if c < 0:
            raise RuntimeError(f"thread {self._t_name[tid]} is not runnable")
        if work_ns <= 0:
            raise ValueError(f"work_ns must be > 0 (got {work_ns})")
        left = self._settle(c, tid)
        self._t_cb[tid] = on_done
        self._rework(c, tid, float(work_ns))
        self._schedule_cpu(c)
        return left

    def _settle(self, c: int, tid: int) -> int:
        """Bring CPU c up to now and bank thread ``tid``'s CPU so far; its unfinished work [ns]."""
        self._advance(c, self.now)
        left = self._left_ns(c, tid)
        self._bank(c, tid)
        return left

    def _rework(self, c: int, tid: int, work: float) -> None:
        """Replace a queued thread's remaining work (processor sharing: a new end on the CPU's
        virtual clock; the old heap entry goes stale with the generation)."""
        self._place(c, tid, work)

    def work_left(self, tid: int) -> int:
        """The unfinished work [ns] of a runnable thread, without stopping it (0 if blocked)."""
        c = self._t_cpu[tid]
        if c < 0:
            return 0
        self._advance(c, self.now)
        return self._left_ns(c, tid)

    def _left_ns(self, c: int, tid: int) -> int:
        """Unfinished work of thread ``tid`` on CPU c, brought up to date [ns]."""
        return int(round(self._t_end_v[tid] - min(self._work_done_ns[c], self._t_end_v[tid])))

    def _bank(self, c: int, tid: int) -> None:
        """Add the CPU of the thread's current run to its finished runs' (it leaves the CPU)."""
        self._t_base[tid] += min(self._work_done_ns[c], self._t_end_v[tid]) - self._t_start_v[tid]

    def is_runnable(self, tid: int) -> bool:
        return self._t_cpu[tid] >= 0

    def cpus_running(self) -> int:
        """CPUs running one of the group's threads now (queued and not throttled): the CPUs whose
        TLBs a change to the process's address space must flush (x86 ``native_flush_tlb_multi``
        skips CPUs that run no thread of the process, ``tlb_is_not_lazy``)."""
        thr = self._throttled
        return sum(1 for c, q in enumerate(self._queued) if q and not thr[c])

    def throttled_gap(self, tid: int, t0: int, t1: int) -> tuple[int, int] | None:
        """The wall time ``(from, to)`` within ``[t0, t1]`` in which thread ``tid``, runnable from
        ``t0`` to ``t1``, made no progress because its CPU (its current one, else its last) was
        throttled: the spell under way if it began in between (up to ``t1``), else the latest
        ended one if it lies in between; None if neither does."""
        c = self._t_cpu[tid]
        if c < 0:
            c = self._t_last[tid]
        if c < 0:
            return None
        a = self._thr_from[c]
        if t0 <= a < t1:
            return a, t1
        a, b = self._gap_from[c], self._gap_to[c]
        if t0 <= a < b <= t1:
            return a, b
        return None

    def is_throttled(self, tid: int) -> bool:
        c = self._t_cpu[tid]
        return c >= 0 and self._throttled[c]

    def ns_to_refresh(self) -> int:
        """Wall time to the bandwidth's next period refill (0 when its timer is idle): the
        earliest a throttled thread can run again but for slack handed back before it."""
        return self._ns_to_refresh(self.now)

    def thread_cpu_ns(self, tid: int) -> int:
        c = self._t_cpu[tid]
        done = self._t_base[tid]
        if c >= 0:
            self._advance(c, self.now)
            done += min(self._work_done_ns[c], self._t_end_v[tid]) - self._t_start_v[tid]
        return int(round(done))

    def call_at(self, t_ns: int, fn: Callable[..., None], *args: object) -> _Timer:
        """Call ``fn(*args)`` at ``t_ns`` (now if that is past); ``.cancel()`` the result to drop it."""
        t = int(t_ns)
        now = self.now
        timer = _Timer(fn, args)
        heappush(self._queue, (t if t > now else now, NORMAL, next(self._eid), timer))
        return timer

    def call_later(self, delay_ns: int, fn: Callable[..., None], *args: object) -> _Timer:
        """Call ``fn(*args)`` after ``delay_ns`` (now if that is negative)."""
        delay = int(delay_ns)
        now = self.now
        timer = _Timer(fn, args)
        heappush(self._queue, (now + delay if delay > 0 else now, NORMAL, next(self._eid), timer))
        return timer

    def run_until(self, t_ns: int) -> None:
        """Process the simulation's events up to ``t_ns`` and bring every CPU there.

        Event for event what ``env.run(until=t_ns)`` would do (simpy 4's ``Environment.run`` and
        ``Environment.step``, https://simpy.readthedocs.io): the events due before ``t_ns``, and
        those due at ``t_ns`` that sort before the stop event ``run`` would schedule there (URGENT,
        the next event id), in the queue's order; then the clock stands at ``t_ns``. The engine's
        own events (:class:`_CpuEvent`, :class:`_Timer`) are plain compiled objects that this loop
        runs itself; any other event on the queue (a simpy process sharing the environment) is
        stepped as simpy steps it: its callbacks called once, a failed event not defused raised.
        So drive an engine with this method, not ``env.run``. Why a loop of our own: simpy's
        interpreted loop and event objects took about a quarter of the 200-thread benchmark's
        time (``benchmarks/bench_engine.py``). The stop event's id is drawn as ``run`` draws it and
        the engine's events take ids as ``env.timeout`` would, so simultaneous events keep simpy's
        order and every result is what it was with simpy's loop, bit for bit
        (tests/unit/test_engine_loop.py)."""
        env = self.env
        until = int(t_ns)
        if until <= self.now:
            raise ValueError(f"until ({until}) must be greater than the current simulation time")
        stop_eid: int = next(self._eid)
        q = self._queue
        while q:
            head = q[0]
            t = head[0]
            # simpy's stop event would be (until, URGENT, stop_eid): stop at whatever sorts after it
            if t > until or (t == until and (head[1] > URGENT or (head[1] == URGENT and head[2] > stop_eid))):
                break
            heappop(q)
            self.now = t
            env._now = t
            ev = head[3]
            if isinstance(ev, _CpuEvent):
                ev.engine._cpu_event_cb(ev)
            elif isinstance(ev, _Timer):
                fn = ev.fn
                if fn is not None:
                    fn(*ev.args)
            else:
                # a simpy event (another process sharing the environment): Environment.step
                callbacks = ev.callbacks
                ev.callbacks = None
                for cb in callbacks:
                    cb(ev)
                if not ev._ok and not hasattr(ev, "_defused"):
                    err = ev._value
                    exc = type(err)(*err.args)
                    exc.__cause__ = err
                    raise exc
        self.now = until
        env._now = until
        self._sync_all(until)

    def cpu_stat(self) -> CpuStat:
        """Counters as ``cpu.stat`` would show them now (throttled time of CPUs still
        throttled is not yet added, as in the kernel: it is added at unthrottle)."""
        self._sync_all(self.now)
        st = self._stat
        return CpuStat(st.nr_periods, st.nr_throttled, st.throttled_time_ns, st.nr_bursts,
                       st.burst_time_ns, sum(self._usage))

    def periods_frame(self) -> pd.DataFrame:
        """One row per period-timer firing: end time, usage in the period, throttled or not."""
        if not self._periods:
            return pd.DataFrame(columns=["end_s", "usage_s", "throttled", "throttled_cpus",
                                         "pool_after_refill_s", "burst_s", "quota_us"])
        rows = self._periods
        return pd.DataFrame({
            "end_s": np.array([p.end_ns for p in rows]) / 1e9,
            "usage_s": np.array([p.usage_ns for p in rows]) / 1e9,
            "throttled": np.array([p.throttled for p in rows]),
            "throttled_cpus": np.array([p.throttled_cpus for p in rows]),
            "pool_after_refill_s": np.array([p.pool_after_refill_ns for p in rows]) / 1e9,
            "burst_s": np.array([p.burst_ns for p in rows]) / 1e9,
            "quota_us": np.array([p.quota_us for p in rows]),
        })

    def set_bandwidth(self, bandwidth: Bandwidth | None) -> None:
        """Change the limit live, as ``tg_set_cfs_bandwidth`` does: refill the pool, restart the
        timer, zero every CPU's runtime and unthrottle every throttled CPU."""
        now = self.now
        self._sync_all(now)
        if self._bandwidth is not None:
            self._end_epoch(now)
        if bandwidth is None:
            self._bandwidth = None
            self._timer_active = False
            self._timer_ver += 1
            while self._fifo:
                self._unthrottle(self._fifo.popleft(), now)
            for c in range(self.ncpus):
                self._runtime_remaining_ns[c] = 0
                self._schedule_cpu(c)
            return
        self._configure(bandwidth, initial=False)
        for c in range(self.ncpus):
            self._runtime_remaining_ns[c] = 0
        while self._fifo:
            self._unthrottle(self._fifo.popleft(), now)
        for c in range(self.ncpus):
            self._schedule_cpu(c)

    # ------------------------------------------------------------------ configuration
    def _configure(self, bw: Bandwidth, initial: bool) -> None:
        old = self._bandwidth
        self._bandwidth = bw
        self._quota = bw.quota_us * 1000
        self._period = bw.period_us * 1000
        self._burst = bw.burst_us * 1000
        self._slice = bw.slice_us * 1000
        # wall time between takes on a CPU that keeps running: a slice, rounded up to ticks
        self._slice_eff = -(-self._slice // self.tick_ns) * self.tick_ns
        self._legacy = bw.kernel == "legacy-expiry"
        if initial or old is None:
            # init_cfs_bandwidth: "Add a random offset so that timers interleave"
            self._phase_ns = int(self.rng.integers(0, self._period))
            self._pool = self._quota
            self._snap = self._pool
        else:
            self._pool = min(self._pool + self._quota, self._quota + self._burst)
            self._snap = self._pool
            if old.period_us != bw.period_us and self._timer_active:
                # the armed expiry stays; later firings follow the new period
                self._phase_ns = self._next_fire % self._period
        self._start_timer()

    # ------------------------------------------------------------------ CPU bookkeeping
    def _advance(self, c: int, t: int) -> None:
        dt = t - self._updated_ns[c]
        if dt <= 0:
            return
        self._updated_ns[c] = t
        k = self._queued[c]
        if k and not self._throttled[c]:
            if self._speed != 1.0:
                dt = round(dt * self._speed)  # the rest went to other processes on the host
            self._work_done_ns[c] += dt / k
            self._usage[c] += dt
            if self._bandwidth is not None:
                self._runtime_remaining_ns[c] -= dt

    def _sync_all(self, t: int) -> None:
        for c in range(self.ncpus):
            self._advance(c, t)

    def _schedule_cpu(self, c: int) -> None:
        """(Re)arm CPU c's single pending event: its next completion, turn or runtime refill."""
        t_next = self._next_event_ns(c)
        if t_next is None:
            self._ver[c] += 1
            self._event_at_ns[c] = -1
            return
        if t_next == self._event_at_ns[c]:
            return  # the pending event already fires then
        ver = self._ver[c] + 1
        self._ver[c] = ver
        self._event_at_ns[c] = t_next
        free = self._free_events
        ev = free.pop() if free else _CpuEvent(self)
        ev.cpu = c
        ev.ver = ver
        # env.schedule(ev, 2 + rank, t_next - now), inlined
        heappush(self._queue, (t_next, 2 + self._rank[c], next(self._eid), ev))

    def _next_event_ns(self, c: int) -> int | None:
        """When CPU c's next event is due (processor sharing: the first queued thread to finish,
        or the tick that notices its silo dry), None when it needs none."""
        k = self._queued[c]
        if not k or self._throttled[c]:
            return None
        heap = self._heap[c]
        if heap:
            _, tid, gen = heap[0]
            if gen != self._t_gen[tid] or self._t_cpu[tid] != c:
                t_gen = self._t_gen
                t_cpu = self._t_cpu
                while heap and (heap[0][2] != t_gen[heap[0][1]] or t_cpu[heap[0][1]] != c):
                    heappop(heap)
        if not heap:
            # only the thread completing right now is queued (we are inside its callback):
            # the completion handler re-arms this CPU when the callback returns
            return None
        t0 = self._updated_ns[c]
        left = heap[0][0] - self._work_done_ns[c]
        speed = self._speed
        if speed == 1.0:
            t_next = t0 + (math.ceil(left * k) if left > 0 else 0)
        else:
            t_next = t0 + (math.ceil(left * k / speed) if left > 0 else 0)
        # (only a silo that can run dry before t_next moves it: skip the call otherwise)
        if self._bandwidth is not None and (speed != 1.0 or t0 + self._runtime_remaining_ns[c] < t_next):
            t_next = self._refill_due(c, t0, t_next)
        return t_next

    def _refill_due(self, c: int, t0: int, t_next: int) -> int:
        """The earlier of ``t_next`` and the tick at which CPU c's silo is noticed dry."""
        speed = self._speed
        rr = self._runtime_remaining_ns[c]
        # the silo runs dry at t0 + rr; the next tick's update_curr notices it (no sooner
        # than t_dry, so only a silo that runs dry before t_next can move it)
        t_dry = t0 + (rr if speed == 1.0 else math.ceil(rr / speed))
        if t_dry < t_next:
            tick = self.tick_ns
            t_ref = -(-t_dry // tick) * tick
            if t_ref < t0:
                # it ran dry more than a tick ago with no event here to notice it (the CPU was
                # advanced by another's event): the next tick from now does; an event at t0 off
                # the tick would charge nothing and re-arm itself at t0 forever
                t_ref = -(-t0 // tick) * tick
            if t_ref < t_next:
                return t_ref
        return t_next

    def _cpu_event_cb(self, ev: "_CpuEvent") -> None:
        """CPU c's completion or refill is due (unless the event went stale)."""
        c = ev.cpu
        self._free_events.append(ev)  # off the queue: reusable
        if ev.ver != self._ver[c]:
            return
        self._event_at_ns[c] = -1
        now = self.now
        if now > self._updated_ns[c]:
            self._advance(c, now)
        # a thread that just keeps computing is no kernel event: only a tick or a dequeue
        # charges the silo here
        self._after_change(c, now, self._run_due(c, now) or now % self.tick_ns == 0)

    def _run_due(self, c: int, now: int) -> bool:
        """Continue or block CPU c's threads whose work is done now (their callbacks say which);
        True when the CPU saw a scheduling event that charges the silo (a thread blocked)."""
        heap = self._heap[c]
        vt = self._work_done_ns[c]
        t_gen = self._t_gen
        t_cpu = self._t_cpu
        blocked = False
        while heap:
            end_v, tid, gen = heap[0]
            if gen != t_gen[tid] or t_cpu[tid] != c:
                heappop(heap)
                continue
            if end_v - vt > _EPS:
                break
            heappop(heap)
            # the thread's work is done: its callback continues it or it blocks
            self._t_base[tid] += self._t_end_v[tid] - self._t_start_v[tid]
            cb = self._t_cb[tid]
            more = cb(tid) if cb is not None else None
            if t_cpu[tid] != c:
                blocked = True  # the callback moved or stopped it
            elif more and more > 0:
                gen = t_gen[tid] + 1
                t_gen[tid] = gen
                start = self._work_done_ns[c]
                self._t_start_v[tid] = start
                end_v = start + float(more)
                self._t_end_v[tid] = end_v
                heappush(heap, (end_v, tid, gen))
            else:
                self._dequeue(c, tid, now)
                blocked = True
            vt = self._work_done_ns[c]
        return blocked

    def _after_change(self, c: int, now: int, charge: bool = True) -> None:
        """Charge runtime at a scheduling event (``update_curr``) and re-arm the CPU."""
        if charge and self._bandwidth is not None and self._queued[c] and not self._throttled[c] and self._runtime_remaining_ns[c] <= 0:
            self._account(c, now)
        if self._queued[c] == 0 and self._overloaded:
            self._idle_balance(c, now)
        self._schedule_cpu(c)

    def _account(self, c: int, now: int) -> None:
        """Silo empty: take a slice, or throttle this CPU (``__account_cfs_rq_runtime``)."""
        self._start_timer()
        rr = self._runtime_remaining_ns[c]
        need = self._slice - rr
        if self._prefetch_on and self._pool >= need and not self._fifo and self._prefetch(c, now, need):
            return
        self._pool, self._runtime_remaining_ns[c], amount = bwr.assign(self._pool, rr, self._slice)
        if amount > 0:
            self._idle = False
        if self._runtime_remaining_ns[c] <= 0:
            self._throttle(c, now)

    # A speed-up that changes no observable result: while the pool provably covers every take
    # that every CPU could make before a horizon H (an "epoch"), a CPU that needs a slice takes
    # at once all the slices the kernel would hand it one by one until H. Its silo then lasts
    # exactly as long, and what it would give back on going idle is the same. The epoch ends
    # before the period boundary, and any change that could break the bound (a new thread, a
    # resize) first hands the not-yet-due slices back.
    def _prefetch(self, c: int, now: int, need: int) -> bool:
        if now >= self._epoch_end and not self._start_epoch(now):
            return False
        s, sp, tick = self._slice, self._slice_eff, self.tick_ns
        t2 = -(-(now + s) // tick) * tick          # the kernel's second take on this CPU
        if t2 >= self._epoch_end:
            return False
        tk = t2 + ((self._epoch_end - 1 - t2) // sp) * sp  # its last take before H
        amount = need + (tk - now)
        self._pool -= amount
        self._runtime_remaining_ns[c] = s + (tk - now)
        self._pf_t1[c] = now
        self._pf_t2[c] = t2
        self._pf_tk[c] = tk
        self._idle = False
        return True

    def _start_epoch(self, now: int) -> bool:
        if not self._timer_active:
            return False
        potential_cpus = min(self.ncpus, len(self._t_cpu))
        span = self._pool // potential_cpus - self._slice - self.tick_ns
        end = min(now + span, self._next_fire - self.tick_ns)
        if end - now < 2 * self._slice_eff:
            return False
        self._epoch_end = end
        return True

    def _end_epoch(self, now: int) -> None:
        """Give back every slice taken ahead that the kernel would not have taken yet."""
        if self._epoch_end <= now:
            return
        self._epoch_end = now
        for c in range(self.ncpus):
            if self._pf_tk[c] > now:
                self._advance(c, now)
                self._unprefetch(c, now)
                self._schedule_cpu(c)

    def _unprefetch(self, c: int, now: int) -> None:
        """Hand CPU c's not-yet-due slices back to the pool (its silo as the kernel's would be)."""
        tk = self._pf_tk[c]
        if tk <= now:
            return
        t2, sp = self._pf_t2[c], self._slice_eff
        # the kernel's last take at or before now: the prefetch itself, or one on t2's grid
        t_last = self._pf_t1[c] if now < t2 else t2 + ((now - t2) // sp) * sp
        extra = tk - t_last
        self._pool += extra
        self._runtime_remaining_ns[c] -= extra
        self._pf_tk[c] = 0

    def _throttle(self, c: int, now: int) -> None:
        self._throttled[c] = True
        self._thr_from[c] = now
        self._fifo.append(c)
        if self._queued[c]:
            self._thr_clock[c] = now
        self._overloaded.discard(c)

    def _unthrottle(self, c: int, now: int) -> None:
        self._updated_ns[c] = max(self._updated_ns[c], now)
        self._throttled[c] = False
        self._gap_from[c] = self._thr_from[c]
        self._gap_to[c] = now
        self._thr_from[c] = -1
        if self._thr_clock[c] >= 0:
            self._stat.throttled_time_ns += now - self._thr_clock[c]
            self._thr_clock[c] = -1
        if self._queued[c] >= 2:
            self._overloaded.add(c)
            self._arm_balance()
        self._schedule_cpu(c)

    # ------------------------------------------------------------------ queueing and placement
    def _enqueue(self, c: int, tid: int, work: float, arm: bool = True) -> None:
        now = self.now
        if now > self._updated_ns[c]:
            self._advance(c, now)
        n = self._queued[c] + 1
        self._queued[c] = n
        throttled = self._throttled[c]
        if n == 2 and not throttled:
            self._overloaded.add(c)
            self._arm_balance()
        self._t_cpu[tid] = c
        self._place(c, tid, work)
        if self._bandwidth is not None:
            if throttled:
                if n == 1 and self._thr_clock[c] < 0:
                    self._thr_clock[c] = now  # enqueue into a throttled runqueue starts the clock
            elif self._runtime_remaining_ns[c] <= 0:
                # update_curr at enqueue (check_enqueue_throttle for an empty runqueue)
                self._account(c, now)
        if arm:
            self._schedule_cpu(c)

    def _place(self, c: int, tid: int, work: float) -> None:
        """Put a thread with ``work`` to do on CPU c's runqueue (processor sharing: its end on
        the CPU's shared virtual clock)."""
        gen = self._t_gen[tid] + 1
        self._t_gen[tid] = gen
        start = self._work_done_ns[c]
        end = start + work
        self._t_start_v[tid] = start
        self._t_end_v[tid] = end
        heappush(self._heap[c], (end, tid, gen))

    def _dequeue(self, c: int, tid: int, now: int) -> None:
        n = self._queued[c]
        if n == 2:
            self._overloaded.discard(c)
        elif n == 1:
            self._idle_since[c] = now
        self._queued[c] = n - 1
        self._t_cpu[tid] = -1
        self._t_last[tid] = c
        self._t_gen[tid] += 1
        if n == 1 and self._bandwidth is not None:
            if self._throttled[c]:
                if self._thr_clock[c] >= 0:
                    self._stat.throttled_time_ns += now - self._thr_clock[c]
                    self._thr_clock[c] = -1
            else:
                if self._pf_tk[c] > now:
                    self._unprefetch(c, now)
                if self._runtime_remaining_ns[c] <= 0:
                    # update_curr at dequeue charges first and may take a slice...
                    self._start_timer()
                    self._pool, self._runtime_remaining_ns[c], amount = bwr.assign(self._pool, self._runtime_remaining_ns[c], self._slice)
                    if amount > 0:
                        self._idle = False
                    if self._runtime_remaining_ns[c] <= 0:
                        # ...and if the pool had too little, put_prev_entity throttles the now
                        # empty cfs_rq (check_cfs_rq_runtime): no throttled time while it stays
                        # empty, but nr_throttled counts at the period timer and a wake-up on
                        # this CPU waits for distribution
                        self._pool, self._runtime_remaining_ns[c], throttle = bwr.throttle_on_put_prev(self._pool, self._runtime_remaining_ns[c])
                        if throttle:
                            self._throttle(c, now)
                            return
                # ...then the last dequeue gives back all but 1 ms
                self._return_slack(c, now)

    def _select_cpu(self, tid: int) -> int:
        nq, thr = self._queued, self._throttled
        prev = self._t_last[tid]
        if prev >= 0 and (nq[prev] == 0 or thr[prev]):
            return prev
        n = self.ncpus
        start = (prev + 1) % n if prev >= 0 else int(self.rng.integers(0, n))
        best: int = start
        best_load: int | None = None
        for i in range(n):
            c = (start + i) % n
            if nq[c] == 0 or thr[c]:
                return c
            if best_load is None or nq[c] < best_load:
                best, best_load = c, nq[c]
        return best

    def _arm_balance(self) -> None:
        """Periodic load balancing: an idle CPU pulls waiting threads from an overloaded one
        within a few ms (idle CPUs' ``balance_interval``; nohz idle balance)."""
        if self._balance_pending or len(self._t_cpu) <= 1:
            return
        self._balance_pending = True
        self.call_later(BALANCE_INTERVAL_NS, self._on_balance)

    def _on_balance(self) -> None:
        self._balance_pending = False
        now = self.now
        for c in range(self.ncpus):
            if not self._overloaded:
                return
            if self._queued[c] == 0 and not self._throttled[c]:
                self._idle_balance(c, now)
                self._schedule_cpu(c)

    def _idle_balance(self, c: int, now: int) -> None:
        """New-idle balance: CPU c went idle; pull one thread from the busiest unthrottled CPU
        (throttled hierarchies are not migrated: ``throttled_lb_pair``)."""
        if self._throttled[c]:
            return
        nq = self._queued
        busiest, load = -1, 1
        for d in self._overloaded:
            n = nq[d]
            if n > load or (n == load and d < busiest):
                busiest, load = d, n
        if busiest < 0:
            return
        if now > self._updated_ns[busiest]:
            self._advance(busiest, now)
        tid, left = self._migrant(busiest)
        cb = self._t_cb[tid]
        self._dequeue(busiest, tid, now)
        self._t_cb[tid] = cb
        self._schedule_cpu(busiest)
        self._enqueue(c, tid, max(left, 1.0), arm=False)  # every caller re-arms CPU c next

    def _migrant(self, c: int) -> tuple[int, float]:
        """The queued thread of CPU c to migrate, and its work left (its CPU so far booked):
        the one with the most work left (least likely to finish soon)."""
        heap = self._heap[c]
        t_gen, t_cpu = self._t_gen, self._t_cpu
        end_v, tid = -1.0, -1
        for e, t, g in heap:
            if e > end_v and g == t_gen[t] and t_cpu[t] == c:
                end_v, tid = e, t
        left = end_v - self._work_done_ns[c]
        self._t_base[tid] += self._work_done_ns[c] - self._t_start_v[tid]
        return tid, left

    # ------------------------------------------------------------------ group timers
    def _ns_to_refresh(self, now: int) -> int:
        return self._next_fire - now if self._timer_active else 0

    def _start_timer(self) -> None:
        """``start_cfs_bandwidth``: arm the period timer on the fixed grid if it is idle."""
        if self._timer_active or self._bandwidth is None:
            return
        self._timer_active = True
        self._arm_period(bwr.next_boundary(self.now, self._phase_ns, self._period))

    def _arm_period(self, t_fire: int) -> None:
        self._timer_ver += 1
        self._next_fire = t_fire
        ver = self._timer_ver
        self.call_later(t_fire - self.now, self._on_period, ver)

    def _on_period(self, ver: int) -> None:
        """``do_sched_cfs_period_timer``."""
        if ver != self._timer_ver or self._bandwidth is None:
            return
        now = self.now
        self._sync_all(now)
        st = self._stat
        throttled = bool(self._fifo)
        st.nr_periods += 1
        self._rank = self.rng.permutation(self.ncpus).tolist()
        self._pool, self._snap, burst_used = bwr.refill(self._pool, self._snap, self._quota, self._burst)
        if burst_used > 0:
            st.nr_bursts += 1
            st.burst_time_ns += burst_used
        if self._legacy:
            for c in range(self.ncpus):
                if self._runtime_remaining_ns[c] > 0:
                    self._runtime_remaining_ns[c] = bwr.legacy_expire(self._runtime_remaining_ns[c])
                    self._schedule_cpu(c)
        usage = sum(self._usage)
        self._periods.append(_Period(now, usage - self._usage_at_period, throttled, len(self._fifo),
                                     self._pool, burst_used, self._bandwidth.quota_us))
        self._usage_at_period = usage
        if self._idle and not throttled:
            self._timer_active = False  # out_deactivate: nothing counted until the next request
            self._timer_ver += 1
            return
        nxt = now + self._period
        if not throttled:
            self._idle = True
            self._arm_period(nxt)
            return
        st.nr_throttled += 1
        self._distribute(now)
        self._idle = False
        self._arm_period(nxt)

    def _distribute(self, now: int) -> None:
        fifo = self._fifo
        if not fifo:
            return
        order = list(fifo)
        self._pool, new_rr = bwr.distribute(self._pool, [self._runtime_remaining_ns[c] for c in order])
        for c, rr in zip(order, new_rr):
            self._runtime_remaining_ns[c] = rr
            if rr > 0:
                fifo.remove(c)
                self._unthrottle(c, now)

    def _return_slack(self, c: int, now: int) -> None:
        # (the caller, _dequeue, has already handed prefetched slices back)
        self._pool, self._runtime_remaining_ns[c] = bwr.return_slack(self._pool, self._runtime_remaining_ns[c])
        # (no throttled CPU: the rule says no, so skip asking on this hot path)
        if self._fifo and bwr.should_arm_slack_timer(self._pool, self._slice, True,
                                                     self._ns_to_refresh(now), self._slack_pending):
            self._slack_pending = True
            self.call_later(bwr.SLACK_PERIOD_NS, self._on_slack)

    def _on_slack(self) -> None:
        self._slack_pending = False
        if self._bandwidth is None:
            return
        now = self.now
        if bwr.slack_timer_distributes(self._pool, self._slice, self._ns_to_refresh(now)):
            self._distribute(now)
