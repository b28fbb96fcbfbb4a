"""The CFS engine: kernel invariants on random scenarios, and the behaviours the kernel docs state."""

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from cfsim.engine.cfs import Bandwidth, CfsEngine
from cfsim.engine.slices import SlicedCfsEngine
from cfsim.simulation import simulate

SEC = 10**9


def _scenario(cpus, limit, period_us, burst_frac, threads, burn_ms, sleep_ms, hz, seed, kernel="modern"):
    quota_us = int(round(limit * period_us))
    return {
        "host": {"cpus": cpus, "hz": hz},
        "cgroup": {"cpu_limit": limit, "period_us": period_us,
                   "burst_us": int(quota_us * burst_frac), "kernel": kernel},
        "workload": {"kind": "threads", "threads": threads, "burn_ms": burn_ms,
                     "sleep_ms": sleep_ms, "jitter_ms": 20.0},
        "run": {"duration_s": 2.0, "seed": seed},
    }


scenarios = st.builds(
    _scenario,
    cpus=st.integers(1, 16),
    limit=st.sampled_from([0.05, 0.1, 0.25, 0.5, 1.0, 1.5, 1.94, 2.0, 3.3]),
    period_us=st.sampled_from([10_000, 50_000, 100_000, 250_000]),
    burst_frac=st.sampled_from([0.0, 0.0, 0.5, 1.0]),
    threads=st.integers(1, 24),
    burn_ms=st.sampled_from([0.3, 1.0, 5.0, 30.0]),
    sleep_ms=st.sampled_from([0.0, 1.0, 10.0, 50.0]),
    hz=st.sampled_from([250, 1000]),
    seed=st.integers(0, 1000),
)


@given(scenarios)
def test_kernel_invariants_hold_on_random_scenarios(raw):
    assume(raw["cgroup"]["cpu_limit"] * raw["cgroup"]["period_us"] >= 1000)  # kernel minimum quota
    res = simulate(raw)
    s, per = res.summary, res.periods
    sc = res.scenario
    quota_s = sc.quota_us / 1e6
    period_s = sc["cgroup.period_us"] / 1e6
    burst_s = sc["cgroup.burst_us"] / 1e6
    cpus = sc["host.cpus"]
    slice_s, tick_s = sc["cgroup.slice_us"] / 1e6, 1 / sc["host.hz"]
    # counters
    assert 0 <= s["nr_throttled"] <= s["nr_periods"]
    assert s["throttled_time_s"] >= 0
    # never more than the host can give
    assert s["cpu_usage_cores"] <= min(cpus, sc["workload.threads"]) + 1e-9
    # per period: quota + burst + what the rules allow per CPU (one slice plus a tick of overrun)
    per_cpu_extra = slice_s + tick_s
    if len(per):
        assert (per["usage_s"] <= quota_s + burst_s + cpus * per_cpu_extra + 1e-9).all()
    # long run: held to quota on average (one initial pool + per-CPU silos of slack)
    duration = sc["run.duration_s"]
    allowed = quota_s / period_s * duration + quota_s + burst_s + cpus * per_cpu_extra
    assert s["cpu_usage_cores"] * duration <= allowed + 1e-9


@given(st.integers(2, 12), st.sampled_from([0.5, 1.0, 1.5, 1.94]), st.integers(0, 99))
def test_cpu_bound_group_above_quota_is_throttled_every_period(threads, limit, seed):
    if threads <= limit:
        return
    res = simulate({"host": {"cpus": 16}, "cgroup": {"cpu_limit": limit},
                    "workload": {"kind": "threads", "threads": threads, "burn_ms": 1000.0},
                    "run": {"duration_s": 3.0, "warmup_s": 0.5, "seed": seed}})
    s = res.summary
    assert s["nr_throttled"] >= s["nr_periods"] - 1
    assert s["cpu_usage_cores"] == pytest.approx(limit, rel=0.03)
    per = res.periods.iloc[6:]
    assert (per["usage_s"] - limit * 0.1).abs().max() < 0.1 * limit * 0.1 + 16 * 0.001
    # The checks above are what min(demand, limit) with "throttled every period iff demand > limit"
    # also gives. The kernel's throttled time is not the group's wall-clock time throttled: it is
    # summed over the CPUs' runqueues (kernel/sched/fair.c: throttle_cfs_rq stamps each cfs_rq's
    # throttled_clock, unthrottle_cfs_rq adds rq_clock - throttled_clock to cfs_b->throttled_time).
    # n = min(threads, 16 CPUs) runqueues each hold one busy thread; together they use the quota
    # Q = limit x 100 ms and each sits throttled for the rest of the period P = 100 ms, so a
    # throttled period adds n x P - Q (e.g. 4 threads at 1 core: 0.4 - 0.1 = 0.3 s), where a group
    # throttled as one would add P - Q / n (0.075 s): a factor n apart.
    n = min(threads, 16)
    assert s["throttled_time_s"] == pytest.approx(s["nr_throttled"] * (n * 0.1 - limit * 0.1), rel=0.02)


def test_same_seed_same_output_and_seed_matters():
    raw = _scenario(8, 0.7, 100_000, 0.0, 12, 3.0, 7.0, 1000, 42)
    a, b = simulate(raw), simulate(raw)
    assert a.summary == b.summary
    assert a.periods.equals(b.periods)
    raw["run"]["seed"] = 43
    c = simulate(raw)
    assert c.summary != a.summary


def test_unlimited_group_is_never_throttled_and_shares_cpus_fairly():
    res = simulate({"host": {"cpus": 2}, "workload": {"kind": "threads", "threads": 4, "burn_ms": 100.0},
                    "run": {"duration_s": 2.0}})
    s = res.summary
    assert s["nr_periods"] == 0 and s["nr_throttled"] == 0
    assert s["cpu_usage_cores"] == pytest.approx(2.0)
    # four equal threads on two CPUs: each 100 ms burn takes about 200 ms of wall time
    assert s["burn_p50_s"] == pytest.approx(0.2, rel=0.05)


def test_conservation_thread_cpu_equals_group_usage():
    eng = CfsEngine(cpus=4, bandwidth=Bandwidth(quota_us=150_000), seed=3)
    tids = [eng.new_thread() for _ in range(6)]
    left = {t: 5 for t in tids}

    def again(t):
        left[t] -= 1
        return 7_000_000 if left[t] > 0 else None
    for i, t in enumerate(tids):
        eng.call_at(i * 3_000_000, lambda t=t: eng.run(t, 7_000_000, again))
    eng.run_until(2 * SEC)
    total = sum(eng.thread_cpu_ns(t) for t in tids)
    assert total == pytest.approx(eng.cpu_stat().usage_ns, abs=10)
    assert total == pytest.approx(6 * 5 * 7_000_000, abs=10)


def test_stop_returns_unfinished_work():
    eng = CfsEngine(cpus=1)
    t = eng.new_thread()
    eng.run(t, 10_000_000, lambda _: None)
    eng.run_until(4_000_000)
    assert eng.stop(t) == 6_000_000
    assert not eng.is_runnable(t)
    assert eng.thread_cpu_ns(t) == 4_000_000


@pytest.mark.parametrize("sliced", [False, True])
def test_group_idle_ns_is_how_long_the_wakes_cpu_has_been_without_the_group(sliced):
    eng = (SlicedCfsEngine if sliced else CfsEngine)(cpus=2, seed=3)
    a, b = eng.new_thread(), eng.new_thread()
    eng.run(a, 1_000_000, lambda _: None)          # runs 0-1 ms, then blocks
    eng.run_until(3_500_000)
    state = eng.rng.bit_generator.state
    assert eng.group_idle_ns(a) == 2_500_000      # its CPU has been free of the group since 1 ms
    assert eng.rng.bit_generator.state == state   # a query: no random draw
    eng.run(a, 10_000_000, lambda _: None)
    eng.run(b, 10_000_000, lambda _: None)
    eng.run_until(4_000_000)
    assert eng.group_idle_ns(a) == -1             # both CPUs hold a thread of the group


def test_nr_periods_counts_only_active_periods_plus_trailing_idle_one():
    # a 5 ms burst once per second: about 2 periods per burst (3 if it crosses a boundary)
    res = simulate({"host": {"cpus": 4}, "cgroup": {"cpu_limit": 1.0},
                    "workload": {"kind": "threads", "threads": 1, "burn_ms": 5.0, "sleep_ms": 995.0},
                    "run": {"duration_s": 10.0, "seed": 5}})
    assert 18 <= res.summary["nr_periods"] <= 31
    assert res.summary["nr_throttled"] == 0


def test_burst_lets_a_bursty_group_exceed_quota_and_counts_bursts():
    base = {"host": {"cpus": 4}, "cgroup": {"cpu_limit": 0.5},
            "workload": {"kind": "threads", "threads": 4, "burn_ms": 20.0, "sleep_ms": 333.0},
            "run": {"duration_s": 10.0, "seed": 2}}
    no_burst = simulate(base).summary
    base["cgroup"]["burst_us"] = 50_000
    with_burst = simulate(base).summary
    assert no_burst["nr_bursts"] == 0
    assert with_burst["nr_bursts"] > 0 and with_burst["burst_time_s"] > 0
    assert with_burst["throttled_ratio"] < no_burst["throttled_ratio"]
    assert with_burst["burn_p99_s"] < no_burst["burn_p99_s"]


def test_legacy_expiry_throttles_a_threaded_lightly_loaded_group_and_modern_does_not():
    """de53fd7 (CVE-2019-19922): on 4.18-5.3 a highly threaded group on many CPUs was throttled
    while using well under its quota; Linux >= 5.4 fixed it."""
    modern = simulate("fibtest-80cpu", ["workload.sleep_ms=400"]).summary
    legacy = simulate("fibtest-80cpu", ["workload.sleep_ms=400", 'cgroup.kernel="legacy-expiry"']).summary
    demand = 40 * 0.5 / 400.5  # cores
    assert modern["cpu_usage_cores"] == pytest.approx(demand, rel=0.1)
    assert modern["throttled_ratio"] < 0.1
    assert legacy["cpu_usage_cores"] < 0.8 * demand            # less than it needs, half its quota...
    assert legacy["throttled_ratio"] > 0.5                      # ...yet throttled most periods
    assert legacy["burn_p99_s"] > 5 * modern["burn_p99_s"]


def test_set_bandwidth_live_resize_unthrottles_and_changes_usage():
    res = simulate({"host": {"cpus": 8}, "cgroup": {"cpu_limit": 2.0, "limit_schedule": [[2.0, 1.0], [4.0, 3.0]]},
                    "workload": {"kind": "threads", "threads": 4, "burn_ms": 1000.0},
                    "run": {"duration_s": 6.0, "seed": 1}})
    ser = res.series.set_index("t_s")
    usage = ser["container_cpu_usage_seconds_total"].diff()
    assert usage.loc[2.0] == pytest.approx(2.0, rel=0.05)
    assert usage.loc[4.0] == pytest.approx(1.0, rel=0.05)
    assert usage.loc[6.0] == pytest.approx(3.0, rel=0.05)
    assert ser["container_spec_cpu_quota"].loc[3.0] == 100_000
    # Those are min(demand, limit) second by second. The "unthrottles": tg_set_cfs_bandwidth
    # (kernel/sched/core.c) refills the pool with the new quota (__refill_cfs_bandwidth_runtime)
    # and unthrottles every throttled cfs_rq at once. At t = 2 s the 4 threads had spent the old
    # 200 ms quota 50 ms into their period and sat throttled; from the resize they run again on
    # the new pool until the period's boundary: 4 x (boundary - 2 s) above the old quota in that
    # period (charged at the 1 ms ticks). A limit that takes effect at the next period, or a
    # pro-rata min(demand, limit), leaves that period at (or under) 200 ms.
    per = res.periods
    for t_resize, old_quota_s in ((2.0, 0.2), (4.0, 0.1)):
        row = per[per["end_s"] > t_resize].iloc[0]
        assert per[per["end_s"] <= t_resize]["throttled"].iloc[-1]          # CPU-bound: every period is
        extra = 4 * (row["end_s"] - t_resize)
        assert extra > 0.004
        assert row["usage_s"] - old_quota_s == pytest.approx(extra, abs=0.001)


def test_bandwidth_rejects_kernel_invalid_values():
    with pytest.raises(ValueError, match="cgroup.period_us"):
        Bandwidth(quota_us=10_000, period_us=500)
    with pytest.raises(ValueError, match="cgroup.burst_us"):
        Bandwidth(quota_us=10_000, burst_us=20_000)
    with pytest.raises(ValueError, match="legacy"):
        Bandwidth(quota_us=10_000, burst_us=5_000, kernel="legacy-expiry")


def _engine_run(raw, prefetch):
    """Drive the threads workload directly on an engine, with or without slice prefetching."""
    import numpy as np

    from cfsim.scenario import load_scenario
    from cfsim.simulation import bandwidth_for
    from cfsim.workloads import threads

    sc = load_scenario(raw)
    eng = CfsEngine(cpus=sc["host.cpus"], hz=sc["host.hz"], bandwidth=bandwidth_for(sc), seed=5,
                    prefetch=prefetch)
    wl = threads.build(eng, sc, np.random.default_rng(9))
    wl.start()
    if sc["cgroup.limit_schedule"]:
        for t_s, lim in sc["cgroup.limit_schedule"]:
            eng.call_at(int(t_s * 1e9), lambda lim=lim: eng.set_bandwidth(bandwidth_for(sc, lim)))
    eng.run_until(int(sc["run.duration_s"] * 1e9))
    return eng.cpu_stat(), eng.periods_frame(), wl.burn_wall_ns


@given(scenarios, st.booleans())
def test_slice_prefetch_changes_no_observable_result(raw, resize):
    assume(raw["cgroup"]["cpu_limit"] * raw["cgroup"]["period_us"] >= 1000)
    if resize:
        raw["cgroup"]["limit_schedule"] = [[0.73, raw["cgroup"]["cpu_limit"] * 1.5]]
        raw["cgroup"]["burst_us"] = 0
    # One thread per CPU keeps the arithmetic in integers, so the two must agree to the
    # nanosecond. (With CPUs shared by threads, processor sharing works in floats and a 1 ns
    # rounding difference can reorder a later race for the pool: equal in law, not bit for bit.)
    raw["workload"]["threads"] = min(raw["workload"]["threads"], raw["host"]["cpus"])
    exact = _engine_run(raw, prefetch=False)
    fast = _engine_run(raw, prefetch=True)
    assert exact[0] == fast[0]
    assert exact[1].equals(fast[1])
    assert exact[2] == fast[2]


def test_background_cores_take_their_share_of_each_cpu():
    base = {"host": {"cpus": 4}, "workload": {"kind": "threads", "threads": 4, "burn_ms": 50.0},
            "run": {"duration_s": 2.0}}
    alone = simulate(base).summary
    base["host"]["background_cores"] = 1.0  # a quarter of every CPU goes to other processes
    shared = simulate(base).summary
    assert alone["cpu_usage_cores"] == pytest.approx(4.0)
    assert shared["cpu_usage_cores"] == pytest.approx(3.0, rel=1e-3)
    assert shared["burn_p50_s"] == pytest.approx(0.05 / 0.75, rel=0.01)
    # under a quota the group still gets its quota when the host has room for it
    base["cgroup"] = {"cpu_limit": 1.0}
    base["run"] = {"duration_s": 3.0, "warmup_s": 1.0}
    assert simulate(base).summary["cpu_usage_cores"] == pytest.approx(1.0, rel=0.02)


def test_timers_take_arguments_fire_in_order_and_can_be_cancelled():
    eng = CfsEngine(cpus=2, bandwidth=Bandwidth(quota_us=50_000), seed=1)
    fired = []
    eng.call_at(5_000_000, fired.append, "b")
    eng.call_at(1_000_000, fired.append, "a")
    eng.call_later(5_000_000, fired.append, "c")          # same instant as "b": scheduled later
    eng.call_later(-10, fired.append, "now")                # a past time fires at once
    eng.call_at(3_000_000, fired.append, "never").cancel()
    eng.run_until(10_000_000)
    assert fired == ["now", "a", "b", "c"]


def _burners(env=None):
    eng = CfsEngine(cpus=8, bandwidth=Bandwidth(quota_us=150_000), seed=7, env=env)
    for i in range(12):
        tid = eng.new_thread()
        eng.call_at(i * 700_000, eng.run, tid, 3_000_000, lambda t: 3_000_000 if t % 3 else None)
    return eng


def test_engine_events_mix_with_other_simpy_processes_on_a_shared_environment():
    # the engine puts its (recycled) events on simpy's queue itself: a foreign process on the same
    # environment must neither disturb them nor be disturbed
    import simpy
    alone = _burners()
    alone.run_until(2 * 10**9)
    env = simpy.Environment()
    ticks = []

    def ticker():
        while True:
            yield env.timeout(1_000_000)
            ticks.append(env.now)
    env.process(ticker())
    shared = _burners(env)
    shared.run_until(2 * 10**9)
    assert shared.cpu_stat() == alone.cpu_stat()
    assert shared.periods_frame().equals(alone.periods_frame())
    assert len(ticks) == 1999 and ticks[-1] == 1_999_000_000


def _empty_throttle_engine(seed=0):
    """2 CPUs, 10 ms of quota per 1 s period, 10 ms ticks. Thread a takes a 5 ms slice at T and
    runs 6 ms (no tick between T and T + 9 ms, so only its dequeue notices the 1 ms overrun);
    thread c takes the other 5 ms at T + 4 ms, leaving the pool empty when a blocks at T + 6 ms.
    c blocks at T + 6.5 ms with 2.5 ms unused and gives 1.5 ms back to the pool."""
    MS = 10**6
    eng = CfsEngine(cpus=2, hz=100, bandwidth=Bandwidth(quota_us=10_000, period_us=1_000_000), seed=seed)
    a, c = eng.new_thread("a"), eng.new_thread("c")
    T = 1 * MS  # just after a tick: ticks are on the 10 ms grid
    eng.call_at(T, eng.run, a, 6 * MS, lambda t: None)
    eng.call_at(T + 4 * MS, eng.run, c, int(2.5 * MS), lambda t: None)
    return eng, a, c, T, MS


def test_last_thread_leaving_an_exhausted_cpu_throttles_the_empty_runqueue():
    """fair.c: put_prev_entity -> check_cfs_rq_runtime -> throttle_cfs_rq throttles the cfs_rq a
    task leaves with its runtime exhausted and the pool empty, though nothing is queued on it:
    the period timer counts it in nr_throttled, no throttled time accrues while it stays empty."""
    eng, a, c, T, MS = _empty_throttle_engine()
    eng.run_until(T + 20 * MS)
    assert eng.periods_frame().empty  # no period boundary yet (seed 0: the first is ~850 ms)
    assert eng.thread_cpu_ns(a) == 6 * MS and not eng.is_runnable(a)
    eng.run_until(2 * 10**9)
    st = eng.cpu_stat()
    assert st.nr_throttled == 1           # the empty runqueue was on the throttled list
    assert st.throttled_time_ns == 0      # ...but nothing waited on it
    per = eng.periods_frame()
    assert per["throttled"].iloc[0] and per["throttled_cpus"].iloc[0] == 1


def test_wake_up_on_an_empty_throttled_cpu_waits_for_distribution():
    """The thread a left behind a throttled CPU; woken again there (its previous CPU looks idle)
    it waits for the period timer's distribution even though the pool holds the 1.5 ms thread c
    returned (before the rule it took that at once and ran)."""
    eng, a, c, T, MS = _empty_throttle_engine()
    eng.call_at(T + 7 * MS, eng.run, a, MS // 2, lambda t: None)
    eng.run_until(T + 20 * MS)
    assert eng.periods_frame().empty
    assert eng.is_throttled(a) and eng.thread_cpu_ns(a) == 6 * MS
    eng.run_until(2 * 10**9)
    st = eng.cpu_stat()
    boundary_ns = int(round(eng.periods_frame()["end_s"].iloc[0] * 1e9))
    assert eng.thread_cpu_ns(a) == int(6.5 * MS)
    assert st.nr_throttled == 1
    assert st.throttled_time_ns == pytest.approx(boundary_ns - (T + 7 * MS), abs=1)


def test_a_silo_found_dry_ticks_ago_is_noticed_at_the_next_tick_not_rearmed_at_now():
    """A CPU advanced by another CPU's event can find its silo dry since more than a tick ago
    (other tenants slowed it: ``_speed`` < 1). Its next event is the next tick, where the kernel's
    ``update_curr`` charges it; an event at ``now`` off the tick charged nothing and re-armed
    itself at ``now`` forever (a twin of an open-latency run hung there)."""
    eng = CfsEngine(cpus=1, hz=250, bandwidth=Bandwidth(quota_us=50_000), seed=1)
    tick = eng.tick_ns
    t0 = 4_001 * tick + 1_333_007           # off the tick
    eng._runtime_remaining_ns[0] = -1_209_304
    eng._speed = 0.9072
    due = eng._refill_due(0, t0, t0 + 10_000_000)   # a thread still running past the next tick
    assert due == 4_002 * tick and due > t0
    on_tick = 4_001 * tick                  # on a tick the charge happens now
    assert eng._refill_due(0, on_tick, on_tick + 10_000_000) == on_tick


@pytest.mark.parametrize("sliced", [False, True])
def test_redirect_gives_new_work_where_the_thread_is_and_returns_what_it_had_left(sliced):
    """A preemption request (the Go runtime's signal to an M) is handled on the CPU the thread
    is on: ``redirect`` swaps its work in place, where ``stop`` + ``run`` is a sleep and a
    wake-up that places the thread again (``_select_cpu``: an idle or throttled CPU first) and
    may move it (here to the other CPU, as loaded). A stop-the-world that moved every running M
    onto a throttled CPU waited there for the refill (50 ms pauses in 1 of ~40 mark terminations
    at 8 Ps on 2 CPUs)."""
    MS = 1_000_000
    eng = (SlicedCfsEngine if sliced else CfsEngine)(cpus=2, hz=1000, seed=1)
    tids = [eng.new_thread() for _ in range(3)]
    for t in tids:
        eng.run(t, 100 * MS, lambda tid: None)
    eng.run_until(10 * MS)
    on = {t: eng._t_cpu[t] for t in tids}
    pair = [t for t in tids if list(on.values()).count(on[t]) == 2]
    lone = next(t for t in tids if t not in pair)
    assert len(pair) == 2 and on[lone] != on[pair[0]]
    used = eng.thread_cpu_ns(pair[0])
    done = []
    left = eng.redirect(pair[0], MS, lambda tid: done.append(eng.now) and None)
    assert left + used == 100 * MS
    assert eng._t_cpu[pair[0]] == on[pair[0]]        # kept its CPU beside the other thread
    eng.stop(pair[1])
    eng.run(pair[1], 100 * MS, lambda tid: None)
    assert eng._t_cpu[pair[1]] == on[lone]           # a wake-up is placed again: it moved
    eng.run_until(20 * MS)
    assert len(done) == 1 and eng.thread_cpu_ns(pair[0]) == used + MS
    eng.stop(lone)
    with pytest.raises(RuntimeError, match="not runnable"):
        eng.redirect(lone, MS, lambda tid: None)
