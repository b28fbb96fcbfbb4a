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
# 06 - The model against every lab export: errors by regime, twin inputs and plots (cfsim.validation).
import os

SMALL = os.environ.get("CFSIM_SMALL", "") not in ("", "0")
LAB_DIR = None  # None = data/lab of this repository (or $CFSIM_LAB_DIR)
EXPECTED_GRIDS = ("cpu-stream", "alloc-stream", "closed-menu", "quota-steps")  # data/lab/collect.sh
MAX_RUNS_PER_GRID = 2 if SMALL else None  # validate only the first N point runs of each grid (None = all)
PARAMS: dict = {}  # calibrated parameters {"section.key": value} applied to every twin (cfsim calibrate)
TIME_SERIES_PLOTS = 2 if SMALL else 8  # observed vs simulated time series shown inline

# %% [markdown]
# # Validation: the model against every lab export
#
# The lab (`src/cfsim/lab`, `data/lab/collect.sh`) runs the real Go workload (`lab/`, Go 1.26) under
# real cgroup CPU quotas on a 2-CPU machine, scraped by a real Prometheus (`data/README.md` lists the
# grids: CPU-bound and allocation-heavy streams over limit x GOMAXPROCS, the menu demo's closed loop,
# in-place quota steps, the scheduler-overhead grids, and one run with cfsim's VPA in the loop).
#
# `cfsim.validation.validate` simulates each run's **twin** and compares metric by metric: relative
# errors for rates, absolute for ratios, exact for GOMAXPROCS.
#
# **A twin is a prediction.** `cfsim.validation.twin.twin_spec` builds it from what was known before
# the run: the run's resolved `scenario.toml`; the grid's per-item CPU cost from its own calibration
# run recorded last before the run (`calibration="latest"`, the default: never the grid's closing one,
# recorded after its runs; this machine's speed drifts: `cfsim.validation.normalise`), times the loop rounds per item the
# run's workload set at its start-up, before the window, over the calibration runs'; machine facts the lab recorded
# (the kernel's tick rate `host.hz`, the CPUs; for runs recorded before the lab wrote `hz`, the
# other manifests of the same kernel build on the same host); and independent measurements of other
# processes (before the run, or the harness in its own cgroup) turned into competing load by CFS
# weight. Never the run's measured usage, throughput, GOMAXPROCS or the host's busy CPU during the
# run. `tests/unit/test_validation_twin.py` checks that for every committed run (it poisons every
# measured output in a copy and requires an identical twin). The hardware-in-the-loop run's twin
# runs cfsim's own VPA on the simulated cgroup and is compared on the resize trajectory.
#
# **Errors by regime** (`cfsim.validation.regimes.classify_regime`): a run whose CPU sits within 3 %
# of a cap - the quota, GOMAXPROCS for Go work, the host's CPUs - is *capped*: any model that knows
# the cap gets its CPU right. The model's own prediction is tested by the *uncapped* runs, and by the
# *contended* ones (host at least 90 % busy, other processes at least 0.2 cores). The headline is
# those two regimes, each with its number of runs.
#
# **What changed, and why** (issue "Validation that can fail"). The earlier twin was given the CPU
# other processes took, computed as the host's busy CPU minus the workload's *measured* usage, with
# the *measured* GOMAXPROCS: on a saturated host that set the twin's CPU ceiling to the measured
# usage, so the contended runs agreed by construction. It also took HZ from the validating machine,
# replayed the hardware-in-the-loop run's recorded quota writes, and reported every run as
# "held out" without saying that 97 of its 136 runs sat at a cap. The engine now also throttles an emptied
# per-CPU runqueue whose runtime ran out (`kernel/sched/fair.c`: `put_prev_entity` ->
# `check_cfs_rq_runtime`). The figures below are what is left: they are worse, and honest.

# %%
import json
from collections import Counter
from pathlib import Path
import tempfile

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Image, display

from cfsim.io.manifest import manifest_folders
from cfsim.validation import validate_each, write_report
from cfsim.validation import plots
from cfsim.validation.regimes import PREDICTED, REGIMES
from cfsim.validation.report import summarise_by_regime, summarise_errors, to_markdown
from cfsim.validation.twin import find_runs, is_calibration_run

from _nbutil import headline, inline_plots, lab_root

inline_plots()  # cfsim.validation.plots switches matplotlib to Agg when imported
root = Path(LAB_DIR) if LAB_DIR else lab_root()
print(f"lab exports: {root} ({'present' if root.is_dir() else 'MISSING'})")


def grid_status(gdir: Path) -> dict:
    st = {"grid": gdir.name, "folder": "present" if gdir.is_dir() else "missing"}
    meta = gdir / "grid.json"
    if meta.is_file():
        g = json.loads(meta.read_text())
        runs = g.get("runs", {})
        st["planned runs"] = len(g.get("order", runs))
        st["ok in grid.json"] = sum(1 for r in runs.values() if r.get("status") == "ok")
        st["failed"] = len(g.get("failed", []) or [])
        st["finished"] = g.get("finished_utc") or "no (collection running or interrupted)"
    try:
        st["run folders with results"] = len(find_runs(gdir)) if gdir.is_dir() else 0
    except FileNotFoundError:
        st["run folders with results"] = 0
    return st


others = sorted(p.name for p in root.iterdir() if p.is_dir() and p.name not in EXPECTED_GRIDS
                and p.name != "scenarios" and manifest_folders(p)) if root.is_dir() else []
status = pd.DataFrame([grid_status(root / g) for g in (*EXPECTED_GRIDS, *others)]).set_index("grid")
missing = [g for g in EXPECTED_GRIDS if status.loc[g, "run folders with results"] == 0]
print("missing grids:", ", ".join(missing) or "none")
status

# %%
grids = [g for g in status.index if status.loc[g, "run folders with results"] > 0]
only = None
if MAX_RUNS_PER_GRID is not None:  # the first point runs of each grid
    only = []
    for g in grids:
        only += [r for r in find_runs(root / g) if not is_calibration_run(r)][:MAX_RUNS_PER_GRID]
# one report per grid; the twins of every grid simulated together on every CPU
reports = dict(zip(grids, validate_each([root / g for g in grids], params=PARAMS or None, only=only)))
tables = [rep.table() for rep in reports.values() if rep.runs]
errors = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()
all_runs = [r for rep in reports.values() for r in rep.runs]
print(f"validated {len(all_runs)} runs in {len(reports)} grids"
      + (f" (small: at most {MAX_RUNS_PER_GRID} per grid)" if MAX_RUNS_PER_GRID else ""))

# %% [markdown]
# ## Headline: where the model predicts
#
# Per regime: the number of held-out runs, and per metric the median |error| (relative for rates,
# absolute for the throttled-period ratio and the GC share) with the number of runs that have a
# value. Calibration runs set each grid's cost factor and are not validation.

# %%
by_regime, counts = summarise_by_regime(all_runs)
METRICS = ("throughput_per_s", "cpu_usage_cores", "throttled_ratio", "gc_cpu_share", "latency_p50_s",
           "latency_p99_s")


def regime_table(regimes) -> pd.DataFrame:
    rows = []
    for regime in regimes:
        row = {"regime": regime, "runs": counts.get(regime, 0)}
        for m in METRICS:
            e = by_regime.get(regime, {}).get(m)
            row[f"{m} median |err|"] = None if e is None else round(e["median_abs"], 4)
            row[f"{m} n"] = None if e is None else e["n"]
        rows.append(row)
    return pd.DataFrame(rows).set_index("regime")


display(regime_table(PREDICTED))

# %% [markdown]
# ## The model against the naive baseline
#
# A figure that a model without the mechanisms also meets does not test them. The naive baseline
# (`cfsim.validation.naive`) takes each twin's own scenario and answers what the caps alone say:
# usage = min(demand, limit, GOMAXPROCS, host CPUs left by the neighbours, workers), throttled in every
# period iff the demand exceeds the limit, no GC, no scheduler, no queue below saturation, and the
# textbook GC (goal = live + (live + GC roots) x GOGC/100, capped by GOMEMLIMIT). Per regime where the model
# predicts: both median |errors| on the same runs, for rates also the median factor
# max(sim / obs, obs / sim) (a relative error caps a prediction too low at -1, and the naive answer is
# too low), and in how many runs each is the closer one. An open loop's throughput is its arrival
# rate: the naive model gets it as well, so that figure tests nothing.

# %%
def naive_table(regimes) -> pd.DataFrame:
    rows = []
    for regime in regimes:
        for m in METRICS:
            c = by_regime.get(regime, {}).get(m, {}).get("naive")
            if c:
                rows.append({"regime": regime, "metric": m, "n": c["n"],
                             "model median |err|": round(c["model_median_abs"], 4),
                             "naive median |err|": round(c["median_abs"], 4),
                             "model median factor": c.get("model_median_factor"),
                             "naive median factor": c.get("naive_median_factor"),
                             "model closer": c["model_closer"], "naive closer": c["naive_closer"]})
    return pd.DataFrame(rows)


display(naive_table(PREDICTED))

# %% [markdown]
# ## Every regime
#
# The capped regimes check the caps: CPU at the quota is the quota, and a throttled ratio of 1 where
# the demand exceeds it is what any model says. Their throughput errors still test the per-item cost.

# %%
display(regime_table(REGIMES))
overall = pd.DataFrame(summarise_errors(all_runs)).T if all_runs else pd.DataFrame()
if len(overall):
    print("all held-out runs together (mostly capped: read the regimes above first):")
    display(overall[["kind", "n", "median", "median_abs", "worst", "worst_run", "goal"]])

# %% [markdown]
# ## What each twin was given
#
# Every input beyond the scenario file, and where it came from. `hz` is `recorded` (the run's
# manifest), `evidence` (other manifests of the same kernel build on the same host) or `unknown`
# (flagged; the scenario's own value is used). `contention` is `unknown` for every run recorded
# before the lab measured its neighbours independently: those twins run with no other load.

# %%
twin_rows = pd.DataFrame([{"run": r["run"], "regime": r["regime"], "hz": r["twin"]["hz"],
                           "host.hz": r["twin"]["host.hz"], "contention": r["twin"]["contention"],
                           "inputs": "; ".join(f"{i['key']} <- {i['source'].split(' (')[0]}"
                                               for i in r["twin"]["inputs"])} for r in all_runs])
if len(twin_rows):
    print("tick rate:", dict(Counter(twin_rows["hz"])), "| contention:", dict(Counter(twin_rows["contention"])))
    display(twin_rows.groupby(["hz", "contention", "inputs"]).size().rename("runs").to_frame())

# %%
per_grid = pd.DataFrame()
if len(errors):
    val = errors[errors["role"].isin(["point", "repeat"]) & errors["held_out"]].copy()
    val["abs_error"] = val["error"].abs()
    per_grid = val[val["metric"].isin(["throughput_per_s", "cpu_usage_cores", "throttled_ratio"])].pivot_table(
        index=["grid", "regime"], columns="metric", values="abs_error", aggfunc="median")
    per_grid["runs"] = val[val["metric"] == "cpu_usage_cores"].groupby(["grid", "regime"]).size()
    display(per_grid.round(4))
    noise = pd.DataFrame({g: {k: v for k, v in rep.grids.get(g, {}).items() if not isinstance(v, dict)}
                          for g, rep in reports.items()})
    print("measured noise per grid (cost factor, calibration drift, repeat differences):")
    display(noise)

# %% [markdown]
# ## Plots: observed vs simulated, by regime

# %%
plot_metrics = ("throughput_per_s", "cpu_usage_cores", "throttled_ratio", "latency_p50_s")
if len(errors):
    fig, axes = plt.subplots(1, len(plot_metrics), figsize=(4.2 * len(plot_metrics), 4))
    for ax, m in zip(axes, plot_metrics):
        sub = errors[(errors["metric"] == m) & errors["observed"].notna() & errors["simulated"].notna()]
        for i, regime in enumerate(REGIMES):
            s = sub[sub["regime"] == regime]
            if len(s):
                ax.plot(s["observed"], s["simulated"], "o", color=f"C{i}", mfc="none", label=regime)
        if len(sub):
            lo = float(np.nanmin([sub["observed"].min(), sub["simulated"].min()]))
            hi = float(np.nanmax([sub["observed"].max(), sub["simulated"].max()]))
            ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
            if m == "latency_p50_s" and lo > 0:
                ax.set_xscale("log")
                ax.set_yscale("log")
        ax.set_xlabel(f"lab {m}")
        ax.set_ylabel(f"model {m}")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("model vs lab, one point per run, coloured by regime (the line is perfect agreement)")
    fig.tight_layout()

# %% [markdown]
# The standard validation outputs (`cfsim.validation.write_report`: `errors.csv` with a `regime`
# column, `report.md`, allocation curves per grid, time series per run), written to a temporary folder
# and shown here.

# %%
out = Path(tempfile.mkdtemp(prefix="cfsim-nb06-"))
shown = 0
for g, rep in reports.items():
    if not rep.runs:
        continue
    d = out / g
    if SMALL:  # the tables and only the plots shown (write_report draws every run's time series)
        d.mkdir(parents=True)
        rep.table().to_csv(d / "errors.csv", index=False)
        (d / "report.md").write_text(to_markdown(rep))
        pngs = plots.allocation_curves(rep, d) + plots.time_series(rep, d, limit=max(0, TIME_SERIES_PLOTS - shown))
    else:
        write_report(rep, d)
        pngs = sorted(d.glob("*.png")) + sorted((d / "runs").glob("*.png"))[: max(0, TIME_SERIES_PLOTS - shown)]
    for png in pngs:
        display(Image(filename=str(png)))
        shown += Path(png).parent.name == "runs"
print(f"reports in {out}")

# %% [markdown]
# ## Hardware in the loop: the VPA's trajectory, lab vs twin
#
# `vpa-in-the-loop/run-automaxprocs`: cfsim's VPA resized the real quota while the real Go process ran
# (GOMAXPROCS 1 from automaxprocs at 0.5 core, never re-read). The twin is not told when or to what:
# it runs the same recommender and updater on the simulated cgroup. Both settle at the same limit;
# the twin resizes earlier and to lower intermediate limits.

# %%
loop = [r for r in all_runs if r.get("trajectory")]
for r in loop:
    t = r["trajectory"]
    steps = pd.DataFrame(t["steps"])
    display(steps)
    fig, ax = plt.subplots(figsize=(7, 3))
    for (label, tk, lk), st in zip((("lab", "t_lab_s", "limit_lab_cores"), ("twin", "t_sim_s", "limit_sim_cores")),
                                   ("o-", "s--")):
        ax.step([0] + list(steps[tk]), [0.5] + list(steps[lk]), where="post")
        ax.plot(steps[tk], steps[lk], st[0], label=label)
    ax.set_xlabel("time [s]")
    ax.set_ylabel("CPU limit [cores]")
    ax.legend()
    ax.grid(alpha=0.3)
    ax.set_title(r["run"], fontsize=9)
if not loop:
    print("no hardware-in-the-loop run validated at this size")

# %% [markdown]
# ## The trap's mechanism live: `quota-steps`
#
# The CPU limit changes in place during the run (2 -> 1.94 -> 1.2 -> 2 cores). automaxprocs reads the
# quota once at start and keeps GOMAXPROCS; Go 1.25 re-reads it every second (but never goes below 2).
# With these steps both keep GOMAXPROCS 2, so the throughput follows the quota. These runs shared the
# host with other work (contended): the twins, given no contention, process more than the lab did.

# %%
from cfsim.io import read_lab_run

qs = reports.get("quota-steps")
if qs is None or not qs.runs:
    print("quota-steps: not collected yet (or not validated at this size)")
else:
    fig, axes = plt.subplots(len(qs.runs), 3, figsize=(15, 3.2 * len(qs.runs)), squeeze=False)
    for row, r in zip(axes, qs.runs):
        sim = qs.simulated[r["run"]]
        ser, wl = sim.series, sim.workload_series
        try:
            frames, meta = read_lab_run(r["path"])
            t0 = meta["manifest"].get("times", {}).get("start_unix_s")
        except Exception as exc:  # noqa: BLE001 - a run without exports still has its error row above
            frames, t0 = {}, None
            print(f"{r['run']}: no time series ({exc})")

        def lab(name):
            f = frames.get(name)
            if f is None or f.empty:
                return None, None
            t = f["timestamp"].astype("int64").to_numpy() / 1e9
            return t - (t0 if t0 else t[0]), f["value"].to_numpy()

        panels = (("cpu_limit_cores", ser["t_s"], ser["container_spec_cpu_quota"] / ser["container_spec_cpu_period"],
                   "CPU limit [cores]"),
                  ("go_sched_gomaxprocs_threads", wl["t_s"], wl["go_sched_gomaxprocs_threads"], "GOMAXPROCS"),
                  ("throughput_per_s", wl["t_s"].iloc[1:], np.diff(wl["records_consumed_total"].to_numpy()),
                   "throughput [records/s]"))
        for ax, (lab_name, mt, mv, ylabel) in zip(row, panels):
            lt, lv = lab(lab_name)
            if lt is not None:
                ax.plot(lt, lv, ".", ms=4, label="lab")
            ax.step(mt, mv, where="post", lw=1.2, label="model")
            ax.set_ylabel(ylabel)
            ax.set_xlabel("time [s]")
            ax.grid(alpha=0.3)
        row[0].set_title(f"{r['run']} ({r['scenario']['go.gomaxprocs']}, {r['regime']})", fontsize=9, loc="left")
        row[0].legend(fontsize=8)
    fig.tight_layout()

# %% [markdown]
# ## Reading the errors
#
# From `python -m cfsim validate data/lab` (241 held-out runs; the full table is in `data/README.md`):
#
# * **Capped runs (182 of 231, the 10 OOM-killed aside)** agree on CPU to 0.04-0.2 % and on the
#   throttled ratio exactly: that is the cap, not a prediction. Their throughput errors test the
#   per-item cost: median 5.5 % in the first grids, 27 % in the GC/memory and overprovisioned grids
#   (the model too fast; 3.2-4.5x at GOMAXPROCS 8 under a 1-core quota in `gc-memory`).
# * **Uncapped runs (27)**: throughput within ~0.6 % (most keep up with their arrivals), CPU off by a
#   median 8.2 %: the scheduler-overhead grids from -9 % to +39 % (too high from 8 Ps up; the
#   calibration runs' cost factor is measured at GOMAXPROCS 1), the profile and overprovisioned
#   runs within -13 to +7 %.
# * **Contended runs (22)**: CPU off by a median 12.0 %, throughput 5.0 %, up to +27 % on
#   `quota-steps` and +24 % on `alloc-stream` at 2 cores: the first grids' twins get no contention
#   input (none was measured independently of the workload for those runs), so they run faster than
#   a host shared with other work let the real process. The two `gc-memory` contended runs have
#   their neighbours measured before the run (the twin models them by CFS weight) and are still
#   +13 % and +64 %.
# * **OOM-killed runs (10)** are listed apart: the model has the heap and GOMEMLIMIT, not the kill.
# * **Latency** is poor outside the capped regimes (median |error| 65-92 %): the model's queueing at
#   sub-saturation differs from the real scheduler's, and the contended runs' backlog grew.
# * **GOMAXPROCS** is exact everywhere: the policy rules are code.
#
# What would close the gaps: every grid recording its neighbours before it starts (the newer grids
# do: `host_cpu.pre_run`, weights), and the Go runtime's costs under a quota with
# many Ps (the quota-capped GC/memory runs).

# %% [markdown]
# ## Headline numbers
#
# The error table of the validated runs (at the small CI size: the first two point runs of each grid),
# per regime: runs, and median |error| of throughput, CPU and throttled ratio. A model change that
# moves any of them fails the golden regression.

# %%
hl = {}
# key-safe names (the golden tolerance rules match on key names: "gomaxprocs" means exact)
KEY = {"uncapped": "uncapped", "contended": "contended", "quota-capped": "quota_capped",
       "gomaxprocs-capped": "procs_capped", "host-capped": "host_capped", "oom-killed": "oom_killed"}
for regime in REGIMES:
    hl[f"{KEY[regime]}_runs"] = counts.get(regime, 0)
    for m in ("throughput_per_s", "cpu_usage_cores", "throttled_ratio"):
        e = by_regime.get(regime, {}).get(m)
        if e is not None:
            hl[f"{KEY[regime]}_{m}_median_abs_error"] = round(e["median_abs"], 6)
hl["validated_runs"] = len(all_runs)
headline(hl);
if SMALL:  # CI: leave no temporary folders behind
    import shutil

    shutil.rmtree(out, ignore_errors=True)
