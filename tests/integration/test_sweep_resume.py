"""kill -9 a real sweep subprocess mid-run, resume it, and check nothing is lost, duplicated or
recomputed."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from cfsim.sweep import Grid, SweepResults, parse_axis, run_sweep
from cfsim.sweep.store import RunStore

GRID = ["cgroup.cpu_limit=1:3:1", "go.gomaxprocs=host,2"]
FIXED = ["run.duration_s=60", "workload.jitter_ms=5"]
ARGS = ["cpu-bound-threads", "--grid", GRID[0], "--grid", GRID[1], "--seeds", "3",
        "--set", FIXED[0], "--set", FIXED[1], "--workers", "2", "--no-progress", "--json"]
TOTAL = 3 * 2 * 3


def _sweep(*extra):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    return [sys.executable, "-m", "cfsim", "sweep", *extra], env


def test_resume_after_kill_9(tmp_path):
    out = tmp_path / "out"
    cmd, env = _sweep(*ARGS, "--out", str(out))
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    store = RunStore(str(out))
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if out.joinpath("manifest.json").exists() and len(store.done_run_ids()) >= 5:
                    break
            except FileNotFoundError:  # a journal folded into a part while we listed it
                pass
            time.sleep(0.02)
        assert proc.poll() is None, f"the sweep ended before it could be killed: {proc.stderr.read()!r}"
        os.killpg(proc.pid, signal.SIGKILL)  # the parent and its pool workers, mid-run
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    before = RunStore(str(out)).read_table().to_pandas().set_index("run_id")["wall_s"]
    assert 5 <= len(before) < TOTAL, "killed too late to test anything"

    cmd, env = _sweep("--resume", "--out", str(out), "--no-progress", "--json")
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["skipped"], report["computed"]) == (len(before), TOTAL - len(before))

    res = SweepResults.open(out)
    df = res.frame
    assert len(df) == TOTAL and df["run_id"].is_unique and (df["status"] == "ok").all()
    # finished runs were not recomputed: their rows (down to the wall time) are the ones from before
    after = df.set_index("run_id")["wall_s"]
    pd.testing.assert_series_equal(after.loc[before.index], before)
    assert not list(out.rglob("*.tmp"))
    assert res.manifest["counts"] == {"ok": TOTAL} and res.manifest["resumed_utc"]

    # and the resumed study equals one that was never interrupted
    ref = tmp_path / "ref"
    run_sweep("cpu-bound-threads", Grid(parse_axis(g) for g in GRID), out=ref, seeds=3,
              overrides=FIXED, workers=0, progress=False)
    cols = [c for c in df.columns if c != "wall_s"]
    pd.testing.assert_frame_equal(SweepResults.open(ref).frame[cols], df[cols])
