"""The engine against the real kernel, on cases a fluid model gets wrong.

Busy processes in a real cgroup v1 quota on this machine (``cfsim.validation.kernel_compare``),
20 s per bursty case and 8 s per classic one (about 100 s of real runs, plus the wait for the
machine's measurement lock, which each run holds); the engine simulates the same case with twelve
seeds (start phases, random sleeps). Compared per case: CPU usage, the throttled-period ratio
(``nr_throttled / nr_periods``), throttled time per second, and the mean length of runs of
consecutive throttled periods (``cpu.stat`` read every 100 ms: the per-period throttled counts).

Two of the six cases are classic shapes any model gets right (a CPU-bound group above its quota, a
light one far below). Four are bursty - bursts at random times (exponential sleeps), as requests
arrive: 10 ms bursts at 0.40 of a 0.5-core limit, 40 ms bursts at 0.40 of 0.5, 16 threads at 0.80
of 1.0, and 5 ms bursts with 5 ms sleeps (the bandwidth slice) at 1.0 over 0.9. A *fluid* model
(``usage = min(demand, limit)``, every period throttled iff demand > limit) says the first three are
never throttled and the fourth always: the real kernel throttles 34-42 % of the periods of the
first three, and the fourth in runs of 5-7 periods, not throughout.
``test_fluid_model_fails_the_bursty_cases`` checks that the fluid model falls outside the same
tolerances the engine must meet.

Tolerances come from repeated real runs of ``python scripts/kernel_spread.py`` on Linux
6.18.44-fc-v669 (HZ 250, task-based throttling), 2 vCPUs (AMD EPYC), a machine shared with other
work, in two sessions on 2026-11-23: session A (5 repeats, the bursty cases at 12 s, each on a
quiet host; the classic cases at 8 s in two rounds of 5, which measure the same with 0.8-1.5 cores
of other load) and session B (4 repeats at 20 s, the length this test runs; short-bursts beside
~1 core of nice-19 work, long-bursts beside 0.3-0.4 cores of other processes' kernel time, the
other two with < 0.01 cores of other work at normal priority). Real mean [min, max] sd per
session | engine mean, sd over 20 seeds at 20 s | fluid:

============== ================== ============================ ============================ =========== =====
case           metric             real A (12 s, 5 runs)        real B (20 s, 4 runs)        engine      fluid
============== ================== ============================ ============================ =========== =====
cpu-bound      usage [cores]      0.500 [0.499, 0.502] 0.001   -                            0.500 0.000 0.5
3x1000/0@0.5   throttled ratio    1.000                        -                            1.000       1.0
               throttled s/s      1.460 [1.437, 1.476] 0.012   -                            1.499 0.002 -
far-under      usage              0.200 [0.200, 0.202] 0.001   -                            0.200 0.000 0.2
1x4/16@1.5     throttled ratio    0.000                        -                            0.000       0.0
short-bursts   usage              0.386 [0.374, 0.392] 0.008   0.392 [0.386, 0.399] 0.006   0.390 0.011 0.4
4x10/e90@0.5   throttled ratio    0.340 [0.317, 0.375] 0.029   0.335 [0.305, 0.370] 0.032   0.307 0.041 0.0
               throttled s/s      0.125 [0.099, 0.141] 0.017   0.097 [0.065, 0.140] 0.033   0.098 0.020 -
               throttled run mean 2.28  [1.56, 2.75]   0.45    1.93  [1.59, 2.31]   0.33    1.95  0.23  -
long-bursts    usage              0.360 [0.344, 0.385] 0.019   0.335 [0.309, 0.354] 0.020   0.353 0.015 0.4
2x40/e160@0.5  throttled ratio    0.421 [0.377, 0.471] 0.041   0.371 [0.345, 0.410] 0.029   0.431 0.035 0.0
               throttled s/s      0.228 [0.160, 0.281] 0.049   0.188 [0.164, 0.208] 0.018   0.246 0.026 -
               throttled run mean 2.32  [2.05, 2.63]   0.23    1.96  [1.86, 2.16]   0.14    2.36  0.26  -
many-threads   usage              0.778 [0.748, 0.804] 0.020   0.787 [0.773, 0.803] 0.014   0.786 0.023 0.8
16x20/e380@1   throttled ratio    0.342 [0.283, 0.392] 0.041   0.345 [0.300, 0.365] 0.031   0.351 0.048 0.0
               throttled s/s      0.133 [0.092, 0.168] 0.031   0.129 [0.107, 0.139] 0.015   0.145 0.027 -
               throttled run mean 2.02  [1.48, 2.29]   0.33    2.21  [1.82, 2.50]   0.30    2.20  0.33  -
slice-sleeps   usage              0.891 [0.887, 0.895] 0.003   0.890 [0.886, 0.895] 0.003   0.895 0.002 0.9
2x5/e5@0.9     throttled ratio    0.840 [0.775, 0.900] 0.051   0.799 [0.770, 0.816] 0.020   0.871 0.035 1.0
               throttled s/s      0.200 [0.177, 0.220] 0.019   0.162 [0.144, 0.178] 0.015   0.214 0.010 -
               throttled run mean 6.74  [4.36, 9.82]   2.30    5.26  [4.67, 5.55]   0.41    8.58  2.17  200
============== ================== ============================ ============================ =========== =====

One real run is compared with the engine's mean over ``ENGINE_SEEDS``; the tolerance of a metric is
three standard deviations of that difference, ``3 sqrt(sd_run^2 + sd_engine^2 / seeds)``, with a
floor (``FLOOR``) where the spread is ~0 (usage 0.02 cores). ``sd_run``, the spread of one real
20 s run, is the larger of (a) the spread of all nine real runs of both sessions, session A's
scaled by sqrt(12/20), *including the difference between the sessions' means* (the kernel's
answer moves between sessions more than within one: long-bursts throttled 0.42 then 0.37 of the
periods), and (b) the engine's spread over 20 seeds (the workload's own randomness, bursts at
random times, which four or five real repeats underestimate). ``sd_engine`` is the engine's
spread over those seeds. The throttled-time floor of 0.08 s/s covers the one systematic difference
of the classic cases: with a CPU-bound group the engine's throttled time is 3 % above the kernel's
(1.499 vs 1.460 s/s). The hypervisor's steal, unrecorded then, explains it: on 2026-12-02 the
kernel's throttled time fell 0.82 s/s per stolen core over eight runs (0.005 to 0.685 cores
stolen) and came to 1.498 s/s at none.

Session C (2026-12-02, 4 repeats at 20 s / 8 s, each clean by today's rule: at most 0.07 cores
stolen, no un-niced other work): cpu-bound throttled 1.497 [1.495, 1.499] s/s (engine 1.500);
many-threads usage 0.769, ratio 0.344 [0.290, 0.375], 0.155 s/s, runs 2.17 (engine 0.786, 0.351,
0.145, 2.20); slice-sleeps usage 0.891, ratio 0.829 [0.805, 0.860], 0.190 s/s, runs 6.5 (engine
0.895, 0.871, 0.214, 8.6). The tolerances stay those of sessions A and B.

Where the engine differs: with short bursts it throttles a little less often than the kernel
(0.31 vs 0.34 of the periods); with 5 ms bursts and sleeps over the limit a little more often
(0.87 vs 0.80-0.84), for longer (0.21 vs 0.16-0.20 s/s) and in longer runs (8.6 vs 5.3-6.7
periods): within the spread, but on the edge for the session-B kernel.

Each case is measured on a quiet host (up to 3 tries, each after a probe of the host,
``kc.run_real_quiet``): other work at normal priority delays the bursts and changes the throttling
(one run of slice-sleeps on a busy host gave usage 0.84 and ratio 0.29 against 0.89 and 0.84), and
so does a hypervisor that runs other guests on this VM's CPUs (steal, ``kc.QUIET_STEAL_CORES``): in
the failed CI run of 2026-12-02 slice-sleeps used 0.74-0.76 cores and was throttled in 8-10 % of
the periods, cpu-bound 1.34-1.41 s/s, beside 0.2-0.66 cores that were no un-niced process's; later
that day, beside 0.74-0.97 stolen cores, slice-sleeps used 0.64-0.71 and was throttled in 0-6 %.
Niced work does not count (the group's 102400 CPU shares and its nice -10 tasks outweigh it:
short-bursts beside ~1 core of nice-19 work measured 0.335 of the periods throttled, on a quiet
host 0.340; slice-sleeps beside two nice-19 busy loops 0.887 cores and 0.81, 2026-12-02). If the
host never goes quiet the case is skipped, naming the load it saw: such a measurement says nothing
about the model. Skips, with the reason, where the cgroup v1 cpu controller is not writable (not
root, or a cgroup2-only host).
"""
from __future__ import annotations

import math

import pytest

from cfsim.validation import kernel_compare as kc

pytestmark = [pytest.mark.kernel, pytest.mark.skipif(kc.unavailable() is not None, reason=str(kc.unavailable()))]

#: seconds of each real run: bursty cases are noisier (random burst counts) and run longer
SECONDS = {name: (20.0 if name in kc.BURSTY else 8.0) for name in kc.CASES}
ENGINE_SEEDS = tuple(range(1, 13))
METRICS = ("cpu_usage_cores", "throttled_ratio", "throttled_s_per_s", "throttled_runs_mean")
#: (sd of one real run, sd of one engine seed) per case and metric (see the docstring)
SPREAD = {
    "cpu-bound": {"cpu_usage_cores": (0.001, 0.000), "throttled_ratio": (0.0, 0.0),
                  "throttled_s_per_s": (0.012, 0.002), "throttled_runs_mean": (0.0, 0.0)},
    "far-under": {"cpu_usage_cores": (0.001, 0.000), "throttled_ratio": (0.0, 0.0),
                  "throttled_s_per_s": (0.0, 0.0), "throttled_runs_mean": (0.0, 0.0)},
    "short-bursts": {"cpu_usage_cores": (0.011, 0.011), "throttled_ratio": (0.041, 0.041),
                     "throttled_s_per_s": (0.027, 0.020), "throttled_runs_mean": (0.367, 0.226)},
    "long-bursts": {"cpu_usage_cores": (0.021, 0.015), "throttled_ratio": (0.039, 0.035),
                    "throttled_s_per_s": (0.036, 0.026), "throttled_runs_mean": (0.261, 0.261)},
    "many-threads": {"cpu_usage_cores": (0.023, 0.023), "throttled_ratio": (0.048, 0.048),
                     "throttled_s_per_s": (0.027, 0.027), "throttled_runs_mean": (0.334, 0.334)},
    "slice-sleeps": {"cpu_usage_cores": (0.003, 0.002), "throttled_ratio": (0.037, 0.035),
                     "throttled_s_per_s": (0.024, 0.010), "throttled_runs_mean": (2.171, 2.171)},
}
#: where the spread is ~0: usage [cores], ratio, throttled time [s/s], run length [periods]
FLOOR = {"cpu_usage_cores": 0.02, "throttled_ratio": 0.03, "throttled_s_per_s": 0.08, "throttled_runs_mean": 0.5}


def tolerance(case: str, metric: str) -> float:
    sd_real, sd_engine = SPREAD[case][metric]
    return max(FLOOR[metric], 3.0 * math.sqrt(sd_real ** 2 + sd_engine ** 2 / len(ENGINE_SEEDS)))


def disagreement(case: str, model: dict, real: dict, stated_only: bool = False) -> dict[str, str]:
    """Metric -> why ``model`` is outside the tolerance around ``real`` (empty: it agrees).

    A run length of None means no throttled period at all, which differs from any run length;
    with ``stated_only`` a metric the model leaves None is not compared (the fluid model states
    no throttled time, and its "no throttled period" is already its throttled ratio of 0)."""
    out = {}
    for m in METRICS:
        a, b = model.get(m), real.get(m)
        if a is None and (stated_only or b is None):
            continue
        if a is None or b is None:
            out[m] = f"model {a}, real {b}"
            continue
        tol = tolerance(case, m)
        if abs(a - b) > tol:
            out[m] = f"model {a:.3f}, real {b:.3f}, tolerance {tol:.3f}"
    return out


_REAL: dict[str, tuple[dict | None, list[str]]] = {}


def real_run(name: str) -> dict:
    """One clean real run of the case (``kc.is_quiet``: other processes at normal priority and the
    hypervisor's steal below their thresholds; up to 3 tries), else the test skips naming the load
    it saw."""
    if name not in _REAL:
        _REAL[name] = kc.run_real_quiet(kc.CASES[name], SECONDS[name], attempts=3)
    real, seen = _REAL[name]
    if real is None or not kc.is_quiet(real):
        pytest.skip(f"the host was never quiet for {name} (at most {kc.QUIET_OTHERS_CORES} un-niced and "
                    f"{kc.QUIET_STEAL_CORES} stolen cores allowed for a clean measurement): {'; '.join(seen)}")
    return real


#: known disagreements, kept visible (reported as xfail/xpass, never hidden): none now. On 2026-11-24
#: (00:40 UTC, load 0.0, two runs, steal not recorded) the real kernel gave many-threads a throttled
#: ratio of 0.485, 0.27-0.30 s/s and runs of 3.4-3.7 periods against the engine's 0.35, 0.14 and
#: 2.2, and the case was an expected failure; it passed in every run since (CI 2026-12-02: 0.33,
#: 0.139 s/s), and four clean runs on 2026-12-02 (at most 0.07 cores stolen, none un-niced) gave
#: 0.344 [0.290, 0.375], 0.155 s/s, runs of 2.17 against the engine's 0.351, 0.145 and 2.20.
KNOWN_GAPS: dict[str, str] = {}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(reason=KNOWN_GAPS[n], strict=False))
                                  if n in KNOWN_GAPS else n for n in kc.CASES])
def test_engine_agrees_with_real_kernel(name):
    real = real_run(name)
    model = kc.run_model(kc.CASES[name], SECONDS[name], seeds=ENGINE_SEEDS)
    print(f"{name}: real {real} engine {model}")
    assert real["nr_periods"] >= 0.9 * SECONDS[name] * 10
    bad = disagreement(name, model, real)
    if bad:
        # one real run is one draw of the kernel's own spread (slice-sleeps on 2026-11-25: 0.73 and
        # 0.84 throttled ratio in back-to-back runs); a second run decides, both are reported
        again, seen = kc.run_real_quiet(kc.CASES[name], SECONDS[name], attempts=3)
        print(f"{name}: second real run {again}")
        if again is None or not kc.is_quiet(again):
            pytest.skip(f"{name}: the first run disagreed ({bad}) and the host was never quiet for a second: "
                        f"{'; '.join(seen)}")
        bad2 = disagreement(name, model, again)
        assert not bad2, (f"{kc.CASES[name].describe()}: engine outside the real spread in two real runs: "
                          f"{bad}; {bad2}")


@pytest.mark.parametrize("name", kc.BURSTY)
def test_fluid_model_fails_the_bursty_cases(name):
    real = real_run(name)
    fluid = kc.run_fluid(kc.CASES[name], SECONDS[name])
    bad = disagreement(name, fluid, real, stated_only=True)
    assert bad, (f"{kc.CASES[name].describe()}: the fluid model min(demand, limit) agrees with the real kernel "
                 f"({fluid} vs {real}): this case does not test the bandwidth mechanism")


def test_tolerances_cover_every_case_and_metric():
    assert set(SPREAD) == set(kc.CASES) and set(kc.BURSTY) < set(kc.CASES)
    for case in SPREAD.values():
        assert set(case) == set(METRICS)
