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
# 09 - GOMAXPROCS above the limit: the public measurements, the stories and the lab beside the model.
import os

SMALL = os.environ.get("CFSIM_SMALL", "") not in ("", "0")
DURATION_SCALE = 0.25 if SMALL else 1.0     # x each measurement's simulated seconds
LAB_GRIDS = ("open-latency", "overprovisioned")
LAB_MAX_RUNS = 12 if SMALL else None        # runs per lab grid compared (None: all)
EXAMPLE_S = 3.0 if SMALL else 10.0          # simulated seconds of the 24-CPU example
STORY_FANOUTS = (1, 8, 16, 32) if SMALL else (1, 2, 4, 8, 12, 16, 20, 24, 32, 48)  # 58 Tech's unknown

# %% [markdown]
# # GOMAXPROCS above the CPU limit
#
# A Go process whose GOMAXPROCS exceeds its CPU limit (Go < 1.25 without automaxprocs: GOMAXPROCS =
# the node's CPUs) runs bursts of up to GOMAXPROCS threads against the quota. What that costs comes
# from mechanisms of the Go runtime (Go 1.26 `src/runtime/proc.go`, `mgc.go`, `mgcpacer.go`), each in
# the model with a parameter and a prior:
#
# | mechanism | runtime source | model | grows with GOMAXPROCS | grows with host CPUs |
# |---|---|---|---|---|
# | wake-ups of parked Ms (`go` statements, `ready`, netpoll) | `proc.go`: `newproc`, `ready`, `wakep`, `startm`, `injectglist` | `go.sched_wake_us` per wake-up; a woken M decides after it ran, so the spinning chain advances one M at a time | more idle Ps to wake | -- |
# | futile searches (spins) | `findRunnable`, `stealWork` (4 passes), `checkRunqsNoP` | `sched_spin_base_us + P x sched_spin_per_p_us x xfer`, at most half the busy Ps spin | per P scanned | `xfer = 1 + sched_xfer_growth x log2(min(P, CPUs)/2)` |
# | parks (futex sleep) | `stopm`, `mPark`, `futexsleep` | `go.sched_park_us` | -- | -- |
# | `sched.lock` contention | `lock2` on `sched.lock` in `pidleput`, `wakep`, `globrunqget` | `go.sched_lock_us` per other M in the scheduler (spinning, searching, parking or waking: the last two by Little's law, their recent rate x their time) | Ms in the scheduler | at most `CPUs - 1` |
# | SMT siblings | `kernel/sched/fair.c` `select_idle_core` | `host.threads_per_core`, `host.smt_slowdown` | running Ms beyond the cores | cores |
# | GC mark workers (dedicated, fractional, idle on every idle P) | `mgcpacer.go`: `startCycle`, `findRunnableGCWorker`, `enlistWorker` (Green Tea `wakep`), `proc.go` idle workers | 25 % dedicated/fractional, idle workers up to P - dedicated | yes | -- |
# | stop-the-world under throttling | `stopTheWorldWithSema`, `forEachP` | every P-holding M must reach a safe point; a throttled M waits for the next period | Ms holding Ps | -- |
# | request path | `netpoll`, `net/http` | `workload.server_cpu_us_per_request`, `server_alloc_kb_per_request`, two wake-ups per request (`newproc`, `ready`) | -- | -- |
# | per-request CPU variability | -- | `workload.cpu_cv` (gamma) | -- | -- |
# | OS wake-up latency on a shared host | `kernel/sched/fair.c` (EEVDF base slice) | up to `0.75 ms x (1 + log2(min(CPUs, 8)))` with the chance the CPU is busy | -- | slice |
# | /metrics scrapes | client_golang | `workload.scrape_interval_s`, `scrape_cpu_ms` | -- | -- |
#
# The lab (`data/lab`) has 2 CPUs: it pins what a 2-CPU host shows. What only many-core hosts show
# rests on the public measurements below; two of them pin one parameter each (training), the others
# are held out. Where no measurement pins a parameter, the model states a band: every unpinned
# parameter at its low and at its high prior (`cfsim.overheads.band.UNPINNED`).

# %%
import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import cfsim
from cfsim.overheads import public
from cfsim.overheads.band import UNPINNED
from cfsim.overheads.report import annotate
from cfsim.scenario import load_scenario

from _nbutil import headline, lab_root, repo_root

pd.DataFrame([{"parameter": k, "low prior": v[0], "high prior": v[1]} for k, v in UNPINNED.items()])

# %% [markdown]
# ## Training: the two measurements that pin a parameter
#
# * **ghouscht/cpu-limits-and-go** (https://github.com/ghouscht/cpu-limits-and-go): on a 6-CPU host
#   with a 1-core limit, GOMAXPROCS 6 served 134 requests/s, 3 served 276 and 1 served 262. With every
#   P busy (50 connections of CPU-bound requests) no scheduler search is futile and the quota binds at
#   every setting, so the runtime's own paths cannot halve the throughput. Threads sharing cores can:
#   with 6 CPUs = 3 cores x 2 hardware threads, GOMAXPROCS 3 runs one thread per core and 6 pairs them.
#   This pins `host.smt_slowdown` *given* SMT (the source does not say the host had it); the loop is
#   an integer division, which a sibling cannot overlap, so the fit is at the high end of the prior.
# * **golang/go#28808** (https://github.com/golang/go/issues/28808): 56 Ps on 56 CPUs, goroutines
#   that block and wake; `runtime.lock` 23 % of CPU. This pins `go.sched_lock_us`.

# %%
fitted, fit_tables = {}, []
for m in public.MEASUREMENTS:
    if m.role != "train":
        continue
    value, grid = public.fit(m, duration_s=m.duration_s * DURATION_SCALE, params=fitted)
    fitted[m.fits] = value
    for v, r in grid.items():
        fit_tables.append({"measurement": m.name, "parameter": m.fits, "value": v, "model headline": r,
                           "observed": m.observed, "chosen": v == value})
print("fitted:", fitted)
pd.DataFrame(fit_tables)

# %% [markdown]
# ## Every measurement beside the model (held out: not used by the fit)
#
# `model` is the fitted model, `low`/`high` the band of the unpinned parameters. A ratio headline is
# reproduced when it is within +-25 % or inside the band; `direction` rows only publish a direction.

# %%
comparisons = public.compare(fitted, duration_scale=DURATION_SCALE)
cmp_table = pd.DataFrame([{
    "measurement": c.name, "role": c.role, "headline": c.headline, "observed": c.observed,
    "other reading": c.alternative, "model": c.model, "model / observed": c.ratio, "band low": c.low,
    "band high": c.high, "verdict": c.verdict, "source": c.url} for c in comparisons])
cmp_table

# %%
fig, ax = plt.subplots(figsize=(9, 4.5))
rows = [c for c in comparisons if c.model is not None]
y = range(len(rows))
for i, c in enumerate(rows):
    ax.plot([c.low / c.observed, c.high / c.observed], [i, i], "-", color="C0", lw=6, alpha=0.35)
    ax.plot(c.model / c.observed, i, "o", color="C0" if c.role == "held-out" else "C1")
ax.axvline(1.0, color="k", lw=1)
ax.axvspan(0.75, 1.25, color="0.9")
ax.set_xscale("log")
ax.set_yticks(list(y), [f"{c.name} ({c.role})" for c in rows], fontsize=8)
ax.set_xlabel("model / observed (dot: fitted model; bar: band of the unpinned priors)")
fig.tight_layout()

# %% [markdown]
# ## The two stories, with the mechanism named
#
# **menu** (`menu-gke`, 100m limit, GOMAXPROCS 6 vs 1): the throttling above 75 % at GOMAXPROCS 6 and 8
# is reproduced -- and at every GOMAXPROCS, as the lab's own closed-menu grid shows at 0.1 core
# (demand is far above 100m: eight CPU-bound goroutines per request). The mechanism: the quota, not
# the runtime. What GOMAXPROCS changes is how the 10 ms per period is spent: at 6, six threads burn it
# in under 2 ms and the request's goroutines then wait ~98 ms; at 1, one thread runs 10 ms.
#
# **58 Tech** (`push-58tech`, GOMAXPROCS 32 vs 8 in an 8-core limit on 32 CPUs, peak CPU 69 % vs 19 %):
# the model's mechanisms are the ones the flame graph names -- idle and dedicated mark workers
# (`gcBgMarkWorker`), wake-ups, futile searches over 32 Ps and `sched.lock` (`schedule`,
# `findrunnable`) -- but with 1.6 cores of work spread over 32 Ps they add tens of percent, not the
# story's 3.6x, anywhere in the band, *with one goroutine a push* (the built-in scenario's choice): see
# the table. What would have to be true for 3.6x is about 0.5 ms of runtime CPU per push at 32 Ps;
# the next section shows which unstated shape of the work gives that (goroutines a push readies).

# %%
story_rows = [c for c in comparisons if c.name in ("58 Tech push service", "menu (GKE)")]
pd.DataFrame([{"story": c.name, "headline": c.headline, "story value": c.observed, "model": c.model,
               "band": f"{c.low:.3g} .. {c.high:.3g}", "verdict": c.verdict} for c in story_rows])

# %% [markdown]
# ### 58 Tech: the headline over what the story does not say
#
# The story states the reference level (GOMAXPROCS 8 used 19 % of the 8 cores: 1.52 cores), the
# headline (69 % at 32) and a profile (~60 % of the CPU in `gcBgMarkWorker`, `schedule` and
# `findrunnable`, ~40 % in the service's code), but not the workload's shape. One unknown decides
# the runtime's share more than any other: how many goroutines one push readies. A push server in Go
# usually gives each subscriber's connection its own writing goroutine, so a push sent to N
# subscribers readies N goroutines (`workload.fanout`; the push's 0.2 ms of CPU split among them).
# Below, for each N, the rate is solved so that GOMAXPROCS 8 uses the story's 1.52 cores
# (`cfsim.overheads.unstated.solve_for_level`: what the story states, not its headline), and
# GOMAXPROCS 32 runs at that rate; the fitted model and the host read as 16 cores x 2, as above.
# Nothing is fitted to 69 % / 19 %: the table is a curve, and the story's numbers are marked on it.

# %%
from cfsim.overheads.unstated import crossing, unstated_sweep

STORY_RATIO, STORY_RUNTIME_SHARE = 69 / 19, 0.60
story_s = 4.0 * DURATION_SCALE
story_over = [f"{k}={v!r}" for k, v in fitted.items()] + list(public.LOGICAL_CPUS) + [
    f"run.duration_s={story_s:g}", f"run.warmup_s={story_s / 4:g}"]
story = unstated_sweep("push-58tech", ["go.gomaxprocs=8"], ["go.gomaxprocs=32"], 0.19 * 8, "workload.fanout",
                       STORY_FANOUTS, overrides=story_over, workers=None)
fan_at_ratio = crossing(story, "workload.fanout", "cpu_ratio", STORY_RATIO)
share_at_ratio = (None if fan_at_ratio is None else
                  float(np.interp(fan_at_ratio, story["workload.fanout"], story["other_runtime_share"])))
fan_at_share = crossing(story, "workload.fanout", "other_runtime_share", STORY_RUNTIME_SHARE)
ratio_at_share = (None if fan_at_share is None else
                  float(np.interp(fan_at_share, story["workload.fanout"], story["cpu_ratio"])))
print(f"the story's ratio {STORY_RATIO:.2f} at {fan_at_ratio} goroutines a push "
      f"(runtime share at 32 there: {share_at_ratio}); the story's runtime share {STORY_RUNTIME_SHARE:.0%} "
      f"at {fan_at_share} goroutines a push (ratio there: {ratio_at_share})")
story.round(3)

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
ax1.plot(story["workload.fanout"], story["cpu_ratio"], "o-")
ax1.axhline(STORY_RATIO, color="C3", ls="--", label="story: 69 % / 19 %")
ax1.set_xlabel("goroutines a push readies (workload.fanout)")
ax1.set_ylabel("CPU at GOMAXPROCS 32 / at 8")
ax1.legend()
ax2.plot(story["workload.fanout"], story["other_runtime_share"], "o-", label="GOMAXPROCS 32")
ax2.plot(story["workload.fanout"], story["reference_runtime_share"], "s-", label="GOMAXPROCS 8")
ax2.axhline(STORY_RUNTIME_SHARE, color="C3", ls="--", label="story's profile at 32 (~60 %)")
ax2.set_xlabel("goroutines a push readies (workload.fanout)")
ax2.set_ylabel("runtime's share of the CPU")
ax2.legend()
fig.tight_layout()

# %% [markdown]
# **What the curve says** (full size, 4 s simulated a point, 2026-12-06, `sched.lock`'s contenders the
# Ms in the scheduler, fitted at 3.5 us): with one to four goroutines a push, GOMAXPROCS 32 costs
# 1.05-1.11x the CPU of 8 (the table above). From eight on it climbs steeply: 1.26x at 8, 1.63x at
# 12, 2.00x at 16, 2.50x at 20, 3.01x at 24, 3.94x at 32, and it levels off at 4.0x at 48 (throttled
# in 3-7 % of the periods). The story's 3.63x lies at about 29 goroutines a push (7 us of CPU each);
# the band's corners move that to 28 (coherence growth 0.35) and 58 (one thread a core, no growth:
# the curve flattens at 3.5-3.7x from 32 on). The mechanism: at GOMAXPROCS 8 a push's goroutines
# fill the 8 Ps and the rest queue behind them (the reference's cost a push stops growing beyond
# eight: the solved rate stays at ~2,750-2,950 pushes/s), while at 32 each readied goroutine finds an
# idle P and no spinning M, so `ready` -> `wakep` -> `startm` wakes another M, which searches 32 Ps
# (`findRunnable`, `stealWork`: four passes), often finds nothing and parks (`stopm`, `futexsleep`):
# 78,000 thread wake-ups a second at 32 goroutines a push against 21,000 at 8 Ps, each park and
# wake-up taking `sched.lock`. With 0.5 ms a push instead of 0.2 the ratio stays below the story's
# (3.62x at 64 goroutines a push); with 0.1 ms the GOMAXPROCS-8 level is not reached within the
# solver's six steps. Until 2026-12-05 the lock's contenders were the busy Ps, which put the story at
# 21 goroutines a push (19 and 28 at 0.1 and 0.5 ms) but golang/go#18237 outside +-25 % (above).
#
# **What it does not reproduce: the profile.** Where the ratio matches, the model's runtime share at
# 32 is 0.83-0.84, against the story's ~60 %. No model that gives
# the service's own code the same work at both settings can give both: with business CPU `B` equal at
# 8 and 32, `B = (1 - s8) x C8 = (1 - s32) x 3.63 x C8`, so the runtime share at 32 is at least
# `1 - 1/3.63 = 0.72` even if the runtime cost nothing at 8. The story's 40 % of 69 % (27.6 % of the
# limit) for the service's code against 19 % for *everything* at 8 means that code ran at least 1.45x
# slower at 32 Ps, or that its flame graph put runtime work done on the service's stacks (a channel
# send's `goready` -> `wakep` -> `futexwakeup`, `runtime.lock` inside `chansend`) under the service's
# frames. The model's SMT pairing at 32 accounts for 1.17x of it (service CPU 0.87 against 0.75 cores
# at 20 goroutines a push, 2026-12-04). So: the ratio is reachable by the named mechanism at a plausible push
# fan-out the story does not state; the profile's split is not, and the story itself cannot have both
# without its service code slowing down at 32 Ps.

# %% [markdown]
# ## A new user's question: GOMAXPROCS 24 in a 2-core limit
#
# 24-CPU host, 2-core limit, a closed loop of 256 clients, 0.045 ms of CPU and 16 KiB per request,
# 64 MiB live heap: GOMAXPROCS 24 (the host default before Go 1.25) against 2. The band is the answer
# when the host's SMT and coherence costs are unknown.

# %%
example = {"host": {"cpus": 24}, "cgroup": {"cpu_limit": 2.0}, "go": {"live_heap_mb": 64.0},
           "workload": {"kind": "closed", "clients": 256, "cpu_ms_per_request": 0.045,
                        "alloc_kb_per_request": 16.0},
           "run": {"duration_s": EXAMPLE_S, "warmup_s": EXAMPLE_S / 10}}
ex_rows = {}
for g in (2, 24):
    sc = load_scenario(example, [f"go.gomaxprocs={g}"])
    s = cfsim.simulate(sc).summary
    notes = annotate(sc, s)
    b = notes["band"] or {}
    ex_rows[g] = s
    print(f"GOMAXPROCS {g}: {s['throughput_per_s']:.0f} requests/s"
          + (f" [band {b['throughput_per_s']['low']:.0f} .. {b['throughput_per_s']['high']:.0f}]" if b else "")
          + f", p99 {1e3 * s['latency_p99_s']:.1f} ms, throttled {s['throttled_ratio']:.2f}, GC cycles {s['gc_cycles']}")
    for t in notes["coverage"]:
        print("   outside what we cover:", t)
ex_ratio = ex_rows[24]["throughput_per_s"] / ex_rows[2]["throughput_per_s"]
print(f"requests/s at 24 / at 2: {ex_ratio:.2f}")

# %% [markdown]
# ## The lab beside the model
#
# The `open-latency` grid (open loop, 0.4 ms + 2 KiB per request, fixed and Poisson arrivals at 30 / 60
# / 85 % of limits 0.25-1.5, GOMAXPROCS 1/2/8/32, 16 and 256 MiB live heap, 3 repeats) and the
# `overprovisioned` grid (saturating closed loop of 0.05 ms requests, limits 0.5 and 1.0, GOMAXPROCS 1 to
# 64), each twin simulated from what was known before the run: the scenario, the lab's scrape
# interval, and the grid's calibration runs (cost per request, and the client round trip: the
# log-normal that, added to their twin's latency, gives their client latency). Both grids are held
# out: the scheduler costs the twins use (`go.sched_wake_us`, `go.sysmon_poll_us`) were fitted on the
# `profiles` grid's open-loop runs, and `sched_spin_per_p_us` on the `sched-overhead` grids. The twins share the host's CPUs with the load
# generator in time slices, with the lab host's cost of a switch fitted on a third grid,
# `kernel-switches` (`docs/params/lab-host-switches.toml`). Errors by regime (`cfsim.validation.regimes`):
# *uncapped* and *contended* (the model's own prediction, on a quiet or a busy host), *quota-capped*
# (the kernel decides the CPU), *gomaxprocs-capped*, *host-capped*. Issue 14's goals are judged on
# the *predicted* row (uncapped and contended together): a quota-capped run agrees on CPU and throttling
# whatever the model does, and its queue's latency says how long the run lasted.
# Beside them, what GOMAXPROCS itself costs: within each design point, CPU at every GOMAXPROCS over
# CPU at the lowest (`cfsim.overheads.labcheck.gomaxprocs_growth`). A run's CPU error mixes the grid's
# cost calibration with the runtime's costs; the ratio keeps only what grows with the Ps. On the whole
# `open-latency` grid (2026-12-04, the four lab-host files): the lab's CPU grows 13 % at the median
# pair, the model's ratio misses it by 6.1 % (the naive model, which gives GOMAXPROCS no cost, 14 %).

# %%
from cfsim.overheads.labcheck import GOALS, gomaxprocs_growth, tails_rows, tails_summary
from cfsim.validation import validate_each
from cfsim.validation.calibrate import read_params
from cfsim.validation.twin import find_runs, is_calibration_run

HOST_PARAMS = repo_root() / "docs" / "params" / "lab-host-switches.toml"
host_params = read_params(HOST_PARAMS) if HOST_PARAMS.is_file() else None

lab_grids, lab_only = [], []
for grid_name in LAB_GRIDS:
    grid = lab_root() / grid_name
    if not grid.is_dir():
        print(f"{grid}: not in this checkout (the lab grid lands separately); nothing to compare")
        continue
    lab_grids.append(grid)
    lab_only += [r for r in find_runs(grid) if not is_calibration_run(r)][:LAB_MAX_RUNS]
# every grid's twins in one process pool (validate_each), one report per grid
lab_rows = {grid.name: tails_rows(rep) for grid, rep in zip(lab_grids, validate_each(lab_grids, host_params, only=lab_only))}
lab_summary = {}
for name, rows in lab_rows.items():
    lab_summary[name] = tails_summary(rows)
    t = pd.DataFrame({k: v for k, v in lab_summary[name].items() if not k.startswith("p99_order")}).T
    print(f"{name}: median |error| by regime (goals: throttled {GOALS['throttled']}, CPU {GOALS['cpu']:.0%}, "
          f"p50 {GOALS['p50']:.0%}, p99 factor {GOALS['p99_factor']})")
    print(t.to_string(float_format=lambda v: f"{v:.3f}"))
    po, pp = lab_summary[name]["p99_order"], lab_summary[name]["p99_order_predicted"]
    print(f"  p99 ordering across GOMAXPROCS: {po['kept']} of {po['separated_pairs']} separated pairs kept "
          f"({pp['kept']} of {pp['separated_pairs']} where the model predicts)")
    # what GOMAXPROCS itself costs: CPU over the design point's lowest GOMAXPROCS, which cancels the
    # grid's cost calibration (common to the settings) and keeps what grows with the Ps
    g, gn = gomaxprocs_growth(rows), gomaxprocs_growth(rows, "naive")
    if g["pairs"]:
        print(f"  CPU over the design point's lowest GOMAXPROCS ({g['pairs']} pairs): the lab's grows "
              f"{g['lab_growth']:.1%} at the median, the model's ratio misses it by {g['error']:.1%} "
              f"(naive, no cost of GOMAXPROCS: {gn['error']:.1%})")

# %% [markdown]
# Per GOMAXPROCS: for every limit and load of `open-latency`, the lab's p99 and throttled ratio (dot:
# median of the repeats, bar: their range) beside the model's (cross).

# %%
if lab_rows.get("open-latency"):
    df = pd.DataFrame(lab_rows["open-latency"])
    groups = sorted(df["group"].unique(), key=str)
    fig, axes = plt.subplots(2, len(groups), figsize=(2.6 * len(groups), 5), squeeze=False, sharex=True)
    for j, g in enumerate(groups):
        sub = df[df["group"] == g]
        for i, (key, scale, label) in enumerate((("latency_p99_s", 1e3, "p99 [ms]"),
                                                 ("throttled_ratio", 1.0, "throttled ratio"))):
            ax = axes[i][j]
            for k, (gp, cell) in enumerate(sub.groupby("gomaxprocs")):
                lab = cell[f"{key}_lab"].dropna() * scale
                mod = cell[f"{key}_model"].dropna() * scale
                if len(lab):
                    ax.errorbar([k], [lab.median()], yerr=[[lab.median() - lab.min()], [lab.max() - lab.median()]],
                                fmt="o", color="C0")
                if len(mod):
                    ax.plot([k + 0.15], [mod.median()], "x", color="C3")
            ax.set_xticks(range(sub["gomaxprocs"].nunique()), [str(v) for v in sorted(sub["gomaxprocs"].unique())])
            if key == "latency_p99_s":
                ax.set_yscale("log")
                ax.set_title(f"{g[0]} core, {g[2]:.0f}/s", fontsize=8)
            if j == 0:
                ax.set_ylabel(label)
            if i == 1:
                ax.set_xlabel("GOMAXPROCS")
    fig.tight_layout()
    plt.show()
else:
    print("open-latency is not in this checkout: nothing to plot")

# %% [markdown]
# ## Where the model and the measurements disagree, and why
#
# * **A loss needs cores to share or a host to cross.** In the model, GOMAXPROCS above the limit costs
#   (a) scheduler work per wake-up that grows with P and with the host, (b) GC bursts and STW pauses
#   that meet the quota, and (c) SMT sharing when more Ms run than there are cores. With few wake-ups
#   (CPU-bound closed loops: ghouscht, blog.esc.sh) (a) and (b) are small, and the loss is (c): on a
#   host without SMT the model answers "no loss" (the band's end at one thread a core).
# * **How a host's CPUs are read.** Go's default GOMAXPROCS is `runtime.NumCPU`, the host's *logical*
#   CPUs (`src/runtime/debug.go`), and x86 servers and cloud machines run two hardware threads a core
#   unless SMT is switched off (Amazon EC2's `ThreadsPerCore` defaults to 2; Google Compute Engine's
#   to the most the processor supports). So where a source gives a CPU count without saying, the
#   central model reads it as cores x 2 (`public.LOGICAL_CPUS`), as the training measurement ghouscht
#   already did, and the band still spans one and two threads a core; where a source names the
#   processor (#28808's two 14-core E5-2660 v4, VictoriaMetrics' 64-core EPYC 7763) or says "no HT"
#   (#18237), its thread count is a fact the band leaves alone. Before this reading (2026-11-28) the
#   central model took one thread a core everywhere, so the smt_slowdown fitted *given* SMT on
#   ghouscht never applied to the held-out hosts: blog.esc.sh 1.01 (direction not reproduced) ->
#   0.49 against 0.61 or 0.35, elastic 0.75 -> 1.50 against 2.06 (direction reproduced), at full
#   size; golang/go#20457's idle-worker share 0.70 -> 0.67 against 0.75 (0.65 -> 0.57 at the CI size,
#   where it falls just outside +-25 %).
# * **elastic/apm-server** compared builds and ran on a platform that lets containers burst above
#   their quota: with automaxprocs' floor (GOMAXPROCS 1 in a 1.35-core limit) the model loses a third
#   of the quota, where the platform's bursting gave it back; with 32 vCPUs as 16 cores x 2 the
#   over-provisioned build loses more than that, so the direction is reproduced.
# * **58 Tech**'s 3.6x is outside the band (above).
# * **golang/go#18237**'s 35 % in `findrunnable` (cumulative, including the futex sleep it ends in)
#   is within 25 % since `sched.lock`'s contenders are the Ms in the scheduler at once, not the busy
#   Ps (2026-12-06): a P running a goroutine takes no scheduler lock; the Ms that spin, search, park
#   (`stopm`'s `mput`) or are woken (`startm`'s `pidleget`) do. Parks and wake-ups are costs in the
#   model, not running segments, so their Ms are counted by Little's law (the recent rate of parks
#   and wake-ups times the time each takes). #28808's 56 Ps that block and wake keep many Ms in the
#   scheduler and fit 3.5 us per contender (23.1 % against 23 %); #18237's front end, 12 Ps waiting on
#   its back end, keeps fewer there: 0.421 against 0.35 at full size (1.20x; 0.455 with the busy Ps
#   counted, 1.30x, outside +-25 %). The rest of the gap is the front end's futile searches, which depend on a request
#   mix the source does not give.
# * **The lab's CPU per request drifts more than the goal allows.** The same design point (open loop,
#   750 requests/s x 0.4 ms at 0.5 core, GOMAXPROCS 1) used 0.398 cores in the `profiles` grid and
#   0.443-0.465 in `open-latency` an hour later, with calibration runs that agree within 3 %; at 187
#   and 375 requests/s the measured CPU per request is 10-40 % above the twin's while the 1000/s
#   calibration run matches. Part of that is a cost per wake-up of the process that the model now
#   has (sysmon, below), part is not explained: the machine's speed (other tenants on the host's
#   cores, caches) is not known before a run. Because the moderate-load runs sit at 80-95 % of their
#   limit, a CPU level 15 % low also takes away their throttling and tails; with the per-request CPU
#   set to the measured level (a diagnostic, not a twin), the model gives p99 2.4 / 11 / 0.6 / 3.5 ms
#   and throttled ratios 0.05 / 0.23 / 0.03 / 0.07 at GOMAXPROCS 1 / 2 / 8 / 32 at 60 % of 0.5 core,
#   against 3.0 / 20 / 1.3 / 4.4 ms and 0.01 / 0.41 / 0.03 / 0.09 measured.
# * **Per-wake-up costs.** Every time the process goes from idle to busy, `sysmon` (`proc.go`: `sysmon`)
#   is woken from its deep sleep by the first system call and then polls every 20 us (plus the
#   kernel's 50 us timer slack) while any P is busy, for up to 50 polls before it backs off: a few
#   microseconds each, so ~40 us per request at low rates and almost nothing for a saturated process.
#   Fitted on the `profiles` grid with the cost of waking a parked M (`sched_wake_us` 6 us, which the
#   futile wake-ups at GOMAXPROCS >= 2 multiply): the 2-CPU VM's wake-ups are about three times the
#   bare-metal figure.
# * **Switching threads in the kernel: modelled for the step from 1 to 2 Ps, not beyond.** A Go CPU
#   profile of the saturating closed loop at GOMAXPROCS 32 puts ~30 % of its samples on
#   `runtime.asyncPreempt`; the lab's `preempt-profile` grid shows that this is a sampling artefact
#   (turning async preemption off recovers at most 5.5 % of the 19.5 % loss). `perf` in the
#   `kernel-switches` grid counts what the profile cannot see: from 2 Ps on the workload's threads
#   are switched out 8,600-15,600 times a second instead of 1,200-1,400 at one P, mostly
#   involuntarily (the load generator's wake-ups preempt an M once the Ms hold every CPU), and the
#   kernel's share of the CPU doubles (14 % -> 30-40 %). Without a load generator on the host
#   (`kernel-switches-stream`) nothing is lost. The twins of the lab's closed and open loops now
#   run on time-sliced CPUs (`host.cpu_sharing = "slices"`) beside the load generator (its CPU per
#   request from the calibration runs), which preempts an M only when the Ms hold both CPUs; with
#   the cost of a switch fitted on `kernel-switches` at GOMAXPROCS 1-2
#   (`docs/params/lab-host-switches.toml`, 17.9 us) the held-out `overprovisioned` grid's
#   throughput error falls from 9.4 % (fluid CPUs) to 3.9 %. The further loss from 2 to 32 Ps
#   (-25 to -31 % in `kernel-switches`) stays unexplained: the lab's futex, epoll and preemption
#   signals grow with GOMAXPROCS while the twins' Ms never sleep, because the model's goroutines
#   wait in one run queue a saturated server never empties (data/README.md, `kernel-switches`).
# * A service idle between requests spends more CPU per request the lower its rate (the lab's
#   open loop at GOMAXPROCS 1: 664 us a request at 187.5/s, 480 at 1,500/s), which the twins above
#   under-predict by 10-14 % at the lowest rates. On this virtual machine each sleep and wake-up of
#   a thread costs it 21-31 us of CPU, more after a long idle, and a futex wake-up reaches an idle
#   CPU 25-40 us late (`lab/cmd/wakebench`, `cfsim lab wakeup`, `docs/params/lab-host-wakeup.toml`).
#   With that file the `open-latency` twins' CPU error falls from 5.4 % to 4.2 % and p50 from 18.8 %
#   to 16.7 %, but the `sched-overhead` twins' CPU error grows from 15 % to 24 % (GOMAXPROCS >= 2 and
#   high rates over-predicted). Counting each thread's sleeps (`wakeups` grid) shows why: the
#   model's rule of one wake-up per arrival at an idle process holds, but the lab's load generator
#   wakes late and sends its overdue requests in bunches, so at 2,000 requests/s one wake-up
#   serves several (the twins wake about 1.8x the lab's Ms there; with the arrivals bunched as the
#   generator's loop does, within 25 % in most points: data/README.md, `wakeups`). That client is
#   a scenario option (`workload.client_send_late_ms`, `docs/params/lab-loadgen.toml`); with both
#   files the open-loop twins' CPU error falls on every grid but `profiles` (`open-latency` 5.4 %
#   -> 3.9 %) while `sched-overhead`'s p99 worsens, so the twins here still leave both out.

# %% [markdown]
# ## Headline numbers (the golden regression reads this line)

# %%
def _c(name):
    return next(c for c in comparisons if c.name == name)


headline({"fit_smt_slowdown": fitted.get("host.smt_slowdown"), "fit_sched_lock_us": fitted.get("go.sched_lock_us"),
          "ghouscht_ratio": _c("ghouscht").model, "esc_band_low": _c("blog.esc.sh").low,
          "grpc_p50_ratio": _c("grpc/grpc-go#1014").model, "idle_share_20457": _c("golang/go#20457").model,
          "58tech_cpu_ratio": _c("58 Tech push service").model, "58tech_band_high": _c("58 Tech push service").high,
          "menu_throttled_6": _c("menu (GKE)").model, "vm_depth_ratio": _c("VictoriaMetrics#5867").model,
          "example_24_over_2": ex_ratio, "58tech_fanout_at_story_ratio": fan_at_ratio,
          "58tech_runtime_share_there": share_at_ratio,
          "held_out_reproduced": sum(c.verdict in ("within 25 %", "inside the band", "reproduced",
                                                   "direction reproduced") for c in comparisons
                                     if c.role == "held-out")});
