"""The Go process + request source plumbing shared by ``closed`` and ``open``."""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from cfsim.workloads._go import make_runtime, merge_series, sample_interval_ns, with_side_work
from cfsim.workloads._request_source import CpuDrift, RequestSource
from cfsim.workloads.latency_gc import latency_gc_keys


#: the kinds that serve requests through this plumbing
REQUEST_KINDS = ("closed", "open")
#: the [workload] keys every request-serving kind reads (closed and open add their own)
REQUEST_KEYS = ("fanout", "cpu_ms_per_request", "alloc_kb_per_request", "server_cpu_us_per_request",
                "server_alloc_kb_per_request", "client_rtt_ms", "client_rtt_p99_ms", "client_cpu_us_per_request",
                "conn_heap_kb", "conn_stack_kb", "client_max_conns", "cpu_cv", "cpu_drift_cv", "cpu_drift_tau_s",
                "http_background_read",
                "scrape_interval_s", "scrape_cpu_ms", "scrape_alloc_kb", "scrape_pool_kb")


def request_batching(scenario) -> bool:
    """Whether a busy P runs a request's chained goroutines as one chunk (``run.request_batching``): only
    where that gives the same results as one goroutine per chunk. On the sliced engine a chunk's
    goroutines wait out the turns of the other threads on its CPU when the M's turn ends inside it
    (as a descheduled M's local run queue does), and a client on the host gets each chunk's
    responses at its end: both change the latency and the client's CPU (docs/model-notes.md)."""
    return bool(scenario["run.request_batching"] and scenario["host.cpu_sharing"] == "fluid"
                and scenario["workload.client_cpu_us_per_request"] <= 0)


def _drift(w, seed: int) -> CpuDrift | None:
    cv, tau_s = w["cpu_drift_cv"], w["cpu_drift_tau_s"]
    return CpuDrift(cv, tau_s, np.random.default_rng([seed, 0xD1F7])) if cv > 0 else None


class RequestWorkload:
    def __init__(self, engine, scenario, rng: np.random.Generator):
        self.engine = engine
        self.sc = scenario
        self.rng = rng
        w = scenario.section("workload")
        self.rt = make_runtime(engine, scenario)
        self.src = RequestSource(self.rt, w["cpu_ms_per_request"] * 1e6, w["alloc_kb_per_request"] * 1024,
                                 w["fanout"], self._respond, server_cpu_ns=w["server_cpu_us_per_request"] * 1e3,
                                 server_alloc_bytes=w["server_alloc_kb_per_request"] * 1024, cpu_cv=w["cpu_cv"],
                                 client_rtt_ns=int(round(w["client_rtt_ms"] * 1e6)),
                                 rng=np.random.default_rng([scenario["run.seed"], 0x5EED]),
                                 client_rtt_p99_ns=int(round(w["client_rtt_p99_ms"] * 1e6)),
                                 rtt_rng=np.random.default_rng([scenario["run.seed"], 0x277]),
                                 conn_heap_bytes=int(w["conn_heap_kb"] * 1024),
                                 conn_stack_bytes=int(w["conn_stack_kb"] * 1024), max_conns=w["client_max_conns"],
                                 batch=request_batching(scenario),
                                 drift=_drift(w, scenario["run.seed"]),
                                 background_read=w["http_background_read"])
        self.scrapes = with_side_work(engine, self.rt, self.src, scenario)
        self.sample_ns = sample_interval_ns(scenario)
        self.samples: list[tuple] = []

        # a client on the same host handles each response on the host's CPUs
        self.client_burst_ns = int(round(w["client_cpu_us_per_request"] * 1e3))

    def _respond(self, req, t_ns: int) -> None:
        if self.client_burst_ns:
            # the response's write wakes the client's task from the M that made it
            self.engine.neighbour_burst(self.client_burst_ns, self.rt.running_thread())
        self._on_response(req, t_ns)

    def _on_response(self, req, t_ns: int) -> None:
        pass

    def start(self) -> None:
        if self.scrapes is not None:
            self.scrapes.start()
        self.rt.start()
        self.engine.call_at(0, self._sample)

    def _sample(self) -> None:
        self.samples.append((self.engine.now, *self.src.sample()))
        self.engine.call_later(self.sample_ns, self._sample)

    def sample_now(self) -> None:
        """The sample due exactly at the end of the run, whose event the engine stops before."""
        if not self.samples or self.samples[-1][0] < self.engine.now:
            self.samples.append((self.engine.now, *self.src.sample()))

    def summary(self, t0_ns: int, t1_ns: int) -> dict[str, Any]:
        buckets = self.sc["run.latency_buckets_s"]
        out = self.src.summary(t0_ns, t1_ns, buckets)
        out.update(self.rt.summary(t0_ns, t1_ns))
        # the tail in the seconds a GC cycle ended in against the others, as the lab's scrapes see it
        ends = self.rt.gc_cycle_table()["run_t_s"]
        out.update(latency_gc_keys(np.asarray(self.src.t_done, dtype=float) / 1e9,
                                   np.asarray(self.src.lat_ns, dtype=float) / 1e9, ends, t0_ns / 1e9,
                                   t1_ns / 1e9, buckets))
        return out

    def series(self, step_ns: int) -> pd.DataFrame:
        arr = np.asarray(self.samples, dtype=float)
        if arr.size == 0:
            return pd.DataFrame()
        arr = arr[::max(1, int(round(step_ns / self.sample_ns)))]
        dt = np.diff(arr[:, 0], prepend=np.nan) / 1e9
        df = pd.DataFrame({"t_s": arr[:, 0] / 1e9, "requests_arrived_total": arr[:, 1],
                           "requests_completed_total": arr[:, 2],
                           "rps": np.diff(arr[:, 2], prepend=np.nan) / dt, "in_flight": arr[:, 3]})
        return merge_series(self.rt.series(step_ns), df)
