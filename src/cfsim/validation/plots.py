"""Validation plots: throughput vs allocation per GOMAXPROCS (model lines over measured points) and
observed vs simulated over time for each run."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt  # the backend is the caller's (Agg on a headless machine)
import pandas as pd


def allocation_curves(report, out: Path) -> list[Path]:
    """One figure per grid: throughput and CPU vs CPU limit, one colour per GOMAXPROCS; the model's
    lines, the lab's points and the naive baseline's dotted lines (:mod:`cfsim.validation.naive`)."""
    paths = []
    by_grid: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in report.runs:
        if r["scenario"]["cgroup.cpu_limit"] is not None and not r["scenario"].get("cgroup.limit_schedule"):
            by_grid[r["grid"]].append(r)
    for grid, runs in by_grid.items():
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in runs:
            groups[str(r["scenario"]["go.gomaxprocs"])].append(r)
        for i, (gmp, rs) in enumerate(sorted(groups.items())):
            rs = sorted(rs, key=lambda r: r["scenario"]["cgroup.cpu_limit"])
            x = [r["scenario"]["cgroup.cpu_limit"] for r in rs]
            color = f"C{i}"
            for ax, metric in zip(axes, ("throughput_per_s", "cpu_usage_cores")):
                ax.plot(x, [r["simulated"][metric] for r in rs], "-", color=color, label=f"model, GOMAXPROCS={gmp}")
                ax.plot(x, [r["observed"][metric] for r in rs], "o", color=color, mfc="none",
                        label=f"lab, GOMAXPROCS={gmp}")
                naive = [(r.get("naive") or {}).get(metric) for r in rs]
                if any(v is not None for v in naive):   # where the lab sits on it, the caps decide
                    ax.plot(x, [float("nan") if v is None else v for v in naive], ":", color=color, lw=1,
                            label="naive min(demand, caps)" if i == 0 else None)
        for ax, label in zip(axes, ("throughput [1/s]", "CPU usage [cores]")):
            ax.set_xlabel("CPU limit [cores]")
            ax.set_ylabel(label)
            top = max((r["scenario"]["cgroup.cpu_limit"] for r in runs), default=1.0)
            for k in range(1, int(top) + 1):
                ax.axvline(k, color="0.85", lw=0.8, zorder=0)
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize=7, ncol=2)
        fig.suptitle(f"{grid}: model (lines) vs lab (points); naive min(demand, caps) dotted")
        fig.tight_layout()
        path = out / f"allocation_{grid}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def _observed_series(run_path: str) -> pd.DataFrame | None:
    from cfsim.io import read_lab_run

    try:
        frames, meta = read_lab_run(run_path)
    except Exception:  # plots are best effort; the error table is the result
        return None
    start = meta["manifest"].get("times", {}).get("start_unix_s")
    cols = {}
    for name in ("throughput_per_s", "cpu_usage_cores"):
        f = frames.get(name)
        if f is None or f.empty:
            continue
        t = f["timestamp"].astype("int64").to_numpy() / 1e9
        cols[name] = pd.Series(f["value"].to_numpy(), index=t - (start or t[0]))
    return pd.DataFrame(cols) if cols else None


def _simulated_series(sim) -> pd.DataFrame:
    s = sim.series.set_index("t_s")
    out = pd.DataFrame({"cpu_usage_cores": s["container_cpu_usage_seconds_total"].diff()})
    w = sim.workload_series
    if not w.empty:
        w = w.set_index("t_s")
        for col in ("records_consumed_total", "requests_completed_total", "burns_total"):
            if col in w:
                out["throughput_per_s"] = w[col].diff().reindex(out.index)
                break
    return out


def time_series(report, out: Path, limit: int = 60) -> list[Path]:
    """Observed vs simulated throughput and CPU over time, one small figure per run."""
    paths = []
    folder = out / "runs"
    folder.mkdir(exist_ok=True)
    for r in report.runs[:limit]:
        sim = report.simulated.get(r["run"])
        obs = _observed_series(r["path"])
        if sim is None or obs is None:
            continue
        simulated = _simulated_series(sim)
        fig, axes = plt.subplots(1, 2, figsize=(10, 3))
        for ax, metric in zip(axes, ("throughput_per_s", "cpu_usage_cores")):
            if metric in obs:
                ax.plot(obs.index, obs[metric], ".", ms=3, label="lab (Prometheus rate 5s)")
            if metric in simulated:
                ax.plot(simulated.index, simulated[metric], "-", lw=1, label="model (1 s)")
            ax.set_xlabel("time [s]")
            ax.set_ylabel(metric)
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize=7)
        fig.suptitle(r["run"], fontsize=9)
        fig.tight_layout()
        path = folder / (r["run"].replace("/", "__") + ".png")
        fig.savefig(path, dpi=90)
        plt.close(fig)
        paths.append(path)
    return paths
