"""Up to which utilization the host's kernel keeps a woken thread beside its waker although another
CPU is idle (lab/cmd/packbench, cfsim.lab.wakepack, `cfsim lab wakepack`)."""
import json
import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from cfsim.cli import main
from cfsim.lab import build
from cfsim.lab.wakepack import (PackbenchError, exclusion, pack_params, params_toml, read_packbench,
                                run_packbench, vcpu_pack_sysctl)


def _line(round_=0, waker=0.6, wakee=0.05, same=0.99, sleep=140, wakee_busy=20, other=0.01, blocks=1.0, **extra):
    # the shape packbench prints, with the utilizations given and the rest plausible
    d = {"round": round_, "point": 0, "waker_busy_us": 300, "waker_busy_before_write_us": 150,
         "wakee_busy_us": wakee_busy, "sleep_us": sleep, "wakes": 2000, "wall_s": 0.96, "waker_util": waker,
         "wakee_util": wakee, "util_sum": round(waker + wakee, 6), "same_cpu_share": same, "wakee_cpu_changes": 0,
         "waker_cpu_changes": 0, "wake_latency_us_same_median": 5.0 if same > 0 else None,
         "wake_latency_us_other_median": 20.0 if same < 1 else None, "waker_blocks_per_cycle": 1.0,
         "wakee_blocks_per_wake": blocks, "other_util": other, "cpus": 2}
    d.update(extra)
    return json.dumps(d)


# (waker util, wakee util, same-CPU share): packed up to a sum of 0.65, spread from 0.71, as the
# lab's VM did by hand (X=Z=150, Y=20, S=140 vs 120 us; Y=250 vs 300 at S=500)
_SETTINGS = [(0.2, 0.02, 1.0), (0.4, 0.03, 0.99), (0.55, 0.05, 0.98), (0.6, 0.05, 0.992), (0.37, 0.28, 0.978),
             (0.65, 0.06, 0.0), (0.37, 0.35, 0.0), (0.25, 0.55, 0.01), (0.77, 0.08, 0.0), (0.82, 0.1, 0.0)]


def _output(settings=_SETTINGS, rounds=1, **kw):
    return "\n".join(_line(r, w, e, s, **kw) for r in range(rounds) for w, e, s in settings) + "\n"


def test_the_bound_is_the_midpoint_of_the_band_between_packed_and_spread():
    rows, meta = read_packbench(_output(rounds=2), "pb.jsonl")
    assert meta["source"] == "pb.jsonl" and meta["rounds"] == 2 and meta["cpus"] == 2 and len(rows) == 20
    fit = pack_params(rows)
    # the largest sum that packed 0.65, the smallest that spread 0.71
    assert fit == {"pair_pack_util": 0.68, "band": [0.65, 0.71], "misclassified": 0, "points": 20,
                   "excluded": 0}


def test_a_setting_on_the_edge_that_went_both_ways_is_counted_not_refused():
    # the setting at sum 0.71 spread in round 0 and packed in round 1: the band closes, and the
    # midpoint misplaces one of twenty (10 % are allowed)
    lines = _output(rounds=2).splitlines()
    lines[15] = _line(1, 0.65, 0.06, 0.9)
    fit = pack_params(read_packbench("\n".join(lines))[0])
    assert fit["band"] == [0.71, 0.71] and fit["pair_pack_util"] == 0.71
    assert fit["misclassified"] == 1 and fit["points"] == 20


def test_no_side_or_overlapping_sides_are_refused():
    rows, _ = read_packbench(_output([(w, e, 1.0) for w, e, _ in _SETTINGS]))
    with pytest.raises(PackbenchError, match="every setting packed, up to util_sum 0.920"):
        pack_params(rows)
    rows, _ = read_packbench(_output([(w, e, 0.0) for w, e, _ in _SETTINGS]))
    with pytest.raises(PackbenchError, match="no setting packed .*select_idle_sibling"):
        pack_params(rows)
    # packing that does not follow the sum: two high sums packed, two low ones spread
    mixed = [(0.2, 0.02, 0.0), (0.4, 0.03, 0.0)] + _SETTINGS[2:5] + [(0.65, 0.06, 0.0), (0.37, 0.35, 0.0),
                                                                    (0.25, 0.55, 0.01), (0.77, 0.08, 0.9),
                                                                    (0.82, 0.1, 0.95)]
    with pytest.raises(PackbenchError, match=r"overlap: util_sum up to 0.920 packed and from 0.220 spread.* "
                                             r"misplaces \d+ of 10"):
        pack_params(read_packbench(_output(mixed))[0])
    with pytest.raises(PackbenchError, match="no settings"):
        pack_params([])


def test_settings_beside_a_busy_host_are_left_out_and_too_many_refused():
    lines = _output().splitlines()
    # a neighbour on the other CPU while one high-sum setting ran: it packed, and is left out
    lines[-1] = _line(0, 0.82, 0.1, 1.0, other=0.9)
    rows, _ = read_packbench("\n".join(lines))
    assert exclusion(rows[-1]) == "the rest of the host used 0.90 of a CPU"
    fit = pack_params(rows)
    assert fit["excluded"] == 1 and fit["points"] == 9 and fit["pair_pack_util"] == 0.68
    # a wakee still busy when the byte came made no wake-up
    assert exclusion(read_packbench(_line(blocks=0.5))[0][0]) == "the wakee blocked on 0.50 of its reads"
    rows, _ = read_packbench(_output(other=0.5))
    with pytest.raises(PackbenchError, match="10 of 10 settings left out .*quiet host"):
        pack_params(rows)
    # the benchmark could not read /proc/stat: nothing to leave out for
    rows, _ = read_packbench(_output(other=None))
    assert pack_params(rows)["excluded"] == 0


def test_malformed_output_names_the_source_and_line():
    good = _line()
    with pytest.raises(PackbenchError, match="pb.jsonl line 2: not JSON"):
        read_packbench(good + "\n{oops\n", "pb.jsonl")
    missing = json.loads(good)
    del missing["util_sum"], missing["wakes"]
    with pytest.raises(PackbenchError, match="pb.jsonl line 3: missing wakes, util_sum"):
        read_packbench(good + "\n\n" + json.dumps(missing), "pb.jsonl")
    with pytest.raises(PackbenchError, match="pb.jsonl line 1: a field that is not a number"):
        read_packbench(_line(waker_util="busy"), "pb.jsonl")
    with pytest.raises(PackbenchError, match="line 1: no wake-ups"):
        read_packbench(_line(wakes=0))
    with pytest.raises(PackbenchError, match=r"line 2: same_cpu_share must be within 0 and 1 \(got 1.5\)"):
        read_packbench(good + "\n" + _line(same=1.5))
    with pytest.raises(PackbenchError, match="line 1: a negative utilization"):
        read_packbench(_line(wakee=-0.1))
    with pytest.raises(PackbenchError, match="line 1: other_util is not a number"):
        read_packbench(_line(other="high"))
    with pytest.raises(PackbenchError, match="no measurements"):
        read_packbench("\n")


def test_params_file_round_trips_through_tomllib():
    rows, _ = read_packbench(_output(rounds=2))
    fit = pack_params(rows)
    text = params_toml(fit, rows, "python -m cfsim lab wakepack", sysctl="15")
    doc = tomllib.loads(text)
    assert doc["params"] == {}     # a measurement of the host, no model parameter
    m = doc["measurement"]
    assert m["pair_pack_util"] == 0.68
    assert m["band"] == [0.65, 0.71] and m["misclassified"] == 0 and m["points"] == 20 and m["excluded"] == 0
    assert m["rounds"] == 2 and m["sched_vcpu_pack"] == 15 and len(m["setting"]) == 20
    # by sum, each with what the fit used
    assert [s["util_sum"] for s in m["setting"]] == sorted(r["util_sum"] for r in rows)
    assert all(s["fitted"] and s["wakes"] == 2000 for s in m["setting"])
    assert "# Reproduce: python -m cfsim lab wakepack" in text and "select_idle_sibling" in text
    assert "kernel.sched_vcpu_pack = 15" in text and "Band: packed up to 0.65, spread from 0.71" in text
    # one comment row per setting, read across the bound
    assert len(re.findall(r"^#   [01], ", text, re.M)) == 20
    assert vcpu_pack_sysctl(Path(os.devnull)) == "" and vcpu_pack_sysctl(Path("/no/such/sysctl")) is None


def test_lab_wakepack_cli_writes_a_params_file_from_a_saved_output(tmp_path, capsys):
    saved = tmp_path / "pb.jsonl"
    saved.write_text(_output())
    out = tmp_path / "host.toml"
    assert main(["lab", "wakepack", "--from", str(saved), "--out", str(out)]) == 0
    text = out.read_text()
    assert tomllib.loads(text)["params"] == {} and tomllib.loads(text)["measurement"]["pair_pack_util"] == 0.68
    # the default is two rounds, so the reproduce line does not name them
    assert f"# Reproduce: python -m cfsim lab wakepack --out {out}" in text
    captured = capsys.readouterr()
    assert "pair_pack_util 0.68: packed up to util_sum 0.65" in captured.err
    assert main(["lab", "wakepack", "--from", str(tmp_path / "missing.jsonl")]) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{}\n")
    assert main(["lab", "wakepack", "--from", str(bad)]) == 2
    assert "bad.jsonl line 1: missing" in capsys.readouterr().err
    spread = tmp_path / "spread.jsonl"
    spread.write_text(_output([(w, e, 0.0) for w, e, _ in _SETTINGS]))
    assert main(["lab", "wakepack", "--from", str(spread)]) == 2
    assert "no setting packed" in capsys.readouterr().err


def test_a_binary_that_cannot_run_is_a_clear_error(tmp_path):
    with pytest.raises(PackbenchError, match="no-such-packbench cannot run"):
        run_packbench(tmp_path / "no-such-packbench", rounds=1)
    with pytest.raises(PackbenchError, match="--rounds must be >= 1"):
        run_packbench(tmp_path / "x", rounds=0)


@pytest.mark.lab
def test_the_real_bench_packs_at_a_low_sum_and_spreads_at_a_high_one(tmp_path):
    """Builds lab/cmd/packbench and runs its quick grid (three settings, about 2 s) on this machine."""
    go = build.go_binary()
    if go is None:
        pytest.skip("Go is not installed (needed to build lab/cmd/packbench)")
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        pytest.skip("no CPU affinity here (os.sched_getaffinity)")
    if cpus < 2:
        pytest.skip("one CPU: no idle CPU to spread a wake-up to")
    if vcpu_pack_sysctl() is None:
        pytest.skip("this kernel has no kernel.sched_vcpu_pack: mainline spreads every wake-up, no bound to see")
    binary = tmp_path / "packbench"
    res = subprocess.run([go, "build", "-o", str(binary), "./cmd/packbench"], cwd=build.lab_dir(),
                         capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        pytest.skip(f"lab/cmd/packbench does not build here: {res.stderr.strip()[-500:]}")
    text = run_packbench(binary, rounds=1, grid="quick", dur_s=0.5)
    rows, meta = read_packbench(text, binary.name)
    assert meta["rounds"] == 1 and meta["settings"] == 3 and meta["cpus"] == cpus
    busy = [r for r in rows if exclusion(r) is not None]
    if busy:
        # a neighbour on the other CPU leaves no idle CPU to spread to: that is not the kernel's rule
        pytest.skip(f"the host was not quiet: {exclusion(busy[0])}")
    low, high = min(rows, key=lambda r: r["util_sum"]), max(rows, key=lambda r: r["util_sum"])
    # nothing but the pipe and the sleep blocked either thread (the Go scheduler never parked them)
    assert all(0.95 <= r["wakee_blocks_per_wake"] <= 1.05 for r in rows)
    assert low["util_sum"] < 0.5 and low["same_cpu_share"] > 0.8
    assert high["util_sum"] > 0.85 and high["same_cpu_share"] < 0.2
