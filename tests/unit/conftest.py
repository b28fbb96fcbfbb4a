"""Fixtures shared by the unit tests."""
from __future__ import annotations

import pytest

from cfsim.lab import cgroup


@pytest.fixture
def fake_cgroup2(tmp_path):
    """A factory: ``fake_cgroup2("cpu memory pids")`` makes a fixture directory standing in for a
    cgroup2 mount whose root offers those controllers and delegates none yet (an empty
    ``cgroup.subtree_control``), and returns its :class:`~cfsim.lab.cgroup.Mounts`."""
    def make(controllers: str) -> cgroup.Mounts:
        root = tmp_path / "unified"
        root.mkdir()
        (root / "cgroup.controllers").write_text(controllers + "\n")
        (root / "cgroup.subtree_control").write_text("")
        return cgroup.Mounts(v2=root)
    return make
