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

A twin is one realisation of the model, so a grid's figure moves with the seeds too (a GC cycle
more or less in a short window, one period throttled or not). Given the same model's validation
at other seeds (``cfsim validate --seed-offset K``), each figure's *seed noise* is the largest
distance between its value now and at those seeds, and a change then counts only beyond that as
well: ``worse`` means the new model is worse by more than its own seeds move the figure.

The earlier figure is one realisation too. Given the earlier model's validation at other seeds (its
own code on its own data, each twin's seed shifted as ``--seed-offset`` does), its figures' seed
noise is measured the same way, and the two are added as independent errors add:
``sqrt(noise_now**2 + noise_before**2)``. Either side alone is used as it is when the other has none.
"""
from __future__ import annotations

import gzip
import json
import math
import statistics
from pathlib import Path
from typing import Any, Iterable, Mapping

from cfsim.validation import metrics as vm
from cfsim.validation.twin import CALIBRATION_CHOICES

#: the metrics compared: every one with a goal, but those that must match exactly
COMPARED = tuple(m.name for m in vm.METRICS if m.goal is not None and m.kind != "exact")
#: the regimes where the CPU is the model's prediction (elsewhere a cap decides it)
PREDICTED_REGIMES = ("uncapped", "contended")
HELD_OUT_ROLES = ("point", "repeat")
REL_TOL = 0.05
FLOOR = {"relative": 0.003, "absolute": 0.005}


def read_validation_runs(path: str | Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The ``runs`` rows of a validation written as JSON (gzip-compressed or not), and
    ``{"path", "runs", "calibration"}`` (which calibration runs its twins took; ``"all"`` for a
    validation written before the choice existed, when every twin took all of them).

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
    calibration = data.get("calibration", "all")
    if calibration not in CALIBRATION_CHOICES:
        raise ValueError(f"{p}: 'calibration' is {calibration!r}, not one of {', '.join(CALIBRATION_CHOICES)}")
    return runs, {"path": str(p), "runs": len(runs), "calibration": calibration}


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


def change(name: str, before: float, after: float, rel_tol: float = REL_TOL, noise: float = 0.0) -> str:
    """``"worse"``, ``"better"`` or ``"same"`` for a median |error| that went from ``before`` to
    ``after``, a change counting beyond ``noise`` too (the figure's seed noise; see the module doc).

    >>> change("throughput_per_s", 0.040, 0.046), change("throughput_per_s", 0.040, 0.042)
    ('worse', 'same')
    >>> change("throttled_ratio", 0.010, 0.014), change("latency_p99_s", 0.30, 0.20)
    ('same', 'better')
    >>> change("throughput_per_s", 0.040, 0.046, noise=0.008)
    'same'
    """
    metric = vm.BY_NAME.get(name)
    floor = FLOOR[metric.kind if metric else "relative"]
    d = after - before
    if d > rel_tol * before and d > floor and d > noise:
        return "worse"
    if -d > rel_tol * after and -d > floor and -d > noise:
        return "better"
    return "same"


def seed_noise(after: Mapping[str, Mapping[str, Mapping[str, Any]]],
               others: Iterable[Mapping[str, Mapping[str, Mapping[str, Any]]]]) -> dict[tuple[str, str], float]:
    """Per ``(grid, metric)`` the largest distance between a figure of ``after`` (:func:`grid_errors`)
    and the same figure in each of ``others`` (the same model's validations at other seeds); only
    figures every one of them has.

    >>> now = {"g": {"throughput_per_s": {"median_abs": 0.04, "n": 9}}}
    >>> seed_noise(now, [{"g": {"throughput_per_s": {"median_abs": 0.043, "n": 9}}},
    ...                  {"g": {"throughput_per_s": {"median_abs": 0.035, "n": 9}}}])
    {('g', 'throughput_per_s'): 0.005}
    """
    others = list(others)
    out: dict[tuple[str, str], float] = {}
    if not others:
        return out
    for g, ms in after.items():
        for name, fig in ms.items():
            values = [o.get(g, {}).get(name) for o in others]
            if any(v is None for v in values):
                continue
            out[(g, name)] = round(max(abs(v["median_abs"] - fig["median_abs"]) for v in values), 12)
    return out


def combined_noise(now: float | None, before: float | None) -> float | None:
    """The seed noise of a change between two figures, each with its own (see the module doc).

    >>> combined_noise(0.003, 0.004), combined_noise(0.003, None), combined_noise(None, None)
    (0.005, 0.003, None)
    """
    if now is None and before is None:
        return None
    return round(math.hypot(now or 0.0, before or 0.0), 12)


def compare(before: Iterable[Mapping[str, Any]], after: Iterable[Mapping[str, Any]],
            rel_tol: float = REL_TOL, noise: Iterable[Iterable[Mapping[str, Any]]] = (),
            baseline_noise: Iterable[Iterable[Mapping[str, Any]]] = ()) -> dict[str, Any]:
    """Per grid and metric both validations report: the two medians, their run counts and the
    change; and the counts of each change. Grids only one side has are listed apart; a metric only
    one side reports for a grid is left out. ``noise``: the runs of the ``after`` model's
    validations at other seeds; each row then carries its figure's ``seed_noise`` and its change
    counts beyond it (a figure they do not all have is judged without). ``baseline_noise``: the
    same for the ``before`` model (``baseline_seed_noise``); with both, a change counts beyond
    their :func:`combined_noise` (``noise``)."""
    a, b = grid_errors(before), grid_errors(after)
    noise_runs = [list(n) for n in noise]
    base_runs = [list(n) for n in baseline_noise]
    spread = seed_noise(b, [grid_errors(n) for n in noise_runs])
    base_spread = seed_noise(a, [grid_errors(n) for n in base_runs])
    rows = []
    for g in sorted(set(a) & set(b)):
        for name in COMPARED:
            x, y = a[g].get(name), b[g].get(name)
            if x is None or y is None:
                continue
            row = {"grid": g, "metric": name, "before": x["median_abs"], "after": y["median_abs"],
                   "n_before": x["n"], "n_after": y["n"]}
            if noise_runs:
                row["seed_noise"] = spread.get((g, name))
            allowance = combined_noise(row.get("seed_noise"), base_spread.get((g, name)))
            if base_runs:
                row["baseline_seed_noise"] = base_spread.get((g, name))
                row["noise"] = allowance
            row["change"] = change(name, x["median_abs"], y["median_abs"], rel_tol, allowance or 0.0)
            rows.append(row)
    counts = {k: sum(1 for r in rows if r["change"] == k) for k in ("worse", "better", "same")}
    out = {"rows": rows, "counts": counts, "rel_tol": rel_tol, "noise_validations": len(noise_runs),
           "baseline_noise_validations": len(base_runs),
           "only_before": sorted(set(a) - set(b)), "only_after": sorted(set(b) - set(a))}
    if noise_runs or base_runs:
        # what the seed alone would have counted: the same comparison with no noise allowance
        out["counts_without_noise"] = {k: sum(1 for r in rows if change(r["metric"], r["before"], r["after"], rel_tol)
                                              == k) for k in ("worse", "better", "same")}
    return out


def to_markdown(result: Mapping[str, Any], baseline: str = "the earlier validation") -> list[str]:
    """The comparison's section of the report: the counts, then the worse and better rows."""
    c = result["counts"]
    k = result.get("noise_validations") or 0
    kb = result.get("baseline_noise_validations") or 0
    rule = f"{result['rel_tol']:.0%} of the figure and 0.003 / 0.005"
    if k or kb:
        w = result["counts_without_noise"]
        sides = [f"this model's validation and {k} at other seeds"] if k else []
        sides += [f"the earlier model's and {kb} of its own at other seeds"] if kb else []
        rule += (" and the figure's seed noise, its largest move between " + " and between ".join(sides)
                 + (", the two added as independent errors (sqrt of the sum of squares)" if k and kb else "")
                 + f" (without that allowance: {w['worse']} worse, {w['better']} better)")
    lines = ["", f"## Against {baseline} (median |error| of held-out runs per grid; "
                 "cfsim.validation.against)", "",
             f"{c['worse']} worse, {c['better']} better, {c['same']} the same (a change counts beyond {rule})."]
    for kind in ("worse", "better"):
        rows = [r for r in result["rows"] if r["change"] == kind]
        if rows:
            cols = [c for c in ("seed_noise", "baseline_seed_noise", "noise") if c in rows[0]]
            names = {"seed_noise": "seed noise", "baseline_seed_noise": "earlier model's seed noise",
                     "noise": "both"}
            head = f"| {kind} | metric | before (n) | now (n) |" + "".join(f" {names[c]} |" for c in cols)
            lines += ["", head, "|---|---|---|---|" + "---|" * len(cols)]
            for r in rows:
                line = (f"| {r['grid']} | {r['metric']} | {r['before']:.4g} ({r['n_before']}) | "
                        f"{r['after']:.4g} ({r['n_after']}) |")
                line += "".join(" - |" if r.get(c) is None else f" {r[c]:.3g} |" for c in cols)
                lines.append(line)
    for side, key in (("only the earlier validation has", "only_before"), ("new in this one", "only_after")):
        if result[key]:
            lines += ["", f"Grids {side} ({len(result[key])}): " + ", ".join(result[key]) + "."]
    return lines
