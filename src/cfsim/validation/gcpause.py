"""The GC's stop-the-world pause a stop, lab against twin, by GOMAXPROCS.

``cfsim validate`` compares the pause time a second (``gc_pause_s_per_s``: the runtime's
``/sched/pauses/total/gc:seconds``, each pause from deciding to stop the world to the world
started again, ``stopTheWorldWithSema`` / ``startTheWorldWithSema`` in ``src/runtime/proc.go``).
Its error mixes two things: how many cycles ran and how long each stop lasted. Dividing by the
cycles a second and by the two stops of a cycle (sweep termination in ``gcStart``, mark
termination in ``gcMarkDone``, ``src/runtime/mgc.go``) leaves the length of one stop, which is
what the number of Ps changes: at one P the stopping M is the only one, from two on it must
preempt the others and wake Ms again at the restart. So the table is split by GOMAXPROCS, and
by whether a cap decides the run (a throttled period that falls inside a stop lengthens it on
both sides, so those runs are kept apart).

>>> def run(g, lab_pause, lab_cycles, sim_pause, sim_cycles, regime="uncapped"):
...     return {"regime": regime, "observed": {"gomaxprocs": g, "gc_pause_s_per_s": lab_pause,
...             "gc_cycles_per_s": lab_cycles}, "simulated": {"gc_pause_s_per_s": sim_pause,
...             "gc_cycles_per_s": sim_cycles}}
>>> rows = pause_by_gomaxprocs([run(1, 5e-5, 1.0, 6e-5, 1.0), run(2, 2e-4, 1.0, 5e-5, 1.0),
...                             run(2, 4e-4, 2.0, 1e-4, 2.0)])
>>> [(r["gomaxprocs"], r["runs"], r["lab_us_per_stop"], r["model_us_per_stop"], r["model_over_lab"]) for r in rows]
[('1', 1, 25.0, 30.0, 1.2), ('2', 2, 100.0, 25.0, 0.25)]

A mean hides how the stops spread: a few long ones (a stop that spans a throttled period, a
restart whose coordinator lost its CPU) and many short ones give the same mean as even ones.
So each row also gives a cycle's typical and longest stop-the-world time as a dashboard shows
them (``go_gc_duration_seconds``' 0.5 and 1 quantiles over the last 256 cycles:
``gc_cycle_pause_p50_s``, ``gc_cycle_pause_max_s``), lab and twin, over the runs that have them.
"""
from __future__ import annotations

import statistics
from typing import Any, Mapping

from cfsim.validation.regimes import CAPPED, GOMAXPROCS_BINS, gomaxprocs_bin, run_gomaxprocs

#: stops of the world a GC cycle makes (sweep termination, mark termination)
STOPS_PER_CYCLE = 2


def us_per_stop(pause_s_per_s: float | None, cycles_per_s: float | None) -> float | None:
    """One stop's mean length [us] from the pause time and the cycles a second; None without
    cycles.

    >>> us_per_stop(2e-4, 2.0)
    50.0
    >>> us_per_stop(1e-4, 0.0) is None
    True
    """
    if pause_s_per_s is None or not cycles_per_s or cycles_per_s <= 0:
        return None
    return pause_s_per_s / cycles_per_s / STOPS_PER_CYCLE * 1e6


#: a cycle's stop-the-world time, as a dashboard reads it: (metric, column's stem)
CYCLE_QUANTILES = (("gc_cycle_pause_p50_s", "cycle_p50"), ("gc_cycle_pause_max_s", "cycle_max"))


def _medians(pairs: list[tuple[float, float]]) -> tuple[float, float, float]:
    """Lab's median, twin's median, and the median of the per-run ratios twin / lab."""
    return (statistics.median(a for a, _ in pairs), statistics.median(b for _, b in pairs),
            statistics.median(b / a for a, b in pairs))


def pause_by_gomaxprocs(runs: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per GOMAXPROCS bin and cap (see the module docstring), over the runs where both sides ran
    GC cycles: runs, the medians of one stop's length [us] in the lab and in the twins, and the
    median of the per-run ratio twin / lab; then the same for a cycle's typical and longest
    stop-the-world time (``cycle_p50_runs``, ``lab_us_cycle_p50``, ``model_us_cycle_p50``,
    ``cycle_p50_model_over_lab``, and ``cycle_max_...``; None where no run has them).

    >>> r = {"regime": "uncapped", "observed": {"gomaxprocs": 8, "gc_pause_s_per_s": 4e-4, "gc_cycles_per_s": 1.0,
    ...      "gc_cycle_pause_p50_s": 3e-4, "gc_cycle_pause_max_s": 2e-3}, "simulated": {"gc_pause_s_per_s": 4e-4,
    ...      "gc_cycles_per_s": 1.0, "gc_cycle_pause_p50_s": 6e-4, "gc_cycle_pause_max_s": 1e-3}}
    >>> row, = pause_by_gomaxprocs([r])
    >>> row["model_over_lab"], row["lab_us_cycle_p50"], row["cycle_p50_model_over_lab"], row["cycle_max_model_over_lab"]
    (1.0, 300.0, 2.0, 0.5)
    """
    groups: dict[tuple[str, bool], list[tuple[float, float]]] = {}
    cycles: dict[tuple[str, bool, str], list[tuple[float, float]]] = {}
    for r in runs:
        obs, sim = r["observed"], r.get("simulated") or {}
        lab = us_per_stop(obs.get("gc_pause_s_per_s"), obs.get("gc_cycles_per_s"))
        model = us_per_stop(sim.get("gc_pause_s_per_s"), sim.get("gc_cycles_per_s"))
        label = gomaxprocs_bin(run_gomaxprocs(r))
        if lab is None or model is None or lab <= 0 or label is None:
            continue
        key = (label, r.get("regime") in CAPPED)
        groups.setdefault(key, []).append((lab, model))
        for metric, stem in CYCLE_QUANTILES:
            a, b = obs.get(metric), sim.get(metric)
            if a and b and a > 0 and b > 0:
                cycles.setdefault((*key, stem), []).append((a * 1e6, b * 1e6))
    order = {label: i for i, (label, _, _) in enumerate(GOMAXPROCS_BINS)}
    out = []
    for (label, capped), pairs in sorted(groups.items(), key=lambda kv: (kv[0][1], order[kv[0][0]])):
        lab_med, model_med, ratio = _medians(pairs)
        row: dict[str, Any] = {"gomaxprocs": label, "capped": capped, "runs": len(pairs),
                               "lab_us_per_stop": round(lab_med, 1), "model_us_per_stop": round(model_med, 1),
                               "model_over_lab": round(ratio, 3)}
        for _, stem in CYCLE_QUANTILES:
            got = cycles.get((label, capped, stem))
            lab_q, model_q, ratio_q = _medians(got) if got else (None, None, None)
            row.update({f"{stem}_runs": len(got or ()),
                        f"lab_us_{stem}": None if lab_q is None else round(lab_q, 1),
                        f"model_us_{stem}": None if model_q is None else round(model_q, 1),
                        f"{stem}_model_over_lab": None if ratio_q is None else round(ratio_q, 3)})
        out.append(row)
    return out
