"""The HorizontalPodAutoscaler for a CPU ``Resource`` metric (kubernetes/kubernetes
``pkg/controller/podautoscaler/horizontal.go``, ``replica_calculator.go``;
https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/).

Every sync (15 s): utilisation = ``int(sum(usage_m) * 100 / sum(request_m))`` (an int percent, so
relative to REQUESTS), ratio = utilisation / target; within tolerance (default 0.1) keep the
current count, else ``ceil(ratio * ready_pods)``, with the upstream handling of missing metrics and
not-yet-ready pods. The desired count is then stabilised (scale-up: min over the window, default
0 s; scale-down: max over the window, default 300 s), limited by the scale policies (per period:
``Pods`` adds/removes a fixed count, ``Percent`` ``ceil``/``trunc`` a fraction of the count at the
period start; ``selectPolicy`` Max/Min/Disabled) and clamped to ``[minReplicas, maxReplicas]``.
Without ``spec.behavior`` (legacy) scale-up is limited to ``max(2 * current, 4)`` per sync.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

CPU_INITIALIZATION_PERIOD_S = 300.0
INITIAL_READINESS_DELAY_S = 30.0


@dataclass(frozen=True)
class PodMetric:
    """One pod as the HPA sees it (CPU summed over containers, millicores)."""

    request_m: int
    usage_m: int | None  # None: no metrics for this pod
    ready: bool = True
    start_s: float | None = 0.0
    ready_transition_s: float | None = 0.0
    metric_timestamp_s: float = 0.0
    metric_window_s: float = 15.0
    pending: bool = False
    deleting: bool = False
    failed: bool = False


@dataclass(frozen=True)
class Tolerance:
    """Scale-down / scale-up tolerances (one global flag, or per direction since K8s 1.33)."""

    down: float = 0.1
    up: float = 0.1

    def within(self, ratio: float) -> bool:
        return (1.0 - self.down) <= ratio <= (1.0 + self.up)


def utilization_pct(usage_m_total: int, request_m_total: int) -> int:
    """``int32(metricsTotal * 100 / requestsTotal)`` (integer division)."""
    if request_m_total <= 0:
        raise ValueError("missing CPU request: utilisation is relative to requests")
    return (usage_m_total * 100) // request_m_total


def _unready(p: PodMetric, now_s: float) -> bool:
    if p.ready_transition_s is None or p.start_s is None:
        return True
    if now_s < p.start_s + CPU_INITIALIZATION_PERIOD_S:
        return (not p.ready) or p.metric_timestamp_s < p.ready_transition_s + p.metric_window_s
    return (not p.ready) and (p.start_s + INITIAL_READINESS_DELAY_S > p.ready_transition_s)


def desired_replicas(pods: list[PodMetric], target_utilization_pct: int, current_replicas: int,
                     now_s: float = 0.0, tolerance: Tolerance = Tolerance()) -> tuple[int, int | None]:
    """(desired replicas, utilisation %) for one CPU ``Resource`` metric (``GetResourceReplicas``)."""
    ready = 0
    used: dict[int, tuple[int, int]] = {}  # index -> (usage_m, request_m)
    ignored: list[int] = []
    missing: list[int] = []
    for i, p in enumerate(pods):
        if p.deleting or p.failed:
            continue
        if p.pending:
            ignored.append(i)
            continue
        if p.usage_m is None:
            missing.append(i)
            continue
        if _unready(p, now_s):
            ignored.append(i)
            continue
        ready += 1
        used[i] = (p.usage_m, p.request_m)
    if not used:
        return current_replicas, None

    def ratio(m: dict[int, tuple[int, int]]) -> tuple[float, int]:
        util = utilization_pct(sum(u for u, _ in m.values()), sum(r for _, r in m.values()))
        return util / target_utilization_pct, util

    r, util = ratio(used)
    if not (ignored and r > 1.0) and not missing:
        if tolerance.within(r):
            return current_replicas, util
        return int(math.ceil(r * ready)), util
    filled = dict(used)
    for i in missing:
        filled[i] = ((pods[i].request_m if r < 1.0 else 0), pods[i].request_m)
    if ignored and r > 1.0:
        for i in ignored:
            filled[i] = (0, pods[i].request_m)
    r2, _ = ratio(filled)
    if tolerance.within(r2) or (r < 1.0) != (r2 < 1.0):
        return current_replicas, util
    new = int(math.ceil(r2 * len(filled)))
    if (r2 < 1.0 and new > current_replicas) or (r2 > 1.0 and new < current_replicas):
        return current_replicas, util
    return new, util


@dataclass(frozen=True)
class ScalingPolicy:
    kind: str  # "Pods" | "Percent"
    value: int
    period_s: float


@dataclass(frozen=True)
class ScalingRules:
    stabilization_window_s: float
    policies: tuple[ScalingPolicy, ...]
    select_policy: str = "Max"  # "Max" | "Min" | "Disabled"


DEFAULT_SCALE_UP = ScalingRules(0.0, (ScalingPolicy("Pods", 4, 15.0), ScalingPolicy("Percent", 100, 15.0)), "Max")
DEFAULT_SCALE_DOWN = ScalingRules(300.0, (ScalingPolicy("Percent", 100, 15.0),), "Max")


@dataclass
class HpaState:
    """The controller's memory for one HPA: unstabilised recommendations and scale events."""

    recommendations: list[tuple[float, int]] = field(default_factory=list)
    scale_up_events: list[tuple[float, int]] = field(default_factory=list)
    scale_down_events: list[tuple[float, int]] = field(default_factory=list)


def stabilize(state: HpaState, now_s: float, desired: int, current: int, up: ScalingRules,
              down: ScalingRules) -> int:
    """Stabilisation with behaviours; records ``desired`` (unstabilised) in ``state``."""
    up_rec = desired
    down_rec = desired
    up_cut = now_s - up.stabilization_window_s
    down_cut = now_s - down.stabilization_window_s
    old_index = None
    for i, (t, rec) in enumerate(state.recommendations):
        if t > up_cut:
            up_rec = min(up_rec, rec)
        if t > down_cut:
            down_rec = max(down_rec, rec)
        if t < up_cut and t < down_cut:
            old_index = i
    out = current
    if out < up_rec:
        out = up_rec
    if out > down_rec:
        out = down_rec
    if old_index is not None:
        state.recommendations[old_index] = (now_s, desired)
    else:
        state.recommendations.append((now_s, desired))
    return out


def _change_in_period(events: list[tuple[float, int]], now_s: float, period_s: float) -> int:
    cut = now_s - period_s
    return sum(n for t, n in events if t > cut)


def _policy_limit(current: int, state: HpaState, now_s: float, rules: ScalingRules,
                  proposal: Callable[[int, ScalingPolicy], int], most: Callable[..., int],
                  least: Callable[..., int]) -> int:
    """Each policy proposes from the replica count at the start of its period; ``selectPolicy``
    keeps the most permissive proposal (``Max``, the default) or the least (``Min``)."""
    if rules.select_policy == "Disabled":
        return current
    pick = least if rules.select_policy == "Min" else most
    result: int | None = None
    for pol in rules.policies:
        start = (current - _change_in_period(state.scale_up_events, now_s, pol.period_s)
                 + _change_in_period(state.scale_down_events, now_s, pol.period_s))
        proposed = proposal(start, pol)
        result = proposed if result is None else pick(result, proposed)
    return current if result is None else result


def scale_up_limit(current: int, state: HpaState, now_s: float, rules: ScalingRules) -> int:
    return _policy_limit(current, state, now_s, rules, lambda start, pol: (
        start + pol.value if pol.kind == "Pods" else int(math.ceil(start * (1.0 + pol.value / 100.0)))), max, min)


def scale_down_limit(current: int, state: HpaState, now_s: float, rules: ScalingRules) -> int:
    return _policy_limit(current, state, now_s, rules, lambda start, pol: (
        start - pol.value if pol.kind == "Pods" else int(start * (1.0 - pol.value / 100.0))), min, max)


def limit_rate(state: HpaState, now_s: float, desired: int, current: int, min_replicas: int, max_replicas: int,
               up: ScalingRules, down: ScalingRules) -> int:
    """``convertDesiredReplicasWithBehaviorRate``: policies and [min, max]."""
    if desired > current:
        lim = max(scale_up_limit(current, state, now_s, up), current)
        return min(desired, max_replicas, lim)
    if desired < current:
        lim = min(scale_down_limit(current, state, now_s, down), current)
        return max(desired, min_replicas, lim)
    return desired


def legacy_normalize(state: HpaState, now_s: float, desired: int, current: int, min_replicas: int,
                     max_replicas: int, downscale_stabilization_s: float = 300.0) -> int:
    """Without ``spec.behavior``: max over the last 5 min, scale-up at most ``max(2 * current, 4)``."""
    cut = now_s - downscale_stabilization_s
    state.recommendations = [(t, r) for t, r in state.recommendations if t > cut]
    state.recommendations.append((now_s, desired))
    rec = max(r for _, r in state.recommendations)
    up_limit = int(max(2.0 * current, 4.0))
    rec = min(rec, up_limit)
    return max(min_replicas, min(max_replicas, rec))


def record_scale_event(state: HpaState, now_s: float, old: int, new: int, keep_s: float = 3600.0) -> None:
    """Remember a replica change for the rate policies (old events are dropped)."""
    cut = now_s - keep_s
    if new > old:
        state.scale_up_events.append((now_s, new - old))
    elif new < old:
        state.scale_down_events.append((now_s, old - new))
    state.scale_up_events[:] = [e for e in state.scale_up_events if e[0] > cut]
    state.scale_down_events[:] = [e for e in state.scale_down_events if e[0] > cut]


def reconcile(state: HpaState, now_s: float, pods: list[PodMetric], current: int, target_utilization_pct: int,
              min_replicas: int, max_replicas: int, tolerance: Tolerance = Tolerance(),
              up: ScalingRules | None = DEFAULT_SCALE_UP, down: ScalingRules | None = DEFAULT_SCALE_DOWN
              ) -> tuple[int, int | None]:
    """One sync: (new replica count, utilisation %). ``up``/``down`` None = legacy (no behavior)."""
    if current == 0:
        return current, None
    if current > max_replicas:
        desired, util = max_replicas, None
    elif current < min_replicas:
        desired, util = min_replicas, None
    else:
        desired, util = desired_replicas(pods, target_utilization_pct, current, now_s, tolerance)
        if up is None or down is None:
            desired = legacy_normalize(state, now_s, desired, current, min_replicas, max_replicas)
        else:
            desired = stabilize(state, now_s, desired, current, up, down)
            desired = limit_rate(state, now_s, desired, current, min_replicas, max_replicas, up, down)
    if desired != current:
        record_scale_event(state, now_s, current, desired)
    return desired, util
