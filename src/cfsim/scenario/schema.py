"""The scenario contract: every section, key, default and allowed range.

Users, notebooks, the sweep and the tests rely on these names: add keys freely, rename none.
Each key is declared once here with its default and its check, so that a bad value fails
before anything runs, with a message that names the key and the allowed range.

Kernel limits come from ``kernel/sched/core.c`` ``tg_set_bandwidth`` (see
:mod:`cfsim.kernel.limits`): quota >= 1 ms, 1 ms <= period <= 1 s, 0 <= burst <= quota.
"""
from __future__ import annotations

import math

from dataclasses import dataclass
from typing import Any, Callable

from cfsim.autoscalers import vpa_admission, vpa_updater
from cfsim.kernel import limits
from cfsim.workloads.kinds import kind_names


class ScenarioError(ValueError):
    """A scenario value is invalid. The message names the key (``section.key``)."""

    def __init__(self, key: str, message: str):
        self.key = key
        self.reason = message
        super().__init__(f"{key}: {message}")

    def __reduce__(self):
        # rebuilt from its own arguments: an error raised in a sweep's or a search's worker process
        # reaches the parent whole (the default would call __init__ with the message alone)
        return type(self), (self.key, self.reason)


@dataclass(frozen=True)
class Key:
    """One scenario key: default, type and a range check returning an error text or None."""

    default: Any
    kind: str  # 'int' | 'float' | 'str' | 'bool' | 'any' | 'list'
    help: str
    check: Callable[[Any], str | None] | None = None
    choices: tuple[Any, ...] | None = None
    optional: bool = False  # None / absent allowed


def _ge(lo: float) -> Callable[[Any], str | None]:
    return lambda v: None if v >= lo else f"must be >= {lo} (got {v})"


def _gt(lo: float) -> Callable[[Any], str | None]:
    return lambda v: None if v > lo else f"must be > {lo} (got {v})"


def _between(lo: float, hi: float) -> Callable[[Any], str | None]:
    return lambda v: None if lo <= v <= hi else f"must be in [{lo}, {hi}] (got {v})"


def _godebug(v: Any) -> str | None:
    """GODEBUG's syntax: comma-separated ``name=value`` settings (runtime/debug's parser ignores
    anything else, so a typo would silently do nothing)."""
    if v == "":
        return None
    for item in str(v).split(","):
        name, eq, value = item.partition("=")
        if not eq or not name.strip() or not value.strip() or name != name.strip() or value != value.strip():
            return f"must be comma-separated name=value settings, e.g. 'asyncpreemptoff=1' (got {v!r})"
    return None


def _bucket_bounds(v: Any) -> str | None:
    from cfsim.monitoring.histogram import check_bucket_bounds

    return check_bucket_bounds(v) if isinstance(v, (list, tuple)) else f"must be a list of bounds [s] (got {v!r})"


def _gomaxprocs(v: Any) -> str | None:
    if isinstance(v, bool):
        return "must be 'host', 'automaxprocs', 'go1.25' or an integer >= 1"
    if isinstance(v, int):
        return None if v >= 1 else f"an explicit GOMAXPROCS must be >= 1 (got {v})"
    if v in ("host", "automaxprocs", "go1.25"):
        return None
    return f"must be 'host', 'automaxprocs', 'go1.25' or an integer >= 1 (got {v!r})"


def _rate(v: Any) -> str | None:
    # the one parser of arrival rates (imported here because it imports this module)
    from cfsim.workloads.arrivals import parse_rate

    try:
        parse_rate(v)
    except ScenarioError as exc:
        return exc.reason
    return None


def _limit_schedule(v: Any) -> str | None:
    if not isinstance(v, list):
        return "must be a list of [t_s, cpu_limit_cores] steps"
    last = -1.0
    for i, step in enumerate(v):
        if not (isinstance(step, list) and len(step) == 2):
            return f"step {i} must be [t_s, cpu_limit_cores] (got {step!r})"
        t, lim = step
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
            return f"step {i}: t_s must be a finite number (got {t!r})"
        if lim is not None and (isinstance(lim, bool) or not isinstance(lim, (int, float)) or not math.isfinite(lim)):
            return f"step {i}: cpu_limit_cores must be a finite number or empty (got {lim!r})"
        if t < 0 or t <= last:
            return f"step {i}: times must be >= 0 and increasing (got {t})"
        last = t
        if lim is not None and lim * 1e6 / 100000 < 0:
            return f"step {i}: cpu limit must be > 0 (got {lim})"
    return None


#: keys of earlier versions that scenario files may still carry (the lab's runs store their whole
#: scenario): read from a file and dropped; given as an override, an error that says why
RETIRED: dict[str, str] = {
    "go.scavenge_us_per_page": "retired: the background scavenger paces itself by the CPU it measures per "
                               "released page (go.page_release_us, plus host.tlb_shootdown_us while other CPUs "
                               "run the process), as mgcscavenge.go (scavengerState.run) does; its 10 us "
                               "(approxWorkedNSPerPhysicalPage) is only the fallback for a clock that did not advance",
}

SCHEMA: dict[str, dict[str, Key]] = {
    "host": {
        "cpus": Key(8, "int", "logical CPUs of the node", _between(1, 4096)),
        "hz": Key(1000, "int", "scheduler tick rate for runtime charging [1/s]", choices=(100, 250, 300, 1000)),
        "name": Key("node", "str", "a label for reports"),
        "background_cores": Key(0.0, "float", "CPU other processes take from the CPUs the group runs on "
                                "[cores, spread over the node] (shared hosts; lab twins)", _ge(0)),
        "cpu_sharing": Key("fluid", "str", "how a CPU runs several runnable threads: 'slices' = one at a time in "
                           "turns of the fair scheduler's base slice (kernel/sched/fair.c, EEVDF), 'fluid' = all at "
                           "once at a share each (processor sharing; the same CPU, no turns)",
                           choices=("fluid", "slices")),
        "context_switch_us": Key(0.0, "float", "CPU the kernel charges to a thread switched in after another "
                                 "thread on its CPU (cpu_sharing = 'slices') [us]; with thread_switch_us set, only "
                                 "after another process's task (a load generator's wake-up preempting the group)",
                                 _between(0, 1000)),
        "thread_switch_us": Key(None, "float", "CPU the kernel charges to a thread switched in straight after "
                                "another thread of its own process on its CPU (same address space; "
                                "cpu_sharing = 'slices') [us], with none charged after the CPU idled (the "
                                "wake-up prices that); absent = context_switch_us for every switch "
                                "(lab/cmd/switchbench, `cfsim lab switch`)", _between(0, 1000), optional=True),
        "wakeup_us": Key(0.0, "float", "CPU the kernel charges a thread for one sleep and wake-up (block, switch "
                                       "out, timer or wake-up, switch back in) [us], charged to a thread woken onto "
                                       "a CPU the group left idle (a parked Go M, a thread of kind=threads; "
                                       "sysmon's deep-sleep wake-up); a few us on bare metal, tens on a virtual "
                                       "machine (lab/cmd/wakebench, `cfsim lab wakeup`; cfsim.kernel.wakeup)",
                         _between(0, 10_000)),
        "wakeup_cold_us": Key(0.0, "float", "extra CPU of a wake-up onto a CPU idle for long (caches and TLBs "
                                            "refilled meanwhile) [us], approached as 1 - exp(-idle / wakeup_cold_ms)",
                              _between(0, 10_000)),
        "wakeup_cold_ms": Key(10.0, "float", "idle time over which a wake-up turns cold [ms]", _between(0.001, 10_000)),
        "resume_cold_us": Key(0.0, "float", "CPU a process pays when it resumes after idling (its caches, TLB and "
                                            "branch predictors refilled: the program runs slower) [us], approached as "
                                            "1 - exp(-idle / resume_cold_ms) with idle the time nothing of it ran; "
                                            "charged once per busy spell to the Go M that takes the first P "
                                            "(cfsim.kernel.resume; the lab's idle-cost grid measures it)",
                              _between(0, 100_000)),
        "resume_cold_ms": Key(1.0, "float", "idle time over which a process turns cold [ms]", _between(0.001, 10_000)),
        "wake_affine_share": Key(0.0, "float", "share of the wake-ups one of the process's running threads makes "
                                               "(a Go M waking another: futexwakeup) that the host's kernel puts on "
                                               "the waker's own CPU although another CPU would do (cpu_sharing = "
                                               "'slices'); 0 as mainline Linux places a wakee on an idle CPU that "
                                               "shares the cache (select_idle_sibling); the lab's VM packs about "
                                               "half of them (`cfsim lab wakeplace`)", _between(0, 1)),
        "wake_affine_share_away": Key(None, "float", "set: wake_affine_share is the share of wakees whose previous "
                                                       "CPU is the waker's that stay there although another CPU is "
                                                       "idle, and this the share of those last run on another CPU "
                                                       "that join the waker (the lab's VM: most stay where they last "
                                                       "ran; `cfsim lab wakeplace` from runs whose trace counted "
                                                       "both); unset: one share for both", _between(0, 1), optional=True),
        "wake_preempt_share": Key(0.0, "float", "share of those wake-ups on the waker's CPU that take the CPU from "
                                                "the waker at once (EEVDF wake-up preemption of a task no longer "
                                                "eligible, check_preempt_wakeup_fair in kernel/sched/fair.c) "
                                                "instead of waiting for its turn to end (`cfsim lab wakeplace`)",
                                  _between(0, 1)),
        "neighbour_wake_share": Key(0.0, "float", "share of the wake-ups of another process's task on the host "
                                                  "by the process's running thread (a server's response waking "
                                                  "a load generator: workload.client_cpu_us_per_request) that, "
                                                  "while a CPU is idle and that process runs nowhere, the kernel "
                                                  "puts on the waker's CPU and runs at once, the waker waiting "
                                                  "(cpu_sharing = 'slices'); 0: on the idle CPU. The lab's VM: "
                                                  "0.15-0.67 of such wake-ups go beside the waker, by workload "
                                                  "(docs/model-notes.md, 'The load generator beside a server "
                                                  "at GOMAXPROCS 1'); tried, not in the reference files",
                                    _between(0, 1)),
        "wakeup_latency_us": Key(0.0, "float", "time from a thread's wake-up (futex_wake, a network event) to the "
                                               "woken thread running on an idle CPU [us] (the inter-processor "
                                               "interrupt and the CPU's exit from idle; a few us on bare metal, "
                                               "more on a virtual machine; lab/cmd/wakebench): a woken Go M holds "
                                               "its P and counts as spinning meanwhile", _between(0, 100_000)),
        "stop_handshake_us": Key(0.0, "float", "how long a Go stop-the-world waits for a P that another M holds "
                                               "[us]: preemptall's signal reaching that M's CPU and, once it has "
                                               "stopped, its futex wake-up of the coordinator asleep on "
                                               "sched.stopnote (stopTheWorldWithSema, src/runtime/proc.go); the "
                                               "M's own path to its safe point is go.gc_preempt_us. A few us on "
                                               "bare metal (0: inside the pause's base), tens on a virtual "
                                               "machine (lab/cmd/stwbench, `cfsim lab stopping`)",
                                 _between(0, 100_000)),
        "timer_latency_us": Key(0.0, "float", "how late a sleeping thread's timer wakes it beyond its timer slack "
                                              "(50 us) [us]: sets how often Go's sysmon polls (lab/cmd/wakebench)",
                                _between(0, 100_000)),
        "tlb_shootdown_us": Key(0.0, "float", "CPU the process loses per flush of another CPU's TLB when it "
                                              "returns memory to the OS while its threads run there [us]: the "
                                              "releasing thread's wait for the inter-processor interrupt plus the "
                                              "interrupted thread's handling (x86 native_flush_tlb_multi; one flush "
                                              "per 64 KiB released and per other CPU running a thread of the "
                                              "process; a few us on bare metal, 17.6-19 on the lab's virtual "
                                              "machine, `cfsim lab tlb`)", _between(0, 100_000)),
    },
    "cgroup": {
        "cpu_limit": Key(None, "float", "CPU limit [cores]; absent = unlimited", _gt(0), optional=True),
        "period_us": Key(100_000, "int", "CFS period [us]",
                         _between(limits.MIN_PERIOD_US, limits.MAX_PERIOD_US)),
        "burst_us": Key(0, "int", "CFS burst [us]; 0 <= burst <= quota", _ge(0)),
        "kernel": Key("modern", "str", "bandwidth semantics",
                      choices=("modern", "legacy-expiry")),
        "slice_us": Key(limits.DEFAULT_SLICE_US, "int", "sched_cfs_bandwidth_slice_us [us]",
                        _between(1, 1_000_000)),
        "limit_schedule": Key(None, "list", "[[t_s, cpu_limit_cores], ...] quota changes during the run",
                              _limit_schedule, optional=True),
        # memory cgroup (Kubernetes resources.limits/requests.memory)
        "memory_limit_mb": Key(None, "float", "memory limit [MiB] (memory.limit_in_bytes / memory.max); absent = "
                                              "none. Anonymous memory over it is an OOM kill", _gt(0), optional=True),
        "memory_request_mb": Key(None, "float", "memory request [MiB] (scheduling and the VPA's starting point; "
                                                "no runtime effect)", _gt(0), optional=True),
    },
    "go": {
        "gomaxprocs": Key("host", "any", "'host' | 'automaxprocs' | 'go1.25' | integer", _gomaxprocs),
        "round": Key("floor", "str", "automaxprocs RoundQuotaFunc", choices=("floor", "ceil")),
        "version": Key("1.26", "str", "Go release semantics",
                       choices=("1.20", "1.21", "1.22", "1.23", "1.24", "1.25", "1.26")),
        "gogc": Key(100, "int", "GOGC percent; -1 = off", _ge(-1)),
        "gomemlimit_mb": Key(None, "float", "GOMEMLIMIT [MiB]; absent = none", _gt(0), optional=True),
        "gomemlimit_policy": Key("explicit", "str", "'explicit': GOMEMLIMIT = go.gomemlimit_mb (or none); "
                                                    "'automemlimit': ratio x the cgroup memory limit read once at "
                                                    "start-up (github.com/KimMachineGun/automemlimit), none without "
                                                    "a limit", choices=("explicit", "automemlimit")),
        "automemlimit_ratio": Key(0.9, "float", "automemlimit ratio of the memory limit (the library's default 0.9)",
                                  lambda v: None if 0 < v <= 1 else f"must be in (0, 1] (got {v})"),
        "live_heap_mb": Key(16.0, "float", "live (marked) heap [MiB]", _ge(0)),
        "heap_built_at_start": Key(False, "bool", "the live heap is allocated at the run's start by one "
                                                  "goroutine (as the lab's workload builds it before its load) "
                                                  "instead of being there already: the GC cycles of that build "
                                                  "measure a high cons/mark, which the pacer keeps for its next "
                                                  "four cycles (max of the last five, mgcpacer.go endCycle) and "
                                                  "which starts them at the trigger's lower bound; false: a "
                                                  "process in its steady state"),
        "heap_build": Key("beside-load", "str", "with heap_built_at_start, how the build meets the load: "
                                              "'beside-load' = one goroutine allocates the live heap at the "
                                              "allocator's price from t = 0 while the load runs; 'before-load' "
                                              "= as the lab's workload (buildLiveHeap, lab/cmd/workload/heap.go): "
                                              "a slice of one pointer an object first (1/9 of the heap), then the "
                                              "64-byte objects with nil pointers at the lab's measured pace (scanned "
                                              "without cache misses until linked), and the load only once the "
                                              "heap is built", choices=("beside-load", "before-load")),
        "gc_cpu_limiter": Key(True, "bool", "model the GC CPU limiter (Go >= 1.19)"),
        # the runtime's memory outside the live heap (cfsim.goruntime.memory; calibrated priors)
        "mem_base_mb": Key(5.0, "float", "runtime memory that does not grow with the heap [MiB] (profiling buckets, "
                                         "runtime structures; /memory/classes minus heap and metadata)",
                           _between(0, 1_000_000)),
        "mem_metadata_fraction": Key(0.027, "float", "runtime metadata per mapped heap byte (span structs, arena "
                                                     "metadata, GC bitmaps)", _between(0, 1)),
        "mem_frag_fraction": Key(0.03, "float", "free slots in in-use spans per object byte "
                                                "(/memory/classes/heap/unused)", _between(0, 10)),
        "mem_binary_mb": Key(5.0, "float", "the binary's resident file pages [MiB]: in process RSS, not in the "
                                           "cgroup's anonymous memory", _between(0, 100_000)),
        # the mutator's own CPU for memory (cfsim.goruntime.runtime: added to the workload's CPU, which
        # is the application's own work without the runtime's allocation path)
        "alloc_ns_per_kb": Key(165.0, "float", "mallocgc CPU per KiB allocated, charged to the allocating goroutine "
                                               "(allocation, zeroing, span refill and sweeping; 1 KiB objects, "
                                               "Go 1.26 on the lab host, lab/cmd/mallocbench: 0.17 us/KiB at best, "
                                               "0.17-0.35 with the host shared)",
                               _between(0, 100_000)),
        "sweep_ns_per_page": Key(0.0, "float", "CPU of sweeping one 8 KiB page of the heap in use, once a GC cycle "
                                               "(mgcsweep.go), done by the allocating goroutines before the next cycle "
                                               "may start (gcStart); 0: folded into alloc_ns_per_kb",
                                 _between(0, 100_000)),
        "sweep_contention": Key(0.0, "float", "extra sweeping CPU per page for each further CPU sweeping at once, "
                                              "as a fraction of sweep_ns_per_page (the unswept span sets' heads and "
                                              "the swept-page counters passed between CPUs; lab VM, perf in situ: "
                                              "0.64 ms a cycle at GOMAXPROCS 1, 2.0 at 2, i.e. 2.1)",
                                _between(0, 100)),
        "page_fault_us": Key(1.0, "float", "CPU of a page fault on a heap page the runtime grew or had released "
                                           "[us per 4 KiB page] (lab host, lab/cmd/faultbench: 1.5 us first touch, "
                                           "0.35 us after a release)", _between(0, 10_000)),
        "page_release_us": Key(0.14, "float", "CPU of returning a 4 KiB page to the OS (madvise in 64 KiB runs, "
                                              "lab host, lab/cmd/faultbench: 0.14-0.25 us); with host.tlb_shootdown_us "
                                              "it is what the background scavenger measures and paces at 1 % of "
                                              "GOMAXPROCS",
                               _between(0, 10_000)),
        "scavenge_page_us": Key(0.0, "float", "the runtime's own CPU for each 4 KiB page it gives back beyond the "
                                              "madvise (page_release_us): finding free runs and updating the page "
                                              "allocator's bitmaps under the heap lock (mgcscavenge.go, "
                                              "pageAlloc.scavengeOne); lab host, lab/cmd/scavbench (cfsim lab scav) [us]",
                                _between(0, 10_000)),
        # Runtime cost parameters (priors, their public anchors and calibration paths:
        # docs/model-notes.md, "Go runtime cost priors"). Priors, not fitted to any story.
        "roots_mb": Key(0.5, "float", "stacks + globals scanned each GC [MiB] (/gc/scan/stack + /gc/scan/globals)",
                        _between(0, 1_000_000)),
        "gc_scan_mb_per_ms": Key(1.0, "float", "mark scan rate per CPU [MiB/ms] (mgcmark.go: '1-2 MB/ms')",
                                 _between(0.01, 100)),
        "process_heap_mb": Key(0.5, "float", "the process's own live heap beyond live_heap_mb [MiB] (runtime, "
                                             "metrics registry, HTTP server; the lab workload: /gc/heap/live minus "
                                             "its live heap and the allocation during the mark, ~0.5 MiB)",
                               _between(0, 1_000_000)),
        "gc_parallel_cost": Key(0.0, "float", "extra mark CPU per byte the cache holds when the scan's lines come "
                                              "from other CPUs' caches (mark bits, work buffers, heap lines): x "
                                              "(1 + c x (1 - 1/n)) with n = min(GOMAXPROCS, CPUs) marking at once; "
                                              "0 = off (the lab host's fit on the GC's CPU a cycle, 0.49 x/÷ 1.10, is "
                                              "what the lab's twins take: docs/params/gc-parallel.toml)", _between(0, 10)),
        "gc_scan_miss_factor": Key(1.0, "float", "mark CPU per byte of a live heap far larger than the host's "
                                                 "last-level cache, relative to one that fits (pointer targets "
                                                 "missed in the cache: scan rate / (1 + (f - 1) x max(0, 1 - "
                                                 "host.llc_mb / live heap))); 1 = no cache effect",
                                   _between(1, 20)),
        "gc_stw_base_us": Key(10.0, "float", "CPU of one STW phase's own work [us] (gctrace: 7-250 us pauses)",
                              _between(0, 100_000)),
        "gc_stw_per_p_us": Key(1.0, "float", "extra STW work per P [us] (stop/start the world, forEachP)",
                               _between(0, 10_000)),
        "gc_cycle_base_us": Key(20.0, "float", "fixed mark-phase CPU per GC cycle beyond scanning [us] (root jobs)",
                                _between(0, 1_000_000)),
        "gc_cycle_per_p_us": Key(10.0, "float", "mark-phase CPU per P per GC cycle [us] (forEachP flushes, "
                                 "mcache flush, worker start/stop)", _between(0, 100_000)),
        "gc_preempt_us": Key(2.0, "float", "CPU for a running M to reach a safe point [us] (async preemption)",
                             _between(0, 10_000)),
        "revise_last_scan": Key(True, "bool", "the pacer expects the last cycle's scan work (lastHeapScan: "
                                              "revise's scanWorkExpected and commit's runway, "
                                              "src/runtime/mgcpacer.go), so a cycle that scans more than the "
                                              "one before (a heap still being built) extends its goal toward "
                                              "the scannable heap (extHeapGoal, up to the hard goal) and "
                                              "overshoots; off: a cycle paces on its own scan work, as if it "
                                              "knew it, and the runway scales the live heap (the rule before "
                                              "2026-12-07)"),
        "bg_credit_as_scanned": Key(False, "bool", "the background mark workers credit their scan work as "
                                                   "they scan (gcFlushBgCredit each gcCreditSlack, mgcmark.go), "
                                                   "so an allocating goroutine steals it before it assists; off "
                                                   "(default): a worker's segment is credited when it ends "
                                                   "(docs/model-notes.md, \"Who does the mark's work\"). "
                                                   "go.mark_work_shared implies it"),
        "mark_work_shared": Key(False, "bool", "mark work and its credit shared as the runtime shares them "
                                               "(gcWork.balance, mgcwork.go; gcFlushBgCredit, mgcmark.go): an "
                                               "assist that finds no unclaimed work takes the rest of the running "
                                               "background workers' claims, and the workers credit their scan work "
                                               "as they go, not when a segment ends. Off (default): an assist and "
                                               "a worker both scan a claim the worker holds, the rule the lab "
                                               "host's reference files were fitted with (docs/model-notes.md, "
                                               "'Mark work shared as the runtime shares it')"),
        "stw_restart_chain": Key(False, "bool", "stop and start the world as stopTheWorldWithSema and "
                                 "startTheWorldWithSema do: each stopped M sleeps (gcstopm), the coordinator "
                                 "sleeps on stopnote until the last stopper wakes it, and at the start a P "
                                 "with nothing in its own queue goes idle while the spinning chain wakes Ms "
                                 "one at a time for what the stop preempted (the global queue). Off: every "
                                 "stopped M goes on at once, unwoken (docs/model-notes.md, 'The world's "
                                 "restart as the runtime does it')"),
        "sched_spin_base_us": Key(3.0, "float", "fixed CPU of one futile findRunnable search [us]",
                                  _between(0, 1000)),
        "sched_spin_per_p_us": Key(0.05, "float", "CPU per P of one futile search (4 steal passes + re-scans; idle Ps "
                                                  "are skipped by idlepMask) on a small host [us] (fitted on the lab's "
                                                  "sched-overhead grids: 0.02-0.05; it grows with the host through "
                                                  "sched_xfer_growth)", _between(0, 100)),
        "sched_wake_us": Key(6.0, "float", "CPU of waking a parked M (futex wake + switch-in) [us] (fitted with "
                                           "sysmon_poll_us on the lab's profiles grid, open loop at GOMAXPROCS 1-32: "
                                           "4-8; ~2 on bare metal, apache/brpc#1859); with host.wakeup_us > 0 "
                                           "the sleeping M's side in the kernel is charged on top of it",
                          _between(0, 1000)),
        "sched_park_us": Key(3.0, "float", "CPU of parking an M (stopm, futex sleep, switch-out) [us]",
                             _between(0, 1000)),
        "sched_switch_us": Key(0.2, "float", "CPU of a goroutine switch on a running M [us]", _between(0, 1000)),
    },
    "workload": {
        "kind": Key("threads", "str", "workload model (cfsim.workloads)", choices=kind_names()),
        # threads
        "threads": Key(4, "int", "OS threads (kind=threads)", _between(1, 100_000)),
        "burn_ms": Key(10.0, "float", "CPU per burn [ms] (kind=threads)", _gt(0)),
        "sleep_ms": Key(0.0, "float", "sleep between burns [ms]; 0 = CPU-bound", _ge(0)),
        "jitter_ms": Key(0.0, "float", "uniform random phase jitter of each thread's start [ms]", _ge(0)),
        "sleep_dist": Key("fixed", "str", "each sleep lasts sleep_ms (fixed) or is drawn from an exponential "
                                          "distribution with mean sleep_ms (bursts at random times)",
                          choices=("fixed", "exponential")),
        # stream / single-thread (records) and open (requests): arrivals
        "rate_per_s": Key(1000.0, "any", "arrival rate [1/s]: a number, [[t_s, rate], ...] steps, "
                                         "'diurnal:<mean>:<amplitude>:<period_s>' or a CSV path (t_s,rate_per_s)",
                          _rate),
        "arrivals": Key("poisson", "str", "arrival process (kind=open)", choices=("poisson", "fixed")),
        # stream / single-thread: per-record work
        "workers": Key(8, "int", "worker goroutines taking records (kind=stream)", _between(1, 100_000)),
        "cpu_ms_per_item": Key(0.3, "float", "CPU per record [ms]", _gt(0)),
        "alloc_kb_per_item": Key(4.0, "float", "heap allocation per record [KiB]", _ge(0)),
        "initial_backlog": Key(0, "int", "records waiting at t=0", _ge(0)),
        "fetch_interval_ms": Key(20.0, "float", "consumer fetch cadence: records arriving in between are "
                                                "handed over together [ms] (kind=stream, single-thread)",
                                 _between(0.1, 10_000)),
        # closed / open: requests
        "clients": Key(2, "int", "closed-loop virtual users (kind=closed)", _between(1, 100_000)),
        "fanout": Key(1, "int", "goroutines per request, each doing cpu_ms_per_request/fanout",
                      _between(1, 10_000)),
        "cpu_ms_per_request": Key(10.0, "float", "CPU per request [ms]", _gt(0)),
        "alloc_kb_per_request": Key(16.0, "float", "heap allocation per request [KiB]", _ge(0)),
        "think_ms": Key(0.0, "float", "client think time between requests [ms] (kind=closed)", _ge(0)),
    },
    "run": {
        "duration_s": Key(10.0, "float", "simulated time [s]", _between(0.001, 30 * 86400)),
        "warmup_s": Key(0.0, "float", "time excluded from summaries [s]", _ge(0)),
        "seed": Key(0, "int", "random seed", _between(0, 2 ** 63 - 1)),   # numpy's SeedSequence takes any; a sweep's
        # derived seeds and Parquet's int64 columns do not
        "latency_buckets_s": Key(None, "list", "upper bounds [s] of a latency histogram (+Inf implied): when set, "
                                 "the summaries' latency p50/p99/p999 are read from it by PromQL's "
                                 "histogram_quantile, as a Prometheus dashboard (or the lab) reports them; "
                                 "unset: the exact quantiles of the simulated requests or records",
                                 _bucket_bounds, optional=True),
        "request_batching": Key(True, "bool", "while every P is busy and goroutines wait, a P runs the "
                                "goroutines of a request that ready each other into its runnext (read, "
                                "handler, response) as one chunk: the same results, statistically, with "
                                "fewer events; only with host.cpu_sharing = 'fluid' and no client on the "
                                "host; false: one goroutine per chunk"),
    },
    # --- [vpa] and [hpa]: owned by the autoscaler work (src/cfsim/autoscalers, engine/longrun.py) ---
    "vpa": {
        "enabled": Key(False, "bool", "run the VPA loop (long-horizon engine: cfsim trap / engine.longrun)"),
        "initial_request_cores": Key(0.5, "float", "pod template CPU request [cores]", _between(0.001, 4096)),
        "limit_to_request_ratio": Key(1.0, "float", "template limit / request; 0 (or absent) = no CPU limit",
                                      lambda v: None if v == 0 or 1.0 <= v <= 1000.0
                                      else f"must be 0 (no limit) or in [1.0, 1000.0] (got {v})", optional=True),
        "controlled_values": Key(vpa_admission.REQUESTS_AND_LIMITS, "str", "what VPA sets",
                                 choices=vpa_admission.CONTROLLED_VALUES),
        "update_mode": Key("Recreate", "str", "updatePolicy.updateMode", choices=vpa_updater.UPDATE_MODES),
        "integer_cpu": Key(False, "bool", "integer-CPU post-processor (flag + annotation): ceil to whole cores"),
        "round_cpu_millicores": Key(1, "int", "--round-cpu-millicores (1 = off)", _between(1, 1_000_000)),
        "min_allowed_cores": Key(None, "float", "resourcePolicy minAllowed cpu [cores]", _gt(0), optional=True),
        "max_allowed_cores": Key(None, "float", "resourcePolicy maxAllowed cpu [cores]", _gt(0), optional=True),
        "target_percentile": Key(0.9, "float", "--target-cpu-percentile", _between(0.0, 1.0)),
        "lower_percentile": Key(0.5, "float", "--recommendation-lower-bound-cpu-percentile", _between(0.0, 1.0)),
        "upper_percentile": Key(0.95, "float", "--recommendation-upper-bound-cpu-percentile", _between(0.0, 1.0)),
        "margin_fraction": Key(0.15, "float", "--recommendation-margin-fraction", _between(0.0, 10.0)),
        "pod_min_cpu_millicores": Key(25.0, "float", "--pod-recommendation-min-cpu-millicores", _ge(0)),
        "half_life_s": Key(86400.0, "float", "--cpu-histogram-decay-half-life [s]", _gt(0)),
        "confidence_interval_s": Key(86400.0, "float", "--confidence-interval-cpu [s]", _gt(0)),
        "sample_interval_s": Key(60.0, "float", "recommender loop (--recommender-interval) [s]", _between(0.01, 86400)),
        "updater_interval_s": Key(60.0, "float", "updater loop (--updater-interval) [s]", _between(0.01, 86400)),
        "metrics_window_s": Key(15.0, "float", "metrics-server --metric-resolution = usage window [s] (15 or 60)",
                                _between(0.01, 3600)),
        "eviction_lifetime_s": Key(43200.0, "float", "--in-recommendation-bounds-eviction-lifetime-threshold [s]",
                                   _ge(0)),
        "update_threshold": Key(0.1, "float", "--pod-update-threshold (relative change)", _between(0.0, 100.0)),
        "eviction_tolerance": Key(0.5, "float", "--eviction-tolerance", _between(0.0, 1.0)),
        "min_replicas": Key(2, "int", "--min-replicas / updatePolicy.minReplicas", _between(1, 100_000)),
        "replicas": Key(2, "int", "Deployment replicas (initial count when the HPA is on)", _between(1, 100_000)),
        "days": Key(None, "float", "simulated days (long-horizon engine); absent = run.duration_s",
                    _between(0.0001, 400.0), optional=True),
        "pod_startup_s": Key(10.0, "float", "pod re-creation to first record processed [s]", _between(0.0, 3600.0)),
        "step_s": Key(15.0, "float", "long-horizon engine step [s]; must divide metrics_window_s",
                      _between(0.001, 3600.0)),
        "report_interval_s": Key(1800.0, "float", "timeline row interval [s]", _gt(0)),
        "start_unix_s": Key(1767225600.0, "float", "wall-clock time of t=0 (histogram reference rounding)", _ge(0)),
        # the memory path (autoscalers/vpa_memory.py); the pod template's memory is cgroup.memory_request_mb /
        # cgroup.memory_limit_mb (request = limit when only the limit is given)
        "control_memory": Key(False, "bool", "the VPA also recommends and applies memory (controlledResources "
                                              "includes memory; the long-horizon engine then models the memory limit)"),
        "pod_min_memory_mb": Key(250.0, "float", "--pod-recommendation-min-memory-mb", _ge(0)),
        "min_allowed_memory_mb": Key(None, "float", "resourcePolicy minAllowed memory [MiB]", _gt(0), optional=True),
        "max_allowed_memory_mb": Key(None, "float", "resourcePolicy maxAllowed memory [MiB]", _gt(0), optional=True),
        "memory_interval_s": Key(86400.0, "float", "MemoryAggregationInterval: one peak per interval [s]", _gt(0)),
        "memory_half_life_s": Key(86400.0, "float", "--memory-histogram-decay-half-life [s]", _gt(0)),
        "oom_bump_up_ratio": Key(1.2, "float", "--oom-bump-up-ratio", _between(1.0, 100.0)),
        "oom_min_bump_up_mb": Key(100.0, "float", "--oom-min-bump-up-bytes [MiB]", _ge(0)),
    },
    "hpa": {
        "enabled": Key(False, "bool", "run the HPA loop (long-horizon engine)"),
        "target_utilization_pct": Key(80, "int", "CPU averageUtilization target [% of requests]",
                                      _between(1, 100_000)),
        "min_replicas": Key(1, "int", "minReplicas", _between(1, 100_000)),
        "max_replicas": Key(10, "int", "maxReplicas", _between(1, 100_000)),
        "tolerance": Key(0.1, "float", "--horizontal-pod-autoscaler-tolerance", _between(0.0, 10.0)),
        "sync_period_s": Key(15.0, "float", "--horizontal-pod-autoscaler-sync-period [s]", _between(0.01, 3600)),
        "behavior": Key(True, "bool", "spec.behavior set (API defaults) vs legacy normalisation"),
        "downscale_stabilization_s": Key(300.0, "float", "scaleDown stabilizationWindowSeconds [s]", _ge(0)),
        "upscale_stabilization_s": Key(0.0, "float", "scaleUp stabilizationWindowSeconds [s]", _ge(0)),
        "scale_up_pods": Key(4, "int", "scaleUp Pods policy value", _ge(0)),
        "scale_up_percent": Key(100, "int", "scaleUp Percent policy value", _ge(0)),
        "scale_down_percent": Key(100, "int", "scaleDown Percent policy value", _between(0, 100)),
        "policy_period_s": Key(15.0, "float", "periodSeconds of the scale policies [s]", _gt(0)),
        "select_policy": Key("Max", "str", "selectPolicy for both directions", choices=("Max", "Min", "Disabled")),
    },
    # --- end [vpa]/[hpa] ---
}


def register_section(name: str, keys: dict[str, Key]) -> None:
    """Add (or extend) a section: used by the Go model, workloads and autoscalers."""
    SCHEMA.setdefault(name, {}).update(keys)


# --- [lab]: owned by the ground-truth lab (src/cfsim/lab); ignored by the simulator ---
register_section("lab", {
    "scrape_interval_s": Key(1.0, "float", "Prometheus scrape interval [s]", _between(0.1, 60)),
    "step_s": Key(1.0, "float", "query_range step of the exports [s]", _between(0.1, 60)),
    "rate_window_s": Key(5.0, "float", "range of the exported rate() dashboard queries [s]", _between(1, 3600)),
    "cgroup_version": Key("auto", "str", "which cgroup interface to use", choices=("auto", "v1", "v2")),
    "quota_at": Key("start-up", "str", "when the initial quota is applied: before the workload starts "
                                       "(GOMAXPROCS policies see it) or just before the measured run "
                                       "(faster set-up; only for integer/host GOMAXPROCS)",
                    choices=("start-up", "run")),
    "ready_timeout_s": Key(180.0, "float", "max wait for heap build + calibration [s]", _between(1, 3600)),
    "cpu_shares": Key(None, "int", "cpu.shares of the run's cgroup (v2: converted to cpu.weight), like a "
                                   "Kubernetes CPU request x 1024; absent = kernel default (1024)",
                      _between(2, 262144), optional=True),
    "harness_shares": Key(None, "int", "cpu.shares of a quota-less cgroup for Prometheus and the load "
                                       "generator; absent = they stay in the caller's cgroup",
                          _between(2, 262144), optional=True),
    "profile_s": Key(0.0, "float", "pprof CPU profile of this many seconds inside the measured window "
                                    "(net/http/pprof), split into user / scheduler / GC CPU in the manifest; 0 = none",
                      _ge(0)),
    "trace_s": Key(0.0, "float", "Go execution trace (runtime/trace, net/http/pprof) of this many seconds in the "
                                  "measured window, summarised one row per GC mark in gc_marks.csv.gz "
                                  "and by the scheduler's counts (P starts, those that ran nothing, goroutines "
                                  "created and run, waits by reason) in the manifest's trace.sched, "
                                  "and each stop-the-world split into its stopping and its restart in "
                                  "trace.stw (cfsim.io.gotrace; the raw trace is not kept); 0 = none", _ge(0)),
    "sched_trace_s": Key(0.0, "float", "the kernel's scheduler trace (tracefs sched_waking and sched_switch on every "
                                        "CPU; root) of this many seconds in the measured window, counted into the "
                                        "manifest's wake_placement: where the kernel put the wake-ups the "
                                        "workload's running threads made of its other threads, and how often they "
                                        "took the waker's CPU at once (cfsim.lab.wakeplace, `cfsim lab "
                                        "wakeplace`); 0 = none", _ge(0)),
    "sleep_stacks_s": Key(0.0, "float", "every voluntary switch of the workload's threads (perf record of "
                                         "sched:sched_switch in state S, with call chains; root and perf) for this "
                                         "many seconds in the measured window, counted by the runtime function that "
                                         "slept (idle, stop-the-world, forEachP barriers, runtime locks, runqgrab's "
                                         "back-off, netpoll, sysmon) into the manifest's thread_sleeps "
                                         "(cfsim.lab.sleeps); 0 = none", _ge(0)),
    "memory_probe_rounds": Key(0, "int", "rounds of lab/cmd/faultbench (256 MiB faulted, released in 64 KiB "
                                          "runs, alone and with the other CPU busy) run just before the workload "
                                          "starts, in the manifest's host_memory_path: what a page fault, a "
                                          "release and a TLB shootdown cost on the host at that moment "
                                          "(cfsim.lab.tlb.measure_memory_path; a grid's calibration runs take 3), "
                                          "then as many rounds of lab/cmd/scavbench: the runtime's own "
                                          "give-back-and-fault-again cycle (cfsim.lab.scav.measure_page_cycle); "
                                          "0 = none", _between(0, 20)),
    "perf_s": Key(0.0, "float", "perf stat counters (context switches, migrations, page faults, signals) and a "
                                "perf record split by DSO (kernel share) and by stack (user / scheduler / GC, "
                                "each sample in perf_samples.csv.gz) of this many seconds in the measured "
                                "window, in the manifest (cfsim.lab.perf); 0 = none", _ge(0)),
    "tenant_threads": Key(0, "int", "CPU-bound busy loops the lab runs beside the workload as another tenant "
                                    "of the host (one process each, in a cgroup of their own at cpu.shares "
                                    "1024 or in the root cgroup: lab.tenant_cgroup), from before the "
                                    "pre-run neighbour measurement to the end of the run; a twin knows them "
                                    "as it knows any tenant, from host_cpu.pre_run.tenants_cores and the "
                                    "pre-run window's runnable count; 0 = none",
                          _between(0, 64)),
    "tenant_cgroup": Key(True, "bool", "lab.tenant_threads run in a cgroup of their own (cpu.shares 1024: one "
                                       "weight however many of them are runnable); false: in the root cgroup, "
                                       "where each runnable busy loop weighs 1024 on its CPU's runqueue "
                                       "(kernel/sched/fair.c), as a host's cgroup-less processes do"),
    "quiet_host_cores": Key(None, "float", "wait, before the run starts anything, until the whole host's busy CPU "
                                           "(/proc/stat over 2 s) is at most this many cores, so other tenants "
                                           "do not take part in the measurement (cfsim.lab.quiet); absent = "
                                           "do not wait", _ge(0), optional=True),
    "quiet_host_steal_cores": Key(None, "float", "with lab.quiet_host_cores: wait also until a busy loop on every CPU "
                                                 "loses at most this many cores to the hypervisor (steal, /proc/stat) "
                                                 "over 1 s (a VM's stolen CPU is no tenant's, and an idle reading "
                                                 "cannot see it); absent = do not probe", _ge(0), optional=True),
    "steal_retries": Key(0, "int", "with lab.quiet_host_steal_cores: a grid runs a run again, up to this many "
                                   "times, when the hypervisor took more than that many cores during its window "
                                   "(host_cpu.steal_cores; steal comes and goes within a minute, so the probe "
                                   "before a run bounds only its start); grid.json lists each discarded try's "
                                   "steal; 0 = keep every run", _between(0, 20)),
    "quiet_host_timeout_s": Key(1800.0, "float", "give up waiting for a quiet host after this long: the run "
                                                 "fails and a grid's --resume redoes it [s]", _between(1, 86400)),
    "load_fraction": Key(None, "float", "open kinds: sets workload.rate_per_s = load_fraction x cgroup.cpu_limit / "
                                        "cpu_ms_per_request (the grid resolves it before the run)",
                         _gt(0), optional=True),
    "read_header_timeout_s": Key(30.0, "float", "the lab server's http.Server ReadHeaderTimeout (kind=closed, open): "
                                                "with one, net/http sets the connection's read deadline before "
                                                "each request (server.go, (*conn).serve), a runtime timer whose "
                                                "addition may wake the netpoller or an M (time.go, wakeNetPoller): "
                                                "measured 0.10 more Ms' sleeps a request at GOMAXPROCS 2 and 0.21 at "
                                                "8 (750/s, 1 core); the model has no such timer; 0 = none [s]",
                                 _between(0, 86400)),
    "godebug": Key("", "str", "extra GODEBUG settings for the workload (name=value[,...], e.g. "
                              "'asyncpreemptoff=1'), after the GOMAXPROCS policy's and the GC trace's",
                   _godebug),
    "gctrace": Key(False, "bool", "the runtime's per-cycle GC trace (GODEBUG gctrace=1,gcpacertrace=1) in "
                                  "logs/workload.log.gz, parsed into gc_cycles.csv.gz (cfsim.io.gctrace)"),
    "gctrace_scan": Key(False, "bool", "with lab.gctrace: gctrace=2, whose per-cycle 'scan: total' line splits "
                                       "the Green Tea GC's scan into dense spans (whole objects counted as scan "
                                       "work) and sparse ones (up to the last pointer), parsed into "
                                       "gc_cycles.csv.gz's scan_* columns (cfsim.io.gctrace)"),
    "vpa_in_the_loop": Key(False, "bool", "cfsim's own VPA ([vpa], one pod, in-place resizes) moves the "
                                          "real quota during the run, with the [vpa] time constants as given "
                                          "(scale them down so the trap forms in minutes)"),
})
# --- end [lab] ---


# --- runtime overheads (issue 14): scheduler costs that grow with the host, SMT, and the
# request path of a Go server (owned by the overheads work: goruntime/sched.py, workloads/) ---
register_section("go", {
    "sched_xfer_growth": Key(0.15, "float", "relative growth of a steal probe's cache-line transfer per doubling of "
                                            "the CPUs the Ms are spread over, min(GOMAXPROCS, host CPUs) "
                                            "(core-to-core latency ~40-50 ns on small hosts, 100-200 ns on large or "
                                            "two-socket ones) [1/doubling]", _between(0, 2)),
    "sched_lock_us": Key(1.0, "float", "sched.lock cost added to a scheduler slow path per other M in the scheduler "
                                       "at the same time (the spinning and searching Ms, and the parking and waking ones by "
                                       "Little's law; at most host CPUs - 1) [us]; 1: a small host's prior; golang/go#28808 "
                                       "(runtime.lock 23 % of CPU at 56 Ps on 56 CPUs) fits 3.5 (cfsim.overheads.public, "
                                       "notebook 09)", _between(0, 100)),
    "sysmon_poll_us": Key(5.0, "float", "CPU of one sysmon poll (usleep/nanosleep round trip, its timer interrupt and "
                                        "two context switches, retake) [us]; sysmon polls every 20 us + timer slack "
                                        "while any P is busy (src/runtime/proc.go: sysmon); 0 = not modelled (fitted "
                                        "with sched_wake_us on the lab's profiles grid: 4-6; a lab grid's calibration "
                                        "runs measure it, CPU per sleep of the sysmon thread: 6-15 us on the lab's VM); "
                                        "its whole cost, host.wakeup_* is charged only to sysmon's wake-up from its "
                                        "deep sleep",
                          _between(0, 1000)),
    "sysmon_wait_us": Key(0.0, "float", "how long sysmon's thread waits for a CPU after each usleep before it polls "
                                        "[us]: lengthens its poll interval (20 us + timer slack + host.timer_latency_us "
                                        "+ this); a lab grid's calibration runs measure it (schedstat's run-queue wait "
                                        "per switch-in of the sysmon thread: 22-52 us on the lab's 2-CPU VM)",
                          _between(0, 100_000)),
})
register_section("host", {
    "threads_per_core": Key(1, "int", "hardware threads per physical core (2 = SMT/hyper-threading): threads "
                                      "beyond one per core share a core", _between(1, 8)),
    "smt_slowdown": Key(0.6, "float", "extra CPU time a thread needs for the same work while a sibling hardware "
                                      "thread of its core runs another of the process's threads (0 = none, 1 = "
                                      "twice: the two share one core's units) [fraction]", _between(0, 3)),
    "llc_mb": Key(32.0, "float", "last-level cache the process's threads share [MiB] (the lab host: 32 MiB L3); "
                                 "a live heap beyond it marks slower (go.gc_scan_miss_factor)", _between(0.1, 100_000)),
})
register_section("workload", {
    "server_cpu_us_per_request": Key(40.0, "float", "CPU of serving one request outside the handler's own work: "
                                                    "socket reads and writes, HTTP parsing, netpoll (kernel + "
                                                    "runtime + net/http) [us] (kind=closed, open)", _between(0, 1e6)),
    "server_alloc_kb_per_request": Key(4.0, "float", "heap garbage of serving one request outside the handler "
                                                     "(request, headers, buffers) [KiB] (kind=closed, open); the "
                                                     "lab's net/http server: 1.7-2.0 KiB (its calibration runs; "
                                                     "validation gives each grid's twins its own)", _ge(0)),
    "client_rtt_ms": Key(0.0, "float", "time a request spends outside the server process (network round trip and "
                                       "the client's own processing), added to the latency the client sees [ms]",
                         _ge(0)),
    "client_rtt_p99_ms": Key(0.0, "float", "99th percentile of that time [ms]: above client_rtt_ms, each request's "
                                           "time outside the process is drawn from a log-normal distribution with "
                                           "median client_rtt_ms and this 99th percentile (a load generator sharing "
                                           "the host is scheduled late now and then); 0 = every request the same",
                             _ge(0)),
    "client_send_late_ms": Key(0.0, "float", "how late an open-loop client's sending loop wakes for a request's "
                                             "due time, median [ms]: it sleeps until each request is due, wakes "
                                             "this late (log-normal up to client_send_late_p99_ms) and sends every "
                                             "request already due at once, so requests reach the service in "
                                             "bunches (lab/cmd/loadgen's open loop; kind=open); 0 = as scheduled",
                               _between(0, 60_000)),
    "client_send_late_p99_ms": Key(0.0, "float", "99th percentile of that lateness [ms]; 0 = always "
                                                 "client_send_late_ms", _between(0, 60_000)),
    "client_cpu_us_per_request": Key(0.0, "float", "CPU a client on the same host (a load generator) spends on "
                                                   "each response, outside the container, on the host's CPUs: it "
                                                   "preempts a thread of the process when they hold every CPU [us] "
                                                   "(kind=closed, open; needs host.cpu_sharing = 'slices'); 0 = the "
                                                   "clients run elsewhere", _between(0, 1e6)),
    "conn_heap_kb": Key(8.0, "float", "heap a server keeps for each open client connection while it stays "
                                      "open [KiB] (net/http server.go (*conn).serve: a 4 KiB bufio.Reader and a "
                                      "4 KiB bufio.Writer for the connection's life; kind=closed, open): live "
                                      "heap the GC marks every cycle", _ge(0)),
    "conn_stack_kb": Key(8.0, "float", "resident goroutine stack of each open client connection [KiB]: memory "
                                       "outside the heap (runtime/stack.go: 2 KiB at first, doubled on overflow; "
                                       "the net/http serve path takes it to 8). On the lab host the cgroup's memory "
                                       "grows 26 KiB per server goroutine: 16.6 through the heap goal (twice the "
                                       "8 KiB of buffers at GOGC 100) and ~9 beside it", _ge(0)),
    "client_max_conns": Key(1024, "int", "connections the clients keep open at most (kind=closed, open): a "
                                         "client opens a new one when a request finds all of its connections "
                                         "busy and keeps it (keep-alive), so the server holds as many as the "
                                         "peak of requests in flight; 0 = no cap (Go's http.Transport "
                                         "MaxConnsPerHost 0); the lab's load generator: 1024", _between(0, 10_000_000)),
    "cpu_cv": Key(0.0, "float", "coefficient of variation of the CPU of one request or record (gamma "
                                "distribution; 0 = every one costs the same)", _between(0, 10)),
    "cpu_drift_cv": Key(0.0, "float", "coefficient of variation of a factor common to every request's CPU that "
                                      "drifts with time (an Ornstein-Uhlenbeck process, cpu_drift_tau_s): the "
                                      "whole process running slower or faster for a while, as the lab's requests "
                                      "do (kind=closed, open; 0 = off)", _between(0, 1)),
    "cpu_drift_tau_s": Key(0.1, "float", "correlation time of that factor [s]", _between(0.001, 3600)),
    "http_background_read": Key(False, "bool", "each request also takes net/http's background-read path "
                                               "(server.go: startBackgroundRead before the handler, "
                                               "abortPendingRead after the response): one more goroutine "
                                               "created and two more readied a request, each a wakep "
                                               "that may wake an M while Ps are idle; its few us of CPU come "
                                               "out of server_cpu_us_per_request (kind=closed, open; the lab's "
                                               "server is net/http)"),
    "scrape_interval_s": Key(0.0, "float", "interval of a Prometheus scrape of the process's /metrics (a goroutine "
                                           "woken by the netpoller); 0 = not scraped [s]", _between(0, 86400)),
    "scrape_cpu_ms": Key(2.5, "float", "CPU of serving one /metrics scrape [ms] (client_golang with every "
                                       "runtime/metrics series: ~2.4 ms on the lab host)", _ge(0)),
    "scrape_alloc_kb": Key(400.0, "float", "heap garbage of one /metrics scrape [KiB]", _ge(0)),
    "scrape_pool_kb": Key(796.0, "float", "the buffer a /metrics scrape takes from a sync.Pool and puts back on its P "
                                          "[KiB]: client_golang's promhttp compresses each response with a pooled "
                                          "gzip.Writer (its compress/flate state, 814,699 bytes with Go 1.26) when the "
                                          "scraper asks for gzip, as Prometheus does; every P that served a scrape "
                                          "keeps one, so the heap the GC marks grows with GOMAXPROCS "
                                          "(cfsim.goruntime.syncpool); 0 = no pool (a scraper without gzip)", _ge(0)),
})
# --- end runtime overheads ---
