"""Run Debian's Prometheus for one lab run: loopback only, temporary TSDB, 1 s scrapes; query
``/api/v1/query_range`` and keep the response bodies byte for byte."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path


TSDB_PREFIX = "cfsim-lab-prom-"  # + owner pid + "-": a later run can tell a dead owner's TSDB


def remove_stale_tsdb(tmp_root: Path | None = None) -> list[str]:
    """Delete the temporary TSDB folders of lab runs whose owner process is gone (a ``kill -9``
    skips the clean-up that deletes them)."""
    root = Path(tmp_root or tempfile.gettempdir())
    removed = []
    for d in root.glob(f"{TSDB_PREFIX}*"):
        owner = d.name[len(TSDB_PREFIX):].split("-", 1)[0]
        if not owner.isdigit() or not d.is_dir():
            continue
        try:
            os.kill(int(owner), 0)
            continue  # alive
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed.append(str(d))
    return removed


def free_port() -> int:
    """A free loopback TCP port (the kernel picks it; a tiny race with other users remains)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prometheus_binary() -> str | None:
    return shutil.which("prometheus")


def version(binary: str) -> str:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    return (out.stdout or out.stderr).splitlines()[0].strip()


def scrape_config(targets: dict[str, str], interval_s: float = 1.0) -> str:
    """prometheus.yml text: one job per target (job name -> host:port); JSON is valid YAML."""
    interval = f"{int(interval_s * 1000)}ms"
    config = {
        "global": {"scrape_interval": interval, "scrape_timeout": interval, "evaluation_interval": interval},
        "scrape_configs": [{"job_name": job, "static_configs": [{"targets": [addr]}]}
                           for job, addr in sorted(targets.items())],
    }
    return json.dumps(config, indent=1)


@dataclass
class Prometheus:
    """A running server; use as a context manager so it always stops and its TSDB is deleted."""

    binary: str
    targets: dict[str, str]
    interval_s: float = 1.0
    log_path: Path | None = None
    port: int = 0
    proc: subprocess.Popen | None = None
    tmp: Path | None = None
    argv: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, ready_timeout_s: float = 30.0) -> "Prometheus":
        self.tmp = Path(tempfile.mkdtemp(prefix=f"{TSDB_PREFIX}{os.getpid()}-"))
        (self.tmp / "prometheus.yml").write_text(scrape_config(self.targets, self.interval_s))
        self.port = free_port()
        self.argv = [self.binary, f"--config.file={self.tmp / 'prometheus.yml'}",
                     f"--storage.tsdb.path={self.tmp / 'tsdb'}",
                     f"--web.listen-address=127.0.0.1:{self.port}",
                     "--storage.tsdb.retention.time=1d", "--log.level=warn"]
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        try:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                         cwd=self.tmp, start_new_session=True)
        finally:
            if self.log_path:
                log.close()
        deadline = time.monotonic() + ready_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited with code {self.proc.returncode} at start-up"
                                   + (f"; see {self.log_path}" if self.log_path else ""))
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.1)
        raise TimeoutError(f"prometheus not ready after {ready_timeout_s} s")

    def get(self, path: str, params: dict[str, str], timeout_s: float = 60.0) -> bytes:
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=timeout_s) as r:
            return r.read()

    def query_range(self, query: str, start_s: float, end_s: float, step_s: float = 1.0) -> bytes:
        """The raw response body of ``/api/v1/query_range`` (exactly as returned)."""
        return self.get("/api/v1/query_range", {"query": query, "start": f"{start_s:.3f}",
                                                "end": f"{end_s:.3f}", "step": f"{step_s:g}"})

    def query(self, query: str, time_s: float) -> bytes:
        return self.get("/api/v1/query", {"query": query, "time": f"{time_s:.3f}"})

    def targets_up(self) -> dict[str, str]:
        """job -> health ('up'/'down'/'unknown') of the scrape targets."""
        body = json.loads(self.get("/api/v1/targets", {}))
        return {t["labels"]["job"]: t["health"] for t in body["data"]["activeTargets"]}

    def wait_targets_up(self, timeout_s: float = 30.0) -> dict[str, str]:
        """Wait until every target has been scraped successfully once. Prometheus hands targets
        from discovery to the scrape manager only every 5 s, so the first scrape comes seconds
        after /-/ready; starting the run before it would lose the first samples."""
        deadline = time.monotonic() + timeout_s
        health: dict[str, str] = {}
        while time.monotonic() < deadline:
            try:
                health = self.targets_up()
            except (urllib.error.URLError, ConnectionError, TimeoutError, KeyError, ValueError):
                health = {}
            if set(health) == set(self.targets) and all(h == "up" for h in health.values()):
                return health
            time.sleep(0.2)
        raise TimeoutError(f"prometheus targets not all up after {timeout_s} s: {health}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None

    def __enter__(self) -> "Prometheus":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
