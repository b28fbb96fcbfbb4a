"""A probe of a lab run's measured window: a measurement that runs in the background while the
workload does, and whose block in the manifest says when it ran and whether it failed
(``runner._probe_block``). perf's counters and samples (:mod:`cfsim.lab.perf`), the threads' sleeps
(:mod:`cfsim.lab.sleeps`) and the kernel's scheduler trace (:mod:`cfsim.lab.wakeplace`) are probes.
"""
from __future__ import annotations

import threading
import time
from typing import Any


class WindowProbe(threading.Thread):
    """Runs :meth:`measure` once in a daemon thread: ``result`` is what it returned, or ``error``
    (the exception's type and message) when it raised one of ``errors``; ``t0`` and ``t1`` are when
    it started and ended on the wall clock.

    >>> class Twice(WindowProbe):
    ...     def measure(self):
    ...         return {"x": 2}
    >>> p = Twice("cfsim-lab-example"); p.start(); p.join()
    >>> p.result, p.error, p.t1 >= p.t0
    ({'x': 2}, None, True)
    >>> class Broken(WindowProbe):
    ...     def measure(self):
    ...         raise OSError("no tracefs")
    >>> p = Broken("cfsim-lab-example"); p.start(); p.join()
    >>> p.result, p.error
    (None, 'OSError: no tracefs')
    """

    #: the exceptions that are a failed measurement rather than a bug
    errors: tuple[type[BaseException], ...] = (OSError,)

    def __init__(self, name: str):
        super().__init__(daemon=True, name=name)
        self.error: str | None = None
        self.result: dict[str, Any] | None = None
        self.t0 = self.t1 = 0.0

    def measure(self) -> dict[str, Any]:
        raise NotImplementedError

    def run(self) -> None:
        self.t0 = time.time()
        try:
            self.result = self.measure()
        except self.errors as exc:
            self.error = f"{type(exc).__name__}: {exc}"
        self.t1 = time.time()
