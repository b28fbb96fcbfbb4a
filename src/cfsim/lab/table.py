"""One row per run of a grid folder (summary keys + grid axes + noise indicators), for notebooks
and for ``runs.csv`` next to ``grid.json``."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from cfsim.io.manifest import has_manifest, read_manifest


# further scenario keys the newer grids vary (empty columns for grids that do not)
SCENARIO_COLUMNS = (("workload", "kind"), ("workload", "rate_per_s"), ("workload", "arrivals"),
                    ("go", "gogc"), ("go", "gomemlimit_mb"), ("go", "gomemlimit_policy"), ("go", "live_heap_mb"),
                    ("cgroup", "memory_limit_mb"), ("lab", "load_fraction"), ("lab", "profile_s"))


def run_row(folder: Path) -> dict[str, Any] | None:
    if not (folder / "summary.json").is_file() or not has_manifest(folder):
        return None
    summ = json.loads((folder / "summary.json").read_text())
    man = read_manifest(folder)
    sc = man.get("scenario") or {}
    host = man.get("host_cpu") or {}
    row: dict[str, Any] = {
        "run": folder.name,
        "role": "calibration" if folder.name.startswith("calib") else
                "repeat" if folder.name.startswith("repeat") else "point",
        "status": man.get("status", "ok"),
        "scenario.cpu_limit": sc.get("cgroup", {}).get("cpu_limit"),
        "scenario.gomaxprocs": str(sc.get("go", {}).get("gomaxprocs")),
        **{f"scenario.{k}": sc.get(sec, {}).get(k) for sec, k in SCENARIO_COLUMNS},
        "start_utc": (man.get("times") or {}).get("start_utc"),
        "others_cores": host.get("others_cores"),
        "host_busy_cores": host.get("host_busy_cores"),
        "harness_cores": host.get("harness_cores"),
        "tenants_cores": host.get("tenants_cores"),
        "pre_run_tenants_cores": (host.get("pre_run") or {}).get("tenants_cores"),
        "gomaxprocs_expected": (man.get("gomaxprocs") or {}).get("expected_at_start"),
        # the host probes taken before the run's load (cfsim.lab.c2c, cfsim.lab.chase, the workload's
        # walk through its own heap): blank where the run predates them
        "c2c_round_trip_ns": (man.get("host_c2c") or {}).get("round_trip_ns_median"),
        "memory_latency_ns": (man.get("host_memory_latency") or {}).get("ns_per_load_median"),
        "heap_walk_ns_per_hop": man.get("heap_walk_ns_per_hop"),
    }
    row.update(summ)
    return row


def grid_table(grid_dir: str | Path) -> pd.DataFrame:
    """Rows in the grid's run order (``grid.json`` ``order``), finished runs only."""
    grid_dir = Path(grid_dir)
    order = json.loads((grid_dir / "grid.json").read_text()).get("order", []) if (grid_dir / "grid.json").exists() \
        else sorted(p.name for p in grid_dir.iterdir() if p.is_dir())
    rows = [r for name in order if (r := run_row(grid_dir / name)) is not None]
    return pd.DataFrame(rows)


def write_csv(grid_dir: str | Path) -> Path:
    out = Path(grid_dir) / "runs.csv"
    grid_table(grid_dir).to_csv(out, index=False, float_format="%.6g")
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m cfsim.lab.table GRID_DIR...``: write ``runs.csv`` into each grid folder."""
    import sys

    for d in (argv if argv is not None else sys.argv[1:]):
        print(write_csv(d))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
