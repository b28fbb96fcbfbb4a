"""``recommend``: the search for all SLOs, each SLO alone, the current configuration and the peers.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from cfsim.advice.peers import PeerChoice, peer_choices
from cfsim.advice.search import Evaluation, SearchOptions, SearchResult, Searcher, Uncertainty, uncertainty_for
from cfsim.advice.slo import SLO
from cfsim.goruntime.gomaxprocs import version_tuple
from cfsim.scenario import Scenario

__all__ = ["Report", "recommend", "from_lab_run", "observed_history", "format_report", "horizon_warnings",
           "LiveTarget", "live_targets", "live_scenario", "kubernetes_answer"]


@dataclass
class Report:
    scenario: Scenario
    slos: list[SLO]
    uncertainty: Uncertainty
    current: Evaluation
    result: SearchResult
    slo_costs: dict[str, Evaluation | None]
    peers: list[PeerChoice] = field(default_factory=list)
    simulations: int = 0
    wall_s: float = 0.0
    source: str = ""
    warnings: list[str] = field(default_factory=list)
    peer_history: str = "simulated"
    history: Any = None   # the usage history the peers read (t_s, cumulative usage), when they ran
    memory: dict[str, Any] | None = None   # cfsim.advice.memory: GOGC/GOMEMLIMIT and memory request/limit
    searched_up_to_cores: float | None = None   # the largest limit the search tried

    def as_dict(self) -> dict[str, Any]:
        sc = self.scenario
        return {
            "source": self.source or sc.source,
            "workload": sc["workload.kind"], "host_cpus": sc["host.cpus"],
            "duration_s": sc["run.duration_s"], "seed": sc["run.seed"],
            "slos": [s.text for s in self.slos],
            "uncertainty": self.uncertainty.description,
            "current": {**self.current.as_dict(self.slos), "cpu_limit_cores": sc["cgroup.cpu_limit"],
                        "limit_schedule": sc["cgroup.limit_schedule"], "meets_all": self.current.met},
            "recommendation": self.result.winner.as_dict(self.slos) if self.result.winner else None,
            "runner_up": self.result.runner_up.as_dict(self.slos) if self.result.runner_up else None,
            "slo_costs": {k: (None if e is None else {"cpu_limit_cores": e.candidate.limit,
                                                      "gomaxprocs_policy": e.candidate.gomaxprocs,
                                                      "gomaxprocs": e.gomaxprocs, "burst_us": e.candidate.burst_us})
                          for k, e in self.slo_costs.items()},
            "peers": [p.as_dict(self.slos) for p in self.peers], "peer_history": self.peer_history,
            "simulations": self.simulations, "wall_s": self.wall_s, "warnings": self.warnings,
            "memory": self.memory, "searched_up_to_cores": self.searched_up_to_cores,
        }


def recommend(scenario: Scenario, slos: Sequence[SLO], uncertainty: Uncertainty | None = None,
              options: SearchOptions | None = None, peers: bool = True, vpa_rounds: int = 3,
              source: str = "", history=None) -> Report:
    """Search the cheapest robust configuration, the cost of each SLO alone, and the peers' choices.

    The peers read ``history`` (``t_s`` from the run's start and the cumulative
    ``container_cpu_usage_seconds_total``, e.g. :func:`observed_history` of a lab run) or, by
    default, the usage of the current configuration simulated.
    """
    wall0 = time.perf_counter()
    s = Searcher(scenario, uncertainty, options)
    slos = list(slos)
    current = s.current(slos)
    result = s.search(slos)
    costs: dict[str, Evaluation | None] = {}
    for slo in slos:
        costs[slo.text] = result.winner if len(slos) == 1 else s.search([slo]).winner
    peer_list: list[PeerChoice] = []
    hist = history
    if peers:
        hist = history if history is not None else s.run_full()["_series"]
        peer_list = peer_choices(s.scenario, slos, s.run_full, hist, vpa_rounds)
    warnings = horizon_warnings(s.scenario, slos)
    if peers and not peer_list:
        # peer_choices reads at least two 1 s windows of usage after the warm-up: say so, not nothing
        warnings.append(f"no VPA/krr comparison: the peers need at least 2 s of usage after the warm-up "
                        f"({s.scenario['run.warmup_s']:g} s of {s.scenario['run.duration_s']:g} s simulated); "
                        f"simulate longer (--duration)")
    memory = _memory_advice(s.scenario, result)
    return Report(s.scenario, slos, s.uncertainty, current, result, costs, peer_list, s.simulations,
                  time.perf_counter() - wall0, source, warnings,
                  "observed" if history is not None else "simulated", hist, memory, s.hi_m / 1000)


def _memory_advice(scenario: Scenario, result: SearchResult) -> dict[str, Any] | None:
    """The memory side at the recommended CPU configuration (:func:`cfsim.advice.memory.advise_memory`)."""
    from cfsim.advice.memory import advise_memory

    sc = scenario
    if result.winner is not None:
        sc = scenario.with_overrides(result.winner.candidate.overrides(scenario))
    advice = advise_memory(sc)
    return None if advice is None else advice.as_dict()


def horizon_warnings(scenario: Scenario, slos: Sequence[SLO]) -> list[str]:
    """SLOs a run of this length cannot miss: lag and latency never exceed the time simulated."""
    out = []
    dur = float(scenario["run.duration_s"])
    for slo in slos:
        if (slo.key == "lag_final_s" or slo.key.startswith("latency_")) and slo.upper_bound and slo.threshold >= dur:
            out.append(f"SLO {slo.text} cannot be missed in a {dur:g} s run (lag and latency are at most the "
                       f"time simulated); simulate longer, e.g. --duration {max(2 * slo.threshold, 60):g}")
    return out


def from_lab_run(run_dir: str | Path, params: str | Path | Sequence[str | Path] | None = None,
                 overrides: Sequence[str] = ()) -> tuple[Scenario, Uncertainty, str]:
    """A lab run's resolved scenario and its grid's calibration (``grid_norm`` cost factor from
    the grid's ``calib-*`` runs, times a params file's ``cost_factor`` when given)."""
    from cfsim.validation.normalise import grid_norm
    from cfsim.validation.twin import find_runs, is_run_folder, run_scenario

    run = Path(run_dir)
    if not is_run_folder(run):
        raise FileNotFoundError(f"{run}: not a lab run folder (needs manifest.json.gz or manifest.json, "
                                f"summary.json, scenario.toml)")
    sc = run_scenario(run)
    if overrides:
        sc = sc.with_overrides(list(overrides))
    try:
        norm = grid_norm(find_runs(run.parent), gc_priors=False)
        factor, gc_factor, memory_path = norm.factor, norm.gc_factor, norm.memory_path
        heap_mb, sysmon = norm.calibration_heap_mb, norm.sysmon
        note = (f"grid {run.parent.name}: cost factor {norm.factor:.3g}"
                + (f", GC factor {norm.gc_factor:.3g}" if norm.gc_factor is not None else "")
                + (", memory path " + ", ".join(f"{k} {v:g}" for k, v in sorted(memory_path.items()))
                   if memory_path else "")
                + (", sysmon " + ", ".join(f"{k} {v:g}" for k, v in sorted(sysmon.items())) if sysmon else "")
                + f" from {len(norm.factors)} calibration run(s)" if norm.factors else
                f"grid {run.parent.name}: no calibration runs, cost factor 1")
    except FileNotFoundError:
        factor, gc_factor, memory_path, heap_mb, sysmon, note = 1.0, None, None, None, None, "no grid calibration"
    keep = [o.split("=", 1)[0].strip() for o in overrides]
    unc = uncertainty_for(sc, params, factor, gc_factor=gc_factor, memory_path=memory_path, keep=keep,
                          calibration_heap_mb=heap_mb, sysmon=sysmon)
    return sc, Uncertainty(unc.nominal, unc.pessimistic, f"{note}; {unc.description}"), str(run)


def observed_history(run_dir: str | Path):
    """A lab run's real usage counter as a history for the peers: ``t_s`` since the run's start."""
    import pandas as pd

    from cfsim.io import read_lab_run

    frames, meta = read_lab_run(run_dir)
    f = frames.get("container_cpu_usage_seconds_total")
    if f is None or not len(f):
        raise FileNotFoundError(f"{run_dir}: no container_cpu_usage_seconds_total export")
    times = (meta.get("manifest") or {}).get("times") or {}
    ts = f["timestamp"].astype("int64").to_numpy() / 1e9
    t0 = float(times.get("start_unix_s", ts[0]))
    v = f["value"].to_numpy(dtype=float)
    keep = ts >= t0 - 1e-9
    return pd.DataFrame({"t_s": ts[keep] - t0, "container_cpu_usage_seconds_total": v[keep] - v[keep][0]})


# ---------------------------------------------------------------------------------------------
# a live cluster: one target per workload container, a proxy scenario, Kubernetes objects


@dataclass
class LiveTarget:
    """One container of one workload, as a live Prometheus shows it (all its pods)."""

    namespace: str
    workload: tuple[str, str] | None
    container: str
    pods: list[str]
    representative: Any          # the pod's Container with the highest p95 usage
    stats: Any
    findings: list[Any]
    request_m: int | None
    history: Any                 # t_s since the first sample, mean cumulative usage per pod

    @property
    def name(self) -> str:
        w = f"{self.workload[0].lower()}/{self.workload[1]}" if self.workload else self.pods[0]
        return f"{self.namespace}/{w}/{self.container}"


def _history(containers: Sequence[Any]):
    """The peers' usage history of a workload container: the mean over its pods of the cumulative
    usage [core-seconds] (integrated from the per-step usage) on the first pod's timestamps."""
    import numpy as np
    import pandas as pd

    t0 = min(float(c.t[0]) for c in containers)
    grid = np.asarray(containers[0].t, dtype=float)
    cum = []
    for c in containers:
        u = c.step_usage if c.step_usage is not None else c.usage
        u = np.nan_to_num(np.asarray(u, dtype=float))
        dt = np.diff(np.asarray(c.t, dtype=float), prepend=float(c.t[0]))
        cum.append(np.interp(grid, c.t, np.cumsum(u * dt)))
    return pd.DataFrame({"t_s": grid - t0, "container_cpu_usage_seconds_total": np.mean(cum, axis=0)})


def live_targets(containers: Sequence[Any]) -> list[LiveTarget]:
    """Group live containers per workload container (owner from kube-state-metrics, else the pod)."""
    from cfsim.advice.audit.flags import analyse

    groups: dict[tuple, list[Any]] = {}
    for c in containers:
        ident = c.workload if c.workload is not None else ("Pod", c.key[1])
        groups.setdefault((c.key[0], ident, c.key[2]), []).append(c)
    out = []
    for (ns, ident, cname), cs in sorted(groups.items()):
        analysed = [(c, *analyse(c)) for c in cs]
        rep, st, findings = max(analysed, key=lambda x: x[1].usage_p95)
        reqs = [c.request for c in cs if c.request is not None]
        out.append(LiveTarget(ns, None if ident[0] == "Pod" else ident, cname, sorted(c.key[1] for c in cs), rep,
                              st, findings, int(round(max(reqs) * 1000)) if reqs else None, _history(cs)))
    return out


def live_scenario(target: LiveTarget, duration_s: float) -> tuple[Scenario, str]:
    """A proxy stream workload for the target (:func:`cfsim.advice.audit.fixes.proxy_scenario`) and how
    its demand was estimated from the series."""
    from cfsim.advice.audit.fixes import demand_estimate, proxy_scenario

    demand, note = demand_estimate(target.stats, target.findings)
    return proxy_scenario(target.representative, target.stats, demand, duration_s), \
        f"a proxy stream workload of {demand:.2f} cores ({note})"


def kubernetes_answer(rep: Report, container: str, workload: tuple[str, str] | None, namespace: str | None,
                      request_now_m: int | None = None) -> dict[str, Any]:
    """The recommendation as Kubernetes objects: the patch (limit, request, GOMAXPROCS env) with its
    notes and the ``kubectl patch`` line, and the stock VPA's status block for the usage history."""
    from cfsim.advice.kubernetes import change_from_overrides, patch_command, strategic_patch, vpa_status
    from cfsim.advice.peers import _window_for, usage_windows, vpa_choice
    from cfsim.autoscalers.vpa_recommender import Recommendation

    status, vpa_target_m = None, None
    if rep.history is not None:
        t0 = float(rep.scenario["run.warmup_s"]) if rep.peer_history == "simulated" else 0.0
        w = _window_for(rep.history, t0, float(rep.scenario["vpa.metrics_window_s"]))
        points = usage_windows(rep.history, w, t0)
        if len(points) >= 2:
            v = vpa_choice(points, rep.scenario)
            vpa_target_m = v["target_m"]
            status = vpa_status({container: Recommendation(v["target_m"], v["lower_bound_m"], v["upper_bound_m"],
                                                           v["uncapped_target_m"])})
    out: dict[str, Any] = {"container": container, "workload": None if workload is None else
                           {"kind": workload[0], "name": workload[1]}, "namespace": namespace,
                           "vpa_status": status, "patch": None, "notes": [], "command": None}
    # a CFS burst is not in the Kubernetes API: the patch carries the cheapest answer without one
    plain = [e for name, e in rep.result.series.items() if e is not None and not name.endswith("+burst")]
    w = min(plain, key=lambda e: e.candidate.limit_m) if plain else None
    if w is not None:
        # the "host" policy on a Go whose own default is container-aware (>= 1.25, go.mod 'go 1.25'):
        # the pod gets what was simulated only through the env var
        modern = version_tuple(rep.scenario["go.version"]) >= (1, 25)
        ch = change_from_overrides(container, w.candidate.overrides(rep.scenario), request_now_m, vpa_target_m,
                                   host_env=w.gomaxprocs if modern and w.candidate.gomaxprocs == "host" else None)
        win = rep.result.winner
        if win is not None and win.candidate.burst_us and win.candidate.limit_m < w.candidate.limit_m:
            ch.notes.append(f"with a CFS burst (not settable through the Kubernetes API) {win.candidate.describe()} "
                            f"would do; this patch is the cheapest answer without one")
        out["patch"] = strategic_patch(workload, namespace, [ch])
        out["notes"] = ch.notes
        out["command"] = patch_command(workload, namespace)
        out["configuration"] = w.candidate.describe()
    return out


# ---------------------------------------------------------------------------------------------
# text output


def _num(x: Any, fmt: str = ".3g") -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return format(x, fmt)
    return str(x)


def _outcome(summary: dict[str, Any]) -> str:
    thr = summary.get("throttled_ratio")
    parts = [f"usage {_num(summary.get('cpu_usage_cores'))} cores",
             f"throttled {'-' if thr is None else _num(100 * thr, '.0f')} %"]
    if summary.get("throughput_per_s") is not None:
        parts.append(f"throughput {_num(summary.get('throughput_per_s'), '.4g')}/s")
    if "latency_p99_s" in summary:
        parts.append(f"p99 {_num(summary.get('latency_p99_s'))} s")
    if "lag_final_s" in summary:
        parts.append(f"lag {_num(summary.get('lag_final_s'))} s")
    return ", ".join(parts)


def _misses(slos: Sequence[SLO], summary: dict[str, Any]) -> str:
    bad = [s.text for s in slos if not s.met(summary)]
    return "meets all SLOs" if not bad else "misses " + ", ".join(bad)


def _config(e: Evaluation) -> str:
    return f"{e.candidate.describe()} (GOMAXPROCS {e.gomaxprocs})"


def format_report(rep: Report) -> str:
    sc = rep.scenario
    lines = [f"scenario: {rep.source or sc.source} ({sc['workload.kind']}, {sc['host.cpus']} CPUs, "
             f"{sc['run.duration_s']:g} s simulated, seed {sc['run.seed']})",
             f"SLOs: {', '.join(s.text for s in rep.slos)}",
             f"safety margin: {rep.uncertainty.description}"]
    cur = rep.current
    lim = sc["cgroup.cpu_limit"]
    sched = " (with its limit schedule)" if sc["cgroup.limit_schedule"] else ""
    for w in rep.warnings:
        lines.append(f"warning: {w}")
    lim_text = "no limit" if lim is None else f"limit {_num(lim)} cores"
    lines.append(f"current:     {lim_text}{sched}, {sc['go.gomaxprocs']} (GOMAXPROCS {cur.gomaxprocs})"
                 f" -> {_outcome(cur.summary)}; {_misses(rep.slos, cur.summary)}")
    w, r = rep.result.winner, rep.result.runner_up
    up_to = rep.searched_up_to_cores if rep.searched_up_to_cores is not None else sc["host.cpus"]
    if w is None:
        lines.append(f"recommend:   nothing up to {_num(up_to)} cores meets every SLO robustly")
    else:
        lines.append(f"recommend:   {_config(w)} -> {_outcome(w.summary)}")
        if w.pessimistic is not None:
            lines.append(f"             at the pessimistic parameters -> {_outcome(w.pessimistic)}")
    if r is not None:
        lines.append(f"runner-up:   {_config(r)} -> {_outcome(r.summary)}")
    lines.append("cost of each SLO (cheapest robust limit meeting it alone):")
    for k, e in rep.slo_costs.items():
        lines.append(f"  {k:<28} " + (f"not met up to {_num(up_to)} cores" if e is None else _config(e)))
    if rep.peers:
        lines.append(f"peers ({rep.peer_history} usage history; each choice simulated with GOMAXPROCS policy "
                     f"{sc['go.gomaxprocs']}):")
        for p in rep.peers:
            lim_s = "no limit" if p.limit_cores is None else f"limit {p.limit_cores:g}"
            lines.append(f"  {p.name:<17} request {p.request_cores:g}, {lim_s} (GOMAXPROCS {_num(p.gomaxprocs)})"
                         f" -> {_outcome(p.summary)}; {_misses(rep.slos, p.summary)}")
            rounds = p.extra.get("rounds") if p.extra else None
            if rounds and len(rounds) > 1:
                steps = " -> ".join(f"{x['request_cores']:g}" for x in rounds)
                lines.append(f"  {'':<17} re-applied to its own usage: request {steps} cores")
    if rep.memory:
        m = rep.memory
        soft = f"GOMEMLIMIT {m['gomemlimit_mb']:g} MiB ({m['gomemlimit_policy']})" if m["gomemlimit_mb"] else \
            "no GOMEMLIMIT"
        lines.append(f"memory:      request = limit = {m['memory_limit_mb']:g} MiB, GOGC "
                     f"{'off' if m['gogc'] < 0 else m['gogc']}, {soft}")
        for f in m["flags_now"]:
            lines.append(f"  now: {f['flag']}: {f['evidence']}")
    lines.append(f"simulations: {rep.simulations} ({rep.wall_s:.1f} s)")
    return "\n".join(lines)
