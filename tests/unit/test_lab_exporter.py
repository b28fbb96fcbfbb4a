"""The cAdvisor-named exporter: families from counters, and a real scrape over HTTP."""
from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from cfsim.lab import cgroup, exporter

STAT = cgroup.CpuStat(usage_ns=12_500_000_000, nr_periods=250, nr_throttled=100, throttled_ns=3_000_000_000)
LABELS = exporter.ContainerLabels(container="workload", pod="cfsim-lab-test", namespace="cfsim-lab")


def _values(families) -> dict[str, float]:
    return {s.name: s.value for f in families for s in f.samples}


def test_families_use_cadvisor_names_and_units():
    fams = exporter.cadvisor_families(STAT, cgroup.Bandwidth(194000, 100000), LABELS)
    v = _values(fams)
    assert v["container_cpu_usage_seconds_total"] == 12.5
    assert v["container_cpu_cfs_periods_total"] == 250
    assert v["container_cpu_cfs_throttled_periods_total"] == 100
    assert v["container_cpu_cfs_throttled_seconds_total"] == 3.0
    assert v["container_spec_cpu_quota"] == 194000  # microseconds, like cAdvisor
    assert v["container_spec_cpu_period"] == 100000
    labels = fams[0].samples[0].labels
    assert labels["container"] == "workload" and labels["pod"] == "cfsim-lab-test" and labels["cpu"] == "total"


def test_unlimited_quota_is_omitted_like_cadvisor():
    names = {f.name for f in exporter.cadvisor_families(STAT, cgroup.Bandwidth(None, 100000), LABELS)}
    assert "container_spec_cpu_quota" not in names and "container_spec_cpu_period" in names


def test_served_over_http_and_survives_a_removed_cgroup(tmp_path):
    stat_file = tmp_path / "cpu.stat"
    stat_file.write_text("nr_periods 7\nnr_throttled 3\nthrottled_time 1000000000\n")

    def read_stat() -> cgroup.CpuStat:
        return cgroup.parse_v1_stat(stat_file.read_text(), "2000000000")

    coll = exporter.CgroupCollector(read_stat, lambda: cgroup.Bandwidth(50000, 100000), LABELS)
    exp = exporter.serve(coll)
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{exp.port}/metrics", timeout=5).read().decode()
        v = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
        assert v["container_cpu_usage_seconds_total"] == 2.0
        assert v["container_cpu_cfs_throttled_periods_total"] == 3
        assert v["container_spec_cpu_quota"] == 50000
        stat_file.unlink()  # the cgroup is gone at shutdown: scrape is empty, not an error
        text = urllib.request.urlopen(f"http://127.0.0.1:{exp.port}/metrics", timeout=5).read().decode()
        assert "container_cpu" not in text
    finally:
        exp.stop()
