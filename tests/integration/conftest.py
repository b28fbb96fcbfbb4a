"""Shared by the integration tests that run Debian's real ``prometheus`` on loopback
(``test_io_prometheus_live.py``, ``test_prometheus_live_cli.py``): the ``start_prometheus``
fixture and a ``free_port``."""
from __future__ import annotations

import base64
import contextlib
import socket
import ssl
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _prometheus(work: Path, tsdb: Path, *, web_config: Path | None = None, ca: Path | None = None,
                basic_auth: tuple[str, str] | None = None, ready_timeout_s: float = 30.0):
    """Serve ``tsdb`` (no scrape targets) on a free loopback port; yield its base URL once
    ``/-/ready`` answers 200, fail the test (with the log's tail) if it does not in time; stop it
    on exit. ``web_config`` is ``--web.config.file`` (TLS, basic auth): with ``ca`` the URL is
    https and trusts that CA, with ``basic_auth`` (user, password) the readiness probe logs in."""
    (work / "prometheus.yml").write_text("global: {}\n")
    log = work / "prometheus.log"
    port = _free_port()
    args = ["prometheus", f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={tsdb}",
            "--storage.tsdb.retention.time=100y", f"--web.listen-address=127.0.0.1:{port}"]
    if web_config is not None:
        args.append(f"--web.config.file={web_config}")
    with open(log, "wb") as err:
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err)
    url = f"{'https' if ca is not None else 'http'}://127.0.0.1:{port}"
    ctx = ssl.create_default_context(cafile=str(ca)) if ca is not None else None
    headers = {} if basic_auth is None else {
        "Authorization": "Basic " + base64.b64encode(":".join(basic_auth).encode()).decode()}
    ready = urllib.request.Request(url + "/-/ready", headers=headers)
    try:
        deadline = time.monotonic() + ready_timeout_s
        while True:
            try:
                with urllib.request.urlopen(ready, timeout=2, context=ctx) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"prometheus did not become ready (exit code {proc.poll()}):\n{log.read_text()[-2000:]}")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@pytest.fixture(scope="session")
def start_prometheus():
    """:func:`_prometheus`, a context manager: ``with start_prometheus(work, tsdb, ...) as url``."""
    return _prometheus


@pytest.fixture
def free_port() -> int:
    """A loopback TCP port nothing listens on (at the time of asking)."""
    return _free_port()
