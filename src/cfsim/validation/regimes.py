"""Which regime a lab run was in: where a cap decided its CPU, and where the model had to predict.

A run whose CPU usage sits at a cap (the quota, GOMAXPROCS for Go work, the host's CPUs) checks
little beyond the cap itself: any model that knows the cap gets its CPU right. The model's own
prediction is tested by the *uncapped* runs, and by the *contended* ones (other processes on a
saturated host took CPU the workload could have used). :func:`classify_regime` is the one rule;
:func:`run_regime` applies it to a run folder.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

#: every regime, in the order reports list them
REGIMES = ("uncapped", "contended", "quota-capped", "gomaxprocs-capped", "host-capped", "oom-killed")
#: runs whose window the kernel's OOM killer ended: their usage and throughput say when the workload
#: died, not how it ran (whether the model predicts the kill is the GC/memory table's OOM confusion,
#: cfsim.validation.gcmemory)
OUT_OF_SCOPE = ("oom-killed",)
#: the regimes where the model predicts (the headline)
PREDICTED = ("uncapped", "contended")
#: the regimes where a cap, not the model, sets the CPU
CAPPED = tuple(r for r in REGIMES if r.endswith("-capped"))
#: GOMAXPROCS bins: (label, lowest, highest)
GOMAXPROCS_BINS = (("1", 1, 1), ("2", 2, 2), ("3-8", 3, 8), ("9-64", 9, 64))
#: usage within this fraction below its cap counts as capped
CAP_TOLERANCE = 0.03
#: the host counts as saturated when it was at least this busy on average during the run
SATURATED_FRACTION = 0.9
#: ...and other processes count as significant above this many cores
SIGNIFICANT_OTHERS_CORES = 0.2
#: the host was quiet before a run when its other tenants took less than this many cores then
#: (``host_cpu.pre_run.tenants_cores``; the lab's grids call repeats comparable within 0.25 cores)
QUIET_TENANTS_CORES = 0.25
#: the host's state, in the order reports list them
HOST_STATES = ("quiet", "busy", "stolen", "unknown")


def host_state(pre_run_tenants_cores: float | None, steal_cores: float | None = None) -> str:
    """``"quiet"``, ``"busy"``, ``"stolen"`` or ``"unknown"``: the other tenants' CPU measured on the
    host before the run's workload started, unless the hypervisor took more than the lab's warning
    level of the VM's CPUs during the run (``steal_cores``, ``host_cpu.steal_cores``; :data:`cfsim.lab.
    hostcpu.STEAL_WARN_CORES`). Whatever cap decided a run's CPU, a busy host can still slow its
    work (shared caches and memory, interrupts); a report split by it tells the model's errors from
    the host's (the ``gc-memory`` grid ran beside 1-2 cores of tenants, data/README.md). Steal is
    apart because nothing before the run sees it (it accrues only while a virtual CPU wants to run,
    so a quiet reading of the guest is blind to it) and no twin has it: a run it hit is judged with
    the others where the model predicts, and reported apart here, never as a quiet host's. Like the
    regime, the split uses what the run measured; it is never a twin input.

    >>> host_state(0.01), host_state(1.98), host_state(None)
    ('quiet', 'busy', 'unknown')
    >>> host_state(0.01, steal_cores=0.45), host_state(0.01, steal_cores=0.02), host_state(None, 0.3)
    ('stolen', 'quiet', 'stolen')
    """
    from cfsim.lab.hostcpu import STEAL_WARN_CORES

    if steal_cores is not None and steal_cores > STEAL_WARN_CORES:
        return "stolen"
    if pre_run_tenants_cores is None:
        return "unknown"
    return "quiet" if pre_run_tenants_cores < QUIET_TENANTS_CORES else "busy"


def classify_regime(usage_cores: float | None, host_cpus: int,
                    limits: float | None | Sequence[tuple[float, float | None]],
                    gomaxprocs: int | None, go_work: bool = True,
                    host_busy_cores: float | None = None, others_cores: float | None = None,
                    tolerance: float = CAP_TOLERANCE) -> str:
    """The regime of one run, from what it measured (never used as a twin input).

    * ``"<cap>-capped"``: the observed usage is at least ``(1 - tolerance)`` of the cap
      ``min(limit, GOMAXPROCS (Go work only), host CPUs)``. With a limit that changed during the
      run, ``limits`` is ``[(seconds, limit), ...]`` over the window: the cap is the time average of
      ``min(limit(t), GOMAXPROCS, CPUs)`` and it is named after the term that was smallest for the
      longest time. Ties go to the quota, then GOMAXPROCS: ``quota-capped``,
      ``gomaxprocs-capped``, ``host-capped``.
    * ``"contended"``: below every cap, on a host busy at least ``SATURATED_FRACTION`` of its CPUs
      on average, with other processes (tenants, harness) using at least
      ``SIGNIFICANT_OTHERS_CORES``.
    * ``"uncapped"``: anything else; the workload's own demand and costs decided its CPU.

    >>> classify_regime(0.5, 2, 0.5, 8)                  # at the quota
    'quota-capped'
    >>> classify_regime(0.99, 2, 1.5, 1)                 # one P of Go work under a 1.5-core limit
    'gomaxprocs-capped'
    >>> classify_regime(1.55, 2, 2.0, 4, host_busy_cores=2.0, others_cores=0.45)
    'contended'
    >>> classify_regime(0.42, 2, 2.0, 8, host_busy_cores=0.9, others_cores=0.4)
    'uncapped'
    >>> steps = [(6.0, 2.0), (8.0, 1.94), (8.0, 1.2), (3.0, 2.0)]   # a mean cap of 1.72 cores
    >>> classify_regime(1.70, 2, steps, 2), classify_regime(1.5, 2, steps, 2)
    ('quota-capped', 'uncapped')
    """
    if usage_cores is None:
        return "uncapped"
    segments = [(1.0, limits)] if limits is None or isinstance(limits, (int, float)) else list(limits)
    total_w = sum(w for w, _ in segments) or 1.0
    cap_sum = 0.0
    weight_by: dict[str, float] = {}
    for w, lim in segments:
        terms = [("quota", lim), ("gomaxprocs", gomaxprocs if go_work else None), ("host", host_cpus)]
        terms = [(name, float(v)) for name, v in terms if v is not None and v > 0]
        cap = min(v for _, v in terms)
        binder = next(name for name, v in terms if v == cap)
        cap_sum += w * cap
        weight_by[binder] = weight_by.get(binder, 0.0) + w
    cap = cap_sum / total_w
    if usage_cores >= (1.0 - tolerance) * cap:
        binder = max(weight_by, key=lambda k: (weight_by[k], -("quota", "gomaxprocs", "host").index(k)))
        return f"{binder}-capped"
    if host_busy_cores is not None and others_cores is not None \
            and host_busy_cores >= SATURATED_FRACTION * host_cpus and others_cores >= SIGNIFICANT_OTHERS_CORES:
        return "contended"
    return "uncapped"


def limit_segments(scenario: Mapping[str, Any], manifest: Mapping[str, Any],
                   window: tuple[float, float]) -> float | None | list[tuple[float, float | None]]:
    """The limit over the run's window ``(t0, t1)`` [s from the start]: a number, or
    ``[(seconds, limit), ...]`` when it changed (the recorded ``cgroup.quota_changes`` with the
    instant each write was applied; the scenario's schedule for runs that did not record them)."""
    changes = (manifest.get("cgroup") or {}).get("quota_changes") or []
    steps = [(float(c.get("applied_t_s", c.get("t_s"))), c.get("cpu_limit_cores")) for c in changes
             if c.get("t_s") is not None]
    if not steps:
        steps = [(float(t), lim) for t, lim in scenario.get("cgroup.limit_schedule") or []]
    base = scenario.get("cgroup.cpu_limit")
    if not steps:
        return base
    t0, t1 = window
    points, lim = [], base
    for t, v in sorted(steps, key=lambda s: s[0]):
        if t <= t0:
            lim = v
        else:
            points.append((t, v))
    segments, cur_t = [], t0
    for t, v in points:
        if t >= t1:
            break
        segments.append((t - cur_t, lim))
        cur_t, lim = t, v
    segments.append((t1 - cur_t, lim))
    return [(w, v) for w, v in segments if w > 0]


def run_regime(run_dir: Path, observed: Mapping[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """``(regime, the numbers the rule used)`` for a lab run folder: ``"oom-killed"`` when the
    OOM killer ended the workload (manifest ``status`` "oom" or a counted ``oom_kills``), else
    :func:`classify_regime`."""
    from cfsim.validation.twin import observed_summary, run_manifest, run_scenario

    sc = run_scenario(run_dir)
    man = run_manifest(run_dir)
    obs = observed_summary(run_dir) if observed is None else observed
    if man.get("status") == "oom" or (obs.get("oom_kills") or 0) > 0:
        return "oom-killed", {"oom_kills": obs.get("oom_kills"), "oom_time_s": obs.get("oom_time_s")}
    host_cpu = man.get("host_cpu") or {}
    host = man.get("host") or {}
    cpus = int(host.get("affinity_cpus") or host.get("host_cpus") or sc["host.cpus"])
    warm, dur = float(sc["run.warmup_s"]), float(sc["run.duration_s"])
    limits = limit_segments(sc, man, (warm, dur))
    gmp = obs.get("gomaxprocs")
    others = host_cpu.get("others_cores")
    if host_cpu.get("tenants_cores") is not None and host_cpu.get("harness_cores") is not None:
        others = host_cpu["tenants_cores"] + host_cpu["harness_cores"]
    go_work = sc["workload.kind"] != "threads"
    regime = classify_regime(obs.get("cpu_usage_cores"), cpus, limits, gmp, go_work,
                             host_cpu.get("host_busy_cores"), others)
    return regime, {"usage_cores": obs.get("cpu_usage_cores"), "host_cpus": cpus, "limits": limits,
                    "gomaxprocs": gmp, "host_busy_cores": host_cpu.get("host_busy_cores"),
                    "others_cores": others}


def gomaxprocs_bin(g: float | int | None) -> str | None:
    """The bin label of a GOMAXPROCS value, None outside the lab's range.

    >>> gomaxprocs_bin(1), gomaxprocs_bin(6), gomaxprocs_bin(64), gomaxprocs_bin(128)
    ('1', '3-8', '9-64', None)
    """
    if g is None:
        return None
    n = int(round(float(g)))
    return next((label for label, lo, hi in GOMAXPROCS_BINS if lo <= n <= hi), None)


def run_gomaxprocs(run: Mapping[str, Any]) -> float | None:
    """A report row's GOMAXPROCS as the runtime had it (the lab's own reading; a policy such as
    automaxprocs names no number in the scenario)."""
    g = run["observed"].get("gomaxprocs")
    if g is None:
        g = (run.get("regime_inputs") or {}).get("gomaxprocs")
    try:
        return None if g is None else float(g)
    except (TypeError, ValueError):
        return None
