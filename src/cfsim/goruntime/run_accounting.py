"""Run accounting: turns a :class:`~cfsim.goruntime.runtime.GoRuntime`'s counters and samples
into the lab's summary keys (:meth:`RuntimeReports.summary`) and series
(:meth:`RuntimeReports.series`).

The runtime keeps the counters and appends one *sample row* every ``sample_ns``
(``GoRuntime._row``); this module owns that row's layout and reads it:

* ``row[0]``: time [ns], ``row[1]``: GOMAXPROCS;
* ``row[C_PTIME]``: cumulative P-time [ns] per ``/cpu/classes`` class (idle, user, dedicated
  marking, idle marking, assists, pause: ``PC_*`` order in :mod:`.runtime`; then scavenge
  assists and the background scavenger, taken out of user);
* ``row[C_CPU]``: cumulative real CPU [ns] per class (:data:`CPU_CLASSES` order);
* ``row[C_CYCLES:]``: GC cycles, live heap, heap goal, cgroup usage and its high-water mark
  since the previous sample, RSS, bytes allocated, marked heap, OS-thread wake-ups and parks,
  TLB flushes, page faults, sysmon's sleeps and CPU [ns];
* ``row[C_SLEEPS]``: the Ms' sleeps by cause (:data:`SLEEP_CAUSES` order).

:class:`RuntimeReports` is a mixin of ``GoRuntime``; it only reads the runtime's state.
"""
from __future__ import annotations

from bisect import bisect_right
from typing import Any

import numpy as np
import pandas as pd

from cfsim.goruntime.gc_cycles import cycle_keys
from cfsim.kernel import memory as kmem

# real-CPU classes (the runtime charges every segment's CPU to one of them)
CPU_CLASSES = ("user", "sched", "gc_assist", "gc_dedicated", "gc_idle", "gc_pause")
# sample row columns (see the module docstring and GoRuntime._row)
PTIME_CLASSES = ("idle", "user", "gc_mark_dedicated", "gc_mark_idle", "gc_mark_assist", "gc_pause",
                 "scavenge_assist", "scavenge_background")
C_PTIME = slice(2, 2 + len(PTIME_CLASSES))
C_CPU = slice(C_PTIME.stop, C_PTIME.stop + len(CPU_CLASSES))
(C_CYCLES, C_HEAP, C_GOAL, C_USAGE, C_USAGE_HWM, C_RSS, C_ALLOC, C_MARKED, C_MWAKES, C_MPARKS, C_TLB, C_FAULTS,
 C_SMSLEEPS, C_SMCPU) = range(C_CPU.stop, C_CPU.stop + 14)
#: the runtime paths that put an M to sleep which the model has, named as the lab's probe names
#: them (cfsim.lab.sleeps.CAUSES; the lab also has cache_flush, runtime_lock, steal_backoff and
#: sysmon's, which sysmon_sleeps_per_s counts): an idle M (stopm), the M that blocks in netpoll, an M
#: stopped for a stop-the-world and its coordinator (both with go.stw_restart_chain only), and the
#: coordinator of gcMarkDone's ragged barrier (one wait a barrier, where the runtime's sleeps 100
#: us at a time)
SLEEP_CAUSES = ("idle", "netpoll", "stw_stopped", "stw_coordinator", "ragged_barrier")
SL_IDLE, SL_NETPOLL, SL_STW_STOPPED, SL_STW_COORDINATOR, SL_RAGGED_BARRIER = range(len(SLEEP_CAUSES))
C_SLEEPS = slice(C_SMCPU + 1, C_SMCPU + 1 + len(SLEEP_CAUSES))


class RuntimeReports:
    """The reporting half of ``GoRuntime``: summary keys over a window, series, /cpu/classes totals."""

    def pclass_totals(self) -> dict[str, float]:
        """Cumulative ``/cpu/classes`` [cpu-seconds] in the runtime's P-time accounting."""
        return _pclasses(self._acc_published())

    def _published_ptime(self, t0_ns: int, t1_ns: int) -> tuple[list[int], float]:
        """The change of ``/cpu/classes`` P-time [ns] that readers at ``t0`` and at ``t1`` see, and
        the wall time [s] it covers. The runtime publishes these counters only at the end of each
        mark termination (``pclass_published``), so a window holds the whole cycles that ended in
        it, from the last publication before its start to the last before its end, not the wall
        time it spans: all zero where no cycle ended in it, as a lab run's counters stay flat then
        (with two or three cycles in a window the two spans differ by a large share)."""
        def seen(t: int) -> tuple[int, tuple[int, ...]]:
            i = bisect_right(self.pclass_published, t, key=lambda e: e[0])
            return self.pclass_published[i - 1] if i else (0, (0,) * (C_PTIME.stop - C_PTIME.start))
        (a_ns, a), (b_ns, b) = seen(t0_ns), seen(t1_ns)
        return [y - x for x, y in zip(a, b)], (b_ns - a_ns) / 1e9

    def summary(self, t0_ns: int, t1_ns: int) -> dict[str, Any]:
        """Runtime keys over ``(t0, t1]`` (the window starts at the last 100 ms sample at or
        before ``t0``; ``t1`` is now).

        * ``gc_cpu_fraction``: real CPU of the GC (mark workers of every kind, assists, STW work)
          over the process's real CPU; ``go_memstats_gc_cpu_fraction`` is the runtime's own
          ``MemStats.GCCPUFraction``-like view (GC minus idle marking over P-time);
        * ``sched_cpu_fraction``: real CPU of the scheduler's slow paths (spinning, wake, park,
          goroutine switches) over the process's real CPU;
        * ``go_cpu_classes_*_cpu_seconds_total``: ``/cpu/classes`` in P-time, as a reader sees
          them: published at mark terminations only, so over the whole cycles that ended in the
          window (``go_cpu_classes_span_s`` of wall time; :meth:`_published_ptime`);
          ``cpu_real_*_s``: the real CPU split over the window itself;
        * pause quantiles: each STW phase (sweep termination, mark termination, GOMAXPROCS change).
        """
        now_row = self._row()
        rows = [r for r in self.samples if r[0] <= t0_ns]
        start = rows[-1] if rows else self.samples[0]
        d = [b - a for a, b in zip(start, now_row)]
        published, published_s = self._published_ptime(t0_ns, now_row[0])
        pc = _pclasses(published)
        cpu = dict(zip(CPU_CLASSES, (x / 1e9 for x in d[C_CPU])))
        real_total = sum(cpu.values())
        span = (now_row[0] - start[0]) / 1e9 or 1.0
        ends = np.asarray(self.pause_end_ns, dtype=float)
        pauses = np.asarray(self.pauses_ns, dtype=float)[(ends > t0_ns) & (ends <= t1_ns)] / 1e9
        out: dict[str, Any] = {
            "gomaxprocs": int(self.nprocs),
            "go_sched_gomaxprocs_threads": int(self.nprocs),
            "gomaxprocs_changes": len(self.gomaxprocs_changes) - 1,
            "gc_cycles": int(d[C_CYCLES]),
            "gc_cycles_forced": int(self.gc_forced),
            "gc_pause_p50_s": float(np.percentile(pauses, 50)) if pauses.size else 0.0,
            "gc_pause_p99_s": float(np.percentile(pauses, 99)) if pauses.size else 0.0,
            "gc_pause_max_s": float(pauses.max()) if pauses.size else 0.0,
            **_gc_duration_quantiles(self.cycle_pause_ns, t0_ns, t1_ns),
            "gc_heap_goal_bytes": int(self.goal),
            "gc_limiter_enabled_s": self.limiter_enabled_ns / 1e9,
            # Ms woken (startm) and parked (stopm) per second: the voluntary context switches of
            # the process's threads (perf's context-switches also counts involuntary ones)
            "os_thread_wakes_per_s": d[C_MWAKES] / span,
            "os_thread_parks_per_s": d[C_MPARKS] / span,
            # sysmon's thread apart (the lab tells it by its many sleeps for little CPU): its sleeps
            # (each poll's usleep and each deep sleep it left) and its CPU
            "sysmon_sleeps_per_s": d[C_SMSLEEPS] / span,
            "sysmon_cpu_cores": d[C_SMCPU] / 1e9 / span,
            # TLB flushes of other CPUs by the process's releases of memory (host-wide in the lab:
            # the "TLB" row of /proc/interrupts)
            "tlb_flushes_per_s": d[C_TLB] / span,
            "page_faults_per_s": d[C_FAULTS] / span,
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
        # the Ms' sleeps by cause (the lab's manifest thread_sleeps.per_s, cfsim.lab.sleeps)
        for k, n in zip(SLEEP_CAUSES, d[C_SLEEPS]):
            out[f"os_thread_sleeps_{k}_per_s"] = n / span
        for k, v in pc.items():
            out["go_cpu_classes_" + k.replace("/", "_") + "_cpu_seconds_total"] = v
        out["go_cpu_classes_span_s"] = published_s
        out.update(self.gc_memory_summary(t0_ns, t1_ns, start, now_row))
        out.update(cycle_keys(self.gc_cycle_table(), t0_ns / 1e9, t1_ns / 1e9))
        return out

    def gc_memory_summary(self, t0_ns: int, t1_ns: int, start: tuple, now_row: tuple) -> dict[str, Any]:
        """The GC and memory keys of a lab summary, with the lab's meaning: the runtime's
        ``/gc/...`` metrics at the end of the window (goal, live heap, limiter, settings), their
        changes over it (cycles, allocation, pause time), and the memory cgroup's usage at the
        end and its high-water mark over the window; ``oom_kills`` counts the kernel's OOM kill
        (the process is gone afterwards)."""
        rows = [r for r in self.samples if t0_ns < r[0] <= t1_ns] + [now_row]
        goals = np.asarray([r[C_GOAL] for r in rows], dtype=float)
        hwm = max([r[C_USAGE_HWM] for r in rows] + [start[C_USAGE]])
        pause = sum(p for t, p in self.cycle_pause_ns if t0_ns < t <= t1_ns) / 1e9
        killed = self.oom_ns is not None and self.oom_ns <= t1_ns
        usage = now_row[C_USAGE]
        return {
            "gc_heap_goal_mean_bytes": float(goals.mean()) if goals.size else None,
            "gc_heap_live_bytes": int(self.heap_marked),
            "gc_pause_total_s": pause,
            "gc_limiter_last_enabled_cycle": int(self.limiter.last_enabled_cycle),
            # whether it turned on in the window (the lab reads it from the runtime at the two ends)
            "gc_limiter_turned_on": int(any(t0_ns < t <= t1_ns for t in self.limiter.turned_on_ns)),
            "gogc_percent": int(self.params.gogc),
            "gomemlimit_bytes": self.params.gomemlimit_bytes,
            "gc_alloc_bytes": int(now_row[C_ALLOC] - start[C_ALLOC]),
            "memory_limit_bytes": self.params.memory_limit_bytes,
            "memory_usage_bytes": int(usage),
            "memory_usage_mean_bytes": float(np.mean([r[C_USAGE] for r in rows])),
            "memory_max_usage_bytes": int(hwm),
            "memory_working_set_bytes": kmem.working_set_bytes(int(usage)),
            "process_rss_bytes": int(now_row[C_RSS]),
            # VmHWM: the peak since the process started (the usage high-water mark + its file pages)
            "process_rss_peak_bytes": int(max([r[C_USAGE_HWM] for r in self.samples if r[0] <= t1_ns]
                                              + [now_row[C_USAGE_HWM]]) + self.mem.params.file_bytes),
            "oom_kills": int(killed),
            "oom_time_s": self.oom_ns / 1e9 if killed else None,
            "heap_released_bytes": int(self.mem.released),
            # /memory/classes/total: everything mapped, released pages included
            "go_memory_total_bytes": int(self.mem.heap_mapped + self.mem.non_heap),
            "gc_scan_heap_bytes": int(self.base_live - self.noscan_live),
            "gc_scan_stack_bytes": None,   # stacks and globals are one parameter here (go.roots_mb)
            "gc_scan_globals_bytes": None,
        }

    def gc_cycle_table(self) -> pd.DataFrame:
        """One row a completed GC cycle, in the fields of the runtime's own trace
        (:mod:`cfsim.io.gctrace`, ``GODEBUG=gctrace=1,gcpacertrace=1``) so the two compare
        directly: ``run_t_s`` when the mark ended; ``sweepterm_ms`` from the trigger to the mark's
        start, ``mark_ms`` the concurrent mark, of which ``barrier_ms`` after its work was done
        (``gcMarkDone``'s ragged barrier and the mark-termination stop), ``markterm_ms`` that stop
        until the world was stopped (gctrace's third clock); ``trigger_bytes`` the
        pacer's trigger, ``heap0_bytes`` the heap when it was seen crossed (``gcStart``),
        ``triggered_bytes`` when the mark began (``startCycle``), ``heap_end_bytes`` when it ended
        (``endCycle``), ``marked_bytes`` the marked heap, ``goal_bytes`` the cycle's goal; assist /
        dedicated / idle mark P-time [ms] (gctrace's ``ms cpu``); ``limiter_turned_on`` 1 where the
        GC CPU limiter turned on in the cycle (from the previous cycle's end to its own)."""
        cols = ["run_t_s", "sweepterm_ms", "mark_ms", "barrier_ms", "trigger_bytes", "heap0_bytes", "triggered_bytes",
                "heap_end_bytes", "marked_bytes", "goal_bytes", "assist_cpu_ms", "background_cpu_ms", "idle_cpu_ms",
                "procs", "forced", "markterm_ms", "limiter_turned_on"]
        on = set(self.limiter.turned_on_cycles)
        # the log's n-th row is cycle n + 1: rows are appended as cycles end, numbered as numgc counts
        rows = [(t / 1e9, (tm - t0) / 1e6, (t - tm) / 1e6, (t - tw) / 1e6 if tw >= tm else 0.0, trig_at, h0, trig,
                 end, marked, goal, a / 1e6, d / 1e6, i / 1e6, procs, bool(forced), (t - stw0) / 1e6,
                 1.0 if n + 1 in on else 0.0)
                for n, (t, t0, tm, tw, h0, trig_at, trig, end, marked, goal, a, d, i, procs, forced, stw0)
                in enumerate(self.cycle_log)]
        return pd.DataFrame(rows, columns=cols)

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
        for i, n in enumerate(PTIME_CLASSES):
            cols[f"go_cpu_classes_{n}_cores"] = np.diff(arr[:, C_PTIME.start + i], prepend=np.nan) / 1e9 / dt
        for i, n in enumerate(CPU_CLASSES):
            cols[f"cpu_real_{n}_cores"] = np.diff(arr[:, C_CPU.start + i], prepend=np.nan) / 1e9 / dt
        cols["go_gc_cycles_total"] = arr[:, C_CYCLES].astype(int)
        cols["go_memstats_heap_alloc_bytes"] = arr[:, C_HEAP]
        cols["go_gc_heap_goal_bytes"] = arr[:, C_GOAL]
        cols["go_gc_heap_live_bytes"] = arr[:, C_MARKED]
        cols["container_memory_usage_bytes"] = arr[:, C_USAGE]
        cols["container_memory_working_set_bytes"] = arr[:, C_USAGE]
        cols["container_memory_max_usage_bytes"] = np.maximum.accumulate(arr[:, C_USAGE_HWM])
        cols["process_resident_memory_bytes"] = arr[:, C_RSS]
        cols["go_gc_heap_allocs_bytes_total"] = arr[:, C_ALLOC]
        return pd.DataFrame(cols)


#: the pauses the runtime keeps for ``debug.ReadGCStats``: ``memstats.pause_ns``'s ring (``src/runtime/mstats.go``)
PAUSE_HISTORY = 256


def _gc_duration_quantiles(cycles: list[tuple[int, int]], t0_ns: int, t1_ns: int) -> dict[str, float]:
    """``go_gc_duration_seconds`` (client_golang's Go collector: one sample a GC cycle, its two
    stops together) as a scrape at ``t1_ns`` reads it. Count and sum over the window (the
    counters' change, as the lab's summary reads ``_sum``); the quantiles as ``debug.ReadGCStats``
    computes them (``src/runtime/debug/garbage.go``): over the last 256 cycles the runtime keeps
    (``readGCStats_m``, ``src/runtime/mstats.go``), the window's and any before it (the heap's
    build, the warm-up), each the sorted pauses' element at ``n * i / 4`` and the longest for 1,
    not interpolated.

    >>> q = _gc_duration_quantiles([(1, 10), (2, 30), (3, 20), (4, 40)], 2, 4)
    >>> q["go_gc_duration_seconds_count"], round(q["go_gc_duration_seconds_q0.5"] * 1e9), round(q["go_gc_duration_seconds_q1"] * 1e9)
    (2, 30, 40)
    >>> round(q["go_gc_duration_seconds_q0"] * 1e9), round(q["go_gc_duration_seconds_q0.25"] * 1e9)
    (10, 20)
    """
    d = np.asarray([p for t, p in cycles if t0_ns < t <= t1_ns], dtype=float) / 1e9
    out = {"go_gc_duration_seconds_count": int(d.size), "go_gc_duration_seconds_sum": float(d.sum())}
    kept = sorted([p for t, p in cycles if t <= t1_ns][-PAUSE_HISTORY:])   # the ring: the newest 256
    n = len(kept)
    for i, name in enumerate(("0", "0.25", "0.5", "0.75")):
        out[f"go_gc_duration_seconds_q{name}"] = kept[n * i // 4] / 1e9 if n else 0.0
    out["go_gc_duration_seconds_q1"] = kept[-1] / 1e9 if n else 0.0
    return out


def _pclasses(acc) -> dict[str, float]:
    idle, user, ded, idlemark, assist, pause, scav_assist, scav_bg = (x / 1e9 for x in acc)
    gc = ded + idlemark + assist + pause
    scav = scav_assist + scav_bg
    total = idle + user + gc + scav
    return {"user": user, "gc/mark/assist": assist, "gc/mark/dedicated": ded, "gc/mark/idle": idlemark,
            "gc/pause": pause, "gc/total": gc, "idle": idle, "scavenge/assist": scav_assist,
            "scavenge/background": scav_bg, "scavenge/total": scav, "total": total}
