"""Lab run folders (``cfsim lab``) as tidy frames, and the check of our ``rate()`` against the
``rate()`` results Prometheus computed during the run.

A run folder (written by :mod:`cfsim.lab.runner`)::

    manifest.json[.gz]        scenario, environment, timings, "prometheus_version", "exports"
                              (the lab writes it gzip'd; either is read, :mod:`cfsim.io.manifest`)
    summary.json              the keys of ``cfsim run --json``
    prom/raw.jsonl[.gz]       /api/v1/query_range of each bare metric name, one body per line
    prom/rate.jsonl[.gz]      dashboard queries such as rate(x[5s]), one body per line
    prom/samples.jsonl[.gz]   optional: /api/v1/query of ``<metric>[<range>]`` (raw samples)

``manifest["exports"]`` maps each export name to its query and its ``line`` (0-based) in
``prom/<kind>.jsonl`` (gzip-compressed as ``.jsonl.gz`` since the GC/memory grids; either is
read), with the range's ``start_s``, ``end_s`` and ``step_s``.  The earlier layout, one file per
export (``prom/<kind>/<name>.json``, ``"file"`` instead of ``"line"``), is read too.

This module is the one reader of a run folder: :func:`load_lab_run` gives the response bodies as
parsed JSON (what :mod:`cfsim.lab` re-derives summaries from), :func:`read_lab_run` the same
exports as tidy frames.

What can be checked exactly.  ``prom/raw`` holds a *range query* of the counter: the value at each
step is the latest sample at or before that step, stamped with the step time, not the scrape
time.  ``rate()`` from those points is close to, not equal to, Prometheus' ``rate()``, which sees
the samples at their scrape times.  Only raw samples (``prom/samples``: an instant query of a
range selector returns them with their own timestamps, see
:func:`cfsim.io.get_prometheus_samples`) give agreement to rounding; :func:`check_lab_rates`
says which input it used in its ``input`` column.
"""
from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from cfsim.io.errors import CfsimParseError
from cfsim.io.manifest import read_json_file, read_manifest
from cfsim.io.prometheus_json import parse_prometheus_response
from cfsim.io.promql import counter_to_rate, parse_duration

__all__ = ["read_lab_run", "read_lab_metrics", "load_lab_run", "check_lab_rates", "prometheus_compat"]

_FUNC = r"(rate|increase|irate)\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\[\s*(\w+)\s*\]\s*\)"
_SINGLE = re.compile(rf"^\s*{_FUNC}\s*$")
_RATIO = re.compile(rf"^\s*{_FUNC}\s*/\s*{_FUNC}\s*$")


def prometheus_compat(version: str | None) -> str | None:
    """``"2.42"`` from ``"prometheus, version 2.42.0+ds (branch: ...)"`` or ``"2.42.0"``."""
    if not version:
        return None
    m = re.search(r"(\d+)\.(\d+)(?:\.\d+)?", str(version))
    return f"{m.group(1)}.{m.group(2)}" if m else None


def export_file(root: Path, kind: str) -> Path | None:
    """``prom/<kind>.jsonl.gz`` or ``prom/<kind>.jsonl``, whichever the run has."""
    for suffix in (".jsonl.gz", ".jsonl"):
        path = root / "prom" / f"{kind}{suffix}"
        if path.is_file():
            return path
    return None


def _open_lines(path: Path):
    return gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")


def _jsonl_bodies(path: Path, by_line: dict[int, list[tuple[str, str | None]]]):
    """Yield (line index, parsed body, export name, query) for the wanted lines, reading once."""
    try:
        with _open_lines(path) as fh:
            for index, blob in enumerate(fh):
                if index not in by_line:
                    continue
                try:
                    obj = json.loads(blob)
                except json.JSONDecodeError as exc:
                    raise CfsimParseError(str(path), f"not valid JSON: {exc.msg}", line=index + 1,
                                          column=exc.colno) from None
                for name, query in by_line.pop(index):
                    yield index, obj, name, query
    except (OSError, EOFError) as exc:  # a truncated or corrupt gzip file
        if isinstance(exc, FileNotFoundError):
            raise
        raise CfsimParseError(str(path), f"cannot read: {exc}") from None
    if by_line:
        first = min(by_line)
        raise CfsimParseError(str(path), f"manifest points at line {first + 1} (0-based {first}) but the file "
                                         f"has fewer lines; exports {sorted(n for v in by_line.values() for n, _ in v)}",
                              line=first + 1)


def _export_bodies(root: Path, manifest: dict[str, Any], kind: str, warnings: list[str]):
    """Yield (export name, query, parsed body, where) of one export kind, in any layout."""
    exports = manifest.get("exports") or {}
    listed: dict[str, dict[str, Any]] = exports.get(kind) or {}
    by_line: dict[int, list[tuple[str, str | None]]] = {}
    for name, spec in listed.items():
        if "line" in spec:
            by_line.setdefault(int(spec["line"]), []).append((name, spec.get("query")))
            continue
        path = root / spec["file"]
        if not path.is_file():
            warnings.append(f"{kind} export {name!r}: file {path} is missing")
            continue
        yield name, spec.get("query"), read_json_file(path), str(path)
    if by_line:
        path = export_file(root, kind)
        if path is None:
            warnings.append(f"{kind} exports: file {root / 'prom' / (kind + '.jsonl')} is missing (and no .jsonl.gz)")
            return
        for lineno, obj, name, query in _jsonl_bodies(path, by_line):
            yield name, query, obj, f"{path}:{lineno + 1}"
    if not listed:
        found = sorted((root / "prom" / kind).glob("*.json"))
        for path in found:  # not in the manifest: the file name is the metric (raw) or the export name
            yield path.stem, (path.stem if kind == "raw" else None), read_json_file(path), str(path)
        if found and kind != "samples":
            warnings.append(f"manifest lists no {kind} exports; read prom/{kind}/*.json")


def _manifest_and_summary(folder: str | os.PathLike) -> tuple[Path, dict[str, Any], dict[str, Any] | None]:
    root = Path(folder)
    manifest = read_manifest(root)
    summary = read_json_file(root / "summary.json") if (root / "summary.json").is_file() else None
    return root, manifest, summary


def load_lab_run(folder: str | os.PathLike) -> dict[str, Any]:
    """A lab run folder's files as parsed JSON: ``{"manifest", "summary", "raw": {metric: body},
    "rate": {name: body}, "samples": {metric: body}, "warnings"}`` (bodies as Prometheus returned
    them). Reads ``.jsonl.gz``, ``.jsonl`` and the per-file layout."""
    root, manifest, summary = _manifest_and_summary(folder)
    out: dict[str, Any] = {"manifest": manifest, "summary": summary, "warnings": []}
    for kind in ("raw", "rate", "samples"):
        out[kind] = {name: body for name, _, body, _ in _export_bodies(root, manifest, kind, out["warnings"])}
    return out


def read_lab_run(folder: str | os.PathLike) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
    """Read a lab run folder.

    Parameters
    ----------
    folder : path
        The run folder (holding ``manifest.json.gz`` or ``manifest.json``).

    Returns
    -------
    frames_by_metric : dict of str to DataFrame
        One tidy frame per export: raw exports under the metric name (``metric`` column = the
        metric), rate exports under the export name (``metric`` column = that name, e.g.
        ``cpu_usage_cores``), raw-sample exports under ``"samples:<metric>"``.
    meta : dict
        ``source``, ``format`` (``"cfsim-lab-run"``), ``run_id``, ``prometheus_version``,
        ``compat`` (for :mod:`cfsim.io.promql`), ``start``/``end`` (UTC), ``step`` [s],
        ``exports`` (name -> kind, query, file, series, samples, warnings), ``empty`` (metrics
        that had no data), ``summary`` (summary.json), ``manifest`` and ``warnings``.

    Raises
    ------
    FileNotFoundError
        Neither ``manifest.json.gz`` nor ``manifest.json`` in ``folder``.
    CfsimParseError
        A malformed file, named with its position.
    """
    root, manifest, summary = _manifest_and_summary(folder)
    exports = manifest.get("exports") or {}
    warnings: list[str] = []
    step = exports.get("step_s")
    frames: dict[str, pd.DataFrame] = {}
    export_meta: dict[str, dict[str, Any]] = {}
    for kind in ("raw", "rate", "samples"):
        for name, query, obj, where in _export_bodies(root, manifest, kind, warnings):
            frame, meta = parse_prometheus_response(obj, source=where, metric=name if kind == "rate" else None,
                                                    query=query)
            key = f"samples:{name}" if kind == "samples" else name
            frames[key] = frame
            export_meta[key] = {"kind": kind, "query": query, "file": where, "series": meta["series"],
                                "samples": meta["samples"], "warnings": meta["warnings"]}
    version = manifest.get("prometheus_version")
    out = {
        "source": str(root), "format": "cfsim-lab-run", "run_id": manifest.get("run_id"),
        "prometheus_version": version, "compat": prometheus_compat(version),
        "start": pd.Timestamp(exports["start_s"], unit="s", tz="UTC") if "start_s" in exports else None,
        "end": pd.Timestamp(exports["end_s"], unit="s", tz="UTC") if "end_s" in exports else None,
        "step": step, "exports": export_meta, "empty": list(exports.get("empty", [])),
        "summary": summary, "manifest": manifest, "warnings": warnings,
    }
    return frames, out


def read_lab_metrics(folder: str | os.PathLike, names: Sequence[str], kind: str = "raw"
                     ) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
    """Only the exports ``names`` of a lab run (what :func:`read_lab_run` gives under those names;
    ``kind="samples"``: the raw samples at their scrape times, under ``"samples:<metric>"`` there),
    reading the export file once and parsing no other line. Names the run did not export are
    missing from the frames and listed in ``meta["missing"]``.

    Returns ``(frames_by_metric, meta)`` with ``source``, ``manifest``, ``missing`` and ``warnings``.
    """
    root, manifest, _ = _manifest_and_summary(folder)
    exports = dict(manifest.get("exports") or {})
    if kind not in ("raw", "samples"):
        raise ValueError(f"kind must be 'raw' or 'samples', not {kind!r}")
    listed = exports.get(kind) or {}
    wanted = {n: listed[n] for n in names if n in listed}
    frames: dict[str, pd.DataFrame] = {}
    warnings: list[str] = []
    if wanted:
        exports[kind] = wanted
        for name, query, obj, where in _export_bodies(root, {"exports": exports}, kind, warnings):
            frames[name] = parse_prometheus_response(obj, source=where, query=query)[0]
    missing = [n for n in names if n not in frames]
    return frames, {"source": str(root), "manifest": manifest, "missing": missing, "warnings": warnings}


_RANGE = re.compile(r"\[\s*(\d+)ms\s*\]\s*$")


def _samples_cover_from(meta: dict[str, Any], metric: str) -> pd.Timestamp | None:
    """Start of the raw samples' coverage: the instant query ``m[<range>ms]`` at ``time_s``
    returns the samples in (time_s - range, time_s]."""
    spec = ((meta.get("manifest") or {}).get("exports") or {}).get("samples", {}).get(metric) or {}
    m = _RANGE.search(spec.get("query") or "")
    if not m or "time_s" not in spec:
        return None
    return pd.Timestamp(float(spec["time_s"]) - int(m.group(1)) / 1000, unit="s", tz="UTC")


def _ours(frames: dict[str, pd.DataFrame], func: str, metric: str, window: str, meta: dict[str, Any],
          compat: str, use_samples: bool) -> tuple[pd.DataFrame | None, str]:
    if use_samples and f"samples:{metric}" in frames:
        raw, used = frames[f"samples:{metric}"], "samples"
    elif metric in frames:
        raw, used = frames[metric], "range-query points"
    else:
        return None, f"no raw export of {metric}"
    got = counter_to_rate(raw, window, meta["step"], meta["start"], meta["end"], func=func, compat=compat)
    if used == "samples":
        # a step whose window reaches before the exported samples sees scrapes Prometheus had and
        # the export does not (since the GC/memory grids Prometheus scrapes ~4 s before the range)
        cover = _samples_cover_from(meta, metric)
        if cover is not None:
            got = got[got["timestamp"] - pd.Timedelta(seconds=parse_duration(window) / 1000) >= cover]
    return got, used


def check_lab_rates(run: str | os.PathLike | tuple[dict[str, pd.DataFrame], dict[str, Any]], *,
                    compat: str | None = None, use_samples: bool = True) -> pd.DataFrame:
    """Compare :func:`cfsim.io.rate` with the ``rate()`` exports Prometheus computed in a run.

    Handles exports of the forms ``f(m[w])`` and ``f(a[w]) / f(b[w])`` with ``f`` one of
    ``rate``, ``increase``, ``irate``; others are listed with the reason they were skipped.

    Parameters
    ----------
    run : path or (frames, meta)
        A run folder or what :func:`read_lab_run` returned.
    compat : str, optional
        Prometheus version rules; default the run's ``prometheus_version``.
    use_samples : bool
        Use ``prom/samples`` raw samples where the run has them (exact); False forces the
        step-aligned ``prom/raw`` points (approximate: shows how far a rate from a range query
        export is from Prometheus' own).

    Returns
    -------
    DataFrame
        One row per rate export: ``export``, ``query``, ``input`` (``samples`` = exact raw
        samples, ``range-query points`` = approximate), ``points`` compared, ``only_prometheus``,
        ``only_ours``, ``max_abs_err`` [unit of the export], ``max_rel_err`` and
        ``median_rel_err`` [-] (relative to Prometheus' value; inf where it is 0 and ours is not),
        ``skipped`` (reason or "").
    """
    frames, meta = read_lab_run(run) if not isinstance(run, tuple) else run
    version = compat or meta.get("compat") or "3.0"
    rows = []
    for name, info in meta["exports"].items():
        if info["kind"] != "rate":
            continue
        row: dict[str, Any] = {"export": name, "query": info["query"], "input": "", "points": 0,
                               "only_prometheus": 0, "only_ours": 0, "max_abs_err": np.nan,
                               "max_rel_err": np.nan, "median_rel_err": np.nan, "skipped": ""}
        rows.append(row)
        query = info["query"] or ""
        single, ratio = _SINGLE.match(query), _RATIO.match(query)
        if meta.get("step") is None or meta.get("start") is None:
            row["skipped"] = "manifest has no exports.start_s/end_s/step_s"
            continue
        if single:
            ours, used = _ours(frames, *single.groups(), meta, version, use_samples)
            if ours is None:
                row["skipped"] = used
                continue
        elif ratio:
            g = ratio.groups()
            num, used = _ours(frames, *g[:3], meta, version, use_samples)
            den, used_den = _ours(frames, *g[3:], meta, version, use_samples)
            if num is None or den is None:
                row["skipped"] = used if num is None else used_den
                continue
            used = used if used == used_den else f"{used} / {used_den}"
            ours = num.merge(den, on=["labels", "timestamp"], suffixes=("", "_den"))
            with np.errstate(divide="ignore", invalid="ignore"):
                ours["value"] = ours["value"] / ours["value_den"]
            ours = ours[["timestamp", "metric", "labels", "value"]]
        else:
            row["skipped"] = "not f(m[w]) or f(a[w]) / f(b[w]) with f in rate, increase, irate"
            continue
        theirs = frames[name]
        if used.startswith("samples") and len(ours):
            theirs = theirs[theirs["timestamp"] >= ours["timestamp"].min()]  # steps the samples cover
        merged = theirs.merge(ours, on=["labels", "timestamp"], how="outer", suffixes=("_prom", "_ours"),
                              indicator=True)
        both = merged[merged["_merge"] == "both"]
        x, y = both["value_prom"].to_numpy(), both["value_ours"].to_numpy()
        same = (x == y) | (np.isnan(x) & np.isnan(y))
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(same, 0.0, np.abs(y - x) / np.abs(x))
        absolute = np.where(same, 0.0, np.abs(y - x))
        row.update(input=used, points=len(both), only_prometheus=int((merged["_merge"] == "left_only").sum()),
                   only_ours=int((merged["_merge"] == "right_only").sum()),
                   max_abs_err=float(np.max(absolute)) if len(rel) else np.nan,
                   max_rel_err=float(np.max(rel)) if len(rel) else np.nan,
                   median_rel_err=float(np.median(rel)) if len(rel) else np.nan)
    return pd.DataFrame(rows, columns=["export", "query", "input", "points", "only_prometheus", "only_ours",
                                       "max_abs_err", "max_rel_err", "median_rel_err", "skipped"])
