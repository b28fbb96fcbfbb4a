"""Per-run seeds from one root :class:`numpy.random.SeedSequence`.

Each run is identified by a stable key (its grid point, as canonical JSON, and its replicate
index). The key is hashed into a ``spawn_key``, so the seed of a run depends only on the root
entropy and on what the run *is* -- never on the executor, the worker count or the order in
which runs are handed out, and adding an axis value to a study does not change the other seeds.

>>> a = run_seed(42, {"cgroup.cpu_limit": 1.5, "go.gomaxprocs": "host"}, 0)
>>> a == run_seed(42, {"go.gomaxprocs": "host", "cgroup.cpu_limit": 1.5}, 0)
True
>>> a != run_seed(42, {"cgroup.cpu_limit": 1.5, "go.gomaxprocs": "host"}, 1)
True
>>> 0 <= a < 2**53
True
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

import numpy as np

__all__ = ["point_key", "point_id", "run_seed", "fresh_root_seed"]


def point_key(point: Mapping[str, Any]) -> str:
    """Canonical text of a grid point: sorted keys, JSON values (1 and 1.0 differ, as in TOML)."""
    return json.dumps(dict(sorted(point.items())), sort_keys=True, separators=(",", ":"))


def point_id(point: Mapping[str, Any]) -> str:
    """A short stable identifier of a grid point (16 hex digits of SHA-256 of its key)."""
    return hashlib.sha256(point_key(point).encode()).hexdigest()[:16]


def _spawn_key(point: Mapping[str, Any], replicate: int) -> tuple[int, ...]:
    digest = hashlib.sha256(point_key(point).encode()).digest()
    words = tuple(int.from_bytes(digest[i:i + 4], "little") for i in range(0, 32, 4))
    return words + (int(replicate),)


def run_seed(root: int, point: Mapping[str, Any], replicate: int) -> int:
    """The ``run.seed`` of one run: a 53-bit integer (exact in TOML, JSON and float64)."""
    seq = np.random.SeedSequence(entropy=int(root), spawn_key=_spawn_key(point, replicate))
    return int(seq.generate_state(1, np.uint64)[0] >> np.uint64(11))


def fresh_root_seed() -> int:
    """New 128-bit root entropy from the OS (recorded in the manifest so the study repeats)."""
    return int(np.random.SeedSequence().entropy)
