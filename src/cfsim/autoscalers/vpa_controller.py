"""One VPA (recommender + updater + admission) for one Deployment with one container, as a small
stateful object any clock can drive: the long-horizon engine, or a real-time lab harness moving a
real cgroup quota with scaled-down time constants.

    vpa = VpaController.from_scenario(sc)
    res = vpa.admit()                                # resources of a pod being created
    vpa.recommender_loop(t_s, {uid: (timestamp_s, usage_cores)})     # every sample_interval_s
    for action in vpa.updater_loop(t_s, pods, replicas):             # every updater_interval_s
        ...  # "evict": delete the pod and create it again via admit(); "resize": apply in place

Times are seconds on the caller's clock; ``start_unix_s`` maps t = 0 to wall-clock time for the
histogram's reference rounding.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from cfsim.autoscalers.vpa_admission import Resources, admit, capped_recommendation
from cfsim.autoscalers.vpa_recommender import (AggregateState, ContainerSampler, Recommendation, RecommenderConfig,
                                               config_from_scenario, cores_to_millicores, recommend)
from cfsim.autoscalers.vpa_updater import (can_evict, candidate_order_key, group_eligible, is_update_candidate,
                                           update_priority)

EVICTING_MODES = ("Recreate", "Auto", "InPlaceOrRecreate")


@dataclass(frozen=True)
class PodView:
    """What the updater needs to know about one live pod."""

    uid: Any
    request_m: int | None
    limit_m: int | None
    start_s: float  # pod StartTime (not reset by an in-place resize)
    pending: bool = False


@dataclass(frozen=True)
class VpaAction:
    """An updater decision: ``evict`` (re-create through admission) or ``resize`` (in place)."""

    kind: str
    uid: Any
    reason: str
    resources: Resources  # for "resize": the new resources; for "evict": what admission would give now


@dataclass
class VpaController:
    cfg: RecommenderConfig = field(default_factory=RecommenderConfig)
    update_mode: str = "Recreate"
    controlled_values: str = "RequestsAndLimits"
    template: Resources = Resources(500, 500)
    eviction_lifetime_s: float = 12 * 3600.0
    update_threshold: float = 0.10
    eviction_tolerance: float = 0.5
    min_replicas: int = 2
    start_unix_s: float = 0.0
    max_request_m: int | None = None  # in-place resize above this (node size) is infeasible -> evict
    state: AggregateState | None = None
    recommendation: Recommendation | None = None
    samplers: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.state is None:
            self.state = AggregateState.new(self.cfg.half_life_s, self.cfg.histogram)

    @classmethod
    def from_scenario(cls, sc) -> "VpaController":
        """From a validated scenario's ``[vpa]`` section (and ``host.cpus`` for in-place feasibility)."""
        vpa = sc.section("vpa")
        req_m = cores_to_millicores(vpa["initial_request_cores"])
        ratio = vpa["limit_to_request_ratio"]
        lim_m = None if not ratio else int(math.floor(req_m * ratio + 1e-6))
        return cls(cfg=config_from_scenario(vpa), update_mode=vpa["update_mode"],
                   controlled_values=vpa["controlled_values"], template=Resources(req_m, lim_m),
                   eviction_lifetime_s=vpa["eviction_lifetime_s"], update_threshold=vpa["update_threshold"],
                   eviction_tolerance=vpa["eviction_tolerance"], min_replicas=vpa["min_replicas"],
                   start_unix_s=vpa["start_unix_s"], max_request_m=int(sc["host.cpus"]) * 1000)

    # ---- policy changes (e.g. a manual override during a run) ----------------------------------
    def set_policy(self, **changes: Any) -> None:
        """Change recommender fields (``min_allowed_millicores``, ``integer_cpu`` ...) and recompute."""
        self.cfg = replace(self.cfg, **changes)
        assert self.state is not None
        if self.state.total_samples:
            self.recommendation = recommend(self.state, self.cfg)

    # ---- admission ------------------------------------------------------------------------------
    def admit(self, original: Resources | None = None) -> Resources:
        """Resources of a pod created now (from the template unless ``original`` is given)."""
        original = original or self.template
        if self.update_mode == "Off" or self.recommendation is None:
            return original
        return admit(self.recommendation, self.controlled_values, original,
                     self.cfg.min_allowed_millicores, self.cfg.max_allowed_millicores)

    # ---- recommender ----------------------------------------------------------------------------
    def recommender_loop(self, t_s: float, points: dict[Any, tuple[float, float]]) -> Recommendation | None:
        """One loop: add each container's latest metrics point under the strictly-later rule, then
        recompute the recommendation (none until the first sample)."""
        assert self.state is not None
        for uid, (ts, cores) in points.items():
            sampler = self.samplers.setdefault(uid, ContainerSampler())
            if sampler.accept(ts):
                self.state.add_cpu_sample(cores, self.start_unix_s + ts)
        if self.state.total_samples:
            self.recommendation = recommend(self.state, self.cfg)
        return self.recommendation

    def forget(self, uid: Any) -> None:
        """A pod is gone: drop its per-container sampler (its samples stay in the shared history)."""
        self.samplers.pop(uid, None)

    # ---- updater --------------------------------------------------------------------------------
    def updater_loop(self, t_s: float, pods: list[PodView], configured_replicas: int,
                     memory=None) -> list[VpaAction]:
        """One updater loop: the candidates it acts on, in order, within the disruption budget.

        ``memory(pod) -> (outside, scale_up, diff, quick_oom)``: the memory terms when the VPA also
        controls memory; ``GetUpdatePriority`` ORs the range and direction flags over the
        resources and SUMS their relative differences, and a quick OOM makes the pod a candidate."""
        rec = self.recommendation
        if rec is None or self.update_mode not in EVICTING_MODES or not group_eligible(len(pods), self.min_replicas):
            return []
        cands = []
        for pod in pods:
            capped = capped_recommendation(rec, self.controlled_values, pod.limit_m,
                                           self.cfg.min_allowed_millicores, self.cfg.max_allowed_millicores)
            prio = update_priority(pod.request_m, capped)
            qoom = False
            if memory is not None:
                m_out, m_up, m_diff, qoom = memory(pod)
                prio = replace(prio, outside_recommended_range=prio.outside_recommended_range or m_out,
                               scale_up=prio.scale_up or m_up, resource_diff=prio.resource_diff + m_diff)
            if is_update_candidate(prio, t_s - pod.start_s, qoom, self.eviction_lifetime_s, self.update_threshold):
                cands.append((candidate_order_key(prio), pod, prio, capped))
        cands.sort(key=lambda c: c[0])
        actions: list[VpaAction] = []
        running = sum(1 for p in pods if not p.pending)
        for _, pod, prio, capped in cands:
            if not can_evict(configured_replicas, running, len(actions), pending=pod.pending,
                             tolerance=self.eviction_tolerance, min_replicas=self.min_replicas):
                break
            if pod.request_m is not None and pod.request_m < capped.lower_bound:
                reason = "below lower bound"
            elif prio.outside_recommended_range:
                reason = "above upper bound"
            else:
                reason = f"diff {prio.resource_diff:.3f} >= threshold after lifetime"
            if self.update_mode == "InPlaceOrRecreate":
                res = self.admit(Resources(pod.request_m, pod.limit_m))
                feasible = res.request_m is not None and (self.max_request_m is None
                                                          or res.request_m <= self.max_request_m)
                if feasible:
                    actions.append(VpaAction("resize", pod.uid, reason, res))
                    continue
                reason += "; in-place infeasible"
            actions.append(VpaAction("evict", pod.uid, reason, self.admit()))
        return actions
