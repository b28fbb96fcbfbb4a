"""A cheap, deterministic stand-in for ``simulate`` used by tests and benchmarks of the sweep
machinery itself (``--point-fn cfsim.sweep.toy:toy_point``). Not a model of anything."""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from cfsim.scenario import Scenario


def toy_point(scenario: Scenario) -> Mapping[str, Any]:
    """Throughput saturating at the CPU limit, with noise from ``run.seed``."""
    rng = np.random.default_rng(scenario["run.seed"])
    limit = scenario["cgroup.cpu_limit"] or float(scenario["host.cpus"])
    gmp = scenario["go.gomaxprocs"]
    procs = {"host": scenario["host.cpus"], "automaxprocs": max(1, math.floor(limit)),
             "go1.25": max(2, math.ceil(limit))}.get(gmp, gmp) if isinstance(gmp, str) else gmp
    demand = min(float(procs), 4.0)
    usage = min(limit, demand) * (1 + 0.01 * rng.standard_normal())
    throttled = max(0.0, 1.0 - limit / demand) if demand > limit else 0.0
    return {
        "cpu_limit_cores": limit,
        "cpu_usage_cores": usage,
        "gomaxprocs": int(procs),
        "throttled_ratio": throttled,
        "throughput_per_s": 1000.0 * usage,
        "latency_p99_s": 0.01 / max(usage, 1e-3) * (1 + 5 * throttled),
    }


def failing_point(scenario: Scenario) -> Mapping[str, Any]:
    """Like :func:`toy_point`, but raises for ``cgroup.cpu_limit`` below 0.5 cores."""
    if (scenario["cgroup.cpu_limit"] or 1e9) < 0.5:
        raise RuntimeError(f"toy failure at cpu_limit={scenario['cgroup.cpu_limit']}")
    return toy_point(scenario)


def crashing_point(scenario: Scenario) -> Mapping[str, Any]:
    """Like :func:`toy_point`, but kills its own process for ``cgroup.cpu_limit`` below 0.5 cores
    (a segfault or an OOM kill, as far as the pool can tell)."""
    import os
    import signal
    import time

    if (scenario["cgroup.cpu_limit"] or 1e9) < 0.5:
        time.sleep(0.05)  # let other runs be in flight with it
        os.kill(os.getpid(), signal.SIGKILL)
    return toy_point(scenario)
