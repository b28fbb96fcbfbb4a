"""Markdown tables of a lab grid for data/README.md, computed from the run folders (so no figure
in the README is typed by hand): counts, calibration drift, repeat spread, and pivot tables.

    python -m cfsim.lab.report data/lab/gc-memory [--pivot KEY ROW COL]... [--rows COL,COL,...]
    python -m cfsim.lab.report data/lab/kernel-switches --perf   (runs with lab.perf_s)
    python -m cfsim.lab.report data/lab/sleep-causes --sleeps    (runs with lab.sleep_stacks_s)
    python -m cfsim.lab.report --manifest data/lab GRID...   (refresh data/lab/manifest.json entries)
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any, Iterator

import pandas as pd

from cfsim.io.manifest import has_manifest, read_manifest
from cfsim.lab import sleeps, table


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return str(v)


def _pct(v: Any) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:+.1f} %"


def counts(grid_dir: Path) -> dict[str, Any]:
    g = json.loads((grid_dir / "grid.json").read_text())
    status = [r["status"] for r in g["runs"].values()]
    return {"planned": len(g["order"]), "finished": sum(s != "failed" for s in status),
            "failed": status.count("failed"), "oom": status.count("oom"),
            "died": status.count("died"), "started_utc": g.get("started_utc"), "finished_utc": g.get("finished_utc")}


def drift_lines(grid_dir: Path) -> list[str]:
    d = json.loads((grid_dir / "grid.json").read_text()).get("drift") or {}
    out = []
    cal = d.get("calibration")
    if cal:
        out.append("calibration (calib-end vs calib-start): throughput "
                   f"{_pct(cal['throughput_per_s']['relative_change'])}, CPU {_pct(cal['cpu_usage_cores']['relative_change'])}, "
                   f"p99 {_pct(cal['latency_p99_s']['relative_change'])}, start-up loop calibration "
                   f"{_pct(cal['calibration_rounds_per_cpu_ms']['relative_change'])}")
    rep = d.get("repeats") or {}
    ov = rep.get("overall") or {}
    if ov.get("points"):
        parts = [f"{k} median {_pct(v['median']).lstrip('+')} / max {_pct(v['max']).lstrip('+')}"
                 for k, v in ov.items() if isinstance(v, dict) and k in
                 ("throughput_per_s", "cpu_usage_cores", "latency_p99_s", "gc_cycles", "throttled_ratio")]
        comparable = [r.get("comparable") for r in rep["per_point"].values()]
        out.append(f"repeats ({ov['points']} points, (max-min)/mean over their runs): " + "; ".join(parts)
                   + f"; points whose runs saw other tenants within 0.25 cores of each other: "
                   f"{sum(c is True for c in comparable)} of {len(comparable)}")
    return out


def pivot(df: pd.DataFrame, value: str, row: str, col: str, digits: int = 3) -> str:
    """A markdown pivot of ``value`` (mean over repeats) by two columns."""
    df = df.copy()
    for c in (row, col):  # numeric axes in numeric order (GOMAXPROCS is a string column)
        num = pd.to_numeric(df[c], errors="coerce")
        if num.notna().all():
            df[c] = num
    p = df.pivot_table(index=row, columns=col, values=value, aggfunc="mean")
    head = f"| {row.removeprefix('scenario.')} \\ {col.removeprefix('scenario.')} | " + \
        " | ".join(_fmt(c) for c in p.columns) + " |"
    lines = [head, "|" + "---|" * (len(p.columns) + 1)]
    for idx, r in p.iterrows():
        lines.append(f"| {_fmt(idx)} | " + " | ".join(_fmt(v, digits) for v in r.values) + " |")
    return "\n".join(lines)


def rows(df: pd.DataFrame, columns: list[str], digits: int = 3) -> str:
    """A markdown table of some columns, one row per run."""
    lines = ["| " + " | ".join(c.removeprefix("scenario.") for c in columns) + " |", "|" + "---|" * len(columns)]
    df = df.copy()
    for c in columns:
        if c.endswith("_bytes") and c in df:
            df[c] = df[c] / 2**20  # MiB in the tables
    lines[0] = lines[0].replace("_bytes", "_MiB")
    for _, r in df.iterrows():
        lines.append("| " + " | ".join(_fmt(r.get(c), digits) for c in columns) + " |")
    return "\n".join(lines)


def profile_rows(grid_dir: Path) -> list[dict[str, Any]]:
    """Per run with a profile: its user / scheduler / GC split and how much of the cgroup's CPU
    over the profile's interval it sampled (usage interpolated from the exported raw samples of
    container_cpu_usage_seconds_total)."""
    from cfsim.io.lab import load_lab_run
    from cfsim.lab import derive

    out = []
    g = json.loads((grid_dir / "grid.json").read_text())
    for name in g["order"]:
        folder = grid_dir / name
        if not (folder / "summary.json").exists():
            continue
        run = load_lab_run(folder)
        m = run["manifest"]
        prof = m.get("profile") or {}
        split = prof.get("split") or {}
        if not split.get("cpu_s"):
            continue
        t0 = m["times"]["start_unix_s"]
        usage = run["samples"].get("container_cpu_usage_seconds_total")
        u0 = derive.samples_at(usage, t0 + prof["start_t_s"], "cadvisor") if usage else None
        u1 = derive.samples_at(usage, t0 + prof["end_t_s"], "cadvisor") if usage else None
        cg = None if u0 is None or u1 is None else u1 - u0
        sc = m["scenario"]
        out.append({"run": name, "kind": sc["workload"]["kind"], "cpu_limit": sc["cgroup"].get("cpu_limit"),
                    "gomaxprocs": sc["go"]["gomaxprocs"], "profile_cpu_s": split["cpu_s"], "cgroup_cpu_s": cg,
                    "coverage": None if not cg else split["cpu_s"] / cg,
                    **{f"{k}_fraction": v for k, v in split["fraction"].items()},
                    "async_preempt_leaf_s": async_preempt_leaf_s(split),
                    **{f"detail_{k}_s": v for k, v in split["detail_cpu_s"].items()}})
    return out


def _probe_blocks(grid_dir: Path, key: str) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """``(run, summary, block)`` for each finished run of the grid, in its order, whose manifest's
    probe block ``key`` holds rates (``per_s``)."""
    g = json.loads((grid_dir / "grid.json").read_text())
    for name in g["order"]:
        sp = grid_dir / name / "summary.json"
        if not (has_manifest(grid_dir / name) and sp.exists()):
            continue
        block = read_manifest(grid_dir / name).get(key) or {}
        if block.get("per_s"):
            yield name, json.loads(sp.read_text()), block


def perf_rows(grid_dir: Path) -> list[dict[str, Any]]:
    """Per run with a ``lab.perf_s`` block: the kernel's counters per second and its CPU share."""
    out = []
    for name, s, block in _probe_blocks(grid_dir, "perf"):
        rate = block["per_s"]
        out.append({"run": name, "gomaxprocs": s.get("gomaxprocs"), "throughput_per_s": s.get("throughput_per_s"),
                    "cpu_usage_cores": s.get("cpu_usage_cores"), "context_switches_per_s": rate.get("context-switches"),
                    "migrations_per_s": rate.get("cpu-migrations"), "signals_per_s": rate.get("signal:signal_deliver"),
                    "page_faults_per_s": rate.get("page-faults"), "kernel_fraction": block.get("kernel_fraction"),
                    **{f"{k.removeprefix('syscalls:sys_enter_')}_per_s": v
                       for k, v in rate.items() if k.startswith("syscalls:")}})
    return out


def sleep_rows(grid_dir: Path) -> list[dict[str, Any]]:
    """Per run with a ``lab.sleep_stacks_s`` block: its threads' sleeps a record or request by cause
    (:mod:`cfsim.lab.sleeps`), and the Ms' (all but sysmon's)."""
    out = []
    for name, s, block in _probe_blocks(grid_dir, "thread_sleeps"):
        items = s.get("throughput_per_s")
        per_item = sleeps.thread_sleeps_per_item(block, items)
        if not per_item:
            continue
        out.append({"run": name, "gomaxprocs": s.get("gomaxprocs"), "throughput_per_s": items,
                    "m_sleeps_per_item": block["m_sleeps_per_s"] / items,
                    **{k.removeprefix("os_thread_sleeps_"): v for k, v in per_item.items()}})
    return out


def async_preempt_leaf_s(split: dict[str, Any]) -> float:
    """CPU [s] of the samples whose leaf is ``runtime.asyncPreempt`` (in profsplit's top leaves):
    where a signal-based preemption resumed the goroutine (signal_unix.go doSigPreempt points the
    interrupted context at asyncPreempt), so a sample pending during the signal handler lands there."""
    return sum(x["cpu_s"] for key in ("top_scheduler_leaf", "top_gc_leaf")
               for x in split.get(key) or [] if x.get("function") == "runtime.asyncPreempt")


def manifest_entry(grid_dir: Path) -> dict[str, Any]:
    """data/lab/manifest.json's entry for a grid, from its grid.json and run manifests."""
    g = json.loads((grid_dir / "grid.json").read_text())
    c = counts(grid_dir)
    starts, ends, commits, kernels, hz = [], [], set(), set(), set()
    for name in g["order"]:
        if not has_manifest(grid_dir / name):
            continue
        m = read_manifest(grid_dir / name)
        t = m.get("times") or {}
        if "start_utc" in t:
            starts.append(t["start_utc"])
        if "end_unix_s" in t:
            ends.append(t["end_unix_s"])
        commits.add((m.get("code") or {}).get("commit"))
        kernels.add((m.get("host") or {}).get("kernel"))
        hz.add((m.get("host") or {}).get("hz"))
    import datetime as dt

    return {"command": g["command"], "designs": g.get("designs"), "axes": g.get("axes"),
            "runs": c["finished"], "failed": c["failed"], "oom": c["oom"],
            "drift": (g.get("drift") or {}).get("headline"),
            "first_run_start_utc": min(starts) if starts else None,
            "last_run_end_utc": dt.datetime.fromtimestamp(max(ends), dt.timezone.utc).isoformat() if ends else None,
            "code_commits": sorted(x for x in commits if x), "kernels": sorted(x for x in kernels if x),
            "hz": sorted(x for x in hz if x), "grid_json": f"{grid_dir.name}/grid.json"}


def update_manifest(data_lab: Path, grids: list[str]) -> None:
    """Write (or refresh) the named grids' entries in data/lab/manifest.json."""
    path = Path(data_lab) / "manifest.json"
    m = json.loads(path.read_text())
    for name in grids:
        m["grids"][name] = manifest_entry(Path(data_lab) / name)
    path.write_text(json.dumps(m, indent=1) + "\n")


def _grid_dir(path: Path) -> Path:
    """``path`` if it is a lab grid folder (it has the ``grid.json`` a grid writes), else an error."""
    if not (path / "grid.json").is_file():
        raise SystemExit(f"error: {path}: not a lab grid folder (no grid.json in it)")
    return path


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if args else 2
    if args[0] == "--manifest":
        if len(args) < 3:
            raise SystemExit("error: --manifest needs the data/lab folder and at least one grid name")
        for name in args[2:]:
            _grid_dir(Path(args[1]) / name)
        update_manifest(Path(args[1]), args[2:])
        return 0
    grid_dir = _grid_dir(Path(args.pop(0)))
    c = counts(grid_dir)
    print(f"{grid_dir.name}: {c['finished']} of {c['planned']} runs finished, {c['failed']} failed, "
          f"{c['oom']} OOM-killed ({c['started_utc']} .. {c['finished_utc']})")
    for line in drift_lines(grid_dir):
        print("- " + line)
    df = table.grid_table(grid_dir)
    needs = {"--match": 1, "--pivot": 3, "--rows": 1, "--profiles": 0, "--perf": 0, "--sleeps": 0}
    while args:
        if args[0] in needs and len(args) <= needs[args[0]]:
            raise SystemExit(f"error: {args[0]} needs {needs[args[0]]} value(s)")
        if args[0] == "--match":  # keep the runs whose name contains this text (e.g. a design)
            df = df[df["run"].str.contains(args[1], regex=False)]
            del args[:2]
            continue
        if args[0] == "--pivot":
            value, row, col = args[1:4]
            del args[:4]
            print(f"\n{value}:\n")
            print(pivot(df[df["role"] != "calibration"], value, row, col))
        elif args[0] == "--profiles":
            del args[:1]
            prof = pd.DataFrame(profile_rows(grid_dir))
            print()
            print(rows(prof, [c for c in ("run", "cpu_limit", "gomaxprocs", "profile_cpu_s", "cgroup_cpu_s",
                                          "coverage", "user_fraction", "scheduler_fraction", "gc_fraction",
                                          "async_preempt_leaf_s", "detail_user_alloc_s", "detail_gc_assist_s") if c in prof]))
        elif args[0] == "--perf":
            del args[:1]
            print()
            print(rows(pd.DataFrame(perf_rows(grid_dir)), ["run", "gomaxprocs", "throughput_per_s", "cpu_usage_cores",
                                                           "context_switches_per_s", "migrations_per_s",
                                                           "signals_per_s", "page_faults_per_s", "kernel_fraction",
                                                           "futex_per_s", "nanosleep_per_s", "epoll_pwait_per_s",
                                                           "sched_yield_per_s", "read_per_s", "write_per_s"]))
        elif args[0] == "--sleeps":
            del args[:1]
            print()
            print(rows(pd.DataFrame(sleep_rows(grid_dir)),
                       ["run", "gomaxprocs", "throughput_per_s", "m_sleeps_per_item",
                        *(f"{c}_per_item" for c in sleeps.CAUSES)]))
        elif args[0] == "--rows":
            cols = args[1].split(",")
            del args[:2]
            print()
            print(rows(df[df["role"] != "calibration"], cols))
        else:
            raise SystemExit(f"unknown option {args[0]!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
