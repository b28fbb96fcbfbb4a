# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% tags=["parameters"]
# 07 - Playground: one service, every knob, the sweep and the trap at hand.
# Edit this cell (or pass papermill parameters) and run all.
import os

SMALL = os.environ.get("CFSIM_SMALL", "") not in ("", "0")
SCENARIO = "grab-sinktos3"  # a built-in name (python -m cfsim scenarios) or a path to a TOML file
KNOBS = {  # any "section.key": value of the scenario contract (the table below lists them all)
    "host.cpus": 8,
    "cgroup.cpu_limit": 1.94,
    "go.gomaxprocs": "automaxprocs",  # "host" | "automaxprocs" | "go1.25" | an integer
    "go.version": "1.20",
    "workload.rate_per_s": 8500.0,
    "workload.cpu_ms_per_item": 0.2,
    "vpa.enabled": False,  # the single run and the sweep use the event engine (no VPA)
}
RUN_S = 4.0 if SMALL else 30.0
SWEEP_LIMITS = "1,1.94,2,3" if SMALL else "0.5:4:0.1"
SWEEP_POLICIES = "automaxprocs,go1.25,host"
SWEEP_SEEDS = 1
SWEEP_WORKERS = 0 if SMALL else 2
RUN_TRAP = True  # the VPA loop over days on the same service (long-horizon engine)
TRAP_DAYS = 1.5 if SMALL else 7.0
TRAP_RESPONSE = "analytic"  # "analytic" | "auto" (event-engine surface, cached; slow the first time)

# %% [markdown]
# # Playground
#
# One service with all its knobs. Three tools on it:
#
# 1. **one run** on the event engine (CFS quota, Go runtime, workload): the `run --json` summary, the
#    per-second cAdvisor-named series, the per-period kernel table;
# 2. **a sweep** over the CPU limit and the GOMAXPROCS policy (`cfsim.sweep`, stored as Parquet, read
#    back as an xarray Dataset);
# 3. **the trap**: the VPA loop over days with the fixes (`python -m cfsim trap`).
#
# The knobs and their allowed ranges are the scenario contract (`cfsim.scenario.schema`), listed at the end.

# %%
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import display

import cfsim
from cfsim.scenario import load_scenario
from cfsim.scenario.schema import SCHEMA
from cfsim.sweep import Grid, SweepResults, parse_axis, run_sweep

from _nbutil import headline

service = load_scenario(SCENARIO, [(k, v) for k, v in KNOBS.items()])
service = service.with_overrides([("run.duration_s", RUN_S), ("run.warmup_s", min(2.0, RUN_S / 4))])
print(service.to_toml())

# %% [markdown]
# ## 1. One run

# %%
result = cfsim.simulate(service)
s = result.summary
print(f"simulated {s['duration_s']:.1f} s in {result.wall_s:.2f} s of wall time")
pd.Series({k: v for k, v in s.items() if not isinstance(v, (list, dict))}, name="summary").to_frame()

# %%
ser = result.series.set_index("t_s")
per_s = ser.diff().dropna()
fig, axes = plt.subplots(1, 3, figsize=(15, 3.6))
axes[0].plot(per_s.index, per_s["container_cpu_usage_seconds_total"], label="usage")
lim = service["cgroup.cpu_limit"]
if lim:
    axes[0].axhline(lim, color="r", ls="--", lw=1, label="limit")
axes[0].set_ylabel("CPU [cores]")
axes[0].legend()
ratio = per_s["container_cpu_cfs_throttled_periods_total"] / per_s["container_cpu_cfs_periods_total"].replace(0, np.nan)
axes[1].plot(per_s.index, ratio)
axes[1].set_ylabel("throttled periods / periods")
w = result.workload_series
if not w.empty:
    w = w.set_index("t_s")
    done = next((c for c in ("records_consumed_total", "requests_completed_total", "burns_total") if c in w), None)
    if done:
        axes[2].plot(w.index[1:], np.diff(w[done].to_numpy()), label=done)
        axes[2].set_ylabel("completions per second")
for ax in axes:
    ax.set_xlabel("time [s]")
    ax.grid(alpha=0.3)
fig.tight_layout()

# %%
print("per-period kernel table (first periods):")
result.periods.head(12)

# %% [markdown]
# ## 2. The sweep: CPU limit x GOMAXPROCS policy

# %%
base = service.with_overrides([("go.version", "1.25")]) if service["go.version"] < "1.25" else service
grid = Grid([parse_axis(f"cgroup.cpu_limit={SWEEP_LIMITS}"), parse_axis(f"go.gomaxprocs={SWEEP_POLICIES}")])
out = Path(tempfile.mkdtemp(prefix="cfsim-nb07-")) / "sweep"
rep = run_sweep(base, grid, out=out, seeds=SWEEP_SEEDS, workers=SWEEP_WORKERS, progress=False)
print(f"{rep.ok} runs ok, {rep.errors} errors -> {out} (Parquet + manifest; `python -m cfsim sweep` reads it too)")
ds = SweepResults.open(out).to_xarray()
ds

# %%
fig, axes = plt.subplots(1, 3, figsize=(15, 3.8))
limits = np.asarray(ds["cgroup.cpu_limit"].values, dtype=float)
for i, pol in enumerate(ds["go.gomaxprocs"].values):
    sel = {"go.gomaxprocs": pol}
    for ax, var in zip(axes, ("throughput_per_s", "throttled_ratio", "latency_p99_s")):
        if var in ds:
            ax.plot(limits, ds[var].sel(sel).mean("seed").values, "o-", ms=3, color=f"C{i}", label=str(pol))
for ax, var in zip(axes, ("throughput [1/s]", "throttled ratio", "p99 latency [s]")):
    ax.set_xlabel("CPU limit [cores]")
    ax.set_ylabel(var)
    ax.grid(alpha=0.3)
axes[0].legend()
fig.tight_layout()

# %% [markdown]
# ## 3. The trap: the same service under a VPA for days
#
# `run_trap` needs a `[vpa]` section; the scenario's own one is used (with `vpa.enabled` forced on).
# The VPA starts from its `vpa.initial_request_cores`; the knobs' CPU limit is what the VPA replaces.

# %%
trap = None
if RUN_TRAP:
    from cfsim.trap import run_trap

    knob_overrides = [(k, v) for k, v in KNOBS.items() if not k.startswith("vpa.") and k != "cgroup.cpu_limit"]
    trap = run_trap(SCENARIO, [*knob_overrides, ("vpa.enabled", True), ("vpa.days", TRAP_DAYS)],
                    response_mode=TRAP_RESPONSE)
    d = trap["data"]
    finals = {"trap": d["final"], **{k: v["final"] for k, v in d["fixes"].items()}}
    display(pd.DataFrame(finals).T[["request_cores", "limit_cores", "gomaxprocs", "usage_cores",
                                     "throughput_per_s", "lag_s", "lag_growing"]])
    fig, ax = plt.subplots(figsize=(10, 3.5))
    for name, res in trap["results"].items():
        ax.plot([r["t_s"] / 86400 for r in res.rows], [r["request_cores"] for r in res.rows], label=name)
    ax.set_xlabel("days")
    ax.set_ylabel("CPU request [cores]")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)

# %% [markdown]
# ## Every knob
#
# The scenario contract: section, key, default and meaning (invalid values fail before anything runs,
# naming the key and its range).

# %%
knobs = pd.DataFrame([{"key": f"{sec}.{k}", "default": key.default, "this service": service.get(f"{sec}.{k}"),
                       "help": key.help} for sec, keys in SCHEMA.items() for k, key in keys.items()])
pd.set_option("display.max_rows", 200)
knobs

# %%
hl = {"throughput_per_s": s["throughput_per_s"], "cpu_usage_cores": s["cpu_usage_cores"],
      "gomaxprocs": s["gomaxprocs"], "sweep_ok": rep.ok}
if trap is not None:
    hl["trap_request_cores"] = trap["data"]["final"]["request_cores"]
headline(hl);
if SMALL:  # CI: leave no temporary folders behind
    import shutil

    shutil.rmtree(out.parent, ignore_errors=True)
