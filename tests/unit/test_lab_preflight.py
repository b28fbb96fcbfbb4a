"""One clear message, with the fix, for each thing the lab needs."""
from __future__ import annotations

import pytest

from cfsim.lab import build, cgroup, preflight, prometheus


def test_not_root(monkeypatch):
    monkeypatch.setattr(preflight.os, "geteuid", lambda: 1000)
    msg = preflight.cgroup_problem(cgroup.Mounts())
    assert msg.startswith("not root") and "sudo" in msg


def test_no_cpu_controller(monkeypatch, fake_cgroup2):
    monkeypatch.setattr(preflight.os, "geteuid", lambda: 0)
    assert "no cgroup with a CPU controller" in preflight.cgroup_problem(fake_cgroup2("memory pids"))


def test_read_only_cgroup(monkeypatch, tmp_path):
    monkeypatch.setattr(preflight.os, "geteuid", lambda: 0)
    monkeypatch.setattr(preflight.os, "access", lambda p, m: False)
    msg = preflight.cgroup_problem(cgroup.Mounts(v1_cpu=tmp_path, v1_cpuacct=tmp_path))
    assert "not writable" in msg


def _all_but(monkeypatch, tmp_path, missing: str) -> None:
    monkeypatch.setattr(preflight, "cgroup_problem", lambda m: None)
    monkeypatch.setattr(preflight.cgroup, "read_mounts", lambda: cgroup.Mounts())
    monkeypatch.setattr(build, "go_binary", lambda: None if missing == "go" else "/usr/bin/go")
    monkeypatch.setattr(build, "lab_dir", lambda: tmp_path)  # no lab/bin here
    monkeypatch.setattr(prometheus, "prometheus_binary",
                        lambda: None if missing == "prometheus" else "/usr/bin/prometheus")


def test_no_prometheus_names_the_apt_package(monkeypatch, tmp_path):
    _all_but(monkeypatch, tmp_path, "prometheus")
    with pytest.raises(preflight.LabUnavailable, match="apt-get install prometheus"):
        preflight.check()


def test_no_go(monkeypatch, tmp_path):
    _all_but(monkeypatch, tmp_path, "go")
    with pytest.raises(preflight.LabUnavailable, match="Go is not installed"):
        preflight.check()


def test_build_error_is_clear(monkeypatch, tmp_path):
    with pytest.raises(build.BuildError, match="no Go module"):
        build.build(tmp_path)
