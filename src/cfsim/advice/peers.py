"""What the usage-statistics recommenders would choose for the same usage, and what follows.

* **Stock VPA** (kubernetes/autoscaler ``vertical-pod-autoscaler/``): metrics-server window means
  of the usage through :mod:`cfsim.autoscalers.vpa_recommender` (P90 bucket end + 15 % margin,
  the scenario's ``[vpa]`` flags: rounding, integer-CPU, min/max allowed); the request becomes the
  target and the limit scales with it (``RequestsAndLimits``, ``vpa.limit_to_request_ratio``).
* **krr ``simple``** (robusta-dev/krr ``robusta_krr/strategies/simple.py``, README,
  https://github.com/robusta-dev/krr): CPU request = the 95th
  percentile of usage, CPU limit unset; minimum 10 m.
* **krr ``simple_limit``**: CPU request = the 66th percentile, CPU limit = the 96th.

krr computes the percentile in PromQL, ``quantile_over_time`` of ``rate()`` at its
``timeframe_duration`` step (1.25 min by default): a linear-interpolated quantile of window
means, which is what :func:`krr_percentile` does (numpy's default method is the same rule).

None of them sees demand: usage capped by GOMAXPROCS or by throttling looks like low demand. Each
choice is therefore simulated ("its consequence") with the scenario's own GOMAXPROCS policy,
which recomputes GOMAXPROCS from the new limit as the process would at its restart.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd

from cfsim.advice.slo import SLO, all_met
from cfsim.autoscalers.vpa_admission import Resources, admit
from cfsim.autoscalers.vpa_recommender import config_from_scenario, replay_points
from cfsim.scenario import Scenario

__all__ = ["PeerChoice", "usage_windows", "krr_percentile", "krr_simple", "krr_simple_limit", "vpa_choice",
           "peer_choices", "KRR_CPU_MIN_CORES", "KRR_TIMEFRAME_S"]

#: krr ``cpu_min_value`` (10 m) and ``timeframe_duration`` (1.25 min).
KRR_CPU_MIN_CORES = 0.010
KRR_TIMEFRAME_S = 75.0
#: Fewest usage windows a short simulated run is cut into (windows shrink to reach it, >= 1 s).
MIN_WINDOWS = 10


@dataclass
class PeerChoice:
    """One recommender's CPU request and limit [cores] and the simulated consequence."""

    name: str
    rule: str
    request_cores: float | None
    limit_cores: float | None
    window_s: float = 0.0
    samples: int = 0
    summary: dict[str, Any] = field(default_factory=dict)
    gomaxprocs: int | None = None
    met: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self, slos: Sequence[SLO] = ()) -> dict[str, Any]:
        keys = ("cpu_usage_cores", "throttled_ratio", "throughput_per_s", "latency_p99_s", "lag_final_s",
                "backlog_final")
        return {"name": self.name, "rule": self.rule, "request_cores": self.request_cores,
                "limit_cores": self.limit_cores, "gomaxprocs": self.gomaxprocs, "window_s": self.window_s,
                "samples": self.samples, "summary": {k: self.summary.get(k) for k in keys if k in self.summary},
                "slos_met": {s.text: s.met(self.summary) for s in slos} if self.summary else {},
                "meets_all": self.met, **({"extra": self.extra} if self.extra else {})}


def usage_windows(series: pd.DataFrame, window_s: float, t0_s: float = 0.0) -> list[tuple[float, float]]:
    """Mean CPU usage [cores] over consecutive windows of ``window_s`` from the cumulative
    ``container_cpu_usage_seconds_total`` series (1 s samples), as ``(window end [s], cores)``.

    >>> s = pd.DataFrame({"t_s": [0, 1, 2, 3, 4], "container_cpu_usage_seconds_total": [0, 1, 2, 2.5, 3]})
    >>> usage_windows(s, 2.0)
    [(2.0, 1.0), (4.0, 0.5)]
    """
    t = series["t_s"].to_numpy(dtype=float)
    u = series["container_cpu_usage_seconds_total"].to_numpy(dtype=float)
    out = []
    start = t0_s
    while start + window_s <= t[-1] + 1e-9:
        end = start + window_s
        u0, u1 = np.interp([start, end], t, u)
        out.append((float(end), float((u1 - u0) / window_s)))
        start = end
    return out


def _window_for(series: pd.DataFrame, t0_s: float, nominal_s: float) -> float:
    span = float(series["t_s"].iloc[-1]) - t0_s
    if span >= MIN_WINDOWS * nominal_s:
        return nominal_s
    return max(1.0, math.floor(span / MIN_WINDOWS))


def krr_percentile(usage: Sequence[float], q: float) -> float:
    """``quantile_over_time(q, ...)``: the linear-interpolated quantile (rank ``q (n - 1)``) [cores].

    >>> krr_percentile([0.1, 0.2, 0.3, 0.4, 0.5], 0.95)
    0.48
    """
    x = np.sort(np.asarray(usage, dtype=float))
    if x.size == 0:
        return float("nan")
    return float(np.quantile(x, q))


def _millicores_up(cores: float) -> float:
    return math.ceil(round(cores * 1000.0, 6)) / 1000.0


def krr_simple(usage: Sequence[float], percentile: float = 95.0) -> tuple[float, None]:
    """krr ``simple``: (request = p95 of usage, at least 10 m; no CPU limit) [cores].

    >>> krr_simple([0.5] * 19 + [2.0])
    (0.575, None)
    """
    return max(KRR_CPU_MIN_CORES, _millicores_up(krr_percentile(usage, percentile / 100))), None


def krr_simple_limit(usage: Sequence[float], request_percentile: float = 66.0,
                     limit_percentile: float = 96.0) -> tuple[float, float]:
    """krr ``simple_limit``: (request = p66, limit = p96 of usage, each at least 10 m) [cores].

    >>> krr_simple_limit([0.001 * i for i in range(101)])
    (0.066, 0.096)
    """
    req = max(KRR_CPU_MIN_CORES, _millicores_up(krr_percentile(usage, request_percentile / 100)))
    lim = max(KRR_CPU_MIN_CORES, _millicores_up(krr_percentile(usage, limit_percentile / 100)))
    return req, max(req, lim)


def vpa_choice(points: Sequence[tuple[float, float]], scenario: Scenario) -> dict[str, Any]:
    """The stock VPA's recommendation for usage ``points`` and the pod it would create.

    Each point is a metrics-server reading (window mean, stamped at the window end); the loop
    takes each one as it arrives. Request = target; limit from the template's
    ``limit_to_request_ratio`` (proportional, ``RequestsAndLimits``) or unchanged with
    ``RequestsOnly``; no ratio = no limit. Returns millicores and cores.
    """
    vpa = scenario.section("vpa")
    cfg = config_from_scenario(vpa)
    interval = points[1][0] - points[0][0] if len(points) > 1 else 60.0
    recs = replay_points(list(points), cfg, interval)
    final = recs[-1]
    ratio = vpa.get("limit_to_request_ratio")
    template_req = 1000
    template_lim = None if ratio is None else int(round(template_req * ratio))
    controlled = vpa.get("controlled_values", "RequestsAndLimits")
    if controlled == "RequestsOnly":
        lim = scenario["cgroup.cpu_limit"]
        template_lim = None if lim is None else int(round(lim * 1000))
    from cfsim.autoscalers.vpa_recommender import Recommendation

    rec = Recommendation(final["target"], final["lower_bound"], final["upper_bound"], final["uncapped_target"])
    pod = admit(rec, controlled, Resources(template_req, template_lim), cfg.min_allowed_millicores,
                cfg.max_allowed_millicores)
    return {"target_m": final["target"], "lower_bound_m": final["lower_bound"],
            "uncapped_target_m": final["uncapped_target"],
            "upper_bound_m": final["upper_bound"], "request_m": pod.request_m, "limit_m": pod.limit_m,
            "samples": final["samples"]}


def _consequence(run, scenario: Scenario, limit: float | None, slos: Sequence[SLO]) -> tuple[dict, int | None, bool]:
    over: list[tuple[str, Any]] = [("cgroup.cpu_limit", limit), ("cgroup.limit_schedule", None)]
    if limit is not None:
        quota_us = limit * scenario["cgroup.period_us"]
        if scenario["cgroup.burst_us"] > quota_us:
            over.append(("cgroup.burst_us", int(quota_us)))
    summary = run(over)
    return summary, summary.get("gomaxprocs"), all_met(slos, summary)


def peer_choices(scenario: Scenario, slos: Sequence[SLO], run, history: pd.DataFrame,
                 vpa_rounds: int = 3) -> list[PeerChoice]:
    """VPA, krr ``simple`` and krr ``simple_limit`` for the usage ``history`` (the 1 s cumulative
    series of a simulated run of ``scenario``), each simulated with ``run(overrides) -> summary``.

    The VPA is also re-applied to its own consequence up to ``vpa_rounds`` times (fresh history
    each round, as after its old samples have decayed) until the request moves less than the
    updater's threshold: where it settles (``extra["rounds"]``).
    """
    t0 = float(scenario["run.warmup_s"])
    out: list[PeerChoice] = []

    w_vpa = _window_for(history, t0, float(scenario["vpa.metrics_window_s"]))
    points = usage_windows(history, w_vpa, t0)
    if len(points) < 2:
        return []  # under 2 s of usage after the warm-up: nothing for a recommender to read
    v = vpa_choice(points, scenario)
    limit = None if v["limit_m"] is None else v["limit_m"] / 1000
    summary, g, met = _consequence(run, scenario, limit, slos)
    rule = ("request = P90 bucket end x 1.15 of window means"
            + (f", limit = request x {scenario['vpa.limit_to_request_ratio']:g}"
               if scenario["vpa.limit_to_request_ratio"] is not None else ", no limit"))
    vpa = PeerChoice("vpa", rule, v["request_m"] / 1000, limit, w_vpa, len(points), summary, g, met,
                     {"target_cores": v["target_m"] / 1000, "lower_bound_cores": v["lower_bound_m"] / 1000,
                      "upper_bound_cores": min(v["upper_bound_m"], 10 ** 9) / 1000})
    rounds = [{"request_cores": vpa.request_cores, "limit_cores": limit, "gomaxprocs": g,
               "usage_cores": summary.get("cpu_usage_cores")}]
    prev = v["request_m"]
    thr = float(scenario["vpa.update_threshold"])
    for _ in range(max(0, vpa_rounds - 1)):
        hist = summary.get("_series")
        if hist is None:
            break
        # the simulated consequence's own windows (the first history may be a long observed one)
        pts = usage_windows(hist, _window_for(hist, t0, float(scenario["vpa.metrics_window_s"])), t0)
        if len(pts) < 2:
            break
        v2 = vpa_choice(pts, scenario)
        if abs(v2["request_m"] - prev) <= thr * prev:
            break
        prev = v2["request_m"]
        lim2 = None if v2["limit_m"] is None else v2["limit_m"] / 1000
        summary, g2, _ = _consequence(run, scenario, lim2, slos)
        rounds.append({"request_cores": v2["request_m"] / 1000, "limit_cores": lim2, "gomaxprocs": g2,
                       "usage_cores": summary.get("cpu_usage_cores")})
    vpa.extra["rounds"] = rounds
    out.append(vpa)

    w_krr = _window_for(history, t0, KRR_TIMEFRAME_S)
    usage = [c for _, c in usage_windows(history, w_krr, t0)]
    req, _ = krr_simple(usage)
    summary, g, met = _consequence(run, scenario, None, slos)
    out.append(PeerChoice("krr-simple", "request = p95 of usage, no CPU limit", req, None, w_krr, len(usage),
                          summary, g, met))
    req, lim = krr_simple_limit(usage)
    summary, g, met = _consequence(run, scenario, lim, slos)
    out.append(PeerChoice("krr-simple_limit", "request = p66, limit = p96 of usage", req, lim, w_krr, len(usage),
                          summary, g, met))
    for p in out:
        p.summary = {k: v for k, v in p.summary.items() if not k.startswith("_")}
    return out
