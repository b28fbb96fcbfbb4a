"""Read the Go runtime's own per-cycle GC trace (``GODEBUG=gctrace=1,gcpacertrace=1``).

The runtime prints, for every cycle, a ``gctrace`` line when the cycle ends
(``src/runtime/mgc.go``, ``gcMarkTermination``) and, before it, the pacer's ``endCycle`` line
(``src/runtime/mgcpacer.go``, ``(*gcControllerState).endCycle``, with ``gcpacertrace``)::

    pacer: 43% CPU (25 exp.) for 6003032+8920+244650 B work (6255818 B exp.) in 149821712 B -> 192061200 B (∆goal 5237820, cons/mark 3.63)
    gc 40 @5.879s 12%: 1.3+84+0.24 ms clock, 2.7+129/144/0+0.49 ms cpu, 142->183->56 MB, 178 MB goal, 0 MB stacks, 0 MB globals, 8 P

Reference: "Go runtime environment variables" (``GODEBUG`` ``gctrace``), the ``runtime``
package documentation, https://pkg.go.dev/runtime. The gctrace ``MB`` are MiB (``>> 20``); its
CPU times are P-time (wall time a P spent on the work, throttled time included under a CPU
quota). ``heap0`` is read before the sweep-termination stop (``gcStart``), ``triggered`` after
it (``startCycle``), so ``triggered - heap0`` is what was allocated while the world stopped.

:func:`read_gctrace` returns ``(cycles, meta)`` (the pvlib ``read_*`` convention): one row a cycle
with the columns of :data:`COLUMNS`; pacer columns are NaN where the pacer line is missing.
Other lines (the workload's own output, ``pacer: assist ratio`` and ``sweep done`` lines) are
skipped; a ``gc N`` or ``pacer: N% CPU`` line that does not parse raises
:class:`~cfsim.io.errors.CfsimParseError` naming the file and line.

With ``gctrace=2`` (:data:`GODEBUG_GCTRACE_SCAN`) the Green Tea GC of Go >= 1.26 also prints, after
each cycle's ``gc N`` line, how its mark scanned the small objects (``dumpScanStats`` in
``src/runtime/mgcmark_greenteagc.go``)::

    scan: total 1885+5969+226880=234734 objs, 1431+2270=3701 spans

objects scanned alone, objects of spans scanned object by object ("sparse": fewer than an eighth
of the span's objects marked when a worker took it, or no vector scan on the CPU), and objects of
spans scanned whole ("dense", ``scan.ScanSpanPacked``), then the sparse and dense spans. It matters
for the pacer: a dense span counts each marked object's whole size as scan work, the other two
paths only the bytes up to its last pointer (``scanSpan``, ``scanObjectsSmall``,
``scanObjectSmall``), so the same heap counts less scan work in a cycle that scanned more of it
sparse, and ``revise`` expects the next cycle to need what this one counted. Those columns
(``scan_*``) are NaN for a cycle without the line; the per-size-class lines that follow are skipped.
"""
from __future__ import annotations

import gzip
import math
import re
from pathlib import Path
from typing import IO, Any, Iterable

import pandas as pd

from cfsim.io.errors import CfsimParseError

__all__ = ["COLUMNS", "parse_gctrace", "read_gctrace", "cycle_table", "open_log", "GODEBUG_GCTRACE",
           "GODEBUG_GCTRACE_SCAN", "dense_scan_share"]

#: the GODEBUG settings that make the runtime print both lines
GODEBUG_GCTRACE = "gctrace=1,gcpacertrace=1"
#: ... and, after each cycle's line, the Green Tea GC's split of its scan (``scan: total``)
GODEBUG_GCTRACE_SCAN = "gctrace=2,gcpacertrace=1"

_MiB = 1 << 20
_NUM = r"(-?[\d.]+(?:e[-+]?\d+)?|[-+]?Inf|NaN)"
_GC = re.compile(
    r"^gc (\d+) @([\d.]+)s (\d+)%: ([\d.]+)\+([\d.]+)\+([\d.]+) ms clock, "
    r"([\d.]+)\+([\d.]+)/([\d.]+)/([\d.]+)\+([\d.]+) ms cpu, (\d+)->(\d+)->(\d+) MB, (\d+) MB goal, "
    r"(\d+) MB stacks, (\d+) MB globals, (\d+) P( \(forced\))?")
_PACER = re.compile(
    r"^pacer: (-?\d+)% CPU \((\d+) exp\.\) for (\d+)\+(\d+)\+(\d+) B work \((\d+) B exp\.\) "
    r"in (\d+) B -> (\d+) B \(∆goal (-?\d+), cons/mark " + _NUM + r"\)")
_SCAN = re.compile(r"^scan: total (\d+)\+(\d+)\+(\d+)=(\d+) objs, (\d+)\+(\d+)=(\d+) spans")
_SCAN_COLUMNS = ("scan_sole_objects", "scan_sparse_span_objects", "scan_dense_span_objects",
                 "scan_sparse_spans", "scan_dense_spans")

#: one row per cycle; ``*_mib`` from the gctrace line (whole MiB), ``*_bytes`` from the pacer line
COLUMNS = (
    "cycle", "t_s", "gc_cpu_percent", "sweepterm_ms", "mark_ms", "markterm_ms",
    "sweepterm_cpu_ms", "assist_cpu_ms", "background_cpu_ms", "idle_cpu_ms", "markterm_cpu_ms",
    "heap0_mib", "heap1_mib", "marked_mib", "goal_mib", "stacks_mib", "globals_mib", "procs", "forced",
    "utilization_percent", "scan_work_bytes", "scan_expected_bytes", "triggered_bytes", "heap_end_bytes",
    "goal_delta_bytes", "cons_mark", *_SCAN_COLUMNS,
)


def _float(text: str) -> float:
    t = text.lower()
    if t in ("+inf", "inf"):
        return math.inf
    if t == "-inf":
        return -math.inf
    return float(text)


def parse_gctrace(lines: Iterable[str], source: str = "<buffer>") -> pd.DataFrame:
    """Cycles of a runtime's stderr (see the module docstring); ``source`` names it in errors."""
    rows: list[dict[str, Any]] = []
    pacer: dict[str, Any] | None = None
    for i, raw in enumerate(lines, 1):
        line = raw.rstrip("\n")
        # the runtime writes its trace unbuffered to fd 2: another writer's text may precede it
        at = line.find("scan: total ")
        if at >= 0:
            m = _SCAN.match(line[at:])
            if m is None:
                raise CfsimParseError(source, "malformed gctrace=2 'scan: total' line", line=i, column=at + 1)
            g = m.groups()
            if int(g[0]) + int(g[1]) + int(g[2]) != int(g[3]) or int(g[4]) + int(g[5]) != int(g[6]):
                raise CfsimParseError(source, "gctrace=2 'scan: total' line whose parts do not add up to its totals",
                                      line=i, column=at + 1)
            if rows and _SCAN_COLUMNS[0] not in rows[-1]:
                # printed under the same print lock right after its cycle's gc line (gcMarkTermination)
                rows[-1].update(zip(_SCAN_COLUMNS, (int(g[0]), int(g[1]), int(g[2]), int(g[4]), int(g[5]))))
            continue
        at = line.find("pacer: ")
        if at >= 0 and "% CPU" in line[at:]:
            m = _PACER.match(line[at:])
            if m is None:
                raise CfsimParseError(source, "malformed gcpacertrace 'pacer: N% CPU' line", line=i, column=at + 1)
            g = m.groups()
            pacer = {"utilization_percent": int(g[0]),
                     "scan_work_bytes": int(g[2]) + int(g[3]) + int(g[4]), "scan_expected_bytes": int(g[5]),
                     "triggered_bytes": int(g[6]), "heap_end_bytes": int(g[7]),
                     "goal_delta_bytes": int(g[8]), "cons_mark": _float(g[9])}
            continue
        at = line.find("gc ")
        if at < 0 or not line[at + 3:at + 4].isdigit() or " @" not in line[at:]:
            continue
        m = _GC.match(line[at:])
        if m is None:
            raise CfsimParseError(source, "malformed gctrace 'gc N @t' line", line=i, column=at + 1)
        g = m.groups()
        row: dict[str, Any] = {
            "cycle": int(g[0]), "t_s": float(g[1]), "gc_cpu_percent": int(g[2]),
            "sweepterm_ms": float(g[3]), "mark_ms": float(g[4]), "markterm_ms": float(g[5]),
            "sweepterm_cpu_ms": float(g[6]), "assist_cpu_ms": float(g[7]), "background_cpu_ms": float(g[8]),
            "idle_cpu_ms": float(g[9]), "markterm_cpu_ms": float(g[10]),
            "heap0_mib": int(g[11]), "heap1_mib": int(g[12]), "marked_mib": int(g[13]), "goal_mib": int(g[14]),
            "stacks_mib": int(g[15]), "globals_mib": int(g[16]), "procs": int(g[17]), "forced": g[18] is not None,
        }
        row.update(pacer or {})
        pacer = None
        rows.append(row)
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    return df.astype({"cycle": "int64", "procs": "int64", "forced": "bool"}) if len(df) else df


def dense_scan_share(cycles: pd.DataFrame) -> pd.Series:
    """Per cycle, the share of the small objects the mark scanned in dense spans (whole-object scan
    work; the rest counted only up to their last pointer): NaN without a ``scan: total`` line.

    >>> c = parse_gctrace(["gc 1 @0.1s 1%: 0.1+2+0.1 ms clock, 0.2+1/1/0+0.2 ms cpu, 4->5->2 MB, 5 MB goal, "
    ...                    "0 MB stacks, 0 MB globals, 8 P", "scan: total 10+30+160=200 objs, 5+2=7 spans"])
    >>> float(dense_scan_share(c).iloc[0])
    0.8
    """
    total = cycles["scan_sole_objects"] + cycles["scan_sparse_span_objects"] + cycles["scan_dense_span_objects"]
    return (cycles["scan_dense_span_objects"] / total.where(total > 0)).rename("dense_scan_share")


def open_log(path: str | Path, what: str) -> IO[str]:
    """A log the lab kept, plain or gzipped (``.gz``), open as text (undecodable bytes replaced:
    another writer's output may share it); ``FileNotFoundError`` naming ``what`` if it is absent."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no such {what}")
    opener = gzip.open if p.suffix == ".gz" else open
    return opener(p, "rt", encoding="utf-8", errors="replace")


def read_gctrace(path: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """``(cycles, meta)`` from a log file (plain or ``.gz``) holding a runtime's trace.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "workload.log")
    >>> _ = open(p, "w").write('{"event":"ready"}\\n'
    ...   "pacer: 43% CPU (25 exp.) for 6003032+8920+244650 B work (6255818 B exp.) in 149821712 B -> 192061200 B (∆goal 5237820, cons/mark 3.63)\\n"
    ...   "gc 40 @5.879s 12%: 1.3+84+0.24 ms clock, 2.7+129/144/0+0.49 ms cpu, 142->183->56 MB, 178 MB goal, 0 MB stacks, 0 MB globals, 8 P\\n")
    >>> cycles, meta = read_gctrace(p)
    >>> c = cycles.iloc[0]
    >>> int(c.cycle), int(c.marked_mib), int(c.goal_mib), float(c.assist_cpu_ms), meta["cycles"]
    (40, 56, 178, 129.0, 1)
    >>> int(c.triggered_bytes), float(c.cons_mark)
    (149821712, 3.63)
    """
    p = Path(path)
    with open_log(p, "GC trace file") as f:
        df = parse_gctrace(f, str(p))
    meta = {"source": str(p), "cycles": int(len(df)),
            "with_pacer": int(df["triggered_bytes"].notna().sum()) if len(df) else 0,
            "with_scan_split": int(df["scan_dense_span_objects"].notna().sum()) if len(df) else 0,
            "units": {"*_mib": "MiB (whole, as the runtime prints them)", "*_bytes": "bytes",
                      "scan_*": "objects or spans the cycle's mark scanned (gctrace=2)",
                      "*_ms": "ms (P-time for *_cpu_ms)", "t_s": "s since the process started"}}
    return df, meta


def cycle_table(cycles: pd.DataFrame) -> pd.DataFrame:
    """A lab run's cycles (``gc_cycles.csv.gz``, with ``run_t_s``) in the columns of the model's
    table (:mod:`cfsim.goruntime.gc_cycles`).

    The gctrace line prints the goal and the marked heap as ``x >> 20`` (``gcMarkTermination``),
    whole MiB rounded *down*: a 47.9 MiB goal reads 47, 1.9 % under the heap a pacer that landed
    on it ends at. So the goal comes from the pacer line where there is one: it prints the heap at
    the cycle's end and ``∆goal`` = that heap minus ``lastHeapGoal`` (``endCycle``), the goal to
    the byte. The marked heap (gctrace only) is the middle of its MiB, the unbiased reading of a
    floor; so is the goal of a cycle without a pacer line. The heap at the mark's start and end
    are the pacer line's bytes (NaN without it).

    The trace's ``@t`` (and so the lab's ``run_t_s``) is when the cycle *began*: ``gcMarkTermination``
    prints ``work.tSweepTerm - runtimeInitTime`` (``src/runtime/mgc.go``). The model's table gives
    each cycle's end, so the end is the start plus the three wall-clock phases the same line prints
    (sweep termination, concurrent mark, mark termination), where the file has them.

    >>> t = cycle_table(pd.DataFrame({"run_t_s": [1.0, 2.0], "sweepterm_ms": [0.5, 0.5], "mark_ms": [5.0, 6.0],
    ...     "markterm_ms": [0.5, 0.5],
    ...     "triggered_bytes": [40e6, float("nan")], "heap_end_bytes": [50_300_000, float("nan")],
    ...     "goal_delta_bytes": [100_000, float("nan")], "marked_mib": [23, 23], "goal_mib": [47, 47],
    ...     "assist_cpu_ms": [1, 1], "background_cpu_ms": [2, 2], "idle_cpu_ms": [0, 0]}))
    >>> t["run_t_s"].tolist(), t["goal_bytes"].tolist(), t["marked_bytes"].tolist()
    ([1.006, 2.007], [50200000.0, 49807360.0], [24641536, 24641536])
    """
    floor_mid = cycles["goal_mib"] * _MiB + _MiB // 2
    clock_ms = cycles["mark_ms"].copy()
    for phase in ("sweepterm_ms", "markterm_ms"):
        if phase in cycles:
            clock_ms = clock_ms + cycles[phase].fillna(0.0)
    # runs whose workload read the GC CPU limiter after its cycles (cfsim.io.gclimiter)
    limiter = cycles["limiter_turned_on"] if "limiter_turned_on" in cycles else float("nan")
    return pd.DataFrame({
        "run_t_s": (cycles["run_t_s"] + clock_ms / 1e3).round(6), "mark_ms": cycles["mark_ms"],
        "triggered_bytes": cycles["triggered_bytes"], "heap_end_bytes": cycles["heap_end_bytes"],
        "marked_bytes": cycles["marked_mib"] * _MiB + _MiB // 2,
        "goal_bytes": (cycles["heap_end_bytes"] - cycles["goal_delta_bytes"]).fillna(floor_mid),
        "assist_cpu_ms": cycles["assist_cpu_ms"], "background_cpu_ms": cycles["background_cpu_ms"],
        "idle_cpu_ms": cycles["idle_cpu_ms"], "limiter_turned_on": limiter})
