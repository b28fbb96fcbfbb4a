"""Reading an audit's input into :class:`Container` series: Prometheus ``query_range`` JSON
exports, ``cfsim lab`` run folders, or a live Prometheus (:func:`load_live_containers`).

Series are grouped by ``(namespace, pod, container)`` (cAdvisor's older ``pod_name``/
``container_name`` too; ``container=""`` and ``"POD"`` are the pod cgroup and the pause container
and are skipped).

Metrics read: ``container_cpu_usage_seconds_total`` (or a saved ``rate(...)`` of it),
``container_cpu_cfs_periods_total``, ``container_cpu_cfs_throttled_periods_total``,
``container_cpu_cfs_throttled_seconds_total``, the limit from
``kube_pod_container_resource_limits{resource="cpu"}`` or ``container_spec_cpu_quota /
container_spec_cpu_period``, the request from ``kube_pod_container_resource_requests``, the
owner from ``kube_pod_owner`` / ``kube_replicaset_owner``, the VPA's current recommendation from
kube-state-metrics' ``kube_verticalpodautoscaler_status_recommendation_containerrecommendations_*``,
and the Go runtime's ``go_sched_gomaxprocs_threads`` -- or, without it, the rate of
``go_cpu_classes_total_cpu_seconds_total`` (GOMAXPROCS integrated over wall time, Go
``src/runtime/metrics/description.go``) -- and ``go_gc_gogc_percent`` / ``go_gc_gomemlimit_bytes``.
Go metrics are matched by namespace/pod/container, then by namespace/pod, then -- in a lab run,
which holds one container -- by being the only one. Counters become rates with
:func:`cfsim.io.rate` over :data:`RATE_STEPS` scrape steps. What is missing is recorded per
container (:attr:`Container.missing`) with what the user can add.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from cfsim.io import irate, read_lab_run, rate
from cfsim.io.labels import parse_labels
from cfsim.io.live import METRICS, VPA_PREFIX
from cfsim.io.manifest import manifest_folders
from cfsim.kernel import limits
from cfsim.scenario import load_scenario

__all__ = ["Container", "containers_from_frame", "load_containers", "load_live_containers", "Key", "RATE_STEPS",
           "WANTED"]

RATE_STEPS = 5             # rate() window in scrape steps

USAGE = "container_cpu_usage_seconds_total"
PERIODS = "container_cpu_cfs_periods_total"
THR_PERIODS = "container_cpu_cfs_throttled_periods_total"
THR_SECONDS = "container_cpu_cfs_throttled_seconds_total"
GOMAXPROCS = "go_sched_gomaxprocs_threads"
CPU_CLASSES_TOTAL = "go_cpu_classes_total_cpu_seconds_total"
GOGC, GOMEMLIMIT = "go_gc_gogc_percent", "go_gc_gomemlimit_bytes"
LIMITS = "kube_pod_container_resource_limits"
REQUESTS = "kube_pod_container_resource_requests"
QUOTA, PERIOD = "container_spec_cpu_quota", "container_spec_cpu_period"
POD_OWNER, RS_OWNER = "kube_pod_owner", "kube_replicaset_owner"
VPA_BOUNDS = {"target": "target", "lowerbound": "lowerBound", "upperbound": "upperBound",
              "uncappedtarget": "uncappedTarget"}
WANTED = (USAGE, PERIODS, THR_PERIODS, THR_SECONDS, GOMAXPROCS, CPU_CLASSES_TOTAL, GOGC, GOMEMLIMIT, LIMITS,
          REQUESTS, QUOTA, PERIOD, POD_OWNER, RS_OWNER, *(VPA_PREFIX + b for b in VPA_BOUNDS))
#: Go's GOMEMLIMIT when none is set (math.MaxInt64)
NO_MEMLIMIT_BYTES = float(2 ** 63 - 1)
Key = tuple[str, str, str]


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
    gomaxprocs_source: str = ""                        # the metric GOMAXPROCS came from ("" = unknown)
    go_settings: dict[str, float] = field(default_factory=dict)   # "gogc", "gomemlimit_mb"
    memory: dict[str, np.ndarray] = field(default_factory=dict)   # memory/GC series (cfsim.advice.memory)
    #: memory/GC summary keys measured apart from the exported series (a lab run's cgroup memory
    #: counters, OOM record and runtime metrics: the lab reads them also after a kill its scrapes
    #: saw only as an OOM counter already at 1)
    memory_measured: dict[str, Any] = field(default_factory=dict)
    workload: tuple[str, str] | None = None           # (kind, name) of the pod's owner
    workload_source: str = ""
    vpa: dict[str, Any] | None = None                  # {"name", "target_m", "lowerBound_m", ...}
    missing: dict[str, str] = field(default_factory=dict)   # what is unknown -> what the user can add
    step_usage: np.ndarray | None = None               # cores over each scrape step (irate), for the VPA
    #: the CFS period [us] from ``container_spec_cpu_period`` (None: not exported, or outside the
    #: kernel's bounds); the kubelet's ``cpuCFSQuotaPeriod`` is 100 ms unless the node sets another
    period_us: int | None = None

    @property
    def name(self) -> str:
        return "/".join(self.key)

    def memory_summary(self) -> dict[str, Any]:
        """The keys :func:`cfsim.advice.memory.memory_flags` reads: what was measured apart from
        the exported series where it was (a lab run's counters, read also after a kill that the
        last scrape did not see), else from the series."""
        from cfsim.advice.memory import summary_from_series

        return {**summary_from_series(self.memory), **self.memory_measured}


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


def _rate_by_key(frame: pd.DataFrame, metric: str, window_s: float, func: Callable = rate) -> pd.Series | None:
    sub = frame[frame["metric"] == metric]
    if sub.empty:
        return None
    r = func(sub, window_s)
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
    # per-step usage (the last two samples: metrics-server-like window means) for the VPA replay
    per_step = _rate_by_key(frame, USAGE, 1.5 * step, irate)
    periods = _rate_by_key(frame, PERIODS, win)
    thr_p = _rate_by_key(frame, THR_PERIODS, win)
    thr_s = _rate_by_key(frame, THR_SECONDS, win)
    limits = _gauge_by_key(frame, LIMITS, {"resource": "cpu"})
    requests = _gauge_by_key(frame, REQUESTS, {"resource": "cpu"})
    quota = _gauge_by_key(frame, QUOTA)
    period = _gauge_by_key(frame, PERIOD)
    gmp = _gauge_by_key(frame, GOMAXPROCS)
    cpu_total = _rate_by_key(frame, CPU_CLASSES_TOTAL, win)
    gogc, memlimit = _gauge_by_key(frame, GOGC), _gauge_by_key(frame, GOMEMLIMIT)
    from cfsim.advice.memory import SERIES_KEYS
    mem_series = {name: _gauge_by_key(frame, name) for name in SERIES_KEYS}
    mem_limit_kube = _gauge_by_key(frame, LIMITS, {"resource": "memory"})
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
        period_us, period_note = _period_of(_align(t, period, key))
        g = _go_align(t, gmp, key, single)
        if g is not None:
            used.append(GOMAXPROCS)
            g_src = GOMAXPROCS
        else:
            g = _go_align(t, cpu_total, key, single)
            if g is not None:  # GOMAXPROCS integrated over wall time: its rate is GOMAXPROCS
                g = np.round(g)
                used.append(f"rate({CPU_CLASSES_TOTAL})")
                g_src = f"rate({CPU_CLASSES_TOTAL})"
            else:
                g_src = ""
        go_settings = {}
        for name, series, scale in (("gogc", gogc, 1.0), ("gomemlimit_mb", memlimit, 1.0 / 2 ** 20)):
            v = _go_align(t, series, key, single)
            if v is not None and np.isfinite(v).any():
                x = float(np.nanmedian(v))
                if name == "gomemlimit_mb" and x >= 0.99 * NO_MEMLIMIT_BYTES:
                    continue  # math.MaxInt64: no limit
                go_settings[name] = x * scale
        mem: dict[str, np.ndarray] = {}
        for name, series in mem_series.items():
            v = _go_align(t, series, key, single) if name.startswith("go_") else _align(t, series, key)
            if v is not None:
                mem[name] = v
        if "container_spec_memory_limit_bytes" not in mem:
            v = _align(t, mem_limit_kube, key)
            if v is not None:
                mem["container_spec_memory_limit_bytes"] = v
        req = _align(t, requests, key)
        if req is not None:
            used.append(f'{REQUESTS}{{resource="cpu"}}')
        c = Container(key, t, u, ratio, ts_, per, lim, g, float(np.nanmedian(req)) if req is not None else None,
                      source, None, notes)
        c.series = used
        c.step_usage = _align(t, per_step, key)
        c.gomaxprocs_source = g_src
        c.go_settings = go_settings
        c.memory = mem
        c.period_us = period_us
        _note_missing(c, frame)
        if period_note:
            c.missing["CFS period"] = period_note
        out.append(c)
    _attach_owners(out, frame)
    _attach_vpa(out, frame)
    return out


def _period_of(p: np.ndarray | None) -> tuple[int | None, str]:
    """The container's CFS period [us] from its aligned ``container_spec_cpu_period`` (the median),
    and a note when the series holds no usable value. The kernel refuses a period outside
    [1 ms, 1 s] (``tg_set_cfs_bandwidth``: ``min_cfs_quota_period``, ``max_cfs_quota_period``,
    https://github.com/torvalds/linux/blob/master/kernel/sched/core.c), so such a value is not the
    container's: it is ignored rather than clamped to a period the container never had."""
    if p is None:
        return None, ""
    ok = p[np.isfinite(p) & (p > 0)]
    if ok.size == 0:
        return None, ""
    v = int(round(float(np.median(ok))))
    if not limits.MIN_PERIOD_US <= v <= limits.MAX_PERIOD_US:
        return None, (f"unknown ({PERIOD} {v} us is outside the kernel's [{limits.MIN_PERIOD_US}, "
                      f"{limits.MAX_PERIOD_US}] us): {limits.DEFAULT_PERIOD_US // 1000} ms assumed")
    return v, ""


def _go_align(t: np.ndarray, series: pd.Series | None, key: Key, single: bool) -> np.ndarray | None:
    """A Go runtime series for ``key``: by namespace/pod/container, else the only one of the pod,
    else (``single``, a lab run) the only one there is."""
    if series is None:
        return None
    got = _align(t, series, key)
    if got is not None:
        return got
    keys = list(series.index.get_level_values("key").unique())
    same_pod = [k for k in keys if k[0] == key[0] and k[1] == key[1]]
    if len(same_pod) == 1:
        return _align(t, series, same_pod[0])
    if single and len(keys) == 1:
        return _align(t, series, keys[0])
    return None


def _note_missing(c: Container, frame: pd.DataFrame) -> None:
    """What the audit could not learn for ``c``, and what the user can add (:data:`METRICS`)."""
    if c.gomaxprocs is None:
        c.missing["GOMAXPROCS"] = (f"unknown (neither {GOMAXPROCS} nor {CPU_CLASSES_TOTAL} matches it): "
                                   f"{METRICS[GOMAXPROCS][1]}")
    if c.limit is None:
        c.missing["CPU limit"] = (f"unknown (no limit, or neither {LIMITS} nor {QUOTA} is scraped): "
                                  f"{METRICS[LIMITS][1]}")
    if c.throttled_ratio is None:
        c.missing["throttling"] = f"unknown (no {PERIODS}, {THR_PERIODS}): {METRICS[THR_PERIODS][1]}"
    if c.request is None:
        c.missing["CPU request"] = f"unknown (no {REQUESTS}): {METRICS[REQUESTS][1]}"


_RS_HASH = re.compile(r"^(.+)-[0-9a-f]{5,10}$")
_POD_OF_RS = re.compile(r"^(.+)-[0-9a-f]{5,10}-[0-9a-z]{5}$")
_POD_ORDINAL = re.compile(r"^(.+)-\d+$")


def _labels_of(frame: pd.DataFrame, metric: str) -> list[dict[str, str]]:
    sub = frame.loc[frame["metric"] == metric, "labels"]
    return [parse_labels(x) for x in sub.unique()]


def _attach_owners(containers: list[Container], frame: pd.DataFrame) -> None:
    """The workload each pod belongs to: kube-state-metrics' ``kube_pod_owner`` (and
    ``kube_replicaset_owner`` for a ReplicaSet's Deployment), else the pod name's shape
    (``<deployment>-<rs hash>-<5 chars>`` or ``<statefulset>-<ordinal>``), said as a guess."""
    pod_owner = {(d.get("namespace", ""), d.get("pod", "")): (d.get("owner_kind", ""), d.get("owner_name", ""))
                 for d in _labels_of(frame, POD_OWNER) if d.get("owner_kind") not in (None, "", "<none>")}
    rs_owner = {(d.get("namespace", ""), d.get("replicaset", "")): (d.get("owner_kind", ""), d.get("owner_name", ""))
                for d in _labels_of(frame, RS_OWNER) if d.get("owner_kind") not in (None, "", "<none>")}
    for c in containers:
        ns, pod, _ = c.key
        owner = pod_owner.get((ns, pod))
        if owner is not None:
            kind, name = owner
            if kind == "ReplicaSet":
                up = rs_owner.get((ns, name))
                if up is not None:
                    c.workload, c.workload_source = up, f"{POD_OWNER} + {RS_OWNER}"
                    continue
                m = _RS_HASH.match(name)
                if m:
                    c.workload, c.workload_source = ("Deployment", m.group(1)), \
                        f"{POD_OWNER} (ReplicaSet {name}; Deployment from its name, no {RS_OWNER})"
                    continue
            c.workload, c.workload_source = (kind, name), POD_OWNER
            continue
        if c.run_dir is not None or not pod:
            continue
        m = _POD_OF_RS.match(pod)
        if m:
            c.workload, c.workload_source = ("Deployment", m.group(1)), f"guessed from the pod name (no {POD_OWNER})"
        elif _POD_ORDINAL.match(pod):
            c.workload = ("StatefulSet", _POD_ORDINAL.match(pod).group(1))
            c.workload_source = f"guessed from the pod name (no {POD_OWNER})"


def _attach_vpa(containers: list[Container], frame: pd.DataFrame) -> None:
    """The VPA's current recommendation (millicores) for each container, from kube-state-metrics."""
    recs: dict[tuple[str, str, str], dict[str, Any]] = {}
    for bound, field_name in VPA_BOUNDS.items():
        sub = frame[frame["metric"] == VPA_PREFIX + bound]
        for labels, grp in sub.groupby("labels"):
            d = parse_labels(labels)
            if d.get("resource", "cpu") != "cpu":
                continue
            k = (d.get("namespace", ""), d.get("target_name", ""), d.get("container", ""))
            r = recs.setdefault(k, {"name": d.get("verticalpodautoscaler", ""),
                                    "target_kind": d.get("target_kind", "")})
            r[f"{field_name}_m"] = int(round(float(grp.sort_values("timestamp")["value"].iloc[-1]) * 1000))
    if not recs:
        return
    for c in containers:
        ns, pod, cname = c.key
        for (rns, target, rc), r in recs.items():
            if rns != ns or rc != cname:
                continue
            if (c.workload is not None and c.workload[1] == target) or pod.startswith(target + "-"):
                c.vpa = dict(r)
                c.series.append(VPA_PREFIX + "*")
                break


def _lab_memory(run: Path) -> dict[str, Any]:
    """What a lab run measured of its memory (cgroup counters, the OOM record, the runtime's GC
    metrics: :func:`cfsim.validation.twin.observed_summary`), as the summary keys its series would
    give (:func:`cfsim.advice.memory.summary_from_series`) and the memory at the kill; {} if
    unreadable."""
    from cfsim.advice.memory import SERIES_KEYS
    from cfsim.validation.twin import observed_summary

    try:
        obs = observed_summary(run)
    except (OSError, ValueError, KeyError):
        return {}
    keys = {*SERIES_KEYS.values(), "memory_max_usage_bytes", "gc_heap_goal_mean_bytes", "memory_at_oom_bytes"}
    return {k: obs[k] for k in sorted(keys) if obs.get(k) is not None}


def _lab_container(run: Path) -> Container | None:
    from cfsim.advice.memory import SERIES_KEYS

    frames, meta = read_lab_run(run)
    # the memory and GC series the export kept too (go_gc_cycles_total, the limiter's last cycle)
    wanted = [*WANTED, *(m for m in SERIES_KEYS if m not in WANTED)]
    parts = [frames[m] for m in wanted if m in frames and len(frames[m])]
    if not parts:
        return None
    frame = pd.concat(parts, ignore_index=True)
    times = (meta.get("manifest") or {}).get("times") or {}
    window = None
    if "window_start_unix_s" in times and "window_end_unix_s" in times:
        window = (float(times["window_start_unix_s"]), float(times["window_end_unix_s"]) + 1.0)
    cs = containers_from_frame(frame, str(run), window, single=True)
    if not cs and window is not None:
        # a run the kernel killed early may end before its rate windows cover the window: its
        # whole series then, so that the kill is audited at all
        cs = containers_from_frame(frame, str(run), None, single=True)
    if not cs:
        return None
    c = cs[0]
    c.run_dir = run
    c.memory_measured = _lab_memory(run)
    sc = load_scenario(run / "scenario.toml")
    if c.period_us is None:   # the run's own period when its export does not carry it
        c.period_us = int(sc["cgroup.period_us"])
        c.missing.pop("CFS period", None)
    if c.limit is None or np.all(np.isnan(c.limit)):
        if sc["cgroup.cpu_limit"] is not None and not sc["cgroup.limit_schedule"]:
            c.limit = np.full_like(c.t, sc["cgroup.cpu_limit"])
            c.missing.pop("CPU limit", None)
    c.missing.pop("CPU request", None)  # a lab run has no Kubernetes request
    return c


def load_containers(path: str | Path, include_calibration: bool = False, executor: Any = None) -> list[Container]:
    """Containers from lab run folders at or below ``path``, else from the JSON exports in it.
    Lab runs are read on ``executor`` (an open :func:`cfsim.sweep.make_executor`) when given,
    in run order whatever order they finish in."""
    from cfsim.validation.twin import is_calibration_run, is_run_folder

    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"{root}: no such export folder")
    runs = [root] if is_run_folder(root) else [p for p in manifest_folders(root) if is_run_folder(p)]
    if runs:
        runs = [r for r in runs if include_calibration or not is_calibration_run(r)]
        if executor is not None and len(runs) > 1:
            got: dict[Path, Container | None] = {}
            for run, c, exc in executor.imap_unordered(_lab_container, runs):
                if exc is not None:
                    raise exc
                got[run] = c
            found = [got[r] for r in runs]
        else:
            found = [_lab_container(r) for r in runs]
        return [c for c in found if c is not None]
    files = sorted(root.rglob("*.json")) if root.is_dir() else [root]
    frames = []
    skipped: list[str] = []
    for f in files:
        frame, meta = _read_export(f)
        if meta is None:
            continue   # valid JSON but no Prometheus API response: not an export (see _is_api_response)
        if meta.get("result_type") != "matrix":
            skipped.append(f"{f}: resultType {meta.get('result_type')!r}, not a range query's 'matrix'")
            continue
        if len(frame):
            frames.append(frame[frame["metric"].isin(WANTED) | frame["metric"].str.startswith(f"rate({USAGE}")])
    if not frames:
        why = f" ({'; '.join(skipped[:3])}{' ...' if len(skipped) > 3 else ''})" if skipped else ""
        raise FileNotFoundError(f"{root}: no Prometheus query_range JSON exports and no lab run folders{why}")
    return containers_from_frame(pd.concat(frames, ignore_index=True), str(root))


def _is_api_response(obj: Any) -> bool:
    """Whether parsed JSON is a Prometheus HTTP API response, well-formed or not: an object with a
    string ``status`` (the envelope's ``"success"``/``"error"``), or with ``data`` holding
    ``resultType``/``result`` (https://prometheus.io/docs/prometheus/latest/querying/api/#format-overview).

    Only what is clearly something else is left out, so that a broken export is reported rather than
    skipped: a list or scalar, a lab run's or a sweep's manifest, a summary, the audit's own
    ``--format json`` answer, or an ``--emit vpa-status``/``patch`` object (whose ``status`` is an
    object, the Kubernetes shape)."""
    if not isinstance(obj, dict):
        return False
    data = obj.get("data")
    return isinstance(obj.get("status"), str) or (isinstance(data, dict) and ("resultType" in data or "result" in data))


def _read_export(f: Path) -> tuple[pd.DataFrame | None, dict[str, Any] | None]:
    """One ``.json`` file of an export folder: ``(frame, meta)``, or ``(None, None)`` when it is valid
    JSON but not a Prometheus API response (:func:`_is_api_response`).

    A file that is not valid JSON (or not UTF-8) is an error naming the file and the position
    (:class:`cfsim.io.errors.CfsimParseError`), as is a response of the wrong shape: a truncated or
    damaged download must not drop its metric from the audit unnoticed. A saved error response
    (``"status": "error"``) raises :class:`cfsim.io.errors.PrometheusAPIError` naming the file."""
    from cfsim.io.manifest import read_json_file
    from cfsim.io.prometheus_json import parse_prometheus_response

    obj = read_json_file(f)
    if not _is_api_response(obj):
        return None, None
    return parse_prometheus_response(obj, source=str(f))




def load_live_containers(url: str, start: Any, end: Any, step: float | str | None = None, *, selection=None,
                         connection=None, progress: Callable[[int, int], None] | None = None
                         ) -> tuple[list[Container], dict[str, Any]]:
    """Containers from a live Prometheus (:func:`cfsim.io.get_container_metrics`) and its ``meta``.

    Raises :class:`cfsim.io.LiveQueryError` or :class:`cfsim.io.PrometheusAPIError` (one line
    naming the query and the cause) when there is nothing to read.
    """
    from cfsim.io.live import get_container_metrics

    frame, meta = get_container_metrics(url, start, end, step, selection=selection, connection=connection,
                                        progress=progress)
    return containers_from_frame(frame, meta["source"]), meta
