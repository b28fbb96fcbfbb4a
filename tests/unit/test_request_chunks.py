"""Request workloads run a busy P's share of the run queue as one chunk (run.request_batching):
the chunk's bookkeeping, and the same results as one goroutine per chunk."""
from __future__ import annotations

import pytest

from cfsim.engine.cfs import Bandwidth, CfsEngine
from cfsim.scenario import load_scenario
from cfsim.simulation import simulate
from cfsim.workloads._request_source import CHILD, POST, PRE, RequestSource, _G, _Req

MS = 10**6


class _Engine:
    def __init__(self, gap=None):
        self.gap = gap
        self.now = 0

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
        self.idlew_running = 0

    @property
    def npidle(self):
        return len(self.free_ps)

    def ready(self, k=1, netpoll=True, spawns=False):
        self.readied += k

    def wakep(self):
        self.readied += 1

    def gc_cycle_running(self):
        return self.gc_wants


def _source(rt, batch=True, fanout=1):
    # 0.1 ms of handler CPU, 40 us of server CPU (20 us read, 20 us write), no allocation
    return RequestSource(rt, 100_000, 0, fanout, server_cpu_ns=40_000, batch=batch)


@pytest.mark.from_source   # a stand-in runtime for a compiled class (tests/conftest.py)
def test_a_busy_p_runs_a_requests_read_handler_and_response_as_one_chunk_and_an_idle_p_one_goroutine():
    rt = _Runtime(nprocs=2)
    src = _source(rt)
    for i in range(7):
        src.arrive(i * 1000, client=i)
    c = src.claim(10 * MS, p=0)
    # P 0 polled the network: the first read runs, the six others wait in its local queue; the
    # read readies the handler into runnext, the handler the response: one chunk of three
    assert c.goroutines == 3 and c.work == 20_000 + 100_000 + 20_000
    assert [g.stage for g in c.token] == [PRE, CHILD, POST] and len(src.q.local[0]) == 6
    rt.free_ps = [1]                                     # a P is idle: it steals half of P 0's
    c2 = src.claim(10 * MS, p=1)
    assert c2.goroutines == 1 and len(src.q.local[1]) == 2 and len(src.q.local[0]) == 3
    single = _source(_Runtime(nprocs=2), batch=False)
    for i in range(7):
        single.arrive(i * 1000, client=i)
    assert single.claim(10 * MS, p=0).goroutines == 1 and len(single.q) == 6


@pytest.mark.from_source   # a stand-in runtime for a compiled class (tests/conftest.py)
def test_no_chunk_during_a_gc_cycle_or_where_the_request_forks():
    rt = _Runtime(nprocs=2)
    rt.gc_wants = True
    src = _source(rt)
    for i in range(7):
        src.arrive(0, client=i)
    assert src.claim(10 * MS, p=0).goroutines == 1
    # two handler goroutines: the second go statement takes runnext and pushes the first to the
    # tail of the local queue, behind other requests: what runs after the read is not its own
    fork = _source(_Runtime(nprocs=2), fanout=2)
    for i in range(3):
        fork.arrive(0, client=i)
    assert fork.claim(10 * MS, p=0).goroutines == 1


@pytest.mark.from_source   # a stand-in runtime for a compiled class (tests/conftest.py)
def test_a_chunk_ends_its_goroutines_in_order_after_the_throttled_spell_they_ran_across():
    # a read of 20 us, the handler's 100 us, the response's 20 us from t = 0; the CPU was
    # throttled from 30 to 130 us
    rt = _Runtime(nprocs=1, gap=(30_000, 130_000))
    src = _source(rt)
    src.arrive(0, client=0)
    src.arrive(0, client=1)                              # another request waits
    c = src.claim(10 * MS, p=0)
    c.tid = 0
    assert c.goroutines == 3
    src.done(c, 0, 240_000)
    assert list(src.handler_end) == [220_000] and list(src.handler_ns) == [200_000]
    assert list(src.t_done) == [240_000] and src.completed == 1
    assert len(src.q) == 1 and src.q.peek_own(0).stage == PRE


@pytest.mark.from_source   # a stand-in runtime for a compiled class (tests/conftest.py)
def test_a_lone_request_runs_one_goroutine_a_chunk():
    src = _source(_Runtime(nprocs=1))
    src.arrive(0, client=0)
    assert src.claim(10 * MS, p=0).goroutines == 1       # nothing waits: the reference path


@pytest.mark.from_source   # a stand-in runtime for a compiled class (tests/conftest.py)
def test_a_stopped_chunk_ends_what_it_finished_and_puts_the_rest_back_in_order():
    rt = _Runtime(nprocs=1)
    src = _source(rt)
    for i in range(3):
        src.arrive(0, client=i)
    c = src.claim(10 * MS, p=0)
    c.tid = 0
    read = c.token[0]
    waiting = list(src.q.local[0])
    src.requeue(c, left_ns=85_000, t0=0, t1=55_000)      # 55 of 140 us ran
    # the read ended at 20 us; its handler ran 35 of its 100 us and waits in runnext, ahead of
    # the other two reads; the response was never readied
    assert read.req.t_handler == 20_000
    handler = src.q.next[0]
    assert handler.stage == CHILD and handler.req is read.req and handler.left == 65_000
    assert list(src.q.local[0]) == waiting and len(src.q) == 3
    assert [src.q.take(0, 0, 1, 0).stage for _ in range(3)] == [CHILD, PRE, PRE]


@pytest.mark.from_source   # a stand-in runtime for a compiled class (tests/conftest.py)
@pytest.mark.parametrize("schedtick, goroutines", [(60, 1), (10, 3)])
def test_a_chain_stops_where_the_global_queues_turn_comes(schedtick, goroutines):
    src = _source(_Runtime(nprocs=1))
    src.arrive(0, client=0)
    src.q.put_head(0, [src.q.net.popleft()])             # the read waits in P 0's local queue
    src.q.put_global(_G(_Req(0, 1, -1, 1_000), 1_000, POST))                # and something in the global queue
    src.q.ticks[0] = schedtick
    # taking the read makes schedtick 61: the next schedule takes the global goroutine first
    assert src.claim(10 * MS, p=0).goroutines == goroutines


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


@pytest.mark.parametrize("gomaxprocs, duration_s, seeds, goal_rel", [
    (1, 3.0, (1,), 0.02), (2, 0.6, (1, 2, 3), 0.02), (8, 0.6, (1, 2, 3), 0.02), (24, 1.0, tuple(range(1, 17)), 0.04)])
def test_chunks_give_a_saturated_service_the_same_results_as_one_goroutine_at_a_time(gomaxprocs, duration_s, seeds,
                                                                                       goal_rel):
    """Statistically equivalent: over three seeds the means of throughput and CPU agree within
    1 %, of the mean heap goal within 2 %, of p50 and p99 within 5 %, GC cycles within one (at
    GOMAXPROCS 1, where the seed changes nothing, one run of 3 s: six cycles; at 24 Ps, whose
    queues are stolen from most, sixteen seeds of 1 s: a seed's p99 spreads by 4-9 % and its mean
    heap goal by 2-4 %, so the means' ratio has a standard error of about 2.4 and 1.1 %; four seeds
    put p99 6 % apart on 2026-12-06, eight 1.4 %, and the goal within 4 %; a seed's p50 ratio spreads
    by 10 %, so eight seeds' means stood 1.5 % apart on 2026-12-06 and 5.5 % on 2026-12-07 with the
    pacer's last-cycle expectation, sixteen 3.4 %)."""

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
    assert on["gc_heap_goal_mean_bytes"] == pytest.approx(off["gc_heap_goal_mean_bytes"], rel=goal_rel)


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
