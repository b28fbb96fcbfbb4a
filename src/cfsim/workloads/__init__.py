"""Workload models: what runs in the container, one module per ``[workload] kind``.

=================  ==========================================================================
``threads``        OS threads looping ``burn_ms`` of CPU and ``sleep_ms`` of sleep (no Go runtime)
``stream``         a Kafka-style consumer: records arrive at ``rate_per_s``, ``workers`` goroutines
``closed``         an HTTP service driven by ``clients`` closed-loop virtual users
``open``           an HTTP service with requests arriving at ``rate_per_s``
``single-thread``  a pipeline that can use one OS thread (Fluentd's ``in_tail``)
=================  ==========================================================================

Shared pieces: :mod:`.arrivals` (the one parser of ``rate_per_s``), :mod:`._go` (the Go process
of the Go workloads), :mod:`._request_source` and :mod:`._request_workload` (the request model of
``closed`` and ``open``), and :mod:`.kinds` (the registry).

A workload is ``build(engine, scenario, rng) -> Workload`` with ``start()``,
``summary(t0_ns, t1_ns) -> dict`` and ``series(step_ns) -> pandas.DataFrame``.

Adding a workload kind
----------------------
1. Write ``cfsim/workloads/<name>.py`` (``single_thread.py`` for kind ``single-thread``) with
   ``build(engine, scenario, rng)`` and ``KIND = WorkloadKind(...)``: the name, the ``[workload]``
   keys it reads, the key of its CPU per item, and its :class:`~cfsim.workloads.kinds.WorkShape`.
2. Add its module name to :data:`cfsim.workloads.kinds.MODULES`.
3. Declare any new ``[workload]`` keys (default, unit, range) in :mod:`cfsim.scenario.schema`.
4. The scenario schema, the event engine, the long-horizon engine and calibration then know it.
5. The lab needs its own Go workload (``lab/``) and its facts in the one table
   :data:`cfsim.lab.kinds.LAB_KINDS` (metric family and names, done counter, latency note,
   load generator); a unit test fails until the table has the new kind.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from cfsim.workloads.kinds import WorkloadKind, WorkShape, get_builder, kind_names, workload_kind

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Workload", "WorkloadKind", "WorkShape", "get_builder", "kind_names", "workload_kind"]


class Workload(Protocol):
    """What the simulation drives. A workload that samples its own counters periodically may also
    have ``sample_now()``, called once at the end of the run for the sample due there."""

    def start(self) -> None: ...

    def summary(self, t0_ns: int, t1_ns: int) -> dict[str, Any]: ...

    def series(self, step_ns: int) -> "pd.DataFrame": ...
