"""Measure where this host's kernel puts a thread that a running thread of the same process wakes,
and whether it takes the CPU from its waker, and turn that into ``host.wake_affine_share`` and
``host.wake_preempt_share``.

    python -m cfsim lab run SCENARIO.toml --out RUN --set lab.sched_trace_s=6      # one or more runs
    python -m cfsim lab wakeplace RUN [RUN ...] --out docs/params/lab-host-wakeplace.toml

A Go M wakes another (``startm`` -> ``notewakeup`` -> ``futexwakeup``) whenever a goroutine is
readied while a P is idle and no M spins, and ``startTheWorldWithSema`` wakes the M of every P
with work. Mainline Linux places the woken thread on an idle CPU that shares the cache
(``select_task_rq_fair`` -> ``select_idle_sibling`` in ``kernel/sched/fair.c``), so the waker runs
on. If it lands on the waker's CPU, EEVDF's wake-up check (``check_preempt_wakeup_fair``) runs it at
once when its lag makes the running waker ineligible, and the waker waits for its turn to end.

A lab run with ``lab.sched_trace_s`` traces the kernel's ``sched_waking`` and ``sched_switch``
events on every CPU for that many seconds in the middle of its window (tracefs; root) and counts,
for every wake-up that one of the workload's running threads makes of another of its threads:
whether another CPU was idle at that moment, whether the woken thread went to the waker's CPU (the
CPU it is next switched in on; and whether it last ran there), and
whether its first run there switched the waker out while still runnable (``prev_state=R``). The
manifest keeps the counts (``wake_placement``). ``host.wake_affine_share`` is the share of the
wake-ups made beside an idle CPU that went to the waker's CPU (mainline would take the idle CPU;
the model's placement does otherwise); ``host.wake_preempt_share`` the share of the wake-ups on the
waker's CPU that switched the waker out. ``cfsim lab wakeplace`` pools them over the runs given.

``count_placements`` reads the trace text; ``read_wakeplace`` parses the JSON lines of counts
(``(rows, meta)``) and names the line of anything malformed.
"""
from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from cfsim.io.manifest import read_manifest
from cfsim.lab.benchout import json_lines, require
from cfsim.lab.packcurve import TRACE_LINE, WAKEE, pack_curve
from cfsim.lab.probe import WindowProbe

TRACEFS = Path("/sys/kernel/tracing")
_FIELDS = ("round", "gomaxprocs", "wakes_other_idle", "wakes_other_idle_to_waker", "wakes_other_busy",
           "wakes_other_busy_to_waker", "wakes_to_waker", "wakes_to_waker_preempting")
#: the same for wake-ups of another process's task (a load generator's, by the server's response)
#: and how often another process's task switched one of the process's threads out while runnable
#: (host.neighbour_wake_share, docs/model-notes.md "The load generator beside a server at
#: GOMAXPROCS 1"): counted in the manifest's ``wake_placement``, not part of the two shares' rows
NEIGHBOUR_FIELDS = ("neighbour_wakes_other_idle", "neighbour_wakes_other_idle_took_waker",
                    "preempted_by_other")
#: the wake-ups beside an idle CPU whose thread last ran on the waker's CPU, and of them the ones
#: that ran there first (host.wake_affine_share with host.wake_affine_share_away set)
SPLIT_FIELDS = ("wakes_other_idle_here", "wakes_other_idle_here_to_waker")
#: a setting with fewer wake-ups than this beside an idle CPU says too little
MIN_WAKES = 200
_SWITCH = re.compile(r"prev_pid=(\d+) .*prev_state=(\S+) ==> next_comm=.* next_pid=(\d+)")
_NEXT_COMM = re.compile(r"==> next_comm=(.*?) next_pid=")


class WakeplaceError(ValueError):
    pass


def count_placements(lines: Iterable[str], comm: str, cpus: int) -> dict[str, int]:
    """Wake-ups of one process's threads by its running threads, from a tracefs ``trace`` text.

    ``comm``: the process's command name (the waker's task name on the line). A wake-up counts when
    its waker is the task running on the CPU that reports it. Where it went is the CPU the woken
    thread is next switched in on: ``sched_waking``'s ``target_cpu`` is the task's CPU before the
    kernel chose (``try_to_wake_up`` in ``kernel/sched/core.c`` traces it before
    ``select_task_rq``; ``target_cpu = task_cpu(p)`` in ``include/trace/events/sched.h``), its
    previous CPU, which the counts keep as the wake-up's class instead (``_here``: it last ran on
    the waker's CPU; the rest last ran elsewhere). A wake-up on the waker's CPU preempts the waker
    when that switch-in switches the waker out while runnable (``prev_state=R``). Wake-ups of
    another process's tasks by the process's running threads are counted apart
    (:data:`NEIGHBOUR_FIELDS`: those made while another CPU was idle, and of them the ones that
    took the waker's CPU at once), and so are the process's threads switched out while runnable
    for another process's task (``preempted_by_other``). ``placed_by`` says how (runs traced before
    2026-12-07 counted ``target_cpu``, the previous CPU, as the placement).

    >>> lines = ['stwbench-11 [000] d..2. 1.000000: sched_switch: prev_comm=a prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=stwbench next_pid=11 next_prio=120',
    ...          'stwbench-11 [000] d..2. 1.000010: sched_waking: comm=stwbench pid=12 prio=120 target_cpu=001',
    ...          'stwbench-11 [000] d..2. 1.000012: sched_switch: prev_comm=stwbench prev_pid=11 prev_prio=120 prev_state=R ==> next_comm=stwbench next_pid=12 next_prio=120',
    ...          'stwbench-12 [000] d..2. 1.000040: sched_waking: comm=stwbench pid=13 prio=120 target_cpu=000',
    ...          '<idle>-0 [001] d..2. 1.000045: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=stwbench next_pid=13 next_prio=120']
    >>> c = count_placements(lines, "stwbench", 2)
    >>> c["wakes_other_idle"], c["wakes_other_idle_to_waker"], c["wakes_to_waker"], c["wakes_to_waker_preempting"]
    (2, 1, 1, 1)
    >>> c["wakes_other_idle_here"], c["wakes_other_idle_here_to_waker"]
    (0, 0)
    """
    running = [0] * cpus                       # pid on each CPU (0: idle)
    last_cpu: dict[int, int] = {}              # pid -> the CPU it last ran on
    # woken pid -> (waker pid, waker's CPU, the counts its first switch-in adds to)
    pending: dict[int, tuple[int, int, tuple[str, ...]]] = {}
    out = dict.fromkeys(_FIELDS[2:] + NEIGHBOUR_FIELDS + SPLIT_FIELDS, 0)
    for line in lines:
        m = TRACE_LINE.match(line)
        if m is None:
            continue
        task, pid_s, cpu_s, _ts, event, rest = m.groups()
        cpu = int(cpu_s)
        if cpu >= cpus:
            raise WakeplaceError(f"the trace names CPU {cpu} on a host of {cpus}")
        if event == "sched_switch":
            sw = _SWITCH.search(rest)
            if sw is None:
                continue
            prev, state, nxt = int(sw[1]), sw[2], int(sw[3])
            runnable_out = state.startswith("R")
            if nxt in pending:
                waker, wcpu, keys = pending.pop(nxt)
                if wcpu == cpu:
                    took = prev == waker and runnable_out
                    if keys[0] == "neighbour":
                        out["neighbour_wakes_other_idle_took_waker"] += took
                    else:
                        for k in keys:
                            out[k + "_to_waker"] += 1
                        out["wakes_to_waker"] += 1
                        out["wakes_to_waker_preempting"] += took
            if runnable_out and nxt != 0 and task.startswith(comm):
                nc = _NEXT_COMM.search(rest)
                if nc is not None and not nc[1].startswith(comm):
                    out["preempted_by_other"] += 1   # one of ours waits for another process's task
            if prev:
                last_cpu[prev] = cpu
            running[cpu] = nxt
            continue
        pid = int(pid_s)
        if not task.startswith(comm) or running[cpu] != pid:
            continue   # not woken by one of the process's running threads
        wp = WAKEE.search(rest)
        if wp is None:
            continue
        wakee = int(wp[2])
        other_idle = any(running[c] == 0 for c in range(cpus) if c != cpu)
        if not wp[1].startswith(comm):
            # another process's task (a load generator woken by a response)
            if other_idle:
                out["neighbour_wakes_other_idle"] += 1
                pending[wakee] = (pid, cpu, ("neighbour",))
            continue
        key = "wakes_other_idle" if other_idle else "wakes_other_busy"
        out[key] += 1
        keys: tuple[str, ...] = (key,)
        if other_idle and last_cpu.get(wakee) == cpu:
            out["wakes_other_idle_here"] += 1
            keys = (key, "wakes_other_idle_here")
        pending[wakee] = (pid, cpu, keys)
    return out


def read_wakeplace(text: str, source: str = "wakeplace output") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The measurement's rows (one per round and GOMAXPROCS) and ``{"source", "rounds"}``.

    >>> rows, meta = read_wakeplace('{"round": 0, "gomaxprocs": 8, "wakes_other_idle": 600, '
    ...     '"wakes_other_idle_to_waker": 300, "wakes_other_busy": 400, "wakes_other_busy_to_waker": 250, '
    ...     '"wakes_to_waker": 550, "wakes_to_waker_preempting": 280}')
    >>> rows[0]["gomaxprocs"], meta["rounds"]
    (8, 1)
    >>> read_wakeplace('{"round": 0, "gomaxprocs": 8}', "wp.jsonl")
    Traceback (most recent call last):
    ...
    cfsim.lab.wakeplace.WakeplaceError: wp.jsonl line 1: missing wakes_other_idle, wakes_other_idle_to_waker, wakes_other_busy, wakes_other_busy_to_waker, wakes_to_waker, wakes_to_waker_preempting
    """
    rows: list[dict[str, Any]] = []
    for i, d in json_lines(text, source, WakeplaceError):
        require(d, _FIELDS, source, i, WakeplaceError)
        try:
            row = {k: int(d[k]) for k in _FIELDS}
            if all(k in d for k in SPLIT_FIELDS):   # counted by the wakee's previous CPU as well
                row.update({k: int(d[k]) for k in SPLIT_FIELDS})
        except (TypeError, ValueError):
            raise WakeplaceError(f"{source} line {i}: a field that is not a whole number") from None
        if any(v < 0 for v in row.values()) or row["wakes_other_idle_to_waker"] > row["wakes_other_idle"] \
                or row["wakes_to_waker_preempting"] > row["wakes_to_waker"] \
                or row.get("wakes_other_idle_here", 0) > row["wakes_other_idle"] \
                or row.get("wakes_other_idle_here_to_waker", 0) > row.get("wakes_other_idle_here", 0) \
                or row.get("wakes_other_idle_here_to_waker", 0) > row["wakes_other_idle_to_waker"]:
            raise WakeplaceError(f"{source} line {i}: counts that cannot be (negative, or a part above its whole)")
        rows.append(row)
    if not rows:
        raise WakeplaceError(f"{source}: no measurements")
    return rows, {"source": source, "rounds": len({r["round"] for r in rows})}


def _share(rows: Iterable[dict[str, Any]], part: str, whole: str, digits: int = 3) -> float | None:
    """``part`` over ``whole`` summed over the rows (None without a ``whole``)."""
    rows = list(rows)
    n = sum(r.get(whole, 0) for r in rows)
    return round(sum(r[part] for r in rows) / n, digits) if n else None


def wakeplace_params(rows: Iterable[dict[str, Any]]) -> dict[str, float]:
    """The two shares, pooled over every row. Refuses a measurement with fewer than
    :data:`MIN_WAKES` wake-ups beside an idle CPU or on the waker's CPU. Where every row counted
    the wakee's previous CPU as well (:data:`SPLIT_FIELDS`), ``host.wake_affine_share`` is the share
    of the wakees last run on the waker's CPU that stayed there, and ``host.wake_affine_share_away``
    that of the others that joined it.

    >>> split = {"wakes_other_idle_here": 300, "wakes_other_idle_here_to_waker": 240}
    >>> wakeplace_params([{"round": 0, "gomaxprocs": 8, "wakes_other_idle": 600, "wakes_other_idle_to_waker": 300,
    ...                    "wakes_other_busy": 400, "wakes_other_busy_to_waker": 250, "wakes_to_waker": 550,
    ...                    "wakes_to_waker_preempting": 275, **split}])
    {'host.wake_affine_share': 0.8, 'host.wake_preempt_share': 0.5, 'host.wake_affine_share_away': 0.2}

    >>> wakeplace_params([{"round": 0, "gomaxprocs": 8, "wakes_other_idle": 600, "wakes_other_idle_to_waker": 300,
    ...                    "wakes_other_busy": 400, "wakes_other_busy_to_waker": 250, "wakes_to_waker": 550,
    ...                    "wakes_to_waker_preempting": 275}])
    {'host.wake_affine_share': 0.5, 'host.wake_preempt_share': 0.5}
    """
    rows = list(rows)
    idle = sum(r["wakes_other_idle"] for r in rows)
    to_waker = sum(r["wakes_to_waker"] for r in rows)
    if idle < MIN_WAKES or to_waker < MIN_WAKES:
        raise WakeplaceError(f"too few wake-ups to measure ({idle} beside an idle CPU, {to_waker} on the waker's "
                             f"CPU; need {MIN_WAKES} each): the process hardly woke its own threads")
    affine = _share(rows, "wakes_other_idle_to_waker", "wakes_other_idle")
    preempt = _share(rows, "wakes_to_waker_preempting", "wakes_to_waker")
    assert affine is not None and preempt is not None
    if not all(all(k in r for k in SPLIT_FIELDS) for r in rows):
        return {"host.wake_affine_share": affine, "host.wake_preempt_share": preempt}
    here = sum(r["wakes_other_idle_here"] for r in rows)
    here_to = sum(r["wakes_other_idle_here_to_waker"] for r in rows)
    away, away_to = idle - here, sum(r["wakes_other_idle_to_waker"] for r in rows) - here_to
    if min(here, away) < MIN_WAKES:
        raise WakeplaceError(f"too few wake-ups to split by the previous CPU ({here} last ran on the waker's, "
                             f"{away} elsewhere; need {MIN_WAKES} each)")
    return {"host.wake_affine_share": round(here_to / here, 3), "host.wake_preempt_share": preempt,
            "host.wake_affine_share_away": round(away_to / away, 3)}


def _write(path: Path, text: str, append: bool = False) -> None:
    # os.open, not open(..., "a"): Python's append mode seeks to the end, which tracefs refuses
    fd = os.open(path, os.O_WRONLY | (os.O_APPEND if append else os.O_TRUNC))
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def mount_tracefs(tracefs: Path = TRACEFS) -> bool:
    """Mount tracefs at ``tracefs`` when it is not there and this process is root, as ``perf``
    does for its tracepoints (a freshly booted machine mounts it only when something asks);
    True if its ``set_event`` is then writable."""
    if os.access(tracefs / "set_event", os.W_OK):
        return True
    if os.geteuid() != 0 or not tracefs.is_dir():
        return False
    subprocess.run(["mount", "-t", "tracefs", "nodev", str(tracefs)], capture_output=True, check=False)
    return os.access(tracefs / "set_event", os.W_OK)


def trace_window(seconds: float, tracefs: Path = TRACEFS, buffer_kb: int = 65536) -> str:
    """The kernel's ``sched_waking`` and ``sched_switch`` events on every CPU for ``seconds``
    (every task: whether another CPU was idle needs the others' switches too), as trace text.
    Leaves tracing off, the event selection empty and the buffers at their size before. Needs
    root and tracefs (mounted here if missing: :func:`mount_tracefs`)."""
    if not mount_tracefs(tracefs):
        raise WakeplaceError(f"the kernel's scheduler trace is not writable at {tracefs} (root and tracefs "
                             f"needed: mount -t tracefs nodev {tracefs})")
    on = tracefs / "tracing_on"
    size = tracefs / "buffer_size_kb"
    kept = size.read_text().split()[0] if size.read_text().strip() else ""
    try:
        _write(on, "0")
        _write(tracefs / "set_event_pid", "")
        _write(size, str(buffer_kb))
        _write(tracefs / "set_event", "")
        for event in ("sched:sched_waking", "sched:sched_switch"):
            _write(tracefs / "set_event", event + "\n", append=True)
        _write(tracefs / "trace", "")
        _write(on, "1")
        time.sleep(seconds)
        _write(on, "0")
        return (tracefs / "trace").read_text()
    finally:
        _write(on, "0")
        _write(tracefs / "set_event", "")
        _write(tracefs / "trace", "")
        if kept.isdigit():
            _write(size, kept)   # the kernel's buffers back to the size they had


def shares(counts: dict[str, int]) -> dict[str, float | None]:
    """The two shares of one set of counts (None without a wake-up to base them on), and the
    neighbour's where the counts have it (:data:`NEIGHBOUR_FIELDS`).

    >>> shares({"wakes_other_idle": 4, "wakes_other_idle_to_waker": 1, "wakes_to_waker": 0,
    ...         "wakes_to_waker_preempting": 0})
    {'wake_affine_share': 0.25, 'wake_preempt_share': None}
    """
    out = {"wake_affine_share": _share([counts], "wakes_other_idle_to_waker", "wakes_other_idle", 4),
           "wake_preempt_share": _share([counts], "wakes_to_waker_preempting", "wakes_to_waker", 4)}
    if "wakes_other_idle_here" in counts:
        here, here_to = counts["wakes_other_idle_here"], counts["wakes_other_idle_here_to_waker"]
        away = counts["wakes_other_idle"] - here
        out["wake_affine_share_here"] = round(here_to / here, 4) if here else None
        out["wake_affine_share_away"] = round((counts["wakes_other_idle_to_waker"] - here_to) / away, 4) if away else None
    if "neighbour_wakes_other_idle" in counts:
        # what host.neighbour_wake_share stands for: another process's task woken beside an idle
        # CPU that took its waker's CPU at once
        out["neighbour_wake_share"] = _share([counts], "neighbour_wakes_other_idle_took_waker",
                                             "neighbour_wakes_other_idle", 4)
    return out


class SchedTraceProbe(WindowProbe):
    """``lab.sched_trace_s``: the kernel's placement of the workload's own wake-ups over
    ``seconds`` in the background (:func:`trace_window`, :func:`count_placements` on the
    workload's command name ``comm``), for the manifest's ``wake_placement``."""

    errors = (OSError, WakeplaceError)

    def __init__(self, seconds: float, comm: str, cpus: int):
        super().__init__("cfsim-lab-sched-trace")
        self.seconds, self.comm, self.cpus = seconds, comm, cpus

    def measure(self) -> dict[str, Any]:
        lines = trace_window(self.seconds).splitlines()
        counts = count_placements(lines, self.comm, self.cpus)
        # the same wake-ups by class and recent utilization (cfsim.lab.packcurve), and how the
        # placement was read (older runs counted sched_waking's target_cpu, the previous CPU)
        return {**counts, **shares(counts), "placed_by": "switch_in",
                "pack_bins": pack_curve(lines, self.comm, self.cpus)}


def rows_from_runs(runs: Iterable[Path]) -> str:
    """The JSON lines :func:`read_wakeplace` reads, from lab runs that recorded
    ``lab.sched_trace_s`` (their manifests' ``wake_placement``), one per run in the given order.
    Names the run that recorded none."""
    lines = []
    for i, run in enumerate(runs):
        manifest = read_manifest(Path(run))
        block = manifest.get("wake_placement") or {}
        if block.get("error") or not all(k in block for k in _FIELDS[2:]):
            why = block.get("error") or "no wake_placement in its manifest (record it with --set lab.sched_trace_s=6)"
            raise WakeplaceError(f"{run}: {why}")
        g = (manifest.get("gomaxprocs") or {}).get("at_ready")
        split = {k: block[k] for k in SPLIT_FIELDS if k in block} if block.get("placed_by") == "switch_in" else {}
        lines.append(json.dumps({"round": i, "gomaxprocs": int(g) if isinstance(g, (int, float)) else 0,
                                 **{k: block[k] for k in _FIELDS[2:]}, **split}))
    return "\n".join(lines) + "\n"


def params_toml(params: dict[str, float], rows: list[dict[str, Any]], command: str,
                train_runs: list[str] | None = None) -> str:
    """A ``--params`` file with the measurement it came from as comments and a ``[measurement]``
    table; ``train_runs``: the lab runs it was measured on, which ``cfsim validate`` then counts as
    training (``[fit] train_runs``), not held out."""
    lines = [
        "# Where this host's kernel puts a thread that a running thread of the same process wakes (a Go",
        "# M's futexwakeup of another), from lab runs of the workload itself that recorded the kernel's",
        "# scheduler trace over part of their window (lab.sched_trace_s: tracefs sched_waking and",
        "# sched_switch on every CPU; cfsim.lab.wakeplace).",
        "# host.wake_affine_share: of the wake-ups made while another CPU was idle, the share the kernel",
        "# put on the waker's own CPU (mainline's select_idle_sibling takes the idle CPU);",
        "# host.wake_preempt_share: of the wake-ups on the waker's CPU, the share whose first run there",
        "# switched the waker out while runnable (EEVDF wake-up preemption, check_preempt_wakeup_fair in",
        "# kernel/sched/fair.c). Pooled over rounds and GOMAXPROCS; per run below.",
        f"# Host: {platform.node()}, kernel {platform.release()}, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC.",
        f"# Reproduce: {command}",
        "# run, GOMAXPROCS: beside an idle CPU to the waker's / all, beside a busy one to the waker's / all,",
        "#   on the waker's CPU preempting it / all",
    ]
    for r in rows:
        lines.append(f"#   {r['round']}, {r['gomaxprocs']:>2}: {r['wakes_other_idle_to_waker']} / {r['wakes_other_idle']}, "
                     f"{r['wakes_other_busy_to_waker']} / {r['wakes_other_busy']}, "
                     f"{r['wakes_to_waker_preempting']} / {r['wakes_to_waker']}")
    for g in sorted({r["gomaxprocs"] for r in rows}):
        sub = [r for r in rows if r["gomaxprocs"] == g]
        lines.append(f"# GOMAXPROCS {g}: affine {_share(sub, 'wakes_other_idle_to_waker', 'wakes_other_idle')}, "
                     f"preempt {_share(sub, 'wakes_to_waker_preempting', 'wakes_to_waker')}")
    if "host.wake_affine_share_away" in params:
        lines += [
            "# Split by the wakee's previous CPU (placement read from its next switch-in, the class from the",
            "# CPU it was last switched out on): host.wake_affine_share = of the wake-ups",
            "# beside an idle CPU whose thread last ran on the waker's CPU, the share that ran there first;",
            "# host.wake_affine_share_away = of the others, the share that joined the waker. Per run: here",
            "# stayed / all, away joined / all",
        ]
        for r in rows:
            away, away_to = (r["wakes_other_idle"] - r["wakes_other_idle_here"],
                             r["wakes_other_idle_to_waker"] - r["wakes_other_idle_here_to_waker"])
            lines.append(f"#   {r['round']}, {r['gomaxprocs']:>2}: {r['wakes_other_idle_here_to_waker']} / "
                         f"{r['wakes_other_idle_here']}, {away_to} / {away}")
    lines.append("[params]")
    lines += [f'"{k}" = {v}' for k, v in params.items()]
    lines += ["", "[measurement]", f"runs = {len(rows)}", f"gomaxprocs = {sorted({r['gomaxprocs'] for r in rows})}", ""]
    if train_runs:
        lines += ["[fit]", "train_runs = ["] + [f'    "{r}",' for r in train_runs] + ["]", ""]
    return "\n".join(lines)
