"""Measure this host's cost of a thread's sleep and wake-up with ``lab/cmd/wakebench`` and turn
it into scenario parameters (``host.wakeup_us``, ``host.wakeup_cold_us``,
``host.wakeup_cold_ms``, ``host.timer_latency_us``, ``host.wakeup_latency_us``;
:mod:`cfsim.kernel.wakeup`).

    python -m cfsim lab wakeup --out docs/params/lab-host-wakeup.toml [--rounds 3]

``read_wakebench`` parses the benchmark's JSON lines (``(rows, meta)``, pvlib style) and names
the line of anything malformed; ``wakeup_params`` takes the median over rounds at each sleep
length and fits the curve.
"""
from __future__ import annotations

import platform
import statistics
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from cfsim.kernel.wakeup import LINUX_TIMER_SLACK_NS, fit_wakeup_curve, timer_latency_us
from cfsim.lab.benchout import json_lines, require

_FIELDS = ("round", "sleep_us", "cycles", "busy_cpu_us_mean", "cycle_cpu_us_mean", "wall_us_per_cycle")


class WakebenchError(ValueError):
    pass


def read_wakebench(text: str, source: str = "wakebench output") -> tuple[list[dict[str, float]], dict[str, Any]]:
    """The benchmark's rows (one per sleep length and round) and ``{"source", "rounds",
    "futex_wake"}`` (the wake-up latency lines, ``"kind": "futex_wake"``).

    >>> rows, meta = read_wakebench('{"round": 0, "sleep_us": 50, "cycles": 9, "busy_cpu_us_mean": 400, '
    ...                             '"cycle_cpu_us_mean": 20.5, "wall_us_per_cycle": 540}')
    >>> rows[0]["late_us"], meta["rounds"]
    (90.0, 1)
    >>> read_wakebench('{"round": 0}', "x.jsonl")
    Traceback (most recent call last):
    ...
    cfsim.lab.wakeup.WakebenchError: x.jsonl line 1: missing sleep_us, cycles, busy_cpu_us_mean, cycle_cpu_us_mean, wall_us_per_cycle
    """
    rows, futex = [], []
    for i, d in json_lines(text, source, WakebenchError):
        if d.get("kind") == "futex_wake":
            if not isinstance(d.get("latency_us_median"), (int, float)):
                raise WakebenchError(f"{source} line {i}: futex_wake without a numeric latency_us_median")
            futex.append(d)
            continue
        require(d, _FIELDS, source, i, WakebenchError)
        row = {k: float(d[k]) for k in _FIELDS}
        # how late the sleep ended: wall time per cycle beyond the busy loop and the sleep asked for
        # (the busy loop's wall time is its CPU time: the benchmark runs on an otherwise idle host)
        row["late_us"] = round(row["wall_us_per_cycle"] - row["busy_cpu_us_mean"] - row["sleep_us"], 3)
        rows.append(row)
    if not rows:
        raise WakebenchError(f"{source}: no measurements")
    return rows, {"source": source, "rounds": len({r["round"] for r in rows}), "futex_wake": futex}


def wakeup_params(rows: Iterable[dict[str, float]], futex_wake: Iterable[dict[str, Any]] = ()) -> dict[str, float]:
    """Scenario parameters from the rows: the median over rounds at each sleep length, the curve
    fitted through them, the timer latency from the short sleeps; with ``futex_wake`` lines, the
    wake-up latency (median of their medians).

    >>> import math
    >>> rows = [{"sleep_us": s, "cycle_cpu_us_mean": 20 + 60 * -math.expm1(-s / 10_000), "late_us": 90.0}
    ...         for s in (50, 200, 1000, 5000, 20000, 50000)]
    >>> wakeup_params(rows)
    {'host.wakeup_us': 20.0, 'host.wakeup_cold_us': 60.0, 'host.wakeup_cold_ms': 10.0, 'host.timer_latency_us': 40.0}
    """
    by_sleep = _by_sleep(rows)
    cpu = [(s, statistics.median(r["cycle_cpu_us_mean"] for r in rs)) for s, rs in by_sleep.items()]
    late = [(s, statistics.median(r["late_us"] for r in rs)) for s, rs in by_sleep.items()]
    base, cold, tau_ms = fit_wakeup_curve(cpu)
    out = {"host.wakeup_us": round(base, 2), "host.wakeup_cold_us": round(cold, 2),
           "host.wakeup_cold_ms": round(tau_ms, 2),
           "host.timer_latency_us": round(timer_latency_us(late, LINUX_TIMER_SLACK_NS / 1e3), 1)}
    lat = [float(d["latency_us_median"]) for d in futex_wake]
    if lat:
        out["host.wakeup_latency_us"] = round(statistics.median(lat), 1)
    return out


def _by_sleep(rows: Iterable[dict[str, float]]) -> dict[float, list[dict[str, float]]]:
    """The rows grouped by sleep length, shortest first."""
    out: dict[float, list[dict[str, float]]] = {}
    for r in rows:
        out.setdefault(r["sleep_us"], []).append(r)
    return dict(sorted(out.items()))


def run_wakebench(binary: Path, rounds: int = 3, busy_us: float = 400.0, timeout_s: float = 600.0) -> str:
    """Run the benchmark (about 20 s per round) and return its output."""
    if rounds < 1:
        raise WakebenchError(f"--rounds must be >= 1 (got {rounds})")
    res = subprocess.run([str(binary), "-rounds", str(rounds), "-busy-us", str(busy_us)],
                         capture_output=True, text=True, timeout=timeout_s)
    if res.returncode != 0:
        raise WakebenchError(f"{binary} failed (exit {res.returncode}): {res.stderr.strip()[-2000:]}")
    return res.stdout


def params_toml(params: dict[str, float], rows: list[dict[str, float]], command: str,
                futex_wake: Iterable[dict[str, Any]] = ()) -> str:
    """A ``--params`` file (``[params]`` for ``cfsim validate/run --params``) with the measurement
    it came from as comments and a ``[measurement]`` table."""
    by_sleep = _by_sleep(rows)
    lines = [
        "# This host's CPU per sleep and wake-up of a thread, and its timer latency, measured by",
        "# lab/cmd/wakebench (one OS thread alternating a busy loop with nanosleep; its CPU outside",
        "# the loop per cycle) and fitted as base + cold x (1 - exp(-sleep / tau)) (cfsim.kernel.wakeup).",
        f"# Host: {platform.node()}, kernel {platform.release()}, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC.",
        f"# Reproduce: {command}",
        "# sleep [us]: CPU per cycle [us] (rounds), how late it woke [us] (median)",
    ]
    for s, rs in by_sleep.items():
        cpus = ", ".join(f"{r['cycle_cpu_us_mean']:.1f}" for r in rs)
        lines.append(f"#   {s:>8.0f}: {cpus}; late {statistics.median(r['late_us'] for r in rs):.0f}")
    for d in futex_wake:
        lines.append(f"# futex wake-up to run on an idle CPU (round {d.get('round')}): p10 {d.get('latency_us_p10')}, "
                     f"median {d['latency_us_median']}, p90 {d.get('latency_us_p90')} us")
    lines.append("[params]")
    lines += [f'"{k}" = {v}' for k, v in params.items()]
    lines.append("")
    lines.append("[measurement]")
    lines.append(f'rounds = {len({r["round"] for r in rows})}')
    lines.append(f'sleeps_us = [{", ".join(f"{s:g}" for s in by_sleep)}]')
    lines.append("cycle_cpu_us_median = [" + ", ".join(
        f"{statistics.median(r['cycle_cpu_us_mean'] for r in rs):.2f}" for rs in by_sleep.values()) + "]")
    return "\n".join(lines) + "\n"
