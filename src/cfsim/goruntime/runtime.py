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
  takes one idle P and ``injectglist`` starts ``min(k-1, npidle)`` more Ms. The batch belongs to
  the M that was blocked in ``netpoll`` (an M that found no work and no other M polling): until
  the kernel runs it no other M polls (``sched.lastpoll == 0``), so the batch, and what arrives
  meanwhile, waits for its wake-up; with every P busy it reaches the global queue only then.
  With no M blocked there the batch waits for a P's next non-blocking poll. ``startm``: a woken M
  pays ``wake`` (plus a successful steal if it was spinning); with a free CPU it decides at once
  (its few microseconds change nothing the model resolves), otherwise it first runs its wake-up
  as a segment, holding ``nmspinning`` meanwhile, so the spinning chain advances one M at a time
  as Ms get CPUs; on a host other processes use, the OS may delay it by up to a base slice. A
  woken M that finds nothing burns its wake-up, search and park at once; an M that parks after
  work owes its search and park and burns them at its next run (one engine event fewer).
* **Resuming.** The M that takes the first P of an idle process pays, with its next segment, what
  the process's cold caches cost after the idle spell (``host.resume_cold_us``,
  :mod:`cfsim.kernel.resume`; off by default), once per busy spell however many Ms wake.
* **SMT.** With ``host.threads_per_core > 1``, segments started while more Ms run than there
  are cores take ``1 + smt_slowdown`` times the CPU for the paired share.
* **GC.** Trigger when ``heapLive >= trigger`` (pacer) or every 2 minutes; STW sweep
  termination: every P-holding M is preempted and must burn ``gc_preempt`` CPU to reach a safe
  point, so a throttled M stretches the pause; concurrent mark: ``D`` dedicated Ps for the whole
  phase, fractional workers at scheduling points by the exact ``1.2 x goal`` rule, read on the
  clock as ``pollFractionalWorkerExit`` reads ``nanotime`` (a goroutine that runs on is
  preempted by sysmon's ``retake`` 10-20 ms after its P scheduled it, on sysmon's own poll grid:
  :meth:`.sched.Sysmon.preempt_at`; the goroutine whose allocation started the GC runs on after
  the stop, the others pass through ``schedule``), idle mark
  workers on Ps that would go idle (cap ``P - D``, 0/1 for periodic cycles), yielding to new
  goroutine work; mark work = (live heap + roots) / scan rate plus ``c0 + c1 P`` per cycle;
  the live heap is a workload constant and objects allocated during the mark count as marked
  (allocate-black), so a stretched mark raises the next goal; assists charge allocation during
  mark at the pacer's ``assistWorkPerByte`` beyond the background credit; STW mark termination;
  the pacer's cons/mark, goal and trigger update; optional GC CPU limiter (assists off while
  full; its flag changes only at its updates: an assist's end, ``findRunnableGCWorker`` 10 ms
  after the last update, the GC's phase changes; a thread the quota froze makes none and keeps its
  assist until it runs again). Sweeping is folded into ``go.alloc_ns_per_kb``.
* **Allocation at its own granularity.** The runtime tests the trigger and charges assists at
  every span refill (a few KiB); a chunk of goroutine work therefore allocates at most a small
  quantum of the pacer's room (:meth:`GoRuntime._claim_cap`), and an allocation during the mark
  pays its assist before the chunk completes, drawing on all remaining mark work (work buffers
  are shared); with none left the goroutine parks on the assist queue until background credit
  covers it (``gcParkAssist``/``gcFlushBgCredit``) or the mark ends. The result is the real
  runtime's short, assist-heavy marks at low GOMAXPROCS: the allocation during the mark, hence
  the marked heap and the next goal, stay near the textbook value.
* **Fewer cycles at high GOMAXPROCS.** Measured here (saturating 1 KiB stream, 1-core limit,
  gctrace): 15 MiB allocated per cycle at GOMAXPROCS 2, 17-18 MiB at 8 and 32, because the mark
  phase lasted 17-66 ms at 2 Ps and ~100 ms at 8-32 Ps: the dedicated workers are threads that
  share the throttled quota with the mutator's, while the pacer assumes they got 25 % of
  ``GOMAXPROCS x wall`` and so asks for almost no assists (0.02 ms of assist per cycle at 8 Ps);
  the mutator keeps allocating through the longer mark, allocate-black raises the marked heap
  (16.9 -> 18.9-19.3 MiB) and the next goal. The model has each part of that chain.
* **Memory** (:mod:`.memory`): heap spans (in use, free, released), the runtime's non-heap
  memory, the memory-limit goal recomputed as they move, the background and synchronous
  scavenger, RSS; the container's memory cgroup charges it and OOM-kills the process above its
  limit (:mod:`cfsim.kernel.memory`), after which nothing runs.
* **Metrics.** ``/cpu/classes/*`` in P-time (``total = GOMAXPROCS x wall``, throttled time
  counts as running, spinning counts as user) next to real CPU per class; GC cycles and pause
  durations; ``go_sched_gomaxprocs_threads``; summary keys and series from them in
  :mod:`.run_accounting`.
"""
from __future__ import annotations

import functools
import math
from collections import deque
from dataclasses import dataclass
from heapq import heappop, heappush
from typing import TYPE_CHECKING, Any, Callable, Final

import numpy as np

from cfsim.goruntime import gcpacer, gomaxprocs as gmp, memory as gmem
from cfsim.goruntime.run_accounting import (C_USAGE, CPU_CLASSES, SL_IDLE, SL_NETPOLL, SL_RAGGED_BARRIER,
                                            SL_STW_COORDINATOR, SL_STW_STOPPED, SLEEP_CAUSES, RuntimeReports)
from cfsim.goruntime.sched import (DRAIN_CHECK_NS, FORCE_PREEMPT_NS, SchedCosts, Sysmon, lock_contenders, may_spin,
                                   netpoll_wakeups, smt_inflation)
from cfsim.goruntime.syncpool import PerPPool
from cfsim.kernel import memory as kmem
from cfsim.kernel.eevdf import slice_end_ns
from cfsim.kernel.resume import ResumeCost
from cfsim.kernel.wakeup import LINUX_TIMER_SLACK_NS, WakeupCost

if TYPE_CHECKING:
    # the engine's type only (the runtime imports no engine): the compiled build (mypyc) calls
    # its methods directly, ~1.45x on a busy closed loop (benchmarks/bench_busy.py)
    from cfsim.engine.cfs import CfsEngine

MiB: Final = 1 << 20

# segment kinds (what an M is burning)
USER: Final = 0
ASSIST: Final = 1
SPIN: Final = 2
WAKE: Final = 3
PARK: Final = 4
DED: Final = 5
FRAC: Final = 6
IDLEW: Final = 7
ACK: Final = 8
STWK: Final = 9
# real-CPU classes per segment kind
_CPU_CLASS: Final = {USER: "user", ASSIST: "gc_assist", SPIN: "sched", WAKE: "sched", PARK: "sched",
              DED: "gc_dedicated", FRAC: "gc_dedicated", IDLEW: "gc_idle", ACK: "gc_pause", STWK: "gc_pause"}
# P-time classes (runtime/metrics /cpu/classes)
PC_IDLE: Final = 0
PC_USER: Final = 1
PC_DED: Final = 2
PC_IDLEMARK: Final = 3
PC_ASSIST: Final = 4
PC_PAUSE: Final = 5
# the scavenger's two /cpu/classes beside them (_acc_published), indexes of scav_ns
SCAV_ASSIST: Final = 0
SCAV_BACKGROUND: Final = 1
_SEG_PC: Final = {USER: PC_USER, SPIN: PC_USER, WAKE: PC_USER, ASSIST: PC_ASSIST, DED: PC_DED, FRAC: PC_DED,
           IDLEW: PC_IDLEMARK, ACK: PC_USER, STWK: PC_USER}
# list forms for the hot path (index = segment kind); a P-holding M "parked" has just taken its P
_SEG_PC_L: Final = [_SEG_PC.get(k, PC_USER) for k in range(10)]
_CPU_IDX: Final = [CPU_CLASSES.index(_CPU_CLASS[k]) for k in range(10)]
_SCHED: Final = CPU_CLASSES.index("sched")
_MARK_SEGS: Final = (DED, FRAC, IDLEW, ASSIST)

OFF: Final = 0
SWEEPTERM: Final = 1
MARK: Final = 2
MARKTERM: Final = 3
# allocation granularity of the model: a chunk allocates at most 1/ALLOC_QUANTA of the heap
# runway per P, 1/MARK_QUANTA of the heap left before the goal during the mark (at least
# ALLOC_QUANTUM_MIN), and takes at least CLAIM_MIN_NS of CPU
ALLOC_QUANTA: Final = 8
MARK_QUANTA: Final = 32          # during the mark: at most 1/32 of the heap left before the goal per P
ALLOC_QUANTUM_MIN: Final = 64 << 10
CLAIM_MIN_NS: Final = 20_000
#: the time over which _lock_ns smooths the rate of wake-ups and parks [ns]: a few of the
#: scheduler's own time scales (a spin, a wake-up: microseconds), short beside a GC cycle
LOCK_RATE_WINDOW_NS: Final = 1_000_000
SWEEP_PAGE: Final = 8192         # the runtime's page (pageSize): the heap in use is swept in these
# one pass of an assist's gcDrainN: it stops at the goroutine's preemption request (sysmon, 10-20
# ms) or when the limiter turns on, whose flag changes only at its updates: the end of each assist
# longer than gcAssistTimeSlack, findRunnableGCWorker once gcCPULimiterUpdatePeriod (10 ms) has
# passed, and the GC's phase changes (src/runtime/mgclimit.go; sysmon does not update it)
ASSIST_CHUNK_NS: Final = FORCE_PREEMPT_NS
# an assist pass is watched for the limiter turning on mid-pass only when the limiter's bucket is
# at least this full: the bucket fills by at most GOMAXPROCS x wall time, so from half full it
# takes half a second of wall time to fill, longer than a pass lasts
LIMITER_WATCH_FILL: Final = 0.5
# how often an M frozen by the quota is looked at again (a host tick)
FROZEN_POLL_NS: Final = 1_000_000
SAMPLE_NS_DEFAULT: Final = 100_000_000
#: "no trigger near" for the chunk cap's check (_claim_cap); a float as the distances it is compared with
_CAP_FAR: Final = float(1 << 62)
SYSMON_BATCH_NS: Final = 250_000   # sysmon's counted polls are burnt in chunks of at least this CPU


class Claim:
    """A chunk of goroutine work handed to a P: CPU, allocation, and the source's token.
    ``goroutines``: how many goroutines the chunk runs one after another (each start is a pass
    through ``schedule``); ``tid``: the thread of the M that runs it (set by the runtime); ``p``:
    the P it was claimed for (a source with per-P run queues books its goroutines' ends there)."""

    __slots__ = ("work", "alloc", "token", "goroutines", "tid", "p")

    def __init__(self, work: int, alloc: int, token: Any, goroutines: int = 1, p: int = -1):
        self.work = int(work)
        self.alloc = int(alloc)
        self.token = token
        self.goroutines = goroutines
        self.tid = -1
        self.p = p


class WorkSource:
    """The goroutines a workload gives the runtime's Ps to run. A base class the sources derive
    from, not a ``Protocol``: the compiled build (mypyc) then calls their methods directly instead
    of looking each up by name, dozens of times a request."""

    def has_work(self) -> bool:
        raise NotImplementedError

    def claim(self, max_ns: int, p: int = -1) -> Claim | None:   # p: the claiming M's P
        raise NotImplementedError

    def done(self, claim: Claim, t0: int, t1: int) -> None:
        raise NotImplementedError

    def requeue(self, claim: Claim, left_ns: int, t0: int, t1: int) -> Claim | None:
        raise NotImplementedError

    def continues(self, claim: Claim) -> bool:
        """Whether the goroutine that ran ``claim`` goes on without a scheduling point (see
        GoRuntime._continues); most sources' goroutines block at their chunk's end."""
        return False

    def hold_polled(self) -> int:
        """Put what the network readied and no M has polled yet out of every M's reach but the
        one the kernel woke from ``netpoll`` (:meth:`cfsim.goruntime.runq.RunQueues.hold_polled`);
        returns how many goroutines are held. Sources without network goroutines hold none."""
        return 0

    def release_polled(self, p: int) -> int:
        """That M runs, holding P ``p`` (or none: ``p < 0``): the held goroutines become
        runnable there (:meth:`cfsim.goruntime.runq.RunQueues.release_polled`); returns how many."""
        return 0

    def has_local(self, p: int) -> bool:
        """Whether a goroutine waits in P ``p``'s own ``runnext`` or local queue (``runqempty``),
        which ``procresize`` asks when the world starts again. Sources whose goroutines wait only
        where every P looks (a preempted one goes to the global queue: ``gopreempt_m``) have none."""
        return False


@dataclass(frozen=True)
class GoParams:
    gomaxprocs: Any = "host"
    round: str = "floor"
    version: str = "1.26"
    gogc: int = 100
    gomemlimit_bytes: int | None = None
    live_heap_bytes: int = 16 * MiB
    heap_built_at_start: bool = False      # the live heap is allocated by the workload at the start (keep_live)
    process_heap_bytes: int = MiB // 2     # the runtime's and libraries' own live objects (see schema)
    roots_bytes: int = MiB // 2
    gc_cpu_limiter: bool = True
    scan_bytes_per_ns: float = 1.0 * MiB / 1e6
    gc_parallel_cost: float = 0.0   # extra cache-held mark CPU when CPUs mark at once (scan_slowdown)
    gc_scan_miss_factor: float = 1.0  # mark CPU per byte of a heap far beyond the LLC vs one inside it
    llc_bytes: int = 32 * MiB
    stw_base_ns: float = 10_000.0
    stw_per_p_ns: float = 1_000.0
    preempt_ns: float = 2_000.0
    stop_handshake_ns: float = 0.0    # host.stop_handshake_us: a stop's wait for a P another M runs
    stw_restart_chain: bool = False   # stopped Ms sleep and restart through the spinning chain
    mark_work_shared: bool = False  # assists take workers' unscanned claims, workers credit as they go
    bg_credit_as_scanned: bool = False  # workers credit as they go (without sharing their claims)
    revise_last_scan: bool = True  # the pacer expects the last cycle's scan work (lastHeapScan)
    cycle_base_ns: float = 20_000.0
    cycle_per_p_ns: float = 10_000.0
    costs: SchedCosts = SchedCosts()
    memory_limit_bytes: int | None = None   # the container's memory cgroup limit (OOM kill above it)
    mem: gmem.MemoryParams = gmem.MemoryParams()
    threads_per_core: int = 1
    smt_slowdown: float = 0.0
    background_cores: float = 0.0
    alloc_ns_per_byte: float = 165.0 / 1024   # mallocgc per allocated byte (see schema go.alloc_ns_per_kb)
    page_fault_ns: float = 1_000.0            # a page fault on grown or released heap memory
    sweep_ns_per_page: float = 0.0            # sweeping one 8 KiB page of the heap in use, once a cycle
    sweep_contention: float = 0.0             # more per page for each further CPU sweeping at once
    page_release_ns: float = 140.0            # returning a page to the OS (the madvise)
    scavenge_page_ns: float = 0.0             # the runtime's own work for each page it returns
    tlb_shootdown_ns: float = 0.0             # flushing another CPU's TLB after a release (host.tlb_shootdown_us)
    wakeup: WakeupCost = WakeupCost()         # the host's CPU per sleep and wake-up of a thread
    resume: ResumeCost = ResumeCost()         # the process's CPU to resume after idling (cold caches)

    @classmethod
    def from_scenario(cls, sc) -> "GoParams":
        go = sc.section("go")
        cg_mb = sc["cgroup.memory_limit_mb"]
        cg_bytes = None if cg_mb is None else int(cg_mb * MiB)
        gomemlimit = gmem.gomemlimit_bytes(go["gomemlimit_policy"], go["gomemlimit_mb"], cg_bytes,
                                           go["automemlimit_ratio"])
        mem = gmem.MemoryParams(base_bytes=int(go["mem_base_mb"] * MiB),
                                metadata_fraction=go["mem_metadata_fraction"],
                                frag_fraction=go["mem_frag_fraction"], file_bytes=int(go["mem_binary_mb"] * MiB))
        return cls(gomaxprocs=go["gomaxprocs"], round=go["round"], version=go["version"], gogc=go["gogc"],
                   gomemlimit_bytes=gomemlimit, memory_limit_bytes=cg_bytes, mem=mem,
                   live_heap_bytes=int(go["live_heap_mb"] * MiB), heap_built_at_start=go["heap_built_at_start"],
                   roots_bytes=int(go["roots_mb"] * MiB),
                   process_heap_bytes=int(go["process_heap_mb"] * MiB),
                   gc_cpu_limiter=go["gc_cpu_limiter"], scan_bytes_per_ns=go["gc_scan_mb_per_ms"] * MiB / 1e6,
                   gc_parallel_cost=go["gc_parallel_cost"], gc_scan_miss_factor=go["gc_scan_miss_factor"],
                   llc_bytes=int(sc["host.llc_mb"] * MiB),
                   stw_base_ns=go["gc_stw_base_us"] * 1e3, stw_per_p_ns=go["gc_stw_per_p_us"] * 1e3,
                   preempt_ns=go["gc_preempt_us"] * 1e3, stw_restart_chain=go["stw_restart_chain"],
                   stop_handshake_ns=sc["host.stop_handshake_us"] * 1e3,
                   mark_work_shared=go["mark_work_shared"], bg_credit_as_scanned=go["bg_credit_as_scanned"],
                   revise_last_scan=go["revise_last_scan"],
                   cycle_base_ns=go["gc_cycle_base_us"] * 1e3,
                   cycle_per_p_ns=go["gc_cycle_per_p_us"] * 1e3, costs=SchedCosts.from_go_section(go),
                   threads_per_core=sc["host.threads_per_core"], smt_slowdown=sc["host.smt_slowdown"],
                   background_cores=sc["host.background_cores"],
                   alloc_ns_per_byte=go["alloc_ns_per_kb"] / 1024, page_fault_ns=go["page_fault_us"] * 1e3,
                   sweep_ns_per_page=go["sweep_ns_per_page"], sweep_contention=go["sweep_contention"],
                   page_release_ns=go["page_release_us"] * 1e3, scavenge_page_ns=go["scavenge_page_us"] * 1e3,
                   tlb_shootdown_ns=sc["host.tlb_shootdown_us"] * 1e3,
                   wakeup=WakeupCost.from_scenario(sc), resume=ResumeCost.from_scenario(sc))


def cache_missed_share(live_bytes: float, llc_bytes: float) -> float:
    """The share of a live heap the last-level cache cannot hold, ``1 - LLC / live`` (0 when it
    fits): the bytes :func:`scan_slowdown` prices at the miss factor.

    >>> cache_missed_share(16, 32), cache_missed_share(256, 32)
    (0.0, 0.875)
    """
    return 0.0 if live_bytes <= llc_bytes else 1.0 - llc_bytes / live_bytes


def scan_slowdown(live_bytes: int, llc_bytes: int, miss_factor: float, procs: int = 1, cpus: int = 1,
                  parallel_cost: float = 0.0) -> float:
    """Mark CPU per byte relative to one P marking a live heap that fits the last-level cache.

    Two effects. ``greyobject`` and ``scanobject`` follow pointers to objects anywhere in the
    heap, and the part the cache cannot hold (``m = 1 - LLC / live``) costs a cache miss per
    object instead of a hit: ``miss_factor`` per byte (the lab's 64-byte pointerful nodes with
    random pointers scan ~2.3 MiB/ms per CPU at 16 MiB live, ~1.1 at 256 MiB, ~1.4 at 64 MiB on a
    32 MiB L3; gc-memory grid). And the CPUs share the mark: with GOMAXPROCS Ps, the mark workers
    and assists of ``n = min(P, CPUs)`` CPUs run at once (in bursts under a quota) and pass the
    same mark bits, work buffers (``gcWork``, ``work.full``) and heap lines between their caches.
    A line the scan needs was last written by another CPU with probability ``1 - 1/n`` and costs
    ``parallel_cost`` more then: bounded as the CPUs grow, 0 at one. That slows the part of the
    scan the cache would have served; a byte that misses to DRAM costs its miss either way. The
    lab's allocation-heavy stream under a 1-core quota on 2 CPUs (gc-memory-profile, pprof: GC
    CPU per cycle of the same scan work) went 1 : 1.29 at GOMAXPROCS 1 : 2 with 16 MiB live (all
    in the L3), 1 : 0.95 with 256 MiB (7/8 beyond it). Ps beyond the CPUs add no per-byte cost
    there: a per-P term fitted on the same grid's GOMAXPROCS 8 runs came out under 0.01. Only
    n = 2 was measured; the ``1 - 1/n`` growth beyond it is the model's. The default is 0 (no host
    measured but the lab's); the lab's twins take the lab host's 0.49, fitted on the GC's own CPU
    a cycle as perf samples it (docs/params/gc-parallel.toml), on the share of the scan their
    grid's cache still served (docs/model-notes.md, "The CPUs marking at once")."""
    miss = cache_missed_share(live_bytes, llc_bytes)
    sharing = 1.0 + parallel_cost * (1.0 - 1.0 / max(1, min(procs, cpus)))
    return (1.0 - miss) * sharing + miss * max(1.0, miss_factor)


def barrier_wait_ns(k: float, now_ns: int, tick_ns: int, slice_ns: int, flush_ns: int) -> int:
    """How long ``gcMarkDone``'s ragged barrier waits for the last P to flush when the process's
    runnable threads share the CPUs ``k`` to a CPU on average (> 1): the last of them, on the
    busiest CPU, waits for the turns of the ``ceil(k) - 1`` ahead of it. The scheduler ends a turn
    only when a tick finds the slice used up (``update_curr`` -> ``update_deadline`` from
    ``entity_tick``, ``kernel/sched/fair.c``; no HRTICK), so the current turn ends at the next
    tick and each later one lasts the slice rounded up to whole ticks; then the flush runs
    (``flush_ns``). The same tick notices a CPU whose silo ran dry since the last one and throttles
    it (``account_cfs_rq_runtime``): the flush of a P there waits for the refill, and the
    mark-termination stop that follows does not run into a CPU about to be throttled.

    >>> barrier_wait_ns(3.5, 1_000_000, 4_000_000, 1_500_000, 2_000)   # 3 ms to the tick, 2 more turns
    11002000
    >>> barrier_wait_ns(1.5, 1_000_000, 4_000_000, 1_500_000, 2_000)
    3002000
    >>> barrier_wait_ns(1.0, 1_000_000, 4_000_000, 1_500_000, 2_000)
    0
    """
    if k <= 1.0:
        return 0
    ahead = math.ceil(k - 1e-9) - 1
    to_tick = -(-(now_ns + 1) // tick_ns) * tick_ns - now_ns
    turn = -(-slice_ns // tick_ns) * tick_ns
    return to_tick + (ahead - 1) * turn + flush_ns


class _M:
    __slots__ = ("tid", "p", "seg", "work", "pre", "debt", "t_seg", "claim", "spinning", "mark_bytes",
                 "stopped", "coord", "charged", "owed", "infl", "t_sched", "excess", "a_id", "preempt", "trig",
                 "sweep", "flushed")

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
        self.owed: tuple | None = None   # (claim, t0, debt left): a goroutine's chunk finishing with its assist
        self.infl = 1.0   # CPU per unit of work of the current segment (SMT sharing)
        self.t_sched = 0  # the M's last pass through schedule() (sysmon preempts 10-20 ms later)
        self.preempt: tuple[int, int] = (-1, 0)   # (t_sched, when sysmon preempts that goroutine)
        self.trig: Claim | None = None   # the chunk whose allocation started the GC this M coordinates
        self.excess = 0.0  # scan work of the current assist pass beyond its debt (credited ahead)
        self.a_id = 0      # the current assist pass (its limiter check finds it by this number)
        self.sweep = 0.0   # sweeping [ns] the current chunk does before its own work
        self.flushed = 0.0  # scan work of the current mark segment already credited (_flush_workers)


class GoRuntime(RuntimeReports):
    """One Go process. ``source`` is set by the workload before :meth:`start`."""

    def __init__(self, engine: CfsEngine, params: GoParams, cpus: int, base_limit: float | None,
                 limit_schedule=None, period_us: int = 100_000, name: str = "go",
                 sample_ns: int = SAMPLE_NS_DEFAULT):
        self.engine = engine
        self.params = params
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
        # a heap built before the load holds pointer-free objects until it is linked: its marks
        # scan at the cache-held price (go.heap_build = "before-load"; link_heap, after_build)
        self.heap_unlinked = False
        self._after_build: list[Callable[[], None]] | None = None
        self._costs_for(self.nprocs)
        self.updates = gmp.container_aware(params.gomaxprocs, params.version)
        # Go 1.26 restarts the world with the mark workers placed (_assign_mark_workers)
        self.workers_at_start = gmp.version_tuple(params.version) >= (1, 26)
        self.ms: dict[int, _M] = {}
        self.idle_ms: list[_M] = []
        self.holders: dict[_M, None] = {}   # insertion-ordered set: iteration is deterministic
        self.free_ps = list(range(self.nprocs - 1, -1, -1))
        self.nmspinning = 0
        # the M the kernel woke from netpoll and that has not run yet: what the network readies
        # meanwhile waits for it (sched.lastpoll == 0: nobody else polls; see ready)
        self.poll_m: _M | None = None
        # an M waits in netpoll (findRunnable's last step: it had no work, dropped its P and won
        # sched.lastpoll.Swap(0)); the network's next data wakes it (see ready)
        self.poller_blocked = False
        self.resume_on = params.resume.enabled
        self.idle_since_ns = 0              # when the process last released its last busy P
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
        self._stw_stopping = False   # stopping the world: P-time still counted per P (_pc_stop)
        self.cpu_l = [0.0] * len(CPU_CLASSES)   # real CPU [ns] per class (CPU_CLASSES order)
        # GC state
        self.phase = OFF
        self.gc_cycles = 0
        self.gc_forced = 0
        # OS-thread wake-ups (startm -> futexwakeup) and parks (stopm -> futexsleep): each is a
        # context switch of an M in the kernel (in and out), what `perf stat` counts voluntarily
        self.m_wakes = 0
        self.tlb_flushes = 0.0     # other CPUs' TLBs flushed by the process's releases of memory
        self.m_parks = 0
        # the Ms' sleeps by the runtime path that put them to sleep (run_accounting.SLEEP_CAUSES),
        # as the lab's lab.sleep_stacks_s counts them (cfsim.lab.sleeps); the ragged barrier's
        # wait is counted here only, not among the parks above
        self.m_sleeps_by = [0] * len(SLEEP_CAUSES)
        # the recent rate of wake-ups and parks [1/ns] (see _lock_ns), smoothed over
        # LOCK_RATE_WINDOW_NS, and when and at what counts it was last updated
        self._pw_rate = 0.0
        self._pw_t = 0
        self._pw_n = 0
        self.pauses_ns: list[int] = []
        self.pause_end_ns: list[int] = []
        self.cycle_pause_ns: list[tuple[int, int]] = []
        # the /cpu/classes P-time a reader sees: the runtime publishes it only at the end of each
        # mark termination (mgc.go, gcMarkTermination: work.cpuStats.accumulate; metrics.go,
        # cpuStatsAggregate.compute copies work.cpuStats), so one (time, P-time per class) a cycle
        self.pclass_published: list[tuple[int, tuple[int, ...]]] = []
        # one row a completed cycle, the runtime's gctrace/gcpacertrace fields (see gc_cycle_table())
        self.cycle_log: list[tuple] = []
        self.sweep_left = 0.0       # sweeping after the last mark termination not yet claimed [ns]
        self.sweep_inflight = 0.0   # sweeping in chunks still running [ns]
        self.sweep_share = 0.0
        self._cycle_start: tuple = (0, 0, 0)
        self._work_done_ns = 0
        self._sweepterm_pause = 0
        # what every cycle marks before the objects allocated during it: the workload's live heap
        # and the process's own (runtime, metrics registry, HTTP server...)
        self.base_live = (0 if params.heap_built_at_start else params.live_heap_bytes) + params.process_heap_bytes
        self.heap_marked = self.base_live
        self.heap_live = self.base_live
        self.noscan_live = 0     # of base_live: pointer-free objects kept for the run (retain)
        # the pacer's heapScan (scannable heap: the last cycle's scan work, plus pointerful objects
        # allocated since) and lastHeapScan (the last cycle's heap scan work, revise's expectation):
        # zero before a process's first cycle (it builds its heap), the heap it starts with where
        # the run starts in a steady state
        self.last_heap_scan = 0 if params.heap_built_at_start else self.base_live
        self.heap_scan = self.base_live
        self._retained_in_mark = 0   # retained during the current mark, live from the next cycle on
        self._kept_in_mark = 0       # the same for pointerful objects (keep_live)
        # the ragged barrier's throttled holders (thread id -> its CPU when its flush wait ended)
        self._barrier_wait: dict[int, int] = {}
        # sync.Pools of large objects (new_pool): what their caches hold is live heap the cycle marks
        self.pools: list[PerPPool] = []
        self._pool_marked = 0        # pooled bytes the current cycle marks, allocated before its mark
        self.alloc_total = 0
        # allocation of the user chunks running now (counted into heap_live when they end): the
        # runtime's heapLive sees it as it happens (each span an mcache takes), see _heap_live_now
        self.inflight_alloc = 0
        self.cons = gcpacer.ConsMarkEstimator()
        self.limiter = gcpacer.GcCpuLimiter(self.nprocs)
        self._lim_t = 0
        self._lim_acc = [0.0] * 6
        self._lim_held = False     # the limiter waits for a coordinator to end its transition
        self.limiter_enabled_ns = 0
        self.goal = 0
        self.trigger_bytes = 0
        # chunk cap [ns]: a chunk's allocation is at most an allocation quantum (see _claim_cap)
        self.claim_ns = FORCE_PREEMPT_NS
        self._cap_near = _CAP_FAR
        self.alloc_per_ns = 0.0             # the workload's allocation per CPU-ns, seen in its chunks
        self.assistq: deque[list] = deque()  # goroutines parked on the assist queue: [claim, t0, debt]
        self.assist_inflight = 0.0          # scan work of running assists
        self.assist_seq = 0                 # assist passes started (each watched pass has a number)
        self.mark_draining = False          # the mark's work is done, gcMarkDone's ragged barrier runs
        # memory: heap spans, non-heap memory, scavenger; the container's memory cgroup
        self.mem = gmem.HeapMemory(params.mem, self.base_live)
        self.gogc_goal: int | None = None   # gcPercentHeapGoal (None: GOGC=off)
        self.runway_bytes = 0
        self.last_goal = 0                  # lastHeapGoal: the goal when the last cycle ended
        self.mem_hwm = self.mem.mapped_ready  # high-water mark of the cgroup usage since the last sample
        # CPU of page faults and page releases not yet burnt by a goroutine (see _user_infl), and
        # the releases' part of it, by who made them: allocSpan's scavenge assists and the
        # background scavenger; the CPU the goroutines burnt of each, and the same on the clock the
        # runtime times its releases by (nanotime, so a throttle or a wait for a CPU inside a
        # release counts): /cpu/classes/scavenge, taken out of user time (_stretch_scavenge)
        self.mm_debt_ns = 0.0
        self.scav_debt_ns = [0.0, 0.0]
        self.scav_ns = [0.0, 0.0]
        self.scav_pt = [0.0, 0.0]
        self._stretch = 1.0                  # user P-time over the CPU it ran on, last interval
        self._stretch_seen = (0.0, 0.0, 0.0, 0.0)   # user P-time, its CPU, scav_ns, at the last sample
        self._mm_seen = (0, 0, 0)
        # the background scavenger's releases wait to be priced until an M of the process next
        # allocates (see _sample); the other CPUs that instant found running the process
        self._scav_pending = False
        self._scav_others = 0
        self.oom_ns: int | None = None      # when the kernel's OOM killer killed the process
        self.dead = False
        self._commit()
        self.last_gc_end = 0
        self.worker_counts = gcpacer.worker_counts(self.nprocs)
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
        self.assist_pt0 = 0     # P-time [ns] of the classes at the cycle's start (_gc_start)
        self.ded_pt0 = 0
        self.idlemark_pt0 = 0
        self.frac_ns: dict[int, float] = {}
        self.assist_work_per_byte = 0.0
        self.periodic = False
        # STW state
        self.stw_wait = 0
        self.stw_coord_done = False
        self.stw_coord_asleep = False      # the coordinator sleeps on sched.stopnote
        self.stw_t0 = 0
        self.stw_ready_ns = 0               # the stop's handshake ends (host.stop_handshake_us)
        self.stw_then: Any = None           # what runs once the world is stopped (_stw_begin)
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
            m = _M(self.engine.new_thread(f"{self.name}-M{len(self.ms)}"))
            self.ms[m.tid] = m
            self.idle_ms.append(m)
        # sysmon: its own M without a P (see goruntime.sched.Sysmon); its polls are counted lazily
        # at the instants the process goes busy or idle and burnt on its own thread
        self.sysmon: Sysmon | None = None
        self.sm_sleeps = 0   # sysmon's sleeps so far: its polls (each after a usleep) and deep sleeps left
        self.sm_cpu = 0      # its CPU [ns] counted so far (owed, running or burnt)
        if self.costs.sysmon_poll_ns > 0:
            # a turn of its loop lasts the usleep's delay, the timer slack, the host's timer
            # latency, the wait for a CPU once woken (go.sysmon_wait_us: the lab measures its
            # thread's) and the poll's own CPU, after which it sleeps again
            self.sysmon = Sysmon(slack_ns=LINUX_TIMER_SLACK_NS + int(self.params.wakeup.timer_latency_ns)
                                 + int(self.costs.sysmon_wait_ns), run_ns=self.c_sysmon)
            # its CPU is counted here (polls, deep-sleep wake-ups), not by the engine's wake-up rule
            self.sm_tid = self.engine.new_thread(f"{self.name}-sysmon", wakeup_cost=False)
            self.sm_owed = 0          # CPU [ns] of polls counted but not yet burnt
            self.sm_run = 0           # CPU [ns] of the sysmon segment running now
            self.sm_charged = 0       # CPU [ns] of sysmon segments finished

    def _costs_for(self, procs: int) -> None:
        # marking spread over the Ps: mark workers and assists run on up to min(P, CPUs) CPUs at
        # once (in bursts under a quota); each CPU-second then scans less of a heap the cache
        # holds (scan_slowdown; go.gc_parallel_cost, 0 unless set)
        pr = self.params
        # nodes whose pointers are still nil send the scan to no other object: none of it misses
        live = 0 if self.heap_unlinked else pr.live_heap_bytes + pr.process_heap_bytes
        self.scan_rate = pr.scan_bytes_per_ns / scan_slowdown(
            live, pr.llc_bytes, pr.gc_scan_miss_factor, procs, self.cpus, pr.gc_parallel_cost)
        c = self.costs
        self.c_wake, self.c_park, self.c_switch = c.wake(), c.park(), c.switch()
        self.c_spin, self.c_steal = c.spin(procs, self.cpus), c.steal(procs, self.cpus)
        self.c_lock = c.lock()
        # a poll's whole cost, its usleep round trip included (go.sysmon_poll_us); of the host's
        # wake-up cost (host.wakeup_*) sysmon pays its wake-up from the deep sleep (below)
        self.c_sysmon = c.sysmon_poll(procs)
        self.wake_latency_ns = int(self.params.wakeup.latency_ns)
        self.smt = self.params.threads_per_core > 1 and self.params.smt_slowdown > 0

    def _lock_ns(self, own: int = 0) -> int:
        """``sched.lock`` contention of one slow path: the other Ms in the scheduler now. A P
        running a goroutine takes no scheduler lock; the Ms that look for work, give their P back
        and park, or are woken do (``findRunnable``'s global queue and ``pidleput``, ``stopm``'s
        ``mput``, ``startm``'s ``pidleget``, all under ``sched.lock``, src/runtime/proc.go). So
        the contenders are the spinning Ms, those whose search is under way, and the Ms parking or
        waking: the model charges a park or a wake-up as a cost, not as a running segment, so
        their number is Little's law's, the recent rate of wake-ups and parks times the time
        each takes. ``own``: how many of the spinning and searching Ms counted are the M on this
        slow path itself (it waits for the others, not for itself). The count is
        :func:`.sched.lock_contenders`'s; this keeps the rate it reads up to date."""
        if not self.c_lock:
            return 0
        now = self.engine.now
        dt = now - self._pw_t
        if dt > 0:
            # an exponentially weighted rate: weight dt / (dt + window) for the latest stretch
            n_pw = self.m_wakes + self.m_parks
            self._pw_rate += (n_pw - self._pw_n - self._pw_rate * dt) / (dt + LOCK_RATE_WINDOW_NS)
            self._pw_t = now
            self._pw_n = n_pw
        n = lock_contenders(self.nmspinning + len(self.spin_ends) - own, self._pw_rate, self.c_wake + self.c_park,
                            self.cpus)
        return int(self.c_lock * n) if n > 0 else 0

    def _infl(self) -> float:
        """CPU per unit of work of a segment starting now: threads of this process beyond one per
        physical core share a core with a sibling (the kernel's ``select_idle_core`` fills idle
        cores first), and a shared core does each thread's work slower."""
        if not self.smt:
            return 1.0
        return smt_inflation(min(len(self.holders), self.cpus), self.cpus, self.params.threads_per_core,
                             self.params.smt_slowdown)

    # ------------------------------------------------------------------ setup
    def build_before_load(self) -> None:
        """The live heap is built before the load starts, as the lab's workload does it
        (``buildLiveHeap`` before ``/ready``, lab/cmd/workload): its objects hold no pointers until
        the build links them, and the load waits for :meth:`link_heap`."""
        self.heap_unlinked = True
        self._after_build = []
        self._costs_for(self.nprocs)

    def link_heap(self) -> None:
        """The build linked its objects (a random graph from now on: the scan pays its cache
        misses) and the load starts: the callbacks :meth:`after_build` held run now."""
        self.heap_unlinked = False
        self._costs_for(self.nprocs)
        waiting, self._after_build = self._after_build or [], None
        for fn in waiting:
            fn()

    def build_pending(self) -> bool:
        """Whether the load waits for a heap still being built (:meth:`build_before_load`)."""
        return self._after_build is not None

    def after_build(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` (a workload starting its load) once the heap is built, or now when no build
        is pending."""
        if self._after_build is None:
            fn()
        else:
            self._after_build.append(fn)

    def start(self) -> None:
        self.engine.call_at(0, self._sample)
        if self.updates:
            self.engine.call_later(gmp.SYSMON_UPDATE_NS, self._sysmon_gomaxprocs)
        self.engine.call_later(gcpacer.FORCEGC_PERIOD_NS, self._forcegc)
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
        m = _M(self.engine.new_thread(f"{self.name}-M{len(self.ms)}"))
        self.ms[m.tid] = m
        return m

    # ------------------------------------------------------------------ accounting
    def _acc(self) -> list[int]:
        """Cumulative P-time per class [ns] now."""
        now = self.engine.now
        return [n * now - g for n, g in zip(self.ni, self.neg)]

    def _acc_published(self) -> list[int]:
        """:meth:`_acc` as ``/cpu/classes`` reports it: the scavenger's time (assists, background)
        taken out of user time into two classes of its own (``PC_*`` order, then those two)."""
        acc = self._acc()
        assist, background = self._scav_ptime()
        user = acc[PC_USER]
        if assist + background > user:      # the stretch is the interval's mean, the releases' own may be less
            f = max(user, 0) / (assist + background)
            assist, background = assist * f, background * f
        acc[PC_USER] = user - int(assist) - int(background)
        return [*acc, int(assist), int(background)]

    def _stretch_scavenge(self) -> None:
        """The scavenger's P-time since the last sample: its CPU times the user class's P-time over
        that class's CPU (user and scheduler work) in the interval. The runtime times a release by
        the clock, so a quota's throttle or a wait for a CPU that falls inside one counts as it
        does inside any user code; the chunks that burn releases are user chunks."""
        acc = self._acc()
        cpu = self._cpu_now()
        up, uc, _, _ = self._stretch_seen
        user_pt, user_cpu = float(acc[PC_USER]), cpu["user"] + cpu["sched"]
        if user_cpu - uc > 0:
            self._stretch = max(1.0, (user_pt - up) / (user_cpu - uc))
        assist, background = self._scav_ptime()
        self.scav_pt = [assist, background]
        self._stretch_seen = (user_pt, user_cpu, self.scav_ns[SCAV_ASSIST], self.scav_ns[SCAV_BACKGROUND])

    def _scav_ptime(self) -> tuple[float, float]:
        """The scavenger's P-time (assists, background) now: what the samples have stretched, and
        the release CPU burnt since the last one at the last interval's stretch."""
        _, _, a0, b0 = self._stretch_seen
        st = self._stretch
        return (self.scav_pt[SCAV_ASSIST] + (self.scav_ns[SCAV_ASSIST] - a0) * st,
                self.scav_pt[SCAV_BACKGROUND] + (self.scav_ns[SCAV_BACKGROUND] - b0) * st)

    def _pc_move(self, old: int, new: int) -> None:
        if old != new:
            self.n_pc[old] -= 1
            self.n_pc[new] += 1
            if not self.stw or self._stw_stopping:
                now = self.engine.now
                self.ni[old] -= 1
                self.neg[old] -= now
                self.ni[new] += 1
                self.neg[new] += now

    def _pc_stop(self, cls: int, n: int = 1) -> None:
        """``n`` Ps of P-time class ``cls`` stop for a stop-the-world still waiting for others:
        from now on their P-time is the GC's pause (``stopTheWorldWithSema``: each P's
        ``gcStopTime``, summed into ``stoppingCPUTime``), while a P still running towards its
        safe point keeps its own class until it stops."""
        if n <= 0 or cls == PC_PAUSE:
            return
        now = self.engine.now
        self.ni[cls] -= n
        self.neg[cls] -= n * now
        self.ni[PC_PAUSE] += n
        self.neg[PC_PAUSE] += n * now

    def _integ_stw(self, begin: bool) -> None:
        """Switch the integrated counts to "all Ps paused" (begin) or back to the P states."""
        now = self.engine.now
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
        pre_ns = int(pre)
        m.infl = infl
        total = int(work * infl) + pre_ns
        if total < 1:
            total = 1
        if m.p >= 0:
            old, new = _SEG_PC_L[m.seg], _SEG_PC_L[seg]
            if old != new:     # (most segments follow one of their own class: no call)
                self._pc_move(old, new)
        m.seg = seg
        m.work = total
        m.pre = pre_ns
        m.t_seg = self.engine.now
        return total

    def _acquire_p(self, m: _M) -> None:
        if len(self.free_ps) == self.nprocs:
            # the first P of an idle process: it resumes
            if self.sysmon is not None:
                self._sysmon_busy()
            if self.resume_on:
                # its code and data went cold while nothing of it ran (cfsim.kernel.resume): the M
                # that resumes it runs that much slower, paid with its next segment
                m.debt += self.params.resume.cost_ns(self.engine.now - self.idle_since_ns)
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
        if len(self.free_ps) == self.nprocs:
            self.idle_since_ns = self.engine.now
            if self.sysmon is not None:
                self._sysmon_idle()

    # ------------------------------------------------------------------ sysmon
    def _sysmon_busy(self) -> None:
        """The first P of an idle process is taken: sysmon's last poll (if due) saw every P
        idle; a sysmon in deep sleep is woken by the goroutine's system call (futex wake)."""
        sm, now = self.sysmon, self.engine.now
        self._sysmon_polls(sm.advance(now, busy=False))
        if sm.deep:
            cost = self.c_wake
            if self.params.wakeup.enabled:
                cost += self.params.wakeup.cycle_ns(now - sm.deep_since_ns)
            sm.wake(now)
            self.sm_owed += cost
            self.sm_cpu += cost
            self.sm_sleeps += 1

    def _sysmon_idle(self) -> None:
        """The last P was released: count the polls of the busy spell; burn them once they add
        up to ``SYSMON_BATCH_NS`` (and at every sample), which keeps the engine's events per
        request unchanged and the CPU in the right period."""
        self._sysmon_polls(self.sysmon.advance(self.engine.now, busy=True))
        if self.sm_owed >= SYSMON_BATCH_NS:
            self._sysmon_flush()

    def _sysmon_polls(self, polls: int) -> None:
        cost = polls * self.c_sysmon
        self.sm_owed += cost
        self.sm_cpu += cost
        self.sm_sleeps += polls

    def _sysmon_flush(self) -> None:
        if self.sm_owed > 0 and not self.engine.is_runnable(self.sm_tid):
            self.sm_run, self.sm_owed = int(self.sm_owed), 0
            self.engine.run(self.sm_tid, self.sm_run, self._sysmon_done)

    def _sysmon_done(self, tid: int) -> int | None:
        self.cpu_l[_SCHED] += self.sm_run
        self.sm_charged += self.sm_run
        self.sm_run = 0
        if self.sm_owed > 0:
            self.sm_run, self.sm_owed = int(self.sm_owed), 0
            return self.sm_run
        return None

    @property
    def npidle(self) -> int:
        return len(self.free_ps)

    # ------------------------------------------------------------------ waking
    def ready(self, k: int = 1, netpoll: bool = True, spawns: bool = False) -> None:
        """``k`` goroutines became runnable.

        ``netpoll``: from a netpoll batch (network data arrived): with an idle P, the M blocked
        in ``netpoll`` takes one and ``injectglist`` starts ``min(k-1, npidle)`` more Ms plus a
        ``wakep``, once that M runs (until then the batch is its own and grows with what arrives
        meanwhile: :meth:`_startm`); with no idle P they wait in the global queue for a P's next
        scheduling point.
        Otherwise (``ready``/``newproc`` from a running goroutine) one ``wakep``. ``spawns``: the
        readied goroutine readies others at once (channel sends, ``go`` statements), each with a
        ``wakep`` (the spinning chain then spreads the work).
        """
        if self.stw or self.dead:
            return
        if self._deferring:
            # readied by the goroutine that just finished on the current M: ``runqput`` puts it
            # in that P's ``runnext``, which the M runs first; the wake-ups happen after that
            self._deferred.append((k, netpoll, spawns))
            return
        if netpoll:
            src = self.source
            if self.poll_m is not None and src is not None:
                # the M blocked in netpoll is woken already and has not run: its netpoll returns
                # this batch too (no one else polls while sched.lastpoll == 0), and what these
                # goroutines start waits for it as well
                src.hold_polled()
                return
            if self.poller_blocked and src is not None and src.hold_polled():
                # the kernel wakes the M blocked in netpoll; the batch is its own until it runs
                self.poller_blocked = False
                if self.free_ps:
                    self._startm(spinning=False, poll=True)
                else:
                    self._wake_poller()
                return
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
                self.engine.call_later(0, self._yield_idle_worker)
            else:
                self._yield_idle_worker()

    def running_thread(self) -> int:
        """The engine thread of the M whose completion is being handled now (the one that wrote a
        response, say), or -1 outside a completion."""
        cur = self._cur
        return -1 if cur is None else cur.tid

    def wakep(self) -> None:
        if self.stw or not self.free_ps or self.nmspinning:
            return
        self._startm(spinning=True)

    def _startm(self, spinning: bool, poll: bool = False, waker: int = -2) -> None:
        """``startm`` (proc.go): an idle M takes an idle P and is woken (``notewakeup`` ->
        ``futexwakeup``). It decides what to run only once it has run its wake-up (the futex
        return and switch-in, plus any park cost still owed): on a host whose CPUs are busy that
        takes a while, and a spinning M keeps ``nmspinning`` up meanwhile, so no other ``wakep``
        starts an M (``wakep``: "only start one if none exist already") -- the spinning chain
        advances one M at a time, as fast as Ms get CPUs.

        ``poll``: the M is the one blocked in ``netpoll`` that the network's data wakes
        (``findRunnable``'s blocking ``netpoll``, after ``sched.lastpoll.Swap(0)``). The batch its
        ``netpoll`` returns is its own: no other M polls while ``sched.lastpoll == 0`` (the
        non-blocking ``netpoll`` in ``findRunnable`` and ``sysmon``'s both test it), so if it
        cannot run at once the goroutines wait for it, and so does what arrives meanwhile
        (:meth:`ready`), until it runs (:meth:`_poller_runs`). It takes the idle P only then
        (``pidleget`` after ``netpoll`` returns); the model hands it over here, as ``startm`` does.

        ``waker``: the thread making the wake-up when it is not the M whose callback is running
        (-2: that M, :meth:`_waker`)."""
        m = self._new_m()
        self._acquire_p(m)
        self.m_wakes += 1
        if spinning:
            m.spinning = True
            self.nmspinning += 1
        # the host's wake-up latency (host.wakeup_latency_us): the M holds its P and, if
        # spinning, nmspinning until it runs, so no other wakep starts an M meanwhile
        delay = self._os_wake_delay(m) + self.wake_latency_ns
        if not delay and len(self.holders) <= self.cpus:
            # a CPU is free for it: it runs at once, and its few microseconds of wake-up change
            # nothing the model resolves -- decide now (one engine event fewer per wake-up)
            if poll:
                self._poller_runs(m)
            self._woken_decides(m, waker)
            return
        if poll:
            self.poll_m = m
        self._run_wake(m, delay, waker)

    def _woken_decides(self, m: _M, waker: int = -2) -> None:
        """A woken M that runs at once decides what to run, its wake-up's CPU (and any park
        cost still owed) paid with that segment; one that finds nothing burns it and parks.
        ``waker`` as :meth:`_startm` takes it."""
        extra = self.c_wake + self._lock_ns(int(m.spinning)) + m.debt
        m.debt = 0
        w = self._schedule(m, extra)
        if w:
            self.engine.run(m.tid, w, self._on_done, self._waker(m, waker))
        else:
            self._burn_futile(m)

    def _waker(self, m: _M, waker: int = -2) -> int:
        """The thread whose ``futexwakeup`` wakes ``m``: the M whose segment just ended (its
        callback runs now), for the host's wake-up placement beside it (``host.wake_affine_share``);
        -1 for a wake-up from a timer or the network."""
        if waker != -2:
            return waker   # given by the caller (a wake-up made outside the waker's own callback)
        cur = self._cur
        return cur.tid if cur is not None and cur is not m else -1

    def _run_wake(self, m: _M, delay: int, waker: int = -2) -> None:
        """A woken M runs its wake-up (the futex return and switch-in, plus any park cost still
        owed) as a segment, after the host's wake-up latency ``delay`` [ns]; it decides what to
        run when that segment ends (:meth:`_on_done`)."""
        w = self._seg(m, WAKE, 0, self.c_wake + self._lock_ns(int(m.spinning)) + m.debt)
        m.debt = 0
        if delay:
            self.engine.call_later(delay, self._run_woken, m, w, m.t_seg)
        else:
            self.engine.run(m.tid, w, self._on_done, self._waker(m, waker))

    def _wake_poller(self) -> None:
        """The network wakes the M blocked in ``netpoll`` while every P is busy: it needs a CPU
        to run although it will find no P (``pidleget`` returns none), and only when it has run
        does its batch reach the global queue, where the busy Ps' Ms find it (``injectglist``);
        until then none of them polls (``sched.lastpoll == 0``)."""
        m = self._new_m()
        self.m_wakes += 1
        delay = self._os_wake_delay(m) + self.wake_latency_ns
        self.poll_m = m
        self._run_wake(m, delay)

    def _poller_runs(self, m: _M) -> bool:
        """The M woken from ``netpoll`` runs (``findRunnable`` after its blocking ``netpoll``):
        with a P (handed over when it was woken, or idle now: ``pidleget``) its batch's first
        goroutine runs next there and ``injectglist`` starts an M for each further one while Ps
        are idle; without one the batch goes where every P's next look finds it and the M parks
        again (``stopm``). Returns whether the M holds a P."""
        self.poll_m = None
        src = self.source
        if m.p < 0 and self.free_ps and not self.stw:
            self._acquire_p(m)
        if m.p < 0:
            if src is not None:
                src.release_polled(-1)
            m.seg = PARK
            self.m_parks += 1
            self.m_sleeps_by[SL_IDLE] += 1
            m.debt += self.c_park + self._lock_ns()
            self.idle_ms.append(m)
            return False
        n = src.release_polled(m.p) if src is not None else 0
        if n > 1:
            for _ in range(netpoll_wakeups(n - 1, self.npidle)):
                self._startm(spinning=False)
            self.wakep()
        return True

    def _os_wake_delay(self, m: _M) -> int:
        """The OS's wake-up latency of a woken M on a host other processes use: with the chance
        that its CPU runs another process's task (``background_cores / cpus``), that task took
        the CPU when the process's last thread left it (:meth:`CfsEngine.group_idle_ns`) with what
        was left of its slice (uniform within ``sysctl_sched_base_slice`` = 0.75 ms x (1 +
        log2(min(CPUs, 8))), ``kernel/sched/fair.c``). ``set_next_entity`` -> ``set_protect_slice``
        protects it only that long (``RUN_TO_PARITY``; the protection is not renewed while it runs
        on): a wake-up after that preempts it at once (``check_preempt_wakeup_fair``), one before
        it waits for the rest, and without ``HRTICK`` the kernel notices the end only at the next
        tick (:func:`cfsim.kernel.eevdf.slice_end_ns`): at HZ 250 on 2 CPUs up to 5.5 ms after
        the process left the CPU. So the busier the process keeps a CPU, the more of its wake-ups
        wait."""
        if self.wake_busy <= 0:
            return 0
        if self.wake_rng.random() >= self.wake_busy:
            return 0
        left = int(self.wake_rng.random() * self.wake_slice_ns)
        idle = self.engine.group_idle_ns(m.tid)
        if idle < 0 or idle >= left:
            return 0
        now = self.engine.now
        return slice_end_ns(now - idle, left, self.engine.tick_ns) - now

    def _futile_seg(self, m: _M) -> int:
        """A woken M that found nothing burns its wake-up, search and park now, then parks (it is
        taken off the idle list until then): an M woken only to find nothing would otherwise
        carry that CPU as debt to a next run that may never bring work."""
        ims = self.idle_ms
        if ims and ims[-1] is m:
            ims.pop()        # parked just now, so mostly the last: no scan of a list of many Ms
        else:
            try:
                ims.remove(m)
            except ValueError:
                pass
        w = max(1, int(m.debt))
        m.debt = 0
        m.seg, m.work, m.pre, m.t_seg, m.infl = PARK, w, w, self.engine.now, 1.0
        return w

    def _burn_futile(self, m: _M) -> None:
        if m.p < 0 and m.debt > 0 and m is not self._cur:
            self.engine.run(m.tid, self._futile_seg(m), self._on_done, self._waker(m))

    def _run_woken(self, m: _M, w: int, t_seg: int) -> None:
        if (m.p < 0 and m is not self.poll_m) or m.seg != WAKE or m.t_seg != t_seg \
                or self.engine.is_runnable(m.tid):
            return   # stopped meanwhile (stop the world) or already running
        self.engine.run(m.tid, w, self._on_done)

    def _yield_idle_worker(self) -> None:
        """``pollWork``: idle mark workers notice runnable goroutines (within ~100 us, taken as
        at once) and give their Ps back, one per runnable chunk of work."""
        src = self.source
        if self.stw:
            return
        for m in sorted((m for m in self.holders if m.seg == IDLEW and not m.stopped), key=lambda m: m.p):
            if not src.has_work():
                return
            if not self.engine.is_runnable(m.tid):
                continue   # no longer working: the one that finished the mark, asleep in gcMarkDone's barrier
            left = self.engine.stop(m.tid)
            self._charge(m, left)
            # m acts as the M whose callback runs (as in _on_done): what its rescheduling starts
            # on m itself (a GC transition it coordinates, a futile search it burns) is returned
            # as its next segment, not started a second time
            self._cur = m
            try:
                self._mark_return(m, left)
                self.idlew_running -= 1
                w = self._schedule(m)
            finally:
                self._cur = None
            if w:
                self.engine.run(m.tid, w, self._on_done)

    # ------------------------------------------------------------------ engine callback
    def _charge(self, m: _M, left: int = 0) -> None:
        used = m.work - left
        m.charged += used
        pre = min(used, m.pre)
        if pre:
            self.cpu_l[_SCHED] += pre
        self.cpu_l[_CPU_IDX[m.seg]] += used - pre

    def _on_done(self, tid: int) -> int | None:
        if self.dead:
            return None      # OOM-killed: its threads are gone
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
            if m is self.poll_m and not self._poller_runs(m):
                return None   # it found no P and parked again
            w = self._schedule(m)
            if w is None and m.p < 0 and m.debt > 0:
                return self._futile_seg(m)
            return w
        if seg == PARK:
            self.idle_ms.append(m)
            return None
        if seg == ACK:
            # at its safe point the M hands its P to the stop and sleeps (gcstopm -> stopm):
            # the park's CPU is owed, paid when it is woken again
            m.stopped = True
            self.stw_wait -= 1
            if self.params.stw_restart_chain:
                self._stw_sleep(m, SL_STW_STOPPED)
            if self._stw_stopping:
                self._pc_stop(_SEG_PC_L[ACK])
            return self._stw_check(m)
        if seg == STWK:
            self.stw_coord_done = True
            if self.stw_wait > 0 and self.params.stw_restart_chain:
                # Ps still running towards their safe points: the coordinator sleeps on
                # sched.stopnote until the last of them wakes it (stopTheWorldWithSema)
                self.stw_coord_asleep = True
                self._stw_sleep(m, SL_STW_COORDINATOR)
                return None
            return self._stw_check(m)
        raise AssertionError(seg)

    # ------------------------------------------------------------------ scheduling
    def _schedule(self, m: _M, extra: float = 0, cont: bool = False) -> int | None:
        """``schedule``/``findRunnable`` for an M holding a P at a scheduling point; ``extra`` is
        overhead already owed (a wake-up). Returns the next segment's CPU, or None if the M
        released its P and blocks. ``cont``: no scheduling point, the running goroutine goes on
        with the source's next chunk (:meth:`_continues`): no GC worker, no goroutine switch."""
        if cont and self.source is not None:
            c = self.source.claim(self.claim_ns, m.p)
            if c is not None:
                self.inflight_alloc += c.alloc
                m.claim = c
                return self._user_seg(m, c, extra)
        m.t_sched = self.engine.now
        if self.phase == MARK:
            w = self._gc_worker(m, extra)
            if w:
                return w
        src = self.source
        if src is not None and src.has_work():
            c = src.claim(self.claim_ns, m.p)
            if c is not None:
                self.inflight_alloc += c.alloc
                c.tid = m.tid
                pre = extra + self.c_switch * c.goroutines
                spinning = m.spinning
                if spinning:
                    pre += self.c_steal
                m.claim = c
                w = self._user_seg(m, c, pre)
                if spinning:
                    m.spinning = False
                    self.nmspinning -= 1
                    if self.nmspinning == 0:
                        self.wakep()   # resetspinning
                return w
        # Nothing runnable: spin (steal) if the "half the busy Ps" rule allows it, then an idle
        # mark worker or park. The search is decided at once (no work appears in its few us in
        # this model) and its CPU is owed by the M, burnt at its next run. For the rule, an M
        # counts as spinning (and as holding its P) until its search would have ended.
        now = self.engine.now
        ends = self.spin_ends
        while ends and ends[0] <= now:
            heappop(ends)
        nv = len(ends)
        searched = may_spin(m.spinning, self.nmspinning + nv, self.nprocs, len(self.free_ps) - nv)
        if searched:
            extra += self.c_spin + self._lock_ns(int(m.spinning))
            heappush(ends, now + self.c_spin)
        if m.spinning:
            m.spinning = False
            self.nmspinning -= 1
        m.debt += int(extra)
        return self._idle_or_park(m, searched)

    def _idle_or_park(self, m: _M, searched: bool = False) -> int | None:
        """End of ``findRunnable``: an idle mark worker, else release the P and park. The park's
        CPU is owed and burnt at the M's next wake-up (one event fewer per park). ``searched``: the
        M's own search is among the searches under way (``spin_ends``), not a contender."""
        if self.phase == MARK and self.mark_unclaimed > 0 and self.idlew_running < self.worker_counts.max_idle:
            self.idlew_running += 1
            w = self._mark_seg(m, IDLEW, pre=m.debt)
            m.debt = 0
            self._unspin(m)
            self.wakep()   # the spinning chain continues into the next idle P
            return w
        self._release_p(m)
        m.seg = PARK
        self.m_parks += 1
        m.debt += self.c_park + self._lock_ns(int(searched))
        self.idle_ms.append(m)
        # findRunnable's last step: with no M in netpoll (sched.lastpoll != 0) this one blocks
        # there (lastpoll.Swap(0)), and the network's next data wakes it; with one there already,
        # it sleeps in stopm as an idle M
        if self.poll_m is None and not self.poller_blocked:
            self.poller_blocked = True
            self.m_sleeps_by[SL_NETPOLL] += 1
        else:
            self.m_sleeps_by[SL_IDLE] += 1
        return None

    # ------------------------------------------------------------------ user work
    def _user_seg(self, m: _M, c: Claim, pre: float) -> int:
        """Start the user segment of chunk ``c`` on ``m``: the sweep it owes first (only while a
        sweep is left: this runs at every schedule), then its work at the allocation path's
        price. The sweep is the runtime's own CPU on spans, not the chunk's allocation: it takes
        the CPU's sharing (SMT) but not the chunk's ``mallocgc`` per byte, faults or releases."""
        infl = self._user_infl(c)
        if self.sweep_left <= 0:
            return self._seg(m, USER, c.work, pre, infl)
        sweep = self._sweep_take(m)
        work = c.work + sweep
        infl = (c.work * infl + sweep * (self._infl() if self.smt else 1.0)) / work
        return self._seg(m, USER, work, pre, infl)

    def _sweep_take(self, m: _M) -> float:
        """Sweeping the chunk claimed on ``m`` does first: after a mark termination every span in
        use is swept once (``src/runtime/mgcsweep.go``), by the allocating goroutines in proportion
        to their allocation (``deductSweepCredit``: all at once where the trigger is at hand, as
        near a memory limit) and, at the trigger, by the goroutine that starts the next cycle
        (``gcStart`` sweeps what is left before the stop). Shared among all Ps: where the trigger
        is at hand each P that allocates sweeps (``sweepone``, a span at a time) until no span is
        left to take, so the Ms waiting for a CPU sweep their part when they run rather than
        allocate past the trigger."""
        if self.sweep_left <= 0:
            return 0.0
        x = min(self.sweep_left, self.sweep_share)
        self.sweep_left -= x
        self.sweep_inflight += x
        m.sweep += x
        return x

    def _user_done(self, m: _M) -> int | None:
        c = m.claim
        assert c is not None   # (narrowed: the compiled build reads its fields directly)
        m.claim = None
        self.inflight_alloc -= c.alloc
        if m.sweep:
            self.sweep_inflight -= m.sweep
            m.sweep = 0.0
        # the goroutine's own completion (and anything it readies) waits for its allocation's
        # accounting: the assist it owes, or the GC it triggers (see _allocated); readied goroutines
        # go to the P's runnext and are woken after the M has chosen its next work
        self._deferring = True
        parked = len(self.assistq)
        try:
            w = self._allocated(m, c, m.t_seg)
        finally:
            self._deferring = False
        if w is None:
            # a goroutine parked for assist credit (gcParkAssist) leaves its P to schedule
            w = self._schedule(m, cont=len(self.assistq) == parked and self._continues(m, c))
        if self._deferred:
            calls, self._deferred = self._deferred, []
            for args in calls:
                self.ready(*args)
        return w

    def _continues(self, m: _M, c: Claim) -> bool:
        """Whether the goroutine whose chunk ended goes on running without passing through
        ``schedule``: the chunk was the model's cut of a run the goroutine does not interrupt (a
        stream worker that takes its next record without blocking: ``continues``), and sysmon has
        not preempted it yet (``retake``, 10-20 ms after its P last scheduled: :meth:`_preempt_at`).
        Only at ``schedule`` does a P look for a GC mark worker
        (``findRunnableGCWorker``), so a fractional worker gets the P of such a goroutine only at
        its blocking points, its preemption or a stop-the-world, as in the runtime."""
        if self.stw or m.p < 0:
            return False
        if self.source is None or not self.source.continues(c):
            return False
        return self.engine.now < self._preempt_at(m)

    def _preempt_at(self, m: _M) -> int:
        """When sysmon preempts the goroutine ``m`` last scheduled (:meth:`Sysmon.preempt_at`,
        on sysmon's own poll grid; ``forcePreemptNS`` after the schedule without sysmon)."""
        t, at = m.preempt
        if t != m.t_sched:
            sm = self.sysmon
            polled = sm.preempt_at(m.t_sched) if sm is not None else None
            at = m.t_sched + FORCE_PREEMPT_NS if polled is None else polled
            m.preempt = (m.t_sched, at)
        return at

    def _user_infl(self, c: Claim) -> float:
        """CPU per unit of a chunk's work: SMT sharing, times the runtime's own CPU on the chunk's
        allocation path, which the workload's CPU does not include: ``mallocgc`` per byte
        (allocation, zeroing, span refill, proportional sweeping), plus the page faults and page
        releases the memory state has caused and no goroutine has burnt yet (taken by the chunks
        that allocate, at most doubling one; the runtime charges a fault to the goroutine that
        touches the page, a scavenge assist to the one that allocates, the background scavenger
        to its own goroutine)."""
        infl = self._infl() if self.smt else 1.0
        alloc, work = c.alloc, c.work
        if alloc <= 0 or work <= 0:
            return infl
        extra = alloc * self.params.alloc_ns_per_byte
        debt = self.mm_debt_ns
        if debt > 0:
            take = min(debt, work)
            self.mm_debt_ns = debt - take
            extra += take
            sd, share = self.scav_debt_ns, take / debt
            for i in (SCAV_ASSIST, SCAV_BACKGROUND):
                if sd[i] > 0:
                    part = sd[i] * share
                    sd[i] -= part
                    self.scav_ns[i] += part * infl
        return infl * (1.0 + extra / work)

    def _mm_charge(self, background: bool = False) -> None:
        """Page faults (heap growth, released memory taken back) and page releases (scavenging)
        since the last call, as CPU owed by the allocating goroutines; the releases' part (and
        their flushes) is the background scavenger's where ``background``, else allocSpan's
        scavenge assists (``/cpu/classes/scavenge/{background,assist}``). A release while other CPUs
        run threads of the process also flushes their TLBs: one inter-processor interrupt per
        other CPU and per ``madvise(MADV_DONTNEED)`` call (``zap_page_range`` gathers the pages of
        a call and flushes once in ``tlb_finish_mmu``, mm/mmu_gather.c, for runs below its batch
        limit of ~10,000 pages), paid by the releasing thread's wait and the interrupted thread
        (``host.tlb_shootdown_us``). The calls are counted where the releases are made
        (:meth:`cfsim.goruntime.memory.HeapMemory.allocate` and ``scavenge``)."""
        mem = self.mem
        faulted = mem.paged_in_bytes
        released = mem.scavenged_bytes
        calls = mem.release_calls
        f0, r0, c0 = self._mm_seen
        if faulted != f0 or released != r0:
            self._mm_seen = (faulted, released, calls)
            p = self.params
            flushes = (calls - c0) * self._other_cpus_running() if released != r0 else 0
            self.tlb_flushes += flushes
            release = (released - r0) * self._release_ns_per_page(0)
            # the releases' part again on its own (the sum above keeps its order of operations, so
            # the twins' arithmetic is bit for bit what it was before the scavenger had a class)
            self.mm_debt_ns += ((faulted - f0) * p.page_fault_ns + release) / gmem.PAGE + flushes * p.tlb_shootdown_ns
            self.scav_debt_ns[SCAV_BACKGROUND if background else SCAV_ASSIST] += \
                release / gmem.PAGE + flushes * p.tlb_shootdown_ns

    def _charge_background_releases(self) -> None:
        """Price the background scavenger's releases at an instant the process runs: it is a
        goroutine (``bgscavenge``), so it releases while the process holds a CPU, and each 64 KiB
        flushes the TLBs of the other CPUs running the process then. The sampling instant that
        paces it is no such instant: it falls on the quota period's boundary, where a process that
        used its quota is throttled (no CPU runs it), or on sysmon's flush, the one moment a
        GOMAXPROCS-1 process runs on two CPUs. The next allocation is made by a running M."""
        self._scav_pending = False
        self._scav_others = self._other_cpus_running()
        self._mm_charge(background=True)

    def _other_cpus_running(self) -> int:
        """CPUs besides the releasing thread's that run threads of the process now."""
        return max(self.engine.cpus_running() - 1, 0)

    def _release_ns_per_page(self, others: int) -> float:
        """CPU of releasing a 4 KiB page with ``others`` other CPUs running the process: the
        runtime's own work (``go.scavenge_page_us``), the ``madvise`` itself and, at the background
        scavenger's 64 KiB a call, its share of one TLB flush of each (the price its pace is set
        by; :meth:`_mm_charge` charges the flushes a call as the releases were made)."""
        p = self.params
        return p.scavenge_page_ns + p.page_release_ns + others * p.tlb_shootdown_ns * gmem.PAGE / gmem.SCAVENGE_QUANTUM

    def _count_alloc(self, alloc: int, work: int) -> None:
        """Heap accounting of a chunk's allocation (``heapLive``, ``/gc/heap/allocs``, the spans
        it needs), the memory-limit goal that moves with it, the container's memory charge (an
        OOM kill above the cgroup limit), and the workload's allocation intensity, which sets
        the chunk cap (:meth:`_claim_cap`)."""
        self.heap_live += alloc
        self.alloc_total += alloc
        mem = self.mem
        gml = self.params.gomemlimit_bytes
        if self._scav_pending:
            self._charge_background_releases()
        if (mem.alloc + alloc) * mem._frag1 > mem.inuse:   # the spans grow (else reused in place)
            mem.allocate(alloc, gml, self.limiter.enabled)
            self._mm_charge()
            if self._memory_grew():
                return
        else:
            mem.alloc += alloc
        if gml is not None:
            self._update_goal()
        if work > 0:
            self.alloc_per_ns = alloc / work
        if self.phase != OFF or self.trigger_bytes - self.heap_live < self._cap_near:
            self._claim_cap()

    def _memory_grew(self) -> bool:
        """The container's memory charge after the process mapped more: a new high-water mark is
        checked against the cgroup limit (True: the OOM killer ended the process)."""
        usage = self.mem.mapped_ready
        if usage > self.mem_hwm:
            self.mem_hwm = usage
            lim = self.params.memory_limit_bytes
            if lim is not None and kmem.oom_kill(usage, 0, 0, lim):
                self._oom_kill()
                return True
        return False

    def retain(self, heap_bytes: int, stack_bytes: int = 0) -> None:
        """A goroutine keeps ``heap_bytes`` of pointer-free objects and a stack of ``stack_bytes``
        for the rest of the run (a client connection's byte buffers and its goroutine): allocated
        now, and live heap that every mark from now on marks but does not scan (a noscan span's
        objects are only marked, ``greyobject``)."""
        if self.dead:
            return
        if self.phase in (MARK, MARKTERM):
            # allocated black during this mark: the cycle's marked heap counts it with the rest of
            # the allocation since the trigger; from the next cycle on it is part of the live heap
            self._retained_in_mark += heap_bytes
        else:
            self._add_noscan_live(heap_bytes)
        if stack_bytes > 0:
            self.mem.add_stacks(stack_bytes)
            if self._memory_grew():
                return
        if heap_bytes > 0:
            self._count_alloc(heap_bytes, 0)

    def new_pool(self, obj_bytes: int) -> PerPPool:
        """A ``sync.Pool`` of ``obj_bytes`` objects whose caches this runtime clears at each GC's
        start (``clearpools`` in ``gcStart``, ``src/runtime/mgc.go``); its users count a ``New``'s
        bytes as their allocation (:mod:`cfsim.goruntime.syncpool`)."""
        pool = PerPPool(self.nprocs, obj_bytes)
        self.pools.append(pool)
        return pool

    def keep_live(self, heap_bytes: int) -> None:
        """Pointerful objects a goroutine already allocated (counted as its chunks ended) stay
        reachable for the rest of the run: live heap that every later mark scans (the workload
        building its live heap at start-up, ``go.heap_built_at_start``). Allocated during a mark
        they are black (``gcmarknewobject``): that cycle's marked heap counts them with the rest of
        its allocation, and the next cycle scans them."""
        self.heap_scan += heap_bytes
        if self.phase in (MARK, MARKTERM):
            self._kept_in_mark += heap_bytes
        else:
            self.base_live += heap_bytes

    def _add_noscan_live(self, nbytes: int) -> None:
        self.base_live += nbytes
        self.noscan_live += nbytes

    def _oom_kill(self) -> None:
        """The kernel's OOM killer ends the process (its anonymous memory cannot be reclaimed
        below the cgroup limit): every thread stops; nothing more is processed."""
        self.dead = True
        self.oom_ns = self.engine.now
        self.phase = OFF
        if self._cur is not None:
            self.engine.call_later(0, self._stop_all)
        else:
            self._stop_all()

    def _stop_all(self) -> None:
        for m in self.ms.values():
            if m is not self._cur and self.engine.is_runnable(m.tid):
                left = self.engine.stop(m.tid)
                self._charge(m, left)

    def _allocated(self, m: _M, c: Claim, t0: int) -> int | None:
        """A goroutine's chunk ended: count its allocation, then (``mallocgc``) start a GC at the
        trigger, or during the mark pay the allocation's assist debt (``gcAssistAlloc``): steal
        background credit, scan, and park on the assist queue for what no work is left for
        (``gcParkAssist``). The chunk completes when its debt is paid. Returns the M's next
        segment (an assist, or the stop-the-world), or None."""
        alloc = c.alloc
        if alloc <= 0:
            self.source.done(c, t0, self.engine.now)
            return None
        self._count_alloc(alloc, c.work)
        if self.dead:
            return None
        if self.phase == MARK:
            debt = self._assist_debt(alloc)
            if debt > 0:
                return self._assist(m, c, t0, debt)
        self.source.done(c, t0, self.engine.now)
        if self.phase == OFF and not self.stw and self.goal and (
                self.heap_live >= self.trigger_bytes
                or (self.heap_live + self.inflight_alloc >= self.trigger_bytes
                    and self._heap_live_now() >= self.trigger_bytes)) and self._swept():
            m.trig = c
            return self._gc_start(m, periodic=False)
        return None

    def _swept(self) -> bool:
        """``gcStart`` begins a cycle only once the last one's sweep is done: what is left it
        sweeps itself (``sweepone`` until none is), and the stop waits for the sweepers still at
        work (``finishsweep_m``); here the next chunk claimed takes what is left."""
        return self.sweep_left <= 0 and self.sweep_inflight <= 1e-6

    def _heap_live_now(self) -> int:
        """``heapLive`` as the runtime's trigger test reads it (``gcTrigger.test``): the chunks
        other Ms are running have allocated their done share already (the runtime counts a span
        when an mcache takes it, ``mcache.refill``), which the model adds to ``heap_live`` only
        when a chunk ends. Without them the trigger is seen late by up to a chunk per P (at 8 Ps
        on a 1-core quota ~2 MiB, 10 % of the heap left before a 16 MiB heap's goal)."""
        live = self.heap_live
        eng = self.engine
        for m in self.holders:
            c = m.claim
            if c is None or m.seg != USER or c.work <= 0:
                continue
            left = min(eng.work_left(m.tid) / m.infl, c.work)
            live += int(c.alloc * (1 - left / c.work))
        return live

    # ------------------------------------------------------------------ GC: pacer
    def _commit(self) -> None:
        """``commit``: the GOGC goal and the runway, then the goal and trigger (``trigger``)."""
        p = self.params
        self.gogc_goal = gcpacer.gogc_heap_goal(self.heap_marked, p.roots_bytes, 0, p.gogc)
        # the runway scales the last cycle's scan work (lastHeapScan); without revise_last_scan the
        # live heap, pointer-free objects included
        scanned = self.last_heap_scan if p.revise_last_scan else self.base_live
        self.runway_bytes = gcpacer.runway(self.cons.value, scanned, p.roots_bytes, 0)
        self._update_goal()
        self._claim_cap()

    def _update_goal(self) -> None:
        """``heapGoalInternal``/``trigger``: the smaller of the GOGC goal and the memory-limit goal,
        which the runtime recomputes from its current memory at every trigger test and revise
        (``memoryLimitHeapGoal``), so it moves as the heap's non-heap memory and overage do."""
        mem = self.mem
        goal = self.gogc_goal
        lim_goal = gmem.memory_limit_goal(self.params.gomemlimit_bytes, mem.mapped_ready, mem.free, mem.alloc,
                                          self.heap_marked)
        if lim_goal is not None and (goal is None or lim_goal < goal):
            goal = lim_goal
        elif goal is not None and self.phase in (MARK, MARKTERM):
            # outside the memory limit's regime a cycle's goal stays a little above the heap it
            # was triggered at (minRunway): a cycle that starts past its goal (after a large
            # allocation, or a start the quota delayed) paces its assists to that runway
            goal = max(goal, self.triggered + gcpacer.MIN_RUNWAY)
        if goal is None:
            self.goal = 0
            self.trigger_bytes = 1 << 62
            return
        self.goal = goal
        self.trigger_bytes = gcpacer.trigger(goal, self.heap_marked, self.runway_bytes)

    def _revise(self) -> None:
        p = self.params
        if (p.mark_work_shared or p.bg_credit_as_scanned) and self.phase == MARK:
            self._flush_workers()
        exp = most = int(self.mark_total)
        if p.revise_last_scan:
            # revise: scanWorkExpected is the last cycle's work and maxScanWork the scannable heap
            # now (heapScan + maxStackScan + globalsScan), each with this cycle's fixed overheads
            fixed = exp - int(self.scan_expected)
            exp = self.last_heap_scan + p.roots_bytes + fixed
            most = self.heap_scan + p.roots_bytes + fixed
        self.assist_work_per_byte = gcpacer.assist_work_per_byte(self.heap_live, self.goal, self.triggered, int(self.scan_done),
                                                 exp, most, self.params.gogc)

    def _assist(self, m: _M, c: Claim, t0: int, debt: float) -> int | None:
        """One pass of ``gcAssistAlloc``'s retry loop for a debt left after stealing credit:
        ``gcDrainN`` scans at most until the goroutine's preemption request or the limiter's next
        update (``ASSIST_CHUNK_NS``, then :meth:`_assist_again`); what no work is left for parks
        on the assist queue until background credit (or the end of the mark) covers it
        (``gcParkAssist``). Returns the M's assist segment, or None."""
        want = min(max(debt, gcpacer.GC_OVER_ASSIST_WORK), ASSIST_CHUNK_NS * self.scan_rate)
        if self.params.mark_work_shared:
            pool = max(self.mark_unclaimed, 0.0)
            took = self._take_from_workers(want - pool) if want > pool else 0.0
            avail = pool + took
        else:
            # the earlier rule (default): what running workers claimed but have not scanned counts
            # as available, and both scan it (docs/model-notes.md, "Assists that scan what a
            # worker holds")
            took = 0.0
            avail = self.mark_total - self.scan_done - self.assist_inflight
        scan = min(want, avail)
        if scan < debt and scan < avail:
            # the rest after this pass: the goroutine stays on the M and retries
            m.owed = (c, t0, debt - scan)
        elif scan < debt:
            # not enough work left to pay it all: park until background credit (or the
            # end of the mark) covers the rest
            self.assistq.append([c, t0, debt - max(scan, 0.0)])
            if scan <= 0:
                return None
        else:
            self.bg_credit += scan - debt
            m.owed = (c, t0, 0.0)
        m.excess = max(scan - debt, 0.0)
        self.mark_unclaimed -= scan - took
        self.mark_inflight += 1
        self.assist_inflight += scan
        m.mark_bytes = scan
        w = self._seg(m, ASSIST, scan / self.scan_rate, 0, self._infl())
        lim = self.limiter
        if self.params.gc_cpu_limiter and m.owed is not None and lim.fill >= LIMITER_WATCH_FILL * lim.capacity:
            self.assist_seq += 1
            m.a_id = self.assist_seq
            self.engine.call_later(gcpacer.LIMITER_UPDATE_PERIOD_NS, self._assist_limiter_check, m, m.a_id)
        else:
            m.a_id = 0    # an earlier pass's pending check must not take this one for its own
        return w

    def _scanning_worker(self, w: _M) -> bool:
        """Whether ``w`` runs a background mark worker (dedicated, fractional or idle) that holds
        scan work and can run: the workers :meth:`_flush_workers` and :meth:`_take_from_workers`
        look at."""
        return ((w.seg == DED or w.seg == FRAC or w.seg == IDLEW) and w.mark_bytes > 0
                and self.engine.is_runnable(w.tid))

    def _flush_workers(self) -> None:
        """Credit the running background workers' scan work done so far: ``gcDrain`` adds a
        worker's scan work to ``heapScanWork`` and to the background credit each
        ``gcCreditSlack`` (2,000 bytes) of scanning (``gcFlushBgCredit``, ``src/runtime/mgcmark.go``),
        so an assist steals credit, and ``revise`` sees work done, as the workers go rather than when
        their segments end."""
        eng = self.engine
        new = 0.0
        for w in self.holders:
            if not self._scanning_worker(w):
                continue
            done = w.mark_bytes - self._scan_left(w, eng.work_left(w.tid)) - w.flushed
            if done > 0:
                w.flushed += done
                new += done
        if new > 0:
            self.scan_done += new
            self.bg_credit += new
            if self.assistq:
                self._flush_bg_credit()

    def _take_from_workers(self, need: float) -> float:
        """Scan work an assist takes from the running background workers' claims once the pool
        is dry, up to ``need`` [bytes]; the workers' segments shrink in place. The runtime greys
        each object once and a worker holds at most two work buffers, handing half to the global
        list when that is empty (``gcWork.balance``, ``src/runtime/mgcwork.go``), so an assist
        (``gcDrainN``) scans what a descheduled or throttled worker would have scanned next, and
        that worker does not scan it again."""
        eng = self.engine
        got = 0.0
        for w in self.holders:
            if got >= need:
                break
            if not self._scanning_worker(w):
                continue
            body = w.work - w.pre
            left = eng.work_left(w.tid)
            if body <= 0 or left <= 1:
                continue
            rest = self._scan_left(w, left)
            # the CPU [ns] of the part taken, at the worker's own CPU per byte
            d = min(int(min(rest, need - got) * body / w.mark_bytes), left - 1)
            if d <= 0:
                continue
            t = d * w.mark_bytes / body
            eng.redirect(w.tid, left - d, self._on_done)
            w.mark_bytes -= t
            w.work -= d
            got += t
        return got

    def _assist_limiter_check(self, m: _M, a_id: int) -> None:
        """The limiter's update while an assist pass runs: the model's pass stands for the many
        short ``gcAssistAlloc1`` calls of a goroutine's allocations, each of which updates the
        limiter as it ends; it is planned in CPU (``ASSIST_CHUNK_NS``), and under a quota shared
        by many Ps it lasts many update periods of wall time, so it is checked every
        ``gcCPULimiterUpdatePeriod``. Once the update finds the limiter on,
        :meth:`_cut_assists` ends the pass."""
        if m.a_id != a_id or m.seg != ASSIST or m.owed is None or self.phase != MARK or self.dead:
            return
        if self.engine.is_throttled(m.tid):
            # a thread the quota froze allocates nothing, so it updates nothing: its next
            # gcAssistAlloc1 ends, and updates the limiter, once it runs again
            self.engine.call_later(self._throttled_wait(), self._assist_limiter_check, m, a_id)
            return
        self._limiter_update()
        if not self.limiter.enabled:
            self.engine.call_later(gcpacer.LIMITER_UPDATE_PERIOD_NS, self._assist_limiter_check, m, a_id)

    def _throttled_wait(self) -> int:
        """When to look again at an M the quota froze: the next period's refill, and no later
        than a host tick (a CPU can also get quota another CPU handed back)."""
        return max(1, min(self.engine.ns_to_refresh() or FROZEN_POLL_NS, FROZEN_POLL_NS))

    def _cut_assists(self) -> None:
        """``gcDrainN`` polls ``gcCPULimiter.limiting()`` between objects (``src/runtime/mgcmark.go``),
        so every running assist stops as soon as the limiter turns on: its unscanned part goes
        back to the pool and stays owed, and the goroutine goes on as ``gcAssistAlloc`` does with
        the limiter on (allocates on credit, else parks: :meth:`_assist_again`). A pass parked
        for want of work (no debt on the M) is left as it is."""
        if self.dead or self.phase != MARK or not self.limiter.enabled:
            return
        frozen = False
        for m in [m for m in self.holders if m.seg == ASSIST]:
            if m.seg != ASSIST or m.owed is None or not self.engine.is_runnable(m.tid):
                continue      # (checked as each comes: ending one assist may move another M)
            if self.engine.is_throttled(m.tid):
                # frozen by the quota, it polls the flag when it runs again: until then its P
                # stays in the assist (P-time the limiter counts as the GC's)
                frozen = True
                continue
            rest = self._stop_mark_seg(m)
            if rest > 0:
                self.assist_inflight -= rest
                # the credit this pass gave ahead for scan work it will not do is taken back
                back = min(rest, m.excess)
                self.bg_credit = max(0.0, self.bg_credit - back)
                c, t0, d = m.owed
                m.owed = (c, t0, d + rest - back)
            self._go_on(m)
        if frozen:
            self.engine.call_later(self._throttled_wait(), self._cut_assists)

    def _assist_again(self, m: _M, c: Claim, t0: int, rest: float) -> int | None:
        """``gcAssistAlloc`` after a pass that left debt (``goto retry``): the limiter, updated as
        the pass ended, may be on (``gcDrainN`` stops; the goroutine allocates on if background
        credit exists, else parks for it); otherwise steal credit and scan again. A chunk's debt stands for
        the goroutine's many small allocations, each assisting for itself: once the limiter is
        on, the ones still to come skip their assists, so a parked goroutine owes only the
        allocation it is in (at most ``gcOverAssistWork`` of scan)."""
        if self.params.gc_cpu_limiter:
            if self.limiter.enabled:
                if self.bg_credit > 0:
                    self.source.done(c, t0, self.engine.now)
                else:
                    self.assistq.append([c, t0, min(rest, gcpacer.GC_OVER_ASSIST_WORK)])
                return None
        self._revise()
        take = min(self.bg_credit, rest)
        self.bg_credit -= take
        rest -= take
        if rest <= 0:
            self.source.done(c, t0, self.engine.now)
            return None
        return self._assist(m, c, t0, rest)

    def _assist_debt(self, alloc: int) -> float:
        """Scan work an allocation of ``alloc`` bytes owes after stealing background credit
        (``gcAssistAlloc``); 0 while the GC CPU limiter is on (assists are skipped)."""
        if self.params.gc_cpu_limiter and self.limiter.enabled:
            return 0.0
        self._revise()
        debt = alloc * self.assist_work_per_byte
        take = min(self.bg_credit, debt)
        self.bg_credit -= take
        return debt - take

    def _flush_bg_credit(self) -> None:
        """``gcFlushBgCredit``: background scan credit first satisfies goroutines parked on the
        assist queue (FIFO); each satisfied one is ready again."""
        q = self.assistq
        woken = 0
        while q and self.bg_credit > 0:
            g = q[0]
            if self.bg_credit >= g[2]:
                self.bg_credit -= g[2]
                q.popleft()
                self.source.done(g[0], g[1], self.engine.now)
                woken += 1
            else:
                g[2] -= self.bg_credit
                self.bg_credit = 0.0
        if woken:
            self.ready(woken, netpoll=False)

    def _wake_all_assists(self) -> None:
        """``gcWakeAllAssists`` at the end of the mark: every parked goroutine runs again."""
        q = self.assistq
        n = len(q)
        now = self.engine.now
        while q:
            g = q.popleft()
            self.source.done(g[0], g[1], now)
        if n:
            self.ready(n, netpoll=False)

    def _claim_cap(self) -> None:
        """The longest chunk a P takes: its allocation stays below an allocation quantum, so the
        trigger and the assists act at the allocation's own granularity (the runtime checks
        both at every span refill, each few KiB) instead of a whole 10 ms chunk later. The
        quantum is a fraction of the heap runway per P, and shrinks with the distance left to
        the trigger (before a cycle) or to the goal (during the mark), down to
        ``ALLOC_QUANTUM_MIN``: what one goroutine allocates before the runtime notices is small
        against the room the pacer has left."""
        if self.alloc_per_ns <= 0 or not self.goal:
            self.claim_ns = FORCE_PREEMPT_NS
            self._cap_near = _CAP_FAR
            return
        p = max(1, self.nprocs)
        room = float(self.goal - self.heap_marked)
        # before a cycle the cap only changes once the trigger is this close (see _count_alloc)
        self._cap_near = room / ALLOC_QUANTA
        if self.phase == MARK:
            # the assists pace the mark over the heap left before the goal: a chunk is a small
            # part of it, so assists, background credit and allocation interleave as they do
            room = min(room, max(0, self.goal - self.heap_live) * ALLOC_QUANTA / MARK_QUANTA)
        elif self.phase == OFF:
            room = min(room, max(0, self.trigger_bytes - self.heap_live) * ALLOC_QUANTA)
        quantum = max(ALLOC_QUANTUM_MIN, room / (ALLOC_QUANTA * p))
        self.claim_ns = int(min(FORCE_PREEMPT_NS, max(CLAIM_MIN_NS, quantum / self.alloc_per_ns)))

    def _limiter_update(self, force: bool = False, gc_on: bool | None = None) -> None:
        """Feed the limiter the P-time since its last update (at most every 10 ms, and at each
        GC phase change so that a window never straddles one)."""
        now = self.engine.now
        if self._lim_held or (not force and now - self._lim_t < gcpacer.LIMITER_UPDATE_PERIOD_NS):
            return   # held: the transition the coordinator has not finished owns the limiter
        acc = self._acc()
        d = [acc[i] - self._lim_acc[i] for i in range(6)]
        # the runtime also counts a scavenge assist as assist time (mgclimit.go,
        # gcCPULimiterState.update: limiterEventScavengeAssist falls through to
        # limiterEventMarkAssist); fed here, it held the limiter on longer where the twins' limiter
        # already turns on in about twice the lab's share of cycles (GOMAXPROCS 2, 16 MiB live), and
        # their throughput at GOMEMLIMIT near the live heap moved 5.7 -> 8.2 % from the lab
        # (docs/model-notes.md, session 76): left out until that is found
        was = self.limiter.enabled
        self.limiter.update(now - self._lim_t, d[PC_ASSIST], d[PC_IDLE] + d[PC_IDLEMARK],
                            self.phase == MARK if gc_on is None else gc_on, d[PC_PAUSE], self.gc_cycles, now)
        if was:
            self.limiter_enabled_ns += now - self._lim_t
        elif self.limiter.enabled and self.phase == MARK:
            # running assists see the flag at their next object (after the current callback)
            self.engine.call_later(0, self._cut_assists)
        self._lim_t = now
        self._lim_acc = list(acc)

    def _sweepterm_end(self, t_stw0: int) -> None:
        """The coordinator has started the world (or runs again after the Ms it woke there took
        its CPU): the sweep-termination pause ends (``work.pauseNS``) and so does the limiter's
        transition (``finishGCTransition``: the whole span counts as GC time on every P)."""
        now = self.engine.now
        pause = now - t_stw0
        self.pauses_ns.append(pause)
        self.pause_end_ns.append(now)
        self._sweepterm_pause = pause
        self._lim_held = False
        self._limiter_transition_end()

    def _limiter_transition_end(self) -> None:
        """``finishGCTransition``: the stop-the-world counts as GC time on every P, in its own
        accumulation after the window the transition's start flushed (so a limiter a short
        mutator window has just turned off turns on again when the pause covers its headroom,
        and stays on across back-to-back cycles)."""
        now = self.engine.now
        if self.limiter.enabled:
            self.limiter_enabled_ns += now - self._lim_t
        self.limiter.accumulate(0.0, (now - self._lim_t) * self.nprocs, self.gc_cycles, now)
        self._lim_t = now
        self._lim_acc = list(self._acc())

    # ------------------------------------------------------------------ GC: cycle
    def _gc_start(self, m: _M | None, periodic: bool) -> int | None:
        self._cycle_start = (self.engine.now, self._heap_live_now(), self.trigger_bytes)   # gcStart: work.heap0
        self.periodic = periodic
        self._limiter_update(force=True, gc_on=False)   # startGCTransition: flush up to the stop
        self.phase = SWEEPTERM
        return self._stw_begin(m, self._gc_mark_begin)

    def _gc_mark_begin(self) -> None:
        p = self.params
        self.phase = MARK
        self.worker_counts = gcpacer.worker_counts(self.nprocs, self.periodic)
        self.mark_start = self.engine.now
        self.triggered = self.heap_live
        self._update_goal()     # startCycle's triggered enters heapGoal (minRunway)
        # gcStart's clearpools, with the world stopped: the primary caches become the victims the
        # cycle marks (pointer-free buffers: marked, not scanned)
        self._pool_marked = sum(pool.clear() for pool in self.pools)
        # pointer-free objects (a connection's byte buffers) are marked, never scanned
        self.scan_expected = self.base_live - self.noscan_live + p.roots_bytes
        # mark work: scanning (heap + roots) plus the per-cycle overheads (c0 + c1 P), in scan units
        overhead = (p.cycle_base_ns + p.cycle_per_p_ns * self.nprocs) * self.scan_rate
        self.mark_unclaimed = float(self.scan_expected) + overhead
        self.mark_total = self.mark_unclaimed
        self.scan_done = 0.0
        self.bg_credit = 0.0
        self.mark_inflight = 0
        self.assist_inflight = 0.0
        self.mark_draining = False
        self._claim_cap()
        self.ded_running = 0
        self.idlew_running = 0
        self.frac_ns = {}
        acc = self._acc()
        self.assist_pt0 = acc[PC_ASSIST]
        self.ded_pt0 = acc[PC_DED]
        self.idlemark_pt0 = acc[PC_IDLEMARK]
        self._revise()

    def _gc_mark_end(self) -> None:
        now = self.engine.now
        wall = now - self.mark_start
        alloc_during = self.heap_live - self.triggered
        acc = self._acc()
        cur = gcpacer.current_cons_mark(alloc_during, int(self.scan_expected),
                                        acc[PC_ASSIST] - self.assist_pt0,
                                        acc[PC_IDLEMARK] - self.idlemark_pt0, wall, self.nprocs)
        self.cons.update(cur)
        t_gc, heap0, trig = self._cycle_start
        # allocate-black: objects allocated during mark count as marked, beside the live heap and
        # the pooled objects the cycle's start handed to the victim caches
        marked = self.base_live + max(0, alloc_during) + self._pool_marked
        self.cycle_log.append((now, t_gc, self.mark_start, self._work_done_ns, heap0, trig, self.triggered,
                               self.heap_live, marked, self.goal,
                               acc[PC_ASSIST] - self.assist_pt0, acc[PC_DED] - self.ded_pt0,
                               acc[PC_IDLEMARK] - self.idlemark_pt0, self.nprocs, self.periodic, self.stw_t0))
        self._wake_all_assists()
        self.last_goal = self.goal          # endCycle: lastHeapGoal
        self.heap_marked = marked
        self.heap_live = self.heap_marked
        self._add_noscan_live(self._retained_in_mark)
        self._retained_in_mark = 0
        self.base_live += self._kept_in_mark
        self._kept_in_mark = 0
        # resetLive: heapScan and lastHeapScan become this cycle's heap scan work (objects allocated
        # black during the mark were not scanned, so the next cycle may scan more than expected)
        self.last_heap_scan = self.heap_scan = int(self.scan_expected) - self.params.roots_bytes
        self.mem.sweep(self.heap_marked)
        if p_sweep := self.params.sweep_ns_per_page:
            # every P that allocates sweeps (_sweep_take), as many at once as there are CPUs to run
            # them, and each span a CPU takes passes the sets' heads and counters to it from the
            # others (pprof on the lab VM: deductSweepCredit 4.9 -> 19.9 us a record from one P to two)
            at_once = min(self.nprocs, self.cpus)
            self.sweep_left = (self.mem.last_inuse / SWEEP_PAGE * p_sweep
                               * (1.0 + self.params.sweep_contention * (at_once - 1)))
            self.sweep_share = self.sweep_left / max(1, self.nprocs)
        self.phase = OFF
        self.gc_cycles += 1
        self.gc_forced += int(self.periodic)
        self.last_gc_end = now
        self._commit()

    def _frac_run_ns(self, m: _M) -> float | None:
        return gcpacer.fractional_run_ns(self.worker_counts.fractional_goal, self.frac_ns.get(m.p, 0.0),
                                         self.engine.now - self.mark_start)

    def _gc_worker(self, m: _M, extra: float = 0) -> int | None:
        """``findRunnableGCWorker``: a dedicated worker if one is still needed, else a fractional
        one if this P is behind its share. It first updates the GC CPU limiter if its last update
        is more than ``gcCPULimiterUpdatePeriod`` old: with the limiter on no assist runs (and
        none updates it), so this is where a limiter left on by a burst of assists turns off."""
        if self.params.gc_cpu_limiter:
            self._limiter_update()
        if self.mark_unclaimed <= 0:
            return None
        if self.ded_running < self.worker_counts.dedicated:
            self.ded_running += 1
            w = self._mark_seg(m, DED, pre=extra)
            self._unspin(m)
            return w
        if self.worker_counts.fractional_goal > 0:
            x = self._frac_run_ns(m)
            if x is not None:
                x = max(x, DRAIN_CHECK_NS)
                w = self._mark_seg(m, FRAC, x, pre=extra)
                self._unspin(m)
                # the worker's exit reads the clock, not its CPU: see _frac_exit
                self.engine.call_later(int(x + extra), self._frac_exit, m, m.t_seg)
                return w
        return None

    def _frac_exit(self, m: _M, t_seg: int) -> None:
        """``pollFractionalWorkerExit`` (``src/runtime/mgc.go``): a fractional worker stops once
        its share of the mark's wall time (``nanotime``) passes 1.2 x its goal. Its segment is
        planned as that much CPU, which a thread sharing its CPU or throttled by the quota burns
        over more wall time, so the share is checked again when that wall time has passed; a
        thread the quota froze polls when it runs again."""
        if (self.dead or self.stw or self.phase != MARK or m.seg != FRAC or m.t_seg != t_seg
                or not self.engine.is_runnable(m.tid)):
            return
        if self.engine.is_throttled(m.tid):
            self.engine.call_later(self._throttled_wait(), self._frac_exit, m, t_seg)
            return
        self._stop_mark_seg(m)
        self._go_on(m)

    def _stop_mark_seg(self, m: _M) -> float:
        """Stop ``m``'s mark segment now, as if it had ended there: the scan work it has not done
        goes back to the pool (returned)."""
        left = self.engine.stop(m.tid)
        rest = self._scan_left(m, left)
        m.mark_bytes -= rest
        self.mark_unclaimed += rest
        m.work -= left
        m.pre = min(m.pre, m.work)
        return rest

    def _go_on(self, m: _M) -> None:
        """``m`` picks what it runs next after a segment stopped from outside its own end."""
        w = self._on_done(m.tid)
        if w:
            self.engine.run(m.tid, w, self._on_done)

    def gc_cycle_running(self) -> bool:
        """Whether a GC cycle is under way (from the sweep termination to the mark termination):
        every ``schedule`` may hand the P to a mark worker and every allocation may owe an assist,
        so a source runs one goroutine a chunk meanwhile."""
        return self.phase != OFF

    def _unspin(self, m: _M) -> None:
        if m.spinning:
            m.spinning = False
            self.nmspinning -= 1
            if self.nmspinning == 0:
                self.wakep()

    def _mark_seg(self, m: _M, seg: int, max_ns: float = FORCE_PREEMPT_NS, pre: float = 0) -> int:
        rate = self.scan_rate
        # the mark work is shared through work buffers among every worker that can run: the
        # running ones, and idle Ps about to start idle workers
        workers = max(1, min(self.nprocs, self.ded_running + self.idlew_running
                             + min(len(self.free_ps), self.worker_counts.max_idle - self.idlew_running) + 1))
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
        rest = self._scan_left(m, left)
        self._mark_progress(m, m.mark_bytes - rest, body - min(left, body))
        self.mark_unclaimed += rest
        if m.owed is not None:
            # stopped by the mark's end: the assist is over, the goroutine allocates on
            c, t0, _ = m.owed
            m.owed = None
            self.source.done(c, t0, self.engine.now)

    @staticmethod
    def _scan_left(m: _M, left: int) -> float:
        """The scan work of ``m``'s mark segment not done when it stops with ``left`` ns of CPU to go."""
        body = m.work - m.pre
        return m.mark_bytes * min(1.0, left / body) if body > 0 else 0.0

    def _mark_progress(self, m: _M, scanned: float, ns: float) -> None:
        self.mark_inflight -= 1
        # what _flush_workers credited of this segment already
        scanned -= m.flushed
        m.flushed = 0.0
        self.scan_done += scanned
        seg = m.seg
        if seg == ASSIST:
            self.assist_inflight -= m.mark_bytes
            if m.owed is not None and m.owed[2] <= 0:
                c, t0, _ = m.owed
                m.owed = None
                self.source.done(c, t0, self.engine.now)
            return
        self.bg_credit += scanned
        if self.assistq:
            self._flush_bg_credit()
        if seg == FRAC:
            self.frac_ns[m.p] = self.frac_ns.get(m.p, 0.0) + (self.engine.now - m.t_seg)

    def _mark_done(self, m: _M) -> int | None:
        seg = m.seg
        owed = m.owed
        self._mark_progress(m, m.mark_bytes, m.work)
        m.mark_bytes = 0.0
        if seg == ASSIST and self.params.gc_cpu_limiter:
            # gcAssistAlloc1: an assist of more than gcAssistTimeSlack (5 us) updates the limiter
            self._limiter_update(force=True)
        # an assist that paid its goroutine's debt: the goroutine returns from mallocgc and
        # allocates on, on this P (no scheduling point)
        cont = seg == ASSIST and owed is not None and m.owed is None and self._continues(m, owed[0])
        if m.owed is not None and seg == ASSIST:
            # a pass of the assist left debt: the goroutine retries, unless the mark is over
            c, t0, rest = m.owed
            m.owed = None
            if self.phase == MARK and not (self.scan_done >= self.mark_total - 1.0):
                queued = len(self.assistq)
                w = self._assist_again(m, c, t0, rest)
                if w is not None:
                    return w
                parked = len(self.assistq) != queued
            else:
                self.source.done(c, t0, self.engine.now)
                parked = False
            # paid after a retry, or the mark is over: it allocates on unless it parked for credit
            cont = not parked and self._continues(m, c)
        # the mark is done when all its scan work is: work buffers are shared, so assists may
        # have done what in-flight workers hold (their rest is stopped by the STW)
        if self.phase == MARK and not self.mark_draining and (
                (self.mark_unclaimed <= 1e-6 and self.mark_inflight == 0)
                or self.scan_done >= self.mark_total - 1.0):
            if seg == DED:
                self.ded_running -= 1
            elif seg == IDLEW:
                self.idlew_running -= 1
            self._work_done_ns = self.engine.now
            barrier = self._ragged_barrier_ns(m)
            if barrier > 0 or self._throttled_holders(m):
                # gcMarkDone's forEachP: m sleeps holding its P until every P has flushed. The
                # runtime calls gcMarkDone once a worker's drain is timed (gcBgMarkWorker:
                # markWorkerStop, src/runtime/mgc.go) or an assist's (gcAssistAlloc1's duration,
                # mgcmark.go), so the wait is its P's user time in /cpu/classes (cpuStats.
                # accumulate: what no GC counter holds) and no assist for the GC CPU limiter
                self._pc_move(_SEG_PC_L[m.seg], PC_USER)
                m.seg = PARK
                self.m_sleeps_by[SL_RAGGED_BARRIER] += 1
                self.mark_draining = True
                self.engine.call_later(barrier, self._barrier_done, m)
                return None
            return self._mark_term_begin(m)
        if seg == DED:
            if self.mark_unclaimed > 0:
                return self._mark_seg(m, DED)
            self.ded_running -= 1
        elif seg == IDLEW:
            src = self.source
            if self.mark_unclaimed > 0 and not (src is not None and src.has_work()):
                return self._mark_seg(m, IDLEW)
            self.idlew_running -= 1
        return self._schedule(m, cont=cont)

    def _ragged_barrier_ns(self, coord: _M) -> int:
        """How long ``gcMarkDone``'s ragged barrier lasts (``src/runtime/mgc.go``: ``forEachP``
        flushes every P's write-barrier buffer and work cache before the mark-termination
        stop-the-world). Unlike a stop, the barrier does not stop the Ps that have flushed: they
        run on, so a P whose thread waits for a CPU behind others flushes only when the kernel
        runs it, after the threads ahead of it on that CPU have had their slices (EEVDF's base
        slice, 0.75 ms x (1 + log2(min(CPUs, 8))), ``kernel/sched/fair.c``
        ``sysctl_sched_base_slice`` and ``update_sysctl``). With ``k`` runnable threads a CPU
        (the process's other P-holding threads, plus other processes' tasks in the share
        ``background_cores / cpus``), the last of them waits for the turns ahead of it, which
        end at ticks (:func:`barrier_wait_ns`); with at most one a CPU, every P flushes at once
        (0). Meanwhile goroutines allocate on as far as their
        assist credit goes; one in debt finds no mark work left and waits (``gcAssistAlloc`` ->
        ``gcMarkDone``'s ``markDoneSema``, here the assist queue, woken at the mark's end)."""
        eng = self.engine
        running = sum(1 for m in self.holders if m is not coord and eng.is_runnable(m.tid))
        k = running / self.cpus + self.wake_busy
        return barrier_wait_ns(k, eng.now, eng.tick_ns, self.wake_slice_ns, int(self.params.preempt_ns))

    def _throttled_holders(self, coord: _M) -> dict[int, int]:
        """The threads other than ``coord``'s that hold a P and that the kernel has throttled, with
        their CPU time so far: they cannot run ``forEachP``'s flush (or reach any safe point)
        before the group's quota is refilled, so the barrier waits for them (:meth:`_barrier_done`)."""
        eng = self.engine
        return {m.tid: eng.thread_cpu_ns(m.tid) for m in self.holders
                if m is not coord and eng.is_throttled(m.tid)}

    def _barrier_done(self, m: _M, first: bool = True) -> None:
        """The ragged barrier's wait is over once each P's thread that was throttled when it
        came to an end has run again: ``forEachP`` runs the flush once on every P, so the mark
        phase (write barriers on, allocation black, assists with no work left waiting on the
        mark's end) lasts until the kernel runs each such thread, and the mark termination's
        stop-the-world starts only then (looked at each tick). A thread that ran, flushed and was
        throttled again does not hold the barrier: waiting on whichever holder is throttled at
        each tick could outlast a run whose quota throttles some CPU at nearly every tick."""
        if self.phase == MARK and not self.dead:
            eng = self.engine
            if first:
                self._barrier_wait = self._throttled_holders(m)
            else:
                held = {h.tid for h in self.holders}
                self._barrier_wait = {tid: cpu for tid, cpu in self._barrier_wait.items()
                                      if tid in held and eng.thread_cpu_ns(tid) <= cpu}
            if self._barrier_wait:
                eng.call_later(eng.tick_ns, self._barrier_done, m, False)
                return
        self._mark_term_begin(m)

    def _mark_term_begin(self, m: _M) -> int | None:
        """The ragged barrier is over: mark termination's stop-the-world, coordinated by ``m``."""
        self.mark_draining = False
        if self.phase != MARK or self.dead:
            return None
        self._limiter_update(force=True, gc_on=True)
        self.phase = MARKTERM
        return self._stw_begin(m, self._gc_mark_end)

    # ------------------------------------------------------------------ stop the world
    def _stw_begin(self, coord: _M | None, then) -> int | None:
        """Stop every P-holding M (each must burn ``gc_preempt`` CPU to reach a safe point, so a
        throttled M delays the stop); the coordinator burns the STW work; when all are stopped,
        ``then()`` runs and the world restarts. Returns the coordinator's CPU when it is the M
        whose callback is running."""
        now = self.engine.now
        # P-time while the world stops (the runtime's pause CPU, mgc.go: accumulateGCPauseTime of
        # stoppingCPUTime, then of GOMAXPROCS x the stopped time): a P counts as paused from the
        # moment it stops (idle Ps and the coordinator's at once, the others at their safe
        # point), every P once the world is stopped (_stw_check)
        self.stw = True
        self._stw_stopping = True
        if self.poll_m is not None and self.poll_m.p >= 0:
            # the woken poller will find no idle P when it runs: injectglist puts its batch
            # where every P looks once the world starts (one without a P does that when it runs)
            self.poll_m = None
            if self.source is not None:
                self.source.release_polled(-1)
        self._pc_stop(PC_IDLE, self.n_pc[PC_IDLE])
        self.stw_t0 = now
        self.stw_then = then
        self.stw_wait = 0
        self.stw_coord_done = False
        self.stw_coord_asleep = False
        self.stw_preempted = False
        work = max(1, int(self.params.stw_base_ns + self.params.stw_per_p_ns * self.nprocs))
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
            self.engine.call_later(0, self._stw_preempt)
        else:
            self._stw_preempt()
        # the M whose callback is running returns its segment; another one also burns its debt
        cur = coord is self._cur
        w = self._seg(coord, STWK, work if cur else work + coord.debt)
        if coord.p >= 0:
            self._pc_stop(_SEG_PC_L[STWK])   # the coordinator's own P is stopped at once
        if cur:
            return w
        coord.debt = 0
        self.engine.run(coord.tid, w, self._on_done)
        return None

    def _stw_preempt(self) -> None:
        eng = self.engine
        now = eng.now
        coord = self.stw_coord
        preempt = max(1, int(self.params.preempt_ns))
        for m in sorted(self.holders, key=lambda m: m.p):
            if m is coord or m.stopped:
                continue
            # a running or runnable M takes the request where it is (preemptone's signal, handled
            # when the kernel next runs it on its CPU), a blocked one is woken for it
            runnable = eng.is_runnable(m.tid)
            if runnable:
                left = eng.redirect(m.tid, preempt, self._on_done)
                self._charge(m, left)
                self._save_partial(m, left)
            if m.spinning:
                m.spinning = False
                self.nmspinning -= 1
            self._seg(m, ACK, preempt)
            m.t_seg = now
            self.stw_wait += 1
            if not runnable:
                eng.run(m.tid, preempt, self._on_done)
        self.stw_preempted = True
        # a P another M holds hears of the stop from preemptall's signal, and its M, once stopped,
        # wakes the coordinator asleep on sched.stopnote (stopTheWorldWithSema, gcstopm's
        # notewakeup): two hops between CPUs that host.stop_handshake_us prices, so the world is
        # stopped no sooner than that after the request, whenever another M holds a P
        self.stw_ready_ns = now + int(self.params.stop_handshake_ns) if self.stw_wait > 0 else 0
        if self.stw_wait > 0 and self.stw_coord_done and not self.stw_coord_asleep and coord is not None \
                and self.params.stw_restart_chain:
            # its work was done before the requests went out: it sleeps on sched.stopnote too
            self.stw_coord_asleep = True
            self._stw_sleep(coord, SL_STW_COORDINATOR)
        if self.stw_wait == 0 and self.stw_coord_done:
            # nobody to wait for and the coordinator already blocked: restart from here
            w = self._stw_check(coord)
            if w:
                self.engine.run(coord.tid, w, self._on_done)

    def _save_partial(self, m: _M, left: int) -> None:
        seg = m.seg
        if seg == USER:
            c = m.claim
            m.claim = None
            self.inflight_alloc -= c.alloc
            if m.sweep:
                # a stop finds the sweep this chunk began with counted as done: only the
                # goroutine's own work goes back to the queue
                self.sweep_inflight -= m.sweep
                m.sweep = 0.0
            left = min(int(left / m.infl), c.work)
            if left > 0 and c.work > 0:
                done_alloc = int(c.alloc * (1 - left / c.work))
                self.source.requeue(c, left, m.t_seg, self.engine.now)
                self.heap_live += done_alloc
                self.alloc_total += done_alloc
            else:
                self.source.done(c, m.t_seg, self.engine.now)
                self.heap_live += c.alloc
                self.alloc_total += c.alloc
        elif seg in _MARK_SEGS:
            self._mark_return(m, left)
            if seg == DED:
                self.ded_running -= 1
            elif seg == IDLEW:
                self.idlew_running -= 1

    def _stw_sleep(self, m: _M, cause: int) -> None:
        """An M blocks during a stop (``stopm`` at its safe point, ``cause`` SL_STW_STOPPED; the
        coordinator on ``sched.stopnote``, SL_STW_COORDINATOR): the park counts, and its CPU is
        owed until the M is woken."""
        self.m_parks += 1
        self.m_sleeps_by[cause] += 1
        m.debt += self.c_park + self._lock_ns()

    def _stw_check(self, cur: _M) -> int | None:
        if self.stw_wait > 0 or not self.stw_coord_done or not self.stw_preempted:
            return None  # cur stays stopped (blocked) holding its P
        coord = self.stw_coord
        pending = self.stw_ready_ns - self.engine.now
        if pending > 0 and coord is not None and not self.stw_coord_asleep:
            # every P is stopped, but the coordinator learns it only at the handshake's end: it
            # sleeps on sched.stopnote meanwhile (its CPU free) and goes on from there
            self.stw_coord_done = False
            self._stw_sleep(coord, SL_STW_COORDINATOR)
            self.engine.call_later(pending, self._stw_handshake_end, coord, self.stw_t0)
            return None
        if self.stw_coord_asleep and coord is not None and coord is not cur:
            # the last P to stop wakes the coordinator (gcstopm: notewakeup(&sched.stopnote));
            # the world is stopped once it has run its wake-up, and it starts the world again
            self.stw_coord_asleep = False
            self.stw_coord_done = False
            w = self._coord_woken(coord)
            delay = max(self.wake_latency_ns, pending)
            if delay > 0:
                self.engine.call_later(delay, self._run_coord, coord, w, coord.t_seg)
            else:
                self.engine.run(coord.tid, w, self._on_done)
            return None
        self.stw_coord_asleep = False
        # the world is stopped: every P's time is the pause's until the world starts
        self._stw_stopping = False
        self._integ_stw(begin=True)
        if self.stw_then is not None:
            self.stw_then()
        if self.pending_procs is not None:
            self._procresize(self.pending_procs)
            self.pending_procs = None
        return self._start_world(cur)

    def _stw_handshake_end(self, m: _M, t0: int) -> None:
        """The handshake of the stop begun at ``t0`` is over: the coordinator, woken, goes on."""
        if self.dead or not self.stw or self.stw_t0 != t0 or self.stw_coord is not m or self.engine.is_runnable(m.tid):
            return
        self.engine.run(m.tid, self._coord_woken(m), self._on_done)

    def _coord_woken(self, m: _M) -> int:
        """The coordinator woken from ``sched.stopnote``: its wake-up segment, which pays the
        wake-up's CPU and the park it owes."""
        self.m_wakes += 1
        w = self._seg(m, STWK, 0, self.c_wake + self._lock_ns() + m.debt)
        m.debt = 0
        return w

    def _run_coord(self, m: _M, w: int, t_seg: int) -> None:
        if self.dead or m.seg != STWK or m.t_seg != t_seg or self.engine.is_runnable(m.tid):
            return
        self.engine.run(m.tid, w, self._on_done)

    def _procresize(self, n: int) -> None:
        old = self.nprocs
        if n == old:
            return
        self.nprocs = n
        self._costs_for(n)
        if self.sysmon is not None:
            self.sysmon.run_ns = self.c_sysmon   # retake's pass over the Ps is part of each turn
        self.limiter.resize(n)
        self.gomaxprocs_changes.append((self.engine.now / 1e9, n))
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
        now = self.engine.now
        pause = now - self.stw_t0
        # go_gc_duration_seconds: one sample per GC cycle, the sum of its two STW pauses
        sweepterm = self.stw_then == self._gc_mark_begin
        # startTheWorldWithSema takes the pause's end (and gcStart's finishGCTransition its time)
        # only after it has woken the Ms of the Ps with work: a woken M that takes the
        # coordinator's CPU (host.wake_preempt_share) holds the sweep-termination pause open until
        # the coordinator runs again (the mark-termination pause ends before the world starts)
        defer = sweepterm and self.engine.wakes_preempting_enabled
        if sweepterm:
            if not defer:
                self._sweepterm_end(self.stw_t0)
        else:
            self.pauses_ns.append(pause)
            self.pause_end_ns.append(now)
            if self.stw_then == self._gc_mark_end:
                self.cycle_pause_ns.append((now, self._sweepterm_pause + pause))
                self.pclass_published.append((now, tuple(self._acc_published())))
                self._limiter_transition_end()
        self.stw = False
        self._stw_stopping = False
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
        # the goroutine whose allocation started the GC returns from gcStart and runs on (no
        # Gosched in the background mode); the Ps the stop preempted pass through schedule
        trig = cur.trig if sweepterm else None
        cur.trig = None
        ret = None
        src = self.source
        chain = self.params.stw_restart_chain
        for m in sorted(self.holders, key=lambda m: m.p):
            m.stopped = False
            if m.seg not in (ACK, STWK):
                continue
            if chain and m is not cur and m is not coord:
                # startTheWorldWithSema -> procresize: a P with nothing in its own queue goes
                # idle and its M sleeps on (what the stop preempted waits in the global queue,
                # gopreempt_m, for the spinning chain the wakep below starts); the M of a P with
                # local work is woken for it (notewakeup(&mp.park))
                if src is None or not src.has_local(m.p):
                    self._release_p(m)
                    m.seg = PARK
                    self.idle_ms.append(m)
                    continue
                self.m_wakes += 1
                self._woken_decides(m)
                continue
            w = self._schedule(m, cont=m is cur and trig is not None and self._continues(m, trig))
            if m is cur:
                ret = w
            elif w:
                # startTheWorldWithSema's notewakeup of the M of a P with work, by the coordinator
                self.engine.run(m.tid, w, self._on_done, self._waker(m))
        if cur.p < 0 and ret is None and cur not in self.idle_ms:
            cur.seg = PARK
            self.idle_ms.append(cur)
        end = functools.partial(self._sweepterm_end, self.stw_t0) if defer else None
        if defer:
            self._lim_held = True
        if self.phase == MARK and self.workers_at_start:
            self._assign_mark_workers(cur.tid, end)
            return ret
        if end is not None:
            self.engine.when_running(cur.tid, end)
        # the chain of wakeps fills idle Ps with dedicated/idle mark workers or goroutine work
        self.wakep()
        if self.phase == MARK:
            # startTheWorld's wakep and the spinning chain take idle Ps for the remaining
            # dedicated workers first (findRunnableGCWorker runs before anything else)
            while self.free_ps and self.ded_running < self.worker_counts.dedicated and self.mark_unclaimed > 0:
                self._startm(spinning=False)
        return ret

    def _assign_mark_workers(self, tid: int, end: Callable[[], None] | None) -> None:
        """Go 1.26 starts the world with the mark workers placed (golang/go#65694, CL 721002):
        ``procresize`` gives each idle P a waiting worker while the cycle wants one
        (``gcControllerState.assignWaitingGCWorker``, ``src/runtime/mgcpacer.go``: a dedicated
        worker while ``dedicatedMarkWorkersNeeded`` lasts, then, if the cycle has a fractional
        goal, a fractional one on every other idle P, none of them behind yet), and an M
        (``mget``); ``startTheWorldWithSema`` (``src/runtime/proc.go``) wakes those Ms one
        ``notewakeup`` after another and only then takes the pause's end time, and calls
        ``wakep`` after that. The wake-ups are made by thread ``tid`` in turn: a woken M that the
        kernel puts on its CPU and lets preempt it (``host.wake_preempt_share``) holds back the
        wake-ups still to make, and the pause (``end``), until the waker runs again -- so the
        sweep-termination pause grows with GOMAXPROCS by how often a woken worker takes the
        coordinator's CPU, and by how long it keeps it. Earlier runtimes started the workers
        through ``wakep``'s spinning chain, after the pause."""
        wc = self.worker_counts
        if self.mark_unclaimed <= 0:
            n = 0
        elif wc.fractional_goal > 0:
            n = len(self.free_ps)
        else:
            n = max(0, wc.dedicated - self.ded_running)
        self._await_restart(tid, n, end)

    def _await_restart(self, tid: int, n: int, end: Callable[[], None] | None) -> None:
        """:meth:`_restart_wakes` once thread ``tid`` runs. The engine calls back while it
        switches the thread in, so the wake-ups go on from a timer at that instant, once the
        engine's own step is over (as :meth:`_stw_preempt` does)."""
        eng = self.engine
        eng.when_running(tid, functools.partial(eng.call_later, 0, self._restart_wakes, tid, n, end, eng.now))

    def _restart_wakes(self, tid: int, n: int, end: Callable[[], None] | None, asked: int) -> None:
        """Thread ``tid`` runs (since time ``asked`` if it had to wait for its CPU): the next of
        the ``n`` wake-ups of :meth:`_assign_mark_workers`; after the last, the pause's end and
        ``wakep``. A waker that has just been switched back in runs its protected slice
        (``set_protect_slice``, ``RUN_TO_PARITY`` in ``kernel/sched/fair.c``): the Ms it wakes
        then do not take its CPU, and the rest of its wake-ups follow at once."""
        protected = self.engine.now > asked
        while n > 0 and self.free_ps and not self.stw and not self.dead:
            self._startm(spinning=False, waker=-1 if protected else tid)
            n -= 1
            if not protected:
                self._await_restart(tid, n, end)
                return
        if end is not None:
            end()
        self.wakep()

    # ------------------------------------------------------------------ timers
    def _forcegc(self) -> None:
        if self.dead:
            return
        due = self.last_gc_end + gcpacer.FORCEGC_PERIOD_NS
        now = self.engine.now
        if self.phase == OFF and not self.stw and self.params.gogc >= 0 and now >= due:
            self._gc_start(None, periodic=True)
            self.engine.call_later(gcpacer.FORCEGC_PERIOD_NS, self._forcegc)
        else:
            self.engine.call_at(max(due, now + 1_000_000), self._forcegc)

    def _sysmon_gomaxprocs(self) -> None:
        if self.dead:
            return
        now = self.engine.now
        # the limit in force now, as the runtime reads it from the cgroup: the engine's live
        # bandwidth (a resize may come from a schedule or from a VPA acting during the run)
        bw = getattr(self.engine, "bandwidth", False)
        if bw is False:
            lim = gmp.limit_at(now / 1e9, self.base_limit, self.limit_schedule)
        else:
            lim = None if bw is None else bw.cpu_limit_cores
        want = gmp.gomaxprocs_value(self.params.gomaxprocs, lim, self.cpus, self.params.version, self.params.round,
                                    self.period_us)
        if want != self.nprocs:
            if self.stw or self.phase != OFF:
                self.engine.call_later(10_000_000, self._sysmon_gomaxprocs)
                return
            self.pending_procs = want
            self._stw_begin(None, None)
        self.engine.call_later(gmp.SYSMON_UPDATE_NS, self._sysmon_gomaxprocs)

    def _cpu_now(self) -> dict[str, float]:
        """Real CPU per class including the part of every running segment burnt so far."""
        cpu = dict(zip(CPU_CLASSES, self.cpu_l))
        eng = self.engine
        for m in self.ms.values():
            if eng.is_runnable(m.tid):
                used = eng.thread_cpu_ns(m.tid) - m.charged
                if used > 0:
                    pre = min(used, m.pre)
                    cpu["sched"] += pre
                    cpu[_CPU_CLASS[m.seg]] += used - pre
        if self.sysmon is not None and eng.is_runnable(self.sm_tid):
            sm_used = eng.thread_cpu_ns(self.sm_tid) - self.sm_charged
            if sm_used > 0:
                cpu["sched"] += sm_used
        return cpu

    def _row(self) -> tuple:
        """A sample row (layout: :mod:`.run_accounting`)."""
        cpu = self._cpu_now()
        mem = self.mem
        usage = 0 if self.dead else kmem.usage_bytes(gmem.cgroup_anon_bytes(mem))
        return (self.engine.now, self.nprocs, *self._acc_published(), *(cpu[k] for k in CPU_CLASSES),
                self.gc_cycles, self.heap_live, self.goal, usage, max(usage, self.mem_hwm),
                0 if self.dead else gmem.rss_bytes(mem), self.alloc_total, self.heap_marked,
                self.m_wakes, self.m_parks, self.tlb_flushes, mem.paged_in_bytes // gmem.PAGE,
                self.sm_sleeps, self.sm_cpu, *self.m_sleeps_by)

    def _sample(self) -> None:
        if self.sysmon is not None:
            if len(self.free_ps) < self.nprocs:
                self._sysmon_polls(self.sysmon.advance(self.engine.now, busy=True))
            self._sysmon_flush()
        if not self.dead:
            # the background scavenger, paced over the sampling interval (mgcscavenge.go) at the
            # price of a page it last paid; what it releases is priced (and its TLB flushes
            # counted) at the process's next allocation (_charge_background_releases), or here
            # a sample later if the process has not allocated since
            if self._scav_pending:
                self._charge_background_releases()
            released = self.mem.scavenged_bytes
            self.mem.scavenge_background(self.sample_ns if self.samples else 0, self.nprocs,
                                         self.params.gomemlimit_bytes, self.goal, self.last_goal,
                                         self._release_ns_per_page(self._scav_others))
            self._scav_pending = self.mem.scavenged_bytes != released
        self._stretch_scavenge()
        row = self._row()
        self.samples.append(row)
        self.mem_hwm = row[C_USAGE]
        self.engine.call_later(self.sample_ns, self._sample)
