"""Execute every case-study notebook (notebooks/NN_*.py, jupytext py:percent) at the small CI size
(``CFSIM_SMALL=1``) with nbclient on a python3 kernel, fail on any cell error, and compare each
notebook's headline numbers with ``tests/golden/notebooks.json`` (regenerate on purpose with
``python tests/golden/regenerate_golden.py notebooks``).

Each notebook is executed once per session (the results are cached for the headline test)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

import nbexec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "golden"))
import goldenlib  # noqa: E402

pytestmark = pytest.mark.notebooks

PATHS = nbexec.notebook_paths()
IDS = [p.stem for p in PATHS]
_EXECUTED: dict[Path, nbexec.Executed] = {}


def executed(path: Path) -> nbexec.Executed:
    if path not in _EXECUTED:
        _EXECUTED[path] = nbexec.execute(path, small=True)
    return _EXECUTED[path]


def test_notebooks_are_text_only_and_start_with_parameters():
    import jupytext

    assert len(PATHS) >= 7, [p.name for p in PATHS]
    committed = sorted(p.name for p in nbexec.NOTEBOOKS.glob("*.ipynb"))
    assert not committed, f"commit notebooks as jupytext py:percent only, not {committed}"
    for path in PATHS:
        nb = jupytext.read(path, fmt="py:percent")
        first = nb.cells[0]
        assert first.cell_type == "code" and "parameters" in first.metadata.get("tags", []), \
            f"{path.name}: the first cell must be the code cell tagged 'parameters'"
        assert "CFSIM_SMALL" in first.source, f"{path.name}: the parameters cell must honour CFSIM_SMALL"


@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_notebook_executes(path):
    ex = executed(path)
    assert ex.error is None, f"{path.name}: {ex.error}"
    assert ex.headline is not None, f"{path.name}: printed no CFSIM_HEADLINE line"


@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_notebook_headline_matches_golden(path):
    golden = goldenlib.load("notebooks.json")
    if path.stem not in golden:
        pytest.fail(f"{path.stem} has no golden headline; run `{goldenlib.REGENERATE} notebooks {path.stem}`")
    ex = executed(path)
    if ex.error is not None or ex.headline is None:
        pytest.fail(f"{path.name} did not run to its headline ({ex.error}); see test_notebook_executes")
    problems = goldenlib.drift(ex.headline, golden[path.stem]["values"])
    assert not problems, goldenlib.failure_message(path.stem, problems)


def test_golden_file_lists_only_existing_notebooks():
    golden = goldenlib.load("notebooks.json")
    stale = sorted(k for k in golden if not k.startswith("_") and k not in IDS)
    assert not stale, (f"notebooks.json holds headlines of notebooks that no longer exist: {stale}; "
                       f"remove them or run `{goldenlib.REGENERATE} notebooks`")
