"""Measure how long a Go stop-the-world waits, on this host, for a P that another M is running, with
``lab/cmd/stwbench``, and turn it into ``host.stop_handshake_us``.

    python -m cfsim lab stopping --out docs/params/lab-host-stopping.toml [--rounds 3]

The runtime's rule (``stopTheWorldWithSema`` and ``gcstopm`` in ``src/runtime/proc.go``): idle Ps
and Ps in a system call are stopped at once; for a P whose M runs a goroutine the coordinator
sends a preemption request (``preemptall``: an asynchronous preemption signal to that M's
thread), then sleeps on ``sched.stopnote`` (``notetsleep``, re-preempting every 100 us) until the
last P to stop wakes it (``notewakeup``). The runtime reports that span as
``/sched/pauses/stopping/gc:seconds``. Between CPUs it is two hops -- the signal reaching the
other thread, and the futex wake-up of the sleeping coordinator -- which take a few microseconds
on bare metal and tens on a virtual machine, where each is an inter-processor interrupt the
hypervisor delivers.

Per round the benchmark runs twice, its goroutines allocating all the time (``-busy 1``): at
GOMAXPROCS 1 (nothing to stop but the coordinator's own P) and at GOMAXPROCS 2 (the other P always
runs a goroutine). ``host.stop_handshake_us`` is the median over the rounds of the second's mean
stopping time less the first's. The model (``GoRuntime._stw_check``) stops the world no sooner
than that after the request whenever another M holds a P; the M's own path to its safe point is
``go.gc_preempt_us``, CPU it burns, where this is time nobody's CPU is spent on.

``read_stwbench`` parses the benchmark's JSON lines (``(rows, meta)``, pvlib style) and names the
line of anything malformed; ``stopping_params`` refuses rounds with too few stops to measure.
"""
from __future__ import annotations

import json
import platform
import statistics
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from cfsim.lab.benchout import json_lines, number_row, run_bench

_FIELDS = ("round", "gomaxprocs", "busy", "gc_cycles", "stw_pauses", "stopping_mean_us", "total_mean_us")
#: fewer stops than this in a run measure too little (the benchmark makes thousands a second)
MIN_PAUSES = 200


class StwbenchError(ValueError):
    pass


def read_stwbench(text: str, source: str = "stwbench output") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The benchmark's rows (one per run: its round, GOMAXPROCS and the runtime's mean stopping
    and whole-pause times) and ``{"source", "rounds"}``.

    >>> rows, meta = read_stwbench('{"round": 0, "gomaxprocs": 2, "busy": 1, "gc_cycles": 900, '
    ...     '"stw_pauses": 1800, "stopping_mean_us": 45.5, "total_mean_us": 62.0}')
    >>> rows[0]["stopping_mean_us"], meta["rounds"]
    (45.5, 1)
    >>> read_stwbench('{"round": 0, "gomaxprocs": 2}', "stw.jsonl")
    Traceback (most recent call last):
    ...
    cfsim.lab.stopping.StwbenchError: stw.jsonl line 1: missing busy, gc_cycles, stw_pauses, stopping_mean_us, total_mean_us
    """
    rows: list[dict[str, Any]] = []
    for i, d in json_lines(text, source, StwbenchError):
        row = number_row(d, _FIELDS, source, i, StwbenchError)
        row["round"], row["gomaxprocs"] = int(row["round"]), int(row["gomaxprocs"])
        if row["gomaxprocs"] < 1:
            raise StwbenchError(f"{source} line {i}: gomaxprocs must be >= 1 (got {d['gomaxprocs']})")
        rows.append(row)
    if not rows:
        raise StwbenchError(f"{source}: no measurements")
    return rows, {"source": source, "rounds": len({r["round"] for r in rows})}


def per_round(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One dict per round that ran at GOMAXPROCS 1 and 2: both mean stopping times, the stops
    counted at 2, and the handshake (``handshake_us``: the difference).

    >>> per_round([{"round": 0, "gomaxprocs": 1, "stopping_mean_us": 0.1, "stw_pauses": 9000},
    ...            {"round": 0, "gomaxprocs": 2, "stopping_mean_us": 45.1, "stw_pauses": 8000}])
    [{'round': 0, 'stopping_g1_us': 0.1, 'stopping_g2_us': 45.1, 'pauses_g2': 8000, 'handshake_us': 45.0}]
    """
    by: dict[int, dict[int, dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(int(r["round"]), {})[int(r["gomaxprocs"])] = r
    out = []
    for rnd, runs in sorted(by.items()):
        if 1 not in runs or 2 not in runs:
            continue
        g1, g2 = runs[1]["stopping_mean_us"], runs[2]["stopping_mean_us"]
        out.append({"round": rnd, "stopping_g1_us": g1, "stopping_g2_us": g2, "pauses_g2": int(runs[2]["stw_pauses"]),
                    "handshake_us": round(g2 - g1, 3)})
    return out


def stopping_params(rows: Iterable[dict[str, Any]]) -> dict[str, float]:
    """``host.stop_handshake_us``: the median over the rounds of the mean stopping time at
    GOMAXPROCS 2 less that at 1 (never below 0). Refuses a round with fewer than
    :data:`MIN_PAUSES` stops at 2, and output without a round that ran both.

    >>> rows = []
    >>> for rnd, g2 in enumerate((40.0, 46.0, 52.0)):
    ...     rows += [{"round": rnd, "gomaxprocs": 1, "stopping_mean_us": 0.1, "stw_pauses": 9000},
    ...              {"round": rnd, "gomaxprocs": 2, "stopping_mean_us": g2, "stw_pauses": 8000}]
    >>> stopping_params(rows)
    {'host.stop_handshake_us': 45.9}
    """
    rounds = per_round(rows)
    if not rounds:
        raise StwbenchError("need rounds that ran at GOMAXPROCS 1 and 2")
    few = [r for r in rounds if r["pauses_g2"] < MIN_PAUSES]
    if few:
        said = ", ".join(f"round {r['round']}: {r['pauses_g2']}" for r in few)
        raise StwbenchError(f"too few stops of the world at GOMAXPROCS 2 to measure ({said}; at least {MIN_PAUSES}): "
                            "run longer, or check that the benchmark's goroutines allocate")
    return {"host.stop_handshake_us": round(max(0.0, statistics.median(r["handshake_us"] for r in rounds)), 1)}


def run_stwbench(binary: Path, rounds: int = 3, dur_s: float = 4.0, timeout_s: float | None = None) -> str:
    """Run the benchmark at GOMAXPROCS 1 and 2 (8 goroutines, always busy, ``dur_s`` each) per
    round and return its lines, each with its ``round``."""
    if rounds < 1:
        raise StwbenchError(f"--rounds must be >= 1 (got {rounds})")
    if timeout_s is None:
        timeout_s = 60.0 + dur_s * 4
    lines = []
    for rnd in range(rounds):
        for procs in (1, 2):
            out = run_bench(binary, ["-workers", "8", "-busy", "1", "-dur", f"{dur_s}s"], timeout_s, StwbenchError,
                            env={"GOMAXPROCS": str(procs)})
            for _, d in json_lines(out, binary.name, StwbenchError):
                lines.append(json.dumps({"round": rnd, **d}))
    return "\n".join(lines) + "\n"


def params_toml(params: dict[str, float], rows: list[dict[str, Any]], command: str) -> str:
    """A ``--params`` file (``[params]`` for ``cfsim validate/run --params``) with the measurement
    it came from as comments and a ``[measurement]`` table."""
    table = per_round(rows)
    lines = [
        "# How long a Go stop-the-world waits on this host for a P another M is running, measured by",
        "# lab/cmd/stwbench: 8 goroutines allocating all the time, at GOMAXPROCS 1 (nothing to stop but",
        "# the coordinator's own P) and 2 (the other P always runs one). The runtime's",
        "# /sched/pauses/stopping/gc:seconds is the time from the stop's request to the last P stopped:",
        "# preemptall's signal to the other M's thread, then that M's futex wake-up of the coordinator",
        "# asleep on sched.stopnote (stopTheWorldWithSema, gcstopm; src/runtime/proc.go).",
        "# host.stop_handshake_us = median over rounds of (mean stopping at GOMAXPROCS 2 - at 1).",
        f"# Host: {platform.node()}, kernel {platform.release()}, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC.",
        f"# Reproduce: {command}",
        "# round: mean stopping us at GOMAXPROCS 1 / 2 (stops at 2); handshake us",
    ]
    for e in table:
        lines.append(f"#   {e['round']}: {e['stopping_g1_us']:.2f} / {e['stopping_g2_us']:.2f} ({e['pauses_g2']}); "
                     f"{e['handshake_us']:.2f}")
    lines.append("[params]")
    lines += [f'"{k}" = {v}' for k, v in params.items()]
    lines.append("")
    lines.append("[measurement]")
    lines.append(f"rounds = {len(table)}")
    hs = [e["handshake_us"] for e in table]
    lines.append(f"handshake_us = [{', '.join(format(v, '.2f') for v in hs)}]")
    return "\n".join(lines) + "\n"
