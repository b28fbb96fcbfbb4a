"""The kernel's view of the workload: ``perf stat`` counters and a ``perf record`` split by DSO.

A Go CPU profile (pprof) sees only what the process's own timer signals sample, and at high
GOMAXPROCS under a quota it misattributes: a SIGPROF that becomes pending while the thread
handles a preemption signal (SIGURG) is delivered when the handler returns, at
``runtime.asyncPreempt`` (``signal_unix.go``, ``doSigPreempt``), so samples of the interrupted
code pile up there. ``perf`` counts in the kernel instead: context switches (voluntary and
involuntary), migrations, page faults, signal deliveries and the system calls behind the switches
of every thread of the process, and
samples CPU time, kernel included, with timer interrupts rather than signals.

Two ``perf`` processes attach to the workload's pid at once for ``lab.perf_s`` seconds:

* ``perf stat -x, -e <PERF_EVENTS> -p <pid> -- sleep <s>`` (CSV on stderr), parsed by
  :func:`parse_perf_stat`;
* ``perf record -e cpu-clock -F 499 -g -k CLOCK_MONOTONIC -p <pid> -o <tmp> -- sleep <s>`` and then
  ``perf report --sort dso`` / ``--sort dso,sym``, parsed by :func:`parse_perf_report`. The
  recording itself is not kept (only the shares go to the manifest), so data stays lean.
  Given the lab's ``profsplit``, the call chains are split by the same stack rules as a Go CPU
  profile (``perf script -F tid,time,ip,sym`` -> ``profsplit -perf-script``: user, scheduler
  and GC CPU, kernel frames included) and each sample's time and group are kept
  (``perf_samples.csv.gz``, on the run's clock: CLOCK_MONOTONIC, the clock the samples carry,
  read against the wall clock when the probe starts), so the GC's real CPU can be lined up with
  its cycles (:func:`read_perf_samples`), which the runtime's ``/cpu/classes`` cannot give: they
  count P-time, and at more Ps than CPUs a worker holds its P while its thread waits.

Needs the ``perf`` tool (Debian: ``apt-get install linux-perf``) and root or
``kernel.perf_event_paranoid <= 0``; the tracepoints need tracefs (and syscall tracepoints
``CONFIG_FTRACE_SYSCALLS``): an event perf does not support is counted as ``None``.
"""
from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

from cfsim.io.errors import CfsimParseError
from cfsim.lab.probe import WindowProbe

#: counted by ``perf stat``: software events and tracepoints (no PMU needed, so they work in VMs).
#: The system calls are where an M's context switches come from: ``futex`` (``futexsleep`` /
#: ``futexwakeup``: M park and wake-up, ``notesleep``), ``nanosleep`` (``usleep``: sysmon's polls,
#: ``runqgrab``'s 3 us back-off), ``epoll_pwait`` (``netpoll``), ``sched_yield`` (``osyield``);
#: ``read``/``write`` are the network I/O. ``madvise`` is the scavenger's release of free pages, one
#: call a contiguous run (``sysUnused`` in ``pageAlloc.scavengeOne``, ``mgcscavenge.go``), and
#: ``tlb:tlb_flush`` the TLB flushes that ran on the process's threads (the releasing thread's own
#: and the shootdown interrupts it sent to other CPUs running them: ``arch/x86/mm/tlb.c``), so the
#: flushes a release costs are counted per call rather than read from the host-wide "TLB" row of
#: ``/proc/interrupts``. Enabling syscall tracepoints slows every system call of the process by a
#: little (the kernel's tracing entry path).
PERF_EVENTS = ("task-clock", "context-switches", "cpu-migrations", "page-faults", "signal:signal_deliver",
               "syscalls:sys_enter_futex", "syscalls:sys_enter_nanosleep", "syscalls:sys_enter_epoll_pwait",
               "syscalls:sys_enter_sched_yield", "syscalls:sys_enter_read", "syscalls:sys_enter_write",
               "syscalls:sys_enter_madvise", "tlb:tlb_flush")
#: sampling frequency of ``perf record`` [Hz] (odd, so it does not beat with HZ = 250/1000 ticks)
RECORD_HZ = 499
#: the DSO name perf gives kernel samples
KERNEL_DSO = "[kernel.kallsyms]"

_REPORT_LINE = re.compile(r"^\s*(?P<pct>\d+(?:\.\d+)?)%\s+(?P<rest>\S.*?)\s*$")


class PerfError(RuntimeError):
    """perf is missing or failed; the message says what to do."""


def perf_binary() -> str:
    """The ``perf`` executable, or a PerfError saying how to get it."""
    path = shutil.which("perf")
    if path is None:
        raise PerfError("lab.perf_s needs the perf tool: apt-get install linux-perf")
    return path


def run_tool(argv: list[str], what: str, timeout: float, stdout: Any = subprocess.PIPE,
             makes: Path | None = None) -> str:
    """Run one of a probe's tools (``perf``, ``profsplit``) to the end and return its standard
    output (``stdout``: where it goes instead, e.g. an open file); a PerfError naming ``what``, its
    exit status and the tail of its standard error when it fails or does not write ``makes``."""
    res = subprocess.run(argv, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=timeout)
    if res.returncode != 0 or (makes is not None and not makes.exists()):
        raise PerfError(f"{what} exited {res.returncode}: {res.stderr.strip()[-300:]}")
    return res.stdout or ""


def parse_perf_stat(text: str, source: str = "perf stat") -> dict[str, float | None]:
    """``perf stat -x,`` output -> ``{event: value}`` (``None`` for '<not supported>' or
    '<not counted>'). task-clock is in milliseconds as perf gives it.

    >>> parse_perf_stat("3747.69,msec,task-clock,3747690000,100.00,0.936,CPUs utilized\\n"
    ...                 "5473,,context-switches,3747690000,100.00,1.460,K/sec\\n"
    ...                 "<not supported>,,signal:signal_deliver,0,100.00,,")
    {'task-clock': 3747.69, 'context-switches': 5473.0, 'signal:signal_deliver': None}
    """
    out: dict[str, float | None] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split(",")
        if len(fields) < 3:
            raise ValueError(f"{source}: line {lineno}: expected 'value,unit,event,...', got {line!r}")
        value, event = fields[0].strip(), fields[2].strip()
        if value.startswith("<"):
            out[event] = None
            continue
        try:
            out[event] = float(value)
        except ValueError:
            raise ValueError(f"{source}: line {lineno}, column 1: not a number: {value!r}") from None
    return out


def parse_perf_report(text: str) -> list[tuple[float, str]]:
    """``perf report --stdio`` rows -> ``[(fraction, key), ...]`` in the order given (comments and
    call-graph lines skipped).

    >>> parse_perf_report("# Overhead  Shared Object\\n    82.66%  workload\\n    17.01%  [kernel.kallsyms]\\n")
    [(0.8266, 'workload'), (0.1701, '[kernel.kallsyms]')]
    """
    rows = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = _REPORT_LINE.match(line)
        if m:
            rows.append((round(float(m.group("pct")) / 100.0, 6), re.sub(r"\s+", " ", m.group("rest"))))
    return rows


def summarise(counters: dict[str, float | None], seconds: float, dso: list[tuple[float, str]],
              symbols: list[tuple[float, str]], top: int = 15) -> dict[str, Any]:
    """The manifest's ``perf`` block: counters per second, the kernel's share of the sampled CPU,
    and the top symbols."""
    per_s = {k: (None if v is None else (v / 1000.0 if k == "task-clock" else v) / seconds)
             for k, v in counters.items()}
    kernel = sum(f for f, name in dso if name == KERNEL_DSO)
    return {"counters": counters,
            "per_s": {("cpu_cores" if k == "task-clock" else k): (None if v is None else round(v, 4))
                      for k, v in per_s.items()},
            "dso_fraction": {name: f for f, name in dso},
            "kernel_fraction": round(kernel, 4) if dso else None,
            "top_symbols": [{"fraction": f, "symbol": s} for f, s in symbols[:top]]}


#: the samples' file in a run folder: one row per ``perf record`` sample (``t_s`` on the run's
#: clock, profsplit's ``group`` and ``category``)
PERF_SAMPLES_FILE = "perf_samples.csv.gz"
PERF_SAMPLES_COLUMNS = ("t_s", "group", "category")


def read_perf_samples(path: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """A run's ``perf_samples.csv.gz``: ``(samples, meta)``, one row per CPU sample of
    ``1 / meta["hz"]`` s (``t_s`` on the run's clock, ``group`` user / scheduler / gc,
    ``category`` profsplit's detail). Errors name the file and the line.

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp(); f = os.path.join(d, "s.csv.gz")
    >>> with gzip.open(f, "wt") as fh:
    ...     _ = fh.write("t_s,group,category\\n5.001,gc,gc_mark_worker\\n5.003,user,user_kernel\\n")
    >>> s, meta = read_perf_samples(f)
    >>> list(s["group"]), meta["hz"]
    (['gc', 'user'], 499)
    """
    path = Path(path)
    try:
        df = pd.read_csv(path)
    except (OSError, ValueError, EOFError) as exc:
        raise CfsimParseError(str(path), str(exc)) from None
    missing = [c for c in PERF_SAMPLES_COLUMNS if c not in df.columns]
    if missing:
        raise CfsimParseError(str(path), f"missing column(s) {', '.join(missing)}", line=1)
    bad = pd.to_numeric(df["t_s"], errors="coerce").isna()
    if bad.any():
        raise CfsimParseError(str(path), "t_s is not a number", line=int(bad.to_numpy().argmax()) + 2, column=1)
    return df, {"path": str(path), "hz": RECORD_HZ, "samples": len(df)}


#: fewer samples of the concurrent mark's work than this (0.1 s of CPU at perf's 499 Hz) split it
#: too coarsely to report
MIN_MARK_SAMPLES = 50


def assist_cpu_share(samples: pd.DataFrame, span: tuple[float, float]) -> float | None:
    """The assists' share of the concurrent mark's real CPU: perf's samples on assist stacks over
    those on assists' and mark workers' (dedicated, fractional and idle alike: profsplit's
    ``gc_assist`` and ``gc_mark_worker``), inside the recording's ``span`` on the run's clock.
    Neither happens outside a mark, so no mark boundary is needed; None under
    :data:`MIN_MARK_SAMPLES` samples.

    >>> s = pd.DataFrame({"t_s": [1.0, 1.1, 1.2, 1.3, 9.0], "category": ["gc_assist", "gc_mark_worker",
    ...                   "gc_mark_worker", "user", "gc_assist"]})
    >>> assist_cpu_share(s, (0.5, 5.0)) is None   # 3 samples of the mark's work: too few
    True
    >>> s = pd.concat([s] * 20, ignore_index=True)
    >>> round(assist_cpu_share(s, (0.5, 5.0)), 3)
    0.333
    """
    t = samples["t_s"].to_numpy(dtype=float)
    inside = samples[(t >= span[0]) & (t <= span[1])]
    assist = int((inside["category"] == "gc_assist").sum())
    worker = int((inside["category"] == "gc_mark_worker").sum())
    if assist + worker < MIN_MARK_SAMPLES:
        return None
    return assist / (assist + worker)


class PerfProbe(WindowProbe):
    """``perf stat`` and ``perf record`` on one pid for ``seconds``, in the background. With the
    lab's ``profsplit`` binary and a ``series_path``, the recording's call chains are split into
    user / scheduler / GC CPU and each sample is written to ``series_path`` with its time on the
    clock that starts at ``origin_unix_s``."""

    errors = (OSError, PerfError, ValueError, subprocess.SubprocessError)

    def __init__(self, pid: int, seconds: float, profsplit: Path | None = None, series_path: Path | None = None,
                 origin_unix_s: float = 0.0):
        super().__init__("cfsim-lab-perf")
        self.pid, self.seconds = pid, seconds
        self.profsplit, self.series_path, self.origin_unix_s = profsplit, series_path, origin_unix_s
        # CLOCK_MONOTONIC (the samples' clock) on the wall clock, read once at the start
        self.mono_to_unix_s = 0.0

    def measure(self) -> dict[str, Any]:
        self.mono_to_unix_s = time.time() - time.monotonic()
        perf = perf_binary()
        secs = f"{self.seconds:g}"
        with tempfile.TemporaryDirectory(prefix="cfsim-perf-") as tmp:
            data = Path(tmp) / "perf.data"
            stat = subprocess.Popen([perf, "stat", "-x,", "-e", ",".join(PERF_EVENTS), "-p", str(self.pid),
                                     "--", "sleep", secs], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    text=True)
            rec = subprocess.run([perf, "record", "-q", "-e", "cpu-clock", "-F", str(RECORD_HZ), "-g",
                                  "-k", "CLOCK_MONOTONIC", "-p", str(self.pid), "-o", str(data), "--", "sleep", secs],
                                 capture_output=True, text=True, timeout=self.seconds + 60)
            _, stat_err = stat.communicate(timeout=self.seconds + 60)
            if stat.returncode != 0:
                raise PerfError(f"perf stat exited {stat.returncode}: {stat_err.strip()[-300:]}")
            counters = parse_perf_stat(stat_err)
            if rec.returncode != 0 or not data.exists():
                raise PerfError(f"perf record exited {rec.returncode}: {rec.stderr.strip()[-300:]}")

            def report(sort: str) -> list[tuple[float, str]]:
                return parse_perf_report(run_tool([perf, "report", "-i", str(data), "--stdio", "--no-children",
                                                   "--sort", sort], f"perf report --sort {sort}", 120))
            out = summarise(counters, self.seconds, report("dso"), report("dso,sym"))
            if self.profsplit is not None and self.series_path is not None:
                out["stack_split"] = self._stack_split(perf, data, Path(tmp))
            return out

    def _stack_split(self, perf: str, data: Path, tmp: Path) -> dict[str, Any]:
        """profsplit's user / scheduler / GC split of the recording, and its samples on the run's clock."""
        script, series = tmp / "perf.script", tmp / "series.csv"
        with open(script, "w") as fh:
            run_tool([perf, "script", "-i", str(data), "-F", "tid,time,ip,sym"], "perf script", 300, stdout=fh)
        split = json.loads(run_tool([str(self.profsplit), "-perf-script", str(script), "-hz", str(RECORD_HZ),
                                     "-series", str(series)], "profsplit -perf-script", 300))
        s = pd.read_csv(series)
        s["t_s"] = (s["t_s"] + self.mono_to_unix_s - self.origin_unix_s).round(4)
        with gzip.GzipFile(self.series_path, "wb", mtime=0) as gz:
            gz.write(s.to_csv(index=False).encode())
        return {**{k: split[k] for k in ("cpu_s", "samples", "split_cpu_s", "detail_cpu_s", "rules")},
                "samples_file": self.series_path.name, "hz": RECORD_HZ}
