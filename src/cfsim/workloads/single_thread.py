"""``kind = "single-thread"``: a pipeline that can use one OS thread only (Fluentd's ``in_tail``
input: "in_tail cannot be implemented with multi-processes, meaning Fluentd will run over one
core"), for the profile-driven cost-cut what-if (lower ``cpu_ms_per_item`` by what the profile
says the fix removes and compare).

Records arrive like ``stream`` (same ``rate_per_s`` forms, fetched every 20 ms); one thread takes
them in order, ``cpu_ms_per_item`` each, in runs of at most 10 ms of CPU, and sleeps when none
wait. Not a Go process: there are no Ps, no Go scheduler and no Go GC, so ``gomaxprocs`` reports
the one usable thread and the GC/scheduler keys are zero.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from cfsim.workloads.arrivals import RateFn
from cfsim.workloads._go import sample_interval_ns
from cfsim.workloads.stream import (RecordStream, fetch_interval_ns, record_series, record_summary,
                                   sample_row)
from cfsim.workloads.kinds import WorkloadKind, WorkShape


def work_shape(w) -> WorkShape:
    """A record is an item; one thread processes them."""
    return WorkShape("single-thread", w["cpu_ms_per_item"] / 1000.0, 1.0)


KIND = WorkloadKind("single-thread", ("rate_per_s", "cpu_ms_per_item", "initial_backlog", "fetch_interval_ms"),
                    "cpu_ms_per_item", work_shape)

RUN_NS = 10_000_000


class SingleThreadWorkload:
    def __init__(self, engine, scenario, rng: np.random.Generator):
        self.engine = engine
        self.buckets_s = scenario["run.latency_buckets_s"]
        w = scenario.section("workload")
        rate = RateFn(w["rate_per_s"], scenario["run.duration_s"] + 1.0)
        self.stream = RecordStream(rate, w["cpu_ms_per_item"] * 1e6, 0.0, 1, w["initial_backlog"])
        self.tid = engine.new_thread("in_tail")
        self.busy = False
        self.claim = None
        self.t0 = 0
        self.fetch_ns = fetch_interval_ns(scenario)
        self.sample_ns = sample_interval_ns(scenario)
        self.samples: list[tuple] = []

    def start(self) -> None:
        self.engine.call_at(0, self._fetch)
        self.engine.call_at(0, self._sample)

    def _fetch(self) -> None:
        self.stream.deliver(self.engine.now)
        if not self.busy and self.stream.has_work():
            self.busy = True
            self.engine.run(self.tid, self._next(), self._done)
        self.engine.call_later(self.fetch_ns, self._fetch)

    def _next(self) -> int:
        s = self.stream
        s.share = s.arrived - s.head   # one thread: it takes every waiting record in turn
        self.claim = s.claim(RUN_NS)
        self.t0 = self.engine.now
        return self.claim.work

    def _done(self, tid: int) -> int | None:
        self.stream.done(self.claim, self.t0, self.engine.now)
        if self.stream.has_work():
            return self._next()
        self.busy = False
        return None

    def _sample(self) -> None:
        self.samples.append(sample_row(self.stream, self.engine.now))
        self.engine.call_later(self.sample_ns, self._sample)

    def sample_now(self) -> None:
        """The sample due exactly at the end of the run, whose event the engine stops before."""
        if not self.samples or self.samples[-1][0] < self.engine.now:
            self.samples.append(sample_row(self.stream, self.engine.now))

    def summary(self, t0_ns: int, t1_ns: int) -> dict[str, Any]:
        out = record_summary(self.stream, self.samples, t0_ns, t1_ns, self.engine.now, self.buckets_s)
        out.update({
            "gomaxprocs": 1,
            "gc_cycles": 0, "gc_cpu_fraction": 0.0, "sched_cpu_fraction": 0.0,
            "user_cpu_fraction": 1.0,
            "thread_cpu_s": self.engine.thread_cpu_ns(self.tid) / 1e9,
        })
        return out

    def series(self, step_ns: int) -> pd.DataFrame:
        return record_series(self.samples, step_ns, self.sample_ns)


def build(engine, scenario, rng: np.random.Generator) -> SingleThreadWorkload:
    return SingleThreadWorkload(engine, scenario, rng)
