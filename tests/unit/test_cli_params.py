"""``--params FILE.toml`` on the commands that simulate a user's scenario: a measured host or a fit
reaches run, sweep, trap and recommend as it reaches the validation's twins; --set wins; a bad file
is refused with its name."""
from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from cfsim.advice.memory import advise_memory
from cfsim.advice.search import uncertainty_for
from cfsim.cli import main
from cfsim.commands._params import read_cli_params
from cfsim.scenario import load_scenario
from cfsim.validation.calibrate import read_params_files

ROOT = Path(__file__).resolve().parents[2]

# an open service on 2 CPUs near its 0.5-core limit: the host's switch and wake-up prices move it
SERVICE = ["host.cpus=2", "cgroup.cpu_limit=0.5", "workload.kind=open", "workload.rate_per_s=600",
           "workload.cpu_ms_per_request=0.4", "go.gomaxprocs=2", "run.duration_s=2"]
HOST = {"host.cpu_sharing": "slices", "host.context_switch_us": 17.9, "host.thread_switch_us": 0.956,
        "host.wakeup_us": 20.0}


def _file(tmp_path, name: str, params: dict, extra: str = "") -> str:
    body = "".join(f'"{k}" = {json.dumps(v)}\n' for k, v in params.items())
    path = tmp_path / name
    path.write_text(f"[params]\n{body}{extra}")
    return str(path)


def _run(argv: list[str], capsys) -> dict:
    assert main(["run", "cpu-bound-threads", *argv, "--json", "--no-band"]) == 0
    return json.loads(capsys.readouterr().out)


def test_run_applies_a_host_file_as_the_same_settings_would(tmp_path, capsys):
    host = _file(tmp_path, "host.toml", HOST)
    sets = [a for s in SERVICE for a in ("--set", s)]
    plain = _run(sets, capsys)
    with_file = _run(sets + ["--params", host], capsys)
    by_hand = _run(sets + [a for k, v in HOST.items() for a in ("--set", f"{k}={v}")], capsys)
    assert with_file == by_hand
    # the time slices and their prices are there: the same service uses more CPU than on a free host
    assert with_file["cpu_usage_cores"] > plain["cpu_usage_cores"] * 1.02


def test_set_wins_over_a_file_and_two_files_merge(tmp_path, capsys):
    a = _file(tmp_path, "a.toml", {"host.wakeup_us": 20.0})
    b = _file(tmp_path, "b.toml", {"host.context_switch_us": 2.5})
    out = tmp_path / "out"
    assert main(["run", "cpu-bound-threads", "--set", "run.duration_s=0.2", "--set", "host.wakeup_us=5",
                 "--params", a, "--params", b, "--out", str(out), "--no-band"]) == 0
    capsys.readouterr()
    resolved = tomllib.loads(next(out.glob("*.toml")).read_text())
    assert resolved["host"]["wakeup_us"] == 5.0 and resolved["host"]["context_switch_us"] == 2.5


def test_a_fitted_cost_factor_scales_the_users_own_value(tmp_path):
    from cfsim.commands._params import read_cli_params, settings

    fit = _file(tmp_path, "fit.toml", {"cost_factor": 1.5})
    over = settings("cpu-bound-threads", ["workload.kind=open", "workload.cpu_ms_per_request=0.4"],
                    read_cli_params([fit]))
    sc = load_scenario("cpu-bound-threads", over)
    assert sc["workload.cpu_ms_per_request"] == pytest.approx(0.6)


@pytest.mark.parametrize("command", [["run", "cpu-bound-threads"], ["trap"],
                                     ["recommend", "cpu-bound-threads", "--slo", "throughput_per_s>=1"],
                                     ["sweep", "cpu-bound-threads", "--grid", "cgroup.cpu_limit=1,2"]])
@pytest.mark.parametrize("content, says", [
    (None, "No such file"),
    ("[params\n", "bad.toml: Expected"),                      # malformed: the file and the position
    ('[params]\n"host.bogus" = 1\n', "host.bogus: unknown key"),
    ('[params]\n"host.wakeup_us" = [1]\n', "host.wakeup_us must be a number"),
    ('[other]\n"host.wakeup_us" = 1\n', "no [params] table"),
])
def test_a_bad_file_is_refused_with_its_name(tmp_path, capsys, command, content, says):
    path = tmp_path / "bad.toml"
    if content is not None:
        path.write_text(content)
    extra = ["--out", str(tmp_path / "sweep")] if command[0] == "sweep" else []
    assert main([*command, "--params", str(path), *extra]) == 2
    err = capsys.readouterr().err
    assert "--params" in err and says in err
    assert not (tmp_path / "sweep").exists()


def test_sweep_records_the_files_settings_and_resumes_only_with_them(tmp_path, capsys):
    host = _file(tmp_path, "host.toml", {"host.context_switch_us": 2.5})
    out = str(tmp_path / "sw")
    argv = ["sweep", "cpu-bound-threads", "--grid", "cgroup.cpu_limit=1,2", "--set", "run.duration_s=0.3",
            "--out", out, "--workers", "0", "--no-progress"]
    assert main(argv + ["--params", host]) == 0
    manifest = json.loads((tmp_path / "sw" / "manifest.json").read_text())
    assert manifest["scenario"]["overrides"] == ["host.context_switch_us=2.5", "run.duration_s=0.3"]
    assert main(argv + ["--params", host, "--resume"]) == 0              # the same files: nothing lost
    capsys.readouterr()
    assert main(argv + ["--resume"]) == 2                                 # without them: a different base
    assert "--params files" in capsys.readouterr().err
    assert main(["sweep", "--resume", "--out", out, "--params", host]) == 2
    assert "keeps the manifest's overrides" in capsys.readouterr().err


def test_sweep_refuses_a_cost_factor_on_an_axis_it_scales(tmp_path, capsys):
    fit = _file(tmp_path, "fit.toml", {"cost_factor": 1.2})
    assert main(["sweep", "cpu-bound-threads", "--set", "workload.kind=open",
                 "--grid", "workload.cpu_ms_per_request=0.1,0.2", "--params", fit,
                 "--out", str(tmp_path / "sw"), "--workers", "0"]) == 2
    assert "cost_factor scales workload.cpu_ms_per_request" in capsys.readouterr().err


def test_recommend_takes_several_files_with_a_choice_and_their_sigmas(tmp_path):
    # a choice (a string) in one file used to fail the safety margin's float() with a traceback
    a = _file(tmp_path, "a.toml", {"host.cpu_sharing": "slices"})
    b = _file(tmp_path, "b.toml", {"go.sched_wake_us": 8.0},
              extra='[uncertainty."go.sched_wake_us"]\nsigma_log = 0.2\n')
    sc = load_scenario("cpu-bound-threads", ["workload.kind=open"])
    u = uncertainty_for(sc, [a, b])
    nominal, pess = dict(u.nominal), dict(u.pessimistic)
    assert nominal["host.cpu_sharing"] == "slices" and nominal["go.sched_wake_us"] == 8.0
    assert pess["go.sched_wake_us"] == pytest.approx(8.0 * 2.718281828 ** 0.2)
    assert "a.toml" in u.description and "b.toml" in u.description
    kept = dict(uncertainty_for(sc, [a, b], keep=["go.sched_wake_us"]).nominal)
    assert "go.sched_wake_us" not in kept


def test_no_memory_advice_for_a_workload_without_memory():
    # bare OS threads model no Go heap: no advice, not a 0 MiB limit the scenario then refuses
    sc = load_scenario("cpu-bound-threads", ["run.duration_s=0.2", "host.cpus=2"])
    assert advise_memory(sc) is None


def test_every_committed_parameter_file_reads_and_names_training_runs_that_exist():
    """docs/params/*.toml: each file's [params] are scenario keys (or a fit's cost_factor) and the
    runs its [fit] was trained on exist in data/lab, so that `validate` reports them as training
    (a fit whose runs are not listed would be scored on them as if held out)."""
    files = sorted((ROOT / "docs" / "params").glob("*.toml"))
    assert files
    # every file together, as `--params` reads them: no key set twice differently, none unknown
    assert read_cli_params([str(f) for f in files])
    train = read_params_files(files)[1]
    for run in train:
        assert (ROOT / run).is_dir() or not (ROOT / "data" / "lab").is_dir(), f"{run}: no such lab run"
    resume = read_params_files([ROOT / "docs" / "params" / "lab-host-resume.toml"])[1]
    assert len(resume) == 24 and all("/idle-cost/" in r and "_g12_" in r for r in resume)
