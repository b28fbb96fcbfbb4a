"""Golden model outputs: what is stored, how it is compared, how tolerances are chosen.

A golden file is JSON::

    {"_about": "...", "_tolerance_rules": [...], "_regenerate": "python tests/golden/regenerate_golden.py",
     "<case>": {"how": "...", "values": {"<key>": {"value": v, "rel": r, "abs": a}, ...}}, ...}

A number passes if ``|actual - value| <= abs`` or ``|actual - value| <= rel * |value|``; booleans,
strings, lists and ``null`` must be equal (``rel`` and ``abs`` are then absent). Tolerances are set
per key by :data:`RULES` when a key first enters the file; a regeneration keeps the tolerance of a
key that is already there, so a tolerance edited by hand survives (``--reset-tolerances`` re-derives
them all).
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Mapping

GOLDEN_DIR = Path(__file__).resolve().parent
REGENERATE = "python tests/golden/regenerate_golden.py"

#: (key pattern, rel, abs, why) - the first match wins; non-numbers are always exact
RULES: tuple[tuple[str, float | None, float | None, str], ...] = (
    (r"gomaxprocs|replicas|instances|best_|_gmp\b|lag_growing|sweep_ok",
     0.0, 0.0, "integer outcomes of the rules (GOMAXPROCS, replica and instance counts): exact"),
    (r"request_cores|recommend",
     0.0, 0.0015, "VPA recommendations: millicore-rounded by the recommender, within 1.5 millicores"),
    (r"ratio|share|fraction|utilisation|over_alloc|spread",
     0.03, 0.02, "ratios and shares in [0, 1]: within 0.02 absolute or 3 % relative"),
    (r"nr_periods|nr_throttled|burns|cycles",
     0.02, 1.0, "kernel and runtime event counts: within 2 % (or 1)"),
    (r".*",
     0.03, 1e-9, "rates, CPU, latencies, lags: within 3 % relative"),
)


def tolerance_for(key: str) -> tuple[float, float, str]:
    for pattern, rel, abs_, why in RULES:
        if re.search(pattern, key):
            return float(rel), float(abs_), why
    raise AssertionError("RULES ends with a catch-all")


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def entry(key: str, value: Any, old: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A golden entry for ``key``; keeps ``old``'s tolerance if the key was already golden."""
    if not is_number(value) or (isinstance(value, float) and not math.isfinite(value)):
        return {"value": value if not isinstance(value, float) else None}
    if old is not None and "rel" in old and "abs" in old:
        rel, abs_ = old["rel"], old["abs"]
    else:
        rel, abs_, _ = tolerance_for(key)
    return {"value": value, "rel": rel, "abs": abs_}


def rules_doc() -> list[str]:
    return [f"/{p}/: rel {rel:g}, abs {abs_:g} - {why}" for p, rel, abs_, why in RULES] + [
        "booleans, strings, lists and null: exact"]


def drift(actual: Mapping[str, Any], golden: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Messages for every key that drifted beyond its tolerance, is missing, or is new."""
    out = []
    for key, g in golden.items():
        if key not in actual:
            out.append(f"{key}: missing from the recomputed output (golden {g['value']!r})")
            continue
        a, v = actual[key], g["value"]
        if isinstance(a, float) and not math.isfinite(a):
            a = None
        if "rel" in g and is_number(v):
            if not is_number(a):
                out.append(f"{key}: {a!r}, golden {v!r}")
                continue
            diff = abs(a - v)
            if not (diff <= g["abs"] + 1e-12 or diff <= g["rel"] * abs(v) + 1e-12):
                rel = diff / abs(v) if v else math.inf
                out.append(f"{key}: {a!r}, golden {v!r} (diff {diff:.4g}, {100 * rel:.2f} %; "
                           f"tolerance rel {g['rel']:g} / abs {g['abs']:g})")
        elif a != v and not (is_number(a) and is_number(v) and float(a) == float(v)):
            out.append(f"{key}: {a!r}, golden {v!r} (must be equal)")
    for key in sorted(set(actual) - set(golden)):
        out.append(f"{key}: new key {actual[key]!r} not in the golden file")
    return out


def load(name: str) -> dict[str, Any]:
    path = GOLDEN_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; create it with `{REGENERATE}`")
    return json.loads(path.read_text())


def save(name: str, data: Mapping[str, Any]) -> Path:
    path = GOLDEN_DIR / name
    path.write_text(json.dumps(data, indent=1, sort_keys=False, allow_nan=False) + "\n")
    return path


def failure_message(case: str, problems: list[str]) -> str:
    return (f"{case}: model output drifted from the golden file:\n  " + "\n  ".join(problems)
            + f"\nIf the change is intended, regenerate with `{REGENERATE}` and review the diff in the commit.")


# ----------------------------------------------------------------------------- built-in scenarios

#: summary keys kept for each built-in scenario's short run (those the scenario reports)
SCENARIO_KEYS = ("cpu_limit_cores", "cpu_usage_cores", "nr_periods", "nr_throttled", "throttled_ratio",
                 "throttled_time_s", "throughput_per_s", "gomaxprocs", "latency_p50_s", "latency_p99_s",
                 "burn_p50_s", "burns", "gc_cycles", "gc_cpu_fraction", "sched_cpu_fraction", "backlog_final")

#: a short run of each built-in: long enough to be past start-up, short enough for CI
SHORT_RUN = ["run.duration_s=4", "run.warmup_s=1"]


def scenario_overrides(name: str) -> list[str]:
    extra = ["vpa.enabled=false"] if name == "grab-sinktos3" else []
    return [*SHORT_RUN, *extra]


def compute_scenario(name: str) -> dict[str, Any]:
    """The headline keys of ``simulate(name, scenario_overrides(name)).summary``."""
    from cfsim import simulate

    s = simulate(name, scenario_overrides(name)).summary
    return {k: s[k] for k in SCENARIO_KEYS if k in s}


TRAP_OVERRIDES = ["vpa.days=2"]


def compute_trap() -> dict[str, Any]:
    """``python -m cfsim trap --response analytic --set vpa.days=2``: phases, final state, fixes."""
    from cfsim.trap import run_trap

    d = run_trap("grab-sinktos3", list(TRAP_OVERRIDES), response_mode="analytic")["data"]
    out: dict[str, Any] = {}
    for name, p in d["phases"].items():
        out[f"{name}_request_cores"] = p["request_cores"]
        out[f"{name}_gomaxprocs"] = p["gomaxprocs"]
        out[f"{name}_t_h"] = p["t_h"]
    out["final_request_cores"] = d["final"]["request_cores"]
    out["final_usage_cores"] = d["final"]["usage_cores"]
    out["final_lag_growing"] = d["final"]["lag_growing"]
    for name, fx in d["fixes"].items():
        out[f"fix_{name}_request_cores"] = fx["final"]["request_cores"]
        out[f"fix_{name}_gomaxprocs"] = fx["final"]["gomaxprocs"]
        out[f"fix_{name}_lag_growing"] = fx["final"]["lag_growing"]
    out.update(compute_trap_event_point(d["final"]["request_cores"]))
    return out


TRAP_EVENT_RUN = ["vpa.enabled=false", "run.duration_s=6", "run.warmup_s=2"]


def compute_trap_event_point(limit_cores: float) -> dict[str, Any]:
    """The trapped state on the event engine: the scenario at the limit the VPA settled at (the
    analytic response says usage 1.0 core, GOMAXPROCS 1, lag growing; this is the engine's own)."""
    from cfsim import simulate

    s = simulate("grab-sinktos3", [*TRAP_EVENT_RUN, f"cgroup.cpu_limit={limit_cores}"]).summary
    return {"event_final_usage_cores": s["cpu_usage_cores"], "event_final_throughput_per_s": s["throughput_per_s"],
            "event_final_throttled_ratio": s["throttled_ratio"], "event_final_gomaxprocs": s["gomaxprocs"]}
