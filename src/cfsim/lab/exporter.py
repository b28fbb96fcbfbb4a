"""Serve a cgroup's CPU and memory counters under cAdvisor's metric names, for Prometheus.

Names, units and label names follow cAdvisor (``container_cpu_usage_seconds_total`` in seconds,
``container_spec_cpu_quota``/``_period`` in microseconds; the quota is left out when unlimited,
as cAdvisor does; ``container_memory_usage_bytes``, ``container_memory_working_set_bytes`` =
usage - inactive file, ``container_spec_memory_limit_bytes`` = 0 when unlimited,
``container_oom_events_total``), so the same PromQL works on the lab and on a Kubernetes node.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Iterator
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from cfsim.lab.cgroup import Bandwidth, CpuStat, MemoryStat


@dataclass(frozen=True)
class ContainerLabels:
    container: str = "workload"
    pod: str = "cfsim-lab"
    namespace: str = "cfsim-lab"

    def names(self) -> list[str]:
        return ["container", "pod", "namespace"]

    def values(self) -> list[str]:
        return [self.container, self.pod, self.namespace]


def cadvisor_families(stat: CpuStat, bw: Bandwidth, labels: ContainerLabels) -> list[Metric]:
    """The six cAdvisor CPU families for one container (pure: counters in, families out)."""
    names, values = labels.names(), labels.values()
    usage = CounterMetricFamily("container_cpu_usage_seconds", "Cumulative cpu time consumed in seconds.",
                                labels=names + ["cpu"])
    usage.add_metric(values + ["total"], stat.usage_ns / 1e9)
    periods = CounterMetricFamily("container_cpu_cfs_periods", "Number of elapsed enforcement period intervals.",
                                  labels=names)
    periods.add_metric(values, stat.nr_periods)
    throttled = CounterMetricFamily("container_cpu_cfs_throttled_periods",
                                    "Number of throttled period intervals.", labels=names)
    throttled.add_metric(values, stat.nr_throttled)
    throttled_s = CounterMetricFamily("container_cpu_cfs_throttled_seconds",
                                      "Total time duration the container has been throttled.", labels=names)
    throttled_s.add_metric(values, stat.throttled_ns / 1e9)
    period = GaugeMetricFamily("container_spec_cpu_period", "CPU period of the container.", labels=names)
    period.add_metric(values, bw.period_us)
    out: list[Metric] = [usage, periods, throttled, throttled_s, period]
    if bw.quota_us is not None:
        quota = GaugeMetricFamily("container_spec_cpu_quota", "CPU quota of the container.", labels=names)
        quota.add_metric(values, bw.quota_us)
        out.append(quota)
    return out


def cadvisor_memory_families(mem: MemoryStat, labels: ContainerLabels) -> list[Metric]:
    """cAdvisor's memory families for one container (pure)."""
    names, values = labels.names(), labels.values()

    def gauge(name: str, help_: str, value: float | None) -> GaugeMetricFamily | None:
        if value is None:
            return None
        g = GaugeMetricFamily(name, help_, labels=names)
        g.add_metric(values, value)
        return g

    out = [
        gauge("container_memory_usage_bytes", "Current memory usage in bytes, including all memory regardless of "
              "when it was accessed", mem.usage_bytes),
        gauge("container_memory_working_set_bytes", "Current working set in bytes.", mem.working_set_bytes),
        gauge("container_memory_rss", "Size of RSS in bytes.", mem.rss_bytes),
        gauge("container_memory_cache", "Number of bytes of page cache memory.", mem.cache_bytes),
        gauge("container_memory_max_usage_bytes", "Maximum memory usage recorded in bytes", mem.max_usage_bytes),
        gauge("container_spec_memory_limit_bytes", "Memory limit for the container.", mem.limit_bytes or 0),
    ]
    if mem.failcnt is not None:
        fail = CounterMetricFamily("container_memory_failcnt", "Number of memory usage hits limits", labels=names)
        fail.add_metric(values, mem.failcnt)
        out.append(fail)
    ooms = CounterMetricFamily("container_oom_events", "Count of out of memory events observed for the container",
                               labels=names)
    ooms.add_metric(values, mem.oom_kills)
    out.append(ooms)
    return [m for m in out if m is not None]


class CgroupCollector:
    """prometheus_client collector reading the cgroup at every scrape."""

    def __init__(self, read_stat: Callable[[], CpuStat], read_bandwidth: Callable[[], Bandwidth],
                 labels: ContainerLabels, read_memory: Callable[[], MemoryStat] | None = None):
        self._read_stat, self._read_bandwidth, self._labels = read_stat, read_bandwidth, labels
        self._read_memory = read_memory

    def collect(self) -> Iterator[Metric]:
        try:
            stat, bw = self._read_stat(), self._read_bandwidth()
            mem = self._read_memory() if self._read_memory is not None else None
        except OSError:
            return  # cgroup already removed at shutdown: an empty scrape, not a crash
        yield from cadvisor_families(stat, bw, self._labels)
        if mem is not None:
            yield from cadvisor_memory_families(mem, self._labels)

    def describe(self) -> list[Metric]:
        return []  # unchecked collector: families are built per scrape


@dataclass
class Exporter:
    server: WSGIServer
    thread: threading.Thread
    port: int

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def serve(collector: CgroupCollector, port: int = 0, addr: str = "127.0.0.1") -> Exporter:
    """Serve ``/metrics`` on ``addr:port`` (0 = any free port) in a daemon thread."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    server, thread = start_http_server(port, addr=addr, registry=registry)
    return Exporter(server, thread, server.server_address[1])
