"""--format rendering, progress on and off a terminal, and the Kubernetes objects cfsim writes."""
from __future__ import annotations

import io
import json

import pytest

from cfsim.advice.kubernetes import (BURST_NOTE, GO125_NOTE, ContainerChange, change_from_overrides, request_for,
                                     strategic_patch, vpa_status)
from cfsim.autoscalers.vpa_recommender import Recommendation, cpu_quantity
from cfsim.cli import main
from cfsim.output import Answer, render
from cfsim.progress import Progress


def test_every_format_renders_the_same_answer():
    a = Answer({"rows": 2, "x": float("nan")}, [{"pod": "a", "cpu": 1.5, "tags": ["x"]}, {"pod": "b|c", "cpu": None}],
               "a table", "demo")
    assert json.loads(render(a, "json")) == {"rows": 2, "x": None}
    assert render(a, "table") == "a table\n"
    assert render(a, "csv").splitlines() == ["pod,cpu,tags", "a,1.5,\"[\"\"x\"\"]\"", "b|c,,"]
    assert "| b\\|c |  |  |" in render(a, "markdown")
    html = render(a, "html")
    assert html.startswith("<!doctype html>") and "<td>b|c</td>" in html and "<title>demo</title>" in html
    pytest.importorskip("yaml")
    assert render(a, "yaml") == "rows: 2\nx: null\n"


def test_json_and_format_disagreeing_is_an_error(capsys):
    with pytest.raises(SystemExit) as info:
        main(["scenarios", "--json", "--format", "yaml"])
    assert info.value.code == 2 and "disagree" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["audit", "/nonexistent"], ["recommend", "stream-consumer", "--slo", "lag_final_s<=60"]])
def test_emit_refuses_a_format_other_than_yaml_or_json(argv, capsys):
    # audit and recommend share the check (cfsim.commands._prometheus.check_emit_format)
    assert main([*argv, "--emit", "patch", "--format", "csv"]) == 2
    assert capsys.readouterr().err == "error: --emit patch prints yaml or json, not csv\n"


@pytest.mark.parametrize("fmt", ["table", "json", "yaml", "csv", "markdown", "html"])
def test_scenarios_answers_in_every_format(fmt, capsys):
    assert main(["scenarios", "grab-sinktos3", "--format", fmt]) == 0
    out = capsys.readouterr().out
    assert ("vpa" in out) and len(out) > 100


def test_progress_is_silent_off_a_terminal_unless_lines_are_asked_for():
    buf = io.StringIO()
    with Progress(20, "demo", "run", stream=buf) as bar:
        for _ in range(20):
            bar.advance()
    assert buf.getvalue() == "" and bar.done == 20
    buf = io.StringIO()
    with Progress(20, "demo", "run", lines=True, stream=buf) as bar:
        for _ in range(20):
            bar.advance()
    lines = buf.getvalue().splitlines()
    assert len(lines) == 11 and lines[0] == "demo: 1/20 run" and lines[-1] == "demo: 20/20 run"  # first, every 10 %
    buf = io.StringIO()
    with Progress(20, "demo", "run", lines=True, enabled=False, stream=buf) as bar:
        bar.advance(20)
    assert buf.getvalue() == ""


@pytest.mark.parametrize("m, text", [(1168, "1168m"), (1000, "1"), (2500, "2500m"), (0, "0"), (1, "1m"),
                                     (3_000_000, "3k"), (10 ** 14, "100G")])
def test_cpu_quantity_is_the_canonical_kubernetes_form(m, text):
    assert cpu_quantity(m) == text


def test_vpa_status_has_the_fields_the_vpa_writes():
    st = vpa_status({"app": Recommendation(1168, 1140, 15301, 1168)})
    (rec,) = st["recommendation"]["containerRecommendations"]
    assert rec == {"containerName": "app", "target": {"cpu": "1168m"}, "lowerBound": {"cpu": "1140m"},
                   "upperBound": {"cpu": "15301m"}, "uncappedTarget": {"cpu": "1168m"}}


def test_overrides_become_a_patch_with_notes_for_what_it_cannot_carry():
    ch = change_from_overrides("app", [("cgroup.cpu_limit", 1.7), ("cgroup.limit_schedule", None),
                                       ("cgroup.burst_us", 170_000), ("go.gomaxprocs", "go1.25")], request_now_m=2000)
    assert (ch.limit_m, ch.request_m, ch.gomaxprocs) == (1700, 1700, None)
    assert ch.notes == [GO125_NOTE, BURST_NOTE.format(ms=170)]
    ch = change_from_overrides("app", [("go.gomaxprocs", 2)])
    assert (ch.limit_m, ch.gomaxprocs, ch.notes) == (None, 2, [])
    assert request_for(1500, 1000) is None          # a request below the new limit stays as it is


def test_a_bare_pod_and_a_statefulset_patch_the_right_place():
    pod = strategic_patch(("Pod", "p-0"), "ns", [ContainerChange("c", gomaxprocs=3)])
    assert pod["apiVersion"] == "v1" and pod["spec"]["containers"][0]["env"][0]["value"] == "3"
    sts = strategic_patch(("StatefulSet", "db"), None, [ContainerChange("c", limit_m=500)])
    assert sts["apiVersion"] == "apps/v1" and "namespace" not in sts["metadata"]
    assert sts["spec"]["template"]["spec"]["containers"] == [{"name": "c", "resources": {"limits": {"cpu": "500m"}}}]
