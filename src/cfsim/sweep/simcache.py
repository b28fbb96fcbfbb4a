"""Reuse of identical simulations across fixes, searches, containers and worker processes.

A simulation is a pure function of its validated scenario (every key, defaults filled, the seed
and the duration included; :func:`cfsim.simulation.simulate`), and of the model's code. So its
summary can be stored under a content hash of the normalised scenario (:func:`scenario_key`: the
canonical JSON of every section and key, plus the bytes of a CSV arrival-rate file when the
scenario names one) and handed back whenever the same scenario comes again: the same ``before``
of two containers run from the same lab scenario, the same candidate limit searched for two
findings, the pessimistic variant of one search that another already simulated.

:class:`SimCache` keeps the summaries in this process and, given a folder, on disk too (one
pickle per key, written atomically; the folder is keyed by a fingerprint of the model's source,
so a changed model never reads stale answers), which is how the workers of a process pool or a
Dask cluster on a shared file system share them, and how a second audit of the same fleet reuses
the first one's work. A summary read back is the one the simulation returned (pickle keeps every
float bit for bit): results are identical with and without reuse.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pickle
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from cfsim.scenario import Scenario

__all__ = ["scenario_key", "code_fingerprint", "SimCache", "default_cache", "set_default_cache", "kept_default_cache",
           "summary_of"]


def _rate_file_digest(scenario: Scenario) -> str:
    rate = scenario.get("workload.rate_per_s")
    if isinstance(rate, str) and not rate.startswith("diurnal:"):
        try:
            return hashlib.sha256(Path(rate).read_bytes()).hexdigest()
        except OSError:
            return "unreadable"
    return ""


def scenario_key(scenario: Scenario) -> str:
    """A content hash of the normalised scenario: equal keys simulate identically."""
    text = json.dumps(scenario.data, sort_keys=True, separators=(",", ":"), default=repr)
    h = hashlib.sha256(text.encode())
    h.update(_rate_file_digest(scenario).encode())
    return h.hexdigest()


_FINGERPRINT: str | None = None


def code_fingerprint() -> str:
    """A hash of the model's Python source (every module of the cfsim package but the advice,
    command and lab layers, which do not change what a simulation returns)."""
    global _FINGERPRINT
    if _FINGERPRINT is None:
        root = Path(__file__).resolve().parents[1]
        h = hashlib.sha256()
        for p in sorted(root.rglob("*.py")):
            rel = p.relative_to(root).as_posix()
            if rel.split("/")[0] in ("advice", "commands", "lab", "sweep"):
                continue
            h.update(rel.encode())
            h.update(p.read_bytes())
        _FINGERPRINT = h.hexdigest()[:16]
    return _FINGERPRINT


#: Summaries kept in memory per process (the oldest are dropped first; the disk keeps them all):
#: a few tens of MB, so the memory of a long audit stays flat in the number of containers.
MEMORY_ENTRIES = 4096


class SimCache:
    """Summaries by :func:`scenario_key`, in memory and (with ``folder``) on disk.
    ``enabled=False`` simulates every time (the reference the reuse is tested against)."""

    def __init__(self, folder: str | Path | None = None, enabled: bool = True):
        self.enabled = enabled
        self.memory: dict[str, dict[str, Any]] = {}
        self.folder = Path(folder) / code_fingerprint() if folder else None
        self.hits = 0
        self.disk_hits = 0
        self.misses = 0
        self.simulated_s = 0.0

    def _path(self, key: str) -> Path:
        assert self.folder is not None
        return self.folder / key[:2] / f"{key}.pkl"

    def get(self, key: str) -> dict[str, Any] | None:
        if key in self.memory:
            self.hits += 1
            return self.memory[key]
        if self.folder is not None:
            try:
                with open(self._path(key), "rb") as fh:
                    value = pickle.load(fh)
            except (OSError, EOFError, pickle.UnpicklingError):
                return None
            self.memory[key] = value
            self.disk_hits += 1
            return value
        return None

    def put(self, key: str, value: dict[str, Any]) -> None:
        self.memory[key] = value
        while len(self.memory) > MEMORY_ENTRIES:
            del self.memory[next(iter(self.memory))]
        if self.folder is not None:
            path = self._path(key)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as fh:
                    pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
                os.replace(tmp, path)   # atomic: a reader sees the whole summary or none
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise

    def summary(self, scenario: Scenario, run: Callable[[Scenario], Mapping[str, Any]],
                stop: Any = None) -> dict[str, Any]:
        """``run(scenario)`` (a summary), or the stored one for an identical scenario. The caller
        gets its own copy (a dict it may change).

        With a ``stop`` rule (:func:`cfsim.simulation.simulate`; it has a ``key`` saying what it
        is) ``run`` is ``run(scenario, stop)``: a whole summary of the scenario answers too, and a
        run the rule stopped is kept under the scenario and the rule together, never as the whole
        run's summary."""
        if not self.enabled:
            return self._timed(run, scenario, stop)
        key = scenario_key(scenario)
        value = self.get(key)
        if value is None and stop is not None:
            stop_key = hashlib.sha256(f"{key}|{stop.key}".encode()).hexdigest()
            value = self.get(stop_key)
            if value is None:
                value = self._timed(run, scenario, stop)
                self.put(stop_key if "stopped_because" in value else key, value)
        elif value is None:
            value = self._timed(run, scenario, None)
            self.put(key, value)
        return dict(value)

    def _timed(self, run: Callable[..., Mapping[str, Any]], scenario: Scenario, stop: Any) -> dict[str, Any]:
        self.misses += 1
        t0 = time.perf_counter()
        value = dict(run(scenario) if stop is None else run(scenario, stop))
        self.simulated_s += time.perf_counter() - t0
        return value

    def stats(self) -> dict[str, float]:
        """Counts so far: simulations run, reused (from memory or disk), seconds spent simulating."""
        return {"simulated": self.misses, "reused": self.hits + self.disk_hits, "reused_from_disk": self.disk_hits,
                "simulated_s": self.simulated_s}


_DEFAULT: SimCache | None = None


def default_cache() -> SimCache:
    """This process's cache (memory only unless :func:`set_default_cache` gave it a folder)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = SimCache(os.environ.get("CFSIM_SIM_CACHE") or None)
    return _DEFAULT


def set_default_cache(folder: str | Path | None, enabled: bool = True) -> SimCache:
    """Give this process a fresh cache (on disk under ``folder`` when given; ``enabled=False``:
    no reuse at all)."""
    global _DEFAULT
    _DEFAULT = SimCache(folder, enabled)
    return _DEFAULT


@contextlib.contextmanager
def kept_default_cache() -> Iterator[None]:
    """This process's cache as it was, once the block ends: work that runs its tasks in this
    process and points them at a temporary folder (an audit's) must not leave later simulations
    writing into that folder after it is deleted."""
    global _DEFAULT
    saved = _DEFAULT
    try:
        yield
    finally:
        _DEFAULT = saved


def _full_summary(scenario: Scenario, stop: Any = None) -> dict[str, Any]:
    from cfsim.simulation import simulate

    return dict(simulate(scenario, stop=stop).summary)


def summary_of(scenario: Scenario, cache: SimCache | None = None, stop: Any = None) -> dict[str, Any]:
    """The simulated summary of ``scenario``, reused from ``cache`` (default: this process's);
    with ``stop`` (:class:`cfsim.advice.slo.StopOnceFailed`) it may be a stopped run's verdict."""
    return (cache or default_cache()).summary(scenario, _full_summary, stop)
