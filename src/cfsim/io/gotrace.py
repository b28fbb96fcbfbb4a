"""Go execution traces (``runtime/trace``), summarised one row per GC mark phase.

A trace shows what the runtime's counters average away: when, within a mark, the background
workers ran, which goroutines assisted, and how far the heap grew between assists. The lab records
one with ``lab.trace_s`` (``GET /debug/pprof/trace?seconds=N`` from ``net/http/pprof``). The trace
is decoded by the Go toolchain's own reader (``go tool trace -d=parsed``, the ``internal/trace``
package of ``src/cmd/trace``), whose text form has one event a line::

    M=31868 P=0 G=38 RangeBegin Time=32853340323648 Name="GC concurrent mark phase" Scope=None
    M=31868 P=0 G=31 Metric Time=... Name="/memory/classes/heap/objects:bytes" Value=Value{Uint64(45540000)}
    M=31868 P=0 G=31 RangeBegin Time=... Name="GC mark assist" Scope=Goroutine(31)
    M=31868 P=0 G=22 Label Time=... Label="GC (fractional)" Resource=Goroutine(22)
    M=31868 P=0 G=22 StateTransition Time=... GoID=22 Running->Waiting Reason="system goroutine wait"

Per mark (:func:`mark_table`): its wall time, the heap goal it ran against (the last
``/gc/heap/goal:bytes`` before it), the heap (``/memory/classes/heap/objects:bytes``) at its start,
end (as mark termination stops the world) and peak, the assists (``GC mark assist`` ranges), the background workers' running time by
mode (the ``GC (dedicated|fractional|idle)`` labels the runtime puts on a worker each time it starts
one, ``gcBgMarkWorker`` in ``src/runtime/mgc.go``), and the largest heap growth between two
consecutive assists: what a goroutine allocated on credit, without scanning.
"""
from __future__ import annotations

import gzip
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from cfsim.io.errors import CfsimParseError

_LINE = re.compile(r"^M=-?\d+ P=-?\d+ G=(-?\d+) (\w+) Time=(\d+)(.*)$")
_NAME = re.compile(r'Name="([^"]*)"')
_UINT = re.compile(r"Uint64\((\d+)\)")
_GOROUTINE = re.compile(r"Goroutine\((\d+)\)")
_LABEL = re.compile(r'Label="GC \((dedicated|fractional|idle)\)"')
_TRANSITION = re.compile(r"GoID=(\d+) (\w+)->(\w+)")

MARK_RANGE = "GC concurrent mark phase"
ASSIST_RANGE = "GC mark assist"
MARK_TERMINATION = "stop-the-world (GC mark termination)"
HEAP_GOAL = "/gc/heap/goal:bytes"
HEAP_OBJECTS = "/memory/classes/heap/objects:bytes"
WORKER_MODES = ("dedicated", "fractional", "idle")
COLUMNS = ("mark", "t_s", "wall_ms", "goal_bytes", "heap_start_bytes", "heap_end_bytes", "heap_max_bytes",
           "end_over_goal", "assists", "assist_ms", "assist_goroutines",
           *(f"{m}_worker_ms" for m in WORKER_MODES), *(f"{m}_worker_runs" for m in WORKER_MODES),
           "first_worker_ms", "unassisted_growth_bytes")


class _Mark:
    def __init__(self, t0: int, goal: int | None, heap: int):
        self.t0, self.goal, self.heap0, self.heap_max, self.heap = t0, goal, heap, heap, heap
        self.heap_end: int | None = None     # at the mark termination's stop-the-world
        self.assists, self.assist_ns, self.assist_gs = 0, 0, set()
        self.open_assists: dict[int, int] = {}
        self.worker_ns = dict.fromkeys(WORKER_MODES, 0)
        self.worker_runs = dict.fromkeys(WORKER_MODES, 0)
        self.first_worker: int | None = None
        # heap growth since the last assist ended (or the mark began): allocation on credit
        self.since_assist_base = heap
        self.unassisted = 0

    def heap_at(self, v: int) -> None:
        self.heap = v
        self.heap_max = max(self.heap_max, v)
        self.unassisted = max(self.unassisted, v - self.since_assist_base)

    def row(self, index: int, t1: int, origin: int) -> dict[str, Any]:
        wall = t1 - self.t0
        return {"mark": index, "t_s": (self.t0 - origin) / 1e9, "wall_ms": wall / 1e6, "goal_bytes": self.goal,
                "heap_start_bytes": self.heap0,
                "heap_end_bytes": self.heap if self.heap_end is None else self.heap_end, "heap_max_bytes": self.heap_max,
                "end_over_goal": (self.heap_max / self.goal - 1.0) if self.goal else None,
                "assists": self.assists, "assist_ms": self.assist_ns / 1e6, "assist_goroutines": len(self.assist_gs),
                **{f"{m}_worker_ms": self.worker_ns[m] / 1e6 for m in WORKER_MODES},
                **{f"{m}_worker_runs": self.worker_runs[m] for m in WORKER_MODES},
                "first_worker_ms": None if self.first_worker is None else (self.first_worker - self.t0) / 1e6,
                "unassisted_growth_bytes": self.unassisted}


def mark_table(lines: Iterable[str], source: str = "<buffer>") -> pd.DataFrame:
    """One row per GC mark phase that begins and ends inside the trace (columns :data:`COLUMNS`;
    times in ms from the mark's start, ``t_s`` from the trace's first event).

    ``lines``: the text of ``go tool trace -d=parsed`` (other lines, such as stack frames, are
    skipped). A mark still open when the trace ends, or one whose start the trace missed, is left
    out. Raises :class:`~cfsim.io.errors.CfsimParseError` (naming ``source`` and the line) for an
    event whose time runs backwards by more than a second.
    """
    rows: list[dict[str, Any]] = []
    origin: int | None = None
    goal: int | None = None
    heap = 0
    mark: _Mark | None = None
    workers: dict[int, tuple[str, int]] = {}    # goroutine -> (mode, running since)
    last_t = 0
    for lineno, line in enumerate(lines, 1):
        m = _LINE.match(line)
        if m is None:
            continue
        g, kind, t, rest = int(m[1]), m[2], int(m[3]), m[4]
        if origin is None:
            origin = t
        if t < last_t - 1_000_000_000:
            raise CfsimParseError(source, f"event time {t} runs backwards from {last_t}", line=lineno)
        last_t = max(last_t, t)
        if kind == "Metric":
            name = _NAME.search(rest)
            val = _UINT.search(rest)
            if name is None or val is None:
                continue
            if name[1] == HEAP_GOAL:
                goal = int(val[1])
            elif name[1] == HEAP_OBJECTS:
                heap = int(val[1])
                if mark is not None:
                    mark.heap_at(heap)
            continue
        if kind in ("RangeBegin", "RangeEnd"):
            name = _NAME.search(rest)
            if name is None:
                continue
            if name[1] == MARK_RANGE:
                if kind == "RangeBegin":
                    mark = _Mark(t, goal, heap)
                elif mark is not None:
                    # a worker still running when the mark ends (it found the last work and
                    # ended the mark itself) counts up to the end
                    for gid, (mode, t0) in list(workers.items()):
                        mark.worker_ns[mode] += t - max(t0, mark.t0)
                        workers[gid] = (mode, t)
                    rows.append(mark.row(len(rows), t, origin))
                    mark = None
            elif name[1] == MARK_TERMINATION and kind == "RangeBegin" and mark is not None:
                mark.heap_end = mark.heap
            elif name[1] == ASSIST_RANGE and mark is not None:
                gid = _GOROUTINE.search(rest)
                gid = int(gid[1]) if gid else g
                if kind == "RangeBegin":
                    mark.open_assists[gid] = t
                else:
                    t0 = mark.open_assists.pop(gid, None)
                    if t0 is not None:
                        mark.assists += 1
                        mark.assist_ns += t - t0
                        mark.assist_gs.add(gid)
                    mark.since_assist_base = mark.heap
            continue
        if kind == "Label":
            lab = _LABEL.search(rest)
            gid = _GOROUTINE.search(rest)
            if lab and gid:
                workers[int(gid[1])] = (lab[1], t)
                if mark is not None:
                    mark.worker_runs[lab[1]] += 1
                    if mark.first_worker is None:
                        mark.first_worker = t
            continue
        if kind == "StateTransition":
            tr = _TRANSITION.search(rest)
            if tr and tr[2] == "Running" and int(tr[1]) in workers:
                mode, t0 = workers.pop(int(tr[1]))
                if mark is not None:
                    mark.worker_ns[mode] += t - max(t0, mark.t0)
    return pd.DataFrame(rows, columns=list(COLUMNS))


_LINE_M = re.compile(r"^M=(-?\d+) P=(-?\d+) G=-?\d+ StateTransition Time=(\d+)(.*)$")
_PROC = re.compile(r"ProcID=(\d+) (\w+)->(\w+)")
_REASON = re.compile(r'Reason="([^"]*)"')


class SchedCounts:
    """What the scheduler did over a trace, counted from the same text as :func:`mark_table`:
    how often a P started running (``Idle->Running``: an M took it from the idle list, woken or
    not), how many of those runs ended with no goroutine run on it (an M that woke, searched and
    found nothing: ``findRunnable``'s futile spin in ``src/runtime/proc.go``), the goroutines
    created and run, and why goroutines stopped (``Running->Waiting`` by reason).

    >>> c = SchedCounts()
    >>> lines = ['M=1 P=-1 G=-1 StateTransition Time=1000 ProcID=0 Idle->Running Reason=""',
    ...          'M=1 P=0 G=-1 StateTransition Time=1100 GoID=7 Runnable->Running Reason=""',
    ...          'M=1 P=0 G=7 StateTransition Time=1200 GoID=7 Running->Waiting Reason="network"',
    ...          'M=1 P=0 G=-1 StateTransition Time=1300 ProcID=0 Running->Idle Reason=""',
    ...          'M=2 P=-1 G=-1 StateTransition Time=1400 ProcID=1 Idle->Running Reason=""',
    ...          'M=2 P=1 G=-1 StateTransition Time=2000 ProcID=1 Running->Idle Reason=""']
    >>> _ = list(c.feed(lines))
    >>> s = c.summary()
    >>> s["p_starts"], s["p_starts_idle"], s["goroutine_runs"], s["waits"], s["ms_starting_ps"]
    (2, 1, 1, {'network': 1}, 2)
    """

    def __init__(self) -> None:
        self.t0: int | None = None
        self.t1 = 0
        self.p_starts = 0
        self.p_starts_idle = 0
        self.created = 0
        self.runs = 0
        self.waits: dict[str, int] = {}
        self.open_p: dict[int, bool] = {}   # P -> a goroutine ran since it started
        self.ms: set[str] = set()

    def feed(self, lines: Iterable[str]) -> Iterable[str]:
        """Count each line and pass it on (so one decoding serves :func:`mark_table` too)."""
        for line in lines:
            m = _LINE_M.match(line)
            if m is not None:
                self._transition(m[1], int(m[2]), int(m[3]), m[4])
            yield line

    def _transition(self, mid: str, p: int, t: int, rest: str) -> None:
        self.t0 = t if self.t0 is None else self.t0
        self.t1 = t
        proc = _PROC.search(rest)
        if proc is not None:
            pid, old, new = int(proc[1]), proc[2], proc[3]
            if old == "Idle" and new == "Running":
                self.p_starts += 1
                self.open_p[pid] = False
                self.ms.add(mid)
            elif old == "Running" and new == "Idle" and pid in self.open_p:
                self.p_starts_idle += not self.open_p.pop(pid)
            return
        tr = _TRANSITION.search(rest)
        if tr is None:
            return
        if tr[2] == "NotExist":
            self.created += 1
        if tr[3] == "Running" and tr[2] != "Syscall":
            self.runs += 1
            if p in self.open_p:
                self.open_p[p] = True
        elif tr[2] == "Running" and tr[3] == "Waiting":
            reason = _REASON.search(rest)
            key = reason[1] if reason else ""
            self.waits[key] = self.waits.get(key, 0) + 1

    def summary(self) -> dict[str, Any]:
        span_ns = self.t1 - (self.t0 or self.t1)
        return {"span_s": round(span_ns / 1e9, 6), "p_starts": self.p_starts, "p_starts_idle": self.p_starts_idle,
                "goroutines_created": self.created, "goroutine_runs": self.runs,
                "waits": dict(sorted(self.waits.items(), key=lambda kv: -kv[1])[:12]),
                "ms_starting_ps": len(self.ms)}


_LINE_ANY = re.compile(r"^M=(-?\d+) P=-?\d+ G=-?\d+ (RangeBegin|RangeEnd|Metric|StateTransition) Time=(\d+)(.*)$")
_STW = re.compile(r'Name="stop-the-world \(([^)]*)\)"')
GOMAXPROCS_METRIC = "/sched/gomaxprocs:threads"


class StwPhases:
    """Each stop-the-world pause in a trace, split where the runtime's own steps show in it
    (``stopTheWorldWithSema`` and ``startTheWorldWithSema`` in ``src/runtime/proc.go``): the
    *stopping*, from the pause's start to the last P another M stopped at its safe point
    (``Running->Idle`` of a P by an M other than the coordinator); and the *restart*, from
    ``procresize`` (which emits the ``/sched/gomaxprocs`` metric on the coordinator's M) to the end
    the trace records (``STWDone``, taken with the pause's end time after the woken Ms were handed
    their Ps). Ms that start running a P inside that span ran before the coordinator could record
    the end: the coordinator had lost its CPU to them (on a host with fewer CPUs than runnable
    threads, the Ms it woke), and the pause the runtime reports (``work.pauseNS``,
    ``/sched/pauses/total/gc``) includes that wait. Only the sweep-termination pause starts the
    world inside its range; the mark-termination pause ends first.

    >>> c = StwPhases()
    >>> lines = ['M=1 P=0 G=5 RangeBegin Time=1000 Name="stop-the-world (GC sweep termination)" Scope=Goroutine(5)',
    ...          'M=2 P=1 G=-1 StateTransition Time=21000 ProcID=1 Running->Idle Reason=""',
    ...          'M=1 P=0 G=5 Metric Time=40000 Name="/sched/gomaxprocs:threads" Value=Value{Uint64(2)}',
    ...          'M=2 P=-1 G=-1 StateTransition Time=45000 ProcID=1 Idle->Running Reason=""',
    ...          'M=1 P=0 G=5 RangeEnd Time=340000 Name="stop-the-world (GC sweep termination)" Scope=Goroutine(5)']
    >>> _ = list(c.feed(lines))
    >>> c.rows
    [('GC sweep termination', 1000, 339.0, 20.0, 300.0, 1)]
    >>> c.summary()["GC sweep termination"]["restart_us_p50_ms_ran_first"]
    300.0
    """

    def __init__(self) -> None:
        # (reason, start [ns], total, stopping, restart [us; None without a procresize], Ms that ran first)
        self.rows: list[tuple[str, int, float, float, float | None, int]] = []
        self._open: tuple[str, str, int] | None = None   # reason, coordinator's M, start
        self._last_stop = 0
        self._resize: int | None = None
        self._ran: set[str] = set()

    def feed(self, lines: Iterable[str]) -> Iterable[str]:
        """Count each line and pass it on (one decoding serves the other readers too)."""
        for line in lines:
            m = _LINE_ANY.match(line)
            if m is not None:
                self._event(m[1], m[2], int(m[3]), m[4])
            yield line

    def _event(self, mid: str, kind: str, t: int, rest: str) -> None:
        if kind == "RangeBegin":
            stw = _STW.search(rest)
            if stw is not None:
                self._open, self._last_stop, self._resize = (stw[1], mid, t), t, None
                self._ran = set()
            return
        if self._open is None:
            return
        reason, coord, t0 = self._open
        if kind == "RangeEnd":
            if _STW.search(rest) is not None:
                restart = None if self._resize is None else (t - self._resize) / 1e3
                self.rows.append((reason, t0, (t - t0) / 1e3, (self._last_stop - t0) / 1e3, restart, len(self._ran)))
                self._open = None
            return
        if mid == coord:
            if kind == "Metric" and GOMAXPROCS_METRIC in rest:
                self._resize = t
            return
        proc = _PROC.search(rest) if kind == "StateTransition" else None
        if proc is None:
            return
        if self._resize is None and proc[2] == "Running" and proc[3] == "Idle":
            self._last_stop = t
        elif self._resize is not None and proc[2] == "Idle" and proc[3] == "Running":
            self._ran.add(mid)

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per kind of pause: how many, the whole pause, the stopping and the restart [us; median,
        90th percentile, mean], the share of restarts in which another M ran first, and the
        restart's median with and without that."""
        out: dict[str, dict[str, Any]] = {}
        for reason in sorted({r[0] for r in self.rows}):
            rows = [r for r in self.rows if r[0] == reason]
            total = pd.Series([r[2] for r in rows])
            stop = pd.Series([r[3] for r in rows])
            restarts = [r for r in rows if r[4] is not None]
            d: dict[str, Any] = {"pauses": len(rows),
                                 "total_us": _quantiles(total), "stopping_us": _quantiles(stop)}
            if restarts:
                first = [r[4] for r in restarts if r[5] > 0]
                alone = [r[4] for r in restarts if r[5] == 0]
                d["restart_us"] = _quantiles(pd.Series([r[4] for r in restarts]))
                d["ms_ran_first_share"] = round(len(first) / len(restarts), 4)
                d["restart_us_p50_ms_ran_first"] = round(float(pd.Series(first).median()), 1) if first else None
                d["restart_us_p50_alone"] = round(float(pd.Series(alone).median()), 1) if alone else None
            out[reason] = d
        return out


def _quantiles(s: pd.Series) -> dict[str, float]:
    return {"p50": round(float(s.median()), 1), "p90": round(float(s.quantile(0.9)), 1), "mean": round(float(s.mean()), 1)}


def read_go_trace(path: str | Path, go: str | None = None) -> tuple[pd.DataFrame, dict[str, Any]]:
    """``(marks, meta)`` from an execution trace file (``.gz`` read through gzip): the
    `mark_table` of ``go tool trace -d=parsed`` (and in ``meta["sched"]`` its :class:`SchedCounts`), run with the ``go`` command ``go`` (default: the
    one on ``PATH``). Raises CfsimParseError naming the file if the toolchain cannot decode it,
    FileNotFoundError without a toolchain."""
    go = go or shutil.which("go")
    if go is None:
        raise FileNotFoundError("the Go toolchain ('go') is needed to decode an execution trace")
    path = Path(path)
    raw = path
    tmp: Path | None = None
    if path.suffix == ".gz":
        tmp = path.with_suffix(".decoded.tmp")
        with gzip.open(path, "rb") as src, tmp.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        raw = tmp
    try:
        # stderr to a file: a pipe nobody reads while stdout streams could fill and stall the decoder
        with tempfile.TemporaryFile("w+") as err, subprocess.Popen(
                [go, "tool", "trace", "-d=parsed", str(raw)], stdout=subprocess.PIPE, stderr=err, text=True) as proc:
            assert proc.stdout is not None
            counts, stw = SchedCounts(), StwPhases()
            marks = mark_table(stw.feed(counts.feed(proc.stdout)), source=str(path))
            if proc.wait() != 0:
                err.seek(0)
                raise CfsimParseError(str(path), f"go tool trace could not decode it: {err.read().strip()[:300]}")
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
    meta = {"source": str(path), "marks": len(marks),
            "decoder": "go tool trace -d=parsed (src/cmd/trace, internal/trace)",
            "note": "one row per GC mark phase inside the trace; cfsim.io.gotrace.mark_table",
            "sched": counts.summary(), "stw": stw.summary()}
    return marks, meta
