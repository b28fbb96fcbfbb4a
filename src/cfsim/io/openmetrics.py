"""Scrapes — the Prometheus text exposition format and OpenMetrics — as tidy frames.

Parsing is delegated to prometheus_client's parsers (``prometheus_client.parser`` for the text
format, ``prometheus_client.openmetrics.parser`` for OpenMetrics); this module adds line numbers
to their errors, timestamps and the tidy layout.  Sample names are kept as exposed
(``x_total``, ``x_bucket`` with its ``le`` label, ``x_count``, ``x_sum``, ``x_created``);
``meta["types"]`` maps each sample name to its family's type.

Timestamps: the text format writes milliseconds, OpenMetrics seconds (both become UTC
datetimes).  Samples without a timestamp take ``scrape_time``; without one they get NaT and a
warning, since a scrape file does not say when it was taken.
"""
from __future__ import annotations

import io
import os
from typing import IO, Any, Iterator

import numpy as np
import pandas as pd
from prometheus_client.openmetrics import parser as om_parser
from prometheus_client import parser as text_parser

from cfsim.io.errors import CfsimParseError
from cfsim.io.labels import LabelSyntaxError, _parse_block, format_labels
from cfsim.io.promql import _times_ms
from cfsim.io.tidy import empty_frame, make_frame

__all__ = ["read_openmetrics"]

_NAT = np.iinfo(np.int64).min


_POINT_LABEL = "cfsim_om_point"
_GROUPED_TYPES = ("histogram", "gaugehistogram", "summary")


class _CountingLines:
    """Iterate a text file, remembering the number and text of the last line handed out.

    With ``tag_points`` (OpenMetrics), sample lines of histogram and summary families that carry
    a timestamp get an extra label ``cfsim_om_point="<timestamp>"``: prometheus_client 0.26
    groups such samples by their labels without ``le``/``quantile`` only, so a file holding
    several points per series (backfill files, ``promtool`` input) loses every bucket after the
    first point.  The label makes each point its own group; :func:`read_openmetrics` removes it.
    """

    def __init__(self, fh: IO[str], tag_points: bool) -> None:
        self._fh = fh
        self._tag = tag_points
        self.lineno = 0
        self.line = ""

    def __iter__(self) -> Iterator[str]:
        grouped = False
        for line in self._fh:
            self.lineno += 1
            self.line = line
            if self._tag:
                if line.startswith("# TYPE "):
                    grouped = line.split()[-1] in _GROUPED_TYPES
                elif grouped and not line.startswith("#"):
                    line = self._tag_line(line)
            yield line

    def _tag_line(self, line: str) -> str:
        brace = line.find("{")
        space = line.find(" ")
        try:
            if 0 <= brace < space or (brace >= 0 and space < 0):
                _, end = _parse_block(line, brace)
            else:
                brace, end = -1, space
        except LabelSyntaxError:
            return line  # let the parser report it
        rest = line[end:].split(" # ", 1)[0].split()
        if len(rest) != 2:
            return line
        tag = f'{_POINT_LABEL}="{rest[1]}"'
        if brace < 0:
            return f"{line[:end]}{{{tag}}}{line[end:]}"
        inner = line[brace + 1:end - 1].strip()
        return f"{line[:brace + 1]}{tag}{',' if inner else ''}{line[brace + 1:]}"


def _detect(source: str, head_text: str | None, path: str | None) -> str:
    """OpenMetrics if the name says so or the text ends with ``# EOF``, else the text format."""
    name = source.lower()
    if name.endswith((".om", ".openmetrics")):
        return "openmetrics"
    if name.endswith(".prom"):
        return "prometheus"
    if path is not None:
        with open(path, "rb") as fh:
            fh.seek(0, io.SEEK_END)
            fh.seek(max(0, fh.tell() - 64))
            tail = fh.read()
        return "openmetrics" if tail.rstrip().endswith(b"# EOF") else "prometheus"
    return "openmetrics" if (head_text or "").rstrip().endswith("# EOF") else "prometheus"


def read_openmetrics(filename: str | os.PathLike | IO[str], *, fmt: str = "auto",
                     scrape_time: Any = None) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a scrape in the Prometheus text format or OpenMetrics.

    Parameters
    ----------
    filename : path or text file object
    fmt : {"auto", "openmetrics", "prometheus"}
        ``auto``: ``.om`` -> OpenMetrics, ``.prom`` -> text format, otherwise OpenMetrics if the
        file ends with ``# EOF``.
    scrape_time : datetime, str or float, optional
        Time [UTC, or epoch seconds] for samples that carry no timestamp.

    Returns
    -------
    data : DataFrame
        Tidy frame (see :mod:`cfsim.io.tidy`).
    meta : dict
        ``source``, ``format``, ``families``, ``series``, ``samples``, ``types`` (sample name to
        family type), ``help``, ``units``, ``exemplars`` (count, not stored), ``warnings``.

    Raises
    ------
    CfsimParseError
        ``<file>:<line>:1: ...`` naming the line the parser was reading when it failed.
    """
    if fmt not in ("auto", "openmetrics", "prometheus"):
        raise ValueError(f"fmt must be 'auto', 'openmetrics' or 'prometheus', got {fmt!r}")
    own = not hasattr(filename, "read")
    if own:
        source = str(os.fspath(filename))
        kind = _detect(source, None, source) if fmt == "auto" else fmt
        fh: IO[str] = open(source, encoding="utf-8")
    else:
        source = str(getattr(filename, "name", "<buffer>"))
        fh = filename  # type: ignore[assignment]
        if fmt == "auto":  # a buffer: read it once and parse the copy
            text = fh.read()
            kind = _detect(source, text, None)
            fh = io.StringIO(text)
        else:
            kind = fmt
    try:
        lines = _CountingLines(fh, tag_points=kind == "openmetrics")
        parse = om_parser.text_fd_to_metric_families if kind == "openmetrics" else text_parser.text_fd_to_metric_families
        default_ms = _NAT
        if scrape_time is not None:
            default_ms = int(_times_ms(scrape_time)[0])
        ts: list[int] = []
        names: list[str] = []
        labelsets: list[str] = []
        values: list[float] = []
        types: dict[str, str] = {}
        helps: dict[str, str] = {}
        units: dict[str, str] = {}
        exemplars = 0
        skipped_native = 0
        families = 0
        try:
            for family in parse(lines):
                families += 1
                if family.documentation:
                    helps[family.name] = family.documentation
                if getattr(family, "unit", ""):
                    units[family.name] = family.unit
                for s in family.samples:
                    types[s.name] = family.type
                    if getattr(s, "native_histogram", None) is not None:
                        skipped_native += 1
                        continue
                    if s.exemplar is not None:
                        exemplars += 1
                    t = s.timestamp
                    if t is None:
                        ms = default_ms
                    elif hasattr(t, "sec"):
                        ms = t.sec * 1000 + int(round(t.nsec / 1e6))
                    else:
                        ms = int(round(float(t) * 1000))
                    ts.append(ms)
                    names.append(s.name)
                    if _POINT_LABEL in s.labels:
                        s.labels.pop(_POINT_LABEL)
                    labelsets.append(format_labels(s.labels))
                    values.append(float(s.value))
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            at = lines.line.rstrip("\n")
            shown = at if len(at) <= 120 else at[:117] + "..."
            msg = f"{kind} parse error: {exc or type(exc).__name__}"
            if lines.lineno:
                msg += f" (line text: {shown!r})"
            raise CfsimParseError(source, msg, line=max(lines.lineno, 1), column=1) from None
    finally:
        if own:
            fh.close()
    warnings: list[str] = []
    ts_arr = np.asarray(ts, dtype=np.int64)
    missing = int(np.count_nonzero(ts_arr == _NAT))
    if missing:
        warnings.append(f"{missing} samples have no timestamp and no scrape_time was given: timestamp is NaT")
    if skipped_native:
        warnings.append(f"{skipped_native} native-histogram samples skipped")
    if ts:
        frame = make_frame(ts_arr, names, labelsets, np.asarray(values, dtype=np.float64))
    else:
        frame = empty_frame()
    meta = {"source": source, "format": kind, "families": families,
            "series": int(frame.groupby(["metric", "labels"]).ngroups) if len(frame) else 0,
            "samples": len(frame), "types": types, "help": helps, "units": units,
            "exemplars": exemplars, "warnings": warnings}
    return frame, meta
