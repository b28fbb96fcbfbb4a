"""The sweep's progress bar (tqdm on stderr, see :mod:`cfsim.progress`) and the table printed when a
sweep ends."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from cfsim.progress import Progress as BaseProgress

__all__ = ["Progress", "summary_table"]


class Progress(BaseProgress):
    """``with Progress(total, initial) as bar: bar.update(row)``: the sweep's bar (:class:`cfsim.progress.
    Progress`), counting failed runs; silent when ``enabled`` is False or stderr is not a terminal."""

    def __init__(self, total: int, initial: int = 0, enabled: bool = True):
        super().__init__(total, "sweep", "run", enabled, initial)
        self.errors = 0

    def update(self, row: Mapping[str, Any]) -> None:
        if row.get("status") != "ok":
            self.errors += 1
        self.advance(1, f"errors={self.errors}" if self.errors else None)


#: result columns shown in the final table when present
SHOWN = ("throughput_per_s", "throttled_ratio", "latency_p99_s", "cpu_usage_cores")


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value != value:
            return "-"
        return f"{value:.4g}"
    return str(value)


def summary_table(frame: Any, axes: Sequence[str], max_rows: int = 24) -> str:
    """Runs, errors and the median of the main results, per value of the grid axes other than the
    longest one (the curves' x axis), e.g. one line per GOMAXPROCS policy."""
    if frame is None or len(frame) == 0:
        return "(no rows)"
    axes = [a for a in axes if a in frame.columns]
    by: list[str] = []
    if len(axes) > 1:
        longest = max(axes, key=lambda a: frame[a].nunique())
        by = [a for a in axes if a != longest]
    shown = [c for c in SHOWN if c in frame.columns]
    frame = frame.assign(_error=(frame["status"] != "ok").astype(int))
    groups = frame.groupby(by, sort=False, dropna=False) if by else [((), frame)]
    header = [*by, "runs", "errors", *(f"median {c}" for c in shown)]
    lines = []
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        ok = part[part["status"] == "ok"]
        cells = [*(_fmt(k) for k in key), str(len(part)), str(int(part["_error"].sum()))]
        cells += [_fmt(float(ok[c].median())) if len(ok) and ok[c].notna().any() else "-" for c in shown]
        lines.append(cells)
    more = len(lines) - max_rows
    lines = lines[:max_rows]
    widths = [max(len(h), *(len(r[i]) for r in lines)) for i, h in enumerate(header)]
    text = ["  ".join(h.rjust(w) for h, w in zip(header, widths))]
    text += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in lines]
    if more > 0:
        text.append(f"... and {more} more groups")
    return "\n".join(text)
