"""The band an answer spans when parameters no measurement pins down move over their priors.

Two corners: every unpinned parameter at its low prior (no SMT sharing, cheap coherence, no lock
contention) and every one at its high prior. Parameters a scenario sets away from their default
are the user's knowledge of the host and stay as given.
"""
from __future__ import annotations

from typing import Any, Iterable

from cfsim.overheads.coverage import depends_on_unpinned
from cfsim.scenario import Scenario
from cfsim.scenario.schema import SCHEMA

#: key -> (low prior, high prior). Sources: core-to-core latencies of 40-50 ns on small hosts and
#: 100-200 ns across large or two-socket ones (xfer growth 0 to 0.35 per doubling of CPUs);
#: golang/go#28808 (runtime.lock 23 % of CPU at 56 Ps: ~3.5 us per M contending in the scheduler at once,
#: cfsim.overheads.public; 0.5-5 us, the low end a small host's); SMT: a
#: sibling hyper-thread gives a core 1.0x (a divider-bound loop) to 1.8x its throughput, i.e. a
#: paired thread needs 1.1x to 2x the CPU (slowdown 0.1 to 1.0); whether the host has SMT at all
#: (threads_per_core 1 or 2) is itself unknown unless the scenario says.
UNPINNED: dict[str, tuple[Any, Any]] = {
    "host.threads_per_core": (1, 2),
    "host.smt_slowdown": (0.1, 1.0),
    "go.sched_xfer_growth": (0.0, 0.35),
    "go.sched_lock_us": (0.5, 5.0),
}
BAND_KEYS = ("throughput_per_s", "cpu_usage_cores", "throttled_ratio", "latency_p50_s", "latency_p99_s")


def _default(dotted: str) -> Any:
    section, key = dotted.split(".")
    return SCHEMA[section][key].default


def corner_overrides(sc: Scenario, which: int, known: Iterable[str] = ()) -> list[tuple[str, Any]]:
    """``section.key`` overrides for the low (``which=0``) or high (``1``) corner; keys the
    scenario sets away from their defaults, and ``known`` ones (facts that happen to equal the
    default, e.g. a host stated to have no SMT), are left alone."""
    known = set(known)
    return [(k, v[which]) for k, v in UNPINNED.items() if k not in known and sc[k] == _default(k)]


def band(sc: Scenario, keys: Iterable[str] = BAND_KEYS, simulate_fn=None) -> dict[str, dict[str, Any]] | None:
    """``{key: {"low": .., "high": ..}}`` of the headline keys at the two corners (low/high is the
    smaller/larger value, not the corner it came from), or None when the scenario's answer does not
    depend on unpinned parameters. The corners are simulated through this process's simulation
    cache (:mod:`cfsim.sweep.simcache`) unless ``simulate_fn`` is given."""
    if not depends_on_unpinned(sc):
        return None
    runs = []
    for which in (0, 1):
        ov = corner_overrides(sc, which)
        corner = sc.with_overrides(ov) if ov else sc
        if simulate_fn is None:   # reused where the same corner was simulated before (an audit run again)
            from cfsim.sweep.simcache import summary_of

            runs.append(summary_of(corner))
        else:
            runs.append(simulate_fn(corner).summary)
    out: dict[str, dict[str, Any]] = {}
    for k in keys:
        vals = [r.get(k) for r in runs]
        if any(v is None for v in vals):
            continue
        out[k] = {"low": min(vals), "high": max(vals)}
    return out
