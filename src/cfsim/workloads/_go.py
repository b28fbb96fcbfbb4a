"""Shared pieces of the Go workloads: building the runtime from a scenario, latency arrays,
and merging the runtime's summary and series with the workload's."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from cfsim.goruntime.runtime import GoParams, GoRuntime

SAMPLE_NS = GoRuntime.SAMPLE_NS
MAX_SAMPLES = 200_000


def sample_interval_ns(scenario) -> int:
    """Series sampling interval: 100 ms, coarser (a multiple of 100 ms) for runs so long that
    more than 200,000 samples would be kept."""
    n = math.ceil(scenario["run.duration_s"] * 1e9 / (SAMPLE_NS * MAX_SAMPLES))
    return SAMPLE_NS * max(1, n)


def make_runtime(engine, scenario) -> GoRuntime:
    return GoRuntime(engine, GoParams.from_scenario(scenario), cpus=scenario["host.cpus"],
                     base_limit=scenario["cgroup.cpu_limit"], limit_schedule=scenario["cgroup.limit_schedule"],
                     period_us=scenario["cgroup.period_us"], sample_ns=sample_interval_ns(scenario))


def count_at(samples: list[tuple], t_ns: int, col: int, now_ns: int, now_value: float) -> float:
    """A cumulative counter at ``t_ns`` from ``(t, ...)`` samples (linear between samples; the
    live value at ``now``)."""
    if t_ns >= now_ns:
        return float(now_value)
    if not samples or t_ns <= 0:
        return 0.0
    arr = np.asarray([(r[0], r[col]) for r in samples], dtype=float)
    return float(np.interp(t_ns, np.append(arr[:, 0], now_ns), np.append(arr[:, 1], now_value)))


def latency_keys(lat_s: np.ndarray) -> dict[str, Any]:
    if lat_s.size == 0:
        return {"latency_p50_s": None, "latency_p99_s": None, "latency_p999_s": None, "latency_max_s": None,
                "latency_mean_s": None}
    p50, p99, p999 = np.percentile(lat_s, [50, 99, 99.9])
    return {"latency_p50_s": float(p50), "latency_p99_s": float(p99), "latency_p999_s": float(p999),
            "latency_max_s": float(lat_s.max()), "latency_mean_s": float(lat_s.mean())}


def merge_series(rt_df: pd.DataFrame, wl_df: pd.DataFrame) -> pd.DataFrame:
    if rt_df is None or rt_df.empty:
        return wl_df
    if wl_df is None or wl_df.empty:
        return rt_df
    return pd.merge_asof(wl_df.sort_values("t_s"), rt_df.sort_values("t_s"), on="t_s",
                         direction="nearest", tolerance=1e-6)
