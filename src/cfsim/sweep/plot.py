"""``--plot``: throughput, throttled ratio and p99 latency against the CPU allocation, one line
per GOMAXPROCS policy, with the integer-core boundaries marked; written as PNG and SVG."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from cfsim.sweep.results import SweepResults

__all__ = ["plot_sweep", "PANELS"]

#: (result column, y-axis label) drawn against the allocation
PANELS = (
    ("throughput_per_s", "throughput [1/s]"),
    ("throttled_ratio", "throttled periods / periods [-]"),
    ("latency_p99_s", "p99 latency [s]"),
)
ALLOCATION_KEYS = ("cgroup.cpu_limit",)
POLICY_KEY = "go.gomaxprocs"


def _x_axis(res: SweepResults) -> str:
    for key in ALLOCATION_KEYS:
        if key in res.axes:
            return key
    df = res.frame
    for key in res.axes:
        if key != POLICY_KEY and key in df and df[key].dtype.kind in "if":
            return key
    raise ValueError(f"{res.path}: no numeric grid axis to plot against (axes: {', '.join(res.axes)}); "
                     f"sweep cgroup.cpu_limit")


def plot_sweep(path: str | Path | SweepResults, out_dir: str | Path | None = None,
               name: str = "sweep") -> list[str]:
    """Draw the three panels; returns the paths written (``<name>.png`` and ``<name>.svg``).

    The mean over seeds is drawn as a line, the min..max over seeds as a band. Grid axes other
    than the allocation and the GOMAXPROCS policy become separate lines too.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = path if isinstance(path, SweepResults) else SweepResults.open(path)
    out_dir = Path(out_dir if out_dir is not None else res.path)
    if "://" in str(out_dir):
        raise ValueError("plots are written to a local directory; pass out_dir")
    df = res.frame
    if not len(df):
        raise ValueError(f"{res.path}: the sweep has no rows yet")
    ok = df[df["status"] == "ok"]
    x = _x_axis(res)
    line_keys = [k for k in res.axes if k != x]
    panels = [(c, label) for c, label in PANELS if c in ok.columns and ok[c].notna().any()]
    if not panels:
        raise ValueError(f"{res.path}: none of {', '.join(c for c, _ in PANELS)} in the results")

    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 3.2 * len(panels)), sharex=True,
                             squeeze=False)
    groups: list[tuple[Any, Any]] = list(ok.groupby(line_keys, sort=False)) if line_keys else [((), ok)]
    for (col, label), ax in zip(panels, axes[:, 0]):
        for key, part in groups:
            key = key if isinstance(key, tuple) else (key,)
            stats = part.groupby(x)[col].agg(["mean", "min", "max"]).sort_index()
            text = ", ".join(f"{k.split('.', 1)[1]}={v}" if k != POLICY_KEY else str(v)
                             for k, v in zip(line_keys, key)) or col
            (line,) = ax.plot(stats.index, stats["mean"], marker=".", markersize=3, label=text)
            if (stats["max"] > stats["min"]).any():
                ax.fill_between(stats.index, stats["min"], stats["max"], alpha=0.2,
                                color=line.get_color(), linewidth=0)
        ax.set_ylabel(label)
        if col.startswith("latency") and (ok[col].dropna() > 0).all() and ok[col].notna().any():
            values = ok[col].dropna()
            if values.max() / values.min() > 50:  # queues build up below the needed allocation
                ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
    lo, hi = float(ok[x].min()), float(ok[x].max())
    if x in ALLOCATION_KEYS:
        for ax in axes[:, 0]:
            for core in range(max(1, math.ceil(lo)), math.floor(hi) + 1):
                ax.axvline(core, color="0.4", linestyle="--", linewidth=0.8, zorder=0)
    axes[-1, 0].set_xlabel(f"{x} [cores]" if x in ALLOCATION_KEYS else x)
    title = f"{res.manifest['scenario']['source']}: {len(df)} runs"
    if POLICY_KEY in line_keys:
        title += ", one line per GOMAXPROCS policy"
    title += "; dashed: integer cores" if x in ALLOCATION_KEYS else ""
    axes[0, 0].set_title(title, fontsize=10)
    axes[0, 0].legend(fontsize=8, title=POLICY_KEY if line_keys == [POLICY_KEY] else None,
                      title_fontsize=8, ncol=2 if len(groups) > 6 else 1)
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in ("png", "svg"):
        target = out_dir / f"{name}.{ext}"
        fig.savefig(target, dpi=120)
        paths.append(str(target))
    plt.close(fig)
    return paths
