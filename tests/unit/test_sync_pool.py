"""sync.Pool's per-P caches and victim cache (cfsim.goruntime.syncpool, src/sync/pool.go), and
what they make of a scraped process's heap at GOMAXPROCS above one."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from cfsim.goruntime.syncpool import PerPPool
from cfsim.simulation import simulate

OBJ = 814_699   # one client_golang gzip.Writer after it has compressed (Go 1.26, the lab host)


def test_a_p_gets_back_what_it_put():
    pool = PerPPool(4, OBJ)
    assert pool.get(2) is True          # nothing cached: New
    pool.put(2)
    assert pool.get(2) is False         # its own private object
    pool.put(2)
    assert pool.news == 1 and pool.held() == 1


def test_a_private_object_is_never_stolen_but_a_shared_one_is():
    pool = PerPPool(4, OBJ)
    pool.get(0)
    pool.get(0)
    pool.put(0)                         # private
    pool.put(0)                         # private taken: the shared chain
    assert pool.get(1) is False         # getSlow steals P0's shared object
    assert pool.get(1) is True          # P0's private one stays P0's
    assert pool.news == 3


def test_a_gc_makes_the_caches_victims_and_the_next_drops_what_nobody_took():
    pool = PerPPool(4, OBJ)
    for p in (0, 1, 2):
        pool.get(p)
        pool.put(p)
    assert pool.clear() == 3 * OBJ      # the cycle that starts marks all three (oldPools)
    assert pool.get(1) is False         # P1 takes its victim back
    pool.put(1)
    assert pool.get(3) is True          # a victim private is P-local too
    pool.put(3)
    assert pool.clear() == 2 * OBJ      # P0's and P2's victims dropped; P1's and P3's marked
    assert pool.held() == 2


def test_an_object_in_use_across_a_gc_is_marked():
    pool = PerPPool(2, OBJ)
    pool.get(0)
    assert pool.clear() == OBJ
    pool.put(1)
    assert pool.held() == 1


def test_a_p_beyond_the_caches_grows_them_and_a_stray_put_is_refused():
    pool = PerPPool(1, OBJ)
    assert pool.get(5) is True
    pool.put(5)
    assert pool.get(5) is False
    pool.put(5)
    with pytest.raises(ValueError, match="put without a get"):
        pool.put(0)
    with pytest.raises(ValueError, match="obj_bytes"):
        PerPPool(2, 0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["get", "put", "gc"]), st.integers(0, 7)), max_size=80))
def test_objects_are_conserved(ops):
    """Every object New made is held, or was dropped at a GC as a victim nobody took; a GC never
    marks more than is held; a P holds at most one private object."""
    pool = PerPPool(8, OBJ)
    dropped = 0
    for op, p in ops:
        if op == "get":
            pool.get(p)
        elif op == "put" and pool.in_use:
            pool.put(p)
        elif op == "gc":
            before = pool.held()
            victims = sum(pool.victim_private) + sum(pool.victim_shared)
            marked = pool.clear() // OBJ
            dropped += victims
            assert marked == pool.held() <= before
        assert pool.news == pool.held() + dropped
        assert max(pool.private) <= 1


def _scraped_stream(gomaxprocs: int, pool_kb: float, seed: int = 3):
    return simulate("cpu-bound-threads", [
        "workload.kind=stream", "workload.rate_per_s=2000", "workload.workers=8", "workload.cpu_ms_per_item=1",
        "workload.alloc_kb_per_item=8", "go.live_heap_mb=16", "host.cpus=2", "cgroup.cpu_limit=1",
        f"go.gomaxprocs={gomaxprocs}", "workload.scrape_interval_s=0.1", f"workload.scrape_pool_kb={pool_kb}",
        "run.duration_s=8", "run.warmup_s=2", f"run.seed={seed}"]).summary


def test_a_scraped_process_marks_a_pooled_writer_for_each_p_that_served_a_scrape():
    """The lab's heap at a 0.5-core limit after 40 gzip scrapes: 18.2 MB marked at GOMAXPROCS 1,
    26.7 MB at 16 (18.3 MB at 16 without gzip). A model without the per-P pool marks the same heap
    at every GOMAXPROCS; with it, one writer at GOMAXPROCS 1 (and at times a second, taken New
    and allocated black while a mark runs: 0.6-1.5 writers a seed) and several at 8. The last
    cycle's marked heap moves with what its mark allocated, so the means of three seeds."""
    def extra_writers(gomaxprocs):
        return sum(_scraped_stream(gomaxprocs, 796, seed)["gc_heap_live_bytes"]
                   - _scraped_stream(gomaxprocs, 0, seed)["gc_heap_live_bytes"]
                   for seed in (3, 4, 5)) / 3 / (796 * 1024)
    assert 0.5 < extra_writers(1) < 1.75
    assert extra_writers(8) > 2.5


def test_a_victim_miss_closes_the_victim_cache_and_a_raised_gomaxprocs_loses_the_primaries():
    pool = PerPPool(2, OBJ)
    pool.get(0)
    pool.put(0)
    pool.clear()                         # P0's writer is a victim now
    assert pool.get(1) is True           # P1 has no victim: New, and the victim cache closes
    pool.put(1)
    assert pool.get(0) is True           # P0's victim is still held, but no Get takes it
    pool.put(0)
    assert pool.held() == 3
    pool.get(3)                          # GOMAXPROCS raised: pinSlow's new array
    assert pool.private[:2] == [0, 0] and pool.held() == 2   # P0's and P1's primaries lost, the victim held
