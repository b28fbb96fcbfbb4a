"""The VPA updater's decisions, CPU only (kubernetes/autoscaler ``vertical-pod-autoscaler/``
``pkg/updater/logic/updater.go``, ``pkg/updater/priority/update_priority_calculator.go``,
``pkg/updater/restriction/``).

A pod is a candidate when its request is outside ``[lowerBound, upperBound]`` (at any age), or
after a quick OOM, or - inside the bounds - when it is at least 12 h old AND the relative change
``|request - target| / request`` is at least 10%. Candidates are ordered scale-ups first, then by
larger change. A group with fewer live pods than ``minReplicas`` (default 2) is never touched; the
disruption budget lets ``int(replicas * 0.5)`` pods go per loop. ``Recreate`` evicts (the pod comes
back through admission); ``InPlaceOrRecreate`` resizes the running pod (same candidate rules),
falling back to eviction when the resize is infeasible.
"""
from __future__ import annotations

from dataclasses import dataclass

from cfsim.autoscalers.vpa_recommender import Recommendation

UPDATE_MODES = ("Off", "Initial", "Recreate", "Auto", "InPlaceOrRecreate")

DEFAULT_EVICTION_LIFETIME_S = 12 * 3600.0
DEFAULT_UPDATE_THRESHOLD = 0.10
DEFAULT_MIN_REPLICAS = 2
DEFAULT_EVICTION_TOLERANCE = 0.5
DEFAULT_EVICT_AFTER_OOM_S = 600.0


@dataclass(frozen=True)
class Priority:
    """``UpdatePriorityCalculator`` output for one pod."""

    outside_recommended_range: bool
    scale_up: bool
    resource_diff: float


def update_priority(request_m: int | None, rec: Recommendation) -> Priority:
    """Bounds rule and relative change for one container's CPU (request in millicores)."""
    if request_m is None:
        return Priority(True, True, abs(1 - rec.target) / 1)
    scale_up = rec.target > request_m
    outside = request_m < rec.lower_bound or request_m > rec.upper_bound
    denom = max(request_m, 1)
    return Priority(outside, scale_up, abs(denom - rec.target) / denom)


def quick_oom(oom_killed: bool, ran_for_s: float, evict_after_oom_s: float = DEFAULT_EVICT_AFTER_OOM_S) -> bool:
    """The last termination was an OOM kill less than ``evict_after_oom_s`` after the container started."""
    return oom_killed and ran_for_s < evict_after_oom_s


def is_update_candidate(prio: Priority, pod_age_s: float | None, quick_oomed: bool = False,
                        eviction_lifetime_s: float = DEFAULT_EVICTION_LIFETIME_S,
                        update_threshold: float = DEFAULT_UPDATE_THRESHOLD) -> bool:
    """Whether the updater would act on this pod (``UpdatePriorityCalculator.AddPod``)."""
    if not prio.outside_recommended_range and not quick_oomed:
        if pod_age_s is None:
            return False
        if pod_age_s < eviction_lifetime_s:
            return False
        if prio.resource_diff < update_threshold:
            return False
    if quick_oomed and prio.resource_diff == 0:
        return False
    return True


def candidate_order_key(prio: Priority) -> tuple[int, float]:
    """Sort key: scale-ups first, then larger relative change (use with ``sorted``)."""
    return (0 if prio.scale_up else 1, -prio.resource_diff)


def eviction_tolerance_count(configured_replicas: int, tolerance: float = DEFAULT_EVICTION_TOLERANCE) -> int:
    """``int(replicas * --eviction-tolerance)``."""
    return int(configured_replicas * tolerance)


def group_eligible(live_pods: int, min_replicas: int = DEFAULT_MIN_REPLICAS) -> bool:
    """A replica group with fewer live pods than ``minReplicas`` is skipped entirely."""
    return live_pods >= min_replicas


def can_evict(configured_replicas: int, running: int, evicted_this_loop: int, pending: bool = False,
              tolerance: float = DEFAULT_EVICTION_TOLERANCE, inplace_this_loop: int = 0,
              min_replicas: int = DEFAULT_MIN_REPLICAS) -> bool:
    """The disruption budget of one replica group for one more eviction (or in-place resize)."""
    if pending:
        return True
    if running < min_replicas:
        return False
    tol = eviction_tolerance_count(configured_replicas, tolerance)
    alive = running - (evicted_this_loop + inplace_this_loop)
    return alive > configured_replicas - tol or (
        configured_replicas == running and tol == 0 and evicted_this_loop == 0 and inplace_this_loop == 0)
