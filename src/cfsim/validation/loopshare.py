"""How much of an item's CPU follows the lab workload's loop: measured from repeats, with no model.

The lab workload turns each item's CPU milliseconds into a count of its busy loop's rounds, fixed at
start-up (``calibration_rounds_per_cpu_ms`` in the manifest, :func:`cfsim.validation.normalise.
startup_rounds`), and that count moves by a few to 15 % between repeats of one design point minutes
apart. Within a repeated point, the slope of log(CPU an item) on log(start-up rounds) is therefore
the share of an item's CPU that follows the loop: the rest (the HTTP server, the runtime's
scheduling, the GC) does not. The twins take the rounds as an input, so the same slope over their
runs is the model's own share. Two effects move the lab's slope apart from its share, in opposite
directions: a host whose speed state at start-up lasts into the window moves every cost with the
rounds (the slope rises toward 1), and a noisy start-up count attenuates it (errors in the
variable). A diagnostic beside the validation, not a twin input.
"""
from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

__all__ = ["loop_share_slopes", "MIN_RUNS"]

#: a grid's slope is reported from at least this many runs in repeated points
MIN_RUNS = 6


def _per_item(summary: Mapping[str, Any]) -> float | None:
    cpu, thr = summary.get("cpu_usage_cores"), summary.get("throughput_per_s")
    return cpu / thr if cpu and thr and cpu > 0 and thr > 0 else None


def loop_share_slopes(runs: list[Mapping[str, Any]],
                      rounds_of: Callable[[Path], float | None] | None = None) -> dict[str, dict[str, Any]]:
    """Per grid, over the held-out runs of its repeated design points (a point and its ``repeat*-``
    runs): the within-point least-squares slope of log(CPU an item) on log(start-up rounds) for the
    lab and for the twins, the lab's correlation, and the number of runs. ``rounds_of`` reads a run
    folder's start-up rounds (default :func:`cfsim.validation.normalise.startup_rounds`).

    >>> rows = [{"grid": "g", "run": f"lab/g/{n}", "path": f"/x/{n}", "held_out": True,
    ...          "observed": {"cpu_usage_cores": 0.5 * r ** 0.7, "throughput_per_s": 1.0},
    ...          "simulated": {"cpu_usage_cores": 0.5 * r ** 0.8, "throughput_per_s": 1.0}}
    ...         for n, r in (("p0", 1.0), ("repeat2-p0", 1.1), ("repeat3-p0", 0.9),
    ...                      ("p1", 1.0), ("repeat2-p1", 1.2), ("repeat3-p1", 0.95))]
    >>> rounds = {f"/x/{n}": r for n, r in (("p0", 1.0), ("repeat2-p0", 1.1), ("repeat3-p0", 0.9),
    ...                                      ("p1", 1.0), ("repeat2-p1", 1.2), ("repeat3-p1", 0.95))}
    >>> s = loop_share_slopes(rows, lambda p: rounds[str(p)])["g"]
    >>> s["runs"], round(s["lab_slope"], 3), round(s["twin_slope"], 3)
    (6, 0.7, 0.8)
    """
    from cfsim.lab.grid import point_of_repeat

    if rounds_of is None:
        from cfsim.validation.normalise import startup_rounds as rounds_of
    points: dict[tuple[str, str], list[tuple[float, float, float]]] = defaultdict(list)
    for r in runs:
        if not r.get("held_out") or not r.get("path"):
            continue
        lab, twin = _per_item(r["observed"]), _per_item(r["simulated"])
        rounds = rounds_of(Path(r["path"]))
        if lab is None or twin is None or not rounds or rounds <= 0:
            continue
        name = str(r["run"]).rsplit("/", 1)[-1]
        point = point_of_repeat(name) if name.startswith("repeat") and "-" in name else name
        points[(r["grid"], point)].append((math.log(rounds), math.log(lab), math.log(twin)))
    centred: dict[str, list[np.ndarray]] = defaultdict(list)
    for (grid, _), rows in points.items():
        if len(rows) >= 2:
            a = np.array(rows)
            centred[grid].append(a - a.mean(axis=0))
    out: dict[str, dict[str, Any]] = {}
    for grid, parts in centred.items():
        a = np.vstack(parts)
        x, lab, twin = a[:, 0], a[:, 1], a[:, 2]
        sxx = float(x @ x)
        if len(a) < MIN_RUNS or sxx <= 0:
            continue
        corr = float(x @ lab / math.sqrt(sxx * float(lab @ lab))) if float(lab @ lab) > 0 else None
        out[grid] = {"runs": len(a), "lab_slope": float(x @ lab) / sxx, "twin_slope": float(x @ twin) / sxx,
                     "lab_corr": corr, "rounds_sd_log": float(np.sqrt(sxx / len(a)))}
    return out
