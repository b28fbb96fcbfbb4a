"""``kind = "closed"``: an HTTP service driven by ``clients`` closed-loop virtual users (k6 VUs):
each sends a request, waits for the response, thinks ``think_ms``, and sends the next. Each
request fans out to ``fanout`` goroutines of ``cpu_ms_per_request / fanout`` CPU each (see
:mod:`cfsim.workloads._request_source`). Outputs: RPS and latency percentiles, plus the runtime's keys.
Time outside the process (network, the client itself) is ``client_rtt_ms``: it is added to
the latency and separates a response from the client's next request."""
from __future__ import annotations

import numpy as np

from cfsim.workloads._request_workload import REQUEST_KEYS, RequestWorkload
from cfsim.workloads.kinds import WorkloadKind, WorkShape


def work_shape(w) -> WorkShape:
    """A request is an item; ``clients`` users each keep one request in flight, so they offer
    ``clients x cpu / (cpu + think)`` cores whatever the arrival rate."""
    busy = w["cpu_ms_per_request"] / (w["cpu_ms_per_request"] + w["think_ms"])
    return WorkShape("closed", w["cpu_ms_per_request"] / 1000.0, float(w["clients"]),
                     fixed_demand_cores=w["clients"] * busy)


KIND = WorkloadKind("closed", ("clients", "think_ms", *REQUEST_KEYS),
                    "cpu_ms_per_request", work_shape,
                    alloc_key="alloc_kb_per_request")


class ClosedWorkload(RequestWorkload):
    def __init__(self, engine, scenario, rng: np.random.Generator):
        super().__init__(engine, scenario, rng)
        self.clients = scenario["workload.clients"]
        self.think_ns = int(round(scenario["workload.think_ms"] * 1e6))

    def start(self) -> None:
        super().start()
        self.rt.after_build(self._begin)

    def _begin(self) -> None:
        """The clients start: at t = 0, or once a heap built before the load is done
        (``go.heap_build = "before-load"``)."""
        now = self.engine.now
        for c in range(self.clients):
            self.engine.call_at(now, lambda c=c: self.src.arrive(self.engine.now, c))

    def _on_response(self, req, t_ns: int) -> None:
        # the response travels back, the client thinks, the next request travels in
        c = req.client
        delay = self.think_ns + self.src.last_rtt_ns
        if delay > 0:
            # from the response's own end (a goroutine of a chunk ends before the chunk does)
            self.engine.call_at(t_ns + delay, lambda: self.src.arrive(self.engine.now, c))
        else:
            self.src.arrive(t_ns, c)


def build(engine, scenario, rng: np.random.Generator) -> ClosedWorkload:
    return ClosedWorkload(engine, scenario, rng)
