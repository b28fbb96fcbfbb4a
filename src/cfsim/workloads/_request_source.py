"""Requests that fan out into goroutines: the work source shared by ``closed`` and ``open``.

A request arrives (a netpoll wake-up for its connection), its handler starts ``fanout``
goroutines of ``cpu_ms_per_request / fanout`` CPU each (allocating ``alloc_kb_per_request`` in
proportion) and answers when all of them are done. Goroutines wait in one FIFO run queue; a P
runs one for at most 10 ms (``forcePreemptNS``), after which it goes back to the tail.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Callable

import numpy as np

from cfsim.goruntime.runtime import Claim, GoRuntime
from cfsim.workloads._go import latency_keys


class _Req:
    __slots__ = ("t_arr", "left", "client")

    def __init__(self, t_arr: int, left: int, client: int):
        self.t_arr = t_arr
        self.left = left
        self.client = client


class RequestSource:
    def __init__(self, rt: GoRuntime, cpu_ns: float, alloc_bytes: float, fanout: int,
                 on_response: Callable[[_Req, int], None] | None = None):
        self.rt = rt
        self.per_g = max(1, int(round(cpu_ns / fanout)))
        self.alloc_per_ns = alloc_bytes / (self.per_g * fanout)
        self.fanout = fanout
        self.runq: deque[list] = deque()   # [req, remaining_ns]
        self.on_response = on_response
        self.arrived = 0
        self.completed = 0
        self.in_flight: dict[int, _Req] = {}
        self.t_done: list[int] = []
        self.lat_ns: list[int] = []

    def arrive(self, t_ns: int, client: int = -1) -> None:
        req = _Req(t_ns, self.fanout, client)
        self.arrived += 1
        self.in_flight[id(req)] = req
        for _ in range(self.fanout):
            self.runq.append([req, self.per_g])
        self.rt.ready(1, spawns=self.fanout > 1)   # the handler, which starts the fan-out goroutines

    # work-source protocol -------------------------------------------------------------
    def has_work(self) -> bool:
        return bool(self.runq)

    def claim(self, max_ns: int) -> Claim | None:
        if not self.runq:
            return None
        g = self.runq.popleft()
        work = min(g[1], max_ns)
        return Claim(work, int(work * self.alloc_per_ns), g)

    def done(self, claim: Claim, t0: int, t1: int) -> None:
        g = claim.token
        g[1] -= claim.work
        if g[1] > 0:
            self.runq.append(g)       # preempted after 10 ms: back to the global queue
            self.rt.ready(1, netpoll=False)
            return
        req = g[0]
        req.left -= 1
        if req.left == 0:
            self.completed += 1
            del self.in_flight[id(req)]
            self.t_done.append(t1)
            self.lat_ns.append(t1 - req.t_arr)
            if self.on_response is not None:
                self.on_response(req, t1)

    def requeue(self, claim: Claim, left_ns: int, t0: int, t1: int) -> None:
        g = claim.token
        g[1] -= claim.work - left_ns
        self.runq.appendleft(g)

    # reporting --------------------------------------------------------------------------
    def summary(self, t0_ns: int, t1_ns: int) -> dict[str, Any]:
        t = np.asarray(self.t_done, dtype=np.int64)
        lat = np.asarray(self.lat_ns, dtype=np.int64)
        sel = (t > t0_ns) & (t <= t1_ns)
        span = (t1_ns - t0_ns) / 1e9
        oldest = min((r.t_arr for r in self.in_flight.values()), default=None)
        out = {
            "throughput_per_s": float(sel.sum() / span),
            "requests_completed": int(sel.sum()),
            "requests_arrived": int(self.arrived),
            "backlog_final": int(self.arrived - self.completed),
            "lag_final_s": 0.0 if oldest is None else (t1_ns - oldest) / 1e9,
        }
        out.update(latency_keys(lat[sel] / 1e9))
        return out

    def sample(self) -> tuple:
        return (self.arrived, self.completed, self.arrived - self.completed)
