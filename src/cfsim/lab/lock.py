"""One real measurement at a time on this machine.

A lab run, a real-kernel comparison and a profile all measure CPU time, throttling and latency on
the same few CPUs: two of them at once would each measure the other. Every such measurement holds
this machine-wide lock (``flock`` on a file in ``/run/lock``, released by the kernel if the holder
dies, so a ``kill -9`` never leaves it stuck) for the duration of one run, so a grid's runs and a
test suite's kernel checks interleave instead of overlapping.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path
from typing import Iterator

#: the lock file; ``CFSIM_LAB_LOCK`` overrides it (tests, or several independent machines' worth
#: of CPUs made disjoint with cpusets)
DEFAULT_LOCK_PATH = Path("/run/lock/cfsim-lab.lock")
POLL_S = 0.2


class MachineBusy(TimeoutError):
    """Another real measurement held the lock for longer than the caller would wait."""


def lock_path() -> Path:
    env = os.environ.get("CFSIM_LAB_LOCK")
    if env:
        return Path(env)
    return DEFAULT_LOCK_PATH if DEFAULT_LOCK_PATH.parent.is_dir() else Path("/tmp/cfsim-lab.lock")


def holder(path: Path | None = None) -> str:
    """What the current holder wrote into the lock file (pid and what it measures), or ''."""
    try:
        return (path or lock_path()).read_text().strip()
    except OSError:
        return ""


@contextlib.contextmanager
def machine_lock(what: str, timeout_s: float | None = None) -> Iterator[float]:
    """Hold the machine's measurement lock while the block runs; yields the seconds waited.

    ``timeout_s``: give up with :class:`MachineBusy` after this long (None: wait as long as it
    takes). The holder's pid and ``what`` are written into the file for whoever waits.
    """
    path = lock_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    t0 = time.monotonic()
    try:
        while True:
            try:
                if timeout_s is None:
                    # block in the kernel: woken the moment the holder releases, not up to POLL_S
                    # later (a grid re-takes the lock within milliseconds between its runs)
                    fcntl.flock(fd, fcntl.LOCK_EX)
                else:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if timeout_s is not None and time.monotonic() - t0 >= timeout_s:
                    raise MachineBusy(f"another real measurement holds {path} ({holder(path) or 'unknown'}) "
                                      f"after {timeout_s:g} s of waiting") from None
                time.sleep(POLL_S)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}: {what}\n".encode(), 0)
        yield time.monotonic() - t0
    finally:
        os.close(fd)  # closing the descriptor releases the flock
