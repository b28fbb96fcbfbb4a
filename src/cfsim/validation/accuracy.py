"""How far the model was off from the lab, by regime and GOMAXPROCS: the table ``run`` shows next
to its answer.

A validation report (``cfsim validate data/lab --report DIR``) holds one row per lab run with
the twin's error on each metric. Grouped by the run's regime (:mod:`cfsim.validation.regimes`:
which cap, if any, decided its CPU) and by its GOMAXPROCS, the held-out runs say how well the
model answered runs *like* a given scenario: a simulated scenario is put in the same regime
from its own summary and looked up (:mod:`cfsim.overheads.accuracy`). The table is written to
a TOML file with how it was made, so a user sees measured errors, not a claim::

    python -m cfsim validate data/lab --params ... --report DIR
    python -m cfsim.validation.accuracy DIR --out src/cfsim/overheads/lab_accuracy.toml

Per cell and metric: the runs, the median |error| and the median signed error (relative
errors as fractions, the throttled ratio in absolute points); for latencies also the median
factor ``max(sim/obs, obs/sim)``, the form the p99 goal takes.

>>> def run(regime, g, cpu_err, p99_obs, p99_sim):
...     return {"held_out": True, "regime": regime, "observed": {"gomaxprocs": g, "latency_p99_s": p99_obs},
...             "simulated": {"latency_p99_s": p99_sim}, "errors": {"cpu_usage_cores": cpu_err,
...             "latency_p99_s": p99_sim / p99_obs - 1}}
>>> rows = accuracy_rows([run("uncapped", 2, 0.05, 2e-3, 1e-3), run("uncapped", 2, -0.01, 2e-3, 3e-3)], min_runs=1)
>>> [(r["regime"], r["gomaxprocs"], r["metric"], r["runs"], r["median_abs"]) for r in rows][:2]
[('uncapped', '2', 'cpu_usage_cores', 2, 0.03), ('uncapped', '2', 'latency_p99_s', 2, 0.5)]
>>> rows[1]["median_factor"]
1.75
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import statistics
import subprocess
from pathlib import Path
from typing import Any, Iterable, Mapping

from cfsim.validation.naive import error_factor
from cfsim.validation.regimes import GOMAXPROCS_BINS, gomaxprocs_bin, run_gomaxprocs

#: the metrics the table carries (the README's questions)
METRICS = ("cpu_usage_cores", "throughput_per_s", "throttled_ratio", "latency_p50_s", "latency_p99_s",
           "gc_cycles_per_s", "gc_heap_goal_mean_bytes", "memory_usage_mean_bytes", "gc_pause_s_per_s",
           "gc_cycle_pause_p50_s")
#: latencies and a cycle's typical pause (off by factors at many Ps) also get a median factor
FACTOR_METRICS = ("latency_p50_s", "latency_p99_s", "gc_cycle_pause_p50_s")
#: the highest GOMAXPROCS the lab's grids ran
LAB_MAX_GOMAXPROCS = 64
#: all GOMAXPROCS of a regime pooled (the fallback of a thin cell)
ALL = "all"
#: fewer held-out runs than this in a cell: left out of the table
MIN_RUNS = 5


def _cell(regime: str, label: str, runs: list[Mapping[str, Any]], min_runs: int) -> list[dict[str, Any]]:
    out = []
    for metric in METRICS:
        errs = [float(r["errors"][metric]) for r in runs if r["errors"].get(metric) is not None]
        if len(errs) < min_runs:
            continue
        row: dict[str, Any] = {"regime": regime, "gomaxprocs": label, "metric": metric, "runs": len(errs),
                               "median_abs": round(statistics.median(abs(e) for e in errs), 4),
                               "median": round(statistics.median(errs), 4)}
        if metric in FACTOR_METRICS:
            fs = [f for e in errs if math.isfinite(f := error_factor(e))]
            if fs:
                row["median_factor"] = round(statistics.median(fs), 3)
        out.append(row)
    return out


def accuracy_rows(runs: Iterable[Mapping[str, Any]], min_runs: int = MIN_RUNS) -> list[dict[str, Any]]:
    """The table's rows from a report's runs: held-out runs only, by regime and GOMAXPROCS bin
    (and each regime over every GOMAXPROCS, ``gomaxprocs = "all"``); cells with fewer than
    ``min_runs`` errors on a metric are left out."""
    held = [r for r in runs if r.get("held_out") and r.get("regime") and r.get("errors")]
    by: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in held:
        label = gomaxprocs_bin(run_gomaxprocs(r))
        if label is not None:
            by.setdefault((r["regime"], label), []).append(r)
        by.setdefault((r["regime"], ALL), []).append(r)
    order = {label: i for i, (label, _, _) in enumerate(GOMAXPROCS_BINS)} | {ALL: len(GOMAXPROCS_BINS)}
    out: list[dict[str, Any]] = []
    for (regime, label), rs in sorted(by.items(), key=lambda kv: (kv[0][0], order[kv[0][1]])):
        out += _cell(regime, label, rs, min_runs)
    return out


def _toml_value(v: Any) -> str:
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return repr(v)


def accuracy_toml(rows: list[dict[str, Any]], source: Mapping[str, Any]) -> str:
    """The table as TOML: a ``[source]`` table saying how it was made, then ``cells``, one inline
    table a row (read back with :func:`cfsim.overheads.accuracy.read_accuracy`)."""
    lines = ["# How far the model was off from the lab's held-out runs, by regime and GOMAXPROCS",
             "# (cfsim.validation.accuracy; shown by `cfsim run`). Errors: relative as fractions,",
             "# throttled_ratio in absolute points; median_factor = median of max(sim/obs, obs/sim).",
             "cells = ["]
    lines += ["  {" + ", ".join(f"{k} = {_toml_value(v)}" for k, v in r.items()) + "}," for r in rows]
    lines += ["]", "", "[source]"]
    params = source.get("params") or {}
    lines += [f"{k} = {_toml_value(v)}" for k, v in source.items() if k != "params"]
    if params:
        lines += ["", "[source.params]"] + [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in sorted(params.items())
                                            if isinstance(v, (int, float, str, bool))]
    return "\n".join(lines) + "\n"


def _git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True, cwd=Path(__file__).parent).stdout.strip() or None
    except (OSError, subprocess.CalledProcessError):
        return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cfsim.validation.accuracy",
                                 description="the lab-accuracy table from a validation report")
    ap.add_argument("report", help="a `cfsim validate --report` folder (its report.json)")
    ap.add_argument("--out", required=True, help="the TOML file to write")
    ap.add_argument("--min-runs", type=int, default=MIN_RUNS)
    ap.add_argument("--params-file", action="append", default=[], metavar="F.toml",
                    help="a --params file the validation took (recorded in the table's source)")
    args = ap.parse_args(argv)
    path = Path(args.report) / "report.json"
    if not path.is_file():
        ap.error(f"{path}: no report.json (run `cfsim validate ... --report {args.report}` first)")
    report = json.loads(path.read_text())
    runs = report.get("runs") or []
    rows = accuracy_rows(runs, args.min_runs)
    params = report.get("params") or {}
    source = {"made": _dt.date.today().isoformat(), "commit": _git_commit() or "unknown",
              "runs": sum(1 for r in runs if r.get("held_out")), "min_runs": args.min_runs,
              "params_files": list(args.params_file), "lab_host_cpus": 2,
              "how": "python -m cfsim validate data/lab --params F ... --report DIR; "
                     "python -m cfsim.validation.accuracy DIR --out FILE --params-file F ...",
              "params": params if isinstance(params, dict) else {}}
    Path(args.out).write_text(accuracy_toml(rows, source))
    print(f"{args.out}: {len(rows)} cells from {source['runs']} held-out runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
