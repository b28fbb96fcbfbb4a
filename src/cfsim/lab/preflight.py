"""Can this machine run the lab? One clear message per missing piece, with the fix."""
from __future__ import annotations

import os
from dataclasses import dataclass

from cfsim.lab import build, cgroup, prometheus


class LabUnavailable(RuntimeError):
    """The lab cannot run here; the message says why and how to fix it."""


@dataclass(frozen=True)
class Tools:
    go: str
    prometheus: str
    mounts: cgroup.Mounts


def cgroup_problem(mounts: cgroup.Mounts) -> str | None:
    """None if a CPU cgroup can be created here, else the reason and the fix."""
    if os.geteuid() != 0:
        return ("not root: the lab creates CPU cgroups and writes their CFS quota; "
                "run as root (e.g. sudo python -m cfsim lab ...)")
    if mounts.v1_cpu is not None:
        root = mounts.v1_cpu
        if mounts.v1_cpuacct is None:
            return "cgroup v1 'cpu' is mounted but 'cpuacct' is not: mount it (mount -t cgroup -o cpuacct ...)"
    elif mounts.v2 is not None and cgroup.v2_has_cpu(mounts.v2):
        root = mounts.v2
    else:
        return ("no cgroup with a CPU controller: mount cgroup v1 'cpu,cpuacct' or cgroup2 with the cpu "
                "controller enabled (a container needs --privileged or a delegated cgroup)")
    if not os.access(root, os.W_OK):
        return f"{root} is not writable: remount it read-write (containers: --privileged or --cgroupns=host)"
    return None


def check(need_prometheus: bool = True) -> Tools:
    """Raise :class:`LabUnavailable` naming the first missing piece and its fix."""
    mounts = cgroup.read_mounts()
    problem = cgroup_problem(mounts)
    if problem:
        raise LabUnavailable(problem)
    go = build.go_binary()
    lab = build.lab_dir()
    have_bins = all((lab / "bin" / b).exists() for b in build.BINARIES)
    if go is None and not have_bins:
        raise LabUnavailable("Go is not installed: install Go >= 1.25 (https://go.dev/dl/) so the lab can build "
                             "its workload, or build lab/ elsewhere with `go build -o bin/ ./cmd/...`")
    prom = prometheus.prometheus_binary()
    if need_prometheus and prom is None:
        raise LabUnavailable("Prometheus is not installed: apt-get install prometheus")
    return Tools(go or "", prom or "", mounts)
