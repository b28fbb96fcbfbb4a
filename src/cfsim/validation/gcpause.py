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


def pause_by_gomaxprocs(runs: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per GOMAXPROCS bin and cap (see the module docstring), over the runs where both sides ran
    GC cycles: runs, the medians of one stop's length [us] in the lab and in the twins, and the
    median of the per-run ratio twin / lab."""
    groups: dict[tuple[str, bool], list[tuple[float, float]]] = {}
    for r in runs:
        obs, sim = r["observed"], r.get("simulated") or {}
        lab = us_per_stop(obs.get("gc_pause_s_per_s"), obs.get("gc_cycles_per_s"))
        model = us_per_stop(sim.get("gc_pause_s_per_s"), sim.get("gc_cycles_per_s"))
        label = gomaxprocs_bin(run_gomaxprocs(r))
        if lab is None or model is None or lab <= 0 or label is None:
            continue
        groups.setdefault((label, r.get("regime") in CAPPED), []).append((lab, model))
    order = {label: i for i, (label, _, _) in enumerate(GOMAXPROCS_BINS)}
    out = []
    for (label, capped), pairs in sorted(groups.items(), key=lambda kv: (kv[0][1], order[kv[0][0]])):
        out.append({"gomaxprocs": label, "capped": capped, "runs": len(pairs),
                    "lab_us_per_stop": round(statistics.median(a for a, _ in pairs), 1),
                    "model_us_per_stop": round(statistics.median(b for _, b in pairs), 1),
                    "model_over_lab": round(statistics.median(b / a for a, b in pairs), 3)})
    return out
