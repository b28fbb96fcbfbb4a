"""Workload models. Each kind is a module exposing ``build(engine, scenario, rng) -> Workload``
where a Workload has ``start()``, ``summary(t0_ns, t1_ns) -> dict`` and
``series(step_ns) -> pandas.DataFrame``. :data:`WORKLOADS` maps ``[workload] kind`` to the module
path, imported lazily."""
from __future__ import annotations

import importlib
from typing import Any, Protocol

import pandas as pd

WORKLOADS: dict[str, str] = {
    "threads": "cfsim.workloads.threads",
    "stream": "cfsim.workloads.stream",
    "closed": "cfsim.workloads.closed",
    "open": "cfsim.workloads.open",
    "single-thread": "cfsim.workloads.single_thread",
}


class Workload(Protocol):
    def start(self) -> None: ...

    def summary(self, t0_ns: int, t1_ns: int) -> dict[str, Any]: ...

    def series(self, step_ns: int) -> pd.DataFrame: ...


def get_builder(kind: str):
    """The ``build`` function of a workload kind, with a clear error for kinds not built yet."""
    if kind not in WORKLOADS:
        raise ValueError(f"workload.kind: unknown kind {kind!r}; known: {', '.join(WORKLOADS)}")
    try:
        module = importlib.import_module(WORKLOADS[kind])
    except ModuleNotFoundError as exc:
        if exc.name == WORKLOADS[kind]:
            raise NotImplementedError(f"workload.kind={kind!r} is not available in this build") from None
        raise
    return module.build
