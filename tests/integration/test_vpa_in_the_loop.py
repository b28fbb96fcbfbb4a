"""Issue 5, on real hardware: cfsim's VPA moved a real quota (lab run committed in data/lab);
the long-horizon engine with the same scaled time constants must follow the same trajectory."""
import json
from pathlib import Path

import pytest

from cfsim.io.manifest import read_manifest


RUN = Path(__file__).resolve().parents[2] / "data" / "lab" / "vpa-in-the-loop" / "run-automaxprocs"


def _twin_events(tmp_path):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "cfsim", "trap", str(RUN / "scenario.toml"), "--response",
                          "analytic", "--no-t3", "--set", "vpa.days=0.0013888", "--json",
                          "--out", str(tmp_path / "trap")], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_simulated_vpa_follows_the_real_trajectory(tmp_path):
    if not RUN.is_dir():
        pytest.skip(f"{RUN} is not in this checkout")
    manifest = read_manifest(RUN)
    real = [q for q in manifest["cgroup"]["quota_changes"] if q.get("vpa_action")]
    real_gomaxprocs = json.loads((RUN / "summary.json").read_text())["gomaxprocs"]
    twin = _twin_events(tmp_path)
    sim = [e for e in twin["events"] if e["kind"] in ("resize", "evict")]
    # the trap forms the same way: the same number of updates, GOMAXPROCS stuck at 1,
    # and the request settles at the same value
    assert real_gomaxprocs == 1 and twin["final"]["gomaxprocs"] == 1
    assert len(sim) == len(real)
    assert real[-1]["request_cores"] == pytest.approx(twin["final"]["request_cores"], abs=0.002)
    for r, s in zip(real, sim):
        assert s["t_s"] == pytest.approx(r["t_s"], rel=0.12, abs=1.0)          # when each update came
        assert s["to"][0] / 1000 == pytest.approx(r["request_cores"], rel=0.08)  # and how big it was
