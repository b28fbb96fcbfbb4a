"""``kind = "open"``: requests arrive at ``rate_per_s`` (constant, steps, diurnal or CSV) as a
Poisson process (default; a time-varying rate by time change of a unit-rate process) or at fixed
spacing (``arrivals = "fixed"``), whatever the service's state. Same request shape as ``closed``."""
from __future__ import annotations

import bisect

from array import array

import numpy as np

from cfsim.workloads.arrivals import RateFn, late_sender
from cfsim.workloads._request_workload import REQUEST_KEYS, RequestWorkload
from cfsim.workloads.kinds import WorkloadKind, WorkShape


def work_shape(w) -> WorkShape:
    """A request is an item; requests arrive whatever the service's state (no parallelism cap)."""
    return WorkShape("open", w["cpu_ms_per_request"] / 1000.0, None)


KIND = WorkloadKind("open", ("rate_per_s", "arrivals", "client_send_late_ms", "client_send_late_p99_ms", *REQUEST_KEYS),
                    "cpu_ms_per_request", work_shape,
                    alloc_key="alloc_kb_per_request")


def arrival_times_s(rate: RateFn, duration_s: float, kind: str, rng: np.random.Generator) -> np.ndarray:
    """Arrival times [s] in ``[0, duration_s)``: ``t_i = cum^-1(s_i)`` with ``s_i`` the points of a
    unit-rate Poisson process (or the integers, for fixed spacing)."""
    total = float(rate.cum(duration_s))
    if kind == "fixed":
        s = np.arange(1, int(np.floor(total)) + 1, dtype=float)
    else:
        n = rng.poisson(total) if total > 0 else 0
        s = np.sort(rng.uniform(0.0, total, size=n))  # order statistics of a Poisson process
    t = rate.inverse(s)
    return t[t < duration_s]


class OpenWorkload(RequestWorkload):
    def __init__(self, engine, scenario, rng: np.random.Generator):
        super().__init__(engine, scenario, rng)
        dur = scenario["run.duration_s"]
        due = arrival_times_s(RateFn(scenario["workload.rate_per_s"], dur + 1.0), dur, scenario["workload.arrivals"], rng)
        # a client that sends late sends in bunches; its lateness draws come from a stream of their
        # own, so the arrivals it is given are the same with or without it
        sent = late_sender(due, scenario["workload.client_send_late_ms"] / 1e3,
                           scenario["workload.client_send_late_p99_ms"] / 1e3,
                           np.random.default_rng([scenario["run.seed"], 0x1A7E]))
        # 8 bytes an arrival, as the numpy array, but read as Python ints: every arrival's event
        # indexes it, where a numpy scalar's compare and conversion cost more than the event
        self.times_ns = array("q", (sent * 1e9).astype(np.int64).tobytes())
        self.i = 0

    def start(self) -> None:
        super().start()
        self.rt.after_build(self._begin)

    def _begin(self) -> None:
        """The load generator starts: at t = 0, or once a heap built before the load is done
        (``go.heap_build = "before-load"``), from the first arrival due then."""
        times = self.times_ns
        self.i = bisect.bisect_left(times, self.engine.now)
        if self.i < len(times):
            self.engine.call_at(times[self.i], self._arrive)

    def _arrive(self) -> None:
        now = self.engine.now
        times = self.times_ns
        n, i = len(times), self.i
        while i < n and times[i] <= now:
            self.src.arrive(times[i])
            i += 1
        self.i = i
        if i < n:
            self.engine.call_at(times[i], self._arrive)


def build(engine, scenario, rng: np.random.Generator) -> OpenWorkload:
    return OpenWorkload(engine, scenario, rng)
