"""Waiting for a quiet host before a lab run (cfsim.lab.quiet)."""
from __future__ import annotations

import os

import pytest

from cfsim.lab.hostcpu import ProcStat
from cfsim.lab.quiet import HostBusy, wait_for_quiet_host
from cfsim.scenario import ScenarioError, load_scenario


class FakeHost:
    """/proc/stat of a host whose other tenants use ``busy`` cores in each successive window."""

    def __init__(self, busy: list[float]):
        self.busy, self.t, self.busy_s, self.reads = list(busy), 0.0, 0.0, 0
        self.cpus = os.cpu_count() or 1

    def read(self) -> ProcStat:
        self.reads += 1
        return ProcStat(self.busy_s, self.t * self.cpus, 0.0)

    def sleep(self, s: float) -> None:
        # a measuring window (between the two reads of a check) burns the check's busy cores
        if self.reads % 2 == 1:
            self.busy_s += self.busy[0] * s
            self.busy = self.busy[1:] or self.busy
        self.t += s

    def clock(self) -> float:
        return self.t


def test_waits_until_the_host_is_quiet_and_says_what_it_waited_for():
    host, lines = FakeHost([1.8, 1.6, 0.05]), []
    got = wait_for_quiet_host(0.2, 600, lines.append, read=host.read, sleep=host.sleep, clock=host.clock)
    assert got["checks"] == 3 and got["busy_cores"] == pytest.approx(0.05)
    assert got["waited_s"] == pytest.approx(3 * 2.0 + 2 * 5.0)  # three windows, two pauses
    assert lines and "1.80 cores busy" in lines[0] and "lab.quiet_host_cores = 0.2" in lines[0]


def test_a_quiet_host_costs_one_window():
    host = FakeHost([0.0])
    got = wait_for_quiet_host(0.2, 600, lambda s: None, read=host.read, sleep=host.sleep, clock=host.clock)
    assert got["checks"] == 1 and got["waited_s"] == pytest.approx(2.0)


def test_gives_up_with_a_clear_error():
    host = FakeHost([1.5])
    with pytest.raises(HostBusy, match=r"lab.quiet_host_cores = 0.2 .*lab.quiet_host_timeout_s"):
        wait_for_quiet_host(0.2, 30, lambda s: None, read=host.read, sleep=host.sleep, clock=host.clock)
    assert host.t < 30 + 2.0 + 5.0 + 2.0  # it stops at the first check past the timeout


def test_waits_until_the_hypervisor_steals_no_more_and_probes_only_a_quiet_host():
    host, lines, probes = FakeHost([0.05, 1.2, 0.05, 0.05]), [], []
    stolen = iter([0.6, 0.02])

    def probe(seconds: float) -> float:
        probes.append(seconds)
        return next(stolen)
    got = wait_for_quiet_host(0.2, 600, lines.append, read=host.read, sleep=host.sleep, clock=host.clock,
                              max_steal_cores=0.05, steal_probe=probe)
    # window 1 quiet but 0.6 cores stolen; window 2 busy (no probe); window 3 quiet and unstolen
    assert got["checks"] == 3 and probes == [1.0, 1.0]
    assert got["steal_cores"] == 0.02 and got["max_steal_cores"] == 0.05
    assert "0.60 cores stolen by the hypervisor > lab.quiet_host_steal_cores = 0.05" in lines[0]


def test_no_steal_probe_unless_asked():
    host = FakeHost([0.0])
    got = wait_for_quiet_host(0.2, 600, lambda s: None, read=host.read, sleep=host.sleep, clock=host.clock,
                              steal_probe=lambda s: pytest.fail("probed"))
    assert "steal_cores" not in got


def test_gives_up_on_steal_with_a_clear_error():
    host = FakeHost([0.0])
    with pytest.raises(HostBusy, match=r"0.90 cores stolen .*lab.quiet_host_steal_cores = 0.05 .*timeout_s"):
        wait_for_quiet_host(0.2, 30, lambda s: None, read=host.read, sleep=host.sleep, clock=host.clock,
                            max_steal_cores=0.05, steal_probe=lambda s: 0.9)


def test_scenario_keys_are_checked():
    sc = load_scenario("cpu-bound-threads", ["lab.quiet_host_cores=0.2"])
    assert sc["lab.quiet_host_cores"] == 0.2 and sc["lab.quiet_host_timeout_s"] == 1800.0
    with pytest.raises(ScenarioError, match="lab.quiet_host_cores"):
        load_scenario("cpu-bound-threads", ["lab.quiet_host_cores=-1"])
    with pytest.raises(ScenarioError, match="lab.quiet_host_timeout_s"):
        load_scenario("cpu-bound-threads", ["lab.quiet_host_timeout_s=0"])
    assert load_scenario("cpu-bound-threads")["lab.quiet_host_steal_cores"] is None
    with pytest.raises(ScenarioError, match="lab.quiet_host_steal_cores"):
        load_scenario("cpu-bound-threads", ["lab.quiet_host_steal_cores=-0.1"])
