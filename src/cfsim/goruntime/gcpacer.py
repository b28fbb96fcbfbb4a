"""The Go GC pacer's rules, as pure functions (``src/runtime/mgcpacer.go``, ``mgclimit.go``).

Sources: golang/go ``mgcpacer.go`` (``startCycle``, ``revise``, ``endCycle``, ``commit``,
``trigger``, ``heapGoalInternal``, ``memoryLimitHeapGoal``) and ``mgclimit.go``,
https://github.com/golang/go/tree/master/src/runtime; "A Guide to the Go Garbage Collector",
https://go.dev/doc/gc-guide. Byte quantities are ints, times are ns.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

GC_BACKGROUND_UTILIZATION: Final = 0.25      # gcBackgroundUtilization == gcGoalUtilization
MAX_UTIL_ERROR: Final = 0.3                  # startCycle maxUtilError
FRACTIONAL_EXIT_SLACK: Final = 1.2           # pollFractionalWorkerExit: 1.2 x fractionalUtilizationGoal
TRIGGER_RATIO_DEN: Final = 64
MIN_TRIGGER_RATIO_NUM: Final = 45            # ~0.70
MAX_TRIGGER_RATIO_NUM: Final = 61            # ~0.95
DEFAULT_HEAP_MINIMUM: Final = 4 << 20        # defaultHeapMinimum (x GOGC/100)
GC_OVER_ASSIST_WORK: Final = 64 << 10        # gcOverAssistWork: minimum scan work per assist
#: heapGoalInternal's minRunway: during a cycle (outside the memory limit's regime) the goal is at
#: least the heap the cycle was triggered at plus this
MIN_RUNWAY: Final = 64 << 10
MAX_OVERSHOOT: Final = 1.1                   # revise: past the goal, extend it by 10 %
REVISE_GOGC_OFF: Final = 100_000             # revise: GOGC off (a forced or memory-limit cycle) acts as this
MEMLIMIT_HEADROOM_PERCENT: Final = 3         # memoryLimitHeapGoalHeadroomPercent
MEMLIMIT_MIN_HEADROOM: Final = 1 << 20       # memoryLimitMinHeapGoalHeadroom
FORCEGC_PERIOD_NS: Final = 120 * 10**9       # forcegcperiod (proc.go)
LIMITER_CAPACITY_PER_PROC_NS: Final = 10**9  # capacityPerProc
LIMITER_UPDATE_PERIOD_NS: Final = 10 * 10**6 # gcCPULimiterUpdatePeriod
CONS_MARK_HISTORY: Final = 4                 # lastConsMark [4]float64


@dataclass(frozen=True)
class WorkerCounts:
    dedicated: int
    fractional_goal: float   # per P
    max_idle: int


def worker_counts(procs: int, periodic: bool = False) -> WorkerCounts:
    """Dedicated / fractional mark workers and the idle-worker cap (``startCycle``, exact).

    >>> worker_counts(1), worker_counts(4).dedicated, worker_counts(32).dedicated
    (WorkerCounts(dedicated=0, fractional_goal=0.25, max_idle=1), 1, 8)
    >>> round(worker_counts(6).fractional_goal, 4), worker_counts(32).max_idle
    (0.0833, 24)
    >>> worker_counts(8, periodic=True).max_idle, worker_counts(2, periodic=True).max_idle
    (0, 1)
    """
    if procs < 1:
        raise ValueError("procs must be >= 1")
    total_goal = procs * GC_BACKGROUND_UTILIZATION
    dedicated = int(total_goal + 0.5)
    util_error = dedicated / total_goal - 1
    fractional = 0.0
    if util_error < -MAX_UTIL_ERROR or util_error > MAX_UTIL_ERROR:
        if dedicated > total_goal:
            dedicated -= 1
        fractional = (total_goal - dedicated) / procs
    if periodic:
        max_idle = 0 if dedicated > 0 else 1
    else:
        max_idle = procs - dedicated
    return WorkerCounts(dedicated, fractional, max_idle)


def fractional_run_ns(goal: float, self_ns: float, since_mark_start_ns: float) -> float | None:
    """How long a fractional worker scheduled now runs before ``pollFractionalWorkerExit``
    stops it (its share of the mark phase exceeds 1.2 x goal), or None if the P does not run one
    (``findRunnableGCWorker``: not when ``delta > 0 && self/delta > goal``).

    Solves ``(self + x) / (delta + x) = 1.2 goal`` for ``x``; the worker checks only every
    ``drainCheckThreshold`` of scanning, so callers run it at least that long.
    """
    if goal <= 0:
        return None
    delta = since_mark_start_ns
    if delta > 0 and self_ns / delta > goal:
        return None
    g = FRACTIONAL_EXIT_SLACK * goal
    x = (g * delta - self_ns) / (1.0 - g)
    return max(x, 0.0)


def gogc_heap_goal(heap_marked: int, stack_scan: int, globals_scan: int, gogc: int) -> int | None:
    """``commit``: ``heapMarked + (heapMarked + lastStackScan + globalsScan) * GOGC/100``, at least
    ``heapMinimum = 4 MiB * GOGC/100``; None when GOGC=off.

    >>> gogc_heap_goal(16 << 20, 0, 0, 100) == 32 << 20
    True
    >>> gogc_heap_goal(0, 0, 0, 100) == 4 << 20, gogc_heap_goal(1, 0, 0, -1)
    (True, None)
    """
    if gogc < 0:
        return None
    goal = heap_marked + (heap_marked + stack_scan + globals_scan) * gogc // 100
    heap_minimum = DEFAULT_HEAP_MINIMUM * gogc // 100
    return max(goal, heap_minimum)


def memory_limit_heap_goal(memory_limit: int | None, non_heap: int, heap_marked: int) -> int | None:
    """``memoryLimitHeapGoal``: the limit minus non-heap memory, minus headroom
    (3 % of the goal, at least 1 MiB), never below ``heapMarked``. None without a limit.

    ``non_heap`` stands for ``mappedReady - heapFree - heapAlloc`` (stacks, runtime metadata...).
    """
    if memory_limit is None:
        return None
    goal = memory_limit - non_heap
    if goal <= 0:
        return heap_marked
    headroom = max(goal // 100 * MEMLIMIT_HEADROOM_PERCENT, MEMLIMIT_MIN_HEADROOM)
    goal = goal - headroom if goal > headroom else 0
    return max(goal, heap_marked)


def heap_goal(heap_marked: int, stack_scan: int, globals_scan: int, gogc: int,
              memory_limit: int | None = None, non_heap: int = 0) -> int | None:
    """The smaller of the GOGC goal and the memory-limit goal (None: no GC at all)."""
    a = gogc_heap_goal(heap_marked, stack_scan, globals_scan, gogc)
    b = memory_limit_heap_goal(memory_limit, non_heap, heap_marked)
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def runway(cons_mark: float, last_heap_scan: int, stack_scan: int, globals_scan: int) -> int:
    """``commit``: ``uint64(consMark * (1-u)/u * (lastHeapScan + lastStackScan + globalsScan))``,
    u = 0.25, with Go's float-to-uint64 conversion on amd64: a negative cons/mark (a cycle whose
    measured utilization exceeded 100 %, see :func:`current_cons_mark`) wraps to a huge runway,
    so the trigger goes to its lower bound; infinities and values >= 2^63 give 2^63.

    >>> runway(1.0, 100, 0, 0), runway(-0.5, 100, 0, 0) > 1 << 62, runway(float("inf"), 1, 0, 0) == 1 << 63
    (300, True, True)
    """
    u = GC_BACKGROUND_UTILIZATION
    x = cons_mark * (1 - u) / u * (last_heap_scan + stack_scan + globals_scan)
    if x != x or x >= 2.0 ** 63 or x <= -(2.0 ** 63):
        return 1 << 63
    if x <= -1:
        return (1 << 64) + int(x)
    return max(0, int(x))


def trigger(goal: int, heap_marked: int, runway_bytes: int, min_trigger: int = 0) -> int:
    """``trigger()``: ``goal - runway`` clamped to ``[marked + 45/64 (goal-marked),
    max(marked + 61/64 (goal-marked), goal - 4 MiB)]``.

    >>> m, g = 16 << 20, 32 << 20
    >>> trigger(g, m, 0) == m + (g - m) // 64 * 61, trigger(g, m, 10**12) == m + (g - m) // 64 * 45
    (True, True)
    >>> trigger(1 << 30, 1 << 29, 0) == (1 << 30) - (4 << 20)
    True
    """
    if heap_marked >= goal:
        return goal
    min_trigger = max(min_trigger, heap_marked)
    lower = (goal - heap_marked) // TRIGGER_RATIO_DEN * MIN_TRIGGER_RATIO_NUM + heap_marked
    min_trigger = max(min_trigger, lower)
    max_trigger = (goal - heap_marked) // TRIGGER_RATIO_DEN * MAX_TRIGGER_RATIO_NUM + heap_marked
    if goal > DEFAULT_HEAP_MINIMUM and goal - DEFAULT_HEAP_MINIMUM > max_trigger:
        max_trigger = goal - DEFAULT_HEAP_MINIMUM
    max_trigger = max(max_trigger, min_trigger)
    t = min_trigger if runway_bytes > goal else goal - runway_bytes
    return min(max(t, min_trigger), max_trigger)


def assist_work_per_byte(heap_live: int, heap_goal_: int, triggered: int, scan_work_done: int,
                         scan_work_expected: int, max_scan_work: int, gogc: int) -> float:
    """``revise``: scan work still owed per byte of allocation left before the goal.

    Extrapolates the goal when scan work exceeds expectations (capped at the hard goal
    ``(1+GOGC/100) x goal``; with GOGC off the runtime takes GOGC as 100000 here, so the goal a
    memory limit set is not capped) and extends it by 10 % once the heap is past it.
    """
    goal = heap_goal_
    expected = scan_work_expected
    if scan_work_done > expected:
        ext = int((goal - triggered) / max(expected, 1) * max_scan_work) + triggered
        expected = max_scan_work
        hard = int((1.0 + (gogc if gogc >= 0 else REVISE_GOGC_OFF) / 100.0) * heap_goal_)
        goal = min(ext, hard)
    if heap_live > goal:
        goal = int(goal * MAX_OVERSHOOT)
        expected = max_scan_work
    remaining_work = max(expected - scan_work_done, 1000)
    remaining_heap = goal - heap_live
    if remaining_heap <= 0:
        remaining_heap = 1
    return remaining_work / remaining_heap


def current_cons_mark(heap_alloc_during_mark: int, scan_work: int, assist_ns: float,
                      idle_mark_ns: float, mark_wall_ns: float, procs: int) -> float | None:
    """``endCycle``'s cons/mark measurement (Go >= 1.21 pacer).

    Utilization assumes the background workers hit 25 % of ``procs x wall`` (the runtime does
    not see throttling, golang/go#19497) plus measured assists (nanotime-based, so throttled
    time inside an assist counts); idle marking counts for the scan side only. The runtime does
    not bound the utilization: above 100 % (assists longer than the mark's P-time, as under a
    quota) the value is negative and, through the max over the last cycles, ignored; at exactly
    100 % it is infinite. None when nothing was allocated during the mark (the runtime skips it).

    >>> round(current_cons_mark(10, 100, 0.0, 0.0, 1e6, 1), 4)
    0.0333
    >>> current_cons_mark(10, 100, 2e6, 0.0, 1e6, 1) < 0
    True
    """
    if heap_alloc_during_mark <= 0 or scan_work <= 0:
        return None
    util = GC_BACKGROUND_UTILIZATION
    idle_util = 0.0
    if mark_wall_ns > 0:
        util += assist_ns / (mark_wall_ns * procs)
        idle_util = idle_mark_ns / (mark_wall_ns * procs)
    if util == 1.0:
        return float("inf")
    return heap_alloc_during_mark * (util + idle_util) / (scan_work * (1 - util))


@dataclass
class ConsMarkEstimator:
    """``consMark`` = max(current, last 4 cycles' measurements)."""

    value: float = 0.0
    history: list[float] = field(default_factory=lambda: [0.0] * CONS_MARK_HISTORY)

    def update(self, current: float | None) -> float:
        if current is None:
            return self.value
        self.value = max([current, *self.history])
        self.history = self.history[1:] + [current]
        return self.value


@dataclass
class GcCpuLimiter:
    """The GC CPU limiter's leaky bucket (``mgclimit.go``): capacity ``procs x 1 s``; fills with
    GC time, drains with mutator time; ``limiting`` while full (assists are skipped).

    Per update window: ``gc = assist + 0.25 x total`` while the GC is on (STW transitions count
    ``procs x duration``); ``total -= idle`` (idle Ps and idle marking); ``mutator = total - gc``.
    """

    procs: int
    fill: float = 0.0
    enabled: bool = False
    overflow: float = 0.0
    last_enabled_cycle: int = 0
    #: every cycle the limiter turned on in (``numgc + 1`` at each turn-on, as ``lastEnabledCycle``
    #: stores it): the model's side of the lab's per-cycle reads (cfsim.io.gclimiter)
    turned_on_cycles: list[int] = field(default_factory=list)
    #: and when [ns] (the window check beside the lab's two reads of the runtime, ``gc_limiter_turned_on``)
    turned_on_ns: list[int] = field(default_factory=list)

    @property
    def capacity(self) -> float:
        return self.procs * LIMITER_CAPACITY_PER_PROC_NS

    def update(self, window_wall_ns: float, assist_ns: float, idle_ns: float, gc_on: bool,
               stw_ns: float = 0.0, cycle: int = 0, now_ns: int = 0) -> bool:
        total = window_wall_ns * self.procs
        gc = assist_ns + stw_ns
        if gc_on:
            gc += total * GC_BACKGROUND_UTILIZATION
        total -= idle_ns
        self.accumulate(total - gc, gc, cycle, now_ns)
        return self.enabled

    def accumulate(self, mutator_ns: float, gc_ns: float, cycle: int = 0, now_ns: int = 0) -> None:
        headroom = self.capacity - self.fill
        was = headroom <= 0
        change = gc_ns - mutator_ns
        if change > 0 and headroom <= change:
            self.overflow += change - headroom
            self.fill = self.capacity
            if not was:
                self.enabled = True
                self.last_enabled_cycle = cycle + 1
                self.turned_on_cycles.append(cycle + 1)
                self.turned_on_ns.append(now_ns)
            return
        if change < 0 and self.fill <= -change:
            self.fill = 0.0
        else:
            self.fill += change
        if change != 0 and was:
            self.enabled = False

    def resize(self, procs: int) -> None:
        self.procs = procs
        self.fill = min(self.fill, self.capacity)
