"""Hardware in the loop: the VPA's resize trajectory in the lab against the twin's own.

The twin of a ``lab.vpa_in_the_loop`` run is not given the quota writes the run recorded; it runs
cfsim's recommender and updater on the simulated cgroup. What is compared is the trajectory: how
many resizes, when, and to what limit.
"""
from __future__ import annotations

import statistics
from typing import Any, Mapping, Sequence


def vpa_steps(changes: Sequence[Mapping[str, Any]]) -> list[tuple[float, float | None]]:
    """``[(t_s, cpu_limit_cores), ...]`` of the VPA's actions among recorded quota changes."""
    return [(float(c["t_s"]), c.get("cpu_limit_cores")) for c in changes if c.get("vpa_action")]


def compare_trajectories(recorded: Sequence[Mapping[str, Any]],
                         simulated: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Resize by resize, in order: time difference [s] and relative limit difference (sim - lab).

    >>> lab = [{"t_s": 5.7, "cpu_limit_cores": 0.627, "vpa_action": "resize"},
    ...        {"t_s": 11.3, "cpu_limit_cores": 0.763, "vpa_action": "resize"}]
    >>> sim = [{"t_s": 6.0, "cpu_limit_cores": 0.587, "vpa_action": "resize"}]
    >>> c = compare_trajectories(lab, sim)
    >>> c["resizes_lab"], c["resizes_sim"], c["steps"][0]["dt_s"], round(c["steps"][0]["limit_error"], 4)
    (2, 1, 0.3, -0.0638)
    """
    lab, sim = vpa_steps(recorded), vpa_steps(simulated)
    steps = []
    for (t_l, lim_l), (t_s, lim_s) in zip(lab, sim):
        err = None if not lim_l or lim_s is None else round((lim_s - lim_l) / lim_l, 6)
        steps.append({"t_lab_s": t_l, "t_sim_s": t_s, "dt_s": round(t_s - t_l, 6),
                      "limit_lab_cores": lim_l, "limit_sim_cores": lim_s, "limit_error": err})
    final_l = lab[-1][1] if lab else None
    final_s = sim[-1][1] if sim else None
    dts = [abs(s["dt_s"]) for s in steps]
    lerr = [abs(s["limit_error"]) for s in steps if s["limit_error"] is not None]
    return {"resizes_lab": len(lab), "resizes_sim": len(sim), "steps": steps,
            "median_abs_dt_s": statistics.median(dts) if dts else None,
            "median_abs_limit_error": statistics.median(lerr) if lerr else None,
            "final_limit_lab_cores": final_l, "final_limit_sim_cores": final_s,
            "final_limit_error": (None if not final_l or final_s is None
                                  else round((final_s - final_l) / final_l, 6))}
