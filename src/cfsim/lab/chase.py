"""How dear a load that misses every cache is on the lab host right now (``lab/cmd/chasebench``),
measured before every lab run and recorded in its manifest (``host_memory_latency``).

One thread follows a random single cycle of pointers through 256 MiB (eight times the lab host's
L3), one pointer a cache line, each load's address the value the one before it read: a DRAM access
and, mostly, a TLB miss a load, whose page walk on a virtual machine crosses the guest's page tables
and the host's. Marking a Go heap far beyond the L3 is bound by such misses, and the lab's 256 MiB
marks ran at 0.77-1.66 MB of scan work a ms of CPU from one run to the next, minutes apart, where
the workload's CPU loop at start-up did not order them (data/README.md, ``gc-spiral-state``); the
lab records the probe so that runs can be compared by it.

``read_chasebench`` parses the benchmark's JSON lines (``(rows, meta)``, pvlib style) and names the
line of anything malformed; ``measure_memory_latency`` runs it and never fails a lab run: a
benchmark that cannot run is recorded as an error.
"""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from cfsim.lab.benchout import positive_rows, run_probe

_FIELDS = ("round", "mb", "loads", "ns_per_load")


class ChasebenchError(ValueError):
    pass


def read_chasebench(text: str, source: str = "chasebench output") -> tuple[list[dict[str, float]], dict[str, Any]]:
    """The benchmark's rows (one per round) and ``{"source", "rounds", "mb"}``.

    >>> rows, meta = read_chasebench('{"round": 0, "mb": 256, "loads": 1000, "ns_per_load": 181.5}')
    >>> rows[0]["ns_per_load"], meta["mb"]
    (181.5, 256)
    >>> read_chasebench('{"round": 0, "mb": 256}', "chase.jsonl")
    Traceback (most recent call last):
    ...
    cfsim.lab.chase.ChasebenchError: chase.jsonl line 1: missing loads, ns_per_load
    """
    rows = positive_rows(text, source, _FIELDS, "ns_per_load", ChasebenchError)
    return rows, {"source": source, "rounds": len(rows), "mb": int(rows[0]["mb"])}


def memory_latency_summary(rows: list[dict[str, float]]) -> dict[str, Any]:
    """The median and range of the rounds' time a load [ns]: the median, since one round in a few
    meets the hypervisor's steal (a round of 417 ns among four of 175-182 on the lab host).

    >>> memory_latency_summary([{"ns_per_load": 180.0}, {"ns_per_load": 417.0}, {"ns_per_load": 176.0}])
    {'ns_per_load_median': 180.0, 'ns_per_load_min': 176.0, 'ns_per_load_max': 417.0, 'n': 3}
    """
    ns = [r["ns_per_load"] for r in rows]
    return {"ns_per_load_median": round(statistics.median(ns), 1), "ns_per_load_min": round(min(ns), 1),
            "ns_per_load_max": round(max(ns), 1), "n": len(ns)}


def measure_memory_latency(binary: Path, mb: int = 256, loads: int = 1_000_000, rounds: int = 5,
                           timeout_s: float = 60.0) -> dict[str, Any]:
    """Run ``chasebench`` (about 1.3 s and 260 MB on the lab host, before the workload starts) and
    summarise it; ``{"error": ...}`` instead when it cannot run."""
    got = run_probe([str(binary), "-mb", str(mb), "-loads", str(loads), "-rounds", str(rounds)], read_chasebench,
                    ChasebenchError, timeout_s)
    if isinstance(got, dict):
        return got
    rows, meta = got
    return {**memory_latency_summary(rows), "mb": meta["mb"], "loads": loads}
