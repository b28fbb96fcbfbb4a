"""Bandwidth limits the kernel enforces, and the Kubernetes limit-to-quota conversion.

Sources: ``kernel/sched/core.c`` ``tg_set_bandwidth`` (min 1 ms quota and period, max 1 s
period, quota at most ``max_cfs_runtime``, burst <= quota); ``pkg/kubelet/cm/helpers_linux.go`` ``MilliCPUToQuota``
(quota = milliCPU * period / 1000, at least 1000 us).
"""
from __future__ import annotations

import math

MIN_QUOTA_US = 1_000
MIN_PERIOD_US = 1_000
MAX_PERIOD_US = 1_000_000
DEFAULT_PERIOD_US = 100_000
#: ``max_cfs_runtime = MAX_BW * NSEC_PER_USEC`` (kernel/sched/core.c), ``MAX_BW = (1 << (64 - BW_SHIFT))
#: - 1`` with ``BW_SHIFT = 20`` (kernel/sched/sched.h): the largest quota the kernel accepts, in us
#: (about 203 days)
MAX_QUOTA_US = (1 << 44) - 1
#: ``sysctl_sched_cfs_bandwidth_slice = 5000UL`` (kernel/sched/fair.c): the runtime a CPU takes from
#: the group's pool at a time, ``/proc/sys/kernel/sched_cfs_bandwidth_slice_us`` (>= 1)
DEFAULT_SLICE_US = 5_000
K8S_MIN_QUOTA_US = 1_000
#: a nice-0 task's CPU weight (``sched_prio_to_weight[20]``, ``kernel/sched/core.c``), also a cgroup's
#: default ``cpu.shares``: what a runnable task of a process outside any configured cgroup weighs on
#: its CPU's root runqueue, and what a tenant's cgroup nobody configured weighs
NICE_0_WEIGHT = 1024


def quota_us_from_cores(cpu_limit_cores: float, period_us: int = DEFAULT_PERIOD_US) -> int:
    """CFS quota [us] for a CPU limit [cores], as the kubelet writes it.

    The kubelet works in integer millicores and integer microseconds and floors.

    >>> quota_us_from_cores(1.94)
    194000
    >>> quota_us_from_cores(0.1)
    10000
    """
    milli = int(round(cpu_limit_cores * 1000))
    return max(K8S_MIN_QUOTA_US, milli * period_us // 1000)


def quota_us_exact(cpu_limit_cores: float, period_us: int = DEFAULT_PERIOD_US) -> int:
    """CFS quota [us] written directly (cgroup ``cpu.max``), rounded to the microsecond.

    Unlike the kubelet conversion this does not clamp, so a too-small limit is reported as the
    kernel would reject it.

    >>> quota_us_exact(0.005)
    500
    """
    return int(round(cpu_limit_cores * period_us))


def check_bandwidth(quota_us: int | None, period_us: int, burst_us: int) -> list[tuple[str, str]]:
    """Return ``(key, message)`` for every kernel limit the configuration breaks (``-EINVAL``)."""
    errors: list[tuple[str, str]] = []
    if not MIN_PERIOD_US <= period_us <= MAX_PERIOD_US:
        errors.append(("cgroup.period_us",
                       f"must be in [{MIN_PERIOD_US}, {MAX_PERIOD_US}] us (1 ms to 1 s), got {period_us}"))
    if quota_us is None:
        if burst_us:
            errors.append(("cgroup.burst_us", "burst needs a CPU limit (quota); got a burst with no limit"))
        return errors
    if quota_us < MIN_QUOTA_US:
        errors.append(("cgroup.cpu_limit",
                       f"quota = cpu_limit x period must be >= {MIN_QUOTA_US} us (1 ms), got {quota_us} us"))
    elif quota_us > MAX_QUOTA_US:
        errors.append(("cgroup.cpu_limit",
                       f"quota = cpu_limit x period must be <= {MAX_QUOTA_US} us (the kernel's max_cfs_runtime), "
                       f"got {quota_us:.4g} us"))
    if burst_us < 0 or burst_us > quota_us:
        errors.append(("cgroup.burst_us", f"must be in [0, quota={quota_us}] us, got {burst_us}"))
    return errors


def limit_cores(quota_us: int | None, period_us: int) -> float:
    """The CPU limit [cores] a quota/period pair means (inf when unlimited)."""
    return math.inf if quota_us is None or quota_us < 0 else quota_us / period_us
