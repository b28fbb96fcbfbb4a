"""``kind = "stream"``: a Kafka-style consumer (Grab's SinktoS3 shape) in a Go process.

Records arrive at ``rate_per_s`` (constant, steps, diurnal or CSV) and are fetched by the consumer
every ``fetch_interval_ms`` (one netpoll wake-up per fetch that brings records); ``workers``
goroutines each take a record, spend ``cpu_ms_per_item`` of CPU and allocate
``alloc_kb_per_item``. A worker keeps taking records while any wait (a channel receive that does
not block), so a P runs a worker for a chunk of records: the records waiting are shared among
the ``min(workers, GOMAXPROCS)`` workers that can run in parallel, at most 10 ms per chunk
(``forcePreemptNS``). Record latencies come from the cumulative arrival and departure curves
(FIFO), computed with numpy at the end.

Outputs: consumption rate, backlog (records arrived, not yet processed) and lag (seconds: age of
the oldest unprocessed record, Kafka's time lag), plus the runtime's keys.
"""
from __future__ import annotations

import math
from array import array
from typing import Any, Sequence

import numpy as np
import pandas as pd

from cfsim.goruntime.runtime import Claim, WorkSource
from cfsim.workloads.arrivals import RateFn
from cfsim.workloads._go import (count_at, latency_keys, make_runtime, merge_series, sample_interval_ns,
                                with_side_work)
from cfsim.workloads.kinds import WorkloadKind, WorkShape


def work_shape(w) -> WorkShape:
    """A record is an item; at most ``workers`` goroutines process records at once."""
    return WorkShape("stream", w["cpu_ms_per_item"] / 1000.0, float(w["workers"]))


KIND = WorkloadKind("stream", ("rate_per_s", "workers", "cpu_ms_per_item", "alloc_kb_per_item", "initial_backlog",
                               "fetch_interval_ms", "cpu_cv", "scrape_interval_s", "scrape_cpu_ms",
                               "scrape_alloc_kb", "scrape_pool_kb"), "cpu_ms_per_item", work_shape,
                    alloc_key="alloc_kb_per_item")

# Kafka consumers fetch continuously; a fetch returns the records produced since the previous
# one. The default cadence, 20 ms (workload.fetch_interval_ms), is a model-resolution choice: it
# bounds latency resolution and sets how often idle Ps are woken; it is left to calibration.
MAX_LATENCY_SAMPLES = 1_000_000
MAX_DEPARTURE_CHUNKS = 2_000_000   # beyond this, keep every 2nd chunk (then 4th, ...) for latency


def fetch_interval_ns(scenario) -> int:
    """The consumer's fetch cadence in ns (``workload.fetch_interval_ms``)."""
    return int(round(scenario["workload.fetch_interval_ms"] * 1e6))


class DepartureLog:
    """Completed chunks ``(n0, k, t0, t1)`` in compact arrays (32 bytes each). Past
    ``MAX_DEPARTURE_CHUNKS`` it halves itself and keeps every ``stride``-th new chunk, so memory
    stays bounded on long runs; latency quantiles then come from a systematic subsample of chunks.
    """

    def __init__(self) -> None:
        self.cols = [array("q"), array("q"), array("q"), array("q")]
        self.stride = 1
        self.seen = 0

    def add(self, n0: int, k: int, t0: int, t1: int) -> None:
        self.seen += 1
        if self.seen % self.stride:
            return
        c = self.cols
        c[0].append(n0)
        c[1].append(k)
        c[2].append(t0)
        c[3].append(t1)
        if len(c[0]) >= MAX_DEPARTURE_CHUNKS:
            self.cols = [a[::2] for a in c]
            self.stride *= 2

    def __len__(self) -> int:
        return len(self.cols[0])

    def table(self) -> np.ndarray:
        return np.stack([np.frombuffer(a, dtype=np.int64) for a in self.cols], axis=1).astype(float)


class RecordStream(WorkSource):
    """Records in FIFO order; a work source for the Go runtime (or a single thread)."""

    def __init__(self, rate: RateFn, cost_ns: float, alloc_bytes: float, workers: int,
                 initial_backlog: int = 0, cpu_cv: float = 0.0, rng: np.random.Generator | None = None):
        self.rate = rate
        self.cost = float(cost_ns)
        self.alloc = float(alloc_bytes)
        self.workers = int(workers)
        self.initial = int(initial_backlog)
        self.arrived = self.initial   # records delivered to the process
        self.head = 0                 # next record index to hand out
        self.completed = 0
        self.running = 0              # workers busy with a chunk
        self.requeued: list[list] = []  # [n0, k, work_ns] partial chunks, taken first
        self.deps = DepartureLog()
        self.start_s = 0.0            # when production starts (after a heap built before the load)
        self.parallel = 1             # workers that can run at once (set by the owner)
        self.share = 1                # records per chunk: the waiting records split evenly
        self.cv = float(cpu_cv)       # per-record CPU: gamma with this coefficient of variation
        self.rng = rng if rng is not None else np.random.default_rng(0)

    # work-source protocol -------------------------------------------------------------
    def has_work(self) -> bool:
        if self.requeued:
            return True
        return self.arrived > self.head and self.running < self.workers

    def claim(self, max_ns: int, p: int = -1) -> Claim | None:
        if self.requeued:
            n0, k, work = self.requeued.pop(0)
            self.running += 1
            return Claim(work, int(self.alloc * k * work / (k * self.cost)), (n0, k))
        avail = self.arrived - self.head
        if avail <= 0 or self.running >= self.workers:
            return None
        k = max(1, min(self.share, int(max_ns // self.cost) or 1, avail))
        n0 = self.head
        self.head += k
        self.running += 1
        work = k * self.cost
        if self.cv > 0:
            # the sum of k gamma(1/cv^2) records is gamma(k/cv^2)
            shape = k / (self.cv * self.cv)
            work *= self.rng.gamma(shape, 1.0 / shape)
        return Claim(max(1, int(round(work))), int(k * self.alloc), (n0, k))

    def continues(self, claim: Claim) -> bool:
        """A worker whose chunk ended takes its next record without blocking while records wait
        (``take`` finds ``consumed < produced``): the same goroutine runs on."""
        return self.has_work()

    def done(self, claim: Claim, t0: int, t1: int) -> None:
        n0, k = claim.token
        self.running -= 1
        self.completed += k
        self.deps.add(n0, k, t0, t1)

    def requeue(self, claim: Claim, left_ns: int, t0: int, t1: int) -> None:
        n0, k = claim.token
        self.running -= 1
        frac_done = 1.0 - left_ns / claim.work if claim.work else 1.0
        kd = min(k - 1, int(k * frac_done))
        if kd > 0:
            self.completed += kd
            self.deps.add(n0, kd, t0, t1)
        self.requeued.append([n0 + kd, k - kd, max(1, int(left_ns))])

    # arrivals ------------------------------------------------------------------------
    def deliver(self, t_ns: int) -> int:
        """Bring records produced up to ``t_ns`` into the process; returns how many."""
        total = self.initial + int(math.floor(self.rate.cum_scalar(max(0.0, t_ns / 1e9 - self.start_s)) + 1e-9))
        new = total - self.arrived
        if new > 0:
            self.arrived = total
        self.reshare()
        return max(0, new)

    def reshare(self) -> None:
        """Records per chunk: the waiting records shared evenly among the workers that can run
        in parallel (each worker takes records one by one; a P runs one worker's run of them)."""
        self.share = max(1, math.ceil((self.arrived - self.head) / max(1, self.parallel)))

    def arrival_times(self, idx: np.ndarray) -> np.ndarray:
        """Production time [s] of record ``idx`` (0-based; the initial backlog at t=0)."""
        idx = np.asarray(idx, dtype=float)
        out = np.zeros_like(idx)
        m = idx >= self.initial
        out[m] = self.rate.inverse(idx[m] - self.initial + 1) + self.start_s
        return out

    def completion_table(self) -> tuple[np.ndarray, np.ndarray]:
        """Completion time [s] of sampled record indices (completed ones only)."""
        if not len(self.deps):
            return np.zeros(0), np.zeros(0)
        d = self.deps.table()
        d = d[np.argsort(d[:, 0], kind="stable")]
        n0, k, t0, t1 = d.T
        ends = n0 + k
        total = int(ends.max())
        step = max(1, total // MAX_LATENCY_SAMPLES)
        idx = np.arange(0, total, step, dtype=float)
        j = np.searchsorted(n0, idx, side="right") - 1
        ok = (j >= 0) & (idx < ends[np.clip(j, 0, None)])
        idx, j = idx[ok], j[ok]
        t_done = (t0[j] + (idx - n0[j] + 1) / k[j] * (t1[j] - t0[j])) / 1e9
        return idx, t_done

    def lag_s(self, t_ns: int) -> float:
        if self.completed >= self.arrived:
            return 0.0
        oldest = self.completed if not self.requeued else min(self.completed, min(r[0] for r in self.requeued))
        if oldest < self.initial:
            return t_ns / 1e9
        t_a = float(np.interp(oldest - self.initial + 1, self.rate.grid_c, self.rate.grid_t)) + self.start_s
        return max(0.0, t_ns / 1e9 - t_a)


class StreamWorkload:
    def __init__(self, engine, scenario, rng: np.random.Generator):
        self.engine = engine
        self.sc = scenario
        w = scenario.section("workload")
        self.rate = RateFn(w["rate_per_s"], scenario["run.duration_s"] + 1.0)
        self.rt = make_runtime(engine, scenario)
        self.stream = RecordStream(self.rate, w["cpu_ms_per_item"] * 1e6, w["alloc_kb_per_item"] * 1024,
                                   w["workers"], w["initial_backlog"], cpu_cv=w["cpu_cv"],
                                   rng=np.random.default_rng([scenario["run.seed"], 0x5EED]))
        self.scrapes = with_side_work(engine, self.rt, self.stream, scenario)
        self.fetch_ns = fetch_interval_ns(scenario)
        self.sample_ns = sample_interval_ns(scenario)
        self.samples: list[tuple] = []

    def start(self) -> None:
        self.stream.parallel = min(self.stream.workers, self.rt.nprocs)
        if self.scrapes is not None:
            self.scrapes.start()
        self.rt.start()
        self.rt.after_build(self._begin)
        self.engine.call_at(0, self._sample)

    def _begin(self) -> None:
        """The records start to arrive: at t = 0, or once a heap built before the load is done
        (``go.heap_build = "before-load"``: the lab's stream starts when the harness says so)."""
        now = self.engine.now
        if now == 0:
            self.engine.call_at(0, self._fetch)
            return
        self.stream.start_s = now / 1e9
        self._fetch()

    def _fetch(self) -> None:
        self.stream.parallel = min(self.stream.workers, self.rt.nprocs)
        if self.stream.deliver(self.engine.now) > 0 or self.stream.has_work():
            self.rt.ready(1, spawns=True)   # the consumer goroutine, which hands records to workers
        self.engine.call_later(self.fetch_ns, self._fetch)

    def _sample(self) -> None:
        self.samples.append(sample_row(self.stream, self.engine.now))
        self.engine.call_later(self.sample_ns, self._sample)

    def sample_now(self) -> None:
        """The sample due exactly at the end of the run, whose event the engine stops before."""
        if not self.samples or self.samples[-1][0] < self.engine.now:
            self.samples.append(sample_row(self.stream, self.engine.now))

    def summary(self, t0_ns: int, t1_ns: int) -> dict[str, Any]:
        s = self.stream
        span = (t1_ns - t0_ns) / 1e9
        arrived_in = (s.initial if t0_ns <= 0 else 0) + float(s.rate.cum(max(0.0, t1_ns / 1e9 - s.start_s))
                                                              - s.rate.cum(max(0.0, t0_ns / 1e9 - s.start_s)))
        out = record_summary(s, self.samples, t0_ns, t1_ns, self.engine.now, self.sc["run.latency_buckets_s"])
        out["arrival_rate_per_s"] = arrived_in / span
        out.update(self.rt.summary(t0_ns, t1_ns))
        return out

    def series(self, step_ns: int) -> pd.DataFrame:
        df = record_series(self.samples, step_ns, self.sample_ns)
        return df if df.empty else merge_series(self.rt.series(step_ns), df)


def sample_row(s: RecordStream, now: int) -> tuple:
    """One sample of a record stream: time, arrived, consumed, backlog, lag."""
    return (now, s.arrived, s.completed, s.arrived - s.completed, s.lag_s(now))


def record_summary(s: RecordStream, samples: list[tuple], t0_ns: int, t1_ns: int, now: int,
                   buckets_s: Sequence[float] | None = None) -> dict[str, Any]:
    """Throughput, backlog, lag and record latencies (FIFO arrival/departure curves) over (t0, t1];
    ``buckets_s``: quantiles read through a histogram's buckets (``run.latency_buckets_s``)."""
    span = (t1_ns - t0_ns) / 1e9
    idx, t_done = s.completion_table()
    win = (t_done > t0_ns / 1e9) & (t_done <= t1_ns / 1e9)
    lat = t_done[win] - s.arrival_times(idx[win])
    done_in = count_at(samples, t1_ns, 2, now, s.completed) - count_at(samples, t0_ns, 2, now, s.completed)
    out = {
        "throughput_per_s": done_in / span,
        "records_completed": int(done_in),
        "backlog_final": int(s.arrived - s.completed),
        "lag_final_s": s.lag_s(t1_ns),
    }
    out.update(latency_keys(lat, buckets_s))
    return out


def record_series(samples: list[tuple], step_ns: int, sample_ns: int) -> pd.DataFrame:
    """The stream's samples at ``step_ns`` under Prometheus-like names."""
    arr = np.asarray(samples, dtype=float)
    if arr.size == 0:
        return pd.DataFrame()
    arr = arr[::max(1, int(round(step_ns / sample_ns)))]
    dt = np.diff(arr[:, 0], prepend=np.nan) / 1e9
    return pd.DataFrame({"t_s": arr[:, 0] / 1e9, "records_arrived_total": arr[:, 1],
                         "records_consumed_total": arr[:, 2],
                         "consumption_rate_per_s": np.diff(arr[:, 2], prepend=np.nan) / dt,
                         "backlog_records": arr[:, 3], "lag_s": arr[:, 4]})


def build(engine, scenario, rng: np.random.Generator) -> StreamWorkload:
    return StreamWorkload(engine, scenario, rng)
