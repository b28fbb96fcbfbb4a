"""A validation against an earlier one: per grid and metric, did the median error get worse?

A model change is judged by the grids it was not aimed at as much as by the one it was (the
project's rule: the validation figures of the older grids must not get worse). This module
compares two validations run for run by their ``runs`` rows (``cfsim validate --format json``,
or the ``report.json`` of ``--report``), so an earlier report written by an older cfsim, on an
older ``data/lab``, is a valid baseline as long as its rows carry ``grid``, ``role`` and
``errors``.

Per grid and metric the figure is the median |error| over the held-out runs (calibration runs and
runs a fit used are left out, as in the report's own tables); the CPU only where the model
predicts it (``uncapped`` and ``contended`` regimes: a quota or GOMAXPROCS that caps the CPU
decides it, not the model). A figure is *worse* when it grew by more than ``rel_tol`` of itself
and by more than the metric's floor (0.003 for relative errors, 0.005 for absolute ones: below
those the repeats of one point differ more); *better* symmetrically; else *same*.
"""
from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path
from typing import Any, Iterable, Mapping

from cfsim.validation import metrics as vm

#: the metrics compared: every one with a goal, but those that must match exactly
COMPARED = tuple(m.name for m in vm.METRICS if m.goal is not None and m.kind != "exact")
#: the regimes where the CPU is the model's prediction (elsewhere a cap decides it)
PREDICTED_REGIMES = ("uncapped", "contended")
HELD_OUT_ROLES = ("point", "repeat")
REL_TOL = 0.05
FLOOR = {"relative": 0.003, "absolute": 0.005}
_KIND = {m.name: m.kind for m in vm.METRICS}


def read_validation_runs(path: str | Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The ``runs`` rows of a validation written as JSON (gzip-compressed or not), and
    ``{"path", "runs"}``.

    Raises ValueError naming the file (and the line and column of a JSON error) when it is not a
    validation: not JSON, no ``runs`` list, or a row without ``grid`` or ``errors``."""
    p = Path(path)
    try:
        raw = p.read_bytes()
        data = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{p}: not a JSON text (not UTF-8 at byte {exc.start})") from None
    except (gzip.BadGzipFile, EOFError) as exc:
        raise ValueError(f"{p}: a broken gzip file ({exc})") from None
    runs = data.get("runs") if isinstance(data, dict) else None
    if not isinstance(runs, list):
        raise ValueError(f"{p}: not a cfsim validation (no 'runs' list; write one with "
                         "`cfsim validate PATH --format json` or --report DIR)")
    for i, r in enumerate(runs):
        if not isinstance(r, dict) or "grid" not in r or not isinstance(r.get("errors"), dict):
            raise ValueError(f"{p}: runs[{i}] has no 'grid' or 'errors'")
    return runs, {"path": str(p), "runs": len(runs)}


def grid_errors(runs: Iterable[Mapping[str, Any]], names: tuple[str, ...] = COMPARED) -> dict[str, dict[str, dict]]:
    """``{grid: {metric: {"median_abs", "n"}}}`` over the held-out runs (see the module doc)."""
    values: dict[str, dict[str, list[float]]] = {}
    for r in runs:
        if r.get("role") not in HELD_OUT_ROLES or not r.get("held_out", True):
            continue
        for name in names:
            v = r["errors"].get(name)
            if v is None or (name == "cpu_usage_cores" and r.get("regime") not in PREDICTED_REGIMES):
                continue
            values.setdefault(r["grid"], {}).setdefault(name, []).append(abs(float(v)))
    return {g: {m: {"median_abs": statistics.median(v), "n": len(v)} for m, v in ms.items()}
            for g, ms in values.items()}


def change(name: str, before: float, after: float, rel_tol: float = REL_TOL) -> str:
    """``"worse"``, ``"better"`` or ``"same"`` for a median |error| that went from ``before`` to
    ``after`` (see the module doc).

    >>> change("throughput_per_s", 0.040, 0.046), change("throughput_per_s", 0.040, 0.042)
    ('worse', 'same')
    >>> change("throttled_ratio", 0.010, 0.014), change("latency_p99_s", 0.30, 0.20)
    ('same', 'better')
    """
    floor = FLOOR[_KIND.get(name, "relative")]
    d = after - before
    if d > rel_tol * before and d > floor:
        return "worse"
    if -d > rel_tol * after and -d > floor:
        return "better"
    return "same"


def compare(before: Iterable[Mapping[str, Any]], after: Iterable[Mapping[str, Any]],
            rel_tol: float = REL_TOL) -> dict[str, Any]:
    """Per grid and metric both validations report: the two medians, their run counts and the
    change; and the counts of each change. Grids only one side has are listed apart; a metric only
    one side reports for a grid is left out."""
    a, b = grid_errors(before), grid_errors(after)
    rows = []
    for g in sorted(set(a) & set(b)):
        for name in COMPARED:
            x, y = a[g].get(name), b[g].get(name)
            if x is None or y is None:
                continue
            rows.append({"grid": g, "metric": name, "before": x["median_abs"], "after": y["median_abs"],
                         "n_before": x["n"], "n_after": y["n"],
                         "change": change(name, x["median_abs"], y["median_abs"], rel_tol)})
    counts = {k: sum(1 for r in rows if r["change"] == k) for k in ("worse", "better", "same")}
    return {"rows": rows, "counts": counts, "rel_tol": rel_tol,
            "only_before": sorted(set(a) - set(b)), "only_after": sorted(set(b) - set(a))}


def to_markdown(result: Mapping[str, Any], baseline: str = "the earlier validation") -> list[str]:
    """The comparison's section of the report: the counts, then the worse and better rows."""
    c = result["counts"]
    lines = ["", f"## Against {baseline} (median |error| of held-out runs per grid; "
                 "cfsim.validation.against)", "",
             f"{c['worse']} worse, {c['better']} better, {c['same']} the same (a change counts beyond "
             f"{result['rel_tol']:.0%} of the figure and 0.003 / 0.005)."]
    for kind in ("worse", "better"):
        rows = [r for r in result["rows"] if r["change"] == kind]
        if rows:
            lines += ["", f"| {kind} | metric | before (n) | now (n) |", "|---|---|---|---|"]
            lines += [f"| {r['grid']} | {r['metric']} | {r['before']:.4g} ({r['n_before']}) | "
                      f"{r['after']:.4g} ({r['n_after']}) |" for r in rows]
    for side, key in (("only the earlier validation has", "only_before"), ("new in this one", "only_after")):
        if result[key]:
            lines += ["", f"Grids {side} ({len(result[key])}): " + ", ".join(result[key]) + "."]
    return lines
