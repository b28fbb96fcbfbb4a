"""The cgroups of one lab run: create, set the CFS bandwidth and the memory limit, move a
process in, read the counters, remove. cgroup v1 (``cpu``, ``cpuacct`` and ``memory`` may be
separate hierarchies, as on hosts that mount each controller on its own) and v2 (``cpu.max``,
``cpu.max.burst``, ``cpu.stat``, ``memory.max``, ``memory.current``, ``memory.peak``,
``memory.events``).

Every parser is a pure function of the file text so the unit tests run on fixture trees; the
classes only know paths, so a fixture directory can stand in for ``/sys/fs/cgroup``.

Kernel facts (``Documentation/scheduler/sched-bwc.rst``, ``cgroup-v2.rst``): v1 quota ``-1`` and
v2 ``max`` mean unlimited; v1 ``throttled_time`` is in ns and ``cpuacct.usage`` in ns, v2 reports
``usage_usec``/``throttled_usec``/``burst_usec`` in us. ``throttled_time`` is summed over CPUs.
Memory (``Documentation/admin-guide/cgroup-v1/memory.rst``, ``cgroup-v2.rst``): v1
``memory.limit_in_bytes`` of an unlimited group is PAGE_COUNTER_MAX pages (a huge number),
``memory.oom_control`` has ``oom_kill`` (kernel >= 4.13), the working set is usage minus
``total_inactive_file`` (as cAdvisor computes ``container_memory_working_set_bytes``); v2
``memory.max`` is ``max`` when unlimited, ``memory.events`` counts ``oom_kill``, the working set
is ``memory.current`` minus ``inactive_file`` of ``memory.stat``.
"""
from __future__ import annotations

import errno
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

PREFIX = "cfsim-lab-"  # every cgroup the lab creates starts with this (clean-up looks for it)


@dataclass(frozen=True)
class Bandwidth:
    """CFS bandwidth: quota_us None = unlimited."""

    quota_us: int | None
    period_us: int = 100_000
    burst_us: int = 0

    @property
    def cpu_limit_cores(self) -> float | None:
        return None if self.quota_us is None else self.quota_us / self.period_us


@dataclass(frozen=True)
class CpuStat:
    """Cumulative counters of one cgroup, in ns (v2's us are converted)."""

    usage_ns: int
    nr_periods: int
    nr_throttled: int
    throttled_ns: int
    nr_bursts: int = 0
    burst_ns: int = 0


@dataclass(frozen=True)
class MemoryStat:
    """A memory cgroup's counters at one instant, in bytes (None where the interface lacks it)."""

    usage_bytes: int
    max_usage_bytes: int | None  # peak since creation or the last reset
    limit_bytes: int | None  # None = unlimited
    working_set_bytes: int  # usage - inactive file pages (cAdvisor's working set)
    rss_bytes: int | None  # anonymous memory
    cache_bytes: int | None  # page cache
    failcnt: int | None  # times usage hit the limit (v1)
    oom_kills: int  # processes the OOM killer killed in this group
    oom_events: int  # times the group reached its limit and the OOM killer was invoked (v2 'oom'; v1: = oom_kills)


@dataclass(frozen=True)
class Mounts:
    """Where the controllers are mounted (None when absent)."""

    v1_cpu: Path | None = None
    v1_cpuacct: Path | None = None
    v2: Path | None = None
    v1_memory: Path | None = None


# -- pure parsers ----------------------------------------------------------------------------

def parse_keyed(text: str) -> dict[str, int]:
    """``cpu.stat``-style ``key value`` lines -> dict (non-integer lines are skipped)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


def parse_v1_stat(cpu_stat_text: str, cpuacct_usage_text: str) -> CpuStat:
    """v1 ``cpu.stat`` (ns) plus ``cpuacct.usage`` (ns)."""
    kv = parse_keyed(cpu_stat_text)
    return CpuStat(usage_ns=int(cpuacct_usage_text.strip()), nr_periods=kv.get("nr_periods", 0),
                   nr_throttled=kv.get("nr_throttled", 0), throttled_ns=kv.get("throttled_time", 0),
                   nr_bursts=kv.get("nr_bursts", 0), burst_ns=kv.get("burst_time", 0))


def parse_v2_stat(cpu_stat_text: str) -> CpuStat:
    """v2 ``cpu.stat`` (us fields) -> ns."""
    kv = parse_keyed(cpu_stat_text)
    return CpuStat(usage_ns=kv.get("usage_usec", 0) * 1000, nr_periods=kv.get("nr_periods", 0),
                   nr_throttled=kv.get("nr_throttled", 0), throttled_ns=kv.get("throttled_usec", 0) * 1000,
                   nr_bursts=kv.get("nr_bursts", 0), burst_ns=kv.get("burst_usec", 0) * 1000)


# v1 reports "no limit" as PAGE_COUNTER_MAX pages rounded to the page size; anything this large
# is no limit (the machine has less memory than 2^62 bytes)
V1_UNLIMITED_BYTES = 1 << 62


def parse_v1_memory(usage: str, max_usage: str, limit: str, failcnt: str, stat: str, oom_control: str) -> MemoryStat:
    """v1 ``memory.usage_in_bytes``, ``memory.max_usage_in_bytes``, ``memory.limit_in_bytes``,
    ``memory.failcnt``, ``memory.stat`` and ``memory.oom_control`` texts -> :class:`MemoryStat`."""
    kv, oom = parse_keyed(stat), parse_keyed(oom_control)
    used = int(usage.strip())
    lim = int(limit.strip())
    inactive = kv.get("total_inactive_file", kv.get("inactive_file", 0))
    kills = oom.get("oom_kill", 0)
    return MemoryStat(usage_bytes=used, max_usage_bytes=int(max_usage.strip()),
                      limit_bytes=None if lim >= V1_UNLIMITED_BYTES else lim,
                      working_set_bytes=max(0, used - inactive), rss_bytes=kv.get("total_rss", kv.get("rss")),
                      cache_bytes=kv.get("total_cache", kv.get("cache")), failcnt=int(failcnt.strip()),
                      oom_kills=kills, oom_events=kills)


def parse_v2_memory(current: str, peak: str | None, max_: str, stat: str, events: str) -> MemoryStat:
    """v2 ``memory.current``, ``memory.peak`` (kernel >= 5.19; None if absent), ``memory.max``,
    ``memory.stat`` and ``memory.events`` texts -> :class:`MemoryStat`."""
    kv, ev = parse_keyed(stat), parse_keyed(events)
    used = int(current.strip())
    m = max_.strip()
    return MemoryStat(usage_bytes=used, max_usage_bytes=None if peak is None else int(peak.strip()),
                      limit_bytes=None if m == "max" else int(m),
                      working_set_bytes=max(0, used - kv.get("inactive_file", 0)), rss_bytes=kv.get("anon"),
                      cache_bytes=kv.get("file"), failcnt=ev.get("max"), oom_kills=ev.get("oom_kill", 0),
                      oom_events=ev.get("oom", 0))


def parse_cpu_max(text: str) -> tuple[int | None, int]:
    """v2 ``cpu.max``: ``"max 100000"`` -> (None, 100000); ``"50000 100000"`` -> (50000, 100000)."""
    parts = text.split()
    quota = None if parts[0] == "max" else int(parts[0])
    period = int(parts[1]) if len(parts) > 1 else 100_000
    return quota, period


def shares_to_weight(shares: int) -> int:
    """v1 ``cpu.shares`` [2, 262144] -> v2 ``cpu.weight`` [1, 10000], the conversion runc and the
    kubelet use: 1 + (shares - 2) * 9999 / 262142."""
    shares = min(max(shares, 2), 262144)
    return 1 + ((shares - 2) * 9999) // 262142


def format_cpu_max(bw: Bandwidth) -> str:
    return f"{'max' if bw.quota_us is None else bw.quota_us} {bw.period_us}"


def parse_mounts(mountinfo_text: str) -> Mounts:
    """Find the v1 ``cpu``/``cpuacct`` and the v2 mount points in ``/proc/self/mountinfo``.

    The super options (after `` - ``) list the v1 controllers, e.g. ``rw,cpu,cpuacct``.
    """
    cpu = cpuacct = v2 = memory = None
    for line in mountinfo_text.splitlines():
        if " - " not in line:
            continue
        pre, post = line.split(" - ", 1)
        fields, tail = pre.split(), post.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        mount_point, fstype, opts = Path(fields[4]), tail[0], set(tail[2].split(","))
        if fstype == "cgroup":
            if "cpu" in opts and cpu is None:
                cpu = mount_point
            if "cpuacct" in opts and cpuacct is None:
                cpuacct = mount_point
            if "memory" in opts and memory is None:
                memory = mount_point
        elif fstype == "cgroup2" and v2 is None:
            v2 = mount_point
    return Mounts(cpu, cpuacct, v2, memory)


def v2_has(v2_root: Path, controller: str) -> bool:
    try:
        return controller in (v2_root / "cgroup.controllers").read_text().split()
    except OSError:
        return False


def v2_has_cpu(v2_root: Path) -> bool:
    return v2_has(v2_root, "cpu")


# -- cgroups -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class RootPlacement:
    """The CPU controllers' root cgroup as a place to start a process in: there it has no group
    weight of its own, and each of its runnable threads weighs by its nice level (1024 at nice 0)
    on its CPU's root runqueue (``kernel/sched/fair.c``), as a host's cgroup-less processes do."""

    mounts: Mounts

    def procs_files(self) -> list[Path]:
        """The root ``cgroup.procs`` of each CPU hierarchy (v1 ``cpu`` and ``cpuacct``, else v2)."""
        files = [m / "cgroup.procs" for m in (self.mounts.v1_cpu, self.mounts.v1_cpuacct) if m is not None]
        if not files and self.mounts.v2 is not None:
            files = [self.mounts.v2 / "cgroup.procs"]
        return list(dict.fromkeys(files))


class CpuCgroup(Protocol):
    name: str
    version: int

    def set_bandwidth(self, bw: Bandwidth) -> None: ...
    def set_shares(self, shares: int) -> None: ...
    def bandwidth(self) -> Bandwidth: ...
    def add_pid(self, pid: int) -> None: ...
    def procs_files(self) -> list[Path]: ...
    def pids(self) -> list[int]: ...
    def read_stat(self) -> CpuStat: ...
    def remove(self, timeout_s: float = 5.0) -> None: ...


def _write(path: Path, value: str) -> None:
    # one write() per value, as the kernel parses each write separately
    with open(path, "w") as f:
        f.write(value)


def _read_pids(path: Path) -> list[int]:
    try:
        return [int(x) for x in path.read_text().split()]
    except FileNotFoundError:
        return []


def _kill_and_rmdir(dirs: list[Path], timeout_s: float) -> None:
    """Kill what is left inside (our own workload only), then rmdir each directory.

    rmdir fails with EBUSY while a task is still attached, so wait for the exits."""
    deadline = time.monotonic() + timeout_s
    for d in dirs:
        while d.exists():
            pids = _read_pids(d / "cgroup.procs")
            if os.getpid() in pids:
                # the harness moves itself into its own cgroup during a run: never kill ourselves
                raise RuntimeError(f"refusing to empty {d}: this process ({os.getpid()}) is inside it")
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                d.rmdir()
            except FileNotFoundError:
                break
            except OSError as exc:
                if exc.errno not in (errno.EBUSY, errno.ENOTEMPTY) or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)


@dataclass
class _OneDirCgroup:
    """A cgroup that is one directory (v2, and v1 ``memory``): move a process in, list, remove."""

    name: str
    dir: Path

    def add_pid(self, pid: int) -> None:
        _write(self.dir / "cgroup.procs", str(pid))

    def procs_files(self) -> list[Path]:
        """The files a process writes its pid into to enter this cgroup."""
        return [self.dir / "cgroup.procs"]

    def pids(self) -> list[int]:
        return _read_pids(self.dir / "cgroup.procs")

    def remove(self, timeout_s: float = 5.0) -> None:
        _kill_and_rmdir([self.dir], timeout_s)


def _v2_child(mounts: Mounts, name: str, controller: str) -> Path:
    """The path of cgroup2 child ``name``, after making its parent delegate ``controller`` to it."""
    if mounts.v2 is None:
        raise FileNotFoundError("no cgroup2 hierarchy mounted")
    control = mounts.v2 / "cgroup.subtree_control"
    if control.exists() and controller not in control.read_text().split():
        _write(control, "+" + controller)
    return mounts.v2 / name


@dataclass
class V1Cgroup:
    """v1: a child in the ``cpu`` hierarchy (bandwidth, cpu.stat) and in ``cpuacct`` (usage).

    When both controllers share one hierarchy the two directories are the same."""

    name: str
    cpu_dir: Path
    cpuacct_dir: Path
    version: int = 1

    @classmethod
    def create(cls, mounts: Mounts, name: str) -> "V1Cgroup":
        if mounts.v1_cpu is None or mounts.v1_cpuacct is None:
            raise FileNotFoundError("no cgroup v1 cpu/cpuacct hierarchy mounted")
        cg = cls(name, mounts.v1_cpu / name, mounts.v1_cpuacct / name)
        cg.cpu_dir.mkdir()
        if cg.cpuacct_dir != cg.cpu_dir:
            try:
                cg.cpuacct_dir.mkdir()
            except BaseException:
                cg.cpu_dir.rmdir()
                raise
        return cg

    def set_bandwidth(self, bw: Bandwidth) -> None:
        # burst must stay <= quota after every single write: zero it first, set it last
        if (self.cpu_dir / "cpu.cfs_burst_us").exists():
            _write(self.cpu_dir / "cpu.cfs_burst_us", "0")
        _write(self.cpu_dir / "cpu.cfs_period_us", str(bw.period_us))
        _write(self.cpu_dir / "cpu.cfs_quota_us", "-1" if bw.quota_us is None else str(bw.quota_us))
        if bw.burst_us:
            _write(self.cpu_dir / "cpu.cfs_burst_us", str(bw.burst_us))

    def set_shares(self, shares: int) -> None:
        """CPU weight against other groups and root tasks (a Kubernetes CPU request x 1024)."""
        _write(self.cpu_dir / "cpu.shares", str(shares))

    def bandwidth(self) -> Bandwidth:
        def read(f: str, default: int) -> int:
            p = self.cpu_dir / f
            return int(p.read_text().strip()) if p.exists() else default

        quota = read("cpu.cfs_quota_us", -1)
        return Bandwidth(None if quota < 0 else quota, read("cpu.cfs_period_us", 100_000),
                         read("cpu.cfs_burst_us", 0))

    def add_pid(self, pid: int) -> None:
        for f in self.procs_files():
            _write(f, str(pid))

    def procs_files(self) -> list[Path]:
        """The files a process writes its pid into to enter this cgroup (two hierarchies when
        ``cpu`` and ``cpuacct`` are mounted apart)."""
        return [self.cpu_dir / "cgroup.procs"] + ([self.cpuacct_dir / "cgroup.procs"]
                                                   if self.cpuacct_dir != self.cpu_dir else [])

    def pids(self) -> list[int]:
        return _read_pids(self.cpu_dir / "cgroup.procs")

    def read_stat(self) -> CpuStat:
        return parse_v1_stat((self.cpu_dir / "cpu.stat").read_text(),
                             (self.cpuacct_dir / "cpuacct.usage").read_text())

    def remove(self, timeout_s: float = 5.0) -> None:
        dirs = [self.cpu_dir] + ([self.cpuacct_dir] if self.cpuacct_dir != self.cpu_dir else [])
        _kill_and_rmdir(dirs, timeout_s)


@dataclass
class V2Cgroup(_OneDirCgroup):
    """v2: one directory with ``cpu.max``, ``cpu.max.burst`` and ``cpu.stat``."""

    version: int = 2

    @classmethod
    def create(cls, mounts: Mounts, name: str) -> "V2Cgroup":
        cg = cls(name, _v2_child(mounts, name, "cpu"))
        cg.dir.mkdir()
        return cg

    def set_bandwidth(self, bw: Bandwidth) -> None:
        burst = self.dir / "cpu.max.burst"
        if burst.exists():
            _write(burst, "0")
        _write(self.dir / "cpu.max", format_cpu_max(bw))
        if bw.burst_us:
            _write(burst, str(bw.burst_us))

    def set_shares(self, shares: int) -> None:
        _write(self.dir / "cpu.weight", str(shares_to_weight(shares)))

    def bandwidth(self) -> Bandwidth:
        quota, period = parse_cpu_max((self.dir / "cpu.max").read_text())
        burst_path = self.dir / "cpu.max.burst"
        burst = int(burst_path.read_text().strip()) if burst_path.exists() else 0
        return Bandwidth(quota, period, burst)

    def read_stat(self) -> CpuStat:
        return parse_v2_stat((self.dir / "cpu.stat").read_text())


class MemoryCgroup(Protocol):
    name: str
    version: int
    dir: Path

    def set_limit(self, limit_bytes: int | None) -> None: ...
    def reset_peak(self) -> bool: ...
    def add_pid(self, pid: int) -> None: ...
    def procs_files(self) -> list[Path]: ...
    def pids(self) -> list[int]: ...
    def read(self) -> MemoryStat: ...
    def remove(self, timeout_s: float = 5.0) -> None: ...


@dataclass
class V1MemoryCgroup(_OneDirCgroup):
    """v1: a child in the ``memory`` hierarchy."""

    version: int = 1

    @classmethod
    def create(cls, mounts: Mounts, name: str) -> "V1MemoryCgroup":
        if mounts.v1_memory is None:
            raise FileNotFoundError("no cgroup v1 memory hierarchy mounted")
        cg = cls(name, mounts.v1_memory / name)
        cg.dir.mkdir()
        return cg

    def set_limit(self, limit_bytes: int | None) -> None:
        _write(self.dir / "memory.limit_in_bytes", "-1" if limit_bytes is None else str(int(limit_bytes)))

    def reset_peak(self) -> bool:
        """Restart ``memory.max_usage_in_bytes`` from the current usage (v1: write 0)."""
        _write(self.dir / "memory.max_usage_in_bytes", "0")
        return True

    def read(self) -> MemoryStat:
        def text(f: str) -> str:
            return (self.dir / f).read_text()
        return parse_v1_memory(text("memory.usage_in_bytes"), text("memory.max_usage_in_bytes"),
                               text("memory.limit_in_bytes"), text("memory.failcnt"), text("memory.stat"),
                               text("memory.oom_control"))


@dataclass
class V2MemoryCgroup(_OneDirCgroup):
    """v2: the memory files of the run's one cgroup directory (shared with the CPU side)."""

    version: int = 2

    @classmethod
    def create(cls, mounts: Mounts, name: str) -> "V2MemoryCgroup":
        cg = cls(name, _v2_child(mounts, name, "memory"))
        cg.dir.mkdir(exist_ok=True)  # the CPU side may have created it already
        return cg

    def set_limit(self, limit_bytes: int | None) -> None:
        _write(self.dir / "memory.max", "max" if limit_bytes is None else str(int(limit_bytes)))

    def reset_peak(self) -> bool:
        # v2 memory.peak resets only for the file descriptor that wrote it (kernel >= 6.12):
        # the summary keeps the peak since creation instead
        return False

    def read(self) -> MemoryStat:
        peak = self.dir / "memory.peak"
        return parse_v2_memory((self.dir / "memory.current").read_text(),
                               peak.read_text() if peak.exists() else None, (self.dir / "memory.max").read_text(),
                               (self.dir / "memory.stat").read_text(), (self.dir / "memory.events").read_text())


def create_memory(name: str, mounts: Mounts | None = None, version: int | None = None) -> V1MemoryCgroup | V2MemoryCgroup:
    """The memory cgroup beside the CPU one (same name): v1 ``memory`` when mounted, else v2
    with the memory controller; ``version`` forces one."""
    mounts = mounts or read_mounts()
    if version == 1 or (version is None and mounts.v1_memory is not None):
        return V1MemoryCgroup.create(mounts, name)
    if mounts.v2 is None or not v2_has(mounts.v2, "memory"):
        raise FileNotFoundError("no cgroup with a memory controller: neither v1 'memory' nor cgroup2 with 'memory'")
    return V2MemoryCgroup.create(mounts, name)


def read_mounts(mountinfo: Path = Path("/proc/self/mountinfo")) -> Mounts:
    return parse_mounts(mountinfo.read_text())


def create(name: str, mounts: Mounts | None = None, version: int | None = None) -> V1Cgroup | V2Cgroup:
    """Create the cgroup: v1 when the v1 cpu controller is mounted (it takes precedence, as for
    the Go runtime), else v2 with the cpu controller; ``version`` forces one."""
    mounts = mounts or read_mounts()
    if version == 1 or (version is None and mounts.v1_cpu is not None):
        return V1Cgroup.create(mounts, name)
    if mounts.v2 is None or not v2_has_cpu(mounts.v2):
        raise FileNotFoundError("no cgroup with a cpu controller: neither v1 'cpu' nor cgroup2 with 'cpu'")
    return V2Cgroup.create(mounts, name)


def parse_proc_cgroup(text: str) -> dict[str, str]:
    """``/proc/<pid>/cgroup`` -> controller (or ``""`` for cgroup2) -> path inside its hierarchy."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for ctrl in (parts[1].split(",") if parts[1] else [""]):
            out[ctrl] = parts[2]
    return out


def cpu_placement(mounts: Mounts, proc_cgroup_text: str) -> list[Path]:
    """The directories of the CPU hierarchies a process is in (v1 ``cpu`` and ``cpuacct``, or its
    cgroup2 directory), to put it back after a run moved it."""
    paths = parse_proc_cgroup(proc_cgroup_text)
    dirs: list[Path] = []
    if mounts.v1_cpu is not None and "cpu" in paths:
        dirs.append(mounts.v1_cpu / paths["cpu"].lstrip("/"))
        if mounts.v1_cpuacct is not None and mounts.v1_cpuacct != mounts.v1_cpu and "cpuacct" in paths:
            dirs.append(mounts.v1_cpuacct / paths["cpuacct"].lstrip("/"))
    elif mounts.v2 is not None and "" in paths:
        dirs.append(mounts.v2 / paths[""].lstrip("/"))
    return dirs


def move_pid(pid: int, dirs: list[Path]) -> None:
    """Write ``pid`` (the whole thread group) into each directory's ``cgroup.procs``."""
    for d in dirs:
        _write(d / "cgroup.procs", str(pid))


def run_name(run_id: str, pid: int | None = None) -> str:
    """Cgroup name carrying the owner's pid, so a later run can tell stale leftovers."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)[:60]
    return f"{PREFIX}{pid or os.getpid()}-{safe}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale(mounts: Mounts | None = None) -> list[str]:
    """Remove lab cgroups left by a lab process that died (e.g. SIGKILL). Only ``cfsim-lab-<pid>-*``
    directories whose owner pid is gone are touched; other engineers' cgroups are left alone."""
    mounts = mounts or read_mounts()
    removed: list[str] = []
    for root in (mounts.v1_cpu, mounts.v1_cpuacct, mounts.v1_memory, mounts.v2):
        if root is None or not root.is_dir():
            continue
        for d in root.glob(f"{PREFIX}*"):
            owner = d.name[len(PREFIX):].split("-", 1)[0]
            if owner.isdigit() and not _pid_alive(int(owner)) and d.is_dir():
                _kill_and_rmdir([d], 5.0)
                removed.append(str(d))
    return removed
