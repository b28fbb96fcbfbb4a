"""Request workloads run a busy P's share of the run queue as one chunk (run.request_batching):
the chunk's bookkeeping, and the same results as one goroutine per chunk."""
from __future__ import annotations

import pytest

from cfsim.engine.cfs import Bandwidth, CfsEngine
from cfsim.scenario import load_scenario
from cfsim.simulation import simulate
from cfsim.workloads._request_source import CHILD, POST, PRE, RequestSource

MS = 10**6


class _Engine:
    def __init__(self, gap=None):
        self.gap = gap

    def throttled_gap(self, tid, t0, t1):
        return self.gap


class _Runtime:
    """What RequestSource asks of the Go runtime: every P busy, readied goroutines counted."""

    def __init__(self, nprocs=2, gap=None):
        self.nprocs = nprocs
        self.free_ps: list[int] = []
        self.engine = _Engine(gap)
        self.readied = 0
        self.gc_wants = False

    def ready(self, k=1, netpoll=True, spawns=False):
        self.readied += k

    def gc_worker_wanted(self):
        return self.gc_wants


def _source(rt, batch=True):
    # 0.1 ms of handler CPU, 40 us of server CPU (20 us read, 20 us write), no allocation
    return RequestSource(rt, 100_000, 0, 1, server_cpu_ns=40_000, batch=batch)


def test_a_busy_p_takes_its_share_of_the_queue_and_an_idle_p_means_one_goroutine():
    rt = _Runtime(nprocs=2)
    src = _source(rt)
    for i in range(7):
        src.arrive(i * 1000, client=i)
    c = src.claim(10 * MS)
    assert c.goroutines == 4 and c.work == 4 * 20_000     # 1 + 6 waiting // 2 Ps
    assert len(src.runq) == 3
    rt.free_ps = [1]                                     # a P is idle: it takes the rest
    c2 = src.claim(10 * MS)
    assert c2.goroutines == 1 and len(src.runq) == 2
    single = _source(_Runtime(nprocs=2), batch=False)
    for i in range(7):
        single.arrive(i * 1000, client=i)
    assert single.claim(10 * MS).goroutines == 1 and len(single.runq) == 6


def test_no_chunk_while_the_gc_may_want_the_ps_next_schedule():
    rt = _Runtime(nprocs=2)
    rt.gc_wants = True
    src = _source(rt)
    for i in range(7):
        src.arrive(0, client=i)
    assert src.claim(10 * MS).goroutines == 1


def test_a_chunk_ends_its_goroutines_in_order_after_the_throttled_spell_they_ran_across():
    # four reads of 20 us from t = 0; the CPU was throttled from 30 to 130 us
    rt = _Runtime(nprocs=1, gap=(30_000, 130_000))
    src = _source(rt)
    for i in range(4):
        src.arrive(0, client=i)
    c = src.claim(10 * MS)
    c.tid = 0
    assert c.goroutines == 4
    src.done(c, 0, 180_000)
    # each read ended: its handler goroutine is queued, stamped with the read's end
    ends = [g[0].t_handler for g in src.runq]
    assert ends == [20_000, 140_000, 160_000, 180_000]
    assert [g[2] for g in src.runq] == [CHILD] * 4


def test_a_stopped_chunk_ends_what_it_finished_and_puts_the_rest_back_in_order():
    rt = _Runtime(nprocs=1)
    src = _source(rt)
    for i in range(3):
        src.arrive(0, client=i)
    c = src.claim(10 * MS)
    c.tid = 0
    first, second, third = list(c.token)
    src.requeue(c, left_ns=25_000, t0=0, t1=35_000)      # 35 of 60 us ran
    # the first read ended (its handler queued at the tail), the second ran 15 of its 20 us
    assert first[0].t_handler == 20_000
    assert list(src.runq)[:2] == [second, third]
    assert second[1] == 5_000 and third[1] == 20_000 and second[2] == PRE
    assert src.runq[-1][2] == CHILD and src.runq[-1][0] is first[0]


def test_responses_of_a_chunk_complete_at_their_own_ends():
    rt = _Runtime(nprocs=1)
    src = _source(rt)
    for i in range(2):
        src.arrive(0, client=i)
    for g in list(src.runq):
        g[2] = POST                                      # two responses to write
        g[1] = 20_000
    c = src.claim(10 * MS)
    c.tid = 0
    src.done(c, 100_000, 140_000)
    assert list(src.t_done) == [120_000, 140_000]
    assert src.completed == 2


def test_throttled_gap_is_the_cpus_latest_spell_within_the_run():
    """60 ms of work on a 20 ms / 100 ms quota, asked at its end (as a chunk's end is): the last
    spell it ran across; one that began at the end itself (the empty runqueue's) is none."""
    eng = CfsEngine(cpus=1, bandwidth=Bandwidth(quota_us=20_000, period_us=100_000), seed=1)
    tid = eng.new_thread("t")
    seen = []
    eng.run(tid, 60 * MS, lambda t: seen.append((eng.now, eng.throttled_gap(t, 0, eng.now),
                                                 eng.throttled_gap(t, 70 * MS, eng.now))))
    eng.run_until(10**9)
    ((t1, gap, late),) = seen
    assert gap is not None and 0 < gap[0] < gap[1] < t1
    assert late is None                     # began before the run asked about
    st = eng.cpu_stat()
    # it ran across two spells: the last is the one before its final 20 ms
    assert t1 - gap[1] == pytest.approx(20 * MS, rel=0.1)
    assert st.nr_throttled >= 2


BUSY = ["host.cpus=24", "cgroup.cpu_limit=2", "workload.kind=closed", "workload.clients=256",
        "workload.cpu_ms_per_request=0.045", "workload.alloc_kb_per_request=16", "go.live_heap_mb=64",
        "run.duration_s=0.6", "run.warmup_s=0.1"]


@pytest.mark.parametrize("gomaxprocs, duration_s", [(1, 3.0), (2, 0.6), (8, 0.6)])
def test_chunks_give_a_saturated_service_the_same_results_as_one_goroutine_at_a_time(gomaxprocs, duration_s):
    """Statistically equivalent: over three seeds the means of throughput and CPU agree within
    1 %, of the mean heap goal within 2 %, of p50 and p99 within 5 %, GC cycles within one (at
    GOMAXPROCS 1, where the seed changes nothing, one run of 3 s: six cycles)."""
    seeds = (1, 2, 3) if gomaxprocs > 1 else (1,)

    keys = ("throughput_per_s", "cpu_usage_cores", "latency_p50_s", "latency_p99_s", "gc_cycles",
            "gc_heap_goal_mean_bytes")

    def means(batch):
        runs = [simulate(load_scenario("cpu-bound-threads", BUSY + [
            f"go.gomaxprocs={gomaxprocs}", f"run.duration_s={duration_s}", f"run.seed={s}",
            f"run.request_batching={batch}"])).summary for s in seeds]
        return {k: sum(r[k] for r in runs) / len(runs) for k in keys}

    on, off = means("true"), means("false")
    assert on["throughput_per_s"] == pytest.approx(off["throughput_per_s"], rel=0.01)
    assert on["cpu_usage_cores"] == pytest.approx(off["cpu_usage_cores"], rel=0.01)
    assert on["latency_p50_s"] == pytest.approx(off["latency_p50_s"], rel=0.05)
    assert on["latency_p99_s"] == pytest.approx(off["latency_p99_s"], rel=0.05)
    assert abs(on["gc_cycles"] - off["gc_cycles"]) <= 1
    assert on["gc_heap_goal_mean_bytes"] == pytest.approx(off["gc_heap_goal_mean_bytes"], rel=0.02)


def test_a_service_with_idle_ps_runs_exactly_as_one_goroutine_at_a_time():
    ov = ["host.cpus=8", "workload.kind=open", "workload.rate_per_s=300", "workload.cpu_ms_per_request=0.4",
          "go.gomaxprocs=8", "run.duration_s=1", "run.warmup_s=0"]
    on = simulate(load_scenario("cpu-bound-threads", ov)).summary
    off = simulate(load_scenario("cpu-bound-threads", ov + ["run.request_batching=false"])).summary
    assert on == off


@pytest.mark.parametrize("where", [["host.cpu_sharing=slices"],
                                   ["host.cpu_sharing=slices", "workload.client_cpu_us_per_request=50"]])
def test_no_chunks_where_they_would_change_the_results(where):
    """On the sliced engine a chunk waits out other threads' turns when its M's turn ends inside
    it, and a client on the host would get a chunk's responses at its end: one goroutine per chunk
    there, whatever run.request_batching says."""
    ov = BUSY + ["go.gomaxprocs=8", "run.duration_s=0.3", "host.cpus=4"] + where
    on = simulate(load_scenario("cpu-bound-threads", ov)).summary
    off = simulate(load_scenario("cpu-bound-threads", ov + ["run.request_batching=false"])).summary
    assert on == off
