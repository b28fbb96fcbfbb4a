"""The CFS engine against the real kernel: busy processes in a real cgroup v1 CPU quota.

Each case is ``procs`` processes looping ``burn_ms`` of CPU (thread CPU time) then ``sleep_ms``
of sleep, under a quota of ``limit`` cores per 100 ms period, on this machine's CPUs. The real run
reads ``cpu.stat`` and ``cpuacct.usage`` at the window's ends and ``cpu.stat`` every
``sample_s`` in between (the per-period throttled counts); the engine simulates the same case; the
*fluid* model is what a model without the bandwidth mechanism would say
(:func:`run_fluid`: ``usage = min(demand, limit)``, throttled in every period if the demand exceeds
the limit, never otherwise). A comparison can tell the mechanism from the fluid answer only on
cases where the two differ: bursts that exhaust a CPU's runtime while the average demand is under
the limit.

Real runs need root and a writable cgroup v1 ``cpu`` and ``cpuacct`` hierarchy; each holds the
machine's measurement lock (:func:`cfsim.lab.lock.machine_lock`). ``scripts/kernel_spread.py``
repeats the cases to measure the real spread the test tolerances come from.
"""
from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cfsim.lab.hostcpu import STEAL_WARN_CORES, loaded_steal_cores, read_proc_stat

CPU = Path("/sys/fs/cgroup/cpu")
CPUACCT = Path("/sys/fs/cgroup/cpuacct")
PERIOD_US = 100_000

BURNER = r"""
import random, sys, time
burn, sleep, dist = float(sys.argv[1]) / 1e3, float(sys.argv[2]) / 1e3, sys.argv[3]
random.seed(int(sys.argv[4]))
while True:
    end = time.thread_time() + burn
    while time.thread_time() < end:
        pass
    if sleep:
        time.sleep(random.expovariate(1.0 / sleep) if dist == "exponential" else sleep)
"""


@dataclass(frozen=True)
class Case:
    name: str
    procs: int
    burn_ms: float
    sleep_ms: float
    limit: float
    sleep_dist: str = "fixed"  # or "exponential": sleeps drawn with mean sleep_ms

    @property
    def demand_cores(self) -> float:
        return self.procs * self.burn_ms / (self.burn_ms + self.sleep_ms)

    def describe(self) -> str:
        sleep = f"{self.sleep_ms:g} ms" + (" exponential" if self.sleep_dist == "exponential" else "")
        return (f"{self.procs} x {self.burn_ms:g} ms burn / {sleep} sleep under {self.limit:g} cores "
                f"(demand {self.demand_cores:.2f})")


E = "exponential"
#: the comparison's cases: two classic shapes the fluid model also gets right (a CPU-bound group
#: above its quota, a light one far under it) and four bursty ones it cannot (bursts at random
#: times: demand under the limit yet throttled; demand over it yet not throttled every period)
CASES: dict[str, Case] = {c.name: c for c in (
    Case("cpu-bound", 3, 1000.0, 0.0, 0.5),
    Case("far-under", 1, 4.0, 16.0, 1.5),
    Case("short-bursts", 4, 10.0, 90.0, 0.5, E),     # 10 ms bursts, demand 0.40 under 0.5
    Case("long-bursts", 2, 40.0, 160.0, 0.5, E),     # bursts near a period's quota, demand 0.40 under 0.5
    Case("many-threads", 16, 20.0, 380.0, 1.0, E),   # 16 threads, demand 0.80 under 1.0
    Case("slice-sleeps", 2, 5.0, 5.0, 0.9, E),       # 5 ms bursts and sleeps (the slice), demand 1.0 over 0.9
)}
#: the cases a fluid model gets wrong
BURSTY = ("short-bursts", "long-bursts", "many-threads", "slice-sleeps")


def unavailable() -> str | None:
    """Why real runs cannot happen here (None when they can)."""
    if os.geteuid() != 0:
        return "needs root to create cgroups"
    if not (CPU / "cpu.cfs_quota_us").exists() or not (CPUACCT / "cpuacct.usage").exists():
        return "no cgroup v1 cpu/cpuacct controllers at /sys/fs/cgroup (cgroup2-only host)"
    return None


def _read_stat(d: Path) -> dict[str, int]:
    return {k: int(v) for k, v in (line.split() for line in (d / "cpu.stat").read_text().splitlines())}


def run_real(case: Case, seconds: float = 3.0, sample_s: float = 0.1) -> dict[str, Any]:
    """One real run of ``case`` (holding the machine lock)."""
    from cfsim.lab.lock import machine_lock

    with machine_lock(f"kernel comparison {case.describe()}"):
        return _run_real(case, seconds, sample_s)


def _run_real(case: Case, seconds: float, sample_s: float) -> dict[str, Any]:
    name = f"cfsim-ktest-{os.getpid()}"
    cpu_dir, acct_dir = CPU / name, CPUACCT / name
    cpu_dir.mkdir()
    acct_dir.mkdir()
    children: list[subprocess.Popen] = []
    samples: list[tuple[float, int, int]] = []
    try:
        # a large CPU weight against sibling cgroups (other work on this shared machine)
        (cpu_dir / "cpu.shares").write_text("102400")
        (cpu_dir / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (cpu_dir / "cpu.cfs_quota_us").write_text(str(int(round(case.limit * PERIOD_US))))

        def enter() -> None:
            # above other work on this shared machine, so host contention does not masquerade
            # as CFS behaviour (the quota, not the host, should be what limits them)
            os.nice(-10)
            pid = str(os.getpid())
            (cpu_dir / "cgroup.procs").write_text(pid)
            (acct_dir / "cgroup.procs").write_text(pid)
        for i in range(case.procs):
            argv = [sys.executable, "-c", BURNER, str(case.burn_ms), str(case.sleep_ms), case.sleep_dist,
                    str(int.from_bytes(os.urandom(4), "little") + i)]
            children.append(subprocess.Popen(argv, preexec_fn=enter))
        time.sleep(0.5)  # interpreters started
        s0, u0, t0 = _read_stat(cpu_dir), int((acct_dir / "cpuacct.usage").read_text()), time.monotonic()
        busy0, user0, steal0 = host_busy_s()
        end = t0 + seconds
        while True:
            now = time.monotonic()
            if now >= end:
                break
            time.sleep(min(sample_s, end - now))
            st = _read_stat(cpu_dir)
            samples.append((time.monotonic() - t0, st["nr_periods"], st["nr_throttled"]))
        s1, u1, t1 = _read_stat(cpu_dir), int((acct_dir / "cpuacct.usage").read_text()), time.monotonic()
        busy1, user1, steal1 = host_busy_s()
        children_niced = min(os.getpriority(os.PRIO_PROCESS, ch.pid) for ch in children) > 0
    finally:
        for ch in children:
            ch.send_signal(signal.SIGKILL)
        for ch in children:
            ch.wait()
        for d in (cpu_dir, acct_dir):
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except OSError:
                    time.sleep(0.05)
    periods = s1["nr_periods"] - s0["nr_periods"]
    throttled = s1["nr_throttled"] - s0["nr_throttled"]
    # per period: was it throttled? (each sample window spans about one period)
    per_period = []
    last_p, last_t = s0["nr_periods"], s0["nr_throttled"]
    for _, p, t in samples:
        if p > last_p:
            per_period.extend([1] * (t - last_t) + [0] * max(0, (p - last_p) - (t - last_t)))
            last_p, last_t = p, t
    usage = (u1 - u0) / 1e9 / (t1 - t0)
    return {
        "cpu_usage_cores": usage,
        # everything else the host ran meanwhile (other tenants, this harness): a busy host
        # delays the bursts and masquerades as, or hides, bandwidth throttling
        "others_cores": (busy1 - busy0) / (t1 - t0) - usage,
        # ... of it, the user time of processes at normal or higher priority (not niced): niced
        # work (every helper job and test here runs at nice 19, weight 15) cannot take CPU from
        # the group's 102400 shares and its nice -10 tasks. The group's own user time is in the
        # nice column when its tasks are niced (a parent at nice > 10), else here. System time is
        # left out: /proc/stat does not say whose it is (niced processes' kernel work is in it)
        "others_unniced_cores": max(0.0, (user1 - user0) / (t1 - t0) - (0.0 if children_niced else usage)),
        # ... and the time the hypervisor ran other guests on this VM's CPUs (steal), which no
        # priority or share wins back (QUIET_STEAL_CORES)
        "steal_cores": (steal1 - steal0) / (t1 - t0),
        "throttled_ratio": throttled / max(periods, 1),
        "throttled_s_per_s": (s1["throttled_time"] - s0["throttled_time"]) / 1e9 / (t1 - t0),
        "nr_periods": periods,
        "nr_throttled": throttled,
        "throttled_runs_mean": _mean_run(per_period),
    }


def host_busy_s() -> tuple[float, float, float]:
    """Busy CPU-seconds of the whole host so far, of those the user time of processes that are not
    niced, and the time stolen by the hypervisor (``/proc/stat``, :mod:`cfsim.lab.hostcpu`)."""
    st = read_proc_stat()
    return st.busy_s, st.user_s, st.steal_s


def is_quiet(run: dict[str, Any]) -> bool:
    """Whether a real run (or a probe of the host, :func:`probe_host`) was clean: other processes
    at normal priority took at most ``QUIET_OTHERS_CORES`` and the hypervisor at most
    ``QUIET_STEAL_CORES``."""
    return run["others_unniced_cores"] <= QUIET_OTHERS_CORES and run["steal_cores"] <= QUIET_STEAL_CORES


def disturbance(run: dict[str, Any]) -> str:
    """What took the host's CPUs during a run or probe, for a report."""
    return f"{run['others_unniced_cores']:.2f} un-niced + {run['steal_cores']:.2f} stolen cores"


def _disturbance_key(run: dict[str, Any]) -> float:
    return run["others_unniced_cores"] + run["steal_cores"]


def probe_host(seconds: float = 1.0) -> dict[str, float]:
    """What the host would take from a run now [cores]: other processes' un-niced user time over
    the first half of ``seconds`` (this process idle), and the hypervisor's steal over the second
    half while a busy loop runs on every CPU (:func:`cfsim.lab.hostcpu.loaded_steal_cores`: an idle
    VM shows no steal)."""
    _, user0, _ = host_busy_s()
    t0 = time.monotonic()
    time.sleep(seconds / 2)
    _, user1, _ = host_busy_s()
    others = (user1 - user0) / (time.monotonic() - t0)
    return {"others_unniced_cores": others, "steal_cores": loaded_steal_cores(seconds / 2)}


#: a real run counts as clean when other processes at normal priority (not niced) took at most
#: this many cores meanwhile. Niced work does not count: the group's 102400 CPU shares and its
#: nice -10 tasks outweigh it (short-bursts with ~1 core of nice-19 load on the host: usage 0.392,
#: throttled ratio 0.335 +- 0.032 over 4 runs, 2026-11-23; on a quiet host 0.386, 0.340 +- 0.029;
#: slice-sleeps beside two nice-19 busy loops 0.887 cores and 0.81, as on an idle host, 2026-12-02)
QUIET_OTHERS_CORES = 0.2
#: ... and the hypervisor ran other guests on this VM's CPUs (steal) for at most this many cores,
#: which no priority or share wins back: the lab's own threshold (its measurements on this VM are
#: in :data:`cfsim.lab.hostcpu.STEAL_WARN_CORES`; at 0.05 cores cpu-bound's throttled time moves
#: 0.04 s/s, half the comparison's floor)
QUIET_STEAL_CORES = STEAL_WARN_CORES


def run_real_quiet(case: Case, seconds: float = 3.0, attempts: int = 3,
                   probe_s: float = 1.0) -> tuple[dict[str, Any] | None, list[str]]:
    """A real run on a quiet host (:func:`is_quiet`): up to ``attempts`` tries, each probing the
    host for ``probe_s`` first (:func:`probe_host`, holding the machine lock) and running the case
    only if the probe was quiet; returns the quietest run made (None if every probe was busy) and
    what each try saw.

    Bursty cases need it: other work delays the bursts and changes the throttling. The classic
    ones need it for steal alone: other processes' load ran on the CPUs a throttled CPU-bound
    group left idle (it measured the same beside 0.8-1.5 cores of it), but a stolen CPU delays
    the group within its period and shortens the time it spends throttled."""
    runs: list[dict[str, Any]] = []
    seen: list[str] = []
    for _ in range(attempts):
        probe = None
        if probe_s > 0:
            from cfsim.lab.lock import machine_lock

            with machine_lock(f"kernel comparison: probing the host for {case.describe()}"):
                probe = probe_host(probe_s)
        if probe is not None and not is_quiet(probe):
            seen.append(f"probe: {disturbance(probe)}")
            continue
        r = run_real(case, seconds)
        runs.append(r)
        seen.append(f"run: {disturbance(r)}")
        if is_quiet(r):
            break
    best = min(runs, key=_disturbance_key) if runs else None
    return best, seen


def _mean_run(flags: list[int]) -> float | None:
    """Mean length of consecutive throttled periods (None if none were throttled)."""
    runs, cur = [], 0
    for f in flags:
        if f:
            cur += 1
        elif cur:
            runs.append(cur)
            cur = 0
    if cur:
        runs.append(cur)
    return sum(runs) / len(runs) if runs else None


def model_scenario(case: Case, seconds: float = 3.0, seed: int = 7, cpus: int | None = None,
                   hz: int | None = None) -> dict[str, Any]:
    """The engine's scenario for ``case`` on this machine (its CPUs and kernel tick rate)."""
    from cfsim.kernel.hostinfo import kernel_hz

    return {
        "host": {"cpus": cpus or os.cpu_count() or 1, "hz": hz or kernel_hz() or 1000},
        "cgroup": {"cpu_limit": case.limit, "period_us": PERIOD_US},
        "workload": {"kind": "threads", "threads": case.procs, "burn_ms": case.burn_ms, "sleep_ms": case.sleep_ms,
                     "jitter_ms": case.burn_ms + case.sleep_ms, "sleep_dist": case.sleep_dist},
        "run": {"duration_s": seconds + 1.0, "warmup_s": 1.0, "seed": seed},
    }


def run_model(case: Case, seconds: float = 3.0, seeds: tuple[int, ...] = (7,), **kw) -> dict[str, Any]:
    """The engine on ``case``, averaged over ``seeds`` (each seed is a different start phase)."""
    from cfsim.simulation import simulate

    outs = []
    for seed in seeds:
        res = simulate(model_scenario(case, seconds, seed, **kw))
        s = res.summary
        per = res.periods
        flags = [int(x) for x in per.loc[per["end_s"] > 1.0, "throttled"].tolist()] if len(per) else []
        outs.append({"cpu_usage_cores": s["cpu_usage_cores"], "throttled_ratio": s["throttled_ratio"],
                     "throttled_s_per_s": s["throttled_time_s"] / s["duration_s"],
                     "throttled_runs_mean": _mean_run(flags)})
    keys = outs[0].keys()
    return {k: (sum(o[k] for o in outs if o[k] is not None) / max(1, sum(o[k] is not None for o in outs))
                if any(o[k] is not None for o in outs) else None) for k in keys}


def run_fluid(case: Case, seconds: float = 3.0, cpus: int | None = None) -> dict[str, Any]:
    """A model without the bandwidth mechanism: usage ``min(demand, limit, cpus)``; every period
    throttled if the demand exceeds the limit (one run of throttled periods as long as the window),
    none otherwise. It says nothing about throttled time (None)."""
    cpus = cpus or os.cpu_count() or 1
    demand = min(case.demand_cores, cpus, case.procs)
    over = demand > case.limit
    return {"cpu_usage_cores": min(demand, case.limit), "throttled_ratio": 1.0 if over else 0.0,
            "throttled_s_per_s": None,
            "throttled_runs_mean": seconds * 1e6 / PERIOD_US if over else None}


def kernel_release() -> str:
    return platform.release()
