"""Before against after in one run: the engine and busy-service cases of ``bench_engine.py`` and
``bench_busy.py``, timed in two long-lived processes (an earlier commit's compiled build, and this
checkout) that take turns case by case, so that both see the same state of this shared VM.

    python benchmarks/bench_ab.py --before REF [--repeats 7] [--json]
    python benchmarks/bench_ab.py --before-path DIR     # an unpacked build made earlier

``--before REF`` exports the commit with ``git archive``, builds it with ``pip wheel`` (the
install's mypyc build; about a minute) into a temporary folder and imports cfsim from there; the
after side is the checkout as installed (``scripts/setup.sh``). Times are the CPU time of
``simulate()`` in each process (the VM's steal leaves it alone, its slow spells do not: hence the
turns), as simulated seconds per CPU second; the report gives each side's median and the median of
the per-turn ratios after / before.

Measured (2026-12-04, session 62; 11 turns, reference loop 22.6-27.3 ms; before bd9ca1fe, after
076e3e05: the engine runs the event loop itself with its events as compiled objects, and keeps its
clock in a native slot), per CPU second, before -> after (median of the per-turn ratios):
8 CPU-bound threads 1,609 -> 2,185x (1.34), 200 threads 70.5 -> 88.6x (1.27), closed 256 clients at
GOMAXPROCS 2 / 8 / 24 / 64 6.8 / 6.8 / 5.7 / 5.7 -> 8.2 / 8.0 / 7.1 / 6.8x (1.21 / 1.19 / 1.24 /
1.19), open 100k requests/s 0.5 -> 0.7x (1.24); every turn's summaries identical.

2026-12-05 (session 70; 9 turns, before 8af0b798, after the twins' sysmon counters and the
calibration-measured sysmon inputs): after / before 1.03 / 1.02 (8 and 200 threads), 0.97 / 0.99 /
1.00 / 1.01 (closed at GOMAXPROCS 2 / 8 / 24 / 64), 0.98 (open 100k), each inside its turns' spread
(0.82-1.19); the shared summary keys identical, the after side adding ``sysmon_sleeps_per_s`` and
``sysmon_cpu_cores``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent

sys.path.insert(0, str(HERE))
import bench_busy  # noqa: E402
import bench_engine  # noqa: E402

#: simulated seconds of a busy case (the open loop at 100k requests/s is slower: a shorter span)
BUSY_SPAN_S, OPEN_SPAN_S = 0.5, 0.1


def cases() -> dict[str, tuple[str, list[str], float]]:
    """name -> (base scenario, overrides, simulated seconds): ``bench_engine``'s and ``bench_busy``'s
    cases as those scripts define them."""
    out = {}
    for name, (base, overrides, _goal) in bench_engine.CASES.items():
        span = next(float(o.split("=", 1)[1]) for o in overrides if o.startswith("run.duration_s="))
        out[name] = (base, overrides, span)
    for name, (overrides, _goal) in bench_busy.CASES.items():
        span = OPEN_SPAN_S if "workload.kind=open" in overrides else BUSY_SPAN_S
        out[name] = (bench_busy.BASE, overrides + [f"run.duration_s={span}", "run.warmup_s=0"], span)
    return out


#: the files ``pip wheel`` needs from a commit
BUILD_PATHS = ("src", "setup.py", "pyproject.toml", "README.md")

#: the child: prepares every case, then times one case per line read from stdin
CHILD = r'''
import json, sys, time
from cfsim.scenario import load_scenario
from cfsim.simulation import simulate
from cfsim._native import compiled
cases = json.loads(sys.argv[1])
scs = {name: load_scenario(base, ov) for name, (base, ov, _) in cases.items()}
for sc in scs.values():
    simulate(sc)   # warm caches and imports once
import cfsim
print(json.dumps({"ready": True, "compiled": compiled(), "cfsim": cfsim.__file__}), flush=True)
for line in sys.stdin:
    name = line.strip()
    c0 = time.process_time()
    r = simulate(scs[name])
    print(json.dumps({"cpu_s": time.process_time() - c0, "summary": json.dumps(r.summary, sort_keys=True, default=str)}), flush=True)
'''


def build_before(ref: str, into: Path) -> Path:
    """The compiled build of commit ``ref``, unpacked in ``into``; returns the folder to import from."""
    src = into / "src"
    src.mkdir()
    # what the build reads (not the lab's data): the package, its build hook and metadata
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, *BUILD_PATHS], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    wheels = into / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(src)], check=True)
    pkg = into / "pkg"
    with zipfile.ZipFile(next(wheels.glob("*.whl"))) as z:
        z.extractall(pkg)
    return pkg


def _child(path: Path | None) -> subprocess.Popen:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if path is not None:
        env["PYTHONPATH"] = str(path)
    cwd = path if path is not None else ROOT   # the before side must not find this checkout's src
    p = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(cases())], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, env=env, cwd=cwd)
    hello = json.loads(p.stdout.readline())
    if not hello.get("ready"):
        raise RuntimeError(f"child failed to start: {hello}")
    return p


def _time(p: subprocess.Popen, name: str) -> dict:
    p.stdin.write(name + "\n")
    p.stdin.flush()
    return json.loads(p.stdout.readline())


def main() -> None:
    ap = argparse.ArgumentParser()
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--before", help="a commit to build and compare against")
    g.add_argument("--before-path", type=Path, help="a folder holding an unpacked build of the before side")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="cfsim-ab-") as tmp:
        before_path = args.before_path or build_before(args.before, Path(tmp))
        before, after = _child(before_path), _child(None)
        report = {}
        for name, (_, _, span_s) in cases().items():
            b_cpu, a_cpu, ratios, same, added = [], [], [], True, set()
            for i in range(args.repeats):
                # alternate who goes first, so neither side always follows the other
                order = (before, after) if i % 2 == 0 else (after, before)
                out = {id(p): _time(p, name) for p in order}
                b, a = out[id(before)], out[id(after)]
                b_cpu.append(b["cpu_s"])
                a_cpu.append(a["cpu_s"])
                ratios.append(b["cpu_s"] / a["cpu_s"])
                # keys the after side adds (a new report) leave the shared ones to compare
                bs, as_ = json.loads(b["summary"]), json.loads(a["summary"])
                added |= set(as_) - set(bs)
                same = same and bs == {k: v for k, v in as_.items() if k in bs}
            report[name] = {"before_x": span_s / statistics.median(b_cpu), "after_x": span_s / statistics.median(a_cpu),
                            "speedup_median": statistics.median(ratios), "speedup_min": min(ratios),
                            "speedup_max": max(ratios), "same_summary": same, "added_keys": sorted(added),
                            "repeats": args.repeats}
            if not args.json:
                r = report[name]
                print(f"{name}: {r['before_x']:,.1f}x -> {r['after_x']:,.1f}x real time per CPU second; "
                      f"after / before {r['speedup_median']:.2f} (turns {r['speedup_min']:.2f}-{r['speedup_max']:.2f}); "
                      f"summaries {'identical' if same else 'DIFFER'}"
                      + (f" (after adds {', '.join(r['added_keys'])})" if r["added_keys"] else ""), flush=True)
        for p in (before, after):
            p.stdin.close()
            p.wait()
    if args.json:
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
