"""`cfsim audit` on exports of known configurations: simulated exports (always) and real lab runs
from data/lab (skipped, with the reason, while the runs are absent)."""
from pathlib import Path

import pytest

from cfsim import simulate
from cfsim.advice.audit import audit, load_containers, write_report
from cfsim.advice.exports import write_simulated_exports
from cfsim.cli import main

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = str(ROOT / "data/lab/scenarios/cpu-stream.toml")      # demand 1.6 cores, 2-CPU node
SHORT = ["run.duration_s=10", "run.warmup_s=1"]
KNOWN = {
    ("shop", "trapped-0", "app"): ["cgroup.cpu_limit=1.5", "go.gomaxprocs=1"],
    ("shop", "throttled-0", "app"): ["cgroup.cpu_limit=0.5", "go.gomaxprocs=8"],
    ("shop", "healthy-0", "app"): ["cgroup.cpu_limit=2.0", "go.gomaxprocs=2"],
}
EXPECTED = {"trapped-0": {"trapped"}, "throttled-0": {"throttled", "gomaxprocs_above_limit"}, "healthy-0": set()}


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    folder = tmp_path_factory.mktemp("exports")
    results = {k: simulate(SCENARIO, SHORT + v) for k, v in KNOWN.items()}
    write_simulated_exports(results, folder)
    return folder


@pytest.fixture(scope="module")
def result(exports):
    return audit(exports, duration_s=6.0)


def _flags(result):
    return {name.split("/")[1]: set(flags) for name, flags in result.flags_by_container().items()}


def test_flags_on_simulated_exports(result):
    assert _flags(result) == EXPECTED
    throttled = [f for f in result.findings if f.flag == "throttled"][0]
    assert "at its limit" in throttled.detail


def test_evidence_fix_and_effect(result):
    by = {(f.container.key[1], f.flag): f for f in result.findings}
    trap = by[("trapped-0", "trapped")]
    assert "GOMAXPROCS 1" in trap.evidence and "limit 1.5 cores" in trap.evidence
    assert trap.fix_overrides == [("go.gomaxprocs", 2)]
    assert trap.after["throughput_per_s"] > 1.3 * trap.before["throughput_per_s"]   # 1 core -> 1.5
    over = by[("throttled-0", "gomaxprocs_above_limit")]
    assert over.fix_overrides == [("go.gomaxprocs", 1)]
    raise_ = by[("throttled-0", "throttled")]
    assert raise_.fix.startswith("raise the limit")
    assert raise_.after["throttled_ratio"] <= 0.1
    # performance findings rank above headroom, and by simulated impact
    impacts = [f.impact for f in result.findings if f.flag != "headroom"]
    assert impacts == sorted(impacts, reverse=True)


def test_report_files(result, tmp_path):
    paths = write_report(result, tmp_path / "audit")
    csv = paths["csv"].read_text()
    assert csv.splitlines()[0].startswith("rank,namespace,pod,container,flag")
    assert len(csv.splitlines()) == 1 + len(result.findings)
    assert "| rank |" in paths["md"].read_text() and "No findings: shop/healthy-0/app" in paths["md"].read_text()
    html = paths["html"].read_text()
    assert html.count("data:image/png;base64,") == 3 and "No findings." in html


def test_without_gomaxprocs_metric_assumes_automaxprocs(tmp_path):
    k = ("shop", "trapped-1", "app")
    write_simulated_exports({k: simulate(SCENARIO, SHORT + ["cgroup.cpu_limit=1.75", "go.gomaxprocs=automaxprocs"])},
                            tmp_path, gomaxprocs=False)
    res = audit(tmp_path, simulate=False)
    (f,) = res.findings
    assert f.flag == "trapped" and "assumed floor(limit) = automaxprocs" in f.evidence


def test_cli(exports, tmp_path, capsys):
    rc = main(["audit", str(exports), "--report", str(tmp_path / "a"), "--no-simulate"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "3 containers, 3 findings" in out and "no findings: shop/healthy-0/app" in out
    assert (tmp_path / "a.html").is_file()


# ---------------------------------------------------------------------------------------------
# real lab runs


def _lab_runs():
    from cfsim.validation.twin import find_runs, is_calibration_run, observed_summary, run_scenario

    lab = ROOT / "data/lab"
    try:
        runs = find_runs(lab) if lab.is_dir() else []
    except FileNotFoundError:
        return []
    out = []
    for r in runs:
        if is_calibration_run(r):
            continue
        sc = run_scenario(r)
        if sc["cgroup.limit_schedule"]:
            continue
        if sc["workload.kind"] == "stream":
            demand = sc["workload.rate_per_s"] * sc["workload.cpu_ms_per_item"] / 1000
        elif sc["workload.kind"] == "closed" and sc["workload.think_ms"] == 0:
            demand = float("inf")   # closed loop without think time: uses whatever it gets
        else:
            continue
        out.append((r, sc, demand, observed_summary(r)))
    return out


PICKS = {
    # explicit GOMAXPROCS 1 under a non-integer limit in (1, 2) with demand above 1.2 cores
    "trapped": lambda L, g, d: g == 1 and L is not None and 1 < L < 2 and L != int(L) and 1.2 < d < 10,
    # many Ps on a small quota: GOMAXPROCS 8 or 16 at 0.5 cores (or 6/8 at 0.1, the menu grid)
    "throttled": lambda L, g, d: isinstance(g, int) and ((g in (8, 16) and L == 0.5) or (g >= 6 and L == 0.1))
    and d > 2 * L,
    # limit at least 0.3 cores above the nominal demand, GOMAXPROCS = the (integer) limit
    "healthy": lambda L, g, d: L is not None and L == int(L) and g == int(L) and L >= d + 0.3,
}


def _healthy_in_fact(obs):
    """The lab run kept up with its load unthrottled (GC can push a nominally healthy run over)."""
    arr, thr = obs.get("arrival_rate_per_s"), obs.get("throughput_per_s")
    return (obs.get("throttled_ratio") or 0.0) < 0.05 and (not arr or (thr or 0.0) >= 0.97 * arr)


EXPECT = {"trapped": (lambda f: "trapped" in f and "throttled" not in f),
          "throttled": (lambda f: {"throttled", "gomaxprocs_above_limit"} <= f),
          "healthy": (lambda f: f == set())}


@pytest.mark.parametrize("kind", list(PICKS))
def test_flags_on_real_lab_runs(kind):
    runs = [r for r, sc, d, obs in _lab_runs() if PICKS[kind](sc["cgroup.cpu_limit"], sc["go.gomaxprocs"], d)
            and (kind != "healthy" or _healthy_in_fact(obs))]
    if not runs:
        pytest.skip(f"data/lab has no {kind} run yet (collect with `bash data/lab/collect.sh`: the "
                    f"cpu-stream / alloc-stream / closed-menu grids)")
    for run in runs[:3]:
        (c,) = load_containers(run)
        res = audit(containers=[c], simulate=False)
        flags = set(res.flags_by_container()[c.name])
        assert EXPECT[kind](flags), (str(run), flags, [f.evidence for f in res.findings])


def test_same_answer_on_any_number_of_workers_with_and_without_reuse(exports, tmp_path):
    """1 process without any reuse, 2 workers sharing an on-disk cache, and a second audit that
    simulates nothing (all reused from the disk): the same findings, fixes, effects and report."""
    import json

    from cfsim.advice.audit import summary_json
    from cfsim.sweep import LocalExecutor

    runs = [audit(exports, duration_s=6.0, workers=0, cache_dir=False)]
    with LocalExecutor(2) as ex:
        runs += [audit(exports, duration_s=6.0, executor=ex, cache_dir=tmp_path / "cache") for _ in range(2)]
    texts = []
    for i, r in enumerate(runs):
        paths = write_report(r, tmp_path / f"r{i}" / "audit")
        texts.append((json.dumps(summary_json(r), sort_keys=True, default=str),
                      paths["csv"].read_text(), paths["md"].read_text()))
    assert texts[0] == texts[1] == texts[2]
    assert runs[1].sim_stats["workers"] == 2 and runs[1].sim_stats["simulated"] > 0
    assert runs[2].sim_stats["simulated"] == 0 and runs[2].sim_stats["reused"] > 0


@pytest.mark.parametrize("direction, limit, demand", [("raise", 1.0, 0.3), ("lower", 0.5, 1.6)])
def test_a_limit_fix_stays_on_its_side_of_todays_limit(direction, limit, demand):
    """A raise never answers below today's limit, a cut never above it, however the simulations of
    the other side would fare: a light stream "throttled" at 1 core would meet the SLO far lower,
    a heavy one with "headroom" at 0.5 core only higher."""
    from cfsim.advice.audit.fixes import _cheapest_limit
    from cfsim.advice.slo import SLO
    from cfsim.scenario import load_scenario

    sc = load_scenario(SCENARIO, ["run.duration_s=2", "run.warmup_s=0.5", f"cgroup.cpu_limit={limit}",
                                  "go.gomaxprocs=2", f"workload.rate_per_s={demand * 1000 / 0.6:g}",
                                  "workload.cpu_ms_per_item=0.6"])
    win = _cheapest_limit(sc, [SLO("throttled_ratio", "<=", 0.1)], [2, "ceil"], direction)
    if direction == "raise":
        assert win is not None and win.candidate.limit == limit   # today's limit already keeps it
    else:
        assert win is None                                       # no cut keeps it


def test_a_lab_runs_fix_starts_from_its_twins_scenario():
    """The audit simulates a lab run's fixes from the scenario the validation's twin of that run
    takes on its grid's host (cfsim.validation.calibrate.apply_grid: per-item CPU, the allocation's
    CPU per KiB, the GC's speed), not from a second copy of those rules."""
    from types import SimpleNamespace

    from cfsim.advice.audit.fixes import FixSimulator
    from cfsim.validation.calibrate import apply_grid
    from cfsim.validation.normalise import grid_norm
    from cfsim.validation.twin import find_runs, run_scenario

    run = next(iter(sorted((ROOT / "data/lab/gc-memory").glob("p001_*"))), None)
    if run is None:
        pytest.skip("data/lab/gc-memory is not in this checkout (data/lab comes from the lab)")
    sc, note = FixSimulator(20.0).base(SimpleNamespace(run_dir=run), None, 0.0)
    norm = grid_norm(find_runs(run.parent), gc_priors=False)
    want = apply_grid(run, {}, norm)
    raw = run_scenario(run)
    assert norm.factor != 1.0 and want["go.alloc_ns_per_kb"] != raw["go.alloc_ns_per_kb"]
    for key, value in want.items():
        assert sc[key] == value, key
    assert f"grid cost factor {norm.factor:.3g}" in note


def _small_lab_grid(tmp_path, points=("p025_cpu_limit=1.5_gomaxprocs=1",)):
    """A copy of cpu-stream's calibration runs and a few of its points (None without data/lab)."""
    import shutil

    src = ROOT / "data/lab/cpu-stream"
    if not all((src / p).is_dir() for p in ("calib-start", "calib-end", *points)):
        return None
    grid = tmp_path / "cpu-stream"
    grid.mkdir()
    for f in ("grid.json", "scenario.toml"):
        if (src / f).is_file():
            shutil.copy(src / f, grid / f)
    for p in ("calib-start", "calib-end", *points):
        shutil.copytree(src / p, grid / p)
    return grid


def test_cli_simulates_a_lab_grids_fixes_with_params(tmp_path, capsys):
    """`cfsim audit GRID --params FILE`: the grid's calibration twins, then each flagged run's fix
    simulated from the run's scenario at the grid's cost factor and the file's parameters."""
    grid = _small_lab_grid(tmp_path)
    if grid is None:
        pytest.skip("data/lab/cpu-stream is not in this checkout (data/lab comes from the lab)")
    params = tmp_path / "host.toml"
    params.write_text('[params]\n"host.context_switch_us" = 17.5\n')
    rc = main(["audit", str(grid), "--no-report", "--workers", "0", "--duration", "2", "--no-progress",
               "--params", str(params)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "[trapped]" in out and "simulated on the lab run's scenario (grid cost factor" in out, out

    from types import SimpleNamespace

    from cfsim.advice.audit.fixes import FixSimulator

    (run,) = sorted(grid.glob("p025_*"))
    sc, _ = FixSimulator(2.0, {"host.context_switch_us": 17.5}).base(SimpleNamespace(run_dir=run), None, 0.0)
    assert sc["host.context_switch_us"] == 17.5
    assert FixSimulator(2.0).base(SimpleNamespace(run_dir=run), None, 0.0)[0]["host.context_switch_us"] != 17.5


def test_cli_refuses_params_it_cannot_use(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text('[params]\n"host.contxt_switch_us" = 17.5\n')
    assert main(["audit", str(tmp_path), "--params", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "--params" in err and "host.contxt_switch_us: unknown key" in err
    assert main(["audit", str(tmp_path), "--params", str(tmp_path / "missing.toml")]) == 2
    assert "missing.toml" in capsys.readouterr().err


def test_lab_runs_memory_evidence_flags_kills_and_collapses():
    """A lab run's memory and GC series (cgroup memory, the runtime's cycle count and GC CPU
    limiter) and what the lab measured apart from them (the OOM record, read after a kill the
    scrapes only saw as a counter already at 1) flag a run the kernel OOM-killed 3 s in and a
    GOMEMLIMIT near the live heap; a GOGC-100 run without a memory limit gets no memory flag."""
    runs = {name: next(iter(sorted((ROOT / "data/lab/gc-memory").glob(name + "_*"))), None)
            for name in ("p049", "p028", "p006")}
    if None in runs.values():
        pytest.skip("data/lab/gc-memory is not in this checkout (data/lab comes from the lab)")
    flags = {}
    for name, run in runs.items():
        (c,) = load_containers(run)
        assert "go_gc_cycles_total_gc_cycles_total" in c.memory and c.memory_measured, name
        flags[name] = set(audit(containers=[c], simulate=False).flags_by_container()[c.name])
    assert "oom_killed" in flags["p049"]             # killed 3 s in, before a rate window ends
    assert "memory_limit_collapse" in flags["p028"]   # GOMEMLIMIT 17.6 MiB over 16 MiB of live heap
    assert not flags["p006"] & {"oom_killed", "near_oom", "memory_limit_collapse"}   # GOGC 100, no limit


# ---------------------------------------------------------------------------------------------
# the command's refusals: one line naming the option or the file, exit 2


@pytest.mark.parametrize("value, said", [("-1", "--duration must be > 0 (got -1)"),
                                         ("0", "--duration must be > 0 (got 0)"),
                                         ("nan", "--duration must be a finite number > 0 (got nan)"),
                                         ("1e9", "--duration must be in [0.001, 2592000] (got 1000000000.0)")])
@pytest.mark.parametrize("workers", ["0", "1"])
def test_cli_refuses_a_bad_duration_at_once(exports, value, said, workers, capsys):
    rc = main(["audit", str(exports), "--duration", value, "--workers", workers, "--no-progress", "--no-report"])
    err = capsys.readouterr().err
    assert rc == 2 and err == f"error: {said}\n"


def test_cli_names_a_truncated_export(exports, tmp_path, capsys):
    import shutil

    folder = tmp_path / "exp"
    shutil.copytree(exports, folder)
    bad = folder / "go_sched_gomaxprocs_threads.json"
    assert bad.is_file()
    bad.write_bytes(bad.read_bytes()[:300])
    rc = main(["audit", str(folder), "--no-simulate", "--no-progress", "--no-report"])
    captured = capsys.readouterr()
    assert rc == 2 and captured.out == ""
    assert captured.err.startswith(f"error: {bad}:1:301: not valid JSON") and captured.err.count("\n") == 1


def test_cli_refuses_a_patch_without_simulated_fixes(exports, capsys):
    rc = main(["audit", str(exports), "--no-simulate", "--no-report", "--no-progress", "--emit", "patch"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: --emit patch needs the simulated fixes") and "--no-simulate" in err


def test_cli_says_why_it_prints_no_patch(tmp_path, capsys):
    """A container without findings has no fix, so no patch: stdout stays empty, stderr says why."""
    import json

    lab = {"namespace": "a", "pod": "ok", "container": "app"}
    n, t0 = 40, 1_767_225_600
    series = {"container_cpu_usage_seconds_total": [i * 15 * 1.7 for i in range(n)],
              "kube_pod_container_resource_limits": [2.0] * n,
              "container_cpu_cfs_periods_total": [i * 150.0 for i in range(n)],
              "container_cpu_cfs_throttled_periods_total": [0.0] * n}
    for metric, values in series.items():
        labels = {"__name__": metric, **lab, **({"resource": "cpu"} if metric.startswith("kube_") else {})}
        body = {"status": "success", "data": {"resultType": "matrix", "result": [
            {"metric": labels, "values": [[t0 + 15 * i, repr(v)] for i, v in enumerate(values)]}]}}
        (tmp_path / f"{metric}.json").write_text(json.dumps(body))
    rc = main(["audit", str(tmp_path), "--no-report", "--no-progress", "--workers", "0", "--emit", "patch"])
    captured = capsys.readouterr()
    assert rc == 0 and captured.out == ""
    assert "no patch: no finding's fix changes a workload's pod spec" in captured.err


def test_no_cpu_fix_is_shown_for_a_container_the_simulation_oom_kills(capsys):
    # gc-oom-edge p000: killed at its 560 MiB limit, and throttled before that: a CPU fix of a
    # container that dies early has nothing to show (its "effect" was 0 -> 0 everywhere)
    run = next(iter(sorted((ROOT / "data/lab/gc-oom-edge").glob("p000_*560*"))), None)
    if run is None:
        pytest.skip("data/lab/gc-oom-edge is not in this checkout")
    assert main(["audit", str(run), "--duration", "2", "--workers", "0", "--no-progress", "--no-report",
                 "--format", "json"]) == 0
    import json

    found = {f["flag"]: f for f in json.loads(capsys.readouterr().out)["findings"]}
    assert found["throttled"]["fix"].startswith("none simulated: the simulated container is OOM-killed")
    assert found["oom_killed"]["fix"].startswith("raise the memory limit")
    assert found["oom_killed"]["effect"] == "memory: not simulated (sized from the evidence)"   # a lab run's heap is known
