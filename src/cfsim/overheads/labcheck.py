"""Checks of a lab grid's tails the issue asks for, beyond per-run errors: is the ordering of p99
across GOMAXPROCS kept wherever the repeats separate it?

Runs are grouped by every scenario key but GOMAXPROCS (and the seed); within a group, two
GOMAXPROCS settings are *separated* when the ranges of their repeats' p99 do not overlap, and the
model keeps the order when its p99 is ordered the same way.
"""
from __future__ import annotations

from collections import defaultdict
from itertools import combinations
from typing import Any, Iterable, Mapping


def p99_order(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """``rows``: ``{"group": hashable, "gomaxprocs": int, "p99_lab": float, "p99_model": float}``
    (one per run; repeats share group and GOMAXPROCS). Returns the separated pairs, how many the
    model orders the same way, and the pairs it gets wrong."""
    by = defaultdict(lambda: defaultdict(lambda: {"lab": [], "model": []}))
    for r in rows:
        if r.get("p99_lab") is None or r.get("p99_model") is None:
            continue
        cell = by[r["group"]][r["gomaxprocs"]]
        cell["lab"].append(float(r["p99_lab"]))
        cell["model"].append(float(r["p99_model"]))
    separated, kept, wrong = 0, 0, []
    for group, cells in by.items():
        for g1, g2 in combinations(sorted(cells), 2):
            a, b = cells[g1], cells[g2]
            if max(a["lab"]) < min(b["lab"]):
                lab_sign = -1
            elif max(b["lab"]) < min(a["lab"]):
                lab_sign = 1
            else:
                continue   # the repeats overlap: the lab does not separate them
            separated += 1
            ma, mb = sum(a["model"]) / len(a["model"]), sum(b["model"]) / len(b["model"])
            if (ma > mb) - (ma < mb) == lab_sign:
                kept += 1
            else:
                wrong.append((group, g1, g2))
    return {"separated_pairs": separated, "kept": kept, "wrong": wrong,
            "share_kept": kept / separated if separated else None}
