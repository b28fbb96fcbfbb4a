"""The container metrics cfsim reads, fetched from a live Prometheus: :func:`get_container_metrics`.

What is asked for (each only where the server has it; :data:`METRICS` says what each one is for):

* cAdvisor (the kubelet's ``/metrics/cadvisor``): ``container_cpu_usage_seconds_total``,
  ``container_cpu_cfs_periods_total``, ``container_cpu_cfs_throttled_periods_total``,
  ``container_cpu_cfs_throttled_seconds_total``, ``container_spec_cpu_quota`` and
  ``container_spec_cpu_period``;
* kube-state-metrics: ``kube_pod_container_resource_requests`` / ``_limits`` (``resource="cpu"``),
  ``kube_pod_owner`` and ``kube_replicaset_owner`` (which Deployment a pod belongs to), and the
  VPA's current recommendation where kube-state-metrics exports VPA objects
  (``kube_verticalpodautoscaler_status_recommendation_containerrecommendations_target`` and its
  ``lowerbound``/``upperbound``/``uncappedtarget``);
* the Go runtime's own metrics, as prometheus/client_golang's Go collector names them:
  ``go_sched_gomaxprocs_threads`` (runtime/metrics ``/sched/gomaxprocs:threads``),
  ``go_cpu_classes_total_cpu_seconds_total`` (``/cpu/classes/total:cpu-seconds``: "GOMAXPROCS
  integrated over the wall-clock duration this process has been executing for", so its rate is
  GOMAXPROCS), ``go_gc_gogc_percent`` and ``go_gc_gomemlimit_bytes`` (``/gc/gogc:percent``,
  ``/gc/gomemlimit:bytes``). Source: Go ``src/runtime/metrics/description.go``.

How: one ``/api/v1/label/__name__/values`` call learns which of these the server has at all; one
``/api/v1/series`` call finds the containers (cAdvisor's usage series matching ``--namespace``,
the label selectors and the cluster); then per namespace, batches of at most ``batch_pods`` pods
(``pod=~"a|b|..."``) are asked for with one ``query_range`` per metric family
(``{__name__=~"m1|m2|...", ...}``), chunked under Prometheus' 11,000 points per series. Counters
come back as their values on the step grid (``rate()`` is taken later, by the reader of the frame,
the same way as for a file export). Every request goes through :class:`cfsim.io.http.Connection`
(auth, TLS, retries).

Failures that leave nothing to read raise :class:`LiveQueryError` with one line naming the query
and the cause: the server lacks cAdvisor's usage metric, no series match the selection, or the
selection spans several clusters. A metric family that is absent is no failure: ``meta["absent"]``
says what it would have given and how to get it.
"""
from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import pandas as pd

from cfsim.io.errors import PrometheusAPIError
from cfsim.io.http import (Connection, get_prometheus_label_values, get_prometheus_range,
                           get_prometheus_series)
from cfsim.io.labels import parse_labels
from cfsim.io.promql import _times_ms, parse_duration
from cfsim.io.tidy import empty_frame

__all__ = ["get_container_metrics", "usage_by_container", "Selection", "LiveQueryError", "METRICS", "FAMILIES",
           "default_step_s", "time_range"]

USAGE = "container_cpu_usage_seconds_total"
VPA_PREFIX = "kube_verticalpodautoscaler_status_recommendation_containerrecommendations_"

#: metric -> (what it gives, what to do when it is absent)
METRICS: dict[str, tuple[str, str]] = {
    USAGE: ("CPU usage", "scrape the kubelet's cAdvisor endpoint (/metrics/cadvisor)"),
    "container_cpu_cfs_periods_total": ("CFS periods", "scrape cAdvisor; the container needs a CPU limit"),
    "container_cpu_cfs_throttled_periods_total": ("throttled periods", "scrape cAdvisor"),
    "container_cpu_cfs_throttled_seconds_total": ("throttled time", "scrape cAdvisor"),
    "container_spec_cpu_quota": ("CPU limit (quota)", "scrape cAdvisor"),
    "container_spec_cpu_period": ("CFS period", "scrape cAdvisor"),
    "kube_pod_container_resource_requests": ("CPU request", "run kube-state-metrics"),
    "kube_pod_container_resource_limits": ("CPU limit", "run kube-state-metrics"),
    "kube_pod_owner": ("the pod's owner", "run kube-state-metrics"),
    "kube_replicaset_owner": ("the ReplicaSet's Deployment", "run kube-state-metrics"),
    "go_sched_gomaxprocs_threads": (
        "GOMAXPROCS", "export the Go runtime metric /sched/gomaxprocs:threads: recent prometheus/client_golang "
        "Go collectors do by default; older ones with collectors.WithGoCollectorRuntimeMetrics("
        "collectors.MetricsScheduler); and scrape the app with namespace and pod labels"),
    "go_cpu_classes_total_cpu_seconds_total": (
        "GOMAXPROCS (its rate)", "export Go runtime metrics (/cpu/classes/total:cpu-seconds) with "
        "collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsAll)"),
    "go_gc_gogc_percent": ("GOGC", "export the Go runtime metric /gc/gogc:percent"),
    "go_gc_gomemlimit_bytes": ("GOMEMLIMIT", "export the Go runtime metric /gc/gomemlimit:bytes"),
    VPA_PREFIX + "target": ("the VPA's target", "let kube-state-metrics export VerticalPodAutoscaler objects"),
    VPA_PREFIX + "lowerbound": ("the VPA's lower bound", "as for the target"),
    VPA_PREFIX + "upperbound": ("the VPA's upper bound", "as for the target"),
    VPA_PREFIX + "uncappedtarget": ("the VPA's uncapped target", "as for the target"),
}

#: families asked for in one query each: (name, metrics, extra matchers, scope "pods" or "namespace")
FAMILIES: tuple[tuple[str, tuple[str, ...], str, str], ...] = (
    ("cadvisor", (USAGE, "container_cpu_cfs_periods_total", "container_cpu_cfs_throttled_periods_total",
                  "container_cpu_cfs_throttled_seconds_total", "container_spec_cpu_quota",
                  "container_spec_cpu_period"), 'container!="",container!="POD"', "pods"),
    ("kube-state-metrics resources", ("kube_pod_container_resource_requests", "kube_pod_container_resource_limits"),
     'resource="cpu"', "pods"),
    ("kube-state-metrics owners", ("kube_pod_owner",), "", "pods"),
    ("go runtime", ("go_sched_gomaxprocs_threads", "go_cpu_classes_total_cpu_seconds_total", "go_gc_gogc_percent",
                    "go_gc_gomemlimit_bytes"), "", "pods"),
    ("kube-state-metrics replicasets", ("kube_replicaset_owner",), "", "namespace"),
    ("kube-state-metrics vpa", tuple(VPA_PREFIX + b for b in ("target", "lowerbound", "upperbound", "uncappedtarget")),
     'resource="cpu"', "namespace"),
)

_MATCHER = re.compile(r'^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*$')


class LiveQueryError(ValueError):
    """Nothing to read: the message names the query and why (one line)."""


@dataclass(frozen=True)
class Selection:
    """Which containers: a namespace, PromQL label matchers on cAdvisor's series, one cluster.

    ``matchers`` are ``label="value"``, ``label=~"regex"``, ``!=``, ``!~`` (PromQL syntax), applied
    to the discovery of containers; ``cluster`` adds ``<cluster_label>="<cluster>"`` to every query.
    """

    namespace: str | None = None
    matchers: tuple[str, ...] = ()
    cluster_label: str = "cluster"
    cluster: str | None = None

    def __post_init__(self) -> None:
        for m in self.matchers:
            if not _MATCHER.match(m):
                raise ValueError(f'selector {m!r}: expected label="value", label=~"regex", label!="value" or '
                                 f'label!~"regex"')

    def base(self) -> list[str]:
        out = [f'{self.cluster_label}="{_escape(self.cluster)}"'] if self.cluster is not None else []
        if self.namespace is not None:
            out.append(f'namespace="{_escape(self.namespace)}"')
        return out

    def discovery(self) -> str:
        """The ``/api/v1/series`` selector that finds the containers."""
        parts = self.base() + [m.strip() for m in self.matchers] + ['container!=""', 'container!="POD"']
        return USAGE + "{" + ",".join(parts) + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _regex_alternation(values: Sequence[str]) -> str:
    # RE2 accepts a backslash before any punctuation, which re.escape produces
    return "|".join(re.escape(v) for v in values).replace("\\", "\\\\").replace('"', '\\"')


def default_step_s(span_s: float) -> float:
    """At least 60 s (a metrics-server window), at most ~2000 points per series.

    >>> default_step_s(3600), default_step_s(7 * 86400)
    (60.0, 305.0)
    """
    return float(max(60, math.ceil(span_s / 2000 / 5) * 5))


def time_range(history: str | float | None = None, start: Any = None, end: Any = None,
               now_s: float | None = None) -> tuple[float, float]:
    """``(start, end)`` [epoch s] from ``--history 7d`` (ending at ``end`` or now) or ``--start/--end``.

    >>> time_range("1h", end=7200)
    (3600.0, 7200.0)
    >>> time_range(start="1970-01-01T01:00:00Z", end="7200.5")
    (3600.0, 7200.5)
    """
    end_s = (now_s if now_s is not None else time.time()) if end is None else _epoch_s(end, "--end")
    if history is not None and start is not None:
        raise ValueError("give --history or --start, not both")
    if start is not None:
        start_s = _epoch_s(start, "--start")
    else:
        start_s = end_s - parse_duration(history if history is not None else "1d") / 1000
    if not end_s > start_s:
        raise ValueError(f"the time range is empty: start {start_s:.3f} is not before end {end_s:.3f}")
    return float(start_s), float(end_s)


def _epoch_s(value: Any, name: str) -> float:
    """Unix seconds from a number, a numeric string, an RFC 3339 string or a datetime."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    try:
        return float(_times_ms(value)[0]) / 1000
    except (ValueError, TypeError, OverflowError):
        raise ValueError(f"{name} {value!r}: expected RFC 3339 (2026-01-01T00:00:00Z) or Unix seconds") from None


@dataclass
class _Log:
    queries: list[dict[str, Any]] = field(default_factory=list)
    requests: int = 0


def get_container_metrics(url: str, start: Any, end: Any, step: float | str | None = None, *,
                          selection: Selection | None = None, connection: Connection | None = None,
                          families: Sequence[str] | None = None, metrics: Sequence[str] | None = None,
                          batch_pods: int = 50,
                          progress: Callable[[int, int], None] | None = None
                          ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The metrics of every selected container from a live Prometheus, as one tidy frame.

    Parameters
    ----------
    url : str
        The server (``https://prometheus.example:9090``; a path prefix such as ``/prometheus`` is kept).
    start, end : datetime, str or float
        The time range (epoch seconds [s], ISO strings, datetimes).
    step : float or str, optional
        Resolution [s] or a duration; default :func:`default_step_s`.
    selection : Selection, optional
        Namespace, label matchers, cluster.
    connection : Connection, optional
        Auth, TLS, retries (:func:`cfsim.io.http.connect`).
    families : list of str, optional
        Names from :data:`FAMILIES` to ask for (default all).
    metrics : list of str, optional
        Only these metrics of the families (``[container_cpu_usage_seconds_total]`` for usage only).
    batch_pods : int
        Most pods per query.
    progress : callable, optional
        ``progress(done, total)`` after each query.

    Returns
    -------
    data : DataFrame
        Tidy frame (``timestamp``, ``metric``, ``labels``, ``value``) of every family found.
    meta : dict
        ``source``, ``format`` (``"prometheus-live"``), ``start``/``end`` (UTC), ``step`` [s],
        ``selector`` (the discovery query), ``containers`` (``(namespace, pod, container)``),
        ``cluster``, ``present`` and ``absent`` (metric -> (what it gives, how to get it)),
        ``queries`` (each with ``query``, ``series``, ``samples``), ``requests``, ``series``,
        ``samples``, ``warnings``.

    Raises
    ------
    LiveQueryError
        The server has no ``container_cpu_usage_seconds_total``; no series match the selection;
        the selection spans several clusters without ``selection.cluster``.
    cfsim.io.PrometheusAPIError
        A request failed (401, TLS, unreachable, a bad matcher ...).
    """
    sel = selection or Selection()
    conn = connection or Connection()
    start_s, end_s = (float(_times_ms(t)[0]) / 1000 for t in (start, end))
    step_s = default_step_s(end_s - start_s) if step is None else parse_duration(step) / 1000
    log = _Log()
    names, _ = _asking(url, "label values of __name__", lambda: get_prometheus_label_values(
        url, "__name__", start_s, end_s, connection=conn))
    log.requests += 1
    present = set(names)
    if USAGE not in present:
        raise LiveQueryError(f"{url}: unknown metric {USAGE}: the server has no series of it between "
                             f"{_iso(start_s)} and {_iso(end_s)} ({METRICS[USAGE][1]})")
    found, _ = _asking(url, f"series {sel.discovery()}", lambda: get_prometheus_series(
        url, [sel.discovery()], start_s, end_s, connection=conn))
    log.requests += 1
    if found.empty:
        raise LiveQueryError(f"{url}: empty result: no series match {sel.discovery()} between "
                             f"{_iso(start_s)} and {_iso(end_s)}")
    labels = [parse_labels(x) for x in found["labels"]]
    clusters = sorted({d.get(sel.cluster_label, "") for d in labels})
    if sel.cluster is None and len(clusters) > 1:
        raise LiveQueryError(f"{url}: {sel.discovery()} matches containers in {len(clusters)} clusters "
                             f"({', '.join(c or '(none)' for c in clusters)}; label {sel.cluster_label!r}): "
                             f"choose one with --cluster NAME")
    containers = sorted({(d.get("namespace", ""), d.get("pod", ""), d.get("container", "")) for d in labels})
    pods_by_ns: dict[str, list[str]] = {}
    for ns, pod, _c in containers:
        if pod not in pods_by_ns.setdefault(ns, []):
            pods_by_ns[ns].append(pod)
    wanted = [f for f in FAMILIES if families is None or f[0] in families]
    plan: list[tuple[str, str]] = []   # (family, query)
    for fam, fam_metrics, extra, scope in wanted:
        have = [m for m in fam_metrics if m in present and (metrics is None or m in metrics)]
        if not have:
            continue
        name = f'__name__=~"{"|".join(have)}"' if len(have) > 1 else f'__name__="{have[0]}"'
        common = [name] + ([f'{sel.cluster_label}="{_escape(sel.cluster)}"'] if sel.cluster is not None else [])
        if extra:
            common.append(extra)
        for ns, pods in sorted(pods_by_ns.items()):
            if scope == "namespace":
                plan.append((fam, "{" + ",".join(common + [f'namespace="{_escape(ns)}"']) + "}"))
                continue
            for i in range(0, len(pods), max(1, batch_pods)):
                batch = pods[i:i + max(1, batch_pods)]
                plan.append((fam, "{" + ",".join(common + [f'namespace="{_escape(ns)}"',
                                                          f'pod=~"{_regex_alternation(batch)}"']) + "}"))
    frames, warnings = [], []
    for i, (fam, query) in enumerate(plan):
        frame, meta = _asking(url, f"query_range {query}", lambda: get_prometheus_range(
            url, query, start_s, end_s, step_s, connection=conn))
        log.requests += meta["requests"]
        warnings += [w for w in meta["warnings"] if w not in warnings]
        log.queries.append({"family": fam, "query": query, "series": meta["series"], "samples": meta["samples"]})
        if len(frame):
            frames.append(frame)
        if progress:
            progress(i + 1, len(plan))
    data = pd.concat(frames, ignore_index=True) if frames else empty_frame()
    if len(data):
        data = data.sort_values(["metric", "labels", "timestamp"], kind="stable", ignore_index=True)
    asked = [m for f in wanted for m in f[1] if metrics is None or m in metrics]
    absent = {m: METRICS[m] for m in asked if m not in present}
    return data, {
        "source": url, "format": "prometheus-live", "start": pd.Timestamp(start_s, unit="s", tz="UTC"),
        "end": pd.Timestamp(end_s, unit="s", tz="UTC"), "step": step_s, "selector": sel.discovery(),
        "containers": containers, "cluster": sel.cluster if sel.cluster is not None else (clusters[0] or None),
        "present": {m: METRICS[m] for m in asked if m in present}, "absent": absent,
        "queries": log.queries, "requests": log.requests,
        "series": int(data.groupby(["metric", "labels"]).ngroups) if len(data) else 0, "samples": len(data),
        "warnings": warnings,
    }


def _asking(url: str, what: str, call: Callable[[], Any]) -> Any:
    """``call()``, its failure said with the query it was asking."""
    try:
        return call()
    except PrometheusAPIError as exc:
        raise PrometheusAPIError(f"{url}: {what}", exc.error_type, exc.error, exc.http_status) from None


def usage_by_container(frame: pd.DataFrame, step_s: float) -> dict[tuple[str, str, str], list[tuple[float, float]]]:
    """CPU usage [cores] over each step of ``container_cpu_usage_seconds_total`` on a query grid, per
    ``(namespace, pod, container)``: PromQL ``irate`` at every grid point (the increase since the
    point before over the time between; after a counter reset, the new value), stamped at the
    step's end like a metrics-server reading. Several series of one container (a restart gives a new
    cgroup ``id``) are summed."""
    from cfsim.io.promql import irate

    sub = frame[frame["metric"] == USAGE]
    out: dict[tuple[str, str, str], dict[float, float]] = {}
    if sub.empty:
        return {}
    r = irate(sub, 1.5 * step_s)
    for labels, grp in r.groupby("labels", sort=True):
        d = parse_labels(labels)
        key = (d.get("namespace", ""), d.get("pod", ""), d.get("container", ""))
        acc = out.setdefault(key, {})
        for t, v in zip(grp["timestamp"].astype("int64").to_numpy() / 1e9, grp["value"].to_numpy(dtype=float)):
            if math.isfinite(v):
                acc[float(t)] = acc.get(float(t), 0.0) + float(v)
    return {k: sorted(v.items()) for k, v in sorted(out.items())}


def _iso(t_s: float) -> str:
    return pd.Timestamp(t_s, unit="s", tz="UTC").strftime("%Y-%m-%dT%H:%M:%SZ")
