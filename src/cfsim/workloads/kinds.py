"""The registry of workload kinds: the one list of ``[workload] kind`` values, and what each kind
declares about itself.

Each workload module declares, once, ``KIND = WorkloadKind(...)``: its name, the ``[workload]`` keys
it reads (their defaults and ranges are in :mod:`cfsim.scenario.schema`), the key of the CPU one of
its items costs, and its :class:`WorkShape` (what the long-horizon engine needs: CPU per item,
parallelism caps, and whether an arrival rate or the workload itself sets its demand). The module
also has ``build(engine, scenario, rng) -> Workload`` for the event engine. Everything else asks
here instead of switching on kind names: the schema (:func:`kind_names`), the event engine
(:func:`get_builder`), the long-horizon engine (:func:`workload_kind` ``.shape``), calibration
(``.cpu_key``), the memory response (``.alloc_key``).

A kind's name is its module's name with ``-`` for ``_`` (``single_thread`` -> ``single-thread``),
so the schema can list the kinds without importing the models.

>>> kind_names()
('threads', 'stream', 'closed', 'open', 'single-thread')
>>> workload_kind("open").cpu_key
'cpu_ms_per_request'
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping

#: the workload modules under ``cfsim.workloads``; add a new kind's module here
MODULES = ("threads", "stream", "closed", "open", "single_thread")


@dataclass(frozen=True)
class WorkShape:
    """What a workload looks like to a pod response (:mod:`cfsim.engine.response`)."""

    kind: str
    cpu_s_per_item: float  # CPU seconds per record / request / burn (> 0)
    parallelism: float | None  # the most cores its goroutines or threads can use at once; None: unbounded
    bypass_gomaxprocs: bool = False  # OS threads are not limited by GOMAXPROCS
    fixed_demand_cores: float | None = None  # the demand the workload itself offers; None: set by its arrival rate

    @property
    def rate_driven(self) -> bool:
        """True when ``workload.rate_per_s`` sets the offered demand (and a grid can vary it)."""
        return self.fixed_demand_cores is None


@dataclass(frozen=True)
class WorkloadKind:
    """One ``[workload] kind``, as its module declares it."""

    name: str
    keys: tuple[str, ...]  # the [workload] keys it reads, besides ``kind``
    cpu_key: str  # the key holding the CPU one item costs [ms]
    shape: Callable[[Mapping[str, Any]], WorkShape]  # from the [workload] section
    alloc_key: str | None = None  # the key holding the heap one item allocates [KiB]; None: it allocates none


def kind_names() -> tuple[str, ...]:
    """Every ``[workload] kind``, without importing the workload models."""
    return tuple(m.replace("_", "-") for m in MODULES)


def workload_kind(name: str) -> WorkloadKind:
    """The declaration of a kind (imports its module); a clear error for an unknown name."""
    return _module(name).KIND


def get_builder(name: str) -> Callable:
    """The kind's ``build(engine, scenario, rng) -> Workload`` for the event engine."""
    return _module(name).build


def _module(name: str):
    if name not in kind_names():
        raise ValueError(f"workload.kind: unknown kind {name!r}; known: {', '.join(kind_names())}")
    return importlib.import_module(f"cfsim.workloads.{name.replace('-', '_')}")
