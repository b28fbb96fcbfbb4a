"""The VPA admission controller's CPU arithmetic (kubernetes/autoscaler ``vertical-pod-autoscaler/``
``pkg/admission-controller/resource/pod/recommendation/recommendation_provider.go``,
``pkg/utils/vpa/capping.go``, ``pkg/utils/vpa/limit_and_request_scaling.go: GetProportionalLimit``).

At pod creation the recommendation is capped (``minAllowed``/``maxAllowed``; with
``controlledValues: RequestsOnly`` also to the container's current limit, since a request may not
exceed its limit), the request becomes the capped target and, with ``RequestsAndLimits`` (default),
the limit is scaled in proportion to the request in integer millicores with a floor::

    no original limit        -> no limit
    new request == 0         -> no limit
    no original request      -> limit = new request
    orig request == orig limit -> limit = new request
    otherwise                -> limit = floor(orig_limit * new_request / orig_request)

"Original" values are those of the pod being created (the template) at admission, and the pod's
current resources for an in-place resize.
"""
from __future__ import annotations

from dataclasses import dataclass

from cfsim.autoscalers.vpa_recommender import Recommendation, cap_to_policy

REQUESTS_AND_LIMITS = "RequestsAndLimits"
REQUESTS_ONLY = "RequestsOnly"
CONTROLLED_VALUES = (REQUESTS_AND_LIMITS, REQUESTS_ONLY)


@dataclass(frozen=True)
class Resources:
    """A container's CPU request and limit [millicores]; None = not set."""

    request_m: int | None
    limit_m: int | None


def proportional_limit_m(orig_request_m: int | None, orig_limit_m: int | None, new_request_m: int) -> int | None:
    """``GetProportionalLimit`` for CPU (integer millicores, floor)."""
    if not orig_limit_m:
        return None
    if new_request_m == 0:
        return None
    if not orig_request_m:
        return new_request_m
    if orig_request_m == orig_limit_m:
        return new_request_m
    return (orig_limit_m * new_request_m) // orig_request_m


def capped_recommendation(rec: Recommendation, controlled_values: str, current_limit_m: int | None,
                          min_allowed_m: int | None = None, max_allowed_m: int | None = None) -> Recommendation:
    """``cappingRecommendationProcessor.Apply`` (CPU): policy bounds, then the RequestsOnly limit cap."""
    def cap(x: int) -> int:
        x = cap_to_policy(x, min_allowed_m, max_allowed_m)
        if controlled_values == REQUESTS_ONLY and current_limit_m and x > current_limit_m:
            x = current_limit_m
        return x

    return Recommendation(cap(rec.target), cap(rec.lower_bound), cap(rec.upper_bound), rec.uncapped_target)


def admit(rec: Recommendation | None, controlled_values: str, original: Resources,
          min_allowed_m: int | None = None, max_allowed_m: int | None = None) -> Resources:
    """Resources of a container created (or resized in place) with the VPA's recommendation.

    ``original`` is the template (admission) or the pod's current resources (in-place). Without a
    recommendation the original resources are kept.
    """
    if rec is None:
        return original
    capped = capped_recommendation(rec, controlled_values, original.limit_m, min_allowed_m, max_allowed_m)
    request = capped.target
    if controlled_values == REQUESTS_ONLY:
        return Resources(request, original.limit_m)
    return Resources(request, proportional_limit_m(original.request_m, original.limit_m, request))
