"""The runtime's per-cycle GC trace reader (cfsim.io.gctrace) and the model's table of the same fields."""
from __future__ import annotations

import gzip
import math

import pandas as pd
import pytest

from cfsim.io.errors import CfsimParseError
from cfsim.io.gctrace import COLUMNS, dense_scan_share, read_gctrace
from cfsim.lab import launch
from cfsim.scenario import ScenarioError, load_scenario

PACER = ("pacer: 43% CPU (25 exp.) for 6003032+8920+244650 B work (6255818 B exp.) in 149821712 B -> "
         "192061200 B (∆goal 5237820, cons/mark 3.6308906896701063)")
GC = ("gc 40 @5.879s 12%: 1.3+84+0.24 ms clock, 2.7+129/144/0+0.49 ms cpu, 142->183->56 MB, 178 MB goal, "
      "0 MB stacks, 0 MB globals, 8 P")


def write(path, lines, gz=False):
    text = "\n".join(lines) + "\n"
    if gz:
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)
    return path


def test_reads_both_lines_of_a_cycle_and_skips_the_rest(tmp_path):
    p = write(tmp_path / "w.log", ['{"event":"ready"}', "pacer: assist ratio=0.17 (scan 7 MB in 137->171 MB) workers=2+0",
                                   "pacer: sweep done at heap size 99MB; allocated 43MB during sweep", PACER, GC,
                                   GC.replace("gc 40 @5.879s", "gc 41 @6.000s") + " (forced)"])
    df, meta = read_gctrace(p)
    assert list(df.columns) == list(COLUMNS) and meta["cycles"] == 2 and meta["with_pacer"] == 1
    a, b = df.iloc[0], df.iloc[1]
    assert (a.cycle, a.t_s, a.mark_ms, a.assist_cpu_ms, a.background_cpu_ms, a.idle_cpu_ms) == (40, 5.879, 84.0, 129.0, 144.0, 0.0)
    assert (a.heap0_mib, a.heap1_mib, a.marked_mib, a.goal_mib, a.procs) == (142, 183, 56, 178, 8)
    assert a.scan_work_bytes == 6003032 + 8920 + 244650 and a.triggered_bytes == 149821712
    assert a.heap_end_bytes == 192061200 and a.cons_mark == pytest.approx(3.6309, abs=1e-4)
    assert not a.forced and b.forced and math.isnan(b.triggered_bytes)   # its pacer line is missing


def test_gzip_and_interleaved_output(tmp_path):
    # the runtime writes to fd 2 unbuffered: another writer's partial line may precede its text
    p = write(tmp_path / "w.log.gz", ["partial output" + PACER, "xx" + GC], gz=True)
    df, _ = read_gctrace(p)
    assert df.loc[0, "cycle"] == 40 and df.loc[0, "utilization_percent"] == 43


@pytest.mark.parametrize("lines, line", [([PACER, GC.replace("ms cpu", "ms cpus")], 2),
                                         ([PACER.replace(" B work", " work"), GC], 1)])
def test_a_malformed_trace_line_names_file_and_line(tmp_path, lines, line):
    p = write(tmp_path / "w.log", lines)
    with pytest.raises(CfsimParseError, match=rf"w\.log:{line}:1: malformed"):
        read_gctrace(p)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such GC trace file"):
        read_gctrace(tmp_path / "nope.log")


def test_lab_gctrace_sets_godebug_beside_the_gomaxprocs_policy():
    env = launch.workload_env(load_scenario({"lab": {"gctrace": True}, "go": {"gomaxprocs": "host"}}), base={})
    assert env["GODEBUG"] == "containermaxprocs=0,updatemaxprocs=0,gctrace=1,gcpacertrace=1"
    env = launch.workload_env(load_scenario({"lab": {"gctrace": True}, "go": {"gomaxprocs": 2}}), base={"GODEBUG": "x=1"})
    assert env["GODEBUG"] == "gctrace=1,gcpacertrace=1"
    assert "GODEBUG" not in launch.workload_env(load_scenario({"go": {"gomaxprocs": 2}}), base={})


SCAN = "scan: total 1885+5969+226880=234734 objs, 1431+2270=3701 spans"


def test_gctrace_2_gives_each_cycle_its_green_tea_scan_split(tmp_path):
    # gctrace=2 prints, after a cycle's gc line, its scan split and then one line per size class
    p = write(tmp_path / "w.log", [PACER, GC, SCAN, "scan: class 64B 1500+5900+226000=233400 objs, 1400+2200=3600 spans",
                                   PACER, GC.replace("gc 40 @5.879s", "gc 41 @6.000s")])
    df, meta = read_gctrace(p)
    assert meta["cycles"] == 2 and meta["with_scan_split"] == 1
    a, b = df.iloc[0], df.iloc[1]
    assert (a.scan_sole_objects, a.scan_sparse_span_objects, a.scan_dense_span_objects) == (1885, 5969, 226880)
    assert (a.scan_sparse_spans, a.scan_dense_spans) == (1431, 2270)
    assert math.isnan(b.scan_dense_span_objects)       # a cycle traced without gctrace=2
    assert dense_scan_share(df).iloc[0] == pytest.approx(226880 / 234734) and math.isnan(dense_scan_share(df).iloc[1])


@pytest.mark.parametrize("bad", ["scan: total 1+2+3=7 objs, 1+1=2 spans", "scan: total 1+2+3 objs, 1+1=2 spans"])
def test_a_scan_split_line_that_does_not_parse_or_add_up_names_file_and_line(tmp_path, bad):
    p = write(tmp_path / "w.log", [PACER, GC, bad])
    with pytest.raises(CfsimParseError, match=r"w\.log:3:1: .*scan: total"):
        read_gctrace(p)


def test_lab_gctrace_scan_asks_for_gctrace_2_and_needs_the_trace():
    sc = load_scenario({"lab": {"gctrace": True, "gctrace_scan": True}, "go": {"gomaxprocs": 2}})
    assert launch.workload_env(sc, base={})["GODEBUG"] == "gctrace=2,gcpacertrace=1"
    with pytest.raises(ScenarioError, match="lab.gctrace_scan"):
        load_scenario({"lab": {"gctrace_scan": True}})


def test_lab_writes_the_cycle_table_on_the_run_clock_and_keeps_the_log_gzipped(tmp_path):
    from cfsim.lab.runner import write_gc_cycles

    (tmp_path / "logs").mkdir()
    write(tmp_path / "logs" / "workload.log", ['{"event":"ready"}', PACER, GC])
    info = write_gc_cycles(tmp_path, launch_unix_s=100.0, start_unix_s=103.0)
    assert info["cycles"] == 1 and info["with_pacer"] == 1 and info["with_scan_split"] == 0
    assert not (tmp_path / "logs" / "workload.log").exists() and (tmp_path / "logs" / "workload.log.gz").is_file()
    df = pd.read_csv(tmp_path / "gc_cycles.csv.gz")
    assert df.loc[0, "run_t_s"] == pytest.approx(5.879 - 3.0)
    assert write_gc_cycles(tmp_path, 100.0, 103.0) == info        # again, from the gzipped log


def test_cycle_keys_are_the_same_for_the_lab_table_and_the_model_table():
    from cfsim.goruntime.gc_cycles import cycle_keys
    from cfsim.io.gctrace import cycle_table, parse_gctrace

    lab = parse_gctrace([PACER, GC])
    lab.insert(2, "run_t_s", [2.0])
    k = cycle_keys(cycle_table(lab), 1.0, 3.0)
    # the gctrace MiB are floors: the marked heap is read as the middle of its MiB, the goal to the
    # byte from the pacer line (the heap at the end minus ∆goal)
    assert k["gc_cycle_count"] == 1 and k["gc_cycle_marked_median_bytes"] == 56.5 * 2**20
    assert k["gc_cycle_goal_median_bytes"] == 192061200 - 5237820
    assert k["gc_cycle_alloc_during_mark_median_bytes"] == 192061200 - 149821712
    assert k["gc_cycle_end_over_goal_median"] == pytest.approx(192061200 / (192061200 - 5237820))
    assert k["gc_cycle_assist_share"] == pytest.approx(129 / (129 + 144))
    # the trace's @t is the cycle's start (work.tSweepTerm); the table gives its end, as the model's
    assert cycle_table(lab)["run_t_s"].tolist() == [pytest.approx(2.0 + (1.3 + 84 + 0.24) / 1e3)]
    assert cycle_keys(cycle_table(lab), 2.0, 3.0)["gc_cycle_count"] == 1     # began at 2.0, ended inside
    assert cycle_keys(cycle_table(lab), 1.0, 2.08)["gc_cycle_marked_median_bytes"] is None   # not yet ended


def test_a_lab_trace_near_the_memory_limit_is_mostly_paced_by_assists():
    # gc-near-limit p001 (GOMEMLIMIT 17.6 MiB over a 16 MiB heap, GOGC off, GOMAXPROCS 2 in one
    # core): the assists hold most marks to 1.1 x the goal (18 -> 20 MB), and the others, the GC
    # CPU limiter on, run 10-20 MiB past it, longer: about half the window's wall time
    from pathlib import Path

    from cfsim.validation.twin import observed_summary

    run = Path(__file__).parents[2] / "data/lab/gc-near-limit/p001_trace_gomaxprocs=2"
    k = observed_summary(run)
    assert 0.4 < k["gc_cycle_unpaced_time_share"] < 0.55
    assert k["gc_cycle_past_goal_share"] > 0.9        # past the goal by 2 %: paced and unpaced alike


def test_the_time_between_marks_is_the_next_start_less_this_cycles_three_clocks():
    from cfsim.goruntime.gc_cycles import cycle_keys
    from cfsim.io.gctrace import cycle_table, parse_gctrace

    # the same cycle twice, 100 ms apart: 1.3 + 84 + 0.24 ms of clocks, so 14.46 ms between the
    # first mark's end (mark termination's 0.24 ms after it) and the second one's start (after the
    # second sweep termination's 1.3 ms): the table's mark start is its end less the mark
    lab = parse_gctrace([PACER, GC, PACER, GC])
    lab.insert(2, "run_t_s", [2.0, 2.1])
    k = cycle_keys(cycle_table(lab), 1.0, 3.0)
    assert k["gc_cycle_between_marks_mean_s"] == pytest.approx((2.1 + (1.3 + 0.24) / 1e3) - (2.0 + (1.3 + 84 + 0.24) / 1e3))
    assert cycle_keys(cycle_table(lab), 2.09, 3.0)["gc_cycle_between_marks_mean_s"] is None    # one cycle in it


def test_a_lab_trace_at_the_live_heap_leaves_a_gap_between_marks_that_grows_with_gomaxprocs():
    # gc-limiter (GOMEMLIMIT 17.6 MiB over a 16 MiB heap, GOGC off, one core): the heap is past
    # the next trigger as each mark ends, so a cycle follows at once but for gcStart's sweep of
    # what the last one left (1.4 ms at GOMAXPROCS 1, 3.4 at 2, 7.1 at 8, measured); with GOGC 100
    # the gap is the heap's growth to the trigger (20 ms)
    from pathlib import Path

    from cfsim.validation.twin import observed_summary

    root = Path(__file__).parents[2] / "data/lab/gc-limiter"
    gap = {p: observed_summary(root / f"p00{i}_near_gomaxprocs={p}")["gc_cycle_between_marks_mean_s"]
           for i, p in enumerate((1, 2, 8))}
    assert 0.0008 < gap[1] < gap[2] < gap[8] < 0.012
    assert observed_summary(root / "p003_gogc100_gomaxprocs=2")["gc_cycle_between_marks_mean_s"] > 0.015


def test_the_limiter_log_reads_back_per_cycle_and_names_a_bad_line(tmp_path):
    from cfsim.io.gclimiter import limiter_turned_on, read_gc_limiter

    log = write(tmp_path / "gc_limiter.log.gz", ["gcs=3 last-enabled=0", "gcs=6 last-enabled=6",
                                                 "gcs=7 last-enabled=6", "gcs=8 last-enabled=9"], gz=True)
    reads, meta = read_gc_limiter(log)
    assert meta["reads"] == 4 and reads["last_enabled"].tolist() == [0, 6, 6, 9]
    flags = limiter_turned_on(range(1, 10), reads)
    # judged: the cycles read right after (3 off, 6 on, 7 off); 8's read saw a turn-on after it
    assert [i + 1 for i, f in enumerate(flags) if not math.isnan(f)] == [3, 6, 7]
    assert [flags[2], flags[5], flags[6]] == [0.0, 1.0, 0.0]
    bad = write(tmp_path / "bad.log", ["gcs=3 last-enabled=0", "gcs=x last-enabled=1"])
    with pytest.raises(CfsimParseError, match=r"bad.log:2:1: not a"):
        read_gc_limiter(bad)
    with pytest.raises(FileNotFoundError, match="no such GC limiter log"):
        read_gc_limiter(tmp_path / "nope.log")


def test_lab_runs_with_the_trace_read_the_limiter_into_the_cycle_table(tmp_path):
    from cfsim.lab.runner import write_gc_cycles
    from cfsim.validation.twin import observed_summary

    sc = load_scenario({"lab": {"gctrace": True}, "run": {"warmup_s": 0.0, "duration_s": 10.0}})
    argv = launch.workload_command(tmp_path / "workload", sc, "127.0.0.1:1", tmp_path / "logs" / "gc_limiter.log")
    assert argv[argv.index("-gc-limiter-log") + 1] == str(tmp_path / "logs" / "gc_limiter.log")
    assert "-gc-limiter-log" not in launch.workload_command(tmp_path / "workload", sc, "127.0.0.1:1")
    (tmp_path / "logs").mkdir()
    second = GC.replace("gc 40 @5.879s", "gc 41 @6.879s")
    write(tmp_path / "logs" / "workload.log", [PACER, GC, PACER, second])
    write(tmp_path / "logs" / "gc_limiter.log", ["gcs=40 last-enabled=40", "gcs=41 last-enabled=40"])
    info = write_gc_cycles(tmp_path, launch_unix_s=100.0, start_unix_s=100.0)
    assert info["limiter_reads"] == 2 and info["limiter_cycles_judged"] == 2 and info["limiter_cycles_turned_on"] == 1
    assert (tmp_path / "logs" / "gc_limiter.log.gz").is_file() and not (tmp_path / "logs" / "gc_limiter.log").exists()
    assert write_gc_cycles(tmp_path, 100.0, 100.0) == info             # again, from the gzipped logs
    # read with the run: the share of the window's judged cycles the limiter turned on in
    (tmp_path / "scenario.toml").write_text(sc.to_toml())
    (tmp_path / "summary.json").write_text("{}")
    (tmp_path / "manifest.json").write_text("{}")
    assert observed_summary(tmp_path)["gc_cycle_limiter_on_share"] == 0.5
