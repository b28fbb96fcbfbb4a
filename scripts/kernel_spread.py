"""Measure the real kernel's spread on the kernel-comparison cases, beside the engine and a fluid model.

    sudo python scripts/kernel_spread.py [--repeats 5] [--seconds S] [--case NAME ...] [--json]

Each case (``cfsim.validation.kernel_compare``: busy processes in a real cgroup v1 quota) runs
``--repeats`` times on the real kernel, holding the machine's measurement lock for each run; the
engine runs the same case with at least 20 seeds (start phases, random sleeps). The output per
case and metric: the real mean, min, max and standard deviation (of clean runs, as the test takes
them: a run during which other processes at normal priority, not niced, and the hypervisor's steal
took more than ``QUIET_OTHERS_CORES`` / ``QUIET_STEAL_CORES`` is repeated, up to 4 times, and
left out if never clean), the engine's mean and standard deviation over
the seeds, and the fluid model's answer. The tolerances of
``tests/integration/test_kernel_compare.py`` come from this output (the date, kernel
and numbers are recorded in the test).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from datetime import datetime, timezone

from cfsim.validation import kernel_compare as kc

CASES = kc.CASES
METRICS = ("cpu_usage_cores", "throttled_ratio", "throttled_s_per_s", "throttled_runs_mean")


def spread(values: list[float | None]) -> dict[str, float | None]:
    vals = [v for v in values if v is not None]
    if not vals:
        return {"mean": None, "min": None, "max": None, "sd": None}
    return {"mean": statistics.fmean(vals), "min": min(vals), "max": max(vals),
            "sd": statistics.stdev(vals) if len(vals) > 1 else 0.0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=None,
                    help="seconds per run (default: 20 for the bursty cases, 8 for the others, as the test)")
    ap.add_argument("--case", action="append", choices=sorted(CASES))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    why = kc.unavailable()
    if why:
        print(f"error: {why}", file=sys.stderr)
        return 2
    out = {"utc": datetime.now(timezone.utc).isoformat(timespec="seconds"), "kernel": kc.kernel_release(),
           "repeats": args.repeats, "cases": {}}
    for name in args.case or list(CASES):
        case = CASES[name]
        seconds = args.seconds or (20.0 if name in kc.BURSTY else 8.0)
        real, others = [], []
        for _ in range(args.repeats):  # each a clean run (the host otherwise quiet), as the test takes
            r, tried = kc.run_real_quiet(case, seconds, attempts=4)
            if r is not None and kc.is_quiet(r):   # a busy host's run says nothing about the kernel
                real.append(r)
            others.append(tried)
        engine = [kc.run_model(case, seconds, seeds=(seed,)) for seed in range(1, max(args.repeats, 20) + 1)]
        model = {m: spread([e.get(m) for e in engine])["mean"] for m in METRICS}
        fluid = kc.run_fluid(case, seconds)
        row = {"case": case.describe(), "seconds": seconds, "host_per_attempt": others,
               "real": {m: spread([r.get(m) for r in real]) for m in METRICS},
               "engine": {m: spread([e.get(m) for e in engine]) for m in METRICS}, "fluid": fluid}
        out["cases"][name] = row
        if not args.json:
            print(f"{name}: {case.describe()} (the host per attempt: {others}; {len(real)} clean runs)")
            for m in METRICS:
                sp = row["real"][m]
                if sp["mean"] is None:
                    print(f"  {m:22s} real none; engine {model.get(m)}")
                    continue
                en = row["engine"][m]
                eng = "none" if en["mean"] is None else f"{en['mean']:.3f} sd {en['sd']:.3f}"
                print(f"  {m:22s} real {sp['mean']:.3f} [{sp['min']:.3f}, {sp['max']:.3f}] sd {sp['sd']:.3f}"
                      f" | engine {eng} | fluid {fluid.get(m)}", flush=True)
    if args.json:
        json.dump(out, sys.stdout, indent=1)
        sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
