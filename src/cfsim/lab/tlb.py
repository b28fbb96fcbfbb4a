"""Measure what returning memory to the OS costs on this host with ``lab/cmd/faultbench`` and turn
it into scenario parameters: ``go.page_release_us`` (``madvise(MADV_DONTNEED)`` of a 64 KiB run
alone, per 4 KiB page) and ``host.tlb_shootdown_us`` (the CPU a process loses per TLB flush of
another CPU that runs one of its threads: the releasing thread's wait for the inter-processor
interrupt plus the interrupted thread's handling; ``arch/x86/mm/tlb.c: native_flush_tlb_multi``).

    python -m cfsim lab tlb --out docs/params/lab-host-memory.toml [--rounds 3]

``read_faultbench`` parses the benchmark's JSON lines (``(rows, meta)``, pvlib style) and names
the line of anything malformed; ``tlb_params`` takes medians over the rounds.
"""
from __future__ import annotations

import statistics
import subprocess
from pathlib import Path
from typing import Any

from cfsim.lab.benchout import json_lines, number_row, params_toml_text

_FIELDS = ("round", "busy", "fault_us_per_page", "refault_us_per_page", "release_us_per_page", "release_us",
           "flushes_per_release", "other_lost_us_per_release")
#: a busy run counting fewer flushes per release than this flushed nothing the model could charge
MIN_FLUSHES_PER_RELEASE = 0.2


class FaultbenchError(ValueError):
    pass


def read_faultbench(text: str, source: str = "faultbench output") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The benchmark's rows (one per round and mode, ``busy`` False or True) and ``{"source",
    "rounds"}``.

    >>> rows, meta = read_faultbench('{"round": 0, "busy": false, "fault_us_per_page": 2, "refault_us_per_page": 0.4, '
    ...     '"release_us_per_page": 0.2, "release_us": 3.2, "flushes_per_release": 0, "other_lost_us_per_release": 0}')
    >>> rows[0]["release_us"], meta["rounds"]
    (3.2, 1)
    >>> read_faultbench('{"round": 0}\\n', "fb.jsonl")
    Traceback (most recent call last):
    ...
    cfsim.lab.tlb.FaultbenchError: fb.jsonl line 1: missing busy, fault_us_per_page, refault_us_per_page, release_us_per_page, release_us, flushes_per_release, other_lost_us_per_release
    """
    rows = []
    for i, d in json_lines(text, source, FaultbenchError):
        row = number_row(d, _FIELDS, source, i, FaultbenchError, "busy")
        if not isinstance(row["busy"], bool):
            raise FaultbenchError(f"{source} line {i}: busy must be true or false (got {d['busy']!r})")
        rows.append(row)
    if not rows:
        raise FaultbenchError(f"{source}: no measurements")
    return rows, {"source": source, "rounds": len({r["round"] for r in rows})}


def tlb_params(rows: list[dict[str, Any]]) -> dict[str, float]:
    """``go.page_release_us``: the median release per page alone; ``host.tlb_shootdown_us``: per
    flush, the releasing thread's extra time with the other CPU busy (the busy rounds' median
    release beyond the alone median, over their median flushes per release) plus the median of
    what the busy thread lost per flush.

    >>> alone = [{"busy": False, "release_us": 3.0, "release_us_per_page": 0.19,
    ...           "flushes_per_release": 0.0, "other_lost_us_per_release": 0.0}] * 3
    >>> busy = [{"busy": True, "release_us": 13.0 + d, "release_us_per_page": 0.8,
    ...          "flushes_per_release": 1.0, "other_lost_us_per_release": 8.0} for d in (-1, 0, 1)]
    >>> tlb_params(alone + busy)
    {'go.page_release_us': 0.19, 'host.tlb_shootdown_us': 18.0}
    """
    alone = [r for r in rows if not r["busy"]]
    busy = [r for r in rows if r["busy"]]
    if not alone or not busy:
        raise FaultbenchError("need runs both alone and with the other CPU busy")
    flushes = statistics.median(r["flushes_per_release"] for r in busy)
    if flushes < MIN_FLUSHES_PER_RELEASE:
        raise FaultbenchError(f"{flushes:.3f} TLB flushes per release with the other CPU busy: no flush was "
                              "counted (one CPU, or no 'TLB' row in /proc/interrupts)")
    base = statistics.median(r["release_us"] for r in alone)
    waited = (statistics.median(r["release_us"] for r in busy) - base) / flushes
    lost = statistics.median(r["other_lost_us_per_release"] / max(r["flushes_per_release"], 1e-9) for r in busy)
    return {"go.page_release_us": round(statistics.median(r["release_us_per_page"] for r in alone), 3),
            "host.tlb_shootdown_us": round(max(waited, 0.0) + max(lost, 0.0), 1)}


def run_faultbench(binary: Path, rounds: int = 3, timeout_s: float = 600.0) -> str:
    """Run the benchmark (a few seconds per round) and return its output."""
    if rounds < 1:
        raise FaultbenchError(f"--rounds must be >= 1 (got {rounds})")
    res = subprocess.run([str(binary), "-rounds", str(rounds)], capture_output=True, text=True, timeout=timeout_s)
    if res.returncode != 0:
        raise FaultbenchError(f"{binary} failed (exit {res.returncode}): {res.stderr.strip()[-2000:]}")
    return res.stdout


def memory_path_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What the host charged for its memory path in ``rows`` (medians over the rounds): a refault
    of a released page and a release per 4 KiB page alone [us], and :func:`tlb_params`' figures
    (``None`` where the busy runs counted no flush).

    >>> alone = {"busy": False, "refault_us_per_page": 0.6, "release_us_per_page": 0.3, "release_us": 4.8,
    ...          "flushes_per_release": 0.0, "other_lost_us_per_release": 0.0}
    >>> busy = {"busy": True, "refault_us_per_page": 0.5, "release_us_per_page": 1.8, "release_us": 28.8,
    ...         "flushes_per_release": 1.0, "other_lost_us_per_release": 17.0}
    >>> memory_path_summary([alone, busy])
    {'refault_us_per_page': 0.6, 'release_us_per_page': 0.3, 'go.page_release_us': 0.3, 'host.tlb_shootdown_us': 41.0}
    """
    alone = [r for r in rows if not r["busy"]]
    if not alone:
        raise FaultbenchError("no run alone")
    out: dict[str, Any] = {
        "refault_us_per_page": round(statistics.median(r["refault_us_per_page"] for r in alone), 4),
        "release_us_per_page": round(statistics.median(r["release_us_per_page"] for r in alone), 4)}
    try:
        out.update(tlb_params(rows))
    except FaultbenchError:
        out.update({"go.page_release_us": out["release_us_per_page"], "host.tlb_shootdown_us": None})
    return out


def measure_memory_path(binary: Path, rounds: int = 3, timeout_s: float = 120.0) -> dict[str, Any]:
    """Run ``faultbench`` just before a lab run (about a second a round) and summarise it
    (:func:`memory_path_summary`, with each round's row); ``{"error": ...}`` instead when it
    cannot run, so a probe never fails the run it precedes."""
    try:
        text = run_faultbench(Path(binary), rounds, timeout_s)
        rows, _ = read_faultbench(text, Path(binary).name)
        summary = memory_path_summary(rows)
    except (OSError, subprocess.TimeoutExpired, FaultbenchError) as exc:
        return {"error": f"{Path(binary).name}: {exc}"}
    return {**summary, "rounds": rounds, "rows": [{k: r[k] for k in _FIELDS} for r in rows]}


def params_toml(params: dict[str, float], rows: list[dict[str, Any]], command: str) -> str:
    """A ``--params`` file with the measurement it came from as comments."""
    about = [
        "# This host's CPU for returning memory to the OS, measured by lab/cmd/faultbench: 256 MiB",
        "# released in 64 KiB runs (madvise MADV_DONTNEED, as Go's scavenger does), alone and with a",
        "# second thread of the process spinning on the other CPU, whose TLB each release must then flush",
        "# (flushes counted in the 'TLB' row of /proc/interrupts; the spinner's progress gives what the",
        "# interrupt costs the CPU it hits). host.tlb_shootdown_us = the releasing thread's wait per flush",
        "# + the interrupted thread's loss per flush; on bare metal a few us, so the default is 0.",
    ]
    legend = ["# round, mode: release [us] (per page), flushes per release, other thread's loss per release [us]"]
    lines = [f"#   {int(r['round'])} {'busy ' if r['busy'] else 'alone'}: {r['release_us']:.2f} "
             f"({r['release_us_per_page']:.3f}), {r['flushes_per_release']:.2f}, "
             f"{r['other_lost_us_per_release']:.2f}" for r in rows]
    return params_toml_text(about, command, legend, lines, params)
