"""Grid parsing (--grid and sweep files) and the errors that name the key."""
from __future__ import annotations

import pytest

from cfsim.scenario import load_scenario
from cfsim.sweep.grid import Grid, GridError, load_study, parse_axis


def test_range_is_decimal_exact_with_stop_included():
    axis = parse_axis("cgroup.cpu_limit=0.25:4:0.05")
    assert len(axis.values) == 76
    assert axis.values[0] == 0.25 and axis.values[-1] == 4.0
    # no float drift: every value is the nearest double to its decimal literal
    assert all(v == float(f"{0.25 + 0.05 * i:.2f}") for i, v in enumerate(axis.values))
    assert 0.3 in axis.values and 2.15 in axis.values


def test_range_stop_not_hit_is_excluded_and_integers_stay_integers():
    assert parse_axis("host.cpus=2:9:3").values == (2, 5, 8)
    assert all(isinstance(v, int) for v in parse_axis("host.cpus=1:4:1").values)
    assert parse_axis("cgroup.cpu_limit=2:1:-0.5").values == (2.0, 1.5, 1.0)
    assert parse_axis("cgroup.cpu_limit=1:2:1").values == (1, 2)


def test_list_values_are_toml_literals_or_bare_words():
    assert parse_axis("go.gomaxprocs=automaxprocs,go1.25,host,2").values == ("automaxprocs", "go1.25", "host", 2)
    axis = parse_axis('workload.rate_per_s=100, [[0, 10.0], [5, 20.0]], "diurnal:100:0.5:60"')
    assert axis.values == (100, [[0, 10.0], [5, 20.0]], "diurnal:100:0.5:60")


def test_cartesian_product_first_axis_slowest():
    grid = Grid([parse_axis("cgroup.cpu_limit=0.5:1.5:0.5"), parse_axis("go.gomaxprocs=host,2")])
    assert grid.shape == (3, 2) and len(grid) == 6
    points = grid.points()
    assert points[0] == {"cgroup.cpu_limit": 0.5, "go.gomaxprocs": "host"}
    assert points[1] == {"cgroup.cpu_limit": 0.5, "go.gomaxprocs": 2}
    assert points[-1] == {"cgroup.cpu_limit": 1.5, "go.gomaxprocs": 2}
    assert len(Grid().points()) == 1  # no axis: the base scenario once


@pytest.mark.parametrize("spec, key, words", [
    ("cgroup.cpu_limt=1,2", "cgroup.cpu_limt", "unknown key"),
    ("cgroupx.cpu_limit=1,2", "cgroupx.cpu_limit", "unknown section"),
    ("cpu_limit=1,2", "cpu_limit", "section.key"),
    ("cgroup.cpu_limit", "cgroup.cpu_limit", "section.key=a,b,c"),
    ("cgroup.cpu_limit=", "cgroup.cpu_limit", "no values"),
    ("cgroup.cpu_limit=1:2:0", "cgroup.cpu_limit", "step must not be 0"),
    ("cgroup.cpu_limit=2:1:0.5", "cgroup.cpu_limit", "empty"),
    ("cgroup.cpu_limit=1:2:x", "cgroup.cpu_limit", "must all be numbers"),
    ("cgroup.cpu_limit=1,,2", "cgroup.cpu_limit", "empty value"),
    ("cgroup.cpu_limit=0:1000:0.0001", "cgroup.cpu_limit", "max"),
])
def test_parse_errors_name_the_key(spec, key, words):
    with pytest.raises(GridError) as info:
        parse_axis(spec)
    assert info.value.key == key
    assert str(info.value).startswith(f"{key}: ")
    assert words in str(info.value)


def test_grid_errors_duplicates_and_invalid_values():
    with pytest.raises(GridError, match="cgroup.cpu_limit: given twice"):
        Grid([parse_axis("cgroup.cpu_limit=1,2"), parse_axis("cgroup.cpu_limit=3")])
    with pytest.raises(GridError, match="repeated values"):
        Grid([parse_axis("cgroup.cpu_limit=1.0,2,1.0")])
    base = load_scenario("cpu-bound-threads")
    with pytest.raises(GridError, match=r"^cgroup.period_us: value 500 is invalid"):
        Grid([parse_axis("cgroup.period_us=500,100000")]).validate_against(base)
    with pytest.raises(GridError, match=r"^go.gomaxprocs: value 'hots' is invalid"):
        Grid([parse_axis("go.gomaxprocs=host,hots")]).validate_against(base)


def test_sweep_file_round_trip(tmp_path):
    (tmp_path / "svc.toml").write_text('[cgroup]\ncpu_limit = 1.0\n')
    study = tmp_path / "study.toml"
    study.write_text('''
scenario = "svc.toml"
seeds = 3
root_seed = 12345
out = "out/x"
[set]
"run.duration_s" = 2.5
[grid]
"cgroup.cpu_limit" = "0.5:2:0.5"
go.gomaxprocs = ["automaxprocs", "host", 2]
''')
    s = load_study(study)
    assert s.scenario == str(tmp_path / "svc.toml")
    assert s.seeds == 3 and s.root_seed == 12345 and s.out == "out/x"
    assert s.overrides == ["run.duration_s=2.5"]
    assert s.grid.keys == ["cgroup.cpu_limit", "go.gomaxprocs"]
    assert s.grid.shape == (4, 3)


@pytest.mark.parametrize("text, words", [
    ('scenario = "x"\nseed = 3\n', "unknown sweep-file keys"),
    ('scenario = "x"\nseeds = 0\n', "seeds: must be an integer >= 1"),
    ('scenario = "x"\n[grid]\n"go.gomaxprocz" = [1]\n', "go.gomaxprocz: unknown key"),
    ('scenario = "x"\n[grid\n', "not valid TOML"),
])
def test_sweep_file_errors(tmp_path, text, words):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(GridError, match=words):
        load_study(path)
