"""cfsim.lab.packcurve: where the kernel puts a woken thread, by its previous CPU and by recent
utilization, from a scheduler trace."""
from __future__ import annotations

import pytest

from cfsim.lab import packcurve as pc

SW = "{task}-{pid} [{cpu:03d}] d..2. {t:.6f}: sched_switch: prev_comm={task} prev_pid={prev} prev_prio=120 " \
     "prev_state=S ==> next_comm=x next_pid={nxt} next_prio=120"
WK = "{task}-{pid} [{cpu:03d}] d..2. {t:.6f}: sched_waking: comm={comm} pid={wakee} prio=120 target_cpu={target:03d}"


def _duty_trace(busy_us: float, idle_us: float, seconds: float, beside: bool, comm: str = "app",
                wakee: int = 12) -> list[str]:
    """Thread 11 of 'app' runs busy_us on CPU 0 and sleeps idle_us; halfway through each busy spell
    it wakes ``wakee`` (of ``comm``), which runs 20 us beside it on CPU 0 after it (``beside``) or
    at once on CPU 1."""
    lines, t, period = [], 0.0, (busy_us + idle_us) / 1e6
    while t < seconds:
        lines.append(SW.format(task="swapper/0", pid=0, cpu=0, t=t, prev=0, nxt=11))
        t_w, end = t + busy_us / 2e6, t + busy_us / 1e6
        lines.append(WK.format(task="app", pid=11, cpu=0, t=t_w, comm=comm, wakee=wakee, target=0))
        if beside:
            lines.append(SW.format(task="app", pid=11, cpu=0, t=end, prev=11, nxt=wakee))
            lines.append(SW.format(task=comm, pid=wakee, cpu=0, t=end + 20e-6, prev=wakee, nxt=0))
        else:
            lines.append(SW.format(task="swapper/1", pid=0, cpu=1, t=t_w + 5e-6, prev=0, nxt=wakee))
            lines.append(SW.format(task=comm, pid=wakee, cpu=1, t=t_w + 25e-6, prev=wakee, nxt=0))
            lines.append(SW.format(task="app", pid=11, cpu=0, t=end, prev=11, nxt=0))
        t += period
    return lines


def test_a_wakee_kept_beside_its_waker_counts_as_last_run_there_and_placed_there():
    curve = pc.pack_curve(_duty_trace(200, 600, 2.0, beside=True), "app", 2)
    here = curve["own_here"]
    assert sum(n for n, _ in here.values()) > 1500 and all(k == n for n, k in here.values())
    assert max(map(float, here)) < 0.35 and not curve["own_away"]


def test_a_wakee_sent_to_the_idle_cpu_counts_as_last_run_away_and_placed_away():
    curve = pc.pack_curve(_duty_trace(700, 100, 2.0, beside=False), "app", 2)
    away = curve["own_away"]
    assert sum(n for n, _ in away.values()) > 1500 and all(k == 0 for n, k in away.values())
    assert min(map(float, away)) >= 0.8 and not curve["own_here"]


def test_another_process_is_counted_apart_and_the_warm_up_left_out():
    curve = pc.pack_curve(_duty_trace(200, 600, 1.0, True, comm="loadgen", wakee=99), "app", 2)
    assert not curve["own_here"] and sum(n for n, _ in curve["neighbour_here"].values()) > 500
    everything = pc.pack_curve(_duty_trace(200, 600, 1.0, True, comm="loadgen", wakee=99), "app", 2, warmup_s=0.0)
    assert sum(n for n, _ in everything["neighbour_here"].values()) > \
        sum(n for n, _ in curve["neighbour_here"].values())
    assert pc.pooled([curve, everything], "neighbour_here")


def test_a_cpu_beyond_the_host_is_refused():
    with pytest.raises(pc.PackCurveError, match="CPU 3 on a host of 2"):
        pc.pack_curve([SW.format(task="a", pid=1, cpu=3, t=0.0, prev=1, nxt=0)], "app", 2)
