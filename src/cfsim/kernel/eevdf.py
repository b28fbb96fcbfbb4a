"""How the fair scheduler shares one CPU among runnable tasks of equal weight (EEVDF, Linux >= 6.6).

Sources (``kernel/sched/fair.c``):

* ``sysctl_sched_base_slice``: 0.75 ms, scaled at boot by ``update_sysctl`` /
  ``get_update_sysctl_factor`` with the default ``SCHED_TUNABLESCALING_LOG``:
  ``1 + ilog2(min(online CPUs, 8))`` (1.5 ms on 2 CPUs, 3 ms on 8 or more);
* ``update_curr`` -> ``update_deadline``: once the running task has consumed its slice
  (``vruntime >= deadline``) and others are queued, it is rescheduled. ``update_curr`` runs at
  the scheduler tick (``entity_tick``) and at scheduling events, so without ``HRTICK`` (off by
  default) a slice ends at the first tick after it is consumed;
* ``RUN_TO_PARITY`` (on by default): a task woken meanwhile does not preempt the running one
  before its slice is consumed (``pick_eevdf`` keeps a protected ``curr``); among equal
  weights the next pick goes round the queue.
"""
from __future__ import annotations

NORMALIZED_BASE_SLICE_NS = 750_000


def base_slice_ns(cpus: int) -> int:
    """``sysctl_sched_base_slice`` on a host with ``cpus`` online CPUs [ns].

    >>> base_slice_ns(1), base_slice_ns(2), base_slice_ns(4), base_slice_ns(64)
    (750000, 1500000, 2250000, 3000000)
    """
    n = min(max(int(cpus), 1), 8)
    return NORMALIZED_BASE_SLICE_NS * n.bit_length()


def slice_end_ns(picked_ns: int, slice_left_ns: float, tick_ns: int, speed: float = 1.0) -> int:
    """When a task picked at ``picked_ns`` with ``slice_left_ns`` of CPU left in its slice is
    rescheduled: at the first tick once the slice is consumed (``speed``: the share of the CPU
    it gets while other processes' tasks take the rest).

    >>> slice_end_ns(0, 1_500_000, 4_000_000), slice_end_ns(4_100_000, 1_500_000, 1_000_000)
    (4000000, 6000000)
    """
    consumed = picked_ns + (int(-(-slice_left_ns // 1)) if speed == 1.0 else int(-(-slice_left_ns // speed)))
    return -(-consumed // tick_ns) * tick_ns
