"""Per-thread CPU and wake-ups of the workload over a run's window, from
``/proc/<pid>/task/<tid>/schedstat`` (``kernel/sched/stats.c: show_schedstat``'s per-task line:
time on a CPU [ns], time waiting on a runqueue [ns], number of times run on a CPU) and the
``voluntary_ctxt_switches``/``nonvoluntary_ctxt_switches`` lines of ``.../status``
(``fs/proc/array.c: task_context_switch_counts``; ``kernel/sched/core.c: __schedule`` counts a
switch away from a task that blocked as voluntary (``nvcsw``) and one from a task still runnable,
preempted, as involuntary (``nivcsw``)).

A Go process's threads are its Ms and sysmon; ``schedstat`` tells how often each was switched in
(after a sleep, or after being preempted) and how much CPU each used: the thread with many
switch-ins and little CPU is sysmon polling, the rest are Ms. A switch-in follows either a sleep
(each sleep of a thread is one wake-up: the voluntary count) or a preemption (the involuntary
count), so the voluntary count is the thread's wake-ups and the switch-ins only bound them from
above. A run's manifest keeps the per-thread
differences over the window (``threads``), so the runtime's wake-ups per request can be compared
with a twin's (``os_thread_wakes_per_s``) from measurements rather than priors.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

Schedstat = tuple[int, int, int]   # (run_ns, wait_ns, timeslices)
#: a thread's reading: the schedstat triple, then (voluntary, involuntary) switches where the
#: kernel's status file gives them
ThreadStat = tuple[int, ...]


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


def parse_ctxt_switches(status: str) -> tuple[int, int] | None:
    """``(voluntary, involuntary)`` context switches from a ``/proc/.../status`` text (None if the
    kernel does not report them).

    >>> parse_ctxt_switches("Name:\\tgo\\nvoluntary_ctxt_switches:\\t41\\nnonvoluntary_ctxt_switches:\\t3\\n")
    (41, 3)
    >>> parse_ctxt_switches("Name:\\tgo\\n") is None
    True
    """
    found: dict[str, int] = {}
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"):
            found[key] = int(value)
    if len(found) < 2:
        return None
    return found["voluntary_ctxt_switches"], found["nonvoluntary_ctxt_switches"]


def read_thread_schedstat(pid: int, proc: Path = Path("/proc")) -> dict[int, ThreadStat]:
    """Every thread's ``schedstat`` now, with its (voluntary, involuntary) switches appended where
    ``status`` gives them (threads that exit while being read are left out; {} if the process is
    gone or the kernel has no schedstat)."""
    out: dict[int, ThreadStat] = {}
    try:
        tasks = list((proc / str(pid) / "task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            stat: ThreadStat = parse_schedstat((task / "schedstat").read_text())
        except (OSError, ValueError):
            continue
        try:
            switches = parse_ctxt_switches((task / "status").read_text())
        except (OSError, ValueError):
            switches = None
        out[int(task.name)] = stat + switches if switches else stat
    return out


def thread_window(start: Mapping[Any, ThreadStat], end: Mapping[Any, ThreadStat], span_s: float,
                  completed: float | None = None) -> dict[str, Any]:
    """The threads' CPU and switch-ins between two readings (threads started meanwhile count from
    zero), largest CPU first, with totals and, given ``completed`` items, per item. Where both
    readings give voluntary and involuntary switches, each row and the totals also carry ``sleeps``
    (voluntary: the thread blocked, and was later woken) and ``preempted`` (involuntary).

    >>> w = thread_window({1: (10_000, 0, 5), 2: (0, 0, 0)}, {1: (2_010_000, 50_000, 105), 2: (400_000, 0, 900),
    ...                    3: (1_000_000, 0, 20)}, span_s=1.0, completed=100)
    >>> w["totals"]
    {'cpu_s': 0.0034, 'switch_ins': 1020, 'threads': 3}
    >>> w["per_item"]
    {'cpu_us': 34.0, 'switch_ins': 10.2}
    >>> [t["tid"] for t in w["threads"]]
    [1, 3, 2]
    >>> w = thread_window({1: (0, 0, 5, 4, 1)}, {1: (1_000, 0, 35, 28, 7)}, span_s=1.0, completed=10)
    >>> w["threads"][0]["sleeps"], w["threads"][0]["preempted"], w["per_item"]["sleeps"]
    (24, 6, 2.4)
    """
    rows = []
    for tid, now in end.items():
        before = start.get(tid, (0,) * len(now))
        diff = [b - a for a, b in zip(before, now)]
        row = {"tid": int(tid), "cpu_s": round(diff[0] / 1e9, 6), "wait_s": round(diff[1] / 1e9, 6),
               "switch_ins": int(diff[2])}
        if len(diff) == 5:
            row["sleeps"], row["preempted"] = int(diff[3]), int(diff[4])
        rows.append(row)
    rows.sort(key=lambda r: (-r["cpu_s"], r["tid"]))
    totals: dict[str, Any] = {"cpu_s": round(sum(r["cpu_s"] for r in rows), 6),
                              "switch_ins": sum(r["switch_ins"] for r in rows), "threads": len(rows)}
    split = bool(rows) and all("sleeps" in r for r in rows)
    if split:
        totals["sleeps"] = sum(r["sleeps"] for r in rows)
        totals["preempted"] = sum(r["preempted"] for r in rows)
    out: dict[str, Any] = {
        "note": "per thread over the window: CPU, time waiting for a CPU, times switched in "
                "(/proc/<pid>/task/<tid>/schedstat); sleeps and preemptions (voluntary and "
                "involuntary switches, /proc/<pid>/task/<tid>/status)",
        "span_s": round(span_s, 3),
        "totals": totals,
        "threads": rows,
    }
    if completed:
        out["per_item"] = {"cpu_us": round(totals["cpu_s"] / completed * 1e6, 3),
                           "switch_ins": round(totals["switch_ins"] / completed, 4)}
        if split:
            out["per_item"]["sleeps"] = round(totals["sleeps"] / completed, 4)
            out["per_item"]["preempted"] = round(totals["preempted"] / completed, 4)
    return out


def m_sleeps_per_item(window: Mapping[str, Any]) -> float | None:
    """The Ms' sleeps per item of a run's ``threads`` window (:func:`thread_window`): every thread's
    voluntary switches but sysmon's, over the items the window completed. sysmon is the thread that
    sleeps most for its CPU (it polls every 20 us to 10 ms and runs a few us each time: on the lab
    host 50,000-80,000 sleeps per CPU second, an M's 500-7,000; not simply the most sleeps: in a
    saturated stream sysmon sleeps 10 ms at a time and a busy M more often); the model's
    ``os_thread_wakes_per_s`` likewise counts the Ms only. None without sleeps, or with fewer than
    two threads.

    >>> w = {"threads": [{"cpu_s": 2.0, "sleeps": 3000}, {"cpu_s": 0.5, "sleeps": 40000},
    ...                  {"cpu_s": 1.0, "sleeps": 1000}, {"cpu_s": 0.0, "sleeps": 0}],
    ...      "totals": {"sleeps": 44000}, "per_item": {"sleeps": 44.0}}
    >>> m_sleeps_per_item(w)
    4.0

    A saturated stream (gc-memory-quiet p002): sysmon is the 1,732 sleeps of 0.03 s, not the 4,560 of 6.7 s

    >>> rows = [{"cpu_s": 6.69, "sleeps": 4560}, {"cpu_s": 6.22, "sleeps": 4016}, {"cpu_s": 5.67, "sleeps": 3492},
    ...         {"cpu_s": 0.03, "sleeps": 1732}, {"cpu_s": 1.33, "sleeps": 1199}, {"cpu_s": 0.0, "sleeps": 0}]
    >>> round(m_sleeps_per_item({"threads": rows, "totals": {"sleeps": 14999}, "per_item": {"sleeps": 0.0816}}), 4)
    0.0722
    >>> m_sleeps_per_item({"threads": [{"cpu_s": 1.0, "switch_ins": 5}], "per_item": {"switch_ins": 1}}) is None
    True
    """
    split = thread_split_per_item(window)
    return None if split is None else split["m_sleeps"]


def thread_split_per_item(window: Mapping[str, Any]) -> dict[str, float] | None:
    """A run's ``threads`` window (:func:`thread_window`) split per item into the Ms' sleeps
    (``m_sleeps``, every thread but sysmon: :func:`m_sleeps_per_item`) and sysmon's own sleeps
    and CPU [us] (``sysmon_sleeps``, ``sysmon_cpu_us``: each poll's ``usleep`` and each deep sleep
    on ``sched.sysmonnote``, ``src/runtime/proc.go: sysmon``). A process that goes idle between
    requests keeps sysmon polling every 20 us plus the timer slack through each busy spell, so
    sysmon's figures grow with the spells, not with the work. None without sleeps, with fewer
    than two threads, or without the items the window completed.

    >>> w = {"threads": [{"cpu_s": 2.0, "sleeps": 3000}, {"cpu_s": 0.5, "sleeps": 40000},
    ...                  {"cpu_s": 1.0, "sleeps": 1000}], "totals": {"sleeps": 44000}, "per_item": {"sleeps": 44.0}}
    >>> thread_split_per_item(w)
    {'m_sleeps': 4.0, 'sysmon_sleeps': 40.0, 'sysmon_cpu_us': 500.0}
    >>> thread_split_per_item({"threads": [{"cpu_s": 1.0, "switch_ins": 5}], "per_item": {"switch_ins": 1}}) is None
    True
    """
    sysmon = sysmon_thread(window)
    per_item = (window.get("per_item") or {}).get("sleeps")
    total = (window.get("totals") or {}).get("sleeps")
    if sysmon is None or not per_item or not total:
        return None
    items = total / per_item
    return {"m_sleeps": sum(r["sleeps"] for r in window["threads"] if r is not sysmon) / items,
            "sysmon_sleeps": sysmon["sleeps"] / items, "sysmon_cpu_us": sysmon["cpu_s"] / items * 1e6}


def sysmon_thread(window: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The row of a ``threads`` window that is sysmon: the thread that sleeps most for its CPU (a
    thread with sleeps and no CPU worth measuring counts as having run 1 ms); None unless the
    window has two threads or more, each with its sleeps (runs since 2026-11-26).

    >>> sysmon_thread({"threads": [{"tid": 1, "cpu_s": 2.0, "sleeps": 3000}, {"tid": 7, "cpu_s": 0.0, "sleeps": 900}]})["tid"]
    7
    """
    rows = window.get("threads") or []
    if len(rows) < 2 or any("sleeps" not in r for r in rows):
        return None
    return max(rows, key=lambda r: r["sleeps"] / max(r["cpu_s"], 1e-3))
