"""Small helpers shared by the case-study notebooks (not a notebook itself).

* :func:`small` - True when ``CFSIM_SMALL=1`` (the CI size: seconds instead of minutes);
* :func:`compare` - the story's numbers beside the model's, with the ratio model / story;
* :func:`headline` - print the notebook's headline numbers as one ``CFSIM_HEADLINE {...}`` line
  (the golden regression in ``tests/notebooks`` reads it; see README "Regression of model outputs");
* :func:`lab_root` - the folder of real lab exports (``data/lab``), wherever the notebook runs from;
* :func:`inline_plots` - re-enable inline figures after an import switched matplotlib to Agg.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

HEADLINE_PREFIX = "CFSIM_HEADLINE "


def small() -> bool:
    """The CI size, selected by the environment variable ``CFSIM_SMALL=1``."""
    return os.environ.get("CFSIM_SMALL", "") not in ("", "0")


def repo_root() -> Path:
    here = Path.cwd().resolve()
    for p in (here, *here.parents):
        if (p / "pyproject.toml").is_file() and (p / "src" / "cfsim").is_dir():
            return p
    import cfsim

    return Path(cfsim.__file__).resolve().parents[2]


def lab_root() -> Path:
    """``$CFSIM_LAB_DIR`` or ``<repo>/data/lab``."""
    env = os.environ.get("CFSIM_LAB_DIR")
    return Path(env) if env else repo_root() / "data" / "lab"


def inline_plots() -> None:
    """Back to Jupyter's inline figures after a module switched matplotlib to Agg at import
    (``cfsim.validation.plots`` does); a no-op outside a kernel."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    ip = get_ipython()
    if ip is not None and getattr(ip, "kernel", None) is not None:
        ip.run_line_magic("matplotlib", "inline")


def _ratio(model: Any, story: Any) -> float | None:
    try:
        m, s = float(model), float(story)
    except (TypeError, ValueError):
        return None
    if not (math.isfinite(m) and math.isfinite(s)) or s == 0:
        return None
    return m / s


def compare(rows: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per compared quantity: ``what``, ``story``, ``model``, ``ratio`` (model / story),
    ``agrees`` (the story's claim, checked against the model: a bool, or None when the story
    gives no test) and ``note``.

    Rows may give ``check``: a function ``model -> bool`` expressing the story's claim (e.g. "> 90 %").
    """
    out = []
    for r in rows:
        check = r.get("check")
        agrees = None if check is None else bool(check(r["model"]))
        out.append({"what": r["what"], "story": r.get("story"), "model": r["model"],
                    "ratio": r.get("ratio", _ratio(r["model"], r.get("story"))),
                    "agrees": agrees, "note": r.get("note", "")})
    return pd.DataFrame(out)


def _plain(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if hasattr(x, "item") and not isinstance(x, (str, bytes)):
        try:
            x = x.item()
        except (ValueError, AttributeError):
            pass
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def headline(values: Mapping[str, Any]) -> dict[str, Any]:
    """Print the headline numbers (flat ``{key: number | str | bool | None}``) for the regression."""
    data = _plain(dict(values))
    print(HEADLINE_PREFIX + json.dumps(data, sort_keys=True))
    return data
