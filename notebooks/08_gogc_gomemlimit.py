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
# 08 - GOGC and GOMEMLIMIT under a CPU limit: the lab's gc-memory grid beside the model, the death
# spiral, the VPA's memory loop, and what to set instead.
import os

SMALL = os.environ.get("CFSIM_SMALL", "") not in ("", "0")
LAB_DIR = None            # None = data/lab of this repository (or $CFSIM_LAB_DIR)
# the lab grid (data/lab/<GRID>): GOGC x GOMEMLIMIT x GOMAXPROCS x memory limits. gc-memory-quiet is
# gc-memory's design measured again with nothing else on the host; "gc-memory" (2026-11-23) ran
# beside 1-2 cores of other tenants
GRID = "gc-memory-quiet"
PARAMS = None             # GC parameters {"go.key": value}; None = docs/params/gc-memory.toml (fitted on 5 gc-memory-profile runs)
                          # with the lab host's measured costs the fit held fixed ([fit.fixed]) and docs/params/gc-parallel.toml
TWIN_RUN_S = 8.0 if SMALL else None   # shorten each twin to this many simulated seconds (None = as measured)
# the grid runs to validate (folder-name prefixes; None = all): at the small size the death-spiral
# pairs (GOGC 100 and GOMEMLIMIT 1.1 x live, 16 and 256 MiB) and four container memory limits
RUN_PREFIXES = ("p008_", "p009_", "p028_", "p034_", "p052_", "p053_", "p061_", "p062_") if SMALL else None
SPIRAL_RATIOS = (1.1, 1.5, 2.5) if SMALL else (1.05, 1.1, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0)
MODEL_RUN_S = 4.0 if SMALL else 20.0  # simulated seconds per model point
VPA_DAYS = 1.0 if SMALL else 4.0      # long-horizon runs of the VPA's memory loop
MEMORY_RESPONSE_SMALL = True if SMALL else False  # the coarse memory-response grid (fewer event-engine runs)

# %% [markdown]
# # GOGC and GOMEMLIMIT under a CPU limit
#
# The two knobs a Go team turns after GOMAXPROCS, and the container memory limit beside them, as the
# runtime and the kernel apply them (the rules in `cfsim.goruntime.gcpacer`, `cfsim.goruntime.memory`,
# `cfsim.kernel.memory`; Go 1.26 source):
#
# | rule | source | what it does |
# |---|---|---|
# | GOGC heap goal | `mgcpacer.go` `commit` | `marked + (marked + stacks + globals) x GOGC/100`: the heap grows by that much between cycles |
# | memory-limit goal | `mgcpacer.go` `memoryLimitHeapGoal` | `GOMEMLIMIT - (mappedReady - heapFree - heapAlloc) - overage`, minus 3 % (at least 1 MiB), never below the marked heap; the smaller goal wins |
# | trigger and runway | `mgcpacer.go` `trigger` | the cycle starts 45/64 to 61/64 of the way from the marked heap to the goal, earlier when allocation outruns marking (cons/mark) |
# | assists | `mgcpacer.go` `revise`, `mgcmark.go` `gcAssistAlloc` | during the mark each allocation pays scan work so the mark ends by the goal; with no work left it parks until background credit arrives |
# | allocate-black | `mgcmark.go` `gcmarknewobject` | objects allocated during the mark count as marked, so a long mark raises the next goal |
# | GC CPU limiter | `mgclimit.go` | a leaky bucket of GOMAXPROCS x 1 s that fills with GC time and drains with mutator time; when full, assists stop (and the heap overshoots its goal). It counts P-time, not CPU: a throttled thread still "runs" (golang/go#59715) |
# | scavenger | `mgcscavenge.go` | returns free pages until the retained heap is 110 % of the last in-use heap scaled by the goal, or mappedReady is 95 % of GOMEMLIMIT |
# | OOM kill | cgroup v1/v2 memory controller | anonymous memory over the container limit cannot be reclaimed (no swap): the kernel kills the process |
# | automemlimit | github.com/KimMachineGun/automemlimit | GOMEMLIMIT = 0.9 x the cgroup memory limit, read once at start-up; an explicit GOMEMLIMIT wins |
#
# The **death spiral** is what a GOMEMLIMIT near the live heap does: the goal is barely above the
# marked heap, so the GC runs back to back, assists take the mutator's CPU, and under a CPU limit
# every CPU-second the GC takes is a record not processed. The limiter caps it at 50 % and lets
# the heap overshoot instead.

# %%
import math
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import display

from cfsim.advice.memory import advise_memory, memory_flags
from cfsim.engine.longrun import nominal_demand_cores, run_longrun
from cfsim.engine.memresponse import memory_response_for
from cfsim.scenario import load_scenario
from cfsim.simulation import simulate

from _nbutil import headline, lab_root, repo_root

MiB = 1 << 20
root = Path(LAB_DIR) if LAB_DIR else lab_root()
grid_dir = root / GRID
scen_path = root / "scenarios" / "gc-memory.toml"    # both grids' base scenario
BASE = scen_path if scen_path.is_file() else None
print(f"lab grid {grid_dir}: {'present' if grid_dir.is_dir() else 'not collected yet'}")

# the grid's stream (an allocation-heavy consumer that saturates its 1-core limit: 0.05 ms CPU and
# 64 KiB of 1 KiB garbage per record), without the lab's own keys
base_raw = {
    "host": {"cpus": 2, "hz": 250}, "cgroup": {"cpu_limit": 1.0},
    "go": {"gomaxprocs": 2, "live_heap_mb": 16, "gogc": 100},
    "workload": {"kind": "stream", "rate_per_s": 40000, "workers": 8, "cpu_ms_per_item": 0.05,
                 "alloc_kb_per_item": 64},
    "run": {"duration_s": MODEL_RUN_S + 1.0, "warmup_s": 1.0, "seed": 1}}
TRAIN_RUNS: set = set()   # runs the parameters were fitted on (left out of the error table)
if PARAMS is None:
    import tomllib

    params_file = tomllib.loads((repo_root() / "docs" / "params" / "gc-memory.toml").read_text())
    PARAMS = {k: float(v) for k, v in params_file["params"].items()}
    TRAIN_RUNS = set(params_file["fit"]["train_runs"])
    print(f"GC parameters fitted (or held) on {len(TRAIN_RUNS)} runs of "
          f"{', '.join(sorted({r.split('/')[-2] for r in TRAIN_RUNS}))} (every other run is held out): {PARAMS}")
    # the lab host's measured costs the fit held fixed (not fitted): the CPU per TLB flush of another
    # CPU when memory is returned (`cfsim lab tlb`: what GOMAXPROCS >= 2 costs a heap held at its
    # limit), per page released, per context switch (`cfsim lab switches`)
    fixed = {k: float(v) for k, v in params_file["fit"].get("fixed", {}).items()}
    PARAMS.update(fixed)
    print(f"lab host, measured: {fixed}")
    # the lab host's extra mark CPU when its two CPUs mark at once (docs/params/gc-parallel.toml,
    # fitted on the GC's own CPU a cycle, perf's samples, of five grids' GOMAXPROCS-2 runs): the
    # lab's twins take it as a fourth file
    sharing = tomllib.loads((repo_root() / "docs" / "params" / "gc-parallel.toml").read_text())["params"]
    PARAMS.update({k: float(v) for k, v in sharing.items()})
    print(f"lab host, two CPUs marking: {sharing}")
    # the lab host's price of the runtime's give-back-and-fault-again cycle near a memory limit
    # (docs/params/lab-host-scavenge.toml, `cfsim lab scav`): a fault on a page the runtime gave back,
    # and the runtime's own work a page it gives back (measured, not fitted)
    scav = tomllib.loads((repo_root() / "docs" / "params" / "lab-host-scavenge.toml").read_text())["params"]
    PARAMS.update({k: float(v) for k, v in scav.items()})
    print(f"lab host, giving pages back and faulting them in again: {scav}")
base = load_scenario(base_raw)
if PARAMS:
    base = base.with_overrides(list(PARAMS.items()))


def run(**over):
    sc = base.with_overrides(list(over.items()))
    return simulate(sc).summary


# %% [markdown]
# ## 1. The death spiral in the model
#
# GOGC off and GOMEMLIMIT at a multiple of the live heap, beside GOGC 100 with no limit, for the grid's
# two live heaps. Throughput, GC cycles per second, the heap goal over GOMEMLIMIT, and whether the GC
# CPU limiter engaged.

# %%
rows = []
for live in (16, 256):
    ref = run(**{"go.live_heap_mb": live})
    rows.append({"live_heap_mb": live, "setting": "GOGC 100", "ratio": None, **{k: ref[k] for k in (
        "throughput_per_s", "gc_cycles", "gc_heap_goal_mean_bytes", "gc_cpu_fraction",
        "gc_limiter_last_enabled_cycle", "memory_max_usage_bytes")}, "duration_s": ref["duration_s"]})
    for r in SPIRAL_RATIOS:
        s = run(**{"go.live_heap_mb": live, "go.gogc": -1, "go.gomemlimit_mb": round(r * live, 2)})
        rows.append({"live_heap_mb": live, "setting": f"GOGC off, GOMEMLIMIT {r:g} x live", "ratio": r,
                     **{k: s[k] for k in ("throughput_per_s", "gc_cycles", "gc_heap_goal_mean_bytes",
                                          "gc_cpu_fraction", "gc_limiter_last_enabled_cycle",
                                          "memory_max_usage_bytes")}, "duration_s": s["duration_s"]})
spiral = pd.DataFrame(rows)
spiral["cycles_per_s"] = spiral["gc_cycles"] / spiral["duration_s"]
spiral["goal_mb"] = spiral["gc_heap_goal_mean_bytes"] / MiB
spiral["peak_mb"] = spiral["memory_max_usage_bytes"] / MiB
for live in (16, 256):
    sel = spiral["live_heap_mb"] == live
    ref_tp = spiral.loc[sel & spiral["ratio"].isna(), "throughput_per_s"].iloc[0]
    spiral.loc[sel, "throughput_vs_gogc100"] = spiral.loc[sel, "throughput_per_s"] / ref_tp
display(spiral[["live_heap_mb", "setting", "throughput_per_s", "throughput_vs_gogc100", "cycles_per_s", "goal_mb",
                "peak_mb", "gc_cpu_fraction", "gc_limiter_last_enabled_cycle"]].round(3))

fig, axes = plt.subplots(1, 3, figsize=(15, 4))
for live, m in ((16, "o"), (256, "s")):
    sub = spiral[(spiral["live_heap_mb"] == live) & spiral["ratio"].notna()]
    axes[0].plot(sub["ratio"], sub["throughput_vs_gogc100"], m + "-", label=f"live {live} MiB")
    axes[1].plot(sub["ratio"], sub["cycles_per_s"], m + "-", label=f"live {live} MiB")
    axes[2].plot(sub["ratio"], sub["goal_mb"] / (sub["ratio"] * live), m + "-", label=f"live {live} MiB")
axes[0].axhline(1.0, color="k", lw=0.8)
axes[0].set_ylabel("throughput / throughput at GOGC 100")
axes[1].set_ylabel("GC cycles per second")
axes[2].set_ylabel("heap goal / GOMEMLIMIT")
for ax in axes:
    ax.set_xlabel("GOMEMLIMIT / live heap (GOGC off)")
    ax.set_xscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
fig.suptitle("model: GOMEMLIMIT near the live heap (1 core, GOMAXPROCS 2, 64 KiB per record)")
fig.tight_layout()

# %% [markdown]
# ## 2. The lab's gc-memory grid beside the model
#
# Each run's twin is its resolved `scenario.toml` (nothing measured goes into it), with the GC's
# cost per byte of a heap beyond the L3 fitted on the five GOMAXPROCS-1 runs of `gc-memory-profile`
# (a quiet host, 2026-11-27) and its scan rate held at the direct measurement
# (`docs/params/gc-memory.toml`: every run of `gc-memory` and `gc-memory-quiet` is held out; the fit
# before it, on four runs of the busy-host `gc-memory`, made the quiet host's 256 MiB cycles 13-15 %
# too cheap) and the lab host's measured costs the fit held fixed, among them a TLB flush when memory
# is returned while another CPU runs the process (`docs/params/lab-host-memory.toml`, `cfsim lab tlb`: at
# GOMAXPROCS >= 2 a heap held at its GOMEMLIMIT releases and refaults nearly every page it
# allocates, and every release interrupts the other CPU), the extra mark CPU of two CPUs marking at
# once (`docs/params/gc-parallel.toml`, fitted on the GC's own CPU a cycle where perf sampled
# it), and what a page the runtime gives back and faults in again costs there (`docs/params/lab-host-scavenge.toml`, `cfsim lab
# scav`: the fault 1.65 us, the runtime's own work 0.12 us a page, measured by `lab/cmd/scavbench`). Errors per metric as `cfsim validate` computes them: GC cycles per second, the heap
# goal averaged over the window, throughput, the memory cgroup's usage averaged over the window (its
# end value is one point of the heap's saw-tooth), and the OOM kill (exact). A run the kernel
# OOM-killed (in the lab or in the model) is compared only on the kill.

# %%
from cfsim.validation import metrics as vm
from cfsim.validation import validate
from cfsim.validation.gcmemory import model_oom_outcome
from cfsim.validation.twin import find_runs, is_calibration_run, run_scenario

GC_METRICS = ("throughput_per_s", "gc_cycles_per_s", "gc_heap_goal_mean_bytes", "gc_heap_live_bytes",
              "memory_usage_mean_bytes", "memory_max_usage_bytes", "gc_cpu_share", "oom_killed")
metric = {m.name: m for m in vm.METRICS}
# the twins' simulated window: as measured, or shortened at the small size
TWIN_WINDOW = (TWIN_RUN_S / 4, TWIN_RUN_S) if TWIN_RUN_S is not None else None


def validate_twins(grid: Path, prefixes: tuple | None):
    """`cfsim validate GRID --params docs/params/gc-memory.toml --params docs/params/lab-host-switches.toml
    --params docs/params/lab-host-memory.toml --params docs/params/gc-parallel.toml
    --params docs/params/lab-host-scavenge.toml` on the grid's point runs (those whose folder names start with
    ``prefixes``; None: all), twins shortened to TWIN_WINDOW."""
    runs = [r for r in find_runs(grid) if not is_calibration_run(r)]
    if prefixes is not None:
        runs = [r for r in runs if r.name.startswith(prefixes)]
    over = dict(PARAMS)
    if TWIN_WINDOW is not None:
        over.update({"run.duration_s": TWIN_WINDOW[1], "run.warmup_s": TWIN_WINDOW[0]})
    return validate(grid, params=over, only=runs)


lab_rows = []
gc_report = {}
if grid_dir.is_dir():
    report = validate_twins(grid_dir, RUN_PREFIXES)
    gc_report = report.gc
    for r in report.runs:
        sc = run_scenario(Path(r["path"]))
        obs, sim = r["observed"], r["simulated"]
        row = {"run": Path(r["path"]).name, "live_heap_mb": sc["go.live_heap_mb"], "gogc": sc["go.gogc"],
               "gomemlimit_mb": sc["go.gomemlimit_mb"], "gomaxprocs": sc["go.gomaxprocs"],
               "cpu_limit": sc["cgroup.cpu_limit"], "memory_limit_mb": sc["cgroup.memory_limit_mb"],
               "policy": sc["go.gomemlimit_policy"], "kind": sc["workload.kind"], "gc_regime": r["gc_regime"],
               "training": "/".join(Path(r["path"]).parts[-2:]) in {"/".join(Path(t).parts[-2:]) for t in TRAIN_RUNS},
               "lab_oom": bool(obs.get("oom_killed")), "model_oom": bool(sim.get("oom_killed")),
               "model_outcome": model_oom_outcome(r)}
        for name in GC_METRICS:
            row[f"lab {name}"], row[f"model {name}"] = obs.get(name), sim.get(name)
            row[f"err {name}"] = r["errors"].get(name)
        lab_rows.append(row)
lab = pd.DataFrame(lab_rows)
if lab.empty:
    print(f"{GRID}: no lab runs yet (collect with data/lab/collect.sh); the lab parts below are skipped")
else:
    errs = {}
    held = lab[~lab["training"]]
    for name in GC_METRICS:
        e = held[f"err {name}"].dropna().astype(float)
        errs[name] = {"n": int(e.size), "median": float(e.median()) if e.size else None,
                      "median_abs": float(e.abs().median()) if e.size else None, "goal": metric[name].goal}
    err_table = pd.DataFrame(errs).T
    print(f"held-out runs: {len(held)} (training runs left out: {int(lab['training'].sum())})")
    display(err_table)
    # per GC regime (cfsim.validation.gcmemory.gc_regime: from the scenario alone), held-out runs
    by_regime = {}
    for regime, sub in held.groupby("gc_regime"):
        for name in ("gc_cycles_per_s", "gc_heap_goal_mean_bytes", "throughput_per_s", "memory_usage_mean_bytes"):
            e = sub[f"err {name}"].dropna().astype(float)
            by_regime.setdefault(regime, {})[name] = (f"{e.abs().median():.1%} (n={e.size})" if e.size else "")
    display(pd.DataFrame(by_regime).T)

# %% [markdown]
# Model against lab, one point per run (the line is perfect agreement):

# %%
if not lab.empty:
    fig, axes = plt.subplots(1, 4, figsize=(18, 4))
    for ax, name, scale in zip(axes, ("throughput_per_s", "gc_cycles_per_s", "gc_heap_goal_mean_bytes",
                                      "memory_usage_mean_bytes"), (1, 1, MiB, MiB)):
        sub = lab[lab[f"err {name}"].notna()]
        for live, mk in ((16, "o"), (256, "s"), (64, "^")):
            s2 = sub[sub["live_heap_mb"] == live]
            ax.plot(s2[f"lab {name}"] / scale, s2[f"model {name}"] / scale, mk, mfc="none", label=f"live {live} MiB")
        if len(sub):
            lo = float(min(sub[f"lab {name}"].min(), sub[f"model {name}"].min())) / scale
            hi = float(max(sub[f"lab {name}"].max(), sub[f"model {name}"].max())) / scale
            ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
            ax.set_xscale("log")
            ax.set_yscale("log")
        ax.set_xlabel("lab " + name + (" [MiB]" if scale > 1 else ""))
        ax.set_ylabel("model")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()

# %% [markdown]
# ### The death spiral, measured
#
# The throughput at GOGC off with GOMEMLIMIT 1.1 x the live heap, over the throughput at GOGC 100, in
# the lab and in the model (the goal: the model's ratio within +-20 % of the lab's), at
# GOMAXPROCS 2; then every design and near-live setting of the grid as `cfsim validate` reports them
# (`gc.spiral` in its report.json; over the whole lab with the README's seven files 47 of 59 pairs within
# 20 % on 2026-12-05 once the scavenger's time became a class of its own, 45 before, `gc-page-cycle`'s five
# included; 41 of 54 before that grid, 43 with the five files).

# %%
def spiral_share(tight: pd.DataFrame, ref: pd.DataFrame) -> dict:
    """The spiral's throughput over its GOGC-100 pair's (means of their runs), lab and model."""
    lab_r = tight["lab throughput_per_s"].mean() / ref["lab throughput_per_s"].mean()
    mod_r = tight["model throughput_per_s"].mean() / ref["model throughput_per_s"].mean()
    return {"lab": lab_r, "model": mod_r, "model / lab": mod_r / lab_r}


spiral_ratio = {}
if not lab.empty:
    for live in sorted(lab["live_heap_mb"].unique()):
        sub = lab[(lab["live_heap_mb"] == live) & (lab["gomaxprocs"] == 2) & (lab["kind"] == "stream")
                  & (lab["cpu_limit"] == 1.0) & lab["memory_limit_mb"].isin([None, 4096.0])]
        ref = sub[(sub["gogc"] == 100) & sub["gomemlimit_mb"].isna()]
        tight = sub[(sub["gogc"] == -1)
                    & (pd.to_numeric(sub["gomemlimit_mb"], errors="coerce").round(1) == round(1.1 * live, 1))]
        if len(ref) and len(tight):
            spiral_ratio[int(live)] = spiral_share(tight, ref)
    display(pd.DataFrame(spiral_ratio).T)
    # every design of the grid the same way (`cfsim validate`'s gc.spiral: each GOMEMLIMIT-near-live
    # setting over its design's GOGC-100 runs, means of the held-out runs; within +-20 % or out)
    pairs = pd.DataFrame((gc_report.get("spiral") or {}).get("pairs") or [])
    if not pairs.empty:
        display(pairs[["kind", "cpu_limit", "gomaxprocs", "live_heap_mb", "gogc", "gomemlimit_over_live", "runs",
                       "reference_runs", "lab_ratio", "model_ratio", "model_over_lab", "within"]])

# %% [markdown]
# ### The death spiral at GOMAXPROCS 8, measured four times (`gc-near-limit-256-gmp8`)
#
# The same ratio at GOMAXPROCS 8 and 256 MiB, where the grid above has one run a side (in the VM's
# fast state): a later grid ran the spiral four times and its GOGC-100 pair twice on a quiet host in
# the VM's slow state (data/README.md). The twins are the same as above. In the fast state the
# model's GOMAXPROCS-8 ratio stays outside +-20 %: its GC takes a larger share of the real CPU than
# its own `/cpu/classes` P-time says, and the lab's there is not measured (docs/model-notes.md, "The
# death spiral at GOMAXPROCS 8, measured four times").

# %%
gmp8_dir = root / "gc-near-limit-256-gmp8"
gmp8_ratio = None
if gmp8_dir.is_dir():
    # the spiral's trace and profile runs and the GOGC-100 pair (the perf runs are other GOMAXPROCS)
    rep8 = validate_twins(gmp8_dir, ("p000_", "p001_", "p002_", "repeat2-p000_", "repeat2-p001_", "repeat2-p002_")
                          if not SMALL else ("p000_", "p002_"))
    rows8 = []
    for r in rep8.runs:
        sc = run_scenario(Path(r["path"]))
        rows8.append({"run": Path(r["path"]).name, "gogc": sc["go.gogc"],
                      "lab throughput_per_s": r["observed"]["throughput_per_s"],
                      "model throughput_per_s": r["simulated"]["throughput_per_s"],
                      "lab gc_cycles_per_s": r["observed"].get("gc_cycles_per_s"),
                      "model gc_cycles_per_s": r["simulated"].get("gc_cycles_per_s")})
    gmp8 = pd.DataFrame(rows8)
    display(gmp8)
    tight8, ref8 = gmp8[gmp8["gogc"] == -1], gmp8[gmp8["gogc"] == 100]
    if len(tight8) and len(ref8):
        gmp8_ratio = spiral_share(tight8, ref8)
        display(pd.DataFrame({"256 MiB, GOMAXPROCS 8": gmp8_ratio}).T)

# %% [markdown]
# ### OOM kills: where the lab gets them, and where the model predicts them
#
# The runs with a container memory limit (with and without automemlimit's GOMEMLIMIT = 0.9 x limit).
# The model's outcome has three values: killed, survived with its peak within 10 % of the limit
# (what `cfsim audit` flags as near an OOM kill), and survived clear of it. Inside that band the kill
# turns on how far one cycle's heap overshoots its goal, which varies from cycle to cycle on the real
# runtime (the `gc-trace` grid below: 2 % or more past the goal in 2-63 % of a run's cycles); the lab's own
# two runs of one such point (automemlimit at a 56 MiB limit, 16 MiB live heap) disagree.

# %%
confusion = None
if not lab.empty:
    mem = lab[lab["memory_limit_mb"].notna() & (lab["memory_limit_mb"] < 4096)]
    confusion = pd.crosstab(mem["lab_oom"].map({True: "lab: OOM", False: "lab: survived"}),
                            mem["model_outcome"].map({"oom": "model: OOM", "near": "model: within 10 % of the limit",
                                                      "ok": "model: survived"}))
    display(confusion)
    display(mem[["run", "live_heap_mb", "memory_limit_mb", "policy", "lab_oom", "model_outcome",
                 "lab memory_max_usage_bytes", "model memory_max_usage_bytes"]])

# %% [markdown]
# ### The GC CPU limiter: did it turn on?
#
# Whether the GC CPU limiter (`src/runtime/mgclimit.go`) turned on in the window decides whether
# the assists pace a heap near its limit. The lab reads it from the runtime at the window's two ends
# (`/gc/limiter/last-enabled` against `/gc/cycles/total`; `cfsim.io.gclimiter`), the twin from its
# own limiter (`gc_limiter_turned_on`); runs an OOM kill ended are left out
# (`cfsim.validation.gcmemory.limiter_confusion`, as `cfsim validate` reports it).

# %%
limiter_counts = gc_report.get("limiter") or {}
if any(limiter_counts.values()):
    display(pd.DataFrame([[limiter_counts[f"lab {o}, model {m}"] for m in ("on", "off")] for o in ("on", "off")],
                         index=["lab: turned on", "lab: never on"], columns=["model: turned on", "model: never on"]))

# %% [markdown]
# ### The GC cycle by cycle (`gc-trace` grid)
#
# The `gc-trace` grid ran the same stream with `GODEBUG=gctrace=1,gcpacertrace=1`: the runtime's own
# line per cycle (`gc_cycles.csv.gz`, read by `cfsim.io.gctrace`), beside the twin's cycles
# (`SimulationResult.gc_cycles`, the same fields). At 8 Ps on a 1-core quota the marked heap, and
# with it the next goal, is set by two small amounts: what is already allocated beyond the trigger
# when the mark starts, and how far past the goal the heap ends it, while `gcMarkDone`'s ragged
# barrier waits for every P to flush (`forEachP`; with 8 threads on 2 CPUs the last one waits a few
# kernel slices while the others allocate on).

# %%
from cfsim.goruntime.gc_cycles import cycle_keys
from cfsim.io.gctrace import cycle_table

TRACE_RUNS = ("p004_", "p005_") if SMALL else None   # GOGC 200 at 2 and 8 Ps (None: the whole grid)
trace_dir = root / "gc-trace"
trace_rows = []
if trace_dir.is_dir():
    trep = validate_twins(trace_dir, TRACE_RUNS)
    fig, axes = plt.subplots(1, len(trep.runs), figsize=(6 * len(trep.runs), 3.5), squeeze=False)
    for ax, r in zip(axes[0], trep.runs):
        path = Path(r["path"])
        sc = run_scenario(path)
        t0, t1 = sc["run.warmup_s"], sc["run.duration_s"]
        labc = cycle_table(pd.read_csv(path / "gc_cycles.csv.gz"))
        modc = trep.simulated[r["run"]].gc_cycles
        tm0, tm1 = TWIN_WINDOW or (t0, t1)
        for name, c, a, b in (("lab", labc, t0, t1), ("model", modc, tm0, tm1)):
            k = cycle_keys(c, a, b)
            trace_rows.append({"run": path.name, "gomaxprocs": sc["go.gomaxprocs"], "side": name,
                               "cycles/s": k["gc_cycle_count"] / (b - a),
                               "marked MiB": k["gc_cycle_marked_median_bytes"] / MiB,
                               "goal MiB": k["gc_cycle_goal_median_bytes"] / MiB,
                               "allocated in mark MiB": k["gc_cycle_alloc_during_mark_median_bytes"] / MiB,
                               "end / goal": k["gc_cycle_end_over_goal_median"],
                               "mark ms": k["gc_cycle_mark_median_s"] * 1e3,
                               "assist share": k["gc_cycle_assist_share"]})
            sel = c[(c["run_t_s"] > a) & (c["run_t_s"] <= b)]
            ax.plot(sel["run_t_s"] - a, sel["marked_bytes"] / MiB, ".-" if name == "model" else "o",
                    ms=3, lw=0.6, mfc="none", label=name)
        ax.set_title(f"{path.name}: marked heap per cycle")
        ax.set_xlabel("s into the window")
        ax.set_ylabel("MiB")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    display(pd.DataFrame(trace_rows).set_index(["run", "side"]).round(3))
else:
    print("gc-trace: not collected (data/lab/collect.sh gc-trace)")

# %% [markdown]
# ## 3. The VPA's memory loop on a Go service with automemlimit
#
# The VPA recommends memory from one working-set peak per pod per day (P90 of the decaying peaks,
# x 1.15), bumps it after an OOM kill (max(+100 MiB, x 1.2) of the request or the day's peak), and
# re-creates the pod (`cfsim.autoscalers.vpa_memory`, long-horizon engine). With automemlimit the new
# pod's GOMEMLIMIT follows its new limit. Does the loop trap, as the CPU loop does with automaxprocs
# (notebook 01)?
#
# A service whose template memory limit (180 MiB) is below what it needs (its GOGC 100 heap peaks near
# 255 MiB): with and without automemlimit.

# %%
loop_raw = {
    "host": {"cpus": 8}, "cgroup": {"memory_limit_mb": 180},
    "go": {"gomaxprocs": 2, "gogc": 100, "live_heap_mb": 96, "gomemlimit_policy": "automemlimit"},
    "workload": {"kind": "stream", "rate_per_s": 6000, "cpu_ms_per_item": 0.1, "workers": 8,
                 "alloc_kb_per_item": 32},
    "run": {"duration_s": 6.0, "warmup_s": 2.0, "seed": 1},
    "vpa": {"enabled": True, "control_memory": True, "initial_request_cores": 1.0, "replicas": 2,
            "min_replicas": 2, "days": VPA_DAYS}}
loops = {}
for label, policy in (("automemlimit", "automemlimit"), ("no GOMEMLIMIT", "explicit")):
    sc = load_scenario(loop_raw, [("go.gomemlimit_policy", policy)])
    mr = memory_response_for(sc, nominal_demand_cores(sc), simulate, small=MEMORY_RESPONSE_SMALL)
    loops[label] = run_longrun(sc, response_mode="analytic", memory_response=mr)
fig, axes = plt.subplots(1, 3, figsize=(16, 4))
for label, r in loops.items():
    rows_ = pd.DataFrame(r.rows)
    axes[0].plot(rows_["t_h"], rows_["memory_limit_mb"], label=label)
    axes[1].plot(rows_["t_h"], rows_["oom_kills"], label=label)
    axes[2].plot(rows_["t_h"], rows_["throughput_per_s"], label=label)
axes[0].set_ylabel("memory limit [MiB]")
axes[1].set_ylabel("OOM kills (cumulative)")
axes[2].set_ylabel("throughput [records/s, both pods]")
for ax in axes:
    ax.set_xlabel("hours")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
fig.suptitle("VPA memory loop: a 180 MiB template for a service that needs ~255 MiB")
fig.tight_layout()
loop_final = {k: {kk: r.final.get(kk) for kk in ("memory_limit_mb", "working_set_mb", "oom_kills",
                                                 "throughput_per_s", "vpa_memory_target_mb")}
              for k, r in loops.items()}
display(pd.DataFrame(loop_final).T)

# %% [markdown]
# What the runs show: without GOMEMLIMIT the container is OOM-killed seconds after every start, so
# metrics-server never reports it, the VPA has no CPU sample and writes no recommendation at all
# (its `TotalSamplesCount` counts CPU samples only: kubernetes/autoscaler#4981), and the pods
# crash-loop under the kubelet's back-off for as long as the run lasts. With automemlimit the GC
# holds the heap under 0.9 x 180 MiB at the price of GC CPU; the pods run, the VPA sees their
# working set and grows the limit by its margin until the heap goal no longer binds. The memory
# loop does not trap the way the CPU loop does: its samples are the working set the GC allows, and
# the VPA's 15 % margin (plus the histogram's bucket rounding) is larger than automemlimit's 10 %
# headroom, so each recommendation lands above the last limit.

# %% [markdown]
# ## 4. What to set instead
#
# `cfsim.advice.memory.advise_memory`: the memory limit = the working-set peak without a limit x 1.15
# (the VPA's margin), request = limit, GOMEMLIMIT = 0.9 x limit (automemlimit) unless that puts the heap
# goal within 1.25 x of the live heap, checked with the event engine (no OOM, throughput >= 98 % and GC
# share at most 2 points above the unlimited run). For the grid's stream at 16 and 256 MiB of live heap,
# and for the death-spiral setting (GOGC off, GOMEMLIMIT 1.1 x live), the flags and the advice:

# %%
advice_rows = []
for live in (16, 256):
    for label, over in (("GOGC 100", {}), ("GOGC off, GOMEMLIMIT 1.1 x live",
                                            {"go.gogc": -1, "go.gomemlimit_mb": round(1.1 * live, 2)})):
        sc = base.with_overrides([("go.live_heap_mb", live), *over.items()])
        a = advise_memory(sc)
        advice_rows.append({"live_heap_mb": live, "now": label, "flags now": ", ".join(f.flag for f in a.flags_now),
                            "memory limit MiB": a.memory_limit_mb, "GOGC": a.gogc,
                            "GOMEMLIMIT": (f"{a.gomemlimit_mb:g} MiB ({a.gomemlimit_policy})" if a.gomemlimit_mb
                                           else "none"),
                            "throughput checked /s": round(a.checked.get("throughput_per_s") or 0),
                            "throughput unlimited /s": round(a.checked.get("throughput_unlimited_per_s") or 0),
                            "ok": a.checked.get("ok")})
advice = pd.DataFrame(advice_rows)
display(advice)

# %% [markdown]
# Rules of thumb the runs support:
#
# * **GOMEMLIMIT is a ceiling for spikes, not a target.** Keep the GOGC goal below it in normal load;
#   a limit within ~1.5 x of the live heap turns every allocation burst into back-to-back GC cycles,
#   and under a CPU limit that GC CPU is taken from the work.
# * **Set it below the container limit** (automemlimit's 0.9 is the common choice): the runtime's own
#   memory, the page cache and the overshoot while the CPU limiter is on sit above it.
# * **GOGC off + GOMEMLIMIT** uses all the memory it is given; give it twice the live heap or more, and a
#   container limit above that.
# * **With a VPA controlling memory**, automemlimit turns an undersized limit into GC CPU the VPA can
#   outgrow, where a limit without GOMEMLIMIT can crash-loop before the VPA ever sees the pod.

# %% [markdown]
# ## Headline numbers

# %%
out = {
    "spiral_16_1p1_tput_vs_gogc100": float(spiral.loc[(spiral["live_heap_mb"] == 16) & (spiral["ratio"] == 1.1),
                                                      "throughput_vs_gogc100"].iloc[0]),
    "spiral_256_1p1_tput_vs_gogc100": float(spiral.loc[(spiral["live_heap_mb"] == 256) & (spiral["ratio"] == 1.1),
                                                       "throughput_vs_gogc100"].iloc[0]),
    "gogc100_16_cycles_per_s": float(spiral.loc[(spiral["live_heap_mb"] == 16) & spiral["ratio"].isna(),
                                                "cycles_per_s"].iloc[0]),
    "loop_automemlimit_oom_kills": loops["automemlimit"].final["oom_kills"],
    "loop_automemlimit_limit_mb": loops["automemlimit"].final["memory_limit_mb"],
    "loop_explicit_oom_kills_positive": bool(loops["no GOMEMLIMIT"].final["oom_kills"] > 0),
    "advice_16_gogc100_limit_mb": float(advice.loc[(advice["live_heap_mb"] == 16) & (advice["now"] == "GOGC 100"),
                                                   "memory limit MiB"].iloc[0]),
}
if spiral_ratio:   # the lab grid beside the model (present in this repository)
    for live, r in spiral_ratio.items():
        out[f"lab_spiral_{live}_model_over_lab"] = float(r["model / lab"])
if gmp8_ratio is not None:
    out["lab_spiral_256_gmp8_model_over_lab"] = float(gmp8_ratio["model / lab"])
if confusion is not None:
    out["oom_lab_and_model"] = int(((lab["lab_oom"]) & (lab["model_oom"])).sum())
    out["oom_disagree"] = int((lab["lab_oom"] != lab["model_oom"]).sum())
    out["oom_lab_killed_model_near"] = int((lab["lab_oom"] & (lab["model_outcome"] == "near")).sum())
headline(out);
