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
# 01 - The T0-T3 trap (Grab, SinktoS3): VPA x automaxprocs on a non-integer CPU allocation.
# Parameters (papermill-style). CFSIM_SMALL=1 selects the CI size.
import os

SMALL = os.environ.get("CFSIM_SMALL", "") not in ("", "0")
SCENARIO = "grab-sinktos3"  # any scenario with a [vpa] section
OVERRIDES: list[str] = []  # e.g. ["workload.rate_per_s=9000", "vpa.half_life_s=43200"]
DAYS = 2.0 if SMALL else 7.0  # simulated days of the VPA loop
RESPONSE = "analytic"  # pod response of the long-horizon engine: "analytic" | "auto" | "surface"
EVENT_RUN_S = 4.0 if SMALL else 20.0  # event-engine run per checked allocation [s]
TABLE3_NEEDS = (0.8, 1.2, 1.8)  # the story's third table: actual CPU need [cores]

# %% [markdown]
# # The T0-T3 trap: VPA recommends 1.2 cores and automaxprocs gives the pod one
#
# **Story** (Grab Engineering, 2023, *Performance bottlenecks of Go application on Kubernetes with
# non-integer (floating) CPU allocation*, <https://engineering.grab.com/performance-bottlenecks-go-apps>): a Go stream
# pipeline that needs about 1.7 cores runs with automaxprocs (GOMAXPROCS = floor of the CPU limit) and
# a VPA that sets request = limit. Below 2 cores GOMAXPROCS drops to 1, usage is capped near one core,
# and the VPA reads the capped usage as the need: it never scales up again. Fixed by a 2-core minimum
# and by the VPA's integer-CPU feature.
#
# **Model**: the built-in scenario `grab-sinktos3` (1.7 cores per replica, automaxprocs floor, VPA
# with request = limit, 2 replicas). The long-horizon engine (`cfsim.engine.longrun`, used by
# `python -m cfsim trap`) runs the upstream VPA recommender/updater rules minute by minute; each
# allocation it reaches is then checked on the event engine (CFS quota + Go runtime). Nothing in the
# scenario is tuned to the story's numbers: the 1.2 cores must come out of the VPA's own rules.
#
# The story gives three tables; each is regenerated below with the model's value beside the story's
# and the ratio model / story.

# %%
import math

import matplotlib.pyplot as plt
import pandas as pd

import cfsim
from cfsim.trap import run_trap
from cfsim.engine.longrun import nominal_demand_cores, run_longrun
from cfsim.goruntime.gomaxprocs import automaxprocs_value, go125_value
from cfsim.scenario import load_scenario

from _nbutil import compare, headline

pd.set_option("display.width", 160)
pd.set_option("display.max_colwidth", 90)
base = load_scenario(SCENARIO, [*OVERRIDES, f"vpa.days={DAYS}"])
DEMAND = nominal_demand_cores(base)
print(f"cfsim {cfsim.__version__}; scenario {SCENARIO}: {DEMAND:.3f} cores of demand per replica, "
      f"{base['host.cpus']}-CPU node, GOMAXPROCS policy {base['go.gomaxprocs']!r} ({base['go.round']}), "
      f"{DAYS:g} simulated days, response {RESPONSE!r}")


def event_check(limit: float, policy=None, seconds: float = EVENT_RUN_S) -> dict:
    """One pod of the scenario at a fixed CPU limit (request = limit) on the event engine."""
    ovr = [*OVERRIDES, "vpa.enabled=false", f"cgroup.cpu_limit={limit}", f"run.duration_s={seconds}",
           f"run.warmup_s={min(2.0, seconds / 3):.3f}"]
    if policy is not None:
        ovr.append(f'go.gomaxprocs="{policy}"')
    return cfsim.simulate(SCENARIO, ovr).summary


# %% [markdown]
# ## Table 1 - Kubernetes resources -> GOMAXPROCS
#
# The story's first table, from automaxprocs' rule `max(1, floor(quota / period))`
# (`cfsim.goruntime.gomaxprocs`). Beside it: what Go 1.25's container-aware default would pick
# (`min(cpus, max(2, ceil(limit)))`), and what one pod of the scenario actually does with that
# allocation on the event engine (usage and throughput against the 1.7 cores it needs).

# %%
STORY_T1 = {2.5: 2, 2.0: 2, 1.5: 1, 0.5: 1}
rows, t1_model = [], {}
for limit, story_gmp in STORY_T1.items():
    gmp = automaxprocs_value(limit, base["host.cpus"], base["go.round"])
    s = event_check(limit)
    t1_model[limit] = {"gomaxprocs": gmp, "usage_cores": s["cpu_usage_cores"],
                       "throughput_per_s": s["throughput_per_s"]}
    rows.append({"what": f"{limit:g} core -> GOMAXPROCS (automaxprocs)", "story": story_gmp, "model": gmp,
                 "check": lambda m, sg=story_gmp: m == sg,
                 "note": f"go1.25 would pick {go125_value(limit, base['host.cpus'])}; event engine: usage "
                         f"{s['cpu_usage_cores']:.2f} cores, {s['throughput_per_s']:.0f}/s of "
                         f"{s.get('arrival_rate_per_s', float('nan')):.0f}/s offered, throttled "
                         f"{100 * s['throttled_ratio']:.0f} % of periods"})
table1 = compare(rows)
table1

# %% [markdown]
# The model agrees with every row: the rule is exact. The event-engine column shows the remarks
# of the story's table: at 1.5 cores the pod does the work of one core (a third of its allocation
# idle), and at 0.5 core it is throttled in every period.

# %% [markdown]
# ## Table 2 - the timeline T0-T3
#
# `run_trap` runs the VPA loop from the story's T0 (0.5 core), then the same run with each fix, and a
# separate run in which `minAllowed = 2` cores is set by hand one day after the last VPA update
# (T3, the story's "2 core (manual override)"). The phases are cfsim's reading of the story's rows:
# T1 = the first VPA update that reaches one core, T2 = the last update (the settled allocation).
# Utilisation is usage / request, as the story's column (and the HPA) reads it.

# %%
report = run_trap(SCENARIO, [*OVERRIDES, f"vpa.days={DAYS}"], response_mode=RESPONSE)
data, results = report["data"], report["results"]
ph = data["phases"]
print(f"response: {data['response']}")
print(f"wall time of the long-horizon runs: {data['wall_s']:.1f} s")
STORY_T2 = {  # the story's timeline: VPA recommendation, CPU utilisation, GOMAXPROCS
    "T0": {"request": 0.5, "util": "> 90 %", "gmp": 1, "test": lambda u: u > 0.90},
    "T1": {"request": 1.0, "util": "> 90 %", "gmp": 1, "test": lambda u: u > 0.90},
    "T2": {"request": 1.2, "util": "< 85 %", "gmp": 1, "test": lambda u: u < 0.85},
    "T3": {"request": 2.0, "util": "80-90 %", "gmp": 2, "test": lambda u: 0.80 <= u <= 0.90},
}
rows, event_util = [], {}
for name, st in STORY_T2.items():
    p = ph.get(name)
    if p is None:
        rows.append({"what": f"{name}: phase not reached", "story": st["request"], "model": None})
        continue
    ev = event_check(p["limit_cores"] or p["request_cores"])
    event_util[name] = ev["cpu_usage_cores"] / p["request_cores"]
    rows += [
        {"what": f"{name} request (VPA recommendation) [cores]", "story": st["request"], "model": p["request_cores"],
         "note": f"at {p['t_h']:.1f} h: {p['what']}"},
        {"what": f"{name} utilisation, long-horizon engine", "story": st["util"], "model": p["utilization_of_request"],
         "ratio": None, "check": st["test"], "note": f"usage {p['usage_cores']:.3f} cores (includes backlog catch-up)"},
        {"what": f"{name} utilisation, event engine at that allocation", "story": st["util"],
         "model": event_util[name], "ratio": None, "check": st["test"],
         "note": f"steady state at {DEMAND:.2f} cores offered: usage {ev['cpu_usage_cores']:.3f}, "
                 f"GC {100 * ev.get('gc_cpu_fraction', 0):.1f} % of CPU"},
        {"what": f"{name} GOMAXPROCS", "story": st["gmp"], "model": p["gomaxprocs"], "check": lambda m, g=st["gmp"]: m == g},
    ]
table2 = compare(rows)
table2

# %% [markdown]
# **Where the model and the story differ.** The model settles at the request the upstream
# recommender computes for usage pinned at one core (see the next section), about 1.17 cores: the
# story's "1.2 core" to within a few percent, without any tuning. The T3 row's long-horizon
# utilisation is higher than the story's 80-90 % because that engine reports the hour after the
# override, while the pod is still eating the backlog accumulated in the trap (usage 2.0 = the full
# allocation); the event-engine row is the steady state, which is what the story describes.
# T2's utilisation misses the story's "< 85 %" by a hair: usage pinned at 1.0 core over the VPA's
# exact 1.168 cores is 85.6 %; the story's bound goes with its rounded "1.2 core" (1.0 / 1.2 = 83 %).
# T0's utilisation is about 100 % in the model (capped at 0.5 core), consistent with "> 90 %".

# %%
def plot_trap(results: dict, title: str):
    fig, axes = plt.subplots(4, 1, figsize=(10, 10), sharex=True)
    colours = {"trap": "black", "integer_cpu": "tab:blue", "min_allowed_2": "tab:green", "go1.25": "tab:orange",
               "limit_above_request": "tab:purple", "t3_manual_override": "tab:red"}
    for name, res in results.items():
        t = [r["t_s"] / 86400 for r in res.rows]
        kw = {"color": colours.get(name), "lw": 2.2 if name == "trap" else 1.1, "label": name,
              "ls": "--" if name == "t3_manual_override" else "-"}
        axes[0].plot(t, [r["request_cores"] for r in res.rows], **kw)
        axes[1].step(t, [r["gomaxprocs"] for r in res.rows], where="post", **kw)
        axes[2].plot(t, [r["usage_cores"] for r in res.rows], **kw)
        axes[3].plot(t, [r["lag_s"] / 3600 if math.isfinite(r["lag_s"]) else float("nan") for r in res.rows], **kw)
    for name, st in STORY_T2.items():
        if name in ph and name != "T3":
            axes[0].plot(ph[name]["t_s"] / 86400, st["request"], "k*", ms=12)
            axes[0].annotate(f"story {name}", (ph[name]["t_s"] / 86400, st["request"]), xytext=(4, 6),
                             textcoords="offset points", fontsize=8)
    axes[0].axhline(DEMAND, color="grey", ls=":", lw=1)
    for ax, lab in zip(axes, ("CPU request = limit [cores]", "GOMAXPROCS", "usage per pod [cores]", "consumer lag [h]")):
        ax.set_ylabel(lab)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, ncol=3)
    axes[0].set_title(title)
    axes[-1].set_xlabel("simulated time [days]")
    fig.tight_layout()
    return fig


plot_trap(results, f"{SCENARIO}: the trap and its fixes (stars: the story's T0-T2 recommendations)");

# %% [markdown]
# ## Why it is stuck
#
# With GOMAXPROCS = 1 the pod cannot use more than one core, so every usage sample the recommender
# sees is about 1.0. The VPA target is the 90th percentile of its usage histogram (the END of the
# bucket holding 1.0 core, buckets grow by 5 %) plus a 15 % margin. If that is below 2 cores,
# automaxprocs floors it back to GOMAXPROCS 1, usage stays at 1.0 and the recommendation reproduces
# itself; the updater sees the request inside [lower bound, upper bound] and does nothing. Below, the
# upstream recommender (`cfsim.autoscalers.vpa_recommender`) fed one day of constant usage N: for
# which N is the loop self-consistent?

# %%
from cfsim.autoscalers.vpa_recommender import AggregateState, config_from_scenario, recommend

cfg = config_from_scenario(base.section("vpa"))
fixed = []
for n in range(1, 9):
    agg = AggregateState.new(cfg.half_life_s)
    t0 = base["vpa.start_unix_s"]
    for k in range(1440):
        agg.add_cpu_sample(float(n), t0 + 60.0 * k)
    rec = recommend(agg, cfg)
    target = rec.target / 1000
    fixed.append({"usage pinned at [cores]": n, "VPA target [cores]": target,
                  "lower": rec.lower_bound / 1000, "upper": rec.upper_bound / 1000,
                  "GOMAXPROCS at that limit": automaxprocs_value(target, 64, "floor"),
                  "self-consistent (stuck)": automaxprocs_value(target, 64, "floor") == n})
fixed = pd.DataFrame(fixed)
fixed

# %% [markdown]
# For N <= 5 the 15 % margin plus the bucket rounding stays below N + 1: a pipeline pinned at N
# cores by automaxprocs stays there. A pipeline that needs 1.7 cores and once sits below 2 cores
# is stuck at about 1.17 cores for good - the story's T2 - unless someone intervenes (T3).

# %% [markdown]
# ## The fixes compared
#
# Final state after the simulated days of each run (usage and throughput averaged over the last
# hour; lag = backlog / arrival rate).

# %%
fix_rows = [{"run": "trap (as in the story)", **{k: data["final"][k] for k in
             ("request_cores", "limit_cores", "gomaxprocs", "usage_cores", "throughput_per_s", "lag_s", "lag_growing")}}]
for name, fx in data["fixes"].items():
    fix_rows.append({"run": f"{name} [{', '.join(fx['overrides'])}]",
                     **{k: fx["final"][k] for k in ("request_cores", "limit_cores", "gomaxprocs", "usage_cores",
                                                     "throughput_per_s", "lag_s", "lag_growing")}})
if "t3_manual_override" in data:
    f = data["t3_manual_override"]["final"]
    fix_rows.append({"run": "T3 manual override (minAllowed=2 set one day after T2)",
                     **{k: f[k] for k in ("request_cores", "limit_cores", "gomaxprocs", "usage_cores",
                                          "throughput_per_s", "lag_s", "lag_growing")}})
fixes = pd.DataFrame(fix_rows)
fixes["cost vs need"] = fixes["request_cores"] / DEMAND
fixes

# %% [markdown]
# Every fix escapes the trap and keeps up with the arrivals (`lag_growing` False). They differ in
# cost (`cost vs need`): `minAllowed = 2` and a limit above the request settle near 2 cores of
# request; the go1.25 policy (ceil, minimum 2) never leaves GOMAXPROCS below the limit, so the VPA
# sees the real need (its request may overshoot for a while after the backlog of the first hours);
# the integer-CPU feature rounds the VPA's target UP, and for this pipeline the target
# (1.7 x 1.15 plus bucket rounding = 2.05) is just above 2, so it lands on 3 cores (see Table 3).
# The T3 override escapes too, but only once someone notices: the backlog of the trap days is
# still being worked off at the end of the run.

# %% [markdown]
# ## Table 3 - actual need -> recommendation after the integer-CPU feature (VPA 0.13)
#
# For each need, the same pipeline with `vpa.integer_cpu = true` and the arrival rate set to that
# need, run through the VPA loop; the table shows where it settles.

# %%
STORY_T3 = {0.8: (1, 1), 1.2: (2, 2), 1.8: (2, 2)}  # need -> (recommendation, GOMAXPROCS)
cpu_per_item = base["workload.cpu_ms_per_item"] / 1000
rows, t3_model = [], {}
for need in TABLE3_NEEDS:
    sc = base.with_overrides([("vpa.integer_cpu", True), ("workload.rate_per_s", need / cpu_per_item)])
    fin = run_longrun(sc, response_mode=RESPONSE, simulate_fn=cfsim.simulate).final
    t3_model[need] = fin
    story_rec, story_gmp = STORY_T3.get(need, (None, None))
    rows += [{"what": f"need {need:g} -> recommendation [cores]", "story": story_rec, "model": fin["request_cores"],
              "check": None if story_rec is None else (lambda m, s=story_rec: abs(m - s) < 1e-9),
              "note": f"lag {'growing' if fin['lag_growing'] else 'not growing'}, usage {fin['usage_cores']:.2f}"},
             {"what": f"need {need:g} -> GOMAXPROCS", "story": story_gmp, "model": fin["gomaxprocs"],
              "check": None if story_gmp is None else (lambda m, s=story_gmp: m == s)}]
table3 = compare(rows)
table3

# %% [markdown]
# **Where the model disagrees with the story, and why.** The story's table expects a need of 1.8
# cores to get 2 cores. The upstream recommender adds a 15 % safety margin to the 90th percentile
# (`--recommendation-margin-fraction`, default 0.15) and reports the end of the histogram bucket:
# 1.8 x 1.15 = 2.07 cores before rounding, which the integer-CPU post-processor rounds UP to 3. The
# story's table leaves the margin out. With the model's rules, a need of 1.8 cores gets 2 cores only
# if the margin is below about 10 % (or `maxAllowed = 2`). This is a prediction of the model, not a
# parameter choice: the margin is the VPA's documented default. The 0.8 and 1.2 rows agree.

# %%
fig, ax = plt.subplots(figsize=(7, 3.5))
x = range(len(TABLE3_NEEDS))
ax.bar([i - 0.2 for i in x], [STORY_T3.get(n, (float("nan"),))[0] for n in TABLE3_NEEDS], 0.4, label="story")
ax.bar([i + 0.2 for i in x], [t3_model[n]["request_cores"] for n in TABLE3_NEEDS], 0.4, label="model")
ax.plot(list(x), list(TABLE3_NEEDS), "k_", ms=30, mew=2, label="actual need")
ax.set_xticks(list(x), [f"need {n:g}" for n in TABLE3_NEEDS])
ax.set_ylabel("recommendation [cores]")
ax.set_title("Integer-CPU VPA: recommendation per actual need")
ax.legend()
ax.grid(alpha=0.3, axis="y");

# %% [markdown]
# ## Headline numbers (the golden regression reads this line)

# %%
hl = {"demand_cores": DEMAND}
for name in ("T0", "T1", "T2", "T3"):
    if name in ph:
        hl[f"{name}_request_cores"] = ph[name]["request_cores"]
        hl[f"{name}_gomaxprocs"] = ph[name]["gomaxprocs"]
        hl[f"{name}_event_utilisation"] = event_util.get(name)
hl["T2_ratio_to_story_1.2"] = ph["T2"]["request_cores"] / 1.2 if "T2" in ph else None
for name, fx in data["fixes"].items():
    hl[f"fix_{name}_request_cores"] = fx["final"]["request_cores"]
    hl[f"fix_{name}_lag_growing"] = fx["final"]["lag_growing"]
hl["trap_lag_growing"] = data["final"]["lag_growing"]
for need in TABLE3_NEEDS:
    hl[f"integer_cpu_need_{need:g}_request_cores"] = t3_model[need]["request_cores"]
for limit, m in t1_model.items():
    hl[f"limit_{limit:g}_gomaxprocs"] = m["gomaxprocs"]
    hl[f"limit_{limit:g}_usage_cores"] = m["usage_cores"]
headline(hl);
