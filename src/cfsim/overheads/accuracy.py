"""How far the model was off from the lab on runs like a given scenario: what ``run`` shows under
its answer.

The table (``lab_accuracy.toml`` beside this module, made by :mod:`cfsim.validation.accuracy`
from a whole-lab validation) holds, per regime and GOMAXPROCS bin, the held-out lab runs' median
errors. A simulated scenario is put in a regime the way a lab run is
(:func:`cfsim.validation.regimes.classify_regime`), from its own summary: its CPU against the
limit, GOMAXPROCS and the host's CPUs, and against the host's other load
(``host.background_cores``). Those are the twins' errors on a 2-CPU host, each twin calibrated
on its grid's calibration runs; a scenario on a bigger host, or beyond GOMAXPROCS 64, gets the
table with that said, not a claim that it was checked there.
"""
from __future__ import annotations

import functools
import tomllib
from pathlib import Path
from typing import Any, Mapping

from cfsim.scenario import Scenario

#: the committed table
TABLE = Path(__file__).with_name("lab_accuracy.toml")
#: regimes a lookup never answers from (no comparable window)
SKIP_REGIMES = ("oom-killed",)


def read_accuracy(path: str | Path | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``(cells, source)`` of a lab-accuracy table (default: the committed one)."""
    p = Path(path) if path is not None else TABLE
    try:
        data = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{p}: not a lab-accuracy table: {exc}") from None
    cells = data.get("cells")
    if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
        raise ValueError(f"{p}: no 'cells' array of tables")
    return cells, dict(data.get("source") or {})


@functools.lru_cache(maxsize=4)
def _committed(path: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    return read_accuracy(path)


def scenario_regime(sc: Scenario, summary: Mapping[str, Any]) -> str:
    """The regime a simulated scenario falls in, read from its own summary as a lab run's is read
    from its measurements."""
    from cfsim.overheads.coverage import effective_gomaxprocs, is_go
    from cfsim.validation.regimes import classify_regime

    if summary.get("oom_killed"):
        return "oom-killed"
    cpus = int(sc["host.cpus"])
    usage = summary.get("cpu_usage_cores")
    others = float(sc["host.background_cores"] or 0.0)
    busy = None if usage is None else float(usage) + others
    return classify_regime(None if usage is None else float(usage), cpus, sc["cgroup.cpu_limit"],
                           effective_gomaxprocs(sc) if is_go(sc) else None, go_work=is_go(sc),
                           host_busy_cores=busy, others_cores=others)


def lab_accuracy(sc: Scenario, summary: Mapping[str, Any], path: str | Path | None = None) -> dict[str, Any] | None:
    """The table's rows for runs like ``sc``: ``{"regime", "gomaxprocs", "metrics": {metric: row},
    "source", "notes"}``; a metric whose GOMAXPROCS cell is thin comes from the regime's rows over
    every GOMAXPROCS (its row says ``gomaxprocs = "all"``). None for a scenario that is not a Go
    process, or a regime the table does not hold."""
    from cfsim.overheads.coverage import effective_gomaxprocs, is_go
    from cfsim.validation.accuracy import ALL, LAB_MAX_GOMAXPROCS
    from cfsim.validation.regimes import gomaxprocs_bin

    if not is_go(sc):
        return None
    regime = scenario_regime(sc, summary)
    if regime in SKIP_REGIMES:
        return None
    cells, source = _committed(str(path or TABLE))
    mine = [c for c in cells if c.get("regime") == regime]
    if not mine:
        return None
    procs = effective_gomaxprocs(sc)
    label = gomaxprocs_bin(min(procs, LAB_MAX_GOMAXPROCS))
    metrics: dict[str, dict[str, Any]] = {}
    for c in mine:
        if c.get("gomaxprocs") == ALL:
            metrics.setdefault(c["metric"], c)
    for c in mine:
        if c.get("gomaxprocs") == label:
            metrics[c["metric"]] = c
    notes = []
    cpus = int(sc["host.cpus"])
    lab_cpus = int(source.get("lab_host_cpus") or 2)
    if cpus > lab_cpus:
        notes.append(f"measured on a {lab_cpus}-CPU host; this scenario has {cpus}")
    if procs > LAB_MAX_GOMAXPROCS:
        notes.append(f"GOMAXPROCS {procs}: the lab's runs reach {LAB_MAX_GOMAXPROCS}")
    return {"regime": regime, "gomaxprocs": label, "metrics": metrics, "notes": notes,
            "source": {k: source.get(k) for k in ("made", "commit", "runs")}}


def _pct(v: float) -> str:
    return f"{v * 100:+.1f} %"


def accuracy_lines(acc: Mapping[str, Any] | None, summary: Mapping[str, Any] | None = None) -> list[str]:
    """The text ``run`` prints: one line a metric the summary answers."""
    from cfsim.validation.metrics import BY_NAME
    from cfsim.validation.regimes import CAPPED

    if not acc or not acc.get("metrics"):
        return []
    src = acc.get("source") or {}
    lines = [f"lab accuracy (held-out lab runs in the same regime, {acc['regime']}, at GOMAXPROCS "
             f"{acc['gomaxprocs']}; median errors of twins calibrated per grid; table of {src.get('made')}, "
             f"{src.get('runs')} runs):"]
    if acc["regime"] in CAPPED:
        lines.append(f"  ({acc['regime']}: a cap decides these runs' CPU, lab and model alike; the errors that "
                     f"test the model here are the per-item cost, latency and GC)")
    for metric, c in acc["metrics"].items():
        known = BY_NAME.get(metric)
        if summary is not None and known is not None and known.get(summary) is None:
            continue
        where = "" if c.get("gomaxprocs") == acc["gomaxprocs"] else ", every GOMAXPROCS"
        if metric == "throttled_ratio":
            body = f"|error| {c['median_abs']:.3f} of the periods (signed {c['median']:+.3f})"
        elif "median_factor" in c:
            body = f"factor {c['median_factor']:.2f} (signed {_pct(c['median'])})"
        else:
            body = f"|error| {abs(c['median_abs']) * 100:.1f} % (signed {_pct(c['median'])})"
        lines.append(f"  {metric:<24} {body}, {c['runs']} runs{where}")
    lines += [f"  note: {n}" for n in acc.get("notes") or []]
    return lines


def _cell_text(metric: str, c: Mapping[str, Any]) -> str:
    if metric == "throttled_ratio":
        return f"throttled ratio |error| {c['median_abs']:.3f}"
    if "median_factor" in c:
        return f"{metric.removesuffix('_s').replace('latency_', '')} factor {c['median_factor']:.2f}"
    return f"{metric.split('_')[0]} |error| {abs(c['median_abs']) * 100:.1f} %"


def accuracy_phrase(acc: Mapping[str, Any] | None,
                    metrics: tuple[str, ...] = ("cpu_usage_cores", "throttled_ratio", "latency_p99_s")) -> str:
    """One clause for a one-line answer (``audit``): the regime, the GOMAXPROCS bin and a few
    metrics' median errors, e.g. ``lab runs like it (uncapped, GOMAXPROCS 2): cpu |error| 4.5 %,
    throttled ratio |error| 0.000, p99 factor 1.37``; "" without a table row."""
    if not acc or not acc.get("metrics"):
        return ""
    parts = [_cell_text(m, acc["metrics"][m]) for m in metrics if m in acc["metrics"]]
    if not parts:
        return ""
    return f"lab runs like it ({acc['regime']}, GOMAXPROCS {acc['gomaxprocs']}): " + ", ".join(parts)


#: the metrics a sweep point carries a column for (``sweep --band``)
COLUMN_METRICS = ("cpu_usage_cores", "throughput_per_s", "throttled_ratio", "latency_p99_s")


def accuracy_columns(acc: Mapping[str, Any] | None) -> dict[str, Any]:
    """Flat columns for a sweep point (``sweep --band``): ``lab_regime``, ``lab_gomaxprocs_bin``,
    and per metric of :data:`COLUMN_METRICS` the lab's median |error| (``lab_<metric>_abs_error``;
    for latencies the median factor, ``lab_<metric>_factor``); None where there is no row."""
    out: dict[str, Any] = {"lab_regime": acc.get("regime") if acc else None,
                           "lab_gomaxprocs_bin": acc.get("gomaxprocs") if acc else None}
    cells = (acc or {}).get("metrics") or {}
    for m in COLUMN_METRICS:
        c = cells.get(m)
        if m.startswith("latency_"):
            out[f"lab_{m}_factor"] = None if c is None else c.get("median_factor")
        else:
            out[f"lab_{m}_abs_error"] = None if c is None else c.get("median_abs")
    return out

