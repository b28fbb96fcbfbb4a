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
    ("run.latency_buckets_s=[0.01, 0.005]", "run.latency_buckets_s", "strictly ascending"),
    ("run.latency_buckets_s=[0, 0.005]", "run.latency_buckets_s", "finite and > 0"),
    ("run.latency_buckets_s=0.01", "run.latency_buckets_s", "list of bounds"),
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


def test_a_release_written_as_a_number_is_the_release():
    # --set go.version=1.20 reads as TOML's float 1.2; a string key takes the text as written
    assert load_scenario("cpu-bound-threads", ["go.version=1.20"])["go.version"] == "1.20"
    assert load_scenario("cpu-bound-threads", ['go.version="1.24"'])["go.version"] == "1.24"
    with pytest.raises(ScenarioError, match=r"go\.version: must be one of .*got '1\.99'"):
        load_scenario("cpu-bound-threads", ["go.version=1.99"])
    # a number key keeps its number, a key not in the schema its TOML value
    assert parse_value("1.20", "cgroup.cpu_limit") == 1.2
    assert parse_value("1.20", "nosuch.key") == 1.2


def test_a_release_written_as_a_toml_number_says_to_quote_it(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text("[go]\nversion = 1.26\n")
    with pytest.raises(ScenarioError, match=r'go\.version: must be a string \(got 1\.26\); in a TOML file quote it: '
                                            r'version = "1\.26"'):
        load_scenario(path)


def test_a_sweep_axis_and_a_lab_grid_axis_of_releases_keep_their_text():
    from cfsim.lab.grid import parse_axis as lab_axis
    from cfsim.sweep.grid import parse_values

    assert parse_values("go.version", "1.20,1.26") == ("1.20", "1.26")
    assert lab_axis("go.version=1.25,1.26") == ("go.version", ["1.25", "1.26"])


def test_all_builtins_validate():
    for name in builtin_names():
        load_scenario(name)


@pytest.mark.parametrize("content", [b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", b"\x00\x01\x02\x03"])
def test_a_binary_file_given_as_scenario_is_one_clear_line(tmp_path, capsys, content):
    from cfsim.cli import main

    blob = tmp_path / "picture.png"
    blob.write_bytes(content)
    with pytest.raises(ScenarioError, match=r"picture\.png: not (a TOML text file|valid TOML)"):
        load_scenario(blob)
    for argv in (["run", str(blob)], ["sweep", str(blob), "--grid", "cgroup.cpu_limit=1,2", "--out",
                                      str(tmp_path / "out")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"error: invalid scenario: {blob}: "), err
    assert main(["run", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
