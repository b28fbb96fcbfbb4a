"""The workload registry: each kind is declared once by its module, and the declarations are true
(the keys a kind declares are the keys its model reads; its shape is what the engines assume)."""
from __future__ import annotations

import pytest

from cfsim.engine.longrun import nominal_demand_cores
from cfsim.scenario import Scenario, load_scenario
from cfsim.scenario.schema import SCHEMA
from cfsim.simulation import simulate
from cfsim.workloads import get_builder, kind_names, workload_kind


def test_every_kind_is_declared_by_its_module_and_known_to_the_schema():
    assert SCHEMA["workload"]["kind"].choices == kind_names()
    for name in kind_names():
        kind = workload_kind(name)
        assert kind.name == name and callable(get_builder(name))
        assert kind.cpu_key in kind.keys
        assert set(kind.keys) <= set(SCHEMA["workload"]), name
    declared = {k for name in kind_names() for k in workload_kind(name).keys}
    assert declared == set(SCHEMA["workload"]) - {"kind"}, "a [workload] key that no kind reads"
    with pytest.raises(ValueError, match="unknown kind 'batch'; known: threads, stream"):
        workload_kind("batch")


class _Reads(dict):
    def __init__(self, data, seen):
        super().__init__(data)
        self.seen = seen

    def __getitem__(self, key):
        self.seen.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.seen.add(key)
        return super().get(key, default)


class _TrackedScenario(Scenario):
    """A scenario that records which [workload] keys are read."""

    def __init__(self, data, source):
        super().__init__(data, source)
        self.seen: set[str] = set()

    def __getitem__(self, dotted):
        section, key = dotted.split(".")
        if section == "workload":
            self.seen.add(key)
        return super().__getitem__(dotted)

    def section(self, name):
        data = super().section(name)
        return _Reads(data, self.seen) if name == "workload" else data


@pytest.mark.parametrize("name", kind_names())
def test_a_kind_reads_exactly_the_keys_it_declares(name):
    sc = load_scenario({"workload": {"kind": name}, "cgroup": {"cpu_limit": 1.0},
                        "run": {"duration_s": 0.3}})
    tracked = _TrackedScenario(sc.data, sc.source)
    simulate(tracked)
    assert tracked.seen - {"kind"} == set(workload_kind(name).keys)


def test_shapes_say_what_sets_the_demand():
    threads = load_scenario({"workload": {"kind": "threads", "threads": 4, "burn_ms": 20, "sleep_ms": 5}})
    assert nominal_demand_cores(threads) == pytest.approx(4 * 20 / 25)
    closed = load_scenario({"workload": {"kind": "closed", "clients": 3, "cpu_ms_per_request": 10,
                                         "think_ms": 30}})
    assert nominal_demand_cores(closed) == pytest.approx(3 * 10 / 40)
    for kind, cost_key in (("stream", "cpu_ms_per_item"), ("open", "cpu_ms_per_request"),
                           ("single-thread", "cpu_ms_per_item")):
        sc = load_scenario({"workload": {"kind": kind, "rate_per_s": [[0, 100], [5, 400]], cost_key: 2.0}})
        shape = workload_kind(kind).shape(sc.section("workload"))
        assert shape.rate_driven and nominal_demand_cores(sc) == pytest.approx(400 * 0.002)
    assert workload_kind("threads").shape(threads.section("workload")).bypass_gomaxprocs
