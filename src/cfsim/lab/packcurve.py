"""Where this host's kernel puts a thread that a running thread of the process wakes beside an
idle CPU, by the wakee's previous CPU and by recent utilization, read from a scheduler trace.

A two-thread benchmark on the lab's VM (a waker busy part of the time, a wakee woken by a pipe)
finds its wakee beside the waker almost always while the two together use under about two thirds
of a CPU and almost never above (docs/model-notes.md, "Where the kernel puts a wakee"). The lab's
own service shows why: a woken thread mostly goes back to the CPU it last ran on (the class here),
so which CPU a pair settles on decides, and the load changes which one it settles on.
:func:`pack_curve` rebuilds each CPU's and each thread's utilization from the trace's
``sched_switch`` events as PELT keeps it (:mod:`cfsim.kernel.pelt`: between two switches on a CPU
it is busy or idle throughout, so the average is exact for the trace's own clock) and counts, per
class and bin of the sum (the waker's CPU without the wakee, plus the wakee), the wake-ups made
while another CPU was idle and the ones that ran first on the waker's CPU. Within a class the
share hardly moves with the sum on the lab's service; the counts are kept in each traced run's
manifest (``wake_placement.pack_bins``) to show it.
"""
from __future__ import annotations

import math
import re
from typing import Any, Iterable, Mapping

from cfsim.kernel.pelt import util_after

#: a tracefs line of a ``sched_switch`` or ``sched_waking`` event: task, pid, CPU, time, event, rest
#: (cfsim.lab.wakeplace reads the same lines)
TRACE_LINE = re.compile(r"^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): (sched_switch|sched_waking): (.*)$")
#: the woken task's command name and pid on a ``sched_waking`` line
WAKEE = re.compile(r"\bcomm=(.*?) pid=(\d+)")
_SWITCH = re.compile(r"prev_pid=(\d+) .*==> next_comm=.* next_pid=(\d+)")
#: the width of a bin of the utilization sum (of one CPU)
BIN = 0.05


class PackCurveError(ValueError):
    pass


#: the classes of a wake-up: the process's own thread or another process's, whose previous CPU was
#: the waker's ("here") or another ("away")
CLASSES = ("own_here", "own_away", "neighbour_here", "neighbour_away")


def pack_curve(lines: Iterable[str], comm: str, cpus: int, warmup_s: float = 0.5) -> dict[str, dict[str, list[int]]]:
    """Per class (:data:`CLASSES`) and bin of the utilization sum (its lower edge, two decimals),
    ``[wake-ups, run first on the waker's CPU]``. Where a wakee goes is read from the CPU it is
    next switched in on, not from ``sched_waking``'s ``target_cpu``: the kernel fills that with
    the task's CPU before ``select_task_rq`` chooses (``try_to_wake_up`` in
    ``kernel/sched/core.c`` traces ``sched_waking`` first; ``target_cpu = task_cpu(p)`` in
    ``include/trace/events/sched.h``), so it is the wakee's previous CPU, which is the class.
    Wake-ups in the first ``warmup_s`` of the trace are left out: every average starts there at 0.

    >>> sw = 'x-1 [{c}] d..2. {t:.6f}: sched_switch: prev_comm=a prev_pid={p} prev_prio=120 prev_state=S ==> next_comm=b next_pid={n} next_prio=120'
    >>> wk = 'app-{w} [{c}] d..2. {t:.6f}: sched_waking: comm={m} pid={p} prio=120 target_cpu={g:03d}'
    >>> lines = [sw.format(c=0, t=0.0, p=0, n=11), wk.format(w=11, c=0, t=1.0, m="app", p=12, g=0),
    ...          sw.format(c=0, t=1.5, p=11, n=12), sw.format(c=0, t=1.55, p=12, n=0),
    ...          sw.format(c=0, t=1.6, p=0, n=11), wk.format(w=11, c=0, t=1.7, m="app", p=12, g=0),
    ...          sw.format(c=1, t=1.7001, p=0, n=12)]
    >>> curve = pack_curve(lines, "app", 2)  # CPU 0 busy 1.5 s, idle 0.05 s, busy 0.1 s: about 0.9
    >>> curve["own_away"], curve["own_here"]
    ({'0.95': [1, 1]}, {'0.90': [1, 0]})
    """
    running = [0] * cpus
    cpu_util, cpu_at = [0.0] * cpus, [-1.0] * cpus
    t_util: dict[int, float] = {}
    t_at: dict[int, float] = {}
    t_last: dict[int, int] = {}
    pending: dict[int, tuple[int, list[int]]] = {}   # woken pid -> (waker's CPU, its bin's cell)
    out: dict[str, dict[str, list[int]]] = {c: {} for c in CLASSES}
    start: float | None = None

    def cpu_now(c: int, ts: float) -> float:
        if cpu_at[c] < 0:
            return 0.0
        span = (ts - cpu_at[c]) * 1e9
        return util_after(cpu_util[c], span if running[c] else 0.0, span)

    def task_now(pid: int, ts: float, ran: bool) -> float:
        if pid not in t_at:
            return 0.0
        span = (ts - t_at[pid]) * 1e9
        return util_after(t_util[pid], span if ran else 0.0, span)

    for line in lines:
        m = TRACE_LINE.match(line)
        if m is None:
            continue
        task, pid_s, cpu_s, ts_s, event, rest = m.groups()
        cpu, ts = int(cpu_s), float(ts_s)
        if cpu >= cpus:
            raise PackCurveError(f"the trace names CPU {cpu} on a host of {cpus}")
        if start is None:
            start = ts
        if event == "sched_switch":
            sw = _SWITCH.search(rest)
            if sw is None:
                continue
            prev, nxt = int(sw[1]), int(sw[2])
            if nxt in pending:
                wcpu, cell = pending.pop(nxt)
                cell[0] += 1
                cell[1] += cpu == wcpu
            cpu_util[cpu], cpu_at[cpu] = cpu_now(cpu, ts), ts
            if prev:
                t_util[prev], t_at[prev], t_last[prev] = task_now(prev, ts, True), ts, cpu
            if nxt:
                t_util[nxt], t_at[nxt] = task_now(nxt, ts, False), ts
            running[cpu] = nxt
            continue
        pid = int(pid_s)
        if not task.startswith(comm) or running[cpu] != pid or ts - start < warmup_s:
            continue   # not woken by one of the process's running threads, or too early
        if not any(running[c] == 0 for c in range(cpus) if c != cpu):
            continue   # no idle CPU to choose instead
        wp = WAKEE.search(rest)
        if wp is None:
            continue
        wakee = int(wp[2])
        u_cpu, u_t = cpu_now(cpu, ts), task_now(wakee, ts, False)
        here = t_last.get(wakee) == cpu
        if here:
            u_cpu = max(u_cpu - u_t, 0.0)   # cpu_util_without: the wakee's own part counted once
        key = f"{min(math.floor((u_cpu + u_t) / BIN + 1e-9) * BIN, 2.0):.2f}"
        cls = ("own" if wp[1].startswith(comm) else "neighbour") + ("_here" if here else "_away")
        pending[wakee] = (cpu, out[cls].setdefault(key, [0, 0]))
    return {cls: dict(sorted(bins.items(), key=lambda kv: float(kv[0]))) for cls, bins in out.items()}


def pooled(curves: Iterable[Mapping[str, Any]], who: str = "own_here") -> dict[str, list[int]]:
    """The bins of one class over several runs' curves (:func:`pack_curve`) added up, in order of
    the sum.

    >>> pooled([{"own_here": {"0.50": [4, 3]}}, {"own_here": {"0.50": [2, 1], "0.45": [1, 1]}}])
    {'0.45': [1, 1], '0.50': [6, 4]}
    """
    total: dict[str, list[int]] = {}
    for curve in curves:
        for key, (n, k) in (curve.get(who) or {}).items():
            cell = total.setdefault(key, [0, 0])
            cell[0] += int(n)
            cell[1] += int(k)
    return dict(sorted(total.items(), key=lambda kv: float(kv[0])))
