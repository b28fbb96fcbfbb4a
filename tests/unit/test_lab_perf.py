"""perf's counters and report as the lab records them (cfsim.lab.perf)."""
import pytest

from cfsim.lab import perf
from cfsim.lab.runner import check_scenario
from cfsim.scenario import ScenarioError, load_scenario

STAT = """3747.69,msec,task-clock,3747690000,100.00,0.936,CPUs utilized
5473,,context-switches,3747690000,100.00,1.460,K/sec
10,,cpu-migrations,3747690000,100.00,2.668,/sec
1365,,page-faults,3747690000,100.00,364.224,/sec
<not supported>,,signal:signal_deliver,0,100.00,,
"""

REPORT = """# To display the perf.data header info, please use --header/--header-only options.
#
# Overhead  Shared Object
# ........  .................
#
    61.74%  workload
    38.02%  [kernel.kallsyms]
     0.24%  [vdso]
"""


def test_stat_csv_is_parsed_per_event_with_unsupported_as_none():
    c = perf.parse_perf_stat(STAT)
    assert c == {"task-clock": 3747.69, "context-switches": 5473.0, "cpu-migrations": 10.0,
                 "page-faults": 1365.0, "signal:signal_deliver": None}


def test_a_malformed_stat_line_names_the_source_and_position():
    with pytest.raises(ValueError, match=r"perf stat: line 2, column 1: not a number"):
        perf.parse_perf_stat("5473,,context-switches\nabc,,page-faults\n")
    with pytest.raises(ValueError, match=r"line 1: expected"):
        perf.parse_perf_stat("garbage")


def test_summary_gives_rates_and_the_kernel_share():
    s = perf.summarise(perf.parse_perf_stat(STAT), 4.0, perf.parse_perf_report(REPORT),
                       [(0.33, "workload [.] main.burner.burn"), (0.12, "[kernel.kallsyms] [k] finish_task_switch")])
    assert s["per_s"]["context-switches"] == pytest.approx(5473 / 4)
    assert s["per_s"]["cpu_cores"] == pytest.approx(3.74769 / 4, abs=1e-4)
    assert s["per_s"]["signal:signal_deliver"] is None
    assert s["kernel_fraction"] == pytest.approx(0.3802)
    assert s["dso_fraction"]["workload"] == pytest.approx(0.6174)
    assert s["top_symbols"][1] == {"fraction": 0.12, "symbol": "[kernel.kallsyms] [k] finish_task_switch"}


@pytest.mark.parametrize("key, missing", [
    ("perf_s", "lab.perf_s needs the perf tool: apt-get install linux-perf"),
    ("sleep_stacks_s", "lab.sleep_stacks_s.*apt-get install linux-perf"),
])
def test_a_perf_window_must_fit_and_perf_must_exist(monkeypatch, key, missing):
    """Both probes that run perf in the measured window (lab.perf_s and the threads' sleeps,
    lab.sleep_stacks_s) share the runner's checks."""
    with pytest.raises(ScenarioError, match=f"lab.{key}"):
        check_scenario(load_scenario({"lab": {key: 100}, "run": {"duration_s": 25, "warmup_s": 5}}))
    monkeypatch.setattr(perf.shutil, "which", lambda name: None)
    with pytest.raises(ScenarioError, match=missing):
        check_scenario(load_scenario({"lab": {key: 5}}))


SCRIPT = """30493 74080.389057: 
\t          22a686 main.spin
\t           92c01 runtime.goexit.abi0

30493 74080.390053: 
\tffffffff81688025 memcg1_commit_charge
\t          22a686 main.churn

30495 74080.392049: 
\t          3ab100 runtime.tryDeferToSpanScan+0x1c
\t          3ab200 runtime.gcDrain
\t          3ab300 runtime.gcBgMarkWorker
"""


def test_stack_split_puts_each_sample_on_the_runs_clock(tmp_path):
    """The recording's call chains go through the lab's profsplit (the same stack rules as a Go
    profile); each sample's CLOCK_MONOTONIC time lands on the run's clock."""
    from cfsim.lab import build

    try:
        profsplit = build.build()["profsplit"]
    except build.BuildError as exc:
        pytest.skip(f"the lab's Go binaries cannot be built here: {exc}")
    fake = tmp_path / "perf"
    (tmp_path / "script.txt").write_text(SCRIPT)
    fake.write_text(f"#!/bin/sh\ncat {tmp_path / 'script.txt'}\n")
    fake.chmod(0o755)
    probe = perf.PerfProbe(1, 1.0, profsplit=profsplit, series_path=tmp_path / perf.PERF_SAMPLES_FILE,
                           origin_unix_s=1_000.0)
    probe.mono_to_unix_s = 1_000.0 - 74_080.0          # monotonic 74,080 s was the run's t = 0
    out = probe._stack_split(str(fake), tmp_path / "perf.data", tmp_path)
    assert out["samples"] == 3 and out["hz"] == perf.RECORD_HZ
    assert out["detail_cpu_s"]["gc_mark_worker"] == pytest.approx(1 / perf.RECORD_HZ)
    assert out["detail_cpu_s"]["user_kernel"] == pytest.approx(1 / perf.RECORD_HZ)
    s, meta = perf.read_perf_samples(tmp_path / perf.PERF_SAMPLES_FILE)
    assert list(s["t_s"]) == [0.3891, 0.3901, 0.392] and list(s["group"]) == ["user", "user", "gc"]


def test_malformed_samples_name_the_file_and_line(tmp_path):
    import gzip

    from cfsim.io.errors import CfsimParseError

    bad = tmp_path / "s.csv.gz"
    with gzip.open(bad, "wt") as fh:
        fh.write("t_s,group,category\n1.0,gc,gc_mark\nx,user,user\n")
    with pytest.raises(CfsimParseError, match=r"s\.csv\.gz:3:1.*t_s"):
        perf.read_perf_samples(bad)
    with gzip.open(bad, "wt") as fh:
        fh.write("t_s,group\n1.0,gc\n")
    with pytest.raises(CfsimParseError, match="missing column"):
        perf.read_perf_samples(bad)


def test_gc_cpu_a_cycle_counts_whole_marks_inside_the_window_and_takes_the_models_gc_cpu():
    import numpy as np

    from cfsim.goruntime.gc_cycles import gc_cpu_per_cycle_s
    from cfsim.validation.metrics import _m_gc_cpu_per_cycle

    t = np.arange(0.0, 10.0, 0.001)
    starts, ends = np.array([0.5, 3.0, 6.0, 9.99]), np.array([0.52, 3.02, 6.04, 10.02])
    in_mark = np.zeros(len(t), bool)
    for a, b in zip(starts, ends):
        in_mark |= (t >= a) & (t < b)
    # 20 and 40 ms of GC a mark; the first and last marks lie partly outside the window
    got = gc_cpu_per_cycle_s(t, in_mark, 0.001, starts, ends, (1.0, 9.9))
    assert got == pytest.approx(0.030, abs=0.0015)
    assert gc_cpu_per_cycle_s(t, in_mark, 0.001, starts, ends, (2.0, 4.0)) is None   # one mark
    assert _m_gc_cpu_per_cycle({"gc_cpu_per_cycle_s": 0.02, "gc_cycles": 3}) == 0.02
    twin = {"cpu_real_gc_dedicated_s": 0.03, "cpu_real_gc_idle_s": 0.02, "cpu_real_gc_assist_s": 0.01,
            "cpu_real_gc_pause_s": 0.0, "gc_cycles": 4}
    assert _m_gc_cpu_per_cycle(twin) == pytest.approx(0.015)
    assert _m_gc_cpu_per_cycle({"gc_cycles": 4}) is None


def test_assist_share_of_the_marks_cpu_counts_assist_and_worker_samples_in_the_recording_only(tmp_path):
    import gzip
    import json

    import pandas as pd

    from cfsim.lab.perf import assist_cpu_share
    from cfsim.validation.metrics import _m_gc_assist_cpu_share
    from cfsim.validation.twin import _perf_recording

    cats = ["gc_assist"] * 30 + ["gc_mark_worker"] * 90 + ["gc_mark"] * 40 + ["user"] * 500 + ["gc_sweep"] * 50
    s = pd.DataFrame({"t_s": [2.0 + i * 0.002 for i in range(len(cats))], "category": cats})
    # stop-the-world marking, sweeping and user samples are neither half of the concurrent mark
    assert assist_cpu_share(s, (0.0, 100.0)) == pytest.approx(0.25)
    # samples outside the recording's span (the probe's own start-up) are not counted
    late = pd.concat([s, pd.DataFrame({"t_s": [50.0] * 200, "category": ["gc_assist"] * 200})])
    assert assist_cpu_share(late, (0.0, 10.0)) == pytest.approx(0.25)
    assert assist_cpu_share(s.iloc[:40], (0.0, 100.0)) is None    # 40 samples of the mark's work: too few
    # read from a run folder: its perf block gives the span; a run without samples gives nothing
    run = tmp_path / "run"
    run.mkdir()
    assert _perf_recording(run) is None
    with gzip.open(run / perf.PERF_SAMPLES_FILE, "wt") as fh:
        fh.write(late.assign(group="gc").to_csv(index=False))
    man = {"perf": {"stack_split": {"hz": 499}, "start_t_s": 1.0, "seconds": 10.0}}
    with gzip.open(run / "manifest.json.gz", "wt") as fh:
        json.dump(man, fh)
    rec = _perf_recording(run)
    assert rec.span == (1.0, 11.0) and rec.sample_s == pytest.approx(1 / 499)
    assert assist_cpu_share(rec.samples, rec.span) == pytest.approx(0.25)
    # the model's from its classes' real CPU; the lab's key wins where a summary has it
    twin = {"cpu_real_gc_dedicated_s": 0.03, "cpu_real_gc_idle_s": 0.01, "cpu_real_gc_assist_s": 0.04}
    assert _m_gc_assist_cpu_share(twin) == pytest.approx(0.5)
    assert _m_gc_assist_cpu_share({"gc_assist_cpu_share": 0.2, **twin}) == 0.2
    assert _m_gc_assist_cpu_share({"cpu_real_gc_dedicated_s": 0.0, "cpu_real_gc_idle_s": 0.0,
                                   "cpu_real_gc_assist_s": 0.0}) is None
