"""Measure what this host's kernel charges for a context switch between two threads of the same
process on one CPU with ``lab/cmd/switchbench`` and turn it into ``host.thread_switch_us``: the
CPU charged to a thread switched in directly after another thread of its own process on that CPU
(a Go M after another M of the workload).

    python -m cfsim lab switch --out docs/params/lab-host-thread-switch.toml [--rounds 3]

The benchmark pins every yielding thread to one CPU and calls ``sched_yield`` in a loop, in three
modes per round: ``alone`` (one thread: ``yield_task_fair`` in kernel/sched/fair.c returns at once
and ``__schedule`` in kernel/sched/core.c picks the same task, so no switch), ``threads`` (two
threads of one process: under EEVDF the yielder's deadline moves on and the other is picked, one
switch per yield) and ``processes`` (two processes). A switch between threads of one process keeps
the address space: ``context_switch`` (kernel/sched/core.c) calls ``switch_mm_irqs_off``, which on
x86 (arch/x86/mm/tlb.c) finds the same mm and skips the page-table change that a switch between
processes makes. Per round, the threads' CPU per yield beyond the thread's alone, over the
switches per yield, is the CPU of one switch; ``host.thread_switch_us`` is its median over the
rounds. The same for the processes is reported beside it but is not a parameter: the model's
``host.context_switch_us`` (a load generator preempting the workload) stands for several switches.

``read_switchbench`` parses the benchmark's JSON lines (``(rows, meta)``, pvlib style) and names
the line of anything malformed; ``switch_params`` fits and refuses a measurement whose threads did
not switch on (nearly) every yield.
"""
from __future__ import annotations

import platform
import statistics
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from cfsim.lab.benchout import run_bench, json_lines, number_row

_FIELDS = ("round", "mode", "yields", "cpu_ns", "switches_voluntary", "switches_involuntary", "us_per_yield")
MODES = ("alone", "threads", "processes")
#: a threads run that switched on fewer of its yields than this did not measure a switch per yield
MIN_SWITCHES_PER_YIELD = 0.8


class SwitchbenchError(ValueError):
    pass


def read_switchbench(text: str, source: str = "switchbench output") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The benchmark's rows (one per round and mode, with ``switches_per_yield``: voluntary plus
    involuntary switches over yields) and ``{"source", "rounds", "cpu"}`` (``cpu`` the CPU it
    pinned to, ``None`` if the lines do not say).

    >>> rows, meta = read_switchbench('{"round": 0, "mode": "threads", "yields": 1000, "cpu_ns": 1800000, '
    ...     '"switches_voluntary": 1, "switches_involuntary": 997, "us_per_yield": 1.8, "cpu": 1}')
    >>> rows[0]["switches_per_yield"], meta["rounds"], meta["cpu"]
    (0.998, 1, 1)
    >>> read_switchbench('{"round": 0, "mode": "alone"}', "sb.jsonl")
    Traceback (most recent call last):
    ...
    cfsim.lab.threadswitch.SwitchbenchError: sb.jsonl line 1: missing yields, cpu_ns, switches_voluntary, switches_involuntary, us_per_yield
    >>> read_switchbench('{"round": 0, "mode": "idle", "yields": 1, "cpu_ns": 1, "switches_voluntary": 0, '
    ...     '"switches_involuntary": 0, "us_per_yield": 0.001}', "sb.jsonl")
    Traceback (most recent call last):
    ...
    cfsim.lab.threadswitch.SwitchbenchError: sb.jsonl line 1: mode must be one of alone, threads, processes (got 'idle')
    """
    rows: list[dict[str, Any]] = []
    cpus = set()
    for i, d in json_lines(text, source, SwitchbenchError):
        row = number_row(d, _FIELDS, source, i, SwitchbenchError, "mode")
        if row["mode"] not in MODES:
            raise SwitchbenchError(f"{source} line {i}: mode must be one of {', '.join(MODES)} (got {d['mode']!r})")
        if row["yields"] <= 0:
            raise SwitchbenchError(f"{source} line {i}: no yields")
        row["round"] = int(row["round"])
        row["switches_per_yield"] = round((row["switches_voluntary"] + row["switches_involuntary"]) / row["yields"],
                                          6)
        if "cpu" in d:
            row["cpu"] = d["cpu"]
            cpus.add(d["cpu"])
        rows.append(row)
    if not rows:
        raise SwitchbenchError(f"{source}: no measurements")
    return rows, {"source": source, "rounds": len({r["round"] for r in rows}),
                  "cpu": cpus.pop() if len(cpus) == 1 else None}


def per_round(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One dict per round, by round: each mode's ``us_per_yield`` and ``switches_per_yield``
    (``None`` where the round lacks the mode) and the CPU per switch of the threads and of the
    processes (``thread_switch_us``, ``process_switch_us``: the mode's CPU per yield beyond the
    round's alone, over its switches per yield; ``None`` without both, or without a switch).

    >>> rows = [{"round": 0, "mode": "alone", "us_per_yield": 0.7, "switches_per_yield": 0.0},
    ...         {"round": 0, "mode": "threads", "us_per_yield": 1.9, "switches_per_yield": 1.0}]
    >>> r = per_round(rows)[0]
    >>> round(r["thread_switch_us"], 6), r["process_switch_us"]
    (1.2, None)
    """
    by: dict[int, dict[str, dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(int(r["round"]), {})[r["mode"]] = r
    out = []
    for rnd, modes in sorted(by.items()):
        entry: dict[str, Any] = {"round": rnd}
        for m in MODES:
            entry[f"{m}_us_per_yield"] = modes[m]["us_per_yield"] if m in modes else None
            entry[f"{m}_switches_per_yield"] = modes[m]["switches_per_yield"] if m in modes else None
        for m, key in (("threads", "thread_switch_us"), ("processes", "process_switch_us")):
            spy = entry[f"{m}_switches_per_yield"]
            ok = entry["alone_us_per_yield"] is not None and spy  # a mode without a switch has no cost per switch
            entry[key] = (entry[f"{m}_us_per_yield"] - entry["alone_us_per_yield"]) / spy if ok else None
        out.append(entry)
    return out


def switch_params(rows: Iterable[dict[str, Any]]) -> dict[str, float]:
    """``host.thread_switch_us``: the median over the rounds of (the threads' CPU per yield minus
    the alone thread's of the same round) / the threads' switches per yield. Refuses rounds whose
    threads switched on fewer than :data:`MIN_SWITCHES_PER_YIELD` of their yields.

    >>> rows = []
    >>> for rnd, threads in enumerate((1.8, 2.0, 2.3)):
    ...     rows += [{"round": rnd, "mode": "alone", "us_per_yield": 0.7, "switches_per_yield": 0.0},
    ...              {"round": rnd, "mode": "threads", "us_per_yield": threads, "switches_per_yield": 0.99}]
    >>> switch_params(rows)
    {'host.thread_switch_us': 1.313}
    """
    rounds = [r for r in per_round(rows) if r["threads_us_per_yield"] is not None]
    if not rounds or any(r["alone_us_per_yield"] is None for r in rounds):
        raise SwitchbenchError("need rounds with both the alone and the threads mode")
    low = [r for r in rounds if r["threads_switches_per_yield"] < MIN_SWITCHES_PER_YIELD]
    if low:
        said = ", ".join(f"round {r['round']}: {r['threads_switches_per_yield']:.3f}" for r in low)
        raise SwitchbenchError(f"two threads yielding on one CPU switched on fewer than {MIN_SWITCHES_PER_YIELD} of "
                               f"their yields ({said}): a yield did not hand the CPU to the other thread (another "
                               "scheduler than EEVDF/CFS, a real-time policy, or the threads not on one CPU), so "
                               "the CPU per yield is not a switch's")
    return {"host.thread_switch_us": round(statistics.median(r["thread_switch_us"] for r in rounds), 3)}


def process_switch_us(rows: Iterable[dict[str, Any]]) -> float | None:
    """The same figure for two processes (median over rounds with a processes run that switched
    on at least :data:`MIN_SWITCHES_PER_YIELD` of its yields); ``None`` without such a round.
    Reported, not a parameter.

    >>> process_switch_us([{"round": 0, "mode": "alone", "us_per_yield": 0.7, "switches_per_yield": 0.0},
    ...                    {"round": 0, "mode": "processes", "us_per_yield": 2.1, "switches_per_yield": 1.0}])
    1.4
    """
    got = [r["process_switch_us"] for r in per_round(rows)
           if r["process_switch_us"] is not None
           and r["processes_switches_per_yield"] >= MIN_SWITCHES_PER_YIELD]
    return round(statistics.median(got), 3) if got else None


def run_switchbench(binary: Path, rounds: int = 3, dur_s: float = 1.0, timeout_s: float | None = None) -> str:
    """Run the benchmark (three modes of ``dur_s`` per round) and return its output."""
    if rounds < 1:
        raise SwitchbenchError(f"--rounds must be >= 1 (got {rounds})")
    if timeout_s is None:
        timeout_s = 60.0 + 3 * rounds * dur_s * 4
    return run_bench(binary, ["-rounds", str(rounds), "-dur", str(dur_s)], timeout_s, SwitchbenchError)


def _f(v: float | None, fmt: str = ".3f") -> str:
    return "-" if v is None else format(v, fmt)


def params_toml(params: dict[str, float], rows: list[dict[str, Any]], command: str) -> str:
    """A ``--params`` file (``[params]`` for ``cfsim validate/run --params``) with the measurement
    it came from as comments and a ``[measurement]`` table."""
    table = per_round(rows)
    proc = process_switch_us(rows)
    cpus = {r["cpu"] for r in rows if r.get("cpu") is not None}
    lines = [
        "# This host's CPU for a context switch between two threads of the same process on one CPU,",
        "# measured by lab/cmd/switchbench: threads pinned to one CPU call sched_yield in a loop, alone",
        "# (yield_task_fair in kernel/sched/fair.c returns at once, __schedule picks the same task: no",
        "# switch), two threads of one process (EEVDF moves the yielder's deadline on and picks the other:",
        "# one switch per yield, counted as the threads' involuntary switches) and two processes.",
        "# Between threads the address space stays: context_switch (kernel/sched/core.c) calls",
        "# switch_mm_irqs_off, which finds the same mm (arch/x86/mm/tlb.c) and skips the page-table change.",
        "# host.thread_switch_us = median over rounds of (threads' CPU per yield - alone's) / threads'",
        "# switches per yield: the CPU charged to a thread (a Go M) switched in directly after another",
        "# thread of its own process. host.context_switch_us (a load generator preempting the workload)",
        "# stands for several kernel switches and is not this.",
        f"# Host: {platform.node()}, kernel {platform.release()}, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC.",
        f"# Reproduce: {command}",
        "# round: us per yield (switches per yield) alone / threads / processes; us per switch threads, processes",
    ]
    for e in table:
        cells = " / ".join(f"{_f(e[f'{m}_us_per_yield'])} ({_f(e[f'{m}_switches_per_yield'], '.4f')})" for m in MODES)
        lines.append(f"#   {e['round']}: {cells}; {_f(e['thread_switch_us'])}, {_f(e['process_switch_us'])}")
    lines.append(f"# Between two processes (not a parameter): {_f(proc)} us per switch (median over rounds).")
    lines.append("[params]")
    lines += [f'"{k}" = {v}' for k, v in params.items()]
    lines.append("")
    lines.append("[measurement]")
    lines.append(f"rounds = {len(table)}")
    if len(cpus) == 1:
        lines.append(f"cpu = {int(cpus.pop())}")
    for m in MODES:
        us = [e[f"{m}_us_per_yield"] for e in table if e[f"{m}_us_per_yield"] is not None]
        spy = [e[f"{m}_switches_per_yield"] for e in table if e[f"{m}_switches_per_yield"] is not None]
        if us:
            lines.append(f"{m}_us_per_yield_median = {statistics.median(us):.4f}")
            lines.append(f"{m}_switches_per_yield_median = {statistics.median(spy):.4f}")
    if proc is not None:
        lines.append(f"process_switch_us = {proc}")
    return "\n".join(lines) + "\n"
