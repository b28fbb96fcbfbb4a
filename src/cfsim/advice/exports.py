"""Simulated runs written as a folder of Prometheus ``/api/v1/query_range`` JSON exports.

One file per metric, one series per container, labelled ``namespace``, ``pod``, ``container``
like cAdvisor and kube-state-metrics: the cumulative cAdvisor counters and quota/period (from
:attr:`SimulationResult.series`), ``kube_pod_container_resource_limits|requests{resource="cpu"}``
and ``go_sched_gomaxprocs_threads``. ``cfsim audit`` reads such a folder like a real export; the
tests use it when ``data/lab`` lacks runs.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

from cfsim.simulation import SimulationResult

__all__ = ["write_simulated_exports", "COUNTERS"]

COUNTERS = ("container_cpu_usage_seconds_total", "container_cpu_cfs_periods_total",
            "container_cpu_cfs_throttled_periods_total", "container_cpu_cfs_throttled_seconds_total")


def _matrix(result: list[dict]) -> dict:
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


def write_simulated_exports(results: Mapping[tuple[str, str, str], SimulationResult], folder: str | Path,
                            start_unix_s: float = 1_767_225_600.0, gomaxprocs: bool = True,
                            request_cores: Mapping[tuple[str, str, str], float] | None = None) -> Path:
    """Write ``results`` (keyed by ``(namespace, pod, container)``) into ``folder``; returns it.

    ``gomaxprocs=False`` leaves ``go_sched_gomaxprocs_threads`` out (services that do not export it).
    """
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    per_metric: dict[str, list[dict]] = {}

    def add(metric: str, labels: dict, ts, vals) -> None:
        values = [[round(start_unix_s + float(t), 3), repr(float(v))] for t, v in zip(ts, vals)]
        per_metric.setdefault(metric, []).append({"metric": {"__name__": metric, **labels}, "values": values})

    for (ns, pod, container), res in sorted(results.items()):
        labels = {"namespace": ns, "pod": pod, "container": container, "job": "kubelet"}
        s = res.series
        t = s["t_s"].to_numpy()
        for m in COUNTERS:
            add(m, {**labels, **({"cpu": "total"} if m == "container_cpu_usage_seconds_total" else {})},
                t, s[m].to_numpy())
        quota = s["container_spec_cpu_quota"].to_numpy()
        period = s["container_spec_cpu_period"].to_numpy()
        if (quota > 0).any():
            add("container_spec_cpu_quota", labels, t, quota)
            add("container_spec_cpu_period", labels, t, period)
            ksm = {"namespace": ns, "pod": pod, "container": container, "resource": "cpu", "unit": "core",
                   "job": "kube-state-metrics"}
            add("kube_pod_container_resource_limits", ksm, t, [q / p if q > 0 else 0.0 for q, p in zip(quota, period)])
        req = (request_cores or {}).get((ns, pod, container))
        if req is None:
            lim = res.scenario["cgroup.cpu_limit"]
            req = lim
        if req is not None:
            ksm = {"namespace": ns, "pod": pod, "container": container, "resource": "cpu", "unit": "core",
                   "job": "kube-state-metrics"}
            add("kube_pod_container_resource_requests", ksm, t, [req] * len(t))
        if gomaxprocs and res.summary.get("gomaxprocs") is not None:
            app = {"namespace": ns, "pod": pod, "job": "app"}
            ws = res.workload_series
            if not ws.empty and "go_sched_gomaxprocs_threads" in ws.columns:
                add("go_sched_gomaxprocs_threads", app, ws["t_s"].to_numpy(),
                    ws["go_sched_gomaxprocs_threads"].to_numpy())
            else:
                add("go_sched_gomaxprocs_threads", app, t, [res.summary["gomaxprocs"]] * len(t))
    for metric, result in per_metric.items():
        (out / f"{metric}.json").write_text(json.dumps(_matrix(result)))
    return out
