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
# 03 - GOMAXPROCS 32 in an 8-core container (58 Tech's message-push service).
import os

SMALL = os.environ.get("CFSIM_SMALL", "") not in ("", "0")
SCENARIO = "push-58tech"
OVERRIDES: list[str] = []  # e.g. ["workload.rate_per_s=12000", "go.live_heap_mb=512"]
COMPARE = (32, 8)  # GOMAXPROCS before / after the fix
RUN_S = 4.0 if SMALL else 30.0  # simulated seconds per run
SWEEP_GOMAXPROCS = (8, 32) if SMALL else (4, 8, 12, 16, 24, 32)
SENSITIVITY = (1.0, 10.0) if SMALL else (1.0, 3.0, 10.0, 30.0)  # x the scheduler cost priors
LAB_GOMAXPROCS = (8, 64) if SMALL else None  # lab runs compared (None: every GOMAXPROCS)

# %% [markdown]
# # GOMAXPROCS 32 in an 8-core container
#
# **Story** (58 Tech, *Diagnosing and Optimizing High CPU Usage of a Go Service Migrated to
# Kubernetes Using Flame Graphs*, English version at
# <https://www.besthub.dev/articles/diagnosing-and-optimizing-high-cpu-usage-of-a-go-service-migrated-to-kubernetes-using-flame-graphs-7c93e78f3f32>): a Go push
# service moved from a physical machine into an 8-core container on a 32-core host; Go (pre-1.25)
# set GOMAXPROCS to 32. At the same request volume, peak CPU was about 70 % instead of the expected
# 20 %; the flame graph showed about 60 % of CPU in `runtime.gcBgMarkWorker`, `runtime.schedule` and
# `runtime.findrunnable`. Setting `GOMAXPROCS=8` brought the peak from **69 % to 19 %**.
#
# **Model**: the built-in `push-58tech` (open Poisson arrivals, 8000 pushes/s x 0.2 ms = 1.6 cores
# of user work = 20 % of the 8 cores, as the story expected; 256 MiB live heap; every Go runtime cost
# at its schema prior). Same arrivals, GOMAXPROCS 32 vs 8. CPU is read as the story's dashboards
# read it: container usage as a share of the 8-core limit. The runtime share is everything the model
# charges outside user code (GC mark workers, assists, STW, scheduler searches, wakes and parks).

# %%
import functools

import matplotlib.pyplot as plt
import pandas as pd

import cfsim
from cfsim.scenario import load_scenario
from cfsim.validation import validate_each
from cfsim.validation.twin import find_runs, is_calibration_run, run_scenario

from _nbutil import compare, headline, lab_root

base = load_scenario(SCENARIO, OVERRIDES)
LIMIT = base["cgroup.cpu_limit"]
print(f"{SCENARIO}: {base['host.cpus']}-CPU host, {LIMIT:g}-core limit, {base['workload.rate_per_s']:g} "
      f"requests/s x {base['workload.cpu_ms_per_request']:g} ms, Go {base['go.version']}")


@functools.cache  # the sweep and the sensitivity revisit the comparison's runs
def run(gomaxprocs: int, extra=()) -> dict:
    s = cfsim.simulate(base, [f"go.gomaxprocs={gomaxprocs}", f"run.duration_s={RUN_S}",
                              f"run.warmup_s={min(2.0, RUN_S / 4)}", *extra]).summary
    busy = s["cpu_usage_cores"]
    # the story's flame-graph frames: gcBgMarkWorker (dedicated + idle mark workers) and
    # schedule/findrunnable (the scheduler), as shares of all CPU the model charged
    real = {k: v for k, v in s.items() if k.startswith("cpu_real_") and k.endswith("_s")}
    total = sum(real.values()) or float("nan")
    mark = s.get("cpu_real_gc_dedicated_s", 0.0) + s.get("cpu_real_gc_idle_s", 0.0)
    return {"gomaxprocs": s["gomaxprocs"], "cpu_cores": busy, "cpu_of_limit": busy / LIMIT,
            "throughput_per_s": s["throughput_per_s"], "runtime_share": 1.0 - s["user_cpu_fraction"],
            "mark_workers_share": mark / total, "flame_frames_share": (mark + s.get("cpu_real_sched_s", 0.0)) / total,
            "gc_share": s["gc_cpu_fraction"], "sched_share": s["sched_cpu_fraction"],
            "gc_cycles": s["gc_cycles"], "throttled_ratio": s["throttled_ratio"],
            "latency_p99_ms": 1e3 * s["latency_p99_s"], "summary": s}


before, after = run(COMPARE[0]), run(COMPARE[1])
pd.DataFrame([{k: v for k, v in r.items() if k != "summary"} for r in (before, after)]).set_index("gomaxprocs")

# %% [markdown]
# ## The story's numbers beside the model's

# %%
table = compare([
    {"what": f"peak CPU, GOMAXPROCS {COMPARE[0]} [share of the 8 cores]", "story": 0.69, "model": before["cpu_of_limit"]},
    {"what": f"peak CPU, GOMAXPROCS {COMPARE[1]} [share of the 8 cores]", "story": 0.19, "model": after["cpu_of_limit"]},
    {"what": f"CPU {COMPARE[0]} / CPU {COMPARE[1]}", "story": 0.69 / 0.19, "model": before["cpu_cores"] / after["cpu_cores"],
     "check": lambda m: m > 1.5, "note": "the story's effect: more than 3x"},
    {"what": f"GC mark workers + scheduler share of CPU, GOMAXPROCS {COMPARE[0]}", "story": 0.60,
     "model": before["flame_frames_share"], "note": "story: flame graph, gcBgMarkWorker + schedule + findrunnable ~60 %"},
    {"what": f"all runtime (incl. assists, STW) share of CPU, GOMAXPROCS {COMPARE[0]}", "story": 0.60,
     "model": before["runtime_share"], "note": "upper bound of the above"},
    {"what": f"  of which GC (all), GOMAXPROCS {COMPARE[0]}", "story": None, "model": before["gc_share"]},
    {"what": f"  of which GC mark workers, GOMAXPROCS {COMPARE[0]}", "story": None, "model": before["mark_workers_share"]},
    {"what": f"  of which scheduler, GOMAXPROCS {COMPARE[0]}", "story": None, "model": before["sched_share"]},
    {"what": f"runtime share of CPU, GOMAXPROCS {COMPARE[1]}", "story": None, "model": after["runtime_share"]},
    {"what": "throughput kept (both settings)", "story": None,
     "model": min(before["throughput_per_s"], after["throughput_per_s"]) / base["workload.rate_per_s"]},
])
table

# %%
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
labels = [f"GOMAXPROCS {COMPARE[0]}", f"GOMAXPROCS {COMPARE[1]}"]
x = range(2)
axes[0].bar([i - 0.2 for i in x], [0.69, 0.19], 0.4, label="story (peak)", color="0.6")
axes[0].bar([i + 0.2 for i in x], [before["cpu_of_limit"], after["cpu_of_limit"]], 0.4, label="model", color="C0")
axes[0].axhline(0.20, color="k", ls=":", lw=1, label="expected ~20 %")
axes[0].set_xticks(list(x), labels)
axes[0].set_ylabel("CPU usage / 8-core limit")
axes[0].legend()
for i, r in enumerate((before, after)):
    user = 1 - r["runtime_share"]
    axes[1].bar(i + 0.2, r["cpu_cores"] * user, 0.4, color="C0", label="user" if i == 0 else None)
    axes[1].bar(i + 0.2, r["cpu_cores"] * r["gc_share"], 0.4, bottom=r["cpu_cores"] * user, color="C1",
                label="GC" if i == 0 else None)
    axes[1].bar(i + 0.2, r["cpu_cores"] * r["sched_share"], 0.4, bottom=r["cpu_cores"] * (user + r["gc_share"]),
                color="C2", label="scheduler" if i == 0 else None)
axes[1].bar(-0.2, 0.69 * LIMIT * 0.4, 0.4, color="0.75", label="story: business code (~40 %)")
axes[1].bar(-0.2, 0.69 * LIMIT * 0.6, 0.4, bottom=0.69 * LIMIT * 0.4, color="0.45", label="story: runtime (~60 %)")
axes[1].set_xticks(list(x), labels)
axes[1].set_ylabel("CPU [cores]")
axes[1].legend(fontsize=8)
for ax in axes:
    ax.grid(alpha=0.3, axis="y")
fig.suptitle("58 Tech push service: story (grey, left bars) vs model")
fig.tight_layout()

# %% [markdown]
# ## CPU vs GOMAXPROCS at the same request rate

# %%
sweep = pd.DataFrame([{k: v for k, v in run(g).items() if k != "summary"} for g in SWEEP_GOMAXPROCS])
fig, ax = plt.subplots(figsize=(7, 3.8))
ax.plot(sweep["gomaxprocs"], sweep["cpu_of_limit"], "o-", label="model: CPU / limit")
ax.plot(sweep["gomaxprocs"], sweep["runtime_share"], "s--", label="model: runtime share")
ax.plot([COMPARE[1], COMPARE[0]], [0.19, 0.69], "k*", ms=12, label="story: peak CPU")
ax.set_xlabel("GOMAXPROCS")
ax.set_ylim(0, 1)
ax.grid(alpha=0.3)
ax.legend()
sweep

# %% [markdown]
# ## Where the model disagrees with the story, and why
#
# With its cost priors, the model does **not** reproduce the story's 3.6x: the CPU ratio above is
# close to 1 (see the table's ratio column: the model is far below 69 % at GOMAXPROCS 32). The model
# has the mechanisms the story names - idle-priority GC mark workers on idle Ps, more Ms spinning in
# `findRunnable` when there are more Ps (at most half the busy Ps), wake/park churn, `sched.lock`
# contention among the Ms in the scheduler at once (`go.sched_lock_us` = 1 us per contending M,
# the small-host prior; golang/go#28808 fits 3.5), steal probes that cost more on a 32-CPU host (`go.sched_xfer_growth`)
# - but each is charged with microseconds (`go.sched_spin_base_us` = 3 us, `go.sched_spin_per_p_us`,
# `go.gc_cycle_per_p_us` = 10 us, ...). At 0.2 ms of user work per push these add tens of percent at
# most, not 50 points of CPU: notebook 09 puts the whole band of the unpinned many-core parameters
# (SMT, coherence, lock) at x1.0 to x1.15 (x1.09 at its centre, which reads the host's 32 CPUs as
# 16 cores x 2 hardware threads), still far from 3.6. The model's idle mark workers only
# run while a GC cycle is marking, which with a 256 MiB heap is a small fraction of the time.
#
# What the story does not tell us, and what would have to be true for the 3.6x: far more expensive
# scheduler searches (a push service holds many connections: netpoll wakeups, timers, lock contention
# on `sched.lock` with 32 Ps), and/or far more GC (a higher allocation rate or a smaller heap than our
# guess). Those are calibration questions for the lab (notebook 06, GC share and scheduler metrics),
# not parameters to set from this story. Nothing here is tuned to 69 % / 19 %.
#
# The sensitivity below is **not a fit**: it multiplies the scheduler cost priors to show how the
# 32-vs-8 gap depends on them.

# %%
keys = ("sched_spin_base_us", "sched_spin_per_p_us", "sched_wake_us", "sched_park_us")
sens = []
for k in SENSITIVITY:
    extra = () if k == 1.0 else tuple(f"go.{key}={base['go.' + key] * k}" for key in keys)
    hi, lo = run(COMPARE[0], extra), run(COMPARE[1], extra)
    sens.append({"scheduler costs x": k, f"CPU/limit @{COMPARE[0]}": hi["cpu_of_limit"],
                 f"CPU/limit @{COMPARE[1]}": lo["cpu_of_limit"], "ratio": hi["cpu_cores"] / lo["cpu_cores"],
                 f"runtime share @{COMPARE[0]}": hi["runtime_share"]})
sens = pd.DataFrame(sens)
sens

# %% [markdown]
# ## What a real Go runtime shows on the lab's 2 CPUs
#
# The lab grids `data/lab/sched-overhead` and `sched-overhead-fanout8` (see `data/README.md`) run a
# real Go HTTP service under a non-binding 2-core quota at a fixed open load (10,000 and 24,000
# goroutine wake-ups/s) for GOMAXPROCS 1 to 64, and record the cgroup's CPU. Beside it, the
# model's twins with the default cost priors. If the 58 Tech gap came from per-P search costs, the
# lab would show CPU growing with GOMAXPROCS here too (every search still walks every P); it
# grows far less than the model's (about 60 ns per P per wake-up at 24,000 wake-ups/s, against
# the 0.3 us prior). On 2 CPUs only 2 Ms ever run at once, so the lab cannot
# show many Ms spinning *in parallel* on a 32-CPU host, the other candidate explanation.

# %%
lab_grids, lab_only = [], []
for grid_name in ("sched-overhead", "sched-overhead-fanout8"):
    lab_grid = lab_root() / grid_name
    if not lab_grid.is_dir():
        print(f"{lab_grid} is not in this checkout: no lab comparison for it")
        continue
    lab_grids.append(lab_grid)
    lab_only += [r for r in find_runs(lab_grid) if not is_calibration_run(r)
                 and (LAB_GOMAXPROCS is None or run_scenario(r)["go.gomaxprocs"] in LAB_GOMAXPROCS)]
lab_rows, lab_growth = [], {}
for lab_grid, rep in zip(lab_grids, validate_each(lab_grids, only=lab_only)):
    grid_name = lab_grid.name
    rows = [{"grid": grid_name, "GOMAXPROCS": r["observed"]["gomaxprocs"], "run": r["run"].split("/")[-1],
             "lab CPU [cores]": r["observed"]["cpu_usage_cores"],
             "model CPU [cores]": r["simulated"]["cpu_usage_cores"],
             "model error": r["errors"]["cpu_usage_cores"]} for r in rep.runs]
    g = pd.DataFrame(rows)
    for side in ("lab", "model"):
        col = f"{side} CPU [cores]"
        lab_growth[f"{grid_name} {side} CPU 64/8"] = float(g.loc[g.GOMAXPROCS == 64, col].mean()
                                                          / g.loc[g.GOMAXPROCS == 8, col].mean())
    lab_rows += rows
lab_table = pd.DataFrame(lab_rows).sort_values(["grid", "GOMAXPROCS", "run"]) if lab_rows else pd.DataFrame()
print(lab_growth)
lab_table

# %% [markdown]
# ## Headline numbers (the golden regression reads this line)

# %%
headline({"cpu_of_limit_32": before["cpu_of_limit"], "cpu_of_limit_8": after["cpu_of_limit"],
          "cpu_ratio_32_over_8": before["cpu_cores"] / after["cpu_cores"],
          "ratio_to_story_69pct": before["cpu_of_limit"] / 0.69, "ratio_to_story_19pct": after["cpu_of_limit"] / 0.19,
          "runtime_share_32": before["runtime_share"], "runtime_share_8": after["runtime_share"],
          "mark_sched_share_32": before["flame_frames_share"], "mark_sched_share_8": after["flame_frames_share"],
          "mark_sched_ratio_to_story_60pct": before["flame_frames_share"] / 0.60,
          "gc_share_32": before["gc_share"], "sched_share_32": before["sched_share"],
          "throughput_32": before["throughput_per_s"], "throughput_8": after["throughput_per_s"]});
