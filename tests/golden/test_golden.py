"""Regression of model outputs: every built-in scenario's headline numbers (a short run) and the
trap's, recomputed and compared with ``tests/golden/scenarios.json`` within the per-key tolerances
stored there. Regenerate on purpose with ``python tests/golden/regenerate_golden.py`` (README,
"Regression of model outputs"). The notebooks' headlines are checked in tests/notebooks."""
from __future__ import annotations

import pytest

import goldenlib
from cfsim.scenario import builtin_names

GOLDEN = goldenlib.load("scenarios.json")
CASES = [k for k in GOLDEN if not k.startswith("_")]


def test_every_builtin_scenario_has_golden_numbers():
    missing = sorted(set(builtin_names()) - set(CASES))
    assert not missing, (f"built-in scenarios without golden numbers: {', '.join(missing)}; "
                         f"run `{goldenlib.REGENERATE} scenarios`")


@pytest.mark.parametrize("name", [c for c in CASES if not c.startswith("trap:")])
def test_builtin_scenario_matches_golden(name):
    if name not in builtin_names():
        pytest.fail(f"{name} is in scenarios.json but no longer a built-in; run `{goldenlib.REGENERATE} scenarios`")
    problems = goldenlib.drift(goldenlib.compute_scenario(name), GOLDEN[name]["values"])
    assert not problems, goldenlib.failure_message(name, problems)


def test_trap_matches_golden():
    problems = goldenlib.drift(goldenlib.compute_trap(), GOLDEN["trap:grab-sinktos3"]["values"])
    assert not problems, goldenlib.failure_message("trap:grab-sinktos3", problems)


def test_drift_detection_and_tolerances():
    golden = {"x_per_s": goldenlib.entry("x_per_s", 100.0), "gomaxprocs": goldenlib.entry("gomaxprocs", 2),
              "flag": goldenlib.entry("flag", True), "throttled_ratio": goldenlib.entry("throttled_ratio", 0.5)}
    assert golden["x_per_s"] == {"value": 100.0, "rel": 0.03, "abs": 1e-9}
    assert not goldenlib.drift({"x_per_s": 102.9, "gomaxprocs": 2, "flag": True, "throttled_ratio": 0.515}, golden)
    problems = goldenlib.drift({"x_per_s": 104.0, "gomaxprocs": 3, "flag": False, "throttled_ratio": 0.6,
                                "extra": 1}, golden)
    assert [p.split(":")[0] for p in problems] == ["x_per_s", "gomaxprocs", "flag", "throttled_ratio", "extra"]
    # a tolerance edited by hand survives a regeneration
    kept = goldenlib.entry("x_per_s", 50.0, {"value": 1.0, "rel": 0.5, "abs": 0.0})
    assert kept == {"value": 50.0, "rel": 0.5, "abs": 0.0}
