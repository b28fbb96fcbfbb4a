"""A twin simulated with several seeds: the prediction is their mean, the spread their own noise.

A lab run is one realisation of its process and a twin is one realisation of the model: a twin's
error holds the lab's noise (the repeats measure it, :mod:`cfsim.validation.noise`) *and* the
twin's own. The twin's own is not small where a few discrete events decide a figure: a GC cycle
more or less in a window of four, one period throttled or not, one request that waited behind
a stop. Simulated with ``N`` seeds (the run's own and the next ``N - 1``), the model's prediction
is the mean of the replicas' metrics, and the spread (max - min) of their errors tells how much of
a twin's error, and of a change between two model versions, the seed alone makes.

Where the replicas disagree on an OOM kill the majority decides, and the mean is taken over the
replicas on that side (a killed replica has no window to compare).
"""
from __future__ import annotations

import statistics
from typing import Any, Mapping, Sequence

from cfsim.validation import metrics as vm


def replica_seeds(base_seed: int, seeds: int) -> list[int]:
    """The seeds of an ensemble of ``seeds`` twins: the run's own first, then the next ones.

    >>> replica_seeds(7, 3)
    [7, 8, 9]
    """
    if seeds < 1:
        raise ValueError(f"seeds must be >= 1 (got {seeds})")
    return [base_seed + k for k in range(seeds)]


def _killed(metrics: Mapping[str, Any]) -> bool:
    return bool(metrics.get("oom_killed"))


def _side(replicas: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The replicas the mean is taken over: the killed ones if more than half were killed, else
    the others."""
    killed = [r for r in replicas if _killed(r)]
    return killed if 2 * len(killed) > len(replicas) else [r for r in replicas if not _killed(r)]


def ensemble_mean(replicas: Sequence[Mapping[str, float | None]]) -> dict[str, float | None]:
    """The mean of the replicas' metrics (:func:`cfsim.validation.report._derived` of each twin),
    a metric missing in every replica None; one replica is returned as it is.

    >>> ensemble_mean([{"throughput_per_s": 100.0, "oom_killed": 0}, {"throughput_per_s": 110.0, "oom_killed": 0}])
    {'throughput_per_s': 105.0, 'oom_killed': 0}
    >>> m = ensemble_mean([{"throughput_per_s": 100.0, "oom_killed": 1}, {"throughput_per_s": 90.0, "oom_killed": 0},
    ...                    {"throughput_per_s": 80.0, "oom_killed": 0}])
    >>> m["throughput_per_s"], m["oom_killed"]
    (85.0, 0)
    """
    if len(replicas) == 1:
        return dict(replicas[0])
    side = _side(replicas)
    keys = list(dict.fromkeys(k for r in replicas for k in r))
    out: dict[str, float | None] = {}
    for k in keys:
        values = [r.get(k) for r in side if r.get(k) is not None]
        if k == "oom_killed":
            out[k] = int(_killed(side[0])) if values else None
            continue
        out[k] = statistics.fmean(values) if values else None
    return out


def seed_spread(observed: Mapping[str, float | None],
                replicas: Sequence[Mapping[str, float | None]]) -> dict[str, float]:
    """Per metric, max - min of the replicas' signed errors against ``observed`` (the replicas on
    the majority's side of an OOM kill, metrics with at least two values); empty for one replica.

    >>> m = vm.METRICS[0].name
    >>> seed_spread({m: 100.0}, [{m: 95.0}, {m: 104.0}, {m: 99.0}])
    {'throughput_per_s': 0.09}
    """
    if len(replicas) < 2:
        return {}
    side = _side(replicas)
    out: dict[str, float] = {}
    for metric in vm.METRICS:
        errors = [e for e in (vm.error(metric, observed.get(metric.name), r.get(metric.name)) for r in side)
                  if e is not None]
        if len(errors) >= 2:
            out[metric.name] = round(max(errors) - min(errors), 12)
    return out


def grid_seed_spread(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float | int]]:
    """Per metric, the median and the maximum of the runs' seed spreads (``row["seed_spread"]``)
    over ``rows`` (e.g. a grid's held-out runs), with the number of runs.

    >>> grid_seed_spread([{"seed_spread": {"throughput_per_s": 0.02}}, {"seed_spread": {"throughput_per_s": 0.06}},
    ...                   {"seed_spread": {}}])
    {'throughput_per_s': {'median': 0.04, 'max': 0.06, 'n': 2}}
    """
    by_metric: dict[str, list[float]] = {}
    for row in rows:
        for k, v in (row.get("seed_spread") or {}).items():
            by_metric.setdefault(k, []).append(v)
    return {k: {"median": statistics.median(v), "max": max(v), "n": len(v)} for k, v in by_metric.items()}
