"""Unit tests of the pure Go runtime rules: GOMAXPROCS policies, GC pacer, scheduler."""
from __future__ import annotations

import math

import pytest

from cfsim.goruntime import gcpacer as gp
from cfsim.goruntime import gomaxprocs as gm
from cfsim.goruntime import sched as sd

MiB = 1 << 20


# ----------------------------------------------------------------------------- GOMAXPROCS
@pytest.mark.parametrize("limit,expect", [
    (0.25, 2),    # golang/go#74283: 250m -> 2 (the minimum-2 rule)
    (8.5, 9),     # golang/go#76835: 8500m -> 9 (ceil)
    (1.0, 2), (2.0, 2), (2.01, 3), (1.94, 2), (24.0, 24), (100.0, 24),
    (None, 24),   # no limit: the CPU count
])
def test_go125_policy_vectors(limit, expect):
    assert gm.gomaxprocs_value("go1.25", limit, 24, "1.25") == expect


def test_go125_capped_by_cpus_and_one_cpu_mask():
    assert gm.go125_value(0.1, 1) == 1          # 1-CPU affinity: min(1, 2) = 1
    assert gm.go125_value(6.0, 4) == 4


@pytest.mark.parametrize("limit,expect", [(1.94, 1), (1.5, 1), (0.5, 1), (2.5, 2), (2.0, 2), (0.1, 1)])
def test_automaxprocs_floor_vectors(limit, expect):
    # Grab's table: 2.5 -> 2, 2 -> 2, 1.5 -> 1, 0.5 -> 1; and the VPA's 1.94 -> 1
    assert gm.gomaxprocs_value("automaxprocs", limit, 16, "1.20") == expect


def test_automaxprocs_no_cpu_cap_and_ceil_and_unlimited():
    assert gm.gomaxprocs_value("automaxprocs", 8.0, 4) == 8          # no cap at NumCPU
    assert gm.gomaxprocs_value("automaxprocs", 1.5, 16, round_="ceil") == 2
    assert gm.gomaxprocs_value("automaxprocs", 0.5, 16, round_="ceil") == 1
    assert gm.gomaxprocs_value("automaxprocs", None, 16) == 16       # quota undefined: left alone


def test_host_explicit_and_old_versions():
    assert gm.gomaxprocs_value("host", 2.0, 32) == 32
    assert gm.gomaxprocs_value(6, 0.1, 32) == 6                      # explicit disables policies
    # go.mod < 1.25: containermaxprocs=0, the CPU count
    assert gm.gomaxprocs_value("go1.25", 2.0, 32, "1.24") == 32
    assert gm.container_aware("go1.25", "1.25") and not gm.container_aware("go1.25", "1.24")
    assert not gm.container_aware("automaxprocs", "1.26") and not gm.container_aware(4, "1.26")
    with pytest.raises(ValueError):
        gm.gomaxprocs_value(0, None, 4)
    with pytest.raises(ValueError):
        gm.gomaxprocs_value("bogus", None, 4)


def test_integer_quota_math_avoids_float_rounding():
    # 2.3 cores = 230000/100000: floor 2, ceil 3 regardless of float representation
    assert gm.automaxprocs_value(2.3, 8) == 2
    assert gm.go125_value(2.3, 8) == 3
    assert gm.go125_value(3.0, 8) == 3


def test_timeline_resize_and_restart():
    sched = [[2.5, 1.5], [7.2, 6.0]]
    tl = gm.gomaxprocs_timeline("go1.25", 24, 10, 4.0, sched, version="1.25")
    assert tl.points == ((0.0, 4), (3.0, 2), (8.0, 6))              # next sysmon check after each change
    assert tl.at(2.99) == 4 and tl.at(3.0) == 2 and tl.at(9) == 6
    # automaxprocs reads once per (re)start
    tl = gm.gomaxprocs_timeline("automaxprocs", 24, 10, 4.0, sched, restarts_s=[5.0])
    assert tl.points == ((0.0, 4), (5.0, 1))
    # go1.25 semantics on an old go.mod: never changes
    tl = gm.gomaxprocs_timeline("go1.25", 24, 10, 4.0, sched, version="1.24")
    assert tl.points == ((0.0, 24),)
    # a restart realigns the 1 s sysmon grid
    tl = gm.gomaxprocs_timeline("go1.25", 24, 10, 4.0, [[5.7, 1.0]], version="1.26", restarts_s=[5.5])
    assert tl.points == ((0.0, 4), (6.5, 2))


def test_limit_at():
    assert gm.limit_at(0.0, 2.0, [[1.0, 1.5]]) == 2.0
    assert gm.limit_at(1.0, 2.0, [[1.0, 1.5]]) == 1.5
    assert gm.limit_at(5.0, None, None) is None


# ----------------------------------------------------------------------------- GC workers
# Worked from golang/go src/runtime/mgcpacer.go gcControllerState.startCycle
# (P: dedicated, fractional goal, max idle)
TABLE = {1: (0, 0.25, 1), 2: (0, 0.25, 2), 3: (0, 0.25, 3), 4: (1, 0.0, 3), 5: (1, 0.0, 4),
         6: (1, 0.0833, 5), 7: (2, 0.0, 5), 8: (2, 0.0, 6), 10: (3, 0.0, 7), 16: (4, 0.0, 12),
         32: (8, 0.0, 24), 64: (16, 0.0, 48)}


@pytest.mark.parametrize("procs", sorted(TABLE))
def test_worker_counts_match_reference_table(procs):
    ded, frac, idle = TABLE[procs]
    wc = gp.worker_counts(procs)
    assert wc.dedicated == ded
    assert wc.fractional_goal == pytest.approx(frac, abs=5e-5)
    assert wc.max_idle == idle


@pytest.mark.parametrize("procs", range(1, 65))
def test_worker_counts_rule_for_every_p(procs):
    wc = gp.worker_counts(procs)
    goal = 0.25 * procs
    rounded = int(goal + 0.5)
    # "With gcBackgroundUtilization of 25%, this happens for GOMAXPROCS<=3 or GOMAXPROCS=6."
    fractional_case = procs <= 3 or procs == 6
    if fractional_case:
        assert wc.dedicated == math.floor(goal)
        assert wc.dedicated + wc.fractional_goal * procs == pytest.approx(goal)
    else:
        assert wc.dedicated == rounded and wc.fractional_goal == 0
        assert abs(wc.dedicated / goal - 1) <= 0.3
    assert wc.max_idle == procs - wc.dedicated
    periodic = gp.worker_counts(procs, periodic=True)
    assert periodic.max_idle == (0 if wc.dedicated > 0 else 1)
    assert periodic.dedicated == wc.dedicated


def test_worker_counts_rejects_zero():
    with pytest.raises(ValueError):
        gp.worker_counts(0)


def test_fractional_worker_rule():
    g = 0.25
    # at mark start the worker runs until its share reaches 1.2 x goal
    assert gp.fractional_run_ns(g, 0.0, 0.0) == 0.0          # runs, exits at its first check
    x = gp.fractional_run_ns(g, 0.0, 1e6)
    assert (0 + x) / (1e6 + x) == pytest.approx(1.2 * g)
    # a P ahead of its goal does not run one; nor does any P without a fractional goal
    assert gp.fractional_run_ns(g, 0.3e6, 1e6) is None
    assert gp.fractional_run_ns(0.0, 0.0, 1e6) is None
    # between goal and 1.2 goal: runs until 1.2 goal
    x = gp.fractional_run_ns(g, 0.26e6, 1e6)
    assert x is None


# ----------------------------------------------------------------------------- pacer
def test_heap_goal_gogc_counts_roots_and_minimum():
    assert gp.gogc_heap_goal(100 * MiB, 2 * MiB, 1 * MiB, 100) == 203 * MiB
    assert gp.gogc_heap_goal(100 * MiB, 0, 0, 50) == 150 * MiB
    assert gp.gogc_heap_goal(1 * MiB, 0, 0, 100) == 4 * MiB            # heapMinimum 4 MiB x GOGC/100
    assert gp.gogc_heap_goal(1 * MiB, 0, 0, 200) == 8 * MiB
    assert gp.gogc_heap_goal(1 * MiB, 0, 0, -1) is None


def test_memory_limit_goal():
    # limit 100 MiB, 10 MiB non-heap: 90 MiB minus 3 % headroom
    g = gp.memory_limit_heap_goal(100 * MiB, 10 * MiB, 20 * MiB)
    assert g == 90 * MiB - (90 * MiB // 100 * 3)
    # small: at least 1 MiB headroom, never below heapMarked
    assert gp.memory_limit_heap_goal(12 * MiB, 10 * MiB, 0) == 1 * MiB
    assert gp.memory_limit_heap_goal(12 * MiB, 10 * MiB, 5 * MiB) == 5 * MiB
    assert gp.memory_limit_heap_goal(None, 0, 0) is None
    # the smaller goal applies; GOGC=off with a limit uses the limit
    assert gp.heap_goal(50 * MiB, 0, 0, 100, 60 * MiB, 0) < 100 * MiB
    assert gp.heap_goal(50 * MiB, 0, 0, -1, 200 * MiB, 0) == 200 * MiB - 6 * MiB
    assert gp.heap_goal(50 * MiB, 0, 0, -1, None) is None


@pytest.mark.parametrize("marked,goal", [(16 * MiB, 32 * MiB), (512 * MiB, 1024 * MiB), (1 * MiB, 4 * MiB)])
def test_trigger_bounds(marked, goal):
    lo = marked + (goal - marked) // 64 * 45
    hi = max(marked + (goal - marked) // 64 * 61, goal - 4 * MiB)
    assert gp.trigger(goal, marked, 0) == hi                  # no runway: the upper bound
    assert gp.trigger(goal, marked, goal * 10) == lo          # huge runway: the lower bound
    mid = (lo + hi) // 2
    assert gp.trigger(goal, marked, goal - mid) == mid         # in between: goal - runway
    assert gp.trigger(goal, goal, 0) == goal                  # marked >= goal


def test_runway():
    # consMark x (1-0.25)/0.25 x scan work
    assert gp.runway(0.5, 10 * MiB, 1 * MiB, 1 * MiB) == int(0.5 * 3 * 12 * MiB)
    assert gp.runway(0.0, 10 * MiB, 0, 0) == 0


def test_assist_ratio():
    # 10 MiB of scan left, 5 MiB of heap left: 2 units of scan per byte
    r = gp.assist_work_per_byte(heap_live=27 * MiB, heap_goal_=32 * MiB, triggered=25 * MiB,
                                scan_work_done=0, scan_work_expected=10 * MiB, max_scan_work=10 * MiB, gogc=100)
    assert r == pytest.approx(2.0)
    # past the goal: the goal is extended by 10 %
    r = gp.assist_work_per_byte(33 * MiB, 32 * MiB, 25 * MiB, 5 * MiB, 10 * MiB, 10 * MiB, 100)
    assert r == pytest.approx(5 * MiB / (int(32 * MiB * 1.1) - 33 * MiB))
    # more scan work than expected: the goal is extrapolated, capped at the hard goal
    r = gp.assist_work_per_byte(30 * MiB, 32 * MiB, 25 * MiB, 12 * MiB, 10 * MiB, 20 * MiB, 100)
    ext = min(int((32 - 25) * MiB / (10 * MiB) * 20 * MiB) + 25 * MiB, 64 * MiB)
    assert r == pytest.approx((20 - 12) * MiB / (ext - 30 * MiB))
    # never divides by zero; at least 1000 units remain
    assert gp.assist_work_per_byte(40 * MiB, 32 * MiB, 25 * MiB, 10 * MiB, 10 * MiB, 10 * MiB, 100) > 0
    # GOGC off (a goal from the memory limit): revise takes GOGC as 100000 (mgcpacer.go), so the
    # extrapolated goal is not capped at the goal itself
    r = gp.assist_work_per_byte(30 * MiB, 32 * MiB, 25 * MiB, 12 * MiB, 10 * MiB, 20 * MiB, -1)
    ext = int((32 - 25) * MiB / (10 * MiB) * 20 * MiB) + 25 * MiB
    assert r == pytest.approx((20 - 12) * MiB / (ext - 30 * MiB))


def test_cons_mark():
    # 4 MiB allocated during the mark, 16 MiB scanned, no assists or idle: 4/16 x 0.25/0.75
    c = gp.current_cons_mark(4 * MiB, 16 * MiB, 0.0, 0.0, 1e7, 8)
    assert c == pytest.approx(0.25 * 0.25 / 0.75)
    assert gp.current_cons_mark(0, 16 * MiB, 0, 0, 1e7, 8) is None
    # assists and idle marking raise the scan side's CPU
    assert gp.current_cons_mark(4 * MiB, 16 * MiB, 1e7, 1e7, 1e7, 8) > c
    est = gp.ConsMarkEstimator()
    assert est.update(0.5) == 0.5
    assert est.update(0.1) == 0.5          # max of the current and the last 4
    for _ in range(4):
        est.update(0.1)
    assert est.value == pytest.approx(0.1)
    assert est.update(None) == pytest.approx(0.1)


def test_limiter_bucket():
    lim = gp.GcCpuLimiter(procs=4)
    assert lim.capacity == 4e9
    # 10 ms windows with the GC on, everything else idle: 0.25 x total is GC, the rest of the
    # non-idle time is mutator; all Ps busy with GC-heavy assists fills the bucket
    for _ in range(1000):
        lim.update(10e6, assist_ns=30e6, idle_ns=0.0, gc_on=True)
        if lim.enabled:
            break
    assert lim.enabled and lim.fill == lim.capacity and lim.last_enabled_cycle == 1
    # mutator time drains it and turns it off
    lim.update(10e6, assist_ns=0.0, idle_ns=0.0, gc_on=False)
    assert not lim.enabled and lim.fill < lim.capacity
    # the #59715 case: 32 Ps, 1 running goroutine, 8 dedicated workers, the rest idle
    lim = gp.GcCpuLimiter(procs=32)
    wall = 10e6
    idle = 23 * wall                        # idle Ps + idle marking are subtracted
    lim.update(wall, assist_ns=0.0, idle_ns=idle, gc_on=True)
    # total' = 9 P-walls, GC = 8 P-walls: "8/(8+1)" of the non-idle time is GC, so it fills
    assert lim.fill == pytest.approx(8 * wall - 1 * wall)
    lim.resize(2)
    assert lim.fill <= lim.capacity


# ----------------------------------------------------------------------------- scheduler
def test_spinning_limit_half_busy_ps():
    # 2*nmspinning < P - npidle
    assert sd.may_spin(False, 0, 8, 7)          # one busy P, no spinner: may spin
    assert not sd.may_spin(False, 1, 8, 7)      # 2 >= 1
    assert sd.may_spin(False, 1, 8, 4)          # 2 < 4
    assert not sd.may_spin(False, 2, 8, 4)      # 4 >= 4
    assert sd.may_spin(True, 5, 8, 7)           # already spinning
    for p in range(1, 65):
        busy = p // 2
        allowed = sum(1 for n in range(p) if sd.may_spin(False, n, p, p - busy))
        assert allowed == math.ceil(busy / 2)   # at most half the busy Ps spin


def test_wakep_and_netpoll_rules():
    assert sd.should_wakep(1, 0) and not sd.should_wakep(0, 0) and not sd.should_wakep(3, 1)
    assert sd.netpoll_wakeups(10, 30) == 10 and sd.netpoll_wakeups(40, 30) == 30
    assert sd.netpoll_wakeups(0, 5) == 0


def test_cost_functions():
    c = sd.SchedCosts(spin_base_ns=3000, spin_per_p_ns=300, wake_ns=2000, park_ns=3000, switch_ns=200)
    assert c.spin(8) == 3000 + 2400 and c.spin(32) == 3000 + 9600
    assert c.spin(32) - c.spin(8) == 24 * 300                     # linear in P
    assert c.steal(32) < c.spin(32) and c.steal(1) >= 3000
    assert (c.wake(), c.park(), c.switch()) == (2000, 3000, 200)
    go = {"sched_spin_base_us": 1.0, "sched_spin_per_p_us": 0.5, "sched_wake_us": 2.0,
          "sched_park_us": 4.0, "sched_switch_us": 0.1, "sched_xfer_growth": 0.25, "sched_lock_us": 0.2}
    c2 = sd.SchedCosts.from_go_section(go)
    assert c2.spin(10) == 1000 + 5000 and c2.park() == 4000 and c2.switch() == 100 and c2.lock() == 200
    # the same search on a bigger host: every probe crosses a longer path (+25 % per doubling)
    assert c2.spin(10, host_cpus=8) == 1000 + int(5000 * 1.5)
    assert c2.spin(64, host_cpus=2) == 1000 + 32000            # Ms on 2 CPUs: no growth


def test_host_growth_and_lock_contenders_and_smt():
    # xfer grows with the CPUs the Ms are spread over, never with Ps beyond the host
    assert sd.xfer_factor(64, 2, 0.3) == 1.0 and sd.xfer_factor(2, 64, 0.3) == 1.0
    assert sd.xfer_factor(64, 64, 0.3) == pytest.approx(1 + 0.3 * 5)
    assert sd.lock_contenders(0, 0.0, 0.0, 8) == 0 and sd.lock_contenders(5, 0.0, 0.0, 2) == 1
    assert sd.lock_contenders(5, 0.0, 0.0, 64) == 5
    # the Ms parking or waking by Little's law: 50,000 a second of 10 us each are half an M on average
    assert sd.lock_contenders(2, 5e-5, 10_000.0, 64) == pytest.approx(2.5)
    # SMT: no pairing until every core has one thread; full pairing doubles at slowdown 1
    assert sd.smt_inflation(6, 6, 1, 1.0) == 1.0
    assert sd.smt_inflation(3, 6, 2, 0.5) == 1.0 and sd.smt_inflation(6, 6, 2, 0.5) == 1.5
    assert sd.smt_inflation(5, 6, 2, 1.0) == pytest.approx(1 + 4 / 5)
