"""``kind = "closed"``: an HTTP service driven by ``clients`` closed-loop virtual users (k6 VUs):
each sends a request, waits for the response, thinks ``think_ms``, and sends the next. Each
request fans out to ``fanout`` goroutines of ``cpu_ms_per_request / fanout`` CPU each (see
:mod:`cfsim.workloads._requests`). Outputs: RPS and latency percentiles, plus the runtime's keys.
Time outside the process (network, the client itself) is ``client_rtt_ms``: it is added to
the latency and separates a response from the client's next request."""
from __future__ import annotations

import numpy as np

from cfsim.workloads._reqwl import RequestWorkload


class ClosedWorkload(RequestWorkload):
    def __init__(self, engine, scenario, rng: np.random.Generator):
        super().__init__(engine, scenario, rng)
        self.clients = scenario["workload.clients"]
        self.think_ns = int(round(scenario["workload.think_ms"] * 1e6))

    def start(self) -> None:
        super().start()
        for c in range(self.clients):
            self.eng.call_at(0, lambda c=c: self.src.arrive(self.eng.now, c))

    def _on_response(self, req, t_ns: int) -> None:
        # the response travels back, the client thinks, the next request travels in
        c = req.client
        delay = self.think_ns + self.rtt_ns
        if delay > 0:
            self.eng.call_later(delay, lambda: self.src.arrive(self.eng.now, c))
        else:
            self.src.arrive(t_ns, c)


def build(engine, scenario, rng: np.random.Generator) -> ClosedWorkload:
    return ClosedWorkload(engine, scenario, rng)
