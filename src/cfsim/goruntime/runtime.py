"""A Go process on the CFS engine: Ps, Ms (engine threads), goroutine work, the scheduler's slow
paths and the GC, with the runtime's own metrics.

Model (rules from golang/go ``src/runtime/proc.go``, ``mgc.go``, ``mgcpacer.go`` and ``mgclimit.go``,
https://github.com/golang/go/tree/master/src/runtime; pure rules in :mod:`.gomaxprocs`,
:mod:`.gcpacer`, :mod:`.sched`):

* **Ps and Ms.** ``gomaxprocs`` Ps; an M (an engine thread) holding a P is always burning a
  *segment* of CPU: a chunk of goroutine work, a mark-worker chunk, an assist, the STW work, a
  safe-point acknowledgement or its own wake-up (each after any scheduler overhead it owes). An M
  without a P is parked (futex). A throttled M keeps its P (the runtime cannot see throttling).
* **Work.** A *work source* (the workload) hands out chunks of runnable goroutine work
  (``claim(max_ns)``); a P runs at most ``forcePreemptNS`` = 10 ms per chunk. Records/requests
  are never simulated one by one when they can be batched.
* **Scheduler.** ``findRunnable``: GC worker first (dedicated, then fractional), then goroutine
  work, then a search (spin) if ``2*nmspinning < P - npidle`` (cost ``a + b P x xfer``), then an
  idle mark worker, then release the P and park (cost ``park``); every slow path also pays
  ``sched.lock`` contention per other M in the scheduler. ``wakep`` (idle P, no spinner) after a
  spinning M finds work (``resetspinning``) and when a running goroutine readies others
  (``ready``, ``newproc``): a goroutine readied by the one that just finished goes to that P's
  ``runnext`` and runs there first, and the wake-up follows; a netpoll batch of k goroutines
  takes one idle P and ``injectglist`` starts ``min(k-1, npidle)`` more Ms. ``startm``: a woken M
  pays ``wake`` (plus a successful steal if it was spinning); with a free CPU it decides at once
  (its few microseconds change nothing the model resolves), otherwise it first runs its wake-up
  as a segment, holding ``nmspinning`` meanwhile, so the spinning chain advances one M at a time
  as Ms get CPUs; on a host other processes use, the OS may delay it by up to a base slice. A
  woken M that finds nothing burns its wake-up, search and park at once; an M that parks after
  work owes its search and park and burns them at its next run (one engine event fewer).
* **SMT.** With ``host.threads_per_core > 1``, segments started while more Ms run than there
  are cores take ``1 + smt_slowdown`` times the CPU for the paired share.
* **GC.** Trigger when ``heapLive >= trigger`` (pacer) or every 2 minutes; STW sweep
  termination: every P-holding M is preempted and must burn ``gc_preempt`` CPU to reach a safe
  point, so a throttled M stretches the pause; concurrent mark: ``D`` dedicated Ps for the whole
  phase, fractional workers at scheduling points by the exact ``1.2 x goal`` rule, idle mark
  workers on Ps that would go idle (cap ``P - D``, 0/1 for periodic cycles), yielding to new
  goroutine work; mark work = (live heap + roots) / scan rate plus ``c0 + c1 P`` per cycle;
  the live heap is a workload constant and objects allocated during the mark count as marked
  (allocate-black), so a stretched mark raises the next goal; assists charge allocation during
  mark at the pacer's ``assistWorkPerByte`` beyond the background credit; STW mark termination;
  the pacer's cons/mark, goal and trigger update; optional GC CPU limiter (assists off while
  full). Sweeping is treated as free (the GC guide: "negligible"); the scavenger is not modelled.
* **Metrics.** ``/cpu/classes/*`` in P-time (``total = GOMAXPROCS x wall``, throttled time
  counts as running, spinning counts as user) next to real CPU per class; GC cycles and pause
  durations; ``go_sched_gomaxprocs_threads``.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd

from cfsim.goruntime import gcpacer, gomaxprocs as gmp
from cfsim.goruntime.sched import (DRAIN_CHECK_NS, FORCE_PREEMPT_NS, SchedCosts, may_spin, netpoll_wakeups,
                                   smt_inflation)

MiB = 1 << 20

# segment kinds (what an M is burning)
USER, ASSIST, SPIN, WAKE, PARK, DED, FRAC, IDLEW, ACK, STWK = range(10)
# real-CPU classes per segment kind
_CPU_CLASS = {USER: "user", ASSIST: "gc_assist", SPIN: "sched", WAKE: "sched", PARK: "sched",
              DED: "gc_dedicated", FRAC: "gc_dedicated", IDLEW: "gc_idle", ACK: "gc_pause", STWK: "gc_pause"}
CPU_CLASSES = ("user", "sched", "gc_assist", "gc_dedicated", "gc_idle", "gc_pause")
# P-time classes (runtime/metrics /cpu/classes)
PC_IDLE, PC_USER, PC_DED, PC_IDLEMARK, PC_ASSIST, PC_PAUSE = range(6)
_SEG_PC = {USER: PC_USER, SPIN: PC_USER, WAKE: PC_USER, ASSIST: PC_ASSIST, DED: PC_DED, FRAC: PC_DED,
           IDLEW: PC_IDLEMARK, ACK: PC_USER, STWK: PC_USER}
# list forms for the hot path (index = segment kind); a P-holding M "parked" has just taken its P
_SEG_PC_L = [_SEG_PC.get(k, PC_USER) for k in range(10)]
_CPU_IDX = [CPU_CLASSES.index(_CPU_CLASS[k]) for k in range(10)]
_SCHED = CPU_CLASSES.index("sched")
_MARK_SEGS = (DED, FRAC, IDLEW, ASSIST)

OFF, SWEEPTERM, MARK, MARKTERM = range(4)
SAMPLE_NS_DEFAULT = 100_000_000


class Claim:
    """A chunk of goroutine work handed to a P: CPU, allocation, and the source's token."""

    __slots__ = ("work", "alloc", "token")

    def __init__(self, work: int, alloc: int, token: Any):
        self.work = int(work)
        self.alloc = int(alloc)
        self.token = token


class WorkSource(Protocol):
    def has_work(self) -> bool: ...

    def claim(self, max_ns: int) -> Claim | None: ...

    def done(self, claim: Claim, t0: int, t1: int) -> None: ...

    def requeue(self, claim: Claim, left_ns: int, t0: int, t1: int) -> Claim | None: ...


@dataclass(frozen=True)
class GoParams:
    gomaxprocs: Any = "host"
    round: str = "floor"
    version: str = "1.26"
    gogc: int = 100
    gomemlimit_bytes: int | None = None
    live_heap_bytes: int = 16 * MiB
    roots_bytes: int = MiB // 2
    gc_cpu_limiter: bool = True
    scan_bytes_per_ns: float = 1.0 * MiB / 1e6
    stw_base_ns: float = 10_000.0
    stw_per_p_ns: float = 1_000.0
    preempt_ns: float = 2_000.0
    cycle_base_ns: float = 20_000.0
    cycle_per_p_ns: float = 10_000.0
    costs: SchedCosts = SchedCosts()
    threads_per_core: int = 1
    smt_slowdown: float = 0.0
    background_cores: float = 0.0

    @classmethod
    def from_scenario(cls, sc) -> "GoParams":
        go = sc.section("go")
        lim = go["gomemlimit_mb"]
        return cls(gomaxprocs=go["gomaxprocs"], round=go["round"], version=go["version"], gogc=go["gogc"],
                   gomemlimit_bytes=None if lim is None else int(lim * MiB),
                   live_heap_bytes=int(go["live_heap_mb"] * MiB), roots_bytes=int(go["roots_mb"] * MiB),
                   gc_cpu_limiter=go["gc_cpu_limiter"], scan_bytes_per_ns=go["gc_scan_mb_per_ms"] * MiB / 1e6,
                   stw_base_ns=go["gc_stw_base_us"] * 1e3, stw_per_p_ns=go["gc_stw_per_p_us"] * 1e3,
                   preempt_ns=go["gc_preempt_us"] * 1e3, cycle_base_ns=go["gc_cycle_base_us"] * 1e3,
                   cycle_per_p_ns=go["gc_cycle_per_p_us"] * 1e3, costs=SchedCosts.from_go_section(go),
                   threads_per_core=sc["host.threads_per_core"], smt_slowdown=sc["host.smt_slowdown"],
                   background_cores=sc["host.background_cores"])


class _M:
    __slots__ = ("tid", "p", "seg", "work", "pre", "debt", "t_seg", "claim", "spinning", "mark_bytes",
                 "stopped", "coord", "charged", "infl")

    def __init__(self, tid: int):
        self.tid = tid
        self.p = -1
        self.seg = PARK
        self.work = 0
        self.pre = 0      # scheduler overhead [ns] at the start of the current segment
        self.debt = 0     # park cost [ns] charged at the M's next wake-up (saves an event)
        self.charged = 0.0  # CPU [ns] of this M's finished (or stopped) segments
        self.t_seg = 0
        self.claim: Claim | None = None
        self.spinning = False
        self.mark_bytes = 0.0
        self.stopped = False
        self.coord = False
        self.infl = 1.0   # CPU per unit of work of the current segment (SMT sharing)


class GoRuntime:
    """One Go process. ``source`` is set by the workload before :meth:`start`."""

    SAMPLE_NS = SAMPLE_NS_DEFAULT

    def __init__(self, engine, params: GoParams, cpus: int, base_limit: float | None,
                 limit_schedule=None, period_us: int = 100_000, name: str = "go",
                 sample_ns: int = SAMPLE_NS_DEFAULT):
        self.eng = engine
        self.prm = params
        self.cpus = cpus
        self.base_limit = base_limit
        self.limit_schedule = limit_schedule
        self.period_us = period_us
        self.name = name
        self.source: WorkSource | None = None
        self.sample_ns = int(sample_ns)
        self.costs = params.costs
        self._deferring = False
        self._deferred: list[tuple] = []
        self.wake_busy = min(1.0, params.background_cores / cpus) if cpus else 0.0
        self.wake_slice_ns = int(750_000 * (1 + int(np.log2(min(max(cpus, 1), 8)))))
        # its own stream, drawn from the engine's only when used (other scenarios keep theirs)
        self.wake_rng = np.random.default_rng(int(engine.rng.integers(2**62))) if self.wake_busy > 0 else None
        self.nprocs = gmp.gomaxprocs_value(params.gomaxprocs, base_limit, cpus, params.version,
                                           params.round, period_us)
        self._costs_for(self.nprocs)
        self.updates = gmp.container_aware(params.gomaxprocs, params.version)
        self.ms: dict[int, _M] = {}
        self.idle_ms: list[_M] = []
        self.holders: dict[_M, None] = {}   # insertion-ordered set: iteration is deterministic
        self.free_ps = list(range(self.nprocs - 1, -1, -1))
        self.nmspinning = 0
        self.spin_ends: list[int] = []      # end times of searches decided at once (see _schedule)
        # P-time accounting
        # P-time per class, integrated exactly in integer ns: acc_i(t) = ni_i * t - neg_i, where
        # ni are the counts being integrated (all Ps count as "pause" during a stop-the-world)
        # and every change of ni_i by d at time t adds d * t to neg_i.
        self.n_pc = [0] * 6
        self.n_pc[PC_IDLE] = self.nprocs
        self.ni = list(self.n_pc)
        self.neg = [0] * 6
        self.stw_np = 0
        self.stw = False
        self.cpu_l = [0.0] * len(CPU_CLASSES)   # real CPU [ns] per class (CPU_CLASSES order)
        # GC state
        self.phase = OFF
        self.gc_cycles = 0
        self.gc_forced = 0
        self.pauses_ns: list[int] = []
        self.pause_end_ns: list[int] = []
        self.cycle_pause_ns: list[tuple[int, int]] = []
        self._sweepterm_pause = 0
        self.heap_marked = params.live_heap_bytes
        self.heap_live = params.live_heap_bytes
        self.alloc_total = 0
        self.cons = gcpacer.ConsMarkEstimator()
        self.limiter = gcpacer.GcCpuLimiter(self.nprocs)
        self._lim_t = 0
        self._lim_acc = [0.0] * 6
        self.limiter_enabled_ns = 0
        self.goal = 0
        self.trigger_bytes = 0
        self._commit()
        self.last_gc_end = 0
        self.wc = gcpacer.worker_counts(self.nprocs)
        self.ded_running = 0
        self.idlew_running = 0
        self.mark_inflight = 0
        self.mark_unclaimed = 0.0
        self.scan_expected = 0
        self.mark_total = 0.0
        self.scan_done = 0.0
        self.bg_credit = 0.0
        self.mark_start = 0
        self.triggered = 0
        self.assist_pt0 = 0.0
        self.idlemark_pt0 = 0.0
        self.frac_ns: dict[int, float] = {}
        self.awpb = 0.0
        self.periodic = False
        # STW state
        self.stw_wait = 0
        self.stw_coord_done = False
        self.stw_t0 = 0
        self.stw_then = None
        self.stw_coord: _M | None = None
        self.pending_procs: int | None = None
        self.stw_preempted = False
        self.samples: list[tuple] = []
        self.gomaxprocs_changes: list[tuple[float, int]] = [(0.0, self.nprocs)]
        self._cur: _M | None = None
        # Ms are created up front (threads exist before the clock starts): enough for every P
        # plus Ms in transit (parking) and the runtime's own M; more are added if needed.
        max_procs = self.nprocs
        if self.updates:
            max_procs = max(max_procs, cpus)
        for _ in range(max_procs + 4):
            m = _M(self.eng.new_thread(f"{self.name}-M{len(self.ms)}"))
            self.ms[m.tid] = m
            self.idle_ms.append(m)

    def _costs_for(self, procs: int) -> None:
        c = self.costs
        self.c_wake, self.c_park, self.c_switch = c.wake(), c.park(), c.switch()
        self.c_spin, self.c_steal = c.spin(procs, self.cpus), c.steal(procs, self.cpus)
        self.c_lock = c.lock()
        self.smt = self.prm.threads_per_core > 1 and self.prm.smt_slowdown > 0

    def _lock_ns(self) -> int:
        """``sched.lock`` contention of one slow path: the other Ms that can be in the scheduler."""
        if not self.c_lock:
            return 0
        # lock_contenders(busy Ps, CPUs), inlined: this runs on every slow path
        n = self.nprocs - len(self.free_ps)
        if n > self.cpus:
            n = self.cpus
        return self.c_lock * (n - 1) if n > 1 else 0

    def _infl(self) -> float:
        """CPU per unit of work of a segment starting now: threads of this process beyond one per
        physical core share a core with a sibling (the kernel's ``select_idle_core`` fills idle
        cores first), and a shared core does each thread's work slower."""
        if not self.smt:
            return 1.0
        return smt_inflation(min(len(self.holders), self.cpus), self.cpus, self.prm.threads_per_core,
                             self.prm.smt_slowdown)

    # ------------------------------------------------------------------ setup
    def start(self) -> None:
        self.eng.call_at(0, self._sample)
        if self.updates:
            self.eng.call_later(gmp.SYSMON_UPDATE_NS, self._sysmon_gomaxprocs)
        self.eng.call_later(gcpacer.FORCEGC_PERIOD_NS, self._forcegc)
        if self.source is not None and self.source.has_work():
            self.ready(1)

    def _new_m(self) -> _M:
        ims = self.idle_ms
        if ims:
            if ims[-1] is not self._cur:
                return ims.pop()
            for i in range(len(ims) - 2, -1, -1):   # never the M whose callback is running
                if ims[i] is not self._cur:
                    return ims.pop(i)
        m = _M(self.eng.new_thread(f"{self.name}-M{len(self.ms)}"))
        self.ms[m.tid] = m
        return m

    # ------------------------------------------------------------------ accounting
    def _acc(self) -> list[int]:
        """Cumulative P-time per class [ns] now."""
        now = self.eng.now
        return [n * now - g for n, g in zip(self.ni, self.neg)]

    def _pc_move(self, old: int, new: int) -> None:
        if old != new:
            self.n_pc[old] -= 1
            self.n_pc[new] += 1
            if not self.stw:
                now = self.eng.now
                self.ni[old] -= 1
                self.neg[old] -= now
                self.ni[new] += 1
                self.neg[new] += now

    def _integ_stw(self, begin: bool) -> None:
        """Switch the integrated counts to "all Ps paused" (begin) or back to the P states."""
        now = self.eng.now
        ni, neg = self.ni, self.neg
        for i in range(6):
            if ni[i]:
                neg[i] -= ni[i] * now
                ni[i] = 0
        if begin:
            self.stw_np = self.nprocs
            ni[PC_PAUSE] = self.nprocs
            neg[PC_PAUSE] += self.nprocs * now
        else:
            for i in range(6):
                ni[i] = self.n_pc[i]
                neg[i] += self.n_pc[i] * now

    def _seg(self, m: _M, seg: int, work: float, pre: float = 0, infl: float = 1.0) -> int:
        """Start segment ``seg`` on ``m`` (already holding its P, if any) after ``pre`` ns of
        scheduler overhead; ``infl``: CPU per unit of ``work`` (SMT sharing). Returns the total
        CPU to burn."""
        pre = int(pre)
        m.infl = infl
        total = max(1, int(work * infl) + pre)
        if m.p >= 0:
            self._pc_move(_SEG_PC_L[m.seg], _SEG_PC_L[seg])
        m.seg = seg
        m.work = total
        m.pre = pre
        m.t_seg = self.eng.now
        return total

    def _acquire_p(self, m: _M) -> None:
        m.p = self.free_ps.pop()
        m.seg = PARK
        self.holders[m] = None
        self._pc_move(PC_IDLE, PC_USER)

    def _release_p(self, m: _M) -> None:
        self._pc_move(_SEG_PC_L[m.seg], PC_IDLE)
        self.free_ps.append(m.p)
        m.p = -1
        self.holders.pop(m, None)
        if m.spinning:
            m.spinning = False
            self.nmspinning -= 1

    @property
    def npidle(self) -> int:
        return len(self.free_ps)

    # ------------------------------------------------------------------ waking
    def ready(self, k: int = 1, netpoll: bool = True, spawns: bool = False) -> None:
        """``k`` goroutines became runnable.

        ``netpoll``: from a netpoll batch (network data arrived): with an idle P, the M blocked
        in ``netpoll`` takes one and ``injectglist`` starts ``min(k-1, npidle)`` more Ms plus a
        ``wakep``; with no idle P they wait in the global queue for a P's next scheduling point.
        Otherwise (``ready``/``newproc`` from a running goroutine) one ``wakep``. ``spawns``: the
        readied goroutine readies others at once (channel sends, ``go`` statements), each with a
        ``wakep`` (the spinning chain then spreads the work).
        """
        if self.stw:
            return
        if self._deferring:
            # readied by the goroutine that just finished on the current M: ``runqput`` puts it
            # in that P's ``runnext``, which the M runs first; the wake-ups happen after that
            self._deferred.append((k, netpoll, spawns))
            return
        if netpoll:
            if self.free_ps:
                self._startm(spinning=False)
                if k > 1:
                    for _ in range(netpoll_wakeups(k - 1, self.npidle)):
                        self._startm(spinning=False)
                    self.wakep()
        else:
            self.wakep()
        if spawns:
            self.wakep()
        if not self.free_ps and self.idlew_running and self.source is not None and self.source.has_work():
            if self._cur is not None:
                # inside a completion callback: stopping a thread of the same CPU there is not
                # supported by the engine, so act at the same instant from a timer
                self.eng.call_later(0, self._yield_idle_worker)
            else:
                self._yield_idle_worker()

    def wakep(self) -> None:
        if self.stw or not self.free_ps or self.nmspinning:
            return
        self._startm(spinning=True)

    def _startm(self, spinning: bool) -> None:
        """``startm`` (proc.go): an idle M takes an idle P and is woken (``notewakeup`` ->
        ``futexwakeup``). It decides what to run only once it has run its wake-up (the futex
        return and switch-in, plus any park cost still owed): on a host whose CPUs are busy that
        takes a while, and a spinning M keeps ``nmspinning`` up meanwhile, so no other ``wakep``
        starts an M (``wakep``: "only start one if none exist already") -- the spinning chain
        advances one M at a time, as fast as Ms get CPUs."""
        m = self._new_m()
        self._acquire_p(m)
        if spinning:
            m.spinning = True
            self.nmspinning += 1
        delay = self._os_wake_delay()
        if not delay and len(self.holders) <= self.cpus:
            # a CPU is free for it: it runs at once, and its few microseconds of wake-up change
            # nothing the model resolves -- decide now (one engine event fewer per wake-up)
            extra = self.c_wake + self._lock_ns() + m.debt
            m.debt = 0
            w = self._schedule(m, extra)
            if w:
                self.eng.run(m.tid, w, self._on_done)
            else:
                self._burn_futile(m)
            return
        w = self._seg(m, WAKE, 0, self.c_wake + self._lock_ns() + m.debt)
        m.debt = 0
        if delay:
            self.eng.call_later(delay, self._run_woken, m, w, m.t_seg)
        else:
            self.eng.run(m.tid, w, self._on_done)

    def _os_wake_delay(self) -> int:
        """The OS's wake-up latency of a woken M on a host other processes use: with the chance
        that its CPU runs another process's task (``background_cores / cpus``), it waits for the
        kernel to preempt that task, up to one base slice (``sysctl_sched_base_slice`` = 0.75 ms
        x (1 + log2(min(CPUs, 8))) in ``kernel/sched/fair.c``), uniformly."""
        if self.wake_busy <= 0:
            return 0
        if self.wake_rng.random() >= self.wake_busy:
            return 0
        return int(self.wake_rng.random() * self.wake_slice_ns)

    def _futile_seg(self, m: _M) -> int:
        """A woken M that found nothing burns its wake-up, search and park now, then parks (it is
        taken off the idle list until then): an M woken only to find nothing would otherwise
        carry that CPU as debt to a next run that may never bring work."""
        try:
            self.idle_ms.remove(m)
        except ValueError:
            pass
        w = max(1, int(m.debt))
        m.debt = 0
        m.seg, m.work, m.pre, m.t_seg, m.infl = PARK, w, w, self.eng.now, 1.0
        return w

    def _burn_futile(self, m: _M) -> None:
        if m.p < 0 and m.debt > 0 and m is not self._cur:
            self.eng.run(m.tid, self._futile_seg(m), self._on_done)

    def _run_woken(self, m: _M, w: int, t_seg: int) -> None:
        if m.p < 0 or m.seg != WAKE or m.t_seg != t_seg or self.eng.is_runnable(m.tid):
            return   # stopped meanwhile (stop the world) or already running
        self.eng.run(m.tid, w, self._on_done)

    def _yield_idle_worker(self) -> None:
        """``pollWork``: idle mark workers notice runnable goroutines (within ~100 us, taken as
        at once) and give their Ps back, one per runnable chunk of work."""
        src = self.source
        if self.stw:
            return
        for m in sorted((m for m in self.holders if m.seg == IDLEW and not m.stopped), key=lambda m: m.p):
            if not src.has_work():
                return
            left = self.eng.stop(m.tid)
            self._charge(m, left)
            self._mark_return(m, left)
            self.idlew_running -= 1
            w = self._schedule(m)
            if w:
                self.eng.run(m.tid, w, self._on_done)

    # ------------------------------------------------------------------ engine callback
    def _charge(self, m: _M, left: int = 0) -> None:
        used = m.work - left
        m.charged += used
        pre = min(used, m.pre)
        if pre:
            self.cpu_l[_SCHED] += pre
        self.cpu_l[_CPU_IDX[m.seg]] += used - pre

    def _on_done(self, tid: int) -> int | None:
        m = self.ms[tid]
        self._cur = m
        try:
            return self._dispatch(m)
        finally:
            self._cur = None

    def _dispatch(self, m: _M) -> int | None:
        self._charge(m)
        seg = m.seg
        if seg == USER:
            return self._user_done(m)
        if seg in _MARK_SEGS:
            return self._mark_done(m)
        if seg == WAKE:
            w = self._schedule(m)
            if w is None and m.p < 0 and m.debt > 0:
                return self._futile_seg(m)
            return w
        if seg == PARK:
            self.idle_ms.append(m)
            return None
        if seg == ACK:
            m.stopped = True
            self.stw_wait -= 1
            return self._stw_check(m)
        if seg == STWK:
            self.stw_coord_done = True
            return self._stw_check(m)
        raise AssertionError(seg)

    # ------------------------------------------------------------------ scheduling
    def _schedule(self, m: _M, extra: float = 0) -> int | None:
        """``schedule``/``findRunnable`` for an M holding a P at a scheduling point; ``extra`` is
        overhead already owed (a wake-up). Returns the next segment's CPU, or None if the M
        released its P and blocks."""
        if self.phase == MARK:
            w = self._gc_worker(m, extra)
            if w:
                return w
        src = self.source
        if src is not None and src.has_work():
            c = src.claim(FORCE_PREEMPT_NS)
            if c is not None:
                pre = extra + self.c_switch
                if m.spinning:
                    pre += self.c_steal
                    m.claim = c
                    w = self._seg(m, USER, c.work, pre, self._infl() if self.smt else 1.0)
                    m.spinning = False
                    self.nmspinning -= 1
                    if self.nmspinning == 0:
                        self.wakep()   # resetspinning
                    return w
                m.claim = c
                return self._seg(m, USER, c.work, pre, self._infl() if self.smt else 1.0)
        # Nothing runnable: spin (steal) if the "half the busy Ps" rule allows it, then an idle
        # mark worker or park. The search is decided at once (no work appears in its few us in
        # this model) and its CPU is owed by the M, burnt at its next run. For the rule, an M
        # counts as spinning (and as holding its P) until its search would have ended.
        now = self.eng.now
        ends = self.spin_ends
        while ends and ends[0] <= now:
            heapq.heappop(ends)
        nv = len(ends)
        if may_spin(m.spinning, self.nmspinning + nv, self.nprocs, self.npidle - nv):
            extra += self.c_spin + self._lock_ns()
            heapq.heappush(ends, now + self.c_spin)
        if m.spinning:
            m.spinning = False
            self.nmspinning -= 1
        m.debt += int(extra)
        return self._idle_or_park(m)

    def _idle_or_park(self, m: _M) -> int | None:
        """End of ``findRunnable``: an idle mark worker, else release the P and park. The park's
        CPU is owed and burnt at the M's next wake-up (one event fewer per park)."""
        if self.phase == MARK and self.mark_unclaimed > 0 and self.idlew_running < self.wc.max_idle:
            self.idlew_running += 1
            w = self._mark_seg(m, IDLEW, pre=m.debt)
            m.debt = 0
            self._unspin(m)
            self.wakep()   # the spinning chain continues into the next idle P
            return w
        self._release_p(m)
        m.seg = PARK
        m.debt += self.c_park + self._lock_ns()
        self.idle_ms.append(m)
        return None

    # ------------------------------------------------------------------ user work
    def _user_done(self, m: _M) -> int | None:
        c = m.claim
        m.claim = None
        self._deferring = True
        try:
            self.source.done(c, m.t_seg, self.eng.now)
        finally:
            self._deferring = False
        w = self._allocated(m, c.alloc)
        if w is None:
            w = self._schedule(m)
        if self._deferred:
            calls, self._deferred = self._deferred, []
            for args in calls:
                self.ready(*args)
        return w

    def _allocated(self, m: _M, alloc: int) -> int | None:
        if alloc <= 0:
            return None
        self.heap_live += alloc
        self.alloc_total += alloc
        if self.phase == MARK:
            scan = self._assist_scan(alloc)
            if scan > 0:
                self.mark_unclaimed -= scan
                self.mark_inflight += 1
                m.mark_bytes = scan
                return self._seg(m, ASSIST, scan / self.prm.scan_bytes_per_ns, 0, self._infl())
        elif self.phase == OFF and not self.stw and self.goal and self.heap_live >= self.trigger_bytes:
            return self._gc_start(m, periodic=False)
        return None

    # ------------------------------------------------------------------ GC: pacer
    def _commit(self) -> None:
        p = self.prm
        goal = gcpacer.heap_goal(self.heap_marked, p.roots_bytes, 0, p.gogc, p.gomemlimit_bytes,
                                 non_heap=p.roots_bytes)
        if goal is None:
            self.goal = 0
            self.trigger_bytes = 1 << 62
            return
        rw = gcpacer.runway(self.cons.value, p.live_heap_bytes, p.roots_bytes, 0)
        self.goal = goal
        self.trigger_bytes = gcpacer.trigger(goal, self.heap_marked, rw)

    def _revise(self) -> None:
        exp = int(self.mark_total)
        self.awpb = gcpacer.assist_work_per_byte(self.heap_live, self.goal, self.triggered, int(self.scan_done),
                                                 exp, exp, self.prm.gogc)

    def _assist_scan(self, alloc: int) -> float:
        if self.prm.gc_cpu_limiter:
            self._limiter_update()
            if self.limiter.enabled:
                return 0.0
        self._revise()
        debt = alloc * self.awpb
        take = min(self.bg_credit, debt)
        self.bg_credit -= take
        debt -= take
        if debt <= 0 or self.mark_unclaimed <= 0:
            return 0.0
        scan = min(max(debt, gcpacer.GC_OVER_ASSIST_WORK), self.mark_unclaimed)
        self.bg_credit += scan - min(scan, debt)
        return scan

    def _limiter_update(self, force: bool = False, gc_on: bool | None = None) -> None:
        """Feed the limiter the P-time since its last update (at most every 10 ms, and at each
        GC phase change so that a window never straddles one)."""
        now = self.eng.now
        if not force and now - self._lim_t < gcpacer.LIMITER_UPDATE_PERIOD_NS:
            return
        acc = self._acc()
        d = [acc[i] - self._lim_acc[i] for i in range(6)]
        was = self.limiter.enabled
        self.limiter.update(now - self._lim_t, d[PC_ASSIST], d[PC_IDLE] + d[PC_IDLEMARK],
                            self.phase == MARK if gc_on is None else gc_on, d[PC_PAUSE], self.gc_cycles)
        if was:
            self.limiter_enabled_ns += now - self._lim_t
        self._lim_t = now
        self._lim_acc = list(acc)

    # ------------------------------------------------------------------ GC: cycle
    def _gc_start(self, m: _M | None, periodic: bool) -> int | None:
        self.periodic = periodic
        self.phase = SWEEPTERM
        return self._stw_begin(m, self._gc_mark_begin)

    def _gc_mark_begin(self) -> None:
        p = self.prm
        self._limiter_update(force=True, gc_on=False)
        self.phase = MARK
        self.wc = gcpacer.worker_counts(self.nprocs, self.periodic)
        self.mark_start = self.eng.now
        self.triggered = self.heap_live
        self.scan_expected = p.live_heap_bytes + p.roots_bytes
        # mark work: scanning (heap + roots) plus the per-cycle overheads (c0 + c1 P), in scan units
        overhead = (p.cycle_base_ns + p.cycle_per_p_ns * self.nprocs) * p.scan_bytes_per_ns
        self.mark_unclaimed = float(self.scan_expected) + overhead
        self.mark_total = self.mark_unclaimed
        self.scan_done = 0.0
        self.bg_credit = 0.0
        self.mark_inflight = 0
        self.ded_running = 0
        self.idlew_running = 0
        self.frac_ns = {}
        acc = self._acc()
        self.assist_pt0 = acc[PC_ASSIST]
        self.idlemark_pt0 = acc[PC_IDLEMARK]
        self._revise()

    def _gc_mark_end(self) -> None:
        p = self.prm
        now = self.eng.now
        self._limiter_update(force=True, gc_on=True)
        wall = now - self.mark_start
        alloc_during = self.heap_live - self.triggered
        acc = self._acc()
        cur = gcpacer.current_cons_mark(alloc_during, int(self.scan_expected),
                                        acc[PC_ASSIST] - self.assist_pt0,
                                        acc[PC_IDLEMARK] - self.idlemark_pt0, wall, self.nprocs)
        self.cons.update(cur)
        # allocate-black: objects allocated during mark count as marked
        self.heap_marked = p.live_heap_bytes + max(0, alloc_during)
        self.heap_live = self.heap_marked
        self.phase = OFF
        self.gc_cycles += 1
        self.gc_forced += int(self.periodic)
        self.last_gc_end = now
        self._commit()

    def _frac_run_ns(self, m: _M) -> float | None:
        return gcpacer.fractional_run_ns(self.wc.fractional_goal, self.frac_ns.get(m.p, 0.0),
                                         self.eng.now - self.mark_start)

    def _gc_worker(self, m: _M, extra: float = 0) -> int | None:
        """``findRunnableGCWorker``: a dedicated worker if one is still needed, else a fractional
        one if this P is behind its share."""
        if self.mark_unclaimed <= 0:
            return None
        if self.ded_running < self.wc.dedicated:
            self.ded_running += 1
            w = self._mark_seg(m, DED, pre=extra)
            self._unspin(m)
            return w
        if self.wc.fractional_goal > 0:
            x = self._frac_run_ns(m)
            if x is not None:
                w = self._mark_seg(m, FRAC, max(x, DRAIN_CHECK_NS), pre=extra)
                self._unspin(m)
                return w
        return None

    def _unspin(self, m: _M) -> None:
        if m.spinning:
            m.spinning = False
            self.nmspinning -= 1
            if self.nmspinning == 0:
                self.wakep()

    def _mark_seg(self, m: _M, seg: int, max_ns: float = FORCE_PREEMPT_NS, pre: float = 0) -> int:
        rate = self.prm.scan_bytes_per_ns
        # the mark work is shared through work buffers among every worker that can run: the
        # running ones, and idle Ps about to start idle workers
        workers = max(1, min(self.nprocs, self.ded_running + self.idlew_running
                             + min(len(self.free_ps), self.wc.max_idle - self.idlew_running) + 1))
        ns = self.mark_unclaimed / rate / workers
        ns = min(max(ns, DRAIN_CHECK_NS), max_ns, self.mark_unclaimed / rate)
        b = ns * rate
        if self.mark_unclaimed - b < 1024:
            b = self.mark_unclaimed
            ns = b / rate
        self.mark_unclaimed -= b
        self.mark_inflight += 1
        m.mark_bytes = b
        return self._seg(m, seg, ns, pre, self._infl())

    def _mark_return(self, m: _M, left: int) -> None:
        """A mark segment stopped early: count the part done, return the rest to the pool."""
        body = m.work - m.pre
        frac_left = min(1.0, left / body) if body > 0 else 0.0
        rest = m.mark_bytes * frac_left
        self._mark_progress(m, m.mark_bytes - rest, body - min(left, body))
        self.mark_unclaimed += rest

    def _mark_progress(self, m: _M, scanned: float, ns: float) -> None:
        self.mark_inflight -= 1
        self.scan_done += scanned
        if m.seg != ASSIST:
            self.bg_credit += scanned
        if m.seg == FRAC:
            self.frac_ns[m.p] = self.frac_ns.get(m.p, 0.0) + (self.eng.now - m.t_seg)

    def _mark_done(self, m: _M) -> int | None:
        seg = m.seg
        self._mark_progress(m, m.mark_bytes, m.work)
        m.mark_bytes = 0.0
        if self.phase == MARK and self.mark_unclaimed <= 1e-6 and self.mark_inflight == 0:
            if seg == DED:
                self.ded_running -= 1
            elif seg == IDLEW:
                self.idlew_running -= 1
            self.phase = MARKTERM
            return self._stw_begin(m, self._gc_mark_end)
        if seg == DED:
            if self.mark_unclaimed > 0:
                return self._mark_seg(m, DED)
            self.ded_running -= 1
        elif seg == IDLEW:
            src = self.source
            if self.mark_unclaimed > 0 and not (src is not None and src.has_work()):
                return self._mark_seg(m, IDLEW)
            self.idlew_running -= 1
        return self._schedule(m)

    # ------------------------------------------------------------------ stop the world
    def _stw_begin(self, coord: _M | None, then) -> int | None:
        """Stop every P-holding M (each must burn ``gc_preempt`` CPU to reach a safe point, so a
        throttled M delays the stop); the coordinator burns the STW work; when all are stopped,
        ``then()`` runs and the world restarts. Returns the coordinator's CPU when it is the M
        whose callback is running."""
        now = self.eng.now
        self._integ_stw(begin=True)
        self.stw = True
        self.stw_t0 = now
        self.stw_then = then
        self.stw_wait = 0
        self.stw_coord_done = False
        self.stw_preempted = False
        work = max(1, int(self.prm.stw_base_ns + self.prm.stw_per_p_ns * self.nprocs))
        if coord is None:
            coord = self._new_m()     # a runtime M without a P (sysmon/forcegc path)
        coord.coord = True
        self.stw_coord = coord
        if coord.spinning:
            coord.spinning = False
            self.nmspinning -= 1
        if self._cur is not None:
            # inside a completion callback: preempt the others at the same instant from a timer
            # (the engine cannot stop a thread of the CPU whose completion is being handled)
            self.eng.call_later(0, self._stw_preempt)
        else:
            self._stw_preempt()
        if coord is self._cur:
            return self._seg(coord, STWK, work)
        w = self._seg(coord, STWK, work + coord.debt)
        coord.debt = 0
        self.eng.run(coord.tid, w, self._on_done)
        return None

    def _stw_preempt(self) -> None:
        now = self.eng.now
        coord = self.stw_coord
        preempt = max(1, int(self.prm.preempt_ns))
        for m in sorted(self.holders, key=lambda m: m.p):
            if m is coord or m.stopped:
                continue
            if self.eng.is_runnable(m.tid):
                left = self.eng.stop(m.tid)
                self._charge(m, left)
                self._save_partial(m, left)
            if m.spinning:
                m.spinning = False
                self.nmspinning -= 1
            self._seg(m, ACK, preempt)
            m.t_seg = now
            self.stw_wait += 1
            self.eng.run(m.tid, preempt, self._on_done)
        self.stw_preempted = True
        if self.stw_wait == 0 and self.stw_coord_done:
            # nobody to wait for and the coordinator already blocked: restart from here
            w = self._stw_check(coord)
            if w:
                self.eng.run(coord.tid, w, self._on_done)

    def _save_partial(self, m: _M, left: int) -> None:
        seg = m.seg
        if seg == USER:
            c = m.claim
            m.claim = None
            left = min(int(left / m.infl), c.work)
            if left > 0 and c.work > 0:
                done_alloc = int(c.alloc * (1 - left / c.work))
                self.source.requeue(c, left, m.t_seg, self.eng.now)
                self.heap_live += done_alloc
                self.alloc_total += done_alloc
            else:
                self.source.done(c, m.t_seg, self.eng.now)
                self.heap_live += c.alloc
                self.alloc_total += c.alloc
        elif seg in _MARK_SEGS:
            self._mark_return(m, left)
            if seg == DED:
                self.ded_running -= 1
            elif seg == IDLEW:
                self.idlew_running -= 1

    def _stw_check(self, cur: _M) -> int | None:
        if self.stw_wait > 0 or not self.stw_coord_done or not self.stw_preempted:
            return None  # cur stays stopped (blocked) holding its P
        # the world is stopped
        if self.stw_then is not None:
            self.stw_then()
        if self.pending_procs is not None:
            self._procresize(self.pending_procs)
            self.pending_procs = None
        return self._start_world(cur)

    def _procresize(self, n: int) -> None:
        old = self.nprocs
        if n == old:
            return
        self.nprocs = n
        self._costs_for(n)
        self.limiter.resize(n)
        self.gomaxprocs_changes.append((self.eng.now / 1e9, n))
        holders = sorted(self.holders, key=lambda m: m.p)
        keep = holders[:n]
        for m in holders[n:]:
            self.holders.pop(m, None)
            m.p = -1
            m.stopped = False
            m.seg = PARK
            self.idle_ms.append(m)
        for i, m in enumerate(keep):
            m.p = i
        self.free_ps = list(range(n - 1, len(keep) - 1, -1))
        self.n_pc = [0] * 6
        self.n_pc[PC_IDLE] = len(self.free_ps)
        self.n_pc[PC_USER] = len(keep)
        for m in keep:
            m.seg = ACK

    def _start_world(self, cur: _M) -> int | None:
        now = self.eng.now
        pause = now - self.stw_t0
        self.pauses_ns.append(pause)
        self.pause_end_ns.append(now)
        # go_gc_duration_seconds: one sample per GC cycle, the sum of its two STW pauses
        if self.stw_then == self._gc_mark_begin:
            self._sweepterm_pause = pause
        elif self.stw_then == self._gc_mark_end:
            self.cycle_pause_ns.append((now, self._sweepterm_pause + pause))
        self.stw = False
        self._integ_stw(begin=False)
        coord = self.stw_coord
        self.stw_coord = None
        if coord is not None:
            coord.coord = False
            if coord.p < 0:
                # a runtime M without a P (periodic GC, GOMAXPROCS update): it parks again
                coord.seg = PARK
                if coord is not cur:
                    self.idle_ms.append(coord)
        ret = None
        for m in sorted(self.holders, key=lambda m: m.p):
            m.stopped = False
            if m.seg not in (ACK, STWK):
                continue
            w = self._schedule(m)
            if m is cur:
                ret = w
            elif w:
                self.eng.run(m.tid, w, self._on_done)
        if cur.p < 0 and ret is None and cur not in self.idle_ms:
            cur.seg = PARK
            self.idle_ms.append(cur)
        # the chain of wakeps fills idle Ps with dedicated/idle mark workers or goroutine work
        self.wakep()
        if self.phase == MARK:
            # startTheWorld's wakep and the spinning chain take idle Ps for the remaining
            # dedicated workers first (findRunnableGCWorker runs before anything else)
            while self.free_ps and self.ded_running < self.wc.dedicated and self.mark_unclaimed > 0:
                self._startm(spinning=False)
        return ret

    # ------------------------------------------------------------------ timers
    def _forcegc(self) -> None:
        due = self.last_gc_end + gcpacer.FORCEGC_PERIOD_NS
        now = self.eng.now
        if self.phase == OFF and not self.stw and self.prm.gogc >= 0 and now >= due:
            self._gc_start(None, periodic=True)
            self.eng.call_later(gcpacer.FORCEGC_PERIOD_NS, self._forcegc)
        else:
            self.eng.call_at(max(due, now + 1_000_000), self._forcegc)

    def _sysmon_gomaxprocs(self) -> None:
        now = self.eng.now
        # the limit in force now, as the runtime reads it from the cgroup: the engine's live
        # bandwidth (a resize may come from a schedule or from a VPA acting during the run)
        bw = getattr(self.eng, "bandwidth", False)
        if bw is False:
            lim = gmp.limit_at(now / 1e9, self.base_limit, self.limit_schedule)
        else:
            lim = None if bw is None else bw.cpu_limit_cores
        want = gmp.gomaxprocs_value(self.prm.gomaxprocs, lim, self.cpus, self.prm.version, self.prm.round,
                                    self.period_us)
        if want != self.nprocs:
            if self.stw or self.phase != OFF:
                self.eng.call_later(10_000_000, self._sysmon_gomaxprocs)
                return
            self.pending_procs = want
            self._stw_begin(None, None)
        self.eng.call_later(gmp.SYSMON_UPDATE_NS, self._sysmon_gomaxprocs)

    def _cpu_now(self) -> dict[str, float]:
        """Real CPU per class including the part of every running segment burnt so far."""
        cpu = dict(zip(CPU_CLASSES, self.cpu_l))
        eng = self.eng
        for m in self.ms.values():
            if eng.is_runnable(m.tid):
                used = eng.thread_cpu_ns(m.tid) - m.charged
                if used > 0:
                    pre = min(used, m.pre)
                    cpu["sched"] += pre
                    cpu[_CPU_CLASS[m.seg]] += used - pre
        return cpu

    def _row(self) -> tuple:
        cpu = self._cpu_now()
        return (self.eng.now, self.nprocs, *self._acc(), *(cpu[k] for k in CPU_CLASSES),
                self.gc_cycles, self.heap_live)

    def _sample(self) -> None:
        self.samples.append(self._row())
        self.eng.call_later(self.sample_ns, self._sample)

    # ------------------------------------------------------------------ reporting
    def pclass_totals(self) -> dict[str, float]:
        """Cumulative ``/cpu/classes`` [cpu-seconds] in the runtime's P-time accounting."""
        return _pclasses(self._acc())

    def summary(self, t0_ns: int, t1_ns: int) -> dict[str, Any]:
        """Runtime keys over ``(t0, t1]`` (the window starts at the last 100 ms sample at or
        before ``t0``; ``t1`` is now).

        * ``gc_cpu_fraction``: real CPU of the GC (mark workers of every kind, assists, STW work)
          over the process's real CPU; ``go_memstats_gc_cpu_fraction`` is the runtime's own
          ``MemStats.GCCPUFraction``-like view (GC minus idle marking over P-time);
        * ``sched_cpu_fraction``: real CPU of the scheduler's slow paths (spinning, wake, park,
          goroutine switches) over the process's real CPU;
        * ``go_cpu_classes_*_cpu_seconds_total``: ``/cpu/classes`` in P-time (what Prometheus
          would show), ``cpu_real_*_s``: the same split in real CPU seconds;
        * pause quantiles: each STW phase (sweep termination, mark termination, GOMAXPROCS change).
        """
        now_row = self._row()
        rows = [r for r in self.samples if r[0] <= t0_ns]
        start = rows[-1] if rows else self.samples[0]
        d = [b - a for a, b in zip(start, now_row)]
        pc = _pclasses(d[2:8])
        cpu = dict(zip(CPU_CLASSES, (x / 1e9 for x in d[8:14])))
        real_total = sum(cpu.values())
        span = (now_row[0] - start[0]) / 1e9 or 1.0
        ends = np.asarray(self.pause_end_ns, dtype=float)
        pauses = np.asarray(self.pauses_ns, dtype=float)[(ends > t0_ns) & (ends <= t1_ns)] / 1e9
        out: dict[str, Any] = {
            "gomaxprocs": int(self.nprocs),
            "go_sched_gomaxprocs_threads": int(self.nprocs),
            "gomaxprocs_changes": len(self.gomaxprocs_changes) - 1,
            "gc_cycles": int(d[14]),
            "gc_cycles_forced": int(self.gc_forced),
            "gc_pause_p50_s": float(np.percentile(pauses, 50)) if pauses.size else 0.0,
            "gc_pause_p99_s": float(np.percentile(pauses, 99)) if pauses.size else 0.0,
            "gc_pause_max_s": float(pauses.max()) if pauses.size else 0.0,
            **_gc_duration_quantiles(self.cycle_pause_ns, t0_ns, t1_ns),
            "gc_heap_goal_bytes": int(self.goal),
            "gc_limiter_enabled_s": self.limiter_enabled_ns / 1e9,
            # where the real CPU went (fractions of the process's CPU time)
            "go_cpu_seconds": real_total,
            "go_cpu_cores": real_total / span,
            "gc_cpu_fraction": (cpu["gc_assist"] + cpu["gc_dedicated"] + cpu["gc_idle"] + cpu["gc_pause"])
            / real_total if real_total else 0.0,
            "sched_cpu_fraction": cpu["sched"] / real_total if real_total else 0.0,
            "user_cpu_fraction": cpu["user"] / real_total if real_total else 0.0,
            # MemStats.GCCPUFraction-like: (GC - idle marking) / P-time (runtime's own view)
            "go_memstats_gc_cpu_fraction": (pc["gc/total"] - pc["gc/mark/idle"]) / pc["total"]
            if pc["total"] else 0.0,
        }
        for k, v in cpu.items():
            out[f"cpu_real_{k}_s"] = v
        for k, v in pc.items():
            out["go_cpu_classes_" + k.replace("/", "_") + "_cpu_seconds_total"] = v
        return out

    def series(self, step_ns: int) -> pd.DataFrame:
        """Runtime series at ``step_ns`` (a multiple of the sampling interval): GOMAXPROCS, /cpu/classes rates
        (P-time cores) and real CPU per class (cores), GC cycles."""
        if not self.samples:
            return pd.DataFrame()
        arr = np.asarray(self.samples, dtype=float)
        every = max(1, int(round(step_ns / self.sample_ns)))
        arr = arr[::every]
        t = arr[:, 0]
        dt = np.diff(t, prepend=np.nan) / 1e9
        cols = {"t_s": t / 1e9, "go_sched_gomaxprocs_threads": arr[:, 1].astype(int)}
        names = ["idle", "user", "gc_mark_dedicated", "gc_mark_idle", "gc_mark_assist", "gc_pause"]
        for i, n in enumerate(names):
            cols[f"go_cpu_classes_{n}_cores"] = np.diff(arr[:, 2 + i], prepend=np.nan) / 1e9 / dt
        for i, n in enumerate(CPU_CLASSES):
            cols[f"cpu_real_{n}_cores"] = np.diff(arr[:, 8 + i], prepend=np.nan) / 1e9 / dt
        cols["go_gc_cycles_total"] = arr[:, 14].astype(int)
        cols["go_memstats_heap_alloc_bytes"] = arr[:, 15]
        return pd.DataFrame(cols)


def _gc_duration_quantiles(cycles: list[tuple[int, int]], t0_ns: int, t1_ns: int) -> dict[str, float]:
    """``go_gc_duration_seconds`` (client_golang's summary of per-cycle STW time) over the window."""
    d = np.asarray([p for t, p in cycles if t0_ns < t <= t1_ns], dtype=float) / 1e9
    out = {"go_gc_duration_seconds_count": int(d.size), "go_gc_duration_seconds_sum": float(d.sum())}
    for q, name in ((0.0, "0"), (0.25, "0.25"), (0.5, "0.5"), (0.75, "0.75"), (1.0, "1")):
        out[f"go_gc_duration_seconds_q{name}"] = float(np.quantile(d, q)) if d.size else 0.0
    return out


def _pclasses(acc) -> dict[str, float]:
    idle, user, ded, idlemark, assist, pause = (x / 1e9 for x in acc)
    gc = ded + idlemark + assist + pause
    total = idle + user + gc
    return {"user": user, "gc/mark/assist": assist, "gc/mark/dedicated": ded, "gc/mark/idle": idlemark,
            "gc/pause": pause, "gc/total": gc, "idle": idle, "scavenge/total": 0.0, "total": total}
