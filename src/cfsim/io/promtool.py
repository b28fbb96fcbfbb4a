"""``promtool tsdb dump`` output as a tidy frame, streamed line by line.

Each line is one sample (verified with promtool 2.42)::

    {__name__="container_cpu_cfs_periods_total", container="api", pod="api-1"} 25 1700000015000

labels sorted with ``__name__`` inside the braces, values quoted with Go's ``strconv.Quote``
(``\\"``, ``\\\\``, ``\\n``, ``\\xNN`` ...), the value printed with ``%g`` (``NaN``, ``+Inf``,
``1e+06``), the timestamp in **milliseconds**.  Staleness markers print as ``NaN``.

Dumps of real servers run to gigabytes: the file is read once, line by line; samples go into
compact per-series arrays (16 bytes per sample), never the raw text and the frame together.
``.gz`` files are decompressed on the fly.
"""
from __future__ import annotations

import gzip
import io
import os
from array import array
from typing import IO, Any, Iterable

import numpy as np
import pandas as pd

from cfsim.io.errors import CfsimParseError
from cfsim.io.labels import LabelSyntaxError, format_labels, parse_series
from cfsim.io.tidy import empty_frame, make_frame

__all__ = ["read_promtool_dump"]

FORMAT = "promtool-tsdb-dump"


def _open_text(filename: str | os.PathLike | IO[str]) -> tuple[IO[str], str, bool]:
    if hasattr(filename, "read"):
        return filename, str(getattr(filename, "name", "<buffer>")), False  # type: ignore[return-value]
    path = os.fspath(filename)
    if str(path).endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8"), str(path), True
    return open(path, encoding="utf-8"), str(path), True


def read_promtool_dump(filename: str | os.PathLike | IO[str], *, metrics: Iterable[str] | None = None
                       ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read ``promtool tsdb dump`` output.

    Parameters
    ----------
    filename : path or text file object
        The dump (``.gz`` accepted).
    metrics : iterable of str, optional
        Keep only these metric names (the rest are parsed for errors but not stored).

    Returns
    -------
    data : DataFrame
        Tidy frame (see :mod:`cfsim.io.tidy`); timestamps from the ms column [UTC].
    meta : dict
        ``source``, ``format``, ``series``, ``samples``, ``lines``, ``skipped_samples``
        (filtered out by ``metrics``), ``warnings``.

    Raises
    ------
    CfsimParseError
        ``<file>:<line>:<column>: ...`` for the first malformed line.
    """
    keep = None if metrics is None else set(metrics)
    fh, source, close = _open_text(filename)
    series: dict[str, tuple[str, str, array, array]] = {}
    last_head: str | None = None
    current: tuple[str, str, array, array] | None = None
    lineno = 0
    skipped = 0
    try:
        for lineno, line in enumerate(fh, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            parts = line.rsplit(" ", 2)
            if len(parts) != 3 or not parts[0]:
                raise CfsimParseError(source, "expected '{labels} <value> <timestamp_ms>'", line=lineno, column=1)
            head, vtext, ttext = parts
            if head != last_head:
                try:
                    name, labels = parse_series(head)
                except LabelSyntaxError as exc:
                    raise CfsimParseError(source, f"bad series: {exc}", line=lineno,
                                          column=exc.offset + 1) from None
                if name is None:
                    raise CfsimParseError(source, "series has no __name__", line=lineno, column=1)
                if keep is not None and name not in keep:
                    current = None
                else:
                    key = name + format_labels(labels)
                    current = series.get(key)
                    if current is None:
                        current = series[key] = (name, format_labels(labels), array("q"), array("d"))
                last_head = head
            try:
                value = float(vtext)
            except ValueError:
                raise CfsimParseError(source, f"value is not a number: {vtext!r}", line=lineno,
                                      column=len(head) + 2) from None
            try:
                ts = int(ttext)
            except ValueError:
                raise CfsimParseError(source, f"timestamp is not an integer [ms]: {ttext!r}", line=lineno,
                                      column=len(head) + len(vtext) + 3) from None
            if current is None:
                skipped += 1
                continue
            current[2].append(ts)
            current[3].append(value)
    except UnicodeDecodeError as exc:
        raise CfsimParseError(source, f"not UTF-8 text ({exc.reason})", line=lineno + 1) from None
    except (EOFError, OSError) as exc:  # truncated .gz
        raise CfsimParseError(source, f"cannot read: {exc}", line=lineno + 1) from None
    finally:
        if close:
            fh.close()
    meta: dict[str, Any] = {"source": source, "format": FORMAT, "series": len(series), "lines": lineno,
                            "skipped_samples": skipped, "warnings": []}
    if not series:
        meta["samples"] = 0
        return empty_frame(), meta
    # Lay the series out already sorted (by metric, labels; each by time) so the frame needs no
    # row sort: O(n) instead of an O(n log n) sort of string columns on huge dumps.
    ordered = sorted(series.values(), key=lambda s: (s[0], s[1]))
    series.clear()
    counts = np.fromiter((len(s[2]) for s in ordered), np.int64, len(ordered))
    ts_all = np.empty(int(counts.sum()), np.int64)
    val_all = np.empty(len(ts_all), np.float64)
    pos = 0
    for s in ordered:
        n = len(s[2])
        t = np.frombuffer(s[2], np.int64)
        v = np.frombuffer(s[3], np.float64)
        if n > 1 and np.any(t[1:] < t[:-1]):
            order = np.argsort(t, kind="stable")
            t, v = t[order], v[order]
        ts_all[pos:pos + n] = t
        val_all[pos:pos + n] = v
        pos += n
    names = np.repeat(np.array([s[0] for s in ordered], object), counts)
    labels = np.repeat(np.array([s[1] for s in ordered], object), counts)
    del ordered
    frame = make_frame(ts_all, names, labels, val_all, sort=False)
    meta["samples"] = len(frame)
    return frame, meta
