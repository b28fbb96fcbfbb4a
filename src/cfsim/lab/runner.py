"""One lab run: build, cgroup, workload inside, load generator outside, Prometheus scraping
everything at 1 s, optional quota schedule (a VPA in-place resize), raw exports, manifest and
summary. Clean-up (processes, cgroup, Prometheus and its TSDB) runs on success, failure and Ctrl-C.

Run folder layout::

    manifest.json   scenario, environment, timings, commands, observed GOMAXPROCS
    summary.json    the keys of ``cfsim run --json``
    scenario.toml   the resolved scenario
    prom/raw.jsonl  /api/v1/query_range bodies of each metric, one per line, byte for byte
    prom/rate.jsonl the dashboard rate() queries, same format (line index in manifest["exports"])
    prom/samples.jsonl  /api/v1/query of ``<counter>[<range>]``: raw samples at their scrape times
    logs/*.log      workload, load generator and Prometheus output
"""
from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from cfsim.kernel.hostinfo import kernel_hz
from cfsim.lab import build, cgroup, exporter, launch, preflight, prometheus, queries, summary
from cfsim.lab.lock import machine_lock
from cfsim.scenario import Scenario, ScenarioError

READY_POLL_S = 0.05


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


def wait_ready(url: str, proc: subprocess.Popen, timeout_s: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{what} exited with code {proc.returncode} before it was ready:\n{tail}")
        try:
            http_get(url, timeout_s=2)
            return
        except OSError:
            time.sleep(READY_POLL_S)
    raise TimeoutError(f"{what} not ready after {timeout_s} s (raise lab.ready_timeout_s?)")


def _enter_cgroup(cg: cgroup.CpuCgroup) -> Callable[[], None]:
    # runs in the child between fork and exec: the Go runtime (and automaxprocs) then read the
    # cgroup's quota at their very first instruction, as in a container
    def enter() -> None:
        cg.add_pid(os.getpid())
    return enter


def host_facts() -> dict[str, Any]:
    cpu_model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"kernel": platform.release(), "kernel_version": platform.version(), "machine": platform.machine(),
            "cpu_model": cpu_model, "host_cpus": os.cpu_count(), "affinity_cpus": len(os.sched_getaffinity(0)),
            "hostname": platform.node(), "python": sys.version.split()[0], "hz": kernel_hz()}


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


def observed_gomaxprocs(raw_body: bytes, t_start: float) -> dict[str, Any]:
    """Distinct values of go_sched_gomaxprocs_threads over time from a query_range body."""
    data = json.loads(raw_body)["data"]["result"]
    changes: list[list[float]] = []
    for series in data:
        if series["metric"].get("job") != "workload":
            continue
        for ts, v in series["values"]:
            val = int(float(v))
            if not changes or changes[-1][1] != val:
                changes.append([round(float(ts) - t_start, 3), val])
    return {"changes_t_s": changes, "values": sorted({c[1] for c in changes}),
            "final": changes[-1][1] if changes else None}


def host_cpu_report(h0: tuple[float, float], h1: tuple[float, float], s0: summary.Snapshot,
                    s1: summary.Snapshot) -> dict[str, float]:
    wall = s1.t_s - s0.t_s
    busy = (h1[0] - h0[0]) / wall
    workload = (s1.stat.usage_ns - s0.stat.usage_ns) / 1e9 / wall
    return {"host_busy_cores": round(busy, 4), "workload_cores": round(workload, 4),
            "others_cores": round(busy - workload, 4),
            "note": "others = every process outside the cgroup: other tenants plus this harness, "
                    "the load generator and Prometheus"}


def check_scenario(sc: Scenario) -> None:
    if sc["lab.quota_at"] == "run" and sc["go.gomaxprocs"] in ("automaxprocs", "go1.25"):
        raise ScenarioError("lab.quota_at", "'run' would hide the quota from the GOMAXPROCS policy "
                                            f"{sc['go.gomaxprocs']!r} at start-up; use 'start-up'")
    if sc["workload.kind"] not in ("threads", "stream", "single-thread", "closed", "open"):
        raise ScenarioError("workload.kind", f"the lab has no workload {sc['workload.kind']!r}")


def host_busy_s() -> tuple[float, float]:
    """(busy CPU-seconds, total CPU-seconds) of the whole host from /proc/stat, to measure how
    much CPU other tenants used during the window (a noise indicator on a shared machine)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + fields[4]  # idle + iowait
    total = sum(fields[:8])  # guest time is already in user
    return (total - idle) / hz, total / hz


def _snapshot(cg: cgroup.CpuCgroup, workload_url: str, loadgen_url: str | None) -> summary.Snapshot:
    t = time.time()
    stat = cg.read_stat()
    w = l = {}
    try:
        w = summary.parse_exposition(http_get(workload_url + "/metrics", timeout_s=20))
    except OSError:
        pass
    if loadgen_url:
        try:
            l = summary.parse_exposition(http_get(loadgen_url + "/metrics", timeout_s=20))
        except OSError:
            pass
    return summary.Snapshot(t, stat, w, l)


def _sleep_until(t_unix: float) -> None:
    while (left := t_unix - time.time()) > 0:
        time.sleep(min(left, 0.2))


@dataclass(frozen=True)
class Workload:
    url: str
    argv: list[str]
    env: dict[str, str]
    info: dict[str, Any]  # /info at ready: GOMAXPROCS, calibration, Go version
    launch_unix_s: float
    setup_s: float


@dataclass(frozen=True)
class Loadgen:
    url: str
    argv: list[str]


@dataclass(frozen=True)
class Window:
    """What happened between t=0 and the end: the snapshots bounding the summary window."""

    start_unix_s: float
    end_unix_s: float
    snap0: summary.Snapshot
    snap1: summary.Snapshot
    host0: tuple[float, float]
    host1: tuple[float, float]
    quota_changes: list[dict[str, Any]]
    loadavg: dict[str, tuple[float, float, float]]


def start_workload(sc: Scenario, binary: Path, cg: cgroup.CpuCgroup, procs: Processes, logs: Path) -> Workload:
    """Launch the workload inside ``cg`` and wait until its heap is built and its loop calibrated."""
    port = prometheus.free_port()
    url = f"http://127.0.0.1:{port}"
    argv = launch.workload_command(binary, sc, f"127.0.0.1:{port}")
    env = launch.workload_env(sc)
    log = logs / "workload.log"
    t_launch = time.time()
    proc = procs.start(argv, log, env=env, preexec_fn=_enter_cgroup(cg))
    wait_ready(url + "/ready", proc, sc["lab.ready_timeout_s"], "workload", log)
    setup_s = time.time() - t_launch
    return Workload(url, argv, env, json.loads(http_get(url + "/info")), t_launch, setup_s)


def start_loadgen(sc: Scenario, binary: Path, target_url: str, procs: Processes, logs: Path,
                  enter: Callable[[], None] | None) -> Loadgen | None:
    """Launch the load generator (closed/open kinds) outside the workload's cgroup; it idles
    until ``POST /start`` so Prometheus can scrape it before t=0."""
    port = prometheus.free_port()
    argv = launch.loadgen_command(binary, sc, target_url + "/work", f"127.0.0.1:{port}")
    if argv is None:
        return None
    url = f"http://127.0.0.1:{port}"
    log = logs / "loadgen.log"
    proc = procs.start(argv, log, preexec_fn=enter)
    wait_ready(url + "/metrics", proc, 30, "loadgen", log)
    return Loadgen(url, argv)


def measure(sc: Scenario, cg: cgroup.CpuCgroup, workload: Workload, loadgen: Loadgen | None,
            log: Callable[[str], None], run_id: str) -> Window:
    """Start the load at t=0, apply the quota schedule, snapshot at warm-up end and at the end."""
    duration, warmup = sc["run.duration_s"], sc["run.warmup_s"]
    l_url = loadgen.url if loadgen else None
    load0 = os.getloadavg()
    t_start = time.time()
    http_get(workload.url + "/start", method="POST")
    if loadgen:
        http_get(loadgen.url + "/start", method="POST")
    events = sorted((float(t), lim) for t, lim in (sc["cgroup.limit_schedule"] or []) if 0 < t < duration)
    marks: list[tuple[float, str, Any]] = [(warmup, "snapshot", None)] + [(t, "quota", lim) for t, lim in events]
    quota_changes: list[dict[str, Any]] = []
    lab_vpa = None
    if sc["lab.vpa_in_the_loop"]:
        from cfsim.lab.vpa_loop import LabVpa

        def apply_limit(lim: float) -> None:
            cg.set_bandwidth(bandwidth_for(sc, lim))
        lab_vpa = LabVpa(sc, lambda: cg.read_stat().usage_ns, apply_limit, initial_limit(sc))
        marks += [(t, "vpa", None) for t in lab_vpa.tick_times(duration)]
    snap0: summary.Snapshot | None = None
    host0 = (0.0, 0.0)
    # a quota change at the same instant as the warm-up end comes after the snapshot
    for t, what, lim in sorted(marks, key=lambda m: (m[0], m[1] != "snapshot")):
        _sleep_until(t_start + t)
        if what == "snapshot":
            snap0, host0 = _snapshot(cg, workload.url, l_url), host_busy_s()
            continue
        if what == "vpa":
            change = lab_vpa.tick(round(time.time() - t_start, 4))
            if change:
                quota_changes.append({**change, "applied_t_s": round(time.time() - t_start, 4)})
                log(f"[{run_id}] t={change['t_s']:g} s: VPA {change['vpa_action']} -> "
                    f"limit {change['cpu_limit_cores']} cores ({change['reason']})")
            continue
        bw = bandwidth_for(sc, lim)
        cg.set_bandwidth(bw)
        quota_changes.append({"t_s": t, "applied_t_s": round(time.time() - t_start, 4),
                              "cpu_limit_cores": lim, "quota_us": bw.quota_us, "period_us": bw.period_us})
        log(f"[{run_id}] t={t:g} s: cpu limit -> {lim} cores")
    _sleep_until(t_start + duration)
    snap1, host1 = _snapshot(cg, workload.url, l_url), host_busy_s()
    t_end = time.time()
    assert snap0 is not None
    return Window(t_start, t_end, snap0, snap1, host0, host1, quota_changes,
                  {"start": load0, "end": os.getloadavg()})


def export_range(window: Window, step_s: float) -> tuple[float, float]:
    """Whole-second range ends (step times then line up across runs and with other tools),
    from 2 steps before t=0 to at least one step after the end."""
    return float(math.floor(window.start_unix_s - 2 * step_s)), float(math.ceil(window.end_unix_s + step_s))


def export_all(prom: prometheus.Prometheus, sc: Scenario, window: Window, folder: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Write ``prom/{raw,samples,rate}.jsonl`` (response bodies byte for byte, one per line) and
    return the manifest's export index and the raw bodies by metric."""
    kind, step = sc["workload.kind"], sc["lab.step_s"]
    q0, q1 = export_range(window, step)
    exports: dict[str, Any] = {"start_s": round(q0, 3), "end_s": round(q1, 3), "step_s": step,
                               "format": "one /api/v1/query_range response body per line, byte for byte; "
                                         "line numbers below (0-based); read with cfsim.lab.export.load_run",
                               "raw": {}, "rate": {}, "samples": {}, "empty": []}
    (folder / "prom").mkdir(exist_ok=True)
    raw_bodies: dict[str, bytes] = {}
    with open(folder / "prom" / "raw.jsonl", "wb") as f:
        for name in queries.raw_metrics(kind):
            body = prom.query_range(name, q0, q1, step)
            if not json.loads(body)["data"]["result"]:
                exports["empty"].append(name)
                continue
            raw_bodies[name] = body
            exports["raw"][name] = {"query": name, "line": len(raw_bodies) - 1}
            f.write(body.rstrip(b"\n") + b"\n")
    range_ms = int(round((q1 - q0) * 1000)) + 1
    with open(folder / "prom" / "samples.jsonl", "wb") as f:
        for i, name in enumerate(queries.sample_metrics(kind)):
            promql = f"{name}[{range_ms}ms]"
            f.write(prom.query(promql, q1).rstrip(b"\n") + b"\n")
            exports["samples"][name] = {"query": promql, "line": i, "time_s": round(q1, 3)}
    with open(folder / "prom" / "rate.jsonl", "wb") as f:
        for i, (name, promql) in enumerate(queries.rate_queries(kind, sc["lab.rate_window_s"]).items()):
            f.write(prom.query_range(promql, q0, q1, step).rstrip(b"\n") + b"\n")
            exports["rate"][name] = {"query": promql, "line": i}
    return exports, raw_bodies


def _utc(t_unix_s: float) -> str:
    return dt.datetime.fromtimestamp(t_unix_s, dt.timezone.utc).isoformat()


LATENCY_NOTES = {"stream": "record arrival to end of processing", "single-thread": "same as stream",
                 "closed": "client side (loadgen)", "open": "client side (loadgen)", "threads": "none; see burn_*"}


def run(sc: Scenario, out_dir: Path, run_id: str | None = None, command: list[str] | None = None,
        log: Callable[[str], None] = lambda s: print(s, file=sys.stderr)) -> dict[str, Any]:
    """Run one scenario for real; return the summary (also written to ``out_dir``)."""
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

    with contextlib.ExitStack() as cleanup:  # unwinds in reverse on success, error and Ctrl-C
        # one real measurement at a time on this machine (released last, after the clean-up)
        waited = cleanup.enter_context(machine_lock(f"lab run {run_id}"))
        if waited > 1:
            log(f"[{run_id}] waited {waited:.0f} s for another real measurement to finish")
        cgroup.remove_stale(tools.mounts)
        cg = cgroup.create(cgroup.run_name(run_id), tools.mounts, version)
        cleanup.callback(cg.remove)
        if sc["lab.cpu_shares"] is not None:
            cg.set_shares(sc["lab.cpu_shares"])
        harness_enter = None
        if sc["lab.harness_shares"] is not None:
            # Prometheus and the load generator: no quota, but a CPU weight, so other tenants
            # of a shared machine disturb the measurement chain less
            harness_cg = cgroup.create(cgroup.run_name(run_id) + "-harness", tools.mounts, version)
            cleanup.callback(harness_cg.remove)
            harness_cg.set_shares(sc["lab.harness_shares"])
            harness_enter = _enter_cgroup(harness_cg)
        start_limit = initial_limit(sc)
        bw0 = bandwidth_for(sc, start_limit)
        cg.set_bandwidth(bw0 if sc["lab.quota_at"] == "start-up" else bandwidth_for(sc, None))
        exp = exporter.serve(exporter.CgroupCollector(cg.read_stat, cg.bandwidth,
                                                      exporter.ContainerLabels(pod=f"cfsim-lab-{run_id}")))
        cleanup.callback(exp.stop)
        procs = Processes()
        cleanup.callback(procs.stop_all)

        workload = start_workload(sc, bins["workload"], cg, procs, out_dir / "logs")
        log(f"[{run_id}] workload ready in {workload.setup_s:.1f} s: GOMAXPROCS={workload.info['gomaxprocs']} "
            f"calibration={workload.info['calibration_rounds_per_cpu_ms']:.0f} rounds/CPU-ms")
        loadgen = start_loadgen(sc, bins["loadgen"], workload.url, procs, out_dir / "logs", harness_enter)
        targets = {"workload": workload.url.removeprefix("http://"), "cadvisor": f"127.0.0.1:{exp.port}"}
        if loadgen:
            targets["loadgen"] = loadgen.url.removeprefix("http://")
        prom = prometheus.Prometheus(tools.prometheus, targets, sc["lab.scrape_interval_s"],
                                     log_path=out_dir / "logs" / "prometheus.log", preexec_fn=harness_enter)
        cleanup.callback(prom.stop)
        prom.start()
        if sc["lab.quota_at"] == "run":
            cg.set_bandwidth(bw0)
        # every target scraped once, then one more interval: the exports start before t=0
        prom.wait_targets_up()
        time.sleep(sc["lab.scrape_interval_s"] + 0.2)

        window = measure(sc, cg, workload, loadgen, log, run_id)
        # keep everything running until a scrape after the export range's end: stopping earlier
        # would put Prometheus' staleness markers inside the exported range
        _sleep_until(export_range(window, sc["lab.step_s"])[1] + sc["lab.scrape_interval_s"] + 0.3)
        exports, raw_bodies = export_all(prom, sc, window, out_dir)
        procs.stop_all()

        warmup, duration = sc["run.warmup_s"], sc["run.duration_s"]
        limit_mean = summary.mean_limit_cores(start_limit, sc["cgroup.limit_schedule"], warmup, duration)
        summ = summary.summarize(kind, window.snap0, window.snap1, limit_mean)
        gmp = (observed_gomaxprocs(raw_bodies["go_sched_gomaxprocs_threads"], window.start_unix_s)
               if "go_sched_gomaxprocs_threads" in raw_bodies else {"changes_t_s": [], "values": [], "final": None})
        summ["gomaxprocs_changes"] = len([v for t, v in gmp["changes_t_s"] if warmup < t <= duration])
        expected = launch.expected_gomaxprocs(sc["go.gomaxprocs"], start_limit, len(os.sched_getaffinity(0)),
                                              sc["go.round"])
        s0, s1 = window.snap0, window.snap1
        manifest = {
            "run_id": run_id,
            "scenario_toml": sc.to_toml(),
            "scenario": sc.to_dict(),
            "scenario_source": sc.source,
            "overrides": sc.overrides,
            "gomaxprocs": {"policy": sc["go.gomaxprocs"], "round": sc["go.round"], "expected_at_start": expected,
                           "at_ready": workload.info["gomaxprocs"], "observed": gmp},
            "host": host_facts(),
            "go_version": build.go_version(tools.go) if tools.go else workload.info.get("go_version"),
            "workload_go_runtime": workload.info.get("go_version"),
            "prometheus_version": prometheus.version(tools.prometheus),
            "cgroup": {"version": cg.version, "name": cg.name, "cpu_shares": sc["lab.cpu_shares"],
                       "harness_shares": sc["lab.harness_shares"], "initial_bandwidth": vars(bw0),
                       "quota_at": sc["lab.quota_at"], "quota_changes": window.quota_changes},
            "calibration_rounds_per_cpu_ms": workload.info["calibration_rounds_per_cpu_ms"],
            "live_heap_nodes": workload.info.get("live_heap_nodes"),
            "times": {"launch_unix_s": workload.launch_unix_s, "setup_s": round(workload.setup_s, 3),
                      "start_unix_s": window.start_unix_s, "end_unix_s": window.end_unix_s,
                      "start_utc": _utc(window.start_unix_s), "end_utc": _utc(window.end_unix_s),
                      "window_start_unix_s": s0.t_s, "window_end_unix_s": s1.t_s,
                      "warmup_s": warmup, "duration_s": duration},
            "loadavg": window.loadavg,
            "host_cpu": host_cpu_report(window.host0, window.host1, s0, s1),
            "cgroup_counters": {"window_start": summary.counters(s0.stat), "window_end": summary.counters(s1.stat)},
            "window_samples": {"note": "the /metrics samples the summary reads, at the window's start and end",
                               "workload": summary.window_samples(s0.workload, s1.workload),
                               "loadgen": summary.window_samples(s0.loadgen, s1.loadgen)},
            "command": command,
            "command_line": shlex.join(command),
            "processes": {"workload": {"argv": workload.argv,
                                       "env": {k: workload.env[k] for k in launch.GO_ENV_CLEARED if k in workload.env}},
                          "loadgen": {"argv": loadgen.argv if loadgen else None},
                          "prometheus": {"argv": prom.argv, "targets": targets}},
            "exports": exports,
            "summary_notes": {
                "window": "summary uses direct reads at t_start+warmup_s and t_start+duration_s",
                "cpu_limit_cores": "time-averaged limit over the window",
                "latency": LATENCY_NOTES[kind],
                "gc_cpu_fraction": "runtime/metrics /cpu/classes/gc/total over (total - idle)",
                "sched_cpu_fraction": "not measurable without a profiler: null"},
            "status": "ok",
        }
        if summ["gomaxprocs"] is not None and summ["gomaxprocs"] != expected and not sc["cgroup.limit_schedule"]:
            manifest["warnings"] = [f"GOMAXPROCS {summ['gomaxprocs']} differs from the policy's {expected}"]
        (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True, default=str) + "\n")
        (out_dir / "summary.json").write_text(json.dumps(summ, indent=1, sort_keys=True) + "\n")
        return summ
