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


def test_perf_window_must_fit_and_perf_must_exist(monkeypatch):
    with pytest.raises(ScenarioError, match="lab.perf_s"):
        check_scenario(load_scenario({"lab": {"perf_s": 100}, "run": {"duration_s": 25, "warmup_s": 5}}))
    monkeypatch.setattr(perf.shutil, "which", lambda name: None)
    with pytest.raises(ScenarioError, match="lab.perf_s needs the perf tool: apt-get install linux-perf"):
        check_scenario(load_scenario({"lab": {"perf_s": 5}}))
