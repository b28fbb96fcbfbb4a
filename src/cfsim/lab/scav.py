"""Measure what the Go runtime's own give-back-and-fault-again cycle near a memory limit costs on
this host with ``lab/cmd/scavbench`` (and ``lab/cmd/faultbench`` for the bare ``madvise``), and
turn it into scenario parameters: ``go.page_fault_us`` (the kernel's CPU for a heap page the
runtime gave back and touches again: the fault and the zeroing, ``do_anonymous_page`` ->
``clear_page``) and ``go.scavenge_page_us`` (the runtime's own work for each page it gives back,
beyond the ``madvise``: ``pageAlloc.scavengeOne`` in ``src/runtime/mgcscavenge.go``).

    python -m cfsim lab scav --out docs/params/lab-host-scavenge.toml [--rounds 3]

Why a second benchmark: faultbench's refault (a page touched right after its own ``madvise``) comes
back from the CPU's page lists hot in its cache, 0.35-0.58 us on the lab host, while near
GOMEMLIMIT the lab's stream paid 1.5-1.8 us a fault beyond its GOGC-100 CPU (docs/model-notes.md).
scavbench runs the runtime's cycle itself at GOMAXPROCS 1 (no TLB shootdowns): each round a
reference mode (GOGC 100, no limit) and a limit mode (GOGC off, GOMEMLIMIT 1.1 x a 16 MiB live heap),
64 KiB records of 1 KiB buffers as the lab's stream allocates them. Per round, over the extra faults
of the limit mode (in steady state each page given back is faulted in once more):

* ``go.page_fault_us`` = the extra system CPU (``getrusage`` ``ru_stime``) per extra fault, less the
  bare ``madvise`` per page (faultbench alone: the release's own kernel time is in ``ru_stime`` too);
* ``go.scavenge_page_us`` = the extra scavenger time (``/cpu/classes/scavenge/total``, which the
  runtime clocks around its releases) per extra fault, less the same bare ``madvise`` (never below 0).

Medians over the rounds. ``read_scavbench`` parses both benchmarks' JSON lines (``(rows, meta)``,
pvlib style) and names the line of anything malformed.
"""
from __future__ import annotations

import json
import statistics
import subprocess
from pathlib import Path
from typing import Any

from cfsim.lab.benchout import json_lines, number_row, params_toml_text
from cfsim.lab.tlb import FaultbenchError, read_faultbench, run_faultbench

_FIELDS = ("round", "mode", "records", "faults_per_record", "stime_us_per_record", "scavenge_us_per_record",
           "user_us_per_record", "gc_us_per_record", "gc_cycles_per_1000_records")
MODES = ("reference", "limit")
#: a limit mode faulting fewer extra pages a record than this gave nothing back to price
MIN_EXTRA_FAULTS = 1.0


class ScavbenchError(ValueError):
    pass


def read_scavbench(text: str, source: str = "scavbench output") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """scavbench's rows (one per round and mode) and ``{"source", "rounds", "bare_release_us"}``: the
    median release per page alone of the faultbench lines in the same text (``None`` without).

    >>> rows, meta = read_scavbench(
    ...     '{"round": 0, "mode": "reference", "records": 100, "faults_per_record": 1.5, "stime_us_per_record": 3, '
    ...     '"scavenge_us_per_record": 0.5, "user_us_per_record": 14, "gc_us_per_record": 12, '
    ...     '"gc_cycles_per_1000_records": 2}')
    >>> rows[0]["mode"], meta["rounds"], meta["bare_release_us"]
    ('reference', 1, None)
    >>> read_scavbench('{"round": 0, "mode": "limit"}\\n', "sb.jsonl")
    Traceback (most recent call last):
    ...
    cfsim.lab.scav.ScavbenchError: sb.jsonl line 1: missing records, faults_per_record, stime_us_per_record, scavenge_us_per_record, user_us_per_record, gc_us_per_record, gc_cycles_per_1000_records
    """
    rows, fb_lines = [], []
    for i, d in json_lines(text, source, ScavbenchError):
        if "busy" in d:      # a faultbench line
            fb_lines.append(json.dumps(d))
            continue
        row = number_row(d, _FIELDS, source, i, ScavbenchError, "mode")
        if row["mode"] not in MODES:
            raise ScavbenchError(f"{source} line {i}: mode must be one of {', '.join(MODES)} (got {d['mode']!r})")
        rows.append(row)
    if not rows:
        raise ScavbenchError(f"{source}: no scavbench measurements")
    bare = None
    if fb_lines:
        try:
            fb, _ = read_faultbench("\n".join(fb_lines), source)
        except FaultbenchError as exc:
            raise ScavbenchError(str(exc)) from None
        alone = [r["release_us_per_page"] for r in fb if not r["busy"]]
        bare = statistics.median(alone) if alone else None
    return rows, {"source": source, "rounds": len({r["round"] for r in rows}), "bare_release_us": bare}


def round_prices(rows: list[dict[str, Any]], bare_release_us: float) -> list[dict[str, float]]:
    """Per round with both modes: the extra faults a record and what each extra fault cost the
    kernel and the scavenger [us] (module docstring).

    >>> ref = {"round": 0.0, "mode": "reference", "faults_per_record": 1.5, "stime_us_per_record": 3.0,
    ...        "scavenge_us_per_record": 0.5}
    >>> lim = {"round": 0.0, "mode": "limit", "faults_per_record": 16.5, "stime_us_per_record": 29.0,
    ...        "scavenge_us_per_record": 4.7}
    >>> round_prices([ref, lim], 0.2)
    [{'round': 0.0, 'extra_faults': 15.0, 'fault_us': 1.533, 'scavenger_us_per_page': 0.28, 'scavenge_page_us': 0.08}]
    """
    by = {(r["round"], r["mode"]): r for r in rows}
    out = []
    for rnd in sorted({r["round"] for r in rows}):
        ref, lim = by.get((rnd, "reference")), by.get((rnd, "limit"))
        if ref is None or lim is None:
            continue
        extra = lim["faults_per_record"] - ref["faults_per_record"]
        if extra < MIN_EXTRA_FAULTS:
            raise ScavbenchError(f"round {int(rnd)}: the limit mode faulted {extra:.2f} pages a record more than the "
                                 "reference: it gave nothing back to price (is the live heap far below the limit?)")
        scav = (lim["scavenge_us_per_record"] - ref["scavenge_us_per_record"]) / extra
        out.append({"round": rnd, "extra_faults": round(extra, 3),
                    "fault_us": round((lim["stime_us_per_record"] - ref["stime_us_per_record"]) / extra
                                      - bare_release_us, 3),
                    "scavenger_us_per_page": round(scav, 3),
                    "scavenge_page_us": round(max(scav - bare_release_us, 0.0), 3)})
    if not out:
        raise ScavbenchError("no round with both a reference and a limit mode")
    return out


def scav_params(rows: list[dict[str, Any]], bare_release_us: float | None) -> dict[str, float]:
    """``go.page_fault_us`` and ``go.scavenge_page_us``: medians over :func:`round_prices`.

    >>> ref = {"round": 0.0, "mode": "reference", "faults_per_record": 1.5, "stime_us_per_record": 3.0,
    ...        "scavenge_us_per_record": 0.5}
    >>> lim = {"round": 0.0, "mode": "limit", "faults_per_record": 16.5, "stime_us_per_record": 29.0,
    ...        "scavenge_us_per_record": 4.7}
    >>> scav_params([ref, lim], 0.2)
    {'go.page_fault_us': 1.533, 'go.scavenge_page_us': 0.08}
    >>> scav_params([ref, lim], None)
    Traceback (most recent call last):
    ...
    cfsim.lab.scav.ScavbenchError: no faultbench lines: the bare madvise price per page is needed to take it out
    """
    if bare_release_us is None:
        raise ScavbenchError("no faultbench lines: the bare madvise price per page is needed to take it out")
    prices = round_prices(rows, bare_release_us)
    return {"go.page_fault_us": round(statistics.median(p["fault_us"] for p in prices), 3),
            "go.scavenge_page_us": round(statistics.median(p["scavenge_page_us"] for p in prices), 3)}


def run_scavbench(binary: Path, rounds: int = 3, timeout_s: float = 900.0) -> str:
    """Run faultbench (its rounds alone give the bare ``madvise``) and then scavbench (about 10 s a
    round), both from ``binary``'s folder; their JSON lines, faultbench's first."""
    if rounds < 1:
        raise ScavbenchError(f"--rounds must be >= 1 (got {rounds})")
    try:
        fb = run_faultbench(Path(binary).parent / "faultbench", rounds, timeout_s)
    except FaultbenchError as exc:
        raise ScavbenchError(str(exc)) from None
    res = subprocess.run([str(binary), "-rounds", str(rounds)], capture_output=True, text=True, timeout=timeout_s)
    if res.returncode != 0:
        raise ScavbenchError(f"{binary} failed (exit {res.returncode}): {res.stderr.strip()[-2000:]}")
    return fb + res.stdout


#: seconds a mode in a calibration run's probe (after a quarter of that to warm up): three rounds
#: take about 12 s
PROBE_SECONDS = 1.5


def measure_page_cycle(binary: Path, bare_release_us: float, rounds: int = 3,
                       timeout_s: float = 120.0) -> dict[str, Any]:
    """Run ``scavbench`` just before a lab run (after faultbench, whose bare release per page it
    takes out) and return ``go.page_fault_us``, ``go.scavenge_page_us`` and each round's row;
    ``{"page_cycle_error": ...}`` instead when it cannot run, so a probe never fails the run it
    precedes."""
    try:
        res = subprocess.run([str(binary), "-rounds", str(rounds), "-seconds", str(PROBE_SECONDS)],
                             capture_output=True, text=True, timeout=timeout_s)
        if res.returncode != 0:
            raise ScavbenchError(f"exit {res.returncode}: {res.stderr.strip()[-500:]}")
        rows, _ = read_scavbench(res.stdout, Path(binary).name)
        params = scav_params(rows, bare_release_us)
    except (OSError, subprocess.TimeoutExpired, ScavbenchError) as exc:
        return {"page_cycle_error": f"{Path(binary).name}: {exc}"}
    return {**params, "page_cycle_rows": [{k: r[k] for k in _FIELDS} for r in rows]}


def params_toml(params: dict[str, float], rows: list[dict[str, Any]], bare_release_us: float, command: str) -> str:
    """A ``--params`` file with the measurement it came from as comments."""
    about = [
        "# This host's CPU for the Go runtime's give-back-and-fault-again cycle near a memory limit, measured",
        "# by lab/cmd/scavbench at GOMAXPROCS 1 (no TLB shootdowns): 64 KiB records of 1 KiB buffers beside a",
        "# 16 MiB live heap, each round at GOGC 100 without a limit (reference) and at GOGC off with GOMEMLIMIT",
        "# 1.1 x the heap (limit), where the allocator gives free pages back before it grows the heap",
        "# (mheap.allocSpan -> pageAlloc.scavenge, src/runtime/mgcscavenge.go) and the next allocation faults",
        "# them in again. Over the limit's extra faults: go.page_fault_us = extra system CPU (ru_stime) per",
        "# fault less the bare madvise per page; go.scavenge_page_us = extra scavenger time",
        "# (/cpu/classes/scavenge/total) per page less the same madvise (lab/cmd/faultbench alone, the",
        f"# same minutes: {bare_release_us:.3f} us a page). faultbench's own refault (a page hot in the CPU's",
        "# page lists and cache) is cheaper than this fault; cfsim.lab.scav says why.",
    ]
    legend = ["# round: extra faults a record, fault [us], scavenger per page [us]; per mode: faults, stime, scavenge,",
              "#   user P-time, GC [us a record], GC cycles a 1000 records"]
    lines = [f"#   {int(p['round'])}: {p['extra_faults']:.2f}, {p['fault_us']:.3f}, {p['scavenger_us_per_page']:.3f}"
             for p in round_prices(rows, bare_release_us)]
    lines += [f"#     {int(r['round'])} {r['mode']:9s}: {r['faults_per_record']:.2f}, {r['stime_us_per_record']:.2f}, "
              f"{r['scavenge_us_per_record']:.2f}, {r['user_us_per_record']:.2f}, {r['gc_us_per_record']:.2f}, "
              f"{r['gc_cycles_per_1000_records']:.2f}" for r in rows]
    return params_toml_text(about, command, legend, lines, params)
