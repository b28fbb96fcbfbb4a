"""Per-thread CPU and wake-ups of the workload over a run's window, from
``/proc/<pid>/task/<tid>/schedstat`` (``kernel/sched/stats.c: show_schedstat``'s per-task line:
time on a CPU [ns], time waiting on a runqueue [ns], number of times run on a CPU).

A Go process's threads are its Ms and sysmon; ``schedstat`` tells how often each was switched in
(after a sleep, or after being preempted) and how much CPU each used: the thread with many
switch-ins and little CPU is sysmon polling, the rest are Ms. A run's manifest keeps the per-thread
differences over the window (``threads``), so the runtime's wake-ups per request can be compared
with a twin's (``os_thread_wakes_per_s``) from measurements rather than priors.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

Schedstat = tuple[int, int, int]   # (run_ns, wait_ns, timeslices)


def parse_schedstat(text: str) -> Schedstat:
    """One ``schedstat`` line.

    >>> parse_schedstat("2050135 301 12\\n")
    (2050135, 301, 12)
    >>> parse_schedstat("12 x")
    Traceback (most recent call last):
    ...
    ValueError: schedstat: expected three integers, got '12 x'
    """
    parts = text.split()
    try:
        run_ns, wait_ns, slices = (int(p) for p in parts)
    except ValueError:
        raise ValueError(f"schedstat: expected three integers, got {text.strip()!r}") from None
    return run_ns, wait_ns, slices


def read_thread_schedstat(pid: int, proc: Path = Path("/proc")) -> dict[int, Schedstat]:
    """Every thread's ``schedstat`` now (threads that exit while being read are left out; {} if the
    process is gone or the kernel has no schedstat)."""
    out: dict[int, Schedstat] = {}
    try:
        tasks = list((proc / str(pid) / "task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            out[int(task.name)] = parse_schedstat((task / "schedstat").read_text())
        except (OSError, ValueError):
            continue
    return out


def thread_window(start: Mapping[Any, Schedstat], end: Mapping[Any, Schedstat], span_s: float,
                  completed: float | None = None) -> dict[str, Any]:
    """The threads' CPU and switch-ins between two readings (threads started meanwhile count from
    zero), largest CPU first, with totals and, given ``completed`` items, per item.

    >>> w = thread_window({1: (10_000, 0, 5), 2: (0, 0, 0)}, {1: (2_010_000, 50_000, 105), 2: (400_000, 0, 900),
    ...                    3: (1_000_000, 0, 20)}, span_s=1.0, completed=100)
    >>> w["totals"]
    {'cpu_s': 0.0034, 'switch_ins': 1020, 'threads': 3}
    >>> w["per_item"]
    {'cpu_us': 34.0, 'switch_ins': 10.2}
    >>> [t["tid"] for t in w["threads"]]
    [1, 3, 2]
    """
    rows = []
    for tid, (run1, wait1, n1) in end.items():
        run0, wait0, n0 = start.get(tid, (0, 0, 0))
        rows.append({"tid": int(tid), "cpu_s": round((run1 - run0) / 1e9, 6),
                     "wait_s": round((wait1 - wait0) / 1e9, 6), "switch_ins": int(n1 - n0)})
    rows.sort(key=lambda r: (-r["cpu_s"], r["tid"]))
    cpu_s = round(sum(r["cpu_s"] for r in rows), 6)
    switches = sum(r["switch_ins"] for r in rows)
    out: dict[str, Any] = {
        "note": "per thread over the window: CPU, time waiting for a CPU, times switched in "
                "(/proc/<pid>/task/<tid>/schedstat)",
        "span_s": round(span_s, 3),
        "totals": {"cpu_s": cpu_s, "switch_ins": switches, "threads": len(rows)},
        "threads": rows,
    }
    if completed:
        out["per_item"] = {"cpu_us": round(cpu_s / completed * 1e6, 3), "switch_ins": round(switches / completed, 4)}
    return out
