"""Read a run folder back as parsed JSON. The reading itself lives in one place,
:func:`cfsim.io.load_lab_run` (``.jsonl``, ``.jsonl.gz`` and the older per-file layout); this
module keeps the lab's short names for it and a helper to walk a range response."""
from __future__ import annotations

from typing import Any

from cfsim.io.lab import load_lab_run as load_run

__all__ = ["load_run", "series"]


def series(response: dict[str, Any], job: str | None = None) -> list[tuple[dict[str, str], list[tuple[float, float]]]]:
    """(labels, [(t_s, value), ...]) for each series of a query_range response."""
    out = []
    for s in response["data"]["result"]:
        if job is None or s["metric"].get("job") == job:
            out.append((s["metric"], [(float(t), float(v)) for t, v in s["values"]]))
    return out
