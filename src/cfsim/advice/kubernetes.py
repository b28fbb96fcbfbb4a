"""Answers as Kubernetes objects: the VPA status block and a ready-to-apply strategic-merge patch.

* :func:`vpa_status`: ``status.recommendation.containerRecommendations`` of a
  ``VerticalPodAutoscaler`` (``autoscaling.k8s.io/v1``; field names from kubernetes/autoscaler
  ``vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1/types.go``), CPU amounts written as the
  recommender writes them (:func:`cfsim.autoscalers.vpa_recommender.cpu_quantity`, ``"1168m"``).
  cfsim models CPU only: no ``memory`` entry.
* :func:`strategic_patch`: a Deployment/StatefulSet/DaemonSet patch for ``kubectl patch --type
  strategic`` (containers and env vars merge by ``name``, so other containers and variables are
  kept): ``resources.requests/limits.cpu`` and the ``GOMAXPROCS`` env var. What a patch cannot say
  (the Go 1.25 runtime default is a rebuild; a CFS burst is not in the Kubernetes API) is returned
  as notes, printed as YAML comments above the patch.

>>> change = ContainerChange("api", limit_m=2000, request_m=1168, gomaxprocs=2)
>>> strategic_patch(("Deployment", "api"), "shop", [change])["spec"]["template"]["spec"]["containers"]
[{'name': 'api', 'resources': {'limits': {'cpu': '2'}, 'requests': {'cpu': '1168m'}}, 'env': [{'name': 'GOMAXPROCS', 'value': '2'}]}]
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from cfsim.autoscalers.vpa_recommender import Recommendation, cpu_quantity

__all__ = ["ContainerChange", "vpa_status", "strategic_patch", "patch_command", "change_from_overrides",
           "request_for", "API_VERSIONS", "GO125_NOTE", "BURST_NOTE"]

API_VERSIONS = {"Deployment": "apps/v1", "StatefulSet": "apps/v1", "DaemonSet": "apps/v1", "ReplicaSet": "apps/v1",
                "Pod": "v1"}
GO125_NOTE = ("GOMAXPROCS: build with Go >= 1.25 (go.mod 'go 1.25') and without automaxprocs: the runtime "
              "then sets GOMAXPROCS = min(node CPUs, max(2, ceil(limit))) and follows limit changes "
              "(src/runtime/cgroup_linux.go); no env var")
AUTOMAXPROCS_NOTE = "GOMAXPROCS: automaxprocs in the binary sets floor(limit) at start; no env var"
HOST_NOTE = "GOMAXPROCS: the node's CPU count (Go < 1.25 without automaxprocs); no env var"
HOST_ENV_NOTE = ("GOMAXPROCS={n}: the node's CPU count, as simulated; Go >= 1.25 would otherwise default to "
                 "min(node CPUs, max(2, ceil(limit))) (src/runtime/cgroup_linux.go)")
BURST_NOTE = ("CFS burst {ms:g} ms: not settable through the Kubernetes API (cpu.cfs_burst_us / cpu.max.burst "
              "on the node's cgroup); the patch leaves it out")


@dataclass
class ContainerChange:
    """What to change in one container: CPU limit and request [millicores], GOMAXPROCS (an int for
    the env var), and notes for what a patch cannot carry."""

    name: str
    limit_m: int | None = None
    request_m: int | None = None
    gomaxprocs: int | None = None
    notes: list[str] = field(default_factory=list)

    def empty(self) -> bool:
        return self.limit_m is None and self.request_m is None and self.gomaxprocs is None


def vpa_status(recommendations: Mapping[str, Recommendation]) -> dict[str, Any]:
    """``{"recommendation": {"containerRecommendations": [...]}}`` for ``{container: Recommendation}``."""
    recs = []
    for name, r in recommendations.items():
        recs.append({"containerName": name, "target": {"cpu": cpu_quantity(r.target)},
                     "lowerBound": {"cpu": cpu_quantity(r.lower_bound)},
                     "upperBound": {"cpu": cpu_quantity(r.upper_bound)},
                     "uncappedTarget": {"cpu": cpu_quantity(r.uncapped_target)}})
    return {"recommendation": {"containerRecommendations": recs}}


def request_for(limit_m: int | None, request_now_m: int | None, fallback_m: int | None = None) -> int | None:
    """The CPU request to write beside a new limit: today's request when known, else ``fallback_m``
    (e.g. the VPA's target), never above the limit (Kubernetes rejects a request above the limit).

    >>> request_for(1500, 2000), request_for(1500, 500), request_for(1500, None, 900), request_for(None, 700)
    (1500, None, 900, None)
    """
    if limit_m is None:
        return None
    if request_now_m is not None:
        return limit_m if request_now_m > limit_m else None   # unchanged unless above the new limit
    if fallback_m is not None:
        return min(int(fallback_m), int(limit_m))
    return int(limit_m)


def change_from_overrides(name: str, overrides: Sequence[tuple[str, Any]], request_now_m: int | None = None,
                          fallback_request_m: int | None = None, host_env: int | None = None) -> ContainerChange:
    """A :class:`ContainerChange` from scenario overrides (``cgroup.cpu_limit``, ``go.gomaxprocs``,
    ``cgroup.burst_us``) as the search and the audit's fixes write them. ``host_env``: the node's
    CPU count the ``host`` policy was simulated with, for a binary whose Go (>= 1.25) would not
    default to it: then the env var carries it, so the pod runs what was simulated."""
    ch = ContainerChange(name)
    over = dict(overrides)
    if over.get("cgroup.cpu_limit") is not None:
        ch.limit_m = int(round(float(over["cgroup.cpu_limit"]) * 1000))
        ch.request_m = request_for(ch.limit_m, request_now_m, fallback_request_m)
    g = over.get("go.gomaxprocs")
    if isinstance(g, int) and not isinstance(g, bool):
        ch.gomaxprocs = g
    elif g == "go1.25":
        ch.notes.append(GO125_NOTE)
    elif g == "automaxprocs":
        ch.notes.append(AUTOMAXPROCS_NOTE)
    elif g == "host" and host_env is not None:
        ch.gomaxprocs = int(host_env)
        ch.notes.append(HOST_ENV_NOTE.format(n=int(host_env)))
    elif g == "host":
        ch.notes.append(HOST_NOTE)
    burst = over.get("cgroup.burst_us")
    if burst:
        ch.notes.append(BURST_NOTE.format(ms=int(burst) / 1000))
    return ch


def strategic_patch(workload: tuple[str, str] | None, namespace: str | None,
                    changes: Sequence[ContainerChange]) -> dict[str, Any]:
    """The patch of ``workload`` (kind, name) for ``kubectl patch --type strategic``.

    ``apiVersion``, ``kind`` and ``metadata`` say where it applies (they equal the object's own, so
    the merge keeps them); pods' containers sit under ``spec.template.spec`` (a bare Pod: ``spec``).
    """
    containers = []
    for ch in changes:
        c: dict[str, Any] = {"name": ch.name}
        res: dict[str, Any] = {}
        if ch.limit_m is not None:
            res["limits"] = {"cpu": cpu_quantity(ch.limit_m)}
        if ch.request_m is not None:
            res["requests"] = {"cpu": cpu_quantity(ch.request_m)}
        if res:
            c["resources"] = res
        if ch.gomaxprocs is not None:
            c["env"] = [{"name": "GOMAXPROCS", "value": str(int(ch.gomaxprocs))}]
        containers.append(c)
    kind, name = workload if workload is not None else ("Deployment", None)
    pod_spec = {"containers": containers}
    out: dict[str, Any] = {"apiVersion": API_VERSIONS.get(kind, "apps/v1"), "kind": kind}
    meta = {k: v for k, v in (("name", name), ("namespace", namespace)) if v}
    if meta:
        out["metadata"] = meta
    out["spec"] = pod_spec if kind == "Pod" else {"template": {"spec": pod_spec}}
    return out


def patch_command(workload: tuple[str, str] | None, namespace: str | None) -> str:
    """The ``kubectl patch`` line that applies a patch read from stdin."""
    kind, name = workload if workload is not None else ("deployment", "<name>")
    ns = f" -n {namespace}" if namespace else ""
    return f"kubectl patch {kind.lower()} {name or '<name>'}{ns} --type strategic --patch-file /dev/stdin"
