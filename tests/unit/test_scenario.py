import pytest

from cfsim.scenario import ScenarioError, builtin_names, load_scenario, parse_value


def test_builtin_loads_with_defaults():
    sc = load_scenario("cpu-bound-threads")
    assert sc["cgroup.period_us"] == 100_000
    assert sc["cgroup.kernel"] == "modern"
    assert sc.quota_us == 200_000


@pytest.mark.parametrize("override, key, fragment", [
    ("cgroup.period_us=999", "cgroup.period_us", "[1000, 1000000]"),
    ("cgroup.period_us=1000001", "cgroup.period_us", "[1000, 1000000]"),
    ("cgroup.cpu_limit=0.005", "cgroup.cpu_limit", ">= 1000 us"),
    ("cgroup.burst_us=200001", "cgroup.burst_us", "[0, quota=200000]"),
    ("cgroup.burst_us=-1", "cgroup.burst_us", ">= 0"),
    ("cgroup.kernel=\"old\"", "cgroup.kernel", "'modern', 'legacy-expiry'"),
    ("go.gomaxprocs=0", "go.gomaxprocs", ">= 1"),
    ("go.gomaxprocs=\"lots\"", "go.gomaxprocs", "'host', 'automaxprocs', 'go1.25'"),
    ("run.warmup_s=20", "run.warmup_s", "< run.duration_s"),
    ("host.hz=123", "host.hz", "one of"),
    ("workload.threads=1.5", "workload.threads", "integer"),
])
def test_invalid_values_name_the_key_and_range(override, key, fragment):
    with pytest.raises(ScenarioError) as exc:
        load_scenario("cpu-bound-threads", [override])
    assert exc.value.key == key
    assert fragment in str(exc.value)


def test_unknown_key_and_section_are_rejected():
    with pytest.raises(ScenarioError, match="unknown key"):
        load_scenario("cpu-bound-threads", ["cgroup.quota=5"])
    with pytest.raises(ScenarioError, match="unknown section"):
        load_scenario({"cgroups": {"cpu_limit": 1}})


def test_override_syntax_errors():
    with pytest.raises(ScenarioError, match="section.key=value"):
        load_scenario("cpu-bound-threads", ["cgroup.cpu_limit"])
    with pytest.raises(ScenarioError, match="no file and no built-in"):
        load_scenario("no-such-scenario")


def test_toml_roundtrip(tmp_path):
    sc = load_scenario("cpu-bound-threads", ["cgroup.cpu_limit=1.94", "cgroup.limit_schedule=[[0, 2.0], [5, 1.2]]"])
    path = tmp_path / "s.toml"
    path.write_text(sc.to_toml())
    again = load_scenario(path)
    assert again.data == sc.data


def test_parse_value():
    assert parse_value("3") == 3
    assert parse_value("go1.25") == "go1.25"
    assert parse_value("true") is True


def test_all_builtins_validate():
    for name in builtin_names():
        load_scenario(name)
