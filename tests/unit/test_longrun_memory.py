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


def test_oom_kills_restart_with_back_off_and_the_bump_recovers():
    # the template limit (300 MiB) is below what the pod needs (400 MiB): every container is
    # OOM-killed; RecordOOM bumps the recommendation to max(request + 100 MiB, 1.2 x request), the
    # quick-OOM rule lets the updater re-create the pods at once, until the limit holds
    r = run_longrun(scenario(300, days=0.5), response_mode="analytic", memory_response=StatedMemory(400))
    ooms = [e for e in r.events if e["kind"] == "oom"]
    assert ooms and ooms[0]["restart_in_s"] == 10.0
    backoffs = [e["restart_in_s"] for e in ooms if e["pod"] == ooms[0]["pod"]]
    assert backoffs == sorted(backoffs) and all(b <= 300 for b in backoffs)
    evicts = [e for e in r.events if e["kind"] == "evict"]
    assert evicts and evicts[0]["t_s"] < 600      # a quick OOM: no 12 h wait
    assert r.final["memory_limit_mb"] >= 400 and r.final["working_set_mb"] == 400
    # after the recovery no more OOM kills
    assert max(e["t_s"] for e in ooms) < r.final["t_s"] / 2
