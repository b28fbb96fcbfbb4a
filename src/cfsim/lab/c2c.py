"""How long a cache line takes between two CPUs of the lab host and back (``lab/cmd/c2cbench``),
measured before every lab run and recorded in its manifest (``host_c2c``).

On a virtual machine the guest's topology does not tell where its vCPUs run, and the lab's VM
moves between states: the same pair of vCPUs measured 400 ns a round trip and, minutes later,
80-130 ns (2026-11-27). Two CPUs that mark the Go heap at once pass its lines between them, so
it is a candidate for the GC's extra cost at GOMAXPROCS >= 2 (docs/model-notes.md, "The CPUs
marking at once"), though in the lab's first seven pairs of runs the round trip before a run did
not predict that cost; the lab records it so that runs and grids can be compared by it.

``read_c2cbench`` parses the benchmark's JSON lines (``(rows, meta)``, pvlib style) and names the
line of anything malformed; ``measure_c2c`` runs it and never fails a lab run: a benchmark that
cannot run is recorded as an error.
"""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from cfsim.lab.benchout import positive_rows, run_probe

_FIELDS = ("round", "cpu_a", "cpu_b", "trips", "round_trip_ns")


class C2cbenchError(ValueError):
    pass


def read_c2cbench(text: str, source: str = "c2cbench output") -> tuple[list[dict[str, float]], dict[str, Any]]:
    """The benchmark's rows (one per round and pair of CPUs) and ``{"source", "rounds", "pairs"}``.

    >>> rows, meta = read_c2cbench('{"round": 0, "cpu_a": 0, "cpu_b": 1, "trips": 1000, "round_trip_ns": 98.5}')
    >>> rows[0]["round_trip_ns"], meta["pairs"]
    (98.5, [(0, 1)])
    >>> read_c2cbench('{"round": 0, "cpu_a": 0}', "c2c.jsonl")
    Traceback (most recent call last):
    ...
    cfsim.lab.c2c.C2cbenchError: c2c.jsonl line 1: missing cpu_b, trips, round_trip_ns
    """
    rows = positive_rows(text, source, _FIELDS, "round_trip_ns", C2cbenchError)
    pairs = sorted({(int(r["cpu_a"]), int(r["cpu_b"])) for r in rows})
    return rows, {"source": source, "rounds": len({r["round"] for r in rows}), "pairs": pairs}


def c2c_summary(rows: list[dict[str, float]]) -> dict[str, Any]:
    """The median and range of the round trips over every round and pair [ns].

    >>> c2c_summary([{"round_trip_ns": 90.0}, {"round_trip_ns": 130.0}, {"round_trip_ns": 100.0}])
    {'round_trip_ns_median': 100.0, 'round_trip_ns_min': 90.0, 'round_trip_ns_max': 130.0, 'n': 3}
    """
    trips = [r["round_trip_ns"] for r in rows]
    return {"round_trip_ns_median": round(statistics.median(trips), 1), "round_trip_ns_min": round(min(trips), 1),
            "round_trip_ns_max": round(max(trips), 1), "n": len(trips)}


def measure_c2c(binary: Path, rounds: int = 5, trips: int = 200_000, timeout_s: float = 30.0) -> dict[str, Any]:
    """Run ``c2cbench`` (a fraction of a second on the lab host) and summarise it; ``{"error": ...}``
    instead when it cannot run (no binary, one CPU, an affinity call refused)."""
    got = run_probe([str(binary), "-rounds", str(rounds), "-trips", str(trips)], read_c2cbench, C2cbenchError,
                    timeout_s)
    if isinstance(got, dict):
        return got
    rows, meta = got
    return {**c2c_summary(rows), "pairs": [list(p) for p in meta["pairs"]], "trips": trips}
