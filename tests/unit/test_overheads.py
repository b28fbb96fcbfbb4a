"""Runtime overheads (issue 14): the request path's wake-ups, scrapes, CPU variability, SMT, the
coverage notes and the band, and the public measurements' scenarios."""
from __future__ import annotations

import math

import pytest

from cfsim.overheads import public
from cfsim.overheads.band import UNPINNED, band, corner_overrides
from cfsim.overheads.coverage import coverage_notes, depends_on_unpinned
from cfsim.scenario import ScenarioError, load_scenario
from cfsim.simulation import simulate


def open_sc(**kw):
    base = {"host": {"cpus": 2}, "cgroup": {"cpu_limit": 2.0},
            "go": {"gomaxprocs": 1, "live_heap_mb": 16.0, "gogc": -1},
            "workload": {"kind": "open", "arrivals": "fixed", "rate_per_s": 500.0, "cpu_ms_per_request": 0.2,
                         "alloc_kb_per_request": 2.0},
            "run": {"duration_s": 2.0, "warmup_s": 0.2}}
    return load_scenario(base, [f"{k.replace('__', '.')}={v!r}" if not isinstance(v, str) else f'{k.replace("__", ".")}="{v}"'
                                for k, v in kw.items()])


def test_request_path_wakes_idle_ps_twice_per_request():
    # GOMAXPROCS 2 on an idle process: the handler's `go` (newproc -> wakep) and the last
    # goroutine's wg.Done (ready -> wakep) each wake a parked M that finds nothing and parks again;
    # GOMAXPROCS 1 has no idle P to wake. A model without these paths (min(demand, limit), or
    # the same CPU per request at any GOMAXPROCS) has equal CPU at 1 and 2.
    # (sysmon off: its polls are tested on their own below)
    one = simulate(open_sc(go__gomaxprocs=1, go__sysmon_poll_us=0.0)).summary
    two = simulate(open_sc(go__gomaxprocs=2, go__sysmon_poll_us=0.0)).summary
    per_req = (two["cpu_usage_cores"] - one["cpu_usage_cores"]) / 500.0 * 1e6   # us per request
    c = 6.0 + 3.0 + 3.0 + 0.05 * 2       # wake + spin base + park + per-P probes (defaults)
    assert 1.5 * c < per_req < 2.6 * c
    assert two["sched_cpu_fraction"] > 2 * one["sched_cpu_fraction"]
    # the server path's CPU is charged per request: 40 us by default (its 4 KiB of garbage adds
    # mallocgc and page-fault CPU, go.alloc_ns_per_kb / go.page_fault_us: off here, and sysmon)
    quiet = {"go__alloc_ns_per_kb": 0.0, "go__page_fault_us": 0.0, "go__sysmon_poll_us": 0.0}
    one = simulate(open_sc(go__gomaxprocs=1, **quiet)).summary
    bare = simulate(open_sc(workload__server_cpu_us_per_request=0.0, **quiet)).summary
    assert (one["cpu_usage_cores"] - bare["cpu_usage_cores"]) / 500.0 * 1e6 == pytest.approx(40.0, rel=0.05)


def test_sysmon_costs_per_busy_spell_not_per_request():
    # sysmon (proc.go) is woken by the first system call after the process went idle and then
    # polls every 20 us + 50 us timer slack while a P is busy, doubling its sleep after 50 polls.
    # At 500 requests/s with 0.2 ms handlers each request is its own busy spell: a futex wake
    # plus ~4 polls. A saturated process (one long busy spell) pays ~100 polls/s (10 ms sleeps),
    # not that per request: the cost per request falls with load, which a per-request constant
    # cannot do.
    def per_req_us(rate, cpu_ms, poll):
        s = simulate(open_sc(go__sysmon_poll_us=poll, workload__rate_per_s=rate,
                             workload__cpu_ms_per_request=cpu_ms, cgroup__cpu_limit=None)).summary
        return s["cpu_usage_cores"] / s["throughput_per_s"] * 1e6
    idle = per_req_us(500.0, 0.2, 5.0) - per_req_us(500.0, 0.2, 0.0)
    spell = 0.2 + 0.04 + 0.006       # handler + server path + wake [ms]
    polls = spell * 1e3 / 70.0
    assert idle == pytest.approx(6.0 + 5.1 * (polls + 1), rel=0.35)
    busy = per_req_us(20000.0, 0.2, 5.0) - per_req_us(20000.0, 0.2, 0.0)   # 4 cores of demand
    assert busy < 0.1 * idle


def test_sysmon_sleeps_and_cpu_are_reported_as_the_lab_measures_its_thread():
    # The lab tells sysmon's thread apart and counts its sleeps (voluntary switches) and CPU;
    # the model reports the same: each request its own busy spell, one deep sleep left plus a
    # poll every 20 us + 50 us slack + the host's timer latency while a P is busy. A later timer
    # (a VM's) means fewer polls a spell, not fewer spells.
    def sysmon(timer_latency_us):
        s = simulate(open_sc(go__sysmon_poll_us=5.0, host__timer_latency_us=timer_latency_us,
                             cgroup__cpu_limit=None)).summary
        return s["sysmon_sleeps_per_s"] / s["throughput_per_s"], s["sysmon_cpu_cores"] / s["throughput_per_s"] * 1e6
    # (the poll that finds every P idle slept too: ceil(spell / interval) usleeps a spell)
    spell_us = 200 + 40 + 6
    sleeps, cpu_us = sysmon(0.0)
    assert sleeps == pytest.approx(1 + math.ceil(spell_us / 70.0), rel=0.1)
    assert cpu_us == pytest.approx(5.0 * (sleeps - 1) + 6.0, rel=0.2)   # polls at 5 us, a futex wake at 6
    late, _ = sysmon(50.0)
    assert late == pytest.approx(1 + math.ceil(spell_us / 120.0), rel=0.1)


def test_client_rtt_adds_to_latency_and_handler_span_is_shorter():
    s = simulate(open_sc(workload__client_rtt_ms=0.3)).summary
    assert s["server_latency_p50_s"] == pytest.approx(0.2e-3, rel=0.05)       # the handler's own span
    assert s["latency_p50_s"] == pytest.approx(0.2e-3 + 40e-6 + 0.3e-3, rel=0.1)


def test_client_rtt_spread_sets_the_tail_and_leaves_the_server_alone():
    # a log-normal time outside the process with median 0.3 ms and p99 3 ms: the client's p99
    # moves by about 2.6 ms (3 - 0.3, less the server's own spread that the draws now hide), its
    # p50 hardly, and the server (open loop) runs the same requests at the same instants (the
    # draws have their own random stream)
    many = {"workload__rate_per_s": 1500.0, "run__duration_s": 6.0, "workload__cpu_cv": 0.3}
    plain = simulate(open_sc(workload__client_rtt_ms=0.3, **many)).summary
    tail = simulate(open_sc(workload__client_rtt_ms=0.3, workload__client_rtt_p99_ms=3.0, **many)).summary
    for key in ("cpu_usage_cores", "throughput_per_s", "server_latency_p99_s", "gc_cycles"):
        assert tail[key] == plain[key]
    assert tail["latency_p50_s"] == pytest.approx(plain["latency_p50_s"], rel=0.15)
    assert tail["latency_p99_s"] - plain["latency_p99_s"] == pytest.approx(2.6e-3, rel=0.2)   # 2.3-2.7 over seeds
    # a 99th percentile below the median cannot be: the key is named
    with pytest.raises(ScenarioError, match="workload.client_rtt_p99_ms"):
        open_sc(workload__client_rtt_ms=0.3, workload__client_rtt_p99_ms=0.2)


def test_scrapes_cost_their_cpu_and_hold_the_only_p():
    # the scrape's own CPU, apart from its garbage's allocation CPU and sysmon's polls (tested elsewhere)
    quiet = {"go__alloc_ns_per_kb": 0.0, "go__page_fault_us": 0.0, "go__sysmon_poll_us": 0.0}
    base = simulate(open_sc(run__duration_s=4.0, **quiet)).summary
    scraped = simulate(open_sc(run__duration_s=4.0, workload__scrape_interval_s=0.5,
                               workload__scrape_cpu_ms=3.0, **quiet)).summary
    assert scraped["cpu_usage_cores"] - base["cpu_usage_cores"] == pytest.approx(3.0 / 500, rel=0.15)
    # at GOMAXPROCS 1 a request arriving during a 3 ms scrape waits behind it: a tail appears
    assert scraped["latency_max_s"] > base["latency_max_s"] + 1e-3


def test_cpu_cv_spreads_latency_and_is_deterministic():
    flat = simulate(open_sc()).summary
    var1 = simulate(open_sc(workload__cpu_cv=1.0)).summary
    var2 = simulate(open_sc(workload__cpu_cv=1.0)).summary
    assert flat["latency_p99_s"] < 1.1 * flat["latency_p50_s"]
    assert var1["latency_p99_s"] > 3 * var1["latency_p50_s"]
    assert var1 == var2
    assert var1["cpu_usage_cores"] == pytest.approx(flat["cpu_usage_cores"], rel=0.1)   # same mean


def test_smt_siblings_raise_the_cpu_per_request_only_beyond_one_thread_per_core():
    def closed(g, tpc):
        sc = load_scenario({"host": {"cpus": 6, "threads_per_core": tpc, "smt_slowdown": 1.0},
                            "cgroup": {"cpu_limit": 1.0}, "go": {"gomaxprocs": g, "live_heap_mb": 4.0},
                            "workload": {"kind": "closed", "clients": 50, "cpu_ms_per_request": 4.0},
                            "run": {"duration_s": 3.0, "warmup_s": 0.5}})
        return simulate(sc).summary["throughput_per_s"]
    one, three, six = closed(1, 2), closed(3, 2), closed(6, 2)
    assert three == pytest.approx(one, rel=0.05)          # 3 threads on 3 cores: no sibling shared
    assert six == pytest.approx(one / 2, rel=0.1)         # 6 on 3 cores: every thread paired, 2x CPU
    assert closed(6, 1) == pytest.approx(one, rel=0.05)   # no SMT: the quota binds alike


def test_coverage_notes_and_band_only_where_unpinned_parameters_matter():
    lab_like = open_sc(go__gomaxprocs=2)
    assert coverage_notes(lab_like) == [] and not depends_on_unpinned(lab_like)
    assert band(lab_like) is None
    big = load_scenario({"host": {"cpus": 24}, "cgroup": {"cpu_limit": 2.0}, "go": {"gomaxprocs": 24},
                         "workload": {"kind": "closed", "cpu_ms_per_request": 0.045}})
    assert depends_on_unpinned(big)
    keys = {n.key for n in coverage_notes(big)}
    assert {"host.cpus", "go.gomaxprocs"} <= keys
    huge = big.with_overrides([("host.cpus", 256), ("go.gomaxprocs", 256)])
    texts = " ".join(n.text for n in coverage_notes(huge))
    assert "beyond every measurement" in texts and "GOMAXPROCS 256" in texts
    tiny = big.with_overrides([("workload.cpu_ms_per_request", 0.001)])
    assert any(n.key == "workload.cpu_ms_per_request" for n in coverage_notes(tiny))
    # a key the user set is the user's knowledge of the host: the corners leave it
    known = big.with_overrides([("host.threads_per_core", 2)])
    assert ("host.threads_per_core", 2) in corner_overrides(big, 1)
    assert all(k != "host.threads_per_core" for k, _ in corner_overrides(known, 1))
    assert set(UNPINNED) >= {"host.threads_per_core", "go.sched_lock_us"}


def test_band_orders_the_corners_with_a_fake_simulator():
    class R:
        def __init__(self, s):
            self.summary = s
    big = load_scenario({"host": {"cpus": 24}, "cgroup": {"cpu_limit": 2.0}, "go": {"gomaxprocs": 24},
                         "workload": {"kind": "closed", "cpu_ms_per_request": 0.045}})
    seen = []

    def fake(sc):
        seen.append(sc["host.threads_per_core"])
        return R({"throughput_per_s": 100.0 if sc["host.threads_per_core"] == 2 else 200.0})
    b = band(big, keys=("throughput_per_s",), simulate_fn=fake)
    assert seen == [1, 2] and b == {"throughput_per_s": {"low": 100.0, "high": 200.0}}


def test_band_corners_are_reused_from_the_simulation_cache():
    """The corners go through the process's simulation cache, as every other simulation of an
    audit does: the same band again simulates nothing, and gives the same answer."""
    from cfsim.sweep import simcache

    big = load_scenario({"host": {"cpus": 8}, "cgroup": {"cpu_limit": 1.0}, "go": {"gomaxprocs": 8},
                         "workload": {"kind": "closed", "cpu_ms_per_request": 0.2, "clients": 8},
                         "run": {"duration_s": 0.6, "warmup_s": 0.2}})
    assert depends_on_unpinned(big)
    with simcache.kept_default_cache():
        cache = simcache.set_default_cache(None)
        first = band(big)
        assert cache.stats()["simulated"] == 2
        assert band(big) == first and cache.stats()["simulated"] == 2 and cache.stats()["reused"] == 2


def test_every_public_measurement_builds_its_scenarios_and_cites_a_source():
    names = set()
    for m in public.MEASUREMENTS:
        a, b = m.scenarios(duration_s=1.0)
        assert a["run.duration_s"] == 1.0 and b["run.duration_s"] == 1.0
        assert m.url.startswith("https://") or m.url.startswith("built-in scenario")
        assert m.role in ("train", "held-out") and m.kind in ("ratio", "direction", "at_least")
        names.add(m.name)
    assert len(names) == len(public.MEASUREMENTS) >= 10
    trains = [m for m in public.MEASUREMENTS if m.role == "train"]
    assert {m.fits for m in trains} == {"host.smt_slowdown", "go.sched_lock_us"}
    with pytest.raises(KeyError, match="no public measurement"):
        public.by_name("nope")


def test_comparison_verdicts():
    c = public.Comparison("x", "held-out", "ratio", "h", 0.5, 0.9, 0.45, 1.0, "u")
    assert c.verdict == "inside the band" and not c.within_25
    c = public.Comparison("x", "held-out", "ratio", "h", 0.5, 1.2, 1.1, 1.3, "u")
    assert c.verdict == "direction NOT reproduced"
    c = public.Comparison("x", "held-out", "ratio", "h", 0.5, 0.55, 0.5, 0.6, "u")
    assert c.verdict == "within 25 %"
    c = public.Comparison("x", "held-out", "ratio", "h", 0.61, 0.9, 0.8, 0.95, "u", alternative=0.35)
    assert c.verdict == "outside the band"


def test_p99_order_counts_only_pairs_the_repeats_separate():
    from cfsim.overheads.labcheck import p99_order
    rows = [{"group": "a", "gomaxprocs": g, "p99_lab": v, "p99_model": m}
            for g, vs, m in ((1, (1.0, 1.2, 1.1), 1.0), (2, (3.0, 2.5, 2.8), 2.0), (8, (2.9, 1.15, 2.0), 5.0))
            for v in vs]
    out = p99_order(rows)
    # 1 vs 2 separated (kept), 1 vs 8 and 2 vs 8 overlap
    assert out["separated_pairs"] == 1 and out["kept"] == 1 and out["wrong"] == []
    rows += [{"group": "b", "gomaxprocs": 1, "p99_lab": 5.0, "p99_model": 1.0},
             {"group": "b", "gomaxprocs": 2, "p99_lab": 1.0, "p99_model": 2.0}]
    # a single run per setting has no measured spread: it separates nothing
    assert p99_order(rows)["separated_pairs"] == 1
    out = p99_order(rows, min_repeats=1)
    assert out["separated_pairs"] == 2 and out["wrong"] == [("b", 1, 2)] and out["share_kept"] == 0.5
    # the wrong pair's detail: the lab's range and the model's mean at each setting, lower GOMAXPROCS first
    assert out["reversed"] == [{"group": "b", "gomaxprocs": (1, 2), "lab_p99_s": ((5.0, 5.0), (1.0, 1.0)),
                                "model_p99_s": (1.0, 2.0)}]


def test_validation_report_names_the_pairs_whose_p99_order_the_model_reverses():
    from cfsim.overheads.labcheck import GROUP_KEYS, p99_order
    from cfsim.validation.report import _reversed_markdown
    point = (0.5, "open", 750.0, "fixed", None, 16.0, 0.6)
    assert len(point) == len(GROUP_KEYS)
    rows = [{"group": point, "gomaxprocs": g, "p99_lab": v, "p99_model": m}
            for g, vs, m in ((1, (0.003, 0.004), 0.006), (2, (0.010, 0.020), 0.005)) for v in vs]
    order = p99_order(rows)
    lines = _reversed_markdown({"open-latency": {"p99_order_predicted": order}})
    assert lines[-1] == ("| open-latency | cpu_limit 0.5, kind open, rate_per_s 750, arrivals fixed, live_heap_mb 16, "
                         "load_fraction 0.6 | 1 / 2 | 3-4 / 10-20 | 6 / 5 |")
    # kept everywhere: no section
    rows = [{**r, "p99_model": 0.001 * r["gomaxprocs"]} for r in rows]
    assert _reversed_markdown({"open-latency": {"p99_order_predicted": p99_order(rows)}}) == []


def test_sysmon_batched_polls_match_poll_by_poll():
    # Sysmon.advance counts the 20 us polls in one step; a plain loop over every poll of
    # proc.go's sysmon (usleep(delay); idle++; doubling after 50, up to 10 ms; deep sleep when
    # every P is idle; a syscall wakes it with idle = 0) must give the same counts
    import random

    from cfsim.goruntime.sched import Sysmon

    def reference(events):
        deep, nxt, idle, d, out = True, 0, 0, 20, []
        for t, kind in events:
            n = 0
            if not deep:
                while nxt <= t:
                    n += 1
                    if kind == "busy":       # the spell before a 'busy' event was idle
                        deep = True
                        break
                    idle += 1
                    if idle > 50:
                        d = min(10_000, d * 2)
                    nxt += d * 1000 + 50_000
            out.append(n)
            if kind == "busy" and deep:
                deep, idle, d, nxt = False, 0, 20, t + 70_000
        return out

    rng = random.Random(1)
    t, events = 0, []
    for i in range(3000):
        t += rng.choice([10_000, 100_000, 1_000_000, 30_000_000, 2_000_000_000])
        events.append((t, "busy" if i % 2 == 0 else "idle"))
    sm, got = Sysmon(), []
    for t, kind in events:
        got.append(sm.advance(t, busy=(kind == "idle")))
        if kind == "busy" and sm.deep:
            sm.wake(t)
    assert got == reference(events) and sum(got) > 3000


def test_a_sysmon_turn_lasts_its_sleep_and_its_own_poll():
    # proc.go's sysmon sleeps again only after the poll has run: a turn is the usleep (20 us plus
    # the 50 us slack), the wait for a CPU and the poll's CPU, as a thread's schedstat splits it
    from cfsim.goruntime.sched import Sysmon

    for run_ns in (0, 15_000, 60_000):
        sm = Sysmon(slack_ns=50_000, run_ns=run_ns)
        sm.wake(0)
        turn = 70_000 + run_ns
        assert sm.advance(2_000_000, busy=True) == 2_000_000 // turn
    # and the runtime gives it its poll's price: a 2 ms busy spell 100 times a second polls about
    # 2 ms / (70 us + poll) times, so a dearer poll means fewer polls (the same count before)
    def sleeps_a_request(poll_us):
        sc = load_scenario({"host": {"cpus": 2}, "go": {"gomaxprocs": 1, "sysmon_poll_us": poll_us},
                            "workload": {"kind": "open", "arrivals": "fixed", "rate_per_s": 100.0,
                                         "cpu_ms_per_request": 2.0},
                            "run": {"duration_s": 3.0, "warmup_s": 0.5, "seed": 1}})
        s = simulate(sc).summary
        return s["sysmon_sleeps_per_s"] / s["throughput_per_s"]
    cheap, dear = sleeps_a_request(5.0), sleeps_a_request(40.0)
    assert 2.0 / 0.075 < cheap < 2.6 / 0.075 + 1
    assert 2.0 / 0.110 < dear < 2.6 / 0.110 + 1
    assert dear / cheap < 0.8


def test_a_host_given_by_its_cpu_count_is_read_as_smt_centrally_and_spanned_by_the_band():
    class R:
        def __init__(self, s):
            self.summary = s

    def seen_by(name, corner):
        seen = []

        def fake(sc):
            seen.append(sc["host.threads_per_core"])
            return R({"throughput_per_s": 1.0, "cpu_usage_cores": 1.0, "latency_p50_s": 1.0,
                      "sched_cpu_fraction": 0.1})
        public.model_ratio(public.by_name(name), {"host.smt_slowdown": 0.8}, corner, 1.0, simulate_fn=fake)
        return seen
    # the source gives 32 CPUs without saying: two threads a core centrally, one or two in the band
    assert public.by_name("blog.esc.sh").central == public.LOGICAL_CPUS
    assert seen_by("blog.esc.sh", None) == [2, 2]
    assert seen_by("blog.esc.sh", 0) == [1, 1] and seen_by("blog.esc.sh", 1) == [2, 2]
    # "no HT" is a fact of the source: the band's corners leave it alone
    assert seen_by("golang/go#18237", 0) == [1] and seen_by("golang/go#18237", 1) == [1]
    # a named processor's threads likewise (two E5-2660 v4: 28 cores x 2)
    assert seen_by("golang/go#28808", 0) == [2, 2] == seen_by("golang/go#28808", 1)
