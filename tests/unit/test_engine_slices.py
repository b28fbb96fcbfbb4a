"""The sliced engine: one thread a CPU at a time in turns of the base slice, switch costs, and other
processes' short tasks (a load generator on the host) that preempt the group only when it holds
every CPU. The fluid engine fails the turn-taking tests; both keep the kernel's bandwidth rules."""

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cfsim.engine.cfs import Bandwidth, CfsEngine
from cfsim.engine.slices import SlicedCfsEngine
from cfsim.kernel import eevdf
from cfsim.scenario import ScenarioError, load_scenario
from cfsim.simulation import simulate

MS = 1_000_000
SEC = 10**9


def test_base_slice_follows_update_sysctl_log_scaling():
    # 0.75 ms x (1 + ilog2(min(CPUs, 8))), kernel/sched/fair.c
    assert [eevdf.base_slice_ns(c) for c in (1, 2, 3, 4, 7, 8, 96)] == [
        750_000, 1_500_000, 1_500_000, 2_250_000, 2_250_000, 3_000_000, 3_000_000]


def test_a_slice_ends_at_the_first_tick_after_it_is_consumed():
    assert eevdf.slice_end_ns(0, 1_500_000, 4 * MS) == 4 * MS        # HZ=250
    assert eevdf.slice_end_ns(0, 1_500_000, 1 * MS) == 2 * MS        # HZ=1000
    assert eevdf.slice_end_ns(2 * MS, 0, 1 * MS) == 2 * MS           # consumed exactly at a tick
    assert eevdf.slice_end_ns(0, 1_500_000, 1 * MS, speed=0.5) == 3 * MS


def _two_threads_one_cpu(engine_cls):
    eng = engine_cls(cpus=1, hz=1000, seed=1)
    done = {}
    for t in [eng.new_thread() for _ in range(2)]:
        eng.run(t, 3 * MS, lambda tid: done.setdefault(tid, eng.now) and None)
    eng.run_until(SEC)
    return done


def test_threads_take_turns_where_the_fluid_engine_shares():
    # turns of one tick (0.75 ms slice noticed at the 1 ms tick): the first thread is done after
    # 5 ms, the second after 6; shared fluidly both finish together at 6 ms
    assert _two_threads_one_cpu(SlicedCfsEngine) == {0: 5 * MS, 1: 6 * MS}
    assert _two_threads_one_cpu(CfsEngine) == {0: 6 * MS, 1: 6 * MS}


def test_a_woken_thread_waits_for_the_running_ones_slice():
    eng = SlicedCfsEngine(cpus=1, hz=250, seed=0)   # 4 ms ticks
    a, b = eng.new_thread(), eng.new_thread()
    seen = {}
    eng.run(a, 100 * MS, lambda tid: None)
    eng.call_at(1 * MS, lambda: eng.run(b, 1 * MS, lambda tid: seen.setdefault("b", eng.now) and None))
    eng.run_until(20 * MS)
    # a's slice (1.5 ms on one CPU... 0.75 ms here) ends at the 4 ms tick: b runs 4-5 ms
    assert seen["b"] == 5 * MS
    assert eng.switches_involuntary == 1 and eng.switches_voluntary == 1


def test_switch_cost_is_charged_to_the_thread_switched_in_and_counts_as_usage():
    eng = SlicedCfsEngine(cpus=1, hz=1000, seed=1, switch_ns=100_000)
    tids = [eng.new_thread() for _ in range(2)]
    for t in tids:
        eng.run(t, 3 * MS, lambda tid: None)
    eng.run_until(SEC)
    switches = eng.switches_voluntary + eng.switches_involuntary
    assert switches >= 5   # the switches' own CPU makes the turns a little longer
    # every switch-in but the first thread's first costs 0.1 ms of CPU
    assert sum(eng.thread_cpu_ns(t) for t in tids) == 6 * MS + switches * 100_000
    assert eng.cpu_stat().usage_ns == 6 * MS + switches * 100_000


def test_a_switch_between_the_groups_own_threads_costs_the_thread_price_and_one_after_idle_none():
    """With host.thread_switch_us set the switches are priced by what ran before (context_switch in
    kernel/sched/core.c): the group's own thread (same mm), the idle task (the wake-up's price), or
    another process (a load generator's preemption)."""
    eng = SlicedCfsEngine(cpus=1, hz=1000, seed=1, switch_ns=100_000, thread_switch_ns=10_000)
    a, b = eng.new_thread(), eng.new_thread()
    eng.run(a, 3 * MS, lambda tid: None)
    eng.run(b, 3 * MS, lambda tid: None)
    eng.run_until(SEC)
    direct = eng.switches_voluntary + eng.switches_involuntary
    assert direct >= 5 and eng.cpu_stat().usage_ns == 6 * MS + direct * 10_000
    # b runs again after the CPU idled, a ran last: no switch price (the wake-up rule's)
    eng.run(b, 1 * MS, lambda tid: None)
    eng.run_until(2 * SEC)
    assert eng.cpu_stat().usage_ns == 7 * MS + direct * 10_000
    # unset, every change of thread costs switch_ns, after an idle gap too (the earlier rule)
    old = SlicedCfsEngine(cpus=1, hz=1000, seed=1, switch_ns=100_000)
    a, b = old.new_thread(), old.new_thread()
    old.run(a, 1 * MS, lambda tid: None)
    old.run_until(SEC)
    old.run(b, 1 * MS, lambda tid: None)
    old.run_until(2 * SEC)
    assert old.cpu_stat().usage_ns == 2 * MS + 100_000
    with pytest.raises(ValueError, match="host.thread_switch_us"):
        SlicedCfsEngine(cpus=1, thread_switch_ns=-1)


def test_a_load_generators_preemption_keeps_the_process_switch_price_beside_a_thread_price():
    eng = SlicedCfsEngine(cpus=1, hz=1000, seed=0, switch_ns=10_000, thread_switch_ns=1_000, neighbours=True)
    t = eng.new_thread()
    eng.run(t, 10 * MS, lambda tid: None)
    eng.call_at(1 * MS, eng.neighbour_burst, 500_000)
    eng.run_until(SEC)
    assert eng.neighbour_preemptions == 1 and eng.thread_cpu_ns(t) == 10 * MS + 10_000


def test_stop_and_work_left_report_the_unfinished_work():
    eng = SlicedCfsEngine(cpus=1, hz=1000, seed=1)
    a, b = eng.new_thread(), eng.new_thread()
    eng.run(a, 10 * MS, lambda tid: None)
    eng.run(b, 10 * MS, lambda tid: None)
    eng.run_until(3 * MS)                  # a ran 0-1 and 2-3, b 1-2
    assert eng.work_left(a) == 8 * MS and eng.work_left(b) == 9 * MS
    assert eng.stop(b) == 9 * MS and not eng.is_runnable(b)
    assert eng.thread_cpu_ns(b) == 1 * MS


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 8), st.sampled_from([0.5, 1.0, 1.5]), st.integers(1, 12), st.sampled_from([250, 1000]),
       st.integers(0, 50))
def test_bandwidth_is_the_same_whether_cpus_are_shared_fluidly_or_in_slices(cpus, limit, threads, hz, seed):
    """CPU-bound threads get the same CPU and throttling either way: turns change who runs, not
    how much the group runs."""
    assume(limit <= cpus)
    raw = {"host": {"cpus": cpus, "hz": hz}, "cgroup": {"cpu_limit": limit},
           "workload": {"kind": "threads", "threads": threads, "burn_ms": 1000.0},
           "run": {"duration_s": 2.0, "warmup_s": 0.5, "seed": seed}}
    fluid = simulate(raw).summary
    sliced = simulate({**raw, "host": {**raw["host"], "cpu_sharing": "slices"}}).summary
    assert sliced["cpu_usage_cores"] == pytest.approx(fluid["cpu_usage_cores"], rel=0.01, abs=0.01)
    assert sliced["nr_throttled"] == pytest.approx(fluid["nr_throttled"], abs=1)


def test_a_neighbour_burst_takes_an_idle_cpu_and_preempts_only_when_the_group_holds_every_cpu():
    def run(threads: int):
        eng = SlicedCfsEngine(cpus=2, hz=1000, seed=0, switch_ns=10_000, neighbours=True)
        done = {}
        for t in [eng.new_thread() for _ in range(threads)]:
            eng.run(t, 10 * MS, lambda tid: done.setdefault(tid, eng.now) and None)
        eng.call_at(1 * MS, eng.neighbour_burst, 500_000)
        eng.run_until(SEC)
        return done, eng.neighbour_preemptions
    done, preempted = run(1)           # the other CPU is idle: no one waits
    assert done == {0: 10 * MS} and preempted == 0
    done, preempted = run(2)           # both CPUs busy: one thread waits 0.5 ms and pays the switch
    assert preempted == 1
    assert sorted(done.values()) == [10 * MS, 10 * MS + 500_000 + 10_000]


def test_a_burst_while_the_neighbour_runs_queues_behind_it_without_a_wake_up():
    eng = SlicedCfsEngine(cpus=2, hz=1000, seed=0, neighbours=True)
    t = eng.new_thread()
    eng.run(t, 10 * MS, lambda tid: None)
    eng.call_at(1 * MS, eng.neighbour_burst, 500_000)
    eng.call_at(1 * MS + 100_000, eng.neighbour_burst, 500_000)
    eng.run_until(SEC)
    assert eng.neighbour_preemptions == 0 and eng.thread_cpu_ns(t) == 10 * MS


def test_a_client_on_the_host_needs_sliced_cpus_and_the_error_names_the_key():
    with pytest.raises(ScenarioError, match="workload.client_cpu_us_per_request"):
        load_scenario("cpu-bound-threads", ["workload.kind=closed", "workload.client_cpu_us_per_request=50"])
    with pytest.raises(ScenarioError, match="host.cpu_sharing"):
        load_scenario("cpu-bound-threads", ["host.cpu_sharing=turns"])


_CLOSED = ["host.cpus=2", "cgroup.cpu_limit=1", "workload.kind=closed", "workload.clients=64",
           "workload.cpu_ms_per_request=0.06", "run.duration_s=1", "run.warmup_s=0.2", "host.cpu_sharing=slices",
           "workload.client_cpu_us_per_request=75", "host.context_switch_us=10"]


def test_a_load_generator_on_the_host_costs_a_server_that_holds_every_cpu_not_one_that_leaves_one_idle():
    one = simulate("cpu-bound-threads", _CLOSED + ["go.gomaxprocs=1"]).summary
    two = simulate("cpu-bound-threads", _CLOSED + ["go.gomaxprocs=2"]).summary
    alone = simulate("cpu-bound-threads", _CLOSED[:-2] + ["go.gomaxprocs=2"]).summary
    assert one["neighbour_preemptions_per_s"] < 0.01 * one["throughput_per_s"]
    assert two["neighbour_preemptions_per_s"] > 0.2 * two["throughput_per_s"]
    # the switches cost the quota-capped server requests (min(demand, limit) sees no difference)
    assert two["throughput_per_s"] < 0.97 * alone["throughput_per_s"]
    assert two["cpu_usage_cores"] == pytest.approx(alone["cpu_usage_cores"], rel=0.01)


def test_a_neighbour_woken_beside_its_waker_takes_a_one_p_servers_cpu_though_the_other_is_idle():
    """host.neighbour_wake_share: the lab's load generator, woken by the server's response, goes to
    the server's CPU part of the time although the other CPU is idle (docs/model-notes.md, 'The
    load generator beside a server at GOMAXPROCS 1'); off, a server at GOMAXPROCS 1 never waits for
    it (the test above), the same to the bit as without the key."""
    def summary(share: float) -> dict:
        return simulate("cpu-bound-threads", _CLOSED + ["go.gomaxprocs=1", "cgroup.cpu_limit=null",
                                                        f"host.neighbour_wake_share={share}"]).summary
    off, some, all_ = summary(0.0), summary(0.2), summary(1.0)
    assert off == simulate("cpu-bound-threads", _CLOSED + ["go.gomaxprocs=1", "cgroup.cpu_limit=null"]).summary
    assert off["neighbour_preemptions_per_s"] < 0.01 * off["throughput_per_s"]
    # each wake-up taken beside the server costs it the client's turn: less CPU, fewer requests
    assert 0.05 * some["throughput_per_s"] < some["neighbour_preemptions_per_s"] < all_["neighbour_preemptions_per_s"]
    assert all_["cpu_usage_cores"] < some["cpu_usage_cores"] < off["cpu_usage_cores"] - 0.01
    assert all_["throughput_per_s"] < some["throughput_per_s"] < off["throughput_per_s"]
    with pytest.raises(ScenarioError, match="host.neighbour_wake_share"):
        load_scenario("cpu-bound-threads", _CLOSED + ["host.neighbour_wake_share=1.5"])


def test_sliced_runs_are_deterministic():
    a = simulate("cpu-bound-threads", _CLOSED + ["go.gomaxprocs=8"]).summary
    b = simulate("cpu-bound-threads", _CLOSED + ["go.gomaxprocs=8"]).summary
    assert a == b


def test_the_kernel_view_puts_a_sliced_twins_switches_beside_perfs():
    from cfsim.validation.kernel_view import kernel_view

    s = simulate("cpu-bound-threads", _CLOSED + ["go.gomaxprocs=2"]).summary
    k = kernel_view({"perf": {"per_s": {"context-switches": 14000.0}}}, s)
    assert k["model_context_switches_per_s"] == pytest.approx(
        s["context_switches_voluntary_per_s"] + s["context_switches_involuntary_per_s"])
    assert k["model_context_switches_per_s"] >= s["neighbour_preemptions_per_s"] > 0
    fluid = simulate("cpu-bound-threads", _CLOSED[:-3] + ["go.gomaxprocs=2"]).summary
    assert "model_context_switches_per_s" not in kernel_view({"perf": {"per_s": {"context-switches": 1.0}}}, fluid)


def test_a_neighbour_that_wants_more_than_the_host_does_not_starve_a_thread_of_the_group():
    """Another process's short tasks arriving faster than two CPUs can run them (1.1 cores of
    demand a CPU): under EEVDF that process and the group's thread share a CPU by weight (equal
    weights here: about half each), so the group's CPU-bound thread on each CPU still runs. Before
    the turns, each new burst queued behind the one running without limit and one thread of the
    group got 0.0001 s of CPU in 1 s (the profiles p005 stall, docs/model-notes.md)."""
    eng = SlicedCfsEngine(cpus=2, hz=1000, seed=0, neighbours=True)
    threads = [eng.new_thread() for _ in range(2)]
    for t in threads:
        eng.run(t, 10 * SEC, lambda tid: None)
    burst, gap = 244_000, 111_000        # 244 us every 111 us: 2.2 cores of demand
    for k in range(1, 9_000):
        eng.call_at(k * gap, eng.neighbour_burst, burst)
    eng.run_until(SEC)
    # equal weights give each thread about half a CPU (the tick rounds each turn up)
    got = sorted(eng.thread_cpu_ns(t) for t in threads)
    assert got[0] == pytest.approx(0.5 * SEC, rel=0.1) and got[1] == pytest.approx(0.5 * SEC, rel=0.1)


def test_the_other_process_s_backlog_takes_the_whole_cpu_once_the_group_leaves_it():
    """Two CPU-bound threads of 0.3 s each beside another process wanting 2.2 cores for 0.5 s:
    they share each CPU half and half, so each ends near 0.6 s; the other process's backlog then
    has both CPUs and is done when the host has given both their demand (1.1 + 0.6 CPU-s on 2
    CPUs: about 0.85 s), not later."""
    eng = SlicedCfsEngine(cpus=2, hz=1000, seed=0, neighbours=True)
    done = {}
    for t in [eng.new_thread() for _ in range(2)]:
        eng.run(t, 300 * MS, lambda tid: done.setdefault(tid, eng.now) and None)
    burst, gap = 244_000, 111_000
    for k in range(1, int(0.5 * SEC) // gap + 1):
        eng.call_at(k * gap, eng.neighbour_burst, burst)
    eng.run_until(int(0.9 * SEC))
    assert all(0.55 * SEC < t_done < 0.7 * SEC for t_done in done.values()), done
    assert eng._nb_owed == [0, 0] and max(eng._nb_until) <= 0.9 * SEC


def test_a_throttled_group_leaves_its_cpu_to_the_other_process_and_still_gets_its_quota():
    """One CPU, a quota of 30 ms a 100 ms period, another process wanting 1.5 CPUs: the group's
    thread gets half the CPU until its quota runs out (60 ms of each period), the other process all
    of it while the group is throttled, so the group still uses its 0.3 cores."""
    from cfsim.engine.cfs import Bandwidth

    eng = SlicedCfsEngine(cpus=1, hz=1000, seed=0, neighbours=True, bandwidth=Bandwidth(quota_us=30_000))
    t = eng.new_thread()
    eng.run(t, 10 * SEC, lambda tid: None)
    burst, gap = 150_000, 100_000
    for k in range(1, SEC // gap):
        eng.call_at(k * gap, eng.neighbour_burst, burst)
    eng.run_until(SEC)
    assert eng.thread_cpu_ns(t) == pytest.approx(0.3 * SEC, rel=0.1)
    assert eng.cpu_stat().nr_throttled >= 8


def test_a_scenarios_thread_switch_price_reaches_the_engine_and_a_bad_one_names_the_key():
    raw = {"host": {"cpus": 1, "cpu_sharing": "slices", "context_switch_us": 50.0},
           "workload": {"kind": "threads", "threads": 2, "burn_ms": 5.0},
           "run": {"duration_s": 2.0, "warmup_s": 0.0, "seed": 0}}
    one_price = simulate(raw).summary
    cheap = simulate({**raw, "host": {**raw["host"], "thread_switch_us": 1.0}}).summary
    # two CPU-bound threads on one CPU switch at every tick: 50 us a switch costs them work, 1 us hardly any
    assert one_price["cpu_usage_cores"] == pytest.approx(cheap["cpu_usage_cores"], abs=0.01)
    assert cheap["burns"] > one_price["burns"] * 1.03
    with pytest.raises(ScenarioError, match="host.thread_switch_us"):
        load_scenario({**raw, "host": {**raw["host"], "thread_switch_us": -1.0}})


def _woken_beside(affine: float, preempt: float):
    """Thread a runs on CPU 0 (100 ms of work) while CPU 1 is idle; at 1 ms it wakes b (1 ms of
    work). Returns when b finished and the engine."""
    eng = SlicedCfsEngine(cpus=2, hz=1000, seed=0)
    eng.set_wake_placement(affine, preempt)
    a, b = eng.new_thread(), eng.new_thread()
    seen = {}
    eng.run(a, 100 * MS, lambda tid: None)
    eng.call_at(1 * MS, lambda: eng.run(b, 1 * MS, lambda tid: seen.setdefault("b", eng.now) and None, waker=a))
    eng.run_until(20 * MS)
    return seen["b"], eng


def test_a_wakee_goes_to_the_idle_cpu_unless_the_host_packs_it_beside_its_waker():
    # mainline: the idle CPU, at once
    done, eng = _woken_beside(0.0, 0.0)
    assert done == 2 * MS and eng.wakes_affine == 0 and eng.switches_involuntary == 0
    # packed beside its waker and preempting it: it runs at once there, the waker waits
    done, eng = _woken_beside(1.0, 1.0)
    assert done == 2 * MS and eng.wakes_affine == 1 and eng.wakes_preempting == 1
    assert eng.switches_involuntary == 1 and eng.switches_voluntary == 1
    # packed without preempting: it waits for the waker's turn (1.5 ms slice on 2 CPUs, noticed at
    # the 2 ms tick), unless the idle CPU pulls it first (periodic balancing)
    done, eng = _woken_beside(1.0, 0.0)
    assert done > 2 * MS and eng.wakes_affine == 1 and eng.wakes_preempting == 0


def test_wake_placement_draws_nothing_when_off_and_refuses_shares_outside_0_1():
    eng = SlicedCfsEngine(cpus=2, hz=1000, seed=0)
    state = eng._wake_rng.getstate()
    _, off = _woken_beside(0.0, 0.0)
    assert off._wake_rng.getstate() == state          # no draw: outputs as before
    with pytest.raises(ValueError, match="wake placement shares"):
        eng.set_wake_placement(1.2, 0.5)
    with pytest.raises(ScenarioError, match="host.wake_affine_share"):
        load_scenario("cpu-bound-threads", ["host.wake_affine_share=1.5"])


def _woken_after_running_on(cpu_of_b: int, affine: float, away: float) -> int:
    """b first runs alone on ``cpu_of_b``; later a, running on CPU 0 with CPU 1 idle, wakes it.
    Returns where b runs after that wake-up."""
    eng = SlicedCfsEngine(cpus=2, hz=1000, seed=0)
    eng.set_wake_placement(affine, 0.0, away)
    a, b = eng.new_thread(), eng.new_thread()
    eng._t_last[b] = cpu_of_b                     # where b last ran (set as a previous run leaves it)
    eng._t_last[a] = 0
    seen = {}
    eng.run(a, 100 * MS, lambda tid: None)
    eng.call_at(1 * MS, lambda: (eng.run(b, 1 * MS, lambda tid: None, waker=a), seen.setdefault("cpu", eng._t_cpu[b])))
    eng.run_until(2 * MS)
    return seen["cpu"]


def test_the_split_shares_keep_a_wakee_where_it_last_ran():
    # last ran on the waker's CPU: it stays there with the first share
    assert _woken_after_running_on(0, 1.0, 0.0) == 0
    assert _woken_after_running_on(0, 0.0, 1.0) == 1
    # last ran on the idle CPU: it joins the waker only with the second share
    assert _woken_after_running_on(1, 1.0, 0.0) == 1
    assert _woken_after_running_on(1, 0.0, 1.0) == 0
    # unset: one share for both, as before
    assert _woken_after_running_on(1, 1.0, None) == 0
    with pytest.raises(ValueError, match="host.wake_affine_share_away"):
        SlicedCfsEngine(cpus=2).set_wake_placement(0.5, 0.5, 1.5)
    with pytest.raises(ScenarioError, match="host.wake_affine_share_away"):
        load_scenario("cpu-bound-threads", ["host.wake_affine_share_away=1.5"])
