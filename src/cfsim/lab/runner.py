"""One lab run: build, cgroups, workload inside, load generator outside, Prometheus scraping
everything at 1 s, optional quota schedule (a VPA in-place resize), raw exports, manifest and
summary. Clean-up (processes, cgroups, Prometheus and its TSDB) runs on success, failure and
Ctrl-C; what a ``kill -9`` of an earlier run left behind is removed before the next one starts.

Cgroups of a run (same name ``cfsim-lab-<runner pid>-<run>``; the pid tells a dead owner's):

- the workload's CPU cgroup (quota, ``cpu.shares``) and memory cgroup (``memory.limit_in_bytes``),
  entered before exec so the Go runtime, automaxprocs and automemlimit see them at their
  first instruction;
- ``...-harness``: this runner itself (with its cAdvisor-named exporter thread) and so its
  children Prometheus and the load generator, so the harness's CPU is measured on its own and
  everything a run started lives in a cgroup a later run can empty.

Run folder layout::

    manifest.json.gz     scenario, environment, timings, commands, observed GOMAXPROCS/GOMEMLIMIT,
                         counters at the window's ends, neighbours' CPU, OOM, profile split
                         (gzip'd JSON; plain manifest.json in older folders: cfsim.io.manifest)
    summary.json         the keys of ``cfsim run --json`` plus GC/memory keys (cfsim.lab.derive)
    scenario.toml        the resolved scenario
    prom/raw.jsonl.gz    /api/v1/query_range bodies of each metric, one per line, byte for byte
    prom/rate.jsonl.gz   the dashboard rate() queries, same format (line index in manifest["exports"])
    prom/samples.jsonl.gz  /api/v1/query of ``<counter>[<range>]``: raw samples at their scrape times
    profile.pb.gz        pprof CPU profile (``lab.profile_s`` > 0)
    gc_cycles.csv.gz     the runtime's per-cycle GC trace (``lab.gctrace``; cfsim.io.gctrace)
    gc_marks.csv.gz      one row per GC mark from an execution trace (``lab.trace_s``; cfsim.io.gotrace)
    perf_samples.csv.gz  one row per perf CPU sample: time, user / scheduler / GC (``lab.perf_s``;
                         cfsim.lab.perf.read_perf_samples)
    logs/*.log           workload, load generator and Prometheus output (workload.log.gz with lab.gctrace)
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import gzip
import hashlib
import json
import math
import os
import platform
import shlex
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from cfsim.goruntime.gomaxprocs import gomaxprocs_value
from cfsim.kernel.cpu_windows import CPU_WATCH_COLUMNS, CPU_WATCH_FILE
from cfsim.kernel.hostinfo import kernel_hz
from cfsim.io import gotrace
from cfsim.io.errors import CfsimParseError
from cfsim.io.gclimiter import LIMITER_LOG, limiter_turned_on, read_gc_limiter
from cfsim.io.gctrace import GODEBUG_GCTRACE, read_gctrace
from cfsim.io.manifest import write_manifest
from cfsim.lab import build, cgroup, derive, exporter, hostcpu, launch, perf, preflight, prometheus, queries, quiet, summary
from cfsim.lab import threads as lab_threads
from cfsim.lab import sleeps, wakeplace
from cfsim.lab.c2c import measure_c2c
from cfsim.lab.chase import measure_memory_latency
from cfsim.lab.kinds import LAB_KINDS, lab_kind
from cfsim.lab.lock import machine_lock
from cfsim.lab.scav import measure_page_cycle
from cfsim.lab.tlb import measure_memory_path
from cfsim.scenario import Scenario, ScenarioError

READY_POLL_S = 0.05
WATCH_INTERVAL_S = 0.1  # memory / liveness sampling of the workload (OOM time, mean memory)
PRE_RUN_S = 3.0  # neighbours' CPU measured over this long before t=0
PRE_RUN_SAMPLE_S = 0.05  # the host's runnable tasks read this often meanwhile


@dataclass
class Processes:
    """Children of this run, killed (whole process group) in reverse order at clean-up."""

    procs: list[subprocess.Popen] = field(default_factory=list)

    def start(self, argv: list[str], log: Path, **kw: Any) -> subprocess.Popen:
        with open(log, "ab") as f:
            p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True, **kw)
        self.procs.append(p)
        return p

    def stop_all(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, 9)
                except ProcessLookupError:
                    pass
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


def http_get(url: str, timeout_s: float = 10.0, method: str = "GET") -> str:
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=timeout_s) as r:
        return r.read().decode()


class WorkloadDied(RuntimeError):
    def __init__(self, message: str, returncode: int | None):
        super().__init__(message)
        self.returncode = returncode


def wait_ready(url: str, proc: subprocess.Popen, timeout_s: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise WorkloadDied(f"{what} exited with code {proc.returncode} before it was ready:\n{tail}",
                               proc.returncode)
        try:
            http_get(url, timeout_s=2)
            return
        except OSError:
            time.sleep(READY_POLL_S)
    raise TimeoutError(f"{what} not ready after {timeout_s} s (raise lab.ready_timeout_s?)")


#: run by /bin/sh: write its own pid into each of the first $1 files, then exec the rest of argv
_ENTER_SH = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 126; shift; n=$((n - 1)); done; exec "$@"'


def in_cgroups(argv: list[str], *groups: Any) -> list[str]:
    """``argv`` behind a shell that moves itself into ``groups`` and then execs it (same pid): the
    Go runtime, automaxprocs and automemlimit read the cgroups' quota and memory limit at their
    very first instruction. A shell rather than ``preexec_fn``: Python code between fork and exec
    can deadlock in a process with threads (this runner has its watcher, exporter and progress
    threads; see the warning on ``preexec_fn`` in the ``subprocess`` documentation)."""
    files = [str(f) for g in groups if g is not None for f in g.procs_files()]
    return ["/bin/sh", "-c", _ENTER_SH, "cfsim-enter", str(len(files)), *files, *argv]


#: the CPU features the Go runtime's vector span scan needs (internal/runtime/gc/scan/scan_amd64.go,
#: ``avx512ScanPackedReqsMet``: AVX512VL, BW, DQ, BITALG, VBMI and GFNI), as /proc/cpuinfo names them.
#: Without them the Green Tea GC scans each marked object (mgcmark_greenteagc.go, ``scanSpan``) and
#: counts only the bytes up to an object's last pointer as scan work: /gc/scan/heap and the pacer's
#: work are then a third of the same heap's on a host with them (64-byte nodes with two leading
#: pointers: 6.3 MB against 17.1 MB, measured on the lab's workload with GODEBUG=cpu.avx512bw=off)
GO_VECTOR_SCAN_FLAGS = ("avx512vl", "avx512bw", "avx512dq", "avx512_bitalg", "avx512vbmi", "gfni")


def go_vector_span_scan(flags: set[str], godebug: str = "") -> bool:
    """Whether Go's GC can use its AVX-512 span scan on a CPU with ``flags`` (/proc/cpuinfo) and a
    workload run with ``godebug`` (``cpu.<feature>=off`` switches a feature off).

    >>> go_vector_span_scan(set(GO_VECTOR_SCAN_FLAGS))
    True
    >>> go_vector_span_scan(set(GO_VECTOR_SCAN_FLAGS), "gctrace=1,cpu.avx512bw=off")
    False
    >>> go_vector_span_scan({"avx2"})
    False
    """
    off = {kv.split("=", 1)[0][4:].replace("_", "") for kv in godebug.split(",")
           if kv.startswith("cpu.") and kv.endswith("=off")}
    return all(f in flags and f.replace("_", "") not in off for f in GO_VECTOR_SCAN_FLAGS)


def host_facts(godebug: str = "") -> dict[str, Any]:
    """What the manifest records of the host; ``godebug`` is the workload's (lab.godebug), which can
    switch CPU features off for the Go runtime (``cpu.avx512bw=off``) and so its GC's scan path."""
    cpu_model, flags, family = "", set(), {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = (x.strip() for x in line.partition(":"))
            if key == "model name" and not cpu_model:
                cpu_model = value
            elif key in ("cpu family", "model", "stepping") and key not in family:
                family[key] = value
            elif key == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        pass
    return {"kernel": platform.release(), "kernel_version": platform.version(), "machine": platform.machine(),
            "cpu_model": cpu_model, "cpu_family_model_stepping": [family.get(k) for k in ("cpu family", "model",
                                                                                         "stepping")],
            # what decides the Go GC's scan path (and its /gc/scan/heap accounting) on this host
            "cpu_flags_go_gc": sorted(f for f in GO_VECTOR_SCAN_FLAGS if f in flags),
            "go_vector_span_scan": go_vector_span_scan(flags, godebug) if flags else None,
            "host_cpus": os.cpu_count(), "affinity_cpus": len(os.sched_getaffinity(0)),
            "hostname": platform.node(), "python": sys.version.split()[0], "hz": kernel_hz(),
            "mem_total_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
            "page_bytes": os.sysconf("SC_PAGE_SIZE"), "swap": _swap_total_bytes()}


def _swap_total_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("SwapTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def initial_limit(sc: Scenario) -> float | None:
    """The limit in force at t=0: a schedule step at t <= 0 overrides ``cgroup.cpu_limit``."""
    lim = sc["cgroup.cpu_limit"]
    for t, step in sc["cgroup.limit_schedule"] or []:
        if t <= 0:
            lim = step
    return lim


def bandwidth_for(sc: Scenario, limit_cores: float | None) -> cgroup.Bandwidth:
    period = sc["cgroup.period_us"]
    if limit_cores is None:
        return cgroup.Bandwidth(None, period, 0)
    quota = max(1000, int(round(limit_cores * period)))
    return cgroup.Bandwidth(quota, period, min(sc["cgroup.burst_us"], quota))


observed_gomaxprocs = derive.observed_gomaxprocs


def check_scenario(sc: Scenario) -> None:
    if sc["lab.quota_at"] == "run" and sc["go.gomaxprocs"] in ("automaxprocs", "go1.25"):
        raise ScenarioError("lab.quota_at", "'run' would hide the quota from the GOMAXPROCS policy "
                                            f"{sc['go.gomaxprocs']!r} at start-up; use 'start-up'")
    if sc["workload.kind"] not in LAB_KINDS:
        raise ScenarioError("workload.kind", f"the lab has no workload {sc['workload.kind']!r}")
    if sc["go.gomemlimit_policy"] == "automemlimit" and sc["go.gomemlimit_mb"] is not None:
        raise ScenarioError("go.gomemlimit_mb", "set together with go.gomemlimit_policy = 'automemlimit' "
                                                "(the library leaves an explicit GOMEMLIMIT alone): drop one")
    for key in ("lab.profile_s", "lab.perf_s", "lab.trace_s", "lab.sched_trace_s", "lab.sleep_stacks_s"):
        secs = sc[key]
        if secs and secs > sc["run.duration_s"] - sc["run.warmup_s"]:
            raise ScenarioError(key, f"{secs:g} s does not fit in the measured window "
                                     f"({sc['run.duration_s'] - sc['run.warmup_s']:g} s)")
    for key in ("lab.perf_s", "lab.sleep_stacks_s"):
        if sc[key]:
            try:
                perf.perf_binary()
            except perf.PerfError as exc:
                raise ScenarioError(key, str(exc)) from None


def host_busy_s() -> tuple[float, float]:
    """(busy CPU-seconds, total CPU-seconds) of the whole host from /proc/stat."""
    p = hostcpu.read_proc_stat()
    return p.busy_s, p.total_s


def read_process_memory(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM (peak RSS), RssAnon, RssFile of a process from ``/proc/<pid>/status`` [bytes],
    and its page faults so far, ``minflt`` and ``majflt`` from ``/proc/<pid>/stat`` [count]."""
    out: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                out[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        out.update(parse_proc_stat_faults(Path(f"/proc/{pid}/stat").read_text()))
    except (OSError, ValueError, IndexError):
        pass      # (a process that exited, or a line cut short: no fault counts, as for the status)
    return out


def parse_proc_stat_faults(text: str) -> dict[str, int]:
    """``minflt`` and ``majflt`` (fields 10 and 12 of ``/proc/<pid>/stat``, proc(5)): the fields
    are counted after the command name's closing parenthesis, since the name may hold spaces.

    >>> parse_proc_stat_faults("42 (a b) S 1 42 42 0 -1 4194560 1200 0 3 0 5 6")
    {'minflt': 1200, 'majflt': 3}
    """
    rest = text[text.rindex(")") + 2:].split()
    # rest[0] is field 3 (state): field n is rest[n - 3]
    return {"minflt": int(rest[7]), "majflt": int(rest[9])}


@dataclass
class RunCgroups:
    """The run's cgroups and where to read the host's counters."""

    cpu: Any  # cgroup.CpuCgroup of the workload
    memory: Any  # cgroup.MemoryCgroup of the workload (None if the host has no memory controller)
    harness: Any  # cgroup.CpuCgroup of Prometheus, the load generator and this runner
    root_usage: Path | None

    def reading(self) -> hostcpu.CpuReading:
        """CPU counters now: /proc/stat and the cgroups' usage, read back to back (no HTTP)."""
        t = time.time()
        host = hostcpu.read_proc_stat()
        stat = self.cpu.read_stat()
        harness = self.harness.read_stat().usage_ns if self.harness is not None else None
        return hostcpu.CpuReading(t, host, stat.usage_ns, harness, hostcpu.read_usage_ns(self.root_usage))


class Watch(threading.Thread):
    """Samples the workload's memory and CPU counters every 0.1 s and notices its death: an OOM
    kill is a result (time, memory at the kill), not a harness failure."""

    def __init__(self, proc: subprocess.Popen, cgs: RunCgroups, interval_s: float = WATCH_INTERVAL_S):
        super().__init__(daemon=True, name="cfsim-lab-watch")
        self.proc, self.cgs, self.interval_s = proc, cgs, interval_s
        self.readings: list[tuple[float, cgroup.CpuStat, cgroup.MemoryStat | None]] = []
        self.died_t_s: float | None = None
        self.last_alive_t_s: float | None = None
        self.returncode: int | None = None
        self.stop_event = threading.Event()
        self.lock = threading.Lock()

    def run(self) -> None:
        while not self.stop_event.is_set():
            t = time.time()
            alive = self.proc.poll() is None
            try:
                stat = self.cgs.cpu.read_stat()
                mem = self.cgs.memory.read() if self.cgs.memory is not None else None
            except OSError:
                return
            with self.lock:
                self.readings.append((t, stat, mem))
                if alive:
                    self.last_alive_t_s = t
                else:
                    self.died_t_s, self.returncode = t, self.proc.returncode
                    return
            self.stop_event.wait(self.interval_s)

    @property
    def died(self) -> bool:
        return self.died_t_s is not None

    def stop(self) -> None:
        self.stop_event.set()

    def nearest(self, t_s: float) -> tuple[float, cgroup.CpuStat, cgroup.MemoryStat | None]:
        with self.lock:
            return min(self.readings, key=lambda r: abs(r[0] - t_s))

    def last_alive(self) -> tuple[float, cgroup.CpuStat, cgroup.MemoryStat | None] | None:
        """The last reading before the death: the process not yet gone and, with a memory cgroup,
        no OOM kill counted yet (a killed process can linger a moment before it is reaped)."""
        with self.lock:
            alive = [r for r in self.readings if self.last_alive_t_s is not None and r[0] <= self.last_alive_t_s
                     and (r[2] is None or r[2].oom_kills == (self.readings[0][2].oom_kills if self.readings[0][2] else 0))]
        return alive[-1] if alive else None

    def write_cpu_windows(self, out_dir: Path, t0: float, t1: float) -> dict[str, Any]:
        """The group's CPU counters as sampled over the window [t0, t1] (unix s) into
        ``cpu_watch.csv.gz`` (``t_s`` from the window's start): the CPU of each ~0.1 s between
        samples, whose spread from period to period decides throttling below the limit
        (:mod:`cfsim.kernel.cpu_windows`). A few kB a run; the watcher reads them anyway."""
        with self.lock:
            rows = [(round(t - t0, 4), c.usage_ns, c.nr_periods, c.nr_throttled, c.throttled_ns)
                    for t, c, _ in self.readings if t0 <= t <= t1]
        with gzip.open(out_dir / CPU_WATCH_FILE, "wt", encoding="utf-8") as f:
            f.write(",".join(CPU_WATCH_COLUMNS) + "\n")
            f.writelines(",".join(str(v) for v in r) + "\n" for r in rows)
        return {"file": CPU_WATCH_FILE, "samples": len(rows), "interval_s": self.interval_s,
                "note": "the workload cgroup's cumulative counters at the watcher's samples inside the window; "
                        "t_s from the window's start; cfsim.kernel.cpu_windows.window_keys(t_s, usage_ns / 1e9)"}

    def memory_mean(self, t0: float, t1: float) -> dict[str, Any]:
        """Time-mean memory usage and working set over [t0, t1] (trapezoids between samples)."""
        with self.lock:
            pts = [(t, m) for t, _, m in self.readings if m is not None and t0 <= t <= t1]
        if len(pts) < 2:
            return {"samples": len(pts)}
        area_u = area_w = 0.0
        for (ta, ma), (tb, mb) in zip(pts, pts[1:]):
            area_u += (ma.usage_bytes + mb.usage_bytes) / 2 * (tb - ta)
            area_w += (ma.working_set_bytes + mb.working_set_bytes) / 2 * (tb - ta)
        span = pts[-1][0] - pts[0][0]
        return {"samples": len(pts), "interval_s": self.interval_s, "span_s": round(span, 3),
                "mean_usage_bytes": area_u / span, "mean_working_set_bytes": area_w / span,
                "max_usage_sampled_bytes": max(m.usage_bytes for _, m in pts)}


def _snapshot(cgs: RunCgroups, workload_url: str, loadgen_url: str | None, pid: int,
              booked: str | None = None) -> tuple[summary.Snapshot, hostcpu.CpuReading]:
    """Counters first (cgroups, /proc/stat, memory, RSS: the snapshot instant), then the HTTP
    reads of the load generator's and the workload's /metrics. With ``booked``, the workload's
    samples are a capture it made itself at this instant (:func:`book_capture`), fetched later by
    :func:`fetch_capture`: a saturated workload answers a read seconds late."""
    reading = cgs.reading()
    stat = cgs.cpu.read_stat()
    mem = cgs.memory.read() if cgs.memory is not None else None
    proc_mem = read_process_memory(pid)
    threads = lab_threads.read_thread_schedstat(pid)
    tlb = hostcpu.read_tlb_shootdowns()
    reads: dict[str, Any] = {}

    def metrics(url: str, what: str) -> summary.Samples:
        t0 = time.time()
        try:
            return summary.parse_exposition(http_get(url + "/metrics", timeout_s=20))
        except OSError as exc:
            reads[f"{what}_error"] = f"{type(exc).__name__}: {exc}"
            return {}
        finally:
            reads[f"{what}_s"] = round(time.time() - t0, 3)
    l = metrics(loadgen_url, "loadgen") if loadgen_url else {}
    w = metrics(workload_url, "workload") if booked is None else {}
    SNAPSHOT_READS.append({"t_s": reading.t_s, **reads, **({"workload_capture": booked} if booked else {})})
    return summary.Snapshot(reading.t_s, stat, w, l, mem, proc_mem, threads, tlb), reading


def book_capture(workload_url: str, name: str, at_unix_s: float) -> None:
    """Ask the workload to capture its /metrics at ``at_unix_s`` (a timer in the process)."""
    http_get(f"{workload_url}/snapshot?name={name}&at_unix_ns={int(at_unix_s * 1e9)}", method="POST")


def fetch_capture(workload_url: str, name: str, timeout_s: float = 120.0) -> tuple[summary.Samples, dict[str, Any]]:
    """A booked capture's samples and when it was taken ({} and the error if it cannot be had)."""
    t0 = time.time()
    try:
        text = http_get(f"{workload_url}/snapshot?name={name}", timeout_s=timeout_s)
    except OSError as exc:
        return {}, {"name": name, "error": f"{type(exc).__name__}: {exc}", "fetch_s": round(time.time() - t0, 3)}
    head = dict(kv.split("=", 1) for kv in text.split("\n", 1)[0].split()[2:])
    info = {"name": name, "booked_unix_s": int(head["booked_unix_ns"]) / 1e9,
            "captured_unix_s": int(head["captured_unix_ns"]) / 1e9, "fetch_s": round(time.time() - t0, 3)}
    info["delay_s"] = round(info["captured_unix_s"] - info["booked_unix_s"], 4)
    if "collected_unix_ns" in head:  # how long the synchronous collection itself took
        info["collect_s"] = round(int(head["collected_unix_ns"]) / 1e9 - info["captured_unix_s"], 4)
    return summary.parse_exposition(text), info


# how long each snapshot's /metrics reads took, and why one failed (kept in the manifest)
SNAPSHOT_READS: list[dict[str, Any]] = []


def _sleep_until(t_unix: float, abort: Callable[[], bool] = lambda: False) -> bool:
    """Sleep until ``t_unix``; True if ``abort()`` became true first."""
    while (left := t_unix - time.time()) > 0:
        if abort():
            return True
        time.sleep(min(left, 0.05))
    return abort()


@dataclass(frozen=True)
class Workload:
    url: str
    argv: list[str]
    env: dict[str, str]
    info: dict[str, Any]  # /info at ready: GOMAXPROCS, GOMEMLIMIT, calibration, Go version, pid
    launch_unix_s: float
    setup_s: float
    proc: subprocess.Popen


@dataclass(frozen=True)
class Loadgen:
    url: str
    argv: list[str]


@dataclass
class Window:
    """What happened between t=0 and the end: the snapshots bounding the summary window."""

    start_unix_s: float
    end_unix_s: float
    snap0: summary.Snapshot
    snap1: summary.Snapshot
    cpu0: hostcpu.CpuReading
    cpu1: hostcpu.CpuReading
    quota_changes: list[dict[str, Any]]
    loadavg: dict[str, tuple[float, float, float]]
    peak_since_start: dict[str, Any] | None = None
    oom: dict[str, Any] | None = None
    profile: dict[str, Any] | None = None
    perf: dict[str, Any] | None = None
    exectrace: dict[str, Any] | None = None
    wake_placement: dict[str, Any] | None = None
    thread_sleeps: dict[str, Any] | None = None


def start_workload(sc: Scenario, binary: Path, cgs: RunCgroups, procs: Processes, logs: Path) -> Workload:
    """Launch the workload inside the run's cgroups and wait until its heap is built and its
    loop calibrated."""
    port = prometheus.free_port()
    url = f"http://127.0.0.1:{port}"
    argv = launch.workload_command(binary, sc, f"127.0.0.1:{port}",
                                   logs / LIMITER_LOG if sc["lab.gctrace"] else None)
    env = launch.workload_env(sc)
    log = logs / "workload.log"
    t_launch = time.time()
    proc = procs.start(in_cgroups(argv, cgs.cpu, cgs.memory), log, env=env)
    wait_ready(url + "/ready", proc, sc["lab.ready_timeout_s"], "workload", log)
    setup_s = time.time() - t_launch
    return Workload(url, argv, env, json.loads(http_get(url + "/info")), t_launch, setup_s, proc)


def start_loadgen(sc: Scenario, binary: Path, target_url: str, procs: Processes, logs: Path) -> Loadgen | None:
    """Launch the load generator (closed/open kinds) in this runner's cgroup, the harness's (a
    child starts in its parent's cgroup); it idles until ``POST /start`` so Prometheus can scrape
    it before t=0."""
    port = prometheus.free_port()
    argv = launch.loadgen_command(binary, sc, target_url + "/work", f"127.0.0.1:{port}")
    if argv is None:
        return None
    url = f"http://127.0.0.1:{port}"
    log = logs / "loadgen.log"
    proc = procs.start(argv, log)
    wait_ready(url + "/metrics", proc, 30, "loadgen", log)
    return Loadgen(url, argv)


#: one tenant thread: a busy loop that never blocks (a CPU-bound neighbour at nice 0)
TENANT_ARGV = [sys.executable, "-c", "while True: pass"]


def start_tenant(threads: int, tenant_cg: Any, procs: Processes, logs: Path) -> dict[str, Any] | None:
    """``lab.tenant_threads`` busy loops in ``tenant_cg`` (each its own process, so each can take a
    CPU): a cgroup of their own, or the root cgroup (:class:`cgroup.RootPlacement`); killed with
    the run's other processes. Returns the manifest's ``tenant`` block."""
    if not threads:
        return None
    for _ in range(threads):
        procs.start(in_cgroups(TENANT_ARGV, tenant_cg), logs / "tenant.log")
    in_root = isinstance(tenant_cg, cgroup.RootPlacement)
    return {"threads": threads, "cgroup": "root" if in_root else "own",
            "shares": None if in_root else hostcpu.TENANT_SHARES, "argv": TENANT_ARGV[1:],
            "note": "started before the pre-run neighbour measurement, stopped with the run's processes; "
                    "their CPU is part of host_cpu.tenants_cores; cgroup root: each busy loop weighs "
                    "1024 on its CPU, own: all of them weigh shares together"}


def last_scrape_samples(prom: prometheus.Prometheus, job: str, before_s: float) -> tuple[float, summary.Samples] | None:
    """The samples of ``job``'s last successful scrape at or before ``before_s`` (from Prometheus:
    the workload itself is gone after an OOM kill)."""
    body = json.loads(prom.query(f'up{{job="{job}"}}[5m]', before_s))
    good = [float(t) for r in body["data"]["result"] for t, v in r["values"] if float(v) == 1.0 and float(t) <= before_s]
    if not good:
        return None
    t = max(good)
    return t, summary.samples_from_vector(prom.query(f'{{job="{job}"}}', t))


class Profiler(threading.Thread):
    """GET /debug/pprof/<endpoint>?seconds=N in the background: ``profile`` (the gzipped CPU
    profile protobuf) or ``trace`` (an execution trace)."""

    def __init__(self, url: str, seconds: float, out: Path, endpoint: str = "profile"):
        super().__init__(daemon=True, name=f"cfsim-lab-{endpoint}")
        self.url, self.seconds, self.out, self.endpoint = url, seconds, out, endpoint
        self.error: str | None = None
        self.t0 = self.t1 = 0.0

    def run(self) -> None:
        self.t0 = time.time()
        try:
            req = urllib.request.Request(f"{self.url}/debug/pprof/{self.endpoint}?seconds={self.seconds:g}")
            with urllib.request.urlopen(req, timeout=self.seconds + 60) as r:
                self.out.write_bytes(r.read())
        except OSError as exc:
            self.error = f"{type(exc).__name__}: {exc}"
        self.t1 = time.time()


TRACE_FILE = "trace.out"
#: the workload's threads' name in the kernel (its binary's, lab/cmd/workload)
WORKLOAD_COMM = "workload"
GC_MARKS_FILE = "gc_marks.csv.gz"


def write_gc_marks(out_dir: Path) -> dict[str, Any]:
    """The execution trace's GC marks (:func:`cfsim.io.gotrace.read_go_trace`) into
    ``gc_marks.csv.gz``; the raw trace (megabytes a second) is then removed, its size and sha256
    kept in the manifest. A trace that is missing or cannot be decoded leaves an error instead."""
    raw = out_dir / TRACE_FILE
    if not raw.exists():
        return {"marks_file": None, "trace_error": "no trace was written"}
    data = raw.read_bytes()
    info: dict[str, Any] = {"raw_bytes": len(data), "raw_sha256": hashlib.sha256(data).hexdigest(), "raw_kept": False}
    try:
        marks, meta = gotrace.read_go_trace(raw, go=build.go_binary())
    except (CfsimParseError, FileNotFoundError) as exc:
        return info | {"marks_file": None, "trace_error": str(exc), "raw_kept": True}
    marks.to_csv(out_dir / GC_MARKS_FILE, index=False, compression={"method": "gzip", "mtime": 0})
    raw.unlink()
    return info | {"marks_file": GC_MARKS_FILE, "marks": len(marks), "decoder": meta["decoder"], "sched": meta["sched"], "stw": meta["stw"],
                   "note": "one row per GC mark inside the trace, t_s from the trace's first event; "
                           "read with pandas.read_csv; columns: cfsim.io.gotrace.COLUMNS"}


def profile_split(binary: Path, profile: Path) -> dict[str, Any]:
    """Run ``profsplit`` on a saved profile: user / scheduler / GC CPU seconds and fractions."""
    res = subprocess.run([str(binary), str(profile)], capture_output=True, text=True, timeout=120)
    if res.returncode != 0:
        return {"error": res.stderr.strip() or f"profsplit exit {res.returncode}"}
    return json.loads(res.stdout)


def measure(sc: Scenario, cgs: RunCgroups, workload: Workload, loadgen: Loadgen | None, watch: Watch,
            prom: prometheus.Prometheus, out_dir: Path, log: Callable[[str], None], run_id: str,
            profsplit: Path | None = None) -> Window:
    """Start the load at t=0, apply the quota schedule, snapshot at warm-up end and at the end.

    If the workload dies (an OOM kill), the window ends at its last successful scrape: the
    counters up to then come from Prometheus and the watcher, and the run is a result."""
    duration, warmup = sc["run.duration_s"], sc["run.warmup_s"]
    l_url = loadgen.url if loadgen else None
    pid = workload.proc.pid
    load0 = os.getloadavg()
    # a snapshot just before t=0: the window's start if the workload dies during the warm-up
    snap_t0, cpu_t0 = _snapshot(cgs, workload.url, l_url, pid)
    t_start = time.time()
    http_get(workload.url + "/start", method="POST")
    if loadgen:
        http_get(loadgen.url + "/start", method="POST")
    book_capture(workload.url, "window_start", t_start + warmup)
    book_capture(workload.url, "window_end", t_start + duration)
    events = sorted((float(t), lim) for t, lim in (sc["cgroup.limit_schedule"] or []) if 0 < t < duration)
    marks: list[tuple[float, str, Any]] = [(warmup, "snapshot", None)] + [(t, "quota", lim) for t, lim in events]
    prof_s = sc["lab.profile_s"] or 0.0
    perf_s = sc["lab.perf_s"] or 0.0
    trace_s = sc["lab.trace_s"] or 0.0
    sched_s = sc["lab.sched_trace_s"] or 0.0
    sleep_s = sc["lab.sleep_stacks_s"] or 0.0
    # each probe centred in the measured window
    for probe_s, what in ((prof_s, "profile"), (perf_s, "perf"), (trace_s, "trace"), (sched_s, "sched"),
                          (sleep_s, "sleeps")):
        if probe_s > 0:
            marks.append((warmup + (duration - warmup - probe_s) / 2, what, None))
    quota_changes: list[dict[str, Any]] = []
    lab_vpa = None
    if sc["lab.vpa_in_the_loop"]:
        from cfsim.lab.vpa_loop import LabVpa

        def apply_limit(lim: float) -> None:
            cgs.cpu.set_bandwidth(bandwidth_for(sc, lim))
        lab_vpa = LabVpa(sc, lambda: cgs.cpu.read_stat().usage_ns, apply_limit, initial_limit(sc))
        marks += [(t, "vpa", None) for t in lab_vpa.tick_times(duration)]
    snap0, cpu0 = snap_t0, cpu_t0
    peak_since_start = None
    profiler: Profiler | None = None
    tracer: Profiler | None = None
    probe: perf.PerfProbe | None = None
    sched_probe: wakeplace.SchedTraceProbe | None = None
    sleep_probe: sleeps.SleepProbe | None = None
    died = lambda: watch.died  # noqa: E731
    # a quota change at the same instant as the warm-up end comes after the snapshot
    for t, what, lim in sorted(marks, key=lambda m: (m[0], m[1] != "snapshot")):
        if _sleep_until(t_start + t, died):
            break
        if what == "snapshot":
            snap0, cpu0 = _snapshot(cgs, workload.url, l_url, pid, booked="window_start")
            if cgs.memory is not None:
                # the peak since creation includes the heap build; restart it for the window
                peak_since_start = {"max_usage_bytes": snap0.memory.max_usage_bytes if snap0.memory else None,
                                    "reset_at_window_start": cgs.memory.reset_peak()}
            continue
        if what == "profile":
            profiler = Profiler(workload.url, prof_s, out_dir / "profile.pb.gz")
            profiler.start()
            continue
        if what == "trace":
            tracer = Profiler(workload.url, trace_s, out_dir / TRACE_FILE, endpoint="trace")
            tracer.start()
            continue
        if what == "sched":
            sched_probe = wakeplace.SchedTraceProbe(sched_s, WORKLOAD_COMM, os.cpu_count() or 1)
            sched_probe.start()
            continue
        if what == "sleeps":
            sleep_probe = sleeps.SleepProbe(pid, sleep_s)
            sleep_probe.start()
            continue
        if what == "perf":
            probe = perf.PerfProbe(pid, perf_s, profsplit=profsplit,
                                   series_path=out_dir / perf.PERF_SAMPLES_FILE, origin_unix_s=t_start)
            probe.start()
            continue
        if what == "vpa":
            change = lab_vpa.tick(round(time.time() - t_start, 4))
            if change:
                quota_changes.append({**change, "applied_t_s": round(time.time() - t_start, 4)})
                log(f"[{run_id}] t={change['t_s']:g} s: VPA {change['vpa_action']} -> "
                    f"limit {change['cpu_limit_cores']} cores ({change['reason']})")
            continue
        bw = bandwidth_for(sc, lim)
        cgs.cpu.set_bandwidth(bw)
        quota_changes.append({"t_s": t, "applied_t_s": round(time.time() - t_start, 4),
                              "cpu_limit_cores": lim, "quota_us": bw.quota_us, "period_us": bw.period_us})
        log(f"[{run_id}] t={t:g} s: cpu limit -> {lim} cores")
    oom = None
    if not watch.died and not _sleep_until(t_start + duration, died):
        snap1, cpu1 = _snapshot(cgs, workload.url, l_url, pid, booked="window_end")
        t_end = time.time()
        captures = []
        for name, snap in (("window_start", snap0), ("window_end", snap1)):
            if snap is snap_t0:
                continue
            samples, info = fetch_capture(workload.url, name)
            captures.append(info)
            if name == "window_start":
                snap0 = dataclasses.replace(snap0, workload=samples)
            else:
                snap1 = dataclasses.replace(snap1, workload=samples)
        SNAPSHOT_READS.append({"captures": [{**c, **{k: round(c[k] - t_start, 4) for k in
                                                      ("booked_unix_s", "captured_unix_s") if k in c}}
                                            for c in captures]})
    else:
        snap1, cpu1, oom, t_end = _after_death(sc, cgs, watch, prom, t_start, snap_t0.t_s, log, run_id)
        # the warm-up capture died with the workload: the window starts at t=0
        snap0, cpu0 = snap_t0, cpu_t0
    prof: dict[str, Any] | None = None
    exectrace: dict[str, Any] | None = None
    perf_block: dict[str, Any] | None = None
    placement: dict[str, Any] | None = None
    thread_sleeps: dict[str, Any] | None = None
    if profiler is not None:
        prof = {**_probe_block(profiler, prof_s, t_start, 90), "file": "profile.pb.gz"}
    if tracer is not None:
        exectrace = {**_probe_block(tracer, trace_s, t_start, 90), **write_gc_marks(out_dir)}
    if probe is not None:
        perf_block = {**_probe_block(probe, perf_s, t_start, 180), **(probe.result or {})}
    if sched_probe is not None:
        placement = {**_probe_block(sched_probe, sched_s, t_start, 120),
                     "note": "the kernel's placement of wake-ups the workload's running threads make of its "
                             "other threads (tracefs sched_waking/sched_switch on every CPU): "
                             "cfsim.lab.wakeplace", **(sched_probe.result or {})}
    if sleep_probe is not None:
        thread_sleeps = {**_probe_block(sleep_probe, sleep_s, t_start, 120),
                         "note": "voluntary switches of the workload's threads by the runtime function that "
                                 "slept (perf sched:sched_switch with call chains): cfsim.lab.sleeps",
                         **(sleep_probe.result or {})}
    return Window(t_start, t_end, snap0, snap1, cpu0, cpu1, quota_changes,
                  {"start": load0, "end": os.getloadavg()}, peak_since_start, oom, prof, perf_block, exectrace,
                  placement, thread_sleeps)


def _probe_block(probe: Any, seconds: float, t_start: float, grace_s: float) -> dict[str, Any]:
    """Wait for a probe of the window (a profile, an execution trace, perf, the kernel's scheduler
    trace; up to ``grace_s`` beyond its ``seconds``) and say when it ran, on the run's clock, and
    whether it failed: the manifest block every probe starts with."""
    probe.join(timeout=seconds + grace_s)
    return {"seconds": seconds, "start_t_s": round(probe.t0 - t_start, 3), "end_t_s": round(probe.t1 - t_start, 3),
            "error": probe.error}


def _after_death(sc: Scenario, cgs: RunCgroups, watch: Watch, prom: prometheus.Prometheus, t_start: float,
                 t_first_s: float, log: Callable[[str], None], run_id: str):
    """The window's end after the workload died: its last successful scrape (Prometheus), the
    cgroup counters the watcher read nearest to it, and what the kill looked like."""
    watch.join(timeout=2)
    mem_now = cgs.memory.read() if cgs.memory is not None else None
    oom_kills = mem_now.oom_kills if mem_now else 0
    alive = watch.last_alive()
    t_died = watch.died_t_s or time.time()
    oom = {"status": "oom" if oom_kills > 0 else "died", "returncode": watch.returncode,
           "oom_kills": oom_kills, "detected_t_s": round(t_died - t_start, 3),
           "last_alive_t_s": None if alive is None else round(alive[0] - t_start, 3),
           "memory_at_kill": None if alive is None or alive[2] is None else asdict(alive[2]),
           "memory_after_kill": None if mem_now is None else asdict(mem_now),
           "note": "the kill happened between last_alive_t_s and detected_t_s (0.1 s sampling); "
                   "memory_at_kill is the last reading while the process was alive; the summary's window "
                   "runs from t=0 to the workload's last successful scrape"}
    log(f"[{run_id}] workload {'OOM-killed' if oom_kills else 'died'} at t={oom['detected_t_s']:g} s "
        f"(exit {watch.returncode})")
    # wait for Prometheus to have scraped the loadgen and exporter once more, then read the last
    # good scrape of the workload
    time.sleep(sc["lab.scrape_interval_s"] + 0.3)
    wl = last_scrape_samples(prom, "workload", t_died)
    if wl is not None and wl[0] <= t_first_s:
        wl = None  # no successful scrape after t=0: only the cgroup counters cover the run
    t_end = wl[0] if wl else (alive[0] if alive else t_died)
    lg = last_scrape_samples(prom, "loadgen", t_end) if "loadgen" in prom.targets else None
    if lg is not None and lg[0] <= t_first_s:
        lg = None
    t_read, stat, mem = watch.nearest(t_end)
    cpu = hostcpu.CpuReading(t_end, hostcpu.read_proc_stat(), stat.usage_ns,
                             cgs.harness.read_stat().usage_ns, hostcpu.read_usage_ns(cgs.root_usage))
    oom["window_end"] = {"workload_last_scrape_t_s": None if wl is None else round(wl[0] - t_start, 3),
                         "counters_read_t_s": round(t_read - t_start, 3),
                         "note": "window ends at the workload's last successful scrape; host and neighbour "
                                 "CPU are read after the death and are not reported for this window"}
    snap1 = summary.Snapshot(t_end, stat, wl[1] if wl else {}, lg[1] if lg else {}, mem, {})
    return snap1, cpu, oom, time.time()


def export_range(window: Window, step_s: float) -> tuple[float, float]:
    """Whole-second range ends (step times then line up across runs and with other tools),
    from 2 steps before t=0 to at least one step after the end."""
    return float(math.floor(window.start_unix_s - 2 * step_s)), float(math.ceil(window.end_unix_s + step_s))


def _gz_writer(path: Path):
    # mtime=0: the same bodies give the same file
    return gzip.GzipFile(filename="", mode="wb", fileobj=open(path, "wb"), mtime=0, compresslevel=9)


def export_all(prom: prometheus.Prometheus, sc: Scenario, window: Window, folder: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Write ``prom/{raw,samples,rate}.jsonl.gz`` (response bodies byte for byte, one per line)
    and return the manifest's export index and the raw bodies by metric."""
    kind, step = sc["workload.kind"], sc["lab.step_s"]
    q0, q1 = export_range(window, step)
    exports: dict[str, Any] = {"start_s": round(q0, 3), "end_s": round(q1, 3), "step_s": step,
                               "format": "one /api/v1/query_range response body per line, byte for byte, "
                                         "gzip; line numbers below (0-based); read with cfsim.io.load_lab_run",
                               "files": {p: f"prom/{p}.jsonl.gz" for p in ("raw", "samples", "rate")},
                               "raw": {}, "rate": {}, "samples": {}, "empty": []}
    (folder / "prom").mkdir(exist_ok=True)
    raw_bodies: dict[str, bytes] = {}
    with contextlib.closing(_gz_writer(folder / "prom" / "raw.jsonl.gz")) as f:
        for name in queries.raw_metrics(kind):
            body = prom.query_range(name, q0, q1, step)
            if not json.loads(body)["data"]["result"]:
                exports["empty"].append(name)
                continue
            raw_bodies[name] = body
            exports["raw"][name] = {"query": name, "line": len(raw_bodies) - 1}
            f.write(body.rstrip(b"\n") + b"\n")
    # raw samples from one rate window before the range, so every exported rate() step can be
    # re-derived exactly (Prometheus scrapes a few seconds before the range starts)
    range_ms = int(round((q1 - q0 + sc["lab.rate_window_s"] + sc["lab.scrape_interval_s"]) * 1000)) + 1
    with contextlib.closing(_gz_writer(folder / "prom" / "samples.jsonl.gz")) as f:
        for i, name in enumerate(queries.sample_metrics(kind)):
            promql = f"{name}[{range_ms}ms]"
            f.write(prom.query(promql, q1).rstrip(b"\n") + b"\n")
            exports["samples"][name] = {"query": promql, "line": i, "time_s": round(q1, 3)}
    with contextlib.closing(_gz_writer(folder / "prom" / "rate.jsonl.gz")) as f:
        for i, (name, promql) in enumerate(queries.rate_queries(kind, sc["lab.rate_window_s"]).items()):
            f.write(prom.query_range(promql, q0, q1, step).rstrip(b"\n") + b"\n")
            exports["rate"][name] = {"query": promql, "line": i}
    return exports, raw_bodies


def _utc(t_unix_s: float) -> str:
    return dt.datetime.fromtimestamp(t_unix_s, dt.timezone.utc).isoformat()


def cleanup_stale(mounts: cgroup.Mounts) -> dict[str, list[str]]:
    """Remove what a killed earlier run left: its cgroups (and every process inside them: the
    workload, Prometheus, the load generator) and Prometheus' temporary TSDB folders."""
    return {"cgroups": cgroup.remove_stale(mounts), "tsdb": prometheus.remove_stale_tsdb()}


def code_version() -> dict[str, Any]:
    """The commit of the code that ran (and whether its tree had local changes). A frozen copy
    without .git (``git archive``, as data/lab/collect.sh's users may run) names its commit in
    ``CFSIM_CODE_COMMIT``."""
    root = build.lab_dir().parent
    try:
        res = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        head = res.stdout.strip() if res.returncode == 0 else ""
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "src", "lab"],
                               capture_output=True, text=True, timeout=10).stdout.strip() if head else ""
    except (OSError, subprocess.SubprocessError):
        head, dirty = "", ""
    if not head:
        return {"root": str(root), "commit": os.environ.get("CFSIM_CODE_COMMIT"), "dirty": None,
                "source": "CFSIM_CODE_COMMIT (no git checkout)"}
    return {"root": str(root), "commit": head, "dirty": bool(dirty)}


def run(sc: Scenario, out_dir: Path, run_id: str | None = None, command: list[str] | None = None,
        log: Callable[[str], None] = lambda s: print(s, file=sys.stderr)) -> dict[str, Any]:
    """Run one scenario for real; return the summary (also written to ``out_dir``).

    An OOM-killed workload is a result: the manifest's ``status`` is ``"oom"`` and the summary
    covers the window up to the kill."""
    sc = launch.resolve_lab_keys(sc)
    check_scenario(sc)
    tools = preflight.check()
    bins = build.build()
    out_dir = Path(out_dir)
    (out_dir / "logs").mkdir(parents=True, exist_ok=True)
    (out_dir / "scenario.toml").write_text(sc.to_toml())
    run_id = run_id or out_dir.name
    kind = sc["workload.kind"]
    command = command if command is not None else sys.argv
    version = {"auto": None, "v1": 1, "v2": 2}[sc["lab.cgroup_version"]]

    SNAPSHOT_READS.clear()
    with contextlib.ExitStack() as cleanup:  # unwinds in reverse on success, error and Ctrl-C
        # one real measurement at a time on this machine (released last, after the clean-up)
        waited = cleanup.enter_context(machine_lock(f"lab run {run_id}"))
        if waited > 1:
            log(f"[{run_id}] waited {waited:.0f} s for another real measurement to finish")
        stale = cleanup_stale(tools.mounts)
        if stale["cgroups"] or stale["tsdb"]:
            log(f"[{run_id}] removed leftovers of a killed run: {stale}")
        host_quiet = None
        if sc["lab.quiet_host_cores"] is not None:
            host_quiet = quiet.wait_for_quiet_host(sc["lab.quiet_host_cores"], sc["lab.quiet_host_timeout_s"],
                                                   lambda s: log(f"[{run_id}] {s}"),
                                                   max_steal_cores=sc["lab.quiet_host_steal_cores"])
        # where the VM's CPUs sit right now: a cache line's round trip between them, measured
        # before anything of the run starts (cfsim.lab.c2c)
        c2c = measure_c2c(bins["c2cbench"])
        # and how dear a load that misses every cache is right now (a big heap's mark is bound by
        # such loads, and their price moves from run to run on this VM: cfsim.lab.chase)
        memory_latency = measure_memory_latency(bins["chasebench"])
        # and what the kernel charges for a page fault, a release and a TLB shootdown right now
        # (calibration runs: cfsim.lab.grid.CALIBRATION_MEMORY_PROBE_ROUNDS)
        memory_path = (measure_memory_path(bins["faultbench"], sc["lab.memory_probe_rounds"])
                       if sc["lab.memory_probe_rounds"] else None)
        if memory_path is not None and not memory_path.get("error"):
            # and the runtime's own give-back-and-fault-again cycle near a memory limit: the fault
            # and the runtime's work a page (cfsim.lab.scav, about 12 s)
            memory_path.update(measure_page_cycle(bins["scavbench"], memory_path["release_us_per_page"],
                                                  sc["lab.memory_probe_rounds"]))
        name = cgroup.run_name(run_id)
        cg = cgroup.create(name, tools.mounts, version)
        cleanup.callback(cg.remove)
        mem_cg = None
        try:
            mem_cg = cgroup.create_memory(name, tools.mounts, version)
        except FileNotFoundError as exc:
            if sc["cgroup.memory_limit_mb"] is not None:
                raise ScenarioError("cgroup.memory_limit_mb", f"this host cannot enforce it: {exc}") from None
        if mem_cg is not None:
            cleanup.callback(mem_cg.remove)
            mem_cg.set_limit(launch.memory_limit_bytes(sc))
        if sc["lab.cpu_shares"] is not None:
            cg.set_shares(sc["lab.cpu_shares"])
        # Prometheus, the load generator and this runner: no quota, a CPU weight, measured apart
        harness_cg = cgroup.create(name + "-harness", tools.mounts, version)
        cleanup.callback(harness_cg.remove)
        if sc["lab.harness_shares"] is not None:
            harness_cg.set_shares(sc["lab.harness_shares"])
        tenant_cg: Any = None
        if sc["lab.tenant_threads"] and not sc["lab.tenant_cgroup"]:
            tenant_cg = cgroup.RootPlacement(tools.mounts)  # cgroup-less processes of the host
        elif sc["lab.tenant_threads"]:
            # another tenant of the host, at a root-cgroup process's weight (created before the
            # processes' clean-up is registered, so it is removed after they are killed)
            tenant_cg = cgroup.create(name + "-tenant", tools.mounts, version)
            cleanup.callback(tenant_cg.remove)
            tenant_cg.set_shares(hostcpu.TENANT_SHARES)
        home = cgroup.cpu_placement(tools.mounts, Path("/proc/self/cgroup").read_text())
        harness_cg.add_pid(os.getpid())
        cleanup.callback(cgroup.move_pid, os.getpid(), home)  # back home before the harness cgroup goes
        cgs = RunCgroups(cg, mem_cg, harness_cg, hostcpu.root_usage_path(tools.mounts))
        start_limit = initial_limit(sc)
        bw0 = bandwidth_for(sc, start_limit)
        cg.set_bandwidth(bw0 if sc["lab.quota_at"] == "start-up" else bandwidth_for(sc, None))
        mem_read = mem_cg.read if mem_cg is not None else None
        exp = exporter.serve(exporter.CgroupCollector(cg.read_stat, cg.bandwidth,
                                                      exporter.ContainerLabels(pod=f"cfsim-lab-{run_id}"), mem_read))
        cleanup.callback(exp.stop)
        procs = Processes()
        cleanup.callback(procs.stop_all)

        try:
            workload = start_workload(sc, bins["workload"], cgs, procs, out_dir / "logs")
        except WorkloadDied as exc:
            mem = mem_cg.read() if mem_cg is not None else None
            if mem is None or mem.oom_kills == 0:
                raise
            # an OOM kill while building the heap: a result, with nothing measured
            return _write_startup_oom(sc, out_dir, run_id, command, tools, mem, exc, c2c, memory_latency)
        log(f"[{run_id}] workload ready in {workload.setup_s:.1f} s: GOMAXPROCS={workload.info['gomaxprocs']} "
            f"GOMEMLIMIT={workload.info.get('gomemlimit_bytes')} "
            f"calibration={workload.info['calibration_rounds_per_cpu_ms']:.0f} rounds/CPU-ms "
            f"heap walk={workload.info.get('heap_walk_ns_per_hop') or 0:.1f} ns/hop "
            f"memory latency={memory_latency.get('ns_per_load_median') or 0:.1f} ns")
        watch = Watch(workload.proc, cgs)
        watch.start()
        cleanup.callback(watch.stop)
        loadgen = start_loadgen(sc, bins["loadgen"], workload.url, procs, out_dir / "logs")
        targets = {"workload": workload.url.removeprefix("http://"), "cadvisor": f"127.0.0.1:{exp.port}"}
        if loadgen:
            targets["loadgen"] = loadgen.url.removeprefix("http://")
        prom = prometheus.Prometheus(tools.prometheus, targets, sc["lab.scrape_interval_s"],
                                     log_path=out_dir / "logs" / "prometheus.log")
        cleanup.callback(prom.stop)
        prom.start()
        if sc["lab.quota_at"] == "run":
            cg.set_bandwidth(bw0)
        tenant = start_tenant(sc["lab.tenant_threads"], tenant_cg, procs, out_dir / "logs")
        # every target scraped once; then the neighbours' CPU before the load starts (this also
        # gives the exports more than one scrape interval before t=0)
        prom.wait_targets_up()
        pre_a = cgs.reading()
        # the host's runnable tasks meanwhile (every PRE_RUN_SAMPLE_S): how many tasks a tenant's
        # cores were spread over
        runnable: list[int | None] = []
        pre_end = time.monotonic() + PRE_RUN_S
        while time.monotonic() < pre_end:
            runnable.append(hostcpu.read_procs_running())
            time.sleep(min(PRE_RUN_SAMPLE_S, max(0.0, pre_end - time.monotonic())))
        pre_b = cgs.reading()

        window = measure(sc, cgs, workload, loadgen, watch, prom, out_dir, log, run_id, bins["profsplit"])
        # keep everything running until a scrape after the export range's end: stopping earlier
        # would put Prometheus' staleness markers inside the exported range
        _sleep_until(export_range(window, sc["lab.step_s"])[1] + sc["lab.scrape_interval_s"] + 0.3)
        exports, raw_bodies = export_all(prom, sc, window, out_dir)
        watch.stop()
        procs.stop_all()

        warmup, duration = sc["run.warmup_s"], sc["run.duration_s"]
        gmp = (observed_gomaxprocs(raw_bodies["go_sched_gomaxprocs_threads"], window.start_unix_s)
               if "go_sched_gomaxprocs_threads" in raw_bodies else {"changes_t_s": [], "values": [], "final": None})
        # the lab's binaries are built with go >= 1.25 in go.mod: the container-aware default applies
        expected = gomaxprocs_value(sc["go.gomaxprocs"], start_limit, len(os.sched_getaffinity(0)),
                                    version="1.25", round_=sc["go.round"], period_us=sc["cgroup.period_us"])
        expected_gml = launch.expected_gomemlimit(sc, os.sysconf("SC_PAGE_SIZE"))
        s0, s1 = window.snap0, window.snap1
        ncpu = os.cpu_count() or 1
        host_cpu = hostcpu.neighbours(window.cpu0, window.cpu1, ncpu)
        host_cpu["note"] = ("others = host busy (/proc/stat) - workload: other tenants plus this harness; "
                            "harness = Prometheus + load generator + this runner (their own cgroup); "
                            "tenants = root cgroup usage - workload - harness. Counters are read at the "
                            "snapshot instant, before the HTTP reads of /metrics")
        host_cpu["pre_run"] = {k: v for k, v in hostcpu.neighbours(pre_a, pre_b, ncpu).items()
                               if k in ("window_s", "host_busy_cores", "harness_cores", "tenants_cores",
                                        "workload_cores", "steal_cores", "tenants_source")}
        host_cpu["pre_run"].update(hostcpu.runnable_others(runnable))
        host_cpu["weights"] = {"workload_shares": sc["lab.cpu_shares"] or 1024,
                               "harness_shares": sc["lab.harness_shares"] or 1024,
                               "tenant_shares": hostcpu.TENANT_SHARES}
        if window.oom is not None:
            host_cpu["note"] += "; after an OOM kill the window's end readings come after the death"
        profile = None
        if window.profile is not None:
            profile = dict(window.profile)
            if (out_dir / "profile.pb.gz").exists() and not profile.get("error"):
                profile["split"] = profile_split(bins["profsplit"], out_dir / "profile.pb.gz")
                # how much of the cgroup's CPU over the profile's interval the profile sampled
                # (CPU-time timers are checked at ticks: bursty loads lose samples)
                a = watch.nearest(window.start_unix_s + profile["start_t_s"])
                b = watch.nearest(window.start_unix_s + profile["end_t_s"])
                cg_s = (b[1].usage_ns - a[1].usage_ns) / 1e9
                profile["cgroup_cpu_s"] = round(cg_s, 4)
                cpu_s = (profile["split"] or {}).get("cpu_s")
                profile["coverage"] = round(cpu_s / cg_s, 4) if cpu_s and cg_s > 0 else None
        watch_mean = watch.memory_mean(s0.t_s, s1.t_s)
        cpu_watch = watch.write_cpu_windows(out_dir, s0.t_s, s1.t_s)
        status = "ok" if window.oom is None else window.oom["status"]
        manifest = {
            "run_id": run_id,
            "scenario_toml": sc.to_toml(),
            "scenario": sc.to_dict(),
            "scenario_source": sc.source,
            "overrides": sc.overrides,
            "gomaxprocs": {"policy": sc["go.gomaxprocs"], "round": sc["go.round"], "expected_at_start": expected,
                           "at_ready": workload.info["gomaxprocs"], "observed": gmp},
            "gomemlimit": {"policy": sc["go.gomemlimit_policy"], "ratio": sc["go.automemlimit_ratio"],
                           "expected_at_start_bytes": expected_gml,
                           "at_ready_bytes": workload.info.get("gomemlimit_bytes")},
            "host": host_facts(sc["lab.godebug"]),
            "host_c2c": c2c,
            "host_memory_latency": memory_latency,
            "host_memory_path": memory_path,
            "host_quiet": host_quiet,
            "code": code_version(),
            "go_version": build.go_version(tools.go) if tools.go else workload.info.get("go_version"),
            "workload_go_runtime": workload.info.get("go_version"),
            "prometheus_version": prometheus.version(tools.prometheus),
            "cgroup": {"version": cg.version, "name": cg.name, "cpu_shares": sc["lab.cpu_shares"],
                       "harness_shares": sc["lab.harness_shares"], "initial_bandwidth": vars(bw0),
                       "quota_at": sc["lab.quota_at"], "quota_changes": window.quota_changes,
                       "memory_limit_bytes": launch.memory_limit_bytes(sc),
                       "memory_version": None if mem_cg is None else mem_cg.version},
            "calibration_rounds_per_cpu_ms": workload.info["calibration_rounds_per_cpu_ms"],
            "live_heap_nodes": workload.info.get("live_heap_nodes"),
            # a walk through its own live heap at start-up, each hop a likely miss beyond the L3 [ns]
            # (lab/cmd/workload heapWalkNs; absent before 2026-12-07)
            "heap_walk_ns_per_hop": workload.info.get("heap_walk_ns_per_hop"),
            "times": {"launch_unix_s": workload.launch_unix_s, "setup_s": round(workload.setup_s, 3),
                      "start_unix_s": window.start_unix_s, "end_unix_s": window.end_unix_s,
                      "start_utc": _utc(window.start_unix_s), "end_utc": _utc(window.end_unix_s),
                      "window_start_unix_s": s0.t_s, "window_end_unix_s": s1.t_s,
                      "warmup_s": warmup, "duration_s": duration},
            "loadavg": window.loadavg,
            "host_cpu": host_cpu,
            "tenant": tenant,
            "cgroup_counters": {"window_start": summary.counters(s0.stat), "window_end": summary.counters(s1.stat)},
            # the host's TLB flushes of other CPUs (/proc/interrupts "TLB", every CPU, every process)
            "host_interrupts": {"tlb": {"window_start": s0.tlb_flushes, "window_end": s1.tlb_flushes}},
            "memory_counters": {
                "window_start": None if s0.memory is None else asdict(s0.memory),
                "window_end": None if s1.memory is None else asdict(s1.memory),
                "peak_before_window": window.peak_since_start,
                "watch": watch_mean,
                "note": "cgroup memory at the window's ends; v1 max_usage_bytes restarts at the window's "
                        "start (peak_before_window: the peak since the cgroup was created, heap build "
                        "included); watch: 0.1 s samples, time-mean over the window"},
            "process_memory": {"pid": workload.proc.pid, "window_start": dict(s0.process),
                               "window_end": dict(s1.process)},
            "oom": window.oom,
            "profile": profile,
            "perf": window.perf,
            "exectrace": window.exectrace,
            "wake_placement": window.wake_placement,
            "thread_sleeps": window.thread_sleeps,
            "window_samples": {"note": "the /metrics samples the summary reads, at the window's start and end",
                               "workload": summary.window_samples(s0.workload, s1.workload),
                               "loadgen": summary.window_samples(s0.loadgen, s1.loadgen)},
            "scrapes": derive.scrape_health(raw_bodies, s0.t_s, s1.t_s),
            "snapshot_reads": {"note": "t_s run-relative; the workload's samples at the window's ends are "
                                       "captures it took itself at the booked instants (delay_s late)",
                               "reads": [{**r, **({"t_s": round(r["t_s"] - window.start_unix_s, 3)} if "t_s" in r else {})}
                                         for r in SNAPSHOT_READS]},
            "command": command,
            "command_line": shlex.join(command),
            "processes": {"workload": {"argv": workload.argv,
                                       "env": {k: workload.env[k] for k in launch.GO_ENV_CLEARED if k in workload.env}},
                          "loadgen": {"argv": loadgen.argv if loadgen else None},
                          "prometheus": {"argv": prom.argv, "targets": targets}},
            "exports": exports,
            "summary_notes": derive.SUMMARY_NOTES | {"latency": lab_kind(kind).latency_note},
            "status": status,
        }
        warnings = []
        if (s1.workload.get("go_sched_gomaxprocs_threads") is not None and not sc["cgroup.limit_schedule"]
                and not sc["lab.vpa_in_the_loop"] and int(s1.workload["go_sched_gomaxprocs_threads"]) != expected):
            warnings.append(f"GOMAXPROCS {int(s1.workload['go_sched_gomaxprocs_threads'])} differs from the "
                            f"policy's {expected}")
        got_gml = workload.info.get("gomemlimit_bytes")
        if got_gml is not None and (expected_gml or (1 << 63) - 1) != got_gml:
            warnings.append(f"GOMEMLIMIT {got_gml} differs from the policy's {expected_gml}")
        for r in SNAPSHOT_READS:
            for c in r.get("captures", []):
                late = max(c.get("delay_s") or 0, c.get("collect_s") or 0)
                if late > 0.25 or "error" in c:
                    warnings.append(f"the workload's {c['name']} capture: "
                                    + (c["error"] if "error" in c else
                                       f"began {c['delay_s']} s after its instant and took {c.get('collect_s')} s "
                                       "(a saturated process): its counters are that much late"))
        stolen = hostcpu.steal_warning(host_cpu)
        if stolen:
            warnings.append(stolen)
        if warnings:
            manifest["warnings"] = warnings
        manifest["cpu_watch"] = cpu_watch
        if sc["lab.gctrace"]:
            manifest["gctrace"] = write_gc_cycles(out_dir, workload.launch_unix_s, window.start_unix_s,
                                                  launch.gctrace_godebug(sc))
        summ = derive.summarize_manifest(manifest, raw_bodies)
        # the threads' CPU and switch-ins over the window, and per completed item (request, record, burn)
        done = (summ.get("throughput_per_s") or 0) * (s1.t_s - s0.t_s)
        manifest["threads"] = lab_threads.thread_window(s0.threads, s1.threads, s1.t_s - s0.t_s,
                                                        done if done > 0 and s1.threads else None)
        write_manifest(out_dir, manifest)
        (out_dir / "summary.json").write_text(json.dumps(summ, indent=1, sort_keys=True) + "\n")
        return summ


def write_gc_cycles(out_dir: Path, launch_unix_s: float, start_unix_s: float,
                    godebug: str = GODEBUG_GCTRACE) -> dict[str, Any]:
    """The runtime's per-cycle GC trace (``lab.gctrace``) from the workload's log into
    ``gc_cycles.csv.gz``, with ``run_t_s``: the cycle's start on the run's clock (the trace's
    ``@t`` is the cycle's sweep termination, ``work.tSweepTerm`` in ``src/runtime/mgc.go``, counted
    from the process's start, taken as its launch; a few ms early; :func:`cfsim.io.gctrace.cycle_table`
    adds the cycle's wall-clock phases to give its end). The log, ~300 KB
    a run with the trace, is kept gzipped (``logs/workload.log.gz``). Where the workload read the GC
    CPU limiter after its cycles (``logs/gc_limiter.log``, :mod:`cfsim.io.gclimiter`), that log is
    kept gzipped too, read with the run (:func:`cfsim.validation.twin.observed_summary`).
    Idempotent: a second call reads the gzipped logs."""
    logs = out_dir / "logs"
    gz = _gzip_log(logs / "workload.log")
    if gz is None:
        raise FileNotFoundError(f"{logs / 'workload.log'}: no such GC trace file")
    cycles, meta = read_gctrace(gz)
    cycles.insert(2, "run_t_s", (cycles["t_s"] + (launch_unix_s - start_unix_s)).round(4))
    limiter = _gzip_log(logs / LIMITER_LOG)
    info: dict[str, Any] = {}
    if limiter is not None:
        reads, lmeta = read_gc_limiter(limiter)
        judged = [f for f in limiter_turned_on(cycles["cycle"], reads) if f == f]
        info = {"limiter_log": f"logs/{limiter.name}", "limiter_reads": lmeta["reads"],
                "limiter_cycles_judged": len(judged), "limiter_cycles_turned_on": int(sum(judged)),
                "limiter_note": "the GC CPU limiter's last-enabled cycle read after GC cycles; which cycles it "
                                "turned on in: cfsim.io.gclimiter.limiter_turned_on (read with the run)"}
    cycles.to_csv(out_dir / "gc_cycles.csv.gz", index=False)
    return {"file": "gc_cycles.csv.gz", "cycles": meta["cycles"], "with_pacer": meta["with_pacer"],
            "with_scan_split": meta["with_scan_split"], "godebug": godebug, "log": "logs/workload.log.gz",
            "note": "cfsim.io.gctrace.read_gctrace reads the log back; run_t_s = t_s + launch_unix_s - start_unix_s, "
                    "the cycle's start (gctrace @t)", **info}


def _gzip_log(log: Path) -> Path | None:
    """``log`` gzipped beside itself (``log.gz``, the plain file removed); the ``.gz`` if only it
    is there (a second call); None if neither is."""
    gz = log.with_name(log.name + ".gz")
    if log.is_file():
        with open(log, "rb") as f, gzip.open(gz, "wb") as g:
            shutil.copyfileobj(f, g)
        log.unlink()
    return gz if gz.is_file() else None


def _write_startup_oom(sc: Scenario, out_dir: Path, run_id: str, command: list[str], tools: preflight.Tools,
                       mem: cgroup.MemoryStat, exc: WorkloadDied, c2c: dict[str, Any] | None = None,
                       memory_latency: dict[str, Any] | None = None) -> dict[str, Any]:
    """The workload was OOM-killed before it was ready (while building its live heap); ``c2c`` and
    ``memory_latency``: the host's cache-line round trip and the price of a load that misses every
    cache, measured before it started, as every run keeps them."""
    summ = dict.fromkeys(summary.SUMMARY_KEYS + summary.EXTRA_KEYS + summary.GC_MEMORY_KEYS)
    summ.update(cpu_limit_cores=initial_limit(sc), memory_limit_bytes=mem.limit_bytes, oom_kills=mem.oom_kills,
                memory_max_usage_bytes=mem.max_usage_bytes, memory_at_oom_bytes=mem.max_usage_bytes, oom_time_s=None)
    manifest = {"run_id": run_id, "scenario_toml": sc.to_toml(), "scenario": sc.to_dict(), "overrides": sc.overrides,
                "status": "oom", "host": host_facts(sc["lab.godebug"]), "host_c2c": c2c,
                "host_memory_latency": memory_latency, "code": code_version(),
                "oom": {"status": "oom", "phase": "start-up (live heap build)", "returncode": exc.returncode,
                        "oom_kills": mem.oom_kills, "memory_after_kill": asdict(mem)},
                "command": command, "command_line": shlex.join(command), "times": {"start_utc": _utc(time.time())},
                "gomaxprocs": {"expected_at_start": None}, "exports": {}}
    write_manifest(out_dir, manifest)
    (out_dir / "summary.json").write_text(json.dumps(summ, indent=1, sort_keys=True) + "\n")
    return summ
