"""Audit containers: flag, show the evidence, simulate the fix, answer in Kubernetes terms.

Input: a folder of Prometheus ``/api/v1/query_range`` JSON exports (any file names; each file may
hold several metrics), ``cfsim lab`` run folders (a run, a grid or a tree of grids), or a live
Prometheus. The parts, one module each:

* :mod:`~cfsim.advice.audit.load`: the input as :class:`Container` series;
* :mod:`~cfsim.advice.audit.flags`: statistics and flags (trapped, throttled,
  gomaxprocs_above_limit, headroom) with their evidence;
* :mod:`~cfsim.advice.audit.fixes`: a fix per flag, simulated before and after;
* :mod:`~cfsim.advice.audit.report`: the ranked table, markdown, HTML with plots, JSON;

and here :func:`audit` (all of it) with :class:`AuditResult`, whose :meth:`AuditResult.workloads`
groups the findings per workload container into a VPA status block (the stock recommender replayed
on the observed usage) and a strategic-merge patch.
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from cfsim.advice.audit.fixes import FixSimulator, simulate_fixes
from cfsim.advice.audit.flags import Finding, Stats, analyse
from cfsim.advice.audit.load import Container, Key, containers_from_frame, load_containers, load_live_containers
from cfsim.advice.audit.report import summary_json, write_report

__all__ = ["Container", "Finding", "Stats", "AuditResult", "WorkloadAnswer", "load_containers",
           "load_live_containers", "containers_from_frame", "analyse", "audit", "write_report", "summary_json",
           "evidence_severity"]


@dataclass
class WorkloadAnswer:
    """One container of one workload (all its pods): the VPA status block and the patch."""

    namespace: str
    workload: tuple[str, str] | None
    container: str
    pods: list[str]
    flags: list[str]
    vpa_status: dict[str, Any] | None
    vpa_now: dict[str, Any] | None
    change: Any  # ContainerChange
    workload_source: str = ""

    @property
    def name(self) -> str:
        w = f"{self.workload[0].lower()}/{self.workload[1]}" if self.workload else "/".join(self.pods[:1])
        return f"{self.namespace}/{w}/{self.container}"


@dataclass
class AuditResult:
    containers: list[Container]
    stats: dict[Key, Stats]
    findings: list[Finding]
    meta: dict[str, Any] = field(default_factory=dict)
    #: simulations run and reused, and on what (not part of the answer: it varies with the workers)
    sim_stats: dict[str, Any] = field(default_factory=dict, compare=False)

    def table(self) -> pd.DataFrame:
        rows = []
        for rank, f in enumerate(self.findings, 1):
            rows.append({"rank": rank, **f.row(self.stats[f.container.key])})
        cols = ["rank", "namespace", "pod", "container", "flag", "detail", "limit_cores", "request_cores",
                "gomaxprocs", "usage_p50_cores", "usage_p95_cores", "throttled_ratio", "evidence", "series", "fix",
                "effect", "impact", "source"]
        return pd.DataFrame(rows, columns=cols)

    def flags_by_container(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {c.name: [] for c in self.containers}
        for f in self.findings:
            out[f.container.name].append(f.flag)
        return out

    def workloads(self) -> list[WorkloadAnswer]:
        """Per workload container: the stock VPA's status block for all its pods' observed usage, and
        the patch carrying the fixes (the largest limit and GOMAXPROCS its pods' fixes ask for)."""
        from cfsim.advice.kubernetes import ContainerChange, change_from_overrides, vpa_status
        from cfsim.autoscalers.vpa_recommender import Recommendation, replay

        groups: dict[tuple, list[Container]] = {}
        for c in self.containers:
            ident = c.workload if c.workload is not None else ("Pod", c.key[1])
            groups.setdefault((c.key[0], ident, c.key[2]), []).append(c)
        out = []
        for (ns, ident, cname), cs in sorted(groups.items()):
            series = {}
            for c in cs:  # window means over each scrape step, stamped at its end, as metrics-server's
                u = c.step_usage if c.step_usage is not None else c.usage
                ok = np.isfinite(u)
                if ok.any():
                    series[c.key[1]] = list(zip(c.t[ok].tolist(), u[ok].tolist()))
            recs = replay(series) if series else []
            status = None
            if recs:
                last = recs[-1]
                status = vpa_status({cname: Recommendation(last["target"], last["lower_bound"], last["upper_bound"],
                                                           last["uncapped_target"])})
            changes = []
            flags: list[str] = []
            request_now = [c.request for c in cs if c.request is not None]
            req_m = int(round(max(request_now) * 1000)) if request_now else None
            target_m = recs[-1]["target"] if recs else None
            for f in self.findings:
                if f.container in cs:
                    flags.append(f.flag)
                    if f.fix_overrides:
                        changes.append(change_from_overrides(cname, f.fix_overrides, req_m, target_m))
            merged = ContainerChange(cname)
            for ch in changes:
                if ch.limit_m is not None and (merged.limit_m is None or ch.limit_m > merged.limit_m):
                    merged.limit_m, merged.request_m = ch.limit_m, ch.request_m
                if ch.gomaxprocs is not None:
                    merged.gomaxprocs = max(merged.gomaxprocs or 0, ch.gomaxprocs)
                merged.notes += [n for n in ch.notes if n not in merged.notes]
            vpa_now = next((c.vpa for c in cs if c.vpa), None)
            out.append(WorkloadAnswer(ns, None if ident[0] == "Pod" else ident, cname, sorted(c.key[1] for c in cs),
                                      sorted(set(flags)), status, vpa_now, merged,
                                      cs[0].workload_source if ident[0] != "Pod" else "no owner known: the pod"))
        return out


def evidence_severity(f: Finding, st: Stats) -> float:
    """A ranking number from the evidence alone (without simulation): the share of the limit the
    trap makes unusable, the throttled share of periods, GOMAXPROCS over the limit, or half the
    share of the limit above p99 usage."""
    L, G = st.limit, st.gomaxprocs
    if f.flag == "trapped":
        return (L - G) / L if L else 0.5
    if f.flag == "throttled":
        return st.throttled_ratio or 0.0
    if f.flag == "gomaxprocs_above_limit":
        return min(1.0, (G - L) / (G or 1)) if L is not None and G else 0.0
    if f.flag == "headroom" and L:
        return 0.5 * (L - st.usage_p99) / L
    from cfsim.advice.memory import MEMORY_FLAGS, memory_fix
    if f.flag in MEMORY_FLAGS:
        return memory_fix(f.flag, f.container.memory_summary())[1]
    return 0.0


def _grid_of(c: Container) -> Path | None:
    return c.run_dir.parent if c.run_dir is not None else None


def _grid_norm_task(task: tuple[Path, dict[str, Any]]) -> tuple[Path, Any]:
    """Picklable: a lab grid's :class:`cfsim.validation.normalise.GridNorm` from the twins of its
    calibration runs (None without any), at the audit's model parameters."""
    grid, params = task
    return grid, FixSimulator(0.0, params).grid_norm(grid)


def _use_cache(cache_dir: str | None | bool) -> None:
    """This process's simulation cache: on disk under ``cache_dir``, in memory (None), or no
    reuse at all (False)."""
    from cfsim.sweep import simcache

    cur = simcache.default_cache()
    if cache_dir is False:
        if cur.enabled:
            simcache.set_default_cache(None, enabled=False)
        return
    want = Path(cache_dir) / simcache.code_fingerprint() if cache_dir else None
    if cur.folder != want or not cur.enabled:
        simcache.set_default_cache(cache_dir)


def _audit_task(task: tuple) -> tuple[int, Stats, list[Finding], dict[str, float]]:
    """Picklable: one container's statistics, flags and simulated fixes, and what it cost (the
    cache's counts). The findings come back without their container (the caller re-attaches its
    own object)."""
    from cfsim.sweep.simcache import default_cache

    i, c, simulate, duration_s, norms, cache_dir, params = task
    _use_cache(cache_dir)
    before = default_cache().stats()
    st, fs = analyse(c)
    if simulate:
        sim = FixSimulator(duration_s, params)
        sim.norms.update(norms)
        simulate_fixes(fs, st, sim)
    else:
        for f in fs:
            f.impact = evidence_severity(f, st)
    for f in fs:
        f.container = None  # type: ignore[assignment]
    after = default_cache().stats()
    return i, st, fs, {k: after[k] - before[k] for k in after}


def audit(path: str | Path | None = None, containers: Sequence[Container] | None = None, simulate: bool = True,
          duration_s: float = 20.0, progress: Callable[[int, int], None] | None = None,
          meta: dict[str, Any] | None = None, workers: int | None = 0, dask: str | None = None,
          executor: Any = None, cache_dir: str | Path | None | bool = None,
          params: Mapping[str, Any] | None = None) -> AuditResult:
    """Flag every container found at ``path`` (or given), simulate the fixes, rank the findings
    (performance findings first, then headroom; by simulated impact, or by
    :func:`evidence_severity` without simulation). ``progress(done, total)`` after each container.
    ``params``: model parameters every fix is simulated with (``cfsim calibrate`` files, merged by
    :func:`cfsim.validation.calibrate.read_params_files`), as the validation's twins take them.

    The containers run on the sweep's executors (:func:`cfsim.sweep.make_executor`: ``workers=0``
    in this process, ``None`` all cores, ``dask`` a cluster; or an ``executor`` the caller has
    opened and closes), each with its own seed-carrying
    scenarios, and the results are put back in input order: the answer does not depend on the
    executor or the number of workers. Identical simulations run once per process, and once in
    all when ``cache_dir`` names a folder the workers share (:mod:`cfsim.sweep.simcache`);
    ``cache_dir=False`` reuses nothing (every simulation runs: the reference).
    """
    from cfsim.sweep import make_executor
    from cfsim.sweep.simcache import kept_default_cache

    cache = cache_dir if cache_dir is None or cache_dir is False else str(cache_dir)
    ex = executor if executor is not None else make_executor(workers, dask)
    out: dict[int, tuple[Stats, list[Finding]]] = {}
    sim_stats: dict[str, float] = {}
    # tasks run in this process too (workers=0) and re-point its cache: put it back afterwards
    with (nullcontext(ex) if executor is not None else ex), kept_default_cache():   # a caller's executor stays open
        cs = list(containers) if containers is not None else load_containers(path, executor=ex)
        params = dict(params or {})
        norms: dict[Path, Any] = {}
        grids = sorted({g for c in cs if (g := _grid_of(c)) is not None}) if simulate else []
        if grids:  # the grids' calibration twins first, once each, on all workers
            for _, res, exc in ex.imap_unordered(_grid_norm_task, ((g, params) for g in grids)):
                if exc is not None:
                    raise exc
                norms[res[0]] = res[1]
        tasks = ((i, c, simulate, duration_s, norms, cache, params) for i, c in enumerate(cs))
        for task, res, exc in ex.imap_unordered(_audit_task, tasks):
            if exc is not None:
                raise exc
            i, st, fs, cost = res
            for k, v in cost.items():
                sim_stats[k] = sim_stats.get(k, 0) + v
            for f in fs:
                f.container = cs[i]
            out[i] = (st, fs)
            if progress:
                progress(len(out), len(cs))
    stats: dict[Key, Stats] = {}
    findings: list[Finding] = []
    for i, c in enumerate(cs):
        st, fs = out[i]
        stats[c.key] = st
        findings.extend(fs)
    findings.sort(key=lambda f: (f.flag == "headroom", -f.impact, f.container.name, f.flag))
    res = AuditResult(cs, stats, findings, dict(meta or {}))
    res.sim_stats = {**sim_stats, "executor": ex.name, "workers": ex.workers}
    return res
