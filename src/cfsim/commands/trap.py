"""``python -m cfsim trap [SCENARIO] [--set k=v] [--params F.toml ...] [--format F] [--out DIR]``: the T0-T3 VPA/GOMAXPROCS trap.

A thin layer over :mod:`cfsim.trap` (the library the notebooks and tests use): runs the trap and
its fixes, writes the files, prints the timeline, phases and final states.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from cfsim.commands import CommandError
from cfsim.commands._params import add_params_argument, scenario_overrides
from cfsim.commands._paths import check_out_dir
from cfsim.output import Answer, add_format_argument, chosen_format, emit
from cfsim.progress import Progress
from cfsim.trap import DEFAULT_SCENARIO, plot, run_trap, write_csv


def add_parser(sub) -> None:
    p = sub.add_parser("trap", help="reproduce the T0-T3 VPA x GOMAXPROCS trap and its fixes over days")
    p.add_argument("scenario", nargs="?", default=DEFAULT_SCENARIO,
                   help=f"a scenario TOML file or built-in name with a [vpa] section (default {DEFAULT_SCENARIO})")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override any scenario key, e.g. --set vpa.integer_cpu=true --set vpa.days=3")
    add_params_argument(p)
    add_format_argument(p, 'the report (json/yaml: {"timeline", "final", "phases", "fixes": {name: {...}}, ...}; '
                           'csv/markdown/html: the final state of each run)')
    p.add_argument("--out", metavar="DIR", default="out/trap",
                   help="write trap.png, trap.csv, trap_<fix>.csv and trap.json here (default out/trap)")
    p.add_argument("--no-files", action="store_true", help="write no files")
    p.add_argument("--response", choices=("auto", "analytic", "surface"), default="auto",
                   help="pod response: event-engine surface (cached) or the analytic fallback (default auto)")
    p.add_argument("--limit-ratio", type=float, default=2.0,
                   help="limit/request of the 'limit above the request' fix (default 2)")
    p.add_argument("--no-t3", action="store_true", help="skip the T3 manual-override run")
    p.add_argument("--table-every-h", type=float, default=12.0, help="table row interval [h] (default 12)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar or progress lines on stderr")
    p.set_defaults(func=run)



class TrapProgress(Progress):
    """One bar over the long-horizon runs; on a terminal the response-surface points show as its
    note, elsewhere one stderr line per 10 % of a surface (measured once per configuration)."""

    def __init__(self, enabled: bool = True):
        super().__init__(None, "trap", "run", enabled)

    def __call__(self, stage: str, done: int, total: int) -> None:  # type: ignore[override]
        if stage == "surface":
            if self._bar is not None:
                self._bar.set_postfix_str(f"response surface {done}/{total} points", refresh=True)
            elif self.enabled:
                step = max(1, total // 10)
                if done == 1 or done % step == 0 or done == total:
                    self.write(f"measuring the pod response surface with the event engine: {done}/{total} "
                               f"points (cached afterwards)")
            return
        self.set_total(total) if total != self.total else None
        self.advance(done - self.done, stage)


def _fmt_lag(s: float | None) -> str:
    if s is None or not math.isfinite(s):
        return "-"
    if s < 120:
        return f"{s:.0f}s"
    if s < 7200:
        return f"{s / 60:.0f}m"
    if s < 172800:
        return f"{s / 3600:.1f}h"
    return f"{s / 86400:.1f}d"


def _fmt_t(t_s: float) -> str:
    d, rem = divmod(int(round(t_s)), 86400)
    h, rem = divmod(rem, 3600)
    return f"{d}d{h:02d}h{rem // 60:02d}"


def _fmt_c(x: float | None) -> str:
    if x is None:
        return "-"
    if x >= 1e6:
        return "inf"
    return f"{x:.3f}"


def table(rows: list[dict], every_s: float, marks: dict[float, str] | None = None) -> str:
    marks = marks or {}
    head = (f"{'phase':<5} {'time':>9} {'request':>8} {'limit':>7} {'GMP':>4} {'usage':>6} {'util':>5} "
            f"{'tput/s':>8} {'lag':>7} {'target':>7} {'lower':>7} {'upper':>7}")
    lines = [head, "-" * len(head)]
    picked: list[tuple[dict, str]] = []
    next_t = 0.0
    mark_times = sorted(marks)
    for r in rows:
        label = ""
        while mark_times and r["t_s"] >= mark_times[0] - 1e-9:
            label = marks[mark_times.pop(0)]
        if label or r["t_s"] + 1e-9 >= next_t or r is rows[-1]:
            picked.append((r, label))
            if r["t_s"] + 1e-9 >= next_t:
                next_t = (math.floor(r["t_s"] / every_s + 1e-9) + 1) * every_s
    for r, label in picked:
        util = f"{100 * r['usage_cores'] / r['request_cores']:.0f}%" if r["request_cores"] else "-"
        lines.append(f"{label:<5} {_fmt_t(r['t_s']):>9} {_fmt_c(r['request_cores']):>8} {_fmt_c(r['limit_cores']):>7} "
                     f"{r['gomaxprocs']:>4} {r['usage_cores']:>6.3f} {util:>5} {r['throughput_per_s']:>8.0f} "
                     f"{_fmt_lag(r['lag_s']):>7} {_fmt_c(r['vpa_target_cores']):>7} {_fmt_c(r['vpa_lower_cores']):>7} "
                     f"{_fmt_c(r['vpa_upper_cores']):>7}")
    return "\n".join(lines)


def _final_line(name: str, f: dict) -> str:
    return (f"{name:<22} request {_fmt_c(f['request_cores'])}  limit {_fmt_c(f['limit_cores'])}  "
            f"GOMAXPROCS {f['gomaxprocs']}  usage {f['usage_cores']:.3f}  tput {f['throughput_per_s']:.0f}/s  "
            f"lag {_fmt_lag(f['lag_s'])} ({'growing' if f['lag_growing'] else 'not growing'})")


def _final_rows(data: dict) -> list[dict]:
    runs = [("trap", [], data["final"])] + [(n, fx["overrides"], fx["final"]) for n, fx in data["fixes"].items()]
    if "t3_manual_override" in data:
        runs.append(("t3_manual_override", ["vpa.min_allowed_cores=2.0"], data["t3_manual_override"]["final"]))
    keys = ("request_cores", "limit_cores", "gomaxprocs", "usage_cores", "throughput_per_s", "lag_s", "lag_growing")
    return [{"run": name, "overrides": " ".join(ovr), **{k: f.get(k) for k in keys}} for name, ovr, f in runs]


def run(args) -> int:
    fmt = chosen_format(args)
    if not args.no_files:
        check_out_dir(args.out, "--out")
    if not (math.isfinite(args.table_every_h) and args.table_every_h > 0):
        raise CommandError(f"--table-every-h must be a number of hours > 0 (got {args.table_every_h:g})")
    overrides = scenario_overrides(args.scenario, args.set, args.params)
    with TrapProgress(enabled=not args.no_progress) as progress:
        report = run_trap(args.scenario, overrides, args.response, args.limit_ratio, with_t3=not args.no_t3,
                          progress=progress)
    data, results = report["data"], report["results"]
    files: dict[str, str] = {}
    if not args.no_files and args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        write_csv(results["trap"].rows, out / "trap.csv")
        files["csv"] = str(out / "trap.csv")
        for name, res in results.items():
            if name != "trap":
                write_csv(res.rows, out / f"trap_{name}.csv")
        plot(results, out / "trap.png", f"{data['scenario']}: VPA x GOMAXPROCS trap and fixes")
        files["png"] = str(out / "trap.png")
        data["files"] = files
        (out / "trap.json").write_text(json.dumps(data, indent=1) + "\n")
        files["json"] = str(out / "trap.json")
    emit(Answer(data, _final_rows(data), lambda: _text(args, data, results, files), "cfsim trap"), fmt)
    return 0


def _text(args, data: dict, results: dict, files: dict) -> str:
    lines: list[str] = []
    say = lines.append
    say(f"scenario {data['scenario']}  demand {data['demand_cores_per_replica']:.3f} cores/replica  "
          f"{data['days']:.2f} days  GOMAXPROCS {data['gomaxprocs_policy']}  response: {data['response']}")
    marks = {p["state_at_s"]: name for name, p in data["phases"].items() if name != "T3"}
    say(table(results["trap"].rows, args.table_every_h * 3600.0, marks))
    say("\nphases (state one hour in, or just before the next rollout):")
    for name, p in data["phases"].items():
        util = p["utilization_of_request"]
        say(f"  {name} at {_fmt_t(p['t_s'])}: request {_fmt_c(p['request_cores'])}, GOMAXPROCS {p['gomaxprocs']}, "
              f"usage {p['usage_cores']:.3f} ({'-' if util is None else f'{100 * util:.0f}%'} of request), "
              f"lag {_fmt_lag(p['lag_s'])}  - {p['what']}")
    say("\nfinal state:")
    say("  " + _final_line("trap", data["final"]))
    for name, fx in data["fixes"].items():
        say("  " + _final_line(name, fx["final"]) + f"   [{', '.join(fx['overrides'])}]")
    if "t3_manual_override" in data:
        say("  " + _final_line("T3 manual override", data["t3_manual_override"]["final"]))
    for name, res in results.items():
        if name not in ("trap", "t3_manual_override"):
            say(f"\n{name}:")
            say(table(res.rows, 24 * 3600.0))
    if files:
        say("\nwrote " + ", ".join(files.values()))
    return "\n".join(lines)
