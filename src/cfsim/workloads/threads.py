"""``kind = "threads"``: OS threads, each looping ``burn_ms`` of CPU then ``sleep_ms`` of sleep
(``sleep_dist = "exponential"``: each sleep drawn with mean ``sleep_ms``, so bursts start at random
times as requests would).

The burn durations a user timing each burn would see (wall time from the start of a burn to its
end, throttling and CPU sharing included) are the workload's output.
"""
from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np
import pandas as pd

from cfsim.engine.cfs import CfsEngine
from cfsim.scenario import Scenario
from cfsim.workloads.kinds import WorkloadKind, WorkShape


def work_shape(w) -> WorkShape:
    """Each burn of ``burn_ms`` is one item; OS threads are not bound by GOMAXPROCS; the threads
    offer ``threads x burn / (burn + sleep)`` cores whatever the arrival rate."""
    busy = w["burn_ms"] / (w["burn_ms"] + w["sleep_ms"])
    return WorkShape("threads", w["burn_ms"] / 1000.0, float(w["threads"]), bypass_gomaxprocs=True,
                     fixed_demand_cores=w["threads"] * busy)


KIND = WorkloadKind("threads", ("threads", "burn_ms", "sleep_ms", "jitter_ms", "sleep_dist"), "burn_ms", work_shape)


class ThreadsWorkload:
    __slots__ = ("engine", "burn_ns", "sleep_ns", "offsets", "tids", "_started", "burn_end_ns",
                 "burn_wall_ns", "_on_done", "_sleepers", "_wake_armed", "_rng", "_exponential")

    def __init__(self, engine: CfsEngine, threads: int, burn_ns: int, sleep_ns: int,
                 jitter_ns: int, rng: np.random.Generator, sleep_dist: str = "fixed"):
        self.engine = engine
        self._rng = rng
        self._exponential = sleep_dist == "exponential" and sleep_ns > 0
        self.burn_ns = burn_ns
        self.sleep_ns = sleep_ns
        self.offsets = rng.uniform(0, jitter_ns, size=threads).astype(np.int64) if jitter_ns else \
            np.zeros(threads, dtype=np.int64)
        self.tids = [engine.new_thread(f"burner{i}") for i in range(threads)]
        self._started = [0] * (max(self.tids) + 1 if self.tids else 0)
        self.burn_end_ns: list[int] = []
        self.burn_wall_ns: list[int] = []
        self._on_done = self._done  # one bound method for every burn
        # Sleeping threads in wake-up order: every sleep lasts sleep_ns and begins when a burn
        # ends, in time order, so they wake FIFO. One timer for the head instead of one per
        # sleeper keeps the simulator's event queue short (it is a heap: shorter is cheaper).
        self._sleepers: deque[tuple[int, int]] = deque()
        self._wake_armed = False

    def start(self) -> None:
        for tid, offset in zip(self.tids, self.offsets):
            self.engine.call_at(int(offset), self._begin, tid)

    def _begin(self, tid: int) -> None:
        self._started[tid] = self.engine.now
        self.engine.run(tid, self.burn_ns, self._on_done)

    def _done(self, tid: int) -> int | None:
        now = self.engine.now
        self.burn_end_ns.append(now)
        self.burn_wall_ns.append(now - self._started[tid])
        if self.sleep_ns == 0:
            self._started[tid] = now
            return self.burn_ns  # CPU-bound: keep burning without blocking
        if self._exponential:
            # random sleeps do not wake in the order they began: one timer per sleeper
            wake = now + int(self._rng.exponential(self.sleep_ns))
            self._started[tid] = wake
            self.engine.call_at(wake, self._wake_one, tid)
            return None
        wake = now + self.sleep_ns
        self._started[tid] = wake
        self._sleepers.append((wake, tid))
        if not self._wake_armed:
            self._wake_armed = True
            self.engine.call_at(wake, self._wake)
        return None

    def _wake_one(self, tid: int) -> None:
        self.engine.run(tid, self.burn_ns, self._on_done)

    def _wake(self) -> None:
        now = self.engine.now
        sleepers, run = self._sleepers, self.engine.run
        while sleepers and sleepers[0][0] <= now:
            run(sleepers.popleft()[1], self.burn_ns, self._on_done)
        if sleepers:
            self.engine.call_at(sleepers[0][0], self._wake)
        else:
            self._wake_armed = False

    def summary(self, t0_ns: int, t1_ns: int) -> dict[str, Any]:
        ends = np.asarray(self.burn_end_ns, dtype=np.int64)
        walls = np.asarray(self.burn_wall_ns, dtype=np.int64)
        sel = walls[(ends > t0_ns) & (ends <= t1_ns)] / 1e9
        if sel.size == 0:
            return {"burns": 0, "burn_p50_s": None, "burn_p99_s": None, "burn_max_s": None,
                    "throughput_per_s": 0.0}
        return {
            "burns": int(sel.size),
            "burn_p50_s": float(np.percentile(sel, 50)),
            "burn_p99_s": float(np.percentile(sel, 99)),
            "burn_max_s": float(sel.max()),
            "throughput_per_s": float(sel.size / ((t1_ns - t0_ns) / 1e9)),
        }

    def series(self, step_ns: int) -> pd.DataFrame:
        ends = np.asarray(self.burn_end_ns, dtype=np.int64)
        if ends.size == 0:
            return pd.DataFrame({"t_s": [], "burns_total": []})
        edges = np.arange(step_ns, ends.max() + step_ns + 1, step_ns)
        return pd.DataFrame({"t_s": edges / 1e9, "burns_total": np.searchsorted(np.sort(ends), edges, "right")})


def build(engine: CfsEngine, scenario: Scenario, rng: np.random.Generator) -> ThreadsWorkload:
    return ThreadsWorkload(
        engine,
        threads=scenario["workload.threads"],
        burn_ns=int(round(scenario["workload.burn_ms"] * 1e6)),
        sleep_ns=int(round(scenario["workload.sleep_ms"] * 1e6)),
        jitter_ns=int(round(scenario["workload.jitter_ms"] * 1e6)),
        rng=rng,
        sleep_dist=scenario["workload.sleep_dist"],
    )
