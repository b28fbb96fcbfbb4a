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
# 04 - The 100m limit demo (menu, GKE): GOMAXPROCS default (6), 1, 2, 3, 8 at a 100m CPU limit.
import os

SMALL = os.environ.get("CFSIM_SMALL", "") not in ("", "0")
SCENARIO = "menu-gke"
OVERRIDES: list[str] = []  # e.g. ["workload.cpu_ms_per_request=20"]
SETTINGS = ("host", 1, 2, 3, 8)  # "host" = Go 1.21's default: the node's 6 CPUs
RUN_S = 120.0 if SMALL else 600.0  # simulated seconds per setting (the demo ran k6 for minutes)
SEEDS = (1,) if SMALL else (1, 2, 3)
LAB_GRID = "closed-menu"  # data/lab/<grid>: the same demo shape measured on real quotas
# HPA what-if: the production worker as an open stream of messages with a nightly batch
HPA_BATCH_RATE = 20.0  # requests/s during the batch (0.8 cores of work at 40 ms each)
HPA_BATCH_S = (600.0, 2400.0)  # batch start / end [s]
HPA_HOURS = 1.0 if SMALL else 2.0
HPA_MAX_REPLICAS = 20
SURFACE_RUN_S = 6.0 if SMALL else 30.0  # event-engine seconds per response-surface point

# %% [markdown]
# # The 100m limit demo: which GOMAXPROCS is best under a tenth of a core?
#
# **Story** (menu / Reazon, Qiita 2025, <https://qiita.com/yoshifumi_ishikura/items/10876573f128ba9a8e8d>): a Go
# data-pipeline worker on GKE lacked throughput during a nightly batch. An HPA was added first, but
# "autoscaling was sluggish" and throughput did not improve; the cause turned out to be CPU throttling
# from GOMAXPROCS far above the CPU limit (Go 1.21 uses the node's CPU count). A minikube demo makes
# the point: a CPU-bound HTTP handler (8 goroutines per request) in a pod limited to **100m**, two k6
# virtual users in a closed loop, GOMAXPROCS default (6), 1, 2, 3, 8. Findings: **GOMAXPROCS=1 gave the
# best RPS and the best (p50) response time**, and the CPU throttling ratio was **above 75 % for 6
# and 8**. The story gives the panels, not their numbers: the comparison is mostly of rankings.
#
# **Model**: the built-in `menu-gke` (40 ms CPU per request is our reading of ITERATIONS=10^7 - a
# choice, not a fit - 64 KiB allocated per request, 4 MiB live heap).

# %%
import math
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import display

import cfsim
from cfsim.scenario import load_scenario

from _nbutil import compare, headline, lab_root

base = load_scenario(SCENARIO, OVERRIDES)
print(f"{SCENARIO}: limit {base['cgroup.cpu_limit']:g} cores, {base['host.cpus']} CPUs, "
      f"{base['workload.clients']} closed-loop clients, fanout {base['workload.fanout']}, "
      f"{base['workload.cpu_ms_per_request']:g} ms CPU per request")


def gmp_override(g):
    return f'go.gomaxprocs="{g}"' if isinstance(g, str) else f"go.gomaxprocs={g}"


rows = []
for g in SETTINGS:
    for seed in SEEDS:
        s = cfsim.simulate(base, [gmp_override(g), f"run.duration_s={RUN_S}", f"run.warmup_s={min(10.0, RUN_S / 5)}",
                                  f"run.seed={seed}"]).summary
        rows.append({"setting": str(g), "gomaxprocs": s["gomaxprocs"], "seed": seed, "rps": s["throughput_per_s"],
                     "p50_s": s["latency_p50_s"], "p99_s": s["latency_p99_s"], "throttled_ratio": s["throttled_ratio"],
                     "throttled_s_per_s": s["throttled_time_s"] / s["duration_s"], "cpu_cores": s["cpu_usage_cores"],
                     "runtime_share": 1 - s["user_cpu_fraction"], "gc_pause_max_ms": 1e3 * s["gc_pause_max_s"]})
runs = pd.DataFrame(rows)
res = runs.groupby(["setting", "gomaxprocs"], sort=False).mean(numeric_only=True).drop(columns="seed").reset_index()
res

# %%
# settings within 1 % of the best (the model often ties: the same 100m turns into the same work)
tied_rps = [int(g) for g, v in zip(res["gomaxprocs"], res["rps"]) if v >= 0.99 * res["rps"].max()]
tied_p50 = [int(g) for g, v in zip(res["gomaxprocs"], res["p50_s"]) if v <= 1.01 * res["p50_s"].min()]
thr = dict(zip(res["gomaxprocs"], res["throttled_ratio"]))
rps = dict(zip(res["gomaxprocs"], res["rps"]))
rps_spread = (res["rps"].max() - res["rps"].min()) / res["rps"].mean()
table = compare([
    {"what": "settings with the best RPS (within 1 %)", "story": "1", "model": ", ".join(map(str, tied_rps)),
     "ratio": None, "check": lambda m: "1" in m.split(", "),
     "note": f"agrees = GOMAXPROCS 1 is at the top (ties included); RPS spread across settings: {100 * rps_spread:.1f} %"},
    {"what": "settings with the best p50 latency (within 1 %)", "story": "1", "model": ", ".join(map(str, tied_p50)),
     "ratio": None, "check": lambda m: "1" in m.split(", "), "note": "agrees = GOMAXPROCS 1 is at the top (ties included)"},
    {"what": "RPS, GOMAXPROCS 1 / default 6", "story": None, "model": rps.get(1, math.nan) / rps.get(6, math.nan),
     "note": "the story's panel: 1 clearly above 6 (no number given)"},
    *[{"what": f"throttled ratio, GOMAXPROCS {g}", "story": 0.75, "model": thr[g], "check": lambda m: m > 0.75,
       "note": "story: above 75 %"} for g in (6, 8) if g in thr],
    *[{"what": f"throttled ratio, GOMAXPROCS {g}", "story": None, "model": thr[g],
       "note": "story: lower than 6 and 8 (panel; no number)"} for g in (1, 2, 3) if g in thr],
    {"what": "CPU usage, every setting [cores]", "story": 0.1, "model": res["cpu_cores"].mean(),
     "note": "story: 'each reached the 100m limit'"},
])
table

# %%
fig, axes = plt.subplots(1, 3, figsize=(15, 3.8))
xlab = [f"{s}\n(GOMAXPROCS {g})" if s == "host" else str(g) for s, g in zip(res["setting"], res["gomaxprocs"])]
axes[0].bar(xlab, res["rps"], color="C0")
axes[0].set_ylabel("requests/s")
axes[1].bar(xlab, 1e3 * res["p50_s"], color="C1", label="p50")
axes[1].plot(xlab, 1e3 * res["p99_s"], "k_", ms=25, mew=2, label="p99")
axes[1].set_ylabel("latency [ms]")
axes[1].legend()
axes[2].bar(xlab, res["throttled_ratio"], color="C3", label="nr_throttled / nr_periods")
axes[2].plot(xlab, res["throttled_s_per_s"] / res["throttled_s_per_s"].max(), "ko", label="throttled s/s (normalised)")
axes[2].axhline(0.75, color="k", ls=":", lw=1, label="story: > 75 % for 6 and 8")
axes[2].set_ylabel("throttling")
axes[2].legend(fontsize=8)
for ax in axes:
    ax.set_xlabel("GOMAXPROCS")
    ax.grid(alpha=0.3, axis="y")
fig.suptitle("menu demo at a 100m limit: model")
fig.tight_layout()

# %%
p50 = dict(zip(res["gomaxprocs"], res["p50_s"]))
print(f"RPS:  GOMAXPROCS=1 {rps[1]:.3f}/s vs default (6) {rps[6]:.3f}/s -> ratio {rps[1] / rps[6]:.3f} "
      f"({'1 best or tied' if 1 in tied_rps else '1 NOT best'})")
print(f"p50:  GOMAXPROCS=1 {1e3 * p50[1]:.0f} ms vs default (6) {1e3 * p50[6]:.0f} ms -> ratio {p50[1] / p50[6]:.2f} "
      f"({'1 best or tied' if 1 in tied_p50 else 'DISAGREES with the story: 1 is not the best median'})")
print("throttled ratio: " + ", ".join(f"{g}: {thr[g]:.2f}" for g in sorted(thr))
      + f" -> story's > 75 % for 6 and 8: {all(thr[g] > 0.75 for g in (6, 8) if g in thr)}")

# %% [markdown]
# ## Where the model agrees and where it does not
#
# * **Throttling ratio.** In the model every setting is throttled in (almost) every period: two clients
#   that always have a request in flight keep the group runnable, and 10 ms of quota per 100 ms period
#   runs out in every period whatever GOMAXPROCS is - with one thread as with six. So the model agrees
#   with "> 75 % for 6 and 8" but not with the lower ratios the story's panel showed for 1-3. What
#   does scale with GOMAXPROCS is the throttled *time* (summed over CPUs, `throttled_s_per_s`, the black
#   dots): more threads are stalled at each throttle. A dashboard "throttling ratio" built from
#   `container_cpu_cfs_throttled_seconds_total` (a common Grafana panel) would separate the settings as the
#   story's panel did; the story does not say which query its panel used.
# * **RPS.** The model's RPS is almost the same for every setting (all of them turn the same 100m into
#   work: the runtime's extra CPU at higher GOMAXPROCS is small with a 4 MiB heap). GOMAXPROCS=1 is at
#   or near the top, but the margin is small; the story's RPS panel showed a clearer win. One mechanism
#   the model has but cannot pin here is SMT: on a 6-CPU laptop (3 cores x 2 hardware threads, which the
#   story does not state), six threads bursting into the 100m pair up on cores and each needs more CPU
#   for the same loop; the band below (`cfsim.overheads.band`, notebook 09) spans that.
# * **p50 latency.** With two requests always in flight and the same 10 ms of CPU per 100 ms period,
#   each request's 40 ms of CPU is shared with the other's, so the median is about
#   2 x 40 ms / 0.1 core = 0.8 s whatever GOMAXPROCS is (the line above). The model therefore ties
#   GOMAXPROCS 1 with the others instead of making it the clear winner of the story's panel; over short
#   runs the median still carries the start-up order of the first requests and can differ by setting.
#   Where the story's panel separates the settings, the real runtime loses more per extra P under the
#   quota than the model's cost priors charge (the same direction as notebook 03).
#   The tail (p99) is where higher GOMAXPROCS loses in the model: STW pauses wait for throttled threads.
#
# None of the model's parameters was changed to match these panels.

# %%
from cfsim.overheads.report import annotate

band_rows = []
for g in (1, 6):
    sc_b = load_scenario(SCENARIO, [*OVERRIDES, f"go.gomaxprocs={g}", "run.duration_s=20", "run.warmup_s=2"])
    s_b = cfsim.simulate(sc_b).summary
    b = (annotate(sc_b, s_b)["band"] or {}).get("throughput_per_s") or {"low": s_b["throughput_per_s"],
                                                                       "high": s_b["throughput_per_s"]}
    band_rows.append({"GOMAXPROCS": g, "RPS": s_b["throughput_per_s"], "band low": b["low"], "band high": b["high"]})
pd.DataFrame(band_rows)

# %% [markdown]
# ## The same demo measured in the lab
#
# `data/lab/closed-menu`: the lab's Go server and closed-loop load generator (2 clients, fanout 8, 20 ms
# CPU per request) under real quotas of 0.1-1 core, GOMAXPROCS 1, 2, 3, 6, 8, on a 2-CPU machine.
# The model's twin of each run (`cfsim.validation`) beside it. The line printed under the table is the
# lab's own answer to the story's question at 0.1 core: which GOMAXPROCS gave the best RPS, and whether
# the real kernel throttled the settings differently (the model says: every period, for every setting).

# %%
from cfsim.validation import validate

lab_dir = lab_root() / LAB_GRID
lab = None
try:
    rep = validate(lab_dir)
    lab = pd.DataFrame([{"limit": r["scenario"]["cgroup.cpu_limit"], "gomaxprocs": r["scenario"]["go.gomaxprocs"],
                         "lab rps": r["observed"]["throughput_per_s"], "model rps": r["simulated"]["throughput_per_s"],
                         "lab p50 ms": 1e3 * (r["observed"]["latency_p50_s"] or math.nan),
                         "model p50 ms": 1e3 * (r["simulated"]["latency_p50_s"] or math.nan),
                         "lab throttled": r["observed"]["throttled_ratio"],
                         "model throttled": r["simulated"]["throttled_ratio"]}
                        for r in rep.runs if r["role"] in ("point", "repeat")])
except FileNotFoundError as exc:
    print(f"lab grid {LAB_GRID} is missing or not collected yet: {exc}")
if lab is not None and len(lab):
    lab = lab.sort_values(["limit", "gomaxprocs"])
    lab["rps model/lab"] = lab["model rps"] / lab["lab rps"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 3.8))
    for i, (lim, sub) in enumerate(lab.groupby("limit")):
        for ax, key in zip(axes, ("rps", "p50 ms", "throttled")):
            ax.plot(sub["gomaxprocs"], sub[f"model {key}"], "-", color=f"C{i}", label=f"model {lim:g} cores")
            ax.plot(sub["gomaxprocs"], sub[f"lab {key}"], "o", mfc="none", color=f"C{i}", label=f"lab {lim:g} cores")
    for ax, key in zip(axes, ("requests/s", "p50 latency [ms]", "throttled ratio")):
        ax.set_xlabel("GOMAXPROCS")
        ax.set_ylabel(key)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, ncol=2)
    fig.tight_layout()
elif lab is not None:
    print(f"lab grid {LAB_GRID}: no finished point runs yet")
if lab is not None and len(lab):
    at = lab[np.isclose(lab["limit"], base["cgroup.cpu_limit"])]
    if len(at):
        best = at.loc[at["lab rps"].idxmax()]
        g_best = best["gomaxprocs"]
        g_best = int(g_best) if isinstance(g_best, (int, float, np.number)) else g_best
        print(f"lab at {base['cgroup.cpu_limit']:g} core: best RPS with GOMAXPROCS {g_best} "
              f"({best['lab rps']:.2f}/s; range {at['lab rps'].min():.2f}-{at['lab rps'].max():.2f}); "
              f"throttled ratio {at['lab throttled'].min():.2f}-{at['lab throttled'].max():.2f} across GOMAXPROCS "
              f"{', '.join(str(int(g)) if isinstance(g, (int, float, np.number)) else str(g) for g in at['gomaxprocs'])}")
    else:
        print(f"lab grid {LAB_GRID}: no run at the story's {base['cgroup.cpu_limit']:g} core yet")
lab

# %% [markdown]
# ## The HPA what-if the story began with
#
# Before finding GOMAXPROCS, the team added an HPA and found autoscaling sluggish. Here the worker is
# an open stream of messages (the Pub/Sub subscriber) with a nightly batch of `HPA_BATCH_RATE`
# requests/s, pods of 100m (request = limit), HPA on CPU at 80 % of the request, 1 to
# `HPA_MAX_REPLICAS` replicas, the upstream scaling rules (`cfsim.autoscalers.hpa`) on the long-horizon
# engine. Each pod's response (throughput at a given offered load, limit and GOMAXPROCS) is measured on
# the event engine first (a small response surface), so GOMAXPROCS 6 vs 1 enters through the measured
# throughput.

# %%
from cfsim.engine.longrun import run_longrun
from cfsim.engine.response import SurfaceGrid, response_for

r0, (b0, b1) = 0.5, HPA_BATCH_S
hpa_base = base.with_overrides([
    ("workload.kind", "open"), ("workload.arrivals", "poisson"),
    ("workload.rate_per_s", [[0.0, r0], [b0, HPA_BATCH_RATE], [b1, r0]]),
    ("vpa.enabled", False), ("vpa.replicas", 1), ("vpa.days", HPA_HOURS / 24.0),
    ("hpa.enabled", True), ("hpa.min_replicas", 1), ("hpa.max_replicas", HPA_MAX_REPLICAS)])
cpu_req_s = base["workload.cpu_ms_per_request"] / 1000
surf_dir = Path(tempfile.mkdtemp(prefix="cfsim-nb04-"))
grid = SurfaceGrid((base["cgroup.cpu_limit"],), (1, base["host.cpus"]), (0.1, 0.2, 0.4, 0.8), SURFACE_RUN_S,
                   min(2.0, SURFACE_RUN_S / 3))
hpa_runs, hpa_rows = {}, []
for label, g in (("default (6)", "host"), ("GOMAXPROCS=1", 1)):
    sc = hpa_base.with_overrides([("go.gomaxprocs", g)])
    resp = response_for(sc, "surface", HPA_BATCH_RATE * cpu_req_s, grid=grid, directory=surf_dir,
                        simulate_fn=cfsim.simulate)
    r = run_longrun(sc, resp)
    hpa_runs[label] = r
    batch = [x for x in r.rows if b0 < x["t_s"] <= b1 + 1800]
    first_max = next((x["t_s"] - b0 for x in r.rows if x["t_s"] > b0 and x["replicas"] >= HPA_MAX_REPLICAS), None)
    drained = next((x["t_s"] - b1 for x in r.rows if x["t_s"] > b1 and x["backlog_items"] < 1), None)
    batch_tput = [x["throughput_per_s"] / x["replicas"] for x in r.rows if b0 + 600 < x["t_s"] <= b1]
    hpa_rows.append({"run": label, "max replicas": max(x["replicas"] for x in r.rows),
                     "time to max replicas [s]": first_max,
                     "max lag [s]": max(x["lag_s"] for x in batch if math.isfinite(x["lag_s"])),
                     "backlog drained after batch end [s]": drained,
                     "throughput per pod in batch [req/s]": float(np.mean(batch_tput)) if batch_tput else None,
                     "hpa events": sum(1 for e in r.events if e["kind"] == "hpa")})
hpa_table = pd.DataFrame(hpa_rows)
factors = pd.DataFrame(resp.tput_factor[:, 0, :], index=[f"GOMAXPROCS {g}" for g in grid.gomaxprocs],
                       columns=[f"{d:g} cores offered" for d in grid.demands_cores])
print(f"pod response: {resp.describe}")
print("measured throughput / ideal (min(offered, limit) / CPU per request) at the 100m limit:")
display(factors.round(3))
hpa_table

# %%
fig, axes = plt.subplots(3, 1, figsize=(10, 8), sharex=True)
for i, (label, r) in enumerate(hpa_runs.items()):
    t = [x["t_s"] / 60 for x in r.rows]
    axes[0].step(t, [x["replicas"] for x in r.rows], where="post", color=f"C{i}", label=label)
    axes[1].plot(t, [x["throughput_per_s"] for x in r.rows], color=f"C{i}")
    axes[2].plot(t, [x["lag_s"] for x in r.rows], color=f"C{i}")
axes[1].plot(t, [x["arrival_per_s"] for x in r.rows], "k:", lw=1, label="arrivals")
for ax, lab in zip(axes, ("replicas", "requests/s", "lag [s]")):
    ax.set_ylabel(lab)
    ax.grid(alpha=0.3)
axes[0].legend()
axes[1].legend()
axes[-1].set_xlabel("minutes")
fig.suptitle("HPA on a batch spike, 100m pods")
fig.tight_layout()

# %% [markdown]
# What the what-if says: the HPA cannot tell the two settings apart - its metric is usage / request,
# and a throttled pod sits at 100 % of its 100m request whether its GOMAXPROCS is 6 or 1. So it scales
# both the same way, at the pace its scale-up policy allows (at most 4 pods or +100 % per 15 s, after a
# metrics window). The difference is per pod: the throughput each pod turns its 100m into. In this model
# that difference is small (the measured factors above), so the HPA's sluggishness here comes
# from the scale-up pace and the tiny pods, not from GOMAXPROCS; the story's larger gain from fixing
# GOMAXPROCS points to a larger per-pod loss than the model's runtime priors produce (same direction as
# notebook 03).

# %% [markdown]
# ## Headline numbers (the golden regression reads this line; lab-independent)

# %%
hl = {"best_rps_gomaxprocs": tied_rps, "best_p50_gomaxprocs": tied_p50, "rps_spread": rps_spread}
for _, r in res.iterrows():
    g = int(r["gomaxprocs"])
    hl[f"rps_{g}"] = r["rps"]
    hl[f"p50_s_{g}"] = r["p50_s"]
    hl[f"throttled_ratio_{g}"] = r["throttled_ratio"]
    hl[f"throttled_s_per_s_{g}"] = r["throttled_s_per_s"]
for row in hpa_rows:
    key = "hpa_default" if "default" in row["run"] else "hpa_gmp1"
    hl[f"{key}_max_replicas"] = row["max replicas"]
    hl[f"{key}_max_lag_s"] = row["max lag [s]"]
headline(hl);
if SMALL:  # CI: leave no temporary folders behind
    import shutil

    shutil.rmtree(surf_dir, ignore_errors=True)
