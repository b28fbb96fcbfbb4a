"""Audit containers in Prometheus exports: flag, show the evidence, simulate the fix.

Input: a folder of ``/api/v1/query_range`` JSON exports (any file names; each file may hold
several metrics), or ``cfsim lab`` run folders (a run, a grid or a tree of grids). Series are
grouped by ``(namespace, pod, container)`` (cAdvisor's older ``pod_name``/``container_name`` too;
``container=""`` and ``"POD"`` are the pod cgroup and the pause container and are skipped).

Metrics read: ``container_cpu_usage_seconds_total`` (or a saved ``rate(...)`` of it),
``container_cpu_cfs_periods_total``, ``container_cpu_cfs_throttled_periods_total``,
``container_cpu_cfs_throttled_seconds_total``, the limit from
``kube_pod_container_resource_limits{resource="cpu"}`` or ``container_spec_cpu_quota /
container_spec_cpu_period``, the request from ``kube_pod_container_resource_requests``, and
``go_sched_gomaxprocs_threads`` where present (matched by namespace/pod/container, then by
namespace/pod, then -- in a lab run, which holds one container -- by being the only one). Counters
become rates with :func:`cfsim.io.rate` over 5 scrape steps.

Flags (thresholds are module constants):

* ``trapped``: usage pinned near GOMAXPROCS (median >= 90 % of it, within 10 % of it in at least
  half the samples) while the limit allows at least 0.05 cores more: the runtime, not the quota,
  caps the CPU (automaxprocs floors a fractional limit). Without ``go_sched_gomaxprocs_threads`` the
  automaxprocs value ``floor(limit)`` is assumed and the flag says so.
* ``throttled``: throttled in >= 10 % of CFS periods (Chiluk's 0-10 % guidance); "below its
  limit" when mean usage < 90 % of the limit (bursty demand, or more threads than quota when
  GOMAXPROCS > limit), else "at its limit" (demand above the limit).
* ``gomaxprocs_above_limit``: GOMAXPROCS >= 2 x max(1, ceil(limit)) and >= limit + 2.
* ``headroom``: not throttled (< 1 %), not trapped, p99 usage <= 60 % of the limit and at least
  0.25 cores below it.

Each flag gets a fix, simulated: a lab run's own scenario (its grid's calibrated per-item cost)
or, for a plain export, a proxy stream workload whose demand is estimated from the series (the
estimate is stated in the evidence); the effect is the simulated before/after.
"""
from __future__ import annotations

import base64
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from cfsim.io import read_lab_run, read_prometheus_json, rate
from cfsim.io.labels import parse_labels
from cfsim.scenario import Scenario, load_scenario

__all__ = ["Container", "Finding", "AuditResult", "load_containers", "analyse", "audit", "write_report",
           "PIN_BAND", "THROTTLED_MIN", "HEADROOM_P99_FRACTION"]

PIN_BAND = 0.10            # usage within 10 % of GOMAXPROCS counts as pinned
PIN_SHARE = 0.5            # ... in at least half the samples
PIN_MEDIAN = 0.90          # ... and a median >= 90 % of GOMAXPROCS
TRAP_SLACK = 0.05          # the limit allows >= 0.05 cores more than GOMAXPROCS
THROTTLED_MIN = 0.10       # throttled in >= 10 % of periods
THROTTLED_QUIET = 0.01     # < 1 %: not throttled at all (headroom)
AT_LIMIT = 0.90            # mean usage >= 90 % of the limit: throttled at the limit
HEADROOM_P99_FRACTION = 0.60
HEADROOM_MIN_CORES = 0.25
RATE_STEPS = 5             # rate() window in scrape steps

USAGE = "container_cpu_usage_seconds_total"
PERIODS = "container_cpu_cfs_periods_total"
THR_PERIODS = "container_cpu_cfs_throttled_periods_total"
THR_SECONDS = "container_cpu_cfs_throttled_seconds_total"
GOMAXPROCS = "go_sched_gomaxprocs_threads"
LIMITS = "kube_pod_container_resource_limits"
REQUESTS = "kube_pod_container_resource_requests"
QUOTA, PERIOD = "container_spec_cpu_quota", "container_spec_cpu_period"
WANTED = (USAGE, PERIODS, THR_PERIODS, THR_SECONDS, GOMAXPROCS, LIMITS, REQUESTS, QUOTA, PERIOD)
Key = tuple[str, str, str]


# ---------------------------------------------------------------------------------------------
# Reading


@dataclass
class Container:
    """One container's series on the usage timestamps [epoch s]."""

    key: Key
    t: np.ndarray
    usage: np.ndarray                     # cores
    throttled_ratio: np.ndarray | None    # throttled periods / periods per step
    throttled_s: np.ndarray | None        # throttled seconds per second
    periods: np.ndarray | None            # periods per second
    limit: np.ndarray | None              # cores (NaN: none)
    gomaxprocs: np.ndarray | None
    request: float | None = None
    source: str = ""
    run_dir: Path | None = None
    notes: list[str] = field(default_factory=list)
    series: list[str] = field(default_factory=list)   # the metrics read for this container

    @property
    def name(self) -> str:
        return "/".join(self.key)


def _key_of(labels: str) -> Key | None:
    d = parse_labels(labels)
    ns = d.get("namespace", "")
    pod = d.get("pod", d.get("pod_name", ""))
    c = d.get("container", d.get("container_name", ""))
    return ns, pod, c


def _keyed(frame: pd.DataFrame) -> pd.DataFrame:
    keys = {s: _key_of(s) for s in frame["labels"].unique()}
    out = frame.copy()
    out["key"] = out["labels"].map(keys)
    return out


def _step_s(frame: pd.DataFrame) -> float:
    diffs = []
    for _, g in frame.groupby("labels"):
        ts = g["timestamp"].astype("int64").to_numpy() / 1e9
        if len(ts) > 1:
            diffs.append(np.median(np.diff(np.sort(ts))))
    return float(np.median(diffs)) if diffs else 15.0


def _rate_by_key(frame: pd.DataFrame, metric: str, window_s: float) -> pd.Series | None:
    sub = frame[frame["metric"] == metric]
    if sub.empty:
        return None
    r = rate(sub, window_s)
    if r.empty:
        return None
    r = _keyed(r)
    r["t"] = r["timestamp"].astype("int64") / 1e9
    return r.groupby(["key", "t"])["value"].sum()


def _gauge_by_key(frame: pd.DataFrame, metric: str, where: dict[str, str] | None = None) -> pd.Series | None:
    sub = frame[frame["metric"] == metric]
    if where and len(sub):
        ok = {s: all(parse_labels(s).get(k) == v for k, v in where.items()) for s in sub["labels"].unique()}
        sub = sub[sub["labels"].map(ok).astype(bool)]
    if sub.empty:
        return None
    sub = _keyed(sub)
    sub["t"] = sub["timestamp"].astype("int64") / 1e9
    return sub.groupby(["key", "t"])["value"].max()


def _align(t: np.ndarray, s: pd.Series | None, key) -> np.ndarray | None:
    if s is None:
        return None
    try:
        part = s.xs(key, level="key")
    except KeyError:
        return None
    if part.empty:
        return None
    src_t = part.index.to_numpy(dtype=float)
    idx = np.searchsorted(src_t, t, side="right") - 1
    vals = part.to_numpy(dtype=float)
    return np.where(idx >= 0, vals[np.clip(idx, 0, None)], vals[0])


def containers_from_frame(frame: pd.DataFrame, source: str = "", window: tuple[float, float] | None = None,
                          single: bool = False) -> list[Container]:
    """Group a tidy frame's series by ``(namespace, pod, container)`` and build :class:`Container`s.

    ``single``: the frame holds one container (a lab run): series without its labels attach to it.
    """
    step = _step_s(frame[frame["metric"] == USAGE]) if (frame["metric"] == USAGE).any() else _step_s(frame)
    win = RATE_STEPS * step
    usage = _rate_by_key(frame, USAGE, win)
    if usage is None:  # a saved rate() export of the usage
        pre = frame[frame["metric"].str.startswith(f"rate({USAGE}")]
        if not pre.empty:
            pre = _keyed(pre)
            pre["t"] = pre["timestamp"].astype("int64") / 1e9
            usage = pre.groupby(["key", "t"])["value"].sum()
    if usage is None:
        return []
    periods = _rate_by_key(frame, PERIODS, win)
    thr_p = _rate_by_key(frame, THR_PERIODS, win)
    thr_s = _rate_by_key(frame, THR_SECONDS, win)
    limits = _gauge_by_key(frame, LIMITS, {"resource": "cpu"})
    requests = _gauge_by_key(frame, REQUESTS, {"resource": "cpu"})
    quota = _gauge_by_key(frame, QUOTA)
    period = _gauge_by_key(frame, PERIOD)
    gmp = _gauge_by_key(frame, GOMAXPROCS)
    keys = [k for k in usage.index.get_level_values("key").unique() if k[2] not in ("", "POD")]
    if single and not keys:
        keys = list(usage.index.get_level_values("key").unique())
    out = []
    for key in sorted(keys):
        part = usage.xs(key, level="key")
        t = part.index.to_numpy(dtype=float)
        u = part.to_numpy(dtype=float)
        sel = t >= t[0] + win - 0.5 * step   # rate() windows not yet covered by the series under-read
        if window is not None:
            sel &= (t >= window[0]) & (t <= window[1])
        t, u = t[sel], u[sel]
        if t.size == 0:
            continue
        notes: list[str] = []
        per, tp, ts_ = _align(t, periods, key), _align(t, thr_p, key), _align(t, thr_s, key)
        ratio = None
        if per is not None and tp is not None:
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(per > 0, tp / per, np.nan)
        used = [USAGE if (frame["metric"] == USAGE).any() else f"rate({USAGE}[...])"]
        used += [m for m, x in ((PERIODS, per), (THR_PERIODS, tp), (THR_SECONDS, ts_)) if x is not None]
        lim = _align(t, limits, key)
        if lim is not None:
            used.append(f'{LIMITS}{{resource="cpu"}}')
        elif quota is not None:
            q, p = _align(t, quota, key), _align(t, period, key)
            if q is not None:
                p = p if p is not None else np.full_like(q, 100_000.0)
                lim = np.where(q > 0, q / p, np.nan)
                used.append(f"{QUOTA} / {PERIOD}")
        if lim is not None:
            lim = np.where(lim > 0, lim, np.nan)
        g = _align(t, gmp, key)
        if g is None and gmp is not None:
            cands = [k for k in gmp.index.get_level_values("key").unique() if k[0] == key[0] and k[1] == key[1]]
            if len(cands) == 1:
                g = _align(t, gmp, cands[0])
            elif single:
                allk = list(gmp.index.get_level_values("key").unique())
                if len(allk) == 1:
                    g = _align(t, gmp, allk[0])
        if g is not None:
            used.append(GOMAXPROCS)
        req = _align(t, requests, key)
        if req is not None:
            used.append(f'{REQUESTS}{{resource="cpu"}}')
        c = Container(key, t, u, ratio, ts_, per, lim, g, float(np.nanmedian(req)) if req is not None else None,
                      source, None, notes)
        c.series = used
        out.append(c)
    return out


def _lab_container(run: Path) -> Container | None:
    frames, meta = read_lab_run(run)
    parts = [frames[m] for m in WANTED if m in frames and len(frames[m])]
    if not parts:
        return None
    frame = pd.concat(parts, ignore_index=True)
    times = (meta.get("manifest") or {}).get("times") or {}
    window = None
    if "window_start_unix_s" in times and "window_end_unix_s" in times:
        window = (float(times["window_start_unix_s"]), float(times["window_end_unix_s"]) + 1.0)
    cs = containers_from_frame(frame, str(run), window, single=True)
    if not cs:
        return None
    c = cs[0]
    c.run_dir = run
    if c.limit is None or np.all(np.isnan(c.limit)):
        sc = load_scenario(run / "scenario.toml")
        if sc["cgroup.cpu_limit"] is not None and not sc["cgroup.limit_schedule"]:
            c.limit = np.full_like(c.t, sc["cgroup.cpu_limit"])
    return c


def load_containers(path: str | Path, include_calibration: bool = False) -> list[Container]:
    """Containers from lab run folders at or below ``path``, else from the JSON exports in it."""
    from cfsim.validation.twin import is_calibration_run, is_run_folder

    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"{root}: no such export folder")
    runs = [root] if is_run_folder(root) else sorted(p.parent for p in root.rglob("manifest.json")
                                                      if is_run_folder(p.parent))
    if runs:
        out = []
        for run in runs:
            if is_calibration_run(run) and not include_calibration:
                continue
            c = _lab_container(run)
            if c is not None:
                out.append(c)
        return out
    files = sorted(root.rglob("*.json")) if root.is_dir() else [root]
    frames = []
    for f in files:
        try:
            frame, meta = read_prometheus_json(f)
        except ValueError:
            continue  # not a Prometheus response (e.g. a report we wrote)
        if meta.get("result_type") == "matrix" and len(frame):
            frames.append(frame[frame["metric"].isin(WANTED) | frame["metric"].str.startswith(f"rate({USAGE}")])
    if not frames:
        raise FileNotFoundError(f"{root}: no Prometheus query_range JSON exports and no lab run folders")
    return containers_from_frame(pd.concat(frames, ignore_index=True), str(root))


# ---------------------------------------------------------------------------------------------
# Analysis


@dataclass
class Stats:
    usage_mean: float
    usage_p50: float
    usage_p95: float
    usage_p99: float
    usage_max: float
    limit: float | None
    gomaxprocs: int | None
    gomaxprocs_observed: bool
    throttled_ratio: float | None
    throttled_s_per_s: float | None
    pinned_share: float | None
    usage_vs_limit_throttled: float | None = None   # median usage / limit over throttled samples
    limit_changes: int = 0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Finding:
    container: Container
    flag: str
    detail: str
    evidence: str
    fix: str = ""
    fix_overrides: list[tuple[str, Any]] = field(default_factory=list)
    before: dict[str, Any] = field(default_factory=dict)
    after: dict[str, Any] = field(default_factory=dict)
    effect: str = ""
    impact: float = 0.0

    def row(self, stats: Stats) -> dict[str, Any]:
        ns, pod, c = self.container.key
        return {"namespace": ns, "pod": pod, "container": c, "flag": self.flag, "detail": self.detail,
                "limit_cores": stats.limit, "request_cores": self.container.request,
                "gomaxprocs": stats.gomaxprocs, "usage_p50_cores": round(stats.usage_p50, 4),
                "usage_p95_cores": round(stats.usage_p95, 4),
                "throttled_ratio": None if stats.throttled_ratio is None else round(stats.throttled_ratio, 4),
                "evidence": self.evidence, "series": "; ".join(self.container.series), "fix": self.fix,
                "effect": self.effect, "impact": round(self.impact, 4), "source": self.container.source}


def stats_of(c: Container) -> Stats:
    u = c.usage[np.isfinite(c.usage)]
    if u.size == 0:
        u = np.zeros(1)
    lim = None
    if c.limit is not None and np.isfinite(c.limit).any():
        lim = float(np.nanmedian(c.limit))
    g, observed = None, False
    if c.gomaxprocs is not None and np.isfinite(c.gomaxprocs).any():
        g, observed = int(round(float(np.nanmedian(c.gomaxprocs)))), True
    elif lim is not None:
        g = max(1, int(math.floor(lim + 1e-9)))  # automaxprocs assumed
    thr = None
    if c.throttled_ratio is not None and c.periods is not None:
        per = np.nan_to_num(c.periods)
        tp = np.nan_to_num(c.throttled_ratio) * per
        thr = float(tp.sum() / per.sum()) if per.sum() > 0 else 0.0
    ts = float(np.nanmean(c.throttled_s)) if c.throttled_s is not None and np.isfinite(c.throttled_s).any() else None
    pinned = float(np.mean(np.abs(u - g) <= PIN_BAND * g)) if g else None
    at_lim, changes = None, 0
    if c.limit is not None and c.throttled_ratio is not None:
        sel = (np.nan_to_num(c.throttled_ratio) >= THROTTLED_MIN) & np.isfinite(c.limit) & np.isfinite(c.usage)
        if sel.any():
            at_lim = float(np.median(c.usage[sel] / c.limit[sel]))
        lv = c.limit[np.isfinite(c.limit)]
        changes = int(np.count_nonzero(np.abs(np.diff(lv)) > 1e-6)) if lv.size > 1 else 0
    return Stats(float(u.mean()), float(np.percentile(u, 50)), float(np.percentile(u, 95)),
                 float(np.percentile(u, 99)), float(u.max()), lim, g, observed, thr, ts, pinned, at_lim, changes)


def analyse(c: Container) -> tuple[Stats, list[Finding]]:
    """The flags of one container, with their evidence (no simulation)."""
    st = stats_of(c)
    out: list[Finding] = []
    L, G = st.limit, st.gomaxprocs
    pct = (lambda x: f"{100 * x:.0f} %")
    thr = st.throttled_ratio
    trapped = False
    if G is not None and st.pinned_share is not None and (L is None or L >= G + TRAP_SLACK) and \
            (L is not None or st.gomaxprocs_observed):
        if (st.usage_p50 >= PIN_MEDIAN * G and st.pinned_share >= PIN_SHARE
                and st.usage_p95 <= G * (1 + PIN_BAND) + 0.02):
            trapped = True
            src = "go_sched_gomaxprocs_threads" if st.gomaxprocs_observed else \
                "assumed floor(limit) = automaxprocs (no go_sched_gomaxprocs_threads)"
            lim_s = f"limit {L:g} cores" if L is not None else "no CPU limit"
            unusable = f"; {L - G:.2f} cores of the limit cannot be used" if L is not None else ""
            out.append(Finding(c, "trapped", f"usage pinned at GOMAXPROCS {G} below {lim_s}",
                               f"usage p50 {st.usage_p50:.3f}, p95 {st.usage_p95:.3f} cores; within "
                               f"{pct(PIN_BAND)} of GOMAXPROCS {G} ({src}) in {pct(st.pinned_share)} of samples; "
                               f"{lim_s}; throttled {pct(thr or 0.0)} of periods{unusable}"))
    if (G is not None and L is not None and st.gomaxprocs_observed
            and G >= 2 * max(1, math.ceil(L - 1e-9)) and G >= L + 2):
        out.append(Finding(c, "gomaxprocs_above_limit", f"GOMAXPROCS {G} for a {L:g}-core limit",
                           f"GOMAXPROCS {G} (go_sched_gomaxprocs_threads) vs limit {L:g} cores: {G} threads can "
                           f"spend the {L * 100:g} ms quota of a 100 ms period in {L * 100 / G:.1f} ms; "
                           f"throttled {pct(thr or 0.0)} of periods"))
    if thr is not None and thr >= THROTTLED_MIN and L is not None:
        at = st.usage_vs_limit_throttled is not None and st.usage_vs_limit_throttled >= AT_LIMIT
        if at:
            detail = "throttled at its limit (demand above the limit)"
        elif G is not None and G > math.ceil(L - 1e-9) and st.gomaxprocs_observed:
            detail = "throttled below its limit (more threads than quota)"
        else:
            detail = "throttled below its limit (bursty demand)"
        ts = f", {st.throttled_s_per_s:.2f} s throttled per s" if st.throttled_s_per_s is not None else ""
        out.append(Finding(c, "throttled", detail,
                           f"throttled in {pct(thr)} of CFS periods{ts}; in the throttled samples usage was "
                           f"{pct(st.usage_vs_limit_throttled or 0.0)} of the limit in force (median); usage p50 "
                           f"{st.usage_p50:.3f}, p99 {st.usage_p99:.3f} cores, limit {L:g}"
                           + (" (median; it changed during the export)" if st.limit_changes else "")))
    if (not trapped and L is not None and (thr is None or thr < THROTTLED_QUIET)
            and st.usage_p99 <= HEADROOM_P99_FRACTION * L and L - st.usage_p99 >= HEADROOM_MIN_CORES):
        out.append(Finding(c, "headroom", f"{L - st.usage_p99:.2f} cores above p99 usage",
                           f"p99 usage {st.usage_p99:.3f} of {L:g} cores ({pct(st.usage_p99 / L)}), max "
                           f"{st.usage_max:.3f}; throttled {pct(thr or 0.0)} of periods"))
    return st, out


# ---------------------------------------------------------------------------------------------
# Simulated fixes


EFFECT_KEYS = ("cpu_usage_cores", "throttled_ratio", "throughput_per_s", "latency_p99_s", "lag_final_s")


def proxy_scenario(c: Container, st: Stats, demand_cores: float, duration_s: float) -> Scenario:
    """A stream workload standing in for an exported container: ``demand_cores`` of 1 ms records."""
    cpus = max(2, math.ceil(max(st.limit or 0.0, st.gomaxprocs or 0, st.usage_max) + 1e-9) + 1)
    data = {
        "host": {"cpus": int(cpus), "name": "proxy"},
        "cgroup": {**({"cpu_limit": round(st.limit, 3)} if st.limit is not None else {})},
        "go": {"gomaxprocs": int(st.gomaxprocs) if st.gomaxprocs_observed and st.gomaxprocs else "automaxprocs",
               "live_heap_mb": 16.0},
        "workload": {"kind": "stream", "rate_per_s": round(max(demand_cores, 0.01) * 1000.0, 3),
                     "cpu_ms_per_item": 1.0, "workers": max(8, 2 * int(st.gomaxprocs or 1)), "alloc_kb_per_item": 4.0},
        "run": {"duration_s": float(duration_s), "warmup_s": min(2.0, duration_s / 3), "seed": 1},
    }
    return load_scenario(data)


class _Sim:
    """Simulations for the fixes, cached; lab runs use their own scenario and grid calibration."""

    def __init__(self, duration_s: float):
        self.duration_s = duration_s
        self.norms: dict[Path, float] = {}

    def base(self, c: Container, st: Stats, demand_cores: float) -> tuple[Scenario, str]:
        if c.run_dir is not None:
            from cfsim.validation.normalise import COST_KEYS, grid_norm
            from cfsim.validation.twin import find_runs, run_scenario

            sc = run_scenario(c.run_dir)
            grid = c.run_dir.parent
            if grid not in self.norms:
                try:
                    self.norms[grid] = grid_norm(find_runs(grid)).factor
                except FileNotFoundError:
                    self.norms[grid] = 1.0
            over: list[tuple[str, Any]] = []   # the run's own load profile and length
            key = COST_KEYS.get(sc["workload.kind"])
            if key and self.norms[grid] != 1.0:
                over.append((key, sc[key] * self.norms[grid]))
            return sc.with_overrides(over), f"the lab run's scenario (grid cost factor {self.norms[grid]:.3g})"
        return proxy_scenario(c, st, demand_cores, self.duration_s), \
            f"a proxy stream workload of {demand_cores:.2f} cores demand"

    @staticmethod
    def run(sc: Scenario, over: Sequence[tuple[str, Any]] = ()) -> dict[str, Any]:
        from cfsim.simulation import simulate

        return dict(simulate(sc.with_overrides(list(over))).summary)


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


def _cheapest_limit(sc: Scenario, slos: Sequence, kinds: Sequence[str | int]):
    """The cheapest limit meeting ``slos`` robustly (the scenario carries its calibrated cost;
    the safety margin is the default +10 % per-item CPU)."""
    from cfsim.advice.search import SearchOptions, Searcher, uncertainty_for

    s = Searcher(sc, uncertainty_for(sc), SearchOptions(burst=False, gomaxprocs=list(kinds)))
    return s.search(slos).winner


def simulate_fixes(findings: Sequence[Finding], st: Stats, sim: _Sim) -> None:
    """Attach to each finding its fix, the simulated before/after and the impact."""
    if not findings:
        return
    c = findings[0].container
    flags = {f.flag for f in findings}
    L, G = st.limit, st.gomaxprocs
    if "trapped" in flags:
        demand = L if L is not None else float(G or 1) * 1.5
        note = "demand assumed to fill the limit (usage capped by GOMAXPROCS shows no demand above it)"
    elif any(f.flag == "throttled" and "at its limit" in f.detail for f in findings):
        demand = min(float(G or 64), st.usage_mean + (st.throttled_s_per_s or 0.0))
        note = "demand estimated as usage + throttled seconds per second (an upper bound)"
    else:
        demand = st.usage_p95
        note = "demand = p95 usage (burstiness below the scrape step is not modelled)"
    if c.run_dir is not None:
        note = "the run's own load profile"
    base, how = sim.base(c, st, demand)
    before = sim.run(base)
    from cfsim.overheads.report import audit_note   # band and coverage of the simulated container
    cover = audit_note(base, before)
    for f in findings:
        over: list[tuple[str, Any]]
        if f.flag == "trapped":
            newg = max(1, math.ceil((L if L is not None else G * 1.5) - 1e-9))
            over = [("go.gomaxprocs", newg)]
            f.fix = f"GOMAXPROCS={newg} (= ceil(limit); or the go1.25 runtime default) at the same limit"
        elif f.flag == "gomaxprocs_above_limit" or (f.flag == "throttled" and "more threads" in f.detail
                                                   and max(1, math.ceil(L - 1e-9)) != G):
            newg = max(1, math.ceil(L - 1e-9))
            over = [("go.gomaxprocs", newg)]
            f.fix = f"GOMAXPROCS={newg} (= ceil(limit)) at the same limit"
        elif f.flag == "throttled" and "at its limit" not in f.detail:
            quota_us = int(L * base["cgroup.period_us"])
            over = [("cgroup.burst_us", quota_us)]
            f.fix = f"CFS burst {quota_us / 1000:g} ms (cpu.max.burst = quota) at the same limit"
        else:  # throttled at the limit, or headroom: the cheapest adequate limit
            slos = _keep_slos(f.flag, before)
            win = _cheapest_limit(base, slos, [base["go.gomaxprocs"], "ceil"])
            texts = ", ".join(x.text for x in slos)
            if win is None:
                f.fix = f"no limit up to {base['host.cpus']} cores keeps {texts}"
                f.before, f.after = before, {}
                f.effect = "none found [simulated on " + how + "]"
                f.impact = 0.0
                continue
            over = list(win.candidate.overrides(base))
            verb = "lower" if f.flag == "headroom" else "raise"
            f.fix = (f"{verb} the limit to {win.candidate.limit:g} cores ({win.candidate.describe()}; "
                     f"cheapest keeping {texts})")
        f.fix_overrides = over
        f.after = sim.run(base, over)
        f.before = before
        if f.flag == "trapped" and (f.after.get("throttled_ratio") or 0.0) >= THROTTLED_MIN:
            # the trap hid demand above the limit too: say what limit that demand needs
            win = _cheapest_limit(base, _keep_slos("throttled", before), ["ceil", "go1.25"])
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


# ---------------------------------------------------------------------------------------------
# The audit and its report


@dataclass
class AuditResult:
    containers: list[Container]
    stats: dict[Key, Stats]
    findings: list[Finding]

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
    return 0.0


def audit(path: str | Path | None = None, containers: Sequence[Container] | None = None, simulate: bool = True,
          duration_s: float = 20.0) -> AuditResult:
    """Flag every container found at ``path`` (or given), simulate the fixes, rank the findings
    (performance findings first, then headroom; by simulated impact, or by
    :func:`evidence_severity` without simulation)."""
    cs = list(containers) if containers is not None else load_containers(path)
    sim = _Sim(duration_s)
    stats: dict[Key, Stats] = {}
    findings: list[Finding] = []
    for c in cs:
        st, fs = analyse(c)
        stats[c.key] = st
        if simulate:
            simulate_fixes(fs, st, sim)
        else:
            for f in fs:
                f.impact = evidence_severity(f, st)
        findings.extend(fs)
    findings.sort(key=lambda f: (f.flag == "headroom", -f.impact, f.container.name, f.flag))
    return AuditResult(cs, stats, findings)


def _markdown(df: pd.DataFrame) -> str:
    cols = list(df.columns)
    esc = (lambda v: "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v).replace("|", "\\|"))
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, r in df.iterrows():
        lines.append("| " + " | ".join(esc(r[c]) for c in cols) + " |")
    return "\n".join(lines) + "\n"


def _plot_png(c: Container, st: Stats) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = c.t - c.t[0]
    fig, axes = plt.subplots(2, 1, figsize=(7, 3.6), sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    ax = axes[0]
    ax.plot(t, c.usage, lw=1.2, label="usage [cores]")
    if c.limit is not None:
        ax.plot(t, c.limit, "--", lw=1, color="C3", label="limit [cores]")
    if c.gomaxprocs is not None:
        ax.plot(t, c.gomaxprocs, ":", lw=1.5, color="C2", label="GOMAXPROCS")
    elif st.gomaxprocs is not None:
        ax.axhline(st.gomaxprocs, ls=":", lw=1.5, color="C2", label="GOMAXPROCS (assumed)")
    ax.set_ylabel("cores")
    tops = [np.nanmax(c.usage)] + [np.nanmax(x) for x in (c.limit, c.gomaxprocs) if x is not None
                                   and np.isfinite(x).any()] + [float(st.gomaxprocs or 0)]
    ax.set_ylim(0, 1.15 * max(tops) + 0.05)
    ax.legend(loc="upper right", fontsize=7)
    ax.set_title(c.name, fontsize=9)
    ax2 = axes[1]
    if c.throttled_ratio is not None:
        ax2.plot(t, 100 * np.nan_to_num(c.throttled_ratio), lw=1, color="C1")
    ax2.set_ylabel("throttled %")
    ax2.set_ylim(0, 105)
    ax2.set_xlabel("time [s]")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _h(x: Any) -> str:
    import html

    return html.escape("" if x is None else str(x))


def write_report(result: AuditResult, out: str | Path) -> dict[str, Path]:
    """``<out>.csv``, ``<out>.md`` and ``<out>.html`` (plots embedded as PNG); ``out`` is a path
    prefix, or a folder (then ``audit.*`` inside it)."""
    out = Path(out)
    if out.is_dir() or str(out).endswith("/"):
        out = out / "audit"
    out.parent.mkdir(parents=True, exist_ok=True)
    df = result.table()
    paths = {"csv": out.with_suffix(".csv"), "md": out.with_suffix(".md"), "html": out.with_suffix(".html")}
    df.to_csv(paths["csv"], index=False)
    clean = [c.name for c in result.containers if not result.flags_by_container()[c.name]]
    md = [f"# cfsim audit: {len(result.containers)} containers, {len(result.findings)} findings\n",
          _markdown(df[["rank", "namespace", "pod", "container", "flag", "detail", "evidence", "fix", "effect"]]),
          "\nNo findings: " + (", ".join(clean) if clean else "none") + "\n"]
    paths["md"].write_text("\n".join(md))
    body = [f"<h1>cfsim audit</h1><p>{len(result.containers)} containers, {len(result.findings)} findings, "
            f"ranked by simulated impact (performance first, then headroom).</p>",
            df.drop(columns=["source"]).to_html(index=False, escape=True, na_rep="")]
    first = {}
    for rank, f in enumerate(result.findings):
        first.setdefault(f.container.name, rank)
    for c in sorted(result.containers, key=lambda c: (first.get(c.name, len(result.findings)), c.name)):
        st = result.stats[c.key]
        fs = [f for f in result.findings if f.container is c]
        body.append(f"<h2>{_h(c.name)}</h2><p><small>{_h(c.source)}<br/>series: {_h(', '.join(c.series))}"
                    f"</small></p>")
        body.append(f"<p>limit {_h(st.limit)} cores, request {_h(c.request)}, GOMAXPROCS {_h(st.gomaxprocs)}"
                    f"{'' if st.gomaxprocs_observed else ' (assumed)'}; usage p50 {st.usage_p50:.3f}, p99 "
                    f"{st.usage_p99:.3f} cores; throttled "
                    f"{_h(None if st.throttled_ratio is None else round(100 * st.throttled_ratio, 1))} %</p>")
        if not fs:
            body.append("<p><b>No findings.</b></p>")
        for f in fs:
            body.append(f"<h3>{_h(f.flag)}: {_h(f.detail)}</h3><ul><li><b>Evidence:</b> {_h(f.evidence)}</li>"
                        f"<li><b>Fix:</b> {_h(f.fix)}</li><li><b>Predicted effect:</b> {_h(f.effect)}</li></ul>")
        body.append(f'<img alt="{_h(c.name)}" src="data:image/png;base64,{_plot_png(c, st)}"/>')
    style = ("body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse;font-size:12px}"
             "td,th{border:1px solid #ccc;padding:3px}")
    paths["html"].write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>cfsim audit</title>"
                             f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n")
    return paths


def summary_json(result: AuditResult) -> dict[str, Any]:
    return {"containers": [{"name": c.name, "flags": result.flags_by_container()[c.name],
                            "stats": result.stats[c.key].as_dict()} for c in result.containers],
            "findings": json.loads(result.table().to_json(orient="records"))}
