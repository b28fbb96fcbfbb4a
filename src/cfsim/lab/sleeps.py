"""Why the workload's threads sleep: each voluntary switch of one of its threads, by its call chain.

``os_thread_sleeps_per_item`` (:mod:`cfsim.lab.threads`) counts the Ms' sleeps from their voluntary
context switches; it cannot say what put an M to sleep. ``lab.sleep_stacks_s`` records, for that
many seconds in the measured window, every switch away from a thread of the workload that blocked
(``perf record -e sched:sched_switch --filter 'prev_state == 1' -g -p <pid>``: ``TASK_INTERRUPTIBLE``,
the state a futex wait, ``nanosleep`` or ``epoll_wait`` leaves a task in) with its call chain, and
counts them by the Go runtime function that went to sleep (:func:`sleep_cause`, the functions of
``src/runtime/proc.go``, ``mgc.go`` and ``lock_futex.go``):

============== =====================================================================================
idle           ``stopm`` with no cause below: an M that found no goroutine to run (``findRunnable``)
               or handed its P off, asleep until ``startm``/``wakep`` wakes it
stw_stopped    ``gcstopm``: an M at its safe point during a stop-the-world
stw_coordinator ``stopTheWorldWithSema``: the M stopping the world, waiting for the last P
ragged_barrier ``forEachP`` in ``gcMarkDone``: the coordinator waiting for every P to flush its
               write-barrier buffer and work cache; it sleeps 100 us at a time and preempts every
               running P again after each (``forEachPInternal``: ``notetsleep(&sched.safePointNote,
               100*1000)``, ``preemptall``), so a long barrier is many sleeps
cache_flush    ``forEachP`` in ``gcMarkTermination`` (``mcache.prepareForSweep`` on every P, after
               the world restarts), the same loop
runtime_lock   ``lock2``: a contended runtime lock (the heap's, the scheduler's, ...) after its spins
steal_backoff  ``runqgrab``'s 3 us ``usleep`` before it steals a running P's ``runnext``
netpoll        ``netpoll`` blocking in ``epoll_pwait`` (the M that waits for the network)
sysmon         the system monitor's own sleeps (``sysmon``: ``usleep``, ``notetsleep``)
other          none of these (a system call of the program, a locked thread, ...)
============== =====================================================================================

The manifest's ``thread_sleeps`` block holds the counts a second (and their sum less sysmon's, the
figure ``os_thread_sleeps_per_item`` compares) so the model's Ms can be compared cause by cause.
Needs ``perf`` and tracefs, as ``lab.perf_s`` does (:mod:`cfsim.lab.perf`).
"""
from __future__ import annotations

import subprocess
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from cfsim.lab.perf import PerfError, perf_binary, run_tool
from cfsim.lab.probe import WindowProbe

#: the causes, in the order a call chain is tested for them: the first whose function is on the
#: chain wins (a contended lock inside ``stopm`` is the lock's sleep; a ``stopm`` inside
#: ``gcstopm`` is the stop's)
CAUSE_FUNCTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("runtime_lock", ("runtime.lock2",)),
    ("steal_backoff", ("runtime.runqgrab",)),
    ("forEachP", ("runtime.forEachPInternal", "runtime.forEachP")),
    ("stw_coordinator", ("runtime.stopTheWorldWithSema",)),
    ("stw_stopped", ("runtime.gcstopm",)),
    ("sysmon", ("runtime.sysmon",)),
    ("netpoll", ("runtime.netpoll",)),
    ("idle", ("runtime.stopm",)),
)
#: every cause :func:`sleep_cause` returns
CAUSES = ("idle", "stw_stopped", "stw_coordinator", "ragged_barrier", "cache_flush", "runtime_lock",
          "steal_backoff", "netpoll", "sysmon", "other")


def _function(frame: str) -> str:
    """A frame's function without its offset or Go ABI suffix (``runtime.futex.abi0+0x17`` ->
    ``runtime.futex``)."""
    name = frame.split("+0x", 1)[0].strip()
    return name[:-5] if name.endswith(".abi0") else name


def sleep_cause(frames: Sequence[str]) -> str:
    """The cause of one voluntary switch from its call chain (leaf first, as ``perf script`` prints
    it; kernel frames are ignored).

    >>> sleep_cause(["__schedule", "runtime.futex.abi0", "runtime.futexsleep", "runtime.notesleep",
    ...              "runtime.mPark", "runtime.stopm", "runtime.findRunnable", "runtime.schedule"])
    'idle'
    >>> sleep_cause(["runtime.futex.abi0", "runtime.semasleep", "runtime.lock2",
    ...              "runtime.(*mheap).allocSpan", "runtime.mallocgc"])
    'runtime_lock'
    >>> sleep_cause(["runtime.futex", "runtime.notetsleep", "runtime.forEachPInternal",
    ...              "runtime.gcMarkDone.forEachP.func5", "runtime.systemstack", "runtime.gcMarkDone"])
    'ragged_barrier'
    >>> sleep_cause(["main.handler", "net/http.(*conn).serve"])
    'other'
    """
    names = {_function(f) for f in frames}
    for cause, functions in CAUSE_FUNCTIONS:
        if any(fn in names for fn in functions):
            if cause != "forEachP":
                return cause
            # gcMarkDone calls gcMarkTermination, so the inner one is tested first
            chain = " ".join(frames)
            if "gcMarkTermination" in chain:
                return "cache_flush"
            if "gcMarkDone" in chain:
                return "ragged_barrier"
            return "other"
    return "other"


def parse_switch_script(text: str) -> Counter:
    """Counts by cause from ``perf script -F tid,ip,sym`` of a ``sched:sched_switch`` recording with
    call chains: one event a block, its first line the thread id, then one ``address symbol`` line
    a frame. Raises ValueError naming the line of a block that has no thread id.

    >>> parse_switch_script("7 \\n\\tffff __schedule\\n\\t94763 runtime.futex.abi0\\n"
    ...                     "\\t2a runtime.stopm\\n\\n8 \\n\\t1 runtime.usleep.abi0\\n\\t2 runtime.sysmon\\n")
    Counter({'idle': 1, 'sysmon': 1})
    """
    counts: Counter = Counter()
    frames: list[str] = []
    in_block = False
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            if in_block:
                counts[sleep_cause(frames)] += 1
            frames, in_block = [], False
            continue
        if not in_block:
            if not line.strip().isdigit():
                raise ValueError(f"perf script line {lineno}: expected a thread id, got {line.strip()[:60]!r}")
            in_block = True
            continue
        parts = line.split(None, 1)
        if len(parts) == 2:
            frames.append(parts[1])
    if in_block:
        counts[sleep_cause(frames)] += 1
    return counts


def summarise_sleeps(counts: Counter, seconds: float) -> dict[str, Any]:
    """The manifest's ``thread_sleeps`` figures: counts a second by cause (every cause listed) and
    the Ms' sleeps a second (all but sysmon's).

    >>> s = summarise_sleeps(Counter({"idle": 30, "sysmon": 10}), 10.0)
    >>> s["per_s"]["idle"], s["m_sleeps_per_s"], s["sleeps"]
    (3.0, 3.0, 40)
    """
    per_s = {c: round(counts.get(c, 0) / seconds, 3) for c in CAUSES}
    total = sum(counts.values())
    return {"sleeps": total, "per_s": per_s,
            "m_sleeps_per_s": round((total - counts.get("sysmon", 0)) / seconds, 3),
            "rules": "first of " + ", ".join(c for c, _ in CAUSE_FUNCTIONS) + " on the call chain "
                     "(forEachP split into ragged_barrier / cache_flush by gcMarkDone / gcMarkTermination)"}


def thread_sleeps_per_item(block: dict[str, Any], items_per_s: float | None) -> dict[str, float]:
    """A manifest's ``thread_sleeps`` block as ``os_thread_sleeps_<cause>_per_item`` keys (every
    cause of :data:`CAUSES`), the sleeps a second over the items a second; empty when the probe did
    not run, failed, or no item completed.

    >>> thread_sleeps_per_item({"per_s": {"idle": 300.0, "sysmon": 60.0}, "error": None}, 10_000.0)["os_thread_sleeps_idle_per_item"]
    0.03
    >>> thread_sleeps_per_item({"per_s": {"idle": 1.0}, "error": "PerfError: ..."}, 10.0)
    {}
    """
    per_s = block.get("per_s")
    if not per_s or block.get("error") or not items_per_s:
        return {}
    return {f"os_thread_sleeps_{c}_per_item": float(per_s.get(c, 0.0)) / items_per_s for c in CAUSES}


class SleepProbe(WindowProbe):
    """``perf record`` of the voluntary switches of one pid's threads for ``seconds``, in the
    background; ``result`` is :func:`summarise_sleeps`'s block, ``error`` what went wrong."""

    errors = (OSError, PerfError, ValueError, subprocess.SubprocessError)

    def __init__(self, pid: int, seconds: float):
        super().__init__("cfsim-lab-sleeps")
        self.pid, self.seconds = pid, seconds

    def measure(self) -> dict[str, Any]:
        perf = perf_binary()
        with tempfile.TemporaryDirectory(prefix="cfsim-sleeps-") as tmp:
            data = Path(tmp) / "perf.data"
            run_tool([perf, "record", "-q", "-e", "sched:sched_switch", "--filter", "prev_state == 1", "-g",
                      "-p", str(self.pid), "-o", str(data), "--", "sleep", f"{self.seconds:g}"],
                     "perf record -e sched:sched_switch", self.seconds + 60, makes=data)
            script = run_tool([perf, "script", "-i", str(data), "-F", "tid,ip,sym"], "perf script", 300)
            return summarise_sleeps(parse_switch_script(script), self.seconds)
