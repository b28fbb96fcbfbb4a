"""What `recommend` says must match what it searched and simulated (found by trying it as a new user
would, 2026-12-04): the largest limit tried, the value each SLO is judged on, why the peers are
missing, and a patch that runs the GOMAXPROCS that was simulated."""
from __future__ import annotations

import json

from cfsim.advice.kubernetes import HOST_NOTE, change_from_overrides
from cfsim.advice.search import Candidate, Evaluation
from cfsim.advice.slo import parse_slo
from cfsim.cli import main


def test_the_host_policy_on_a_modern_go_goes_into_the_env_var():
    ch = change_from_overrides("app", [("go.gomaxprocs", "host")], host_env=80)
    assert ch.gomaxprocs == 80 and "GOMAXPROCS=80" in ch.notes[0]
    old = change_from_overrides("app", [("go.gomaxprocs", "host")])
    assert old.gomaxprocs is None and old.notes == [HOST_NOTE]


def test_an_evaluation_shows_the_value_each_slo_is_judged_on():
    e = Evaluation(Candidate(500, "host"), 2, {"burn_p99_s": 0.02, "cpu_usage_cores": 0.5}, False)
    d = e.as_dict([parse_slo("burn_p99_s<=0.01")])
    assert d["summary"]["burn_p99_s"] == 0.02 and d["slos_met"] == {"burn_p99_s<=0.01": False}


def test_the_answer_says_how_far_it_searched_and_why_peers_are_missing(capsys):
    assert main(["recommend", "cpu-bound-threads", "--slo", "throughput_per_s>=1", "--duration", "1",
                 "--max-limit", "1", "--workers", "0", "--no-progress"]) == 1   # nothing meets it
    out = capsys.readouterr().out
    assert "nothing up to 1 cores meets every SLO robustly" in out
    assert "not met up to 1 cores" in out
    assert "warning: no VPA/krr comparison: the peers need at least 2 s of usage after the warm-up" in out
    assert main(["recommend", "cpu-bound-threads", "--slo", "throughput_per_s>=1", "--duration", "1",
                 "--max-limit", "1", "--workers", "0", "--no-progress", "--no-peers", "--json"]) == 1
    rep = json.loads(capsys.readouterr().out)
    assert rep["searched_up_to_cores"] == 1.0 and rep["warnings"] == []
