"""The lab's own repeatability: how far runs of the same configuration differ.

A model error smaller than the spread between two real runs of one configuration cannot be
told from noise, so every validation report states that spread beside its errors. A repeated
point is a run ``<point>`` with repeats named ``repeat-<point>`` (the first grids: one repeat at
the end of the grid) or ``repeat2-<point>``, ``repeat3-<point>`` (design grids: back to back with
their point, see ``cfsim.lab.grid``). Its spread is the definition ``grid.json`` uses for
``drift.repeats``: ``(max - min) / mean`` over its runs for rates, ``max - min`` for ratios
(e.g. the throttled-period ratio), i.e. in the unit of the metric's error.
"""
from __future__ import annotations

import re
import statistics
from typing import Any, Mapping

from cfsim.lab.grid import point_of_repeat, relative_spread
from cfsim.validation import metrics as vm

_REPEAT = re.compile(r"^repeat\d*-.")


def repeat_point(run_name: str) -> str | None:
    """The point a repeat run repeats (``None`` for a run that is not a repeat)."""
    return point_of_repeat(run_name) if _REPEAT.match(run_name) else None


def spread(values: list[float], kind: str) -> float | None:
    """Spread of one metric over the runs of one point, in the unit of its error."""
    vals = [float(v) for v in values if v is not None]
    if len(vals) < 2:
        return None
    if kind == "absolute":
        return max(vals) - min(vals)
    return relative_spread(vals) if kind == "relative" else None


def repeat_spreads(observed: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Per repeated point, the spread of every metric with an error kind of its own.

    ``observed`` maps run names to their observed metrics (``cfsim.validation.metrics``).
    Returns ``{point: {metric: spread}}``; points without a repeat are left out.
    """
    groups: dict[str, list[str]] = {}
    for name in observed:
        point = repeat_point(name)
        if point is not None and point in observed:
            groups.setdefault(point, [point]).append(name)
    out: dict[str, dict[str, float]] = {}
    for point, names in sorted(groups.items()):
        row = {}
        for m in vm.METRICS:
            if m.kind not in ("relative", "absolute"):
                continue
            s = spread([observed[n].get(m.name) for n in names], m.kind)
            if s is not None:
                row[m.name] = s
        out[point] = row
    return out


def noise_summary(spreads: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float | int]]:
    """``{metric: {"median", "max", "points"}}`` over the repeated points."""
    per_metric: dict[str, list[float]] = {}
    for row in spreads.values():
        for metric, s in row.items():
            per_metric.setdefault(metric, []).append(s)
    return {metric: {"median": statistics.median(v), "max": max(v), "points": len(v)}
            for metric, v in per_metric.items()}
