"""A CPU cgroup for one lab run: create, set the CFS bandwidth, move a process in, read the
counters, remove. cgroup v1 (``cpu`` and ``cpuacct`` may be separate hierarchies, as on hosts
that mount each controller on its own) and v2 (``cpu.max``, ``cpu.max.burst``, ``cpu.stat``).

Every parser is a pure function of the file text so the unit tests run on fixture trees; the
classes only know paths, so a fixture directory can stand in for ``/sys/fs/cgroup``.

Kernel facts (``Documentation/scheduler/sched-bwc.rst``, ``cgroup-v2.rst``): v1 quota ``-1`` and
v2 ``max`` mean unlimited; v1 ``throttled_time`` is in ns and ``cpuacct.usage`` in ns, v2 reports
``usage_usec``/``throttled_usec``/``burst_usec`` in us. ``throttled_time`` is summed over CPUs.
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
class Mounts:
    """Where the CPU controllers are mounted (None when absent)."""

    v1_cpu: Path | None = None
    v1_cpuacct: Path | None = None
    v2: Path | None = None


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
    cpu = cpuacct = v2 = None
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
        elif fstype == "cgroup2" and v2 is None:
            v2 = mount_point
    return Mounts(cpu, cpuacct, v2)


def v2_has_cpu(v2_root: Path) -> bool:
    try:
        return "cpu" in (v2_root / "cgroup.controllers").read_text().split()
    except OSError:
        return False


# -- cgroups -----------------------------------------------------------------------------------

class CpuCgroup(Protocol):
    name: str
    version: int

    def set_bandwidth(self, bw: Bandwidth) -> None: ...
    def set_shares(self, shares: int) -> None: ...
    def bandwidth(self) -> Bandwidth: ...
    def add_pid(self, pid: int) -> None: ...
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
        _write(self.cpu_dir / "cgroup.procs", str(pid))
        if self.cpuacct_dir != self.cpu_dir:
            _write(self.cpuacct_dir / "cgroup.procs", str(pid))

    def pids(self) -> list[int]:
        return _read_pids(self.cpu_dir / "cgroup.procs")

    def read_stat(self) -> CpuStat:
        return parse_v1_stat((self.cpu_dir / "cpu.stat").read_text(),
                             (self.cpuacct_dir / "cpuacct.usage").read_text())

    def remove(self, timeout_s: float = 5.0) -> None:
        dirs = [self.cpu_dir] + ([self.cpuacct_dir] if self.cpuacct_dir != self.cpu_dir else [])
        _kill_and_rmdir(dirs, timeout_s)


@dataclass
class V2Cgroup:
    """v2: one directory with ``cpu.max``, ``cpu.max.burst`` and ``cpu.stat``."""

    name: str
    dir: Path
    version: int = 2

    @classmethod
    def create(cls, mounts: Mounts, name: str) -> "V2Cgroup":
        if mounts.v2 is None:
            raise FileNotFoundError("no cgroup2 hierarchy mounted")
        root = mounts.v2
        # the parent must delegate the cpu controller to its children
        control = root / "cgroup.subtree_control"
        if control.exists() and "cpu" not in control.read_text().split():
            _write(control, "+cpu")
        cg = cls(name, root / name)
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

    def add_pid(self, pid: int) -> None:
        _write(self.dir / "cgroup.procs", str(pid))

    def pids(self) -> list[int]:
        return _read_pids(self.dir / "cgroup.procs")

    def read_stat(self) -> CpuStat:
        return parse_v2_stat((self.dir / "cpu.stat").read_text())

    def remove(self, timeout_s: float = 5.0) -> None:
        _kill_and_rmdir([self.dir], timeout_s)


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
    for root in (mounts.v1_cpu, mounts.v1_cpuacct, mounts.v2):
        if root is None or not root.is_dir():
            continue
        for d in root.glob(f"{PREFIX}*"):
            owner = d.name[len(PREFIX):].split("-", 1)[0]
            if owner.isdigit() and not _pid_alive(int(owner)) and d.is_dir():
                _kill_and_rmdir([d], 5.0)
                removed.append(str(d))
    return removed
