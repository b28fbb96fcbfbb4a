"""The pure CFS bandwidth steps, against the values the kernel code gives."""
from hypothesis import given
from hypothesis import strategies as st

from cfsim.kernel import bandwidth as bw
from cfsim.kernel import limits


def test_refill_resets_to_quota_without_burst():
    assert bw.refill(0, 100, 100, 0) == (100, 100, 0)
    assert bw.refill(60, 100, 100, 0) == (100, 100, 0)  # capped at quota + 0


def test_refill_accumulates_up_to_quota_plus_burst_and_counts_bursts():
    # 40 unused of a 100 quota carries over, capped at quota + burst = 130
    pool, snap, used = bw.refill(40, 100, 100, 30)
    assert (pool, snap, used) == (130, 130, 0)
    # the next period took 130 from a 130 pool: 30 above quota -> one burst of 30
    assert bw.refill(0, 130, 100, 30) == (100, 100, 30)


def test_assign_repays_deficit_then_tops_up_to_slice():
    assert bw.assign(100, -2, 5) == (93, 5, 7)
    assert bw.assign(0, -2, 5) == (0, -2, 0)


def test_distribute_fifo_gives_one_ns_above_zero():
    pool, rr = bw.distribute(7, [-3, -1, -4])
    assert rr == [1, 1, -3] and pool == 0
    pool, rr = bw.distribute(100, [-3, 0])
    assert rr == [1, 1] and pool == 95


def test_return_slack_keeps_one_ms():
    assert bw.return_slack(0, 5_000_000) == (4_000_000, 1_000_000)
    assert bw.return_slack(3, 1_000_000) == (3, 1_000_000)


def test_slack_timer_rules():
    ms = 1_000_000
    assert bw.should_arm_slack_timer(6 * ms, 5 * ms, True, 7 * ms, False)
    assert not bw.should_arm_slack_timer(6 * ms, 5 * ms, True, 7 * ms - 1, False)  # refresh too near
    assert not bw.should_arm_slack_timer(5 * ms, 5 * ms, True, 50 * ms, False)     # not more than a slice
    assert not bw.should_arm_slack_timer(6 * ms, 5 * ms, False, 50 * ms, False)    # nobody throttled
    assert not bw.should_arm_slack_timer(6 * ms, 5 * ms, True, 50 * ms, True)      # already pending
    assert bw.slack_timer_distributes(6 * ms, 5 * ms, 2 * ms)
    assert not bw.slack_timer_distributes(6 * ms, 5 * ms, 2 * ms - 1)


def test_kernel_limits():
    assert limits.check_bandwidth(1000, 1000, 0) == []
    keys = [k for k, _ in limits.check_bandwidth(999, 1_000_001, 1000)]
    assert keys == ["cgroup.period_us", "cgroup.cpu_limit", "cgroup.burst_us"]
    assert limits.quota_us_from_cores(1.94) == 194_000
    assert limits.quota_us_from_cores(0.0001) == 1000  # kubelet's minimum


@given(st.integers(0, 10**9), st.integers(-10**7, 0), st.integers(1, 10**7))
def test_assign_conserves_runtime(pool, rr, target):
    new_pool, new_rr, amount = bw.assign(pool, rr, target)
    assert new_pool >= 0
    assert new_pool + new_rr == pool + rr
    assert amount >= 0


@given(st.integers(0, 10**9), st.lists(st.integers(-10**7, 0), max_size=20))
def test_distribute_conserves_runtime_and_is_fifo(pool, rrs):
    new_pool, new_rr = bw.distribute(pool, rrs)
    assert new_pool + sum(new_rr) == pool + sum(rrs)
    freed = [r > 0 for r in new_rr]
    # FIFO: once a CPU is left throttled, no later CPU was freed
    if False in freed:
        assert not any(freed[freed.index(False):])
