"""The audit's fixes: for each flag a change, simulated before and after.

A lab run's container is simulated with its own scenario (its grid's calibrated per-item cost);
an exported or live container with a proxy stream workload whose demand is estimated from its
series (the estimate is stated in the effect). Model parameters from ``cfsim calibrate`` files (a
host's measured costs, a fit) apply to both, as the validation's twins take them. Trapped and
over-threaded containers get an explicit ``GOMAXPROCS = ceil(limit)``; throttling below the limit a
CFS burst; throttling at the limit and headroom the cheapest limit that keeps the service as it is
(:mod:`cfsim.advice.search`), searched from today's limit up for a raise and at or below it for a
cut.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from cfsim.advice.audit.flags import THROTTLED_MIN, Finding, Stats, ceil_gomaxprocs
from cfsim.advice.audit.load import Container
from cfsim.kernel import limits
from cfsim.scenario import Scenario, load_scenario

__all__ = ["proxy_scenario", "demand_estimate", "FixSimulator", "simulate_fixes", "effect_text", "EFFECT_KEYS"]

EFFECT_KEYS = ("cpu_usage_cores", "throttled_ratio", "throughput_per_s", "latency_p99_s", "lag_final_s")


def _cgroup(st: Stats) -> dict[str, Any]:
    """The proxy's ``[cgroup]``: the container's limit at its own CFS period when one was measured
    (``container_spec_cpu_period``), so that a fix or a burst is simulated at that period and not at
    the default 100 ms. A period outside the kernel's [1 ms, 1 s] (``tg_set_cfs_bandwidth``,
    https://github.com/torvalds/linux/blob/master/kernel/sched/core.c) is not a cgroup's and is left
    out. The quota is at least 1 ms whatever the limit: the kernel's minimum, which the kubelet's
    ``MilliCPUToQuota`` writes for a smaller product
    (https://github.com/kubernetes/kubernetes/blob/master/pkg/kubelet/cm/helpers_linux.go)."""
    out: dict[str, Any] = {}
    period = st.period_us
    if period is not None and limits.MIN_PERIOD_US <= period <= limits.MAX_PERIOD_US:
        out["period_us"] = int(period)
    if st.limit is not None:
        p = out.get("period_us", limits.DEFAULT_PERIOD_US)
        out["cpu_limit"] = max(round(st.limit, 3), math.ceil(1000 * limits.MIN_QUOTA_US / p) / 1000)
    return out


def proxy_scenario(c: Container, st: Stats, demand_cores: float, duration_s: float) -> Scenario:
    """A stream workload standing in for an exported container: ``demand_cores`` of 1 ms records, its
    limit at its CFS period (:func:`_cgroup`), GOMAXPROCS (observed, else automaxprocs), and GOGC /
    GOMEMLIMIT where the Go runtime exported them."""
    cpus = max(2, math.ceil(max(st.limit or 0.0, st.gomaxprocs or 0, st.usage_max) + 1e-9) + 1)
    data = {
        "host": {"cpus": int(cpus), "name": "proxy"},
        "cgroup": _cgroup(st),
        "go": {"gomaxprocs": int(st.gomaxprocs) if st.gomaxprocs_observed and st.gomaxprocs else "automaxprocs",
               "live_heap_mb": 16.0, **({"gogc": int(c.go_settings["gogc"])} if "gogc" in c.go_settings else {}),
               **({"gomemlimit_mb": round(c.go_settings["gomemlimit_mb"], 3)} if "gomemlimit_mb" in c.go_settings
                  else {})},
        "workload": {"kind": "stream", "rate_per_s": round(max(demand_cores, 0.01) * 1000.0, 3),
                     "cpu_ms_per_item": 1.0, "workers": max(8, 2 * int(st.gomaxprocs or 1)), "alloc_kb_per_item": 4.0},
        "run": {"duration_s": float(duration_s), "warmup_s": min(2.0, duration_s / 3), "seed": 1},
    }
    return load_scenario(data)


class FixSimulator:
    """Simulations for the fixes, cached; lab runs use their own scenario and grid calibration."""

    def __init__(self, duration_s: float, params: Mapping[str, Any] | None = None):
        self.duration_s = duration_s
        #: model parameters (``section.key`` -> value, and a fit's ``cost_factor``) every fix takes
        self.params: dict[str, Any] = dict(params or {})
        self.norms: dict[Path, Any] = {}   # grid -> its GridNorm (None without calibration runs)

    def grid_norm(self, grid: Path) -> Any:
        """A lab grid's :class:`cfsim.validation.normalise.GridNorm` from its calibration runs, once
        per grid (None without them)."""
        if grid not in self.norms:
            from cfsim.validation.normalise import grid_norm
            from cfsim.validation.twin import find_runs

            try:
                self.norms[grid] = grid_norm(find_runs(grid), self.params or None, gc_priors=False)
            except FileNotFoundError:
                self.norms[grid] = None
        return self.norms[grid]

    def base(self, c: Container, st: Stats, demand_cores: float) -> tuple[Scenario, str]:
        if c.run_dir is not None:
            from cfsim.validation.calibrate import apply_grid, grid_overrides
            from cfsim.validation.twin import run_scenario

            sc = run_scenario(c.run_dir)   # the run's own load profile and length
            norm = self.grid_norm(c.run_dir.parent)
            if norm is None:
                return sc.with_overrides(list(grid_overrides(sc, self.params, 1.0).items())), \
                    "the lab run's scenario (no grid calibration)"
            # the machine's and the GC's speed on the grid's host, as the validation's twins take them
            over = apply_grid(c.run_dir, self.params, norm)
            gc = norm.gc_factor
            return sc.with_overrides(list(over.items())), (
                f"the lab run's scenario (grid cost factor {norm.factor:.3g}"
                + (f", GC factor {gc:.3g})" if gc is not None else ")"))
        from cfsim.validation.normalise import calibration_overrides

        sc = proxy_scenario(c, st, demand_cores, self.duration_s)
        # the proxy's CPU per record comes from the container's own usage: a fit's cost factor
        # (the lab host's speed) does not apply, its runtime and host costs do
        over = list(calibration_overrides(self.params).items())
        return sc.with_overrides(over) if over else sc, \
            f"a proxy stream workload of {demand_cores:.2f} cores demand"

    @staticmethod
    def run(sc: Scenario, over: Sequence[tuple[str, Any]] = ()) -> dict[str, Any]:
        """The summary, reused when an identical scenario was simulated before (:mod:`cfsim.sweep.simcache`)."""
        from cfsim.sweep.simcache import summary_of

        return summary_of(sc.with_overrides(list(over)))


def _fmt(k: str, v: Any) -> str:
    if v is None:
        return "-"
    if k == "throttled_ratio":
        return f"{100 * v:.0f} %"
    if k == "throughput_per_s":
        return f"{v:.4g}/s"
    if k.endswith("_s"):
        return f"{v:.3g} s"
    return f"{v:.3g}"


_NAMES = {"cpu_usage_cores": "usage", "throttled_ratio": "throttled", "throughput_per_s": "throughput",
          "latency_p99_s": "p99", "lag_final_s": "lag"}


def effect_text(before: dict[str, Any], after: dict[str, Any]) -> str:
    parts = []
    for k in EFFECT_KEYS:
        if k in before or k in after:
            b, a = before.get(k), after.get(k)
            if b is None and a is None:
                continue
            parts.append(f"{_NAMES[k]} {_fmt(k, b)} -> {_fmt(k, a)}")
    return ", ".join(parts)


def _impact(before: dict[str, Any], after: dict[str, Any]) -> float:
    gains = [0.0]
    tb, ta = before.get("throughput_per_s"), after.get("throughput_per_s")
    if tb and ta:
        gains.append(ta / tb - 1.0)
    pb, pa = before.get("latency_p99_s"), after.get("latency_p99_s")
    if pb and pa is not None and pb > 0:
        gains.append(1.0 - pa / pb)
    rb, ra = before.get("throttled_ratio"), after.get("throttled_ratio")
    if rb is not None and ra is not None:
        gains.append(rb - ra)
    return max(gains)


def _keep_slos(flag: str, before: dict[str, Any]) -> list:
    """What a limit change must keep: throttling <= 10 %; for a raise, throughput >= 98 % of the
    arrival rate (when the workload has one); for a cut, throughput >= 98 % of today's and p99
    latency within max(1.5 x, +10 ms) of today's."""
    from cfsim.advice.slo import SLO

    slos = [SLO("throttled_ratio", "<=", THROTTLED_MIN)]
    if flag == "headroom":
        if before.get("throughput_per_s"):
            slos.append(SLO("throughput_per_s", ">=", round(0.98 * float(before["throughput_per_s"]), 3)))
        if before.get("latency_p99_s") is not None:
            p = float(before["latency_p99_s"])
            slos.append(SLO("latency_p99_s", "<=", round(max(1.5 * p, p + 0.01), 6)))
    elif before.get("arrival_rate_per_s"):
        slos.append(SLO("throughput_per_s", ">=", round(0.98 * float(before["arrival_rate_per_s"]), 3)))
    return slos


def _cheapest_limit(sc: Scenario, slos: Sequence, kinds: Sequence[str | int], direction: str):
    """The cheapest limit meeting ``slos`` robustly (the scenario carries its calibrated cost;
    the safety margin is the default +10 % per-item CPU), searched on the side of today's limit
    the fix goes: ``"raise"`` from it up to the node, ``"lower"`` up to it. A raise that ended
    below today's limit, or a cut above it, would contradict its own finding, and every limit on
    the other side is a simulation the answer cannot use."""
    from cfsim.advice.search import SearchOptions, Searcher, uncertainty_for

    limit = sc["cgroup.cpu_limit"]
    bounds = {} if limit is None else {"raise": {"min_limit": limit}, "lower": {"max_limit": limit}}[direction]
    s = Searcher(sc, uncertainty_for(sc), SearchOptions(burst=False, gomaxprocs=list(kinds), **bounds))
    return s.search(slos).winner


def demand_estimate(st: Stats, findings: Sequence[Finding]) -> tuple[float, str]:
    """The CPU demand [cores] a proxy workload stands for, and how it was estimated from the series:
    a trapped container's demand fills its limit (capped usage shows none above GOMAXPROCS); one
    throttled at its limit needs its usage plus the throttled seconds per second (an upper bound);
    otherwise the p95 usage."""
    L, G = st.limit, st.gomaxprocs
    if any(f.flag == "trapped" for f in findings):
        return (L if L is not None else float(G or 1) * 1.5,
                "demand assumed to fill the limit (usage capped by GOMAXPROCS shows no demand above it)")
    if any(f.flag == "throttled" and "at its limit" in f.detail for f in findings):
        return (min(float(G or 64), st.usage_mean + (st.throttled_s_per_s or 0.0)),
                "demand estimated as usage + throttled seconds per second (an upper bound)")
    return st.usage_p95, "demand = p95 usage (burstiness below the scrape step is not modelled)"


def simulate_fixes(findings: Sequence[Finding], st: Stats, sim: FixSimulator) -> None:
    """Attach to each finding its fix, the simulated before/after and the impact."""
    if not findings:
        return
    c = findings[0].container
    L, G = st.limit, st.gomaxprocs
    demand, note = demand_estimate(st, findings)
    if c.run_dir is not None:
        note = "the run's own load profile"
    base, how = sim.base(c, st, demand)
    before = sim.run(base)
    from cfsim.advice.memory import MEMORY_FLAGS, memory_fix
    from cfsim.overheads.report import audit_note   # band and coverage of the simulated container
    cover = audit_note(base, before)
    for f in findings:
        over: list[tuple[str, Any]]
        if f.flag in MEMORY_FLAGS:   # a memory setting, from the evidence (cfsim.advice.memory)
            f.fix, f.impact = memory_fix(f.flag, c.memory_summary())
            # an export does not say the heap's size; a lab run does, but the fix is the VPA's and
            # automemlimit's rule read from the evidence either way
            f.before, f.effect = before, ("memory: not simulated from the export (the heap's size is unknown)"
                                          if c.run_dir is None else "memory: not simulated (sized from the evidence)")
            continue
        if before.get("oom_kills"):
            # a CPU fix of a container the kernel kills for memory changes nothing the simulation
            # can show (it does no work after the kill): say so instead of an effect of zeros
            f.fix = (f"none simulated: the simulated container is OOM-killed ({before['oom_kills']} kill(s) in "
                     f"{base['run.duration_s']:g} s); size its memory first")
            f.before, f.after, f.impact = before, {}, 0.0
            f.effect = f"not simulated [simulated on {how}]"
            continue
        if f.flag == "trapped":
            newg = ceil_gomaxprocs(L if L is not None else G * 1.5)
            over = [("go.gomaxprocs", newg)]
            f.fix = f"GOMAXPROCS={newg} (= ceil(limit); or the go1.25 runtime default) at the same limit"
        elif f.flag == "gomaxprocs_above_limit" or (f.flag == "throttled" and "more threads" in f.detail
                                                   and ceil_gomaxprocs(L) != G):
            newg = ceil_gomaxprocs(L)
            over = [("go.gomaxprocs", newg)]
            f.fix = f"GOMAXPROCS={newg} (= ceil(limit)) at the same limit"
        elif f.flag == "throttled" and "at its limit" not in f.detail:
            quota_us = int(L * base["cgroup.period_us"])
            over = [("cgroup.burst_us", quota_us)]
            f.fix = f"CFS burst {quota_us / 1000:g} ms (cpu.max.burst = quota) at the same limit"
        else:  # throttled at the limit, or headroom: the cheapest adequate limit
            slos = _keep_slos(f.flag, before)
            verb = "lower" if f.flag == "headroom" else "raise"
            win = _cheapest_limit(base, slos, [base["go.gomaxprocs"], "ceil"], verb)
            texts = ", ".join(x.text for x in slos)
            if win is None:
                f.fix = (f"no limit at or below today's {L:g} cores keeps {texts}" if verb == "lower" and L is not None
                         else f"no limit up to {base['host.cpus']} cores keeps {texts}")
                f.before, f.after = before, {}
                f.effect = "none found [simulated on " + how + "]"
                f.impact = 0.0
                continue
            over = list(win.candidate.overrides(base))
            change = (f"keep the limit at {win.candidate.limit:g} cores" if L is not None and win.candidate.limit == L
                      else f"{verb} the limit to {win.candidate.limit:g} cores")
            f.fix = f"{change} ({win.candidate.describe()}; cheapest keeping {texts})"
        f.fix_overrides = over
        f.after = sim.run(base, over)
        f.before = before
        if f.flag == "trapped" and (f.after.get("throttled_ratio") or 0.0) >= THROTTLED_MIN:
            # the trap hid demand above the limit too: say what limit that demand needs
            win = _cheapest_limit(base, _keep_slos("throttled", before), ["ceil", "go1.25"], "raise")
            f.fix += ("; demand is above the limit as well: " + (
                f"the cheapest adequate configuration is {win.candidate.describe()}" if win is not None
                else f"no limit up to {base['host.cpus']} cores is adequate"))
        f.effect = effect_text(before, f.after) + f" [simulated on {how}; {note}]"
        if cover:
            f.effect += f" [{cover}]"
        if f.flag == "headroom":
            saved = (L or 0.0) - (f.after.get("cpu_limit_cores") or L or 0.0)
            f.effect = f"gives back {saved:.2f} cores; " + f.effect
            f.impact = 0.5 * saved / L if L else 0.0
        else:
            f.impact = _impact(before, f.after)


