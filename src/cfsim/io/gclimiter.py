"""Read when the Go runtime's GC CPU limiter turned on, cycle by cycle.

The runtime's gctrace says how each GC cycle ran, not whether the GC CPU limiter was on, which
turns the assists off (``src/runtime/mgcmark.go``, ``gcAssistAlloc``) and so decides how far past
its goal a heap near its memory limit runs. The runtime keeps one number for it,
``/gc/limiter/last-enabled:gc-cycle`` (``src/runtime/mgclimit.go``: when the limiter turns on it
stores ``numgc + 1``, the cycle under way, or between cycles the next one; reference: the
``runtime/metrics`` package documentation, https://pkg.go.dev/runtime/metrics). The lab's
workload (``lab/cmd/workload``, ``-gc-limiter-log``) reads it with ``/gc/cycles/total:gc-cycles``
each time its finalizer goroutine runs after a cycle, one line a read::

    gcs=276 last-enabled=274

:func:`read_gc_limiter` returns ``(reads, meta)`` (the pvlib ``read_*`` convention);
:func:`limiter_turned_on` says for each cycle whether the limiter turned on in it, where the
reads tell. Every lab run (since 2026-11-23) also scrapes the same number with the cycle count at
its window's two ends, which says whether the limiter turned on at all in the window
(:func:`limiter_turned_on_in_window`).
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from cfsim.io.errors import CfsimParseError
from cfsim.io.gctrace import open_log

__all__ = ["read_gc_limiter", "parse_gc_limiter", "limiter_turned_on", "limiter_turned_on_in_window", "LIMITER_LOG"]

#: the workload's file of reads, in a lab run's ``logs/`` (gzipped once the run is written)
LIMITER_LOG = "gc_limiter.log"

_READ = re.compile(r"^gcs=(\d+) last-enabled=(\d+)$")


def parse_gc_limiter(lines: Iterable[str], source: str = "<buffer>") -> pd.DataFrame:
    """The reads of a limiter log (columns ``gcs``, ``last_enabled``); ``source`` names it in
    errors. Blank lines are skipped; anything else that is not a read raises
    :class:`~cfsim.io.errors.CfsimParseError` naming the file and line.

    >>> parse_gc_limiter(["gcs=3 last-enabled=0", "", "gcs=5 last-enabled=4"]).values.tolist()
    [[3, 0], [5, 4]]
    """
    rows = []
    for i, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line:
            continue
        m = _READ.match(line)
        if m is None:
            raise CfsimParseError(source, "not a 'gcs=N last-enabled=M' line", line=i, column=1)
        rows.append((int(m.group(1)), int(m.group(2))))
    return pd.DataFrame(rows, columns=["gcs", "last_enabled"], dtype="int64")


def read_gc_limiter(path: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """``(reads, meta)`` from a limiter log (plain or ``.gz``)."""
    p = Path(path)
    with open_log(p, "GC limiter log") as f:
        reads = parse_gc_limiter(f, str(p))
    return reads, {"source": str(p), "reads": int(len(reads)),
                   "cycles_read_after": int(reads["gcs"].nunique()) if len(reads) else 0}


def limiter_turned_on(cycles: Iterable[int], reads: pd.DataFrame) -> list[float]:
    """For each cycle number: 1.0 if the limiter turned on in it (from the end of the cycle before
    to its own end: the runtime's ``numgc + 1``), 0.0 if it did not, NaN where no read was taken
    right after it.

    A read after ``gcs`` cycles showing ``last_enabled = M`` says the limiter turned on in cycle
    ``gcs`` if ``M == gcs`` and not if ``M < gcs`` (a later ``M``: it turned on after that cycle
    ended, before the read). Only the cycle just before a read is judged: a read also rules out
    turn-ons in the cycles between ``M`` and ``gcs``, but a cycle before ``M`` stays unknown, so
    counting those would leave out the cycles a later turn-on hid and overstate the share of
    turn-ons. When the reads are taken does not depend on the limiter, so the cycles read right
    after are a fair sample of them all.

    >>> reads = pd.DataFrame({"gcs": [2, 4, 5, 7, 7], "last_enabled": [0, 4, 4, 8, 8]})
    >>> limiter_turned_on(range(1, 9), reads)
    [nan, 0.0, nan, 1.0, 0.0, nan, nan, nan]
    """
    first: dict[int, int] = {}
    for gcs, last in zip(reads["gcs"], reads["last_enabled"]):
        first.setdefault(int(gcs), int(last))
    out = []
    for c in (int(x) for x in cycles):
        last = first.get(c)
        out.append(math.nan if last is None or last > c else 1.0 if last == c else 0.0)
    return out


#: the window samples' names of the runtime's cycle count and the limiter's last turn-on
#: (client_golang's names for ``/gc/cycles/total:gc-cycles`` and ``/gc/limiter/last-enabled:gc-cycle``)
CYCLES_SAMPLE = "go_gc_cycles_total_gc_cycles_total"
LAST_ENABLED_SAMPLE = "go_gc_limiter_last_enabled_gc_cycle"


def limiter_turned_on_in_window(start: Mapping[str, float], end: Mapping[str, float]) -> bool | None:
    """Whether the GC CPU limiter turned on between two reads of a process's runtime metrics
    (``start``, ``end``: name -> value, :data:`CYCLES_SAMPLE` and :data:`LAST_ENABLED_SAMPLE`);
    None when either read lacks them.

    A turn-on stores the cycle under way, ``numgc + 1`` (``src/runtime/mgclimit.go``,
    ``gcCPULimiterState.accumulate``), so one after the first read stores more than that read's
    cycle count and changes the number. A turn-on in the cycle that was under way at the first read,
    after an earlier one in the same cycle, changes nothing either read shows: it counts as not
    seen, the one case this misses.

    >>> s = {CYCLES_SAMPLE: 406.0, LAST_ENABLED_SAMPLE: 407.0}
    >>> limiter_turned_on_in_window(s, {CYCLES_SAMPLE: 1665.0, LAST_ENABLED_SAMPLE: 1665.0})
    True
    >>> limiter_turned_on_in_window(s, {CYCLES_SAMPLE: 1665.0, LAST_ENABLED_SAMPLE: 407.0})
    False
    >>> limiter_turned_on_in_window({CYCLES_SAMPLE: 40.0, LAST_ENABLED_SAMPLE: 0.0},
    ...                             {CYCLES_SAMPLE: 90.0, LAST_ENABLED_SAMPLE: 0.0})
    False
    >>> limiter_turned_on_in_window({}, {CYCLES_SAMPLE: 90.0, LAST_ENABLED_SAMPLE: 0.0}) is None
    True
    """
    try:
        cycles0 = float(start[CYCLES_SAMPLE])
        last0, last1 = float(start[LAST_ENABLED_SAMPLE]), float(end[LAST_ENABLED_SAMPLE])
    except (KeyError, TypeError, ValueError):
        return None
    return last1 != last0 and last1 > cycles0
