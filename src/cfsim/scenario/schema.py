"""The scenario contract: every section, key, default and allowed range.

Users, notebooks, the sweep and the tests rely on these names: add keys freely, rename none.
Each key is declared once here with its default and its check, so that a bad value fails
before anything runs, with a message that names the key and the allowed range.

Kernel limits come from ``kernel/sched/core.c`` ``tg_set_bandwidth`` (see
:mod:`cfsim.kernel.limits`): quota >= 1 ms, 1 ms <= period <= 1 s, 0 <= burst <= quota.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from cfsim.kernel import limits


class ScenarioError(ValueError):
    """A scenario value is invalid. The message names the key (``section.key``)."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(f"{key}: {message}")


MISSING = object()  # a key whose absence means something (e.g. no CPU limit)


@dataclass(frozen=True)
class Key:
    """One scenario key: default, type and a range check returning an error text or None."""

    default: Any
    kind: str  # 'int' | 'float' | 'str' | 'bool' | 'any' | 'list'
    help: str
    check: Callable[[Any], str | None] | None = None
    choices: tuple[Any, ...] | None = None
    optional: bool = False  # None / absent allowed


def _ge(lo: float) -> Callable[[Any], str | None]:
    return lambda v: None if v >= lo else f"must be >= {lo} (got {v})"


def _gt(lo: float) -> Callable[[Any], str | None]:
    return lambda v: None if v > lo else f"must be > {lo} (got {v})"


def _between(lo: float, hi: float) -> Callable[[Any], str | None]:
    return lambda v: None if lo <= v <= hi else f"must be in [{lo}, {hi}] (got {v})"


def _gomaxprocs(v: Any) -> str | None:
    if isinstance(v, bool):
        return "must be 'host', 'automaxprocs', 'go1.25' or an integer >= 1"
    if isinstance(v, int):
        return None if v >= 1 else f"an explicit GOMAXPROCS must be >= 1 (got {v})"
    if v in ("host", "automaxprocs", "go1.25"):
        return None
    return f"must be 'host', 'automaxprocs', 'go1.25' or an integer >= 1 (got {v!r})"


def _rate(v: Any) -> str | None:
    # a number (constant rate) or a list of [t_s, rate] steps or a path to a CSV
    if isinstance(v, bool):
        return "must be a number, a list of [t_s, rate_per_s] steps, or a CSV path"
    if isinstance(v, (int, float)):
        return None if v >= 0 else f"must be >= 0 (got {v})"
    if isinstance(v, str):
        return None
    if isinstance(v, list):
        for i, step in enumerate(v):
            if not (isinstance(step, list) and len(step) == 2):
                return f"step {i} must be [t_s, rate_per_s] (got {step!r})"
            if step[1] < 0 or step[0] < 0:
                return f"step {i} must have t_s >= 0 and rate_per_s >= 0 (got {step!r})"
        return None
    return "must be a number, a list of [t_s, rate_per_s] steps, or a CSV path"


def _limit_schedule(v: Any) -> str | None:
    if not isinstance(v, list):
        return "must be a list of [t_s, cpu_limit_cores] steps"
    last = -1.0
    for i, step in enumerate(v):
        if not (isinstance(step, list) and len(step) == 2):
            return f"step {i} must be [t_s, cpu_limit_cores] (got {step!r})"
        t, lim = step
        if t < 0 or t <= last:
            return f"step {i}: times must be >= 0 and increasing (got {t})"
        last = t
        if lim is not None and lim * 1e6 / 100000 < 0:
            return f"step {i}: cpu limit must be > 0 (got {lim})"
    return None


SCHEMA: dict[str, dict[str, Key]] = {
    "host": {
        "cpus": Key(8, "int", "logical CPUs of the node", _between(1, 4096)),
        "hz": Key(1000, "int", "scheduler tick rate for runtime charging [1/s]", choices=(100, 250, 300, 1000)),
        "name": Key("node", "str", "a label for reports"),
    },
    "cgroup": {
        "cpu_limit": Key(None, "float", "CPU limit [cores]; absent = unlimited", _gt(0), optional=True),
        "period_us": Key(100_000, "int", "CFS period [us]",
                         _between(limits.MIN_PERIOD_US, limits.MAX_PERIOD_US)),
        "burst_us": Key(0, "int", "CFS burst [us]; 0 <= burst <= quota", _ge(0)),
        "kernel": Key("modern", "str", "bandwidth semantics",
                      choices=("modern", "legacy-expiry")),
        "slice_us": Key(5000, "int", "sched_cfs_bandwidth_slice_us [us]", _between(1, 1_000_000)),
        "limit_schedule": Key(None, "list", "[[t_s, cpu_limit_cores], ...] quota changes during the run",
                              _limit_schedule, optional=True),
    },
    "go": {
        "gomaxprocs": Key("host", "any", "'host' | 'automaxprocs' | 'go1.25' | integer", _gomaxprocs),
        "round": Key("floor", "str", "automaxprocs RoundQuotaFunc", choices=("floor", "ceil")),
        "version": Key("1.26", "str", "Go release semantics",
                       choices=("1.20", "1.21", "1.22", "1.23", "1.24", "1.25", "1.26")),
        "gogc": Key(100, "int", "GOGC percent; -1 = off", _ge(-1)),
        "gomemlimit_mb": Key(None, "float", "GOMEMLIMIT [MiB]; absent = none", _gt(0), optional=True),
        "live_heap_mb": Key(16.0, "float", "live (marked) heap [MiB]", _ge(0)),
        "gc_cpu_limiter": Key(True, "bool", "model the GC CPU limiter (Go >= 1.19)"),
    },
    "workload": {
        "kind": Key("threads", "str", "workload model",
                    choices=("threads", "stream", "closed", "open", "single-thread")),
        # threads
        "threads": Key(4, "int", "OS threads (kind=threads)", _between(1, 100_000)),
        "burn_ms": Key(10.0, "float", "CPU per burn [ms] (kind=threads)", _gt(0)),
        "sleep_ms": Key(0.0, "float", "sleep between burns [ms]; 0 = CPU-bound", _ge(0)),
        "jitter_ms": Key(0.0, "float", "uniform random phase jitter of each thread's start [ms]", _ge(0)),
        # stream / single-thread (records) and open (requests): arrivals
        "rate_per_s": Key(1000.0, "any", "arrival rate [1/s]: a number, [[t_s, rate], ...] steps, "
                                         "'diurnal:<mean>:<amplitude>:<period_s>' or a CSV path (t_s,rate_per_s)",
                          _rate),
        "arrivals": Key("poisson", "str", "arrival process (kind=open)", choices=("poisson", "fixed")),
        # stream / single-thread: per-record work
        "workers": Key(8, "int", "worker goroutines taking records (kind=stream)", _between(1, 100_000)),
        "cpu_ms_per_item": Key(0.3, "float", "CPU per record [ms]", _gt(0)),
        "alloc_kb_per_item": Key(4.0, "float", "heap allocation per record [KiB]", _ge(0)),
        "initial_backlog": Key(0, "int", "records waiting at t=0", _ge(0)),
        # closed / open: requests
        "clients": Key(2, "int", "closed-loop virtual users (kind=closed)", _between(1, 100_000)),
        "fanout": Key(1, "int", "goroutines per request, each doing cpu_ms_per_request/fanout",
                      _between(1, 10_000)),
        "cpu_ms_per_request": Key(10.0, "float", "CPU per request [ms]", _gt(0)),
        "alloc_kb_per_request": Key(16.0, "float", "heap allocation per request [KiB]", _ge(0)),
        "think_ms": Key(0.0, "float", "client think time between requests [ms] (kind=closed)", _ge(0)),
    },
    "run": {
        "duration_s": Key(10.0, "float", "simulated time [s]", _between(0.001, 30 * 86400)),
        "warmup_s": Key(0.0, "float", "time excluded from summaries [s]", _ge(0)),
        "seed": Key(0, "int", "random seed", _ge(0)),
    },
}


def register_section(name: str, keys: dict[str, Key]) -> None:
    """Add (or extend) a section: used by the Go model, workloads and autoscalers."""
    SCHEMA.setdefault(name, {}).update(keys)
