"""Grafana panel CSV exports ("Inspect > Data > Download CSV") as tidy frames.

What Grafana writes (``toCSV`` in ``@grafana/data``): a header row of quoted field display names,
then one row per time; the delimiter follows the browser locale (``,`` or ``;``); lines end in
``\\r\\n``; "Download for Excel" prepends ``sep=<delimiter>``; empty cells mean no value.  With
"Series joined by time" there is one table (``Time`` plus one column per series); without it each
series is its own table, tables separated by a blank line.  The ``full`` header style writes
``#name#``, ``#type#`` and ``#unit#`` rows instead of the plain header.

Legends become labels: ``{container="api", pod="api-1"}`` and ``metric{...}`` are parsed back;
any other legend (``api-1``, ``Value #A``) is kept whole: as the label ``legend`` when ``metric=``
is given, else as the metric name.  With "Formatted data" on, times are
strings in the dashboard's time zone (pass ``tz``) and values carry units (``12.5 ms``, ``85%``,
``1.2 MiB``), converted to base units (seconds, bytes, fractions) unless ``convert_units=False``.
Grafana data is already resampled to the panel's step: the lowest-fidelity input cfsim reads.
"""
from __future__ import annotations

import csv
import math
import os
import re
from typing import IO, Any

import numpy as np
import pandas as pd

from cfsim.io.errors import CfsimParseError
from cfsim.io.labels import LabelSyntaxError, format_labels, parse_series
from cfsim.io.tidy import empty_frame, make_frame

__all__ = ["read_grafana_csv", "UNIT_FACTORS"]

FORMAT = "grafana-csv"

#: Display suffix -> factor to the base unit (s, bytes, fraction, count), Grafana's unit formats.
UNIT_FACTORS: dict[str, float] = {
    "ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0, "min": 60.0, "m": 60.0,
    "hour": 3600.0, "h": 3600.0, "day": 86400.0, "d": 86400.0, "week": 604800.0, "w": 604800.0,
    "%": 0.01,
    "B": 1.0, "KiB": 1024.0, "MiB": 1024.0 ** 2, "GiB": 1024.0 ** 3, "TiB": 1024.0 ** 4,
    "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
    "K": 1e3, "k": 1e3, "Mil": 1e6, "M": 1e6, "Bil": 1e9, "Tri": 1e12, "T": 1e12,
    "mcores": 1e-3, "cores": 1.0, "core": 1.0,
    "req/s": 1.0, "ops/s": 1.0, "rps": 1.0, "/s": 1.0,
}
_NUMBER = re.compile(r"^\s*([-+]?(?:\d+(?:[.,]\d*)?|[.,]\d+)(?:[eE][-+]?\d+)?|[-+]?(?:NaN|Inf|inf|nan|Infinity))\s*(.*?)\s*$")
_TIME_NAMES = ("time", "timestamp", "date")


def _value(text: str, convert: bool) -> tuple[float, str]:
    t = text.strip()
    try:
        return float(t), ""
    except ValueError:
        pass
    m = _NUMBER.match(t)
    if not m:
        raise ValueError(f"not a number: {text!r}")
    number = float(m.group(1).replace(",", "."))
    unit = m.group(2)
    if not unit:
        return number, ""
    if unit not in UNIT_FACTORS:
        raise ValueError(f"unknown unit {unit!r} in {text!r} (known: {', '.join(sorted(UNIT_FACTORS))})")
    return (number * UNIT_FACTORS[unit] if convert else number), unit


def _time_ms(text: str, tz: str) -> int:
    t = text.strip()
    try:
        x = float(t)
    except ValueError:
        ts = pd.Timestamp(t)
        if ts.tzinfo is None:
            ts = ts.tz_localize(tz)
        return int(ts.tz_convert("UTC").value // 1_000_000)
    if not math.isfinite(x):
        raise ValueError(f"not a time: {text!r}")
    return int(round(x if abs(x) >= 1e11 else x * 1000))  # epoch ms (Grafana) or epoch s


def _series_of(header: str, metric: str | None) -> tuple[str, str]:
    try:
        if "{" not in header:
            raise LabelSyntaxError("free-text legend", 0)
        name, labels = parse_series(header)
    except LabelSyntaxError:
        if metric is not None:
            return metric, format_labels({"legend": header})
        return header, "{}"
    return (name if name is not None else (metric if metric is not None else "")), format_labels(labels)


def _tag(field: str) -> tuple[str | None, str]:
    """Split a ``#name#`` / ``#type#`` / ``#unit#`` / ``#dateFormat#`` prefix off a first field."""
    for tag in ("name", "type", "unit", "dateFormat"):
        prefix = f"#{tag}#"
        if field.startswith(prefix):
            return tag, field[len(prefix):].strip().strip('"')
    return None, field


def _columns(header: list[str], time_col: int, metric: str | None,
             columns: dict[str, tuple[str, str]]) -> list[tuple[str, str] | None]:
    out: list[tuple[str, str] | None] = []
    for i, h in enumerate(header):
        if i == time_col:
            out.append(None)
            continue
        columns[h] = _series_of(h, metric)
        out.append(columns[h])
    return out


def read_grafana_csv(filename: str | os.PathLike | IO[str], *, tz: str = "UTC", metric: str | None = None,
                     convert_units: bool = True) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a Grafana panel CSV export.

    Parameters
    ----------
    filename : path or text file object
    tz : str
        Time zone of time strings without an offset (the dashboard's zone when "Formatted data"
        was on).  Epoch numbers are UTC: milliseconds, or seconds if below 1e11.
    metric : str, optional
        Metric name for columns whose legend has no name (``{pod="a"}`` or free text; free text
        then becomes the label ``legend``).  Without it a free-text legend is the metric name
        and a ``{...}`` legend gets the metric ``''`` (with a warning).
    convert_units : bool
        Convert values with unit suffixes to base units (``12.5 ms`` -> 0.0125 [s], ``85%`` ->
        0.85 [-], ``1 KiB`` -> 1024 [bytes]); see :data:`UNIT_FACTORS`.

    Returns
    -------
    data : DataFrame
        Tidy frame; empty cells produce no row.
    meta : dict
        ``source``, ``format``, ``tz``, ``tables``, ``columns`` (header -> (metric, labels)),
        ``units`` (header -> unit suffix seen, or the ``#unit#`` row), ``series``, ``samples``,
        ``warnings``.

    Raises
    ------
    CfsimParseError
        ``<file>:<line>:<column>: ...`` — column is the 1-based CSV field.
    """
    own = not hasattr(filename, "read")
    if own:
        source = os.fspath(filename)
        fh: IO[str] = open(source, encoding="utf-8-sig", newline="")
    else:
        fh = filename  # type: ignore[assignment]
        source = str(getattr(filename, "name", "<buffer>"))
    ts: list[int] = []
    names: list[str] = []
    labelsets: list[str] = []
    values: list[float] = []
    columns: dict[str, tuple[str, str]] = {}
    units: dict[str, str] = {}
    warnings: list[str] = []
    mixed: set[str] = set()
    tables = 0
    try:
        first = fh.readline()
        lineno = 1
        if first.startswith("\ufeff"):
            first = first[1:]
        delimiter = None
        if first.strip().lower().startswith("sep="):
            delimiter = first.strip()[4:] or ","
            first = fh.readline()
            lineno += 1
        if delimiter is None:
            counts = {d: first.count(d) for d in (",", ";", "\t")}
            delimiter = max(counts, key=counts.get) if any(counts.values()) else ","  # type: ignore[arg-type]
        header: list[str] | None = None
        time_col = 0
        col_series: list[tuple[str, str] | None] = []

        def rows():
            yield lineno, first
            n = lineno
            for line in fh:
                n += 1
                yield n, line

        for n, line in rows():
            if not line.strip():
                header = None  # blank line: next table
                continue
            try:
                fields = next(csv.reader([line], delimiter=delimiter, quotechar='"'))
            except csv.Error as exc:
                raise CfsimParseError(source, f"bad CSV: {exc}", line=n, column=1) from None
            tag, rest = _tag(fields[0])
            if tag is not None:
                fields[0] = rest
                if tag != "name" and header is None:
                    raise CfsimParseError(source, f"#{tag}# row before the #name# row", line=n, column=1)
                if tag == "unit":
                    units.update({h: u for h, u in zip(header, fields) if u})  # type: ignore[arg-type]
                    continue
                if tag == "type":
                    if "time" in fields:
                        time_col = fields.index("time")
                        col_series = _columns(header, time_col, metric, columns)  # type: ignore[arg-type]
                    continue
                if tag != "name":
                    continue
            if header is None or tag == "name":
                header = [f.strip() for f in fields]
                if len(header) < 2:
                    raise CfsimParseError(source, "a table needs a time column and at least one series column",
                                          line=n, column=1)
                tables += 1
                lowered = [h.lower() for h in header]
                time_col = next((i for i, h in enumerate(lowered) if h in _TIME_NAMES), 0)
                col_series = _columns(header, time_col, metric, columns)
                continue
            if len(fields) > len(header):
                raise CfsimParseError(source, f"{len(fields)} fields but the header has {len(header)}",
                                      line=n, column=len(header) + 1)
            try:
                when = _time_ms(fields[time_col], tz)
            except (ValueError, TypeError) as exc:
                raise CfsimParseError(source, f"bad time {fields[time_col]!r}: {exc}", line=n,
                                      column=time_col + 1) from None
            for i, cell in enumerate(fields):
                key = col_series[i]
                if key is None or not cell.strip():
                    continue
                try:
                    v, unit = _value(cell, convert_units)
                except ValueError as exc:
                    raise CfsimParseError(source, f"column {header[i]!r}: {exc}", line=n, column=i + 1) from None
                if unit:
                    seen = units.setdefault(header[i], unit)
                    if seen != unit and not convert_units and header[i] not in mixed:
                        mixed.add(header[i])
                        warnings.append(f"column {header[i]!r} mixes units ({seen!r}, {unit!r}, ...) and "
                                        "convert_units=False: its values are not in one unit")
                ts.append(when)
                names.append(key[0])
                labelsets.append(key[1])
                values.append(v)
    except UnicodeDecodeError as exc:
        raise CfsimParseError(source, f"not UTF-8 text ({exc.reason})") from None
    finally:
        if own:
            fh.close()
    if any(k[0] == "" for k in columns.values()):
        warnings.append("some columns have a legend without a metric name and no metric= was given; "
                        "their metric is ''")
    frame = make_frame(np.asarray(ts, np.int64), names, labelsets, np.asarray(values, np.float64)) if ts \
        else empty_frame()
    meta = {"source": source, "format": FORMAT, "tz": tz, "tables": tables, "columns": columns,
            "units": units, "unit_conversion": convert_units,
            "series": int(frame.groupby(["metric", "labels"]).ngroups) if len(frame) else 0,
            "samples": len(frame), "warnings": warnings}
    return frame, meta
