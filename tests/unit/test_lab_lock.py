"""The machine-wide measurement lock: exclusive, reports its holder, times out, survives death."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from cfsim.lab.lock import MachineBusy, holder, machine_lock


@pytest.fixture(autouse=True)
def _private_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("CFSIM_LAB_LOCK", str(tmp_path / "lab.lock"))


def test_second_taker_times_out_and_names_the_holder():
    with machine_lock("grid point p001") as waited:
        assert waited < 1
        assert "grid point p001" in holder()
        child = subprocess.run([sys.executable, "-c",
                                "from cfsim.lab.lock import machine_lock\n"
                                "with machine_lock('x', timeout_s=0.5): pass"],
                               capture_output=True, text=True)
        assert child.returncode != 0
        assert "MachineBusy" in child.stderr and "grid point p001" in child.stderr


def test_lock_is_released_when_the_holder_is_killed():
    proc = subprocess.Popen([sys.executable, "-c",
                             "import time\nfrom cfsim.lab.lock import machine_lock\n"
                             "with machine_lock('doomed'):\n    print('held', flush=True); time.sleep(60)"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    with pytest.raises(MachineBusy):
        with machine_lock("me", timeout_s=0.3):
            pass
    proc.kill()
    proc.wait()
    t0 = time.monotonic()
    with machine_lock("me", timeout_s=5):
        assert time.monotonic() - t0 < 5


def test_a_waiter_gets_its_turn_from_a_holder_that_retakes_the_lock_at_once():
    # a grid releases the lock after a run and takes it again a few milliseconds later: a waiter
    # that polled (every POLL_S) would almost never see it free; one blocked in flock is woken
    proc = subprocess.Popen([sys.executable, "-c",
                             "import time\nfrom cfsim.lab.lock import machine_lock\n"
                             "print('start', flush=True)\n"
                             "for i in range(40):\n"
                             "    with machine_lock(f'run {i}'):\n        time.sleep(0.1)\n"
                             "    time.sleep(0.002)\n"
                             "print('done', flush=True)"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "start"
        time.sleep(0.2)
        with machine_lock("waiter") as waited:
            assert proc.poll() is None, "the holder finished all its runs before the waiter got a turn"
            assert waited < 2.0
    finally:
        proc.kill()
        proc.wait()
