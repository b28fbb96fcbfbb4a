"""The audit's flags: each container's statistics and what they show, with the evidence.

* ``trapped``: usage pinned near GOMAXPROCS (median >= 90 % of it, within 10 % of it in at least
  half the samples) while the limit allows at least 0.05 cores more: the runtime, not the quota,
  caps the CPU (automaxprocs floors a fractional limit). Without a GOMAXPROCS series the
  automaxprocs value ``floor(limit)`` is assumed (:func:`cfsim.goruntime.gomaxprocs.automaxprocs_value`)
  and the flag says so.
* ``throttled``: throttled in >= 10 % of CFS periods (Chiluk's 0-10 % guidance); "below its
  limit" when mean usage < 90 % of the limit (bursty demand, or more threads than quota when
  GOMAXPROCS > limit), else "at its limit" (demand above the limit).
* ``gomaxprocs_above_limit``: GOMAXPROCS >= 2 x max(1, ceil(limit)) and >= limit + 2.
* ``headroom``: not throttled (< 1 %), not trapped, p99 usage <= 60 % of the limit and at least
  0.25 cores below it.

Thresholds are module constants.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cfsim.advice.audit.load import PERIOD, Container
from cfsim.goruntime.gomaxprocs import automaxprocs_value
from cfsim.kernel.limits import DEFAULT_PERIOD_US

__all__ = ["Stats", "Finding", "stats_of", "analyse", "ceil_gomaxprocs", "PIN_BAND", "THROTTLED_MIN",
           "HEADROOM_P99_FRACTION"]

PIN_BAND = 0.10            # usage within 10 % of GOMAXPROCS counts as pinned
PIN_SHARE = 0.5            # ... in at least half the samples
PIN_MEDIAN = 0.90          # ... and a median >= 90 % of GOMAXPROCS
TRAP_SLACK = 0.05          # the limit allows >= 0.05 cores more than GOMAXPROCS
THROTTLED_MIN = 0.10       # throttled in >= 10 % of periods
THROTTLED_QUIET = 0.01     # < 1 %: not throttled at all (headroom)
AT_LIMIT = 0.90            # mean usage >= 90 % of the limit: throttled at the limit
HEADROOM_P99_FRACTION = 0.60
HEADROOM_MIN_CORES = 0.25

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
    period_us: int | None = None   # the measured CFS period (None: unknown, the kubelet's 100 ms assumed)

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


def ceil_gomaxprocs(limit_cores: float) -> int:
    """``GOMAXPROCS = ceil(limit)``, at least 1: the explicit value the fixes set (automaxprocs'
    ``RoundQuotaFunc`` rounding, :func:`cfsim.goruntime.gomaxprocs.automaxprocs_value`).

    >>> ceil_gomaxprocs(1.5), ceil_gomaxprocs(2.0), ceil_gomaxprocs(0.25)
    (2, 2, 1)
    """
    return automaxprocs_value(limit_cores, cpus=0, round_="ceil")


def _period_ms(st: Stats) -> float:
    """The CFS period [ms]: the measured one, else the kubelet's default ``cpuCFSQuotaPeriod`` of
    100 ms (https://kubernetes.io/docs/reference/config-api/kubelet-config.v1beta1/)."""
    return (st.period_us if st.period_us is not None else DEFAULT_PERIOD_US) / 1000.0


def _ms(x_ms: float) -> str:
    """A time given in ms, said in s from 1 s up (periods go up to the kernel's 1 s).

    >>> _ms(6.25), _ms(500.0), _ms(1000.0)
    ('6.25 ms', '500 ms', '1 s')
    """
    return f"{x_ms / 1000:.3g} s" if x_ms >= 1000 else f"{x_ms:.3g} ms"


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
        g = automaxprocs_value(lim, cpus=0)  # automaxprocs assumed: floor(quota / period), at least 1
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
                 float(np.percentile(u, 99)), float(u.max()), lim, g, observed, thr, ts, pinned, at_lim, changes,
                 c.period_us)


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
            src = c.gomaxprocs_source if st.gomaxprocs_observed else \
                "assumed floor(limit) = automaxprocs (no go_sched_gomaxprocs_threads)"
            lim_s = f"limit {L:g} cores" if L is not None else "no CPU limit"
            unusable = f"; {L - G:.2f} cores of the limit cannot be used" if L is not None else ""
            out.append(Finding(c, "trapped", f"usage pinned at GOMAXPROCS {G} below {lim_s}",
                               f"usage p50 {st.usage_p50:.3f}, p95 {st.usage_p95:.3f} cores; within "
                               f"{pct(PIN_BAND)} of GOMAXPROCS {G} ({src}) in {pct(st.pinned_share)} of samples; "
                               f"{lim_s}; throttled {pct(thr or 0.0)} of periods{unusable}"))
    if (G is not None and L is not None and st.gomaxprocs_observed
            and G >= 2 * ceil_gomaxprocs(L) and G >= L + 2):
        p_ms = _period_ms(st)   # quota = limit x period (the kubelet's MilliCPUToQuota)
        assumed = "" if st.period_us is not None else f" (the kubelet's default period: no usable {PERIOD})"
        out.append(Finding(c, "gomaxprocs_above_limit", f"GOMAXPROCS {G} for a {L:g}-core limit",
                           f"GOMAXPROCS {G} ({c.gomaxprocs_source}) vs limit {L:g} cores: {G} threads can "
                           f"spend the {_ms(L * p_ms)} quota of a {_ms(p_ms)} period in {_ms(L * p_ms / G)}"
                           f"{assumed}; throttled {pct(thr or 0.0)} of periods"))
    if thr is not None and thr >= THROTTLED_MIN and L is not None:
        at = st.usage_vs_limit_throttled is not None and st.usage_vs_limit_throttled >= AT_LIMIT
        if at:
            detail = "throttled at its limit (demand above the limit)"
        elif G is not None and G > ceil_gomaxprocs(L) and st.gomaxprocs_observed:
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
    if c.memory or c.memory_measured:   # OOM kills, near the limit, a GOMEMLIMIT collapse (cfsim.advice.memory)
        from cfsim.advice.memory import memory_flags
        for mf in memory_flags(c.memory_summary()):
            out.append(Finding(c, mf.flag, mf.detail, mf.evidence))
    return st, out


