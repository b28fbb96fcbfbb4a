"""Simulated runs written as a cluster's metrics: Prometheus ``query_range`` JSON exports
(:func:`write_simulated_exports`) or an OpenMetrics file that ``promtool tsdb create-blocks-from
openmetrics`` turns into a Prometheus TSDB (:func:`write_simulated_openmetrics`).

One series per container, labelled ``namespace``, ``pod``, ``container`` like cAdvisor and
kube-state-metrics: the cumulative cAdvisor counters and quota/period (from
:attr:`SimulationResult.series`), ``kube_pod_container_resource_limits|requests{resource="cpu"}``,
and the Go runtime's ``go_sched_gomaxprocs_threads``; the OpenMetrics writer adds
``go_cpu_classes_total_cpu_seconds_total`` (GOMAXPROCS integrated over time), ``go_gc_gogc_percent``,
``go_gc_gomemlimit_bytes``, ``kube_pod_owner`` / ``kube_replicaset_owner`` and, where asked, a VPA
recommendation as kube-state-metrics exports it. ``cfsim audit`` reads such data like a real
export; the tests use it (never ``data/``, which holds only real measurements).

A simulated run lasts seconds; a Prometheus history lasts hours. ``span_s`` stretches a run to a
history by repeating its steady part (after ``run.warmup_s``): counters keep growing by the same
increments, gauges repeat. Sampled every ``scrape_s`` as a scrape would be.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from cfsim.simulation import SimulationResult

__all__ = ["write_simulated_exports", "write_simulated_openmetrics", "simulated_series", "PlantedSeries",
           "COUNTERS", "GO_METRICS"]

COUNTERS = ("container_cpu_usage_seconds_total", "container_cpu_cfs_periods_total",
            "container_cpu_cfs_throttled_periods_total", "container_cpu_cfs_throttled_seconds_total")
#: the Go runtime metrics the OpenMetrics writer can plant per container
GO_METRICS = ("go_sched_gomaxprocs_threads", "go_cpu_classes_total_cpu_seconds_total", "go_gc_gogc_percent",
              "go_gc_gomemlimit_bytes")
Key = tuple[str, str, str]


@dataclass
class PlantedSeries:
    """One series: metric name, type (``counter``/``gauge``), labels, times [s from start], values."""

    metric: str
    kind: str
    labels: dict[str, str]
    t_s: np.ndarray
    values: np.ndarray
    help: str = ""


@dataclass
class _Clock:
    """Maps history times to the run's times (repeating the steady part) and counter offsets."""

    run_t: np.ndarray
    warmup_s: float
    times: np.ndarray = field(default_factory=lambda: np.empty(0))

    def where(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        end = float(self.run_t[-1])
        w = min(self.warmup_s, end / 2)
        cycle = end - w
        n = np.where(t <= end, 0, np.floor((t - w) / cycle))
        local = np.where(t <= end, t, t - n * cycle)
        local = np.minimum(local, end)
        return local, n

    def counter(self, values: np.ndarray, t: np.ndarray) -> np.ndarray:
        local, n = self.where(t)
        w = min(self.warmup_s, float(self.run_t[-1]) / 2)
        per_cycle = float(np.interp(self.run_t[-1], self.run_t, values) - np.interp(w, self.run_t, values))
        return np.interp(local, self.run_t, values) + n * per_cycle

    def gauge(self, values: np.ndarray, t: np.ndarray) -> np.ndarray:
        local, _ = self.where(t)
        idx = np.clip(np.searchsorted(self.run_t, local, side="right") - 1, 0, len(values) - 1)
        return np.asarray(values, dtype=float)[idx]


def simulated_series(results: Mapping[Key, SimulationResult], span_s: float | None = None,
                     scrape_s: float | None = None, gomaxprocs: bool | Iterable[Key] = True,
                     request_cores: Mapping[Key, float] | None = None,
                     go_metrics: Mapping[Key, Sequence[str]] | None = None, owners: bool = False,
                     vpa_target_cores: Mapping[Key, float] | None = None,
                     extra_labels: Mapping[str, str] | None = None) -> list[PlantedSeries]:
    """The series of ``results`` (keyed by ``(namespace, pod, container)``).

    ``span_s``/``scrape_s``: the history's length and scrape interval [s] (default: the run's own
    1 s samples). ``gomaxprocs``: which containers export ``go_sched_gomaxprocs_threads`` (all,
    none, or the given keys); ``go_metrics`` names, per key, which of :data:`GO_METRICS` it exports
    (overrides ``gomaxprocs`` for that key). ``owners``: ``kube_pod_owner`` and
    ``kube_replicaset_owner`` for pods named ``<deployment>-<rs hash>-<5 chars>``.
    ``extra_labels`` (e.g. ``{"cluster": "prod-a"}``) go on every series.
    """
    out: list[PlantedSeries] = []
    extra = dict(extra_labels or {})
    seen_rs: set[tuple[str, str]] = set()
    for (ns, pod, container), res in sorted(results.items()):
        s = res.series
        run_t = s["t_s"].to_numpy(dtype=float)
        clock = _Clock(run_t, float(res.scenario["run.warmup_s"]))
        t = run_t if span_s is None else np.arange(0.0, float(span_s) + 1e-9, float(scrape_s or 15.0))
        same = span_s is None
        base = {**extra, "namespace": ns, "pod": pod, "container": container}
        kubelet = {**base, "job": "kubelet", "metrics_path": "/metrics/cadvisor"}
        ksm = {**extra, "namespace": ns, "pod": pod, "container": container, "job": "kube-state-metrics"}
        for m in COUNTERS:
            v = s[m].to_numpy(dtype=float)
            out.append(PlantedSeries(m, "counter", {**kubelet, **({"cpu": "total"} if m == COUNTERS[0] else {})}, t,
                                     v if same else clock.counter(v, t)))
        quota = s["container_spec_cpu_quota"].to_numpy(dtype=float)
        period = s["container_spec_cpu_period"].to_numpy(dtype=float)
        q_t, p_t = (quota, period) if same else (clock.gauge(quota, t), clock.gauge(period, t))
        if (quota > 0).any():
            out.append(PlantedSeries("container_spec_cpu_quota", "gauge", kubelet, t, q_t))
            out.append(PlantedSeries("container_spec_cpu_period", "gauge", kubelet, t, p_t))
            out.append(PlantedSeries("kube_pod_container_resource_limits", "gauge",
                                     {**ksm, "resource": "cpu", "unit": "core"}, t,
                                     np.where(q_t > 0, q_t / np.where(p_t > 0, p_t, 1.0), 0.0)))
        req = (request_cores or {}).get((ns, pod, container))
        if req is None:
            req = res.scenario["cgroup.cpu_limit"]
        if req is not None:
            out.append(PlantedSeries("kube_pod_container_resource_requests", "gauge",
                                     {**ksm, "resource": "cpu", "unit": "core"}, t, np.full(len(t), float(req))))
        if go_metrics is not None and (ns, pod, container) in go_metrics:
            go = list(go_metrics[(ns, pod, container)])
        elif gomaxprocs is True or (gomaxprocs and (ns, pod, container) in set(gomaxprocs)):  # type: ignore[arg-type]
            go = ["go_sched_gomaxprocs_threads"]
        else:
            go = []
        g = res.summary.get("gomaxprocs")
        app = {**base, "job": "app"}
        ws = res.workload_series
        for m in go:
            if m == "go_sched_gomaxprocs_threads" and g is not None:
                if same and not ws.empty and m in ws.columns:
                    out.append(PlantedSeries(m, "gauge", app, ws["t_s"].to_numpy(), ws[m].to_numpy(dtype=float)))
                else:
                    out.append(PlantedSeries(m, "gauge", app, t, np.full(len(t), float(g))))
            elif m == "go_cpu_classes_total_cpu_seconds_total" and g is not None:
                out.append(PlantedSeries(m, "counter", app, t, float(g) * t))
            elif m == "go_gc_gogc_percent":
                out.append(PlantedSeries(m, "gauge", app, t, np.full(len(t), float(res.scenario["go.gogc"]))))
            elif m == "go_gc_gomemlimit_bytes":
                lim = res.scenario["go.gomemlimit_mb"]
                out.append(PlantedSeries(m, "gauge", app, t, np.full(len(t), float(2 ** 63 - 1) if lim is None
                                                                     else float(lim) * 2 ** 20)))
        parts = pod.rsplit("-", 2)
        if owners and len(parts) == 3:
            deploy, rs = parts[0], f"{parts[0]}-{parts[1]}"
            out.append(PlantedSeries("kube_pod_owner", "gauge", {**extra, "namespace": ns, "pod": pod,
                                                                  "owner_kind": "ReplicaSet", "owner_name": rs,
                                                                  "owner_is_controller": "true",
                                                                  "job": "kube-state-metrics"}, t, np.ones(len(t))))
            if (ns, rs) not in seen_rs:
                seen_rs.add((ns, rs))
                out.append(PlantedSeries("kube_replicaset_owner", "gauge", {
                    **extra, "namespace": ns, "replicaset": rs, "owner_kind": "Deployment", "owner_name": deploy,
                    "owner_is_controller": "true", "job": "kube-state-metrics"}, t, np.ones(len(t))))
        target = (vpa_target_cores or {}).get((ns, pod, container))
        if target is not None:
            deploy = parts[0] if len(parts) == 3 else pod
            out.append(PlantedSeries(
                "kube_verticalpodautoscaler_status_recommendation_containerrecommendations_target", "gauge",
                {**extra, "namespace": ns, "verticalpodautoscaler": deploy, "target_api_version": "apps/v1",
                 "target_kind": "Deployment", "target_name": deploy, "container": container, "resource": "cpu",
                 "unit": "core", "job": "kube-state-metrics"}, t, np.full(len(t), float(target))))
    return out


def _matrix(result: list[dict]) -> dict:
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


def write_simulated_exports(results: Mapping[Key, SimulationResult], folder: str | Path,
                            start_unix_s: float = 1_767_225_600.0, gomaxprocs: bool = True,
                            request_cores: Mapping[Key, float] | None = None) -> Path:
    """Write ``results`` (keyed by ``(namespace, pod, container)``) as one query_range JSON file per
    metric into ``folder``; returns it. ``gomaxprocs=False`` leaves ``go_sched_gomaxprocs_threads``
    out (services that do not export it)."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    per_metric: dict[str, list[dict]] = {}
    for ps in simulated_series(results, gomaxprocs=gomaxprocs, request_cores=request_cores):
        labels = {k: v for k, v in ps.labels.items() if k != "metrics_path"}
        if ps.metric == "go_sched_gomaxprocs_threads":
            labels = {k: v for k, v in labels.items() if k != "container"}
        values = [[round(start_unix_s + float(t), 3), repr(float(v))] for t, v in zip(ps.t_s, ps.values)]
        per_metric.setdefault(ps.metric, []).append({"metric": {"__name__": ps.metric, **labels}, "values": values})
    for metric, result in per_metric.items():
        (out / f"{metric}.json").write_text(json.dumps(_matrix(result)))
    return out


def _om_labels(labels: Mapping[str, str]) -> str:
    esc = (lambda v: v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n"))
    return "{" + ",".join(f'{k}="{esc(v)}"' for k, v in sorted(labels.items())) + "}"


def write_simulated_openmetrics(series: Sequence[PlantedSeries], path: str | Path,
                                start_unix_s: float = 1_767_225_600.0) -> Path:
    """The series as an OpenMetrics file (``# TYPE`` per family, counters as ``<family>_total``,
    timestamps in seconds, ``# EOF``) for ``promtool tsdb create-blocks-from openmetrics``."""
    by_metric: dict[str, list[PlantedSeries]] = {}
    for ps in series:
        by_metric.setdefault(ps.metric, []).append(ps)
    lines: list[str] = []
    for metric, items in sorted(by_metric.items()):
        kind = items[0].kind
        family = metric[: -len("_total")] if kind == "counter" and metric.endswith("_total") else metric
        lines.append(f"# TYPE {family} {kind}")
        for ps in items:
            lab = _om_labels(ps.labels)
            for t, v in zip(ps.t_s, ps.values):
                if math.isfinite(float(v)):
                    lines.append(f"{metric}{lab} {float(v)!r} {start_unix_s + float(t):.3f}")
    lines.append("# EOF")
    p = Path(path)
    p.write_text("\n".join(lines) + "\n")
    return p
