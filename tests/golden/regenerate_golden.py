"""Regenerate the golden model outputs on purpose (then review the diff in the commit).

From the repository root::

    python tests/golden/regenerate_golden.py                 # everything (about a minute)
    python tests/golden/regenerate_golden.py scenarios       # built-in scenarios + the trap only
    python tests/golden/regenerate_golden.py notebooks       # notebook headlines only (CFSIM_SMALL=1)
    python tests/golden/regenerate_golden.py notebooks 03_gomaxprocs32_in_8cores   # one notebook
    python tests/golden/regenerate_golden.py --reset-tolerances   # re-derive every tolerance

Writes ``tests/golden/scenarios.json`` (a short ``run`` of every built-in scenario, and
``trap --response analytic --set vpa.days=2``) and ``tests/golden/notebooks.json`` (each notebook's
``CFSIM_HEADLINE`` numbers at the small CI size). A key already in a file keeps its tolerance, so
a tolerance edited by hand survives; new keys get the rule in :data:`goldenlib.RULES`. The tests
that recompute them: ``tests/golden/test_golden.py`` and ``tests/notebooks/test_notebooks.py``.
"""
from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
if str(HERE.parent / "notebooks") not in sys.path:
    sys.path.insert(0, str(HERE.parent / "notebooks"))

import goldenlib  # noqa: E402

SCENARIOS_FILE = "scenarios.json"
NOTEBOOKS_FILE = "notebooks.json"


def _values(values: Mapping[str, Any], old: Mapping[str, Any] | None, reset: bool) -> dict[str, Any]:
    old = {} if (old is None or reset) else old.get("values", {})
    return {k: goldenlib.entry(k, v, old.get(k)) for k, v in sorted(values.items())}


def _header(about: str) -> dict[str, Any]:
    import cfsim

    return {"_about": about, "_regenerate": goldenlib.REGENERATE, "_tolerance_rules": goldenlib.rules_doc(),
            "_generated": {"utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                           "cfsim": cfsim.__version__}}


def _report(case: str, new: Mapping[str, Any], old: Mapping[str, Any] | None) -> None:
    if old is None:
        print(f"  {case}: new ({len(new['values'])} keys)")
        return
    problems = goldenlib.drift({k: v["value"] for k, v in new["values"].items()}, old.get("values", {}))
    print(f"  {case}: " + ("unchanged within tolerance" if not problems else
                           f"{len(problems)} change(s):\n    " + "\n    ".join(problems)))


def _load_or_empty(path: Path) -> dict:
    """The golden file's cases, or none when it does not exist yet."""
    try:
        return goldenlib.load(path)
    except FileNotFoundError:
        return {}


def regenerate_scenarios(reset: bool = False) -> Path:
    from cfsim.scenario import builtin_names

    old = _load_or_empty(SCENARIOS_FILE)
    data = _header("Headline numbers of every built-in scenario (a short `python -m cfsim run`) and of "
                   "`python -m cfsim trap` (analytic response), recomputed by tests/golden/test_golden.py.")
    for name in builtin_names():
        case = {"how": f"cfsim.simulate({name!r}, {goldenlib.scenario_overrides(name)!r}).summary",
                "values": _values(goldenlib.compute_scenario(name), old.get(name), reset)}
        _report(name, case, old.get(name))
        data[name] = case
    case = {"how": f"cfsim.trap.run_trap('grab-sinktos3', {goldenlib.TRAP_OVERRIDES!r}, "
                   f"response_mode='analytic'); event_final_*: cfsim.simulate('grab-sinktos3', "
                   f"{goldenlib.TRAP_EVENT_RUN!r} + ['cgroup.cpu_limit=<final request>']) on the event engine",
            "values": _values(goldenlib.compute_trap(), old.get("trap:grab-sinktos3"), reset)}
    _report("trap:grab-sinktos3", case, old.get("trap:grab-sinktos3"))
    data["trap:grab-sinktos3"] = case
    return goldenlib.save(SCENARIOS_FILE, data)


def regenerate_notebooks(names: list[str], reset: bool = False) -> Path:
    import nbexec

    old = _load_or_empty(NOTEBOOKS_FILE)
    data = _header("Headline numbers each case-study notebook prints (CFSIM_HEADLINE line) when executed "
                   "at the small CI size (CFSIM_SMALL=1); recomputed by tests/notebooks/test_notebooks.py.")
    stems = {p.stem for p in nbexec.notebook_paths()}
    for key, value in old.items():  # keep the (existing) notebooks not regenerated this time
        if not key.startswith("_") and key in stems:
            data[key] = value
    for path in nbexec.notebook_paths():
        if names and path.stem not in names:
            continue
        ex = nbexec.execute(path, small=True)
        if ex.error:
            raise SystemExit(f"{path.name} failed ({ex.error}); golden files not written")
        if ex.headline is None:
            raise SystemExit(f"{path.name} printed no CFSIM_HEADLINE line; golden files not written")
        case = {"how": f"CFSIM_SMALL=1, executed with nbclient ({ex.wall_s:.0f} s here)",
                "values": _values(ex.headline, old.get(path.stem), reset)}
        _report(path.stem, case, old.get(path.stem))
        data[path.stem] = case
    return goldenlib.save(NOTEBOOKS_FILE, data)


def main(argv: list[str]) -> int:
    reset = "--reset-tolerances" in argv
    args = [a for a in argv if not a.startswith("--")]
    what = args[0] if args and args[0] in ("scenarios", "notebooks") else "all"
    names = args[1:] if what != "all" else []
    if what in ("all", "scenarios"):
        print(f"wrote {regenerate_scenarios(reset)}")
    if what in ("all", "notebooks"):
        print(f"wrote {regenerate_notebooks(names, reset)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
