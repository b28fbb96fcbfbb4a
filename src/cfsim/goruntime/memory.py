"""The Go runtime's memory: heap spans, non-heap memory, the scavenger and GOMEMLIMIT policies,
as pure functions plus one small state object the runtime drives.

Sources (Go 1.26, ``src/runtime``):

* ``mgcpacer.go`` ``(*gcControllerState).memoryLimitHeapGoal``: the memory-limit heap goal is
  ``limit - (nonHeap + overage)`` minus 3 % headroom (at least 1 MiB), never below the marked
  heap, with ``nonHeap = mappedReady - heapFree - heapAlloc`` (free slots in in-use spans,
  stacks, span structs, GC metadata, profiling buckets...) and ``overage = mappedReady - limit``;
* ``mgcscavenge.go`` ``gcPaceScavenger``: the background scavenger returns free pages until
  ``heapInUse + heapFree <= 1.1 x lastHeapInUse x heapGoal / lastHeapGoal`` (no limit) or
  ``mappedReady <= 0.95 x limit``, paced to ``scavengePercent`` = 1 % of GOMAXPROCS x wall
  time of the work it measures (``scavengerState.run`` times each 64 KiB ``scavengeQuantum``;
  ``approxWorkedNSPerPhysicalPage``, 10 us a page, only stands in when the clock did not advance):
  here the CPU of releasing a page, with the TLB flushes of other CPUs running the process.
  The background scavenger skips "dense" chunks (``scavChunkData.shouldScavenge``: a 4 MiB
  chunk with >= 96.875 % of its pages in use now or at the last mark termination, when
  ``scavengeIndex.nextGen`` starts a generation); only the allocator's scavenging for the memory
  limit is forced past them;
* ``mheap.go`` ``(*mheap).allocSpan``: an allocation that would take ``mappedReady`` over the
  limit scavenges the excess at once (a scavenge assist), unless the GC CPU limiter is on; a
  heap growth beyond the retained goal scavenges the growth;
* ``mgcscavenge.go`` ``(*pageAlloc).scavengeOne``: each release is one ``sysUnused``
  (``madvise``) of one contiguous free run inside one 4 MiB chunk, at most the bytes asked for
  (the background scavenger asks a ``scavengeQuantum``, an assist the whole excess); the runs are
  cut where the Ps' page caches (``mpagecache.go``, 64 pages of 8 KiB, aligned) placed live spans;
* ``mgc.go`` ``gcMarkTermination``: ``lastHeapInUse`` is ``heapInUse`` at mark termination,
  before sweeping frees the garbage spans.

Model resolution: heap memory is counted in bytes, not spans; sweeping frees the garbage spans
at mark termination (the runtime sweeps concurrently before the next trigger); the bytes of
objects held in in-use spans are ``heapAlloc``, and in-use spans hold ``frag_fraction`` more
(free slots, the ``/memory/classes/heap/unused`` class). The runtime's own non-heap memory is
``base + metadata_fraction x heap mapped`` (span structs, heap arena metadata, GC bitmaps grow
with the heap; profiling buckets, the binary's data and runtime structures do not). Both
``base`` and the fractions are calibrated parameters (priors from ``runtime/metrics``
``/memory/classes`` of lab-like processes on this machine: 5 MiB + 2.7 % of the heap, 3 %
unused slots).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from cfsim.goruntime import gcpacer

MiB: Final = 1 << 20
PAGE: Final = 4096
SCAVENGE_PERCENT: Final = 1               # scavengePercent
RETAIN_EXTRA_PERCENT: Final = 10          # retainExtraPercent
REDUCE_EXTRA_PERCENT: Final = 5           # reduceExtraPercent
SCAVENGE_QUANTUM: Final = 64 << 10       # scavengeQuantum: the scavenger releases at most this much at a time
CHUNK: Final = 4 << 20                    # pallocChunkBytes: the page allocator's (and scavenger's) chunk
PAGE_CACHE_BLOCK: Final = 64 * 8192       # pageCachePages x pageSize: the aligned block a P's page cache takes
DENSE_FRACTION: Final = 0.96875           # scavChunkHiOccFrac: a chunk this full is "dense"

GOMEMLIMIT_POLICIES = ("explicit", "automemlimit")
AUTOMEMLIMIT_DEFAULT_RATIO: Final = 0.9   # github.com/KimMachineGun/automemlimit defaultAUTOMEMLIMIT


def gomemlimit_bytes(policy: str, explicit_mb: float | None, memory_limit_bytes: int | None,
                     ratio: float = AUTOMEMLIMIT_DEFAULT_RATIO) -> int | None:
    """GOMEMLIMIT a process starts with under a policy (None: no soft limit).

    * ``explicit``: the ``GOMEMLIMIT`` given (or none);
    * ``automemlimit``: ``github.com/KimMachineGun/automemlimit`` (``memlimit.SetGoMemLimitWithEnv``):
      ``int64(ratio x cgroup memory limit)`` read once at start-up, nothing without a cgroup
      limit, and an explicit ``GOMEMLIMIT`` wins ("If GOMEMLIMIT is already set ... this
      function does nothing").

    >>> gomemlimit_bytes("automemlimit", None, 512 * MiB) == int(0.9 * 512 * MiB)
    True
    >>> gomemlimit_bytes("automemlimit", None, None), gomemlimit_bytes("automemlimit", 100.0, 512 * MiB) == 100 * MiB
    (None, True)
    >>> gomemlimit_bytes("explicit", None, 512 * MiB)
    """
    if policy not in GOMEMLIMIT_POLICIES:
        raise ValueError(f"unknown GOMEMLIMIT policy {policy!r} (expected one of {GOMEMLIMIT_POLICIES})")
    if explicit_mb is not None:
        return int(explicit_mb * MiB)
    if policy == "automemlimit" and memory_limit_bytes is not None:
        if not 0 < ratio <= 1:
            raise ValueError(f"automemlimit ratio must be in (0, 1] (got {ratio})")
        return int(ratio * memory_limit_bytes)
    return None


@dataclass(frozen=True)
class MemoryParams:
    """Calibrated memory parameters (see the module docstring)."""

    base_bytes: int = 5 * MiB           # non-heap runtime memory that does not grow with the heap
    metadata_fraction: float = 0.027    # span structs, arena metadata, bitmaps per mapped heap byte
    frag_fraction: float = 0.03         # free slots in in-use spans per object byte
    stack_bytes: int = 0                # goroutine stacks (the workload's goroutines x their size)
    file_bytes: int = 5 * MiB           # the binary's resident file pages (RSS, not the cgroup's anon)


def non_heap_sys(heap_mapped: int, params: MemoryParams, stacks: int = 0) -> int:
    """The runtime's mapped memory outside heap spans: fixed part, metadata growing with the heap
    it describes, stacks (``/memory/classes`` minus ``heap/*``); ``stacks``: the stacks of
    goroutines the workload started since (its connections')."""
    return int(params.base_bytes + params.metadata_fraction * heap_mapped + params.stack_bytes + stacks)


def memory_limit_goal(limit: int | None, mapped_ready: int, heap_free: int, heap_alloc: int,
                      heap_marked: int) -> int | None:
    """``memoryLimitHeapGoal`` with the runtime's own inputs (None without a limit).

    >>> g = memory_limit_goal(100 * MiB, 80 * MiB, 0, 70 * MiB, 60 * MiB)
    >>> g == (100 * MiB - 10 * MiB) - (90 * MiB) // 100 * 3
    True
    >>> memory_limit_goal(100 * MiB, 130 * MiB, 0, 70 * MiB, 60 * MiB) == 60 * MiB   # overage
    True
    """
    if limit is None:
        return None
    non_heap = max(0, mapped_ready - heap_free - heap_alloc)
    overage = max(0, mapped_ready - limit)
    if non_heap + overage >= limit:
        return heap_marked
    goal = limit - (non_heap + overage)
    headroom = max(goal // 100 * gcpacer.MEMLIMIT_HEADROOM_PERCENT, gcpacer.MEMLIMIT_MIN_HEADROOM)
    if goal < headroom or goal - headroom < headroom:
        goal = headroom
    else:
        goal -= headroom
    return max(goal, heap_marked)


def scavenge_goals(limit: int | None, heap_goal: int, last_heap_goal: int, last_heap_inuse: int,
                   mapped_ready: int, heap_retained: int) -> tuple[int | None, int | None]:
    """``gcPaceScavenger``: (retained-heap goal, mappedReady goal); None where no scavenging is
    needed for that goal.

    >>> scavenge_goals(None, 200, 100, 100 * PAGE, 0, 300 * PAGE)[0] == 220 * PAGE
    True
    >>> scavenge_goals(1000 * PAGE, 0, 0, 0, 960 * PAGE, 0) == (None, 950 * PAGE)
    True
    """
    mem_goal = None
    if limit is not None:
        g = int(limit * (1 - REDUCE_EXTRA_PERCENT / 100.0))
        if mapped_ready > g:
            mem_goal = g
    if last_heap_goal <= 0:
        return None, mem_goal
    gc_goal = int(last_heap_inuse * (heap_goal / last_heap_goal))
    gc_goal += gc_goal // (100 // RETAIN_EXTRA_PERCENT)
    gc_goal = (gc_goal + PAGE - 1) // PAGE * PAGE
    if heap_retained <= gc_goal or heap_retained - gc_goal < PAGE:
        return None, mem_goal
    return gc_goal, mem_goal


def dense_bytes(inuse: int) -> int:
    """Heap bytes in chunks that ``inuse`` bytes of spans packed from the heap's start make dense
    (``scavChunkHiOccFrac``): the full chunks, and the last one if it is at least 96.875 % full.

    >>> dense_bytes(10 * MiB) == 8 * MiB, dense_bytes(int(11.9 * MiB)) == 12 * MiB
    (True, True)
    """
    full, rest = divmod(int(inuse), CHUNK)
    return (full + (rest >= DENSE_FRACTION * CHUNK)) * CHUNK


def scavenge_rate_bytes_per_s(gomaxprocs: int, ns_per_page: float) -> float:
    """The background scavenger's pace: 1 % of ``GOMAXPROCS`` x wall time of work at
    ``ns_per_page`` (what it measures releasing a 4 KiB page) per page.

    >>> scavenge_rate_bytes_per_s(2, 200.0) == 0.02 * 1e9 / 200 * 4096
    True
    """
    return SCAVENGE_PERCENT / 100.0 * gomaxprocs * 1e9 / max(ns_per_page, 1.0) * PAGE


class HeapMemory:
    """Heap spans of one process: ``inuse`` (spans holding objects, live or not yet swept),
    ``free`` (free spans still backed by memory), ``released`` (returned to the OS), with the
    non-heap memory derived from them. Bytes are ints.

    ``alloc`` is ``heapAlloc`` (object bytes in use, garbage included until swept).
    """

    __slots__ = ("params", "inuse", "free", "released", "alloc", "peak_mapped", "last_inuse", "dense",
                 "scavenged_bytes", "release_calls", "held_excess", "faulted_bytes", "grown_bytes",
                 "mapped_ready", "_frag1", "stacks")

    def __init__(self, params: MemoryParams, heap_alloc: int):
        self.params = params
        self._frag1 = 1.0 + params.frag_fraction
        self.alloc = int(heap_alloc)
        self.stacks = 0            # stacks of goroutines started during the run (add_stacks)
        self.inuse = self._spans_for(self.alloc)
        self.free = 0
        self.released = 0
        self.last_inuse = self.inuse
        self.dense = dense_bytes(self.inuse)
        self.mapped_ready = 0
        self._update()
        self.peak_mapped = self.mapped_ready
        self.scavenged_bytes = 0
        self.release_calls = 0     # madvise calls of those releases (each flushes other CPUs' TLBs once)
        self.held_excess = 0       # mappedReady over the limit that built up while the GC CPU limiter was on
        self.faulted_bytes = 0     # released memory the heap took back (page faults)
        self.grown_bytes = 0       # new heap memory (first-touch page faults)

    def _spans_for(self, alloc: int) -> int:
        return int(alloc * self._frag1)

    def _update(self) -> None:
        """``mappedReady``: everything the runtime has mapped and not released (kept current on
        every change, it is read at every allocation)."""
        self.mapped_ready = self.inuse + self.free + non_heap_sys(self.inuse + self.free + self.released, self.params,
                                                                 self.stacks)

    @property
    def heap_mapped(self) -> int:
        return self.inuse + self.free + self.released

    @property
    def paged_in_bytes(self) -> int:
        """Heap memory touched for the first time or again after a release: each page of it a
        minor page fault."""
        return self.faulted_bytes + self.grown_bytes

    @property
    def retained(self) -> int:
        """``heapRetained``: heap memory backed by RAM."""
        return self.inuse + self.free

    @property
    def non_heap(self) -> int:
        return non_heap_sys(self.heap_mapped, self.params, self.stacks)

    def add_stacks(self, nbytes: int) -> None:
        """Goroutine stacks allocated (``stackalloc``: from the stack pools or spans of their own,
        memory outside the heap objects that counts against a memory limit)."""
        self.stacks += int(nbytes)
        self._update()
        self.peak_mapped = max(self.peak_mapped, self.mapped_ready)

    def allocate(self, nbytes: int, limit: int | None, limiter_on: bool) -> int:
        """Objects of ``nbytes`` allocated: spans grow from free memory, then from released
        memory (page faults), then by mapping more. A growth beyond ``limit`` is scavenged
        back at once unless the GC CPU limiter is on (``allocSpan``). Returns the bytes
        scavenged synchronously."""
        self.alloc += nbytes
        spans = int(self.alloc * self._frag1)
        need = spans - self.inuse
        if need <= 0:
            return 0
        take = min(need, self.free)
        self.free -= take
        need -= take
        if need > 0:
            reuse = min(need, self.released)
            self.released -= reuse
            self.faulted_bytes += reuse
            need -= reuse
        if need > 0:
            # the heap grows (new mappings)
            self.grown_bytes += need
        self.inuse = spans
        self._update()
        scav = 0
        if limit is not None:
            over = self.mapped_ready - limit
            if limiter_on:
                self.held_excess = max(over, 0)
            else:
                if over > 0:
                    # the whole excess in one pass (pageAlloc.scavenge), one release (madvise)
                    # per contiguous free run of a chunk. What the allocation adds goes back as
                    # its spans are allocated (the runtime sweeps as it allocates, so the free
                    # pages are there): a span's worth a call, the scavenger's 64 KiB standing in
                    # for a span. What built up while the limiter was on goes back with the first
                    # span after it, a free run a call: spans under 16 pages come from a P's page
                    # cache, which takes the free pages of one aligned 512 KiB block at a time
                    # (mheap.allocSpan, pageAlloc.allocToCache), so with the Ps allocating side by
                    # side the runs their dead spans leave are cut at those blocks (docs/
                    # model-notes.md, "The excess the GC CPU limiter held").
                    held = min(self.held_excess, over)
                    if held > 0:
                        scav = self.scavenge(held, PAGE_CACHE_BLOCK)
                    if over > scav:
                        scav += self.scavenge(over - scav)
                self.held_excess = 0
        mr = self.mapped_ready
        if mr > self.peak_mapped:
            self.peak_mapped = mr
        return scav

    def sweep(self, heap_marked: int) -> None:
        """Mark termination and sweep: ``lastHeapInUse`` is taken before the garbage spans are
        freed; the objects left are the marked ones."""
        self.last_inuse = self.inuse
        self.dense = dense_bytes(self.inuse)
        self.alloc = int(heap_marked)
        spans = self._spans_for(self.alloc)
        if spans < self.inuse:
            self.free += self.inuse - spans
        self.inuse = max(spans, 0)
        self._update()

    def scavenge(self, nbytes: float, run_bytes: int = SCAVENGE_QUANTUM) -> int:
        """Return up to ``nbytes`` of free memory to the OS (whole pages), in ``madvise`` calls of
        at most ``run_bytes`` (``scavengeOne`` releases one contiguous free run of one chunk a
        call, at most the ``max`` it is asked for: the background scavenger's ``scavengeQuantum``)."""
        n = min(int(nbytes) // PAGE * PAGE, self.free // PAGE * PAGE)
        if n <= 0:
            return 0
        self.free -= n
        self.released += n
        self.scavenged_bytes += n
        self.release_calls += -(-n // run_bytes)
        self._update()
        return n

    def scavenge_background(self, dt_ns: float, gomaxprocs: int, limit: int | None, heap_goal: int,
                            last_heap_goal: int, ns_per_page: float) -> int:
        """The background scavenger over ``dt_ns`` of wall time: toward whichever goal of
        ``gcPaceScavenger`` is not met, at its 1 % pace of ``ns_per_page`` a page."""
        gc_goal, mem_goal = scavenge_goals(limit, heap_goal, last_heap_goal, self.last_inuse,
                                           self.mapped_ready, self.retained)
        want = 0
        if gc_goal is not None:
            want = max(want, self.retained - gc_goal)
        if mem_goal is not None:
            want = max(want, self.mapped_ready - mem_goal)
        # free pages in chunks dense now or at the last mark termination are skipped (the spans
        # in use are packed from the heap's start: the dense chunks are those they filled)
        want = min(want, self.retained - max(self.dense, dense_bytes(self.inuse)))
        if want <= 0:
            return 0
        budget = scavenge_rate_bytes_per_s(gomaxprocs, ns_per_page) * dt_ns / 1e9
        return self.scavenge(min(want, budget))


def rss_bytes(mem: HeapMemory) -> int:
    """Process RSS: the runtime's committed memory plus the binary's resident file pages."""
    return mem.mapped_ready + mem.params.file_bytes


def cgroup_anon_bytes(mem: HeapMemory) -> int:
    """What the process charges to its memory cgroup as anonymous memory: ``mappedReady`` (the
    binary's file pages are page cache, charged to whoever read them first)."""
    return mem.mapped_ready


def bytes_to_mb(n: float | None) -> float | None:
    return None if n is None or (isinstance(n, float) and math.isnan(n)) else n / MiB
