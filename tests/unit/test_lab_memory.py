"""The lab's memory side and neighbour accounting on fixtures (no root, no real cgroup needed):
v1 and v2 memory files, the cAdvisor memory families, /proc/stat and the harness/tenant split."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from cfsim.lab import cgroup, exporter, hostcpu

V1_MEM_STAT = ("cache 1000\nrss 2000\ntotal_cache 53248\ntotal_rss 229978112\ntotal_inactive_file 40960\n"
               "inactive_file 4096\nhierarchical_memory_limit 419430400\n")
V1_OOM = "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n"
V2_MEM_STAT = "anon 300000000\nfile 12288\ninactive_file 8192\nactive_file 4096\n"
V2_EVENTS = "low 0\nhigh 0\nmax 17\noom 2\noom_kill 1\noom_group_kill 0\n"


def test_parse_v1_memory_working_set_and_oom():
    m = cgroup.parse_v1_memory("268623872\n", "419430400\n", "419430400\n", "313\n", V1_MEM_STAT, V1_OOM)
    assert m.usage_bytes == 268623872 and m.max_usage_bytes == 419430400 and m.limit_bytes == 419430400
    assert m.working_set_bytes == 268623872 - 40960  # usage - total_inactive_file, as cAdvisor
    assert m.rss_bytes == 229978112 and m.cache_bytes == 53248 and m.failcnt == 313
    assert m.oom_kills == 1 == m.oom_events


def test_parse_v1_memory_unlimited_is_none():
    # PAGE_COUNTER_MAX * 4096, what an unlimited v1 group reports
    m = cgroup.parse_v1_memory("10\n", "20\n", "9223372036854771712\n", "0\n", "", "oom_kill 0\n")
    assert m.limit_bytes is None and m.working_set_bytes == 10 and m.oom_kills == 0


def test_parse_v2_memory_fixture():
    m = cgroup.parse_v2_memory("300012288\n", "310000000\n", "419430400\n", V2_MEM_STAT, V2_EVENTS)
    assert m.limit_bytes == 419430400 and m.max_usage_bytes == 310000000
    assert m.working_set_bytes == 300012288 - 8192 and m.rss_bytes == 300000000
    assert m.failcnt == 17 and m.oom_kills == 1 and m.oom_events == 2
    unlimited = cgroup.parse_v2_memory("5\n", None, "max\n", "", "")
    assert unlimited.limit_bytes is None and unlimited.max_usage_bytes is None and unlimited.oom_kills == 0


def test_v1_memory_cgroup_fixture(tmp_path):
    mounts = cgroup.Mounts(v1_memory=tmp_path / "memory")
    mounts.v1_memory.mkdir()
    mem = cgroup.create_memory("cfsim-lab-1-m", mounts)
    assert isinstance(mem, cgroup.V1MemoryCgroup) and mem.dir.is_dir()
    mem.set_limit(400 << 20)
    assert (mem.dir / "memory.limit_in_bytes").read_text() == str(400 << 20)
    mem.set_limit(None)
    assert (mem.dir / "memory.limit_in_bytes").read_text() == "-1"
    assert mem.reset_peak() and (mem.dir / "memory.max_usage_in_bytes").read_text() == "0"
    for f, text in {"memory.usage_in_bytes": "100\n", "memory.max_usage_in_bytes": "150\n",
                    "memory.limit_in_bytes": "9223372036854771712\n", "memory.failcnt": "0\n",
                    "memory.stat": "total_inactive_file 40\n", "memory.oom_control": "oom_kill 0\n"}.items():
        (mem.dir / f).write_text(text)
    m = mem.read()
    assert (m.usage_bytes, m.working_set_bytes, m.limit_bytes) == (100, 60, None)


def test_v2_memory_cgroup_fixture_enables_the_controller(fake_cgroup2):
    mounts = fake_cgroup2("cpu memory pids")
    mem = cgroup.create_memory("cfsim-lab-1-n", mounts)
    assert isinstance(mem, cgroup.V2MemoryCgroup)
    assert (mounts.v2 / "cgroup.subtree_control").read_text() == "+memory"
    mem.set_limit(64 << 20)
    assert (mem.dir / "memory.max").read_text() == str(64 << 20)
    mem.set_limit(None)
    assert (mem.dir / "memory.max").read_text() == "max"
    assert mem.reset_peak() is False  # per-fd on v2: the summary keeps the peak since creation
    for f, text in {"memory.current": "7\n", "memory.max": "max\n", "memory.stat": V2_MEM_STAT,
                    "memory.events": V2_EVENTS}.items():
        (mem.dir / f).write_text(text)
    assert mem.read().oom_kills == 1 and mem.read().max_usage_bytes is None


def test_no_memory_controller_is_a_clear_error(fake_cgroup2):
    with pytest.raises(FileNotFoundError, match="memory controller"):
        cgroup.create_memory("cfsim-lab-1-z", fake_cgroup2("cpu pids"))


def test_parse_mounts_finds_memory_and_proc_cgroup_placement():
    m = cgroup.parse_mounts("32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
                            "33 31 0:30 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n"
                            "36 31 0:33 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n")
    assert m.v1_memory == Path("/sys/fs/cgroup/memory")
    text = "4:memory:/process_api/abc\n2:cpuacct:/\n1:cpu:/x\n0::/\n"
    assert cgroup.parse_proc_cgroup(text) == {"memory": "/process_api/abc", "cpuacct": "/", "cpu": "/x", "": "/"}
    assert cgroup.cpu_placement(m, text) == [Path("/sys/fs/cgroup/cpu/x"), Path("/sys/fs/cgroup/cpuacct")]
    v2 = cgroup.Mounts(v2=Path("/sys/fs/cgroup"))
    assert cgroup.cpu_placement(v2, "0::/user.slice/a\n") == [Path("/sys/fs/cgroup/user.slice/a")]


def test_remove_stale_covers_the_memory_hierarchy(tmp_path):
    mounts = cgroup.Mounts(v1_cpu=tmp_path / "cpu", v1_cpuacct=tmp_path / "cpuacct", v1_memory=tmp_path / "memory")
    for d in (mounts.v1_cpu, mounts.v1_cpuacct, mounts.v1_memory):
        d.mkdir()
    dead = [d / "cfsim-lab-999999999-old" for d in (mounts.v1_cpu, mounts.v1_memory)]
    for d in dead:
        d.mkdir()
    assert sorted(cgroup.remove_stale(mounts)) == sorted(map(str, dead))


def test_emptying_a_cgroup_never_kills_this_process(tmp_path):
    d = tmp_path / "cfsim-lab-1-self"
    d.mkdir()
    (d / "cgroup.procs").write_text(f"{os.getpid()}\n")
    with pytest.raises(RuntimeError, match="inside it"):
        cgroup._kill_and_rmdir([d], 0.1)


def test_cadvisor_memory_families():
    mem = cgroup.MemoryStat(usage_bytes=300, max_usage_bytes=400, limit_bytes=None, working_set_bytes=250,
                            rss_bytes=200, cache_bytes=100, failcnt=3, oom_kills=1, oom_events=1)
    labels = exporter.ContainerLabels()
    v = {s.name: s.value for f in exporter.cadvisor_memory_families(mem, labels) for s in f.samples}
    assert v["container_memory_usage_bytes"] == 300 and v["container_memory_working_set_bytes"] == 250
    assert v["container_spec_memory_limit_bytes"] == 0  # cAdvisor's "unlimited"
    assert v["container_oom_events_total"] == 1 and v["container_memory_failcnt_total"] == 3


def test_parse_proc_stat_busy_and_steal():
    p = hostcpu.parse_proc_stat("cpu  100 0 50 800 50 0 0 10 0 0\ncpu0 1 2 3\n", hz=100)
    assert p.total_s == pytest.approx(10.1) and p.busy_s == pytest.approx(1.6) and p.steal_s == pytest.approx(0.1)


def _reading(t, busy_s, workload_ns, harness_ns, root_ns):
    return hostcpu.CpuReading(t, hostcpu.ProcStat(busy_s, 0.0, 0.0), workload_ns, harness_ns, root_ns)


def test_neighbours_split_host_cpu_into_workload_harness_tenants():
    a = _reading(100.0, 1000.0, 0, 0, 0)
    b = _reading(110.0, 1017.0, 5_000_000_000, 1_000_000_000, 16_000_000_000)
    n = hostcpu.neighbours(a, b, ncpu=2)
    assert n["host_busy_cores"] == pytest.approx(1.7) and n["workload_cores"] == pytest.approx(0.5)
    assert n["others_cores"] == pytest.approx(1.2)  # the first manifests' key, kept
    assert n["harness_cores"] == pytest.approx(0.1) and n["tenants_cores"] == pytest.approx(1.0)
    assert n["tenants_source"] == "root cgroup cpuacct"
    no_root = hostcpu.neighbours(_reading(0, 0, 0, 0, None), _reading(10, 17, 5e9, 1e9, None), ncpu=2)
    assert no_root["tenants_source"] == "/proc/stat" and no_root["tenants_cores"] == pytest.approx(1.1)
    with pytest.raises(ValueError, match="time order"):
        hostcpu.neighbours(b, a, ncpu=2)


def test_root_usage_reader_v1_and_v2(tmp_path):
    (tmp_path / "cpuacct.usage").write_text("123456\n")
    assert hostcpu.read_usage_ns(tmp_path / "cpuacct.usage") == 123456
    (tmp_path / "cpu.stat").write_text("usage_usec 42\nuser_usec 40\n")
    assert hostcpu.read_usage_ns(tmp_path / "cpu.stat") == 42_000
    assert hostcpu.read_usage_ns(None) is None


def test_snapshot_reads_every_counter_before_the_slow_http_reads(tmp_path, monkeypatch):
    """The host's and the cgroups' counters are read at the snapshot instant; only then the
    /metrics reads, which a throttled workload may answer seconds later."""
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from cfsim.lab import runner

    events: list[tuple[str, float]] = []

    class Slow(BaseHTTPRequestHandler):
        def do_GET(self):
            events.append(("http", time.time()))
            time.sleep(0.3)
            body = b"cfsim_requests_total 1\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=srv.serve_forever, daemon=True).start()

    class FakeCpu:
        def read_stat(self):
            events.append(("cgroup", time.time()))
            return cgroup.CpuStat(1, 0, 0, 0)

    monkeypatch.setattr(hostcpu, "read_proc_stat", lambda: (events.append(("proc_stat", time.time())),
                                                            hostcpu.ProcStat(1.0, 2.0, 0.0))[1])
    cgs = runner.RunCgroups(FakeCpu(), None, FakeCpu(), None)
    url = f"http://127.0.0.1:{srv.server_address[1]}"
    try:
        snap, reading = runner._snapshot(cgs, url, url, pid=os.getpid())
    finally:
        srv.shutdown()
    kinds = [k for k, _ in events]
    assert kinds.index("http") > max(i for i, k in enumerate(kinds) if k in ("proc_stat", "cgroup"))
    assert reading.t_s <= events[kinds.index("http")][1] and snap.t_s == reading.t_s
    assert snap.workload["cfsim_requests_total"] == 1 and snap.loadgen["cfsim_requests_total"] == 1
