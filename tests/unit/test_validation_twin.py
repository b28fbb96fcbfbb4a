"""The twin is a prediction: what it is given, for every committed lab run and on synthetic runs.

The twin of a lab run may read its scenario, calibrated parameters, the machine facts the lab
recorded and independent measurements of other processes; never the run's measured outputs
(``summary.json``) nor the host's busy CPU during the run. Two checks on every committed run:
every input the twin got names an allowed source, and poisoning every measured output (in a copy)
changes nothing in the twin's scenario.
"""
import json
import shutil
from pathlib import Path

import pytest

from cfsim.io.manifest import read_manifest, write_manifest
from cfsim.scenario import load_scenario
from cfsim.validation.twin import (Neighbour, find_runs, neighbour_background_cores, recorded_hz,
                                   tenant_neighbours, tenant_tasks, twin_spec)

LAB = Path(__file__).resolve().parents[2] / "data" / "lab"

#: what a twin input may come from (a prefix of TwinInput.source); model: is how the twin runs
#: the model (one goroutine per chunk), nothing about the run; lab:latency-bucket-layout is the lab
#: binary's histogram layout, the instrument the run's quantiles were read with (named by its
#: bucket bounds, whatever their counts); manifest:live_heap_nodes is what the workload reported
#: building at its start-up, before its load
ALLOWED_SOURCES = ("params", "manifest:host.hz", "manifest:host.affinity_cpus", "manifest:host.host_cpus",
                   "evidence:host.hz", "neighbours:", "model:reference-path", "lab:latency-bucket-layout",
                   "manifest:live_heap_nodes",
                   "manifest:processes.prometheus.targets.workload,scenario:lab.scrape_interval_s")
#: what a neighbours: source may list
ALLOWED_NEIGHBOUR_FIELDS = ("manifest:host_cpu.pre_run.harness_cores", "lab:loadgen-cost",
                            "manifest:host_cpu.pre_run.tenants_cores", "manifest:host_cpu.weights.",
                            "manifest:cgroup.cpu_shares", "manifest:cgroup.harness_shares", "scenario:lab.",
                            "default:cpu.shares", "manifest:host_cpu.pre_run.runnable_others_mean")
#: measured outputs of a run: poisoned in the copy, must not move the twin
MEASURED_HOST_CPU = ("host_busy_cores", "others_cores", "workload_cores", "tenants_cores", "harness_cores")


def _committed_runs():
    if not LAB.is_dir():
        return []
    return find_runs(LAB)


RUNS = _committed_runs()


def _check_source(source: str) -> None:
    assert source.startswith(ALLOWED_SOURCES), f"twin input from a source not allowed: {source}"
    if source.startswith("neighbours:"):
        for part in source.removeprefix("neighbours:").split(","):
            assert part.startswith(ALLOWED_NEIGHBOUR_FIELDS), f"neighbour input not allowed: {part}"
    for word in ("summary", "others_cores", "workload_cores", "host_busy_cores", "observed", "counters",
                 "window_samples"):
        assert word not in source, f"twin input names a measured output: {source}"


@pytest.mark.skipif(not RUNS, reason="data/lab is not in this checkout")
def test_every_committed_run_twin_takes_only_allowed_inputs():
    assert len(RUNS) >= 150
    n_modelled = 0
    for run in RUNS:
        spec = twin_spec(run)
        for inp in spec.inputs:
            _check_source(inp.source)
        manifest = read_manifest(run)
        host_cpu = manifest.get("host_cpu") or {}
        if "harness_cores" in host_cpu or "pre_run" in host_cpu:
            # the lab measured the neighbours apart from the workload: contention is modelled from that
            assert spec.contention == "modelled", run
            n_modelled += 1
        else:
            # the first grids recorded no independent neighbour measurement: no contention input at all
            assert spec.contention == "unknown" and spec.scenario["host.background_cores"] == 0.0, run
        scraped = "workload" in (manifest.get("processes") or {}) \
            .get("prometheus", {}).get("targets", {})
        if scraped and spec.scenario["workload.kind"] != "threads":
            assert spec.scenario["workload.scrape_interval_s"] == spec.scenario["lab.scrape_interval_s"], run
        # the tick rate is recorded for this kernel (21 manifests state hz = 250)
        assert spec.hz in ("recorded", "evidence") and spec.scenario["host.hz"] == 250, run
        assert spec.scenario["cgroup.limit_schedule"] == load_scenario(run / "scenario.toml")["cgroup.limit_schedule"]
    assert n_modelled >= 100  # the GC/memory, overprovisioned and profile grids


def _poison(value):
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return value * 7.3 + 11
    if isinstance(value, list):
        return [_poison(v) for v in value]
    if isinstance(value, dict):
        return {k: _poison(v) for k, v in value.items()}
    return value


@pytest.fixture(scope="module")
def poisoned_lab(tmp_path_factory):
    """A copy of data/lab (manifests, scenarios, summaries) with every measured output poisoned."""
    root = tmp_path_factory.mktemp("poisoned") / "lab"
    for run in RUNS:
        dst = root / run.relative_to(LAB)
        dst.mkdir(parents=True)
        shutil.copy(run / "scenario.toml", dst / "scenario.toml")
        summary = json.loads((run / "summary.json").read_text())
        (dst / "summary.json").write_text(json.dumps(_poison(summary)))
        man = read_manifest(run)
        host_cpu = man.get("host_cpu") or {}
        for key in MEASURED_HOST_CPU:
            host_cpu[key] = _poison(host_cpu.get(key, 1.0))
        man["host_cpu"] = host_cpu
        # (not calibration_rounds_per_cpu_ms: the workload's start-up calibration, before the window,
        # sets how many loop rounds an item is; validation scales the per-item CPU by it through
        # params, cfsim.validation.normalise.rounds_ratio)
        for key in ("cgroup_counters", "window_samples", "loadavg"):
            if key in man:
                man[key] = _poison(man[key])
        if isinstance(man.get("gomaxprocs"), dict):
            man["gomaxprocs"]["observed"] = {"final": 97, "values": [97], "changes_t_s": [[0.0, 97]]}
            man["gomaxprocs"]["at_ready"] = 97
        write_manifest(dst, man)
    shutil.copy(LAB / "manifest.json", root / "manifest.json")
    return root


@pytest.mark.skipif(not RUNS, reason="data/lab is not in this checkout")
def test_poisoned_measurements_change_no_twin(poisoned_lab):
    for run in RUNS:
        copy = poisoned_lab / run.relative_to(LAB)
        a, b = twin_spec(run), twin_spec(copy)
        assert a.scenario.flat() == b.scenario.flat(), f"{run}: the twin depends on a measured output"


# ------------------------------------------------------------------ synthetic runs (tmp)

SCENARIO = """
[host]
cpus = 2
[cgroup]
cpu_limit = 2.0
[go]
gomaxprocs = 2
[workload]
kind = "stream"
rate_per_s = 1000
cpu_ms_per_item = 1.0
[run]
duration_s = 3
warmup_s = 1
[lab]
cpu_shares = 8192
harness_shares = 8192
"""

HOST = {"hostname": "box", "kernel": "6.1.0-test", "kernel_version": "#1 SMP", "host_cpus": 2, "affinity_cpus": 2}


def _run(root: Path, name: str, manifest: dict, scenario: str = SCENARIO) -> Path:
    d = root / "grid" / name
    d.mkdir(parents=True)
    (d / "scenario.toml").write_text(scenario)
    (d / "summary.json").write_text(json.dumps({"cpu_usage_cores": 1.0, "throughput_per_s": 900.0}))
    (d / "manifest.json").write_text(json.dumps(manifest))
    return d


def test_hz_from_the_manifest_then_recorded_evidence_else_unknown(tmp_path):
    a = _run(tmp_path, "a", {"host": {**HOST, "hz": 300}})
    b = _run(tmp_path, "b", {"host": dict(HOST)})                                  # same kernel, no hz
    c = _run(tmp_path, "c", {"host": {**HOST, "kernel": "6.2.0-other"}})          # no evidence
    assert recorded_hz(a) == (300, "manifest:host.hz")
    hz, src = recorded_hz(b)
    assert hz == 300 and src.startswith("evidence:") and "a/manifest.json" in src
    assert recorded_hz(c) == (None, "unknown")
    sc = twin_spec(c)
    assert sc.hz == "unknown" and sc.scenario["host.hz"] == 1000  # the scenario's own value, flagged
    assert any("unknown" in n for n in sc.notes)
    assert twin_spec(b).scenario["host.hz"] == 300


def test_hz_evidence_stays_in_the_runs_own_tree(tmp_path):
    """A run copied into a folder of its own takes evidence from its siblings only, not from
    whatever else lies beside that folder (a run at /tmp/x/run searched all of /tmp); in a lab
    tree (an index manifest above the grids) every grid's runs are evidence."""
    _run(tmp_path / "other", "a", {"host": {**HOST, "hz": 300}})      # another tree beside it
    alone = _run(tmp_path, "b", {"host": dict(HOST)})                   # tmp/grid/b: tmp is not its tree
    assert recorded_hz(alone) == (None, "unknown")
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "manifest.json").write_text(json.dumps({"grids": {}}))
    _run(tmp_path / "lab", "a", {"host": {**HOST, "hz": 300}}).parent.rename(tmp_path / "lab" / "g1")
    in_lab = _run(tmp_path / "lab", "b", {"host": dict(HOST)})      # lab/grid/b: another grid
    hz, src = recorded_hz(in_lab)
    assert hz == 300 and "g1/a/manifest.json" in src


def test_conflicting_evidence_leaves_hz_unknown(tmp_path):
    _run(tmp_path, "a", {"host": {**HOST, "hz": 300}})
    _run(tmp_path, "b", {"host": {**HOST, "hz": 1000}})
    c = _run(tmp_path, "c", {"host": dict(HOST)})
    assert recorded_hz(c) == (None, "unknown")


def test_old_manifest_contention_unknown_no_background(tmp_path):
    run = _run(tmp_path, "old", {"host": {**HOST, "hz": 250},
                                 "host_cpu": {"host_busy_cores": 2.0, "others_cores": 1.2, "workload_cores": 0.8}})
    spec = twin_spec(run)
    assert spec.contention == "unknown"
    assert spec.scenario["host.background_cores"] == 0.0


def test_pre_run_neighbours_become_background_by_cfs_weight(tmp_path):
    man = {"host": {**HOST, "hz": 250},
           "cgroup": {"cpu_shares": 8192, "harness_shares": 8192},
           "host_cpu": {"host_busy_cores": 2.0, "others_cores": 1.9, "workload_cores": 0.1, "tenants_cores": 1.8,
                        "harness_cores": 0.1,
                        "pre_run": {"window_s": 3.0, "host_busy_cores": 1.1, "harness_cores": 0.05,
                                    "tenants_cores": 1.0},
                        "weights": {"workload_shares": 8192, "harness_shares": 8192, "tenant_shares": 1024}}}
    run = _run(tmp_path, "new", man)
    spec = twin_spec(run)
    assert spec.contention == "modelled"
    # reach min(demand 1.0, 2, 2, 2) = 1 core: 1 CPU free; neighbours 1.05 cores before the run
    # (tenants 1.0, harness 0.05): 0.05 competes, split 1.0 / 0.05 between tenants and harness
    # (8192, against the workload's 8192); the tenants' 1.0 core is at least one task (no count
    # recorded), 1024 on its CPU against the workload group's 8192 spread over its 2
    want = 0.05 * (1.0 / 1.05) * 1024 / (1024 + 4096) + 0.05 * (0.05 / 1.05) * 0.5
    assert spec.scenario["host.background_cores"] == pytest.approx(want, abs=1e-4)
    (bg,) = [i for i in spec.inputs if i.key == "host.background_cores"]
    _check_source(bg.source)
    # the during-run tenants, harness and busy CPU are not inputs: changing them changes nothing
    man["host_cpu"].update({"tenants_cores": 0.0, "others_cores": 0.0, "host_busy_cores": 0.5,
                            "harness_cores": 0.9})
    run2 = _run(tmp_path, "new2", man)
    assert twin_spec(run2).scenario["host.background_cores"] == spec.scenario["host.background_cores"]
    # a heavier pre-run tenant slows the workload more
    man["host_cpu"]["pre_run"]["tenants_cores"] = 2.0
    run3 = _run(tmp_path, "new3", man)
    assert twin_spec(run3).scenario["host.background_cores"] > spec.scenario["host.background_cores"]


def test_background_rule_by_weight():
    # saturating workload (reach = all CPUs): a neighbour of demand d at weight w_n takes d w_n / (w_n + w_g)
    assert neighbour_background_cores(2, 1024, 2.0, [(1.0, 1024)]) == pytest.approx(0.5)
    assert neighbour_background_cores(2, 8192, 2.0, [(1.0, 1024)]) == pytest.approx(1024 / 9216, abs=1e-4)
    # neighbours that fit on CPUs the workload leaves idle take nothing from it
    assert neighbour_background_cores(4, 1024, 1.0, [(2.0, 1024)]) == 0.0
    # never (almost) the whole host
    assert neighbour_background_cores(2, 2, 2.0, [(10.0, 100000)]) <= 1.8


def test_counted_tenants_compete_cpu_by_cpu():
    # eight busy root tasks (8 x 1024, a core each) against a group of 8192 on two CPUs: at
    # GOMAXPROCS 2 the group keeps half of each CPU, at GOMAXPROCS 1 two thirds of its one CPU
    eight = [Neighbour(1.97, 8 * 1024, 8)]
    assert neighbour_background_cores(2, 8192, 1.1, eight, workload_cpus=2) == pytest.approx(1.0)
    assert neighbour_background_cores(2, 8192, 1.0, eight, workload_cpus=1) == pytest.approx(2 / 3, abs=1e-4)
    # uncounted, the same cores are one light neighbour that mostly fills the CPU left idle
    assert neighbour_background_cores(2, 8192, 1.1, [(1.97, 1024)], workload_cpus=2) < 0.15
    # the same eight loops in a cgroup of 1024: an eighth of the group's weight spread over two CPUs
    cg = [Neighbour(1.97, 1024, 8)]
    assert neighbour_background_cores(2, 8192, 1.0, cg, workload_cpus=1) == pytest.approx(2 * 512 / 8704, abs=1e-4)
    # a counted neighbour that fits on the idle CPU takes nothing
    assert neighbour_background_cores(2, 8192, 0.5, [Neighbour(1.0, 1024, 1)], workload_cpus=1) == 0.0
    # uncounted neighbours keep the rule they always had (2-tuples and Neighbour alike)
    assert neighbour_background_cores(2, 8192, 2.0, [Neighbour(1.0, 1024)], workload_cpus=1) == \
        neighbour_background_cores(2, 8192, 2.0, [(1.0, 1024)])


def test_tenant_task_count_from_the_pre_run_window_only():
    pre = {"tenants_cores": 1.5, "runnable_others_mean": 4.2}
    assert tenant_tasks({"host_cpu": {"pre_run": pre}}) == (4.2, "manifest:host_cpu.pre_run.runnable_others_mean")
    # never fewer tasks than the cores they used
    assert tenant_tasks({"host_cpu": {"pre_run": {**pre, "runnable_others_mean": 0.3}}})[0] == 1.5
    # an older run's load average is no count: its tenants ran on at least as many tasks as the
    # cores they used, each at a task's weight (1.98 cores of them took 0.5-0.9 cores from
    # open-latency's server, where one light neighbour would take 0.2-0.3)
    assert tenant_tasks({"host_cpu": {"pre_run": {"tenants_cores": 1.5}}, "loadavg": {"start": [9.0, 9, 9]}}) == \
        (1.5, "manifest:host_cpu.pre_run.tenants_cores")
    assert tenant_tasks({"host_cpu": {"pre_run": {"tenants_cores": 0.0}}}) is None
    assert tenant_tasks({}) is None


def test_tenants_weigh_by_cgroup_or_by_task():
    # the lab's tenant in a cgroup of its own: one weight of 1024 however many loops it runs
    assert tenant_neighbours({"tenant": {"threads": 8, "cgroup": "own"}}, 1.9, 8.0, 1024) == [(1.9, 1024, 8)]
    # in the root cgroup, or a host's cgroup-less processes: 1024 a runnable task
    assert tenant_neighbours({"tenant": {"threads": 8, "cgroup": "root"}}, 1.9, 8.0, 1024) == [(1.9, 8192, 8)]
    assert tenant_neighbours({}, 1.9, 6.0, 1024) == [(1.9, 6144.0, 6.0)]
    # the lab's one loop beside two other busy tasks
    assert tenant_neighbours({"tenant": {"threads": 1, "cgroup": "own"}}, 2.0, 3.0, 1024) == \
        [(1.0, 1024, 1), (1.0, 2048.0, 2.0)]
    # no count: one neighbour at the group's weight, as before
    assert tenant_neighbours({}, 1.9, None, 1024) == [(1.9, 1024, None)]


def test_busy_tenants_weigh_by_their_task_count(tmp_path):
    man = {"host": {**HOST, "hz": 250}, "cgroup": {"cpu_shares": 8192, "harness_shares": 8192},
           "host_cpu": {"pre_run": {"window_s": 3.0, "host_busy_cores": 2.0, "harness_cores": 0.0,
                                    "tenants_cores": 2.0, "runnable_others_mean": 1.0},
                        "weights": {"workload_shares": 8192, "harness_shares": 8192, "tenant_shares": 1024}}}
    few = twin_spec(_run(tmp_path, "few", man)).scenario["host.background_cores"]
    man["host_cpu"]["pre_run"]["runnable_others_mean"] = 8.0
    spec = twin_spec(_run(tmp_path, "many", man))
    assert spec.scenario["host.background_cores"] > 2 * few
    (bg,) = [i for i in spec.inputs if i.key == "host.background_cores"]
    assert "runnable_others_mean" in bg.source
    _check_source(bg.source)
    # uncounted (recorded before the lab counted): as many tasks as the tenants' cores, as a count
    # below them gives (few: 1.0 counted, 2.0 cores), not the one light neighbour they were before
    # (1024 against the group's 8192 on the core the workload leaves them to compete for: 0.111)
    del man["host_cpu"]["pre_run"]["runnable_others_mean"]
    spec = twin_spec(_run(tmp_path, "uncounted", man))
    (bg,) = [i for i in spec.inputs if i.key == "host.background_cores"]
    assert spec.scenario["host.background_cores"] == pytest.approx(few)
    assert few > 1.5 * round(1024 / 9216, 4)
    assert bg.source.count("tenants_cores") == 1
    _check_source(bg.source)


def test_params_win_over_recorded_facts(tmp_path):
    run = _run(tmp_path, "p", {"host": {**HOST, "hz": 250}})
    spec = twin_spec(run, {"host.hz": 1000, "workload.cpu_ms_per_item": 1.2})
    assert spec.scenario["host.hz"] == 1000 and spec.scenario["workload.cpu_ms_per_item"] == 1.2
    assert [i.source for i in spec.inputs] == ["params", "params"]


def test_vpa_in_the_loop_twin_runs_its_own_vpa_and_replays_nothing(tmp_path):
    sc = SCENARIO.replace("cpu_limit = 2.0", "cpu_limit = 0.5").replace("gomaxprocs = 2", 'gomaxprocs = "automaxprocs"')
    sc = sc.replace("duration_s = 3", "duration_s = 20").replace("rate_per_s = 1000", "rate_per_s = 1500")
    sc += """vpa_in_the_loop = true
[vpa]
enabled = true
initial_request_cores = 0.5
limit_to_request_ratio = 1.0
update_mode = "InPlaceOrRecreate"
half_life_s = 360.0
confidence_interval_s = 360.0
sample_interval_s = 0.25
updater_interval_s = 0.25
metrics_window_s = 1.0
eviction_lifetime_s = 180.0
min_replicas = 1
replicas = 1
step_s = 0.25
"""
    recorded = [{"t_s": 1.0, "applied_t_s": 1.0, "cpu_limit_cores": 1.9, "vpa_action": "resize"}]
    run = _run(tmp_path, "hil", {"host": {**HOST, "hz": 250}, "cgroup": {"quota_changes": recorded}}, sc)
    spec = twin_spec(run)
    assert spec.vpa_in_the_loop and spec.scenario["cgroup.limit_schedule"] is None
    from cfsim.simulation import simulate
    res = simulate(spec.scenario)
    # its own VPA raised the limit from 0.5 (the demand is 1.5 cores), not to the recorded 1.9 at 1 s
    assert res.quota_changes and all(c["vpa_action"] == "resize" for c in res.quota_changes)
    assert res.quota_changes[0]["t_s"] > 1.0
    limits = [c["cpu_limit_cores"] for c in res.quota_changes]
    assert limits == sorted(limits) and limits[0] > 0.5 and 1.9 not in limits
    assert res.summary["vpa_resizes"] == len(res.quota_changes)


def test_a_twin_runs_todays_model_priors_not_the_ones_its_run_file_recorded(tmp_path):
    from cfsim.scenario.schema import SCHEMA
    from cfsim.validation.twin import MODEL_PRIOR_KEYS, run_scenario

    # a run collected when the scheduler priors were 0.3 us per P and 2 us a wake-up: the lab
    # never read them (they configure the model, not the real process)
    stale = SCENARIO.replace("[go]\n", "[go]\nsched_spin_per_p_us = 0.3\nsched_wake_us = 2.0\n", 1)
    assert stale != SCENARIO
    run = _run(tmp_path, "old", {"host": {**HOST, "hz": 250}}, stale)
    today = SCHEMA["go"]["sched_spin_per_p_us"].default, SCHEMA["go"]["sched_wake_us"].default
    spec = twin_spec(run)
    assert (spec.scenario["go.sched_spin_per_p_us"], spec.scenario["go.sched_wake_us"]) == today
    assert (run_scenario(run)["go.sched_spin_per_p_us"], run_scenario(run)["go.sched_wake_us"]) == today
    assert any("go.sched_spin_per_p_us 0.3 -> " in n for n in spec.notes)
    # what the lab did run stays the run's (GOMAXPROCS, the limit, the workload)
    recorded = load_scenario(run / "scenario.toml")
    for key in ("go.gomaxprocs", "cgroup.cpu_limit", "workload.kind", "go.live_heap_mb"):
        assert key not in MODEL_PRIOR_KEYS and spec.scenario[key] == recorded[key]
    # calibrated parameters still win
    assert twin_spec(run, {"go.sched_wake_us": 4.0}).scenario["go.sched_wake_us"] == 4.0
    # every prior is a model key the lab's launch never reads
    import inspect

    from cfsim.lab import launch
    src = inspect.getsource(launch)
    for key in MODEL_PRIOR_KEYS:
        section, name = key.split(".")
        assert name in SCHEMA[section] and f'"{name}"' not in src and f"'{name}'" not in src, key


def test_twin_reads_its_latency_quantiles_through_the_labs_buckets(tmp_path):
    """A run that exported some buckets of the lab's 6-per-doubling layout gets the whole layout
    (the manifest keeps only the buckets its window's quantiles reach), and its twin's p99 is the
    histogram's: on a stream whose lag grows through the window the interpolation in the last,
    wide bucket reports more than the exact p99, as the lab's summary does."""
    from cfsim.lab.buckets import LAYOUTS
    from cfsim.simulation import simulate

    layout = LAYOUTS["6-per-doubling"]
    kept = {f'cfsim_item_latency_seconds_bucket{{le="{b}"}}': 1.0 for b in layout[40:44]}
    kept['cfsim_item_latency_seconds_bucket{le="+Inf"}'] = 1.0
    over = SCENARIO.replace("rate_per_s = 1000", "rate_per_s = 3000")  # 3 cores of demand on 2
    run = _run(tmp_path, "p000", {"host": HOST, "window_samples": {"workload": {"start": {}, "end": kept}}}, over)
    spec = twin_spec(run)
    assert spec.scenario["run.latency_buckets_s"] == layout
    assert [i.source for i in spec.inputs if i.key == "run.latency_buckets_s"] == ["lab:latency-bucket-layout"]
    bucketed = simulate(spec.scenario).summary
    exact = simulate(spec.scenario.with_overrides([("run.latency_buckets_s", None)])).summary
    assert bucketed["latency_mean_s"] == exact["latency_mean_s"]
    assert exact["latency_p99_s"] < bucketed["latency_p99_s"] < exact["latency_p99_s"] * 2 ** (1 / 6)
    # a run without latency buckets (or in no known layout) keeps exact quantiles
    bare = _run(tmp_path, "p001", {"host": HOST}, over)
    assert twin_spec(bare).scenario["run.latency_buckets_s"] is None


def test_observed_limiter_turn_on_comes_from_the_runtimes_reads_at_the_window_ends(tmp_path):
    """`gc_limiter_turned_on` of a lab run: 1 when /gc/limiter/last-enabled changed during the window
    to a cycle after the one counted at its start, 0 when it kept a turn-on from before the window,
    absent without the reads (and for a run the OOM killer ended)."""
    from cfsim.validation.twin import observed_summary

    def reads(c0, l0, c1, l1):
        return {"host": HOST, "window_samples": {"workload": {
            "start": {"go_gc_cycles_total_gc_cycles_total": c0, "go_gc_limiter_last_enabled_gc_cycle": l0},
            "end": {"go_gc_cycles_total_gc_cycles_total": c1, "go_gc_limiter_last_enabled_gc_cycle": l1}}}}

    assert observed_summary(_run(tmp_path, "on", reads(406, 407, 1665, 1665)))["gc_limiter_turned_on"] == 1
    assert observed_summary(_run(tmp_path, "before", reads(406, 407, 1665, 407)))["gc_limiter_turned_on"] == 0
    assert observed_summary(_run(tmp_path, "never", reads(40, 0, 90, 0)))["gc_limiter_turned_on"] == 0
    assert "gc_limiter_turned_on" not in observed_summary(_run(tmp_path, "bare", {"host": HOST}))
