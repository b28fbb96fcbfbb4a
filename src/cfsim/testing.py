"""Test doubles for the machinery around the model: cheap, deterministic point functions for the
sweep's own tests and benchmarks (``--point-fn cfsim.testing:toy_point``). Not a model of anything:
they exist so that the process pool, the store and resumption can be exercised in milliseconds.
"""
from __future__ import annotations

import os
import signal
import time
from typing import Any, Mapping

import numpy as np

from cfsim.goruntime.gomaxprocs import gomaxprocs_value
from cfsim.scenario import Scenario


def toy_point(scenario: Scenario) -> Mapping[str, Any]:
    """Throughput saturating at the CPU limit and at GOMAXPROCS (the scenario's own policy), with
    noise from ``run.seed``."""
    rng = np.random.default_rng(scenario["run.seed"])
    limit = scenario["cgroup.cpu_limit"] or float(scenario["host.cpus"])
    procs = gomaxprocs_value(scenario["go.gomaxprocs"], scenario["cgroup.cpu_limit"], scenario["host.cpus"],
                             scenario["go.version"], scenario["go.round"], scenario["cgroup.period_us"])
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
    if (scenario["cgroup.cpu_limit"] or 1e9) < 0.5:
        time.sleep(0.05)  # let other runs be in flight with it
        os.kill(os.getpid(), signal.SIGKILL)
    return toy_point(scenario)


_INTERRUPTED: list[bool] = []


def interrupted_point(scenario: Scenario) -> Mapping[str, Any]:
    """Like :func:`toy_point`, but a Ctrl-C arrives the first time this process meets
    ``cgroup.cpu_limit`` 3 cores (run it in this process, ``--workers 0``: the user's interrupt as
    the sweep's loop sees it; a resume in the same process then finishes)."""
    if scenario["cgroup.cpu_limit"] == 3 and not _INTERRUPTED:
        _INTERRUPTED.append(True)
        raise KeyboardInterrupt
    return toy_point(scenario)
