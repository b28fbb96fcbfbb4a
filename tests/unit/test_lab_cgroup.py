"""cfsim.lab.cgroup on fixture trees (no root, no real cgroup needed)."""
from __future__ import annotations

from pathlib import Path

import pytest

from cfsim.lab import cgroup

MOUNTINFO_HYBRID = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
MOUNTINFO_COMOUNTED = "25 20 0:22 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
MOUNTINFO_V2 = "30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"

V1_STAT = "nr_periods 120\nnr_throttled 37\nthrottled_time 2345678901\nnr_bursts 2\nburst_time 5000000\n"
V2_STAT = ("usage_usec 5123456\nuser_usec 5000000\nsystem_usec 123456\ncore_sched.force_idle_usec 0\n"
           "nr_periods 300\nnr_throttled 120\nthrottled_usec 987654\nnr_bursts 0\nburst_usec 0\n")


def test_parse_mounts_hybrid_separate_hierarchies():
    m = cgroup.parse_mounts(MOUNTINFO_HYBRID)
    assert m.v1_cpu == Path("/sys/fs/cgroup/cpu")
    assert m.v1_cpuacct == Path("/sys/fs/cgroup/cpuacct")  # cpuset must not match 'cpu'
    assert m.v2 == Path("/sys/fs/cgroup/unified")


def test_parse_mounts_comounted_and_pure_v2():
    m = cgroup.parse_mounts(MOUNTINFO_COMOUNTED)
    assert m.v1_cpu == m.v1_cpuacct == Path("/sys/fs/cgroup/cpu,cpuacct")
    m2 = cgroup.parse_mounts(MOUNTINFO_V2)
    assert m2.v1_cpu is None and m2.v2 == Path("/sys/fs/cgroup")


def test_parse_v1_stat_units_ns():
    s = cgroup.parse_v1_stat(V1_STAT, "9876543210\n")
    assert s == cgroup.CpuStat(usage_ns=9876543210, nr_periods=120, nr_throttled=37, throttled_ns=2345678901,
                               nr_bursts=2, burst_ns=5000000)


def test_parse_v2_stat_converts_usec_to_ns():
    s = cgroup.parse_v2_stat(V2_STAT)
    assert s.usage_ns == 5123456000 and s.throttled_ns == 987654000
    assert (s.nr_periods, s.nr_throttled) == (300, 120)


def test_cpu_max_round_trip():
    assert cgroup.parse_cpu_max("max 100000\n") == (None, 100000)
    assert cgroup.parse_cpu_max("194000 100000") == (194000, 100000)
    assert cgroup.parse_cpu_max("50000") == (50000, 100000)
    assert cgroup.format_cpu_max(cgroup.Bandwidth(None, 50000)) == "max 50000"
    assert cgroup.format_cpu_max(cgroup.Bandwidth(25000, 100000)) == "25000 100000"


def test_shares_to_weight_matches_runc():
    assert cgroup.shares_to_weight(2) == 1
    assert cgroup.shares_to_weight(1024) == 39
    assert cgroup.shares_to_weight(262144) == 10000


def _fake_v1(tmp_path: Path) -> cgroup.Mounts:
    for c in ("cpu", "cpuacct"):
        (tmp_path / c).mkdir()
    return cgroup.Mounts(v1_cpu=tmp_path / "cpu", v1_cpuacct=tmp_path / "cpuacct")


def test_v1_fixture_create_configure_read_remove(tmp_path):
    mounts = _fake_v1(tmp_path)
    cg = cgroup.create("cfsim-lab-1-x", mounts)
    assert isinstance(cg, cgroup.V1Cgroup) and cg.cpu_dir.is_dir() and cg.cpuacct_dir.is_dir()
    (cg.cpu_dir / "cpu.cfs_burst_us").write_text("0\n")
    cg.set_bandwidth(cgroup.Bandwidth(194000, 100000, 1000))
    assert (cg.cpu_dir / "cpu.cfs_quota_us").read_text() == "194000"
    assert cg.bandwidth() == cgroup.Bandwidth(194000, 100000, 1000)
    assert cg.bandwidth().cpu_limit_cores == pytest.approx(1.94)
    cg.set_bandwidth(cgroup.Bandwidth(None, 100000))
    assert (cg.cpu_dir / "cpu.cfs_quota_us").read_text() == "-1" and cg.bandwidth().quota_us is None
    cg.add_pid(4242)  # a regular file in the fixture: the pid goes to both hierarchies
    assert (cg.cpu_dir / "cgroup.procs").read_text() == "4242"
    assert (cg.cpuacct_dir / "cgroup.procs").read_text() == "4242"
    (cg.cpu_dir / "cpu.stat").write_text(V1_STAT)
    (cg.cpuacct_dir / "cpuacct.usage").write_text("123\n")
    assert cg.read_stat().nr_throttled == 37 and cg.read_stat().usage_ns == 123
    cg.set_shares(2048)
    assert (cg.cpu_dir / "cpu.shares").read_text() == "2048"
    for d in (cg.cpu_dir, cg.cpuacct_dir):  # a fixture dir holds files; a real cgroup's vanish on rmdir
        for f in d.iterdir():
            f.unlink()
        (d / "cgroup.procs").write_text("")
    (cg.cpu_dir / "cgroup.procs").unlink()
    (cg.cpuacct_dir / "cgroup.procs").unlink()
    cg.remove()
    assert not cg.cpu_dir.exists() and not cg.cpuacct_dir.exists()


def test_v2_fixture_enables_controller_and_reads_stat(fake_cgroup2):
    mounts = fake_cgroup2("cpuset cpu io memory pids")
    cg = cgroup.create("cfsim-lab-1-y", mounts)
    assert isinstance(cg, cgroup.V2Cgroup)
    assert (mounts.v2 / "cgroup.subtree_control").read_text() == "+cpu"
    cg.set_bandwidth(cgroup.Bandwidth(50000, 100000))
    assert (cg.dir / "cpu.max").read_text() == "50000 100000"
    assert cg.bandwidth() == cgroup.Bandwidth(50000, 100000, 0)
    (cg.dir / "cpu.max.burst").write_text("0")
    cg.set_bandwidth(cgroup.Bandwidth(None, 100000, 0))
    assert cg.bandwidth().quota_us is None
    (cg.dir / "cpu.stat").write_text(V2_STAT)
    assert cg.read_stat().nr_periods == 300
    cg.set_shares(1024)
    assert (cg.dir / "cpu.weight").read_text() == "39"


def test_create_refuses_without_cpu_controller(fake_cgroup2):
    with pytest.raises(FileNotFoundError, match="cpu controller"):
        cgroup.create("cfsim-lab-1-z", fake_cgroup2("memory pids"))


def test_remove_stale_only_touches_dead_owners(tmp_path):
    mounts = _fake_v1(tmp_path)
    dead = mounts.v1_cpu / "cfsim-lab-999999999-old"
    alive = mounts.v1_cpu / f"cfsim-lab-{__import__('os').getpid()}-mine"
    other = mounts.v1_cpu / "cfsim-kernel-test"
    for d in (dead, alive, other):
        d.mkdir()
    removed = cgroup.remove_stale(mounts)
    assert removed == [str(dead)]
    assert alive.exists() and other.exists()


def test_run_name_is_safe_and_carries_pid():
    name = cgroup.run_name("cpu-stream/p000_cpu_limit=0.5", pid=77)
    assert name.startswith("cfsim-lab-77-") and "/" not in name


def test_in_cgroups_enters_each_file_then_execs_with_the_same_pid(tmp_path):
    """The workload's launcher: the shell writes its own pid into every ``cgroup.procs`` of the
    run's cgroups (here plain files), then execs the command, which keeps that pid."""
    import subprocess

    from cfsim.lab.runner import in_cgroups

    class Fake:
        def __init__(self, *files):
            self.files = [tmp_path / f for f in files]

        def procs_files(self):
            return self.files

    argv = in_cgroups(["/bin/sh", "-c", 'echo "$$ $1"', "sh", "arg with space"], Fake("cpu", "cpuacct"),
                      None, Fake("memory"))
    proc = subprocess.run(argv, capture_output=True, text=True, check=True)
    pid, arg = proc.stdout.split(" ", 1)
    assert arg.strip() == "arg with space"
    for f in ("cpu", "cpuacct", "memory"):
        assert (tmp_path / f).read_text().strip() == pid
    # a cgroup that cannot be entered stops the launch before the command runs
    bad = in_cgroups(["/bin/echo", "ran"], Fake("missing-dir/cgroup.procs"))
    failed = subprocess.run(bad, capture_output=True, text=True)
    assert failed.returncode == 126 and "ran" not in failed.stdout


def test_root_placement_enters_each_cpu_hierarchys_root(tmp_path):
    """lab.tenant_cgroup = false: the tenants' busy loops start in the CPU controllers' root
    cgroup (each loop then weighs 1024 on its CPU), v1 cpu and cpuacct apart, else v2's root."""
    from cfsim.lab.runner import start_tenant

    v1 = cgroup.RootPlacement(cgroup.Mounts(v1_cpu=tmp_path / "cpu", v1_cpuacct=tmp_path / "cpuacct",
                                            v2=tmp_path / "unified"))
    assert v1.procs_files() == [tmp_path / "cpu" / "cgroup.procs", tmp_path / "cpuacct" / "cgroup.procs"]
    same = cgroup.RootPlacement(cgroup.Mounts(v1_cpu=tmp_path / "cpu,cpuacct", v1_cpuacct=tmp_path / "cpu,cpuacct"))
    assert same.procs_files() == [tmp_path / "cpu,cpuacct" / "cgroup.procs"]
    v2 = cgroup.RootPlacement(cgroup.Mounts(v2=tmp_path / "unified"))
    assert v2.procs_files() == [tmp_path / "unified" / "cgroup.procs"]

    started = []

    class Procs:
        def start(self, argv, log):
            started.append(argv)

    block = start_tenant(3, v1, Procs(), tmp_path)
    assert block["cgroup"] == "root" and block["shares"] is None and block["threads"] == 3
    assert len(started) == 3 and all(str(tmp_path / "cpu" / "cgroup.procs") in a for a in started)
    assert start_tenant(2, None, Procs(), tmp_path)["cgroup"] == "own"
    assert start_tenant(0, v1, Procs(), tmp_path) is None
