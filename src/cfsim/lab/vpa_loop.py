"""Hardware in the loop: cfsim's own VPA moving a real cgroup quota during a lab run.

Every ``vpa.sample_interval_s`` the recommender gets one sample, the mean CPU usage of the
cgroup over the last ``vpa.metrics_window_s`` (what metrics-server would report); every
``vpa.updater_interval_s`` the updater decides, and a resize is applied to the real quota at once
(an in-place resize: the process keeps running, so automaxprocs keeps the GOMAXPROCS it chose at
start while the Go >= 1.25 default re-reads the limit). Time constants are the scenario's own:
scale them down (half-life, intervals, eviction lifetime) so the trap forms in minutes.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Callable

from cfsim.autoscalers.vpa_controller import PodView, VpaController
from cfsim.scenario import Scenario


class LabVpa:
    POD = "lab-pod"

    def __init__(self, sc: Scenario, read_usage_ns: Callable[[], int], apply_limit: Callable[[float], None],
                 start_limit_cores: float | None):
        self.vpa = VpaController.from_scenario(sc)
        self.read_usage_ns = read_usage_ns
        self.apply_limit = apply_limit
        self.sample_s = sc["vpa.sample_interval_s"]
        self.updater_s = sc["vpa.updater_interval_s"]
        self.window_s = sc["vpa.metrics_window_s"]
        res = self.vpa.admit()
        self.request_m = res.request_m
        self.limit_m = res.limit_m if res.limit_m is not None else (
            None if start_limit_cores is None else int(round(start_limit_cores * 1000)))
        self.history: deque[tuple[float, int]] = deque()
        self.next_sample = self.sample_s
        self.next_update = self.updater_s
        self.timeline: list[dict[str, Any]] = []

    def tick_times(self, duration_s: float) -> list[float]:
        step = min(self.sample_s, self.updater_s)
        n = int(duration_s / step)
        return [round(k * step, 9) for k in range(1, n + 1) if k * step < duration_s]

    def tick(self, t_s: float) -> dict[str, Any] | None:
        """Called at each tick time; returns the quota change it applied, if any."""
        usage = self.read_usage_ns()
        self.history.append((t_s, usage))
        while len(self.history) > 2 and self.history[1][0] <= t_s - self.window_s:
            self.history.popleft()
        change = None
        if t_s + 1e-9 >= self.next_sample and len(self.history) >= 2:
            (t0, u0), (t1, u1) = self.history[0], self.history[-1]
            cores = (u1 - u0) / 1e9 / (t1 - t0) if t1 > t0 else 0.0
            self.vpa.recommender_loop(t_s, {self.POD: (t_s, cores)})
            self.next_sample += self.sample_s
        if t_s + 1e-9 >= self.next_update:
            self.next_update += self.updater_s
            pod = PodView(self.POD, self.request_m, self.limit_m, start_s=0.0)
            for action in self.vpa.updater_loop(t_s, [pod], configured_replicas=1):
                res = action.resources
                self.request_m, self.limit_m = res.request_m, res.limit_m
                if res.limit_m is not None:
                    self.apply_limit(res.limit_m / 1000)
                change = {"t_s": t_s, "vpa_action": action.kind, "reason": action.reason,
                          "request_cores": res.request_m / 1000 if res.request_m else None,
                          "cpu_limit_cores": res.limit_m / 1000 if res.limit_m else None}
        rec = self.vpa.recommendation
        self.timeline.append({"t_s": t_s, "request_cores": (self.request_m or 0) / 1000,
                              "limit_cores": (self.limit_m or 0) / 1000,
                              "target_cores": rec.target / 1000 if rec else None})
        return change
