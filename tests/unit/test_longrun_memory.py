"""The VPA's memory path in the long-horizon engine, on a stated memory response (no event
engine): working-set samples, OOM kills, the kubelet's restart back-off, RecordOOM's bump and
re-creation through admission."""
from __future__ import annotations

from cfsim.engine.longrun import run_longrun
from cfsim.engine.memresponse import MemoryPoint
from cfsim.scenario import load_scenario

MiB = 1 << 20


class StatedMemory:
    """A pod needs ``need`` MiB: below it the kernel OOM-kills it; above, its working set is
    ``need`` (GOGC-driven heap, unaffected by the limit)."""

    describe = "stated memory response"

    def __init__(self, need_mb: float):
        self.need = need_mb * MiB

    def __call__(self, limit_bytes, demand_cores):
        if limit_bytes is not None and limit_bytes < self.need:
            return MemoryPoint(0.0, 0.0, 0.0, float(limit_bytes), True)
        return MemoryPoint(1.0, 1.0, self.need, self.need, False)


def scenario(mem_limit_mb: float, days: float = 1.0, **vpa):
    return load_scenario({
        "host": {"cpus": 8}, "cgroup": {"memory_limit_mb": mem_limit_mb},
        "go": {"gomaxprocs": 2, "gomemlimit_policy": "automemlimit"},
        "workload": {"kind": "stream", "rate_per_s": 2000, "cpu_ms_per_item": 0.2, "alloc_kb_per_item": 16},
        "vpa": {"enabled": True, "control_memory": True, "initial_request_cores": 1.0, "replicas": 2,
                "min_replicas": 2, "days": days, **vpa}})


def test_memory_target_follows_the_working_set_with_the_margin():
    r = run_longrun(scenario(2048), response_mode="analytic", memory_response=StatedMemory(400))
    f = r.final
    # one peak of 400 MiB: the end of its 5 % bucket x 1.15, and the pods re-created with it
    assert 400 * 1.15 <= f["vpa_memory_target_mb"] <= 400 * 1.15 * 1.07
    assert f["memory_request_mb"] == f["memory_limit_mb"] == f["vpa_memory_target_mb"]
    assert f["working_set_mb"] == 400 and f["oom_kills"] == 0
    assert any(e["kind"] == "evict" for e in r.events)


def test_a_container_oom_killed_at_every_start_never_gets_a_recommendation():
    # kubernetes/autoscaler#4981: the container dies before metrics-server sees it, so the VPA has
    # no CPU sample (TotalSamplesCount counts CPU samples only) and writes no recommendation at all:
    # the OOM kills are recorded but nothing is re-created; the kubelet's back-off caps at 300 s
    r = run_longrun(scenario(300, days=0.25), response_mode="analytic", memory_response=StatedMemory(400))
    ooms = [e for e in r.events if e["kind"] == "oom"]
    assert len(ooms) > 20 and ooms[0]["restart_in_s"] == 10.0
    backoffs = [e["restart_in_s"] for e in ooms if e["pod"] == ooms[0]["pod"]]
    assert backoffs[:6] == [10.0, 20.0, 40.0, 80.0, 160.0, 300.0] and max(backoffs) == 300.0
    assert not [e for e in r.events if e["kind"] == "evict"]
    assert r.final["vpa_memory_target_mb"] is None and r.final["throughput_per_s"] == 0


class LoadDependentMemory(StatedMemory):
    """The heap a pod needs grows with its load (allocation during the mark): ``need`` MiB at
    the nominal demand and above, half of it below."""

    def __call__(self, limit_bytes, demand_cores):
        need = self.need if demand_cores >= 0.3 else 0.5 * self.need
        if limit_bytes is not None and limit_bytes < need:
            return MemoryPoint(0.0, 0.0, 0.0, float(limit_bytes), True)
        return MemoryPoint(1.0, 1.0, need, need, False)


def test_an_oom_at_a_load_step_is_bumped_and_the_quick_oom_rule_recreates_the_pods():
    # light load (the pod runs, the VPA learns a 200 MiB working set and shrinks the 1 GiB
    # template to 250 MiB), then more load (the catch-up after a re-creation, the step at 14 h):
    # OOM kills; RecordOOM bumps the recommendation to max(request + 100 MiB, 1.2 x request) and
    # the quick-OOM rule re-creates the pods at once
    step = 14 * 3600
    sc = scenario(1024, days=1.0).with_overrides([("workload.rate_per_s", [[0, 1000], [step, 2000]])])
    r = run_longrun(sc, response_mode="analytic", memory_response=LoadDependentMemory(400))
    ooms = [e for e in r.events if e["kind"] == "oom"]
    evicts = [e for e in r.events if e["kind"] == "evict"]
    shrink = min(e["t_s"] for e in evicts)                          # the shrink
    assert shrink < step and ooms and min(e["t_s"] for e in ooms) > shrink
    assert any(e["t_s"] >= min(o["t_s"] for o in ooms) for e in evicts)
    assert r.final["memory_limit_mb"] >= 400 and r.final["working_set_mb"] == 400
    assert max(e["t_s"] for e in ooms) < r.final["t_s"] - 3600     # recovered: no OOM in the last hour
