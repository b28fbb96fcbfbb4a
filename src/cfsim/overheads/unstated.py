"""What a story leaves unstated, made explicit: pin one unknown to a level the story states, then
show the story's headline as a function of another unknown instead of choosing it.

A story such as 58 Tech's ("GOMAXPROCS 32 in an 8-core limit used 69 % of it at peak, GOMAXPROCS 8
used 19 %") states a level at the reference setting and a headline ratio, but not the workload's
shape: how many pushes a second, how much CPU each, how many goroutines one push readies. The
model's answer depends on them, so choosing one value each and comparing one ratio says little.
Instead:

1. the rate of work is solved so that the *reference* setting uses the story's level
   (:func:`solve_for_level`; what the story states, so this is not a fit to the headline);
2. for each value of a free unknown (e.g. ``workload.fanout``: goroutines a push readies), the
   headline is simulated at that solved rate (:func:`unstated_sweep`), together with figures the
   story states *beside* the headline (a profile's runtime share, a thread-switch rate), which
   are then an independent check of where along the unknown the story could lie.

Nothing here changes a model parameter: the answer is a curve over what the story does not say,
and the reader sees where the story's numbers fall on it.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import pandas as pd

from cfsim.scenario import Scenario, load_scenario

Summary = Mapping[str, Any]


def _simulate(sc: Scenario) -> dict[str, Any]:
    from cfsim.simulation import simulate

    return dict(simulate(sc).summary)


def solve_for_level(sc: Scenario, level: float, key: str = "workload.rate_per_s",
                    metric: str = "cpu_usage_cores", rtol: float = 0.01, max_iter: int = 6
                    ) -> tuple[float, dict[str, Any]]:
    """The value of ``key`` at which ``sc`` gives ``metric == level``, and that run's summary.

    ``metric`` must grow with ``key`` (CPU with the rate of work, below the limit), so each step
    scales ``key`` by ``level / metric`` (fixed-point iteration; converges in two to four steps
    where the metric is near-proportional). Where it is not (the runtime's own CPU a request falls
    as the rate grows), those steps can swing around the level; once ``max_iter`` of them have
    bracketed it, up to ``max_iter`` more interpolate within the bracket (regula falsi), which
    converges for any metric that grows with the key. Raises ``ValueError`` when the level cannot
    be reached: the metric is zero, or it stops following the key (e.g. the level is at or above
    the CPU limit, where usage saturates)."""
    if not level > 0:
        raise ValueError(f"solve_for_level: level must be > 0, got {level!r}")
    x = float(sc[key])
    if not x > 0:
        raise ValueError(f"solve_for_level: {key} must start > 0, got {x!r}")
    below: tuple[float, float] | None = None     # the largest key seen under the level, and its metric
    above: tuple[float, float] | None = None     # the smallest key seen over it
    for step in range(2 * max_iter):
        s = _simulate(sc.with_overrides([(key, x)]))
        got = s.get(metric)
        if not got:
            raise ValueError(f"solve_for_level: {metric} is {got!r} at {key}={x:g}; cannot scale to {level:g}")
        if abs(got / level - 1.0) <= rtol:
            return x, s
        if got < level and (below is None or x > below[0]):
            below = (x, float(got))
        elif got > level and (above is None or x < above[0]):
            above = (x, float(got))
        if step + 1 < max_iter:
            x *= level / got
        elif below is not None and above is not None and above[1] > below[1] and below[0] < above[0]:
            x = below[0] + (level - below[1]) * (above[0] - below[0]) / (above[1] - below[1])
        else:
            break
    raise ValueError(f"solve_for_level: {metric} did not reach {level:g} within {rtol:.0%} in {max_iter} steps "
                     f"(last {got:g} at {key}={x:g}); is the level reachable at this setting?")


def runtime_share(s: Summary) -> float | None:
    """The share of the process's CPU the Go runtime spends on itself (scheduler and GC, idle mark
    workers included). A CPU profile's stacks rooted in ``schedule``/``findRunnable`` and
    ``gcBgMarkWorker`` come closest; it files runtime work done on a goroutine's own stack (a
    channel send's ``goready`` -> ``wakep``, an assist) under that goroutine, so its share is lower."""
    u = s.get("user_cpu_fraction")
    return None if u is None else 1.0 - float(u)


def _point(base: str | Mapping[str, Any], reference: Sequence[str], other: Sequence[str], level: float,
           free_key: str, v: Any, solve_key: str, overrides: Sequence[str], rtol: float) -> dict[str, Any]:
    common: list[str | tuple[str, Any]] = [*overrides, (free_key, v)]
    x, ref = solve_for_level(load_scenario(base, [*common, *reference]), level, solve_key, rtol=rtol)
    oth = _simulate(load_scenario(base, [*common, *other, (solve_key, x)]))
    return {
        free_key: v, solve_key: x,
        "reference_cpu_cores": ref["cpu_usage_cores"], "other_cpu_cores": oth["cpu_usage_cores"],
        "cpu_ratio": oth["cpu_usage_cores"] / ref["cpu_usage_cores"],
        "reference_runtime_share": runtime_share(ref), "other_runtime_share": runtime_share(oth),
        "reference_thread_wakes_per_s": ref.get("os_thread_wakes_per_s"),
        "other_thread_wakes_per_s": oth.get("os_thread_wakes_per_s"),
        "other_throttled_ratio": oth.get("throttled_ratio"),
        "reference_throughput_per_s": ref.get("throughput_per_s"),
        "other_throughput_per_s": oth.get("throughput_per_s"),
    }


def unstated_sweep(base: str | Mapping[str, Any], reference: Sequence[str], other: Sequence[str],
                   level: float, free_key: str, free_values: Sequence[Any],
                   solve_key: str = "workload.rate_per_s", overrides: Sequence[str] = (),
                   rtol: float = 0.01, workers: int | None = 1) -> pd.DataFrame:
    """For each ``free_key`` value: ``solve_key`` solved so that the ``reference`` setting uses
    ``level`` cores (:func:`solve_for_level`), then the ``other`` setting at that value.

    ``reference``, ``other`` and ``overrides`` are override strings (``"go.gomaxprocs=8"``); ``base``
    a built-in scenario's name, a file or a dict. Columns: the free value, the solved value, CPU at
    both settings [cores] and their ratio (other / reference), runtime share of CPU at both
    (:func:`runtime_share`), OS-thread wake-ups a second at both, the throttled-period ratio at
    ``other`` and throughput at both. ``workers``: processes, one free value each (None: every CPU); the rows
    are the same on any number."""
    from cfsim.sweep.executors import map_in_order

    tasks = [(base, tuple(reference), tuple(other), level, free_key, v, solve_key, tuple(overrides), rtol)
             for v in free_values]
    return pd.DataFrame(list(map_in_order(_point, tasks, workers)))


def crossing(df: pd.DataFrame, x: str, y: str, target: float) -> float | None:
    """Where ``y`` first reaches ``target`` along ``x`` (linear between the sampled points), or
    None when no sampled interval brackets it."""
    pts = list(zip(df[x].astype(float), df[y].astype(float)))
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if (y0 - target) * (y1 - target) <= 0 and y1 != y0:
            return x0 + (target - y0) * (x1 - x0) / (y1 - y0)
    return None


__all__ = ["solve_for_level", "runtime_share", "unstated_sweep", "crossing"]
