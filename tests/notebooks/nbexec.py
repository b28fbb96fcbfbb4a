"""Execute the case-study notebooks (jupytext py:percent) the way CI does, and read their headlines.

``execute(path)`` converts ``notebooks/NN_name.py`` with jupytext to an in-memory notebook, runs it
with nbclient on an ipykernel of the current interpreter (a temporary kernelspec, so no
``ipykernel install`` step is needed) with ``CFSIM_SMALL=1``
and the notebooks folder as working directory, and returns the executed notebook, the wall time
and the headline numbers the notebook printed (one ``CFSIM_HEADLINE {json}`` line).

Used by ``tests/notebooks/test_notebooks.py`` and ``tests/golden/regenerate_golden.py``. Run it
directly to execute notebooks and see their wall time and headline (``--full``: the full size)::

    python tests/notebooks/nbexec.py notebooks/01_trap.py [--full]
"""
from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
HEADLINE_PREFIX = "CFSIM_HEADLINE "
#: per-cell timeout [s] (a cell that hangs fails the test instead of the whole CI job; notebook 06's
#: validation cell takes about 10 min at the small size, two runs and two calibration twins a grid)
CELL_TIMEOUT_S = 900


def notebook_paths() -> list[Path]:
    """The case studies: ``notebooks/NN_*.py`` (helpers such as ``_nbutil.py`` are not notebooks)."""
    return sorted(p for p in NOTEBOOKS.glob("[0-9][0-9]_*.py"))


@dataclass
class Executed:
    path: Path
    notebook: Any
    wall_s: float
    headline: dict[str, Any] | None
    error: str | None = None


def _headline(nb) -> dict[str, Any] | None:
    found = None
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            text = out.get("text", "") if out.get("output_type") == "stream" else ""
            for line in str(text).splitlines():
                if line.startswith(HEADLINE_PREFIX):
                    found = json.loads(line[len(HEADLINE_PREFIX):])
    return found


def _cell_error(nb) -> str | None:
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                return f"cell {i}: {out.get('ename')}: {out.get('evalue')}"
    return None


KERNEL_NAME = "cfsim-nbexec"


def _kernel_dir() -> Path:
    """A kernelspec that runs ipykernel on THIS interpreter (whatever other ``python3`` kernelspecs
    the machine has), in a temporary folder put first on ``JUPYTER_PATH``; no install step needed."""
    import tempfile

    root = Path(tempfile.gettempdir()) / f"cfsim-nbexec-kernel-{os.getuid() if hasattr(os, 'getuid') else 0}"
    spec = root / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True, exist_ok=True)
    body = json.dumps({"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                       "display_name": "Python 3 (cfsim tests)", "language": "python"}, indent=1)
    target = spec / "kernel.json"
    if not target.is_file() or target.read_text() != body:
        tmp = spec / f"kernel.json.{os.getpid()}"
        tmp.write_text(body)
        os.replace(tmp, target)
    return root


def execute(path: str | Path, small: bool = True, timeout: int = CELL_TIMEOUT_S) -> Executed:
    """Convert and execute one py:percent notebook; never raises on a cell error (see ``.error``)."""
    import jupytext
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    path = Path(path)
    nb = jupytext.read(path, fmt="py:percent")
    before = {k: os.environ.get(k) for k in ("CFSIM_SMALL", "MPLBACKEND", "JUPYTER_PATH")}
    os.environ["CFSIM_SMALL"] = "1" if small else "0"
    # the kernel's inline backend (renders PNG outputs headless, as Jupyter does), whatever MPLBACKEND says
    os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    os.environ["JUPYTER_PATH"] = os.pathsep.join(p for p in (str(_kernel_dir()), before["JUPYTER_PATH"]) if p)
    t0 = time.perf_counter()
    error = None
    try:
        client = NotebookClient(nb, timeout=timeout, kernel_name=KERNEL_NAME,
                                resources={"metadata": {"path": str(path.parent)}})
        client.execute()
    except CellExecutionError as exc:
        error = str(exc).strip().splitlines()[-1] if str(exc).strip() else repr(exc)
        error = _cell_error(nb) or error
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    wall = time.perf_counter() - t0
    return Executed(path, nb, wall, _headline(nb), error or _cell_error(nb))


def main(argv: list[str]) -> int:
    full = "--full" in argv
    paths = [Path(a) for a in argv if not a.startswith("--")] or notebook_paths()
    status = 0
    for p in paths:
        ex = execute(p, small=not full)
        print(f"{p.name}: {ex.wall_s:.1f} s, {'ERROR ' + ex.error if ex.error else 'ok'}")
        if ex.error:
            status = 1
        if ex.headline is not None:
            print("  headline:", json.dumps(ex.headline, sort_keys=True)[:2000])
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
