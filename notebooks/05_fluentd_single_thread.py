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
# 05 - The single-threaded pipeline (Intel Granulate, Fluentd): one usable core, before and after
# cutting the per-record cost.
import os

SMALL = os.environ.get("CFSIM_SMALL", "") not in ("", "0")
SCENARIO = "fluentd-single-thread"
OVERRIDES: list[str] = []
RATE_PER_S = 50_000.0  # per server: 1M metrics/s over 20 c5.large servers (the story)
COST_AFTER_MS = 0.00069  # per-record CPU after the fix; derived in the scenario file from the story's profile
RUN_S = 5.0 if SMALL else 60.0
SATURATION_FACTORS = (0.8, 1.0, 1.2) if SMALL else (0.5, 0.7, 0.8, 0.9, 0.95, 1.0, 1.05, 1.1, 1.25, 1.5)
FLEET_RATE_PER_S = 1_000_000.0
TARGET_UTILISATION = 0.8  # plan instances so the one core runs at most this busy

# %% [markdown]
# # A process that can use one core: Fluentd before and after the fix
#
# **Story** (Intel Granulate, *The Scale Trap: How We Reduced CPU Utilization by 80 %*,
# <https://granulate.io/blog/how-we-reduced-cpu-utilization/>): Go TCP servers write metrics to a file; Fluentd
# tails it (`in_tail` cannot use several processes: "Fluentd will run over one core") and writes
# batches to TimescaleDB. A continuous profile on the c5.large servers (2 vCPUs) showed **78.55 %** of
# CPU samples in Fluentd's Ruby frames, mostly parsing every field in the output plugin. After the
# refactor, **13.61 %**. The fleet: 1M metrics/s on 20 c5.large servers.
#
# **Model**: the built-in `fluentd-single-thread`: one thread, records at 50,000/s per server, 16 us of
# CPU per record before (our choice, made to match the story: it gives the talk title's 80 % of the
# core, so that 80 % is not a prediction) and 0.69 us after. The
# after-cost is **derived from the story's two profile shares** (scenario file: the Go server's CPU is
# assumed unchanged, so Fluentd's CPU fell to (0.1361 x 0.2145 / 0.8639) / 0.7855 = 4.3 % of before).
# So the 78.55 % -> 13.61 % comparison below is a consistency check of that arithmetic, not a
# prediction. What the model adds is what a single thread does at these loads - how close to
# saturation it ran, the queueing delay, and the capacity per instance before and after.

# %%
import math

import matplotlib.pyplot as plt
import pandas as pd

import cfsim
from cfsim.scenario import load_scenario

from _nbutil import compare, headline

base = load_scenario(SCENARIO, OVERRIDES)
COST_BEFORE_MS = base["workload.cpu_ms_per_item"]


def run(cost_ms: float, rate: float, seconds: float = RUN_S) -> dict:
    s = cfsim.simulate(base, [f"workload.cpu_ms_per_item={cost_ms}", f"workload.rate_per_s={rate}",
                              f"run.duration_s={seconds}", f"run.warmup_s={min(2.0, seconds / 4)}"]).summary
    return {"cost_us": 1e3 * cost_ms, "rate_per_s": rate, "throughput_per_s": s["throughput_per_s"],
            "cpu_cores": s["cpu_usage_cores"], "latency_p50_ms": 1e3 * s["latency_p50_s"],
            "latency_p99_ms": 1e3 * s["latency_p99_s"], "backlog_final": s["backlog_final"],
            "lag_final_s": s["lag_final_s"]}


before, after = run(COST_BEFORE_MS, RATE_PER_S), run(COST_AFTER_MS, RATE_PER_S)
pd.DataFrame([before, after], index=["before", "after"])

# %% [markdown]
# ## The story's numbers beside the model's
#
# The profile shares are Fluentd's CPU over the server's sampled CPU (Fluentd + the Go TCP server).
# The Go server's CPU is not simulated here; it is taken from the "before" profile (21.45 % of samples
# when Fluentd had 78.55 %) and held constant, as the scenario's derivation assumes.

# %%
go_server_cores = before["cpu_cores"] * (1 - 0.7855) / 0.7855
share_before = before["cpu_cores"] / (before["cpu_cores"] + go_server_cores)
share_after = after["cpu_cores"] / (after["cpu_cores"] + go_server_cores)
table = compare([
    {"what": "Fluentd share of profiled CPU, before", "story": 0.7855, "model": share_before,
     "note": "equal by construction (the Go server's CPU is derived from this share)"},
    {"what": "Fluentd share of profiled CPU, after", "story": 0.1361, "model": share_after,
     "note": "consistency check: the after-cost was derived from this share"},
    {"what": "Fluentd CPU after / before", "story": None, "model": after["cpu_cores"] / before["cpu_cores"]},
    {"what": "Fluentd's one core busy, before (talk title: 'from 80 %')", "story": 0.80, "model": before["cpu_cores"],
     "note": "not a prediction: 16 us per record was chosen to give this 80 %"},
    {"what": "Server CPU after / before (talk title: '80 % to 15 %')", "story": 0.15 / 0.80,
     "model": (after["cpu_cores"] + go_server_cores) / (before["cpu_cores"] + go_server_cores),
     "note": "the title's reduction vs the model's whole-server reduction (Go server held constant)"},
    {"what": "throughput kept at 50k/s, before", "story": 1.0, "model": before["throughput_per_s"] / RATE_PER_S},
])
table

# %%
fig, ax = plt.subplots(figsize=(7, 3.5))
x = range(2)
ax.bar([i - 0.2 for i in x], [0.7855, 0.1361], 0.4, color="0.6", label="story (profile)")
ax.bar([i + 0.2 for i in x], [share_before, share_after], 0.4, color="C0", label="model")
for i, (st, mo) in enumerate(((0.7855, share_before), (0.1361, share_after))):
    ax.annotate(f"ratio {mo / st:.3f}", (i + 0.2, mo), xytext=(0, 3), textcoords="offset points", ha="center", fontsize=8)
ax.set_xticks(list(x), ["before the fix", "after the fix"])
ax.set_ylabel("Fluentd share of server CPU")
ax.legend()
ax.grid(alpha=0.3, axis="y");

# %% [markdown]
# The talk title's "80 % to 15 %" is matched by the profile shares, not by the whole server's CPU:
# holding the Go server constant, the server's CPU falls to about a quarter (ratio column), because the
# Go server's 21 % remains. The talk does not separate these; we show both.

# %% [markdown]
# ## Saturation: what one core can carry
#
# The same thread at rising arrival rates, before and after. A single-threaded consumer has a hard
# ceiling of 1 / (CPU per record) records per second; near it, queueing delay grows without bound.

# %%
sat = []
for label, cost in (("before", COST_BEFORE_MS), ("after", COST_AFTER_MS)):
    cap = 1.0 / (cost / 1000)
    for f in SATURATION_FACTORS:
        r = run(cost, cap * f)
        sat.append({"case": label, "load / capacity": f, **r})
sat = pd.DataFrame(sat)
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
for i, (label, sub) in enumerate(sat.groupby("case", sort=False)):
    axes[0].plot(sub["rate_per_s"], sub["throughput_per_s"], "o-", color=f"C{i}", label=label)
    axes[1].semilogy(sub["load / capacity"], sub["latency_p99_ms"], "o-", color=f"C{i}", label=label)
axes[0].axvline(RATE_PER_S, color="k", ls=":", lw=1, label="story: 50k/s per server")
axes[0].set_xscale("log")
axes[0].set_yscale("log")
axes[0].set_xlabel("arrival rate [records/s]")
axes[0].set_ylabel("throughput [records/s]")
axes[1].set_xlabel("arrival rate / single-core capacity")
axes[1].set_ylabel("p99 latency [ms]")
for ax in axes:
    ax.grid(alpha=0.3, which="both")
    ax.legend()
fig.tight_layout()
sat[["case", "load / capacity", "rate_per_s", "throughput_per_s", "cpu_cores", "latency_p99_ms", "backlog_final"]]

# %% [markdown]
# ## Capacity per instance and the fleet that follows
#
# Per c5.large (2 vCPUs): Fluentd can use one of them; the Go TCP server's CPU per record is taken from
# the before-profile (constant). Capacity = the lower of Fluentd's one-core ceiling and what the two
# vCPUs can carry for both, at `TARGET_UTILISATION`.

# %%
def measured_capacity(case: str) -> float:
    sub = sat[sat["case"] == case]
    return float(sub["throughput_per_s"].max())


go_cost_s = go_server_cores / RATE_PER_S
cap_rows = []
for label, cost in (("before", COST_BEFORE_MS), ("after", COST_AFTER_MS)):
    fluentd_cap = measured_capacity(label)  # the event engine's plateau (1 / cost when saturated)
    vcpu_cap = 2.0 / (go_cost_s + cost / 1000)
    per_instance = TARGET_UTILISATION * min(fluentd_cap, vcpu_cap)
    cap_rows.append({"case": label, "CPU per record, Fluentd [us]": 1e3 * cost, "Go server [us]": 1e6 * go_cost_s,
                     "Fluentd ceiling (one core) [rec/s]": fluentd_cap, "2-vCPU ceiling [rec/s]": vcpu_cap,
                     "bound by": "Fluentd's one core" if fluentd_cap < vcpu_cap else "the 2 vCPUs",
                     f"capacity at {TARGET_UTILISATION:.0%} [rec/s]": per_instance,
                     "instances for 1M/s": math.ceil(FLEET_RATE_PER_S / per_instance)})
capacity = pd.DataFrame(cap_rows)
capacity

# %%
fleet = compare([
    {"what": "instances for 1M metrics/s, before", "story": 20, "model": cap_rows[0]["instances for 1M/s"],
     "note": "story: 20 c5.large (stated after the fix; the fleet size before is not given)"},
    {"what": "instances for 1M metrics/s, after", "story": 20, "model": cap_rows[1]["instances for 1M/s"],
     "note": "story's fleet is 20; the model says far fewer would carry the load once Fluentd is cheap"},
])
fleet

# %% [markdown]
# **Where the model and the story differ.** The story reports 20 servers for 1M metrics/s *after* the
# fix. With the model's arithmetic the before-case needs about 20 instances at 80 % of Fluentd's core
# (this is what 16 us per record means: 50k/s per server is 80 % busy), but after the fix the same fleet
# is far from any CPU bound - the servers are then sized by something the story does not quantify
# (network, the Go server's memory, TimescaleDB's ingest, headroom for traffic growth). The model does
# not know those, so its instance count after the fix is a CPU lower bound, not a plan.

# %% [markdown]
# ## Headline numbers (the golden regression reads this line)

# %%
headline({"cpu_before_cores": before["cpu_cores"], "cpu_after_cores": after["cpu_cores"],
          "share_before": share_before, "share_after": share_after,
          "share_after_ratio_to_story": share_after / 0.1361,
          "p99_ms_before": before["latency_p99_ms"], "p99_ms_after": after["latency_p99_ms"],
          "capacity_before_per_s": cap_rows[0]["Fluentd ceiling (one core) [rec/s]"],
          "capacity_after_per_s": cap_rows[1]["Fluentd ceiling (one core) [rec/s]"],
          "instances_before": cap_rows[0]["instances for 1M/s"], "instances_after": cap_rows[1]["instances for 1M/s"]});
