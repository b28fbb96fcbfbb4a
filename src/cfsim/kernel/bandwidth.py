"""CFS bandwidth control rules, one pure function per kernel step (times in integer ns).

Each function mirrors a step of ``kernel/sched/fair.c`` (Linux >= 5.4; the pre-5.4 slice expiry
is :func:`legacy_expire`); the engine in :mod:`cfsim.engine.cfs` only sequences them.

References
----------
Linux ``kernel/sched/fair.c``, https://github.com/torvalds/linux/blob/master/kernel/sched/fair.c
(each function below names its upstream function); "CFS Bandwidth Control", Linux kernel
documentation, https://docs.kernel.org/scheduler/sched-bwc.html. Commits ``512ac999d275`` (4.18)
and ``de53fd7aedb1`` (5.4) for the slice expiry (``docs/references.md``).
"""
from __future__ import annotations

from typing import Sequence

#: a cfs_rq won't donate quota below this amount (``min_cfs_rq_runtime``)
MIN_CFS_RQ_RUNTIME_NS = 1_000_000
#: minimum remaining period time to redistribute slack quota (``min_bandwidth_expiration``)
MIN_BANDWIDTH_EXPIRATION_NS = 2_000_000
#: how long we wait to gather additional slack before distributing (``cfs_bandwidth_slack_period``)
SLACK_PERIOD_NS = 5_000_000


def refill(pool_ns: int, snap_ns: int, quota_ns: int, burst_ns: int) -> tuple[int, int, int]:
    """Period-boundary refill (``__refill_cfs_bandwidth_runtime``, v5.14+).

    Returns ``(pool_ns, snap_ns, burst_used_ns)``. ``burst_used_ns > 0`` means the group took
    more than ``quota`` from the pool during the last period (``nr_bursts += 1``,
    ``burst_time += burst_used_ns``). With ``burst = 0`` this is "reset to quota".

    >>> refill(0, 200, 200, 0)
    (200, 200, 0)
    >>> refill(50, 300, 200, 100)   # took 250 of a 300 pool: 50 above quota
    (250, 250, 50)
    """
    pool_ns += quota_ns
    burst_used_ns = snap_ns - pool_ns
    pool_ns = min(pool_ns, quota_ns + burst_ns)
    return pool_ns, pool_ns, max(0, burst_used_ns)


def assign(pool_ns: int, runtime_remaining_ns: int, target_ns: int) -> tuple[int, int, int]:
    """Take runtime from the group pool to top a CPU's silo up to ``target_ns``
    (``__assign_cfs_rq_runtime``): the deficit is repaid first; the pool never goes negative.

    Called only when the silo is empty (``runtime_remaining_ns <= 0 < target_ns``).
    Returns ``(pool_ns, runtime_remaining_ns, amount_ns)``.

    >>> assign(100, -3, 5)        # 3 ns overrun repaid, then a full 5 ns slice
    (92, 5, 8)
    >>> assign(4, -3, 5)          # not enough: take what is there
    (0, 1, 4)
    """
    amount = 0
    if pool_ns > 0:
        amount = min(pool_ns, target_ns - runtime_remaining_ns)
        pool_ns -= amount
    return pool_ns, runtime_remaining_ns + amount, amount


def throttle_on_put_prev(pool_ns: int, runtime_remaining_ns: int) -> tuple[int, int, bool]:
    """``put_prev_entity`` -> ``check_cfs_rq_runtime`` -> ``throttle_cfs_rq`` when a CPU's task
    is put (e.g. the last one blocks) while its silo is exhausted: one last try for 1 ns from the
    pool (``__assign_cfs_rq_runtime(cfs_b, cfs_rq, 1)``), else the cfs_rq is throttled, even if
    it is now empty.

    Returns ``(pool_ns, runtime_remaining_ns, throttle)``. An empty throttled cfs_rq accrues no
    throttled time (the clock starts only with a queued task: ``throttle_cfs_rq`` since 6.6,
    "sched: don't account throttle time for empty groups"; from 6.18 when the first task is
    actually throttled on its return to user space, ``record_throttle_clock``), but it sits on the
    throttled list, so the period timer counts ``nr_throttled``, and a task waking on that CPU
    waits for distribution.

    >>> throttle_on_put_prev(0, -300)       # pool empty: throttled
    (0, -300, True)
    >>> throttle_on_put_prev(500, -300)     # raced with a refill: repaid, 1 ns left, runs on
    (199, 1, False)
    >>> throttle_on_put_prev(0, 2000)       # runtime left: nothing to do
    (0, 2000, False)
    """
    if runtime_remaining_ns > 0:
        return pool_ns, runtime_remaining_ns, False
    pool_ns, runtime_remaining_ns, _ = assign(pool_ns, runtime_remaining_ns, 1)
    return pool_ns, runtime_remaining_ns, runtime_remaining_ns <= 0


def distribute(pool_ns: int, runtime_remaining_ns: Sequence[int]) -> tuple[int, list[int]]:
    """Unthrottle at the period timer or slack timer (``distribute_cfs_runtime``): walk the
    throttled CPUs in FIFO order, giving each only enough to get back above zero (1 ns).

    Returns ``(pool_ns, new_runtime_remaining)``; a CPU whose runtime is now > 0 is unthrottled.

    >>> distribute(10, [-3, -2, -9])
    (0, [1, 1, -6])
    """
    out = list(runtime_remaining_ns)
    for i, rr in enumerate(out):
        if pool_ns <= 0:
            break
        give = min(pool_ns, -rr + 1)
        pool_ns -= give
        out[i] = rr + give
    return pool_ns, out


def return_slack(pool_ns: int, runtime_remaining_ns: int) -> tuple[int, int]:
    """On the last dequeue from a CPU (``return_cfs_rq_runtime``) give back all but 1 ms.

    >>> return_slack(0, 4_000_000)
    (3000000, 1000000)
    >>> return_slack(7, 500_000)
    (7, 500000)
    """
    slack = runtime_remaining_ns - MIN_CFS_RQ_RUNTIME_NS
    if slack <= 0:
        return pool_ns, runtime_remaining_ns
    return pool_ns + slack, runtime_remaining_ns - slack


def should_arm_slack_timer(pool_ns: int, slice_ns: int, any_throttled: bool,
                           ns_to_refresh: int, slack_pending: bool) -> bool:
    """``return_cfs_rq_runtime`` + ``start_cfs_slack_bandwidth``: arm the 5 ms slack timer only
    when the pool holds more than a slice, some CPU is throttled, no slack timer is pending,
    and the period refresh is at least 5 + 2 = 7 ms away."""
    if pool_ns <= slice_ns or not any_throttled or slack_pending:
        return False
    return ns_to_refresh >= SLACK_PERIOD_NS + MIN_BANDWIDTH_EXPIRATION_NS


def slack_timer_distributes(pool_ns: int, slice_ns: int, ns_to_refresh: int) -> bool:
    """``do_sched_cfs_slack_timer``: distribute only if the refresh is >= 2 ms away and the pool
    holds more than one slice."""
    return ns_to_refresh >= MIN_BANDWIDTH_EXPIRATION_NS and pool_ns > slice_ns


def legacy_expire(runtime_remaining_ns: int) -> int:
    """4.18-5.3 (``512ac999``..``de53fd7``): a CPU's leftover slice expires at the boundary."""
    return min(runtime_remaining_ns, 0)


def next_boundary(now_ns: int, phase_ns: int, period_ns: int) -> int:
    """The first period boundary strictly after ``now_ns`` on the grid ``phase + k * period``
    (``hrtimer_forward_now`` keeps a fixed grid).

    >>> next_boundary(250, 30, 100), next_boundary(230, 30, 100)
    (330, 330)
    """
    k = (now_ns - phase_ns) // period_ns + 1
    return phase_ns + k * period_ns
