"""Read a run folder back: the raw Prometheus responses as parsed JSON, by metric or query name."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def load_run(folder: str | Path) -> dict[str, Any]:
    """``{"manifest", "summary", "raw": {metric: response}, "rate": {name: response},
    "samples": {metric: response}}``."""
    folder = Path(folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    out: dict[str, Any] = {"manifest": manifest, "summary": json.loads((folder / "summary.json").read_text())}
    for part in ("raw", "rate", "samples"):
        if part not in manifest["exports"]:
            continue
        lines = (folder / "prom" / f"{part}.jsonl").read_bytes().splitlines()
        out[part] = {name: json.loads(lines[e["line"]]) for name, e in manifest["exports"][part].items()}
    return out


def series(response: dict[str, Any], job: str | None = None) -> list[tuple[dict[str, str], list[tuple[float, float]]]]:
    """(labels, [(t_s, value), ...]) for each series of a query_range response."""
    out = []
    for s in response["data"]["result"]:
        if job is None or s["metric"].get("job") == job:
            out.append((s["metric"], [(float(t), float(v)) for t, v in s["values"]]))
    return out
